#include "autograd/variable.hpp"

#include "core/elementwise.hpp"

#include <chrono>
#include <cmath>

namespace tformer::autograd {

namespace {
std::atomic<int64_t> g_live_nodes{0};
thread_local bool t_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
std::atomic<uint64_t> g_backward_pass{0};

const std::shared_ptr<VariableImpl>& checked(const std::shared_ptr<VariableImpl>& impl, const char* what) {
    if (!impl) fail<ValueError>("{}: Variable is undefined", what);
    return impl;
}

bool has_nan(const Tensor& t) {
    for (double v : t.to_vector())
        if (std::isnan(v)) return true;
    return false;
}
}  // namespace

// ---- Node ---------------------------------------------------------------------------------

Node::Node(const char* name, std::vector<std::shared_ptr<VariableImpl>> inputs)
    : name_(name), inputs_(std::move(inputs)) {
    g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

// Destroying the last handle to a long chain (a -> op -> op -> ... 100,000
// times) would recurse once per node through shared_ptr destructors and
// overflow the stack. Instead, a node that is about to free the last
// reference to an input's node takes that node over and frees it here, in a
// loop: the teardown is iterative, like the topological sort.
Node::~Node() {
    std::vector<std::shared_ptr<Node>> doomed;
    auto detach_inputs = [&doomed](std::vector<std::shared_ptr<VariableImpl>>& inputs) {
        for (auto& input : inputs) {
            if (input && input.use_count() == 1 && input->grad_fn && input->grad_fn.use_count() == 1)
                doomed.push_back(std::move(input->grad_fn));
            input.reset();
        }
        inputs.clear();
    };
    detach_inputs(inputs_);
    while (!doomed.empty()) {
        std::shared_ptr<Node> node = std::move(doomed.back());
        doomed.pop_back();
        detach_inputs(node->inputs_);
        // `node` dies here with no inputs left, so its destructor does not recurse
    }
    g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
}

int64_t live_node_count() { return g_live_nodes.load(std::memory_order_relaxed); }

// ---- Variable -------------------------------------------------------------------------------

Variable::Variable(Tensor value, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
    if (!value.defined()) fail<ValueError>("Variable: value tensor is undefined");
    if (requires_grad && !core::is_floating(value.dtype()))
        fail<ValueError>("Variable: only floating tensors can require gradients, got {}",
                         core::dtype_name(value.dtype()));
    impl_->shape = value.shape();
    impl_->dtype = value.dtype();
    impl_->value = std::move(value);
    impl_->requires_grad = requires_grad;
    impl_->handles.store(1, std::memory_order_relaxed);
}

Variable::Variable(const Variable& other) : impl_(other.impl_) {
    if (impl_) impl_->handles.fetch_add(1, std::memory_order_relaxed);
}

Variable& Variable::operator=(const Variable& other) {
    if (impl_ == other.impl_) return *this;
    if (other.impl_) other.impl_->handles.fetch_add(1, std::memory_order_relaxed);
    drop_handle();
    impl_ = other.impl_;
    return *this;
}

Variable& Variable::operator=(Variable&& other) noexcept {
    if (this != &other) {
        drop_handle();
        impl_ = std::move(other.impl_);
    }
    return *this;
}

Variable::~Variable() { drop_handle(); }

// The last handle to an op's result is going: no one can read the value any
// more, and backward needs only its shape and dtype (kept beside it), so the
// value goes now unless some op saved it. Leaves keep theirs (parameters).
void Variable::drop_handle() {
    if (!impl_) return;
    if (impl_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1 && impl_->grad_fn) impl_->value = Tensor();
    impl_.reset();
}

const Tensor& Variable::value() const { return checked(impl_, "value")->value; }
const Tensor& Variable::grad() const { return checked(impl_, "grad")->grad; }

void Variable::set_grad(Tensor grad) const {
    checked(impl_, "set_grad");
    if (grad.defined() && !(grad.shape() == impl_->value.shape()))
        fail<ShapeError>("set_grad: gradient of shape {} for a value of shape {}", core::shape_str(grad.shape()),
                         core::shape_str(impl_->value.shape()));
    impl_->grad = std::move(grad);
}

void Variable::zero_grad() const { checked(impl_, "zero_grad")->grad = Tensor(); }

bool Variable::requires_grad() const { return checked(impl_, "requires_grad")->requires_grad; }

const Variable& Variable::requires_grad_(bool on) const {
    checked(impl_, "requires_grad_");
    if (impl_->grad_fn)
        fail<ValueError>(
            "requires_grad_: only leaves can change requires_grad; this Variable was made by '{}' "
            "(use detach() first)",
            impl_->grad_fn->name());
    if (on && !core::is_floating(impl_->value.dtype()))
        fail<ValueError>("requires_grad_: only floating tensors can require gradients, got {}",
                         core::dtype_name(impl_->value.dtype()));
    impl_->requires_grad = on;
    return *this;
}

bool Variable::is_leaf() const { return checked(impl_, "is_leaf")->grad_fn == nullptr; }

std::string Variable::op_name() const {
    checked(impl_, "op_name");
    return impl_->grad_fn ? impl_->grad_fn->name() : "leaf";
}

Variable Variable::detach() const { return Variable(value(), false); }

void Variable::retain_grad() const { checked(impl_, "retain_grad")->retains_grad = true; }

void Variable::register_hook(std::function<void(const Tensor&)> hook) const {
    checked(impl_, "register_hook");
    if (!impl_->requires_grad)
        fail<ValueError>("register_hook: this Variable does not require a gradient, so a hook would never run");
    impl_->hooks.push_back(std::move(hook));
}

// ---- grad mode and anomaly mode ---------------------------------------------------------------

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = previous_; }

void set_anomaly_mode(bool on) { g_anomaly.store(on); }
bool anomaly_mode() { return g_anomaly.load(); }
AnomalyGuard::AnomalyGuard() : previous_(anomaly_mode()) { set_anomaly_mode(true); }
AnomalyGuard::~AnomalyGuard() { set_anomaly_mode(previous_); }

// ---- recording ------------------------------------------------------------------------------------

namespace detail {

Variable make_recorded(Tensor value, std::shared_ptr<Node> node) {
    Variable out(std::move(value));
    out.impl()->grad_fn = std::move(node);
    out.impl()->requires_grad = true;
    return out;
}

std::vector<std::shared_ptr<VariableImpl>> impls_of(std::span<const Variable> inputs) {
    std::vector<std::shared_ptr<VariableImpl>> impls;
    impls.reserve(inputs.size());
    // inputs that need no gradient are kept as null: backward skips them
    for (const Variable& v : inputs) impls.push_back(v.defined() && v.requires_grad() ? v.impl() : nullptr);
    return impls;
}

void check_forward(const char* name, const Tensor& value, std::span<const Variable> inputs) {
    if (!has_nan(value)) return;
    for (const Variable& v : inputs)
        if (v.defined() && has_nan(v.value())) return;  // inherited: an earlier op produced it
    fail<ValueError>("anomaly: forward of '{}' produced NaN from inputs without NaN (output shape {})", name,
                     core::shape_str(value.shape()));
}

}  // namespace detail

// ---- values saved for backward, or made again ------------------------------------------------

namespace {
std::atomic<int64_t> g_remake_min_elements{int64_t{1} << 18};
}  // namespace

int64_t remake_min_elements() { return g_remake_min_elements.load(std::memory_order_relaxed); }

int64_t set_remake_min_elements(int64_t elements) {
    if (elements < 0) fail<ValueError>("set_remake_min_elements: need a count >= 0, got {}", elements);
    return g_remake_min_elements.exchange(elements);
}

void set_remake(const Variable& y, std::function<Tensor()> make) {
    checked(y.impl(), "set_remake");
    if (!y.impl()->grad_fn || y.numel() < remake_min_elements()) return;
    auto remake = std::make_shared<Remake>();
    remake->make = std::move(make);
    y.impl()->remake = std::move(remake);
}

SavedValue::SavedValue(const Variable& x) {
    const auto& impl = checked(x.impl(), "SavedValue");
    if (impl->remake) {
        remake_ = impl->remake;
        remake_->users.fetch_add(1);
    } else {
        value_ = x.value();
    }
}

SavedValue::SavedValue(const SavedValue& other) : value_(other.value_), remake_(other.remake_) {
    if (remake_) remake_->users.fetch_add(1);
}

SavedValue::SavedValue(SavedValue&& other) noexcept
    : value_(std::move(other.value_)), remake_(std::move(other.remake_)) {}

SavedValue& SavedValue::operator=(SavedValue other) noexcept {
    std::swap(value_, other.value_);
    std::swap(remake_, other.remake_);
    return *this;
}

SavedValue::~SavedValue() {
    // the last op that saved the recipe lets the value it made go
    if (remake_ && remake_->users.fetch_sub(1) == 1) remake_->made = Tensor();
}

Tensor SavedValue::get() const {
    if (!remake_) return value_;
    if (!remake_->made.defined()) remake_->made = remake_->make();
    return remake_->made;
}

// ---- backward ---------------------------------------------------------------------------------------

namespace {

// Post-order depth-first search with an explicit stack: every node appears
// after all the nodes that consume it once the list is reversed. Marks
// visited impls with this pass's number instead of a hash set. The list
// holds each impl by a shared pointer, so backward can cut the graph behind
// it as it goes (see Variable::backward) without freeing what is still to come.
std::vector<std::shared_ptr<VariableImpl>> topological_order(const std::shared_ptr<VariableImpl>& root, uint64_t pass) {
    std::vector<std::shared_ptr<VariableImpl>> order;
    struct Frame {
        const std::shared_ptr<VariableImpl>* impl;  // points into a node's inputs (alive while the graph is)
        size_t next_input;
    };
    std::vector<Frame> stack;
    root->visit_mark = pass;
    stack.push_back({&root, 0});
    while (!stack.empty()) {
        Frame& top = stack.back();
        Node* node = (*top.impl)->grad_fn.get();
        if (node && top.next_input < node->inputs().size()) {
            const std::shared_ptr<VariableImpl>& input = node->inputs()[top.next_input++];
            if (input && input->visit_mark != pass) {
                input->visit_mark = pass;
                stack.push_back({&input, 0});
            }
        } else {
            order.push_back(*top.impl);
            stack.pop_back();
        }
    }
    return order;  // inputs before the ops that use them; walk it backwards
}

void check_finite(const Tensor& g, const Node& node, size_t input) {
    bool finite = true;
    for (double v : g.to_vector()) finite = finite && std::isfinite(v);
    if (!finite)
        fail<ValueError>("anomaly: backward of '{}' produced NaN or Inf in the gradient of its input {} (shape {})",
                         node.name(), input, core::shape_str(g.shape()));
}

// a += b. Gradients may share storage (add's backward hands one tensor to
// both inputs, see grad()), so a's storage is written in place only when
// this handle is its sole owner and a is a plain row-major tensor; otherwise
// the sum is a new tensor. Either way the same floats.
void accumulate(Tensor& into, const Tensor& g) {
    if (!into.defined()) {
        into = g;
    } else if (into.storage().use_count() == 1 && into.is_contiguous() && into.dtype() == g.dtype() &&
               into.shape() == g.shape() && into.numel() * core::dtype_size(into.dtype()) == into.storage()->nbytes()) {
        core::add_(into, g);
    } else {
        into = core::add(into, g);
    }
}

// The gradient backward starts from: grad_out, or 1 for a scalar output
// when none is given; checked against the output and cast to its dtype.
Tensor seed_gradient(const VariableImpl& out, const Tensor& grad_out) {
    Tensor seed = grad_out;
    if (!seed.defined()) {
        if (out.value.numel() != 1)
            fail<ValueError>("backward: output of shape {} is not a scalar; pass a gradient of that shape",
                             core::shape_str(out.value.shape()));
        return core::ones(out.value.shape(), out.value.dtype());
    }
    if (!(seed.shape() == out.value.shape()))
        fail<ShapeError>("backward: gradient of shape {} for an output of shape {}", core::shape_str(seed.shape()),
                         core::shape_str(out.value.shape()));
    if (seed.dtype() != out.value.dtype()) seed = seed.to(out.value.dtype());
    return seed;
}

// Runs `node`'s backward on g, the gradient of its output, and adds what it
// gives each input to that input's pending gradient. slots and wanted are
// scratch space kept across nodes.
void run_node_backward(Node& node, const Tensor& g, std::vector<Tensor>& slots, std::vector<uint8_t>& wanted,
                       bool release_saved, bool anomaly) {
    if (node.released())
        fail<ValueError>(
            "backward: the graph through '{}' was already freed by an earlier backward; "
            "pass BackwardOptions{{.retain_graph = true}} to the first call to backward twice",
            node.name());
    const auto& inputs = node.inputs();
    slots.assign(inputs.size(), Tensor());
    wanted.assign(inputs.size(), 0);
    for (size_t i = 0; i < inputs.size(); ++i) wanted[i] = inputs[i] != nullptr;
    Grads grads(slots, wanted, release_saved);
    if (profiling()) {
        const auto start = std::chrono::steady_clock::now();
        node.backward(g, grads);
        detail::profile_backward(node.name(),
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
        node.backward(g, grads);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i] || !slots[i].defined()) continue;
        const VariableImpl& want = *inputs[i];  // its value may be gone: shape and dtype remain
        if (!(slots[i].shape() == want.shape) || slots[i].dtype() != want.dtype)
            fail<ValueError>(
                "backward of '{}': gradient for input {} has shape {} and dtype {}, but the "
                "input has shape {} and dtype {}",
                node.name(), i, core::shape_str(slots[i].shape()), core::dtype_name(slots[i].dtype()),
                core::shape_str(want.shape), core::dtype_name(want.dtype));
        if (anomaly) check_finite(slots[i], node, i);
        accumulate(inputs[i]->pending_grad, slots[i]);
        slots[i] = Tensor();  // the sum holds it now (or the input's slot shares it)
    }
}

}  // namespace

void Variable::backward(const Tensor& grad_out, BackwardOptions options) const {
    checked(impl_, "backward");
    if (!impl_->requires_grad)
        fail<ValueError>(
            "backward: this Variable does not require a gradient (no input of the ops that made it "
            "requires one, or it was made under NoGradGuard)");
    const Tensor seed = seed_gradient(*impl_, grad_out);

    const uint64_t pass = g_backward_pass.fetch_add(1) + 1;
    std::vector<std::shared_ptr<VariableImpl>> order = topological_order(impl_, pass);
    const bool anomaly = anomaly_mode();

    impl_->pending_grad = seed;
    std::vector<Tensor> slots;
    std::vector<uint8_t> wanted;
    try {
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
            // Without retain_graph, the graph behind this value is cut once its
            // backward has run: its node forgets its inputs, and our reference
            // goes, so a value nobody else holds (an intermediate activation)
            // is freed now rather than when the whole graph dies. Backward's
            // peak memory is then what is still to come, not everything.
            const std::shared_ptr<VariableImpl> owned = std::move(*it);
            VariableImpl* v = owned.get();
            Tensor g = std::move(v->pending_grad);
            v->pending_grad = Tensor();
            if (!g.defined()) continue;  // no gradient reached this value (its graph stays as it is)
            for (auto& hook : v->hooks) hook(g);
            Node* node = v->grad_fn.get();
            if (!node) {  // a leaf: keep the gradient
                accumulate(v->grad, g);
                continue;
            }
            if (v->retains_grad) accumulate(v->grad, g);
            run_node_backward(*node, g, slots, wanted, !options.retain_graph, anomaly);
            if (!options.retain_graph) {
                node->release();
                node->inputs_.clear();
            }
        }
    } catch (...) {
        // leave no half-collected gradients behind for the next pass
        for (const auto& v : order)
            if (v) v->pending_grad = Tensor();
        throw;
    }
}

}  // namespace tformer::autograd
