// Tutorial 16 · RNN, CNN and self-attention side by side: the same sequence
// encoded three ways, and what each costs, measured on real tensors.
//
// Follows seed 001 (001_57ca8c5b7ec56526.txt), 正文 (CNN, LSTM and the
// Transformer as feature extractors; "any two words are at distance 1"),
// 从以下四个方面对比CNN,RNN,Transformer and 回顾序列编码问题 (y_t = f(y_t-1, x_t),
// f(x_t-1, x_t, x_t+1), f(x_t, A, B)); seed 003 (003_8fde783e4908788c.txt),
// RNN的局限 (hidden states cannot be computed in parallel); seed 004
// (004_a3b87e182ede5d90.txt), CNN 和 self-attention区别?; seed 002
// (002_36798a9f04a86cc8.txt), 1.1 Transformer 简要发展史 (the three families).
// The measures are those of d2l's comparison of CNNs, RNNs and self-attention
// (sequential operations, maximum path length, cost per layer). Steps 1 and 2
// compare the RNN and the convolution with PyTorch (tests/fixtures/).
// Read it with tutorials/16_rnn_cnn_attention/README.md.
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "nn/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

using ag::VariableImpl;

constexpr auto F64 = DType::float64;

// ---- the three encoders ------------------------------------------------------------------

// An Elman RNN (PyTorch's nn.RNN with tanh), one step after the other:
//   h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh),  h_{-1} = 0
// x (T, B, C) -> all hidden states (T, B, H). `steps` receives each x_t's
// node and `states` each h_t, for measuring the graph.
struct Rnn {
    Variable W_ih, W_hh, b_ih, b_hh;  // (H, C), (H, H), (H), (H)
    Variable forward(const Variable& x, std::vector<Variable>* steps = nullptr,
                     std::vector<Variable>* states = nullptr) const {
        const int64_t T = x.shape()[0], B = x.shape()[1], H = W_hh.shape()[0];
        Variable h(c::zeros({B, H}, x.dtype()));
        std::vector<Variable> out;
        for (int64_t t = 0; t < T; ++t) {  // step t needs h_{t-1}: T steps, one after the other
            const Variable x_t = ag::select(x, 0, t);
            if (steps) steps->push_back(x_t);
            h = ag::tanh(ag::linear(x_t, W_ih, b_ih) + ag::linear(h, W_hh, b_hh));
            out.push_back(h);
        }
        if (states) *states = out;
        return ag::stack(out, 0);
    }
};

// A 1-D convolution as seed 001's conv1d and PyTorch's nn.Conv1d compute it
// (channels first), written as one matrix product: each output position
// reads the window of k positions around it (zero padding k/2), all windows
// side by side ("unfold"), times the kernel flattened to (C_out, C_in·k).
//   x (B, C, T), weight (C_out, C_in, k), bias (C_out) -> (B, C_out, T)
Variable conv1d(const Variable& x, const Variable& weight, const Variable& bias) {
    const auto s = x.shape();
    const int64_t k = weight.shape()[2], p = k / 2, T = s[2];
    const Variable zeros(c::zeros({s[0], s[1], p}, x.dtype()));
    const Variable padded = p > 0 ? ag::concat({zeros, x, zeros}, 2) : x;  // (B, C, T + 2p)
    std::vector<Variable> taps;
    for (int64_t j = 0; j < k; ++j) taps.push_back(ag::slice(padded, 2, j, j + T));  // (B, C, T): tap j of every window
    const Variable windows =
        ag::reshape(ag::stack(taps, 2), {s[0], s[1] * k, T});  // (B, C, k, T) -> (B, C·k, T), c-major as the weight
    const Variable flat = ag::reshape(weight, {weight.shape()[0], s[1] * k});                // (C_out, C·k)
    const Variable y = ag::matmul(ag::transpose(windows, 1, 2), ag::transpose(flat, 0, 1));  // (B, T, C_out)
    return ag::transpose(ag::add(y, bias), 1, 2);
}

// ---- measuring the graph -------------------------------------------------------------------

// The longest chain of ops, each waiting for the previous one, that ends in
// `out`: the number of steps no amount of parallel hardware can shorten.
int64_t longest_chain(const Variable& out) {
    std::map<const VariableImpl*, int64_t> memo;
    std::function<int64_t(const VariableImpl*)> depth = [&](const VariableImpl* v) -> int64_t {
        if (!v || !v->grad_fn) return 0;
        if (auto it = memo.find(v); it != memo.end()) return it->second;
        int64_t d = 0;
        for (const auto& in : v->grad_fn->inputs()) d = std::max(d, depth(in.get()));
        return memo[v] = d + 1;
    };
    return depth(out.impl().get());
}

// The fewest `op` nodes on a path from `from` to `to` in the graph, or -1 when
// `to` does not depend on `from`.
int64_t fewest_on_path(const Variable& to, const Variable& from, std::string_view op) {
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max() / 2;
    std::map<const VariableImpl*, int64_t> memo;
    std::function<int64_t(const VariableImpl*)> dist = [&](const VariableImpl* v) -> int64_t {
        if (v == from.impl().get()) return 0;
        if (!v || !v->grad_fn) return kNone;
        if (auto it = memo.find(v); it != memo.end()) return it->second;
        int64_t best = kNone;
        for (const auto& in : v->grad_fn->inputs()) best = std::min(best, dist(in.get()));
        return memo[v] = best + (best < kNone && op == v->grad_fn->name() ? 1 : 0);
    };
    const int64_t d = dist(to.impl().get());
    return d >= kNone ? -1 : d;
}

// Multiply-adds of every matrix product in the graph that ends in `out`,
// read from the recorded ops and the shapes they saw: a `linear` or `matmul`
// with output y and contraction length k costs numel(y) · k. (Every input
// must require a gradient, so that the graph keeps it.)
int64_t count_macs(const Variable& out) {
    std::map<const VariableImpl*, bool> seen;
    int64_t total = 0;
    std::function<void(const VariableImpl*)> visit = [&](const VariableImpl* v) {
        if (!v || !v->grad_fn || seen[v]) return;
        seen[v] = true;
        const std::string name = v->grad_fn->name();
        const auto& in = v->grad_fn->inputs();
        // shapes, not values: the graph keeps a value only while something holds it
        const int64_t outputs = core::shape_numel(v->shape);
        if (name == "linear" && in.at(1)) total += outputs * in[1]->shape[1];      // weight (out, in)
        if (name == "matmul" && in.at(0)) total += outputs * in[0]->shape.back();  // a (..., m, k)
        for (const auto& i : in) visit(i.get());
    };
    visit(out.impl().get());
    return total;
}

// Which input positions the output at position `t` depends on: the positions
// j with a non-zero gradient of Σ (r · y[t]) for random r. y (..., T, D) for
// x (..., T, C); position axis given for each.
std::vector<bool> depends_on(const std::function<Variable(const Variable&)>& f, const c::Tensor& x, int64_t x_axis,
                             int64_t y_axis, int64_t t, c::Generator& gen) {
    const Variable X(x, true);
    const Variable y = f(X);
    ag::sum(ag::select(y, y_axis, t) * Variable(c::randn(ag::select(y, y_axis, t).shape(), gen, y.dtype()))).backward();
    std::vector<bool> out;
    for (int64_t j = 0; j < x.size(x_axis); ++j) out.push_back(c::max(c::abs(X.grad().select(x_axis, j))).item() > 0);
    return out;
}

double norm(const c::Tensor& x) { return std::sqrt(c::sum(c::mul(x, x)).item()); }

// Which of the n inputs output `position` of L stacked convolutions depends on: random (d, d, k) kernels
// without bias, tanh after each, on a random (1, d, n) input (the kernels drawn first, then the input).
std::vector<bool> stacked_conv_reach(int64_t L, int64_t d, int64_t k, int64_t n, int64_t position, c::Generator& gen) {
    std::vector<Variable> ws;
    for (int64_t l = 0; l < L; ++l) ws.push_back(Variable(c::randn({d, d, k}, gen)));
    return depends_on(
        [&](const Variable& x) {
            Variable y = x;
            for (const Variable& w : ws) y = ag::tanh(conv1d(y, w, Variable(c::zeros({d}))));
            return y;
        },
        c::randn({1, d, n}, gen), 2, 2, position, gen);
}

// The convolution of tensors laid out (B, T, D): kernel (D, D, k), no bias, zero padding k/2 -> (B, T, D).
c::Tensor conv_over_time(const c::Tensor& in, const c::Tensor& kernel) {
    const int64_t d = kernel.size(0);
    return conv1d(Variable(in.transpose(1, 2).contiguous()), Variable(kernel), Variable(c::zeros({d}, F64)))
        .value()
        .transpose(1, 2);
}

// One head of width d: the self-attention the steps set beside an RNN and a convolution of width d.
nn::MultiHeadAttention::Options single_head(int64_t d) {
    return {.key_size = d, .query_size = d, .value_size = d, .num_hiddens = d, .num_heads = 1};
}

// What the steps share: one generator, drawn from in step order (every step but 7, and the exercise).
struct Lesson {
    c::Generator gen{16};
};

// ---- the steps --------------------------------------------------------------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › 回顾序列编码问题 (y_t = f(y_t-1, x_t), f(x_t-1, x_t, x_t+1), f(x_t, A, B))
void sequence_encoding_review(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 001's preface (前言) sets out to 'sort out the material and run the code, so the principles are "
        "understood': this tutorial does that for its comparison of the three feature extractors. Seed 001 "
        "reviews how a layer turns the inputs x_1 .. x_n into outputs y_1 .. y_n:\n"
        "    RNN        y_t = f(y_t-1, x_t)           the previous output and the current input\n"
        "    CNN        y_t = f(x_t-1, x_t, x_t+1)    a window of neighbours (kernel size 3)\n"
        "    Attention  y_t = f(x_t, A, B)            x_t against a whole sequence; A = B = X is self-attention\n"
        "All three below are written with autograd ops (the RNN as the loop it is) and checked against "
        "PyTorch: tests/fixtures/tutorial_layers.safetensors holds nn.RNN(4, 5) on a (7, 2, 4) input and "
        "nn.Conv1d(4, 6, kernel_size=3, padding=1) on (2, 4, 7), with the gradients of sum(output · u).");
    const tutorial::Reference ref("tutorial_layers");
    const Rnn rnn{Variable(ref["rnn.param.weight_ih_l0"], true), Variable(ref["rnn.param.weight_hh_l0"], true),
                  Variable(ref["rnn.param.bias_ih_l0"], true), Variable(ref["rnn.param.bias_hh_l0"], true)};
    const Variable x(ref["rnn.input.x"], true);
    const Variable h = rnn.forward(x);
    ag::sum(h * Variable(ref["rnn.input.upstream"])).backward();
    note("    RNN: x {} (T, B, C) -> hidden states {} (T, B, H)", c::shape_str(x.shape()), c::shape_str(h.shape()));
    t.check_allclose(h.value(), ref["rnn.output"], 1e-5, "the RNN loop's hidden states match nn.RNN's");
    t.check_allclose(x.grad(), ref["rnn.grad.input.x"], 1e-4, "d/dx matches (backpropagation through time)");
    t.check_allclose(rnn.W_hh.grad(), ref["rnn.grad.param.weight_hh_l0"], 1e-4, "d/d weight_hh matches");
    t.check_allclose(rnn.b_ih.grad(), ref["rnn.grad.param.bias_ih_l0"], 1e-4, "d/d bias_ih matches");

    const Variable xc(ref["conv3.input.x"], true), w(ref["conv3.param.weight"], true), b(ref["conv3.param.bias"], true);
    const Variable y = conv1d(xc, w, b);
    ag::sum(y * Variable(ref["conv3.input.upstream"])).backward();
    note("    CNN: x {} (B, C, T) -> {} (B, C_out, T)", c::shape_str(xc.shape()), c::shape_str(y.shape()));
    t.check_allclose(y.value(), ref["conv3.output"], 1e-5, "the unfolded convolution matches nn.Conv1d's output");
    t.check_allclose(xc.grad(), ref["conv3.grad.input.x"], 1e-4, "d/dx matches");
    t.check_allclose(w.grad(), ref["conv3.grad.param.weight"], 1e-4, "d/d weight matches");

    nn::MultiHeadAttention attention(single_head(4), lesson.gen);
    const Variable X(c::randn({2, 7, 4}, lesson.gen));
    const Variable z = attention(X, X, X);
    note("    self-attention: X {} (B, T, D) -> {} (B, T, D), every output against all 7 inputs",
         c::shape_str(X.shape()), c::shape_str(z.shape()));
    t.check(z.shape() == c::Shape{2, 7, 4} && attention.attention_weights().shape() == c::Shape{2, 7, 7},
            "one (7, 7) matrix of weights per sequence: y_t = f(x_t, X, X)");
}

// seed 003 (003_8fde783e4908788c.txt) › RNN的局限; seed 001 › 从以下四个方面对比 (并行计算能力)
void sequential_operations(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 003 (RNN的局限): an RNN's hidden state h_t needs h_t-1, so 'it has no way to compute in "
        "parallel'. Measured on the graphs autograd records: the longest chain of ops where each waits for "
        "the one before, for sequences of n = 4 .. 32 positions of d = 8 features (one layer each):");
    line("\n        n    RNN    CNN (k = 3)    self-attention");
    std::vector<int64_t> rnn_chain, cnn_chain, att_chain;
    for (int64_t n : {4, 8, 16, 32}) {
        const int64_t d = 8;
        const Rnn rnn{Variable(c::randn({d, d}, lesson.gen), true), Variable(c::randn({d, d}, lesson.gen), true),
                      Variable(c::zeros({d}), true), Variable(c::zeros({d}), true)};
        const Variable xs(c::randn({n, 1, d}, lesson.gen), true);
        rnn_chain.push_back(longest_chain(rnn.forward(xs)));
        const Variable xc(c::randn({1, d, n}, lesson.gen), true);
        cnn_chain.push_back(
            longest_chain(conv1d(xc, Variable(c::randn({d, d, 3}, lesson.gen), true), Variable(c::zeros({d}), true))));
        nn::MultiHeadAttention a(single_head(d), lesson.gen);
        const Variable xa(c::randn({1, n, d}, lesson.gen), true);
        att_chain.push_back(longest_chain(a(xa, xa, xa)));
        line("    {:>5} {:>6} {:>14} {:>17}", n, rnn_chain.back(), cnn_chain.back(), att_chain.back());
    }
    line();
    const int64_t per_step = (rnn_chain[1] - rnn_chain[0]) / 4;
    t.check(per_step > 0 && rnn_chain[2] - rnn_chain[1] == 8 * per_step && rnn_chain[3] - rnn_chain[2] == 16 * per_step,
            fmt::format("RNN: the chain grows by exactly {} ops per position: O(n) sequential steps", per_step));
    t.check(std::all_of(cnn_chain.begin(), cnn_chain.end(), [&](int64_t v) { return v == cnn_chain[0]; }),
            fmt::format("CNN: {} ops whatever n: all positions at once, O(1)", cnn_chain[0]));
    t.check(std::all_of(att_chain.begin(), att_chain.end(), [&](int64_t v) { return v == att_chain[0]; }),
            fmt::format("self-attention: {} ops whatever n, O(1)", att_chain[0]));
    note(
        "Inside each op of the CNN and of self-attention all positions are computed together (one matrix "
        "product over all of them), which is what a GPU or a BLAS library parallelises; the RNN hands its "
        "hardware n small products, one after the other. This is the Transformer's 'full-length parallel "
        "network' of seed 000's 总结, and the first point of seed 001's comparison ('并行计算能力').");
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 ("any two words are at distance 1")
void maximum_path_length(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 001 (正文): the Transformer's key gain is that 'the distance between any two words is 1'. "
        "Measured: for the first input x_0 to reach the last output y_n-1,\n"
        "- RNN: how many applications of the cell (tanh nodes) lie on the path, counted in the graph;\n"
        "- CNN: how many stacked convolutions are needed before y_n-1 depends on x_0 at all (non-zero "
        "gradient), kernel 3 and kernel 5;\n"
        "- self-attention: the same with stacked attention layers.");
    line("\n        n    RNN steps    CNN layers, k = 3    k = 5    self-attention layers");
    bool rnn_ok = true, cnn_ok = true, att_ok = true;
    for (int64_t n : {4, 8, 16}) {
        const int64_t d = 4;
        const Rnn rnn{Variable(c::randn({d, d}, lesson.gen)), Variable(c::randn({d, d}, lesson.gen)),
                      Variable(c::zeros({d})), Variable(c::zeros({d}))};
        std::vector<Variable> steps, states;
        const Variable xs(c::randn({n, 1, d}, lesson.gen), true);
        rnn.forward(xs, &steps, &states);
        const int64_t rnn_steps =
            fewest_on_path(states.back(), steps.front(), "tanh") - 1;  // x_0's own cell not counted
        auto cnn_layers = [&](int64_t k) {
            for (int64_t L = 1; L <= 2 * n; ++L)
                if (stacked_conv_reach(L, d, k, n, n - 1, lesson.gen).front()) return L;
            return int64_t{-1};
        };
        const int64_t k3 = cnn_layers(3), k5 = cnn_layers(5);
        nn::MultiHeadAttention a(single_head(d), lesson.gen);
        const auto reach = depends_on([&](const Variable& x) { return a(x, x, x); }, c::randn({1, n, d}, lesson.gen), 1,
                                      1, n - 1, lesson.gen);
        const int64_t att_layers = reach.front() ? 1 : -1;
        line("    {:>5} {:>12} {:>20} {:>8} {:>24}", n, rnn_steps, k3, k5, att_layers);
        rnn_ok = rnn_ok && rnn_steps == n - 1;
        cnn_ok = cnn_ok && k3 == n - 1 && k5 == (n - 1 + 1) / 2;
        att_ok = att_ok && att_layers == 1 && std::all_of(reach.begin(), reach.end(), [](bool b) { return b; });
    }
    line();
    t.check(rnn_ok, "RNN: n - 1 cell applications between x_0 and h_n-1: O(n)");
    t.check(cnn_ok,
            "CNN: n - 1 layers with kernel 3, ⌈(n - 1)/2⌉ with kernel 5 (each layer reaches k/2 further): O(n/k)");
    t.check(att_ok, "self-attention: one layer, and y_n-1 depends on every input: O(1)");
    note(
        "Seed 001 (正文): 'CNN extracts local features well and dependencies weakly', 'LSTM performance "
        "drops on long sentences'. The second point is about what happens along those long paths (step 5).");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 单头/多头attention时间复杂度; d2l's table of CNNs, RNNs and self-attention
void cost_per_layer(Tutorial& t, Lesson& lesson) {
    note(
        "Multiply-adds of one layer on n positions of d features, counted from the shapes of the matrix "
        "products each implementation above runs (d2l's table):\n"
        "- RNN: n steps, each x_t W_ihᵀ and h W_hhᵀ: 2 n d²;\n"
        "- CNN: the unfolded (n, k·d) windows times the (k·d, d) kernel: k n d²;\n"
        "- self-attention: Q, K, V and W_o projections 4 n d², scores Q Kᵀ and weights·V 2 n² d.");
    auto counts = [](int64_t n, int64_t d, int64_t k) {
        return std::array<int64_t, 3>{n * (d * d + d * d), n * (k * d) * d, 4 * n * d * d + 2 * n * n * d};
    };
    line("\n        n      d     RNN           CNN (k = 3)    self-attention");
    for (const auto& [n, d] : {std::pair<int64_t, int64_t>{10, 512}, {100, 512}, {1000, 512}, {10000, 512}}) {
        const auto m = counts(n, d, 3);
        line("    {:>6} {:>6} {:>13} {:>14} {:>17}", n, d, m[0], m[1], m[2]);
    }
    line();
    // the formulas, against the products the three implementations above actually record
    const int64_t n = 6, d = 8;
    const Rnn rnn{Variable(c::randn({d, d}, lesson.gen), true), Variable(c::randn({d, d}, lesson.gen), true),
                  Variable(c::zeros({d}), true), Variable(c::zeros({d}), true)};
    const int64_t rnn_macs = count_macs(rnn.forward(Variable(c::randn({n, 1, d}, lesson.gen), true)));
    const int64_t cnn_macs =
        count_macs(conv1d(Variable(c::randn({1, d, n}, lesson.gen), true),
                          Variable(c::randn({d, d, 3}, lesson.gen), true), Variable(c::zeros({d}), true)));
    nn::MultiHeadAttention a(single_head(d), lesson.gen);
    const Variable xa(c::randn({1, n, d}, lesson.gen), true);
    const int64_t att_macs = count_macs(a(xa, xa, xa));
    note("    counted in the recorded graphs for n = 6, d = 8: RNN {}, CNN {}, self-attention {}", rnn_macs, cnn_macs,
         att_macs);
    t.check(rnn_macs == counts(n, d, 3)[0] && cnn_macs == counts(n, d, 3)[1] && att_macs == counts(n, d, 3)[2],
            "they equal the formulas 2nd² = 768, knd² = 1152 and 4nd² + 2n²d = 2112");
    // the two parts of self-attention, measured apart: the scores and the weighted sum (the attention
    // alone, no projections) against the whole layer, for n below, at and above 2d
    std::string parts;
    std::array<int64_t, 3> quad{}, proj{};
    const std::array<int64_t, 3> lengths = {6, 2 * d, 64};
    for (size_t i = 0; i < lengths.size(); ++i) {
        const Variable x(c::randn({1, lengths[i], d}, lesson.gen), true);
        nn::DotProductAttention bare({});
        quad[i] = count_macs(bare(x, x, x));
        proj[i] = count_macs(a(x, x, x)) - quad[i];
        parts += fmt::format("\n      n = {:>2}: scores and weighted sum {:>6}, projections {:>6}", lengths[i], quad[i],
                             proj[i]);
    }
    note("    measured in the recorded graphs for d = 8 (the attention alone, and the layer minus it):{}", parts);
    t.check(quad[0] < proj[0] && quad[1] == proj[1] && quad[2] > proj[2],
            "self-attention's quadratic part (2n²d) stays below its own projections (4nd²) while n < 2d "
            "(sentences), equals them at n = 2d, and dominates when n ≫ d");
    note(
        "Counted this way a self-attention layer does about twice the RNN's multiply-adds on a sentence (its "
        "four projections against the RNN's two products per step), but in O(1) sequential steps instead of "
        "O(n): the work is there to be done in parallel (step 2). d2l's table compares the n²d of the "
        "attention itself with the RNN's nd², the usual way to say that self-attention is cheap while "
        "n < d. The quadratic term is the price of the distance-1 paths: every position is compared with "
        "every other; for long documents it is the term people work to remove.");
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 ("LSTM performance drops on long sentences")
void long_paths_fade(Tutorial& t, Lesson& lesson) {
    note(
        "Along the RNN's path every step multiplies the gradient by W_hhᵀ and by tanh's slope (at most 1): "
        "with a small W_hh the influence of x_j on h_n-1 shrinks geometrically with the distance. Measured "
        "as the size of ∂h_n-1/∂x_j for n = 32, against self-attention's ∂y_n-1/∂x_j:");
    const int64_t n = 32, d = 8;
    const Rnn rnn{Variable(c::mul(c::randn({d, d}, lesson.gen, F64), 1.0 / std::sqrt(double(d)))),
                  Variable(c::mul(c::randn({d, d}, lesson.gen, F64), 0.5 / std::sqrt(double(d)))),
                  Variable(c::zeros({d}, F64)), Variable(c::zeros({d}, F64))};
    const Variable xs(c::randn({n, 1, d}, lesson.gen, F64), true);
    ag::sum(ag::select(rnn.forward(xs), 0, n - 1) * Variable(c::randn({1, d}, lesson.gen, F64))).backward();
    nn::MultiHeadAttention a(single_head(d), lesson.gen);
    a.to(F64);
    const Variable xa(c::randn({1, n, d}, lesson.gen, F64), true);
    ag::sum(ag::select(a(xa, xa, xa), 1, n - 1) * Variable(c::randn({1, d}, lesson.gen, F64))).backward();
    std::vector<double> g_rnn, g_att;
    for (int64_t j = 0; j < n; ++j) {
        g_rnn.push_back(norm(xs.grad().select(0, j)));
        g_att.push_back(norm(xa.grad().select(1, j)));
    }
    line("\n      distance n-1-j   |∂h/∂x_j| RNN    |∂y/∂x_j| self-attention");
    for (int64_t j : {31, 30, 28, 24, 16, 8, 0})
        line("      {:>14} {:>15.2e} {:>20.2e}", n - 1 - j, g_rnn[j], g_att[j]);
    line();
    auto mean = [](const std::vector<double>& v, int64_t from, int64_t to) {
        double s = 0;
        for (int64_t i = from; i < to; ++i) s += v[i];
        return s / static_cast<double>(to - from);
    };
    const double rnn_ratio = mean(g_rnn, 0, 8) / mean(g_rnn, 23, 31),
                 att_ratio = mean(g_att, 0, 8) / mean(g_att, 23, 31);
    t.check(rnn_ratio < 1e-3, fmt::format("RNN: the first 8 positions reach h_31 {:.1e} times as strongly as positions "
                                          "23-30",
                                          rnn_ratio));
    t.check(att_ratio > 0.2 && att_ratio < 5,
            fmt::format("self-attention: {:.2f} times: distance does not matter", att_ratio));
    note(
        "LSTMs (seed 001's 'LSTM 建模输入序列的依赖关系，保存和更新记忆单元') add gates that can keep this "
        "product near 1, which helps but does not shorten the path.");
}

// Step 6 (b): a second sequence, and the weights each layer gives position 2's neighbours in both.
void content_decides_the_weights(Tutorial& t, Lesson& lesson, const c::Tensor& x, const c::Tensor& kernel) {
    const int64_t n = x.size(1), d = x.size(2);
    note(
        "\n(b) Change the CONTENT of the sequence and look at the weights each layer gives position 2's "
        "neighbours:");
    const c::Tensor x2 = c::randn({1, n, d}, lesson.gen, F64);
    nn::MultiHeadAttention sa(single_head(d), lesson.gen);
    sa.to(F64);
    sa(Variable(x), Variable(x), Variable(x));
    const c::Tensor w1 = sa.attention_weights().select(0, 0).select(0, 2).clone();
    sa(Variable(x2), Variable(x2), Variable(x2));
    const c::Tensor w2 = sa.attention_weights().select(0, 0).select(0, 2).clone();
    show("self-attention weights of position 2, sequence 1", w1);
    show("self-attention weights of position 2, sequence 2", w2);
    // the convolution's weight on x[t + j] is the kernel tap j for every input: its Jacobian is constant
    auto conv_jacobian_row = [&](const c::Tensor& in) {
        c::Tensor J = c::zeros({n}, F64);
        for (int64_t j = 0; j < n; ++j) {  // central difference of y[2, 0] w.r.t. x[j, 0]
            c::Tensor up = in.clone(), down = in.clone();
            up.set({0, j, 0}, up.at({0, j, 0}) + 1e-6);
            down.set({0, j, 0}, down.at({0, j, 0}) - 1e-6);
            J.set({j}, (conv_over_time(up, kernel).at({0, 2, 0}) - conv_over_time(down, kernel).at({0, 2, 0})) / 2e-6);
        }
        return J;
    };
    const c::Tensor j1 = conv_jacobian_row(x), j2 = conv_jacobian_row(x2);
    show("convolution's weights on x[j] for output 2, sequence 1", j1);
    t.check_close(j1, j2, 1e-8,
                  "the convolution weighs position 2's window the same for both sequences: 1/3, 1/3, 1/3");
    t.check(c::max(c::abs(c::sub(w1, w2))).item() > 1e-3,
            "self-attention's weights differ: they depend on the query and the keys, i.e. on the content");
    note(
        "So seed 004's answer, made exact: a convolution is a weighted sum whose weights depend only on the "
        "offset (and a fixed, local window); self-attention's weights are computed from the content, over "
        "the whole sequence. Multi-head attention gives several such weightings at once (tutorial 07, step 8), "
        "much as a convolution has several channels (seed 002 2.3: 'like CNN's multiple channels').");
}

// seed 004 (004_a3b87e182ede5d90.txt) › CNN 和 self-attention区别?
void cnn_or_self_attention(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 004: both are weighted sums; a CNN's weights sum a fixed region whatever it holds, while "
        "self-attention's weights come from comparing the query with the other positions. Two experiments on "
        "one sequence (n = 6, d = 4).\n\n"
        "(a) A convolution that averages each position with its two neighbours, and a self-attention whose "
        "scores are all 0 but whose mask keeps only the neighbours |s - t| ≤ 1: the same weights, the same "
        "outputs at the interior positions (at the ends the convolution's zero padding counts as a "
        "neighbour, the attention's mask leaves it out):");
    const int64_t n = 6, d = 4;
    const c::Tensor x = c::randn({1, n, d}, lesson.gen, F64);  // (B, T, D)
    c::Tensor kernel = c::zeros({d, d, 3}, F64);
    for (int64_t ch = 0; ch < d; ++ch)
        for (int64_t j = 0; j < 3; ++j) kernel.set({ch, ch, j}, 1.0 / 3);
    nn::DotProductAttention attention({.dropout = 0.0});
    const c::Tensor window =
        c::le(c::abs(c::sub(c::arange(n, F64).unsqueeze(1), c::arange(n, F64).unsqueeze(0))), 1.0);  // (T, T)
    const c::Tensor uniform_attention = attention(Variable(c::zeros({1, n, d}, F64)),
                                                  Variable(c::zeros({1, n, d}, F64)), Variable(x), window.unsqueeze(0))
                                            .value();
    t.check_close(conv_over_time(x, kernel).slice(1, 1, n - 1), uniform_attention.slice(1, 1, n - 1), 1e-14,
                  "positions 1-4: the averaging convolution = attention with constant scores over a window");
    content_decides_the_weights(t, lesson, x, kernel);
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 从以下四个方面对比CNN,RNN,Transformer
void four_aspects() {
    note(
        "Seed 001 compares CNN, RNN and the Transformer on four aspects. What this tutorial measured, and "
        "what it did not:\n"
        "- 并行计算能力及运行效率 (parallelism and efficiency): step 2 (O(n) sequential steps against O(1)) "
        "and step 4 (O(n d²), O(k n d²), O(n² d) multiply-adds);\n"
        "- 长距离特征捕获能力 (long-distance features): step 3 (path lengths n - 1, ⌈(n - 1)/(k/2)⌉ and 1) "
        "and step 5 (how influence fades along the RNN's path);\n"
        "- 语义特征提取能力 and 任务综合特征抽取能力 (semantic and task-level features): claims about "
        "trained models on benchmarks (the comparison seed 001 cites, Zhang Junlin's, reports experiments on "
        "word-sense disambiguation and translation); they are not properties of one layer and are not "
        "reproduced here. Tutorials 12-14 train Transformers; training the other two on the same tasks "
        "would be the experiment.");
}

// BART/T5-like: an encoder and a decoder of step 8's sizes; which source positions a target position depends on.
void encoder_decoder_family(Tutorial& t, Lesson& lesson, const nn::TransformerOptions& o) {
    nn::TransformerEncoder encoder(11, o, lesson.gen);
    nn::TransformerDecoder decoder(11, o, lesson.gen);
    encoder.to(F64);
    decoder.to(F64);
    const c::Tensor src = c::from_vector(std::vector<int64_t>{3, 4, 5, 6, 7}, {1, 5});
    const c::Tensor tgt = c::from_vector(std::vector<int64_t>{1, 8, 9, 2, 5}, {1, 5});
    const Variable memory = encoder.forward(src, c::Tensor());
    const Variable mem_leaf(memory.value(), true);
    nn::DecoderState state = decoder.init_state(mem_leaf, c::Tensor());
    const Variable logits = decoder.forward(tgt, state);
    ag::sum(ag::select(logits, 1, 2) * Variable(c::randn({1, 11}, lesson.gen, F64))).backward();
    bool sees_source = true;
    for (int64_t s = 0; s < 5; ++s)
        sees_source = sees_source && c::max(c::abs(mem_leaf.grad().select(1, s))).item() > 0;
    t.check(sees_source,
            "BART/T5-like: target position 2 depends on all 5 source positions (through the cross-attention)");
    note(
        "Seed 002 adds that GPT-2 is built from decoder blocks and BERT from encoder blocks: the second "
        "pattern and the first. Tutorial 14's classifier is BERT-like; tutorials 12 and 13 train the "
        "encoder-decoder.");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 Transformer 简要发展史
void three_families(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 002's history: GPT (2018), BERT (2018), GPT-2, DistilBERT, BART and T5 (2019), GPT-3 (2020), in "
        "three families that differ in which positions may see which:\n"
        "- BERT-like (autoencoding, the encoder alone): every position sees every position;\n"
        "- GPT-like (autoregressive, the decoder alone): position t sees positions ≤ t;\n"
        "- BART/T5-like (sequence-to-sequence, the original encoder-decoder): the target sees the whole "
        "source and its own past.\n"
        "Measured on tiny models built from the library's blocks: which inputs each output depends on "
        "(non-zero gradients), for 5 positions:");
    const nn::TransformerOptions o = tutorial::block_options({.num_hiddens = 8, .ffn_num_hiddens = 16, .num_heads = 2});
    nn::EncoderBlock block(o, lesson.gen);
    block.to(F64);
    const c::Tensor x = c::randn({1, 5, 8}, lesson.gen, F64);
    auto pattern = [&](const std::function<Variable(const Variable&)>& f) {
        std::vector<std::vector<bool>> rows;
        for (int64_t q = 0; q < 5; ++q) rows.push_back(depends_on(f, x, 1, 1, q, lesson.gen));
        return rows;
    };
    const auto bert = pattern([&](const Variable& v) { return block.forward(v, c::Tensor()); });
    const auto gpt = pattern([&](const Variable& v) { return block.forward(v, nn::causal_valid_lens(1, 5)); });
    auto print = [](const std::string& name, const std::vector<std::vector<bool>>& rows) {
        std::string s = fmt::format("    {}:\n", name);
        for (const auto& r : rows) {
            s += "      ";
            for (bool b : r) s += b ? "■ " : "· ";
            s += "\n";
        }
        return s;
    };
    note("{}{}", print("BERT-like, output t (rows) depends on input s (columns)", bert),
         print("GPT-like, the same block with the no-peek mask", gpt));
    bool all = true, lower = true;
    for (int64_t q = 0; q < 5; ++q)
        for (int64_t s = 0; s < 5; ++s) {
            all = all && bert[q][s];
            lower = lower && gpt[q][s] == (s <= q);
        }
    t.check(all, "BERT-like: every output depends on all 5 inputs");
    t.check(lower, "GPT-like: output t depends exactly on inputs 0..t");
    encoder_decoder_family(t, lesson, o);
}

// ---- the exercise (--exercise): tutorials/16_rnn_cnn_attention/exercise.cpp ----------------

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 (a CNN and long distances): the receptive field, by the reader
void exercise_receptive_field(Tutorial& t, Lesson& lesson) {
    note(
        "Write exercise::receptive_field(layers, kernel) and exercise::layers_to_connect(n, kernel). The "
        "checks measure both on stacked convolutions (which input positions the middle or last output "
        "depends on) and compare.");
    const int64_t d = 2;
    for (const int64_t k : {3, 5}) {
        for (const int64_t L : {1, 2, 3}) {
            const int64_t n = 21;
            const auto reach = stacked_conv_reach(L, d, k, n, n / 2, lesson.gen);
            const int64_t seen = std::count(reach.begin(), reach.end(), true);
            t.check(exercise::receptive_field(L, k) == seen,
                    fmt::format("kernel {}, {} layer(s): the middle output sees {} positions (you say {})", k, L, seen,
                                exercise::receptive_field(L, k)));
        }
        for (const int64_t n : {5, 8}) {
            int64_t measured = -1;
            for (int64_t L = 1; L <= n && measured < 0; ++L)
                if (stacked_conv_reach(L, d, k, n, n - 1, lesson.gen).front()) measured = L;
            t.check(exercise::layers_to_connect(n, k) == measured,
                    fmt::format("kernel {}, n = {}: {} layers connect the last position to the first (you say {})", k,
                                n, measured, exercise::layers_to_connect(n, k)));
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = "tformer tutorial 16 · RNN, CNN and self-attention side by side",
         .follows = "seed 001 正文, 从以下四个方面对比CNN,RNN,Transformer, 回顾序列编码问题; seed 003 RNN的局限; "
                    "seed 004 CNN 和 self-attention区别?; seed 002 1.1 Transformer 简要发展史",
         .exercise = "write the receptive field of stacked convolutions and the layers a CNN needs "
                     "to connect two positions (tutorials/16_rnn_cnn_attention/exercise.cpp)"});
    Lesson lesson;
    t.step("1. Three ways to encode a sequence (回顾序列编码问题)", [&] { sequence_encoding_review(t, lesson); });
    t.step("2. Sequential operations: what must wait for what", [&] { sequential_operations(t, lesson); });
    t.step("3. Maximum path length: how far apart two positions are", [&] { maximum_path_length(t, lesson); });
    t.step("4. Cost per layer: O(n d²), O(k n d²), O(n² d)", [&] { cost_per_layer(t, lesson); });
    t.step("5. Long paths fade: the gradient through an RNN", [&] { long_paths_fade(t, lesson); });
    t.step("6. CNN or self-attention? Seed 004's question", [&] { cnn_or_self_attention(t, lesson); });
    t.step("7. Seed 001's four aspects", [&] { four_aspects(); });
    t.step("8. After 2017: three families (seed 002 1.1 简要发展史)", [&] { three_families(t, lesson); });
    t.exercise("Exercise. The CNN's receptive field and path length", [&] { exercise_receptive_field(t, lesson); });
    return t.finish();
}
