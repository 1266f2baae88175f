// Tutorial 10 · The position-wise feed-forward network and the encoder block.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 基于位置的前馈网络
// ("等价于两层核窗口为1的一维卷积层") and 代码实现 › 前馈网络, 编码器块,
// 编码器 (PositionWiseFFN, EncoderBlock, TransformerEncoder); seed 002
// (002_36798a9f04a86cc8.txt), 3.2 Feed Forward (FFN(X) = max(0, XW1 + b1)W2 + b2,
// "kernal_size = 1 的两个 1×1 卷积层") and 3.3 EncoderLayer; seed 001's
// _feed_forward (tf.layers.conv1d with kernel_size 1). Steps 2b and 3b compare
// the FFN, nn.Conv1d and the EncoderBlock with PyTorch (tests/fixtures/);
// step 2c is seed 002's FFN with its inner dropout; step 5 builds the paper's
// N = 6, d = 512 encoder (seed 002 1.2 and 三 Encoder).
// Read it with tutorials/10_ffn_encoder_block/README.md.
// tutorial-languages: en zh
#include "common/compare.hpp"
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/transformer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using tutorial::max_abs;

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
        for (int64_t t = 0; t < T_out; ++t)        // every position ...
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

// What the steps share: one generator, drawn from in step order (steps 1 to 5 and the exercise).
struct Lesson {
    c::Generator gen{10};
};

// ---- the steps --------------------------------------------------------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 前馈网络 (PositionWiseFFN); seed 002 › 3.2 Feed Forward
void position_wise_ffn(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 000: the feed-forward network reshapes (b, n, d) to (bn, d), applies two dense layers with "
               "a ReLU between them to every row, and reshapes back. Seed 002 writes it per position as\n"
               "    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2\n"
               "d2l's example: PositionWiseFFN(4, 4, 8) on a (2, 3, 4) tensor of ones.",
         .zh =
             "种子文档 000：前馈网络把 (b, n, d) 变形为 (bn, d)，对每一行施加两个中间夹着 ReLU 的全连接层，再变形回去。"
             "种子文档 002 按每个位置写成\n"
             "    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2\n"
             "d2l 的例子：PositionWiseFFN(4, 4, 8) 作用于一个全为 1 的 (2, 3, 4) 张量。"});
    nn::PositionWiseFFN ffn({.ffn_num_input = 4, .ffn_num_hiddens = 4, .ffn_num_outputs = 8}, lesson.gen);
    ffn.to(DType::float64);
    const c::Tensor out = ffn(Variable(c::ones({2, 3, 4}, DType::float64))).value();
    show("ffn(ones(2, 3, 4))[0, :, :4]", out.select(0, 0).slice(1, 0, 4));
    t.check(out.shape() == c::Shape{2, 3, 8}, {.en = "(2, 3, 4) -> (2, 3, 8): only the last dimension changes",
                                               .zh = "(2, 3, 4) -> (2, 3, 8)：只有最后一维变了"});
    bool identical = true;
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t p = 0; p < 3; ++p)
            identical = identical && max_abs(c::sub(out.select(0, b).select(0, p), out.select(0, 0).select(0, 0))) == 0;
    t.check(identical, {.en = "all 6 positions got the same input, so all 6 outputs are equal",
                        .zh = "6 个位置的输入相同，所以 6 个输出都相等"});

    note({.en = "\nWith a random input, one position by hand (Linear weights are stored (out, in), so "
                "seed 002's W_1 is dense1.weightᵀ):",
          .zh = "\n换成随机输入，手算其中一个位置（Linear 的权重按 (out, in) 存放，所以种子文档 002 的 W_1 是 "
                "dense1.weightᵀ）："});
    const c::Tensor X = c::randn({2, 3, 4}, lesson.gen, DType::float64);
    const c::Tensor Y = ffn(Variable(X)).value();
    const c::Tensor x = X.select(0, 1).select(0, 2).unsqueeze(0);  // (1, 4): sequence 1, position 2
    const c::Tensor h =
        c::relu(c::add(c::matmul(x, ffn.dense1->weight.value().transpose(0, 1)), ffn.dense1->bias.value()));
    const c::Tensor y = c::add(c::matmul(h, ffn.dense2->weight.value().transpose(0, 1)), ffn.dense2->bias.value());
    show("max(0, x W_1 + b_1) W_2 + b_2", y);
    t.check_close(y.select(0, 0), Y.select(0, 1).select(0, 2), 1e-15,
                  {.en = "equals ffn(X)[1, 2]", .zh = "等于 ffn(X)[1, 2]"});
    const c::Tensor longer = c::randn({1, 7, 4}, lesson.gen, DType::float64);
    t.check(ffn(Variable(longer)).shape() == c::Shape{1, 7, 8},
            {.en = "the same layer takes 7 positions as well as 3: nothing in it depends on the length",
             .zh = "同一个层既能处理 3 个位置，也能处理 7 个：它里面没有任何东西依赖于长度"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 基于位置的前馈网络 (一维卷积); seed 001 › _feed_forward()
void ffn_as_kernel_1_convolution(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000 and seed 002: the FFN is equivalent to two 1-D convolutions with kernel size 1, and "
                "seed 001's _feed_forward is written exactly so (tf.layers.conv1d, kernel_size 1). A convolution "
                "slides one set of weights along the sequence; with kernel size 1 the window is a single "
                "position, so it is a dense layer applied at every position. Below, conv1d written as an "
                "explicit loop over positions (PyTorch's Conv1d: input (B, C, T), weight (C_out, C_in, k)) with "
                "the FFN's weights reshaped to kernel size 1, dense.weight (out, in) -> (out, in, 1):",
          .zh =
              "种子文档 000 和 002：前馈网络等价于两层卷积核大小为 1 的一维卷积，种子文档 001 的 _feed_forward 正是这样"
              "写的（tf.layers.conv1d，kernel_size 1）。卷积让同一组权重沿着序列滑动；卷积核大小为 1 时，窗口只有一个"
              "位置，所以它就是在每个位置上施加的同一个全连接层。下面把 conv1d 写成对各位置的显式循环（PyTorch 的 "
              "Conv1d：输入 (B, C, T)，权重 (C_out, C_in, k)），并把前馈网络的权重变形成卷积核大小 1，dense.weight "
              "(out, in) -> (out, in, 1)："});
    nn::PositionWiseFFN ffn({.ffn_num_input = 4, .ffn_num_hiddens = 6, .ffn_num_outputs = 4}, lesson.gen);
    ffn.to(DType::float64);
    const c::Tensor X = c::randn({2, 5, 4}, lesson.gen, DType::float64);  // (B, T, C)
    const c::Tensor W1 = ffn.dense1->weight.value().unsqueeze(2), W2 = ffn.dense2->weight.value().unsqueeze(2);
    const c::Tensor hidden = c::relu(conv1d_by_loop(X.transpose(1, 2), W1, ffn.dense1->bias.value()));  // (B, 6, T)
    const c::Tensor conv = conv1d_by_loop(hidden, W2, ffn.dense2->bias.value()).transpose(1, 2);        // (B, T, 4)
    note(both("    X (B, T, C) = {}  ->  transpose (B, C, T) = {}\n    ->  conv, relu (B, 6, T)  ->  conv (B, 4, T)  "
              "->  transpose (B, T, 4)"),
         c::shape_str(X.shape()), c::shape_str(X.transpose(1, 2).shape()));
    t.check_close(conv, ffn(Variable(X)).value(), 1e-14,
                  {.en = "conv1d(relu(conv1d(X))) with kernel size 1 == PositionWiseFFN(X)",
                   .zh = "卷积核大小为 1 时，conv1d(relu(conv1d(X))) == PositionWiseFFN(X)"});

    note({.en = "\nNo mixing between positions: changing the input at position 2 changes the output at position "
                "2 only. A kernel of size 3 (same layer, a wider window) would mix neighbours:",
          .zh = "\n位置之间互不混合：改变位置 2 的输入，只有位置 2 的输出会变。卷积核大小为 3（同样的层，更宽的窗口）"
                "就会把相邻位置混在一起："});
    c::Tensor X2 = X.clone();
    X2.set({0, 2, 1}, X2.at({0, 2, 1}) + 1.0);
    const c::Tensor change =
        c::abs(c::sub(ffn(Variable(X2)).value(), ffn(Variable(X)).value())).select(0, 0);  // (T, 4)
    const c::Tensor per_position = c::max(change, {1});
    show({.en = "kernel 1: |change| per position", .zh = "卷积核 1：每个位置的 |变化|"}, per_position);
    const c::Tensor W3 = c::randn({4, 4, 3}, lesson.gen, DType::float64), b3 = c::zeros({4}, DType::float64);
    const c::Tensor wide =
        c::max(c::abs(c::sub(conv1d_by_loop(X2.transpose(1, 2), W3, b3), conv1d_by_loop(X.transpose(1, 2), W3, b3)))
                   .select(0, 0),
               {0});  // (T - 2): output t reads inputs t, t+1, t+2
    show({.en = "kernel 3: |change| per output position", .zh = "卷积核 3：每个输出位置的 |变化|"}, wide);
    t.check(per_position.at({2}) > 0 && per_position.at({0}) == 0 && per_position.at({1}) == 0 &&
                per_position.at({3}) == 0 && per_position.at({4}) == 0,
            {.en = "kernel 1: only output position 2 moves", .zh = "卷积核 1：只有输出位置 2 变了"});
    t.check(wide.at({0}) > 0 && wide.at({1}) > 0 && wide.at({2}) > 0,
            {.en = "kernel 3: outputs 0, 1 and 2 all read input position 2",
             .zh = "卷积核 3：输出 0、1 和 2 都读到了输入位置 2"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 前馈网络 and nn.Conv1d, run by torch (tests/fixtures/)
void ffn_and_convolution_against_pytorch(Tutorial& t) {
    note({.en = "tests/fixtures/tutorial_layers.safetensors holds d2l's PositionWiseFFN(4, 4, 8) run by torch on "
                "ones (2, 3, 4) (d2l's printed example) and on random numbers, and nn.Conv1d with kernel sizes 1 and "
                "3, each with the gradients of sum(output · u):",
          .zh = "tests/fixtures/tutorial_layers.safetensors 存放着 torch 运行 d2l 的 PositionWiseFFN(4, 4, 8) 的结果，"
                "输入分别是全为 1 的 (2, 3, 4)（d2l 打印的例子）和随机数，还有卷积核大小为 1 和 3 的 nn.Conv1d，"
                "每个都带有 sum(output · u) 的梯度："});
    const tutorial::Reference ref("tutorial_layers");
    nn::PositionWiseFFN ffn({.ffn_num_input = 4, .ffn_num_hiddens = 4, .ffn_num_outputs = 8});
    ffn.load_state_dict(ref.params("ffn"));
    for (const std::string prefix : {"ffn_ones", "ffn"}) {
        for (const auto& [name, p] : ffn.named_parameters()) p.zero_grad();
        const Variable X(ref[prefix + ".input.X"], true);
        const Variable Y = ffn(X);
        ag::sum(Y * Variable(ref[prefix + ".input.upstream"])).backward();
        t.check_allclose(
            Y.value(), ref[prefix + ".output"], 1e-5,
            {.en = "{}: PositionWiseFFN's output matches torch's", .zh = "{}：PositionWiseFFN 的输出与 torch 的一致"},
            prefix);
        t.check_allclose(X.grad(), ref[prefix + ".grad.input.X"], 1e-4,
                         {.en = "{}: d/dX matches", .zh = "{}：d/dX 一致"}, prefix);
        for (const auto& [name, p] : ffn.named_parameters())
            t.check_allclose(p.grad(), ref[prefix + ".grad.param." + name], 1e-4,
                             {.en = "{}: d/d {} matches", .zh = "{}：d/d {} 一致"}, prefix, name);
    }
    for (const auto& [prefix, k] : {std::pair<std::string, int64_t>{"conv1", 1}, {"conv3", 3}}) {
        const c::Tensor x = ref[prefix + ".input.x"], w = ref[prefix + ".param.weight"],
                        b = ref[prefix + ".param.bias"];
        const int64_t pad = k / 2;
        c::Tensor padded = c::zeros({x.size(0), x.size(1), x.size(2) + 2 * pad}, DType::float64);
        c::copy_(padded.slice(2, pad, pad + x.size(2)), x.to(DType::float64));
        const c::Tensor y = conv1d_by_loop(padded, w.to(DType::float64), b.to(DType::float64));
        t.check_allclose(y, ref[prefix + ".output"], 1e-5,
                         {.en = "{}: step 2's conv1d loop (kernel {}, padding {}) matches nn.Conv1d",
                          .zh = "{}：第 2 步的 conv1d 循环（卷积核 {}，填充 {}）与 nn.Conv1d 一致"},
                         prefix, k, pad);
    }
    note({.en = "(The exercise asks for the convolution with autograd ops, gradients included.)",
          .zh = "（练习要求用 autograd 运算写出这个卷积，梯度也要对。）"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 3.2 Feed Forward (PositionwiseFeedForward: fc1, ReLU, dropout, fc2)
void seed002_ffn_with_dropout(Tutorial& t) {
    note({.en = "Seed 002's PositionwiseFeedForward is fc1 → ReLU → dropout(0.1) → fc2: unlike d2l's, it drops "
                "hidden units. nn.Dropout is inverted dropout (tutorial 09, step 5): in training each hidden unit "
                "is zeroed with probability p and the survivors are multiplied by 1/(1 - p), so the expected "
                "value is unchanged; in eval mode it does nothing. Built from library pieces around d2l's FFN:",
          .zh =
              "种子文档 002 的 PositionwiseFeedForward 是 fc1 → ReLU → dropout(0.1) → fc2：与 d2l 的不同，它会丢弃"
              "隐藏单元。nn.Dropout 是反向 dropout（inverted dropout，教程 09 第 5 步）：训练时每个隐藏单元以概率 p "
              "置零，留下的乘以 1/(1 - p)，所以期望值不变；评估模式下它什么也不做。下面用库里的部件围绕 d2l 的前馈网络"
              "搭出来："});
    c::Generator g(1002);  // a generator of its own: the later steps' numbers stay as they were
    nn::PositionWiseFFN ffn({.ffn_num_input = 8, .ffn_num_hiddens = 64, .ffn_num_outputs = 8}, g);
    nn::Dropout dropout({.p = 0.1}, g);
    auto seed002_ffn = [&](const Variable& x, bool training) {
        training ? dropout.train() : dropout.eval();
        return (*ffn.dense2)(dropout((*ffn.relu)((*ffn.dense1)(x))));
    };
    const Variable X(c::randn({4, 2500, 8}, g));  // 10,000 positions
    const c::Tensor hidden = (*ffn.relu)((*ffn.dense1)(X)).value();
    dropout.train();
    const c::Tensor dropped = dropout(Variable(hidden)).value();
    const c::Tensor alive = c::gt(hidden, 0.0), kept = c::gt(dropped, 0.0);
    const double n_alive = c::sum(alive.to(DType::float64)).item(), n_kept = c::sum(kept.to(DType::float64)).item();
    const double share = 1 - n_kept / n_alive;
    // dropped / hidden where a unit was kept (elsewhere 1/(1 - p), so min and max read the kept ones only)
    const c::Tensor ratio = c::where(kept, c::div(dropped, c::where(kept, hidden, c::ones(hidden.shape()))),
                                     c::full(hidden.shape(), 1 / 0.9));
    note({.en = "    of {:.0f} positive hidden values, {:.2f}% were zeroed; the kept ones were multiplied by {:.6f}",
          .zh = "    {:.0f} 个为正的隐藏值中，{:.2f}% 被置零；留下的乘以了 {:.6f}"},
         n_alive, 100 * share, c::max(ratio).item());
    t.check(std::abs(share - 0.1) < 0.005,
            {.en = "about p = 10% of the hidden units are dropped (within half a percent)",
             .zh = "大约 p = 10% 的隐藏单元被丢弃（误差在半个百分点以内）"});
    t.check_close(c::max(ratio).item(), 1 / 0.9, 1e-5,
                  {.en = "and the rest are scaled by 1/(1 - p) = 1.1111", .zh = "其余的乘以 1/(1 - p) = 1.1111"});
    t.check_close(c::min(ratio).item(), 1 / 0.9, 1e-5,
                  {.en = "all of them by the same factor", .zh = "全都乘以同一个因子"});
    t.check_close(seed002_ffn(X, false).value(), ffn(X).value(), 0,
                  {.en = "in eval mode it is exactly d2l's FFN", .zh = "评估模式下它恰好就是 d2l 的前馈网络"});
    c::Tensor mean_out = c::zeros({4, 2500, 8});
    for (int i = 0; i < 100; ++i) mean_out = c::add(mean_out, c::div(seed002_ffn(X, true).value(), 100.0));
    const double drift = c::mean(c::sub(mean_out, ffn(X).value())).item();
    t.check(std::abs(drift) < 0.01,
            {.en = "averaged over 100 training passes the output matches eval mode (mean difference {:.1e}): the "
                   "expected value is kept",
             .zh = "对 100 次训练模式的前向取平均，输出与评估模式一致（平均差 {:.1e}）：期望值保持不变"},
            drift);
}

// The block's forward as seed 000 writes it, call by call, on X (2, 100, 24) with valid lengths [3, 2].
void encoder_block_sublayers(Tutorial& t, nn::EncoderBlock& blk, const Variable& X, const c::Tensor& valid_lens) {
    const Variable attn = blk.attention->forward(X, X, X, valid_lens);
    const Variable Y = (*blk.addnorm1)(X, attn);
    const Variable hidden = (*blk.ffn->relu)((*blk.ffn->dense1)(Y));
    const Variable F = (*blk.ffn->dense2)(hidden);
    const Variable out = (*blk.addnorm2)(Y, F);
    note(both("    X {}  attention {}  addnorm1 {}\n    ffn hidden {}  ffn {}  addnorm2 {}"), c::shape_str(X.shape()),
         c::shape_str(attn.shape()), c::shape_str(Y.shape()), c::shape_str(hidden.shape()), c::shape_str(F.shape()),
         c::shape_str(out.shape()));
    t.check_close(
        blk.forward(X, valid_lens).value(), out.value(), 0,
        {.en = "blk.forward(X, valid_lens) is exactly these calls", .zh = "blk.forward(X, valid_lens) 正是这几次调用"});
    t.check(out.shape() == X.shape(), {.en = "the block keeps the shape (2, 100, 24), so blocks can be stacked",
                                       .zh = "这个块保持形状 (2, 100, 24) 不变，所以块可以堆叠"});
    t.check_close(c::mean(out.value(), {2}), c::zeros({2, 100}), 1e-5,
                  {.en = "every position of the output has mean 0 (the last AddNorm)",
                   .zh = "输出的每个位置均值为 0（最后一个 AddNorm）"});

    const c::Tensor w = blk.attention->attention_weights();  // (B·H, 100, 100)
    t.check(w.shape() == c::Shape{16, 100, 100},
            {.en = "attention weights (B·H, T, T) = (16, 100, 100)", .zh = "注意力权重 (B·H, T, T) = (16, 100, 100)"});
    t.check(max_abs(w.slice(0, 0, 8).slice(2, 3, 100)) == 0 && max_abs(w.slice(0, 8, 16).slice(2, 2, 100)) == 0,
            {.en = "keys beyond the valid lengths (3 for sequence 0, 2 for sequence 1) get exactly 0 in every head",
             .zh = "超出有效长度（序列 0 为 3，序列 1 为 2）的键，在每个头里的权重都恰好为 0"});
    note({.en = "The 97 padded positions of sequence 0 are still computed (as queries they attend to the 3 "
                "valid keys), but nothing downstream uses them: the next block masks them as keys again, and the "
                "decoder's cross-attention masks them with the same valid lengths.",
          .zh =
              "序列 0 的 97 个填充位置照样会被计算（作为查询，它们关注那 3 个有效的键），但下游没有谁用到它们：下一个块"
              "又会把它们作为键遮住，解码器的交叉注意力也用同样的有效长度遮住它们。"});
}

// The block's parameters by seed 000's names, counted by hand.
void encoder_block_parameters(Tutorial& t, const nn::EncoderBlock& blk) {
    note({.en = "\nThe parameters, with seed 000's names:", .zh = "\n各个参数，用种子文档 000 的名字："});
    for (const auto& [name, p] : blk.named_parameters()) note(both("    {:<26} {}"), name, c::shape_str(p.shape()));
    const int64_t expected = 4 * 24 * 24 + (24 * 48 + 48) + (48 * 24 + 24) + 2 * (24 + 24);
    t.check(blk.num_parameters() == expected,
            {.en = "4·24·24 (attention, no bias) + 24·48+48 + 48·24+24 (FFN) + 2·(24+24) (LayerNorms) = {}",
             .zh = "4·24·24（注意力，无偏置）+ 24·48+48 + 48·24+24（前馈网络）+ 2·(24+24)（层归一化）= {}"},
            expected);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器块 [sic]: the TransformerEncoder class, the encoder
void stacked_into_transformer_encoder(Tutorial& t, Lesson& lesson, const nn::TransformerOptions& options,
                                      const c::Tensor& valid_lens, int64_t block_parameters) {
    note({.en = "\nTransformerEncoder stacks such blocks after embedding × √d + positional encoding (d2l: vocabulary "
                "200, 2 blocks, token ids of shape (2, 100)). Seed 000 heads this code '编码器块' (encoder block) a "
                "second time, over the TransformerEncoder class: a slip, it is the encoder (编码器) that the blocks "
                "above are stacked into, with the embedding in front:",
          .zh = "\nTransformerEncoder 在“嵌入 × √d + 位置编码”之后堆叠这样的块（d2l：词表大小 200，2 个块，词元 id 的"
                "形状为 (2, 100)）。种子文档 000 在 TransformerEncoder 类这段代码上又用了一次标题“编码器块”：这是笔误，"
                "它是编码器，即把上面的块堆叠起来、前面再加上嵌入层："});
    nn::TransformerEncoder encoder(200, options, lesson.gen);
    encoder.eval();
    const Variable enc = encoder.forward(c::ones({2, 100}, DType::int64), valid_lens);
    note({.en = "    encoder(ones (2, 100), [3, 2]) -> {}, one (16, 100, 100) weight tensor per block",
          .zh = "    encoder(ones (2, 100), [3, 2]) -> {}，每个块一个 (16, 100, 100) 的权重张量"},
         c::shape_str(enc.shape()));
    t.check(enc.shape() == c::Shape{2, 100, 24} && encoder.attention_weights().size() == 2,
            {.en = "(2, 100) token ids -> (2, 100, 24), and the weights of both blocks are kept for heatmaps",
             .zh = "(2, 100) 的词元 id -> (2, 100, 24)，两个块的权重都保留下来，供画热力图"});
    bool has_embedding = false, has_second_block = false;
    for (const auto& [name, p] : encoder.named_parameters()) {
        has_embedding = has_embedding || name == "embedding.weight";
        has_second_block = has_second_block || name.starts_with("blks.block1.");
    }
    t.check(has_embedding && has_second_block && encoder.num_parameters() == 200 * 24 + 2 * block_parameters,
            {.en = "TransformerEncoder = embedding (200 × 24) + 2 encoder blocks: not one more block",
             .zh = "TransformerEncoder = 嵌入层 (200 × 24) + 2 个编码器块：并不是又一个块"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器块 (EncoderBlock), 编码器块 [sic] (TransformerEncoder)
void encoder_block(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000's encoder block (seed 002's EncoderLayer, seed 004's Encoder):\n"
                "    Y   = AddNorm(X, MultiHeadAttention(X, X, X, valid_lens))\n"
                "    out = AddNorm(Y, PositionWiseFFN(Y))\n"
                "d2l's example: X of shape (2, 100, 24), valid lengths [3, 2], 8 heads, FFN hidden size 48, "
                "dropout 0.5 (off in eval mode). d2l passes norm_shape = [100, 24], normalising over both the "
                "positions and the features; nn::LayerNorm normalises over the last dimension only (the "
                "usual choice, and d2l's own later chapters use [24]), so norm_shape is 24 here.",
          .zh =
              "种子文档 000 的编码器块（种子文档 002 的 EncoderLayer，种子文档 004 的 Encoder）：\n"
              "    Y   = AddNorm(X, MultiHeadAttention(X, X, X, valid_lens))\n"
              "    out = AddNorm(Y, PositionWiseFFN(Y))\n"
              "d2l 的例子：X 的形状为 (2, 100, 24)，有效长度 [3, 2]，8 个头，前馈网络隐藏层大小 48，dropout 0.5"
              "（评估模式下关闭）。d2l 传的是 norm_shape = [100, 24]，同时在位置和特征上归一化；nn::LayerNorm 只在最后"
              "一维上归一化（通常的做法，d2l 自己后面的章节也用 [24]），所以这里 norm_shape 为 24。"});
    const nn::TransformerOptions options = tutorial::block_options(
        {.num_hiddens = 24, .ffn_num_hiddens = 48, .num_heads = 8, .num_layers = 2, .dropout = 0.5});
    nn::EncoderBlock blk(options, lesson.gen);
    blk.eval();
    const Variable X(c::randn({2, 100, 24}, lesson.gen));
    const c::Tensor valid_lens = c::from_vector(std::vector<int64_t>{3, 2}, {2});
    encoder_block_sublayers(t, blk, X, valid_lens);
    encoder_block_parameters(t, blk);
    stacked_into_transformer_encoder(t, lesson, options, valid_lens, blk.num_parameters());
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器块, run by torch (tests/fixtures/encoder_block.safetensors)
void encoder_block_against_pytorch(Tutorial& t) {
    note({.en = "tests/fixtures/encoder_block.safetensors holds seed 000's EncoderBlock (D = 8, 2 heads, FFN 16, "
                "valid lengths [6, 3], training mode with dropout 0, LayerNorm scales and shifts moved away from 1 "
                "and 0) run by torch, with the gradients of sum(output · u) for the input and all 12 parameters:",
          .zh =
              "tests/fixtures/encoder_block.safetensors 存放着 torch 运行种子文档 000 的 EncoderBlock 的结果（D = 8，2 "
              "个头，前馈网络 16，有效长度 [6, 3]，训练模式、dropout 为 0，层归一化的缩放和平移挪离了 1 和 0），以及 "
              "sum(output · u) 对输入和全部 12 个参数的梯度："});
    const tutorial::Reference ref("encoder_block");
    const nn::TransformerOptions o = tutorial::block_options({.num_hiddens = 8, .ffn_num_hiddens = 16, .num_heads = 2});
    c::Generator g(1003);
    nn::EncoderBlock blk(o, g);
    blk.load_state_dict(ref.params(""));
    const Variable X(ref["input.X"], true);
    const Variable out = blk.forward(X, ref["input.valid_lens"]);
    ag::sum(out * Variable(ref["input.upstream"])).backward();
    t.check_allclose(out.value(), ref["output"], 1e-5,
                     {.en = "output (2, 6, 8) matches PyTorch's", .zh = "输出 (2, 6, 8) 与 PyTorch 的一致"});
    t.check_allclose(X.grad(), ref["grad.input.X"], 1e-4, {.en = "d/dX matches", .zh = "d/dX 一致"});
    const int params = static_cast<int>(blk.named_parameters().size());
    const int matched = tutorial::matching_gradients(t, blk, ref, 1e-4);
    t.check(matched == params && params == 12,
            {.en = "the gradients of all {} parameters match", .zh = "全部 {} 个参数的梯度都一致"}, params);
}

// The valid lengths [3, 2] of step 4's block, seen in its gradient: what a padded key and another sequence receive.
void mask_in_the_gradient(Tutorial& t, Lesson& lesson, nn::EncoderBlock& blk, const Variable& X,
                          const c::Tensor& lens) {
    note({.en = "\nThe mask shows up in the gradient. Sequence 1 has 2 valid positions, so position 2 is never a "
                "key for anyone else: the outputs at positions 0 and 1 cannot depend on X[1, 2]. And sequences "
                "never see each other. One backward from those outputs, seeded with random weights r: "
                "d(Σ r · out[1, 0:2]) / dX. (Not with ones: a LayerNorm output always sums to 0 over its "
                "features, so the gradient of its plain sum is 0 everywhere.)",
          .zh =
              "\n掩码在梯度里也看得出来。序列 1 有 2 个有效位置，所以位置 2 从来不是别人的键：位置 0 和 1 的输出不可能"
              "依赖于 X[1, 2]。而且不同序列之间互相看不见。从这些输出做一次反向传播，用随机权重 r 作为种子："
              "d(Σ r · out[1, 0:2]) / dX。（不用全 1：层归一化的输出在各特征上之和总是 0，所以它直接求和的梯度处处为 "
              "0。）"});
    const Variable out = blk.forward(X, lens);
    c::Tensor seed = c::zeros({2, 3, 4}, DType::float64);
    c::copy_(seed.select(0, 1).slice(0, 0, 2), c::randn({2, 4}, lesson.gen, DType::float64));
    X.zero_grad();
    out.backward(seed);
    show("X.grad[1]", X.grad().select(0, 1));
    t.check(max_abs(X.grad().select(0, 1).select(0, 2)) == 0,
            {.en = "X.grad[1, 2] is exactly 0: a padded key is invisible",
             .zh = "X.grad[1, 2] 恰好为 0：被填充的键是看不见的"});
    t.check(max_abs(X.grad().select(0, 0)) == 0,
            {.en = "X.grad[0] is exactly 0: sequence 0 does not influence sequence 1",
             .zh = "X.grad[0] 恰好为 0：序列 0 不影响序列 1"});
    t.check(max_abs(X.grad().select(0, 1).slice(0, 0, 2)) > 0,
            {.en = "while positions 0 and 1 of sequence 1 do", .zh = "而序列 1 的位置 0 和 1 有影响"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器块, put together right: gradcheck in float64
void gradcheck_encoder_block(Tutorial& t, Lesson& lesson) {
    note({.en = "A block is built only from ops whose backward functions are tested one by one (tutorial 03). "
                "gradcheck on the whole block checks that they are put together right: D = 4, 2 heads, FFN "
                "hidden size 6, dropout 0, two sequences of 3 positions with valid lengths [3, 2].",
          .zh = "一个块只由各自的反向函数都逐一测试过的运算搭成（教程 03）。对整个块做 "
                "gradcheck，检查的是它们拼装得对不对："
                "D = 4，2 个头，前馈网络隐藏层大小 6，dropout 0，两个长 3 的序列，有效长度 [3, 2]。"});
    const nn::TransformerOptions tiny =
        tutorial::block_options({.num_hiddens = 4, .ffn_num_hiddens = 6, .num_heads = 2});
    nn::EncoderBlock blk(tiny, lesson.gen);
    blk.to(DType::float64);
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{3, 2}, {2});
    const Variable X(c::randn({2, 3, 4}, lesson.gen, DType::float64), true);

    const ag::GradcheckResult wrt_x =
        ag::gradcheck([&](const std::vector<Variable>& in) { return blk.forward(in[0], lens); }, {X});
    if (!wrt_x.passed) quote(wrt_x.report);
    t.check(wrt_x.passed, {.en = "d out / d X: the 24 × 24 Jacobian from backward() matches central differences",
                           .zh = "d out / d X：backward() 给出的 24 × 24 雅可比矩阵与中心差分一致"});

    note({.en = "gradcheck differentiates with respect to the Variables it hands to f, so to check the "
                "parameters too, f points the block's members at those Variables for the length of one forward:",
          .zh =
              "gradcheck 只对它传给 f 的那些 Variable 求导，所以为了把参数也检查到，f 在一次前向的时间里让块的成员指向"
              "这些 Variable："});
    std::vector<Variable*> members = {&blk.attention->W_q->weight, &blk.ffn->dense1->weight, &blk.addnorm2->ln->weight};
    std::vector<Variable> inputs = {X};
    for (Variable* m : members) inputs.push_back(*m);
    const ag::GradcheckResult wrt_params = ag::gradcheck(
        [&](const std::vector<Variable>& in) {
            Borrow borrow(members, std::vector<Variable>(in.begin() + 1, in.end()));
            return blk.forward(in[0], lens);
        },
        inputs);
    if (!wrt_params.passed) quote(wrt_params.report);
    t.check(wrt_params.passed,
            {.en = "and with respect to attention.W_q.weight (4, 4), ffn.dense1.weight (6, 4), addnorm2.ln.weight (4)",
             .zh = "对 attention.W_q.weight (4, 4)、ffn.dense1.weight (6, 4)、addnorm2.ln.weight (4) 也一致"});
    mask_in_the_gradient(t, lesson, blk, X, lens);
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2 Transformer 整体架构, 三 Encoder; seed 000 › 理论学习 › 信息传递
void paper_size_encoder(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 002 (1.2 Transformer 整体架构, 三 Encoder): encoder and decoder are each a stack of N = 6 "
               "identical blocks, with d_model = 512, 8 heads of 64 and an FFN of 2048 (3.2: 'input and output "
               "512, inner 2048'). Seed 000 (信息传递): because every block keeps the width d, blocks stack and the "
               "decoder can attend to the encoder's output ('贯穿始终的 d 不变性'). Six such encoder blocks, with "
               "seed 002's biases in the attention projections, on a batch of the shape seed 002 prints for its "
               "embeddings, (2, 12, 512):",
         .zh =
             "种子文档 002（1.2 Transformer 整体架构，三 Encoder）：编码器和解码器各由 N = 6 个相同的块堆叠而成，"
             "d_model = 512，8 个 64 维的头，前馈网络 2048（3.2：“输入和输出 512，内层 2048”）。种子文档 000"
             "（信息传递）：因为每个块都保持宽度 d，块才能堆叠，解码器也才能关注编码器的输出（“贯穿始终的 d 不变性”）。"
             "六个这样的编码器块，注意力投影带有种子文档 002 的偏置，作用于形状与种子文档 002 打印的嵌入相同的批量 "
             "(2, 12, 512)："});
    const nn::TransformerOptions base = tutorial::block_options({.num_hiddens = 512,
                                                                 .ffn_num_hiddens = 2048,
                                                                 .num_heads = 8,
                                                                 .num_layers = 6,
                                                                 .dropout = 0.1,
                                                                 .use_bias = true});
    std::vector<std::unique_ptr<nn::EncoderBlock>> stack;
    for (int i = 0; i < 6; ++i) {
        stack.push_back(std::make_unique<nn::EncoderBlock>(base, lesson.gen));
        stack.back()->eval();
    }
    Variable H(c::randn({2, 12, 512}, lesson.gen));
    const c::Tensor lens = c::from_vector(std::vector<int64_t>{12, 8}, {2});
    std::vector<std::string> shapes;
    {
        ag::NoGradGuard no_grad;
        for (auto& blk : stack) {
            H = blk->forward(H, lens);
            shapes.push_back(c::shape_str(H.shape()));
        }
    }
    note({.en = "    after each block: {}", .zh = "    每个块之后：{}"}, fmt::format("{}", fmt::join(shapes, "  ")));
    t.check(H.shape() == c::Shape{2, 12, 512},
            {.en = "(2, 12, 512) in, (2, 12, 512) out of every one of the six blocks",
             .zh = "六个块中的每一个都是 (2, 12, 512) 进、(2, 12, 512) 出"});
    const int64_t d = 512, ff = 2048, V = 37000;
    const int64_t attention = 4 * (d * d + d), ffn_p = d * ff + ff + ff * d + d, norm = 2 * d;
    const int64_t enc_block = attention + ffn_p + 2 * norm, dec_block = 2 * attention + ffn_p + 3 * norm;
    nn::DecoderBlock one_decoder(base, 0, lesson.gen);
    t.check(stack.front()->num_parameters() == enc_block,
            {.en = "one encoder block: 4(d² + d) + (2·d·2048 + 2048 + d) + 2·2d = {} parameters",
             .zh = "一个编码器块：4(d² + d) + (2·d·2048 + 2048 + d) + 2·2d = {} 个参数"},
            enc_block);
    t.check(one_decoder.num_parameters() == dec_block,
            {.en = "one decoder block: two attentions, the FFN, three LayerNorms = {}",
             .zh = "一个解码器块：两个注意力、前馈网络、三个层归一化 = {}"},
            dec_block);
    const int64_t total = 6 * enc_block + 6 * dec_block + V * d;
    note({.en = "With the paper's shared vocabulary of 37,000 BPE pieces (one embedding matrix for both sides and "
                "the output layer): 6 × {} + 6 × {} + 37,000 × 512 = {} parameters, about the 65 million the paper "
                "gives for its base model (Table 3).",
          .zh = "再加上论文中 37,000 个 BPE 子词的共享词表（两侧和输出层共用一个嵌入矩阵）：6 × {} + 6 × {} + 37,000 × "
                "512 = {} 个参数，与论文给出的基础模型的 6500 万（表 3）相当。"},
         enc_block, dec_block, total);
    t.check(std::abs(total - 65'000'000) < 3'000'000,
            {.en = "{:.1f} million, within 3 million of 65 million", .zh = "{:.1f} 百万，与 6500 万相差不到 300 万"},
            total / 1e6);
}

// ---- the exercise (--exercise): tutorials/10_ffn_encoder_block/exercise.cpp ---------------

// seed 001 (001_57ca8c5b7ec56526.txt) › _feed_forward(); seed 002 › 3.2 (1×1 convolutions): by the reader
void exercise_conv1d(Tutorial& t, Lesson& lesson) {
    note({.en = "Write exercise::conv1d. The checks run it on the inputs and weights of tests/fixtures/"
                "tutorial_layers.safetensors (nn.Conv1d with kernel 1, and kernel 3 with padding 1) and compare the "
                "outputs and the gradients for the input, the weight and the bias with torch's. Then: a kernel-1 "
                "convolution with a dense layer's weight is that dense layer at every position (seed 000).",
          .zh = "写出 exercise::conv1d。检查会在 tests/fixtures/tutorial_layers.safetensors 的输入和权重上运行它"
                "（卷积核 1 的 nn.Conv1d，以及卷积核 3、填充 1 的），把输出和对输入、权重、偏置的梯度与 torch 的比较。"
                "然后：用全连接层的权重做卷积核大小为 1 的卷积，就是在每个位置上施加这个全连接层（种子文档 000）。"});
    const tutorial::Reference ref("tutorial_layers");
    for (const auto& [prefix, pad] : {std::pair<std::string, int64_t>{"conv1", 0}, {"conv3", 1}}) {
        const Variable x(ref[prefix + ".input.x"], true), w(ref[prefix + ".param.weight"], true),
            b(ref[prefix + ".param.bias"], true);
        const Variable y = exercise::conv1d(x, w, b, pad);
        if (!t.check(y.shape() == ref[prefix + ".output"].shape(),
                     {.en = "{}: output shape (2, 6, 7)", .zh = "{}：输出形状 (2, 6, 7)"}, prefix))
            continue;
        ag::sum(y * Variable(ref[prefix + ".input.upstream"])).backward();
        t.check_allclose(y.value(), ref[prefix + ".output"], 1e-5,
                         {.en = "{}: the output matches nn.Conv1d's", .zh = "{}：输出与 nn.Conv1d 的一致"}, prefix);
        t.check_allclose(x.grad(), ref[prefix + ".grad.input.x"], 1e-4,
                         {.en = "{}: d/dx matches", .zh = "{}：d/dx 一致"}, prefix);
        t.check_allclose(w.grad(), ref[prefix + ".grad.param.weight"], 1e-4,
                         {.en = "{}: d/dweight matches", .zh = "{}：d/dweight 一致"}, prefix);
        t.check_allclose(b.grad(), ref[prefix + ".grad.param.bias"], 1e-4,
                         {.en = "{}: d/dbias matches", .zh = "{}：d/dbias 一致"}, prefix);
    }
    nn::Linear dense({.in_features = 4, .out_features = 6}, lesson.gen);
    const c::Tensor X = c::randn({2, 5, 4}, lesson.gen);  // (B, T, C)
    const Variable conv = exercise::conv1d(Variable(X.transpose(1, 2).contiguous()),
                                           Variable(dense.weight.value().unsqueeze(2)), dense.bias, 0);
    t.check_close(conv.value().transpose(1, 2), dense(Variable(X)).value(), 1e-5,
                  {.en = "kernel 1 with a Linear's (out, in, 1) weight = the Linear at every position",
                   .zh = "卷积核 1、权重取 Linear 的 (out, in, 1)，等于在每个位置上施加这个 Linear"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 10 · The feed-forward network and the encoder block",
                   .zh = "tformer 教程 10 · 前馈网络与编码器块"},
         .follows = {.en = "seed 000 基于位置的前馈网络, 前馈网络, 编码器块, 编码器, 信息传递; seed 002 1.2 整体架构, "
                           "三 Encoder, 3.2–3.3; seed 001 _feed_forward; seed 004 编码器",
                     .zh = "种子文档 000 基于位置的前馈网络、前馈网络、编码器块、编码器、信息传递；种子文档 002 1.2 "
                           "整体架构、三 Encoder、3.2–3.3；种子文档 001 _feed_forward；种子文档 004 编码器"},
         .exercise = {.en = "write a 1-D convolution (any kernel size, zero padding) with autograd ops and "
                            "match PyTorch's nn.Conv1d (tutorials/10_ffn_encoder_block/exercise.cpp)",
                      .zh = "用 autograd 运算写出一维卷积（任意卷积核大小，零填充），与 PyTorch 的 nn.Conv1d "
                            "一致（tutorials/10_ffn_encoder_block/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. PositionWiseFFN: the same MLP at every position",
            .zh = "1. PositionWiseFFN：每个位置上同一个多层感知机"},
           [&] { position_wise_ffn(t, lesson); });
    t.step({.en = "2. A convolution with kernel size 1", .zh = "2. 卷积核大小为 1 的卷积"},
           [&] { ffn_as_kernel_1_convolution(t, lesson); });
    t.step({.en = "2b. The FFN and the convolution against PyTorch", .zh = "2b. 前馈网络和卷积与 PyTorch 对照"},
           [&] { ffn_and_convolution_against_pytorch(t); });
    t.step({.en = "2c. Seed 002's FFN has a dropout inside", .zh = "2c. 种子文档 002 的前馈网络内部有 dropout"},
           [&] { seed002_ffn_with_dropout(t); });
    t.step({.en = "3. EncoderBlock: attention + AddNorm, FFN + AddNorm",
            .zh = "3. EncoderBlock：注意力 + AddNorm，前馈网络 + AddNorm"},
           [&] { encoder_block(t, lesson); });
    t.step({.en = "3b. The EncoderBlock against PyTorch", .zh = "3b. EncoderBlock 与 PyTorch 对照"},
           [&] { encoder_block_against_pytorch(t); });
    t.step({.en = "4. gradcheck of a tiny EncoderBlock in float64",
            .zh = "4. 在 float64 下对一个很小的 EncoderBlock 做 gradcheck"},
           [&] { gradcheck_encoder_block(t, lesson); });
    t.step({.en = "5. The paper's size: N = 6 blocks of d = 512", .zh = "5. 论文的规模：N = 6 个 d = 512 的块"},
           [&] { paper_size_encoder(t, lesson); });
    t.exercise({.en = "Exercise. A 1-D convolution with autograd, against nn.Conv1d",
                .zh = "练习. 用 autograd 写一维卷积，与 nn.Conv1d 对照"},
               [&] { exercise_conv1d(t, lesson); });
    return t.finish();
}
