// Linear: y = x Wᵀ + b (PyTorch's nn.Linear; seed 000 代码实现, seed 004 编码器).
#include "core/check.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"

#include "autograd/linalg.hpp"

namespace tformer::nn {

Linear::Linear(Options opts, core::Generator& gen) : UnaryModule("Linear"), options(opts) {
    if (options.in_features < 0 || options.out_features < 0)
        fail<ValueError>("Linear: in_features and out_features must be non-negative, got {} and {}",
                         options.in_features, options.out_features);
    weight = register_parameter("weight", core::Tensor::empty({options.out_features, options.in_features}));
    init::linear_default_(weight, options.in_features, gen);
    if (options.bias) {
        bias = register_parameter("bias", core::Tensor::empty({options.out_features}));
        init::linear_default_(bias, options.in_features, gen);  // PyTorch bounds the bias by 1/√in too
    }
}

// y = x Wᵀ + b     x (..., in) -> y (..., out)
// The leading dims are untouched, so the same layer serves (B, D) and
// (B, T, D) inputs ("nn.Linear ... 可以是任意维度", seed 000).
Variable Linear::forward(const Variable& x) {
    ShapeCheck("Linear").known("in_features", options.in_features).arg("input", x, "... in_features");
    return autograd::linear(x, weight, bias);
}

}  // namespace tformer::nn
