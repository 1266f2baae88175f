// Tutorial 07 · Multi-head attention: transpose_qkv / transpose_output,
// split and concat, the heads one by one, and what it costs.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 多头注意力 and
// 代码实现 › 多头注意力 (MultiHeadAttention, transpose_qkv, transpose_output,
// repeat_interleave of valid_lens); seed 002 (002_36798a9f04a86cc8.txt),
// 2.3–2.4 (split into [batch, n_head, seq_len, d_model//n_head] and concat);
// seed 004 (004_a3b87e182ede5d90.txt), MultiHeadedAttention and its closing
// remark on the cost, O(n²d//h · h) = O(n²d); seed 001's "it" sentence and
// seed 004's 多头attention的优点 (step 8). Steps 3b and 4b compare the layers of
// seeds 000, 002 and 004 with PyTorch (tests/fixtures/).
// Read it with tutorials/07_multihead_attention/README.md.
// tutorial-languages: en zh
// tutorial-fault: projections-full-width | for every H, the loop's counts equal those read off the batched layer
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/attention.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

using tutorial::tuple_str;

namespace {

// Multiply-adds, by the kind of product they belong to.
struct Macs {
    int64_t projections = 0;  // Q, K, V = inputs × W_q,k,vᵀ (per head: one block of rows of each W)
    int64_t scores = 0;       // q kᵀ
    int64_t weighted = 0;     // weights × v
    int64_t output = 0;       // [head_1 ... head_H] × W_oᵀ
    int64_t exps = 0;         // softmax exponentials
    int64_t attention() const { return scores + weighted; }
    int64_t total() const { return projections + scores + weighted + output; }
};

// a (n, k) × b (k, m), counting n·k·m multiply-adds into `count`.
c::Tensor counted_matmul(const c::Tensor& a, const c::Tensor& b, int64_t& count) {
    count += a.size(0) * a.size(1) * b.size(1);
    return c::matmul(a, b);
}

// How the loop below projects an input for head h. head_rows: with rows
// h·d .. (h+1)·d of W (the documents' W_i). all_rows_then_slice: with all of
// W, keeping columns h·d .. (h+1)·d of the result: the same numbers for H
// times the multiply-adds (the wrong variant of the test that step 6's cost
// check can fail).
enum class Projection { head_rows, all_rows_then_slice };

// Multi-head attention computed the long way: for every batch element and
// every head, slice that head's rows out of W_q, W_k, W_v, run one ordinary
// scaled dot-product attention, then put the heads side by side and apply
// W_o. Counts its multiply-adds. queries (B, T, q), keys (B, S, k), values
// (B, S, v), lens (B) int64 -> (B, T, D).
c::Tensor heads_one_by_one(const nn::MultiHeadAttention& mha, const c::Tensor& queries, const c::Tensor& keys,
                           const c::Tensor& values, const c::Tensor& lens, Macs& macs,
                           std::vector<c::Tensor>* weights_out = nullptr,
                           Projection projection = Projection::head_rows) {
    const int64_t B = queries.size(0), H = mha.options.num_heads, d = mha.options.num_hiddens / H;
    std::vector<c::Tensor> batch_out;
    for (int64_t b = 0; b < B; ++b) {
        std::vector<c::Tensor> heads;
        for (int64_t h = 0; h < H; ++h) {
            // x (n, in) times head h's W_i, the rows h·d .. (h+1)·d of W (D, in) -> (n, d)
            auto project = [&](const c::Tensor& x, const Variable& W) {
                if (projection == Projection::all_rows_then_slice)
                    return counted_matmul(x, W.value().transpose(0, 1), macs.projections).slice(1, h * d, (h + 1) * d);
                return counted_matmul(x, W.value().slice(0, h * d, (h + 1) * d).transpose(0, 1), macs.projections);
            };
            const c::Tensor q = project(queries.select(0, b), mha.W_q->weight);  // (T, d)
            const c::Tensor k = project(keys.select(0, b), mha.W_k->weight);     // (S, d)
            const c::Tensor v = project(values.select(0, b), mha.W_v->weight);   // (S, d)
            const c::Tensor scores = c::div(counted_matmul(q, k.transpose(0, 1), macs.scores), std::sqrt(double(d)));
            const int64_t T = scores.size(0), valid = static_cast<int64_t>(lens.at({b}));
            const c::Tensor w = c::masked_softmax(scores, c::full({T}, double(valid), DType::int64));  // (T, S)
            macs.exps += T * valid;
            if (weights_out) weights_out->push_back(w);
            heads.push_back(counted_matmul(w, v, macs.weighted));  // (T, d)
        }
        const c::Tensor concat = c::concat(heads, 1);  // (T, H·d): head h in columns h·d ..
        batch_out.push_back(counted_matmul(concat, mha.W_o->weight.value().transpose(0, 1), macs.output));  // (T, D)
    }
    return c::stack(batch_out, 0);  // (B, T, D)
}

// The multiply-adds of the batched layer, in step 3's order (project,
// transpose_qkv, one attention over B·H, transpose_output, W_o), read off
// the shapes of the tensors it makes: a Linear from (.., in) to (.., out)
// costs in·out per row; every attention weight is a d-long dot product of a
// query and a key, and multiplies a d-long value. x (B, n, D) serves as
// queries, keys and values; lens (B).
Macs batched_costs(nn::MultiHeadAttention& m, const c::Tensor& x, const c::Tensor& lens) {
    const int64_t H = m.options.num_heads;
    auto linear_macs = [](const Variable& in, const Variable& out) { return in.numel() * out.shape().back(); };
    const Variable X(x);
    const Variable Pq = (*m.W_q)(X), Pk = (*m.W_k)(X), Pv = (*m.W_v)(X);  // (B, n, D)
    const Variable q = nn::transpose_qkv(Pq, H), k = nn::transpose_qkv(Pk, H), v = nn::transpose_qkv(Pv, H);
    const c::Tensor repeated = lens.unsqueeze(1).expand({lens.size(0), H}).reshape({-1});  // (B·H)
    const Variable o = (*m.attention)(q, k, v, repeated);                                  // (B·H, n, d)
    const c::Tensor& weights = m.attention->attention_weights;                             // (B·H, n, n)
    const Variable concat = nn::transpose_output(o, H);                                    // (B, n, D)
    Macs macs;
    macs.projections = linear_macs(X, Pq) + linear_macs(X, Pk) + linear_macs(X, Pv);
    macs.scores = weights.numel() * q.shape()[2];
    macs.weighted = weights.numel() * v.shape()[2];
    macs.output = linear_macs(concat, (*m.W_o)(concat));
    return macs;
}

// Writes one entry of a parameter (a Tensor handle shares its storage).
void set_entry(const Variable& v, const c::Dims& index, double value) {
    c::Tensor t = v.value();
    t.set(index, value);
}

// x where `keep` holds and 0 elsewhere: compares only the entries both PyTorch and tformer define.
c::Tensor only_where(const c::Tensor& keep, const c::Tensor& x) {
    return c::where(keep, x, c::zeros(x.shape(), x.dtype()));
}

// Seed 002's (w_q, w_k, w_v, fc) or seed 004's (linears.0 .. linears.3) weights
// in an nn::MultiHeadAttention with biases, whose names are W_q, W_k, W_v, W_o.
void load_renamed(nn::MultiHeadAttention& mha, const nn::StateDict& theirs, const std::vector<std::string>& names) {
    const std::vector<std::string> ours = {"W_q", "W_k", "W_v", "W_o"};
    nn::StateDict state;
    for (size_t i = 0; i < 4; ++i)
        for (const char* what : {".weight", ".bias"}) state[ours[i] + what] = theirs.at(names[i] + what);
    mha.load_state_dict(state);
}

// B = 2 sequences; T = 3 queries of size 5; S = 4 keys of size 6 and values of size 7;
// D = 8 hidden features in H = 2 heads of d = 4.
constexpr int64_t B = 2, T = 3, S = 4, D = 8, H = 2, d = D / H;

// What the steps share: one layer, its inputs and its output, and step 5's per-head weights.
struct Lesson {
    c::Generator gen{7};
    nn::MultiHeadAttention mha{{.key_size = 6, .query_size = 5, .value_size = 7, .num_hiddens = D, .num_heads = H},
                               gen};                                               // float64, in eval mode
    c::Tensor queries, keys, values;                                               // (B, T, 5), (B, S, 6), (B, S, 7)
    const c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{4, 2}, {B});  // (B)
    c::Tensor reference;                  // (B, T, D): mha(queries, keys, values, valid_lens)
    std::vector<c::Tensor> loop_weights;  // step 5: B·H matrices (T, S), head h of sequence b at b·H + h

    Lesson() {
        mha.to(DType::float64);
        mha.eval();
        queries = c::randn({B, T, 5}, gen, DType::float64);
        keys = c::randn({B, S, 6}, gen, DType::float64);
        values = c::randn({B, S, 7}, gen, DType::float64);
        reference = mha(Variable(queries), Variable(keys), Variable(values), valid_lens).value();
    }
};

// ---- the steps --------------------------------------------------------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 多头注意力; seed 003 › 多头注意力, 数学模型
void the_layer(Tutorial& t, const Lesson& lesson) {
    note(
        {.en = "Seed 000 and seed 003: instead of one attention over D-dimensional queries, keys and values, "
               "project them H times into smaller spaces (d = D/H each), attend in each, concatenate the H "
               "results and project once more:\n"
               "    head_i = attention(W_i^(q) q, W_i^(k) k, W_i^(v) v)       (d)\n"
               "    output = W_o [head_1; ...; head_H]                        (D)\n"
               "Each head can learn to look for something different (seed 001: 'representation subspaces'). "
               "The layer stores the H matrices W_i^(q) stacked as the rows of one Linear weight, so all heads "
               "are projected by one matrix product. Here queries have size 5, keys 6, values 7, D = 8, H = 2:",
         .zh =
             "种子文档 000 和 003：不再对 D 维的查询、键和值做一次注意力，而是把它们分别投影 H 次到更小的空间（每个 "
             "d = D/H 维），在每个空间里各做一次注意力，把 H 个结果拼接起来，再投影一次：\n"
             "    head_i = attention(W_i^(q) q, W_i^(k) k, W_i^(v) v)       (d)\n"
             "    output = W_o [head_1; ...; head_H]                        (D)\n"
             "每个头都能学着去找不同的东西（种子文档 001：“表示子空间”）。这一层把 H 个矩阵 W_i^(q) 作为各行堆叠进一个 "
             "Linear 的权重，所以所有头的投影只需一次矩阵乘法。这里查询长度为 5，键为 6，值为 7，D = 8，H = 2："});
    const nn::MultiHeadAttention& mha = lesson.mha;
    for (const auto& [name, p] : mha.named_parameters()) note(both("    {:<14} {}"), name, c::shape_str(p.shape()));
    t.check(mha.W_q->weight.shape() == c::Shape{D, 5} && mha.W_o->weight.shape() == c::Shape{D, D},
            {.en = "W_q.weight is (D, query_size) = (8, 5): two (4, 5) blocks W_1^(q), W_2^(q) stacked",
             .zh = "W_q.weight 的形状是 (D, query_size) = (8, 5)：两个 (4, 5) 的块 W_1^(q)、W_2^(q) 堆叠而成"});
    t.check(mha.num_parameters() == D * 5 + D * 6 + D * 7 + D * D,
            {.en = "no biases, as d2l's default: 8·5 + 8·6 + 8·7 + 8·8 = 208 parameters",
             .zh = "没有偏置，同 d2l 的默认设置：8·5 + 8·6 + 8·7 + 8·8 = 208 个参数"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_qkv, transpose_output)
void transpose_qkv_shapes(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 000's trick to run all heads at once: move the head dimension into the batch. For the "
                "projected queries P = W_q(queries):",
          .zh = "种子文档 000 同时运行所有头的技巧：把“头”这一维挪进批量维。对投影后的查询 P = W_q(queries)："});
    const Variable P = (*lesson.mha.W_q)(Variable(lesson.queries));  // (B, T, D)
    const Variable split = ag::reshape(P, {B, T, H, d});             // (B, T, H, d)
    const Variable moved = ag::permute(split, {0, 2, 1, 3});         // (B, H, T, d)
    const Variable heads = ag::reshape(moved, {B * H, T, d});        // (B·H, T, d)
    describe("P = W_q(queries)           ", P.value());
    describe("reshape (B, T, H, d)       ", split.value());
    describe("permute(0, 2, 1, 3)        ", moved.value());
    describe("reshape (B·H, T, d)        ", heads.value());
    show("P[0]", P.value().select(0, 0));
    show({.en = "heads[0] (batch 0, head 1)", .zh = "heads[0]（批量 0，头 1）"}, heads.value().select(0, 0));
    show({.en = "heads[1] (batch 0, head 2)", .zh = "heads[1]（批量 0，头 2）"}, heads.value().select(0, 1));
    t.check_close(nn::transpose_qkv(P, H).value(), heads.value(), 0,
                  {.en = "nn::transpose_qkv does exactly these three steps", .zh = "nn::transpose_qkv 做的正是这三步"});
    bool layout = true;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            layout = layout &&
                     c::sub(heads.value().select(0, b * H + h), P.value().select(0, b).slice(1, h * d, (h + 1) * d))
                             .to_vector() == std::vector<double>(T * d, 0.0);
    t.check(layout, {.en = "row b·H + h of the result is columns h·d .. (h+1)·d - 1 of P[b]: head h of sequence b",
                     .zh = "结果的第 b·H + h 行是 P[b] 的第 h·d .. (h+1)·d - 1 列：序列 b 的第 h 个头"});
    t.check(split.value().shares_storage(P.value()) && moved.value().shares_storage(P.value()) &&
                !heads.value().shares_storage(P.value()),
            {.en = "the reshape and the permute are views; the last reshape copies (tutorial 01, step 7)",
             .zh = "reshape 和 permute 是视图；最后一次 reshape 会复制（教程 01 第 7 步）"});
    const Variable back = nn::transpose_output(heads, H);
    describe("transpose_output(heads)    ", back.value());
    t.check_close(back.value(), P.value(), 0,
                  {.en = "transpose_output undoes it: (B·H, T, d) -> (B, T, D)",
                   .zh = "transpose_output 把它还原：(B·H, T, d) -> (B, T, D)"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力: the shapes its notes give the attention's output.
// o (B·H, T, d) is the attention over the folded heads, out (B, T, D) the layer's output.
void seed_000_shape_notes(Tutorial& t, const Variable& o, const Variable& out) {
    note(
        {.en =
             "\nSeed 000's notes give these shapes differently. They write the attention's output as\n"
             "    Attention = softmax(a(Q, K)) V ∈ R^(b×v×d),   O = f(Q_t, K_t, V_t) ∈ R^(b×v×d),   O W_o ∈ R^(b×v×d)\n"
             "where v is the number of values. But attention gives one output per QUERY (a weighted sum over "
             "the values), so it is b×q×d; and before transpose_output joins the heads back, O is "
             "(bn)×q×(d/n), like its Q_t. Here q = T = {} queries and v = S = {} values, so the difference shows:",
         .zh =
             "\n种子文档 000 的笔记把这些形状写成了别的样子。它把注意力的输出写作\n"
             "    Attention = softmax(a(Q, K)) V ∈ R^(b×v×d),   O = f(Q_t, K_t, V_t) ∈ R^(b×v×d),   O W_o ∈ R^(b×v×d)\n"
             "其中 v 是值的个数。可是注意力对每个“查询”给出一个输出（对各个值的加权和），所以应是 b×q×d；而在 "
             "transpose_output 把各头拼回去之前，O 是 (bn)×q×(d/n)，和它的 Q_t 一样。这里 q = T = {} 个查询、"
             "v = S = {} 个值，所以差别看得出来："},
        T, S);
    note({.en = "    the notes:  b×v×d = {}\n"
                "    measured:   O before transpose_output {} = (bn)×q×(d/n),  O W_o {} = b×q×d",
          .zh = "    笔记：      b×v×d = {}\n"
                "    实测：      transpose_output 之前的 O {} = (bn)×q×(d/n)，O W_o {} = b×q×d"},
         tuple_str(c::Shape{B, S, D}), tuple_str(o.shape()), tuple_str(out.shape()));
    t.check(o.shape() == c::Shape{B * H, T, d},
            {.en = "before the heads are joined, O is (bn)×q×(d/n) = {}, not the notes' b×v×d",
             .zh = "拼接各头之前，O 是 (bn)×q×(d/n) = {}，而不是笔记里的 b×v×d"},
            tuple_str(c::Shape{B * H, T, d}));
    t.check(out.shape() == c::Shape{B, T, D} && out.shape() != c::Shape{B, S, D},
            {.en = "the layer's output is b×q×d = {}: one row per query, not per value ({})",
             .zh = "这一层的输出是 b×q×d = {}：每个查询一行，而不是每个值一行（{}）"},
            tuple_str(c::Shape{B, T, D}), tuple_str(c::Shape{B, S, D}));
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (repeat_interleave of valid_lens, forward)
void repeated_valid_lens(Tutorial& t, Lesson& lesson) {
    note({.en = "The (B·H) rows are batch 0 head 1, batch 0 head 2, batch 1 head 1, ... so every valid length "
                "must appear H times in a row: seed 000's torch.repeat_interleave(valid_lens, num_heads, dim=0).",
          .zh = "(B·H) 个行依次是批量 0 的头 1、批量 0 的头 2、批量 1 的头 1……所以每个有效长度都必须连续出现 H "
                "次：种子文档 "
                "000 的 torch.repeat_interleave(valid_lens, num_heads, dim=0)。"});
    const c::Tensor repeated = lesson.valid_lens.unsqueeze(1).expand({B, H}).reshape({B * H});
    show("valid_lens", lesson.valid_lens);
    show("repeat_interleave(valid_lens, 2)", repeated);
    t.check(repeated.to_vector() == std::vector<double>{4, 4, 2, 2},
            {.en = "[4, 2] becomes [4, 4, 2, 2]", .zh = "[4, 2] 变成 [4, 4, 2, 2]"});

    note({.en = "\nThe whole layer, in d2l's order: project, transpose_qkv, one batched attention over B·H, "
                "transpose_output, W_o:",
          .zh = "\n整层按 d2l 的顺序：投影、transpose_qkv、在 B·H 上做一次批量注意力、transpose_output、W_o："});
    nn::MultiHeadAttention& mha = lesson.mha;
    const Variable q = nn::transpose_qkv((*mha.W_q)(Variable(lesson.queries)), H);  // (B·H, T, d)
    const Variable k = nn::transpose_qkv((*mha.W_k)(Variable(lesson.keys)), H);     // (B·H, S, d)
    const Variable v = nn::transpose_qkv((*mha.W_v)(Variable(lesson.values)), H);   // (B·H, S, d)
    const Variable o = (*mha.attention)(q, k, v, repeated);                         // (B·H, T, d)
    const Variable concat = nn::transpose_output(o, H);                             // (B, T, D)
    const Variable out = (*mha.W_o)(concat);                                        // (B, T, D)
    note({.en = "    q {}  k {}  v {}\n    ->  attention {}  ->  transpose_output {}  ->  W_o {}",
          .zh = "    q {}  k {}  v {}\n    ->  注意力 {}  ->  transpose_output {}  ->  W_o {}"},
         c::shape_str(q.shape()), c::shape_str(k.shape()), c::shape_str(v.shape()), c::shape_str(o.shape()),
         c::shape_str(concat.shape()), c::shape_str(out.shape()));
    show("output[1]", out.value().select(0, 1));
    t.check_close(
        out.value(), lesson.reference, 1e-14,
        {.en = "equal to mha(queries, keys, values, valid_lens)", .zh = "等于 mha(queries, keys, values, valid_lens)"});
    t.check(mha.attention_weights().shape() == c::Shape{B * H, T, S},
            {.en = "the weights kept for heatmaps are (B·H, T, S) = (4, 3, 4)",
             .zh = "为热力图保存的权重是 (B·H, T, S) = (4, 3, 4)"});
    seed_000_shape_notes(t, o, out);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力, run by torch (tests/fixtures/) and by d2l's own test
void against_pytorch_and_d2l(Tutorial& t) {
    note({.en = "tests/fixtures/multihead_attention.safetensors holds seed 000's MultiHeadAttention (d2l's class "
                "with transpose_qkv and transpose_output, written out in make_fixtures.py) run by torch: "
                "key_size 7, query_size 6, value_size 5, num_hiddens 8, 2 heads, valid lengths [6, 3], and the "
                "gradients of sum(output · u). nn::MultiHeadAttention with the same weights:",
          .zh =
              "tests/fixtures/multihead_attention.safetensors 存有种子文档 000 的 MultiHeadAttention（d2l 的类，带 "
              "transpose_qkv 和 transpose_output，照写在 make_fixtures.py 里）由 torch 运行的结果：key_size 7、"
              "query_size 6、value_size 5、num_hiddens 8、2 个头、有效长度 [6, 3]，以及 sum(output · u) 的梯度。用相同"
              "权重的 nn::MultiHeadAttention："});
    const tutorial::Reference ref("multihead_attention");
    nn::MultiHeadAttention m({.key_size = 7, .query_size = 6, .value_size = 5, .num_hiddens = 8, .num_heads = 2});
    m.load_state_dict(ref.params(""));
    const Variable q(ref["input.queries"], true), k(ref["input.keys"], true), v(ref["input.values"], true);
    const Variable out = m(q, k, v, ref["input.valid_lens"]);
    ag::sum(out * Variable(ref["input.upstream"])).backward();
    t.check_allclose(out.value(), ref["output"], 1e-5,
                     {.en = "output (2, 5, 8) matches PyTorch's", .zh = "输出 (2, 5, 8) 与 PyTorch 的一致"});
    t.check_allclose(q.grad(), ref["grad.input.queries"], 1e-4,
                     {.en = "d/d queries matches", .zh = "d/d queries 一致"});
    t.check_allclose(k.grad(), ref["grad.input.keys"], 1e-4, {.en = "d/d keys matches", .zh = "d/d keys 一致"});
    t.check_allclose(v.grad(), ref["grad.input.values"], 1e-4, {.en = "d/d values matches", .zh = "d/d values 一致"});
    for (const auto& [name, p] : m.named_parameters())
        t.check_allclose(p.grad(), ref["grad.param." + name], 1e-4, {.en = "d/d {} matches", .zh = "d/d {} 一致"},
                         name);

    note({.en = "\nd2l's own test of the class (the chapter seed 000 follows): num_hiddens 100, 5 heads, a batch of 2 "
                "with 4 queries and 6 key-value pairs, valid lengths [3, 2], X = ones (2, 4, 100), Y = ones (2, 6, "
                "100); attention(X, Y, Y, valid_lens).shape prints torch.Size([2, 4, 100]):",
          .zh = "\nd2l 自己对这个类的测试（种子文档 000 所依据的那一章）：num_hiddens 100、5 个头、批量 2，各有 4 "
                "个查询和 6 个"
                "键值对，有效长度 [3, 2]，X = ones (2, 4, 100)，Y = ones (2, 6, 100)；attention(X, Y, Y, "
                "valid_lens).shape "
                "打印 torch.Size([2, 4, 100])："});
    nn::MultiHeadAttention d2l(
        {.key_size = 100, .query_size = 100, .value_size = 100, .num_hiddens = 100, .num_heads = 5, .dropout = 0.5});
    d2l.eval();
    const Variable X(c::ones({2, 4, 100})), Y(c::ones({2, 6, 100}));
    const Variable o = d2l(X, Y, Y, c::from_vector(std::vector<int64_t>{3, 2}, {2}));
    note(both("    attention(X, Y, Y, valid_lens).shape = {}"), c::shape_str(o.shape()));
    t.check(o.shape() == c::Shape{2, 4, 100},
            {.en = "(batch_size, num_queries, num_hiddens) = (2, 4, 100), as d2l prints",
             .zh = "(batch_size, num_queries, num_hiddens) = (2, 4, 100)，与 d2l 打印的一致"});
    t.check(d2l.attention_weights().shape() == c::Shape{10, 4, 6},
            {.en = "with weights (B·H, 4, 6) = (10, 4, 6) inside", .zh = "内部的权重是 (B·H, 4, 6) = (10, 4, 6)"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.3 Multi-Head Attention, 2.4 Multi-Head Attention 实现 (split, concat)
void split_and_concat(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 002's MultiHeadAttention keeps the heads as their own dimension instead of folding them "
                "into the batch:\n"
                "    split:  tensor.view(B, T, H, d).transpose(1, 2)                 (B, H, T, d)\n"
                "    attention on 4-D tensors, the mask broadcast over the heads\n"
                "    concat: out.transpose(1, 2).contiguous().view(B, T, D)          (B, T, D)\n"
                "Seed 004 does the same, with mask.unsqueeze(1) to add the head dimension. The masks are "
                "boolean there; the valid lengths [4, 2] as a keep mask of shape (B, 1, 1, S):",
          .zh = "种子文档 002 的 MultiHeadAttention 把“头”保留为单独的一维，而不是折进批量维：\n"
                "    split:  tensor.view(B, T, H, d).transpose(1, 2)                 (B, H, T, d)\n"
                "    在四维张量上做注意力，掩码在各头上广播\n"
                "    concat: out.transpose(1, 2).contiguous().view(B, T, D)          (B, T, D)\n"
                "种子文档 004 做法相同，用 mask.unsqueeze(1) 加上“头”这一维。那里的掩码是布尔型；有效长度 [4, 2] "
                "写成形状为 "
                "(B, 1, 1, S) 的保留掩码："});
    const nn::MultiHeadAttention& mha = lesson.mha;
    auto split = [&](const Variable& x) { return ag::transpose(ag::reshape(x, {B, -1, H, d}), 1, 2); };
    const Variable q = split((*mha.W_q)(Variable(lesson.queries)));  // (B, H, T, d)
    const Variable k = split((*mha.W_k)(Variable(lesson.keys)));     // (B, H, S, d)
    const Variable v = split((*mha.W_v)(Variable(lesson.values)));   // (B, H, S, d)
    const c::Tensor keep = c::lt(c::arange(S, DType::int64).view({1, 1, 1, S}), lesson.valid_lens.view({B, 1, 1, 1}));
    show("keep[1]", keep.select(0, 1).select(0, 0));
    nn::DotProductAttention attention({.dropout = 0.0});
    const Variable o = attention(q, k, v, keep);                                                      // (B, H, T, d)
    const Variable out = (*mha.W_o)(ag::reshape(ag::contiguous(ag::transpose(o, 1, 2)), {B, T, D}));  // (B, T, D)
    note({.en = "    q {}  ->  attention {}  ->  concat {}", .zh = "    q {}  ->  注意力 {}  ->  concat {}"},
         c::shape_str(q.shape()), c::shape_str(o.shape()), c::shape_str(out.shape()));
    t.check_close(out.value(), lesson.reference, 1e-14,
                  {.en = "the 4-D split/concat gives the same output as transpose_qkv",
                   .zh = "四维的 split/concat 给出与 transpose_qkv 相同的输出"});
    t.check_close(attention.attention_weights.reshape({B * H, T, S}), mha.attention_weights(), 1e-15,
                  {.en = "and the same weights: (B, H, T, S) is (B·H, T, S) with one more dimension",
                   .zh = "权重也相同：(B, H, T, S) 就是多了一维的 (B·H, T, S)"});
}

// Step 4b, part 1: seed 002's ScaleDotProductAttention on 4-D heads with the (B, 1, T, S) cross mask.
void sdpa_with_cross_mask(Tutorial& t, const tutorial::Reference& ref) {
    nn::DotProductAttention sdpa({.dropout = 0.0});
    const Variable Q(ref["sdpa.input.Q"], true), K(ref["sdpa.input.K"], true), V(ref["sdpa.input.V"], true);
    const c::Tensor cross_mask = c::ne(ref["mask.src_trg_mask"], 0.0);  // (B, 1, T, S)
    const Variable o = sdpa(Q, K, V, cross_mask);
    ag::sum(o * Variable(ref["sdpa.input.upstream"])).backward();
    const c::Tensor valid = c::ne(ref["sdpa.input.upstream"], 0.0);
    t.check_allclose(
        only_where(valid, o.value()), only_where(valid, ref["sdpa.output"]), 1e-5,
        {.en = "seed 002 ScaleDotProductAttention (2, 2, 5, 4): the output matches on every unmasked query",
         .zh = "种子文档 002 的 ScaleDotProductAttention (2, 2, 5, 4)：每个未被掩蔽的查询上输出都一致"});
    t.check_allclose(Q.grad(), ref["sdpa.grad.input.Q"], 1e-4, {.en = "d/dQ matches", .zh = "d/dQ 一致"});
    t.check_allclose(K.grad(), ref["sdpa.grad.input.K"], 1e-4, {.en = "d/dK matches", .zh = "d/dK 一致"});
    t.check_allclose(V.grad(), ref["sdpa.grad.input.V"], 1e-4, {.en = "d/dV matches", .zh = "d/dV 一致"});
    const c::Tensor& weights = sdpa.attention_weights;  // (B, H, T, S)
    const c::Tensor keep_w = only_where(cross_mask.expand(weights.shape()), ref["sdpa.weights"]);
    const c::Tensor row_ok = c::ne(c::sum(cross_mask.to(DType::float32), {3}, true), 0.0).expand(keep_w.shape());
    t.check_allclose(
        only_where(row_ok, weights), only_where(row_ok, keep_w), 1e-5,
        {.en = "and so do the weights: masked keys get 0 in both", .zh = "权重也一致：被掩蔽的键在两边都是 0"});
    const c::Tensor dead = c::logical_not(row_ok);
    const double dead_rows = c::sum(dead.to(DType::float32)).item() / 6;  // entries / keys per row
    t.check(
        dead_rows == 4 && c::sum(only_where(dead, weights)).item() == 0 &&
            std::abs(c::sum(only_where(dead, ref["sdpa.weights"])).item() - dead_rows) < 1e-5,
        {.en = "the 4 fully masked query rows (2 padded queries × 2 heads): all 0 here; PyTorch spreads each "
               "uniformly, 1/6 on each of the 6 keys",
         .zh = "4 个被整行掩蔽的查询行（2 个填充查询 × 2 个头）：这里全为 0；PyTorch 把每行均匀摊开，6 个键各 1/6"});
}

// Step 4b, part 2: seed 002's MultiHeadAttention(8, 2) with trg_mask (pad & no-peek).
void mha002_with_trg_mask(Tutorial& t, const tutorial::Reference& ref) {
    const c::Tensor trg_mask = c::ne(ref["mask.trg_mask"], 0.0);      // (B, 1, T, T)
    const c::Tensor rows = c::ne(ref["mha002.input.upstream"], 0.0);  // the rows PyTorch and we both define
    nn::MultiHeadAttention m002(
        {.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2, .bias = true});
    load_renamed(m002, ref.params("mha002"), {"w_q", "w_k", "w_v", "fc"});
    const Variable x2(ref["mha002.input.x"], true);
    const Variable out2 = m002(x2, x2, x2, trg_mask.squeeze(1));
    ag::sum(out2 * Variable(ref["mha002.input.upstream"])).backward();
    t.check_allclose(only_where(rows, out2.value()), only_where(rows, ref["mha002.output"]), 1e-5,
                     {.en = "seed 002 MultiHeadAttention with trg_mask: the output matches on the unpadded targets",
                      .zh = "带 trg_mask 的种子文档 002 MultiHeadAttention：在未填充的目标位置上输出一致"});
    t.check_allclose(x2.grad(), ref["mha002.grad.input.x"], 1e-4, {.en = "d/dx matches", .zh = "d/dx 一致"});
    const std::vector<std::pair<std::shared_ptr<nn::Linear>, std::string>> linears002 = {
        {m002.W_q, "w_q"}, {m002.W_k, "w_k"}, {m002.W_v, "w_v"}, {m002.W_o, "fc"}};
    for (const auto& [linear, theirs] : linears002) {
        t.check_allclose(linear->weight.grad(), ref["mha002.grad.param." + theirs + ".weight"], 1e-4,
                         {.en = "d/d {}.weight matches", .zh = "d/d {}.weight 一致"}, theirs);
        t.check_allclose(linear->bias.grad(), ref["mha002.grad.param." + theirs + ".bias"], 1e-4,
                         {.en = "d/d {}.bias matches", .zh = "d/d {}.bias 一致"}, theirs);
    }
}

// Step 4b, part 3: seed 004's MultiHeadedAttention(2, 8) with make_std_mask's (B, T, T) mask.
void mha004_with_std_mask(Tutorial& t, const tutorial::Reference& ref) {
    nn::MultiHeadAttention m004(
        {.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2, .bias = true});
    load_renamed(m004, ref.params("mha004"), {"linears.0", "linears.1", "linears.2", "linears.3"});
    const Variable x4(ref["mha004.input.x"], true);
    const Variable out4 = m004(x4, x4, x4, c::ne(ref["mask.std_mask"], 0.0));
    ag::sum(out4 * Variable(ref["mha004.input.upstream"])).backward();
    t.check_allclose(out4.value(), ref["mha004.output"], 1e-5,
                     {.en = "seed 004 MultiHeadedAttention with make_std_mask: the output matches everywhere (its mask "
                            "hides keys only)",
                      .zh = "带 make_std_mask 的种子文档 004 MultiHeadedAttention：输出处处一致（它的掩码只遮住键）"});
    t.check_allclose(x4.grad(), ref["mha004.grad.input.x"], 1e-4, {.en = "d/dx matches", .zh = "d/dx 一致"});
    t.check_allclose(m004.W_o->bias.grad(), ref["mha004.grad.param.linears.3.bias"], 1e-4,
                     {.en = "d/d linears.3.bias matches", .zh = "d/d linears.3.bias 一致"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.4 Multi-Head Attention 实现; seed 004 (004_a3b87e182ede5d90.txt) › 完整代码
void seeds_002_004_against_pytorch(Tutorial& t) {
    note({.en = "tests/fixtures/attention_masks.safetensors holds seed 002's ScaleDotProductAttention and "
                "MultiHeadAttention and seed 004's MultiHeadedAttention, as the documents write them, run by torch "
                "with the documents' boolean masks (pad id 1 for seed 002, 0 for seed 004). Both multi-head layers "
                "are nn::MultiHeadAttention with biases; only the names differ (w_q ... fc, linears.0 ... 3).\n\n"
                "One difference is deliberate: a query whose whole row is masked (a padded target position) gets "
                "uniform weights in PyTorch (every score is -1e9) and zero weights here. No correct model reads "
                "such a row, and the fixture's u is zero there, so outputs are compared on the other rows and all "
                "gradients everywhere.",
          .zh =
              "tests/fixtures/attention_masks.safetensors 存有种子文档 002 的 ScaleDotProductAttention 和 "
              "MultiHeadAttention、种子文档 004 的 MultiHeadedAttention（照文档原样），由 torch 用文档的布尔掩码运行的"
              "结果（种子文档 002 的填充 id 为 1，004 的为 0）。两个多头层都是带偏置的 nn::MultiHeadAttention，只是名字"
              "不同（w_q ... fc，linears.0 ... 3）。\n\n"
              "有一处差别是有意的：整行都被掩蔽的查询（一个填充的目标位置）在 PyTorch 中得到均匀的权重（每个分数都是 "
              "-1e9），这里得到全 0 的权重。正确的模型不会读这样的行，而且夹具里的 u 在那里为 "
              "0，所以输出只在其他行上比较，"
              "梯度则处处比较。"});
    const tutorial::Reference ref("attention_masks");
    sdpa_with_cross_mask(t, ref);
    mha002_with_trg_mask(t, ref);
    mha004_with_std_mask(t, ref);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 多头注意力; seed 003 › 数学模型, read literally
void one_head_at_a_time(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Without any reshaping: for each sequence and each head, take that head's d rows of W_q, W_k and "
               "W_v, run an ordinary attention, put the H results side by side and apply W_o. This is the "
               "formula of seed 000 and seed 003 read literally.",
         .zh =
             "不做任何变形：对每个序列、每个头，取出 W_q、W_k、W_v 中属于这个头的 d 行，做一次普通的注意力，把 H 个结果"
             "并排放好，再乘 W_o。这就是照字面读种子文档 000 和 003 的公式。"});
    Macs macs;
    std::vector<c::Tensor>& loop_weights = lesson.loop_weights;
    const c::Tensor out = heads_one_by_one(lesson.mha, lesson.queries, lesson.keys, lesson.values, lesson.valid_lens,
                                           macs, &loop_weights);
    show({.en = "head 1 of sequence 0: weights", .zh = "序列 0 的头 1：权重"}, loop_weights[0]);
    show({.en = "head 2 of sequence 0: weights", .zh = "序列 0 的头 2：权重"}, loop_weights[1]);
    show({.en = "head 1 of sequence 1: weights", .zh = "序列 1 的头 1：权重"}, loop_weights[2]);
    t.check_close(out, lesson.reference, 1e-14,
                  {.en = "the loop over heads equals the batched layer", .zh = "逐头循环的结果等于批量计算的层"});
    bool same_weights = true;
    for (int64_t i = 0; i < B * H; ++i)
        same_weights =
            same_weights &&
            c::max(c::abs(c::sub(loop_weights[i], lesson.mha.attention_weights().select(0, i)))).item() < 1e-15;
    t.check(same_weights, {.en = "head h of sequence b has the weights of row b·H + h of the batched layer",
                           .zh = "序列 b 的头 h 的权重，就是批量层第 b·H + h 行的权重"});
    t.check(loop_weights[2].slice(1, 2, S).to_vector() == std::vector<double>(T * 2, 0.0),
            {.en = "sequence 1 has 2 valid keys: keys 2 and 3 get exactly 0 in every head",
             .zh = "序列 1 有 2 个有效的键：键 2 和键 3 在每个头里都恰好得到 0"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 单头/多头attention时间复杂度
void cost_of_heads(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 004 closes with: one head costs O(n²d); h heads cost O(n²·d/h · h) = O(n²d), the same. "
               "Counting the multiply-adds of the loop above for n = 10 queries and keys, D = 32, one sequence:\n"
               "- projections: 3 inputs × n × D × D, whatever H is (each head uses D/H of the rows);\n"
               "- scores q kᵀ: H heads × n × n × D/H = n²D;\n"
               "- weighted sum of values: the same, n²D;\n"
               "- W_o: n × D × D.\n"
               "The loop counts the products it makes; independently, the same counts are read off the shapes "
               "of the tensors the batched layer of step 3 makes (B·H·n·n weights, each a d-long dot product "
               "and a d-long sum; n·D·D per Linear).",
         .zh =
             "种子文档 004 最后说：一个头的代价是 O(n²d)；h 个头是 O(n²·d/h · h) = "
             "O(n²d)，一样多。数一数上面那个循环在 "
             "n = 10 个查询和键、D = 32、一个序列时的乘加次数：\n"
             "- 投影：3 个输入 × n × D × D，与 H 无关（每个头用 D/H 行）；\n"
             "- 分数 q kᵀ：H 个头 × n × n × D/H = n²D；\n"
             "- 值的加权和：同样是 n²D；\n"
             "- W_o：n × D × D。\n"
             "循环数的是它自己做的乘法；另外独立地，从第 3 步批量层实际生成的张量的形状读出同样的计数（B·H·n·n 个权重，"
             "每个是一次 d 维点积和一次 d 维加权；每个 Linear 是 n·D·D）。"});
    constexpr int64_t n = 10, Dm = 32;
    const c::Tensor x = c::randn({1, n, Dm}, lesson.gen, DType::float64);
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{n}, {1});
    // --inject-fault projections-full-width: every head projects with all of W (the test that the cost check can fail)
    const Projection projection =
        t.injected("projections-full-width") ? Projection::all_rows_then_slice : Projection::head_rows;
    line({.en = "\n      H    d = D/H    projections    q kᵀ    weights·v    W_o    attention (n²·2D)    exps",
          .zh = "\n      H    d = D/H           投影    q kᵀ      权重·值    W_o      注意力 (n²·2D)    exp 次数"});
    bool constant = true, formula = true, equal = true, batched = true;
    int64_t first = -1;
    for (int64_t heads : {1, 2, 4, 8}) {
        nn::MultiHeadAttention m(
            {.key_size = Dm, .query_size = Dm, .value_size = Dm, .num_hiddens = Dm, .num_heads = heads}, lesson.gen);
        m.to(DType::float64);
        Macs macs;
        const c::Tensor out = heads_one_by_one(m, x, x, x, lens, macs, nullptr, projection);
        equal =
            equal && c::max(c::abs(c::sub(out, m(Variable(x), Variable(x), Variable(x), lens).value()))).item() < 1e-12;
        line("    {:>3} {:>8} {:>14} {:>8} {:>12} {:>6} {:>20} {:>7}", heads, Dm / heads, macs.projections, macs.scores,
             macs.weighted, macs.output, macs.attention(), macs.exps);
        const Macs shapes = batched_costs(m, x, lens);
        batched = batched && macs.projections == shapes.projections && macs.scores == shapes.scores &&
                  macs.weighted == shapes.weighted && macs.output == shapes.output;
        if (first < 0) first = macs.total();
        constant = constant && macs.total() == first;
        formula = formula && macs.attention() == 2 * n * n * Dm && macs.projections == 3 * n * Dm * Dm &&
                  macs.output == n * Dm * Dm;
    }
    line();
    t.check(batched, {.en = "for every H, the loop's counts equal those read off the batched layer's tensors",
                      .zh = "对每个 H，循环数出的次数都等于从批量层的张量形状读出的次数"});
    t.check(formula,
            {.en = "attention costs exactly 2·n²·D = 6400 multiply-adds for every H; projections 3nD², W_o nD²",
             .zh = "对每个 H，注意力恰好花 2·n²·D = 6400 次乘加；投影 3nD²，W_o nD²"});
    t.check(constant,
            {.en = "the total, {} multiply-adds, does not depend on the number of heads",
             .zh = "总数 {} 次乘加，与头数无关"},
            first);
    t.check(equal, {.en = "and for every H the counted loop gives the layer's output",
                    .zh = "而且对每个 H，计数的循环都给出这一层的输出"});
    note({.en = "Two remarks on the documents:\n"
                "- Seed 000 says folding the heads into the batch 'saves a for loop': it saves the loop's overhead "
                "(one batched matrix product instead of H small ones), not arithmetic — the multiply-adds are the "
                "same, as counted above.\n"
                "- Seed 004 says multi-head attention additionally 'passes the concatenated heads through a "
                "non-linear layer'. W_o is linear (no activation), and the one-head layer of seed 004's code has "
                "it too. What does grow with H is the softmax: H·n² exponentials instead of n², as the last "
                "column shows — small next to the multiply-adds while d = D/H is large.",
          .zh =
              "关于文档的两点说明：\n"
              "- 种子文档 000 说把各头折进批量维“省略了一个 for loop "
              "的计算量”：省掉的是循环的开销（一次批量矩阵乘法代替 "
              "H 次小的），而不是算术——乘加次数完全一样，上面已经数过了。\n"
              "- 种子文档 004 说多头注意力还要“把拼接后的各头送过一个非线性层”。W_o 是线性的（没有激活函数），而且种子"
              "文档 004 代码里的单头层也有它。真正随 H 增长的是 softmax：H·n² 次指数运算而不是 n²，见最后一列——在 "
              "d = D/H 较大时，与乘加次数相比很小。"});
}

// d2l's show_heatmaps: the weights of every head of every sequence
void heatmap(Tutorial& t, const Lesson& lesson) {
    tasks::Heatmaps maps{.matrices = tasks::heatmap_grid(lesson.mha.attention_weights().view({B, H, T, S})),
                         .xlabel = "keys",
                         .ylabel = "queries",
                         .titles = {"head 1", "head 2"},
                         .title = "rows: sequence 0 (4 valid keys), sequence 1 (2 valid keys)",
                         .vmin = 0.0,
                         .vmax = 1.0};
    const auto png = t.out_path("multihead_weights.png");
    tasks::plot_heatmaps(png, maps);
    note({.en = "Wrote {}: the heads of one sequence attend differently to the same keys.",
          .zh = "已写出 {}：同一序列的各个头对同样的键关注得各不相同。"},
         png.string());
    bool panels = maps.matrices.size() == static_cast<size_t>(B);
    for (int64_t b = 0; panels && b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            panels =
                panels && c::max(c::abs(c::sub(maps.matrices[b][h], lesson.loop_weights.at(b * H + h)))).item() < 1e-15;
    t.check(panels,
            {.en = "panel (sequence b, head h) is exactly the weight matrix step 5's loop computed for that head",
             .zh = "面板（序列 b，头 h）正是第 5 步的循环为这个头算出的权重矩阵"});
}

// A layer of six features whose weights are all 0 except W_v = W_o = identity:
// the caller sets by hand which features a query asks for.
void identity_values_and_output(nn::MultiHeadAttention& m) {
    m.to(DType::float64);
    for (const auto& [name, p] : m.named_parameters()) c::fill_(p.value(), 0.0);
    c::copy_(m.W_v->weight.value(), c::eye(6, DType::float64));
    c::copy_(m.W_o->weight.value(), c::eye(6, DType::float64));
}

// seed 001 (001_57ca8c5b7ec56526.txt) › Multi-head attention ('it'); seed 004 › 多头attention的优点?
void why_several_heads(Tutorial& t) {
    note({.en = "Seed 001: multi-head attention 'expands the model's ability to focus on different positions': in "
                "'The animal didn't cross the street because it was too tired' a model wants to know what 'it' "
                "refers to, and perhaps also what is said about it. Seed 004 asks 多头attention的优点? and answers "
                "'it captures information from several subspaces'. Below, the weights are SET BY HAND (a trained "
                "model finds its own): every word is a vector of six features (noun, animate, pronoun, adjective, "
                "verb, function word); head 1 maps a pronoun's query onto 'animate' keys, head 2 onto 'adjective' "
                "keys.",
          .zh = "种子文档 001：多头注意力“扩展了模型关注不同位置的能力”：在 “The animal didn't cross the street "
                "because it "
                "was too tired” 里，模型想知道 “it” 指的是什么，也许还想知道说了它什么。种子文档 004 "
                "问“多头attention的优点?”，"
                "答“能从多个子空间捕捉信息”。下面的权重是“手工设定”的（训练好的模型会自己找到权重）：每个词是一个六个特"
                "征的"
                "向量（名词、有生命、代词、形容词、动词、虚词）；头 1 把代词的查询映射到“有生命”的键上，头 2 "
                "映射到“形容词”"
                "的键上。"});
    const std::vector<std::string> words = {"The",     "animal", "didn't", "cross", "the",  "street",
                                            "because", "it",     "was",    "too",   "tired"};
    const std::vector<int> kind = {5, 1, 4, 4, 5, 0, 5, 2, 4, 5, 3};  // the feature each word has
    c::Tensor Xs = c::zeros({1, 11, 6}, DType::float64);
    for (int64_t i = 0; i < 11; ++i) Xs.set({0, i, kind[i]}, 1.0);
    Xs.set({0, 1, 0}, 1.0);  // 'animal' is a noun and animate
    nn::MultiHeadAttention two({.key_size = 6, .query_size = 6, .value_size = 6, .num_hiddens = 6, .num_heads = 2});
    identity_values_and_output(two);
    const double s = 4.0;                   // how sharp: scores of s·√3 against 0
    set_entry(two.W_q->weight, {0, 2}, s);  // head 1 (rows 0-2): a pronoun asks ...
    set_entry(two.W_k->weight, {0, 1}, s);  //   ... for animate words
    set_entry(two.W_q->weight, {3, 2}, s);  // head 2 (rows 3-5): a pronoun asks ...
    set_entry(two.W_k->weight, {3, 3}, s);  //   ... for adjectives
    two(Variable(Xs), Variable(Xs), Variable(Xs));
    const c::Tensor w = two.attention_weights();  // (H, 11, 11)
    for (int64_t h = 0; h < 2; ++h) {
        const c::Tensor row = w.select(0, h).select(0, 7);  // the query 'it'
        const int64_t best = static_cast<int64_t>(c::argmax(row, 0).item());
        note({.en = "    head {}: 'it' attends most to '{}' ({:.3f})", .zh = "    头 {}：“it” 最关注 “{}”（{:.3f}）"},
             h + 1, words[best], row.at({best}));
    }
    t.check(c::argmax(w.select(0, 0).select(0, 7), 0).item() == 1,
            {.en = "head 1: 'it' → 'animal'", .zh = "头 1：“it” → “animal”"});
    t.check(c::argmax(w.select(0, 1).select(0, 7), 0).item() == 10,
            {.en = "head 2: 'it' → 'tired'", .zh = "头 2：“it” → “tired”"});

    nn::MultiHeadAttention one({.key_size = 6, .query_size = 6, .value_size = 6, .num_hiddens = 6, .num_heads = 1});
    identity_values_and_output(one);
    set_entry(one.W_q->weight, {0, 2}, s);  // one head must look for both at once
    set_entry(one.W_k->weight, {0, 1}, s);
    set_entry(one.W_k->weight, {0, 3}, s);
    one(Variable(Xs), Variable(Xs), Variable(Xs));
    const c::Tensor w1 = one.attention_weights().select(0, 0).select(0, 7);
    note({.en = "    one head asked for both: 'animal' {:.3f}, 'tired' {:.3f}",
          .zh = "    只用一个头同时找两者：“animal” {:.3f}，“tired” {:.3f}"},
         w1.at({1}), w1.at({10}));
    t.check(std::abs(w1.at({1}) - w1.at({10})) < 1e-12 && w1.at({1}) < 0.5,
            {.en = "a single head splits one distribution between the two: each gets less than half",
             .zh = "单个头要把一个分布分给两者：每个都不到一半"});
    t.check(w.select(0, 0).at({7, 1}) > 0.5 && w.select(0, 1).at({7, 10}) > 0.5,
            {.en = "two heads give each target more than half of their own distribution",
             .zh = "两个头各自把自己分布的一半以上给了各自的目标"});
    note({.en = "That is seed 004's answer made concrete: each head's softmax is one distribution over the "
                "positions, so one head must share its attention between two relations, while H heads keep H "
                "distributions in H subspaces (here features 0-2 and 3-5 of the output), and W_o mixes them. In a "
                "trained model nobody sets W_q and W_k by hand, and heads do not split up so neatly.",
          .zh =
              "这就是把种子文档 004 的回答落到实处：每个头的 softmax "
              "是位置上的一个分布，所以一个头必须在两种关系之间分配"
              "注意力，而 H 个头在 H 个子空间（这里是输出的第 0-2 和 3-5 个特征）里保有 H 个分布，再由 W_o 把它们混合。"
              "训练好的模型里没有人手工设定 W_q 和 W_k，各头也不会分工得这么整齐。"});
}

// ---- the exercise (--exercise): tutorials/07_multihead_attention/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 2.4 Multi-Head Attention 实现 (split, concat), against PyTorch
void exercise_split_and_concat(Tutorial& t) {
    note(
        {.en = "Write exercise::split_heads and exercise::concat_heads. The checks test the layout on numbers you "
               "can read, then run seed 002's whole MultiHeadAttention.forward with YOUR split and concat "
               "(w_q, split, ScaleDotProductAttention with the mask, concat, fc) on the weights and input of "
               "tests/fixtures/attention_masks.safetensors and compare with PyTorch's output and gradient.",
         .zh =
             "写出 exercise::split_heads 和 exercise::concat_heads。检查先用一眼能读懂的数检验布局，再用“你的” split "
             "和 "
             "concat 运行种子文档 002 完整的 MultiHeadAttention.forward（w_q、split、带掩码的 "
             "ScaleDotProductAttention、"
             "concat、fc），权重和输入取自 tests/fixtures/attention_masks.safetensors，与 PyTorch 的输出和梯度比较。"});
    const Variable x(c::arange(2 * 3 * 4, DType::float64).view({2, 3, 4}));
    const Variable heads = exercise::split_heads(x, 2);
    t.check(heads.shape() == c::Shape{2, 2, 3, 2},
            {.en = "split_heads((2, 3, 4), 2) has shape (B, H, T, d) = (2, 2, 3, 2)",
             .zh = "split_heads((2, 3, 4), 2) 的形状是 (B, H, T, d) = (2, 2, 3, 2)"});
    if (heads.shape() == c::Shape{2, 2, 3, 2})
        t.check(heads.value().at({1, 1, 2, 0}) == x.value().at({1, 2, 2}),
                {.en = "head 1 of sequence 1, position 2, feature 0 is x[1, 2, 2] (features 2..3 belong to head 1)",
                 .zh = "序列 1 的头 1、位置 2、特征 0 是 x[1, 2, 2]（特征 2..3 属于头 1）"});
    t.check_close(exercise::concat_heads(heads).value(), x.value(), 0, both("concat_heads(split_heads(x)) == x"));

    const tutorial::Reference ref("attention_masks");
    std::map<std::string, Variable> p;
    for (const auto& [name, value] : ref.params("mha002")) p.emplace(name, Variable(value));
    const Variable xin(ref["mha002.input.x"], true);
    auto linear = [&](const Variable& v, const std::string& name) {
        return ag::linear(v, p.at(name + ".weight"), p.at(name + ".bias"));
    };
    nn::DotProductAttention sdpa({.dropout = 0.0});
    const c::Tensor mask = c::ne(ref["mask.trg_mask"], 0.0);  // (B, 1, T, T)
    const Variable q = exercise::split_heads(linear(xin, "w_q"), 2), k = exercise::split_heads(linear(xin, "w_k"), 2),
                   v = exercise::split_heads(linear(xin, "w_v"), 2);
    const Variable out = linear(exercise::concat_heads(sdpa(q, k, v, mask)), "fc");
    ag::sum(out * Variable(ref["mha002.input.upstream"])).backward();
    const c::Tensor rows = c::ne(ref["mha002.input.upstream"], 0.0);
    t.check_allclose(only_where(rows, out.value()), only_where(rows, ref["mha002.output"]), 1e-5,
                     {.en = "seed 002's forward with your split and concat matches PyTorch's output",
                      .zh = "用你的 split 和 concat 运行种子文档 002 的 forward，输出与 PyTorch 的一致"});
    t.check_allclose(
        xin.grad(), ref["mha002.grad.input.x"], 1e-4,
        {.en = "and PyTorch's gradient with respect to the input", .zh = "对输入的梯度也与 PyTorch 的一致"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 07 · Multi-head attention", .zh = "tformer 教程 07 · 多头注意力"},
         .follows = {.en = "seed 000 多头注意力 (transpose_qkv, transpose_output); seed 001 Multi-head "
                           "attention ('it'); seed 002 2.3–2.4; seed 003 多头注意力; seed 004 "
                           "MultiHeadedAttention, 多头attention的优点 and its cost remark",
                     .zh = "种子文档 000 多头注意力（transpose_qkv、transpose_output）；种子文档 001 Multi-head "
                           "attention（“it”）；种子文档 002 的 2.3–2.4；种子文档 003 多头注意力；种子文档 004 "
                           "MultiHeadedAttention、多头attention的优点及其关于代价的说明"},
         .exercise = {.en = "write seed 002's split and concat, and run seed 002's MultiHeadAttention with "
                            "them against PyTorch (tutorials/07_multihead_attention/exercise.cpp)",
                      .zh = "写出种子文档 002 的 split 和 concat，并用它们运行种子文档 002 的 MultiHeadAttention，"
                            "与 PyTorch 对照（tutorials/07_multihead_attention/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. The layer: H heads, each with its own projections", .zh = "1. 这一层：H 个头，各有自己的投影"},
           [&] { the_layer(t, lesson); });
    t.step({.en = "2. transpose_qkv: (B, T, D) -> (B·H, T, d), shape by shape",
            .zh = "2. transpose_qkv：(B, T, D) -> (B·H, T, d)，逐个形状地看"},
           [&] { transpose_qkv_shapes(t, lesson); });
    t.step({.en = "3. The valid lengths, repeated for every head; the whole layer and its shapes",
            .zh = "3. 为每个头重复有效长度；整层及其形状"},
           [&] { repeated_valid_lens(t, lesson); });
    t.step({.en = "3b. The layer against PyTorch, and d2l's (2, 4, 100) example",
            .zh = "3b. 这一层与 PyTorch 对照，以及 d2l 的 (2, 4, 100) 例子"},
           [&] { against_pytorch_and_d2l(t); });
    t.step({.en = "4. Seeds 002 and 004: split into (B, H, T, d), concat back",
            .zh = "4. 种子文档 002 和 004：split 成 (B, H, T, d)，再 concat 回去"},
           [&] { split_and_concat(t, lesson); });
    t.step({.en = "4b. Seeds 002 and 004 against PyTorch, masks included",
            .zh = "4b. 种子文档 002 和 004 与 PyTorch 对照，含掩码"},
           [&] { seeds_002_004_against_pytorch(t); });
    t.step({.en = "5. The same thing, one head at a time", .zh = "5. 同一件事，一次一个头"},
           [&] { one_head_at_a_time(t, lesson); });
    t.step({.en = "6. The cost: O(n²d) for one head or for h heads", .zh = "6. 代价：一个头或 h 个头都是 O(n²d)"},
           [&] { cost_of_heads(t, lesson); });
    t.step({.en = "7. Heatmap: every head of every sequence", .zh = "7. 热力图：每个序列的每个头"},
           [&] { heatmap(t, lesson); });
    t.step({.en = "8. Why several heads? Seed 001's 'it', seed 004's question",
            .zh = "8. 为什么要多个头？种子文档 001 的 “it”，种子文档 004 的问题"},
           [&] { why_several_heads(t); });
    t.exercise({.en = "Exercise. Seed 002's split and concat, against PyTorch",
                .zh = "练习. 种子文档 002 的 split 和 concat，与 PyTorch 对照"},
               [&] { exercise_split_and_concat(t); });
    return t.finish();
}
