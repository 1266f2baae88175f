// Normalisation layers: LayerNorm (seed 000 层归一化, seed 002 §3.1, seed 004
// LayerNorm with the unbiased std) and BatchNorm1d (seed 000's comparison).
//
// Both compute y = (x - μ) / σ · weight + bias; they differ in which
// elements share μ and σ:
//   LayerNorm    each row x[..., :] of one example (the last dim, D)
//   BatchNorm1d  each channel x[:, c] (and x[:, c, :]) across the batch
// so on seed 000's X = [[1, 2], [2, 3]] LayerNorm gives [[-1, 1], [-1, 1]]
// (rows) and BatchNorm gives [[-1, -1], [1, 1]] (columns).
#include "core/check.hpp"
#include "nn/layers.hpp"

#include "autograd/elementwise.hpp"
#include "autograd/functional.hpp"
#include "autograd/reduce.hpp"
#include "autograd/shape.hpp"
#include "core/elementwise.hpp"

namespace tformer::nn {

// ============================ LayerNorm ============================

LayerNorm::LayerNorm(Options opts) : UnaryModule("LayerNorm"), options(opts) {
    const int64_t D = options.normalized_shape;
    if (D < 1) fail<ValueError>("LayerNorm: normalized_shape must be positive, got {}", D);
    if (options.unbiased_std && D < 2)
        fail<ValueError>("LayerNorm: the unbiased std divides by D - 1, so it needs normalized_shape >= 2, got {}", D);
    if (!(options.eps >= 0)) fail<ValueError>("LayerNorm: eps must be non-negative, got {}", options.eps);
    if (options.elementwise_affine) {
        weight = register_parameter("weight", core::ones({D}));
        bias = register_parameter("bias", core::zeros({D}));
    }
}

Variable LayerNorm::forward(const Variable& x) {
    ShapeCheck("LayerNorm").known("normalized_shape", options.normalized_shape).arg("input", x, "... normalized_shape");
    using namespace autograd;
    // standard: y = (x - mean) / √(var + eps) · weight + bias, biased var: one fused node
    if (!options.unbiased_std) return layer_norm(x, weight, bias, options.eps);

    // seed 004: a_2 * (x - mean) / (std + eps) + b_2, std unbiased (÷(D-1)),
    // written with the same operators in the same order as the note
    const Variable mu = mean(x, {-1}, /*keepdim=*/true);                              // (..., 1)
    const Variable stddev = sqrt(var(x, {-1}, /*unbiased=*/true, /*keepdim=*/true));  // (..., 1)
    if (!options.elementwise_affine) return (x - mu) / (stddev + options.eps);
    return weight * (x - mu) / (stddev + options.eps) + bias;  // (..., D)
}

// ============================ BatchNorm1d ============================

BatchNorm1d::BatchNorm1d(Options opts) : UnaryModule("BatchNorm1d"), options(opts) {
    const int64_t C = options.num_features;
    if (C < 1) fail<ValueError>("BatchNorm1d: num_features must be positive, got {}", C);
    if (!(options.eps >= 0)) fail<ValueError>("BatchNorm1d: eps must be non-negative, got {}", options.eps);
    if (!(options.momentum >= 0 && options.momentum <= 1))
        fail<ValueError>("BatchNorm1d: momentum {} not in [0, 1]", options.momentum);
    if (options.affine) {
        weight = register_parameter("weight", core::ones({C}));
        bias = register_parameter("bias", core::zeros({C}));
    }
    register_buffer("running_mean", core::zeros({C}));
    register_buffer("running_var", core::ones({C}));
    register_buffer("num_batches_tracked", core::scalar(0, core::DType::int64));
}

Variable BatchNorm1d::forward(const Variable& x) {
    const int64_t C = options.num_features;
    check<ShapeError>((x.dim() == 2 || x.dim() == 3) && x.size(1) == C,
                      "BatchNorm1d: expected input of shape (N, {0}) or (N, {0}, L), got {1}", C, x.shape());
    const bool has_length = x.dim() == 3;
    // channel c's statistics run over x[:, c] (N values) or x[:, c, :] (N·L values)
    const core::Dims over = has_length ? core::Dims{0, 2} : core::Dims{0};
    const int64_t n = x.numel() / C;
    // a per-channel vector (C) broadcasts against (N, C) as it is, against (N, C, L) as (C, 1)
    const core::Shape channel_shape = has_length ? core::Shape{C, 1} : core::Shape{C};

    Variable xhat;  // (N, C) or (N, C, L)
    if (is_training()) {
        if (n < 2)
            fail<ValueError>("BatchNorm1d: expected more than 1 value per channel when training, got input of shape {}",
                             core::shape_str(x.shape()));
        // x̂ = (x - mean) / √(var + eps), batch statistics, biased var (÷n)
        const Variable mu = autograd::mean(x, over, /*keepdim=*/true);                      // (1, C) or (1, C, 1)
        const Variable var = autograd::var(x, over, /*unbiased=*/false, /*keepdim=*/true);  // (1, C) or (1, C, 1)
        xhat = (x - mu) / autograd::sqrt(var + options.eps);

        // running ← (1 - momentum) · running + momentum · batch, with the
        // unbiased variance var · n/(n-1) (PyTorch's convention); plain
        // tensors, no graph, written into the buffers in place
        const double m = options.momentum;
        const Tensor& running_mean = buffer("running_mean");
        const Tensor& running_var = buffer("running_var");
        const Tensor batch_mean = mu.value().reshape({C});
        const Tensor batch_var = core::mul(var.value().reshape({C}), static_cast<double>(n) / (n - 1));
        core::copy_(running_mean, core::add(core::mul(running_mean.to(x.dtype()), 1 - m), core::mul(batch_mean, m)));
        core::copy_(running_var, core::add(core::mul(running_var.to(x.dtype()), 1 - m), core::mul(batch_var, m)));
        const Tensor& tracked = buffer("num_batches_tracked");
        core::fill_(tracked, tracked.item() + 1);
    } else {
        // x̂ = (x - running_mean) / √(running_var + eps): constants, no gradient to them
        const Tensor mean = buffer("running_mean").to(x.dtype()).reshape(channel_shape);
        const Tensor inv_std = core::rdiv(1.0, core::sqrt(core::add(buffer("running_var").to(x.dtype()), options.eps)));
        xhat = (x - Variable(mean)) * Variable(inv_std.reshape(channel_shape));
    }
    if (!options.affine) return xhat;
    if (!has_length) return xhat * weight + bias;
    return xhat * autograd::reshape(weight, channel_shape) + autograd::reshape(bias, channel_shape);
}

}  // namespace tformer::nn
