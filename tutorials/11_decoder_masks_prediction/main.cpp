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
// 002's complete Transformer (5.1) with PyTorch (tests/fixtures/).
// Read it with tutorials/11_decoder_masks_prediction/README.md.
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
        "Seed 000 (有掩码的多头注意力): when the decoder computes the output for position i it must not "
        "look at positions after i — at prediction time they do not exist yet. During training the "
        "whole target sequence is fed at once, so the attention weights to later positions are masked: "
        "'pretend the sequence has length i'. Seed 004 writes the mask as subsequent_mask(size) = "
        "(triu(ones(1, size, size), diagonal=1) == 0); seed 002 as tril(ones(len_q, len_k)); d2l as "
        "valid lengths [1, 2, ..., T] for every row:");
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
    t.check(lower, "row i allows keys 0..i: the lower triangle with the diagonal (seed 004's triu(.., 1) == 0)");
    t.check(make_no_peak_mask(5, 5).to_vector() == mask.select(0, 0).to_vector(),
            "seed 002's tril(ones(5, 5)) is the same mask");
    t.check(same_as_lens, "and so are d2l's valid lengths: row i keeps its first i + 1 keys");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 Transformer 完整代码实现 (make_pad_mask); seed 004 › 完整代码 (Batch)
void padding_masks(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 002 builds its masks from the token ids, with padding id 1:\n"
        "    src_mask = make_pad_mask(src, src)                        (B, 1, S, S)\n"
        "    trg_mask = make_pad_mask(trg, trg) * make_no_peak_mask(trg, trg)\n"
        "make_pad_mask keeps (query, key) when NEITHER is padding.");
    const c::Tensor src = c::from_vector(std::vector<int64_t>{5, 7, 3, 1, 1, 4, 2, 8, 6, 1}, {2, 5});
    const c::Tensor trg = c::from_vector(std::vector<int64_t>{2, 9, 4, 1, 2, 6, 1, 1}, {2, 4});
    show("src", src);
    show("trg", trg);
    const c::Tensor src_mask = make_pad_mask(src, src, 1, 1);
    const c::Tensor trg_mask = c::logical_and(make_pad_mask(trg, trg, 1, 1), make_no_peak_mask(4, 4));
    show_mask("src_mask[0, 0]", src_mask.select(0, 0).select(0, 0));
    show_mask("trg_mask[1, 0]", trg_mask.select(0, 1).select(0, 0));
    t.check(src_mask.shape() == c::Shape{2, 1, 5, 5} && trg_mask.shape() == c::Shape{2, 1, 4, 4},
            "src_mask (B, 1, S, S) and trg_mask (B, 1, T, T): the 1 broadcasts over the heads");
    t.check(c::sum(src_mask.select(0, 0).select(0, 0).to(DType::float32)).item() == 9,
            "sequence 0 of src has 3 real tokens: 3 × 3 = 9 allowed (query, key) pairs");

    note(
        "\nThe query half of the mask blanks whole ROWS: a padded query may attend to nothing. Seed "
        "002 fills masked scores with -1e9, which spreads such a row uniformly over all keys; tformer "
        "gives it all-zero weights (tutorial 05, step 3):");
    const c::Tensor scores = c::randn({2, 1, 4, 4}, lesson.gen);
    const c::Tensor w = nn::masked_softmax(Variable(scores), trg_mask).value();
    show("weights[1, 0] with trg_mask", w.select(0, 1).select(0, 0));
    t.check(c::sum(w.select(0, 1).select(0, 0).slice(0, 2, 4)).item() == 0,
            "trg sequence 1 has 2 real tokens: rows 2 and 3 (padded queries) are all zero");
    t.check_close(c::sum(w.select(0, 1).select(0, 0).slice(0, 0, 2), {1}), c::ones({2}), 1e-6,
                  "rows 0 and 1 are distributions over the keys they may see");

    note(
        "\nSeed 004's Batch.make_std_mask (padding id 0) masks keys only:\n"
        "    tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(T)      (B, T, T)");
    const c::Tensor tgt = c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 0}, {1, 5});
    const c::Tensor std_mask = c::logical_and(c::ne(tgt, 0.0).unsqueeze(-2), nn::subsequent_mask(5));
    show_mask("make_std_mask([[1, 3, 5, 0, 0]], 0)[0]", std_mask.select(0, 0));
    t.check(std_mask.shape() == c::Shape{1, 5, 5} && std_mask.at({0, 4, 2}) != 0 && std_mask.at({0, 4, 3}) == 0,
            "row 4 (a padded query) still sees the 3 real tokens: only padded KEYS are hidden");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 and seed 004 › 完整代码: the masks their own functions build, run by torch
void masks_against_pytorch(Tutorial& t) {
    note(
        "tests/fixtures/attention_masks.safetensors holds the masks torch builds with the documents' own "
        "functions (copied into make_fixtures.py as written) for src [[5, 7, 3, 9, 1, 1], [4, 2, 8, 6, 11, "
        "12]] and trg [[2, 9, 4, 1, 1], [2, 6, 10, 14, 3]] (pad id 1), and seed 004's for tgt [[1, 3, 5, 0, "
        "0], [1, 4, 4, 2, 9]] (pad id 0). This tutorial's masks, element by element:");
    const tutorial::Reference ref("attention_masks");
    const c::Tensor src = ref["ids.src"], trg = ref["ids.trg"];
    auto as_ints = [](const c::Tensor& mask) { return mask.to(DType::int64); };
    t.check_close(as_ints(make_pad_mask(src, src, 1, 1)), ref["mask.src_mask"], 0,
                  "src_mask = make_pad_mask(src, src) (2, 1, 6, 6)");
    t.check_close(as_ints(make_pad_mask(trg, src, 1, 1)), ref["mask.src_trg_mask"], 0,
                  "src_trg_mask = make_pad_mask(trg, src) (2, 1, 5, 6)");
    t.check_close(as_ints(c::logical_and(make_pad_mask(trg, trg, 1, 1), make_no_peak_mask(5, 5))), ref["mask.trg_mask"],
                  0, "trg_mask = make_pad_mask(trg, trg) * make_no_peak_mask(trg, trg) (2, 1, 5, 5)");
    t.check_close(as_ints(nn::subsequent_mask(5)), ref["mask.subsequent_mask_5"], 0,
                  "nn::subsequent_mask(5) = seed 004's");
    const c::Tensor tgt = ref["ids.tgt004"];
    t.check_close(as_ints(c::logical_and(c::ne(tgt, 0.0).unsqueeze(-2), nn::subsequent_mask(5))), ref["mask.std_mask"],
                  0, "Batch.make_std_mask(tgt, 0) (2, 5, 5)");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块 (dec_valid_lens) against seed 004's subsequent_mask
void valid_lengths_and_bool_masks(Tutorial& t, Lesson& lesson) {
    note("nn::MultiHeadAttention accepts either form. With the same weights and inputs:");
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
    note(
        "    largest |difference| of the outputs:\n"
        "      valid_lens [5, 3]                      vs  bool key mask (B, 1, S)         {:.1e}\n"
        "      causal_valid_lens(2, 5)                vs  subsequent_mask(5)              {:.1e}\n"
        "      lens [[1..5], [1, 2, 3, 3, 3]] (B, T)  vs  key mask & subsequent_mask      {:.1e}",
        pad_diff, causal_diff, both_diff);
    t.check(pad_diff < 1e-15, "padding: valid lengths == bool key mask");
    t.check(causal_diff < 1e-15, "no-peek: d2l's dec_valid_lens == seed 004's subsequent_mask");
    t.check(both_diff < 1e-15, "padding and no-peek together: per-row lengths min(t + 1, len) == seed 004's tgt_mask");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块 (DecoderBlock); seed 002 › 四 Decoder 结构
void decoder_block(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 000's decoder block has three sub-layers, each followed by AddNorm:\n"
        "    X2 = attention1(X, X, X, no-peek)                   masked self-attention\n"
        "    Y  = AddNorm(X, X2)\n"
        "    Y2 = attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)   cross-attention\n"
        "    Z  = AddNorm(Y, Y2);   out = AddNorm(Z, FFN(Z))\n"
        "The queries of the cross-attention come from the target, its keys and values from the encoder "
        "(seed 002: 'K, V from the encoder's matrix C, Q from the previous decoder block'). d2l's "
        "example: X (2, 100, 24), 8 heads, encoder valid lengths [3, 2], eval mode.");
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
    const c::Tensor out = decoder_blk.forward(X, state).value();
    const c::Tensor self_w = decoder_blk.attention1->attention_weights();
    const c::Tensor cross_w = decoder_blk.attention2->attention_weights();
    note("    output {}\n    self-attention weights {}   cross-attention weights {}", c::shape_str(out.shape()),
         c::shape_str(self_w.shape()), c::shape_str(cross_w.shape()));
    t.check(out.shape() == c::Shape{2, 100, 24}, "decoder_blk(X, state) has X's shape (2, 100, 24)");
    bool upper_zero = true;
    for (int64_t i = 0; i < 99; ++i)
        upper_zero = upper_zero && max_abs(self_w.slice(1, i, i + 1).slice(2, i + 1, 100)) == 0;
    t.check(upper_zero, "self-attention: every weight above the diagonal is exactly 0, in all 16 heads");
    t.check(
        max_abs(cross_w.slice(0, 0, 8).slice(2, 3, 100)) == 0 && max_abs(cross_w.slice(0, 8, 16).slice(2, 2, 100)) == 0,
        "cross-attention: source positions beyond the valid lengths [3, 2] get 0");

    c::Tensor later = X.value().clone();
    c::copy_(later.slice(1, 50, 100), c::randn({2, 50, 24}, lesson.gen));
    const c::Tensor out2 = decoder_blk.forward(Variable(later), state).value();
    t.check(max_abs_diff(out2.slice(1, 0, 50), out.slice(1, 0, 50)) == 0 && max_abs_diff(out2, out) > 0,
            "replacing target positions 50..99 leaves the outputs at 0..49 exactly unchanged");
    note(
        "d2l's block passes dec_valid_lens only in training mode and None in eval mode, relying on "
        "prediction feeding one token at a time. nn::DecoderBlock::forward always applies the mask "
        "(teacher forcing in either mode); prediction uses forward_step, below.");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 解码器块, run by torch (tests/fixtures/decoder_block.safetensors)
void decoder_block_against_pytorch(Tutorial& t) {
    note(
        "tests/fixtures/decoder_block.safetensors: seed 000's DecoderBlock (D = 8, 2 heads, FFN 16, i = 0) "
        "run by torch in training mode, so with d2l's dec_valid_lens [1..5] per row, state [enc_outputs, "
        "[6, 3], [None]], and the gradients of sum(output · u) for X, the encoder outputs and all 18 parameters:");
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
    t.check_allclose(out.value(), ref["output"], 1e-5, "output (2, 5, 8) matches PyTorch's");
    t.check_allclose(X.grad(), ref["grad.input.X"], 1e-4, "d/dX matches");
    t.check_allclose(enc.grad(), ref["grad.input.enc_outputs"], 1e-4,
                     "d/d enc_outputs matches (through the cross-attention)");
    const int count = static_cast<int>(blk.named_parameters().size());
    const int matched = tutorial::matching_gradients(t, blk, ref, 1e-4);
    t.check(matched == count && count == 18, fmt::format("the gradients of all {} parameters match", count));
}

// seed 002 (002_36798a9f04a86cc8.txt) › 5.1 Transformer 完整代码实现, run by torch (tests/fixtures/)
void seed002_transformer_against_pytorch(Tutorial& t) {
    note(
        "Seed 002's last section puts it all together: Transformer(src_pad_idx, trg_pad_idx, ...).forward("
        "src, trg) builds src_mask, src_trg_mask and trg_mask from the ids, encodes, decodes and returns the "
        "logits. tests/fixtures/seed002_transformer.safetensors holds that class run by torch (d_model 8, 2 "
        "heads, FFN 16, 2 layers, vocabularies 13 and 17, pad id 1, dropout 0) on the src and trg of step "
        "2b, with the gradient of sum(logits · u) for every weight; u is zero at the padded target "
        "positions (their rows are fully masked: PyTorch spreads them uniformly, tformer gives them zero "
        "weights, and no loss should read them). The same forward, written here with autograd ops:");
    const tutorial::Reference ref("seed002_transformer");
    Seed002Transformer model(ref.params("model"), 2, 2);
    const c::Tensor src = ref["model.input.src"], trg = ref["model.input.trg"];
    const Variable logits = model.forward(src, trg);
    ag::sum(logits * Variable(ref["model.input.upstream"])).backward();
    note("    src {} and trg {} -> logits {}; {} weight tensors", c::shape_str(src.shape()), c::shape_str(trg.shape()),
         c::shape_str(logits.shape()), model.params.size());
    const c::Tensor real = c::ne(trg, 1.0).unsqueeze(2).expand(logits.shape());
    const c::Tensor zero = c::zeros(logits.shape());
    t.check_allclose(c::where(real, logits.value(), zero), c::where(real, ref["model.output"], zero), 1e-5,
                     "the logits (2, 5, 17) match PyTorch's at every real target position");
    int matched = 0;
    std::string worst;
    for (const auto& [name, p] : model.params) {
        if (tutorial::allclose_to(p.grad(), ref["model.grad.param." + name], 1e-4))
            ++matched;
        else
            worst = name;
    }
    t.check(matched == static_cast<int>(model.params.size()) && matched == 88,
            fmt::format("the gradients of all {} weights match{}", model.params.size(),
                        worst.empty() ? "" : " (not " + worst + ")"));
    t.check(c::sum(c::abs(model.params.at("decoder.emb.tok_emb.weight").grad().select(0, 1))).item() == 0,
            "the padding row (id 1) of the target embedding gets no gradient, in both");
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
    line(
        "\n      step  fed   next token:      max |logit   block 0 cache keys:\n"
        "                 full   cached    difference|   self        cross");
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
    note(
        "    untrained model prediction: {}\n(seed 004's inference_test prints such a sequence too; "
        "training the copy task is tutorial 12)",
        fmt::join(prefix, " "));
    t.check(worst < 1e-5, fmt::format("at every step the cached logits equal the full pass's last position "
                                      "(largest difference {:.1e}, float32)",
                                      worst));
    t.check(same_tokens, "so greedy decoding picks the same 9 tokens either way");
    t.check(cached.steps_done == 9 && cached.caches[0].self.keys.shape() == c::Shape{4, 9, 8} &&
                cached.caches[1].cross.keys.shape() == c::Shape{4, 10, 8},
            "after 9 steps each block caches (B·H, 9, d) = (4, 9, 8) self keys and (4, 10, 8) encoder keys");
    note(
        "What the cache holds: for every block, the self-attention keys and values of all tokens fed so "
        "far (one more step each time, B·H = 4 rows of d = 8 features per head), and the encoder "
        "outputs projected by the cross-attention's W_k and W_v (computed at the first step, then reused). "
        "Work done: the full passes pushed 1 + 2 + ... + 9 = {} positions through the decoder; the cached "
        "steps pushed 9.",
        full_positions);
    t.check(full_rows == 45 && cached_rows == 9,
            fmt::format("measured in the self-attention weights of block 0: the full passes had {} query rows in "
                        "all, the cached steps {}",
                        full_rows, cached_rows));
    return prefix;
}

// Feeding the cache a chunk of three tokens, then single ones, against one teacher-forced pass over all nine.
void cache_in_chunks(Tutorial& t, nn::TransformerDecoder& decoder, const Variable& memory, const c::Tensor& src_lens,
                     const std::vector<int64_t>& prefix) {
    note(
        "\nA cache may also take several tokens at once (a chunk is masked causally inside itself). "
        "Feeding the first three tokens together, then the rest one by one:");
    nn::DecoderState chunked = decoder.init_state(memory, src_lens);
    const c::Tensor all = c::from_vector(std::vector<int64_t>(prefix.begin(), prefix.end() - 1), {1, 9});
    const c::Tensor head = decoder.forward_step(all.slice(1, 0, 3).contiguous(), chunked).value();  // (1, 3, V)
    std::vector<c::Tensor> pieces = {head};
    for (int64_t i = 3; i < 9; ++i)
        pieces.push_back(decoder.forward_step(all.slice(1, i, i + 1).contiguous(), chunked).value());
    nn::DecoderState fresh = decoder.init_state(memory, src_lens);
    const c::Tensor teacher = decoder.forward(all, fresh).value();  // (1, 9, V)
    const double chunk_diff = max_abs_diff(c::concat(pieces, 1), teacher);
    t.check(chunk_diff < 1e-5, fmt::format("chunk of 3, then 6 single steps == one teacher-forced pass over all 9 "
                                           "(largest difference {:.1e})",
                                           chunk_diff));
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 预测, 代码实现 › 解码器; seed 004 › 模型预估 (inference_test)
void prediction_with_kv_cache(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 000 (预测): to predict token t + 1, the decoder's self-attention uses the t tokens so far "
        "as keys and values and the newest one as the query. Seed 004's inference_test does it by "
        "re-running the decoder on the WHOLE prefix with subsequent_mask at every step and keeping the "
        "last position. d2l keeps each block's past inputs in state[2][i] instead, and tformer goes "
        "one step further: DecoderState keeps each block's PROJECTED keys and values (W_k x, W_v x) and "
        "the encoder outputs' projections, so each step only processes the new token.\n\n"
        "The model: seed 000's sizes (32 hidden, 4 heads, 2 blocks, FFN 64), vocabulary 11 as in seed "
        "004's copy task, untrained. Source [[1, 2, ..., 10]], decoding starts from token 0 (seed 004's "
        "tgt = zeros(1, 1)); greedy: the next token is the argmax of the last logits.");
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
    note("    memory = encoder(src): {}", c::shape_str(memory.shape()));
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
    note("Wrote\n    {}\n    {}\nThe self-attention panels are lower triangular: the no-peek mask at work.",
         self_png.string(), cross_png.string());
    bool triangular = true;
    for (const c::Tensor& w : lesson.final_weights[0])
        for (int64_t i = 0; i < 8; ++i)
            triangular = triangular && max_abs(w.slice(1, i, i + 1).slice(2, i + 1, 9)) == 0;
    t.check(triangular, "every self-attention weight above the diagonal is 0, in both blocks");
    bool rows_sum = true;
    for (const auto& row : cross.matrices)
        for (const c::Tensor& panel : row)
            rows_sum = rows_sum && c::max(c::abs(c::sub(c::sum(panel, {1}), c::ones({9})))).item() < 1e-5;
    t.check(rows_sum && cross.matrices.size() == 2 && cross.matrices[0].size() == 4,
            "the cross-attention panels: 2 blocks × 4 heads, every row a distribution over the 10 source tokens");
}

// ---- the exercise (--exercise): tutorials/11_decoder_masks_prediction/exercise.cpp --------

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (Batch.make_std_mask), written by the reader
void exercise_padding_and_no_peek(Tutorial& t) {
    note(
        "Write exercise::make_std_mask (seed 004's bool form) and exercise::causal_padded_lens (the same "
        "mask as per-row valid lengths). The checks compare the first with the mask torch built with seed "
        "004's own function, and run a MultiHeadAttention with both forms: the outputs must agree.");
    const tutorial::Reference ref("attention_masks");
    const c::Tensor tgt = ref["ids.tgt004"];
    const c::Tensor mine = exercise::make_std_mask(tgt, 0);
    t.check_close(mine.to(DType::int64), ref["mask.std_mask"], 0, "make_std_mask(tgt, 0) equals PyTorch's (2, 5, 5)");
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{5, 3}, {2});
    const c::Tensor rows = exercise::causal_padded_lens(lens, 5);
    t.check(rows.shape() == c::Shape{2, 5} &&
                rows.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 1, 2, 3, 3, 3},
            "causal_padded_lens([5, 3], 5) = [[1, 2, 3, 4, 5], [1, 2, 3, 3, 3]]");
    c::Generator g(1111);
    nn::MultiHeadAttention mha({.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2}, g);
    mha.to(DType::float64);
    const Variable X(c::randn({2, 5, 8}, g, DType::float64));
    const c::Tensor padded = c::from_vector(std::vector<int64_t>{1, 3, 5, 2, 2, 1, 4, 4, 0, 0}, {2, 5});
    const double diff = c::max(c::abs(c::sub(mha(X, X, X, exercise::causal_padded_lens(lens, 5)).value(),
                                             mha(X, X, X, exercise::make_std_mask(padded, 0)).value())))
                            .item();
    t.check(diff < 1e-15, "for sequences of lengths 5 and 3 (padded with 0), both masks give the same attention");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 11 · Decoder: masks, DecoderBlock, prediction with a KV cache",
                .follows = "seed 000 有掩码的多头注意力, 解码器块, 解码器, 预测; seed 002 四 Decoder, 五 "
                           "Transformer 实现 (5.1, make_pad_mask, make_no_peak_mask); seed 004 "
                           "subsequent_mask, Batch, 解码器, inference_test",
                .exercise = "write seed 004's make_std_mask and per-row lengths that combine padding with "
                            "the no-peek rule (tutorials/11_decoder_masks_prediction/exercise.cpp)"});
    Lesson lesson;
    t.step("1. The no-peek mask", [&] { no_peek_mask(t); });
    t.step("2. Padding masks (seed 002) and seed 004's Batch mask", [&] { padding_masks(t, lesson); });
    t.step("2b. The masks against PyTorch's", [&] { masks_against_pytorch(t); });
    t.step("3. Valid lengths and bool masks give the same attention", [&] { valid_lengths_and_bool_masks(t, lesson); });
    t.step("4. DecoderBlock: masked self-attention, cross-attention, FFN", [&] { decoder_block(t, lesson); });
    t.step("4b. The DecoderBlock against PyTorch", [&] { decoder_block_against_pytorch(t); });
    t.step("4c. Seed 002's complete Transformer (5.1), end to end, against PyTorch",
           [&] { seed002_transformer_against_pytorch(t); });
    t.step("5. Prediction, token by token, with a key/value cache", [&] { prediction_with_kv_cache(t, lesson); });
    t.step("6. Heatmaps of the decoder's attention", [&] { decoder_heatmaps(t, lesson); });
    t.exercise("Exercise. Padding and no-peek together", [&] { exercise_padding_and_no_peek(t); });
    return t.finish();
}
