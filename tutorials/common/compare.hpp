// Small measures the tutorials' checks are written with: how far apart two
// tensors are, and whether they match a PyTorch reference.
#pragma once

#include "common/reference.hpp"
#include "common/tutorial.hpp"
#include "core/tensor.hpp"
#include "nn/module.hpp"

namespace tformer::tutorial {

/// max |x| over all elements.
double max_abs(const core::Tensor& x);
/// max |a - b| over all elements (a and b broadcast).
double max_abs_diff(const core::Tensor& a, const core::Tensor& b);
/// |actual - expected| <= tol · (1 + |expected|) everywhere, in float64: the
/// test of Tutorial::check_allclose, without printing (for counting how many
/// of a model's gradients match and reporting only those that do not).
bool allclose_to(const core::Tensor& actual, const core::Tensor& expected, double tol);

/// How many of the module's parameter gradients match PyTorch's, ref["grad.param.<name>"], by
/// allclose_to within tol. Each one that does not match gets a failed check "d/d <name>" that prints
/// its largest difference; the caller checks the count in one line.
int matching_gradients(Tutorial& t, const nn::Module& module, const Reference& ref, double tol);

}  // namespace tformer::tutorial
