/// \file
/// optim::Optimizer: the base of SGD, Adam and AdamW, as in torch.optim.
///
/// An optimizer holds handles to the parameters it trains (the same
/// Variables the model holds, so an update is seen by every handle) and, per
/// parameter, the state its rule needs: a step count and a few tensors of the
/// parameter's shape ("slots": SGD's momentum_buffer, Adam's exp_avg and
/// exp_avg_sq). Slots are allocated on a parameter's first update; after
/// that a step allocates nothing.
///
/// ```
///   optim::Adam opt(model.named_parameters(), {.lr = 0.005});
///   for (...) {
///       opt.zero_grad();
///       loss.backward();
///       opt.step();          // every parameter with a gradient moves
///   }
/// ```
///
/// A parameter whose gradient is undefined (no backward reached it since the
/// last zero_grad()) is skipped entirely: neither it nor its state changes,
/// and its step count stays where it was (PyTorch does the same).
///
/// state_dict() / load_state_dict() save and restore everything needed to
/// resume training bit for bit: the learning rate, the number of step()
/// calls, and every parameter's step count and slots.
#pragma once

#include "autograd/variable.hpp"
#include "nn/module.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tformer::optim {

using autograd::Variable;
using core::Tensor;

/// Parameters with their dotted names, as Module::named_parameters() returns them.
using NamedParameters = std::vector<std::pair<std::string, Variable>>;

/// What an optimizer keeps for one parameter.
struct ParamState {
    /// Updates this parameter has received (PyTorch's state["step"]); 0 before the first.
    int64_t step = 0;
    /// The rule's per-element state, each with the parameter's shape and
    /// dtype, in the order of Optimizer::slot_names(); empty until the first update.
    std::vector<Tensor> slots;
};

/// The base of SGD, Adam and AdamW, as torch.optim.Optimizer: the parameters,
/// their per-parameter state, step() and zero_grad(), state_dict() to resume.
class Optimizer {
public:
    /// Virtual: optimizers are used through a pointer to Optimizer.
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    /// Applies one update to every parameter that has a gradient.
    void step();
    /// Forgets every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
    void zero_grad();

    /// The learning rate the next step() uses.
    double lr() const { return lr_; }
    /// Sets the learning rate (schedules call this); must be finite and >= 0.
    void set_lr(double lr);
    /// How many times step() has run.
    int64_t steps() const { return steps_; }

    /// The class name, "SGD", "Adam" or "AdamW" (for messages).
    const std::string& type_name() const { return type_name_; }
    /// The parameters, in the order given to the constructor.
    const std::vector<Variable>& parameters() const { return params_; }
    /// Their names ("" for each when constructed from plain Variables).
    const std::vector<std::string>& names() const { return names_; }
    /// Names of the per-parameter state tensors, e.g. {"exp_avg", "exp_avg_sq"}.
    const std::vector<std::string>& slot_names() const { return slot_names_; }
    /// The state of parameter i; IndexError when i is out of range.
    const ParamState& state(size_t i) const;

    /// A copy of everything needed to resume: "lr" (0-d float64), "step" and
    /// "param_count" (0-d int64), and for parameter i with name n the keys
    /// ```
    ///   state.<i>.<n>.step        0-d int64
    ///   state.<i>.<n>.<slot>      the parameter's shape and dtype
    /// ```
    /// (`state.<i>.<slot>` when the optimizer has no names). Slots not yet
    /// allocated are saved as zeros, so every key is always present.
    nn::StateDict state_dict() const;
    /// Restores a state_dict(). Strict: a different parameter count, missing
    /// or unexpected keys, or tensors of the wrong shape are one ValueError
    /// listing every problem, and then nothing changes. Slot values are
    /// converted to each parameter's dtype.
    void load_state_dict(const nn::StateDict& state);

    /// Allocates every parameter's slots now (zeros, the parameter's dtype),
    /// as step() would on each parameter's first update; the updates are the
    /// same. Called right after the model is built, it puts the state next
    /// to the parameters in memory, instead of in the gaps the first step's
    /// activations leave behind (tasks::train and the bench do; on the base
    /// preset, 2 MB less peak memory). Convert the model's dtype first.
    void allocate_state();

protected:
    /// For derived classes: `type_name` for messages, the parameters and the first learning rate.
    Optimizer(std::string type_name, std::vector<Variable> params, double lr);
    /// The same for named parameters.
    Optimizer(std::string type_name, const NamedParameters& params, double lr);

    /// Derived constructors name their slots once; step() allocates them per parameter on first use
    /// (or allocate_state(), all at once).
    void set_slot_names(std::vector<std::string> names) { slot_names_ = std::move(names); }

    /// Updates one parameter in place. `param` is the parameter's value and
    /// `grad` its gradient, both contiguous and of the same dtype and shape;
    /// `state.step` already counts this update (1 on the first) and
    /// `state.slots` are allocated.
    virtual void update(const Tensor& param, const Tensor& grad, ParamState& state) = 0;

private:
    void check_parameters() const;
    void allocate_slots(size_t i);
    std::string key_prefix(size_t i) const;

    std::string type_name_;
    std::vector<Variable> params_;
    std::vector<std::string> names_;
    std::vector<std::string> slot_names_;
    std::vector<ParamState> state_;
    double lr_;
    int64_t steps_ = 0;
};

}  // namespace tformer::optim
