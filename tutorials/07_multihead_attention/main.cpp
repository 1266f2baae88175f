// Tutorial 07 · Multi-head attention: transpose_qkv / transpose_output,
// split and concat, the heads one by one, and what it costs.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 多头注意力 and
// 代码实现 › 多头注意力 (MultiHeadAttention, transpose_qkv, transpose_output,
// repeat_interleave of valid_lens); seed 002 (002_36798a9f04a86cc8.txt),
// 2.3–2.4 (split into [batch, n_head, seq_len, d_model//n_head] and concat);
// seed 004 (004_a3b87e182ede5d90.txt), MultiHeadedAttention and its closing
// remark on the cost, O(n²d//h · h) = O(n²d).
// Read it with tutorials/07_multihead_attention/README.md.
#include "autograd/autograd.hpp"
#include "common/tutorial.hpp"
#include "core/core.hpp"
#include "nn/attention.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace tformer;
namespace ag = tformer::autograd;
namespace c = tformer::core;
using ag::Variable;
using c::DType;
using tutorial::describe;
using tutorial::note;
using tutorial::show;

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
            const c::Tensor Wq = mha.W_q->weight.value().slice(0, h * d, (h + 1) * d);  // (d, q)
            const c::Tensor Wk = mha.W_k->weight.value().slice(0, h * d, (h + 1) * d);  // (d, k)
            const c::Tensor Wv = mha.W_v->weight.value().slice(0, h * d, (h + 1) * d);  // (d, v)
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

}  // namespace

int main(int argc, char** argv) {
    tutorial::Tutorial t(argc, argv,
                         {.title = "tformer tutorial 07 · Multi-head attention",
                          .follows = "seed 000 多头注意力 (transpose_qkv, transpose_output); seed 002 2.3–2.4; "
                                     "seed 004 MultiHeadedAttention and its cost remark"});

    // B = 2 sequences; T = 3 queries of size 5; S = 4 keys of size 6 and values of size 7;
    // D = 8 hidden features in H = 2 heads of d = 4.
    constexpr int64_t B = 2, T = 3, S = 4, D = 8, H = 2, d = D / H;
    c::Generator gen(7);
    nn::MultiHeadAttention mha({.key_size = 6, .query_size = 5, .value_size = 7, .num_hiddens = D, .num_heads = H},
                               gen);
    mha.to(DType::float64);
    mha.eval();
    const c::Tensor queries = c::randn({B, T, 5}, gen, DType::float64);
    const c::Tensor keys = c::randn({B, S, 6}, gen, DType::float64);
    const c::Tensor values = c::randn({B, S, 7}, gen, DType::float64);
    const c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{4, 2}, {B});
    const c::Tensor reference =
        mha(Variable(queries), Variable(keys), Variable(values), valid_lens).value();  // (B, T, D)

    t.step("1. The layer: H heads, each with its own projections", [&] {
        note("Seed 000 and seed 003: instead of one attention over D-dimensional queries, keys and values, "
             "project them H times into smaller spaces (d = D/H each), attend in each, concatenate the H "
             "results and project once more:\n"
             "    head_i = attention(W_i^(q) q, W_i^(k) k, W_i^(v) v)       (d)\n"
             "    output = W_o [head_1; ...; head_H]                        (D)\n"
             "Each head can learn to look for something different (seed 001: 'representation subspaces'). "
             "The layer stores the H matrices W_i^(q) stacked as the rows of one Linear weight, so all heads "
             "are projected by one matrix product. Here queries have size 5, keys 6, values 7, D = 8, H = 2:");
        for (const auto& [name, p] : mha.named_parameters()) note("    {:<14} {}", name, c::shape_str(p.shape()));
        t.check(mha.W_q->weight.shape() == c::Shape{D, 5} && mha.W_o->weight.shape() == c::Shape{D, D},
                "W_q.weight is (D, query_size) = (8, 5): two (4, 5) blocks W_1^(q), W_2^(q) stacked");
        t.check(mha.num_parameters() == D * 5 + D * 6 + D * 7 + D * D,
                "no biases, as d2l's default: 8·5 + 8·6 + 8·7 + 8·8 = 208 parameters");
    });

    t.step("2. transpose_qkv: (B, T, D) -> (B·H, T, d), shape by shape", [&] {
        note("Seed 000's trick to run all heads at once: move the head dimension into the batch. For the "
             "projected queries P = W_q(queries):");
        const Variable P = (*mha.W_q)(Variable(queries));                   // (B, T, D)
        const Variable split = ag::reshape(P, {B, T, H, d});                // (B, T, H, d)
        const Variable moved = ag::permute(split, {0, 2, 1, 3});            // (B, H, T, d)
        const Variable heads = ag::reshape(moved, {B * H, T, d});           // (B·H, T, d)
        describe("P = W_q(queries)           ", P.value());
        describe("reshape (B, T, H, d)       ", split.value());
        describe("permute(0, 2, 1, 3)        ", moved.value());
        describe("reshape (B·H, T, d)        ", heads.value());
        show("P[0]", P.value().select(0, 0));
        show("heads[0] (batch 0, head 1)", heads.value().select(0, 0));
        show("heads[1] (batch 0, head 2)", heads.value().select(0, 1));
        t.check_close(nn::transpose_qkv(P, H).value(), heads.value(), 0, "nn::transpose_qkv does exactly these three steps");
        bool layout = true;
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
                layout = layout && c::sub(heads.value().select(0, b * H + h),
                                          P.value().select(0, b).slice(1, h * d, (h + 1) * d))
                                           .to_vector() == std::vector<double>(T * d, 0.0);
        t.check(layout, "row b·H + h of the result is columns h·d .. (h+1)·d - 1 of P[b]: head h of sequence b");
        t.check(split.value().shares_storage(P.value()) && moved.value().shares_storage(P.value()) &&
                    !heads.value().shares_storage(P.value()),
                "the reshape and the permute are views; the last reshape copies (tutorial 01, step 7)");
        const Variable back = nn::transpose_output(heads, H);
        describe("transpose_output(heads)    ", back.value());
        t.check_close(back.value(), P.value(), 0, "transpose_output undoes it: (B·H, T, d) -> (B, T, D)");
    });

    t.step("3. The valid lengths, repeated for every head", [&] {
        note("The (B·H) rows are batch 0 head 1, batch 0 head 2, batch 1 head 1, ... so every valid length "
             "must appear H times in a row: seed 000's torch.repeat_interleave(valid_lens, num_heads, dim=0).");
        const c::Tensor repeated = valid_lens.unsqueeze(1).expand({B, H}).reshape({B * H});
        show("valid_lens", valid_lens);
        show("repeat_interleave(valid_lens, 2)", repeated);
        t.check(repeated.to_vector() == std::vector<double>{4, 4, 2, 2}, "[4, 2] becomes [4, 4, 2, 2]");

        note("\nThe whole layer, in d2l's order: project, transpose_qkv, one batched attention over B·H, "
             "transpose_output, W_o:");
        const Variable q = nn::transpose_qkv((*mha.W_q)(Variable(queries)), H);  // (B·H, T, d)
        const Variable k = nn::transpose_qkv((*mha.W_k)(Variable(keys)), H);     // (B·H, S, d)
        const Variable v = nn::transpose_qkv((*mha.W_v)(Variable(values)), H);   // (B·H, S, d)
        const Variable o = (*mha.attention)(q, k, v, repeated);                   // (B·H, T, d)
        const Variable concat = nn::transpose_output(o, H);                       // (B, T, D)
        const Variable out = (*mha.W_o)(concat);                                  // (B, T, D)
        note("    q {}  k {}  v {}\n    ->  attention {}  ->  transpose_output {}  ->  W_o {}",
             c::shape_str(q.shape()), c::shape_str(k.shape()), c::shape_str(v.shape()), c::shape_str(o.shape()),
             c::shape_str(concat.shape()), c::shape_str(out.shape()));
        show("output[1]", out.value().select(0, 1));
        t.check_close(out.value(), reference, 1e-14, "equal to mha(queries, keys, values, valid_lens)");
        t.check(mha.attention_weights().shape() == c::Shape{B * H, T, S},
                "the weights kept for heatmaps are (B·H, T, S) = (4, 3, 4)");
    });

    t.step("4. Seeds 002 and 004: split into (B, H, T, d), concat back", [&] {
        note("Seed 002's MultiHeadAttention keeps the heads as their own dimension instead of folding them "
             "into the batch:\n"
             "    split:  tensor.view(B, T, H, d).transpose(1, 2)                 (B, H, T, d)\n"
             "    attention on 4-D tensors, the mask broadcast over the heads\n"
             "    concat: out.transpose(1, 2).contiguous().view(B, T, D)          (B, T, D)\n"
             "Seed 004 does the same, with mask.unsqueeze(1) to add the head dimension. The masks are "
             "boolean there; the valid lengths [4, 2] as a keep mask of shape (B, 1, 1, S):");
        auto split = [&](const Variable& x) { return ag::transpose(ag::reshape(x, {B, -1, H, d}), 1, 2); };
        const Variable q = split((*mha.W_q)(Variable(queries)));  // (B, H, T, d)
        const Variable k = split((*mha.W_k)(Variable(keys)));     // (B, H, S, d)
        const Variable v = split((*mha.W_v)(Variable(values)));   // (B, H, S, d)
        const c::Tensor keep = c::lt(c::arange(S, DType::int64).view({1, 1, 1, S}), valid_lens.view({B, 1, 1, 1}));
        show("keep[1]", keep.select(0, 1).select(0, 0));
        nn::DotProductAttention attention({.dropout = 0.0});
        const Variable o = attention(q, k, v, keep);                                               // (B, H, T, d)
        const Variable out = (*mha.W_o)(ag::reshape(ag::contiguous(ag::transpose(o, 1, 2)), {B, T, D}));  // (B, T, D)
        note("    q {}  ->  attention {}  ->  concat {}", c::shape_str(q.shape()), c::shape_str(o.shape()),
             c::shape_str(out.shape()));
        t.check_close(out.value(), reference, 1e-14, "the 4-D split/concat gives the same output as transpose_qkv");
        t.check_close(attention.attention_weights.reshape({B * H, T, S}), mha.attention_weights(), 1e-15,
                      "and the same weights: (B, H, T, S) is (B·H, T, S) with one more dimension");
    });

    std::vector<c::Tensor> loop_weights;
    t.step("5. The same thing, one head at a time", [&] {
        note("Without any reshaping: for each sequence and each head, take that head's d rows of W_q, W_k and "
             "W_v, run an ordinary attention, put the H results side by side and apply W_o. This is the "
             "formula of seed 000 and seed 003 read literally.");
        Macs macs;
        const c::Tensor out = heads_one_by_one(mha, queries, keys, values, valid_lens, macs, &loop_weights);
        show("head 1 of sequence 0: weights", loop_weights[0]);
        show("head 2 of sequence 0: weights", loop_weights[1]);
        show("head 1 of sequence 1: weights", loop_weights[2]);
        t.check_close(out, reference, 1e-14, "the loop over heads equals the batched layer");
        bool same_weights = true;
        for (int64_t i = 0; i < B * H; ++i)
            same_weights = same_weights &&
                           c::max(c::abs(c::sub(loop_weights[i], mha.attention_weights().select(0, i)))).item() < 1e-15;
        t.check(same_weights, "head h of sequence b has the weights of row b·H + h of the batched layer");
        t.check(loop_weights[2].slice(1, 2, S).to_vector() == std::vector<double>(T * 2, 0.0),
                "sequence 1 has 2 valid keys: keys 2 and 3 get exactly 0 in every head");
    });

    t.step("6. The cost: O(n²d) for one head or for h heads", [&] {
        note("Seed 004 closes with: one head costs O(n²d); h heads cost O(n²·d/h · h) = O(n²d), the same. "
             "Counting the multiply-adds of the loop above for n = 10 queries and keys, D = 32, one sequence:\n"
             "- projections: 3 inputs × n × D × D, whatever H is (each head uses D/H of the rows);\n"
             "- scores q kᵀ: H heads × n × n × D/H = n²D;\n"
             "- weighted sum of values: the same, n²D;\n"
             "- W_o: n × D × D.");
        constexpr int64_t n = 10, Dm = 32;
        const c::Tensor x = c::randn({1, n, Dm}, gen, DType::float64);
        const c::Tensor lens = c::from_vector(std::vector<int64_t>{n}, {1});
        fmt::print("\n      H    d = D/H    projections    q kᵀ    weights·v    W_o    attention (n²·2D)    exps\n");
        bool constant = true, formula = true, equal = true;
        int64_t first = -1;
        for (int64_t heads : {1, 2, 4, 8}) {
            nn::MultiHeadAttention m({.key_size = Dm, .query_size = Dm, .value_size = Dm, .num_hiddens = Dm,
                                      .num_heads = heads},
                                     gen);
            m.to(DType::float64);
            Macs macs;
            const c::Tensor out = heads_one_by_one(m, x, x, x, lens, macs);
            equal = equal && c::max(c::abs(c::sub(out, m(Variable(x), Variable(x), Variable(x), lens).value()))).item() < 1e-12;
            fmt::print("    {:>3} {:>8} {:>14} {:>8} {:>12} {:>6} {:>20} {:>7}\n", heads, Dm / heads, macs.projections,
                       macs.scores, macs.weighted, macs.output, macs.attention(), macs.exps);
            if (first < 0) first = macs.total();
            constant = constant && macs.total() == first;
            formula = formula && macs.attention() == 2 * n * n * Dm && macs.projections == 3 * n * Dm * Dm &&
                      macs.output == n * Dm * Dm;
        }
        fmt::print("\n");
        t.check(formula, "attention costs exactly 2·n²·D = 6400 multiply-adds for every H; projections 3nD², W_o nD²");
        t.check(constant, fmt::format("the total, {} multiply-adds, does not depend on the number of heads", first));
        t.check(equal, "and for every H the counted loop gives the layer's output");
        note("Two remarks on the documents:\n"
             "- Seed 000 says folding the heads into the batch 'saves a for loop': it saves the loop's overhead "
             "(one batched matrix product instead of H small ones), not arithmetic — the multiply-adds are the "
             "same, as counted above.\n"
             "- Seed 004 says multi-head attention additionally 'passes the concatenated heads through a "
             "non-linear layer'. W_o is linear (no activation), and the one-head layer of seed 004's code has "
             "it too. What does grow with H is the softmax: H·n² exponentials instead of n², as the last "
             "column shows — small next to the multiply-adds while d = D/H is large.");
    });

    t.step("7. Heatmap: every head of every sequence", [&] {
        tasks::Heatmaps maps{.matrices = tasks::heatmap_grid(mha.attention_weights().view({B, H, T, S})),
                             .xlabel = "keys",
                             .ylabel = "queries",
                             .titles = {"head 1", "head 2"},
                             .title = "rows: sequence 0 (4 valid keys), sequence 1 (2 valid keys)",
                             .vmin = 0.0,
                             .vmax = 1.0};
        const auto png = t.out_path("multihead_weights.png");
        tasks::plot_heatmaps(png, maps);
        note("Wrote {}: the heads of one sequence attend differently to the same keys.", png.string());
        t.check(std::filesystem::file_size(png) > 0, "the heatmap was written");
    });

    return t.finish();
}
