// Tutorial 02 · Autograd: the graph, its topological order, backward(),
// finite differences, accumulation, NoGradGuard and hooks.
//
// The documents train every model with loss.backward(); this tutorial opens
// that call up on the smallest interesting graph,
//   y = Σ_i (a_i · b_i + e^(a_i)),
// in the spirit of micrograd: each op records its inputs and its backward,
// and backward() is a topological sort plus one loop (autograd/variable.cpp).
// Read it with tutorials/02_autograd/README.md.
#include "common/prelude.hpp"
#include "exercise.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

using ag::VariableImpl;

namespace {

// Names for the Variables of this tutorial, so the graph can be printed
// with "a", "p", ... instead of addresses.
using Names = std::map<const VariableImpl*, std::string>;

std::string name_of(const Names& names, const VariableImpl* v) {
    if (!v) return "(constant)";  // an input that needs no gradient is stored as null
    auto it = names.find(v);
    return it == names.end() ? "?" : it->second;
}

// Every Variable that `root` depends on, inputs before the ops that use them.
// A depth-first search that lists a node after all of its inputs (post-order).
// Each node is visited once, however many ops use it. The engine does the
// same with an explicit stack instead of recursion, so deep graphs cannot
// overflow the call stack (topological_order in autograd/variable.cpp).
std::vector<const VariableImpl*> topological_order(const Variable& root) {
    std::vector<const VariableImpl*> order;
    std::set<const VariableImpl*> visited;
    std::function<void(const VariableImpl*)> visit = [&](const VariableImpl* v) {
        if (!v || visited.count(v)) return;
        visited.insert(v);
        if (v->grad_fn)
            for (const auto& input : v->grad_fn->inputs()) visit(input.get());
        order.push_back(v);
    };
    visit(root.impl().get());
    return order;
}

// "p = mul(a, b)" for an op, "a (leaf)" for a leaf.
std::string describe_node(const Names& names, const VariableImpl* v) {
    if (!v->grad_fn) return fmt::format("{} (leaf)", name_of(names, v));
    std::vector<std::string> args;
    for (const auto& input : v->grad_fn->inputs()) args.push_back(name_of(names, input.get()));
    return fmt::format("{} = {}({})", name_of(names, v), v->grad_fn->name(), fmt::join(args, ", "));
}

// y = Σ (a·b + e^a), the function of this tutorial, on Variables.
Variable f(const Variable& a, const Variable& b) { return ag::sum(ag::add(ag::mul(a, b), ag::exp(a))); }

constexpr DType F64 = DType::float64;  // float64, so the finite differences of step 5 are accurate

// What the steps share: the leaves, the graph of step 2 and its order.
struct Lesson {
    const Variable a{c::tensor({0.5, -1.0, 2.0}, {3}, F64), /*requires_grad=*/true};  // (3)
    const Variable b{c::tensor({3.0, 0.5, -2.0}, {3}, F64), /*requires_grad=*/true};  // (3)
    Variable p, e, s, y;  // (3), (3), (3), (): built in step 2
    Names names{{a.impl().get(), "a"}, {b.impl().get(), "b"}};
    std::vector<const VariableImpl*> order;  // step 3's topological order, reused by step 8
};

// ---- the steps --------------------------------------------------------------------------

// micrograd engine.py (Value): the leaves every document's loss.backward() differentiates
void leaves(Tutorial& t, const Lesson& lesson) {
    note(
        "An autograd::Variable holds a tensor (its value) and, once backward() has run, a gradient of the "
        "same shape. Variables we create directly are leaves. requires_grad = true asks for their "
        "gradient; in a model these are the parameters (the W_q, W_k, W_v, W_o of 多头注意力, the "
        "weights of the feed-forward network, ...).");
    show("a", lesson.a);
    show("b", lesson.b);
    t.check(lesson.a.is_leaf() && lesson.a.requires_grad() && lesson.a.op_name() == "leaf",
            "a is a leaf that requires a gradient");
    t.check(!lesson.a.grad().defined(), "a has no gradient yet: a.grad() is undefined until backward() runs");
}

// micrograd engine.py (each op records its inputs); autograd/elementwise.cpp, autograd/reduce.cpp
void building_the_graph(Tutorial& t, Lesson& lesson) {
    note(
        "Every differentiable op computes its value with a core kernel right away (no lazy evaluation) "
        "and, because an input requires a gradient, also records a node: its name, its inputs, and a "
        "backward function that knows how to send a gradient back to them. We compute\n"
        "    y = Σ_i (a_i · b_i + e^(a_i))\n"
        "in four ops:\n"
        "    p = mul(a, b)    e = exp(a)    s = add(p, e)    y = sum(s)");
    const Variable &a = lesson.a, &b = lesson.b;
    Variable &p = lesson.p, &e = lesson.e, &s = lesson.s, &y = lesson.y;
    p = ag::mul(a, b);  // p = a · b      (3)
    e = ag::exp(a);     // e = e^a        (3)
    s = ag::add(p, e);  // s = p + e      (3)
    y = ag::sum(s);     // y = Σ_i s_i    ()
    lesson.names.insert({{p.impl().get(), "p"}, {e.impl().get(), "e"}, {s.impl().get(), "s"}, {y.impl().get(), "y"}});
    show("p", p);
    show("e", e);
    show("s", s);
    show("y", y);
    t.check(p.op_name() == "mul" && e.op_name() == "exp" && s.op_name() == "add" && y.op_name() == "sum",
            "each result knows the op that made it: mul, exp, add, sum");
    t.check(!y.is_leaf() && y.requires_grad(), "y is not a leaf, and requires a gradient because a and b do");
    double by_hand = 0;
    for (int64_t i = 0; i < 3; ++i) {
        const double ai = a.value().at({i}), bi = b.value().at({i});
        by_hand += ai * bi + std::exp(ai);
    }
    t.check_close(y.item(), by_hand, 1e-12,
                  fmt::format("y = {:.6f}, the same as Σ(a·b + e^a) in plain doubles", by_hand));
}

// micrograd engine.py › backward (build_topo); autograd/variable.cpp's topological_order
void graph_and_topological_order(Tutorial& t, Lesson& lesson) {
    note(
        "Each Variable made by an op points to its node (impl()->grad_fn), and the node lists its inputs "
        "(grad_fn->inputs()). Following those pointers from y walks the whole graph:");
    lesson.order = topological_order(lesson.y);
    const std::vector<const VariableImpl*>& order = lesson.order;
    line();
    for (auto it = order.rbegin(); it != order.rend(); ++it) line("    {}", describe_node(lesson.names, *it));
    std::vector<std::string> listed;
    for (const VariableImpl* v : order) listed.push_back(name_of(lesson.names, v));
    note(
        "\nbackward() needs the gradient of a Variable to be complete before it is passed on to that "
        "Variable's inputs, i.e. every op that USES a Variable must be processed before the op that MADE "
        "it. A depth-first search that lists each node after its inputs gives that order (reversed):\n"
        "    topological order:  {}\n"
        "    backward visits:    {}",
        fmt::join(listed, ", "), fmt::join(listed.rbegin(), listed.rend(), ", "));
    bool inputs_first = true;
    std::map<const VariableImpl*, size_t> position;
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    for (const VariableImpl* v : order)
        if (v->grad_fn)
            for (const auto& input : v->grad_fn->inputs())
                inputs_first = inputs_first && position.at(input.get()) < position.at(v);
    line();
    t.check(order.size() == 6, "6 Variables in the graph: a and b are listed once although a is used twice");
    t.check(inputs_first, "every Variable comes after all of its inputs");
    t.check(order.back() == lesson.y.impl().get(), "y comes last, so backward() starts from it");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (loss.backward()); micrograd engine.py › backward
void backward_chain_rule(Tutorial& t, const Lesson& lesson) {
    note(
        "y.backward() seeds dy/dy = 1 and walks the order of step 3 from y back to the leaves. Each node "
        "receives the gradient of its output and applies the local rule of its op (written next to the "
        "forward in autograd/elementwise.cpp and autograd/reduce.cpp):\n"
        "    y = sum(s)     ds = dy · (1, 1, 1)   each term of a sum has slope 1\n"
        "    s = add(p, e)  dp = ds,  de = ds\n"
        "    e = exp(a)     da += de · e^a        reuses the saved output e\n"
        "    p = mul(a, b)  da += dp · b,  db = dp · a\n"
        "so a.grad = b + e^a and b.grad = a. Intermediate gradients are thrown away unless asked for with "
        "retain_grad():");
    const Variable &a = lesson.a, &b = lesson.b, &s = lesson.s, &y = lesson.y;
    s.retain_grad();
    y.backward();
    show("s.grad", s.grad());
    show("a.grad", a.grad());
    show("b.grad", b.grad());
    t.check_close(s.grad(), c::ones({3}, F64), 0, "ds = (1, 1, 1)");
    t.check_close(a.grad(), c::add(b.value(), c::exp(a.value())), 1e-12, "a.grad == b + e^a");
    t.check_close(b.grad(), a.value(), 0, "b.grad == a");
    t.check(!lesson.p.grad().defined(), "p.grad() stays undefined: p is not a leaf and did not ask to retain_grad()");
    note(
        "\nbackward() also frees what the nodes saved for it (e's copy of e^a, mul's copies of a and b), "
        "so the same graph cannot be differentiated twice unless the first call keeps it:");
    t.check_throws<ValueError>(
        "a second y.backward() throws ValueError", [&] { y.backward(); }, "already freed");
}

// (y(x + h e_i) - y(x - h e_i)) / 2h, with x = a when `wrt_a`, else x = b
double central_difference(const Lesson& lesson, bool wrt_a, int64_t i, double h) {
    ag::NoGradGuard no_grad;
    double plus = 0, minus = 0;
    for (double sign : {+1.0, -1.0}) {
        c::Tensor moved = (wrt_a ? lesson.a : lesson.b).value().clone();
        moved.set({i}, moved.at({i}) + sign * h);
        const double value = wrt_a ? f(Variable(moved), lesson.b).item() : f(lesson.a, Variable(moved)).item();
        (sign > 0 ? plus : minus) = value;
    }
    return (plus - minus) / (2 * h);
}

// the derivative as a limit (central differences); tutorial 03 makes it autograd::gradcheck
void finite_differences_by_hand(Tutorial& t, const Lesson& lesson) {
    note(
        "A derivative is a limit: ∂y/∂a_i ≈ (y(a + h·e_i) - y(a - h·e_i)) / 2h for a small h, where e_i "
        "is 1 at position i and 0 elsewhere (a central difference). Evaluating y twice per element gives "
        "an independent check of backward(). NoGradGuard stops these evaluations from recording graphs.");
    const double h = 1e-6;
    line("\n    {:<9} {:>16} {:>20} {:>14}", "", "backward()", "central difference", "|difference|");
    double worst = 0;
    for (bool wrt_a : {true, false})
        for (int64_t i = 0; i < 3; ++i) {
            const double analytical = (wrt_a ? lesson.a : lesson.b).grad().at({i});
            const double numerical = central_difference(lesson, wrt_a, i, h);
            worst = std::max(worst, std::abs(analytical - numerical));
            line("    {:<9} {:>16.10f} {:>20.10f} {:>14.2e}", fmt::format("dy/d{}[{}]", wrt_a ? "a" : "b", i),
                 analytical, numerical, std::abs(analytical - numerical));
        }
    line();
    t.check(worst < 1e-8, fmt::format("all six derivatives agree to {:.1e} (< 1e-8)", worst));
    note(
        "The error of a central difference is about h²·|f'''|/6 from the formula plus about 1e-16/h from "
        "rounding; with h = 1e-6 in float64 both are below 1e-9. Tutorial 03 turns this into "
        "autograd::gradcheck, which every op of the library is tested with.");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (optimizer.zero_grad()); micrograd's += in backward
void gradients_add_up(Tutorial& t, const Lesson& lesson) {
    note(
        "a feeds two ops, mul and exp. Each sends back its own share, and the engine adds them before "
        "passing on: a.grad = (share through p) + (share through e) = b + e^a. That was already at work in "
        "step 4; here are the two shares separately:");
    const c::Tensor via_p = lesson.b.value();          // dp · b with dp = 1
    const c::Tensor via_e = c::exp(lesson.a.value());  // de · e^a with de = 1
    show("share through p", via_p);
    show("share through e", via_e);
    t.check_close(c::add(via_p, via_e), lesson.a.grad(), 1e-12, "a.grad is the sum of the two shares");

    note(
        "\nThe same holds when one op uses a Variable twice. z = Σ x·x has dz/dx = 2x: mul's backward "
        "sends x to its first input and x to its second, and both are x itself.");
    const Variable x(c::tensor({1, 2, 3}, {3}, F64), true);
    ag::sum(ag::mul(x, x)).backward();
    show("x", x);
    show("x.grad", x.grad());
    t.check_close(x.grad(), c::tensor({2, 4, 6}, {3}, F64), 0, "d(Σ x·x)/dx = 2x = (2, 4, 6)");

    note(
        "\nGradients also accumulate ACROSS backward() calls: a leaf's grad is added to, never "
        "overwritten. A second graph, differentiated without clearing first, doubles it:");
    ag::sum(ag::mul(x, x)).backward();
    show("x.grad", x.grad());
    t.check_close(x.grad(), c::tensor({4, 8, 12}, {3}, F64), 0, "x.grad is now 2x + 2x = (4, 8, 12)");
    x.zero_grad();
    t.check(!x.grad().defined(), "x.zero_grad() forgets it: this is why a training loop zeroes gradients each step");
}

// PyTorch's torch.no_grad(), under which the documents' prediction code runs
void no_grad_guard(Tutorial& t, const Lesson& lesson) {
    note(
        "Evaluation, greedy decoding and optimizer updates need values but no gradients. Inside a "
        "NoGradGuard (PyTorch: with torch.no_grad():) ops compute as usual but record nothing, which saves "
        "the memory of everything backward would have kept:\n"
        "    { ag::NoGradGuard no_grad;  w = ag::mul(a, b); }");
    const int64_t nodes_before = ag::live_node_count();
    Variable w;
    {
        ag::NoGradGuard no_grad;
        w = ag::mul(lesson.a, lesson.b);
        t.check(!ag::grad_enabled(), "inside the guard, grad_enabled() is false");
    }
    show("w", w);
    t.check(w.is_leaf() && !w.requires_grad(), "w has no grad_fn and does not require a gradient");
    t.check(ag::live_node_count() == nodes_before, "no graph node was created");
    t.check(ag::grad_enabled(), "the guard restores grad mode when it goes out of scope");
    t.check_throws<ValueError>(
        "w.backward() throws ValueError: there is no graph to walk", [&] { w.backward(); },
        "does not require a gradient");
    note("detach() gives the same kind of Variable from an existing one: the value without the graph.");
    t.check(lesson.s.detach().is_leaf() && !lesson.s.detach().requires_grad(),
            "s.detach() is a leaf without requires_grad");
}

// PyTorch's Tensor.register_hook: watching backward() walk the graph of step 2 again
void hooks(Tutorial& t, const Lesson& lesson) {
    note(
        "register_hook(fn) calls fn with a Variable's gradient during backward(), once the gradient is "
        "complete. Hooks are how you debug a model whose gradients vanish or explode. We rebuild the "
        "graph of step 2 (the first one was freed by backward) and hook every Variable:");
    const Variable &a = lesson.a, &b = lesson.b;
    a.zero_grad();
    b.zero_grad();
    const Variable p2 = ag::mul(a, b), e2 = ag::exp(a), s2 = ag::add(p2, e2), y2 = ag::sum(s2);
    std::vector<std::string> fired;
    std::map<std::string, c::Tensor> seen;
    const std::pair<const char*, Variable> hooked[] = {{"a", a}, {"b", b}, {"p", p2}, {"e", e2}, {"s", s2}};
    for (const auto& [name, v] : hooked) {
        v.register_hook([&fired, &seen, name = std::string(name)](const c::Tensor& grad) {
            line("    hook on {}: gradient ({:.4f})", name, fmt::join(grad.to_vector(), ", "));
            fired.push_back(name);
            seen[name] = grad;
        });
    }
    line();
    y2.backward();
    line();
    // the order of step 3 (for the first graph, which has the same shape), reversed, without y
    std::vector<std::string> expected;
    for (auto it = lesson.order.rbegin(); it != lesson.order.rend(); ++it)
        if (name_of(lesson.names, *it) != "y") expected.push_back(name_of(lesson.names, *it));
    t.check(fired == expected, fmt::format("the hooks fired in backward's order: {}", fmt::join(fired, ", ")));
    t.check(seen.count("a") && seen.count("s") && fired.size() == 5, "a's hook ran once, not once per use");
    if (seen.count("a"))
        t.check_close(seen["a"], c::add(b.value(), c::exp(a.value())), 1e-12,
                      "and it saw the complete gradient b + e^a, both shares added");
    t.check_close(a.grad(), c::add(b.value(), c::exp(a.value())), 1e-12,
                  "after the hooks, a.grad holds the same gradient");
}

// ---- the exercise (--exercise): tutorials/02_autograd/exercise.cpp -------------------------

// micrograd engine.py (an op is a forward and its _backward); autograd::record
void exercise_cube(Tutorial& t) {
    note(
        "Every op of the library is made like step 5 of tutorial 03 shows: a forward value and a backward "
        "lambda given to autograd::record. Write exercise::cube's backward. The checks compare its value, "
        "its gradient at three points with 3x², and run gradcheck on it (tutorial 03).");
    const Variable x(c::tensor({-1.5, 0.5, 2.0}, {3}, F64), true);
    const Variable y = exercise::cube(x);
    t.check_close(y.value(), c::tensor({-3.375, 0.125, 8.0}, {3}, F64), 1e-12, "cube(x) = x³");
    ag::sum(y).backward();
    t.check_close(x.grad(), c::tensor({6.75, 0.75, 12.0}, {3}, F64), 1e-12, "d Σ x³ / dx = 3x² = (6.75, 0.75, 12)");
    c::Generator gen(202);
    const ag::GradcheckResult r = ag::gradcheck([](const std::vector<Variable>& in) { return exercise::cube(in[0]); },
                                                {Variable(c::randn({2, 3}, gen, F64), true)});
    if (!r.passed) quote(r.report);
    t.check(r.passed, "gradcheck passes for cube on a random (2, 3) input");
}

// step 4's chain rule, with tanh in place of exp
void exercise_tanh_gradient(Tutorial& t) {
    note(
        "y = Σ (a·b + tanh a). What is a.grad? Write the formula in exercise::tanh_version_grad_a; the check "
        "runs backward() and compares.");
    const Variable a2(c::tensor({0.5, -1.0, 2.0}, {3}, F64), true), b2(c::tensor({3.0, 0.5, -2.0}, {3}, F64), true);
    ag::sum(ag::add(ag::mul(a2, b2), ag::tanh(a2))).backward();
    t.check_close(exercise::tanh_version_grad_a(a2.value(), b2.value()), a2.grad(), 1e-12,
                  "your formula equals a.grad from backward()");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 02 · Autograd: the graph and backward()",
                .follows = "every document's loss.backward(); micrograd's engine.py, on tensors",
                .exercise = "write a new op, cube(x) = x³, with autograd::record, and the gradient of "
                            "step 4's function with tanh in place of exp (tutorials/02_autograd/exercise.cpp)"});
    Lesson lesson;
    t.step("1. Leaves: the Variables we differentiate with respect to", [&] { leaves(t, lesson); });
    t.step("2. Building the graph, one op at a time", [&] { building_the_graph(t, lesson); });
    t.step("3. The graph and its topological order", [&] { graph_and_topological_order(t, lesson); });
    t.step("4. backward(): the chain rule, node by node", [&] { backward_chain_rule(t, lesson); });
    t.step("5. Checking the gradients with finite differences, by hand",
           [&] { finite_differences_by_hand(t, lesson); });
    t.step("6. An input used twice: its gradients add up", [&] { gradients_add_up(t, lesson); });
    t.step("7. NoGradGuard: computing without recording", [&] { no_grad_guard(t, lesson); });
    t.step("8. Hooks: watching the gradients flow", [&] { hooks(t, lesson); });
    t.exercise("Exercise 1. A new op: cube(x) = x³", [&] { exercise_cube(t); });
    t.exercise("Exercise 2. Step 4 with tanh instead of exp", [&] { exercise_tanh_gradient(t); });
    return t.finish();
}
