/// \file
/// optim::SGD: stochastic gradient descent with momentum, dampening,
/// Nesterov momentum and L2 weight decay, with torch.optim.SGD's exact rule
/// (see sgd.cpp for the formulas).
///
/// ```
///   optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
/// ```
#pragma once

#include "optim/optimizer.hpp"

namespace tformer::optim {

/// Hyperparameters of SGD (PyTorch's names and defaults, except that lr has one).
struct SGDOptions {
    double lr = 1e-2;         ///< learning rate
    double momentum = 0;      ///< μ; 0 turns momentum (and its buffer) off
    double dampening = 0;     ///< τ: the new gradient enters the buffer with weight 1 - τ
    double weight_decay = 0;  ///< λ: adds λ·p to the gradient (L2 penalty λ/2·‖p‖²)
    bool nesterov = false;    ///< Nesterov momentum; needs momentum > 0 and dampening 0
};

/// Stochastic gradient descent, p ← p - lr·g, with optional momentum, dampening,
/// Nesterov momentum and weight decay (torch.optim.SGD's rule; slot momentum_buffer).
class SGD : public Optimizer {
public:
    /// Throws ValueError for a negative lr, momentum or weight decay, or
    /// nesterov without momentum or with dampening.
    explicit SGD(std::vector<Variable> params, SGDOptions options = {});
    /// The same, with parameter names for messages and state_dict keys.
    explicit SGD(const NamedParameters& params, SGDOptions options = {});

    /// The hyperparameters (lr() holds the current learning rate).
    const SGDOptions& options() const { return options_; }

protected:
    void update(const Tensor& param, const Tensor& grad, ParamState& state) override;

private:
    void init();
    SGDOptions options_;
};

}  // namespace tformer::optim
