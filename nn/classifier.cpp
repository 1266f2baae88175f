#include "nn/classifier.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/init.hpp"
#include "nn/loss.hpp"

namespace tformer::nn {

namespace ag = tformer::autograd;

namespace {
TransformerOptions encoder_options(const TransformerClassifier::Options& o) {
    return TransformerOptions{.ffn_num_hiddens = o.ffn_num_hiddens,
                              .num_heads = o.num_heads,
                              .num_layers = o.num_layers,
                              .dropout = o.dropout,
                              .use_bias = o.use_bias,
                              .scale_embedding = false}  // seed 001: embedded_words + embedded_position
        .with_width(o.num_hiddens);
}

void check_options(const TransformerClassifier::Options& o) {
    if (o.vocab_size <= 0 || o.num_classes <= 0 || o.max_len <= 0 || o.num_hiddens <= 0 || o.ffn_num_hiddens <= 0 ||
        o.num_heads <= 0 || o.num_layers < 0)
        fail<ValueError>(
            "TransformerClassifier: vocab_size {}, num_classes {}, max_len {}, num_hiddens {}, ffn_num_hiddens {} "
            "and num_heads {} must be positive and num_layers {} not negative",
            o.vocab_size, o.num_classes, o.max_len, o.num_hiddens, o.ffn_num_hiddens, o.num_heads, o.num_layers);
    if (o.num_hiddens % o.num_heads != 0)
        fail<ValueError>("TransformerClassifier: num_hiddens {} must be divisible by num_heads {}", o.num_hiddens,
                         o.num_heads);
    const int64_t table = PositionalEncoding::Options{}.max_len;  // the encoder's table has the default length
    if (o.max_len > table)
        fail<ValueError>("TransformerClassifier: max_len {} is beyond the positional table's {} positions", o.max_len,
                         table);
}

// valid_lens (B), int64, each in [1, T]: every sentence needs a token
core::Tensor checked_lengths(const core::Tensor& lens, int64_t B, int64_t T) {
    check<ShapeError>(lens.dim() == 1 && lens.size(0) == B && lens.dtype() == core::DType::int64,
                      "TransformerClassifier: valid_lens of shape {} and dtype {} must be int64 (B) = ({})",
                      lens.shape(), core::dtype_name(lens.dtype()), B);
    for (int64_t len : lens.to_vector<int64_t>())
        check(len >= 1 && len <= T,
              "TransformerClassifier: valid length {} not in [1, {}] (every sentence needs a token)", len, T);
    return lens;
}
}  // namespace

TransformerClassifier::TransformerClassifier(Options o, core::Generator& gen)
    : Module("TransformerClassifier"), options(o) {
    check_options(o);
    encoder = register_module("encoder", std::make_shared<TransformerEncoder>(o.vocab_size, encoder_options(o), gen));
    dropout = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = o.dropout}, gen));
    const int64_t pooled = o.pooling == Pooling::flatten ? o.max_len * o.num_hiddens : o.num_hiddens;
    output = register_module(
        "output", std::make_shared<Linear>(Linear::Options{.in_features = pooled, .out_features = o.num_classes}, gen));
    // seed 001: output_w with xavier_initializer, output_b = tf.constant(0.1)
    init::xavier_uniform_(output->weight, gen);
    init::constant_(output->bias, 0.1);
}

Variable TransformerClassifier::forward(const core::Tensor& X, const core::Tensor& valid_lens) {
    const ShapeCheck dims = ShapeCheck("TransformerClassifier").arg("token ids", X, "B T");
    const int64_t B = dims["B"], T = dims["T"];
    check<ShapeError>(options.pooling != Pooling::flatten || T == options.max_len,
                      "TransformerClassifier: flatten pooling needs exactly max_len = {} steps, got ids of shape {} "
                      "(pad or truncate the inputs to max_len)",
                      options.max_len, X.shape());
    check<ShapeError>(T >= 1 && T <= options.max_len,
                      "TransformerClassifier: ids of shape {} must have 1 to max_len = {} steps", X.shape(),
                      options.max_len);
    const core::Tensor lens = valid_lens.defined() ? checked_lengths(valid_lens, B, T)
                                                   : core::full({B}, static_cast<double>(T), core::DType::int64);

    Variable H = encoder->forward(X, lens);  // (B, T, D)
    // Padded steps must not reach the logits (seed 001's query mask).
    core::Tensor mask = sequence_mask(lens, T, H.dtype()).view({B, T, 1});
    H = ag::mul(H, Variable(mask));
    Variable pooled;
    if (options.pooling == Pooling::flatten) {
        pooled = ag::reshape(H, {B, T * options.num_hiddens});  // seed 001: tf.reshape(..., [-1, T·D])
    } else {
        Variable count(lens.to(H.dtype()).view({B, 1}));
        pooled = ag::div(ag::sum(H, {1}), count);  // (B, D)
    }
    return (*output)((*dropout)(pooled));
}

Variable TransformerClassifier::l2_loss() const {
    Variable l2 = ag::mul(ag::sum(ag::mul(output->weight, output->weight)), 0.5);
    if (output->bias.defined()) l2 = ag::add(l2, ag::mul(ag::sum(ag::mul(output->bias, output->bias)), 0.5));
    return l2;
}

Variable TransformerClassifier::loss(const Variable& logits, const core::Tensor& labels, double l2_reg_lambda) const {
    if (l2_reg_lambda < 0)
        fail<ValueError>("TransformerClassifier::loss: l2_reg_lambda {} must not be negative", l2_reg_lambda);
    Variable ce = ag::cross_entropy(logits, labels);
    if (l2_reg_lambda == 0) return ce;
    return ag::add(ce, ag::mul(l2_loss(), l2_reg_lambda));
}

}  // namespace tformer::nn
