#include "nn/transformer.hpp"

#include "autograd/autograd.hpp"

#include <cmath>

namespace tformer::nn {

namespace ag = tformer::autograd;

namespace {
MultiHeadAttention::Options attention_options(const TransformerOptions& o) {
    return {.key_size = o.key_size,
            .query_size = o.query_size,
            .value_size = o.value_size,
            .num_hiddens = o.num_hiddens,
            .num_heads = o.num_heads,
            .dropout = o.dropout,
            .bias = o.use_bias,
            .fused = o.fused};
}

AddNorm::Options addnorm_options(const TransformerOptions& o) {
    return {.normalized_shape = o.norm_shape, .dropout = o.dropout, .fused = o.fused};
}

PositionWiseFFN::Options ffn_options(const TransformerOptions& o) {
    return {.ffn_num_input = o.ffn_num_input,
            .ffn_num_hiddens = o.ffn_num_hiddens,
            .ffn_num_outputs = o.num_hiddens,
            .fused = o.fused};
}

// The attention weights each block keeps from the last forward (for
// heatmaps) are dropped before a new forward starts rather than as each
// block replaces its own. Kept, the last step's weights would stay live
// among the new step's activations until their blocks ran again, and the
// large tensors of each step would be placed around them differently (on
// base, 18 MB in 18 places, and the memory high-water mark would creep up
// from step to step); dropped, every step starts from the same free memory.
void forget_attention_weights(ModuleList<EncoderBlock>& blks) {
    for (auto& blk : blks) blk->attention->attention->attention_weights = {};
}
void forget_attention_weights(ModuleList<DecoderBlock>& blks) {
    for (auto& blk : blks) {
        blk->attention1->attention->attention_weights = {};
        blk->attention2->attention->attention_weights = {};
    }
}

// A stack's input: token ids (B, T).
void check_token_ids(const core::Tensor& X, const char* op) {
    check<ShapeError>(X.dim() == 2, "{}: token ids of shape {} must be (batch, steps)", op, X.shape());
}

// Seed 000: "因为位置编码值在-1和1之间，因此嵌入值乘以嵌入维度的平方根进行放大":
// the positional encoding lies in [-1, 1], so the embeddings are scaled up
// by √D before the two are added.
Variable embed(Embedding& embedding, PositionalEncoding& pos_encoding, const core::Tensor& X,
               const TransformerOptions& o, int64_t start) {
    const double scale = o.scale_embedding ? std::sqrt(static_cast<double>(o.num_hiddens)) : 1.0;
    if (o.fused) return pos_encoding.forward_embedded(embedding, X, scale, start);  // the same, one node
    if (!o.scale_embedding) return pos_encoding(embedding(X), start);
    return pos_encoding(ag::mul(embedding(X), scale), start);
}

// Both stacks open with a token embedding and the positional encoding (seed 000).
std::shared_ptr<Embedding> make_embedding(int64_t vocab_size, const TransformerOptions& o, core::Generator& gen) {
    return std::make_shared<Embedding>(Embedding::Options{.num_embeddings = vocab_size, .embedding_dim = o.num_hiddens},
                                       gen);
}
std::shared_ptr<PositionalEncoding> make_pos_encoding(const TransformerOptions& o, core::Generator& gen) {
    return std::make_shared<PositionalEncoding>(
        PositionalEncoding::Options{.num_hiddens = o.num_hiddens, .dropout = o.dropout}, gen);
}

// The stack's num_layers blocks, block0, block1, ..., made in order by make(i).
template <class Block, class Make>
std::shared_ptr<ModuleList<Block>> make_blocks(const TransformerOptions& o, Make&& make) {
    auto blks = std::make_shared<ModuleList<Block>>();
    for (int64_t i = 0; i < o.num_layers; ++i) blks->push_back("block" + std::to_string(i), make(i));
    return blks;
}

// causal_valid_lens for T new steps after `offset` already decoded ones: new
// step t sees offset + t + 1 keys. (B, T) int64.
core::Tensor causal_lens_after(int64_t B, int64_t T, int64_t offset) {
    core::Tensor lens = core::Tensor::empty({B, T}, core::DType::int64);
    int64_t* p = lens.data<int64_t>();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) p[b * T + t] = offset + t + 1;
    return lens;
}
}  // namespace

// ---- PositionWiseFFN ---------------------------------------------------------------

PositionWiseFFN::PositionWiseFFN(Options o, core::Generator& gen) : UnaryModule("PositionWiseFFN"), options(o) {
    dense1 = register_module(
        "dense1", std::make_shared<Linear>(
                      Linear::Options{.in_features = o.ffn_num_input, .out_features = o.ffn_num_hiddens}, gen));
    relu = register_module("relu", std::make_shared<ReLU>());
    dense2 = register_module(
        "dense2", std::make_shared<Linear>(
                      Linear::Options{.in_features = o.ffn_num_hiddens, .out_features = o.ffn_num_outputs}, gen));
}

// Linear works on the last dimension whatever the leading ones are, which
// is exactly the (b, n, d) -> (bn, d) -> (b, n, d) reshape of seed 000.
Variable PositionWiseFFN::forward(const Variable& X) {
    if (options.fused) return (*dense2)(ag::linear_relu(X, dense1->weight, dense1->bias));  // the same, one node less
    return (*dense2)((*relu)((*dense1)(X)));
}

// ---- AddNorm -----------------------------------------------------------------------------

AddNorm::AddNorm(Options o, core::Generator& gen) : Module("AddNorm"), options(o) {
    dropout = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = o.dropout}, gen));
    ln = register_module(
        "ln", std::make_shared<LayerNorm>(LayerNorm::Options{.normalized_shape = o.normalized_shape, .eps = o.eps}));
}

Variable AddNorm::forward(const Variable& X, const Variable& Y) {
    check<ShapeError>(X.shape() == Y.shape(), "AddNorm: X of shape {} and Y of shape {} must match", X.shape(),
                      Y.shape());
    if (options.fused)  // the same, one node: dropout's mask drawn as dropout would draw it
        return ag::add_layer_norm(X, Y, dropout->keep_mask(Y.shape(), Y.dtype()), ln->weight, ln->bias,
                                  ln->options.eps);
    return (*ln)(ag::add((*dropout)(Y), X));  // ln(dropout(Y) + X)
}

// ---- TransformerOptions ---------------------------------------------------------------------

TransformerOptions TransformerOptions::with_width(int64_t d) const {
    TransformerOptions o = *this;
    o.key_size = o.query_size = o.value_size = o.num_hiddens = o.norm_shape = o.ffn_num_input = d;
    return o;
}

// ---- EncoderBlock ---------------------------------------------------------------------------

EncoderBlock::EncoderBlock(const TransformerOptions& o, core::Generator& gen) : Module("EncoderBlock") {
    attention = register_module("attention", std::make_shared<MultiHeadAttention>(attention_options(o), gen));
    addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(addnorm_options(o), gen));
    ffn = register_module("ffn", std::make_shared<PositionWiseFFN>(ffn_options(o), gen));
    addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(addnorm_options(o), gen));
}

Variable EncoderBlock::forward(const Variable& X, const core::Tensor& valid_lens) {
    Variable Y = (*addnorm1)(X, attention->forward(X, X, X, valid_lens));  // (B, S, D)
    return (*addnorm2)(Y, (*ffn)(Y));
}

// ---- TransformerEncoder -------------------------------------------------------------------------

TransformerEncoder::TransformerEncoder(int64_t vocab_size, const TransformerOptions& o, core::Generator& gen)
    : Module("TransformerEncoder"), options(o) {
    embedding = register_module("embedding", make_embedding(vocab_size, o, gen));
    pos_encoding = register_module("pos_encoding", make_pos_encoding(o, gen));
    blks = register_module(
        "blks", make_blocks<EncoderBlock>(o, [&](int64_t) { return std::make_shared<EncoderBlock>(o, gen); }));
}

Variable TransformerEncoder::forward(const core::Tensor& X, const core::Tensor& valid_lens) {
    check_token_ids(X, "TransformerEncoder");
    forget_attention_weights(*blks);
    Variable H = embed(*embedding, *pos_encoding, X, options, 0);  // (B, S, D)
    for (auto& blk : *blks) H = blk->forward(H, valid_lens);
    return H;
}

std::vector<core::Tensor> TransformerEncoder::attention_weights() const {
    std::vector<core::Tensor> out;
    for (size_t i = 0; i < blks->size(); ++i) out.push_back((*blks)[i].attention->attention_weights());
    return out;
}

// ---- DecoderBlock ---------------------------------------------------------------------------------

DecoderBlock::DecoderBlock(const TransformerOptions& o, int64_t index, core::Generator& gen)
    : Module("DecoderBlock"), i(index) {
    // seed 000 builds the decoder's attention with the default bias=False
    MultiHeadAttention::Options ao = attention_options(o);
    attention1 = register_module("attention1", std::make_shared<MultiHeadAttention>(ao, gen));
    addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(addnorm_options(o), gen));
    attention2 = register_module("attention2", std::make_shared<MultiHeadAttention>(ao, gen));
    addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(addnorm_options(o), gen));
    ffn = register_module("ffn", std::make_shared<PositionWiseFFN>(ffn_options(o), gen));
    addnorm3 = register_module("addnorm3", std::make_shared<AddNorm>(addnorm_options(o), gen));
}

Variable DecoderBlock::forward(const Variable& X, const DecoderState& state) {
    const int64_t B = X.size(0), T = X.size(1);
    // masked self-attention: the keys and values are X itself, position t sees ≤ t
    Variable X2 = attention1->forward(X, X, X, causal_valid_lens(B, T));
    Variable Y = (*addnorm1)(X, X2);
    // encoder–decoder attention: queries from the target, keys/values from the source
    Variable Y2 = attention2->forward(Y, state.enc_outputs, state.enc_outputs, state.enc_valid_lens);
    Variable Z = (*addnorm2)(Y, Y2);
    return (*addnorm3)(Z, (*ffn)(Z));
}

Variable DecoderBlock::forward_step(const Variable& X, DecoderState& state) {
    DecoderState::BlockCache& cache = state.caches.at(static_cast<size_t>(i));
    const int64_t B = X.size(0), t = X.size(1);
    // The new steps attend to every cached step and, causally, to each other:
    // new step j (0-based) sees steps_done + j + 1 keys.
    const core::Tensor lens = t == 1 ? core::Tensor() : causal_lens_after(B, t, state.steps_done);
    Variable X2 = attention1->forward_step(X, X, X, lens, cache.self, /*append=*/true);
    Variable Y = (*addnorm1)(X, X2);
    // the encoder outputs are projected on the first step and reused afterwards
    const bool first = !cache.cross.keys.defined();
    Variable Y2 = attention2->forward_step(Y, state.enc_outputs, state.enc_outputs, state.enc_valid_lens, cache.cross,
                                           /*append=*/first, first ? std::span<const int64_t>() : state.cross_rows);
    Variable Z = (*addnorm2)(Y, Y2);
    return (*addnorm3)(Z, (*ffn)(Z));
}

// ---- TransformerDecoder --------------------------------------------------------------------------------

TransformerDecoder::TransformerDecoder(int64_t vocab_size, const TransformerOptions& o, core::Generator& gen)
    : Module("TransformerDecoder"), options(o) {
    embedding = register_module("embedding", make_embedding(vocab_size, o, gen));
    pos_encoding = register_module("pos_encoding", make_pos_encoding(o, gen));
    blks = register_module(
        "blks", make_blocks<DecoderBlock>(o, [&](int64_t i) { return std::make_shared<DecoderBlock>(o, i, gen); }));
    dense = register_module(
        "dense",
        std::make_shared<Linear>(Linear::Options{.in_features = o.num_hiddens, .out_features = vocab_size}, gen));
}

DecoderState TransformerDecoder::init_state(const Variable& enc_outputs, const core::Tensor& enc_valid_lens) const {
    DecoderState state;
    state.enc_outputs = enc_outputs;
    state.enc_valid_lens = enc_valid_lens;
    state.caches.resize(blks->size());
    return state;
}

Variable TransformerDecoder::forward(const core::Tensor& X, const DecoderState& state) {
    return (*dense)(forward_hidden(X, state));  // (B, T, V)
}

Variable TransformerDecoder::forward_hidden(const core::Tensor& X, const DecoderState& state) {
    check_token_ids(X, "TransformerDecoder");
    forget_attention_weights(*blks);
    Variable H = embed(*embedding, *pos_encoding, X, options, 0);  // (B, T, D)
    for (auto& blk : *blks) H = blk->forward(H, state);
    return H;  // (B, T, D)
}

Variable TransformerDecoder::forward_step(const core::Tensor& X, DecoderState& state) {
    return (*dense)(forward_step_hidden(X, state));  // (B, t, V)
}

Variable TransformerDecoder::forward_step_hidden(const core::Tensor& X, DecoderState& state) {
    check_token_ids(X, "TransformerDecoder");
    if (state.caches.size() != blks->size())
        fail<ValueError>("TransformerDecoder: the state has {} block caches for {} blocks; make it with init_state",
                         state.caches.size(), blks->size());
    Variable H = embed(*embedding, *pos_encoding, X, options, state.steps_done);  // (B, t, D)
    for (auto& blk : *blks) H = blk->forward_step(H, state);
    state.steps_done += X.size(1);
    return H;  // (B, t, D)
}

std::vector<std::vector<core::Tensor>> TransformerDecoder::attention_weights() const {
    std::vector<std::vector<core::Tensor>> out(2);
    for (size_t i = 0; i < blks->size(); ++i) {
        out[0].push_back((*blks)[i].attention1->attention_weights());
        out[1].push_back((*blks)[i].attention2->attention_weights());
    }
    return out;
}

// ---- EncoderDecoder ---------------------------------------------------------------------------------------

EncoderDecoder::EncoderDecoder(std::shared_ptr<TransformerEncoder> enc, std::shared_ptr<TransformerDecoder> dec)
    : Module("EncoderDecoder") {
    encoder = register_module("encoder", std::move(enc));
    decoder = register_module("decoder", std::move(dec));
}

Variable EncoderDecoder::forward(const core::Tensor& enc_X, const core::Tensor& dec_X,
                                 const core::Tensor& enc_valid_lens) {
    forget_attention_weights(*decoder->blks);  // the encoder's go in its forward
    Variable enc_outputs = encoder->forward(enc_X, enc_valid_lens);
    DecoderState state = decoder->init_state(enc_outputs, enc_valid_lens);
    return decoder->forward(dec_X, state);
}

Variable EncoderDecoder::forward_hidden(const core::Tensor& enc_X, const core::Tensor& dec_X,
                                        const core::Tensor& enc_valid_lens) {
    forget_attention_weights(*decoder->blks);  // the encoder's go in its forward
    Variable enc_outputs = encoder->forward(enc_X, enc_valid_lens);
    DecoderState state = decoder->init_state(enc_outputs, enc_valid_lens);
    return decoder->forward_hidden(dec_X, state);
}

}  // namespace tformer::nn
