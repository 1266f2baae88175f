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

// Multi-head attention computed the long way: for every batch element and
// every head, slice that head's rows out of W_q, W_k, W_v, run one ordinary
// scaled dot-product attention, then put the heads side by side and apply
// W_o. Counts its multiply-adds. queries (B, T, q), keys (B, S, k), values
// (B, S, v), lens (B) int64 -> (B, T, D).
c::Tensor heads_one_by_one(const nn::MultiHeadAttention& mha, const c::Tensor& queries, const c::Tensor& keys,
                           const c::Tensor& values, const c::Tensor& lens, Macs& macs,
                           std::vector<c::Tensor>* weights_out = nullptr) {
    const int64_t B = queries.size(0), H = mha.options.num_heads, d = mha.options.num_hiddens / H;
    std::vector<c::Tensor> batch_out;
    for (int64_t b = 0; b < B; ++b) {
        std::vector<c::Tensor> heads;
        for (int64_t h = 0; h < H; ++h) {
            // W_i^(q) of the documents: rows h·d .. (h+1)·d of W_q's (D, q) weight
            const c::Tensor Wq = mha.W_q->weight.value().slice(0, h * d, (h + 1) * d);                       // (d, q)
            const c::Tensor Wk = mha.W_k->weight.value().slice(0, h * d, (h + 1) * d);                       // (d, k)
            const c::Tensor Wv = mha.W_v->weight.value().slice(0, h * d, (h + 1) * d);                       // (d, v)
            const c::Tensor q = counted_matmul(queries.select(0, b), Wq.transpose(0, 1), macs.projections);  // (T, d)
            const c::Tensor k = counted_matmul(keys.select(0, b), Wk.transpose(0, 1), macs.projections);     // (S, d)
            const c::Tensor v = counted_matmul(values.select(0, b), Wv.transpose(0, 1), macs.projections);   // (S, d)
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
        "Seed 000 and seed 003: instead of one attention over D-dimensional queries, keys and values, "
        "project them H times into smaller spaces (d = D/H each), attend in each, concatenate the H "
        "results and project once more:\n"
        "    head_i = attention(W_i^(q) q, W_i^(k) k, W_i^(v) v)       (d)\n"
        "    output = W_o [head_1; ...; head_H]                        (D)\n"
        "Each head can learn to look for something different (seed 001: 'representation subspaces'). "
        "The layer stores the H matrices W_i^(q) stacked as the rows of one Linear weight, so all heads "
        "are projected by one matrix product. Here queries have size 5, keys 6, values 7, D = 8, H = 2:");
    const nn::MultiHeadAttention& mha = lesson.mha;
    for (const auto& [name, p] : mha.named_parameters()) note("    {:<14} {}", name, c::shape_str(p.shape()));
    t.check(mha.W_q->weight.shape() == c::Shape{D, 5} && mha.W_o->weight.shape() == c::Shape{D, D},
            "W_q.weight is (D, query_size) = (8, 5): two (4, 5) blocks W_1^(q), W_2^(q) stacked");
    t.check(mha.num_parameters() == D * 5 + D * 6 + D * 7 + D * D,
            "no biases, as d2l's default: 8·5 + 8·6 + 8·7 + 8·8 = 208 parameters");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_qkv, transpose_output)
void transpose_qkv_shapes(Tutorial& t, const Lesson& lesson) {
    note(
        "Seed 000's trick to run all heads at once: move the head dimension into the batch. For the "
        "projected queries P = W_q(queries):");
    const Variable P = (*lesson.mha.W_q)(Variable(lesson.queries));  // (B, T, D)
    const Variable split = ag::reshape(P, {B, T, H, d});             // (B, T, H, d)
    const Variable moved = ag::permute(split, {0, 2, 1, 3});         // (B, H, T, d)
    const Variable heads = ag::reshape(moved, {B * H, T, d});        // (B·H, T, d)
    describe("P = W_q(queries)           ", P.value());
    describe("reshape (B, T, H, d)       ", split.value());
    describe("permute(0, 2, 1, 3)        ", moved.value());
    describe("reshape (B·H, T, d)        ", heads.value());
    show("P[0]", P.value().select(0, 0));
    show("heads[0] (batch 0, head 1)", heads.value().select(0, 0));
    show("heads[1] (batch 0, head 2)", heads.value().select(0, 1));
    t.check_close(nn::transpose_qkv(P, H).value(), heads.value(), 0,
                  "nn::transpose_qkv does exactly these three steps");
    bool layout = true;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            layout = layout &&
                     c::sub(heads.value().select(0, b * H + h), P.value().select(0, b).slice(1, h * d, (h + 1) * d))
                             .to_vector() == std::vector<double>(T * d, 0.0);
    t.check(layout, "row b·H + h of the result is columns h·d .. (h+1)·d - 1 of P[b]: head h of sequence b");
    t.check(split.value().shares_storage(P.value()) && moved.value().shares_storage(P.value()) &&
                !heads.value().shares_storage(P.value()),
            "the reshape and the permute are views; the last reshape copies (tutorial 01, step 7)");
    const Variable back = nn::transpose_output(heads, H);
    describe("transpose_output(heads)    ", back.value());
    t.check_close(back.value(), P.value(), 0, "transpose_output undoes it: (B·H, T, d) -> (B, T, D)");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (repeat_interleave of valid_lens, forward)
void repeated_valid_lens(Tutorial& t, Lesson& lesson) {
    note(
        "The (B·H) rows are batch 0 head 1, batch 0 head 2, batch 1 head 1, ... so every valid length "
        "must appear H times in a row: seed 000's torch.repeat_interleave(valid_lens, num_heads, dim=0).");
    const c::Tensor repeated = lesson.valid_lens.unsqueeze(1).expand({B, H}).reshape({B * H});
    show("valid_lens", lesson.valid_lens);
    show("repeat_interleave(valid_lens, 2)", repeated);
    t.check(repeated.to_vector() == std::vector<double>{4, 4, 2, 2}, "[4, 2] becomes [4, 4, 2, 2]");

    note(
        "\nThe whole layer, in d2l's order: project, transpose_qkv, one batched attention over B·H, "
        "transpose_output, W_o:");
    nn::MultiHeadAttention& mha = lesson.mha;
    const Variable q = nn::transpose_qkv((*mha.W_q)(Variable(lesson.queries)), H);  // (B·H, T, d)
    const Variable k = nn::transpose_qkv((*mha.W_k)(Variable(lesson.keys)), H);     // (B·H, S, d)
    const Variable v = nn::transpose_qkv((*mha.W_v)(Variable(lesson.values)), H);   // (B·H, S, d)
    const Variable o = (*mha.attention)(q, k, v, repeated);                         // (B·H, T, d)
    const Variable concat = nn::transpose_output(o, H);                             // (B, T, D)
    const Variable out = (*mha.W_o)(concat);                                        // (B, T, D)
    note("    q {}  k {}  v {}\n    ->  attention {}  ->  transpose_output {}  ->  W_o {}", c::shape_str(q.shape()),
         c::shape_str(k.shape()), c::shape_str(v.shape()), c::shape_str(o.shape()), c::shape_str(concat.shape()),
         c::shape_str(out.shape()));
    show("output[1]", out.value().select(0, 1));
    t.check_close(out.value(), lesson.reference, 1e-14, "equal to mha(queries, keys, values, valid_lens)");
    t.check(mha.attention_weights().shape() == c::Shape{B * H, T, S},
            "the weights kept for heatmaps are (B·H, T, S) = (4, 3, 4)");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力, run by torch (tests/fixtures/) and by d2l's own test
void against_pytorch_and_d2l(Tutorial& t) {
    note(
        "tests/fixtures/multihead_attention.safetensors holds seed 000's MultiHeadAttention (d2l's class "
        "with transpose_qkv and transpose_output, written out in make_fixtures.py) run by torch: "
        "key_size 7, query_size 6, value_size 5, num_hiddens 8, 2 heads, valid lengths [6, 3], and the "
        "gradients of sum(output · u). nn::MultiHeadAttention with the same weights:");
    const tutorial::Reference ref("multihead_attention");
    nn::MultiHeadAttention m({.key_size = 7, .query_size = 6, .value_size = 5, .num_hiddens = 8, .num_heads = 2});
    m.load_state_dict(ref.params(""));
    const Variable q(ref["input.queries"], true), k(ref["input.keys"], true), v(ref["input.values"], true);
    const Variable out = m(q, k, v, ref["input.valid_lens"]);
    ag::sum(out * Variable(ref["input.upstream"])).backward();
    t.check_allclose(out.value(), ref["output"], 1e-5, "output (2, 5, 8) matches PyTorch's");
    t.check_allclose(q.grad(), ref["grad.input.queries"], 1e-4, "d/d queries matches");
    t.check_allclose(k.grad(), ref["grad.input.keys"], 1e-4, "d/d keys matches");
    t.check_allclose(v.grad(), ref["grad.input.values"], 1e-4, "d/d values matches");
    for (const auto& [name, p] : m.named_parameters())
        t.check_allclose(p.grad(), ref["grad.param." + name], 1e-4, "d/d " + name + " matches");

    note(
        "\nd2l's own test of the class (the chapter seed 000 follows): num_hiddens 100, 5 heads, a batch of 2 "
        "with 4 queries and 6 key-value pairs, valid lengths [3, 2], X = ones (2, 4, 100), Y = ones (2, 6, "
        "100); attention(X, Y, Y, valid_lens).shape prints torch.Size([2, 4, 100]):");
    nn::MultiHeadAttention d2l(
        {.key_size = 100, .query_size = 100, .value_size = 100, .num_hiddens = 100, .num_heads = 5, .dropout = 0.5});
    d2l.eval();
    const Variable X(c::ones({2, 4, 100})), Y(c::ones({2, 6, 100}));
    const Variable o = d2l(X, Y, Y, c::from_vector(std::vector<int64_t>{3, 2}, {2}));
    note("    attention(X, Y, Y, valid_lens).shape = {}", c::shape_str(o.shape()));
    t.check(o.shape() == c::Shape{2, 4, 100}, "(batch_size, num_queries, num_hiddens) = (2, 4, 100), as d2l prints");
    t.check(d2l.attention_weights().shape() == c::Shape{10, 4, 6}, "with weights (B·H, 4, 6) = (10, 4, 6) inside");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.3 Multi-Head Attention, 2.4 Multi-Head Attention 实现 (split, concat)
void split_and_concat(Tutorial& t, const Lesson& lesson) {
    note(
        "Seed 002's MultiHeadAttention keeps the heads as their own dimension instead of folding them "
        "into the batch:\n"
        "    split:  tensor.view(B, T, H, d).transpose(1, 2)                 (B, H, T, d)\n"
        "    attention on 4-D tensors, the mask broadcast over the heads\n"
        "    concat: out.transpose(1, 2).contiguous().view(B, T, D)          (B, T, D)\n"
        "Seed 004 does the same, with mask.unsqueeze(1) to add the head dimension. The masks are "
        "boolean there; the valid lengths [4, 2] as a keep mask of shape (B, 1, 1, S):");
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
    note("    q {}  ->  attention {}  ->  concat {}", c::shape_str(q.shape()), c::shape_str(o.shape()),
         c::shape_str(out.shape()));
    t.check_close(out.value(), lesson.reference, 1e-14, "the 4-D split/concat gives the same output as transpose_qkv");
    t.check_close(attention.attention_weights.reshape({B * H, T, S}), mha.attention_weights(), 1e-15,
                  "and the same weights: (B, H, T, S) is (B·H, T, S) with one more dimension");
}

// Step 4b, part 1: seed 002's ScaleDotProductAttention on 4-D heads with the (B, 1, T, S) cross mask.
void sdpa_with_cross_mask(Tutorial& t, const tutorial::Reference& ref) {
    nn::DotProductAttention sdpa({.dropout = 0.0});
    const Variable Q(ref["sdpa.input.Q"], true), K(ref["sdpa.input.K"], true), V(ref["sdpa.input.V"], true);
    const c::Tensor cross_mask = c::ne(ref["mask.src_trg_mask"], 0.0);  // (B, 1, T, S)
    const Variable o = sdpa(Q, K, V, cross_mask);
    ag::sum(o * Variable(ref["sdpa.input.upstream"])).backward();
    const c::Tensor valid = c::ne(ref["sdpa.input.upstream"], 0.0);
    t.check_allclose(only_where(valid, o.value()), only_where(valid, ref["sdpa.output"]), 1e-5,
                     "seed 002 ScaleDotProductAttention (2, 2, 5, 4): the output matches on every unmasked query");
    t.check_allclose(Q.grad(), ref["sdpa.grad.input.Q"], 1e-4, "d/dQ matches");
    t.check_allclose(K.grad(), ref["sdpa.grad.input.K"], 1e-4, "d/dK matches");
    t.check_allclose(V.grad(), ref["sdpa.grad.input.V"], 1e-4, "d/dV matches");
    const c::Tensor& weights = sdpa.attention_weights;  // (B, H, T, S)
    const c::Tensor keep_w = only_where(cross_mask.expand(weights.shape()), ref["sdpa.weights"]);
    const c::Tensor row_ok = c::ne(c::sum(cross_mask.to(DType::float32), {3}, true), 0.0).expand(keep_w.shape());
    t.check_allclose(only_where(row_ok, weights), only_where(row_ok, keep_w), 1e-5,
                     "and so do the weights: masked keys get 0 in both");
    const c::Tensor dead = c::logical_not(row_ok);
    const double dead_rows = c::sum(dead.to(DType::float32)).item() / 6;  // entries / keys per row
    t.check(dead_rows == 4 && c::sum(only_where(dead, weights)).item() == 0 &&
                std::abs(c::sum(only_where(dead, ref["sdpa.weights"])).item() - dead_rows) < 1e-5,
            "the 4 fully masked query rows (2 padded queries × 2 heads): all 0 here; PyTorch spreads each "
            "uniformly, 1/6 on each of the 6 keys");
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
                     "seed 002 MultiHeadAttention with trg_mask: the output matches on the unpadded targets");
    t.check_allclose(x2.grad(), ref["mha002.grad.input.x"], 1e-4, "d/dx matches");
    const std::vector<std::pair<std::shared_ptr<nn::Linear>, std::string>> linears002 = {
        {m002.W_q, "w_q"}, {m002.W_k, "w_k"}, {m002.W_v, "w_v"}, {m002.W_o, "fc"}};
    for (const auto& [linear, theirs] : linears002) {
        t.check_allclose(linear->weight.grad(), ref["mha002.grad.param." + theirs + ".weight"], 1e-4,
                         "d/d " + theirs + ".weight matches");
        t.check_allclose(linear->bias.grad(), ref["mha002.grad.param." + theirs + ".bias"], 1e-4,
                         "d/d " + theirs + ".bias matches");
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
                     "seed 004 MultiHeadedAttention with make_std_mask: the output matches everywhere (its mask "
                     "hides keys only)");
    t.check_allclose(x4.grad(), ref["mha004.grad.input.x"], 1e-4, "d/dx matches");
    t.check_allclose(m004.W_o->bias.grad(), ref["mha004.grad.param.linears.3.bias"], 1e-4,
                     "d/d linears.3.bias matches");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 2.4 Multi-Head Attention 实现; seed 004 (004_a3b87e182ede5d90.txt) › 完整代码
void seeds_002_004_against_pytorch(Tutorial& t) {
    note(
        "tests/fixtures/attention_masks.safetensors holds seed 002's ScaleDotProductAttention and "
        "MultiHeadAttention and seed 004's MultiHeadedAttention, as the documents write them, run by torch "
        "with the documents' boolean masks (pad id 1 for seed 002, 0 for seed 004). Both multi-head layers "
        "are nn::MultiHeadAttention with biases; only the names differ (w_q ... fc, linears.0 ... 3).\n\n"
        "One difference is deliberate: a query whose whole row is masked (a padded target position) gets "
        "uniform weights in PyTorch (every score is -1e9) and zero weights here. No correct model reads "
        "such a row, and the fixture's u is zero there, so outputs are compared on the other rows and all "
        "gradients everywhere.");
    const tutorial::Reference ref("attention_masks");
    sdpa_with_cross_mask(t, ref);
    mha002_with_trg_mask(t, ref);
    mha004_with_std_mask(t, ref);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 多头注意力; seed 003 › 数学模型, read literally
void one_head_at_a_time(Tutorial& t, Lesson& lesson) {
    note(
        "Without any reshaping: for each sequence and each head, take that head's d rows of W_q, W_k and "
        "W_v, run an ordinary attention, put the H results side by side and apply W_o. This is the "
        "formula of seed 000 and seed 003 read literally.");
    Macs macs;
    std::vector<c::Tensor>& loop_weights = lesson.loop_weights;
    const c::Tensor out = heads_one_by_one(lesson.mha, lesson.queries, lesson.keys, lesson.values, lesson.valid_lens,
                                           macs, &loop_weights);
    show("head 1 of sequence 0: weights", loop_weights[0]);
    show("head 2 of sequence 0: weights", loop_weights[1]);
    show("head 1 of sequence 1: weights", loop_weights[2]);
    t.check_close(out, lesson.reference, 1e-14, "the loop over heads equals the batched layer");
    bool same_weights = true;
    for (int64_t i = 0; i < B * H; ++i)
        same_weights =
            same_weights &&
            c::max(c::abs(c::sub(loop_weights[i], lesson.mha.attention_weights().select(0, i)))).item() < 1e-15;
    t.check(same_weights, "head h of sequence b has the weights of row b·H + h of the batched layer");
    t.check(loop_weights[2].slice(1, 2, S).to_vector() == std::vector<double>(T * 2, 0.0),
            "sequence 1 has 2 valid keys: keys 2 and 3 get exactly 0 in every head");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 单头/多头attention时间复杂度
void cost_of_heads(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 004 closes with: one head costs O(n²d); h heads cost O(n²·d/h · h) = O(n²d), the same. "
        "Counting the multiply-adds of the loop above for n = 10 queries and keys, D = 32, one sequence:\n"
        "- projections: 3 inputs × n × D × D, whatever H is (each head uses D/H of the rows);\n"
        "- scores q kᵀ: H heads × n × n × D/H = n²D;\n"
        "- weighted sum of values: the same, n²D;\n"
        "- W_o: n × D × D.");
    constexpr int64_t n = 10, Dm = 32;
    const c::Tensor x = c::randn({1, n, Dm}, lesson.gen, DType::float64);
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{n}, {1});
    line("\n      H    d = D/H    projections    q kᵀ    weights·v    W_o    attention (n²·2D)    exps");
    bool constant = true, formula = true, equal = true;
    int64_t first = -1;
    for (int64_t heads : {1, 2, 4, 8}) {
        nn::MultiHeadAttention m(
            {.key_size = Dm, .query_size = Dm, .value_size = Dm, .num_hiddens = Dm, .num_heads = heads}, lesson.gen);
        m.to(DType::float64);
        Macs macs;
        const c::Tensor out = heads_one_by_one(m, x, x, x, lens, macs);
        equal =
            equal && c::max(c::abs(c::sub(out, m(Variable(x), Variable(x), Variable(x), lens).value()))).item() < 1e-12;
        line("    {:>3} {:>8} {:>14} {:>8} {:>12} {:>6} {:>20} {:>7}", heads, Dm / heads, macs.projections, macs.scores,
             macs.weighted, macs.output, macs.attention(), macs.exps);
        if (first < 0) first = macs.total();
        constant = constant && macs.total() == first;
        formula = formula && macs.attention() == 2 * n * n * Dm && macs.projections == 3 * n * Dm * Dm &&
                  macs.output == n * Dm * Dm;
    }
    line();
    t.check(formula, "attention costs exactly 2·n²·D = 6400 multiply-adds for every H; projections 3nD², W_o nD²");
    t.check(constant, fmt::format("the total, {} multiply-adds, does not depend on the number of heads", first));
    t.check(equal, "and for every H the counted loop gives the layer's output");
    note(
        "Two remarks on the documents:\n"
        "- Seed 000 says folding the heads into the batch 'saves a for loop': it saves the loop's overhead "
        "(one batched matrix product instead of H small ones), not arithmetic — the multiply-adds are the "
        "same, as counted above.\n"
        "- Seed 004 says multi-head attention additionally 'passes the concatenated heads through a "
        "non-linear layer'. W_o is linear (no activation), and the one-head layer of seed 004's code has "
        "it too. What does grow with H is the softmax: H·n² exponentials instead of n², as the last "
        "column shows — small next to the multiply-adds while d = D/H is large.");
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
    note("Wrote {}: the heads of one sequence attend differently to the same keys.", png.string());
    bool panels = maps.matrices.size() == static_cast<size_t>(B);
    for (int64_t b = 0; panels && b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            panels =
                panels && c::max(c::abs(c::sub(maps.matrices[b][h], lesson.loop_weights.at(b * H + h)))).item() < 1e-15;
    t.check(panels, "panel (sequence b, head h) is exactly the weight matrix step 5's loop computed for that head");
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
    note(
        "Seed 001: multi-head attention 'expands the model's ability to focus on different positions': in "
        "'The animal didn't cross the street because it was too tired' a model wants to know what 'it' "
        "refers to, and perhaps also what is said about it. Seed 004 asks 多头attention的优点? and answers "
        "'it captures information from several subspaces'. Below, the weights are SET BY HAND (a trained "
        "model finds its own): every word is a vector of six features (noun, animate, pronoun, adjective, "
        "verb, function word); head 1 maps a pronoun's query onto 'animate' keys, head 2 onto 'adjective' "
        "keys.");
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
        note("    head {}: 'it' attends most to '{}' ({:.3f})", h + 1, words[best], row.at({best}));
    }
    t.check(c::argmax(w.select(0, 0).select(0, 7), 0).item() == 1, "head 1: 'it' → 'animal'");
    t.check(c::argmax(w.select(0, 1).select(0, 7), 0).item() == 10, "head 2: 'it' → 'tired'");

    nn::MultiHeadAttention one({.key_size = 6, .query_size = 6, .value_size = 6, .num_hiddens = 6, .num_heads = 1});
    identity_values_and_output(one);
    set_entry(one.W_q->weight, {0, 2}, s);  // one head must look for both at once
    set_entry(one.W_k->weight, {0, 1}, s);
    set_entry(one.W_k->weight, {0, 3}, s);
    one(Variable(Xs), Variable(Xs), Variable(Xs));
    const c::Tensor w1 = one.attention_weights().select(0, 0).select(0, 7);
    note("    one head asked for both: 'animal' {:.3f}, 'tired' {:.3f}", w1.at({1}), w1.at({10}));
    t.check(std::abs(w1.at({1}) - w1.at({10})) < 1e-12 && w1.at({1}) < 0.5,
            "a single head splits one distribution between the two: each gets less than half");
    t.check(w.select(0, 0).at({7, 1}) > 0.5 && w.select(0, 1).at({7, 10}) > 0.5,
            "two heads give each target more than half of their own distribution");
    note(
        "That is seed 004's answer made concrete: each head's softmax is one distribution over the "
        "positions, so one head must share its attention between two relations, while H heads keep H "
        "distributions in H subspaces (here features 0-2 and 3-5 of the output), and W_o mixes them. In a "
        "trained model nobody sets W_q and W_k by hand, and heads do not split up so neatly.");
}

// ---- the exercise (--exercise): tutorials/07_multihead_attention/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 2.4 Multi-Head Attention 实现 (split, concat), against PyTorch
void exercise_split_and_concat(Tutorial& t) {
    note(
        "Write exercise::split_heads and exercise::concat_heads. The checks test the layout on numbers you "
        "can read, then run seed 002's whole MultiHeadAttention.forward with YOUR split and concat "
        "(w_q, split, ScaleDotProductAttention with the mask, concat, fc) on the weights and input of "
        "tests/fixtures/attention_masks.safetensors and compare with PyTorch's output and gradient.");
    const Variable x(c::arange(2 * 3 * 4, DType::float64).view({2, 3, 4}));
    const Variable heads = exercise::split_heads(x, 2);
    t.check(heads.shape() == c::Shape{2, 2, 3, 2}, "split_heads((2, 3, 4), 2) has shape (B, H, T, d) = (2, 2, 3, 2)");
    if (heads.shape() == c::Shape{2, 2, 3, 2})
        t.check(heads.value().at({1, 1, 2, 0}) == x.value().at({1, 2, 2}),
                "head 1 of sequence 1, position 2, feature 0 is x[1, 2, 2] (features 2..3 belong to head 1)");
    t.check_close(exercise::concat_heads(heads).value(), x.value(), 0, "concat_heads(split_heads(x)) == x");

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
                     "seed 002's forward with your split and concat matches PyTorch's output");
    t.check_allclose(xin.grad(), ref["mha002.grad.input.x"], 1e-4, "and PyTorch's gradient with respect to the input");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 07 · Multi-head attention",
                .follows = "seed 000 多头注意力 (transpose_qkv, transpose_output); seed 001 Multi-head "
                           "attention ('it'); seed 002 2.3–2.4; seed 003 多头注意力; seed 004 "
                           "MultiHeadedAttention, 多头attention的优点 and its cost remark",
                .exercise = "write seed 002's split and concat, and run seed 002's MultiHeadAttention with "
                            "them against PyTorch (tutorials/07_multihead_attention/exercise.cpp)"});
    Lesson lesson;
    t.step("1. The layer: H heads, each with its own projections", [&] { the_layer(t, lesson); });
    t.step("2. transpose_qkv: (B, T, D) -> (B·H, T, d), shape by shape", [&] { transpose_qkv_shapes(t, lesson); });
    t.step("3. The valid lengths, repeated for every head", [&] { repeated_valid_lens(t, lesson); });
    t.step("3b. The layer against PyTorch, and d2l's (2, 4, 100) example", [&] { against_pytorch_and_d2l(t); });
    t.step("4. Seeds 002 and 004: split into (B, H, T, d), concat back", [&] { split_and_concat(t, lesson); });
    t.step("4b. Seeds 002 and 004 against PyTorch, masks included", [&] { seeds_002_004_against_pytorch(t); });
    t.step("5. The same thing, one head at a time", [&] { one_head_at_a_time(t, lesson); });
    t.step("6. The cost: O(n²d) for one head or for h heads", [&] { cost_of_heads(t, lesson); });
    t.step("7. Heatmap: every head of every sequence", [&] { heatmap(t, lesson); });
    t.step("8. Why several heads? Seed 001's 'it', seed 004's question", [&] { why_several_heads(t); });
    t.exercise("Exercise. Seed 002's split and concat, against PyTorch", [&] { exercise_split_and_concat(t); });
    return t.finish();
}
