/// \file
/// nn::Module: the base of every layer, as in PyTorch.
///
/// A module owns named parameters (Variables that require gradients),
/// buffers (tensors saved with the model but not trained, such as
/// BatchNorm's running mean), and child modules. Names join with dots, so a
/// parameter deep inside a Transformer is called, as in PyTorch,
/// ```
///   encoder.blks.block0.attention.W_q.weight
/// ```
/// and a tformer state dict maps one to one onto the equivalent PyTorch
/// module's state dict.
///
/// Layers have no common forward(): each declares the forward signature of
/// the document it implements (seed 000 first).
#pragma once

#include "autograd/variable.hpp"

#include <map>
#include <memory>
#include <string>
/// Layers as in PyTorch's torch.nn, with the documents' names: Module, Linear,
/// attention, the Transformer's blocks, losses, initialisers and checkpoints.
#include <utility>
#include <vector>

namespace tformer::nn {

using autograd::Variable;
using core::Tensor;

/// A state dict: dotted name -> tensor (parameters and buffers).
using StateDict = std::map<std::string, Tensor>;

/// The base of every layer, as PyTorch's torch.nn.Module: named parameters,
/// buffers and child modules, train()/eval(), state_dict()/load_state_dict().
/// Each layer adds its own forward (operator()) with the document's signature.
class Module {
public:
    /// A module named `type_name` in summaries, e.g. "Linear".
    explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
    /// Virtual: a module is destroyed through a pointer to Module.
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    /// The class name, e.g. "MultiHeadAttention" (for printing).
    const std::string& type_name() const { return type_name_; }

    /// Adds a trainable parameter holding `value`; returns its Variable.
    Variable register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
    /// Adds a buffer: saved in the state dict, never trained.
    void register_buffer(const std::string& name, Tensor value);
    /// Adds a child module under `name`; returns it.
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    /// Makes the parameter `name` of this module be `shared` (the same
    /// Variable, so one tensor and one gradient), as PyTorch's
    /// `decoder.dense.weight = encoder.embedding.weight` ties weights. The
    /// shapes must agree. Returns `shared`, for the layer's own member:
    ///   `dense->weight = dense->share_parameter("weight", embedding->weight);`
    Variable share_parameter(const std::string& name, const Variable& shared);

    /// Every parameter of this module and its descendants, with dotted names,
    /// in registration order. A shared parameter is listed once, under its
    /// first name (as PyTorch's named_parameters), so optimizers update it once.
    std::vector<std::pair<std::string, Variable>> named_parameters() const;
    /// The parameters of named_parameters(), without their names (what an optimizer takes).
    std::vector<Variable> parameters() const;
    /// Every buffer, with dotted names.
    std::vector<std::pair<std::string, Tensor>> named_buffers() const;
    /// Direct children in registration order.
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
    /// Number of trainable scalars.
    int64_t num_parameters() const;

    /// A buffer by its local name (e.g. "running_mean").
    const Tensor& buffer(const std::string& name) const;
    /// Replaces a buffer's tensor (BatchNorm's running statistics).
    void set_buffer(const std::string& name, Tensor value);

    /// Training mode on (dropout active, BatchNorm uses batch statistics) for this module and its descendants.
    void train(bool on = true);
    /// Evaluation mode: train(false).
    void eval() { train(false); }
    /// True in training mode (the default), false after eval().
    bool is_training() const { return training_; }

    /// Forgets every parameter's gradient.
    void zero_grad();

    /// Copies of every parameter and buffer by dotted name; a shared
    /// parameter appears under each of its names (as in PyTorch), so the dict
    /// loads into a model that does not share it.
    StateDict state_dict() const;
    /// Copies values into the existing parameters and buffers (in place, so
    /// optimizers keep working). Strict: a missing, unexpected or wrongly
    /// shaped entry is a ValueError that lists every such entry; nothing is
    /// changed then. Values are converted to each parameter's dtype. The
    /// names of a shared parameter must all carry the same values.
    void load_state_dict(const StateDict& state, bool strict = true);

    /// Converts every parameter and buffer to `dtype` (float64 for gradient checks).
    void to(core::DType dtype);

    /// A one-line-per-module summary (tree of names, types and parameter counts).
    std::string summary() const;

protected:
    /// Registers `module` as the child `name` (register_module without the return value).
    void add_child(const std::string& name, std::shared_ptr<Module> module);

private:
    void check_new_name(const std::string& name) const;
    void collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const;
    /// Every (name, parameter), shared ones under each name.
    std::vector<std::pair<std::string, Variable>> all_named_parameters() const;
    void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
    void summary_lines(const std::string& name, int depth, std::string& out) const;

    std::string type_name_;
    bool training_ = true;
    std::vector<std::pair<std::string, Variable>> parameters_;
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Evaluation mode for a scope: the module's mode before it is restored on
/// leaving, also when an error leaves it (decoding, a held-out loss).
class EvalScope {
public:
    /// Puts `m` in evaluation mode, remembering its mode.
    explicit EvalScope(Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
    /// Restores the remembered mode.
    ~EvalScope() { m_.train(was_training_); }
    EvalScope(const EvalScope&) = delete;
    EvalScope& operator=(const EvalScope&) = delete;

private:
    Module& m_;
    bool was_training_;
};

}  // namespace tformer::nn
