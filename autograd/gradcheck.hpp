/// \file
/// gradcheck: is an op's backward right?
///
/// For a function f of some float64 tensors, it builds the full Jacobian
/// J[i][j] = ∂ out_i / ∂ in_j twice:
/// ```
///   numerically, by central differences:  (f(x + eps e_j) - f(x - eps e_j)) / (2 eps)
///   analytically, by backward():          one backward per output element i,
///                                         seeded with the one-hot vector e_i
/// ```
/// and requires |analytical - numerical| <= atol + rtol * |numerical| for
/// every entry, as PyTorch's torch.autograd.gradcheck does. float64 keeps the
/// finite-difference error (~eps² for the truncation, ~1e-16/eps for rounding)
/// far below the tolerance.
#pragma once

#include "autograd/variable.hpp"

#include <functional>
#include <string>
#include <vector>

namespace tformer::autograd {

/// The finite-difference step and the tolerances of gradcheck.
struct GradcheckOptions {
    double eps = 1e-6;   ///< finite-difference step
    double atol = 1e-5;  ///< absolute tolerance
    double rtol = 1e-3;  ///< relative tolerance, times |numerical|
};

/// What gradcheck found. Converts to bool (true = passed); `report` explains
/// a failure in words a student can act on.
struct GradcheckResult {
    bool passed = true;           ///< true when every Jacobian entry is within the tolerance
    std::string report;           ///< empty when passed
    int input = -1;               ///< first failing input
    int64_t input_element = -1;   ///< its flat (row-major) element index
    int64_t output_element = -1;  ///< the output element whose derivative disagrees
    /// The analytical (backward) entry of the first mismatch.
    double analytical = 0, numerical = 0;  ///< The numerical (central-difference) entry of the first mismatch.
    int64_t mismatches = 0;                ///< how many Jacobian entries disagree in all
    /// True when the check passed: `REQUIRE(gradcheck(f, inputs))`.
    explicit operator bool() const { return passed; }
};

/// Checks f's gradients with respect to every input that requires a gradient.
/// The inputs must be float64 Variables (non-contiguous views are fine, as
/// long as no two elements share memory, as after expand()). f may return a
/// tensor of any shape. Inputs that should not be differentiated (an index
/// tensor, valid lengths) are captured by f instead, or passed with
/// requires_grad false.
GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Variable>& inputs, const GradcheckOptions& options = {});

}  // namespace tformer::autograd
