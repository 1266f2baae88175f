// Tutorial 05 · Attention scoring functions: masked softmax, additive
// attention, scaled dot-product attention, and why the dot product is
// divided by √d.
//
// Follows seed 003 (003_8fde783e4908788c.txt), 注意力评分函数: 掩蔽softmax操作
// (the (2, 2, 4) example with valid lengths [2, 3] and [[1, 3], [2, 4]]),
// 加性注意力, 缩放点积注意力 (with d2l's demonstration: queries (2, 1, 20),
// keys of ones (2, 10, 2), values arange(40) as (1, 10, 4) repeated, valid
// lengths [2, 6]; the seed quotes its conclusion, "均匀的注意力权重").
// Read it with tutorials/05_attention_scoring/README.md.
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

namespace {

// Softmax over the first `len` entries of a row, 0 after them, by hand.
std::vector<double> softmax_prefix(const std::vector<double>& row, int64_t len) {
    std::vector<double> out(row.size(), 0.0);
    if (len <= 0) return out;
    const double top = *std::max_element(row.begin(), row.begin() + len);
    double total = 0;
    for (int64_t j = 0; j < len; ++j) total += out[j] = std::exp(row[j] - top);
    for (int64_t j = 0; j < len; ++j) out[j] /= total;
    return out;
}

// masked softmax of X (B, T, S) by hand, with valid lengths lens (B), one per
// batch element, or (B, T), one per row.
c::Tensor masked_softmax_by_hand(const c::Tensor& X, const c::Tensor& lens) {
    c::Tensor out = c::zeros(X.shape(), DType::float64);
    for (int64_t b = 0; b < X.size(0); ++b)
        for (int64_t r = 0; r < X.size(1); ++r) {
            const auto len = static_cast<int64_t>(lens.dim() == 1 ? lens.at({b}) : lens.at({b, r}));
            const std::vector<double> w = softmax_prefix(X.select(0, b).select(0, r).to_vector(), len);
            for (int64_t j = 0; j < X.size(2); ++j) out.set({b, r, j}, w[j]);
        }
    return out;
}

// keep[b, t, s] = s < lens[b] (or lens[b, t]): the bool form of valid lengths.
c::Tensor keep_mask(const c::Tensor& lens, int64_t T, int64_t S) {
    const c::Tensor steps = c::arange(S, DType::int64);                                // (S)
    const c::Tensor L = lens.dim() == 1 ? lens.view({-1, 1, 1}) : lens.unsqueeze(2);   // (B, 1|T, 1)
    return c::lt(steps.view({1, 1, S}), L).expand({lens.size(0), T, S}).contiguous();  // (B, T, S)
}

// The document's printed masked-softmax results (seed 003), for comparison.
const std::vector<double> kDocPerBatch = {0.488994,   0.511006,  0,         0, 0.43654838, 0.56345165, 0,          0,
                                          0.28817102, 0.3519408, 0.3598882, 0, 0.29034293, 0.25239873, 0.45725834, 0};
const std::vector<double> kDocPerRow = {1,          0,          0, 0, 0.35848376, 0.36588794, 0.2756283,  0,
                                        0.54370314, 0.45629686, 0, 0, 0.19598779, 0.25580424, 0.19916737, 0.34904057};

bool same_zero_pattern(const c::Tensor& ours, const std::vector<double>& doc) {
    const std::vector<double> a = ours.to_vector();
    for (size_t i = 0; i < a.size(); ++i)
        if ((a[i] == 0) != (doc[i] == 0)) return false;
    return true;
}

// Mean over the rows of a (N, m) score matrix of the largest softmax weight,
// and of ‖J‖_F, the size of the softmax Jacobian J = diag(p) - p pᵀ, which is
// what a gradient must pass through to reach the scores.
struct Saturation {
    double max_weight = 0;
    double jacobian = 0;
};
Saturation saturation(const c::Tensor& scores) {
    const c::Tensor p = c::softmax(scores);
    Saturation s;
    const int64_t N = p.size(0), m = p.size(1);
    for (int64_t r = 0; r < N; ++r) {
        const std::vector<double> row = p.select(0, r).to_vector();
        double norm2 = 0;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < m; ++j) {
                const double J = (i == j ? row[i] : 0) - row[i] * row[j];
                norm2 += J * J;
            }
        s.max_weight += *std::max_element(row.begin(), row.end()) / N;
        s.jacobian += std::sqrt(norm2) / N;
    }
    return s;
}

// What the steps share: the scores X, the two kinds of valid lengths, and
// the weights that step 7 draws.
struct Lesson {
    c::Generator gen{5};
    const c::Tensor X = c::rand({2, 2, 4}, gen, DType::float64);  // (B, T, S) = (2, 2, 4), like torch.rand(2, 2, 4)
    const c::Tensor lens_per_batch = c::from_vector(std::vector<int64_t>{2, 3}, {2});         // (B)
    const c::Tensor lens_per_row = c::from_vector(std::vector<int64_t>{1, 3, 2, 4}, {2, 2});  // (B, T)
    c::Tensor per_batch, per_row;             // (2, 2, 4): the results of steps 1 and 2, drawn in step 7
    c::Tensor additive_weights, dot_weights;  // (2, 1, 10): the results of steps 4 and 5
};

// ---- the steps --------------------------------------------------------------------------

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: valid lengths [2, 3]
void masked_softmax_per_batch(Tutorial& t, Lesson& lesson) {
    note(
        "Sequences in a minibatch are padded to the same length with meaningless tokens. Attention must "
        "not give them any weight, so the softmax over the keys only runs over the first valid_len "
        "entries of each row and puts exactly 0 after them (seed 003, 掩蔽softmax操作). The seed's "
        "example is a (2, 2, 4) tensor of uniform random scores with valid lengths [2, 3]: both rows "
        "of batch element 0 keep 2 entries, both rows of element 1 keep 3 (the seed: 'understand "
        "[2, 3] as [[2, 2], [3, 3]]').");
    show("X", lesson.X);
    lesson.per_batch = nn::masked_softmax(Variable(lesson.X), lesson.lens_per_batch).value();
    show("masked_softmax(X, [2, 3])", lesson.per_batch);
    t.check_close(lesson.per_batch, masked_softmax_by_hand(lesson.X, lesson.lens_per_batch), 1e-15,
                  "equal to a softmax over each row's first 2 or 3 entries, by hand");
    t.check_close(c::sum(lesson.per_batch, {2}), c::ones({2, 2}, DType::float64), 1e-15, "every row sums to 1");
    t.check(same_zero_pattern(lesson.per_batch, kDocPerBatch),
            "the zeros are where the document's printed result has them");
    note(
        "The document's numbers themselves differ from ours: they come from torch.rand, ours from "
        "tformer's generator. But they can be checked: softmax only sees differences of scores, "
        "w_i / w_j = e^(x_i - x_j), and scores drawn from [0, 1) differ by less than 1, so no two kept "
        "weights of a row can differ by a factor e or more.");
    double widest = 0;  // the largest |x_i - x_j| = |log(w_i / w_j)| within a row of the document's result
    for (size_t r = 0; r < kDocPerBatch.size(); r += 4)
        for (size_t i = r; i < r + 4; ++i)
            for (size_t j = r; j < r + 4; ++j)
                if (kDocPerBatch[i] > 0 && kDocPerBatch[j] > 0)
                    widest = std::max(widest, std::abs(std::log(kDocPerBatch[i] / kDocPerBatch[j])));
    note(
        "In the document's result the largest |log(w_i / w_j)| within a row is {:.4f}, below 1: its numbers "
        "could come from such scores (step 2b finds them).",
        widest);
}

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: valid lengths [[1, 3], [2, 4]]
void masked_softmax_per_row(Tutorial& t, Lesson& lesson) {
    note(
        "A 2-D tensor of valid lengths gives each query row its own length: row 0 of batch element 0 "
        "keeps 1 entry, row 1 keeps 3; batch element 1 keeps 2 and 4. A row with one entry is exactly "
        "1 there, as in the document's result.");
    lesson.per_row = nn::masked_softmax(Variable(lesson.X), lesson.lens_per_row).value();
    note("    per_row = nn::masked_softmax(X, [[1, 3], [2, 4]])");
    show("per_row", lesson.per_row);
    t.check_close(lesson.per_row, masked_softmax_by_hand(lesson.X, lesson.lens_per_row), 1e-15,
                  "equal to the per-row softmax by hand");
    t.check(lesson.per_row.at({0, 0, 0}) == 1.0, "a row with valid length 1 is exactly [1, 0, 0, 0]");
    t.check(same_zero_pattern(lesson.per_row, kDocPerRow), "the zeros are where the document's result has them");
}

// (2, 2, 4) scores whose masked softmax gives the printed `weights` exactly:
// x_j = log w_j - min_k log w_k on the kept entries (the masked ones can be anything).
c::Tensor scores_behind(const std::vector<double>& weights) {
    c::Tensor X = c::full({2, 2, 4}, 0.5, DType::float64);
    for (int64_t r = 0; r < 4; ++r) {
        double low = 1e300;
        for (int64_t j = 0; j < 4; ++j)
            if (weights[r * 4 + j] > 0) low = std::min(low, std::log(weights[r * 4 + j]));
        for (int64_t j = 0; j < 4; ++j)
            if (weights[r * 4 + j] > 0) X.set({r / 2, r % 2, j}, std::log(weights[r * 4 + j]) - low);
    }
    return X;
}

// Step 2b, part 2: d2l's masked_softmax run by torch (tests/fixtures/tutorial_layers.safetensors).
void masked_softmax_against_pytorch(Tutorial& t) {
    note(
        "\nAnd against PyTorch: tests/fixtures/tutorial_layers.safetensors holds d2l's masked_softmax "
        "(the -1e6 fill) run by torch on its own torch.rand(2, 2, 4), with both kinds of valid lengths, and "
        "the gradient of sum(weights · u) for random u:");
    const tutorial::Reference ref("tutorial_layers");
    for (const std::string prefix : {"masked_softmax_per_batch", "masked_softmax_per_row"}) {
        const Variable Xt(ref[prefix + ".input.X"], true);
        const Variable w = nn::masked_softmax(Xt, ref[prefix + ".input.valid_lens"]);
        ag::sum(w * Variable(ref[prefix + ".input.upstream"])).backward();
        t.check_allclose(w.value(), ref[prefix + ".output"], 1e-6, prefix + ": the weights match PyTorch's");
        t.check_allclose(Xt.grad(), ref[prefix + ".grad.input.X"], 1e-5, prefix + ": d/dX matches PyTorch's");
    }
}

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: the printed results, exactly
void documents_numbers_exactly(Tutorial& t, const Lesson& lesson) {
    note(
        "The seed's two results come from torch.rand draws that it does not print, so step 1 could only "
        "check their zeros and ratios. They can be reproduced exactly all the same. Softmax only sees "
        "differences of scores: if the kept weights of a row are w_j, the scores x_j = log w_j - min_k "
        "log w_k give exactly those weights back (the masked scores can be anything). Every such row "
        "also lies within [0, 1), so it is a draw torch.rand could have made:");
    const c::Tensor X1 = scores_behind(kDocPerBatch), X2 = scores_behind(kDocPerRow);
    show("X behind the [2, 3] result", X1);
    const c::Tensor out1 = nn::masked_softmax(Variable(X1), lesson.lens_per_batch).value();
    const c::Tensor out2 = nn::masked_softmax(Variable(X2), lesson.lens_per_row).value();
    show("masked_softmax(X, [2, 3])", out1);
    show("masked_softmax(X', [[1, 3], [2, 4]])", out2);
    t.check_close(out1, c::tensor(kDocPerBatch, {2, 2, 4}, DType::float64), 5e-8,
                  "reproduces the seed's [2, 3] result to its printed 8 digits");
    t.check_close(out2, c::tensor(kDocPerRow, {2, 2, 4}, DType::float64), 5e-8,
                  "reproduces the seed's [[1, 3], [2, 4]] result to its printed 8 digits");
    note("The scores behind both lie in [{:.4f}, {:.4f}], inside [0, 1) as torch.rand's do.",
         std::min(c::min(X1).item(), c::min(X2).item()), std::max(c::max(X1).item(), c::max(X2).item()));
    t.check_close(nn::masked_softmax(Variable(X1), c::from_vector(std::vector<int64_t>{2, 2, 3, 3}, {2, 2})).value(),
                  out1, 0, "'[2, 3] 可以理解为 [[2, 2], [3, 3]]': the per-row lengths give the same weights");
    masked_softmax_against_pytorch(t);
}

// seed 003 (003_8fde783e4908788c.txt) › 对注意力分数进行masked_softmax (d2l's -1e6 fill)
void how_the_mask_works(Tutorial& t, Lesson& lesson) {
    note(
        "d2l implements the mask by overwriting the scores beyond the valid length with -1e6 before an "
        "ordinary softmax: e^(-1e6) is 0 in floating point. tformer uses -inf, which gives the same "
        "weights, and a bool 'keep' mask (seed 002's and seed 004's form) gives them too:");
    const c::Tensor &X = lesson.X, &lens = lesson.lens_per_batch;
    const c::Tensor keep = keep_mask(lens, 2, 4);
    show("keep = arange(4) < valid_len", keep.select(0, 0));
    const c::Tensor d2l_fill = c::where(keep, X, c::full({2, 2, 4}, -1e6, DType::float64));
    t.check_close(c::softmax(d2l_fill), lesson.per_batch, 1e-15,
                  "softmax after d2l's -1e6 fill gives the same weights");
    t.check_close(nn::masked_softmax(Variable(X), keep).value(), lesson.per_batch, 0,
                  "masked_softmax with the bool mask gives exactly the same weights");

    note("\nMasked scores get no gradient either: they do not influence the output at all.");
    const Variable Xv(X, true);
    const Variable w = nn::masked_softmax(Xv, lens);
    ag::sum(w * Variable(c::randn({2, 2, 4}, lesson.gen, DType::float64))).backward();
    show("X.grad", Xv.grad());
    t.check(c::sum(c::abs(c::where(keep, c::zeros({2, 2, 4}, DType::float64), Xv.grad()))).item() == 0,
            "the gradient is exactly 0 at every masked position");

    note(
        "\nThe two methods part ways when a row keeps NOTHING (valid length 0, e.g. a query that is "
        "itself padding). With -1e6 every entry is equally small, so d2l spreads the weight uniformly "
        "over the padding. tformer returns all zeros: the query attends to nothing.");
    const c::Tensor zero = c::from_vector(std::vector<int64_t>{0, 3}, {2});
    const c::Tensor ours = nn::masked_softmax(Variable(X), zero).value();
    const c::Tensor d2l = c::softmax(c::where(keep_mask(zero, 2, 4), X, c::full({2, 2, 4}, -1e6, DType::float64)));
    note("    valid lengths [0, 3]: batch element 0 keeps nothing");
    show("tformer[0]", ours.select(0, 0));
    show("d2l[0]    ", d2l.select(0, 0));
    t.check(c::sum(c::abs(ours.select(0, 0))).item() == 0, "tformer: an empty row has all-zero weights");
    t.check_close(d2l.select(0, 0), c::full({2, 4}, 0.25, DType::float64), 1e-12, "d2l: 0.25 on each padded key");
}

// d2l's example inputs for steps 4 and 5: keys of ones (2, 10, 2), values arange(40) as (10, 4) twice,
// valid lengths [2, 6]; the queries are the caller's.
struct Example {
    Variable keys{c::ones({2, 10, 2})};                                               // (B, S, k)
    Variable values{c::arange(40).view({1, 10, 4}).expand({2, 10, 4}).contiguous()};  // (B, S, v)
    c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{2, 6}, {2});           // (B)
    c::Tensor expected_output = c::tensor({2, 3, 4, 5, 10, 11, 12, 13}, {2, 1, 4});   // d2l's result
};

// seed 003 (003_8fde783e4908788c.txt) › 注意力评分函数 › 加性注意力
void additive_attention(Tutorial& t, Lesson& lesson) {
    note(
        "When queries and keys have different sizes, additive attention scores them with a one-layer "
        "MLP:\n"
        "    a(q, k) = w_vᵀ tanh(W_q q + W_k k),   W_q (h × q), W_k (h × k), w_v (h)\n"
        "The example: 2 batch elements, each with 1 query of size 20 (normal random) and 10 keys of size "
        "2 that are all ones; values are arange(40) as (10, 4), the same for both; valid lengths [2, 6]; "
        "h = 8 hidden units; dropout 0.1, switched off by eval().");
    nn::AdditiveAttention attention({.key_size = 2, .query_size = 20, .num_hiddens = 8, .dropout = 0.1}, lesson.gen);
    attention.eval();
    const Variable queries(c::randn({2, 1, 20}, lesson.gen));  // (B, T, q)
    const Example ex;
    show("values[0]", ex.values.value().select(0, 0).slice(0, 0, 3));
    note("    ... (10 rows of 4)");
    const Variable out = attention(queries, ex.keys, ex.values, ex.valid_lens);
    lesson.additive_weights = attention.attention_weights;
    show("output", out.value());
    show("attention_weights", lesson.additive_weights);

    note("\nThe shapes inside, with the module's own weights:");
    const Variable q = (*attention.W_q)(queries);                                   // (2, 1, 8)
    const Variable k = (*attention.W_k)(ex.keys);                                   // (2, 10, 8)
    const Variable features = ag::tanh(ag::unsqueeze(q, 2) + ag::unsqueeze(k, 1));  // (2, 1, 10, 8)
    const Variable scores = ag::squeeze((*attention.w_v)(features), 3);             // (2, 1, 10)
    note("    W_q q: {}   W_k k: {}   tanh(W_q q + W_k k) broadcast: {}   scores: {}", c::shape_str(q.shape()),
         c::shape_str(k.shape()), c::shape_str(features.shape()), c::shape_str(scores.shape()));
    show("scores", scores.value());
    t.check_close(nn::masked_softmax(scores, ex.valid_lens).value(), lesson.additive_weights, 1e-6,
                  "masked_softmax of the hand-built scores gives the module's weights");
    note(
        "All 10 keys are the same vector, so all 10 scores of a query are equal, and the weights are "
        "uniform over the valid keys: 1/2 each for the first query, 1/6 for the second. The output is "
        "then the plain average of the first 2 (or 6) value rows.");
    c::Tensor uniform = c::zeros({2, 1, 10});
    for (int64_t j = 0; j < 2; ++j) uniform.set({0, 0, j}, 0.5);
    for (int64_t j = 0; j < 6; ++j) uniform.set({1, 0, j}, 1.0 / 6);
    t.check_close(lesson.additive_weights, uniform, 1e-6, "weights [1/2, 1/2, 0, ...] and [1/6 × 6, 0, 0, 0, 0]");
    t.check_close(out.value(), ex.expected_output, 1e-5, "output [[2, 3, 4, 5]] and [[10, 11, 12, 13]], d2l's result");
}

// seed 003 (003_8fde783e4908788c.txt) › 缩放点积注意力 and 计算注意力汇聚函数
void scaled_dot_product_attention(Tutorial& t, Lesson& lesson) {
    note(
        "If queries and keys have the same size d, the score can be their dot product, scaled:\n"
        "    a(q, k) = qᵀk / √d,   for a batch: softmax(Q Kᵀ / √d) V   (n × d)(d × m)(m × v) -> (n × v)\n"
        "No parameters at all. d2l repeats the example with queries of size 2 (so d = 2) and dropout 0.5, "
        "off in eval():");
    nn::DotProductAttention attention({.dropout = 0.5}, lesson.gen);
    attention.eval();
    const Variable queries(c::randn({2, 1, 2}, lesson.gen));  // (B, T, d)
    const Example ex;
    const Variable out = attention(queries, ex.keys, ex.values, ex.valid_lens);
    lesson.dot_weights = attention.attention_weights;
    show("output", out.value());
    t.check_close(out.value(), ex.expected_output, 1e-5,
                  "identical keys again give uniform weights and the same output as additive attention");

    note("\nWith keys that differ, the formula by hand, step by step, against the module:");
    const c::Tensor Q = c::randn({2, 3, 4}, lesson.gen, DType::float64),
                    K = c::randn({2, 5, 4}, lesson.gen, DType::float64),
                    V = c::randn({2, 5, 2}, lesson.gen, DType::float64);
    const c::Tensor S = c::div(c::matmul(Q, K.transpose(1, 2)), std::sqrt(4.0));  // (2, 3, 5)
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{5, 3}, {2});
    const c::Tensor W = c::masked_softmax(S, lens);  // (2, 3, 5)
    const c::Tensor O = c::matmul(W, V);             // (2, 3, 2)
    note("    Q {}  Kᵀ {}  scores {}  weights {}  V {}  output {}", c::shape_str(Q.shape()),
         c::shape_str(K.transpose(1, 2).shape()), c::shape_str(S.shape()), c::shape_str(W.shape()),
         c::shape_str(V.shape()), c::shape_str(O.shape()));
    show("scores[0]", S.select(0, 0));
    t.check_close(attention(Variable(Q), Variable(K), Variable(V), lens).value(), O, 1e-12,
                  "nn::DotProductAttention = softmax(Q Kᵀ / √d) V with the mask");
    t.check_close(attention.attention_weights, W, 1e-15, "and it keeps exactly these weights for heatmaps");
}

// Step 6, part 1: var(qᵀk) grows like d, and ÷√d brings it back to 1.
void dot_product_variance(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 003: if the entries of q and k are independent with mean 0 and variance 1, then qᵀk = "
        "Σ_i q_i k_i is a sum of d terms of mean 0 and variance 1, so it has mean 0 and variance d. "
        "Dividing by √d brings the variance back to 1 whatever d is. Measured on 10000 random pairs:");
    line("\n          d    var(qᵀk)    var(qᵀk) / d    var(qᵀk / √d)");
    bool all_close = true;
    for (int64_t d : {2, 8, 32, 128, 512}) {
        const c::Tensor q = c::randn({10000, d}, lesson.gen, DType::float64),
                        k = c::randn({10000, d}, lesson.gen, DType::float64);
        const c::Tensor dots = c::sum(c::mul(q, k), {1});
        const double v = c::var(dots, {0}, true).item();
        const double v_scaled = c::var(c::div(dots, std::sqrt(double(d))), {0}, true).item();
        line("      {:>5} {:>11.2f} {:>16.3f} {:>16.3f}", d, v, v / d, v_scaled);
        all_close = all_close && std::abs(v / d - 1) < 0.12;
    }
    line();
    t.check(all_close, "var(qᵀk) / d is within 12% of 1 for every d (10000 samples)");
}

// Step 6, part 2: unscaled scores saturate the softmax, and its Jacobian passes little gradient.
void softmax_saturation(Tutorial& t, Lesson& lesson) {
    note(
        "Why the variance matters: softmax of scores with a large spread is nearly one-hot. Then almost "
        "all weight sits on one key, and the softmax's Jacobian J = diag(p) - p pᵀ is nearly 0, so "
        "almost no gradient reaches the queries and keys ('more stable gradients', seed 001). For 1000 "
        "queries against 10 random keys each:");
    line(
        "\n          d    mean max weight          mean ‖J‖_F (gradient size)\n"
        "               qᵀk       qᵀk / √d       qᵀk         qᵀk / √d");
    Saturation raw512, scaled512;
    for (int64_t d : {2, 8, 32, 128, 512}) {
        const c::Tensor q = c::randn({1000, 1, d}, lesson.gen, DType::float64),
                        k = c::randn({1000, 10, d}, lesson.gen, DType::float64);
        const c::Tensor scores = c::matmul(q, k.transpose(1, 2)).view({1000, 10});
        const Saturation raw = saturation(scores), scaled = saturation(c::div(scores, std::sqrt(double(d))));
        line("      {:>5} {:>9.3f} {:>13.3f} {:>11.4f} {:>13.4f}", d, raw.max_weight, scaled.max_weight, raw.jacobian,
             scaled.jacobian);
        if (d == 512) raw512 = raw, scaled512 = scaled;
    }
    line();
    t.check(raw512.max_weight > 0.9, "d = 512 without scaling: the softmax is nearly one-hot (mean max weight > 0.9)");
    t.check(scaled512.max_weight < 0.6, "with the √d scaling it stays spread out (mean max weight < 0.6)");
    t.check(scaled512.jacobian > 3 * raw512.jacobian,
            "and the softmax passes at least 3 times more gradient (‖J‖_F) than unscaled");
}

// seed 003 (003_8fde783e4908788c.txt) › 缩放点积注意力 (÷√d)
void why_divide_by_sqrt_d(Tutorial& t, Lesson& lesson) {
    dot_product_variance(t, lesson);
    softmax_saturation(t, lesson);
}

// d2l's show_heatmaps of the masked softmax and of the two scoring functions' weights
void heatmaps(Tutorial& t, const Lesson& lesson) {
    tasks::Heatmaps masked{.matrices = {{lesson.per_batch.select(0, 0), lesson.per_batch.select(0, 1)},
                                        {lesson.per_row.select(0, 0), lesson.per_row.select(0, 1)}},
                           .titles = {"lens 2, b=0", "lens 3, b=1", "lens 1,3, b=0", "lens 2,4, b=1"},
                           .title = "masked softmax: [2, 3] (top), [[1, 3], [2, 4]]",
                           .vmin = 0.0,
                           .vmax = 1.0,
                           .cell_size = 40};
    tasks::Heatmaps scoring{
        .matrices = {{lesson.additive_weights.select(0, 0), lesson.additive_weights.select(0, 1)},
                     {lesson.dot_weights.select(0, 0), lesson.dot_weights.select(0, 1)}},
        .titles = {"additive, valid 2", "additive, valid 6", "dot-product, valid 2", "dot-product, valid 6"},
        .title = "identical keys: uniform weights over the valid ones",
        .vmin = 0.0,
        .vmax = 0.5};
    const auto masked_png = t.out_path("masked_softmax.png");
    const auto scoring_png = t.out_path("scoring_weights.png");
    tasks::plot_heatmaps(masked_png, masked);
    tasks::plot_heatmaps(scoring_png, scoring);
    note("Wrote\n    {}\n    {}", masked_png.string(), scoring_png.string());
    note("The data behind the panels, against the hand computations of steps 1, 2 and 4:");
    const c::Tensor hand_batch = masked_softmax_by_hand(lesson.X, lesson.lens_per_batch);
    const c::Tensor hand_rows = masked_softmax_by_hand(lesson.X, lesson.lens_per_row);
    bool panels = true;
    for (int64_t b = 0; b < 2; ++b)
        panels = panels && c::max(c::abs(c::sub(masked.matrices[0][b], hand_batch.select(0, b)))).item() < 1e-12 &&
                 c::max(c::abs(c::sub(masked.matrices[1][b], hand_rows.select(0, b)))).item() < 1e-12;
    t.check(panels, "the four masked-softmax panels are the hand-computed weights of their batch element");
    bool uniform = true;
    for (const auto& row : scoring.matrices)
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t j = 0; j < 10; ++j) {
                const double want = j < (b == 0 ? 2 : 6) ? (b == 0 ? 0.5 : 1.0 / 6) : 0.0;
                uniform = uniform && std::abs(row[b].at({0, j}) - want) < 1e-6;
            }
    t.check(uniform, "the four scoring panels are 1/2 on 2 keys and 1/6 on 6 keys, 0 after");
}

// ---- the exercise (--exercise): tutorials/05_attention_scoring/exercise.cpp -----------------

// seed 003 (003_8fde783e4908788c.txt) › 加性注意力: the scores, with broadcasting
void exercise_additive_scores(Tutorial& t) {
    note(
        "Write exercise::additive_scores. The checks give it the weights of an nn::AdditiveAttention and "
        "compare the masked softmax of your scores with the module's weights, on queries of size 5 and "
        "keys of size 3 that all differ; then one score by hand.");
    c::Generator g(505);
    nn::AdditiveAttention attention({.key_size = 3, .query_size = 5, .num_hiddens = 4}, g);
    attention.to(DType::float64);
    const Variable queries(c::randn({2, 2, 5}, g, DType::float64)), keys(c::randn({2, 6, 3}, g, DType::float64));
    const Variable values(c::randn({2, 6, 2}, g, DType::float64));
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{6, 4}, {2});
    attention(queries, keys, values, lens);
    const Variable scores =
        exercise::additive_scores(queries, keys, attention.W_q->weight, attention.W_k->weight, attention.w_v->weight);
    t.check(scores.shape() == c::Shape{2, 2, 6}, "scores have shape (B, T, S) = (2, 2, 6)");
    if (scores.shape() != c::Shape{2, 2, 6}) return;
    t.check_close(nn::masked_softmax(scores, lens).value(), attention.attention_weights, 1e-12,
                  "masked_softmax(your scores) equals the module's attention weights");
    const c::Tensor Wq = attention.W_q->weight.value(), Wk = attention.W_k->weight.value(),
                    wv = attention.w_v->weight.value();
    double a = 0;  // a(q, k) for query (1, 0) and key (1, 3), by hand
    for (int64_t h = 0; h < 4; ++h) {
        double z = 0;
        for (int64_t i = 0; i < 5; ++i) z += Wq.at({h, i}) * queries.value().at({1, 0, i});
        for (int64_t i = 0; i < 3; ++i) z += Wk.at({h, i}) * keys.value().at({1, 3, i});
        a += wv.at({0, h}) * std::tanh(z);
    }
    t.check_close(scores.value().at({1, 0, 3}), a, 1e-12,
                  "score of query (1, 0) and key (1, 3) equals w_vᵀ tanh(W_q q + W_k k)");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 05 · Attention scoring: masked softmax, additive and dot-product",
                .follows = "seed 003 注意力评分函数: 掩蔽softmax操作, 加性注意力, 缩放点积注意力",
                .exercise = "write additive attention's scores w_vᵀ tanh(W_q q + W_k k) for every "
                            "(query, key) pair with broadcasting (tutorials/05_attention_scoring/exercise.cpp)"});
    Lesson lesson;
    t.step("1. Masked softmax with one valid length per batch element: [2, 3]",
           [&] { masked_softmax_per_batch(t, lesson); });
    t.step("2. One valid length per row: [[1, 3], [2, 4]]", [&] { masked_softmax_per_row(t, lesson); });
    t.step("2b. The document's printed numbers, exactly; and PyTorch's masked_softmax",
           [&] { documents_numbers_exactly(t, lesson); });
    t.step("3. How the mask works, and the empty row", [&] { how_the_mask_works(t, lesson); });
    t.step("4. Additive attention (加性注意力): the document's example", [&] { additive_attention(t, lesson); });
    t.step("5. Scaled dot-product attention (缩放点积注意力)", [&] { scaled_dot_product_attention(t, lesson); });
    t.step("6. Why divide by √d", [&] { why_divide_by_sqrt_d(t, lesson); });
    t.step("7. Heatmaps of the weights", [&] { heatmaps(t, lesson); });
    t.exercise("Exercise. Additive attention's scores for every (query, key) pair",
               [&] { exercise_additive_scores(t); });
    return t.finish();
}
