/// \file
/// Everything in tformer::autograd with one include.
#pragma once

#include "autograd/elementwise.hpp"
#include "autograd/functional.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/linalg.hpp"
#include "autograd/reduce.hpp"
#include "autograd/shape.hpp"
#include "autograd/variable.hpp"

/// \namespace tformer::autograd
/// Reverse-mode automatic differentiation: Variable and the graph it records,
/// backward(), NoGradGuard, gradcheck, and the differentiable ops, each with
/// its forward and its backward side by side in the .cpp of its family.
