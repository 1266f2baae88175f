#include "optim/optimizer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace tformer::optim {

namespace {

// "parameter 3" or "parameter 3 (encoder.W_q.weight)", for messages.
std::string describe(size_t i, const std::string& name) {
    return name.empty() ? fmt::format("parameter {}", i) : fmt::format("parameter {} ({})", i, name);
}

}  // namespace

// ---- construction ---------------------------------------------------------------------------

Optimizer::Optimizer(std::string type_name, std::vector<Variable> params, double lr)
    : type_name_(std::move(type_name)),
      params_(std::move(params)),
      names_(params_.size()),
      state_(params_.size()),
      lr_(0) {
    set_lr(lr);
    check_parameters();
}

Optimizer::Optimizer(std::string type_name, const NamedParameters& params, double lr)
    : type_name_(std::move(type_name)), state_(params.size()), lr_(0) {
    params_.reserve(params.size());
    names_.reserve(params.size());
    for (const auto& [name, v] : params) {
        names_.push_back(name);
        params_.push_back(v);
    }
    set_lr(lr);
    check_parameters();
}

// The update loops write straight into each parameter's storage, so every
// parameter must be a contiguous floating tensor, and each may appear only
// once (a duplicate would be updated twice per step).
void Optimizer::check_parameters() const {
    if (params_.empty()) fail<ValueError>("{}: got an empty parameter list", type_name_);
    std::set<const autograd::VariableImpl*> seen;
    for (size_t i = 0; i < params_.size(); ++i) {
        const Variable& p = params_[i];
        if (!p.defined()) fail<ValueError>("{}: {} is an undefined Variable", type_name_, describe(i, names_[i]));
        if (!core::is_floating(p.dtype()))
            fail<ValueError>("{}: {} has dtype {}; only float32 and float64 parameters can be trained", type_name_,
                             describe(i, names_[i]), core::dtype_name(p.dtype()));
        if (!p.value().is_contiguous())
            fail<ValueError>(
                "{}: {} of shape {} is not contiguous; optimizers update parameters in place and need "
                "contiguous storage",
                type_name_, describe(i, names_[i]), core::shape_str(p.shape()));
        if (!seen.insert(p.impl().get()).second)
            fail<ValueError>("{}: {} appears more than once in the parameter list", type_name_, describe(i, names_[i]));
    }
}

// ---- stepping -----------------------------------------------------------------------------------

void Optimizer::step() {
    for (size_t i = 0; i < params_.size(); ++i) {
        const Tensor& grad = params_[i].grad();
        if (!grad.defined()) continue;  // no gradient reached it: leave the parameter and its state alone
        const Tensor& param = params_[i].value();
        ParamState& state = state_[i];

        // Module::to() or a user may have swapped the value since construction; check what the loops rely on.
        if (!param.is_contiguous())
            fail<ValueError>("{}.step: {} of shape {} is no longer contiguous", type_name_, describe(i, names_[i]),
                             core::shape_str(param.shape()));
        if (grad.dtype() != param.dtype())
            fail<ValueError>("{}.step: {} has dtype {} but its gradient has dtype {}", type_name_,
                             describe(i, names_[i]), core::dtype_name(param.dtype()), core::dtype_name(grad.dtype()));
        if (!state.slots.empty() && state.slots.front().dtype() != param.dtype())
            fail<ValueError>(
                "{}.step: {} is now {} but its optimizer state is {}; convert the model before "
                "creating the optimizer",
                type_name_, describe(i, names_[i]), core::dtype_name(param.dtype()),
                core::dtype_name(state.slots.front().dtype()));
        if (state.slots.empty()) allocate_slots(i);  // first update of this parameter: allocate its state once

        ++state.step;
        // A gradient view (e.g. the expanded ones of sum()'s backward) is
        // copied to contiguous memory; gradients from kernels already are.
        if (grad.is_contiguous())
            update(param, grad, state);
        else
            update(param, grad.contiguous(), state);
    }
    ++steps_;
}

void Optimizer::allocate_slots(size_t i) {
    const Tensor& param = params_[i].value();
    for (size_t s = 0; s < slot_names_.size(); ++s)
        state_[i].slots.push_back(core::zeros(param.shape(), param.dtype()));
}

void Optimizer::allocate_state() {
    for (size_t i = 0; i < params_.size(); ++i)
        if (state_[i].slots.empty()) allocate_slots(i);
}

const ParamState& Optimizer::state(size_t i) const {
    if (i >= state_.size())
        fail<IndexError>("{}.state: parameter index {} out of range for {} parameters", type_name_, i, state_.size());
    return state_[i];
}

void Optimizer::zero_grad() {
    for (const Variable& p : params_) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
    if (!std::isfinite(lr) || lr < 0)
        fail<ValueError>("{}: learning rate must be finite and >= 0, got {}", type_name_, lr);
    lr_ = lr;
}

// ---- state dict ---------------------------------------------------------------------------------

std::string Optimizer::key_prefix(size_t i) const {
    return names_[i].empty() ? fmt::format("state.{}", i) : fmt::format("state.{}.{}", i, names_[i]);
}

nn::StateDict Optimizer::state_dict() const {
    nn::StateDict out;
    out["lr"] = core::scalar(lr_, core::DType::float64);
    out["step"] = core::scalar(static_cast<double>(steps_), core::DType::int64);
    out["param_count"] = core::scalar(static_cast<double>(params_.size()), core::DType::int64);
    for (size_t i = 0; i < params_.size(); ++i) {
        const std::string prefix = key_prefix(i);
        const ParamState& state = state_[i];
        out[prefix + ".step"] = core::scalar(static_cast<double>(state.step), core::DType::int64);
        for (size_t s = 0; s < slot_names_.size(); ++s)
            out[prefix + "." + slot_names_[s]] =
                state.slots.empty() ? core::zeros(params_[i].shape(), params_[i].dtype()) : state.slots[s].clone();
    }
    return out;
}

void Optimizer::load_state_dict(const nn::StateDict& state) {
    // Check everything first, so a bad dict changes nothing.
    std::vector<std::string> problems, missing, wrong_shape, unexpected;
    std::set<std::string> known;

    // A scalar entry: present, one element, and (for counts) a non-negative integer.
    auto check_scalar = [&](const std::string& key, bool count) {
        known.insert(key);
        auto it = state.find(key);
        if (it == state.end()) {
            missing.push_back(key);
        } else if (it->second.numel() != 1) {
            wrong_shape.push_back(
                fmt::format("{} (expected a scalar, got {})", key, core::shape_str(it->second.shape())));
        } else if (count) {
            const double v = it->second.item();
            if (!(v >= 0) || v != std::floor(v))
                problems.push_back(fmt::format("{} must be a non-negative integer, got {}", key, v));
        } else if (!std::isfinite(it->second.item()) || it->second.item() < 0) {
            problems.push_back(fmt::format("{} must be finite and >= 0, got {}", key, it->second.item()));
        }
    };
    check_scalar("lr", false);
    check_scalar("step", true);
    check_scalar("param_count", true);
    if (auto it = state.find("param_count");
        it != state.end() && it->second.numel() == 1 && it->second.item() != static_cast<double>(params_.size()))
        problems.push_back(fmt::format("the state dict is for {} parameters, this {} has {}", it->second.item(),
                                       type_name_, params_.size()));

    for (size_t i = 0; i < params_.size(); ++i) {
        const std::string prefix = key_prefix(i);
        check_scalar(prefix + ".step", true);
        for (const std::string& slot : slot_names_) {
            const std::string key = prefix + "." + slot;
            known.insert(key);
            auto it = state.find(key);
            if (it == state.end())
                missing.push_back(key);
            else if (!(it->second.shape() == params_[i].shape()))
                wrong_shape.push_back(fmt::format("{} (expected {}, got {})", key, core::shape_str(params_[i].shape()),
                                                  core::shape_str(it->second.shape())));
            else if (!core::is_floating(it->second.dtype()))
                problems.push_back(fmt::format("{} has dtype {}, expected a floating dtype", key,
                                               core::dtype_name(it->second.dtype())));
        }
    }
    for (const auto& [key, _] : state)
        if (!known.count(key)) unexpected.push_back(key);

    if (!problems.empty() || !missing.empty() || !wrong_shape.empty() || !unexpected.empty()) {
        std::string message = fmt::format("{}.load_state_dict: the state dict does not fit this optimizer", type_name_);
        for (const std::string& p : problems) message += "\n  " + p;
        if (!missing.empty()) message += fmt::format("\n  missing: {}", fmt::join(missing, ", "));
        if (!unexpected.empty()) message += fmt::format("\n  unexpected: {}", fmt::join(unexpected, ", "));
        if (!wrong_shape.empty()) message += fmt::format("\n  wrong shape: {}", fmt::join(wrong_shape, ", "));
        throw ValueError(message);
    }

    // Everything fits: copy into our own tensors (never alias the dict's).
    lr_ = state.at("lr").item();
    steps_ = static_cast<int64_t>(state.at("step").item());
    for (size_t i = 0; i < params_.size(); ++i) {
        const std::string prefix = key_prefix(i);
        ParamState& ps = state_[i];
        ps.step = static_cast<int64_t>(state.at(prefix + ".step").item());
        if (ps.slots.size() != slot_names_.size() ||
            (!ps.slots.empty() && ps.slots.front().dtype() != params_[i].dtype())) {
            ps.slots.clear();
            for (size_t s = 0; s < slot_names_.size(); ++s)
                ps.slots.push_back(core::zeros(params_[i].shape(), params_[i].dtype()));
        }
        for (size_t s = 0; s < slot_names_.size(); ++s)
            core::copy_(ps.slots[s], state.at(prefix + "." + slot_names_[s]));
    }
}

}  // namespace tformer::optim
