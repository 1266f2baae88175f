// Everything in tformer::autograd with one include.
#pragma once

#include "autograd/elementwise.hpp"
#include "autograd/functional.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/linalg.hpp"
#include "autograd/reduce.hpp"
#include "autograd/shape.hpp"
#include "autograd/variable.hpp"
