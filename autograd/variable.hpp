/// \file
/// autograd::Variable and the graph it records.
///
/// Reverse-mode automatic differentiation in the style of micrograd, on
/// tensors. Every differentiable op computes its value with a core kernel
/// and, when any input requires a gradient, records a Node: the op's name,
/// its inputs, and a backward function that turns the gradient of the output
/// into gradients of the inputs. Variable::backward() sorts the recorded
/// graph topologically (iteratively, no recursion), walks it from the output
/// back to the leaves, and accumulates each leaf's gradient in grad().
///
/// ```
///   Variable a(core::tensor({1, 2}, {2}), /*requires_grad=*/true);
///   Variable y = sum(mul(a, a));   // y = Σ a²
///   y.backward();                  // a.grad() = 2a = [2, 4]
/// ```
#pragma once

#include "autograd/profiler.hpp"

#include "core/tensor.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tformer::autograd {

using core::Tensor;

struct VariableImpl;
class Variable;

/// Gradients a backward function fills in, one slot per input of its op.
/// A slot left undefined means "no gradient flows to this input".
class Grads {
public:
    /// The gradient slots of one node's inputs and which of them are wanted; autograd builds it for backward.
    explicit Grads(std::span<Tensor> slots, std::span<const uint8_t> wanted, bool last_run = false)
        : slots_(slots), wanted_(wanted), last_run_(last_run) {}
    /// True when input i requires a gradient (skip the work otherwise).
    bool wanted(size_t i) const { return wanted_[i] != 0; }
    /// The gradient slot of input i: a backward assigns (or adds to) it.
    Tensor& operator[](size_t i) { return slots_[i]; }
    /// Number of inputs of the op.
    size_t size() const { return slots_.size(); }
    /// True when this backward is the node's last (no retain_graph): what
    /// the op saved is dropped right after, so the backward may write over
    /// a saved tensor it alone holds instead of allocating one as large.
    bool last_run() const { return last_run_; }

private:
    std::span<Tensor> slots_;
    std::span<const uint8_t> wanted_;
    bool last_run_ = false;
};

/// One recorded op: who its inputs were and how to send a gradient back to them.
class Node {
public:
    /// A node for op `name` (a string literal) with the given inputs, in the op's argument order.
    Node(const char* name, std::vector<std::shared_ptr<VariableImpl>> inputs);
    /// Virtual: the callable of a LambdaNode is destroyed with it.
    virtual ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    /// The op's name, e.g. "matmul"; anomaly mode and errors quote it.
    const char* name() const { return name_; }
    /// The inputs' implementations, in the op's argument order.
    const std::vector<std::shared_ptr<VariableImpl>>& inputs() const { return inputs_; }
    /// Computes input gradients from the output gradient `grad_out`.
    virtual void backward(const Tensor& grad_out, Grads& grads) = 0;
    /// Drops what the op saved for backward (after a backward without retain_graph).
    virtual void release() = 0;
    /// True once release() ran: a second backward through this node is an error.
    bool released() const { return released_; }

protected:
    bool released_ = false;  ///< set by release()

private:
    friend struct VariableImpl;
    friend class Variable;
    const char* name_;
    std::vector<std::shared_ptr<VariableImpl>> inputs_;
};

/// A Node whose backward is a lambda (or any callable) stored inline, so
/// recording an op costs one allocation for the node and its saved tensors.
template <class Backward>
class LambdaNode final : public Node {
public:
    /// Stores `fn`, called as fn(grad_out, grads) by backward().
    LambdaNode(const char* name, std::vector<std::shared_ptr<VariableImpl>> inputs, Backward&& fn)
        : Node(name, std::move(inputs)), fn_(std::move(fn)) {}
    /// Calls the stored backward function.
    void backward(const Tensor& grad_out, Grads& grads) override { (*fn_)(grad_out, grads); }
    /// Destroys the stored function and what it captured (the saved tensors).
    void release() override {
        fn_.reset();
        released_ = true;
    }

private:
    std::optional<Backward> fn_;
};

/// How an op can make its output again from tensors its own backward keeps
/// anyway (see SavedValue): the recipe, and the value it last made, shared by
/// the ops that saved the recipe until the last of them lets it go.
struct Remake {
    std::function<Tensor()> make;   ///< makes the value again (the same kernel on the same saved tensors)
    Tensor made;                    ///< undefined until a backward asks for it
    std::atomic<int64_t> users{0};  ///< SavedValues holding this recipe
};

/// What a Variable handle points to.
///
/// The graph reaches a value through the nodes that use it (their inputs()),
/// but backward needs only its shape and dtype from there: what an op needs
/// of a value it saves itself. So a value made by an op lives as long as a
/// Variable handle or a saved tensor holds it, as in PyTorch, and not as
/// long as the graph: when the last handle goes, `value` is dropped and
/// `shape` and `dtype` remain. (An attention output that only the next
/// layer norm used is freed during the forward pass, not after backward.)
struct VariableImpl {
    Tensor value;                     ///< undefined once no handle holds an op's result
    core::Shape shape;                ///< value's shape, kept when the value goes
    core::DType dtype{};              ///< value's dtype, kept when the value goes
    std::atomic<int64_t> handles{0};  ///< Variable handles pointing here
    Tensor grad;                      ///< accumulated gradient (leaves, or retain_grad)
    std::shared_ptr<Node> grad_fn;    ///< the op that made this value; null for leaves
    bool requires_grad = false;       ///< track a gradient (a leaf asked to, an op result that depends on one)
    bool retains_grad = false;        ///< keep grad() on a non-leaf too
    std::shared_ptr<Remake> remake;   ///< set by set_remake(); null for most values
    /// Called with this value's complete gradient once per backward pass (register_hook).
    std::vector<std::function<void(const Tensor&)>> hooks;
    // bookkeeping for backward(): which pass visited this node last, and the
    // gradient collected so far during that pass
    uint64_t visit_mark = 0;  ///< the backward pass that visited this node last
    Tensor pending_grad;      ///< the gradient collected so far in that pass
};

/// Options of Variable::backward.
struct BackwardOptions {
    bool retain_graph = false;  ///< keep saved tensors so backward can run again
};

/// A differentiable value: a cheap, shared handle to a VariableImpl holding a
/// tensor, its gradient and the op (Node) that made it. Ops on Variables record
/// the graph that backward() walks.
class Variable {
public:
    /// An undefined Variable.
    Variable() = default;
    /// A leaf holding `value`; with requires_grad, backward() fills grad().
    explicit Variable(Tensor value, bool requires_grad = false);
    /// Copies the handle (both see the same value and gradient).
    /// Handles are counted (see VariableImpl): copying adds one, destroying removes one.
    Variable(const Variable& other);
    /// Moves the handle.
    Variable(Variable&& other) noexcept : impl_(std::move(other.impl_)) {}
    /// Copies the handle.
    Variable& operator=(const Variable& other);
    /// Moves the handle.
    Variable& operator=(Variable&& other) noexcept;
    /// Drops the handle; the value goes with the last one (see VariableImpl).
    ~Variable();

    /// False for the undefined Variable of Variable().
    bool defined() const { return impl_ != nullptr; }
    /// The tensor this Variable holds.
    const Tensor& value() const;
    /// The accumulated gradient; undefined until a backward reaches this leaf.
    /// Gradients may share storage with other gradients: replace them, never
    /// modify them in place.
    const Tensor& grad() const;
    /// Replaces the gradient (optimizers' clipping, tests).
    void set_grad(Tensor grad) const;
    /// Forgets the gradient (PyTorch's zero_grad(set_to_none=True)).
    void zero_grad() const;

    /// True when backward() computes a gradient for this Variable.
    bool requires_grad() const;
    /// Turns gradient tracking on or off for a leaf; returns *this.
    const Variable& requires_grad_(bool on = true) const;
    /// No op made this Variable (it was created directly).
    bool is_leaf() const;
    /// Name of the op that made this Variable, or "leaf".
    std::string op_name() const;
    /// The same value, cut from the graph (no grad_fn, requires_grad false).
    Variable detach() const;
    /// Keep grad() on this non-leaf after backward, for inspection.
    void retain_grad() const;
    /// Calls hook(grad) once per backward pass with this Variable's complete gradient.
    void register_hook(std::function<void(const Tensor&)> hook) const;

    /// Backpropagates from this Variable. Without `grad_out` the Variable must
    /// hold a single element (a loss); otherwise grad_out has its shape.
    void backward(const Tensor& grad_out = {}, BackwardOptions options = {}) const;

    // shorthands for value()'s metadata
    /// The value's shape.
    const core::Shape& shape() const { return value().shape(); }
    /// The value's number of dimensions.
    int dim() const { return value().dim(); }
    /// The size of dimension d of the value (negative counts from the end).
    int64_t size(int64_t d) const { return value().size(d); }
    /// The value's number of elements.
    int64_t numel() const { return value().numel(); }
    /// The value's dtype.
    core::DType dtype() const { return value().dtype(); }
    /// The single value of a one-element Variable (a loss), as double.
    double item() const { return value().item(); }

    /// The shared implementation (graph code and tests).
    const std::shared_ptr<VariableImpl>& impl() const { return impl_; }

private:
    void drop_handle();
    std::shared_ptr<VariableImpl> impl_;
};

// ---- grad mode --------------------------------------------------------------------------

/// True when ops record graphs (the default); false inside a NoGradGuard.
bool grad_enabled();

/// Turns graph recording off for its lifetime (evaluation, decoding,
/// optimizer updates), like `with torch.no_grad():`.
class NoGradGuard {
public:
    /// Turns recording off, remembering whether it was on.
    NoGradGuard();
    /// Restores the previous state.
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool previous_;
};

/// Turns graph recording back on inside a NoGradGuard (tutorials).
class EnableGradGuard {
public:
    /// Turns recording on, remembering whether it was on.
    EnableGradGuard();
    /// Restores the previous state.
    ~EnableGradGuard();
    EnableGradGuard(const EnableGradGuard&) = delete;
    EnableGradGuard& operator=(const EnableGradGuard&) = delete;

private:
    bool previous_;
};

// ---- anomaly mode -------------------------------------------------------------------------

/// When on, every backward function's output is checked for NaN and Inf, and
/// the first offender throws ValueError naming the op, like PyTorch's
/// detect_anomaly. The forward pass is checked too: an op whose inputs hold
/// no NaN but whose output does throws, naming the op (infinities pass, since
/// masks may use them). Off by default (it costs a pass over every tensor).
void set_anomaly_mode(bool on);
/// True while anomaly mode is on (see set_anomaly_mode).
bool anomaly_mode();

/// Turns anomaly mode on for its lifetime.
class AnomalyGuard {
public:
    /// Turns anomaly mode on, remembering whether it was on.
    AnomalyGuard();
    /// Restores the previous state.
    ~AnomalyGuard();
    AnomalyGuard(const AnomalyGuard&) = delete;
    AnomalyGuard& operator=(const AnomalyGuard&) = delete;

private:
    bool previous_;
};

/// Graph nodes alive right now; tests use it to prove graphs are freed.
int64_t live_node_count();

// ---- values saved for backward, or made again ------------------------------------------------

/// What an op keeps of an input for its backward (nn::Linear keeps its input
/// x for dW = dyᵀ x): the tensor itself, or, when the op that made x gave it
/// a recipe (set_remake), the recipe. A layer norm's output is one pass over
/// the sum its own backward keeps, and attention's output one product of the
/// weights and values its backward keeps: saving the recipe instead of the
/// value lets the value go once the forward pass is done with it, and
/// backward makes it again, to the bit, when it gets there (activation
/// recomputation, as torch.utils.checkpoint does for whole blocks). The ops
/// that save this way: linear and linear_relu. The value made is shared by
/// every op that saved the same recipe (the three projections of one input
/// make it once) and dropped when the last of them is released.
class SavedValue {
public:
    /// An undefined SavedValue (the op saved nothing).
    SavedValue() = default;
    /// Keeps x's recipe if it has one, else x's value.
    explicit SavedValue(const Variable& x);
    /// Shares what `other` saved (the recipe's user count goes up).
    SavedValue(const SavedValue& other);
    /// Takes what `other` saved.
    SavedValue(SavedValue&& other) noexcept;
    /// Replaces what this saved by what `other` saved.
    SavedValue& operator=(SavedValue other) noexcept;
    /// Lets the recipe go; the last user drops the value it made.
    ~SavedValue();

    /// True unless this is the undefined SavedValue().
    bool defined() const { return value_.defined() || remake_ != nullptr; }
    /// True when the value will be made again rather than kept (tests).
    bool remade() const { return remake_ != nullptr; }
    /// The value: the one kept, or the one made (once, for all who saved it).
    Tensor get() const;

private:
    Tensor value_;
    std::shared_ptr<Remake> remake_;
};

/// Gives y, an op's output just recorded, a recipe that makes its value
/// again (bit for bit: the same kernel on the same saved tensors), if y is in
/// a graph and holds at least remake_min_elements() elements; does nothing
/// otherwise, so ops that save y keep its value.
void set_remake(const Variable& y, std::function<Tensor()> make);

/// Values smaller than this are kept rather than remade: for them the time of
/// remaking matters more than the memory. 2^18 elements (1 MB in float32):
/// the layer norms of the small and base bench presets (2048 × 256, 1024 ×
/// 512) are remade, d2l's (640 × 32) kept.
int64_t remake_min_elements();
/// Sets the threshold (tests: 0 remakes every value that has a recipe, a
/// huge value none); returns the previous one.
int64_t set_remake_min_elements(int64_t elements);

/// Sets remake_min_elements() for its lifetime.
class RemakeThresholdGuard {
public:
    /// Sets the threshold to `elements` until the guard goes out of scope.
    explicit RemakeThresholdGuard(int64_t elements) : previous_(set_remake_min_elements(elements)) {}
    /// Restores the previous threshold.
    ~RemakeThresholdGuard() { set_remake_min_elements(previous_); }
    RemakeThresholdGuard(const RemakeThresholdGuard&) = delete;
    RemakeThresholdGuard& operator=(const RemakeThresholdGuard&) = delete;

private:
    int64_t previous_;
};

// ---- recording ops ---------------------------------------------------------------------------

/// True when an op on these inputs must record a node.
inline bool needs_grad(std::initializer_list<const Variable*> inputs) {
    if (!grad_enabled()) return false;
    for (const Variable* v : inputs)
        if (v->defined() && v->requires_grad()) return true;
    return false;
}

namespace detail {
Variable make_recorded(Tensor value, std::shared_ptr<Node> node);
void check_forward(const char* name, const Tensor& value, std::span<const Variable> inputs);  // anomaly mode
std::vector<std::shared_ptr<VariableImpl>> impls_of(std::span<const Variable> inputs);
}  // namespace detail

/// The result of an op: `value` with, when grad mode is on and some input
/// requires a gradient, a node named `name` whose backward is `backward`,
/// called as backward(grad_out, grads). Capture in `backward` only the
/// tensors it needs (by value), never the output Variable itself.
template <class Backward>
Variable record(const char* name, Tensor value, std::span<const Variable> inputs, Backward&& backward) {
    if (profiling()) detail::profile_forward(name);  // the value was just computed: charge the time to this op
    if (anomaly_mode()) detail::check_forward(name, value, inputs);
    bool any = false;
    if (grad_enabled())
        for (const Variable& v : inputs) any = any || (v.defined() && v.requires_grad());
    if (!any) return Variable(std::move(value));
    auto node = std::make_shared<LambdaNode<std::decay_t<Backward>>>(name, detail::impls_of(inputs),
                                                                     std::forward<Backward>(backward));
    return detail::make_recorded(std::move(value), std::move(node));
}

/// record with the inputs as a braced list: record("exp", y, {x}, backward).
template <class Backward>
Variable record(const char* name, Tensor value, std::initializer_list<Variable> inputs, Backward&& backward) {
    return record(name, std::move(value), std::span<const Variable>(inputs.begin(), inputs.size()),
                  std::forward<Backward>(backward));
}

}  // namespace tformer::autograd
