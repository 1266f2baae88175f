// Tutorial 11 · The decoder: masks, the decoder block, and step-by-step
// prediction with a key/value cache.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 有掩码的多头注意力,
// 预测 and 代码实现 › 解码器块, 解码器 (DecoderBlock with state[2][i],
// dec_valid_lens, init_state); seed 002 (002_36798a9f04a86cc8.txt), 四 Decoder
// and 5.1 (make_pad_mask, make_no_peak_mask); seed 004
// (004_a3b87e182ede5d90.txt), subsequent_mask, Batch.make_std_mask and
// inference_test (greedy decoding that re-runs the whole prefix every step).
// Steps 2b, 4b and 4c compare the masks, seed 000's DecoderBlock and seed
// 002's complete Transformer (5.1) with PyTorch (tests/fixtures/). Step 4
// runs seed 002's sentence on the cross-attention's query (四 Decoder 结构:
// "Q 使用上一个 Decoder block 的输出") as written beside the code's query.
// Read it with tutorials/11_decoder_masks_prediction/README.md.
// tutorial-languages: en zh
// tutorial-fault: cross-query-from-block-input | the block's output differs from the document's wording
#include "common/compare.hpp"
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/transformer.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using tutorial::max_abs;
using tutorial::max_abs_diff;

// Seed 002's make_pad_mask(q, k, q_pad_idx, k_pad_idx), with the same steps:
//   k.ne(k_pad).unsqueeze(1).unsqueeze(2)  (B, 1, 1, Sk), repeated over the Tq queries
//   q.ne(q_pad).unsqueeze(1).unsqueeze(3)  (B, 1, Tq, 1), repeated over the Sk keys
//   mask = k & q                           (B, 1, Tq, Sk)
c::Tensor make_pad_mask(const c::Tensor& q, const c::Tensor& k, double q_pad, double k_pad) {
    const int64_t B = q.size(0), Tq = q.size(1), Sk = k.size(1);
    const c::Tensor keys = c::ne(k, k_pad).unsqueeze(1).unsqueeze(2).expand({B, 1, Tq, Sk});
    const c::Tensor queries = c::ne(q, q_pad).unsqueeze(1).unsqueeze(3).expand({B, 1, Tq, Sk});
    return c::logical_and(keys, queries);
}

// Seed 002's make_no_peak_mask: tril(ones(len_q, len_k)) as bool, written as j <= i.
c::Tensor make_no_peak_mask(int64_t len_q, int64_t len_k) {
    return c::le(c::arange(len_k, DType::int64).unsqueeze(0), c::arange(len_q, DType::int64).unsqueeze(1));
}

// A bool mask printed as 0/1 integers, which reads better than True/False.
void show_mask(std::string_view name, const c::Tensor& mask) { show(name, mask.to(DType::int64)); }

// Seed 002 5.1's Transformer.forward written with autograd ops, the weights held
// by their PyTorch names (tests/fixtures/seed002_transformer.safetensors), so
// that every one of them gets a gradient to compare: TransformerEmbedding
// (padding_idx 1, no √d scaling), EncoderLayer and DecoderLayer with seed
// 002's MultiHeadAttention (biases, split/concat), its LayerNorm (unbiased
// variance, eps 1e-12) and PositionwiseFeedForward (dropout 0 here).
class Seed002Transformer {
public:
    Seed002Transformer(const nn::StateDict& state, int64_t n_layers, int64_t n_head)
        : n_layers_(n_layers), n_head_(n_head) {
        for (const auto& [name, value] : state) params.emplace(name, Variable(value, true));
    }

    Variable forward(const c::Tensor& src, const c::Tensor& trg) const {
        const int64_t T = trg.size(1);
        const c::Tensor src_mask = make_pad_mask(src, src, 1, 1);      // (B, 1, S, S)
        const c::Tensor src_trg_mask = make_pad_mask(trg, src, 1, 1);  // (B, 1, T, S)
        const c::Tensor trg_mask =
            c::logical_and(make_pad_mask(trg, trg, 1, 1), make_no_peak_mask(T, T));  // (B, 1, T, T)
        Variable x = embed("encoder", src);
        for (int64_t i = 0; i < n_layers_; ++i) {
            const std::string l = fmt::format("encoder.layers.{}.", i);
            x = norm(x + attention(x, x, src_mask, l + "mha"), l + "ln1");
            x = norm(x + ffn(x, l + "ffn"), l + "ln2");
        }
        Variable y = embed("decoder", trg);
        for (int64_t i = 0; i < n_layers_; ++i) {
            const std::string l = fmt::format("decoder.layers.{}.", i);
            y = norm(y + attention(y, y, trg_mask, l + "mha1"), l + "ln1");
            y = norm(y + attention(y, x, src_trg_mask, l + "mha2"), l + "ln2");
            y = norm(y + ffn(y, l + "ffn"), l + "ln3");
        }
        return linear(y, "decoder.linear");  // (B, T, V)
    }

    std::map<std::string, Variable> params;

private:
    const Variable& p(const std::string& name) const { return params.at(name); }
    Variable linear(const Variable& x, const std::string& name) const {
        return ag::linear(x, p(name + ".weight"), p(name + ".bias"));
    }
    Variable embed(const std::string& side, const c::Tensor& ids) const {
        const Variable tok = ag::embedding(p(side + ".emb.tok_emb.weight"), ids, /*padding_idx=*/1);  // (B, T, D)
        const int64_t D = tok.shape()[2];
        nn::PositionalEncoding pe({.num_hiddens = D, .max_len = 10});
        return tok + Variable(pe.P.slice(1, 0, ids.size(1)));  // seed 002 adds the table, no √d
    }
    Variable split(const Variable& x) const {  // (B, T, D) -> (B, H, T, d)
        const auto s = x.shape();
        return ag::transpose(ag::reshape(x, {s[0], s[1], n_head_, s[2] / n_head_}), 1, 2);
    }
    Variable attention(const Variable& q_in, const Variable& kv_in, const c::Tensor& mask,
                       const std::string& name) const {
        const Variable q = split(linear(q_in, name + ".w_q")), k = split(linear(kv_in, name + ".w_k")),
                       v = split(linear(kv_in, name + ".w_v"));
        const double scale = std::sqrt(static_cast<double>(q.shape()[3]));
        const Variable w = ag::masked_softmax_by_mask(ag::matmul(q, ag::transpose(k, 2, 3)) / scale, mask);
        const Variable o = ag::transpose(ag::matmul(w, v), 1, 2);  // (B, T, H, d)
        const auto s = o.shape();
        return linear(ag::reshape(ag::contiguous(o), {s[0], s[1], s[2] * s[3]}), name + ".fc");
    }
    Variable norm(const Variable& x, const std::string& name) const {  // seed 002's LayerNorm
        const Variable mean = ag::mean(x, {-1}, true), var = ag::var(x, {-1}, /*unbiased=*/true, true);
        return p(name + ".gamma") * ((x - mean) / ag::sqrt(var + 1e-12)) + p(name + ".beta");
    }
    Variable ffn(const Variable& x, const std::string& name) const {
        return linear(ag::relu(linear(x, name + ".fc1")), name + ".fc2");
    }

    int64_t n_layers_, n_head_;
};

// What the steps share: one generator, drawn from in step order, and what step 5 decodes for step 6's heatmaps.
struct Lesson {
    c::Generator gen{11};
    std::vector<std::vector<c::Tensor>> final_weights;  // [self, cross][block] (B·H, 9, 9) and (B·H, 9, 10)
    std::vector<int64_t> generated;                     // 0, then the 9 tokens greedy decoding picked
};

// ---- the steps --------------------------------------------------------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 有掩码的多头注意力; seed 004 › 完整代码 (subsequent_mask)
void no_peek_mask(Tutorial& t) {
    note(
        {.en = "Seed 000 (有掩码的多头注意力): when the decoder computes the output for position i it must not "
               "look at positions after i — at prediction time they do not exist yet. During training the "
               "whole target sequence is fed at once, so the attention weights to later positions are masked: "
               "'pretend the sequence has length i'. Seed 004 writes the mask as subsequent_mask(size) = "
               "(triu(ones(1, size, size), diagonal=1) == 0); seed 002 as tril(ones(len_q, len_k)); d2l as "
               "valid lengths [1, 2, ..., T] for every row:",
         .zh =
             "种子文档 000（有掩码的多头注意力）：解码器计算位置 i 的输出时，不能看 i 之后的位置——预测时它们还不存在。"
             "训练时整个目标序列是一次性输入的，所以要把指向后面位置的注意力权重遮掉：“假装序列长度为 i”。种子文档 004 "
             "把掩码写成 subsequent_mask(size) = (triu(ones(1, size, size), diagonal=1) == 0)；种子文档 002 写成 "
             "tril(ones(len_q, len_k))；d2l 则写成每一行的有效长度 [1, 2, ..., T]："});
    const c::Tensor mask = nn::subsequent_mask(5);  // (1, 5, 5), true = may attend
    show_mask("subsequent_mask(5)", mask);
    const c::Tensor lens = nn::causal_valid_lens(2, 5);
    show("causal_valid_lens(2, 5)", lens);
    bool lower = true, same_as_lens = true;
    for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 5; ++j) {
            lower = lower && (mask.at({0, i, j}) != 0) == (j <= i);
            same_as_lens = same_as_lens && (mask.at({0, i, j}) != 0) == (j < lens.at({1, i}));
        }
    t.check(lower, {.en = "row i allows keys 0..i: the lower triangle with the diagonal (seed 004's triu(.., 1) == 0)",
                    .zh = "第 i 行允许键 0..i：含对角线的下三角（种子文档 004 的 triu(.., 1) == 0）"});
    t.check(
        make_no_peak_mask(5, 5).to_vector() == mask.select(0, 0).to_vector(),
        {.en = "seed 002's tril(ones(5, 5)) is the same mask", .zh = "种子文档 002 的 tril(ones(5, 5)) 是同一个掩码"});
    t.check(same_as_lens, {.en = "and so are d2l's valid lengths: row i keeps its first i + 1 keys",
                           .zh = "d2l 的有效长度也是：第 i 行保留它的前 i + 1 个键"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 Transformer 完整代码实现 (make_pad_mask); seed 004 › 完整代码 (Batch)
void padding_masks(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 002 builds its masks from the token ids, with padding id 1:\n"
                "    src_mask = make_pad_mask(src, src)                        (B, 1, S, S)\n"
                "    trg_mask = make_pad_mask(trg, trg) * make_no_peak_mask(trg, trg)\n"
                "make_pad_mask keeps (query, key) when NEITHER is padding.",
          .zh = "种子文档 002 用词元 id 构造掩码，填充 id 为 1：\n"
                "    src_mask = make_pad_mask(src, src)                        (B, 1, S, S)\n"
                "    trg_mask = make_pad_mask(trg, trg) * make_no_peak_mask(trg, trg)\n"
                "make_pad_mask 在（查询，键）“都不是”填充时才保留这一对。"});
    const c::Tensor src = c::from_vector(std::vector<int64_t>{5, 7, 3, 1, 1, 4, 2, 8, 6, 1}, {2, 5});
    const c::Tensor trg = c::from_vector(std::vector<int64_t>{2, 9, 4, 1, 2, 6, 1, 1}, {2, 4});
    show("src", src);
    show("trg", trg);
    const c::Tensor src_mask = make_pad_mask(src, src, 1, 1);
    const c::Tensor trg_mask = c::logical_and(make_pad_mask(trg, trg, 1, 1), make_no_peak_mask(4, 4));
    show_mask("src_mask[0, 0]", src_mask.select(0, 0).select(0, 0));
    show_mask("trg_mask[1, 0]", trg_mask.select(0, 1).select(0, 0));
    t.check(src_mask.shape() == c::Shape{2, 1, 5, 5} && trg_mask.shape() == c::Shape{2, 1, 4, 4},
            {.en = "src_mask (B, 1, S, S) and trg_mask (B, 1, T, T): the 1 broadcasts over the heads",
             .zh = "src_mask (B, 1, S, S) 和 trg_mask (B, 1, T, T)：那个 1 在各个头上广播"});
    t.check(c::sum(src_mask.select(0, 0).select(0, 0).to(DType::float32)).item() == 9,
            {.en = "sequence 0 of src has 3 real tokens: 3 × 3 = 9 allowed (query, key) pairs",
             .zh = "src 的序列 0 有 3 个真实词元：允许 3 × 3 = 9 个（查询，键）对"});

    note({.en = "\nThe query half of the mask blanks whole ROWS: a padded query may attend to nothing. Seed "
                "002 fills masked scores with -1e9, which spreads such a row uniformly over all keys; tformer "
                "gives it all-zero weights (tutorial 05, step 3):",
          .zh = "\n掩码中查询的那一半会遮掉整“行”：被填充的查询什么也不能关注。种子文档 002 把被遮住的分数填成 -1e9，"
                "这会让这样一行均匀地分到所有键上；tformer 则给它全零的权重（教程 05 第 3 步）："});
    const c::Tensor scores = c::randn({2, 1, 4, 4}, lesson.gen);
    const c::Tensor w = nn::masked_softmax(Variable(scores), trg_mask).value();
    show({.en = "weights[1, 0] with trg_mask", .zh = "用 trg_mask 的 weights[1, 0]"}, w.select(0, 1).select(0, 0));
    t.check(c::sum(w.select(0, 1).select(0, 0).slice(0, 2, 4)).item() == 0,
            {.en = "trg sequence 1 has 2 real tokens: rows 2 and 3 (padded queries) are all zero",
             .zh = "trg 的序列 1 有 2 个真实词元：第 2、3 行（被填充的查询）全为零"});
    t.check_close(c::sum(w.select(0, 1).select(0, 0).slice(0, 0, 2), {1}), c::ones({2}), 1e-6,
                  {.en = "rows 0 and 1 are distributions over the keys they may see",
                   .zh = "第 0、1 行是它们能看到的那些键上的分布"});

    note({.en = "\nSeed 004's Batch.make_std_mask (padding id 0) masks keys only:\n"
                "    tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(T)      (B, T, T)",
          .zh = "\n种子文档 004 的 Batch.make_std_mask（填充 id 为 0）只遮键：\n"
                "    tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(T)      (B, T, T)"});
    const c::Tensor tgt = c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 0}, {1, 5});
    const c::Tensor std_mask = c::logical_and(c::ne(tgt, 0.0).unsqueeze(-2), nn::subsequent_mask(5));
    show_mask("make_std_mask([[1, 3, 5, 0, 0]], 0)[0]", std_mask.select(0, 0));
    t.check(std_mask.shape() == c::Shape{1, 5, 5} && std_mask.at({0, 4, 2}) != 0 && std_mask.at({0, 4, 3}) == 0,
            {.en = "row 4 (a padded query) still sees the 3 real tokens: only padded KEYS are hidden",
             .zh = "第 4 行（被填充的查询）仍然看得到 3 个真实词元：只有被填充的“键”被遮住"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 and seed 004 › 完整代码: the masks their own functions build, run by torch
void masks_against_pytorch(Tutorial& t) {
    note(
        {.en = "tests/fixtures/attention_masks.safetensors holds the masks torch builds with the documents' own "
               "functions (copied into make_fixtures.py as written) for src [[5, 7, 3, 9, 1, 1], [4, 2, 8, 6, 11, "
               "12]] and trg [[2, 9, 4, 1, 1], [2, 6, 10, 14, 3]] (pad id 1), and seed 004's for tgt [[1, 3, 5, 0, "
               "0], [1, 4, 4, 2, 9]] (pad id 0). This tutorial's masks, element by element:",
         .zh =
             "tests/fixtures/attention_masks.safetensors 存放着 torch 用文档自己的函数（照原样抄进了 make_fixtures.py）"
             "构造的掩码：src 为 [[5, 7, 3, 9, 1, 1], [4, 2, 8, 6, 11, 12]]、trg 为 [[2, 9, 4, 1, 1], [2, 6, 10, 14, "
             "3]]（填充 id 为 1），以及种子文档 004 对 tgt [[1, 3, 5, 0, 0], [1, 4, 4, 2, 9]]（填充 id 为 0）构造的"
             "掩码。本教程的掩码，逐个元素比较："});
    const tutorial::Reference ref("attention_masks");
    const c::Tensor src = ref["ids.src"], trg = ref["ids.trg"];
    auto as_ints = [](const c::Tensor& mask) { return mask.to(DType::int64); };
    t.check_close(as_ints(make_pad_mask(src, src, 1, 1)), ref["mask.src_mask"], 0,
                  both("src_mask = make_pad_mask(src, src) (2, 1, 6, 6)"));
    t.check_close(as_ints(make_pad_mask(trg, src, 1, 1)), ref["mask.src_trg_mask"], 0,
                  both("src_trg_mask = make_pad_mask(trg, src) (2, 1, 5, 6)"));
    t.check_close(as_ints(c::logical_and(make_pad_mask(trg, trg, 1, 1), make_no_peak_mask(5, 5))), ref["mask.trg_mask"],
                  0, both("trg_mask = make_pad_mask(trg, trg) * make_no_peak_mask(trg, trg) (2, 1, 5, 5)"));
    t.check_close(as_ints(nn::subsequent_mask(5)), ref["mask.subsequent_mask_5"], 0,
                  {.en = "nn::subsequent_mask(5) = seed 004's", .zh = "nn::subsequent_mask(5) = 种子文档 004 的"});
    const c::Tensor tgt = ref["ids.tgt004"];
    t.check_close(as_ints(c::logical_and(c::ne(tgt, 0.0).unsqueeze(-2), nn::subsequent_mask(5))), ref["mask.std_mask"],
                  0, both("Batch.make_std_mask(tgt, 0) (2, 5, 5)"));
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块 (dec_valid_lens) against seed 004's subsequent_mask
void valid_lengths_and_bool_masks(Tutorial& t, Lesson& lesson) {
    note({.en = "nn::MultiHeadAttention accepts either form. With the same weights and inputs:",
          .zh = "nn::MultiHeadAttention 两种形式都接受。用同样的权重和输入："});
    nn::MultiHeadAttention mha({.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2},
                               lesson.gen);
    mha.to(DType::float64);
    const Variable X(c::randn({2, 5, 8}, lesson.gen, DType::float64));
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{5, 3}, {2});
    const c::Tensor key_pad = c::lt(c::arange(5, DType::int64).view({1, 1, 5}), lens.view({2, 1, 1}));  // (B, 1, S)

    const double pad_diff = max_abs_diff(mha(X, X, X, lens).value(), mha(X, X, X, key_pad).value());
    const double causal_diff =
        max_abs_diff(mha(X, X, X, nn::causal_valid_lens(2, 5)).value(), mha(X, X, X, nn::subsequent_mask(5)).value());
    // both at once: row t of sequence b keeps min(t + 1, lens[b]) keys
    const c::Tensor both_lens = c::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 1, 2, 3, 3, 3}, {2, 5});
    const double both_diff = max_abs_diff(mha(X, X, X, both_lens).value(),
                                          mha(X, X, X, c::logical_and(key_pad, nn::subsequent_mask(5))).value());
    note({.en = "    largest |difference| of the outputs:\n"
                "      valid_lens [5, 3]                      vs  bool key mask (B, 1, S)         {:.1e}\n"
                "      causal_valid_lens(2, 5)                vs  subsequent_mask(5)              {:.1e}\n"
                "      lens [[1..5], [1, 2, 3, 3, 3]] (B, T)  vs  key mask & subsequent_mask      {:.1e}",
          .zh = "    输出之间最大的 |差|：\n"
                "      valid_lens [5, 3]                      对  bool 键掩码 (B, 1, S)           {:.1e}\n"
                "      causal_valid_lens(2, 5)                对  subsequent_mask(5)              {:.1e}\n"
                "      lens [[1..5], [1, 2, 3, 3, 3]] (B, T)  对  键掩码 & subsequent_mask        {:.1e}"},
         pad_diff, causal_diff, both_diff);
    t.check(pad_diff < 1e-15, {.en = "padding: valid lengths == bool key mask", .zh = "填充：有效长度 == bool 键掩码"});
    t.check(causal_diff < 1e-15, {.en = "no-peek: d2l's dec_valid_lens == seed 004's subsequent_mask",
                                  .zh = "防偷看：d2l 的 dec_valid_lens == 种子文档 004 的 subsequent_mask"});
    t.check(both_diff < 1e-15,
            {.en = "padding and no-peek together: per-row lengths min(t + 1, len) == seed 004's tgt_mask",
             .zh = "填充与防偷看同时使用：每行的长度 min(t + 1, len) == 种子文档 004 的 tgt_mask"});
}

// Where the decoder block's cross-attention takes its queries from.
enum class CrossQuery {
    sublayer_output,  // Y = AddNorm(X, masked self-attention): seed 000's and seed 002's code, the paper's Figure 1
    block_input,      // X, the previous decoder block's output: seed 002's sentence in 四 Decoder 结构
};

// What decoder_block_by_hand computes: the cross-attention's output and the block's.
struct DecoderBlockOutputs {
    c::Tensor cross;  // (B, T, D): Y2 = attention2(query, enc_outputs, enc_outputs)
    c::Tensor out;    // (B, T, D): AddNorm(Z, FFN(Z))
};

// nn::DecoderBlock's forward written out sub-layer by sub-layer, with the
// cross-attention's query chosen. X (B, T, D).
DecoderBlockOutputs decoder_block_by_hand(nn::DecoderBlock& blk, const Variable& X, const nn::DecoderState& state,
                                          CrossQuery query) {
    const Variable X2 = blk.attention1->forward(X, X, X, nn::causal_valid_lens(X.size(0), X.size(1)));
    const Variable Y = (*blk.addnorm1)(X, X2);
    const Variable& q = query == CrossQuery::sublayer_output ? Y : X;
    const Variable Y2 = blk.attention2->forward(q, state.enc_outputs, state.enc_outputs, state.enc_valid_lens);
    const Variable Z = (*blk.addnorm2)(Y, Y2);
    return {Y2.value(), (*blk.addnorm3)(Z, (*blk.ffn)(Z)).value()};
}

// seed 002 (002_36798a9f04a86cc8.txt) › 四 Decoder 结构: "Q 使用上一个 Decoder block 的输出", run as written
// beside the code's query. block_out is what blk.forward(X, state) gave.
void seed002_cross_query_as_written(Tutorial& t, nn::DecoderBlock& blk, const Variable& X,
                                    const nn::DecoderState& state, const c::Tensor& block_out) {
    note({.en = "\nSeed 002 (四 Decoder 结构) describes the second attention otherwise: 'its K, V come from the "
                "encoder's matrix C, and Q from the output of the previous decoder block' (Q 使用上一个 Decoder block "
                "的输出). That is a document error. The previous decoder block's output is this block's input X, "
                "before the masked self-attention; but seed 002's own DecoderLayer.forward passes "
                "mha2(q=x, ...) with x = ln1(dec_out + mha1(...)), the output of the block's own masked "
                "self-attention sub-layer, and so do seed 000's DecoderBlock (Y above) and the paper, whose Figure "
                "1 draws the query from the masked attention's Add & Norm (its 'queries come from the previous "
                "decoder layer' means that sub-layer). Both versions, sub-layer by sub-layer, on the same block "
                "and input:",
          .zh =
              "\n种子文档 002（四 Decoder 结构）对第二个注意力的描述不同：“K, V 矩阵使用 Encoder 的编码信息矩阵 C "
              "进行计算，而 Q 使用上一个 Decoder block 的输出计算”。这是文档的错误。上一个 Decoder block "
              "的输出就是本块的"
              "输入 X，还没有经过带掩码的自注意力；而种子文档 002 自己的 DecoderLayer.forward 调用的是 mha2(q=x, ...)，"
              "其中 x = ln1(dec_out + mha1(...))，即本块自己的带掩码自注意力子层的输出；种子文档 000 的 DecoderBlock"
              "（上面的 Y）和原论文也都是这样：论文图 1 中查询的箭头出自带掩码注意力之后的 Add & Norm（论文里“queries "
              "come from the previous decoder layer”指的就是这个子层）。下面在同一个块、同一个输入上逐个子层地算出两种"
              "版本："});
    const DecoderBlockOutputs code = decoder_block_by_hand(blk, X, state, CrossQuery::sublayer_output);
    const DecoderBlockOutputs as_written = decoder_block_by_hand(blk, X, state, CrossQuery::block_input);
    const double same = max_abs_diff(block_out, code.out), apart = max_abs_diff(block_out, as_written.out);
    const double cross_apart = max_abs_diff(code.cross, as_written.cross), cross_size = max_abs(code.cross);
    note({.en = "    query Y = AddNorm(X, masked self-attention) (the code):   max |difference| from the block {:.1e}\n"
                "    query X = the previous block's output (the sentence):     max |difference| from the block {:.3f}\n"
                "    the cross-attention's output Y2 itself: the two differ by up to {:.3f}, its entries reach {:.3f}",
          .zh = "    查询 Y = AddNorm(X, 带掩码的自注意力)（代码）：        与这个块的输出最大 |差| {:.1e}\n"
                "    查询 X = 上一个解码器块的输出（那句话）：              与这个块的输出最大 |差| {:.3f}\n"
                "    交叉注意力的输出 Y2 本身：两者最多相差 {:.3f}，它的元素最大为 {:.3f}"},
         same, apart, cross_apart, cross_size);
    t.check(same == 0, {.en = "the block's output is the code's version: the query is Y, the masked self-attention's "
                              "AddNorm",
                        .zh = "这个块的输出就是代码的版本：查询是 Y，即带掩码自注意力之后的 AddNorm"});
    t.check(apart > 1e-3,
            {.en = "the block's output differs from the document's wording by up to {:.3f}, far beyond float32 "
                   "rounding: the sentence describes another function",
             .zh = "这个块的输出与文档那句话的版本最多相差 {:.3f}，远超 float32 的舍入误差：那句话描述的是另一个函数"},
            apart);

    note({.en = "What the sentence would lose: the query of position t is what the decoder knows of the target so "
                "far. Through Y it carries positions 0..t (the masked self-attention); X[t] alone knows only token "
                "t. Changing target position 0 and measuring how much the cross-attention weights of positions "
                "1..99 move:",
          .zh =
              "按那句话做会丢掉什么：位置 t 的查询是解码器对目前为止的目标序列所知道的东西。经过 Y，它带着位置 0..t 的"
              "信息（带掩码的自注意力）；单独的 X[t] 只知道第 t 个词元。改变目标序列的位置 0，量一量位置 1..99 的"
              "交叉注意力权重变了多少："});
    c::Tensor changed = X.value().clone();
    c::copy_(changed.slice(1, 0, 1), c::add(X.value().slice(1, 0, 1), 1.0));
    std::vector<double> moved;
    for (const CrossQuery query : {CrossQuery::sublayer_output, CrossQuery::block_input}) {
        decoder_block_by_hand(blk, X, state, query);
        const c::Tensor before = blk.attention2->attention_weights().slice(1, 1, 100);  // (B·H, 99, S)
        decoder_block_by_hand(blk, Variable(changed), state, query);
        moved.push_back(max_abs_diff(blk.attention2->attention_weights().slice(1, 1, 100), before));
    }
    note({.en = "    query Y (the code):      the weights of positions 1..99 move by up to {:.2e}\n"
                "    query X (the sentence):  the weights of positions 1..99 move by up to {:.2e}",
          .zh = "    查询 Y（代码）：      位置 1..99 的权重最多变化 {:.2e}\n"
                "    查询 X（那句话）：    位置 1..99 的权重最多变化 {:.2e}"},
         moved[0], moved[1]);
    t.check(moved[0] > 0 && moved[1] == 0,
            {.en = "with the code's query the cross-attention of later positions depends on earlier target tokens; "
                   "with the sentence's it does not",
             .zh = "用代码的查询，后面位置的交叉注意力取决于前面的目标词元；用那句话的查询则不取决于它们"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块 (DecoderBlock); seed 002 › 四 Decoder 结构
void decoder_block(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000's decoder block has three sub-layers, each followed by AddNorm:\n"
                "    X2 = attention1(X, X, X, no-peek)                   masked self-attention\n"
                "    Y  = AddNorm(X, X2)\n"
                "    Y2 = attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)   cross-attention\n"
                "    Z  = AddNorm(Y, Y2);   out = AddNorm(Z, FFN(Z))\n"
                "The queries of the cross-attention are Y, the output of the block's own masked self-attention "
                "sub-layer; its keys and values are the encoder's output. d2l's example: X (2, 100, 24), 8 heads, "
                "encoder valid lengths [3, 2], eval mode.",
          .zh = "种子文档 000 的解码器块有三个子层，每个后面跟一个 AddNorm：\n"
                "    X2 = attention1(X, X, X, no-peek)                   带掩码的自注意力\n"
                "    Y  = AddNorm(X, X2)\n"
                "    Y2 = attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)   编码器-解码器注意力（交叉注意力）\n"
                "    Z  = AddNorm(Y, Y2);   out = AddNorm(Z, FFN(Z))\n"
                "交叉注意力的查询是 Y，即本块自己的带掩码自注意力子层的输出；它的键和值是编码器的输出。d2l 的例子："
                "X (2, 100, 24)，8 个头，编码器有效长度 [3, 2]，评估模式。"});
    const nn::TransformerOptions options =
        tutorial::block_options({.num_hiddens = 24, .ffn_num_hiddens = 48, .num_heads = 8, .dropout = 0.5});
    nn::EncoderBlock encoder_blk(options, lesson.gen);
    nn::DecoderBlock decoder_blk(options, 0, lesson.gen);
    encoder_blk.eval();
    decoder_blk.eval();
    const c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{3, 2}, {2});
    const Variable X(c::randn({2, 100, 24}, lesson.gen));
    nn::DecoderState state;
    state.enc_outputs = encoder_blk.forward(Variable(c::randn({2, 100, 24}, lesson.gen)), valid_lens);
    state.enc_valid_lens = valid_lens;
    state.caches.resize(1);
    c::Tensor out = decoder_blk.forward(X, state).value();
    const c::Tensor self_w = decoder_blk.attention1->attention_weights();
    const c::Tensor cross_w = decoder_blk.attention2->attention_weights();
    note({.en = "    output {}\n    self-attention weights {}   cross-attention weights {}",
          .zh = "    输出 {}\n    自注意力权重 {}   交叉注意力权重 {}"},
         c::shape_str(out.shape()), c::shape_str(self_w.shape()), c::shape_str(cross_w.shape()));
    t.check(out.shape() == c::Shape{2, 100, 24}, {.en = "decoder_blk(X, state) has X's shape (2, 100, 24)",
                                                  .zh = "decoder_blk(X, state) 的形状与 X 相同，为 (2, 100, 24)"});
    bool upper_zero = true;
    for (int64_t i = 0; i < 99; ++i)
        upper_zero = upper_zero && max_abs(self_w.slice(1, i, i + 1).slice(2, i + 1, 100)) == 0;
    t.check(upper_zero, {.en = "self-attention: every weight above the diagonal is exactly 0, in all 16 heads",
                         .zh = "自注意力：在全部 16 个头里，对角线以上的每个权重都恰好为 0"});
    t.check(
        max_abs(cross_w.slice(0, 0, 8).slice(2, 3, 100)) == 0 && max_abs(cross_w.slice(0, 8, 16).slice(2, 2, 100)) == 0,
        {.en = "cross-attention: source positions beyond the valid lengths [3, 2] get 0",
         .zh = "交叉注意力：超出有效长度 [3, 2] 的源序列位置权重为 0"});

    c::Tensor later = X.value().clone();
    c::copy_(later.slice(1, 50, 100), c::randn({2, 50, 24}, lesson.gen));
    const c::Tensor out2 = decoder_blk.forward(Variable(later), state).value();
    t.check(max_abs_diff(out2.slice(1, 0, 50), out.slice(1, 0, 50)) == 0 && max_abs_diff(out2, out) > 0,
            {.en = "replacing target positions 50..99 leaves the outputs at 0..49 exactly unchanged",
             .zh = "替换目标序列的位置 50..99，位置 0..49 的输出完全不变"});
    note({.en = "d2l's block passes dec_valid_lens only in training mode and None in eval mode, relying on "
                "prediction feeding one token at a time. nn::DecoderBlock::forward always applies the mask "
                "(teacher forcing in either mode); prediction uses forward_step, below.",
          .zh = "d2l 的块只在训练模式下传入 dec_valid_lens，评估模式下传 None，靠的是预测时一次只输入一个词元。"
                "nn::DecoderBlock::forward 总是使用掩码（两种模式下都是教师强制）；预测用的是下面的 forward_step。"});

    // --inject-fault cross-query-from-block-input: a block built after seed 002's sentence, the test that the
    // comparison below can fail
    if (t.injected("cross-query-from-block-input"))
        out = decoder_block_by_hand(decoder_blk, X, state, CrossQuery::block_input).out;
    seed002_cross_query_as_written(t, decoder_blk, X, state, out);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块, run by torch (tests/fixtures/decoder_block.safetensors)
void decoder_block_against_pytorch(Tutorial& t) {
    note({.en = "tests/fixtures/decoder_block.safetensors: seed 000's DecoderBlock (D = 8, 2 heads, FFN 16, i = 0) "
                "run by torch in training mode, so with d2l's dec_valid_lens [1..5] per row, state [enc_outputs, "
                "[6, 3], [None]], and the gradients of sum(output · u) for X, the encoder outputs and all 18 "
                "parameters:",
          .zh =
              "tests/fixtures/decoder_block.safetensors：torch 在训练模式下运行种子文档 000 的 DecoderBlock（D = 8，2 "
              "个头，前馈网络 16，i = 0）的结果，因此每一行用的是 d2l 的 dec_valid_lens [1..5]，state 为 [enc_outputs, "
              "[6, 3], [None]]，还有 sum(output · u) 对 X、编码器输出和全部 18 个参数的梯度："});
    const tutorial::Reference ref("decoder_block");
    const nn::TransformerOptions o = tutorial::block_options({.num_hiddens = 8, .ffn_num_hiddens = 16, .num_heads = 2});
    c::Generator g(1104);  // not `lesson.gen`: step 5's model keeps its numbers
    nn::DecoderBlock blk(o, 0, g);
    blk.load_state_dict(ref.params(""));
    const Variable X(ref["input.X"], true), enc(ref["input.enc_outputs"], true);
    nn::DecoderState state;
    state.enc_outputs = enc;
    state.enc_valid_lens = ref["input.enc_valid_lens"];
    state.caches.resize(1);
    const Variable out = blk.forward(X, state);
    ag::sum(out * Variable(ref["input.upstream"])).backward();
    t.check_allclose(out.value(), ref["output"], 1e-5,
                     {.en = "output (2, 5, 8) matches PyTorch's", .zh = "输出 (2, 5, 8) 与 PyTorch 的一致"});
    t.check_allclose(X.grad(), ref["grad.input.X"], 1e-4, {.en = "d/dX matches", .zh = "d/dX 一致"});
    t.check_allclose(enc.grad(), ref["grad.input.enc_outputs"], 1e-4,
                     {.en = "d/d enc_outputs matches (through the cross-attention)",
                      .zh = "d/d enc_outputs 一致（经由交叉注意力）"});
    const int count = static_cast<int>(blk.named_parameters().size());
    const int matched = tutorial::matching_gradients(t, blk, ref, 1e-4);
    t.check(matched == count && count == 18,
            {.en = "the gradients of all {} parameters match", .zh = "全部 {} 个参数的梯度都一致"}, count);
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 Transformer 完整代码实现, run by torch (tests/fixtures/)
void seed002_transformer_against_pytorch(Tutorial& t) {
    note({.en = "Seed 002's last section puts it all together: Transformer(src_pad_idx, trg_pad_idx, ...).forward("
                "src, trg) builds src_mask, src_trg_mask and trg_mask from the ids, encodes, decodes and returns "
                "the logits. tests/fixtures/seed002_transformer.safetensors holds that class run by torch (d_model "
                "8, 2 heads, FFN 16, 2 layers, vocabularies 13 and 17, pad id 1, dropout 0) on the src and trg of "
                "step 2b, with the gradient of sum(logits · u) for every weight; u is zero at the padded target "
                "positions (their rows are fully masked: PyTorch spreads them uniformly, tformer gives them zero "
                "weights, and no loss should read them). The same forward, written here with autograd ops:",
          .zh =
              "种子文档 002 的最后一节把一切拼在一起：Transformer(src_pad_idx, trg_pad_idx, ...).forward(src, trg) "
              "用 id 构造 src_mask、src_trg_mask 和 trg_mask，编码、解码，返回 logits。"
              "tests/fixtures/seed002_transformer.safetensors 存放着 torch 运行这个类的结果（d_model 8，2 "
              "个头，前馈网络 "
              "16，2 层，词表大小 13 和 17，填充 id 1，dropout 0），输入是第 2b 步的 src 和 trg，还有 sum(logits · u) "
              "对每个权重的梯度；u 在被填充的目标位置上为零（那些行被整行遮住：PyTorch 把它们均匀分布，tformer 给它们全"
              "零的权重，任何损失都不该读它们）。同样的 forward，这里用 autograd 运算写出："});
    const tutorial::Reference ref("seed002_transformer");
    Seed002Transformer model(ref.params("model"), 2, 2);
    const c::Tensor src = ref["model.input.src"], trg = ref["model.input.trg"];
    const Variable logits = model.forward(src, trg);
    ag::sum(logits * Variable(ref["model.input.upstream"])).backward();
    note({.en = "    src {} and trg {} -> logits {}; {} weight tensors",
          .zh = "    src {} 和 trg {} -> logits {}；{} 个权重张量"},
         c::shape_str(src.shape()), c::shape_str(trg.shape()), c::shape_str(logits.shape()), model.params.size());
    const c::Tensor real = c::ne(trg, 1.0).unsqueeze(2).expand(logits.shape());
    const c::Tensor zero = c::zeros(logits.shape());
    t.check_allclose(c::where(real, logits.value(), zero), c::where(real, ref["model.output"], zero), 1e-5,
                     {.en = "the logits (2, 5, 17) match PyTorch's at every real target position",
                      .zh = "在每个真实的目标位置上，logits (2, 5, 17) 都与 PyTorch 的一致"});
    int matched = 0;
    std::string worst;
    for (const auto& [name, p] : model.params) {
        if (tutorial::allclose_to(p.grad(), ref["model.grad.param." + name], 1e-4))
            ++matched;
        else
            worst = name;
    }
    t.check(matched == static_cast<int>(model.params.size()) && matched == 88,
            {.en = "the gradients of all {} weights match{}", .zh = "全部 {} 个权重的梯度都一致{}"},
            model.params.size(), worst.empty() ? Phrase{} : phrase({.en = " (not {})", .zh = "（{} 不一致）"}, worst));
    t.check(c::sum(c::abs(model.params.at("decoder.emb.tok_emb.weight").grad().select(0, 1))).item() == 0,
            {.en = "the padding row (id 1) of the target embedding gets no gradient, in both",
             .zh = "目标嵌入的填充行（id 1）在两边都得不到梯度"});
}

// Nine greedy steps of the untrained decoder, each made twice: seed 004's way (the whole prefix again) and
// with the cache (the newest token only). Returns the tokens, 0 first.
std::vector<int64_t> greedy_steps_cached_and_full(Tutorial& t, nn::TransformerDecoder& decoder, const Variable& memory,
                                                  const c::Tensor& src_lens) {
    nn::DecoderState cached = decoder.init_state(memory, src_lens);
    std::vector<int64_t> prefix = {0};
    double worst = 0;
    bool same_tokens = true;
    int64_t full_positions = 0, full_rows = 0, cached_rows = 0;
    line({.en = "\n      step  fed   next token:      max |logit   block 0 cache keys:\n"
                "                 full   cached    difference|   self        cross",
          .zh = "\n      步    输入  下一个词元：     最大 |logit  块 0 缓存的键：\n"
                "                 完整   缓存      之差|         自注意力    交叉"});
    for (int64_t step = 1; step <= 9; ++step) {
        // seed 004: decode the whole prefix again, keep the last position
        const c::Tensor tgt = c::from_vector(prefix, {1, static_cast<int64_t>(prefix.size())});
        nn::DecoderState fresh = decoder.init_state(memory, src_lens);
        const c::Tensor full = decoder.forward(tgt, fresh).value();    // (1, t, V)
        full_rows += decoder.attention_weights()[0][0].size(1);        // (B·H, t, t): t query rows
        const c::Tensor last_full = full.select(1, full.size(1) - 1);  // (1, V)
        full_positions += static_cast<int64_t>(prefix.size());
        // tformer: feed only the newest token; the cache holds the rest
        const c::Tensor newest = c::from_vector(std::vector<int64_t>{prefix.back()}, {1, 1});
        const c::Tensor last_cached = decoder.forward_step(newest, cached).value().select(1, 0);  // (1, V)
        cached_rows += decoder.attention_weights()[0][0].size(1);  // one query row per step

        const int64_t next_full = static_cast<int64_t>(c::argmax(last_full, 1).item());
        const int64_t next_cached = static_cast<int64_t>(c::argmax(last_cached, 1).item());
        const double diff = max_abs_diff(last_full, last_cached);
        worst = std::max(worst, diff);
        same_tokens = same_tokens && next_full == next_cached;
        line("      {:>4} {:>4} {:>7} {:>8} {:>13.1e}   {:<11} {}", step, prefix.back(), next_full, next_cached, diff,
             c::shape_str(cached.caches[0].self.keys.shape()), c::shape_str(cached.caches[0].cross.keys.shape()));
        prefix.push_back(next_cached);
    }
    line();
    note({.en = "    untrained model prediction: {}\n(seed 004's inference_test prints such a sequence too; "
                "training the copy task is tutorial 12)",
          .zh = "    未训练模型的预测：{}\n（种子文档 004 的 inference_test 也打印这样一个序列；复制任务的训练见教程 "
                "12）"},
         fmt::format("{}", fmt::join(prefix, " ")));
    t.check(worst < 1e-5,
            {.en = "at every step the cached logits equal the full pass's last position (largest difference {:.1e}, "
                   "float32)",
             .zh = "每一步用缓存得到的 logits 都等于完整前向在最后位置的 logits（最大差 {:.1e}，float32）"},
            worst);
    t.check(same_tokens, {.en = "so greedy decoding picks the same 9 tokens either way",
                          .zh = "所以两种做法的贪心解码选出同样的 9 个词元"});
    t.check(cached.steps_done == 9 && cached.caches[0].self.keys.shape() == c::Shape{4, 9, 8} &&
                cached.caches[1].cross.keys.shape() == c::Shape{4, 10, 8},
            {.en = "after 9 steps each block caches (B·H, 9, d) = (4, 9, 8) self keys and (4, 10, 8) encoder keys",
             .zh = "9 步之后，每个块缓存了 (B·H, 9, d) = (4, 9, 8) 的自注意力键和 (4, 10, 8) 的编码器键"});
    note(
        {.en = "What the cache holds: for every block, the self-attention keys and values of all tokens fed so "
               "far (one more step each time, B·H = 4 rows of d = 8 features per head), and the encoder "
               "outputs projected by the cross-attention's W_k and W_v (computed at the first step, then reused). "
               "Work done: the full passes pushed 1 + 2 + ... + 9 = {} positions through the decoder; the cached "
               "steps pushed 9.",
         .zh =
             "缓存里存的是：每个块中，到目前为止输入过的所有词元的自注意力键和值（每步多一个时间步，B·H = 4 行，每个头 "
             "d = 8 个特征），以及经交叉注意力的 W_k 和 W_v 投影过的编码器输出（第一步算出，之后反复使用）。"
             "计算量：完整前向一共让 1 + 2 + ... + 9 = {} 个位置经过解码器；用缓存的各步只有 9 个。"},
        full_positions);
    t.check(full_rows == 45 && cached_rows == 9,
            {.en = "measured in the self-attention weights of block 0: the full passes had {} query rows in all, the "
                   "cached steps {}",
             .zh = "在块 0 的自注意力权重里实测：完整前向一共有 {} 个查询行，用缓存的各步共 {} 个"},
            full_rows, cached_rows);
    return prefix;
}

// Feeding the cache a chunk of three tokens, then single ones, against one teacher-forced pass over all nine.
void cache_in_chunks(Tutorial& t, nn::TransformerDecoder& decoder, const Variable& memory, const c::Tensor& src_lens,
                     const std::vector<int64_t>& prefix) {
    note({.en = "\nA cache may also take several tokens at once (a chunk is masked causally inside itself). "
                "Feeding the first three tokens together, then the rest one by one:",
          .zh = "\n缓存也可以一次接收好几个词元（一块词元内部按因果关系加掩码）。先一起输入前三个词元，再逐个输入其余的"
                "："});
    nn::DecoderState chunked = decoder.init_state(memory, src_lens);
    const c::Tensor all = c::from_vector(std::vector<int64_t>(prefix.begin(), prefix.end() - 1), {1, 9});
    const c::Tensor head = decoder.forward_step(all.slice(1, 0, 3).contiguous(), chunked).value();  // (1, 3, V)
    std::vector<c::Tensor> pieces = {head};
    for (int64_t i = 3; i < 9; ++i)
        pieces.push_back(decoder.forward_step(all.slice(1, i, i + 1).contiguous(), chunked).value());
    nn::DecoderState fresh = decoder.init_state(memory, src_lens);
    const c::Tensor teacher = decoder.forward(all, fresh).value();  // (1, 9, V)
    const double chunk_diff = max_abs_diff(c::concat(pieces, 1), teacher);
    t.check(chunk_diff < 1e-5,
            {.en = "chunk of 3, then 6 single steps == one teacher-forced pass over all 9 (largest difference {:.1e})",
             .zh = "先一块 3 个、再 6 个单步 == 对全部 9 个做一次教师强制的前向（最大差 {:.1e}）"},
            chunk_diff);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 预测, 代码实现 › 解码器; seed 004 › 模型预估 (inference_test)
void prediction_with_kv_cache(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000 (预测): to predict token t + 1, the decoder's self-attention uses the t tokens so far "
                "as keys and values and the newest one as the query. Seed 004's inference_test does it by "
                "re-running the decoder on the WHOLE prefix with subsequent_mask at every step and keeping the "
                "last position. d2l keeps each block's past inputs in state[2][i] instead, and tformer goes "
                "one step further: DecoderState keeps each block's PROJECTED keys and values (W_k x, W_v x) and "
                "the encoder outputs' projections, so each step only processes the new token.\n\n"
                "The model: seed 000's sizes (32 hidden, 4 heads, 2 blocks, FFN 64), vocabulary 11 as in seed "
                "004's copy task, untrained. Source [[1, 2, ..., 10]], decoding starts from token 0 (seed 004's "
                "tgt = zeros(1, 1)); greedy: the next token is the argmax of the last logits.",
          .zh =
              "种子文档 000（预测）：要预测第 t + 1 个词元，解码器的自注意力把目前为止的 t 个词元作为键和值、把最新的"
              "那个作为查询。种子文档 004 的 inference_test 的做法是每一步都带着 subsequent_mask 把解码器在“整个”前缀上"
              "重跑一遍，只留最后一个位置。d2l 则把每个块过去的输入存在 state[2][i] 里，tformer 再进一步：DecoderState "
              "存的是每个块“投影过的”键和值（W_k x、W_v x），以及编码器输出的投影，所以每一步只需处理新的那个词元。\n\n"
              "模型：种子文档 000 的规模（隐藏维 32，4 个头，2 个块，前馈网络 64），词表大小 11，与种子文档 004 "
              "的复制任务"
              "相同，未训练。源序列 [[1, 2, ..., 10]]，解码从词元 0 开始（种子文档 004 的 tgt = zeros(1, "
              "1)）；贪心搜索："
              "下一个词元取最后一个 logits 的 argmax。"});
    const nn::TransformerOptions options = tutorial::block_options(
        {.num_hiddens = 32, .ffn_num_hiddens = 64, .num_heads = 4, .num_layers = 2, .dropout = 0.1});
    nn::TransformerEncoder encoder(11, options, lesson.gen);
    nn::TransformerDecoder decoder(11, options, lesson.gen);
    encoder.eval();
    decoder.eval();
    ag::NoGradGuard no_grad;
    const c::Tensor src = c::arange(1, 11, 1, DType::int64).view({1, 10});
    const c::Tensor src_lens = c::from_vector(std::vector<int64_t>{10}, {1});
    const Variable memory = encoder.forward(src, src_lens);
    note(both("    memory = encoder(src): {}"), c::shape_str(memory.shape()));
    lesson.generated = greedy_steps_cached_and_full(t, decoder, memory, src_lens);
    cache_in_chunks(t, decoder, memory, src_lens, lesson.generated);
    lesson.final_weights = decoder.attention_weights();  // of that last full pass
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器 (the attention weights kept for heatmaps)
void decoder_heatmaps(Tutorial& t, const Lesson& lesson) {
    const int64_t H = 4;
    std::vector<std::string> tokens;
    for (size_t i = 0; i + 1 < lesson.generated.size(); ++i) tokens.push_back(std::to_string(lesson.generated[i]));
    std::vector<std::string> source;
    for (int i = 1; i <= 10; ++i) source.push_back(std::to_string(i));
    tasks::Heatmaps self{.matrices = tasks::heatmap_grid(c::stack(lesson.final_weights[0], 0).view({2, H, 9, 9})),
                         .xlabel = "keys (tokens fed)",
                         .ylabel = "queries",
                         .titles = tutorial::head_titles(H),
                         .title = "decoder self-attention, blocks 1 (top) and 2",
                         .x_ticks = tokens,
                         .y_ticks = tokens};
    tasks::Heatmaps cross{.matrices = tasks::heatmap_grid(c::stack(lesson.final_weights[1], 0).view({2, H, 9, 10})),
                          .xlabel = "source tokens",
                          .ylabel = "queries",
                          .titles = tutorial::head_titles(H),
                          .title = "encoder-decoder attention, blocks 1 (top) and 2",
                          .x_ticks = source,
                          .y_ticks = tokens};
    const auto self_png = t.out_path("decoder_self_attention.png");
    const auto cross_png = t.out_path("decoder_cross_attention.png");
    tasks::plot_heatmaps(self_png, self);
    tasks::plot_heatmaps(cross_png, cross);
    note({.en = "Wrote\n    {}\n    {}\nThe self-attention panels are lower triangular: the no-peek mask at work.",
          .zh = "已写出\n    {}\n    {}\n自注意力的各个面板都是下三角的：这就是防偷看掩码的作用。"},
         self_png.string(), cross_png.string());
    bool triangular = true;
    for (const c::Tensor& w : lesson.final_weights[0])
        for (int64_t i = 0; i < 8; ++i)
            triangular = triangular && max_abs(w.slice(1, i, i + 1).slice(2, i + 1, 9)) == 0;
    t.check(triangular, {.en = "every self-attention weight above the diagonal is 0, in both blocks",
                         .zh = "两个块里，对角线以上的每个自注意力权重都为 0"});
    bool rows_sum = true;
    for (const auto& row : cross.matrices)
        for (const c::Tensor& panel : row)
            rows_sum = rows_sum && c::max(c::abs(c::sub(c::sum(panel, {1}), c::ones({9})))).item() < 1e-5;
    t.check(rows_sum && cross.matrices.size() == 2 && cross.matrices[0].size() == 4,
            {.en = "the cross-attention panels: 2 blocks × 4 heads, every row a distribution over the 10 source tokens",
             .zh = "交叉注意力的面板：2 个块 × 4 个头，每一行都是 10 个源词元上的分布"});
}

// ---- the exercise (--exercise): tutorials/11_decoder_masks_prediction/exercise.cpp --------

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (Batch.make_std_mask), written by the reader
void exercise_padding_and_no_peek(Tutorial& t) {
    note({.en = "Write exercise::make_std_mask (seed 004's bool form) and exercise::causal_padded_lens (the same "
                "mask as per-row valid lengths). The checks compare the first with the mask torch built with seed "
                "004's own function, and run a MultiHeadAttention with both forms: the outputs must agree.",
          .zh =
              "写出 exercise::make_std_mask（种子文档 004 的 bool 形式）和 exercise::causal_padded_lens（同一个掩码写成"
              "每行的有效长度）。检查会把前者与 torch 用种子文档 004 自己的函数构造的掩码比较，并用两种形式各运行一次 "
              "MultiHeadAttention：输出必须一致。"});
    const tutorial::Reference ref("attention_masks");
    const c::Tensor tgt = ref["ids.tgt004"];
    const c::Tensor mine = exercise::make_std_mask(tgt, 0);
    t.check_close(mine.to(DType::int64), ref["mask.std_mask"], 0,
                  {.en = "make_std_mask(tgt, 0) equals PyTorch's (2, 5, 5)",
                   .zh = "make_std_mask(tgt, 0) 等于 PyTorch 的 (2, 5, 5)"});
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{5, 3}, {2});
    const c::Tensor rows = exercise::causal_padded_lens(lens, 5);
    t.check(rows.shape() == c::Shape{2, 5} &&
                rows.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 1, 2, 3, 3, 3},
            both("causal_padded_lens([5, 3], 5) = [[1, 2, 3, 4, 5], [1, 2, 3, 3, 3]]"));
    c::Generator g(1111);
    nn::MultiHeadAttention mha({.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2}, g);
    mha.to(DType::float64);
    const Variable X(c::randn({2, 5, 8}, g, DType::float64));
    const c::Tensor padded = c::from_vector(std::vector<int64_t>{1, 3, 5, 2, 2, 1, 4, 4, 0, 0}, {2, 5});
    const double diff = c::max(c::abs(c::sub(mha(X, X, X, exercise::causal_padded_lens(lens, 5)).value(),
                                             mha(X, X, X, exercise::make_std_mask(padded, 0)).value())))
                            .item();
    t.check(diff < 1e-15, {.en = "for sequences of lengths 5 and 3 (padded with 0), both masks give the same attention",
                           .zh = "对长度为 5 和 3（用 0 填充）的序列，两种掩码给出同样的注意力"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 11 · Decoder: masks, DecoderBlock, prediction with a KV cache",
                   .zh = "tformer 教程 11 · 解码器：掩码、解码器块、带 KV 缓存的预测"},
         .follows = {.en = "seed 000 有掩码的多头注意力, 解码器块, 解码器, 预测; seed 002 四 Decoder, 五 "
                           "Transformer 实现 (5.1, make_pad_mask, make_no_peak_mask); seed 004 "
                           "subsequent_mask, Batch, 解码器, inference_test",
                     .zh = "种子文档 000 有掩码的多头注意力、解码器块、解码器、预测；种子文档 002 四 Decoder、五 "
                           "Transformer 实现（5.1，make_pad_mask、make_no_peak_mask）；种子文档 004 "
                           "subsequent_mask、Batch、解码器、inference_test"},
         .exercise = {.en = "write seed 004's make_std_mask and per-row lengths that combine padding with "
                            "the no-peek rule (tutorials/11_decoder_masks_prediction/exercise.cpp)",
                      .zh = "写出种子文档 004 的 make_std_mask，以及把填充与防偷看规则结合起来的每行长度"
                            "（tutorials/11_decoder_masks_prediction/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. The no-peek mask", .zh = "1. 防偷看掩码"}, [&] { no_peek_mask(t); });
    t.step({.en = "2. Padding masks (seed 002) and seed 004's Batch mask",
            .zh = "2. 填充掩码（种子文档 002）与种子文档 004 的 Batch 掩码"},
           [&] { padding_masks(t, lesson); });
    t.step({.en = "2b. The masks against PyTorch's", .zh = "2b. 掩码与 PyTorch 的对照"},
           [&] { masks_against_pytorch(t); });
    t.step({.en = "3. Valid lengths and bool masks give the same attention",
            .zh = "3. 有效长度与 bool 掩码给出同样的注意力"},
           [&] { valid_lengths_and_bool_masks(t, lesson); });
    t.step({.en = "4. DecoderBlock: masked self-attention, cross-attention, FFN",
            .zh = "4. DecoderBlock：带掩码的自注意力、交叉注意力、前馈网络"},
           [&] { decoder_block(t, lesson); });
    t.step({.en = "4b. The DecoderBlock against PyTorch", .zh = "4b. DecoderBlock 与 PyTorch 对照"},
           [&] { decoder_block_against_pytorch(t); });
    t.step({.en = "4c. Seed 002's complete Transformer (5.1), end to end, against PyTorch",
            .zh = "4c. 种子文档 002 完整的 Transformer（5.1），端到端与 PyTorch 对照"},
           [&] { seed002_transformer_against_pytorch(t); });
    t.step({.en = "5. Prediction, token by token, with a key/value cache", .zh = "5. 预测：逐个词元，带键/值缓存"},
           [&] { prediction_with_kv_cache(t, lesson); });
    t.step({.en = "6. Heatmaps of the decoder's attention", .zh = "6. 解码器注意力的热力图"},
           [&] { decoder_heatmaps(t, lesson); });
    t.exercise({.en = "Exercise. Padding and no-peek together", .zh = "练习. 填充与防偷看一起用"},
               [&] { exercise_padding_and_no_peek(t); });
    return t.finish();
}
