// Tutorial 05 · Attention scoring functions: the document's scoring function
// as written, masked softmax, additive attention, scaled dot-product
// attention, and why the dot product is divided by √d.
//
// Follows seed 003 (003_8fde783e4908788c.txt), 注意力评分函数 (the Gaussian
// a(q, k) = 1/√(2π) exp(-½((q - k) w)²) whose output the seed feeds into the
// softmax: step 0 runs it as written), 掩蔽softmax操作 (the (2, 2, 4) example
// with valid lengths [2, 3] and [[1, 3], [2, 4]]), 加性注意力, 缩放点积注意力
// (with d2l's demonstration: queries (2, 1, 20), keys of ones (2, 10, 2),
// values arange(40) as (1, 10, 4) repeated, valid lengths [2, 6]; the seed
// quotes its conclusion, "均匀的注意力权重").
// Read it with tutorials/05_attention_scoring/README.md.
// tutorial-languages: en zh
// tutorial-fault: scores-without-shift | the scores behind lie in
// tutorial-fault: additive-ignores-keys | with keys that differ, the module's output equals
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "nn/attention_pooling.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>
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

// The largest |Σ_j w_j - 1| over the rows of 4 of a printed (2, 2, 4) result.
double worst_row_sum(const std::vector<double>& weights) {
    double worst = 0;
    for (size_t r = 0; r < weights.size(); r += 4)
        worst = std::max(worst, std::abs(weights[r] + weights[r + 1] + weights[r + 2] + weights[r + 3] - 1));
    return worst;
}

// (2, 2, 4) scores whose masked softmax gives the printed `weights` exactly:
// x_j = log w_j - min_k log w_k on the kept entries (the masked ones can be
// anything: 0.5). Softmax only sees differences, and subtracting the row's
// smallest log puts the scores in [0, spread of the logs).
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

// Additive attention's output by plain loops from the module's own weights:
// a(q, k) = Σ_h w_v[h] tanh(Σ_i W_q[h, i] q_i + Σ_i W_k[h, i] k_i), then the
// masked softmax by hand and the weighted sum of the values. queries (B, T, q),
// keys (B, S, k), values (B, S, v), lens (B) -> (B, T, v).
c::Tensor additive_by_loops(const nn::AdditiveAttention& attention, const c::Tensor& queries, const c::Tensor& keys,
                            const c::Tensor& values, const c::Tensor& lens) {
    const c::Tensor Wq = attention.W_q->weight.value(), Wk = attention.W_k->weight.value(),
                    wv = attention.w_v->weight.value();
    const int64_t B = queries.size(0), T = queries.size(1), S = keys.size(1), H = Wq.size(0);
    c::Tensor out = c::zeros({B, T, values.size(2)}, DType::float64);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t q = 0; q < T; ++q) {
            std::vector<double> scores(S, 0.0);
            for (int64_t s = 0; s < S; ++s)
                for (int64_t h = 0; h < H; ++h) {
                    double z = 0;
                    for (int64_t i = 0; i < Wq.size(1); ++i) z += Wq.at({h, i}) * queries.at({b, q, i});
                    for (int64_t i = 0; i < Wk.size(1); ++i) z += Wk.at({h, i}) * keys.at({b, s, i});
                    scores[s] += wv.at({0, h}) * std::tanh(z);
                }
            const std::vector<double> w = softmax_prefix(scores, static_cast<int64_t>(lens.at({b})));
            for (int64_t s = 0; s < S; ++s)
                for (int64_t j = 0; j < values.size(2); ++j)
                    out.set({b, q, j}, out.at({b, q, j}) + w[s] * values.at({b, s, j}));
        }
    return out;
}

// An attention layer's output and the weights it kept.
struct Attended {
    Variable output;    // (B, T, v)
    c::Tensor weights;  // (B, T, S)
};

namespace faults {
Attended additive_ignoring_keys(const nn::AdditiveAttention& attention, const Variable& queries, const Variable& keys,
                                const Variable& values, const c::Tensor& lens);
c::Tensor scores_without_shift(const std::vector<double>& weights);
}  // namespace faults

// nn::AdditiveAttention on these inputs; with --inject-fault additive-ignores-keys
// a plausible wrong scoring instead (the test that step 4's checks can fail).
Attended additive(Tutorial& t, nn::AdditiveAttention& attention, const Variable& queries, const Variable& keys,
                  const Variable& values, const c::Tensor& lens) {
    if (t.injected("additive-ignores-keys"))
        return faults::additive_ignoring_keys(attention, queries, keys, values, lens);
    const Variable out = attention(queries, keys, values, lens);
    return {out, attention.attention_weights};
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

// Step 0's weights for one w: queries x_test (n) against keys x_train (m).
// As written, α = softmax_i(a) with a = 1/√(2π) exp(-½((x - x_i) w)²); corrected,
// α = softmax_i(-½((x - x_i) w)²), the exponent alone (d2l's scoring function).
struct GaussianWeights {
    c::Tensor as_written, corrected;  // (n, m), float64
};
GaussianWeights gaussian_weights(const c::Tensor& queries, const c::Tensor& keys, double w) {
    const c::Tensor diff =
        c::mul(c::sub(queries.to(DType::float64).unsqueeze(1), keys.to(DType::float64).unsqueeze(0)), w);
    const c::Tensor exponent = c::mul(c::mul(diff, diff), -0.5);                          // (n, m)
    const c::Tensor density = c::div(c::exp(exponent), std::sqrt(2 * std::numbers::pi));  // a(x, x_i), in (0, 0.399]
    return {c::softmax(density), c::softmax(exponent)};
}

double mse(const c::Tensor& prediction, const c::Tensor& truth) {
    const c::Tensor d = c::sub(prediction, truth.to(DType::float64));
    return c::mean(c::mul(d, d)).item();
}

// seed 003 (003_8fde783e4908788c.txt) › 注意力评分函数: the Gaussian, fed into the softmax as written
void scoring_function_as_written(Tutorial& t) {
    note(
        {.en = "Seed 003's 注意力评分函数 opens with tutorial 04's Gaussian kernel as a scoring function,\n"
               "    a(q, k) = 1/√(2π) exp(-½((q - k) w)²)\n"
               "and says 'the output of this function is fed into the softmax'. Read as written that is\n"
               "    α(q, k_i) = softmax_i(a(q, k_i)) = exp(a(q, k_i)) / Σ_j exp(a(q, k_j)),\n"
               "the exponential of the whole density. d2l, which the section follows, feeds only the exponent: "
               "the scoring function is a(q, k) = -½((q - k) w)², and softmax_i(-½((q - k_i) w)²) is the Gaussian "
               "density normalised over the keys (the 1/√(2π) cancels). The two are not the same. a as written "
               "lies in (0, 1/√(2π)] = (0, 0.399], so its softmax weights can differ by a factor of at most "
               "e^0.399 = 1.49: however large w, the attention stays nearly uniform. Tutorial 04's data, every "
               "test point a query against the 50 training inputs:",
         .zh =
             "种子文档 003 的“注意力评分函数”一开头，把教程 04 的高斯核写成评分函数\n"
             "    a(q, k) = 1/√(2π) exp(-½((q - k) w)²)\n"
             "并说“然后把这个函数的输出结果输入到softmax函数中进行运算”。照字面理解就是\n"
             "    α(q, k_i) = softmax_i(a(q, k_i)) = exp(a(q, k_i)) / Σ_j exp(a(q, k_j))，\n"
             "即对整个密度再取指数。这一节所依据的 d2l 只把指数部分送进 softmax：评分函数是 a(q, k) = -½((q - k) w)²，"
             "而 softmax_i(-½((q - k_i) w)²) 正是在各个键上归一化的高斯密度（1/√(2π) 被约掉）。两者并不相同。照原文"
             "写的 a 落在 (0, 1/√(2π)] = (0, 0.399] 内，所以 softmax 之后各权重之比至多是 e^0.399 = 1.49：不论 w 多大，"
             "注意力都几乎是均匀的。用教程 04 的数据，每个测试点作为查询，面对 50 个训练输入："});
    c::Generator gen(4);  // tutorial 04's generator: the same data
    const nn::PoolingData data = nn::make_pooling_data(50, gen);
    const c::Tensor y = data.y_train.to(DType::float64);  // (m)
    const double average = mse(c::full({50}, c::mean(y).item(), DType::float64), data.y_truth);
    line({.en = "\n        w    test MSE, as written    test MSE, corrected    largest weight ratio, as written",
          .zh = "\n        w      测试 MSE（照原文）     测试 MSE（改正后）                照原文时的最大权重比"});
    double worst_ratio = 0, best_written = 1e300, best_corrected = 1e300;
    bool corrected_better = true;
    for (double w : {1.0, 3.0, 10.0}) {
        const GaussianWeights g = gaussian_weights(data.x_test, data.x_train, w);
        const double written = mse(c::matmul(g.as_written, y), data.y_truth);
        const double corrected = mse(c::matmul(g.corrected, y), data.y_truth);
        const double ratio = c::max(c::div(c::max(g.as_written, {1}), c::min(g.as_written, {1}))).item();
        line("      {:>3.0f} {:>23.4f} {:>22.4f} {:>35.4f}", w, written, corrected, ratio);
        worst_ratio = std::max(worst_ratio, ratio);
        best_written = std::min(best_written, written);
        best_corrected = std::min(best_corrected, corrected);
        corrected_better = corrected_better && corrected < written;
    }
    line({.en = "      average pooling (tutorial 04, step 3): test MSE {:.4f}\n",
          .zh = "      平均汇聚（教程 04 第 3 步）：测试 MSE {:.4f}\n"},
         average);
    t.check(worst_ratio <= std::exp(1 / std::sqrt(2 * std::numbers::pi)),
            {.en = "as written, no weight of a row exceeds another by more than e^(1/√(2π)) = 1.49, for every w",
             .zh = "照原文，对每个 w，同一行里任何权重都不超过另一个的 e^(1/√(2π)) = 1.49 倍"});
    t.check(
        best_written > 0.85 * average,
        {.en = "as written, no w brings the error 15% below average pooling's ({:.4f} at best): the keys hardly matter",
         .zh = "照原文，没有哪个 w 能让误差比平均汇聚低 15%（最好也只有 {:.4f}）：键几乎不起作用"},
        best_written);
    t.check(best_corrected < 0.25 * best_written,
            {.en = "corrected, the best w cuts the error to less than a quarter of that ({:.4f})",
             .zh = "改正后，最好的 w 把误差降到它的四分之一以下（{:.4f}）"},
            best_corrected);
    t.check(corrected_better, {.en = "the corrected scoring function fits better than the one as written, for every w",
                               .zh = "对每个 w，改正后的评分函数都比照原文的拟合得好"});
    const GaussianWeights one = gaussian_weights(data.x_test, data.x_train, 1.0);
    const c::Tensor exponent_free = c::exp(c::mul(
        c::pow(c::sub(data.x_test.to(DType::float64).unsqueeze(1), data.x_train.to(DType::float64).unsqueeze(0)), 2),
        -0.5));  // the density without its constant
    t.check_close(
        one.corrected, c::div(exponent_free, c::sum(exponent_free, {1}, true)), 1e-12,
        {.en = "corrected, the weights are the Gaussian density normalised over the keys: the 1/√(2π) cancels",
         .zh = "改正后，权重就是在各个键上归一化的高斯密度：1/√(2π) 被约掉"});
    t.check_close(
        one.corrected,
        nn::nadaraya_watson(Variable(data.x_test), Variable(data.x_train), Variable(data.y_train)).attention_weights,
        1e-6,
        {.en = "and for w = 1 they are nn::nadaraya_watson's, tutorial 04's non-parametric pooling",
         .zh = "而且 w = 1 时它们就是 nn::nadaraya_watson 的权重，即教程 04 的非参数注意力汇聚"});
    note({.en = "So where seed 003 says the scoring function's output goes into the softmax, read: its exponent. "
                "The rest of the section (additive and scaled dot-product attention) feeds scores that can be "
                "any real number into the softmax, which is right.",
          .zh =
              "所以种子文档 003 说评分函数的输出送进 softmax 的地方，应读作：它的指数部分。这一节其余部分（加性注意力、"
              "缩放点积注意力）送进 softmax 的分数可以是任意实数，那是对的。"});
}

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: valid lengths [2, 3]
void masked_softmax_per_batch(Tutorial& t, Lesson& lesson) {
    note({.en = "Sequences in a minibatch are padded to the same length with meaningless tokens. Attention must "
                "not give them any weight, so the softmax over the keys only runs over the first valid_len "
                "entries of each row and puts exactly 0 after them (seed 003, 掩蔽softmax操作). The seed's "
                "example is a (2, 2, 4) tensor of uniform random scores with valid lengths [2, 3]: both rows "
                "of batch element 0 keep 2 entries, both rows of element 1 keep 3 (the seed: 'understand "
                "[2, 3] as [[2, 2], [3, 3]]').",
          .zh =
              "小批量中的序列用没有意义的词元填充到相同长度。注意力不能分给它们任何权重，所以对键的 softmax 只在每行的"
              "前 valid_len 个元素上进行，其后的位置恰好置为 0（种子文档 003，掩蔽softmax操作）。种子文档的例子是一个 "
              "(2, 2, 4) 的均匀随机分数张量，有效长度为 [2, 3]：批量元素 0 的两行各保留 2 个元素，元素 1 的两行各保留 "
              "3 个（种子文档：“[2, 3] 可以理解为 [[2, 2], [3, 3]]”）。"});
    show("X", lesson.X);
    lesson.per_batch = nn::masked_softmax(Variable(lesson.X), lesson.lens_per_batch).value();
    show("masked_softmax(X, [2, 3])", lesson.per_batch);
    t.check_close(lesson.per_batch, masked_softmax_by_hand(lesson.X, lesson.lens_per_batch), 1e-15,
                  {.en = "equal to a softmax over each row's first 2 or 3 entries, by hand",
                   .zh = "等于手算的、只对每行前 2 或 3 个元素做的 softmax"});
    t.check_close(c::sum(lesson.per_batch, {2}), c::ones({2, 2}, DType::float64), 1e-15,
                  {.en = "every row sums to 1", .zh = "每一行之和为 1"});
    t.check(
        same_zero_pattern(lesson.per_batch, kDocPerBatch),
        {.en = "the zeros are where the document's printed result has them", .zh = "0 出现的位置与文档打印的结果相同"});
    note(
        {.en = "The document's numbers themselves differ from ours: they come from torch.rand, ours from "
               "tformer's generator. But they can be checked: softmax only sees differences of scores, "
               "w_i / w_j = e^(x_i - x_j), and scores drawn from [0, 1) differ by less than 1, so no two kept "
               "weights of a row can differ by a factor e or more.",
         .zh =
             "文档里的数本身与我们的不同：它们来自 torch.rand，我们的来自 tformer "
             "的随机数生成器。但它们可以检验：softmax "
             "只看分数之差，w_i / w_j = e^(x_i - x_j)，而从 [0, 1) 抽出的分数相差不到 1，所以同一行里保留下来的任何两个"
             "权重之比都不可能达到 e。"});
    double widest = 0;  // the largest |x_i - x_j| = |log(w_i / w_j)| within a row of the document's result
    for (size_t r = 0; r < kDocPerBatch.size(); r += 4)
        for (size_t i = r; i < r + 4; ++i)
            for (size_t j = r; j < r + 4; ++j)
                if (kDocPerBatch[i] > 0 && kDocPerBatch[j] > 0)
                    widest = std::max(widest, std::abs(std::log(kDocPerBatch[i] / kDocPerBatch[j])));
    note({.en = "In the document's result the largest |log(w_i / w_j)| within a row is {:.4f}, below 1: its numbers "
                "could come from such scores (step 2b finds them).",
          .zh = "文档结果中同一行内最大的 |log(w_i / w_j)| 是 {:.4f}，小于 1：这些数可能来自这样的分数（第 2b "
                "步把它们找出来）。"},
         widest);
}

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: valid lengths [[1, 3], [2, 4]]
void masked_softmax_per_row(Tutorial& t, Lesson& lesson) {
    note({.en = "A 2-D tensor of valid lengths gives each query row its own length: row 0 of batch element 0 "
                "keeps 1 entry, row 1 keeps 3; batch element 1 keeps 2 and 4. A row with one entry is exactly "
                "1 there, as in the document's result.",
          .zh = "二维的有效长度张量给每个查询行各自的长度：批量元素 0 的第 0 行保留 1 个元素，第 1 行保留 3 "
                "个；批量元素 1 "
                "保留 2 个和 4 个。只保留一个元素的行在那里恰好是 1，与文档的结果一致。"});
    lesson.per_row = nn::masked_softmax(Variable(lesson.X), lesson.lens_per_row).value();
    note(both("    per_row = nn::masked_softmax(X, [[1, 3], [2, 4]])"));
    show("per_row", lesson.per_row);
    t.check_close(lesson.per_row, masked_softmax_by_hand(lesson.X, lesson.lens_per_row), 1e-15,
                  {.en = "equal to the per-row softmax by hand", .zh = "等于手算的逐行 softmax"});
    t.check(lesson.per_row.at({0, 0, 0}) == 1.0,
            {.en = "a row with valid length 1 is exactly [1, 0, 0, 0]", .zh = "有效长度为 1 的行恰好是 [1, 0, 0, 0]"});
    t.check(same_zero_pattern(lesson.per_row, kDocPerRow),
            {.en = "the zeros are where the document's result has them", .zh = "0 出现的位置与文档的结果相同"});
}

// Step 2b, part 2: d2l's masked_softmax run by torch (tests/fixtures/tutorial_layers.safetensors).
void masked_softmax_against_pytorch(Tutorial& t) {
    note({.en = "\nAnd against PyTorch: tests/fixtures/tutorial_layers.safetensors holds d2l's masked_softmax "
                "(the -1e6 fill) run by torch on its own torch.rand(2, 2, 4), with both kinds of valid lengths, and "
                "the gradient of sum(weights · u) for random u:",
          .zh = "\n再与 PyTorch 对照：tests/fixtures/tutorial_layers.safetensors 存有 d2l 的 masked_softmax（用 -1e6 "
                "填充）"
                "由 torch 在它自己的 torch.rand(2, 2, 4) 上、用两种有效长度运行的结果，以及 sum(weights · u)（u "
                "随机）的梯度："});
    const tutorial::Reference ref("tutorial_layers");
    for (const std::string prefix : {"masked_softmax_per_batch", "masked_softmax_per_row"}) {
        const Variable Xt(ref[prefix + ".input.X"], true);
        const Variable w = nn::masked_softmax(Xt, ref[prefix + ".input.valid_lens"]);
        ag::sum(w * Variable(ref[prefix + ".input.upstream"])).backward();
        t.check_allclose(w.value(), ref[prefix + ".output"], 1e-6,
                         {.en = "{}: the weights match PyTorch's", .zh = "{}：权重与 PyTorch 的一致"}, prefix);
        t.check_allclose(Xt.grad(), ref[prefix + ".grad.input.X"], 1e-5,
                         {.en = "{}: d/dX matches PyTorch's", .zh = "{}：d/dX 与 PyTorch 的一致"}, prefix);
    }
}

// seed 003 (003_8fde783e4908788c.txt) › 掩蔽softmax操作: the printed results, exactly
void documents_numbers_exactly(Tutorial& t, const Lesson& lesson) {
    note(
        {.en = "The seed's two results come from torch.rand draws that it does not print, so step 1 could only "
               "check their zeros and ratios. What can be checked about the printed numbers themselves:\n"
               "- each printed row sums to 1, to its printed digits;\n"
               "- softmax only sees differences of scores, so the scores x_j = log w_j - min_k log w_k give "
               "exactly the printed kept weights back (the masked scores can be anything): that holds for "
               "any row that sums to 1, so it shows the library's masked softmax on known answers, not the "
               "document;\n"
               "- what says something about the document is where those scores lie: inside [0, 1), where "
               "torch.rand draws, only when no two kept weights of a row differ by a factor e.",
         .zh =
             "种子文档的两个结果来自它没有打印的 torch.rand 抽样，所以第 1 步只能检查其中的 0 "
             "和比值。对打印出来的数本身，"
             "能检验的是：\n"
             "- 打印的每一行之和为 1，精确到打印的位数；\n"
             "- softmax 只看分数之差，所以分数 x_j = log w_j - min_k log w_k 正好还原出打印的那些保留权重（被掩蔽的分数"
             "取什么都行）：凡是和为 1 的行都如此，所以这检验的是库的掩蔽 softmax 在已知答案上的表现，而不是文档；\n"
             "- 真正说明文档的是这些分数落在哪里：只有当同一行里任何两个保留权重之比都不到 e 时，它们才落在 torch.rand "
             "抽样的 [0, 1) 之内。"});
    t.check(worst_row_sum(kDocPerBatch) < 2e-6 && worst_row_sum(kDocPerRow) < 2e-6,
            {.en = "every printed row of both results sums to 1 within its rounding ({:.1e} at most)",
             .zh = "两个结果打印出的每一行之和都在舍入误差内等于 1（至多差 {:.1e}）"},
            std::max(worst_row_sum(kDocPerBatch), worst_row_sum(kDocPerRow)));
    // the scores behind the printed rows; with --inject-fault scores-without-shift, log w_j alone
    const auto behind = t.injected("scores-without-shift") ? faults::scores_without_shift : scores_behind;
    const c::Tensor X1 = behind(kDocPerBatch), X2 = behind(kDocPerRow);
    show({.en = "X behind the [2, 3] result", .zh = "[2, 3] 结果背后的 X"}, X1);
    const c::Tensor out1 = nn::masked_softmax(Variable(X1), lesson.lens_per_batch).value();
    const c::Tensor out2 = nn::masked_softmax(Variable(X2), lesson.lens_per_row).value();
    show("masked_softmax(X, [2, 3])", out1);
    show("masked_softmax(X', [[1, 3], [2, 4]])", out2);
    t.check_close(out1, c::tensor(kDocPerBatch, {2, 2, 4}, DType::float64), 5e-8,
                  {.en = "masked_softmax gives the seed's [2, 3] result back to its printed 8 digits",
                   .zh = "masked_softmax 还原出种子文档的 [2, 3] 结果，精确到打印的 8 位"});
    t.check_close(out2, c::tensor(kDocPerRow, {2, 2, 4}, DType::float64), 5e-8,
                  {.en = "masked_softmax gives the seed's [[1, 3], [2, 4]] result back to its printed 8 digits",
                   .zh = "masked_softmax 还原出种子文档的 [[1, 3], [2, 4]] 结果，精确到打印的 8 位"});
    const double low = std::min(c::min(X1).item(), c::min(X2).item()),
                 high = std::max(c::max(X1).item(), c::max(X2).item());
    t.check(
        low >= 0 && high < 1,
        {.en = "the scores behind lie in [0, 1) ([{:.4f}, {:.4f}]): both printed results could come from torch.rand",
         .zh = "背后的分数落在 [0, 1) 内（[{:.4f}, {:.4f}]）：两个打印的结果都可能来自 torch.rand"},
        low, high);
    t.check_close(nn::masked_softmax(Variable(X1), c::from_vector(std::vector<int64_t>{2, 2, 3, 3}, {2, 2})).value(),
                  out1, 0,
                  {.en = "'[2, 3] 可以理解为 [[2, 2], [3, 3]]': the per-row lengths give the same weights",
                   .zh = "“[2, 3] 可以理解为 [[2, 2], [3, 3]]”：逐行的长度给出相同的权重"});
    masked_softmax_against_pytorch(t);
}

// seed 003 (003_8fde783e4908788c.txt) › 对注意力分数进行masked_softmax (d2l's -1e6 fill)
void how_the_mask_works(Tutorial& t, Lesson& lesson) {
    note({.en = "d2l implements the mask by overwriting the scores beyond the valid length with -1e6 before an "
                "ordinary softmax: e^(-1e6) is 0 in floating point. tformer uses -inf, which gives the same "
                "weights, and a bool 'keep' mask (seed 002's and seed 004's form) gives them too:",
          .zh = "d2l 实现掩蔽的办法是：在普通 softmax 之前，把有效长度之外的分数改写为 -1e6，浮点数里 e^(-1e6) 就是 0。"
                "tformer 用 -inf，得到相同的权重；布尔型的“保留”掩码（种子文档 002 和 004 的写法）也得到相同的权重："});
    const c::Tensor &X = lesson.X, &lens = lesson.lens_per_batch;
    const c::Tensor keep = keep_mask(lens, 2, 4);
    show("keep = arange(4) < valid_len", keep.select(0, 0));
    const c::Tensor d2l_fill = c::where(keep, X, c::full({2, 2, 4}, -1e6, DType::float64));
    t.check_close(c::softmax(d2l_fill), lesson.per_batch, 1e-15,
                  {.en = "softmax after d2l's -1e6 fill gives the same weights",
                   .zh = "用 d2l 的 -1e6 填充后做 softmax，权重相同"});
    t.check_close(nn::masked_softmax(Variable(X), keep).value(), lesson.per_batch, 0,
                  {.en = "masked_softmax with the bool mask gives exactly the same weights",
                   .zh = "用布尔掩码的 masked_softmax 给出完全相同的权重"});

    note({.en = "\nMasked scores get no gradient either: they do not influence the output at all.",
          .zh = "\n被掩蔽的分数也得不到梯度：它们对输出毫无影响。"});
    const Variable Xv(X, true);
    const Variable w = nn::masked_softmax(Xv, lens);
    ag::sum(w * Variable(c::randn({2, 2, 4}, lesson.gen, DType::float64))).backward();
    show("X.grad", Xv.grad());
    t.check(c::sum(c::abs(c::where(keep, c::zeros({2, 2, 4}, DType::float64), Xv.grad()))).item() == 0,
            {.en = "the gradient is exactly 0 at every masked position", .zh = "每个被掩蔽的位置上梯度都恰好为 0"});

    note({.en = "\nThe two methods part ways when a row keeps NOTHING (valid length 0, e.g. a query that is "
                "itself padding). With -1e6 every entry is equally small, so d2l spreads the weight uniformly "
                "over the padding. tformer returns all zeros: the query attends to nothing.",
          .zh = "\n当一行什么都不保留时（有效长度为 0，比如查询本身就是填充），两种做法就分道扬镳了。用 -1e6 "
                "时每个元素都一样"
                "小，所以 d2l 把权重均匀地摊在填充上。tformer 返回全 0：这个查询什么也不关注。"});
    const c::Tensor zero = c::from_vector(std::vector<int64_t>{0, 3}, {2});
    const c::Tensor ours = nn::masked_softmax(Variable(X), zero).value();
    const c::Tensor d2l = c::softmax(c::where(keep_mask(zero, 2, 4), X, c::full({2, 2, 4}, -1e6, DType::float64)));
    note({.en = "    valid lengths [0, 3]: batch element 0 keeps nothing",
          .zh = "    有效长度 [0, 3]：批量元素 0 什么也不保留"});
    show("tformer[0]", ours.select(0, 0));
    show("d2l[0]    ", d2l.select(0, 0));
    t.check(c::sum(c::abs(ours.select(0, 0))).item() == 0,
            {.en = "tformer: an empty row has all-zero weights", .zh = "tformer：空行的权重全为 0"});
    t.check_close(d2l.select(0, 0), c::full({2, 4}, 0.25, DType::float64), 1e-12,
                  {.en = "d2l: 0.25 on each padded key", .zh = "d2l：每个填充的键上都是 0.25"});
}

// d2l's example inputs for steps 4 and 5: keys of ones (2, 10, 2), values arange(40) as (10, 4) twice,
// valid lengths [2, 6]; the queries are the caller's.
struct Example {
    Variable keys{c::ones({2, 10, 2})};                                               // (B, S, k)
    Variable values{c::arange(40).view({1, 10, 4}).expand({2, 10, 4}).contiguous()};  // (B, S, v)
    c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{2, 6}, {2});           // (B)
    c::Tensor expected_output = c::tensor({2, 3, 4, 5, 10, 11, 12, 13}, {2, 1, 4});   // d2l's result
};

// Step 4, part 1: d2l's example, whose identical keys give uniform weights.
void additive_documents_example(Tutorial& t, Lesson& lesson, nn::AdditiveAttention& attention) {
    const Variable queries(c::randn({2, 1, 20}, lesson.gen));  // (B, T, q)
    const Example ex;
    show("values[0]", ex.values.value().select(0, 0).slice(0, 0, 3));
    note({.en = "    ... (10 rows of 4)", .zh = "    ……（共 10 行，每行 4 个）"});
    const Attended out = additive(t, attention, queries, ex.keys, ex.values, ex.valid_lens);
    lesson.additive_weights = out.weights;
    show("output", out.output.value());
    show("attention_weights", lesson.additive_weights);

    note({.en = "\nThe shapes inside, with the module's own weights:", .zh = "\n内部的形状，用模块自己的权重："});
    const Variable q = (*attention.W_q)(queries);                                   // (2, 1, 8)
    const Variable k = (*attention.W_k)(ex.keys);                                   // (2, 10, 8)
    const Variable features = ag::tanh(ag::unsqueeze(q, 2) + ag::unsqueeze(k, 1));  // (2, 1, 10, 8)
    const Variable scores = ag::squeeze((*attention.w_v)(features), 3);             // (2, 1, 10)
    note({.en = "    W_q q: {}   W_k k: {}   tanh(W_q q + W_k k) broadcast: {}   scores: {}",
          .zh = "    W_q q：{}   W_k k：{}   广播后的 tanh(W_q q + W_k k)：{}   分数：{}"},
         c::shape_str(q.shape()), c::shape_str(k.shape()), c::shape_str(features.shape()),
         c::shape_str(scores.shape()));
    show({.en = "scores", .zh = "分数"}, scores.value());
    t.check_close(nn::masked_softmax(scores, ex.valid_lens).value(), lesson.additive_weights, 1e-6,
                  {.en = "masked_softmax of the hand-built scores gives the module's weights",
                   .zh = "对手工搭出的分数做 masked_softmax，得到模块的权重"});
    note({.en = "All 10 keys are the same vector, so all 10 scores of a query are equal, and the weights are "
                "uniform over the valid keys: 1/2 each for the first query, 1/6 for the second. The output is "
                "then the plain average of the first 2 (or 6) value rows.",
          .zh =
              "10 个键都是同一个向量，所以一个查询的 10 个分数全都相等，权重在有效的键上是均匀的：第一个查询每个 1/2，"
              "第二个每个 1/6。输出就是前 2（或 6）行值的简单平均。"});
    c::Tensor uniform = c::zeros({2, 1, 10});
    for (int64_t j = 0; j < 2; ++j) uniform.set({0, 0, j}, 0.5);
    for (int64_t j = 0; j < 6; ++j) uniform.set({1, 0, j}, 1.0 / 6);
    t.check_close(lesson.additive_weights, uniform, 1e-6,
                  {.en = "weights [1/2, 1/2, 0, ...] and [1/6 × 6, 0, 0, 0, 0]",
                   .zh = "权重为 [1/2, 1/2, 0, ...] 和 [1/6 × 6, 0, 0, 0, 0]"});
    t.check_close(out.output.value(), ex.expected_output, 1e-5,
                  {.en = "output [[2, 3, 4, 5]] and [[10, 11, 12, 13]], d2l's result",
                   .zh = "输出 [[2, 3, 4, 5]] 和 [[10, 11, 12, 13]]，与 d2l 的结果相同"});
}

// Step 4, part 2: keys that differ, against the formula computed by loops.
void additive_distinct_keys(Tutorial& t, nn::AdditiveAttention& attention) {
    note(
        {.en = "\nThose checks reproduce the document's example, but they cannot tell one scoring function from "
               "another: with identical keys EVERY scoring function gives uniform weights, even one that ignores "
               "the keys altogether. With 10 keys that differ (random, like the 3 queries per sequence), the "
               "module's output against a(q, k) = w_vᵀ tanh(W_q q + W_k k), the masked softmax and the weighted "
               "sum computed by plain loops from the module's weights:",
         .zh =
             "\n上面的检查重现了文档的例子，却分辨不出不同的评分函数：键完全相同时，“任何”评分函数都给出均匀的权重，哪"
             "怕"
             "它根本不看键。换成 10 个各不相同的键（随机，每个序列 3 个查询也随机），把模块的输出与用普通循环、从模块的"
             "权重出发算出的 a(q, k) = w_vᵀ tanh(W_q q + W_k k)、掩蔽 softmax 和加权和比较："});
    c::Generator gen(504);  // its own numbers, so that steps 5 and 6 draw what they always drew
    const Example ex;
    const Variable queries(c::randn({2, 3, 20}, gen)), keys(c::randn({2, 10, 2}, gen));  // (B, T, q), (B, S, k)
    const Attended out = additive(t, attention, queries, keys, ex.values, ex.valid_lens);
    show("attention_weights[1]", out.weights.select(0, 1));
    t.check_allclose(out.output.value(),
                     additive_by_loops(attention, queries.value(), keys.value(), ex.values.value(), ex.valid_lens),
                     1e-5,
                     {.en = "with keys that differ, the module's output equals the formula computed by loops",
                      .zh = "键各不相同时，模块的输出等于用循环算出的公式"});
    const c::Tensor kept = out.weights.select(0, 1).slice(1, 0, 6);  // (3, 6): sequence 1's valid keys
    t.check(c::max(kept).item() - c::min(kept).item() > 0.01,
            {.en = "and the weights are no longer uniform: the keys matter", .zh = "而且权重不再均匀：键起了作用"});
}

// seed 003 (003_8fde783e4908788c.txt) › 注意力评分函数 › 加性注意力
void additive_attention(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "When queries and keys have different sizes, additive attention scores them with a one-layer "
               "MLP:\n"
               "    a(q, k) = w_vᵀ tanh(W_q q + W_k k),   W_q (h × q), W_k (h × k), w_v (h)\n"
               "The example: 2 batch elements, each with 1 query of size 20 (normal random) and 10 keys of size "
               "2 that are all ones; values are arange(40) as (10, 4), the same for both; valid lengths [2, 6]; "
               "h = 8 hidden units; dropout 0.1, switched off by eval().",
         .zh =
             "查询和键的长度不同时，加性注意力用一个单隐藏层的多层感知机给它们打分：\n"
             "    a(q, k) = w_vᵀ tanh(W_q q + W_k k),   W_q (h × q), W_k (h × k), w_v (h)\n"
             "例子：2 个批量元素，各有 1 个长度为 20 的查询（正态随机）和 10 个长度为 2、全为 1 的键；值是排成 (10, 4) "
             "的 arange(40)，两者相同；有效长度 [2, 6]；h = 8 个隐藏单元；dropout 0.1，由 eval() 关闭。"});
    nn::AdditiveAttention attention({.key_size = 2, .query_size = 20, .num_hiddens = 8, .dropout = 0.1}, lesson.gen);
    attention.eval();
    additive_documents_example(t, lesson, attention);
    additive_distinct_keys(t, attention);
}

// seed 003 (003_8fde783e4908788c.txt) › 缩放点积注意力 and 计算注意力汇聚函数
void scaled_dot_product_attention(Tutorial& t, Lesson& lesson) {
    note({.en = "If queries and keys have the same size d, the score can be their dot product, scaled:\n"
                "    a(q, k) = qᵀk / √d,   for a batch: softmax(Q Kᵀ / √d) V   (n × d)(d × m)(m × v) -> (n × v)\n"
                "No parameters at all. d2l repeats the example with queries of size 2 (so d = 2) and dropout 0.5, "
                "off in eval():",
          .zh = "如果查询和键长度相同，都是 d，分数可以取它们的点积再缩放：\n"
                "    a(q, k) = qᵀk / √d，   对一个批量：softmax(Q Kᵀ / √d) V   (n × d)(d × m)(m × v) -> (n × v)\n"
                "完全没有参数。d2l 用长度为 2 的查询（于是 d = 2）、dropout 0.5（eval() 时关闭）重做这个例子："});
    nn::DotProductAttention attention({.dropout = 0.5}, lesson.gen);
    attention.eval();
    const Variable queries(c::randn({2, 1, 2}, lesson.gen));  // (B, T, d)
    const Example ex;
    const Variable out = attention(queries, ex.keys, ex.values, ex.valid_lens);
    lesson.dot_weights = attention.attention_weights;
    show("output", out.value());
    t.check_close(out.value(), ex.expected_output, 1e-5,
                  {.en = "identical keys again give uniform weights and the same output as additive attention",
                   .zh = "相同的键又一次给出均匀的权重，输出与加性注意力相同"});

    note({.en = "\nWith keys that differ, the formula by hand, step by step, against the module:",
          .zh = "\n换成各不相同的键，逐步手算公式，与模块对照："});
    const c::Tensor Q = c::randn({2, 3, 4}, lesson.gen, DType::float64),
                    K = c::randn({2, 5, 4}, lesson.gen, DType::float64),
                    V = c::randn({2, 5, 2}, lesson.gen, DType::float64);
    const c::Tensor S = c::div(c::matmul(Q, K.transpose(1, 2)), std::sqrt(4.0));  // (2, 3, 5)
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{5, 3}, {2});
    const c::Tensor W = c::masked_softmax(S, lens);  // (2, 3, 5)
    const c::Tensor O = c::matmul(W, V);             // (2, 3, 2)
    note({.en = "    Q {}  Kᵀ {}  scores {}  weights {}  V {}  output {}",
          .zh = "    Q {}  Kᵀ {}  分数 {}  权重 {}  V {}  输出 {}"},
         c::shape_str(Q.shape()), c::shape_str(K.transpose(1, 2).shape()), c::shape_str(S.shape()),
         c::shape_str(W.shape()), c::shape_str(V.shape()), c::shape_str(O.shape()));
    show("scores[0]", S.select(0, 0));
    t.check_close(attention(Variable(Q), Variable(K), Variable(V), lens).value(), O, 1e-12,
                  {.en = "nn::DotProductAttention = softmax(Q Kᵀ / √d) V with the mask",
                   .zh = "nn::DotProductAttention = 带掩码的 softmax(Q Kᵀ / √d) V"});
    t.check_close(attention.attention_weights, W, 1e-15,
                  {.en = "and it keeps exactly these weights for heatmaps", .zh = "而且它为热力图保存的正是这些权重"});
}

// Step 6, part 1: var(qᵀk) grows like d, and ÷√d brings it back to 1.
void dot_product_variance(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 003: if the entries of q and k are independent with mean 0 and variance 1, then qᵀk = "
                "Σ_i q_i k_i is a sum of d terms of mean 0 and variance 1, so it has mean 0 and variance d. "
                "Dividing by √d brings the variance back to 1 whatever d is. Measured on 10000 random pairs:",
          .zh =
              "种子文档 003：如果 q 和 k 的各个元素相互独立、均值为 0、方差为 1，那么 qᵀk = Σ_i q_i k_i 是 d 个均值 0、"
              "方差 1 的项之和，它的均值为 0、方差为 d。除以 √d 就把方差拉回到 1，不论 d 是多少。在 10000 对随机向量上"
              "测量："});
    line({.en = "\n          d    var(qᵀk)    var(qᵀk) / d    var(qᵀk / √d)",
          .zh = "\n          d    var(qᵀk)    var(qᵀk) / d    var(qᵀk / √d)"});
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
    t.check(all_close, {.en = "var(qᵀk) / d is within 12% of 1 for every d (10000 samples)",
                        .zh = "对每个 d，var(qᵀk) / d 与 1 相差不到 12%（10000 个样本）"});
}

// Step 6, part 2: unscaled scores saturate the softmax, and its Jacobian passes little gradient.
void softmax_saturation(Tutorial& t, Lesson& lesson) {
    note({.en = "Why the variance matters: softmax of scores with a large spread is nearly one-hot. Then almost "
                "all weight sits on one key, and the softmax's Jacobian J = diag(p) - p pᵀ is nearly 0, so "
                "almost no gradient reaches the queries and keys ('more stable gradients', seed 001). For 1000 "
                "queries against 10 random keys each:",
          .zh = "方差为什么要紧：分数分布很散时，softmax 几乎是独热的。这时几乎全部权重都落在一个键上，softmax "
                "的雅可比矩阵 "
                "J = diag(p) - p pᵀ 接近 0，几乎没有梯度能传到查询和键（种子文档 001 所说的“更稳定的梯度”）。对 1000 "
                "个查询，"
                "每个面对 10 个随机的键："});
    line({.en = "\n          d    mean max weight          mean ‖J‖_F (gradient size)\n"
                "               qᵀk       qᵀk / √d       qᵀk         qᵀk / √d",
          .zh = "\n          d    平均最大权重             平均 ‖J‖_F（梯度大小）\n"
                "               qᵀk       qᵀk / √d       qᵀk         qᵀk / √d"});
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
    t.check(raw512.max_weight > 0.9,
            {.en = "d = 512 without scaling: the softmax is nearly one-hot (mean max weight > 0.9)",
             .zh = "d = 512 且不缩放：softmax 几乎是独热的（平均最大权重 > 0.9）"});
    t.check(scaled512.max_weight < 0.6, {.en = "with the √d scaling it stays spread out (mean max weight < 0.6)",
                                         .zh = "按 √d 缩放后它仍保持分散（平均最大权重 < 0.6）"});
    t.check(scaled512.jacobian > 3 * raw512.jacobian,
            {.en = "and the softmax passes at least 3 times more gradient (‖J‖_F) than unscaled",
             .zh = "而且 softmax 传过去的梯度（‖J‖_F）至少是不缩放时的 3 倍"});
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
    note({.en = "Wrote\n    {}\n    {}", .zh = "已写出\n    {}\n    {}"}, masked_png.string(), scoring_png.string());
    note({.en = "The data behind the panels, against the hand computations of steps 1, 2 and 4:",
          .zh = "各面板背后的数据，与第 1、2、4 步的手算结果对照："});
    const c::Tensor hand_batch = masked_softmax_by_hand(lesson.X, lesson.lens_per_batch);
    const c::Tensor hand_rows = masked_softmax_by_hand(lesson.X, lesson.lens_per_row);
    bool panels = true;
    for (int64_t b = 0; b < 2; ++b)
        panels = panels && c::max(c::abs(c::sub(masked.matrices[0][b], hand_batch.select(0, b)))).item() < 1e-12 &&
                 c::max(c::abs(c::sub(masked.matrices[1][b], hand_rows.select(0, b)))).item() < 1e-12;
    t.check(panels, {.en = "the four masked-softmax panels are the hand-computed weights of their batch element",
                     .zh = "四个掩蔽 softmax 面板就是各自批量元素手算出的权重"});
    bool uniform = true;
    for (const auto& row : scoring.matrices)
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t j = 0; j < 10; ++j) {
                const double want = j < (b == 0 ? 2 : 6) ? (b == 0 ? 0.5 : 1.0 / 6) : 0.0;
                uniform = uniform && std::abs(row[b].at({0, j}) - want) < 1e-6;
            }
    t.check(uniform, {.en = "the four scoring panels are 1/2 on 2 keys and 1/6 on 6 keys, 0 after",
                      .zh = "四个评分面板在 2 个键上是 1/2、在 6 个键上是 1/6，其后为 0"});
}

// ---- the exercise (--exercise): tutorials/05_attention_scoring/exercise.cpp -----------------

// seed 003 (003_8fde783e4908788c.txt) › 加性注意力: the scores, with broadcasting
void exercise_additive_scores(Tutorial& t) {
    note({.en = "Write exercise::additive_scores. The checks give it the weights of an nn::AdditiveAttention and "
                "compare the masked softmax of your scores with the module's weights, on queries of size 5 and "
                "keys of size 3 that all differ; then one score by hand.",
          .zh = "写出 exercise::additive_scores。检查把一个 nn::AdditiveAttention 的权重交给它，在长度为 5 "
                "的查询和长度为 3、"
                "各不相同的键上，比较你的分数做 masked softmax 之后与模块的权重；再手算一个分数。"});
    c::Generator g(505);
    nn::AdditiveAttention attention({.key_size = 3, .query_size = 5, .num_hiddens = 4}, g);
    attention.to(DType::float64);
    const Variable queries(c::randn({2, 2, 5}, g, DType::float64)), keys(c::randn({2, 6, 3}, g, DType::float64));
    const Variable values(c::randn({2, 6, 2}, g, DType::float64));
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{6, 4}, {2});
    attention(queries, keys, values, lens);
    const Variable scores =
        exercise::additive_scores(queries, keys, attention.W_q->weight, attention.W_k->weight, attention.w_v->weight);
    t.check(scores.shape() == c::Shape{2, 2, 6},
            {.en = "scores have shape (B, T, S) = (2, 2, 6)", .zh = "分数的形状是 (B, T, S) = (2, 2, 6)"});
    if (scores.shape() != c::Shape{2, 2, 6}) return;
    t.check_close(nn::masked_softmax(scores, lens).value(), attention.attention_weights, 1e-12,
                  {.en = "masked_softmax(your scores) equals the module's attention weights",
                   .zh = "masked_softmax(你的分数) 等于模块的注意力权重"});
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
                  {.en = "score of query (1, 0) and key (1, 3) equals w_vᵀ tanh(W_q q + W_k k)",
                   .zh = "查询 (1, 0) 与键 (1, 3) 的分数等于 w_vᵀ tanh(W_q q + W_k k)"});
}

// ---- faults for the tests (--inject-fault NAME): plausible wrong computations a check must catch ----

namespace faults {

// additive-ignores-keys: a(q, k) = w_vᵀ tanh(W_q q), the same for every key.
// With the document's identical keys it gives exactly the module's output.
Attended additive_ignoring_keys(const nn::AdditiveAttention& attention, const Variable& queries, const Variable& keys,
                                const Variable& values, const c::Tensor& lens) {
    const Variable q = (*attention.W_q)(queries);                                             // (B, T, h)
    const Variable per_query = (*attention.w_v)(ag::tanh(q));                                 // (B, T, 1)
    const Variable scores = ag::add(per_query, Variable(c::zeros({1, 1, keys.shape()[1]})));  // (B, T, S)
    const Variable weights = nn::masked_softmax(scores, lens);
    return {ag::matmul(weights, values), weights.value()};
}

// scores-without-shift: x_j = log w_j, without subtracting the row's smallest
// log: masked_softmax still gives the printed weights back, but the scores
// are negative, which no torch.rand draw is.
c::Tensor scores_without_shift(const std::vector<double>& weights) {
    c::Tensor X = c::full({2, 2, 4}, 0.5, DType::float64);
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t j = 0; j < 4; ++j)
            if (weights[r * 4 + j] > 0) X.set({r / 2, r % 2, j}, std::log(weights[r * 4 + j]));
    return X;
}

}  // namespace faults

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "tformer tutorial 05 · Attention scoring: masked softmax, additive and dot-product",
                          .zh = "tformer 教程 05 · 注意力评分函数：掩蔽softmax、加性注意力与缩放点积注意力"},
                .follows = {.en = "seed 003 注意力评分函数: 掩蔽softmax操作, 加性注意力, 缩放点积注意力",
                            .zh = "种子文档 003 注意力评分函数：掩蔽softmax操作、加性注意力、缩放点积注意力"},
                .exercise = {.en = "write additive attention's scores w_vᵀ tanh(W_q q + W_k k) for every "
                                   "(query, key) pair with broadcasting (tutorials/05_attention_scoring/exercise.cpp)",
                             .zh = "用广播为每一对（查询，键）写出加性注意力的分数 w_vᵀ tanh(W_q q + W_k k)"
                                   "（tutorials/05_attention_scoring/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "0. The document's scoring function as written: the Gaussian density inside the softmax",
            .zh = "0. 照原文运行文档的评分函数：把高斯密度整个送进 softmax"},
           [&] { scoring_function_as_written(t); });
    t.step({.en = "1. Masked softmax with one valid length per batch element: [2, 3]",
            .zh = "1. 掩蔽softmax，每个批量元素一个有效长度：[2, 3]"},
           [&] { masked_softmax_per_batch(t, lesson); });
    t.step({.en = "2. One valid length per row: [[1, 3], [2, 4]]", .zh = "2. 每行一个有效长度：[[1, 3], [2, 4]]"},
           [&] { masked_softmax_per_row(t, lesson); });
    t.step({.en = "2b. The document's printed numbers, exactly; and PyTorch's masked_softmax",
            .zh = "2b. 文档打印的数，一位不差；以及 PyTorch 的 masked_softmax"},
           [&] { documents_numbers_exactly(t, lesson); });
    t.step({.en = "3. How the mask works, and the empty row", .zh = "3. 掩码如何起作用，以及空行"},
           [&] { how_the_mask_works(t, lesson); });
    t.step({.en = "4. Additive attention (加性注意力): the document's example, then keys that differ",
            .zh = "4. 加性注意力：文档的例子，然后换成各不相同的键"},
           [&] { additive_attention(t, lesson); });
    t.step({.en = "5. Scaled dot-product attention (缩放点积注意力)", .zh = "5. 缩放点积注意力"},
           [&] { scaled_dot_product_attention(t, lesson); });
    t.step({.en = "6. Why divide by √d", .zh = "6. 为什么要除以 √d"}, [&] { why_divide_by_sqrt_d(t, lesson); });
    t.step({.en = "7. Heatmaps of the weights", .zh = "7. 权重的热力图"}, [&] { heatmaps(t, lesson); });
    t.exercise({.en = "Exercise. Additive attention's scores for every (query, key) pair",
                .zh = "练习. 为每一对（查询，键）计算加性注意力的分数"},
               [&] { exercise_additive_scores(t); });
    return t.finish();
}
