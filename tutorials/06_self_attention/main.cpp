// Tutorial 06 · Self-attention, step by step and then as matrices.
//
// Follows seed 001 (001_57ca8c5b7ec56526.txt), self-attention: the six steps
// (q, k, v vectors from three trained matrices; score q·k; divide by √d_k;
// softmax; multiply the values; sum) and "Finally ... one formula", the
// matrix form softmax(Q Kᵀ / √d_k) V. The words and their first three
// embedding numbers are seed 003's (003_8fde783e4908788c.txt, (2) 词嵌入:
// "I arrived at the"). The matrix form is seed 002's 2.2 Self-Attention 实现
// (ScaleDotProductAttention) and seed 003's 自注意力.
// Read it with tutorials/06_self_attention/README.md.
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr int64_t kWords = 4, kModel = 4, kKey = 3;  // n words, d_model, d_k
const std::vector<std::string> kTokens = {"I", "arrived", "at", "the"};

// A (rows, cols) float64 matrix of normal numbers rounded to one decimal, so
// the printed weights are easy to follow by hand.
c::Tensor rounded_normal(int64_t rows, int64_t cols, c::Generator& gen) {
    std::vector<double> v(rows * cols);
    for (double& x : v) x = std::round(gen.normal() * 10) / 10;
    return c::tensor(v, {rows, cols}, DType::float64);
}

// x (d_model) times W (d_model, d_k), written as the sum it is.
std::vector<double> times(const std::vector<double>& x, const c::Tensor& W) {
    std::vector<double> out(W.size(1), 0.0);
    for (int64_t j = 0; j < W.size(1); ++j)
        for (int64_t i = 0; i < W.size(0); ++i) out[j] += x[i] * W.at({i, j});
    return out;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// "[ 0.2497,  0.0807, ...]" with `decimals` digits.
std::string vec_str(const std::vector<double>& v, int decimals = 4) {
    std::vector<std::string> parts;
    for (double x : v) parts.push_back(fmt::format("{:{}.{}f}", x, decimals + 3, decimals));
    return fmt::format("[{}]", fmt::join(parts, ", "));
}

c::Tensor row_tensor(const std::vector<double>& v) {
    return c::tensor(v, {static_cast<int64_t>(v.size())}, DType::float64);
}

// softmax(Q Kᵀ / √d_k), row by row: Q (n, d_k), K (m, d_k) -> (n, m)
c::Tensor attention_weights(const c::Tensor& Q, const c::Tensor& K) {
    return c::softmax(c::div(c::matmul(Q, K.transpose(0, 1)), std::sqrt(double(kKey))));
}

// What the steps share: the sentence, the three trained matrices, and what steps 1-3 compute.
struct Lesson {
    // The four words of seed 003's walk-through. The seed prints the first
    // three numbers of each embedding ([0.1, 0.5, 0.8, ...]); we add a fourth.
    const c::Tensor X = c::tensor({0.1, 0.5, 0.8, 0.3,                // I
                                   0.3, 0.7, 0.2, 0.9,                // arrived
                                   0.6, 0.1, 0.9, 0.4,                // at
                                   0.2, 0.4, 0.7, 0.6},               // the
                                  {kWords, kModel}, DType::float64);  // (n, d_model)
    c::Generator gen{6};
    const c::Tensor W_Q = rounded_normal(kModel, kKey, gen);  // (d_model, d_k)
    const c::Tensor W_K = rounded_normal(kModel, kKey, gen);  // (d_model, d_k)
    const c::Tensor W_V = rounded_normal(kModel, kKey, gen);  // (d_model, d_k)

    std::vector<std::vector<double>> q, k, v;  // step 1: n vectors of d_k numbers each
    std::vector<double> z1;                    // steps 2-6 for "I": (d_k)
    c::Tensor weights, Z;                      // step 3: (n, n) and (n, d_k)
};

// ---- the steps --------------------------------------------------------------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, step 1; seed 003 › (2) 词嵌入
void query_key_value_vectors(Tutorial& t, Lesson& lesson) {
    note(
        "Self-attention lets every word of a sentence look at every word of the same sentence. Seed 001's "
        "first step: multiply each word's embedding x_i by three matrices learned in training, giving a "
        "query q_i = x_i W_Q, a key k_i = x_i W_K and a value v_i = x_i W_V. In the paper the embedding "
        "has 512 numbers and q, k, v have 64 (smaller, 'to make the computation of multi-headed "
        "attention (mostly) constant'); here d_model = 4 and d_k = 3.");
    note("    X: one row per word (I, arrived, at, the), one column per embedding feature");
    show("X", lesson.X);
    show("W_Q", lesson.W_Q);
    show("W_K", lesson.W_K);
    show("W_V", lesson.W_V);
    line("\n    {:<9} {:<22} {:<22} {}", "word", "q = x W_Q", "k = x W_K", "v = x W_V");
    lesson.q.resize(kWords), lesson.k.resize(kWords), lesson.v.resize(kWords);
    for (int64_t i = 0; i < kWords; ++i) {
        const std::vector<double> x = lesson.X.select(0, i).to_vector();
        lesson.q[i] = times(x, lesson.W_Q), lesson.k[i] = times(x, lesson.W_K), lesson.v[i] = times(x, lesson.W_V);
        line("    {:<9} {:<22} {:<22} {}", kTokens[i], vec_str(lesson.q[i], 2), vec_str(lesson.k[i], 2),
             vec_str(lesson.v[i], 2));
    }
    line();
    t.check_close(row_tensor(lesson.q[0]), c::matmul(lesson.X, lesson.W_Q).select(0, 0), 1e-15,
                  "q for 'I' is row 0 of the matrix product X W_Q");
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, steps 2 to 6
void six_steps_for_one_word(Tutorial& t, Lesson& lesson) {
    note(
        "To compute the output for the first word, 'I', score every word of the sentence against it: "
        "the score of word j is the dot product q_I · k_j. It says how much 'I' should attend to word j.");
    const c::Tensor &X = lesson.X, &W_Q = lesson.W_Q, &W_K = lesson.W_K, &W_V = lesson.W_V;
    std::vector<double> scores(kWords);
    for (int64_t j = 0; j < kWords; ++j) scores[j] = dot(lesson.q[0], lesson.k[j]);
    for (int64_t j = 0; j < kWords; ++j) note("    q_I · k_{:<8} = {:8.4f}", kTokens[j], scores[j]);
    t.check_close(row_tensor(scores), c::matmul(c::matmul(X, W_Q), c::matmul(X, W_K).transpose(0, 1)).select(0, 0),
                  1e-14, "the four scores are row 0 of Q Kᵀ");

    note(
        "\nSteps 3 and 4: divide by √d_k and take the softmax. The paper divides by 8 = √64; here "
        "√3 = {:.4f}. Softmax makes the scores positive and summing to 1.",
        std::sqrt(3.0));
    std::vector<double> scaled(kWords), alpha(kWords);
    double total = 0;
    for (int64_t j = 0; j < kWords; ++j) scaled[j] = scores[j] / std::sqrt(double(kKey));
    for (int64_t j = 0; j < kWords; ++j) total += alpha[j] = std::exp(scaled[j]);
    for (double& a : alpha) a /= total;
    note("    score / √3 = {}\n    softmax    = {}", vec_str(scaled), vec_str(alpha));
    t.check_close(row_tensor(alpha), c::softmax(row_tensor(scaled)), 1e-15,
                  "the hand softmax (exp, then divide by the sum) equals core::softmax of the scaled scores");

    note(
        "\nSteps 5 and 6: multiply each value vector by its weight and add them up. That sum is the "
        "output of self-attention for 'I': mostly the values of the words it attends to most.");
    std::vector<double>& z1 = lesson.z1;
    z1.assign(kKey, 0.0);
    for (int64_t j = 0; j < kWords; ++j) {
        std::vector<double> weighted(kKey);
        for (int64_t d = 0; d < kKey; ++d) z1[d] += weighted[d] = alpha[j] * lesson.v[j][d];
        note("    {:.4f} · v_{:<8} = {}", alpha[j], kTokens[j], vec_str(weighted));
    }
    note("    {:<19} = {}", "sum = z_I", vec_str(z1));
    t.check_close(row_tensor(z1), c::matmul(row_tensor(alpha).unsqueeze(0), c::matmul(X, W_V)).select(0, 0), 1e-14,
                  "z_I = [α_1 ... α_4] V: the weights as a row times the matrix of values");
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, the matrix form; seed 002 › 2.1; seed 003 › 自注意力
void matrix_form(Tutorial& t, Lesson& lesson) {
    note(
        "Doing this for every word at once is three matrix products (seed 001: 'since we're dealing "
        "with matrices, we can condense steps two through six in one formula'):\n"
        "    Q = X W_Q, K = X W_K, V = X W_V                   (n, d_k)\n"
        "    weights = softmax(Q Kᵀ / √d_k)   row by row        (n, n)\n"
        "    Z = weights V                                     (n, d_k)");
    const c::Tensor Q = c::matmul(lesson.X, lesson.W_Q), K = c::matmul(lesson.X, lesson.W_K),
                    V = c::matmul(lesson.X, lesson.W_V);
    const c::Tensor& weights = lesson.weights = attention_weights(Q, K);
    lesson.Z = c::matmul(weights, V);
    show("weights", weights);
    show("Z", lesson.Z);
    t.check_close(lesson.Z.select(0, 0), row_tensor(lesson.z1), 1e-14, "row 0 of Z is z_I from the six steps");
    t.check_close(c::sum(weights, {1}), c::ones({kWords}, DType::float64), 1e-15, "every row of weights sums to 1");
    note(
        "\nSeed 001 adds: 'Clearly the word at this position will have the highest softmax score'. That "
        "is not a law: the score of word i with itself is q_i · k_i = x_i W_Q W_Kᵀ x_iᵀ, and nothing "
        "makes it the largest in its row. It often happens in trained models, but nothing forces it; with our "
        "random weights:");
    for (int64_t i = 0; i < kWords; ++i) {
        const c::Tensor row = weights.select(0, i);
        const int64_t best = static_cast<int64_t>(c::argmax(row, 0).item());
        note("    {:<8} attends most to '{}' ({:.3f}){}", kTokens[i], kTokens[best], row.at({best}),
             best == i ? " — itself" : "");
    }
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.2 Self-Attention 实现 (ScaleDotProductAttention); d2l's MultiHeadAttention
void library_layers(Tutorial& t, const Lesson& lesson) {
    note(
        "nn::DotProductAttention is exactly the formula, for batches: Q, K, V of shape (batch, n, d_k). "
        "It has no parameters; the projections W_Q, W_K, W_V belong to the layer around it.");
    const c::Tensor &X = lesson.X, &W_Q = lesson.W_Q, &W_K = lesson.W_K, &W_V = lesson.W_V;
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable Q(c::matmul(X, W_Q).unsqueeze(0)), K(c::matmul(X, W_K).unsqueeze(0)),
        V(c::matmul(X, W_V).unsqueeze(0));  // (1, n, d_k)
    const Variable out = attention(Q, K, V);
    t.check_close(out.value().select(0, 0), lesson.Z, 1e-14, "DotProductAttention(Q, K, V) == Z");
    t.check_close(attention.attention_weights.select(0, 0), lesson.weights, 1e-15,
                  "and its attention_weights == weights");

    note(
        "\nnn::MultiHeadAttention with one head does the projections itself, with Linear layers: "
        "self-attention is mha(X, X, X). Two details to line up with seed 001's x W:\n"
        "- a Linear stores its weight as (out, in) and computes x Wᵀ (PyTorch's layout), so its weight "
        "is W_Qᵀ, of shape (d_k, d_model);\n"
        "- multi-head attention ends with one more projection W_o, which we set to the identity here.");
    nn::MultiHeadAttention mha(
        {.key_size = kModel, .query_size = kModel, .value_size = kModel, .num_hiddens = kKey, .num_heads = 1});
    mha.to(DType::float64);
    c::copy_(mha.W_q->weight.value(), W_Q.transpose(0, 1));
    c::copy_(mha.W_k->weight.value(), W_K.transpose(0, 1));
    c::copy_(mha.W_v->weight.value(), W_V.transpose(0, 1));
    c::copy_(mha.W_o->weight.value(), c::eye(kKey, DType::float64));
    for (const auto& [name, p] : mha.named_parameters()) note("    {:<18} {}", name, c::shape_str(p.shape()));
    const Variable Xb(X.unsqueeze(0));  // (1, n, d_model)
    const Variable mha_out = mha(Xb, Xb, Xb);
    show("mha(X, X, X)", mha_out.value());
    t.check_close(mha_out.value().select(0, 0), lesson.Z, 1e-14,
                  "a one-head MultiHeadAttention with these weights gives Z");
    t.check_close(mha.attention_weights().select(0, 0), lesson.weights, 1e-15, "with the same attention weights");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.2 Self-Attention 实现: the (5, 10, 64) call, then PyTorch's numbers
void seed_002_example(Tutorial& t) {
    note(
        "Seed 002 (2.2 Self-Attention 实现) runs its ScaleDotProductAttention on Q = K = V = torch.randn(5, "
        "10, 64) (batch 5, 10 positions, d_k = 64, the paper's per-head size) and prints the shapes "
        "torch.Size([5, 10, 64]) and torch.Size([5, 10, 10]). The same call here:");
    c::Generator g(64);
    const Variable Q(c::randn({5, 10, 64}, g)), K(c::randn({5, 10, 64}, g)), V(c::randn({5, 10, 64}, g));
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable out = attention(Q, K, V);
    note("    ScaleDotProductAttention output shape: {}\n    attn_weights shape: {}", c::shape_str(out.shape()),
         c::shape_str(attention.attention_weights.shape()));
    t.check(out.shape() == c::Shape{5, 10, 64}, "output shape (5, 10, 64), the seed's torch.Size([5, 10, 64])");
    t.check(attention.attention_weights.shape() == c::Shape{5, 10, 10},
            "weights shape (5, 10, 10), the seed's torch.Size([5, 10, 10]): one 10 × 10 matrix per batch element");
    note(
        "Seed 002 divides by 8 = √64 here; its 2.1 says 'the scores are divided by 8' in general, which holds "
        "only for d_k = 64. And its 2.2 remarks that 'the size of the embedding vector is basically the length "
        "of the longest sentence in the training set': it is not; that length is the sequence dimension (10 "
        "here), the embedding size is d_model (512 in the paper), which this example's 64 per head divides.");

    note(
        "\nAgainst PyTorch: tests/fixtures/attention_masks.safetensors holds seed 002's ScaleDotProductAttention "
        "run by torch on (5, 10, 4) tensors, with the gradients of sum(output · u):");
    const tutorial::Reference ref("attention_masks");
    const Variable q(ref["sdpa_nomask.input.Q"], true), k(ref["sdpa_nomask.input.K"], true),
        v(ref["sdpa_nomask.input.V"], true);
    const Variable o = attention(q, k, v);
    ag::sum(o * Variable(ref["sdpa_nomask.input.upstream"])).backward();
    t.check_allclose(o.value(), ref["sdpa_nomask.output"], 1e-5, "the output matches PyTorch's");
    t.check_allclose(q.grad(), ref["sdpa_nomask.grad.input.Q"], 1e-4, "d/dQ matches");
    t.check_allclose(k.grad(), ref["sdpa_nomask.grad.input.K"], 1e-4, "d/dK matches");
    t.check_allclose(v.grad(), ref["sdpa_nomask.grad.input.V"], 1e-4, "d/dV matches");
}

// seed 003 (003_8fde783e4908788c.txt) › 自注意力, against (7) 交叉注意力（Cross-Attention）
void self_or_cross_attention(Tutorial& t, const Lesson& lesson) {
    note(
        "Seed 003's 自注意力 section gives the right formula, y_i = f(x_i, (x_1, x_1), ..., (x_n, x_n)): the "
        "queries, keys and values all come from the SAME sequence. Its next sentence then says that in a "
        "translation model 'the query is a token of the target language, and the keys and values are all "
        "the words of the source language' — that describes cross-attention (encoder–decoder attention, "
        "seed 003's own (7) 交叉注意力), not self-attention. The difference, on our four words and three "
        "target-side vectors standing for 'Je suis arrivé':");
    c::Generator g(603);
    const c::Tensor target = rounded_normal(3, kModel, g);  // (m, d_model)
    const c::Tensor Qs = c::matmul(lesson.X, lesson.W_Q), Ks = c::matmul(lesson.X, lesson.W_K);
    const c::Tensor self_w = attention_weights(Qs, Ks);                              // (n, n)
    const c::Tensor cross_w = attention_weights(c::matmul(target, lesson.W_Q), Ks);  // (m, n)
    note(
        "    self-attention weights  {}: every source word against every source word\n"
        "    cross-attention weights {}: every target word against every source word",
        c::shape_str(self_w.shape()), c::shape_str(cross_w.shape()));
    t.check(self_w.shape() == c::Shape{4, 4} && cross_w.shape() == c::Shape{3, 4},
            "self: (n, n) = (4, 4); cross: (m, n) = (3, 4)");
    const c::Tensor other_target = rounded_normal(3, kModel, g);
    const c::Tensor cross_w2 = attention_weights(c::matmul(other_target, lesson.W_Q), Ks);
    t.check(c::max(c::abs(c::sub(cross_w2, cross_w))).item() > 1e-3,
            "a different target sentence changes the cross-attention weights ...");
    t.check_close(self_w, lesson.weights, 1e-15,
                  "... while the self-attention of the source stays what step 3 computed");
    note(
        "The library keeps the two apart: nn::EncoderBlock's attention is self-attention, and the second "
        "attention of nn::DecoderBlock is the cross-attention the sentence meant (tutorial 11).");
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention (no positions in the formula); tutorial 08 adds them
void no_word_order(Tutorial& t, const Lesson& lesson) {
    note(
        "Nothing above used the positions of the words: reorder the sentence and the outputs are "
        "reordered the same way, with the same numbers. Self-attention alone treats a sentence as a bag "
        "of words; that is why the Transformer adds positional encodings to the embeddings (tutorial 08).");
    const std::vector<int64_t> order = {3, 2, 1, 0};  // "the at arrived I"
    const c::Tensor Xp = c::index_select(lesson.X, 0, c::from_vector(order, {4}));
    const c::Tensor Qp = c::matmul(Xp, lesson.W_Q), Kp = c::matmul(Xp, lesson.W_K), Vp = c::matmul(Xp, lesson.W_V);
    const c::Tensor Zp = c::matmul(attention_weights(Qp, Kp), Vp);
    show("Z for 'the at arrived I'", Zp);
    t.check_close(Zp, c::index_select(lesson.Z, 0, c::from_vector(order, {4})), 1e-14,
                  "the outputs of the reordered sentence are the old outputs, reordered");
}

// d2l's show_heatmaps of the weights of step 3
void heatmap(Tutorial& t, const Lesson& lesson) {
    tasks::Heatmaps maps{.matrices = {{lesson.weights}},
                         .xlabel = "keys",
                         .ylabel = "queries",
                         .title = "self-attention weights",
                         .x_ticks = kTokens,
                         .y_ticks = kTokens,
                         .vmin = 0.0,
                         .vmax = 1.0,
                         .cell_size = 60};
    const auto png = t.out_path("self_attention.png");
    tasks::plot_heatmaps(png, maps);
    note("Wrote {}: row i is where word i looks; each row sums to 1.", png.string());
    c::Tensor by_hand = c::zeros({kWords, kWords}, DType::float64);  // from step 1's vectors, in plain doubles
    for (int64_t i = 0; i < kWords; ++i) {
        double total = 0;
        for (int64_t j = 0; j < kWords; ++j) total += std::exp(dot(lesson.q[i], lesson.k[j]) / std::sqrt(double(kKey)));
        for (int64_t j = 0; j < kWords; ++j)
            by_hand.set({i, j}, std::exp(dot(lesson.q[i], lesson.k[j]) / std::sqrt(double(kKey))) / total);
    }
    t.check_close(maps.matrices[0][0], by_hand, 1e-14,
                  "the heatmap's 16 cells equal e^(q_i·k_j/√3) / Σ_j e^(q_i·k_j/√3) from step 1's q and k");
}

// ---- the exercise (--exercise): tutorials/06_self_attention/exercise.cpp -------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, the matrix form
void exercise_matrix_form(Tutorial& t) {
    note(
        "Write exercise::self_attention(X, W_Q, W_K, W_V). The checks compare it with the six steps done "
        "word by word in plain doubles, and with nn::DotProductAttention, on a new random sentence of 5 words.");
    c::Generator g(606);
    const c::Tensor Xe = rounded_normal(5, kModel, g), Wq = rounded_normal(kModel, kKey, g),
                    Wk = rounded_normal(kModel, kKey, g), Wv = rounded_normal(kModel, kKey, g);
    const exercise::SelfAttention mine = exercise::self_attention(Xe, Wq, Wk, Wv);
    c::Tensor Zh = c::zeros({5, kKey}, DType::float64), Wh = c::zeros({5, 5}, DType::float64);
    for (int64_t i = 0; i < 5; ++i) {
        const std::vector<double> qi = times(Xe.select(0, i).to_vector(), Wq);
        std::vector<double> e(5);
        double total = 0;
        for (int64_t j = 0; j < 5; ++j)
            total += e[j] = std::exp(dot(qi, times(Xe.select(0, j).to_vector(), Wk)) / std::sqrt(double(kKey)));
        for (int64_t j = 0; j < 5; ++j) {
            Wh.set({i, j}, e[j] / total);
            const std::vector<double> vj = times(Xe.select(0, j).to_vector(), Wv);
            for (int64_t d = 0; d < kKey; ++d) Zh.set({i, d}, Zh.at({i, d}) + e[j] / total * vj[d]);
        }
    }
    t.check_close(mine.weights, Wh, 1e-12, "your weights equal the six steps' softmax, word by word");
    t.check_close(mine.Z, Zh, 1e-12, "your Z equals the six steps' weighted sums");
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable out = attention(Variable(c::matmul(Xe, Wq).unsqueeze(0)), Variable(c::matmul(Xe, Wk).unsqueeze(0)),
                                   Variable(c::matmul(Xe, Wv).unsqueeze(0)));
    t.check_close(mine.Z, out.value().select(0, 0), 1e-12, "and nn::DotProductAttention's output");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 06 · Self-attention, step by step",
                .follows = "seed 001 self-attention (the six steps, then the matrix form); seed 002 2.1–2.2; "
                           "seed 003 自注意力",
                .exercise = "write self-attention in its matrix form, softmax(Q Kᵀ / √d_k) V "
                            "(tutorials/06_self_attention/exercise.cpp)"});
    Lesson lesson;
    t.step("1. Query, key and value vectors for every word", [&] { query_key_value_vectors(t, lesson); });
    t.step("2. Steps 2 to 6 for the word 'I': score, ÷√d_k, softmax, weight, sum",
           [&] { six_steps_for_one_word(t, lesson); });
    t.step("3. The matrix form: softmax(Q Kᵀ / √d_k) V", [&] { matrix_form(t, lesson); });
    t.step("4. The same numbers from nn::DotProductAttention and a one-head MultiHeadAttention",
           [&] { library_layers(t, lesson); });
    t.step("4b. Seed 002's example: Q, K, V of shape (5, 10, 64)", [&] { seed_002_example(t); });
    t.step("4c. Self-attention or cross-attention? A slip in seed 003", [&] { self_or_cross_attention(t, lesson); });
    t.step("5. Self-attention does not know the word order", [&] { no_word_order(t, lesson); });
    t.step("6. Heatmap of the weights", [&] { heatmap(t, lesson); });
    t.exercise("Exercise. Self-attention as three matrix products", [&] { exercise_matrix_form(t); });
    return t.finish();
}
