// Tutorial 10 · The position-wise feed-forward network and the encoder block.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 基于位置的前馈网络
// ("等价于两层核窗口为1的一维卷积层") and 代码实现 › 前馈网络, 编码器块,
// 编码器 (PositionWiseFFN, EncoderBlock, TransformerEncoder); seed 002
// (002_36798a9f04a86cc8.txt), 3.2 Feed Forward (FFN(X) = max(0, XW1 + b1)W2 + b2,
// "kernal_size = 1 的两个 1×1 卷积层") and 3.3 EncoderLayer; seed 001's
// _feed_forward (tf.layers.conv1d with kernel_size 1).
// Read it with tutorials/10_ffn_encoder_block/README.md.
#include "autograd/autograd.hpp"
#include "common/tutorial.hpp"
#include "core/core.hpp"
#include "nn/transformer.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

using namespace tformer;
namespace ag = tformer::autograd;
namespace c = tformer::core;
using ag::Variable;
using c::DType;
using tutorial::note;
using tutorial::show;

namespace {

// A 1-D convolution written as the loop it is (PyTorch's Conv1d layout,
// channels first): x (B, C_in, T), weight (C_out, C_in, k), bias (C_out),
// no padding -> y (B, C_out, T - k + 1) with
//   y[b, o, t] = bias[o] + Σ_c Σ_j weight[o, c, j] · x[b, c, t + j].
// The same weight is used at every position t: that is what "convolution" means.
c::Tensor conv1d_by_loop(const c::Tensor& x, const c::Tensor& weight, const c::Tensor& bias) {
    const int64_t B = x.size(0), C_in = x.size(1), T = x.size(2);
    const int64_t C_out = weight.size(0), k = weight.size(2), T_out = T - k + 1;
    c::Tensor y = c::zeros({B, C_out, T_out}, DType::float64);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T_out; ++t)      // every position ...
            for (int64_t o = 0; o < C_out; ++o) {  // ... with the same weights
                double s = bias.at({o});
                for (int64_t ci = 0; ci < C_in; ++ci)
                    for (int64_t j = 0; j < k; ++j) s += weight.at({o, ci, j}) * x.at({b, ci, t + j});
                y.set({b, o, t}, s);
            }
    return y;
}

// For the length of one call, points some parameter members of a module at
// other Variables (those gradcheck passes to f), and puts them back after.
class Borrow {
public:
    Borrow(std::vector<Variable*> members, const std::vector<Variable>& replacements) : members_(std::move(members)) {
        for (size_t i = 0; i < members_.size(); ++i) saved_.push_back(std::exchange(*members_[i], replacements[i]));
    }
    ~Borrow() {
        for (size_t i = 0; i < members_.size(); ++i) *members_[i] = saved_[i];
    }
    Borrow(const Borrow&) = delete;
    Borrow& operator=(const Borrow&) = delete;

private:
    std::vector<Variable*> members_;
    std::vector<Variable> saved_;
};

double max_abs(const c::Tensor& x) { return c::max(c::abs(x)).item(); }

}  // namespace

int main(int argc, char** argv) {
    tutorial::Tutorial t(argc, argv,
                         {.title = "tformer tutorial 10 · The feed-forward network and the encoder block",
                          .follows = "seed 000 基于位置的前馈网络, 编码器块, 编码器; seed 002 3.2–3.3; seed 001 _feed_forward"});
    c::Generator gen(10);

    t.step("1. PositionWiseFFN: the same MLP at every position", [&] {
        note("Seed 000: the feed-forward network reshapes (b, n, d) to (bn, d), applies two dense layers with "
             "a ReLU between them to every row, and reshapes back. Seed 002 writes it per position as\n"
             "    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2\n"
             "d2l's example: PositionWiseFFN(4, 4, 8) on a (2, 3, 4) tensor of ones.");
        nn::PositionWiseFFN ffn({.ffn_num_input = 4, .ffn_num_hiddens = 4, .ffn_num_outputs = 8}, gen);
        ffn.to(DType::float64);
        const c::Tensor out = ffn(Variable(c::ones({2, 3, 4}, DType::float64))).value();
        show("ffn(ones(2, 3, 4))[0, :, :4]", out.select(0, 0).slice(1, 0, 4));
        t.check(out.shape() == c::Shape{2, 3, 8}, "(2, 3, 4) -> (2, 3, 8): only the last dimension changes");
        bool identical = true;
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t p = 0; p < 3; ++p) identical = identical && max_abs(c::sub(out.select(0, b).select(0, p), out.select(0, 0).select(0, 0))) == 0;
        t.check(identical, "all 6 positions got the same input, so all 6 outputs are equal");

        note("\nWith a random input, one position by hand (Linear weights are stored (out, in), so "
             "seed 002's W_1 is dense1.weightᵀ):");
        const c::Tensor X = c::randn({2, 3, 4}, gen, DType::float64);
        const c::Tensor Y = ffn(Variable(X)).value();
        const c::Tensor x = X.select(0, 1).select(0, 2).unsqueeze(0);  // (1, 4): sequence 1, position 2
        const c::Tensor h = c::relu(c::add(c::matmul(x, ffn.dense1->weight.value().transpose(0, 1)), ffn.dense1->bias.value()));
        const c::Tensor y = c::add(c::matmul(h, ffn.dense2->weight.value().transpose(0, 1)), ffn.dense2->bias.value());
        show("max(0, x W_1 + b_1) W_2 + b_2", y);
        t.check_close(y.select(0, 0), Y.select(0, 1).select(0, 2), 1e-15, "equals ffn(X)[1, 2]");
        const c::Tensor longer = c::randn({1, 7, 4}, gen, DType::float64);
        t.check(ffn(Variable(longer)).shape() == c::Shape{1, 7, 8},
                "the same layer takes 7 positions as well as 3: nothing in it depends on the length");
    });

    t.step("2. A convolution with kernel size 1", [&] {
        note("Seed 000 and seed 002: the FFN is equivalent to two 1-D convolutions with kernel size 1, and "
             "seed 001's _feed_forward is written exactly so (tf.layers.conv1d, kernel_size 1). A convolution "
             "slides one set of weights along the sequence; with kernel size 1 the window is a single "
             "position, so it is a dense layer applied at every position. Below, conv1d written as an "
             "explicit loop over positions (PyTorch's Conv1d: input (B, C, T), weight (C_out, C_in, k)) with "
             "the FFN's weights reshaped to kernel size 1, dense.weight (out, in) -> (out, in, 1):");
        nn::PositionWiseFFN ffn({.ffn_num_input = 4, .ffn_num_hiddens = 6, .ffn_num_outputs = 4}, gen);
        ffn.to(DType::float64);
        const c::Tensor X = c::randn({2, 5, 4}, gen, DType::float64);  // (B, T, C)
        const c::Tensor W1 = ffn.dense1->weight.value().unsqueeze(2), W2 = ffn.dense2->weight.value().unsqueeze(2);
        const c::Tensor hidden = c::relu(conv1d_by_loop(X.transpose(1, 2), W1, ffn.dense1->bias.value()));  // (B, 6, T)
        const c::Tensor conv = conv1d_by_loop(hidden, W2, ffn.dense2->bias.value()).transpose(1, 2);        // (B, T, 4)
        note("    X (B, T, C) = {}  ->  transpose (B, C, T) = {}\n    ->  conv, relu (B, 6, T)  ->  conv (B, 4, T)  "
             "->  transpose (B, T, 4)", c::shape_str(X.shape()), c::shape_str(X.transpose(1, 2).shape()));
        t.check_close(conv, ffn(Variable(X)).value(), 1e-14, "conv1d(relu(conv1d(X))) with kernel size 1 == PositionWiseFFN(X)");

        note("\nNo mixing between positions: changing the input at position 2 changes the output at position "
             "2 only. A kernel of size 3 (same layer, a wider window) would mix neighbours:");
        c::Tensor X2 = X.clone();
        X2.set({0, 2, 1}, X2.at({0, 2, 1}) + 1.0);
        const c::Tensor change = c::abs(c::sub(ffn(Variable(X2)).value(), ffn(Variable(X)).value())).select(0, 0);  // (T, 4)
        const c::Tensor per_position = c::max(change, {1});
        show("kernel 1: |change| per position", per_position);
        const c::Tensor W3 = c::randn({4, 4, 3}, gen, DType::float64), b3 = c::zeros({4}, DType::float64);
        const c::Tensor wide = c::max(c::abs(c::sub(conv1d_by_loop(X2.transpose(1, 2), W3, b3),
                                                    conv1d_by_loop(X.transpose(1, 2), W3, b3))).select(0, 0),
                                      {0});  // (T - 2): output t reads inputs t, t+1, t+2
        show("kernel 3: |change| per output position", wide);
        t.check(per_position.at({2}) > 0 && per_position.at({0}) == 0 && per_position.at({1}) == 0 &&
                    per_position.at({3}) == 0 && per_position.at({4}) == 0,
                "kernel 1: only output position 2 moves");
        t.check(wide.at({0}) > 0 && wide.at({1}) > 0 && wide.at({2}) > 0,
                "kernel 3: outputs 0, 1 and 2 all read input position 2");
    });

    t.step("3. EncoderBlock: attention + AddNorm, FFN + AddNorm", [&] {
        note("Seed 000's encoder block (seed 002's EncoderLayer, seed 004's Encoder):\n"
             "    Y   = AddNorm(X, MultiHeadAttention(X, X, X, valid_lens))\n"
             "    out = AddNorm(Y, PositionWiseFFN(Y))\n"
             "d2l's example: X of shape (2, 100, 24), valid lengths [3, 2], 8 heads, FFN hidden size 48, "
             "dropout 0.5 (off in eval mode). d2l passes norm_shape = [100, 24], normalising over both the "
             "positions and the features; nn::LayerNorm normalises over the last dimension only (the "
             "usual choice, and d2l's own later chapters use [24]), so norm_shape is 24 here.");
        const nn::TransformerOptions options{.key_size = 24, .query_size = 24, .value_size = 24, .num_hiddens = 24,
                                             .norm_shape = 24, .ffn_num_input = 24, .ffn_num_hiddens = 48,
                                             .num_heads = 8, .num_layers = 2, .dropout = 0.5};
        nn::EncoderBlock blk(options, gen);
        blk.eval();
        const Variable X(c::randn({2, 100, 24}, gen));
        const c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{3, 2}, {2});

        const Variable attn = blk.attention->forward(X, X, X, valid_lens);
        const Variable Y = (*blk.addnorm1)(X, attn);
        const Variable hidden = (*blk.ffn->relu)((*blk.ffn->dense1)(Y));
        const Variable F = (*blk.ffn->dense2)(hidden);
        const Variable out = (*blk.addnorm2)(Y, F);
        note("    X {}  attention {}  addnorm1 {}\n    ffn hidden {}  ffn {}  addnorm2 {}", c::shape_str(X.shape()),
             c::shape_str(attn.shape()), c::shape_str(Y.shape()), c::shape_str(hidden.shape()),
             c::shape_str(F.shape()), c::shape_str(out.shape()));
        t.check_close(blk.forward(X, valid_lens).value(), out.value(), 0, "blk.forward(X, valid_lens) is exactly these calls");
        t.check(out.shape() == X.shape(), "the block keeps the shape (2, 100, 24), so blocks can be stacked");
        t.check_close(c::mean(out.value(), {2}), c::zeros({2, 100}), 1e-5, "every position of the output has mean 0 (the last AddNorm)");

        const c::Tensor w = blk.attention->attention_weights();  // (B·H, 100, 100)
        t.check(w.shape() == c::Shape{16, 100, 100}, "attention weights (B·H, T, T) = (16, 100, 100)");
        t.check(max_abs(w.slice(0, 0, 8).slice(2, 3, 100)) == 0 && max_abs(w.slice(0, 8, 16).slice(2, 2, 100)) == 0,
                "keys beyond the valid lengths (3 for sequence 0, 2 for sequence 1) get exactly 0 in every head");
        note("The 97 padded positions of sequence 0 are still computed (as queries they attend to the 3 "
             "valid keys), but nothing downstream uses them: the next block masks them as keys again, and the "
             "decoder's cross-attention masks them with the same valid lengths.");

        note("\nThe parameters, with seed 000's names:");
        for (const auto& [name, p] : blk.named_parameters()) note("    {:<26} {}", name, c::shape_str(p.shape()));
        const int64_t expected = 4 * 24 * 24 + (24 * 48 + 48) + (48 * 24 + 24) + 2 * (24 + 24);
        t.check(blk.num_parameters() == expected,
                fmt::format("4·24·24 (attention, no bias) + 24·48+48 + 48·24+24 (FFN) + 2·(24+24) (LayerNorms) = {}", expected));

        note("\nTransformerEncoder stacks such blocks after embedding × √d + positional encoding (d2l: vocabulary "
             "200, 2 blocks, token ids of shape (2, 100)):");
        nn::TransformerEncoder encoder(200, options, gen);
        encoder.eval();
        const Variable enc = encoder.forward(c::ones({2, 100}, DType::int64), valid_lens);
        note("    encoder(ones (2, 100), [3, 2]) -> {}, one (16, 100, 100) weight tensor per block",
             c::shape_str(enc.shape()));
        t.check(enc.shape() == c::Shape{2, 100, 24} && encoder.attention_weights().size() == 2,
                "(2, 100) token ids -> (2, 100, 24), and the weights of both blocks are kept for heatmaps");
    });

    t.step("4. gradcheck of a tiny EncoderBlock in float64", [&] {
        note("A block is built only from ops whose backward functions are tested one by one (tutorial 03). "
             "gradcheck on the whole block checks that they are put together right: D = 4, 2 heads, FFN "
             "hidden size 6, dropout 0, two sequences of 3 positions with valid lengths [3, 2].");
        const nn::TransformerOptions tiny{.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4,
                                          .norm_shape = 4, .ffn_num_input = 4, .ffn_num_hiddens = 6,
                                          .num_heads = 2, .num_layers = 1, .dropout = 0.0};
        nn::EncoderBlock blk(tiny, gen);
        blk.to(DType::float64);
        const c::Tensor lens = c::from_vector(std::vector<int64_t>{3, 2}, {2});
        const Variable X(c::randn({2, 3, 4}, gen, DType::float64), true);

        const ag::GradcheckResult wrt_x = ag::gradcheck([&](const std::vector<Variable>& in) { return blk.forward(in[0], lens); }, {X});
        if (!wrt_x.passed) tutorial::quote(wrt_x.report);
        t.check(wrt_x.passed, "d out / d X: the 24 × 24 Jacobian from backward() matches central differences");

        note("gradcheck differentiates with respect to the Variables it hands to f, so to check the "
             "parameters too, f points the block's members at those Variables for the length of one forward:");
        std::vector<Variable*> members = {&blk.attention->W_q->weight, &blk.ffn->dense1->weight, &blk.addnorm2->ln->weight};
        std::vector<Variable> inputs = {X};
        for (Variable* m : members) inputs.push_back(*m);
        const ag::GradcheckResult wrt_params = ag::gradcheck(
            [&](const std::vector<Variable>& in) {
                Borrow borrow(members, std::vector<Variable>(in.begin() + 1, in.end()));
                return blk.forward(in[0], lens);
            },
            inputs);
        if (!wrt_params.passed) tutorial::quote(wrt_params.report);
        t.check(wrt_params.passed, "and with respect to attention.W_q.weight (4, 4), ffn.dense1.weight (6, 4), addnorm2.ln.weight (4)");

        note("\nThe mask shows up in the gradient. Sequence 1 has 2 valid positions, so position 2 is never a "
             "key for anyone else: the outputs at positions 0 and 1 cannot depend on X[1, 2]. And sequences "
             "never see each other. One backward from those outputs, seeded with random weights r: "
             "d(Σ r · out[1, 0:2]) / dX. (Not with ones: a LayerNorm output always sums to 0 over its "
             "features, so the gradient of its plain sum is 0 everywhere.)");
        const Variable out = blk.forward(X, lens);
        c::Tensor seed = c::zeros({2, 3, 4}, DType::float64);
        c::copy_(seed.select(0, 1).slice(0, 0, 2), c::randn({2, 4}, gen, DType::float64));
        X.zero_grad();
        out.backward(seed);
        show("X.grad[1]", X.grad().select(0, 1));
        t.check(max_abs(X.grad().select(0, 1).select(0, 2)) == 0, "X.grad[1, 2] is exactly 0: a padded key is invisible");
        t.check(max_abs(X.grad().select(0, 0)) == 0, "X.grad[0] is exactly 0: sequence 0 does not influence sequence 1");
        t.check(max_abs(X.grad().select(0, 1).slice(0, 0, 2)) > 0, "while positions 0 and 1 of sequence 1 do");
    });

    return t.finish();
}
