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
// (sequential operations, maximum path length, cost per layer); step 7 trains
// the three layers on small tasks for seed 001's other two aspects. Steps 1
// and 2 compare the RNN and the convolution with PyTorch (tests/fixtures/).
// Read it with tutorials/16_rnn_cnn_attention/README.md.
// tutorial-languages: en zh
// tutorial-fault: path-length-real-division | the formula ⌈(n − 1)/⌊k/2⌋⌉ gives the layers step 3 measured
// tutorial-fault: bidirectional-rnn | semantic: the RNN's output at 'bank' knows the cue on its left
// tutorial-fault: circular-padding | long distance: the convolution stays at chance
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "nn/transformer.hpp"
#include "optim/adam.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
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
// `padded` puts the k/2 columns in front of and behind x (zeros unless a fault says otherwise).
Variable conv1d(const Variable& x, const Variable& weight, const Variable& bias,
                const std::function<Variable(const Variable&, int64_t)>& padded = {}) {
    const auto s = x.shape();
    const int64_t k = weight.shape()[2], p = k / 2, T = s[2];
    const Variable zeros(c::zeros({s[0], s[1], p}, x.dtype()));
    const Variable framed = p == 0 ? x : padded ? padded(x, p) : ag::concat({zeros, x, zeros}, 2);  // (B, C, T + 2p)
    std::vector<Variable> taps;
    for (int64_t j = 0; j < k; ++j) taps.push_back(ag::slice(framed, 2, j, j + T));  // (B, C, T): tap j of every window
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

// ---- seed 001's four aspects: the three layers trained on small tasks ----------------------------

// The toy sentences' words, as ids: an ambiguous 'bank' and the cues that
// decide its sense (river, water: sense 0; money, loan: sense 1), nouns in
// the singular (cat, dog) and the plural (cats, dogs), a verb, and fillers.
namespace toy {
constexpr int64_t bank = 0, river = 1, money = 3;  // the cues: river 1, water 2 (sense 0); money 3, loan 4 (sense 1)
constexpr int64_t cat = 5, cats = 7;               // nouns: cat 5, dog 6 (singular); cats 7, dogs 8 (plural)
constexpr int64_t verb = 9, first_filler = 10, vocab = 16;
constexpr int64_t n = 10;       // positions per sentence
constexpr int64_t width = 16;   // d: the features of every layer
constexpr int64_t steps = 300;  // Adam steps of 64 sentences, lr 0.01, for every layer and task
constexpr int64_t tested = 1000;
}  // namespace toy

// The three tasks, one for each aspect of seed 001 that needs a trained model:
//   semantic       'bank' somewhere, a cue right before or right after it; the output AT 'bank' must
//                  tell its sense (a word's meaning from its context, seed 002 1.2.1's context-aware embeddings)
//   long_distance  a subject first, two attractor nouns between, a verb last; the output at the verb
//                  must tell the subject's number across n - 1 positions (agreement)
//   both           the two at once, at the verb: 2 · number + sense, four classes
enum class Task { semantic, long_distance, both };

// A batch of one task.
struct Sentences {
    c::Tensor tokens;              // (B, n) int64
    c::Tensor read_at;             // (B, n, 1) float64: 1 at the position whose output is classified
    c::Tensor labels;              // (B) int64
    std::vector<bool> cue_before;  // B: the cue precedes 'bank' (the semantic task)
};

Sentences make_sentences(Task task, int64_t B, c::Generator& gen) {
    const int64_t n = toy::n;
    std::vector<int64_t> tokens(B * n), labels(B);
    std::vector<double> read(B * n, 0.0);
    Sentences out;
    for (int64_t b = 0; b < B; ++b) {
        int64_t* s = &tokens[b * n];
        std::vector<bool> used(n, false);
        for (int64_t i = 0; i < n; ++i) s[i] = toy::first_filler + gen.randint(toy::vocab - toy::first_filler);
        auto noun = [&](int64_t number) { return (number ? toy::cats : toy::cat) + gen.randint(2); };
        int64_t number = 0, sense = 0, read_at = n - 1;
        if (task != Task::semantic) {  // the subject at 0, the verb at n - 1
            number = gen.randint(2);
            s[0] = noun(number), s[n - 1] = toy::verb;
            used[0] = used[n - 1] = true;
        }
        if (task != Task::long_distance) {  // 'bank' with a cue next to it
            const int64_t p = task == Task::semantic ? 1 + gen.randint(n - 2) : 2 + gen.randint(n - 4);
            const bool before = gen.randint(2) == 0;
            sense = gen.randint(2);
            s[p] = toy::bank;
            s[before ? p - 1 : p + 1] = (sense ? toy::money : toy::river) + gen.randint(2);
            used[p] = used[before ? p - 1 : p + 1] = true;
            out.cue_before.push_back(before);
            if (task == Task::semantic) read_at = p;
        }
        if (task != Task::semantic)  // attractors: nouns of either number between subject and verb
            for (int64_t placed = 0; placed < (task == Task::both ? 1 : 2);) {
                const int64_t at = 1 + gen.randint(n - 2);
                if (used[at]) continue;
                s[at] = noun(gen.randint(2)), used[at] = true, ++placed;
            }
        labels[b] = task == Task::semantic ? sense : task == Task::long_distance ? number : 2 * number + sense;
        read[b * n + read_at] = 1.0;
    }
    out.tokens = c::from_vector(tokens, {B, n});
    out.read_at = c::from_vector(read, {B, n, 1});
    out.labels = c::from_vector(labels, {B});
    return out;
}

enum class Layer { rnn, cnn, attention };

// What a step may break on purpose in the trained layers (see namespace faults).
struct LayerFaults {
    bool bidirectional_rnn = false;  // the RNN also reads the sentence from the right
    bool circular_padding = false;   // the convolution pads with the other end of the sentence
};

namespace faults {
int64_t layers_real_division(int64_t n, int64_t k);
Variable rnn_both_ways(const Rnn& rnn, const Variable& x);
Variable circular_frame(const Variable& x, int64_t p);
}  // namespace faults

// One layer of width d between an embedding and a linear classifier:
//   ids (B, n) -> embedding (B, n, d) -> the layer (B, n, d) -> the row at `read_at` (B, d) -> logits (B, classes)
// Self-attention gets the sinusoidal positional encoding added to its input (it has no order of its
// own); the RNN and the convolution are ordered by construction.
struct ToyModel {
    Layer layer;
    LayerFaults broken;
    nn::Embedding embed;
    Rnn rnn;                // W_ih, W_hh (d, d), b_ih, b_hh (d)
    Variable kernel, bias;  // the convolution: (d, d, 3), (d)
    nn::MultiHeadAttention attention;
    nn::PositionalEncoding position{{.num_hiddens = toy::width, .max_len = toy::n}};
    nn::Linear out;

    ToyModel(Layer which, int64_t classes, c::Generator& gen, LayerFaults faults)
        : layer(which),
          broken(faults),
          embed({.num_embeddings = toy::vocab, .embedding_dim = toy::width}, gen),
          attention(single_head(toy::width), gen),
          out({.in_features = toy::width, .out_features = classes}, gen) {
        const int64_t d = toy::width;
        const double scale = 1.0 / std::sqrt(double(d));
        rnn = {Variable(c::mul(c::randn({d, d}, gen, F64), scale), true),
               Variable(c::mul(c::randn({d, d}, gen, F64), scale), true), Variable(c::zeros({d}, F64), true),
               Variable(c::zeros({d}, F64), true)};
        kernel = Variable(c::mul(c::randn({d, d, 3}, gen, F64), scale / std::sqrt(3.0)), true);
        bias = Variable(c::zeros({d}, F64), true);
        for (nn::Module* m : std::initializer_list<nn::Module*>{&embed, &attention, &out}) m->to(F64);
    }

    std::vector<Variable> parameters() const {
        std::vector<Variable> p = embed.parameters();
        const std::vector<Variable> head = out.parameters(), own = attention.parameters();
        p.insert(p.end(), head.begin(), head.end());
        if (layer == Layer::rnn) p.insert(p.end(), {rnn.W_ih, rnn.W_hh, rnn.b_ih, rnn.b_hh});
        if (layer == Layer::cnn) p.insert(p.end(), {kernel, bias});
        if (layer == Layer::attention) p.insert(p.end(), own.begin(), own.end());
        return p;
    }

    // tokens (B, n) -> (B, n, d)
    Variable features(const c::Tensor& tokens) {
        const Variable x = embed(tokens);
        switch (layer) {
            case Layer::rnn: {
                const Variable steps_first = ag::transpose(x, 0, 1);  // (n, B, d)
                return ag::transpose(
                    broken.bidirectional_rnn ? faults::rnn_both_ways(rnn, steps_first) : rnn.forward(steps_first), 0,
                    1);
            }
            case Layer::cnn: {
                std::function<Variable(const Variable&, int64_t)> frame;  // zeros
                if (broken.circular_padding) frame = faults::circular_frame;
                return ag::transpose(ag::tanh(conv1d(ag::transpose(x, 1, 2), kernel, bias, frame)), 1, 2);
            }
            case Layer::attention: {
                const Variable xp = position(x);
                return attention(xp, xp, xp);
            }
        }
        return x;
    }

    // (B, classes)
    Variable logits(const Sentences& s) { return out(ag::sum(features(s.tokens) * Variable(s.read_at), {1})); }
};

// How one layer did on one task, after training, on `toy::tested` new sentences.
struct Score {
    double accuracy = 0;
    double cue_before = 0, cue_after = 0;  // the semantic task: accuracy by the cue's side
};

Score train_and_test(Layer layer, Task task, c::Generator& gen, LayerFaults faults = {}) {
    const int64_t classes = task == Task::both ? 4 : 2;
    ToyModel model(layer, classes, gen, faults);
    optim::Adam adam(model.parameters(), {.lr = 0.01});
    for (int64_t step = 0; step < toy::steps; ++step) {
        const Sentences batch = make_sentences(task, 64, gen);
        adam.zero_grad();
        ag::cross_entropy(model.logits(batch), batch.labels).backward();
        adam.step();
    }
    ag::NoGradGuard no_grad;
    const Sentences test = make_sentences(task, toy::tested, gen);
    const c::Tensor right = c::eq(c::argmax(model.logits(test).value(), 1), test.labels);  // (tested) bool
    Score score;
    int64_t before = 0, after = 0;
    for (int64_t i = 0; i < toy::tested; ++i) {
        const bool ok = right.at({i}) != 0;
        score.accuracy += ok;
        if (task != Task::semantic) continue;
        (test.cue_before[i] ? score.cue_before : score.cue_after) += ok;
        (test.cue_before[i] ? before : after) += 1;
    }
    score.accuracy /= double(toy::tested);
    if (task == Task::semantic) score.cue_before /= double(before), score.cue_after /= double(after);
    return score;
}

// What the steps share: one generator, drawn from in step order (every step but 7, and the exercise),
// and what steps 2, 3 and 4 measured, which step 7 sums up.
struct Lesson {
    c::Generator gen{16};
    std::vector<int64_t> lengths;               // step 3's n
    std::vector<int64_t> layers_k3, layers_k5;  // step 3: the stacked convolutions that connect 0 and n - 1
    std::array<int64_t, 3> chain_at_32{};       // step 2: the longest chains at n = 32 (RNN, CNN, attention)
    std::array<int64_t, 3> macs_6_8{};          // step 4: multiply-adds at n = 6, d = 8
};

// ---- the steps --------------------------------------------------------------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › 回顾序列编码问题 (y_t = f(y_t-1, x_t), f(x_t-1, x_t, x_t+1), f(x_t, A, B))
void sequence_encoding_review(Tutorial& t, Lesson& lesson) {
    note({.en =
              "Seed 001's preface (前言) sets out to 'sort out the material and run the code, so the principles are "
              "understood': this tutorial does that for its comparison of the three feature extractors. Seed 001 "
              "reviews how a layer turns the inputs x_1 .. x_n into outputs y_1 .. y_n:\n"
              "    RNN        y_t = f(y_t-1, x_t)           the previous output and the current input\n"
              "    CNN        y_t = f(x_t-1, x_t, x_t+1)    a window of neighbours (kernel size 3)\n"
              "    Attention  y_t = f(x_t, A, B)            x_t against a whole sequence; A = B = X is self-attention\n"
              "All three below are written with autograd ops (the RNN as the loop it is) and checked against "
              "PyTorch: tests/fixtures/tutorial_layers.safetensors holds nn.RNN(4, 5) on a (7, 2, 4) input and "
              "nn.Conv1d(4, 6, kernel_size=3, padding=1) on (2, 4, 7), with the gradients of sum(output · u).",
          .zh = "种子文档 001 "
                "的前言说要“好好整理一下资料，调试相关代码”，把原理弄懂：本教程就对它比较的三种特征抽取器这样做。"
                "种子文档 001 回顾了一层网络如何把输入 x_1 .. x_n 变成输出 y_1 .. y_n：\n"
                "    RNN        y_t = f(y_t-1, x_t)           上一个输出和当前输入\n"
                "    CNN        y_t = f(x_t-1, x_t, x_t+1)    相邻位置组成的窗口（卷积核大小 3）\n"
                "    Attention  y_t = f(x_t, A, B)            x_t 与整个序列比较；A = B = X 时即自注意力\n"
                "下面三者都用 autograd 运算写成（RNN 就写成它本来的循环），并与 PyTorch 对照："
                "tests/fixtures/tutorial_layers.safetensors 里有 nn.RNN(4, 5) 在 (7, 2, 4) 输入上的结果、"
                "nn.Conv1d(4, 6, kernel_size=3, padding=1) 在 (2, 4, 7) 输入上的结果，以及 sum(output · u) 的梯度。"});
    const tutorial::Reference ref("tutorial_layers");
    const Rnn rnn{Variable(ref["rnn.param.weight_ih_l0"], true), Variable(ref["rnn.param.weight_hh_l0"], true),
                  Variable(ref["rnn.param.bias_ih_l0"], true), Variable(ref["rnn.param.bias_hh_l0"], true)};
    const Variable x(ref["rnn.input.x"], true);
    const Variable h = rnn.forward(x);
    ag::sum(h * Variable(ref["rnn.input.upstream"])).backward();
    note({.en = "    RNN: x {} (T, B, C) -> hidden states {} (T, B, H)",
          .zh = "    RNN：x {} (T, B, C) -> 隐藏状态 {} (T, B, H)"},
         c::shape_str(x.shape()), c::shape_str(h.shape()));
    t.check_allclose(h.value(), ref["rnn.output"], 1e-5,
                     {.en = "the RNN loop's hidden states match nn.RNN's", .zh = "RNN 循环的隐藏状态与 nn.RNN 的一致"});
    t.check_allclose(x.grad(), ref["rnn.grad.input.x"], 1e-4,
                     {.en = "d/dx matches (backpropagation through time)", .zh = "d/dx 一致（随时间反向传播）"});
    t.check_allclose(rnn.W_hh.grad(), ref["rnn.grad.param.weight_hh_l0"], 1e-4,
                     {.en = "d/d weight_hh matches", .zh = "d/d weight_hh 一致"});
    t.check_allclose(rnn.b_ih.grad(), ref["rnn.grad.param.bias_ih_l0"], 1e-4,
                     {.en = "d/d bias_ih matches", .zh = "d/d bias_ih 一致"});

    const Variable xc(ref["conv3.input.x"], true), w(ref["conv3.param.weight"], true), b(ref["conv3.param.bias"], true);
    const Variable y = conv1d(xc, w, b);
    ag::sum(y * Variable(ref["conv3.input.upstream"])).backward();
    note({.en = "    CNN: x {} (B, C, T) -> {} (B, C_out, T)", .zh = "    CNN：x {} (B, C, T) -> {} (B, C_out, T)"},
         c::shape_str(xc.shape()), c::shape_str(y.shape()));
    t.check_allclose(y.value(), ref["conv3.output"], 1e-5,
                     {.en = "the unfolded convolution matches nn.Conv1d's output",
                      .zh = "展开（unfold）写成的卷积与 nn.Conv1d 的输出一致"});
    t.check_allclose(xc.grad(), ref["conv3.grad.input.x"], 1e-4, {.en = "d/dx matches", .zh = "d/dx 一致"});
    t.check_allclose(w.grad(), ref["conv3.grad.param.weight"], 1e-4,
                     {.en = "d/d weight matches", .zh = "d/d weight 一致"});

    nn::MultiHeadAttention attention(single_head(4), lesson.gen);
    const Variable X(c::randn({2, 7, 4}, lesson.gen));
    const Variable z = attention(X, X, X);
    note({.en = "    self-attention: X {} (B, T, D) -> {} (B, T, D), every output against all 7 inputs",
          .zh = "    自注意力：X {} (B, T, D) -> {} (B, T, D)，每个输出都与全部 7 个输入比较"},
         c::shape_str(X.shape()), c::shape_str(z.shape()));
    t.check(z.shape() == c::Shape{2, 7, 4} && attention.attention_weights().shape() == c::Shape{2, 7, 7},
            {.en = "one (7, 7) matrix of weights per sequence: y_t = f(x_t, X, X)",
             .zh = "每个序列一个 (7, 7) 的权重矩阵：y_t = f(x_t, X, X)"});
}

// seed 003 (003_8fde783e4908788c.txt) › RNN的局限; seed 001 › 从以下四个方面对比 (并行计算能力)
void sequential_operations(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 003 (RNN的局限): an RNN's hidden state h_t needs h_t-1, so 'it has no way to compute in "
                "parallel'. Measured on the graphs autograd records: the longest chain of ops where each waits for "
                "the one before, for sequences of n = 4 .. 32 positions of d = 8 features (one layer each):",
          .zh = "种子文档 003（RNN的局限）：RNN 的隐藏状态 h_t 需要 h_t-1，所以“没办法并行计算”。"
                "在 autograd 记录的计算图上测量：每个运算都要等前一个运算的最长运算链，序列长 n = 4 .. 32 个位置、"
                "每个位置 d = 8 个特征（各一层）："});
    line({.en = "\n        n    RNN    CNN (k = 3)    self-attention",
          .zh = "\n        n    RNN    CNN (k = 3)    自注意力"});
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
    lesson.chain_at_32 = {rnn_chain.back(), cnn_chain.back(), att_chain.back()};
    const int64_t per_step = (rnn_chain[1] - rnn_chain[0]) / 4;
    t.check(per_step > 0 && rnn_chain[2] - rnn_chain[1] == 8 * per_step && rnn_chain[3] - rnn_chain[2] == 16 * per_step,
            {.en = "RNN: the chain grows by exactly {} ops per position: O(n) sequential steps",
             .zh = "RNN：每多一个位置，运算链正好增长 {} 个运算：O(n) 个顺序步骤"},
            per_step);
    t.check(std::all_of(cnn_chain.begin(), cnn_chain.end(), [&](int64_t v) { return v == cnn_chain[0]; }),
            {.en = "CNN: {} ops whatever n: all positions at once, O(1)",
             .zh = "CNN：无论 n 多大都是 {} 个运算：所有位置同时计算，O(1)"},
            cnn_chain[0]);
    t.check(std::all_of(att_chain.begin(), att_chain.end(), [&](int64_t v) { return v == att_chain[0]; }),
            {.en = "self-attention: {} ops whatever n, O(1)", .zh = "自注意力：无论 n 多大都是 {} 个运算，O(1)"},
            att_chain[0]);
    note(
        {.en = "Inside each op of the CNN and of self-attention all positions are computed together (one matrix "
               "product over all of them), which is what a GPU or a BLAS library parallelises; the RNN hands its "
               "hardware n small products, one after the other. This is the Transformer's 'full-length parallel "
               "network' of seed 000's 总结, and the first point of seed 001's comparison ('并行计算能力').",
         .zh =
             "CNN 和自注意力的每个运算都把所有位置一起算（对全部位置做一次矩阵乘法），这正是 GPU 或 BLAS "
             "库能并行的地方；"
             "RNN 交给硬件的则是 n 个小乘法，一个接一个。这就是种子文档 000 总结里说的 Transformer 在整个长度上的并行，"
             "也是种子文档 001 对比中的“并行计算能力”。"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 ("any two words are at distance 1")
void maximum_path_length(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 001 (正文): the Transformer's key gain is that 'the distance between any two words is 1'. "
                "Measured: for the first input x_0 to reach the last output y_n-1,\n"
                "- RNN: how many applications of the cell (tanh nodes) lie on the path, counted in the graph;\n"
                "- CNN: how many stacked convolutions are needed before y_n-1 depends on x_0 at all (non-zero "
                "gradient), kernel 3 and kernel 5;\n"
                "- self-attention: the same with stacked attention layers.",
          .zh = "种子文档 001（正文）：Transformer 性能提升的关键是“任意两个单词的距离是 1”。"
                "测量：第一个输入 x_0 要到达最后一个输出 y_n-1，\n"
                "- RNN：路径上要经过多少次循环单元（tanh 节点），在计算图里数；\n"
                "- CNN：要堆叠多少层卷积，y_n-1 才开始依赖 x_0（梯度不为零），卷积核 3 和卷积核 5；\n"
                "- 自注意力：同样地堆叠注意力层。"});
    line({.en = "\n        n    RNN steps    CNN layers, k = 3    k = 5    self-attention layers",
          .zh = "\n        n    RNN 步数     CNN 层数，k = 3      k = 5    自注意力层数"});
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
        lesson.lengths.push_back(n), lesson.layers_k3.push_back(k3), lesson.layers_k5.push_back(k5);
        rnn_ok = rnn_ok && rnn_steps == n - 1;
        cnn_ok = cnn_ok && k3 == n - 1 && k5 == (n - 1 + 1) / 2;
        att_ok = att_ok && att_layers == 1 && std::all_of(reach.begin(), reach.end(), [](bool b) { return b; });
    }
    line();
    t.check(rnn_ok, {.en = "RNN: n - 1 cell applications between x_0 and h_n-1: O(n)",
                     .zh = "RNN：x_0 与 h_n-1 之间经过 n - 1 次循环单元：O(n)"});
    t.check(
        cnn_ok,
        {.en = "CNN: n - 1 layers with kernel 3, ⌈(n - 1)/2⌉ with kernel 5 (each layer reaches ⌊k/2⌋ further): O(n/k)",
         .zh = "CNN：卷积核 3 要 n - 1 层，卷积核 5 要 ⌈(n - 1)/2⌉ 层（每层多看 ⌊k/2⌋ 个位置）：O(n/k)"});
    t.check(att_ok, {.en = "self-attention: one layer, and y_n-1 depends on every input: O(1)",
                     .zh = "自注意力：一层就够，并且 y_n-1 依赖每一个输入：O(1)"});
    note({.en = "Seed 001 (正文): 'CNN extracts local features well and dependencies weakly', 'LSTM performance "
                "drops on long sentences'. The second point is about what happens along those long paths (step 5).",
          .zh = "种子文档 001（正文）：CNN“局部抽取能力很强，抽取依赖关系能力较弱”，LSTM“过长的句子性能会下降”。"
                "第二点说的是沿着这些长路径会发生什么（第 5 步）。"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 单头/多头attention时间复杂度; d2l's table of CNNs, RNNs and self-attention
void cost_per_layer(Tutorial& t, Lesson& lesson) {
    note({.en = "Multiply-adds of one layer on n positions of d features, counted from the shapes of the matrix "
                "products each implementation above runs (d2l's table):\n"
                "- RNN: n steps, each x_t W_ihᵀ and h W_hhᵀ: 2 n d²;\n"
                "- CNN: the unfolded (n, k·d) windows times the (k·d, d) kernel: k n d²;\n"
                "- self-attention: Q, K, V and W_o projections 4 n d², scores Q Kᵀ and weights·V 2 n² d.",
          .zh =
              "一层网络在 n 个位置、每个位置 d 个特征上的乘加次数，从上面各实现所做矩阵乘法的形状数出来（d2l 的表）：\n"
              "- RNN：n 个时间步，每步 x_t W_ihᵀ 和 h W_hhᵀ：2 n d²；\n"
              "- CNN：展开后的 (n, k·d) 窗口乘以 (k·d, d) 的卷积核：k n d²；\n"
              "- 自注意力：Q、K、V 和 W_o 四个投影 4 n d²，分数 Q Kᵀ 与权重·V 共 2 n² d。"});
    auto counts = [](int64_t n, int64_t d, int64_t k) {
        return std::array<int64_t, 3>{n * (d * d + d * d), n * (k * d) * d, 4 * n * d * d + 2 * n * n * d};
    };
    line({.en = "\n        n      d     RNN           CNN (k = 3)    self-attention",
          .zh = "\n        n      d     RNN           CNN (k = 3)    自注意力"});
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
    lesson.macs_6_8 = {rnn_macs, cnn_macs, att_macs};
    note({.en = "    counted in the recorded graphs for n = 6, d = 8: RNN {}, CNN {}, self-attention {}",
          .zh = "    在 n = 6、d = 8 记录下的计算图里数出：RNN {}，CNN {}，自注意力 {}"},
         rnn_macs, cnn_macs, att_macs);
    t.check(rnn_macs == counts(n, d, 3)[0] && cnn_macs == counts(n, d, 3)[1] && att_macs == counts(n, d, 3)[2],
            {.en = "they equal the formulas 2nd² = 768, knd² = 1152 and 4nd² + 2n²d = 2112",
             .zh = "它们等于公式 2nd² = 768、knd² = 1152 和 4nd² + 2n²d = 2112"});
    // the two parts of self-attention, measured apart: the scores and the weighted sum (the attention
    // alone, no projections) against the whole layer, for n below, at and above 2d
    std::vector<Phrase> parts;
    std::array<int64_t, 3> quad{}, proj{};
    const std::array<int64_t, 3> lengths = {6, 2 * d, 64};
    for (size_t i = 0; i < lengths.size(); ++i) {
        const Variable x(c::randn({1, lengths[i], d}, lesson.gen), true);
        nn::DotProductAttention bare({});
        quad[i] = count_macs(bare(x, x, x));
        proj[i] = count_macs(a(x, x, x)) - quad[i];
        parts.push_back(phrase({.en = "        n = {:>2}: scores and weighted sum {:>6}, projections {:>6}",
                                .zh = "        n = {:>2}：分数与加权求和 {:>6}，投影 {:>6}"},
                               lengths[i], quad[i], proj[i]));
    }
    note({.en = "    measured in the recorded graphs for d = 8 (the attention alone, and the layer minus it):",
          .zh = "    在 d = 8 记录下的计算图里分开测量（只有注意力本身，以及整层减去它）："});
    for (const Phrase& p : parts) line(p);
    t.check(quad[0] < proj[0] && quad[1] == proj[1] && quad[2] > proj[2],
            {.en = "self-attention's quadratic part (2n²d) stays below its own projections (4nd²) while n < 2d "
                   "(sentences), equals them at n = 2d, and dominates when n ≫ d",
             .zh = "自注意力的平方项（2n²d）在 n < 2d 时（句子长度）小于它自己的投影（4nd²），在 n = 2d 时相等，"
                   "在 n ≫ d 时占主导"});
    note({.en = "Counted this way a self-attention layer does about twice the RNN's multiply-adds on a sentence (its "
                "four projections against the RNN's two products per step), but in O(1) sequential steps instead of "
                "O(n): the work is there to be done in parallel (step 2). d2l's table compares the n²d of the "
                "attention itself with the RNN's nd², the usual way to say that self-attention is cheap while "
                "n < d. The quadratic term is the price of the distance-1 paths: every position is compared with "
                "every other; for long documents it is the term people work to remove.",
          .zh = "这样数，自注意力层在一个句子上的乘加次数约为 RNN 的两倍（它有四个投影，而 RNN 每步两次乘法），"
                "但只需要 O(1) 个顺序步骤而不是 O(n)：这些计算可以并行完成（第 2 步）。d2l 的表拿注意力本身的 n²d 与 "
                "RNN 的 nd² 比较，这是“n < d 时自注意力很便宜”的通常说法。平方项是距离为 1 的路径的代价："
                "每个位置都要与其他每个位置比较；对长文档来说，这正是人们想方设法要去掉的一项。"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 ("LSTM performance drops on long sentences")
void long_paths_fade(Tutorial& t, Lesson& lesson) {
    note({.en = "Along the RNN's path every step multiplies the gradient by W_hhᵀ and by tanh's slope (at most 1): "
                "with a small W_hh the influence of x_j on h_n-1 shrinks geometrically with the distance. Measured "
                "as the size of ∂h_n-1/∂x_j for n = 32, against self-attention's ∂y_n-1/∂x_j:",
          .zh = "沿着 RNN 的路径，每一步都要把梯度乘以 W_hhᵀ 和 tanh 的斜率（至多为 1）：W_hh 较小时，x_j 对 h_n-1 "
                "的影响随距离按几何级数衰减，即梯度消失。在 n = 32 时测量 ∂h_n-1/∂x_j 的大小，与自注意力的 "
                "∂y_n-1/∂x_j 对照："});
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
    line({.en = "\n      distance n-1-j   |∂h/∂x_j| RNN    |∂y/∂x_j| self-attention",
          .zh = "\n      距离 n-1-j       |∂h/∂x_j| RNN    |∂y/∂x_j| 自注意力"});
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
    t.check(rnn_ratio < 1e-3,
            {.en = "RNN: the first 8 positions reach h_31 {:.1e} times as strongly as positions 23-30",
             .zh = "RNN：前 8 个位置对 h_31 的影响只有第 23-30 个位置的 {:.1e} 倍"},
            rnn_ratio);
    t.check(att_ratio > 0.2 && att_ratio < 5,
            {.en = "self-attention: {:.2f} times: distance does not matter", .zh = "自注意力：{:.2f} 倍：距离无关紧要"},
            att_ratio);
    note({.en = "LSTMs (seed 001's 'LSTM 建模输入序列的依赖关系，保存和更新记忆单元') add gates that can keep this "
                "product near 1, which helps but does not shorten the path.",
          .zh = "LSTM（种子文档 001：“LSTM建模输入序列的依赖关系，保存和更新记忆单元”）加上门控，能让这个乘积保持在 1 "
                "附近，这有帮助，但并没有缩短路径：长期依赖仍要穿过中间的每一个时间步。"});
}

// Step 6 (b): a second sequence, and the weights each layer gives position 2's neighbours in both.
void content_decides_the_weights(Tutorial& t, Lesson& lesson, const c::Tensor& x, const c::Tensor& kernel) {
    const int64_t n = x.size(1), d = x.size(2);
    note({.en = "\n(b) Change the CONTENT of the sequence and look at the weights each layer gives position 2's "
                "neighbours:",
          .zh = "\n(b) 改变序列的“内容”，看每一层给位置 2 的邻居什么权重："});
    const c::Tensor x2 = c::randn({1, n, d}, lesson.gen, F64);
    nn::MultiHeadAttention sa(single_head(d), lesson.gen);
    sa.to(F64);
    sa(Variable(x), Variable(x), Variable(x));
    const c::Tensor w1 = sa.attention_weights().select(0, 0).select(0, 2).clone();
    sa(Variable(x2), Variable(x2), Variable(x2));
    const c::Tensor w2 = sa.attention_weights().select(0, 0).select(0, 2).clone();
    show({.en = "self-attention weights of position 2, sequence 1", .zh = "序列 1 中位置 2 的自注意力权重"}, w1);
    show({.en = "self-attention weights of position 2, sequence 2", .zh = "序列 2 中位置 2 的自注意力权重"}, w2);
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
    show({.en = "convolution's weights on x[j] for output 2, sequence 1", .zh = "序列 1 中卷积的输出 2 对 x[j] 的权重"},
         j1);
    t.check_close(j1, j2, 1e-8,
                  {.en = "the convolution weighs position 2's window the same for both sequences: 1/3, 1/3, 1/3",
                   .zh = "对两个序列，卷积给位置 2 的窗口的权重相同：1/3、1/3、1/3"});
    t.check(c::max(c::abs(c::sub(w1, w2))).item() > 1e-3,
            {.en = "self-attention's weights differ: they depend on the query and the keys, i.e. on the content",
             .zh = "自注意力的权重不同：它们取决于查询和键，也就是取决于内容"});
    note({.en = "So seed 004's answer, made exact: a convolution is a weighted sum whose weights depend only on the "
                "offset (and a fixed, local window); self-attention's weights are computed from the content, over "
                "the whole sequence. Multi-head attention gives several such weightings at once (tutorial 07, step 8), "
                "much as a convolution has several channels (seed 002 2.3: 'like CNN's multiple channels').",
          .zh = "于是种子文档 004 的回答可以说得确切：卷积是加权和，权重只取决于相对位移（窗口固定且局部）；"
                "自注意力的权重由内容算出，覆盖整个序列。多头注意力一次给出几组这样的权重（教程 07 第 8 步），"
                "就像卷积有多个通道（种子文档 002 的 2.3：“类似于 CNN 中的多通道”）。"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › CNN 和 self-attention区别?
void cnn_or_self_attention(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 004: both are weighted sums; a CNN's weights sum a fixed region whatever it holds, while "
                "self-attention's weights come from comparing the query with the other positions. Two experiments on "
                "one sequence (n = 6, d = 4).\n\n"
                "(a) A convolution that averages each position with its two neighbours, and a self-attention whose "
                "scores are all 0 but whose mask keeps only the neighbours |s - t| ≤ 1: the same weights, the same "
                "outputs at the interior positions (at the ends the convolution's zero padding counts as a "
                "neighbour, the attention's mask leaves it out):",
          .zh = "种子文档 004：两者都是加权和；CNN "
                "的权重对一个固定区域求和，不管区域里是什么，而自注意力的权重来自查询与其他"
                "位置的比较。在一个序列（n = 6，d = 4）上做两个实验。\n\n"
                "(a) 一个把每个位置与两个邻居取平均的卷积，和一个分数全为 0、但掩码只保留邻居 |s - t| ≤ 1 的自注意力："
                "权重相同，内部位置的输出也相同（在两端，卷积的零填充算作一个邻居，注意力的掩码则把它排除在外）："});
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
                  {.en = "positions 1-4: the averaging convolution = attention with constant scores over a window",
                   .zh = "位置 1-4：取平均的卷积 = 在窗口上分数恒定的注意力"});
    content_decides_the_weights(t, lesson, x, kernel);
}

// Step 7: the path-length formula of the summary against what step 3 measured.
void path_length_formula(Tutorial& t, const Lesson& lesson) {
    // a kernel of size k reaches ⌊k/2⌋ positions further each layer: ⌊3/2⌋ = 1, ⌊5/2⌋ = 2
    auto layers = [&](int64_t n, int64_t k) {
        if (t.injected("path-length-real-division")) return faults::layers_real_division(n, k);
        const int64_t reach = k / 2;
        return (n - 1 + reach - 1) / reach;  // ⌈(n − 1)/⌊k/2⌋⌉
    };
    bool agree = true;
    for (size_t i = 0; i < lesson.lengths.size(); ++i) {
        const int64_t n = lesson.lengths[i];
        line({.en = "    n = {:>2}: kernel 3 measured {:>2}, formula {:>2}; kernel 5 measured {:>2}, formula {:>2}",
              .zh = "    n = {:>2}：卷积核 3 实测 {:>2}，公式 {:>2}；卷积核 5 实测 {:>2}，公式 {:>2}"},
             n, lesson.layers_k3[i], layers(n, 3), lesson.layers_k5[i], layers(n, 5));
        agree = agree && layers(n, 3) == lesson.layers_k3[i] && layers(n, 5) == lesson.layers_k5[i];
    }
    t.check(agree && !lesson.lengths.empty(),
            {.en = "the formula ⌈(n − 1)/⌊k/2⌋⌉ gives the layers step 3 measured, for k = 3 and 5",
             .zh = "公式 ⌈(n − 1)/⌊k/2⌋⌉ 给出的层数与第 3 步实测的一致，k = 3 和 5 都是"});
}

// Step 7: the three layers trained on the three tasks; prints the table and checks what is certain.
void trained_aspects(Tutorial& t) {
    note({.en = "\n- 语义特征提取能力 (semantic features), 长距离特征捕获能力 (long-distance features) and "
                "任务综合特征抽取能力 (task-level features) are about trained models. The comparison seed 001 "
                "draws on (Zhang Junlin's) reports word-sense disambiguation, subject-verb agreement and "
                "translation benchmarks. The same three questions, small enough to train here: one layer of "
                "each kind (d = 16, self-attention with the sinusoidal positional encoding), between an "
                "embedding of 16 words and a linear classifier, {} Adam steps of 64 sentences of n = {}, then "
                "tested on {} new sentences:\n"
                "- semantic: 'bank' with a cue right before or after it ('river bank', 'bank loan'); the output AT "
                "'bank' must give its sense (a word's meaning from its context, as 1.2.1 of seed 002 says "
                "context-aware embeddings do);\n"
                "- long distance: a subject first (cat, dogs, ...), two other nouns of either number between, a "
                "verb last; the output at the verb must give the subject's number, n − 1 positions back "
                "(agreement);\n"
                "- task-level: both in one sentence, read at the verb: four classes.",
          .zh = "\n- 语义特征提取能力、长距离特征捕获能力和任务综合特征抽取能力说的是训练好的模型。种子文档 001 "
                "所依据的对比（张俊林的文章）用的是词义消歧、主谓一致和机器翻译这些评测。这里把同样三个问题缩小到能当场"
                "训练：每种各一层（d = 16，自注意力加正弦位置编码），放在 16 个词的词嵌入与一个线性分类器之间，"
                "用 Adam 训练 {} 步、每步 64 个长 n = {} 的句子，再在 {} 个新句子上测试：\n"
                "- 语义：“bank”紧挨着一个提示词，在它前面或后面（“river bank”“bank loan”）；必须由“bank”"
                "位置上的输出给出它的词义（词义来自上下文，正如种子文档 002 的 1.2.1 所说的上下文感知的嵌入）；\n"
                "- 长距离：句首是主语（cat、dogs……），中间有两个单复数随机的名词，句尾是动词；必须由动词位置上的输出"
                "给出主语的单复数，隔着 n − 1 个位置（主谓一致）；\n"
                "- 任务综合：两者出现在同一个句子里，在动词处读出：四个类别。"},
         toy::steps, toy::n, toy::tested);
    c::Generator gen(1601);
    const LayerFaults rnn_faults{.bidirectional_rnn = t.injected("bidirectional-rnn")},
        cnn_faults{.circular_padding = t.injected("circular-padding")};
    std::array<std::array<Score, 3>, 3> s{};  // [task][layer]
    for (const Task task : {Task::semantic, Task::long_distance, Task::both}) {
        s[int(task)][0] = train_and_test(Layer::rnn, task, gen, rnn_faults);
        s[int(task)][1] = train_and_test(Layer::cnn, task, gen, cnn_faults);
        s[int(task)][2] = train_and_test(Layer::attention, task, gen);
    }
    line({.en = "\n    accuracy on new sentences              RNN    CNN (k = 3)    self-attention",
          .zh = "\n    在新句子上的准确率                     RNN    CNN (k = 3)    自注意力"});
    const Text rows[] = {{.en = "    semantic ('bank': river or money)   {:>6.3f} {:>14.3f} {:>17.3f}",
                          .zh = "    语义（“bank”：河岸还是钱）         {:>6.3f} {:>14.3f} {:>17.3f}"},
                         {.en = "    long distance (agreement)           {:>6.3f} {:>14.3f} {:>17.3f}",
                          .zh = "    长距离（主谓一致）                 {:>6.3f} {:>14.3f} {:>17.3f}"},
                         {.en = "    task-level (both, 4 classes)        {:>6.3f} {:>14.3f} {:>17.3f}",
                          .zh = "    任务综合（两者兼有，4 类）         {:>6.3f} {:>14.3f} {:>17.3f}"}};
    for (int task = 0; task < 3; ++task)
        line(rows[task], s[task][0].accuracy, s[task][1].accuracy, s[task][2].accuracy);
    line({.en = "    semantic, RNN, cue before / after 'bank': {:.3f} / {:.3f}",
          .zh = "    语义，RNN，提示词在“bank”之前 / 之后：{:.3f} / {:.3f}"},
         s[0][0].cue_before, s[0][0].cue_after);
    line();
    const auto& sem = s[int(Task::semantic)];
    const auto& far = s[int(Task::long_distance)];
    const auto& mixed = s[int(Task::both)];
    t.check(sem[1].accuracy > 0.95 && sem[2].accuracy > 0.95,
            {.en = "semantic: the convolution and self-attention both read the sense of 'bank' from its neighbour "
                   "(above 0.95)",
             .zh = "语义：卷积和自注意力都能从邻居读出“bank”的词义（高于 0.95）"});
    t.check(sem[0].cue_before > 0.95 && sem[0].cue_after > 0.35 && sem[0].cue_after < 0.65,
            {.en = "semantic: the RNN's output at 'bank' knows the cue on its left (above 0.95) and guesses when "
                   "the cue is on its right (0.35-0.65): it has not read it yet",
             .zh = "语义：RNN 在“bank”处的输出知道左边的提示词（高于 0.95），提示词在右边时只能猜（0.35-0.65）："
                   "它还没读到"});
    t.check(
        far[1].accuracy > 0.4 && far[1].accuracy < 0.6,
        {.en = "long distance: the convolution stays at chance (0.4-0.6): the verb's window never holds the subject",
         .zh = "长距离：卷积停留在随机水平（0.4-0.6）：动词的窗口里根本没有主语"});
    t.check(far[2].accuracy > 0.95,
            {.en = "long distance: self-attention finds the subject n − 1 positions back (above 0.95)",
             .zh = "长距离：自注意力能找到 n − 1 个位置之前的主语（高于 0.95）"});
    t.check(mixed[2].accuracy > mixed[0].accuracy && mixed[2].accuracy > mixed[1].accuracy,
            {.en = "task-level: self-attention scores highest on the task that needs both",
             .zh = "任务综合：在两者都需要的任务上，自注意力得分最高"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 从以下四个方面对比CNN,RNN,Transformer
void four_aspects(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 001 compares CNN, RNN and the Transformer on four aspects: 语义特征提取能力, 长距离特征捕获能力, "
                "任务综合特征抽取能力 and 并行计算能力及运行效率. Each, measured:\n"
                "- 并行计算能力及运行效率 (parallelism and efficiency): step 2 counted the longest chain of "
                "waiting ops at n = 32: RNN {}, CNN {}, self-attention {} (O(n) against O(1)); step 4 the "
                "multiply-adds at n = 6, d = 8: {}, {} and {} (2nd², knd², 4nd² + 2n²d).\n"
                "- 长距离特征捕获能力, on one layer: step 3 (path lengths n − 1, ⌈(n − 1)/⌊k/2⌋⌉ and 1) and "
                "step 5 (how the gradient fades along the RNN's path). A kernel of size k reaches ⌊k/2⌋ positions "
                "further each layer (1 for k = 3, 2 for k = 5), so the formula with ⌊k/2⌋, not k/2, is the one "
                "step 3's counts follow:",
          .zh = "种子文档 001 从四个方面对比 CNN、RNN 和 Transformer：语义特征提取能力、长距离特征捕获能力、"
                "任务综合特征抽取能力、并行计算能力及运行效率。逐一测量：\n"
                "- 并行计算能力及运行效率：第 2 步数出 n = 32 时必须依次等待的最长运算链：RNN {}，CNN {}，自注意力 {}"
                "（O(n) 对 O(1)）；第 4 步数出 n = 6、d = 8 时的乘加次数：{}、{} 和 {}（2nd²、knd²、4nd² + 2n²d）。\n"
                "- 长距离特征捕获能力，在单独一层上：第 3 步（路径长度 n − 1、⌈(n − 1)/⌊k/2⌋⌉ 和 1）和第 5 步"
                "（梯度沿 RNN 路径如何衰减）。大小为 k 的卷积核每层多看 ⌊k/2⌋ 个位置（k = 3 时为 1，k = 5 时为 2），"
                "所以第 3 步的计数符合的是带 ⌊k/2⌋ 的公式，而不是 k/2："},
         lesson.chain_at_32[0], lesson.chain_at_32[1], lesson.chain_at_32[2], lesson.macs_6_8[0], lesson.macs_6_8[1],
         lesson.macs_6_8[2]);
    path_length_formula(t, lesson);
    trained_aspects(t);
    note({.en = "What the small models show, each for a reason one can point to: a left-to-right RNN's word "
                "representation knows only the words before it (which is why LSTMs are often run in both "
                "directions); one convolution layer sees its window and nothing beyond, so agreement over "
                "n − 1 positions is out of its reach until layers are stacked (step 3); self-attention reaches "
                "every position in one layer, and with the positional encoding it can find the subject by its "
                "place. The benchmark results the comparison reports (the Transformer ahead on all three, RNNs "
                "close on long distance, CNNs behind) come from deep models trained on large corpora; these "
                "runs reproduce the mechanisms behind them, not the benchmark numbers.",
          .zh = "这些小模型显示的，每一条都能指出原因：从左到右的 RNN 给一个词的表示只知道它前面的词"
                "（所以 LSTM 常常双向运行）；一层卷积只看得到自己的窗口，窗口之外一概不知，所以隔 n − 1 "
                "个位置的主谓一致它够不着，除非堆叠多层（第 3 步）；自注意力一层就能到达每个位置，"
                "加上位置编码，它能凭位置找到主语。那篇对比文章报告的评测结果（Transformer 三项都领先，"
                "RNN 在长距离上接近，CNN 落后）来自在大语料上训练的深层模型；这里复现的是其背后的机制，"
                "而不是评测数字。"});
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
            {.en = "BART/T5-like: target position 2 depends on all 5 source positions (through the cross-attention)",
             .zh = "BART/T5 类：目标位置 2 依赖全部 5 个源位置（通过交叉注意力）"});
    note({.en = "Seed 002 adds that GPT-2 is built from decoder blocks and BERT from encoder blocks: the second "
                "pattern and the first. Tutorial 14's classifier is BERT-like; tutorials 12 and 13 train the "
                "encoder-decoder.",
          .zh = "种子文档 002 还说 GPT-2 由解码器模块构成，BERT 由编码器模块构成：分别是第二种和第一种模式。"
                "教程 14 的分类器属于 BERT 类；教程 12 和 13 训练的是编码器-解码器。"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 Transformer 简要发展史
void three_families(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 002's history: GPT (2018), BERT (2018), GPT-2, DistilBERT, BART and T5 (2019), GPT-3 (2020), in "
                "three families that differ in which positions may see which:\n"
                "- BERT-like (autoencoding, the encoder alone): every position sees every position;\n"
                "- GPT-like (autoregressive, the decoder alone): position t sees positions ≤ t;\n"
                "- BART/T5-like (sequence-to-sequence, the original encoder-decoder): the target sees the whole "
                "source and its own past.\n"
                "Measured on tiny models built from the library's blocks: which inputs each output depends on "
                "(non-zero gradients), for 5 positions:",
          .zh = "种子文档 002 的简史：GPT（2018）、BERT（2018）、GPT-2、DistilBERT、BART 和 T5（2019）、GPT-3（2020），"
                "分成三类，区别在于哪些位置能看到哪些位置：\n"
                "- BERT 类（自编码，只用编码器）：每个位置看到所有位置；\n"
                "- GPT 类（自回归，只用解码器）：位置 t 看到位置 ≤ t；\n"
                "- BART/T5 类（序列到序列，原始的编码器-解码器）：目标看到整个源序列和它自己已生成的部分。\n"
                "用库里的模块搭几个很小的模型来测量：每个输出依赖哪些输入（梯度不为零），共 5 个位置："});
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
    auto print = [](const Text& name, const std::vector<std::vector<bool>>& rows) {
        line(phrase(name));
        for (const auto& r : rows) {
            std::string s = "        ";
            for (bool b : r) s += b ? "■ " : "· ";
            line(s);
        }
    };
    print({.en = "      BERT-like, output t (rows) depends on input s (columns):",
           .zh = "      BERT 类，输出 t（行）依赖输入 s（列）："},
          bert);
    print({.en = "      GPT-like, the same block with the no-peek mask:", .zh = "      GPT 类，同一个块加上后续掩码："},
          gpt);
    line();
    bool all = true, lower = true;
    for (int64_t q = 0; q < 5; ++q)
        for (int64_t s = 0; s < 5; ++s) {
            all = all && bert[q][s];
            lower = lower && gpt[q][s] == (s <= q);
        }
    t.check(all,
            {.en = "BERT-like: every output depends on all 5 inputs", .zh = "BERT 类：每个输出都依赖全部 5 个输入"});
    t.check(lower,
            {.en = "GPT-like: output t depends exactly on inputs 0..t", .zh = "GPT 类：输出 t 恰好依赖输入 0..t"});
    encoder_decoder_family(t, lesson, o);
}

// ---- the exercise (--exercise): tutorials/16_rnn_cnn_attention/exercise.cpp ----------------

// seed 001 (001_57ca8c5b7ec56526.txt) › 正文 (a CNN and long distances): the receptive field, by the reader
void exercise_receptive_field(Tutorial& t, Lesson& lesson) {
    note({.en = "Write exercise::receptive_field(layers, kernel) and exercise::layers_to_connect(n, kernel). The "
                "checks measure both on stacked convolutions (which input positions the middle or last output "
                "depends on) and compare.",
          .zh = "写出 exercise::receptive_field(layers, kernel) 和 exercise::layers_to_connect(n, kernel)。"
                "检查在堆叠的卷积上把两者都测量出来（中间或最后一个输出依赖哪些输入位置），再与你的答案比较。"});
    const int64_t d = 2;
    for (const int64_t k : {3, 5}) {
        for (const int64_t L : {1, 2, 3}) {
            const int64_t n = 21;
            const auto reach = stacked_conv_reach(L, d, k, n, n / 2, lesson.gen);
            const int64_t seen = std::count(reach.begin(), reach.end(), true);
            t.check(exercise::receptive_field(L, k) == seen,
                    {.en = "kernel {}, {} layer(s): the middle output sees {} positions (you say {})",
                     .zh = "卷积核 {}，{} 层：中间的输出看到 {} 个位置（你的答案是 {}）"},
                    k, L, seen, exercise::receptive_field(L, k));
        }
        for (const int64_t n : {5, 8}) {
            int64_t measured = -1;
            for (int64_t L = 1; L <= n && measured < 0; ++L)
                if (stacked_conv_reach(L, d, k, n, n - 1, lesson.gen).front()) measured = L;
            t.check(exercise::layers_to_connect(n, k) == measured,
                    {.en = "kernel {}, n = {}: {} layers connect the last position to the first (you say {})",
                     .zh = "卷积核 {}，n = {}：{} 层才把最后一个位置与第一个位置连起来（你的答案是 {}）"},
                    k, n, measured, exercise::layers_to_connect(n, k));
        }
    }
}

// ---- wrong variants, for the tests that show a check can fail -----------------------------

namespace faults {

// ⌈(n − 1)/(k/2)⌉ with k/2 a real number: 1.5 for k = 3, where a kernel reaches only one position further.
int64_t layers_real_division(int64_t n, int64_t k) {
    return static_cast<int64_t>(std::ceil(double(n - 1) / (double(k) / 2)));
}

// A bidirectional RNN in place of the left-to-right one: the same cell run over the reversed sentence too,
// the two states added. x (n, B, d) -> (n, B, d)
Variable rnn_both_ways(const Rnn& rnn, const Variable& x) {
    const int64_t n = x.shape()[0];
    std::vector<Variable> reversed;
    for (int64_t t = n - 1; t >= 0; --t) reversed.push_back(ag::select(x, 0, t));
    const Variable back = rnn.forward(ag::stack(reversed, 0));  // state t holds positions n - 1 .. n - 1 - t
    std::vector<Variable> aligned;
    for (int64_t t = 0; t < n; ++t) aligned.push_back(ag::select(back, 0, n - 1 - t));
    return rnn.forward(x) + ag::stack(aligned, 0);
}

// Circular padding: the p columns before x are its last p, those after it its first p, so the last
// position's window holds the first. x (B, C, T) -> (B, C, T + 2p)
Variable circular_frame(const Variable& x, int64_t p) {
    const int64_t T = x.shape()[2];
    return ag::concat({ag::slice(x, 2, T - p, T), x, ag::slice(x, 2, 0, p)}, 2);
}

}  // namespace faults

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "tformer tutorial 16 · RNN, CNN and self-attention side by side",
                          .zh = "tformer 教程 16 · RNN、CNN 与自注意力并排比较"},
                .follows = {.en = "seed 001 正文, 从以下四个方面对比CNN,RNN,Transformer, 回顾序列编码问题; seed 003 "
                                  "RNN的局限; seed 004 CNN 和 self-attention区别?; seed 002 1.1 Transformer 简要发展史",
                            .zh = "种子文档 001 正文、从以下四个方面对比CNN,RNN,Transformer、回顾序列编码问题；"
                                  "种子文档 003 RNN的局限；种子文档 004 CNN 和 self-attention区别?；"
                                  "种子文档 002 1.1 Transformer 简要发展史"},
                .exercise = {.en = "write the receptive field of stacked convolutions and the layers a CNN needs "
                                   "to connect two positions (tutorials/16_rnn_cnn_attention/exercise.cpp)",
                             .zh = "写出堆叠卷积的感受野，以及 CNN 连接两个位置所需的层数"
                                   "（tutorials/16_rnn_cnn_attention/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Three ways to encode a sequence (回顾序列编码问题)",
            .zh = "1. 编码序列的三种方式（回顾序列编码问题）"},
           [&] { sequence_encoding_review(t, lesson); });
    t.step({.en = "2. Sequential operations: what must wait for what", .zh = "2. 顺序操作：什么必须等什么"},
           [&] { sequential_operations(t, lesson); });
    t.step({.en = "3. Maximum path length: how far apart two positions are", .zh = "3. 最大路径长度：两个位置相隔多远"},
           [&] { maximum_path_length(t, lesson); });
    t.step(
        {.en = "4. Cost per layer: O(n d²), O(k n d²), O(n² d)", .zh = "4. 每层的计算量：O(n d²)、O(k n d²)、O(n² d)"},
        [&] { cost_per_layer(t, lesson); });
    t.step({.en = "5. Long paths fade: the gradient through an RNN", .zh = "5. 长路径会衰减：穿过 RNN 的梯度"},
           [&] { long_paths_fade(t, lesson); });
    t.step({.en = "6. CNN or self-attention? Seed 004's question", .zh = "6. CNN 还是自注意力？种子文档 004 的问题"},
           [&] { cnn_or_self_attention(t, lesson); });
    t.step({.en = "7. Seed 001's four aspects, each measured", .zh = "7. 种子文档 001 的四个方面，逐一测量"},
           [&] { four_aspects(t, lesson); });
    t.step({.en = "8. After 2017: three families (seed 002 1.1 简要发展史)",
            .zh = "8. 2017 年之后：三大类（种子文档 002 1.1 简要发展史）"},
           [&] { three_families(t, lesson); });
    t.exercise({.en = "Exercise. The CNN's receptive field and path length", .zh = "练习. CNN 的感受野与路径长度"},
               [&] { exercise_receptive_field(t, lesson); });
    return t.finish();
}
