// Small measures the tutorials' checks are written with: how far apart two
// tensors are, and whether one matches a PyTorch reference.
#pragma once

#include "core/tensor.hpp"

namespace tformer::tutorial {

/// max |x| over all elements.
double max_abs(const core::Tensor& x);
/// max |a - b| over all elements (a and b broadcast).
double max_abs_diff(const core::Tensor& a, const core::Tensor& b);
/// |actual - expected| <= tol · (1 + |expected|) everywhere, in float64: the
/// test of Tutorial::check_allclose, without printing (for counting how many
/// of a model's gradients match and reporting only those that do not).
bool allclose_to(const core::Tensor& actual, const core::Tensor& expected, double tol);

}  // namespace tformer::tutorial
