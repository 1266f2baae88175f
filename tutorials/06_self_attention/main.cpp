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
// tutorial-languages: en zh
// tutorial-fault: sdpa-divides-by-d | the output's values equal
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
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

// Scaled dot-product attention by plain loops, in double: for every batch
// element b and query i, the scores q_i · k_j / √d, their softmax, and the
// weighted sum of the values. Q (B, n, d), K (B, m, d), V (B, m, v) -> (B, n, v).
c::Tensor attention_by_loops(const c::Tensor& Q, const c::Tensor& K, const c::Tensor& V) {
    const int64_t B = Q.size(0), n = Q.size(1), m = K.size(1), d = Q.size(2), v = V.size(2);
    c::Tensor out = c::zeros({B, n, v}, DType::float64);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
            std::vector<double> e(m);
            double total = 0;
            for (int64_t j = 0; j < m; ++j) {
                double score = 0;
                for (int64_t k = 0; k < d; ++k) score += Q.at({b, i, k}) * K.at({b, j, k});
                e[j] = score / std::sqrt(double(d));
            }
            const double top = *std::max_element(e.begin(), e.end());
            for (double& x : e) total += x = std::exp(x - top);
            for (int64_t j = 0; j < m; ++j)
                for (int64_t k = 0; k < v; ++k) out.set({b, i, k}, out.at({b, i, k}) + e[j] / total * V.at({b, j, k}));
        }
    return out;
}

namespace faults {
Variable attention_divided_by_d(const Variable& Q, const Variable& K, const Variable& V);
}  // namespace faults

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
    note({.en = "Self-attention lets every word of a sentence look at every word of the same sentence. Seed 001's "
                "first step: multiply each word's embedding x_i by three matrices learned in training, giving a "
                "query q_i = x_i W_Q, a key k_i = x_i W_K and a value v_i = x_i W_V. In the paper the embedding "
                "has 512 numbers and q, k, v have 64 (smaller, 'to make the computation of multi-headed "
                "attention (mostly) constant'); here d_model = 4 and d_k = 3.",
          .zh = "自注意力让句子里的每个词都能看到同一句子里的每个词。种子文档 001 的第一步：把每个词的嵌入 x_i "
                "分别乘以训练"
                "得到的三个矩阵，得到查询 q_i = x_i W_Q、键 k_i = x_i W_K 和值 v_i = x_i W_V。论文里嵌入有 512 个数，"
                "q、k、v 有 64 个（更小，“为了让多头注意力的计算量（基本）不变”）；这里 d_model = 4，d_k = 3。"});
    note({.en = "    X: one row per word (I, arrived, at, the), one column per embedding feature",
          .zh = "    X：每个词一行（I, arrived, at, the），每个嵌入特征一列"});
    show("X", lesson.X);
    show("W_Q", lesson.W_Q);
    show("W_K", lesson.W_K);
    show("W_V", lesson.W_V);
    line({.en = "\n    word      q = x W_Q              k = x W_K              v = x W_V",
          .zh = "\n    词        q = x W_Q              k = x W_K              v = x W_V"});
    lesson.q.resize(kWords), lesson.k.resize(kWords), lesson.v.resize(kWords);
    for (int64_t i = 0; i < kWords; ++i) {
        const std::vector<double> x = lesson.X.select(0, i).to_vector();
        lesson.q[i] = times(x, lesson.W_Q), lesson.k[i] = times(x, lesson.W_K), lesson.v[i] = times(x, lesson.W_V);
        line("    {:<9} {:<22} {:<22} {}", kTokens[i], vec_str(lesson.q[i], 2), vec_str(lesson.k[i], 2),
             vec_str(lesson.v[i], 2));
    }
    line();
    t.check_close(
        row_tensor(lesson.q[0]), c::matmul(lesson.X, lesson.W_Q).select(0, 0), 1e-15,
        {.en = "q for 'I' is row 0 of the matrix product X W_Q", .zh = "“I” 的 q 就是矩阵乘积 X W_Q 的第 0 行"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, steps 2 to 6
void six_steps_for_one_word(Tutorial& t, Lesson& lesson) {
    note({.en = "To compute the output for the first word, 'I', score every word of the sentence against it: "
                "the score of word j is the dot product q_I · k_j. It says how much 'I' should attend to word j.",
          .zh =
              "为了算出第一个词 “I” 的输出，拿句子里的每个词与它打分：词 j 的分数是点积 q_I · k_j，表示 “I” 应该对词 j "
              "关注多少。"});
    const c::Tensor &X = lesson.X, &W_Q = lesson.W_Q, &W_K = lesson.W_K, &W_V = lesson.W_V;
    std::vector<double> scores(kWords);
    for (int64_t j = 0; j < kWords; ++j) scores[j] = dot(lesson.q[0], lesson.k[j]);
    for (int64_t j = 0; j < kWords; ++j) note(both("    q_I · k_{:<8} = {:8.4f}"), kTokens[j], scores[j]);
    t.check_close(row_tensor(scores), c::matmul(c::matmul(X, W_Q), c::matmul(X, W_K).transpose(0, 1)).select(0, 0),
                  1e-14, {.en = "the four scores are row 0 of Q Kᵀ", .zh = "这四个分数就是 Q Kᵀ 的第 0 行"});

    note({.en = "\nSteps 3 and 4: divide by √d_k and take the softmax. The paper divides by 8 = √64; here "
                "√3 = {:.4f}. Softmax makes the scores positive and summing to 1.",
          .zh = "\n第 3、4 步：除以 √d_k，再取 softmax。论文除以 8 = √64；这里是 √3 = {:.4f}。softmax "
                "让分数变为正数且和为 1。"},
         std::sqrt(3.0));
    std::vector<double> scaled(kWords), alpha(kWords);
    double total = 0;
    for (int64_t j = 0; j < kWords; ++j) scaled[j] = scores[j] / std::sqrt(double(kKey));
    for (int64_t j = 0; j < kWords; ++j) total += alpha[j] = std::exp(scaled[j]);
    for (double& a : alpha) a /= total;
    note({.en = "    score / √3 = {}\n    softmax    = {}", .zh = "    分数 / √3 = {}\n    softmax   = {}"},
         vec_str(scaled), vec_str(alpha));
    t.check_close(row_tensor(alpha), c::softmax(row_tensor(scaled)), 1e-15,
                  {.en = "the hand softmax (exp, then divide by the sum) equals core::softmax of the scaled scores",
                   .zh = "手算的 softmax（先取 exp，再除以和）等于对缩放后分数做 core::softmax"});

    note({.en = "\nSteps 5 and 6: multiply each value vector by its weight and add them up. That sum is the "
                "output of self-attention for 'I': mostly the values of the words it attends to most.",
          .zh = "\n第 5、6 步：把每个值向量乘以它的权重再加起来。这个和就是 “I” "
                "的自注意力输出：主要是它最关注的那些词的值。"});
    std::vector<double>& z1 = lesson.z1;
    z1.assign(kKey, 0.0);
    for (int64_t j = 0; j < kWords; ++j) {
        std::vector<double> weighted(kKey);
        for (int64_t d = 0; d < kKey; ++d) z1[d] += weighted[d] = alpha[j] * lesson.v[j][d];
        note(both("    {:.4f} · v_{:<8} = {}"), alpha[j], kTokens[j], vec_str(weighted));
    }
    note({.en = "    sum = z_I           = {}", .zh = "    和 = z_I            = {}"}, vec_str(z1));
    t.check_close(row_tensor(z1), c::matmul(row_tensor(alpha).unsqueeze(0), c::matmul(X, W_V)).select(0, 0), 1e-14,
                  {.en = "z_I = [α_1 ... α_4] V: the weights as a row times the matrix of values",
                   .zh = "z_I = [α_1 ... α_4] V：权重排成一行，乘以值组成的矩阵"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, the matrix form; seed 002 › 2.1; seed 003 › 自注意力
void matrix_form(Tutorial& t, Lesson& lesson) {
    note({.en = "Doing this for every word at once is three matrix products (seed 001: 'since we're dealing "
                "with matrices, we can condense steps two through six in one formula'):\n"
                "    Q = X W_Q, K = X W_K, V = X W_V                   (n, d_k)\n"
                "    weights = softmax(Q Kᵀ / √d_k)   row by row        (n, n)\n"
                "    Z = weights V                                     (n, d_k)",
          .zh =
              "对所有词同时做这件事，就是三次矩阵乘法（种子文档 001：“既然处理的是矩阵，第二步到第六步就可以合并成一个"
              "公式”）：\n"
              "    Q = X W_Q, K = X W_K, V = X W_V                   (n, d_k)\n"
              "    weights = softmax(Q Kᵀ / √d_k)   逐行              (n, n)\n"
              "    Z = weights V                                     (n, d_k)"});
    const c::Tensor Q = c::matmul(lesson.X, lesson.W_Q), K = c::matmul(lesson.X, lesson.W_K),
                    V = c::matmul(lesson.X, lesson.W_V);
    const c::Tensor& weights = lesson.weights = attention_weights(Q, K);
    lesson.Z = c::matmul(weights, V);
    show("weights", weights);
    show("Z", lesson.Z);
    t.check_close(lesson.Z.select(0, 0), row_tensor(lesson.z1), 1e-14,
                  {.en = "row 0 of Z is z_I from the six steps", .zh = "Z 的第 0 行就是六个步骤得到的 z_I"});
    t.check_close(c::sum(weights, {1}), c::ones({kWords}, DType::float64), 1e-15,
                  {.en = "every row of weights sums to 1", .zh = "weights 的每一行之和为 1"});
    note({.en = "\nSeed 001 adds: 'Clearly the word at this position will have the highest softmax score'. That "
                "is not a law: the score of word i with itself is q_i · k_i = x_i W_Q W_Kᵀ x_iᵀ, and nothing "
                "makes it the largest in its row. It often happens in trained models, but nothing forces it; with our "
                "random weights:",
          .zh =
              "\n种子文档 001 接着说：“显然，这个位置上的词会得到最高的 softmax 分数”。这并不是定律：词 i "
              "与自己的分数是 "
              "q_i · k_i = x_i W_Q W_Kᵀ x_iᵀ，没有任何东西保证它在所在行里最大。训练好的模型里常常如此，但没有什么强制"
              "它这样；用我们的随机权重："});
    for (int64_t i = 0; i < kWords; ++i) {
        const c::Tensor row = weights.select(0, i);
        const int64_t best = static_cast<int64_t>(c::argmax(row, 0).item());
        note({.en = "    {:<8} attends most to '{}' ({:.3f}){}", .zh = "    {:<8} 最关注 “{}”（{:.3f}）{}"}, kTokens[i],
             kTokens[best], row.at({best}), best == i ? phrase({.en = " — itself", .zh = "——它自己"}) : Phrase{});
    }
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.2 Self-Attention 实现 (ScaleDotProductAttention); d2l's MultiHeadAttention
void library_layers(Tutorial& t, const Lesson& lesson) {
    note({.en = "nn::DotProductAttention is exactly the formula, for batches: Q, K, V of shape (batch, n, d_k). "
                "It has no parameters; the projections W_Q, W_K, W_V belong to the layer around it.",
          .zh =
              "nn::DotProductAttention 就是这个公式的批量版本：Q、K、V 的形状为 (batch, n, d_k)。它没有参数；投影 W_Q、"
              "W_K、W_V 属于包在它外面的那一层。"});
    const c::Tensor &X = lesson.X, &W_Q = lesson.W_Q, &W_K = lesson.W_K, &W_V = lesson.W_V;
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable Q(c::matmul(X, W_Q).unsqueeze(0)), K(c::matmul(X, W_K).unsqueeze(0)),
        V(c::matmul(X, W_V).unsqueeze(0));  // (1, n, d_k)
    const Variable out = attention(Q, K, V);
    t.check_close(out.value().select(0, 0), lesson.Z, 1e-14, both("DotProductAttention(Q, K, V) == Z"));
    t.check_close(attention.attention_weights.select(0, 0), lesson.weights, 1e-15,
                  {.en = "and its attention_weights == weights", .zh = "而且它的 attention_weights == weights"});

    note({.en = "\nnn::MultiHeadAttention with one head does the projections itself, with Linear layers: "
                "self-attention is mha(X, X, X). Two details to line up with seed 001's x W:\n"
                "- a Linear stores its weight as (out, in) and computes x Wᵀ (PyTorch's layout), so its weight "
                "is W_Qᵀ, of shape (d_k, d_model);\n"
                "- multi-head attention ends with one more projection W_o, which we set to the identity here.",
          .zh = "\n只有一个头的 nn::MultiHeadAttention 用 Linear 层自己做投影：自注意力就是 mha(X, X, X)。要与种子文档 "
                "001 的 "
                "x W 对上，有两处细节：\n"
                "- Linear 把权重存成 (out, in)，计算 x Wᵀ（PyTorch 的布局），所以它的权重是 W_Qᵀ，形状为 (d_k, "
                "d_model)；\n"
                "- 多头注意力最后还有一个投影 W_o，这里我们把它设成单位矩阵。"});
    nn::MultiHeadAttention mha(
        {.key_size = kModel, .query_size = kModel, .value_size = kModel, .num_hiddens = kKey, .num_heads = 1});
    mha.to(DType::float64);
    c::copy_(mha.W_q->weight.value(), W_Q.transpose(0, 1));
    c::copy_(mha.W_k->weight.value(), W_K.transpose(0, 1));
    c::copy_(mha.W_v->weight.value(), W_V.transpose(0, 1));
    c::copy_(mha.W_o->weight.value(), c::eye(kKey, DType::float64));
    for (const auto& [name, p] : mha.named_parameters()) note(both("    {:<18} {}"), name, c::shape_str(p.shape()));
    const Variable Xb(X.unsqueeze(0));  // (1, n, d_model)
    const Variable mha_out = mha(Xb, Xb, Xb);
    show("mha(X, X, X)", mha_out.value());
    t.check_close(mha_out.value().select(0, 0), lesson.Z, 1e-14,
                  {.en = "a one-head MultiHeadAttention with these weights gives Z",
                   .zh = "用这些权重的单头 MultiHeadAttention 给出 Z"});
    t.check_close(mha.attention_weights().select(0, 0), lesson.weights, 1e-15,
                  {.en = "with the same attention weights", .zh = "注意力权重也相同"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.2 Self-Attention 实现: the (5, 10, 64) call, then PyTorch's numbers
void seed_002_example(Tutorial& t) {
    note({.en = "Seed 002 (2.2 Self-Attention 实现) runs its ScaleDotProductAttention on Q = K = V = torch.randn(5, "
                "10, 64) (batch 5, 10 positions, d_k = 64, the paper's per-head size) and prints the shapes "
                "torch.Size([5, 10, 64]) and torch.Size([5, 10, 10]). The same call here:",
          .zh = "种子文档 002（2.2 Self-Attention 实现）在 Q = K = V = torch.randn(5, 10, 64) 上运行它的 "
                "ScaleDotProductAttention（批量 5，10 个位置，d_k = 64，即论文里每个头的大小），并打印形状 "
                "torch.Size([5, 10, 64]) 和 torch.Size([5, 10, 10])。这里做同样的调用："});
    c::Generator g(64);
    const Variable Q(c::randn({5, 10, 64}, g)), K(c::randn({5, 10, 64}, g)), V(c::randn({5, 10, 64}, g));
    nn::DotProductAttention attention({.dropout = 0.0});
    Variable out = attention(Q, K, V);
    // --inject-fault sdpa-divides-by-d: the test that the value check below can fail
    if (t.injected("sdpa-divides-by-d")) out = faults::attention_divided_by_d(Q, K, V);
    note({.en = "    ScaleDotProductAttention output shape: {}\n    attn_weights shape: {}",
          .zh = "    ScaleDotProductAttention 输出的形状：{}\n    attn_weights 的形状：{}"},
         c::shape_str(out.shape()), c::shape_str(attention.attention_weights.shape()));
    t.check(out.shape() == c::Shape{5, 10, 64}, {.en = "output shape (5, 10, 64), the seed's torch.Size([5, 10, 64])",
                                                 .zh = "输出形状 (5, 10, 64)，即种子文档的 torch.Size([5, 10, 64])"});
    t.check(
        attention.attention_weights.shape() == c::Shape{5, 10, 10},
        {.en = "weights shape (5, 10, 10), the seed's torch.Size([5, 10, 10]): one 10 × 10 matrix per batch element",
         .zh = "权重形状 (5, 10, 10)，即种子文档的 torch.Size([5, 10, 10])：每个批量元素一个 10 × 10 矩阵"});
    note({.en = "Shapes alone would let a wrong layer through (one that divides by 64 instead of 8 has the same "
                "shapes). The values, against softmax(q_i · k_j / 8) and the weighted sum of the values computed "
                "by plain loops for all 5 × 10 queries:",
          .zh = "只看形状，错误的层也能蒙混过关（除以 64 而不是 8 的层形状完全一样）。再看数值：对全部 5 × 10 "
                "个查询，用普通"
                "循环算出 softmax(q_i · k_j / 8) 和值的加权和，与之比较："});
    t.check_allclose(out.value(), attention_by_loops(Q.value(), K.value(), V.value()), 1e-5,
                     {.en = "the output's values equal softmax(q · k / √64) v computed by loops",
                      .zh = "输出的数值等于用循环算出的 softmax(q · k / √64) v"});
    t.check_close(c::sum(attention.attention_weights, {2}), c::ones({5, 10}), 1e-5,
                  {.en = "and each of the 50 rows of weights sums to 1", .zh = "而且权重的 50 行每行之和都是 1"});
    note({.en = "Seed 002 divides by 8 = √64 here; its 2.1 says 'the scores are divided by 8' in general, which holds "
                "only for d_k = 64. And its 2.2 remarks that 'the size of the embedding vector is basically the length "
                "of the longest sentence in the training set': it is not; that length is the sequence dimension (10 "
                "here), the embedding size is d_model (512 in the paper), which this example's 64 per head divides.",
          .zh =
              "种子文档 002 在这里除以 8 = √64；它的 2.1 笼统地说“分数除以 8”，这只在 d_k = 64 时成立。它的 2.2 还说"
              "“嵌入向量的大小基本上就是训练集中最长句子的长度”：并非如此；那个长度是序列维（这里是 10），嵌入的大小是 "
              "d_model（论文中为 512），本例每个头的 64 是它的一个因子。"});

    note({.en =
              "\nAgainst PyTorch: tests/fixtures/attention_masks.safetensors holds seed 002's ScaleDotProductAttention "
              "run by torch on (5, 10, 4) tensors, with the gradients of sum(output · u):",
          .zh = "\n与 PyTorch 对照：tests/fixtures/attention_masks.safetensors 存有种子文档 002 的 "
                "ScaleDotProductAttention "
                "由 torch 在 (5, 10, 4) 张量上运行的结果，以及 sum(output · u) 的梯度："});
    const tutorial::Reference ref("attention_masks");
    const Variable q(ref["sdpa_nomask.input.Q"], true), k(ref["sdpa_nomask.input.K"], true),
        v(ref["sdpa_nomask.input.V"], true);
    const Variable o = attention(q, k, v);
    ag::sum(o * Variable(ref["sdpa_nomask.input.upstream"])).backward();
    t.check_allclose(o.value(), ref["sdpa_nomask.output"], 1e-5,
                     {.en = "the output matches PyTorch's", .zh = "输出与 PyTorch 的一致"});
    t.check_allclose(q.grad(), ref["sdpa_nomask.grad.input.Q"], 1e-4, {.en = "d/dQ matches", .zh = "d/dQ 一致"});
    t.check_allclose(k.grad(), ref["sdpa_nomask.grad.input.K"], 1e-4, {.en = "d/dK matches", .zh = "d/dK 一致"});
    t.check_allclose(v.grad(), ref["sdpa_nomask.grad.input.V"], 1e-4, {.en = "d/dV matches", .zh = "d/dV 一致"});
}

// seed 003 (003_8fde783e4908788c.txt) › 自注意力, against (7) 交叉注意力（Cross-Attention）
void self_or_cross_attention(Tutorial& t, const Lesson& lesson) {
    note(
        {.en = "Seed 003's 自注意力 section gives the right formula, y_i = f(x_i, (x_1, x_1), ..., (x_n, x_n)): the "
               "queries, keys and values all come from the SAME sequence. Its next sentence then says that in a "
               "translation model 'the query is a token of the target language, and the keys and values are all "
               "the words of the source language' — that describes cross-attention (encoder–decoder attention, "
               "seed 003's own (7) 交叉注意力), not self-attention. The difference, on our four words and three "
               "target-side vectors standing for 'Je suis arrivé':",
         .zh =
             "种子文档 003 的“自注意力”一节给出的公式是对的，y_i = f(x_i, (x_1, x_1), ..., (x_n, "
             "x_n))：查询、键和值都来自"
             "“同一个”序列。可它接下来一句说，在翻译模型中“查询是目标语言的一个词元，键和值是源语言的所有词”——那说的是"
             "交叉注意力（编码器-解码器注意力，即种子文档 003 自己的 (7) 交叉注意力），而不是自注意力。用我们的四个词和"
             "代表 “Je suis arrivé” 的三个目标端向量看看区别："});
    c::Generator g(603);
    const c::Tensor target = rounded_normal(3, kModel, g);  // (m, d_model)
    const c::Tensor Qs = c::matmul(lesson.X, lesson.W_Q), Ks = c::matmul(lesson.X, lesson.W_K);
    const c::Tensor self_w = attention_weights(Qs, Ks);                              // (n, n)
    const c::Tensor cross_w = attention_weights(c::matmul(target, lesson.W_Q), Ks);  // (m, n)
    note({.en = "    self-attention weights  {}: every source word against every source word\n"
                "    cross-attention weights {}: every target word against every source word",
          .zh = "    自注意力权重   {}：每个源语言词对每个源语言词\n"
                "    交叉注意力权重 {}：每个目标语言词对每个源语言词"},
         c::shape_str(self_w.shape()), c::shape_str(cross_w.shape()));
    t.check(self_w.shape() == c::Shape{4, 4} && cross_w.shape() == c::Shape{3, 4},
            {.en = "self: (n, n) = (4, 4); cross: (m, n) = (3, 4)",
             .zh = "自注意力：(n, n) = (4, 4)；交叉注意力：(m, n) = (3, 4)"});
    const c::Tensor other_target = rounded_normal(3, kModel, g);
    const c::Tensor cross_w2 = attention_weights(c::matmul(other_target, lesson.W_Q), Ks);
    t.check(c::max(c::abs(c::sub(cross_w2, cross_w))).item() > 1e-3,
            {.en = "a different target sentence changes the cross-attention weights ...",
             .zh = "换一个目标语言句子，交叉注意力的权重就变了……"});
    t.check_close(self_w, lesson.weights, 1e-15,
                  {.en = "... while the self-attention of the source stays what step 3 computed",
                   .zh = "……而源语言的自注意力仍是第 3 步算出的那样"});
    note({.en = "The library keeps the two apart: nn::EncoderBlock's attention is self-attention, and the second "
                "attention of nn::DecoderBlock is the cross-attention the sentence meant (tutorial 11).",
          .zh = "库把两者分开：nn::EncoderBlock 的注意力是自注意力，nn::DecoderBlock "
                "的第二个注意力才是那句话所说的交叉注意力"
                "（教程 11）。"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention (no positions in the formula); tutorial 08 adds them
void no_word_order(Tutorial& t, const Lesson& lesson) {
    note({.en = "Nothing above used the positions of the words: reorder the sentence and the outputs are "
                "reordered the same way, with the same numbers. Self-attention alone treats a sentence as a bag "
                "of words; that is why the Transformer adds positional encodings to the embeddings (tutorial 08).",
          .zh =
              "上面哪一步都没用到词的位置：把句子重新排序，输出也按同样的方式重排，数值不变。单靠自注意力，句子就是一个"
              "词袋；所以 Transformer 要把位置编码加到嵌入上（教程 08）。"});
    const std::vector<int64_t> order = {3, 2, 1, 0};  // "the at arrived I"
    const c::Tensor Xp = c::index_select(lesson.X, 0, c::from_vector(order, {4}));
    const c::Tensor Qp = c::matmul(Xp, lesson.W_Q), Kp = c::matmul(Xp, lesson.W_K), Vp = c::matmul(Xp, lesson.W_V);
    const c::Tensor Zp = c::matmul(attention_weights(Qp, Kp), Vp);
    show({.en = "Z for 'the at arrived I'", .zh = "“the at arrived I” 的 Z"}, Zp);
    t.check_close(Zp, c::index_select(lesson.Z, 0, c::from_vector(order, {4})), 1e-14,
                  {.en = "the outputs of the reordered sentence are the old outputs, reordered",
                   .zh = "重排后的句子的输出，就是原来的输出按同样方式重排"});
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
    note({.en = "Wrote {}: row i is where word i looks; each row sums to 1.",
          .zh = "已写出 {}：第 i 行是词 i 关注的地方；每行之和为 1。"},
         png.string());
    c::Tensor by_hand = c::zeros({kWords, kWords}, DType::float64);  // from step 1's vectors, in plain doubles
    for (int64_t i = 0; i < kWords; ++i) {
        double total = 0;
        for (int64_t j = 0; j < kWords; ++j) total += std::exp(dot(lesson.q[i], lesson.k[j]) / std::sqrt(double(kKey)));
        for (int64_t j = 0; j < kWords; ++j)
            by_hand.set({i, j}, std::exp(dot(lesson.q[i], lesson.k[j]) / std::sqrt(double(kKey))) / total);
    }
    t.check_close(maps.matrices[0][0], by_hand, 1e-14,
                  {.en = "the heatmap's 16 cells equal e^(q_i·k_j/√3) / Σ_j e^(q_i·k_j/√3) from step 1's q and k",
                   .zh = "热力图的 16 个格子等于用第 1 步的 q、k 算出的 e^(q_i·k_j/√3) / Σ_j e^(q_i·k_j/√3)"});
}

// ---- the exercise (--exercise): tutorials/06_self_attention/exercise.cpp -------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › self-attention, the matrix form
void exercise_matrix_form(Tutorial& t) {
    note({.en = "Write exercise::self_attention(X, W_Q, W_K, W_V). The checks compare it with the six steps done "
                "word by word in plain doubles, and with nn::DotProductAttention, on a new random sentence of 5 words.",
          .zh = "写出 exercise::self_attention(X, W_Q, W_K, W_V)。检查在一个新的 5 个词的随机句子上，把它与用普通 "
                "double 逐词"
                "完成的六个步骤比较，再与 nn::DotProductAttention 比较。"});
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
    t.check_close(mine.weights, Wh, 1e-12,
                  {.en = "your weights equal the six steps' softmax, word by word",
                   .zh = "你的权重逐词等于六个步骤里的 softmax"});
    t.check_close(mine.Z, Zh, 1e-12,
                  {.en = "your Z equals the six steps' weighted sums", .zh = "你的 Z 等于六个步骤里的加权和"});
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable out = attention(Variable(c::matmul(Xe, Wq).unsqueeze(0)), Variable(c::matmul(Xe, Wk).unsqueeze(0)),
                                   Variable(c::matmul(Xe, Wv).unsqueeze(0)));
    t.check_close(mine.Z, out.value().select(0, 0), 1e-12,
                  {.en = "and nn::DotProductAttention's output", .zh = "也等于 nn::DotProductAttention 的输出"});
}

// ---- faults for the tests (--inject-fault NAME): plausible wrong computations a check must catch ----

namespace faults {

// sdpa-divides-by-d: softmax(Q Kᵀ / d) V, dividing by d = 64 instead of √d = 8.
// Every shape is right.
Variable attention_divided_by_d(const Variable& Q, const Variable& K, const Variable& V) {
    const double d = static_cast<double>(Q.shape()[2]);
    return ag::matmul(ag::softmax(ag::div(ag::matmul(Q, ag::transpose(K, 1, 2)), d)), V);
}

}  // namespace faults

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 06 · Self-attention, step by step",
                   .zh = "tformer 教程 06 · 自注意力，一步一步来"},
         .follows = {.en = "seed 001 self-attention (the six steps, then the matrix form); seed 002 2.1–2.2; "
                           "seed 003 自注意力",
                     .zh = "种子文档 001 self-attention（六个步骤，然后是矩阵形式）；种子文档 002 的 2.1–2.2；"
                           "种子文档 003 自注意力"},
         .exercise = {
             .en = "write self-attention in its matrix form, softmax(Q Kᵀ / √d_k) V "
                   "(tutorials/06_self_attention/exercise.cpp)",
             .zh = "写出自注意力的矩阵形式 softmax(Q Kᵀ / √d_k) V（tutorials/06_self_attention/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Query, key and value vectors for every word", .zh = "1. 每个词的查询、键和值向量"},
           [&] { query_key_value_vectors(t, lesson); });
    t.step({.en = "2. Steps 2 to 6 for the word 'I': score, ÷√d_k, softmax, weight, sum",
            .zh = "2. 对词 “I” 做第 2 到 6 步：打分、÷√d_k、softmax、加权、求和"},
           [&] { six_steps_for_one_word(t, lesson); });
    t.step({.en = "3. The matrix form: softmax(Q Kᵀ / √d_k) V", .zh = "3. 矩阵形式：softmax(Q Kᵀ / √d_k) V"},
           [&] { matrix_form(t, lesson); });
    t.step({.en = "4. The same numbers from nn::DotProductAttention and a one-head MultiHeadAttention",
            .zh = "4. nn::DotProductAttention 与单头 MultiHeadAttention 给出同样的数"},
           [&] { library_layers(t, lesson); });
    t.step({.en = "4b. Seed 002's example: Q, K, V of shape (5, 10, 64)",
            .zh = "4b. 种子文档 002 的例子：形状为 (5, 10, 64) 的 Q、K、V"},
           [&] { seed_002_example(t); });
    t.step({.en = "4c. Self-attention or cross-attention? A slip in seed 003",
            .zh = "4c. 自注意力还是交叉注意力？种子文档 003 的一处笔误"},
           [&] { self_or_cross_attention(t, lesson); });
    t.step({.en = "5. Self-attention does not know the word order", .zh = "5. 自注意力不知道词序"},
           [&] { no_word_order(t, lesson); });
    t.step({.en = "6. Heatmap of the weights", .zh = "6. 权重的热力图"}, [&] { heatmap(t, lesson); });
    t.exercise({.en = "Exercise. Self-attention as three matrix products", .zh = "练习. 用三次矩阵乘法写出自注意力"},
               [&] { exercise_matrix_form(t); });
    return t.finish();
}
