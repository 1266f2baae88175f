// Tutorial 02 · Autograd: the graph, its topological order, backward(),
// finite differences, accumulation, NoGradGuard and hooks.
//
// The documents train every model with loss.backward(); this tutorial opens
// that call up on the smallest interesting graph,
//   y = Σ_i (a_i · b_i + e^(a_i)),
// in the spirit of micrograd: each op records its inputs and its backward,
// and backward() is a topological sort plus one loop (autograd/variable.cpp).
// Read it with tutorials/02_autograd/README.md.
// tutorial-languages: en zh
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
    if (!v)
        return phrase({.en = "(constant)", .zh = "（常量）"})
            .text;  // an input that needs no gradient is stored as null
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
Phrase describe_node(const Names& names, const VariableImpl* v) {
    if (!v->grad_fn) return phrase({.en = "{} (leaf)", .zh = "{}（叶子节点）"}, name_of(names, v));
    std::vector<std::string> args;
    for (const auto& input : v->grad_fn->inputs()) args.push_back(name_of(names, input.get()));
    return phrase(both("{} = {}({})"), name_of(names, v), v->grad_fn->name(), fmt::join(args, ", "));
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
    note({.en = "An autograd::Variable holds a tensor (its value) and, once backward() has run, a gradient of the "
                "same shape. Variables we create directly are leaves. requires_grad = true asks for their "
                "gradient; in a model these are the parameters (the W_q, W_k, W_v, W_o of 多头注意力, the "
                "weights of the feed-forward network, ...).",
          .zh =
              "autograd::Variable 持有一个张量（它的值），并在 backward() 运行之后持有一个同形状的梯度。我们直接创建的 "
              "Variable 是叶子节点。requires_grad = true 表示需要它的梯度；在模型里，这些就是参数（多头注意力的 "
              "W_q、W_k、W_v、W_o，前馈网络的权重，……）。"});
    show("a", lesson.a);
    show("b", lesson.b);
    t.check(lesson.a.is_leaf() && lesson.a.requires_grad() && lesson.a.op_name() == "leaf",
            {.en = "a is a leaf that requires a gradient", .zh = "a 是需要梯度的叶子节点"});
    t.check(!lesson.a.grad().defined(), {.en = "a has no gradient yet: a.grad() is undefined until backward() runs",
                                         .zh = "a 还没有梯度：backward() 运行之前 a.grad() 是未定义的"});
}

// micrograd engine.py (each op records its inputs); autograd/elementwise.cpp, autograd/reduce.cpp
void building_the_graph(Tutorial& t, Lesson& lesson) {
    note({.en = "Every differentiable op computes its value with a core kernel right away (no lazy evaluation) "
                "and, because an input requires a gradient, also records a node: its name, its inputs, and a "
                "backward function that knows how to send a gradient back to them. We compute\n"
                "    y = Σ_i (a_i · b_i + e^(a_i))\n"
                "in four ops:\n"
                "    p = mul(a, b)    e = exp(a)    s = add(p, e)    y = sum(s)",
          .zh = "每个可微运算都立即用 core 的计算核算出它的值（没有惰性求值）；又因为有输入需要梯度，它还会记录一个"
                "节点：运算名、输入，以及一个知道如何把梯度传回这些输入的反向函数。我们计算\n"
                "    y = Σ_i (a_i · b_i + e^(a_i))\n"
                "共四个运算：\n"
                "    p = mul(a, b)    e = exp(a)    s = add(p, e)    y = sum(s)"});
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
            {.en = "each result knows the op that made it: mul, exp, add, sum",
             .zh = "每个结果都知道是哪个运算生成了它：mul、exp、add、sum"});
    t.check(!y.is_leaf() && y.requires_grad(), {.en = "y is not a leaf, and requires a gradient because a and b do",
                                                .zh = "y 不是叶子节点；因为 a 和 b 需要梯度，它也需要梯度"});
    double by_hand = 0;
    for (int64_t i = 0; i < 3; ++i) {
        const double ai = a.value().at({i}), bi = b.value().at({i});
        by_hand += ai * bi + std::exp(ai);
    }
    t.check_close(y.item(), by_hand, 1e-12,
                  {.en = "y = {:.6f}, the same as Σ(a·b + e^a) in plain doubles",
                   .zh = "y = {:.6f}，与用普通 double 算出的 Σ(a·b + e^a) 相同"},
                  by_hand);
}

// micrograd engine.py › backward (build_topo); autograd/variable.cpp's topological_order
void graph_and_topological_order(Tutorial& t, Lesson& lesson) {
    note({.en = "Each Variable made by an op points to its node (impl()->grad_fn), and the node lists its inputs "
                "(grad_fn->inputs()). Following those pointers from y walks the whole graph:",
          .zh = "由运算生成的每个 Variable 都指向它的节点（impl()->grad_fn），节点又列出它的输入（grad_fn->inputs()）。"
                "从 y 出发沿这些指针走，就走遍了整张图："});
    lesson.order = topological_order(lesson.y);
    const std::vector<const VariableImpl*>& order = lesson.order;
    line();
    for (auto it = order.rbegin(); it != order.rend(); ++it) line(both("    {}"), describe_node(lesson.names, *it));
    std::vector<std::string> listed;
    for (const VariableImpl* v : order) listed.push_back(name_of(lesson.names, v));
    note({.en = "\nbackward() needs the gradient of a Variable to be complete before it is passed on to that "
                "Variable's inputs, i.e. every op that USES a Variable must be processed before the op that MADE "
                "it. A depth-first search that lists each node after its inputs gives that order (reversed):\n"
                "    topological order:  {}\n"
                "    backward visits:    {}",
          .zh = "\nbackward() 要求一个 Variable 的梯度先累积完整，再传给它的输入；也就是说，所有“使用”某个 Variable "
                "的运算，都必须先于“生成”它的那个运算处理。深度优先搜索把每个节点排在它的输入之后，倒过来就是这个"
                "顺序：\n"
                "    拓扑顺序：        {}\n"
                "    backward 的访问： {}"},
         fmt::join(listed, ", "), fmt::join(listed.rbegin(), listed.rend(), ", "));
    bool inputs_first = true;
    std::map<const VariableImpl*, size_t> position;
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    for (const VariableImpl* v : order)
        if (v->grad_fn)
            for (const auto& input : v->grad_fn->inputs())
                inputs_first = inputs_first && position.at(input.get()) < position.at(v);
    line();
    t.check(order.size() == 6, {.en = "6 Variables in the graph: a and b are listed once although a is used twice",
                                .zh = "图中有 6 个 Variable：a 虽然用了两次，a 和 b 都只列出一次"});
    t.check(inputs_first,
            {.en = "every Variable comes after all of its inputs", .zh = "每个 Variable 都排在它的全部输入之后"});
    t.check(order.back() == lesson.y.impl().get(),
            {.en = "y comes last, so backward() starts from it", .zh = "y 排在最后，所以 backward() 从它开始"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (loss.backward()); micrograd engine.py › backward
void backward_chain_rule(Tutorial& t, const Lesson& lesson) {
    note({.en = "y.backward() seeds dy/dy = 1 and walks the order of step 3 from y back to the leaves. Each node "
                "receives the gradient of its output and applies the local rule of its op (written next to the "
                "forward in autograd/elementwise.cpp and autograd/reduce.cpp):\n"
                "    y = sum(s)     ds = dy · (1, 1, 1)   each term of a sum has slope 1\n"
                "    s = add(p, e)  dp = ds,  de = ds\n"
                "    e = exp(a)     da += de · e^a        reuses the saved output e\n"
                "    p = mul(a, b)  da += dp · b,  db = dp · a\n"
                "so a.grad = b + e^a and b.grad = a. Intermediate gradients are thrown away unless asked for with "
                "retain_grad():",
          .zh =
              "y.backward() 以 dy/dy = 1 为起点，按第 3 步的顺序从 y 一路走回叶子节点。每个节点收到它输出的梯度，"
              "再套用它那个运算的局部规则（写在 autograd/elementwise.cpp 和 autograd/reduce.cpp 中前向计算的旁边）：\n"
              "    y = sum(s)     ds = dy · (1, 1, 1)   求和的每一项斜率都是 1\n"
              "    s = add(p, e)  dp = ds,  de = ds\n"
              "    e = exp(a)     da += de · e^a        复用保存下来的输出 e\n"
              "    p = mul(a, b)  da += dp · b,  db = dp · a\n"
              "所以 a.grad = b + e^a，b.grad = a。中间结果的梯度用完即丢，除非用 retain_grad() 要求保留："});
    const Variable &a = lesson.a, &b = lesson.b, &s = lesson.s, &y = lesson.y;
    s.retain_grad();
    y.backward();
    show("s.grad", s.grad());
    show("a.grad", a.grad());
    show("b.grad", b.grad());
    t.check_close(s.grad(), c::ones({3}, F64), 0, both("ds = (1, 1, 1)"));
    t.check_close(a.grad(), c::add(b.value(), c::exp(a.value())), 1e-12, both("a.grad == b + e^a"));
    t.check_close(b.grad(), a.value(), 0, both("b.grad == a"));
    t.check(!lesson.p.grad().defined(),
            {.en = "p.grad() stays undefined: p is not a leaf and did not ask to retain_grad()",
             .zh = "p.grad() 仍是未定义：p 不是叶子节点，也没有要求 retain_grad()"});
    note({.en = "\nbackward() also frees what the nodes saved for it (e's copy of e^a, mul's copies of a and b), "
                "so the same graph cannot be differentiated twice unless the first call keeps it:",
          .zh =
              "\nbackward() 还会释放各节点为它保存的东西（e 保存的 e^a，mul 保存的 a 和 b），所以同一张图不能求导两次，"
              "除非第一次调用时要求保留它："});
    t.check_throws<ValueError>(
        {.en = "a second y.backward() throws ValueError", .zh = "第二次 y.backward() 抛出 ValueError"},
        [&] { y.backward(); }, "already freed");
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
    note({.en = "A derivative is a limit: ∂y/∂a_i ≈ (y(a + h·e_i) - y(a - h·e_i)) / 2h for a small h, where e_i "
                "is 1 at position i and 0 elsewhere (a central difference). Evaluating y twice per element gives "
                "an independent check of backward(). NoGradGuard stops these evaluations from recording graphs.",
          .zh = "导数是一个极限：对很小的 h，∂y/∂a_i ≈ (y(a + h·e_i) - y(a - h·e_i)) / 2h，其中 e_i 在位置 i 为 1、其余"
                "为 0（中心差分）。每个元素算两次 y，就得到对 backward() 的独立检验。NoGradGuard "
                "让这些求值不记录计算图。"});
    const double h = 1e-6;
    line({.en = "\n                    backward()   central difference   |difference|",
          .zh = "\n                    backward()             中心差分         |差|"});
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
    t.check(worst < 1e-8,
            {.en = "all six derivatives agree to {:.1e} (< 1e-8)", .zh = "六个导数全部吻合，相差 {:.1e}（< 1e-8）"},
            worst);
    note({.en = "The error of a central difference is about h²·|f'''|/6 from the formula plus about 1e-16/h from "
                "rounding; with h = 1e-6 in float64 both are below 1e-9. Tutorial 03 turns this into "
                "autograd::gradcheck, which every op of the library is tested with.",
          .zh = "中心差分的误差约为：公式本身的 h²·|f'''|/6，加上舍入带来的约 1e-16/h；float64 下取 h = 1e-6，两者都"
                "低于 1e-9。教程 03 把它做成 autograd::gradcheck，库里的每个运算都用它测试。"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (optimizer.zero_grad()); micrograd's += in backward
void gradients_add_up(Tutorial& t, const Lesson& lesson) {
    note({.en = "a feeds two ops, mul and exp. Each sends back its own share, and the engine adds them before "
                "passing on: a.grad = (share through p) + (share through e) = b + e^a. That was already at work in "
                "step 4; here are the two shares separately:",
          .zh = "a 被两个运算使用：mul 和 exp。两者各自传回自己的那一份，引擎先把它们相加再往下传："
                "a.grad =（经 p 的一份）+（经 e 的一份）= b + e^a。第 4 步里这已经在起作用；下面把两份分开来看："});
    const c::Tensor via_p = lesson.b.value();          // dp · b with dp = 1
    const c::Tensor via_e = c::exp(lesson.a.value());  // de · e^a with de = 1
    show({.en = "share through p", .zh = "经 p 的一份"}, via_p);
    show({.en = "share through e", .zh = "经 e 的一份"}, via_e);
    t.check_close(c::add(via_p, via_e), lesson.a.grad(), 1e-12,
                  {.en = "a.grad is the sum of the two shares", .zh = "a.grad 是这两份之和"});

    note({.en = "\nThe same holds when one op uses a Variable twice. z = Σ x·x has dz/dx = 2x: mul's backward "
                "sends x to its first input and x to its second, and both are x itself.",
          .zh = "\n一个运算两次使用同一个 Variable 时也是如此。z = Σ x·x 的 dz/dx = 2x：mul 的反向函数给第一个输入送 "
                "x，给第二个输入也送 x，而两个输入都是 x 本身。"});
    const Variable x(c::tensor({1, 2, 3}, {3}, F64), true);
    ag::sum(ag::mul(x, x)).backward();
    show("x", x);
    show("x.grad", x.grad());
    t.check_close(x.grad(), c::tensor({2, 4, 6}, {3}, F64), 0, both("d(Σ x·x)/dx = 2x = (2, 4, 6)"));

    note({.en = "\nGradients also accumulate ACROSS backward() calls: a leaf's grad is added to, never "
                "overwritten. A second graph, differentiated without clearing first, doubles it:",
          .zh = "\n梯度在多次 backward() 调用之间也会累加：叶子节点的 grad 只会被加上，从不被覆盖。再建一张图、不先"
                "清零就求导，梯度就翻倍："});
    ag::sum(ag::mul(x, x)).backward();
    show("x.grad", x.grad());
    t.check_close(x.grad(), c::tensor({4, 8, 12}, {3}, F64), 0,
                  {.en = "x.grad is now 2x + 2x = (4, 8, 12)", .zh = "x.grad 现在是 2x + 2x = (4, 8, 12)"});
    x.zero_grad();
    t.check(!x.grad().defined(),
            {.en = "x.zero_grad() forgets it: this is why a training loop zeroes gradients each step",
             .zh = "x.zero_grad() 把它清掉：这就是训练循环每一步都要梯度清零的原因"});
}

// PyTorch's torch.no_grad(), under which the documents' prediction code runs
void no_grad_guard(Tutorial& t, const Lesson& lesson) {
    note({.en = "Evaluation, greedy decoding and optimizer updates need values but no gradients. Inside a "
                "NoGradGuard (PyTorch: with torch.no_grad():) ops compute as usual but record nothing, which saves "
                "the memory of everything backward would have kept:\n"
                "    { ag::NoGradGuard no_grad;  w = ag::mul(a, b); }",
          .zh =
              "评估、贪心解码和优化器更新只需要值，不需要梯度。在 NoGradGuard 之内（PyTorch：with torch.no_grad():），"
              "运算照常计算但什么也不记录，省下了反向传播本要保留的全部内存：\n"
              "    { ag::NoGradGuard no_grad;  w = ag::mul(a, b); }"});
    const int64_t nodes_before = ag::live_node_count();
    Variable w;
    {
        ag::NoGradGuard no_grad;
        w = ag::mul(lesson.a, lesson.b);
        t.check(!ag::grad_enabled(),
                {.en = "inside the guard, grad_enabled() is false", .zh = "在 guard 之内，grad_enabled() 为 false"});
    }
    show("w", w);
    t.check(w.is_leaf() && !w.requires_grad(),
            {.en = "w has no grad_fn and does not require a gradient", .zh = "w 没有 grad_fn，也不需要梯度"});
    t.check(ag::live_node_count() == nodes_before, {.en = "no graph node was created", .zh = "没有创建任何计算图节点"});
    t.check(ag::grad_enabled(),
            {.en = "the guard restores grad mode when it goes out of scope", .zh = "guard 离开作用域时恢复了梯度模式"});
    t.check_throws<ValueError>(
        {.en = "w.backward() throws ValueError: there is no graph to walk",
         .zh = "w.backward() 抛出 ValueError：没有可走的计算图"},
        [&] { w.backward(); }, "does not require a gradient");
    note({.en = "detach() gives the same kind of Variable from an existing one: the value without the graph.",
          .zh = "detach() 从已有的 Variable 得到同样的东西：只有值，没有计算图。"});
    t.check(lesson.s.detach().is_leaf() && !lesson.s.detach().requires_grad(),
            {.en = "s.detach() is a leaf without requires_grad", .zh = "s.detach() 是不需要梯度的叶子节点"});
}

// PyTorch's Tensor.register_hook: watching backward() walk the graph of step 2 again
void hooks(Tutorial& t, const Lesson& lesson) {
    note({.en = "register_hook(fn) calls fn with a Variable's gradient during backward(), once the gradient is "
                "complete. Hooks are how you debug a model whose gradients vanish or explode. We rebuild the "
                "graph of step 2 (the first one was freed by backward) and hook every Variable:",
          .zh = "register_hook(fn) 在 backward() 期间、某个 Variable 的梯度累积完整之后，用这个梯度调用 fn。调试梯度"
                "消失或爆炸的模型，靠的就是钩子。我们重建第 2 步的计算图（第一张已被 backward 释放），给每个 Variable "
                "挂上钩子："});
    const Variable &a = lesson.a, &b = lesson.b;
    a.zero_grad();
    b.zero_grad();
    const Variable p2 = ag::mul(a, b), e2 = ag::exp(a), s2 = ag::add(p2, e2), y2 = ag::sum(s2);
    std::vector<std::string> fired;
    std::map<std::string, c::Tensor> seen;
    const std::pair<const char*, Variable> hooked[] = {{"a", a}, {"b", b}, {"p", p2}, {"e", e2}, {"s", s2}};
    for (const auto& [name, v] : hooked) {
        v.register_hook([&fired, &seen, name = std::string(name)](const c::Tensor& grad) {
            line({.en = "    hook on {}: gradient ({:.4f})", .zh = "    {} 的钩子：梯度 ({:.4f})"}, name,
                 fmt::join(grad.to_vector(), ", "));
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
    t.check(fired == expected,
            {.en = "the hooks fired in backward's order: {}", .zh = "钩子按 backward 的顺序触发：{}"},
            fmt::join(fired, ", "));
    t.check(seen.count("a") && seen.count("s") && fired.size() == 5,
            {.en = "a's hook ran once, not once per use", .zh = "a 的钩子只运行一次，而不是每用一次运行一次"});
    if (seen.count("a"))
        t.check_close(seen["a"], c::add(b.value(), c::exp(a.value())), 1e-12,
                      {.en = "and it saw the complete gradient b + e^a, both shares added",
                       .zh = "而且它看到的是完整的梯度 b + e^a，两份已经相加"});
    t.check_close(a.grad(), c::add(b.value(), c::exp(a.value())), 1e-12,
                  {.en = "after the hooks, a.grad holds the same gradient", .zh = "钩子之后，a.grad 存的是同一个梯度"});
}

// ---- the exercise (--exercise): tutorials/02_autograd/exercise.cpp -------------------------

// micrograd engine.py (an op is a forward and its _backward); autograd::record
void exercise_cube(Tutorial& t) {
    note({.en = "Every op of the library is made like step 5 of tutorial 03 shows: a forward value and a backward "
                "lambda given to autograd::record. Write exercise::cube's backward. The checks compare its value, "
                "its gradient at three points with 3x², and run gradcheck on it (tutorial 03).",
          .zh = "库里的每个运算都像教程 03 第 5 步展示的那样构成：把前向的值和一个反向 lambda 交给 autograd::record。"
                "请写出 exercise::cube 的反向函数。检查会比较它的值、它在三个点上的梯度与 3x²，并对它运行 gradcheck"
                "（教程 03）。"});
    const Variable x(c::tensor({-1.5, 0.5, 2.0}, {3}, F64), true);
    const Variable y = exercise::cube(x);
    t.check_close(y.value(), c::tensor({-3.375, 0.125, 8.0}, {3}, F64), 1e-12, both("cube(x) = x³"));
    ag::sum(y).backward();
    t.check_close(x.grad(), c::tensor({6.75, 0.75, 12.0}, {3}, F64), 1e-12,
                  both("d Σ x³ / dx = 3x² = (6.75, 0.75, 12)"));
    c::Generator gen(202);
    const ag::GradcheckResult r = ag::gradcheck([](const std::vector<Variable>& in) { return exercise::cube(in[0]); },
                                                {Variable(c::randn({2, 3}, gen, F64), true)});
    if (!r.passed) quote(r.report);
    t.check(r.passed, {.en = "gradcheck passes for cube on a random (2, 3) input",
                       .zh = "在随机的 (2, 3) 输入上，cube 通过 gradcheck"});
}

// step 4's chain rule, with tanh in place of exp
void exercise_tanh_gradient(Tutorial& t) {
    note({.en = "y = Σ (a·b + tanh a). What is a.grad? Write the formula in exercise::tanh_version_grad_a; the check "
                "runs backward() and compares.",
          .zh = "y = Σ (a·b + tanh a)。a.grad 是什么？把公式写进 exercise::tanh_version_grad_a；检查会运行 backward() "
                "并比较。"});
    const Variable a2(c::tensor({0.5, -1.0, 2.0}, {3}, F64), true), b2(c::tensor({3.0, 0.5, -2.0}, {3}, F64), true);
    ag::sum(ag::add(ag::mul(a2, b2), ag::tanh(a2))).backward();
    t.check_close(exercise::tanh_version_grad_a(a2.value(), b2.value()), a2.grad(), 1e-12,
                  {.en = "your formula equals a.grad from backward()", .zh = "你的公式等于 backward() 得到的 a.grad"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "tformer tutorial 02 · Autograd: the graph and backward()",
                          .zh = "tformer 教程 02 · 自动微分：计算图与 backward()"},
                .follows = {.en = "every document's loss.backward(); micrograd's engine.py, on tensors",
                            .zh = "每篇文档里的 loss.backward()；micrograd 的 engine.py，换成张量"},
                .exercise = {.en = "write a new op, cube(x) = x³, with autograd::record, and the gradient of "
                                   "step 4's function with tanh in place of exp (tutorials/02_autograd/exercise.cpp)",
                             .zh = "用 autograd::record 写一个新运算 cube(x) = x³，并写出第 4 步的函数把 exp 换成 tanh "
                                   "之后的梯度（tutorials/02_autograd/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Leaves: the Variables we differentiate with respect to",
            .zh = "1. 叶子节点：我们对之求导的 Variable"},
           [&] { leaves(t, lesson); });
    t.step({.en = "2. Building the graph, one op at a time", .zh = "2. 逐个运算地构建计算图"},
           [&] { building_the_graph(t, lesson); });
    t.step({.en = "3. The graph and its topological order", .zh = "3. 计算图及其拓扑顺序"},
           [&] { graph_and_topological_order(t, lesson); });
    t.step({.en = "4. backward(): the chain rule, node by node", .zh = "4. backward()：逐个节点地应用链式法则"},
           [&] { backward_chain_rule(t, lesson); });
    t.step({.en = "5. Checking the gradients with finite differences, by hand", .zh = "5. 手算有限差分来检验梯度"},
           [&] { finite_differences_by_hand(t, lesson); });
    t.step({.en = "6. An input used twice: its gradients add up", .zh = "6. 一个输入用了两次：它的梯度相加"},
           [&] { gradients_add_up(t, lesson); });
    t.step({.en = "7. NoGradGuard: computing without recording", .zh = "7. NoGradGuard：只计算，不记录"},
           [&] { no_grad_guard(t, lesson); });
    t.step({.en = "8. Hooks: watching the gradients flow", .zh = "8. 钩子：观察梯度的流动"}, [&] { hooks(t, lesson); });
    t.exercise({.en = "Exercise 1. A new op: cube(x) = x³", .zh = "练习 1. 一个新运算：cube(x) = x³"},
               [&] { exercise_cube(t); });
    t.exercise({.en = "Exercise 2. Step 4 with tanh instead of exp", .zh = "练习 2. 把第 4 步的 exp 换成 tanh"},
               [&] { exercise_tanh_gradient(t); });
    return t.finish();
}
