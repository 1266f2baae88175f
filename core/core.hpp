// Everything in tformer::core with one include.
#pragma once

#include "core/check.hpp"
#include "core/elementwise.hpp"
#include "core/error.hpp"
#include "core/file.hpp"
#include "core/index.hpp"
#include "core/matmul.hpp"
#include "core/parallel.hpp"
#include "core/print.hpp"
#include "core/random.hpp"
#include "core/reduce.hpp"
#include "core/rowwise.hpp"
#include "core/tensor.hpp"
