/// \file
/// optim::clip_grad_norm: rescales gradients whose joint norm is too large,
/// as torch.nn.utils.clip_grad_norm_ does.
///
/// ```
///   loss.backward();
///   double norm = optim::clip_grad_norm(model.parameters(), 1.0);
///   opt.step();
/// ```
#pragma once

#include "optim/optimizer.hpp"

namespace tformer::optim {

/// Options of clip_grad_norm.
struct ClipOptions {
    /// p of the p-norm: 2 (the usual), 1, any p > 0, or infinity (the largest |g|).
    double norm_type = 2;
    /// Throw ValueError when the total norm is NaN or infinite, instead of
    /// leaving the gradients unchanged and returning it.
    bool error_if_nonfinite = false;
};

/// The p-norm of all gradients together, treated as one long vector,
///   ‖g‖ = (Σ over parameters Σ over elements |g|^p)^(1/p),
/// accumulated in double. When max_norm/(‖g‖ + 1e-6) < 1 every gradient is
/// multiplied by that factor (PyTorch's rule: the clipped norm lands just
/// under max_norm). Gradients are replaced through set_grad, never changed
/// in place, since they may share storage with other gradients. Parameters
/// without a gradient are skipped. Returns the norm before clipping.
///
/// A non-finite norm leaves every gradient as it is, or with
/// error_if_nonfinite throws ValueError naming the first parameter whose
/// gradient holds a NaN or an infinity.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm, ClipOptions options = {});
/// The same, with parameter names in the error message.
double clip_grad_norm(const NamedParameters& params, double max_norm, ClipOptions options = {});

}  // namespace tformer::optim
