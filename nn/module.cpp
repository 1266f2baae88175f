#include "nn/module.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

namespace tformer::nn {

void Module::check_new_name(const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
        fail<ValueError>("{}: invalid name '{}' (must be non-empty and contain no '.')", type_name_, name);
    auto taken = [&](const auto& list) {
        for (const auto& [n, _] : list)
            if (n == name) return true;
        return false;
    };
    if (taken(parameters_) || taken(buffers_) || taken(children_))
        fail<ValueError>("{}: the name '{}' is already registered", type_name_, name);
}

Variable Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
    check_new_name(name);
    Variable v(std::move(value), requires_grad);
    parameters_.emplace_back(name, v);
    return v;
}

void Module::register_buffer(const std::string& name, Tensor value) {
    check_new_name(name);
    buffers_.emplace_back(name, std::move(value));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
    check_new_name(name);
    if (!module) fail<ValueError>("{}: child module '{}' is null", type_name_, name);
    children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
    for (const auto& [name, v] : parameters_) out.emplace_back(prefix + name, v);
    for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
    for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

Variable Module::share_parameter(const std::string& name, const Variable& shared) {
    for (auto& [n, v] : parameters_) {
        if (n != name) continue;
        if (!shared.defined() || !(shared.shape() == v.shape()))
            fail<ValueError>("{}: cannot share parameter '{}' of shape {} with a tensor of shape {}", type_name_, name,
                             core::shape_str(v.shape()),
                             shared.defined() ? core::shape_str(shared.shape()) : "(undefined)");
        v = shared;
        return shared;
    }
    fail<ValueError>("{}: no parameter named '{}' to share", type_name_, name);
}

std::vector<std::pair<std::string, Variable>> Module::all_named_parameters() const {
    std::vector<std::pair<std::string, Variable>> out;
    collect_parameters("", out);
    return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Variable>> out;
    std::set<const void*> seen;
    for (auto& [name, v] : all_named_parameters())
        if (seen.insert(v.impl().get()).second) out.emplace_back(std::move(name), std::move(v));
    return out;
}

std::vector<Variable> Module::parameters() const {
    std::vector<Variable> out;
    for (auto& [_, v] : named_parameters()) out.push_back(v);
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
    std::vector<std::pair<std::string, Tensor>> out;
    collect_buffers("", out);
    return out;
}

int64_t Module::num_parameters() const {
    int64_t n = 0;
    for (const auto& [_, v] : named_parameters()) n += v.numel();
    return n;
}

const Tensor& Module::buffer(const std::string& name) const {
    for (const auto& [n, t] : buffers_)
        if (n == name) return t;
    fail<ValueError>("{}: no buffer named '{}'", type_name_, name);
}

void Module::set_buffer(const std::string& name, Tensor value) {
    for (auto& [n, t] : buffers_)
        if (n == name) {
            t = std::move(value);
            return;
        }
    fail<ValueError>("{}: no buffer named '{}'", type_name_, name);
}

void Module::train(bool on) {
    training_ = on;
    for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
    for (const auto& [_, v] : named_parameters()) v.zero_grad();
}

StateDict Module::state_dict() const {
    StateDict out;
    for (const auto& [name, v] : all_named_parameters()) out[name] = v.value().clone();
    for (const auto& [name, t] : named_buffers()) out[name] = t.clone();
    return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
    // Collect every target first and check them all, so a bad dict changes nothing.
    std::vector<std::pair<std::string, Tensor>> targets;
    for (const auto& [name, v] : all_named_parameters()) targets.emplace_back(name, v.value());
    for (const auto& [name, t] : named_buffers()) targets.emplace_back(name, t);

    std::vector<std::string> missing, wrong_shape, unexpected, differ;
    std::set<std::string> known;
    for (const auto& [name, target] : targets) {
        known.insert(name);
        auto it = state.find(name);
        if (it == state.end()) {
            missing.push_back(name);
        } else if (!(it->second.shape() == target.shape())) {
            wrong_shape.push_back(fmt::format("{} (expected {}, got {})", name, core::shape_str(target.shape()),
                                              core::shape_str(it->second.shape())));
        }
    }
    for (const auto& [name, _] : state)
        if (!known.count(name)) unexpected.push_back(name);
    // the names of a shared parameter must agree, or which value wins would depend on their order
    // (two NaNs in the same place agree: the copies are the same, whatever they hold)
    std::map<const void*, std::string> first_name;
    for (const auto& [name, target] : targets) {
        auto [it, fresh] = first_name.try_emplace(target.storage().get(), name);
        const auto a = state.find(it->second), b = state.find(name);
        if (fresh || a == state.end() || b == state.end() || !(a->second.shape() == b->second.shape())) continue;
        const std::vector<double> x = a->second.to_vector(), y = b->second.to_vector();
        int64_t different = 0;
        for (size_t i = 0; i < x.size(); ++i) different += !(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])));
        if (different > 0)
            differ.push_back(fmt::format("{} differs from {}, the same tied parameter, in {} of {} values", name,
                                         it->second, different, x.size()));
    }

    if (!wrong_shape.empty() || !differ.empty() || (strict && (!missing.empty() || !unexpected.empty()))) {
        std::string message = fmt::format("load_state_dict: the state dict does not fit this {}", type_name_);
        if (!missing.empty()) message += fmt::format("\n  missing: {}", fmt::join(missing, ", "));
        if (!unexpected.empty()) message += fmt::format("\n  unexpected: {}", fmt::join(unexpected, ", "));
        if (!wrong_shape.empty()) message += fmt::format("\n  wrong shape: {}", fmt::join(wrong_shape, ", "));
        if (!differ.empty()) message += fmt::format("\n  values differ: {}", fmt::join(differ, "; "));
        throw ValueError(message);
    }
    for (auto& [name, target] : targets) {
        auto it = state.find(name);
        if (it != state.end()) core::copy_(target, it->second);
    }
}

void Module::to(core::DType dtype) {
    for (auto& [_, v] : parameters_) {
        if (v.dtype() == dtype) continue;
        // Swap the value inside the shared VariableImpl, so every handle to
        // this parameter (the layer's member, an optimizer) sees the new dtype.
        v.impl()->value = v.value().to(dtype);
        v.impl()->dtype = dtype;
        v.impl()->grad = Tensor();
    }
    for (auto& [_, t] : buffers_)
        if (core::is_floating(t.dtype())) t = t.to(dtype);
    for (auto& [_, child] : children_) child->to(dtype);
}

void Module::summary_lines(const std::string& name, int depth, std::string& out) const {
    out += fmt::format("{:{}}{}{}{} ({} parameters)\n", "", depth * 2, name, name.empty() ? "" : ": ", type_name_,
                       num_parameters());
    for (const auto& [child_name, child] : children_) child->summary_lines(child_name, depth + 1, out);
}

std::string Module::summary() const {
    std::string out;
    summary_lines("", 0, out);
    return out;
}

}  // namespace tformer::nn
