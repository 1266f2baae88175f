/// \file
/// optim::Adam and optim::AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019),
/// with torch.optim.Adam's and torch.optim.AdamW's exact rules (see adam.cpp).
///
/// The difference is where weight decay goes. Adam adds λ·p to the gradient
/// (an L2 penalty), so the decay is then rescaled by Adam's per-element step
/// size; AdamW shrinks the parameter directly, p ← p·(1 - lr·λ), before the
/// Adam step, so every weight decays at the same rate ("decoupled").
///
/// ```
///   optim::Adam opt(model.parameters(), {.lr = 0.005});
///   optim::AdamW opt(model.parameters(), {.lr = 1e-3, .betas = {0.9, 0.98}, .weight_decay = 0.1});
/// ```
#pragma once

#include "optim/optimizer.hpp"

#include <array>

namespace tformer::optim {

/// Hyperparameters of Adam (PyTorch's names and defaults).
struct AdamOptions {
    double lr = 1e-3;                            ///< learning rate
    std::array<double, 2> betas = {0.9, 0.999};  ///< β1, β2: decay rates of the moment averages
    double eps = 1e-8;                           ///< added to √v̂ so the step stays finite
    double weight_decay = 0;                     ///< λ: adds λ·p to the gradient (L2)
};

/// Hyperparameters of AdamW: Adam's, with decoupled decay defaulting to 1e-2.
struct AdamWOptions {
    double lr = 1e-3;                            ///< learning rate
    std::array<double, 2> betas = {0.9, 0.999};  ///< β1, β2: decay rates of the moment averages
    double eps = 1e-8;                           ///< added to √v̂ so the step stays finite
    double weight_decay = 1e-2;                  ///< λ: p ← p·(1 - lr·λ) before each step
};

/// Adam: per-element steps lr · m̂ / (√v̂ + eps) from running averages m of the
/// gradient and v of its square, bias-corrected (m̂, v̂); slots exp_avg and exp_avg_sq.
class Adam : public Optimizer {
public:
    /// An optimizer for `params` (their gradients drive it).
    /// Throws ValueError for a negative lr, eps or weight decay, or betas outside [0, 1).
    explicit Adam(std::vector<Variable> params, AdamOptions options = {});
    /// The same, with parameter names for messages and state_dict keys.
    explicit Adam(const NamedParameters& params, AdamOptions options = {});

    /// The hyperparameters (lr() holds the current learning rate).
    const AdamOptions& options() const { return options_; }

protected:
    /// For AdamW: the same state and loop, with the decay decoupled.
    Adam(std::string type_name, std::vector<Variable> params, AdamOptions options, bool decoupled);
    /// The same for named parameters.
    Adam(std::string type_name, const NamedParameters& params, AdamOptions options, bool decoupled);

    void update(const Tensor& param, const Tensor& grad, ParamState& state) override;

private:
    void init();
    AdamOptions options_;
    bool decoupled_ = false;
};

/// AdamW: Adam with decoupled weight decay (see the file comment).
class AdamW : public Adam {
public:
    /// An optimizer for `params`; the same checks as Adam.
    explicit AdamW(std::vector<Variable> params, AdamWOptions options = {});
    /// The same, with parameter names for messages and state_dict keys.
    explicit AdamW(const NamedParameters& params, AdamWOptions options = {});
};

}  // namespace tformer::optim
