// Dropout: inverted dropout, active only in training mode (PyTorch's nn.Dropout).
#include "nn/layers.hpp"

#include "autograd/elementwise.hpp"
#include "core/elementwise.hpp"

namespace tformer::nn {

Dropout::Dropout(Options opts, core::Generator& gen) : UnaryModule("Dropout"), options(opts), gen_(&gen) {
    if (!(options.p >= 0.0 && options.p < 1.0)) fail<ValueError>("Dropout: probability {} not in [0, 1)", options.p);
}

// training: y = x · m / (1 - p) with m ~ Bernoulli(1 - p);  eval: y = x
Variable Dropout::forward(const Variable& x) { return autograd::dropout(x, options.p, is_training(), *gen_); }

core::Tensor Dropout::keep_mask(const core::Shape& shape, core::DType dtype) {
    if (!is_training() || options.p == 0.0) return {};
    // the draws of autograd::dropout, in the same order
    return core::dropout_mask(shape, options.p, *gen_, dtype);
}

}  // namespace tformer::nn
