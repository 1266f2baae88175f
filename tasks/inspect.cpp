#include "tasks/inspect.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <fmt/format.h>

#include <cmath>

namespace tformer::tasks {

namespace ag = autograd;
using autograd::Variable;
using core::Tensor;

namespace {
// ids (n) -> int64 (1, n)
Tensor row_of(const std::vector<int64_t>& ids) { return core::from_vector(ids, {1, static_cast<int64_t>(ids.size())}); }
}  // namespace

AttentionMaps attention_maps(nn::EncoderDecoder& model, const std::vector<int64_t>& src, int64_t src_valid,
                             const std::vector<int64_t>& dec_input) {
    if (src.empty() || dec_input.empty() || src_valid < 1 || src_valid > static_cast<int64_t>(src.size()))
        fail<ValueError>("attention_maps: {} source ids ({} valid) and {} decoder inputs; each needs at least one",
                         src.size(), src_valid, dec_input.size());
    model.eval();
    ag::NoGradGuard no_grad;
    const Tensor lens = core::from_vector(std::vector<int64_t>{src_valid}, {1});
    model.forward(row_of(src), row_of(dec_input), lens);  // teacher forcing, as in training
    // each module kept its weights (B·H, ., .) with B = 1: (H, ., .), copied out of it
    AttentionMaps maps;
    for (const Tensor& w : model.encoder->attention_weights()) maps.encoder.push_back(w.clone());
    const auto decoder = model.decoder->attention_weights();
    for (const Tensor& w : decoder[0]) maps.decoder_self.push_back(w.clone());
    for (const Tensor& w : decoder[1]) maps.decoder_cross.push_back(w.clone());
    return maps;
}

std::vector<BlockStep> encoder_block_steps(nn::EncoderDecoder& model, const std::vector<int64_t>& src,
                                           int64_t src_valid, int64_t layer) {
    nn::TransformerEncoder& encoder = *model.encoder;
    const auto layers = static_cast<int64_t>(encoder.blks->size());
    if (layer < 0 || layer >= layers)
        fail<ValueError>("encoder_block_steps: layer {} out of range for an encoder of {} blocks", layer, layers);
    if (src.empty() || src_valid < 1 || src_valid > static_cast<int64_t>(src.size()))
        fail<ValueError>("encoder_block_steps: {} source ids with {} valid", src.size(), src_valid);
    model.eval();
    ag::NoGradGuard no_grad;
    const nn::TransformerOptions& o = encoder.options;
    const int64_t H = o.num_heads;
    const double scale = o.scale_embedding ? std::sqrt(static_cast<double>(o.num_hiddens)) : 1.0;
    const Tensor lens = core::from_vector(std::vector<int64_t>{src_valid}, {1});
    std::vector<BlockStep> steps;
    auto add = [&](const char* name, std::string title, const char* formula, const char* section, const Variable& v) {
        steps.push_back({name, std::move(title), formula, section, v.value().contiguous()});
    };

    // the block's input: the embedding for block 0, else the blocks before it
    Variable X = encoder.pos_encoding->forward_embedded(*encoder.embedding, row_of(src), scale);  // (1, S, D)
    for (int64_t i = 0; i < layer; ++i) X = (*encoder.blks)[static_cast<size_t>(i)].forward(X, lens);
    if (layer == 0)
        add("input", o.scale_embedding ? "Embedding × √D + positional encoding" : "Embedding + positional encoding",
            o.scale_embedding ? "X = embedding(ids) · √D + P" : "X = embedding(ids) + P",
            "seed 000 · 代码实现 › 编码器 (TransformerEncoder); seed 002 · 1.2.2 位置 Embedding", ag::squeeze(X, 0));
    else
        add("input", fmt::format("The output of block {}", layer - 1), "X = block(X)",
            "seed 000 · 代码实现 › 编码器 (the blocks stacked)", ag::squeeze(X, 0));

    // multi-head self-attention, as d2l's MultiHeadAttention with transpose_qkv (B = 1: rows are heads)
    nn::EncoderBlock& blk = (*encoder.blks)[static_cast<size_t>(layer)];
    nn::MultiHeadAttention& attention = *blk.attention;
    const Variable q = nn::transpose_qkv((*attention.W_q)(X), H);  // (H, S, d)
    const Variable k = nn::transpose_qkv((*attention.W_k)(X), H);
    const Variable v = nn::transpose_qkv((*attention.W_v)(X), H);
    const char* qkv_section = "seed 000 · 代码实现 › 多头注意力 (transpose_qkv: the heads side by side)";
    add("queries", "Queries, per head", "Q_h = X W_q,hᵀ", qkv_section, q);
    add("keys", "Keys, per head", "K_h = X W_k,hᵀ", qkv_section, k);
    add("values", "Values, per head", "V_h = X W_v,hᵀ", qkv_section, v);
    const double d = static_cast<double>(q.shape()[2]);
    const Variable scores = ag::div(ag::matmul(q, ag::transpose(k, 1, 2)), std::sqrt(d));  // (H, S, S)
    add("scores", "Scaled scores, per head", "Q_h K_hᵀ / √d",
        "seed 003 · 缩放点积注意力 (scaled dot-product attention)", scores);
    const Variable weights = nn::masked_softmax(scores, core::full({H}, static_cast<double>(src_valid),
                                                                   core::DType::int64));  // (H, S, S)
    add("weights", "Attention weights (masked softmax)", "softmax over the valid keys of each row; padding gets 0",
        "seed 003 · 掩蔽softmax操作 (the masked softmax)", weights);
    const Variable heads = ag::matmul(weights, v);                               // (H, S, d)
    const Variable attended = (*attention.W_o)(nn::transpose_output(heads, H));  // (1, S, D)
    add("attention", "Heads joined and projected", "concat_h(weights_h V_h) W_oᵀ",
        "seed 000 · 代码实现 › 多头注意力 (transpose_output, W_o)", ag::squeeze(attended, 0));

    const Variable Y = (*blk.addnorm1)(X, attended);  // (1, S, D)
    add("addnorm1", "Add & Norm", "Y = LayerNorm(X + attention)", "seed 000 · 代码实现 › 残差规范化 (AddNorm)",
        ag::squeeze(Y, 0));
    const Variable hidden = (*blk.ffn->relu)((*blk.ffn->dense1)(Y));  // (1, S, F)
    add("ffn_hidden", "Feed-forward: hidden layer", "max(0, Y W_1ᵀ + b_1)",
        "seed 000 · 代码实现 › 前馈网络 (PositionWiseFFN)", ag::squeeze(hidden, 0));
    const Variable ffn = (*blk.ffn->dense2)(hidden);  // (1, S, D)
    add("ffn", "Feed-forward: output", "hidden W_2ᵀ + b_2", "seed 000 · 代码实现 › 前馈网络 (PositionWiseFFN)",
        ag::squeeze(ffn, 0));
    const Variable out = (*blk.addnorm2)(Y, ffn);  // (1, S, D)
    add("addnorm2", "Add & Norm: the block's output", "LayerNorm(Y + FFN(Y))",
        "seed 000 · 代码实现 › 编码器块 (EncoderBlock)", ag::squeeze(out, 0));
    return steps;
}

}  // namespace tformer::tasks
