// Tutorial 09 · Normalisation: LayerNorm versus BatchNorm, three LayerNorms
// from three documents, and AddNorm.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 层归一化 and
// 代码实现 › 层归一化 (ln = nn.LayerNorm(2), bn = nn.BatchNorm1d(2) on
// [[1, 2], [2, 3]]) and 残差规范化 (AddNorm); seed 002
// (002_36798a9f04a86cc8.txt), 3.1 Add & Norm (a hand-written LayerNorm with
// eps 1e-12 compared with nn.LayerNorm on (20, 5, 10)); seed 004
// (004_a3b87e182ede5d90.txt), class LayerNorm (unbiased std, eps 1e-6 added to
// the std); seed 001's _layer_normalization. Step 6 compares every one of them,
// outputs and gradients, with PyTorch (tests/fixtures/layer_norms.safetensors).
// Read it with tutorials/09_normalization/README.md.
// tutorial-languages: en zh
#include "common/compare.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/layers.hpp"
#include "nn/transformer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using tutorial::max_abs_diff;

// Seed 002's LayerNorm.forward, line for line (gamma = 1, beta = 0):
//   mean = x.mean(-1, keepdim=True); var = x.var(-1, keepdim=True)    <- torch's var is unbiased
//   out = (x - mean) / torch.sqrt(var + self.eps)
Variable seed002_layer_norm(const Variable& x, double eps, bool unbiased = true) {
    const Variable mean = ag::mean(x, {-1}, true);
    const Variable var = ag::var(x, {-1}, unbiased, true);
    return (x - mean) / ag::sqrt(var + eps);
}

// Seed 004's LayerNorm.forward (a_2 = 1, b_2 = 0):
//   mean = x.mean(-1, keepdim=True); std = x.std(-1, keepdim=True)    <- unbiased
//   return a_2 * (x - mean) / (std + eps) + b_2
Variable seed004_layer_norm(const Variable& x, double eps) {
    const Variable mean = ag::mean(x, {-1}, true);
    const Variable std = ag::sqrt(ag::var(x, {-1}, true, true));
    return (x - mean) / (std + eps);
}

// torch.allclose(a, b, rtol, atol): |a - b| <= atol + rtol · |b| everywhere.
bool allclose(const c::Tensor& a, const c::Tensor& b, double rtol, double atol) {
    const std::vector<double> x = a.to_vector(), y = b.to_vector();
    for (size_t i = 0; i < x.size(); ++i)
        if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
    return true;
}

// A layer run on the inputs of reference `prefix`, against what torch computed:
// the output, d/dX and d/d every parameter, for the loss sum(output · upstream).
void check_against_torch(Tutorial& t, const tutorial::Reference& ref, const std::string& prefix,
                         const std::function<Variable(const Variable&)>& layer,
                         const std::vector<std::pair<std::string, Variable>>& params) {
    const Variable x(ref[prefix + ".input.X"], true);
    const Variable y = layer(x);
    ag::sum(y * Variable(ref[prefix + ".input.upstream"])).backward();
    t.check_allclose(y.value(), ref[prefix + ".output"], 1e-5,
                     {.en = "{}: the output matches torch's", .zh = "{}：输出与 torch 的一致"}, prefix);
    t.check_allclose(x.grad(), ref[prefix + ".grad.input.X"], 1e-4, {.en = "{}: d/dX matches", .zh = "{}：d/dX 一致"},
                     prefix);
    for (const auto& [name, p] : params)
        t.check_allclose(p.grad(), ref[prefix + ".grad.param." + name], 1e-4,
                         {.en = "{}: d/d {} matches", .zh = "{}：d/d {} 一致"}, prefix, name);
}

// What the steps share: one generator, drawn from in step order (steps 2 to 5).
struct Lesson {
    c::Generator gen{9};
};

// ---- the steps --------------------------------------------------------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 层归一化; 代码实现 › 层归一化 (ln and bn on [[1, 2], [2, 3]])
void layer_norm_and_batch_norm(Tutorial& t) {
    note({.en = "Both layers subtract a mean and divide by a standard deviation; they differ in WHAT they average "
                "over. Seed 000's example is the (2, 2) matrix below: 2 samples (rows) of 2 features (columns).\n"
                "- LayerNorm normalises each sample over its features: each ROW gets mean 0, variance 1.\n"
                "- BatchNorm normalises each feature over the batch: each COLUMN gets mean 0, variance 1.\n"
                "Both use the biased variance (÷n) and y = (x - mean) / √(var + eps), eps = 1e-5.",
          .zh =
              "两种层都是减去一个均值、再除以一个标准差；区别在于对“什么”求平均。种子文档 000 的例子是下面这个 (2, 2) "
              "矩阵：2 个样本（行），每个样本 2 个特征（列）。\n"
              "- 层归一化（LayerNorm）对每个样本在它的各个特征上做归一化：每一“行”的均值为 0、方差为 1。\n"
              "- 批量归一化（BatchNorm）对每个特征在整个批量上做归一化：每一“列”的均值为 0、方差为 1。\n"
              "两者都用有偏方差（÷n），y = (x - mean) / √(var + eps)，eps = 1e-5。"});
    const Variable X(c::tensor({1, 2, 2, 3}, {2, 2}));
    nn::LayerNorm ln({.normalized_shape = 2});
    nn::BatchNorm1d bn({.num_features = 2});  // training mode: the batch's own statistics
    const c::Tensor ln_out = ln(X).value(), bn_out = bn(X).value();
    show("X", X.value());
    show({.en = "layer norm", .zh = "层归一化"}, ln_out);
    show({.en = "batch norm", .zh = "批量归一化"}, bn_out);
    const double z = 0.5 / std::sqrt(0.25 + 1e-5);  // |x - mean| / √(var + eps) for every entry
    note({.en = "By hand: every row and every column is two numbers 1 apart, so the mean sits halfway, |x - mean| "
                "= 0.5, var = 0.25 and each entry becomes ±0.5/√(0.25 + 1e-5) = ±{:.5f} (not quite 1: eps).",
          .zh =
              "手算：每一行、每一列都是相差 1 的两个数，所以均值在正中间，|x - mean| = 0.5，var = 0.25，每个元素都变成 "
              "±0.5/√(0.25 + 1e-5) = ±{:.5f}（不完全是 1：因为有 eps）。"},
         z);
    t.check_close(
        ln_out, c::tensor({-z, z, -z, z}, {2, 2}), 1e-6,
        {.en = "layer norm: [[-1, 1], [-1, 1]] up to eps", .zh = "层归一化：除 eps 的影响外为 [[-1, 1], [-1, 1]]"});
    t.check_close(
        bn_out, c::tensor({-z, -z, z, z}, {2, 2}), 1e-6,
        {.en = "batch norm: [[-1, -1], [1, 1]] up to eps", .zh = "批量归一化：除 eps 的影响外为 [[-1, -1], [1, 1]]"});

    note({.en = "\nIn training mode BatchNorm also updates running statistics for later use in eval mode, with "
                "momentum 0.1 and the UNBIASED batch variance (PyTorch's convention):\n"
                "    running_mean = 0.9 · 0 + 0.1 · [1.5, 2.5]        = [0.15, 0.25]\n"
                "    running_var  = 0.9 · 1 + 0.1 · (0.25 · 2/1)      = [0.95, 0.95]",
          .zh = "\n在训练模式下，批量归一化还会更新滑动统计量，留给评估模式使用；动量为 0.1，用的是批量的“无偏”方差"
                "（PyTorch 的约定）：\n"
                "    running_mean = 0.9 · 0 + 0.1 · [1.5, 2.5]        = [0.15, 0.25]\n"
                "    running_var  = 0.9 · 1 + 0.1 · (0.25 · 2/1)      = [0.95, 0.95]"});
    show("running_mean", bn.buffer("running_mean"));
    show("running_var", bn.buffer("running_var"));
    t.check_close(bn.buffer("running_mean"), c::tensor({0.15, 0.25}, {2}), 1e-7, both("running_mean = [0.15, 0.25]"));
    t.check_close(bn.buffer("running_var"), c::tensor({0.95, 0.95}, {2}), 1e-7, both("running_var = [0.95, 0.95]"));
    bn.eval();
    const c::Tensor bn_eval = bn(X).value();
    show({.en = "batch norm, eval()", .zh = "批量归一化，eval()"}, bn_eval);
    t.check_close(bn_eval.at({0, 1}), (2 - 0.25) / std::sqrt(0.95 + 1e-5), 1e-6,
                  {.en = "in eval mode it uses them: (2 - 0.25) / √(0.95 + 1e-5) = 1.7955",
                   .zh = "评估模式下用的就是它们：(2 - 0.25) / √(0.95 + 1e-5) = 1.7955"});
    note({.en = "LayerNorm has no such state: it computes the same thing in training and in evaluation.",
          .zh = "层归一化没有这种状态：训练和评估时算的是同一个东西。"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 层归一化 ("not suited to NLP, where sequence lengths change")
void why_sequences_use_layer_norm(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 000: batch normalisation 'is not suited to NLP, where sequence lengths change'. For a "
               "(b, n, d) batch, BatchNorm averages each of the d features over all b·n positions — padding "
               "included — so one sequence's output depends on which other sequences share its batch. "
               "LayerNorm normalises each position on its own. Two batches that share sequence 0 and differ "
               "in sequence 1 (which is padded with zeros in the second):",
         .zh =
             "种子文档 000：批量归一化“不适合序列长度会变的 NLP 应用”。对一个 (b, n, d) 的批量，批量归一化把 d "
             "个特征中的每一个在全部 b·n 个位置上求平均——填充也算在内——于是一个序列的输出取决于哪些别的序列和它同在"
             "一个批量里。层归一化则对每个位置单独做归一化。下面两个批量的序列 0 相同，序列 1 不同（第二个批量里的序列 "
             "1 用 0 做了填充）："});
    const c::Tensor seq0 = c::randn({1, 3, 4}, lesson.gen), seq1 = c::randn({1, 3, 4}, lesson.gen);
    c::Tensor seq1_padded = seq1.clone();
    c::fill_(seq1_padded.slice(1, 1, 3), 0.0);  // keep one real step, pad the other two
    const Variable A(c::concat({seq0, seq1}, 0)), Bv(c::concat({seq0, seq1_padded}, 0));  // (2, 3, 4)
    nn::LayerNorm ln({.normalized_shape = 4});
    nn::BatchNorm1d bn({.num_features = 4});
    // BatchNorm1d wants the features in dim 1: (N, C, L) = (b, d, n)
    auto batch_norm = [&](const Variable& x) { return ag::transpose(bn(ag::transpose(x, 1, 2)), 1, 2); };
    const double ln_change = max_abs_diff(ln(A).value().select(0, 0), ln(Bv).value().select(0, 0));
    const double bn_change = max_abs_diff(batch_norm(A).value().select(0, 0), batch_norm(Bv).value().select(0, 0));
    note({.en = "    largest change in sequence 0's output:  LayerNorm {:.2e}   BatchNorm {:.3f}",
          .zh = "    序列 0 的输出最大的变化：层归一化 {:.2e}   批量归一化 {:.3f}"},
         ln_change, bn_change);
    t.check(ln_change == 0, {.en = "LayerNorm: sequence 0's output does not depend on its batch-mates at all",
                             .zh = "层归一化：序列 0 的输出完全不取决于同一批量里的其他序列"});
    t.check(bn_change > 1e-2, {.en = "BatchNorm: padding sequence 1 changes sequence 0's output",
                               .zh = "批量归一化：给序列 1 加填充，会改变序列 0 的输出"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 3.1 Add & Norm (the hand-written LayerNorm, eps 1e-12, torch.allclose)
void seed002_hand_written_layer_norm(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 002 writes LayerNorm by hand with eps = 1e-12 and checks it against nn.LayerNorm on a "
                "(20, 5, 10) tensor with torch.allclose(pytorch_ln_out, my_ln_out, rtol=0.1, atol=0.01). Its "
                "forward uses x.var(-1), and torch's var is UNBIASED: it divides by D - 1 = 9, not by D = 10. "
                "The hand-written outputs are therefore smaller by √(9/10) = 0.9487 — a 5% difference that the "
                "loose tolerance hides. The same code here, in float64:",
          .zh = "种子文档 002 手写了一个 eps = 1e-12 的 LayerNorm，并在一个 (20, 5, 10) 的张量上用 "
                "torch.allclose(pytorch_ln_out, my_ln_out, rtol=0.1, atol=0.01) 与 nn.LayerNorm 比较。它的 forward "
                "用的是 x.var(-1)，而 torch 的 var 是“无偏”的：除以 D - 1 = 9，而不是 D = 10。所以手写版的输出小了 "
                "√(9/10) = 0.9487 倍——5% 的差别，被宽松的容差掩盖了。同样的代码，这里用 float64 运行："});
    const Variable x(c::randn({20, 5, 10}, lesson.gen, DType::float64));
    nn::LayerNorm library({.normalized_shape = 10});
    library.to(DType::float64);
    const c::Tensor lib = library(x).value();
    const c::Tensor mine = seed002_layer_norm(x, 1e-12).value();
    show("library[0, 0]", lib.select(0, 0).select(0, 0));
    show("seed 002[0, 0]", mine.select(0, 0).select(0, 0));
    const double ratio = c::mean(c::div(mine, lib)).item();
    note({.en = "    mean of seed002 / library = {:.5f}   (√(9/10) = {:.5f})",
          .zh = "    seed002 / library 的均值 = {:.5f}   （√(9/10) = {:.5f}）"},
         ratio, std::sqrt(0.9));
    t.check(allclose(lib, mine, 0.1, 0.01), {.en = "the seed's check, allclose(rtol=0.1, atol=0.01), says True",
                                             .zh = "种子文档的检查 allclose(rtol=0.1, atol=0.01) 给出 True"});
    t.check(!allclose(lib, mine, 1e-5, 1e-8), {.en = "allclose with torch's default tolerances (1e-5, 1e-8) says False",
                                               .zh = "用 torch 默认容差 (1e-5, 1e-8) 的 allclose 给出 False"});
    t.check_close(ratio, std::sqrt(0.9), 1e-4,
                  {.en = "the outputs differ by the factor √((D-1)/D), not by rounding",
                   .zh = "两者的输出相差一个因子 √((D-1)/D)，而不是舍入误差"});

    note({.en = "\nWith the biased variance (x.var(-1, unbiased=False)) and the same eps, the two agree to "
                "rounding. Seed 001's _layer_normalization gets this right: tf.nn.moments returns the biased "
                "variance.",
          .zh = "\n改用有偏方差（x.var(-1, unbiased=False)）、eps 不变，两者就只差舍入误差。种子文档 001 的 "
                "_layer_normalization 是对的：tf.nn.moments 返回的就是有偏方差。"});
    nn::LayerNorm same_eps({.normalized_shape = 10, .eps = 1e-12});
    same_eps.to(DType::float64);
    const double diff = max_abs_diff(same_eps(x).value(), seed002_layer_norm(x, 1e-12, /*unbiased=*/false).value());
    note({.en = "    largest |difference| = {:.2e}", .zh = "    最大的 |差| = {:.2e}"}, diff);
    t.check(diff < 1e-12, {.en = "biased variance and eps 1e-12: the hand-written layer equals nn::LayerNorm",
                           .zh = "有偏方差、eps 1e-12：手写的层等于 nn::LayerNorm"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 › class LayerNorm (a_2 (x - mean) / (std + eps) + b_2)
void seed004_layer_norm_class(Tutorial& t, Lesson& lesson) {
    note({.en = "The Annotated Transformer (seed 004) writes\n"
                "    a_2 * (x - mean) / (std + eps) + b_2,    std unbiased (÷(D-1)), eps = 1e-6\n"
                "nn::LayerNorm has it as an option, {.unbiased_std = true, .eps = 1e-6}. It is a different "
                "function from step 1's, not a rounding of it: the ÷(D-1) changes every output by √((D-1)/D), "
                "and eps sits outside the square root.",
          .zh = "The Annotated Transformer（种子文档 004）写的是\n"
                "    a_2 * (x - mean) / (std + eps) + b_2,    std 无偏（÷(D-1)），eps = 1e-6\n"
                "nn::LayerNorm 把它作为一个选项：{.unbiased_std = true, .eps = 1e-6}。它和第 1 步的是两个不同的函数，"
                "而不只是舍入上的差别：÷(D-1) 让每个输出都变了 √((D-1)/D) 倍，而且 eps 在平方根的外面。"});
    const Variable x(c::randn({3, 6}, lesson.gen, DType::float64));
    nn::LayerNorm annotated({.normalized_shape = 6, .eps = 1e-6, .unbiased_std = true});
    annotated.to(DType::float64);
    t.check_close(annotated(x).value(), seed004_layer_norm(x, 1e-6).value(), 1e-14,
                  {.en = "nn::LayerNorm{.unbiased_std = true} is seed 004's formula",
                   .zh = "nn::LayerNorm{.unbiased_std = true} 就是种子文档 004 的公式"});

    note({.en = "\nWhere eps sits matters for a row that is nearly constant. Take [1, 1 + 1e-4, 1 - 1e-4, 1]:\n"
                "- standard: var = 5e-9, far below eps = 1e-5, so √(var + eps) ≈ √eps and the row is squashed "
                "to about ±0.03;\n"
                "- seed 004: std = 8.2e-5, far above eps = 1e-6, so the row is blown up to about ±1.2.",
          .zh = "\n对一个几乎是常数的行，eps 放在哪里很要紧。取 [1, 1 + 1e-4, 1 - 1e-4, 1]：\n"
                "- 标准的：var = 5e-9，远小于 eps = 1e-5，所以 √(var + eps) ≈ √eps，这一行被压扁到大约 ±0.03；\n"
                "- 种子文档 004 的：std = 8.2e-5，远大于 eps = 1e-6，所以这一行被放大到大约 ±1.2。"});
    const Variable flat(c::tensor({1, 1 + 1e-4, 1 - 1e-4, 1}, {1, 4}, DType::float64));
    nn::LayerNorm standard({.normalized_shape = 4});
    nn::LayerNorm unbiased({.normalized_shape = 4, .eps = 1e-6, .unbiased_std = true});
    standard.to(DType::float64);
    unbiased.to(DType::float64);
    const c::Tensor s = standard(flat).value(), u = unbiased(flat).value();
    show({.en = "standard", .zh = "标准的"}, s);
    show({.en = "seed 004", .zh = "种子文档 004"}, u);
    t.check_close(s.at({0, 1}), 1e-4 / std::sqrt(5e-9 + 1e-5), 1e-12,
                  {.en = "standard: 1e-4 / √(5e-9 + 1e-5) = 0.0316", .zh = "标准的：1e-4 / √(5e-9 + 1e-5) = 0.0316"});
    t.check_close(u.at({0, 1}), 1e-4 / (std::sqrt(2e-8 / 3) + 1e-6), 1e-9,
                  {.en = "seed 004: 1e-4 / (8.165e-5 + 1e-6) = 1.2100",
                   .zh = "种子文档 004 的：1e-4 / (8.165e-5 + 1e-6) = 1.2100"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 残差规范化 (AddNorm); seed 002 › 3.1 Add & Norm
void add_norm(Tutorial& t, Lesson& lesson) {
    note({.en = "Every sub-layer of the Transformer is wrapped as (seed 000 残差规范化, seed 002 3.1 Add & Norm):\n"
                "    AddNorm(X, Y) = LayerNorm(dropout(Y) + X)\n"
                "where X is the sub-layer's input and Y its output. The sum needs X and Y of the same shape — "
                "seed 000: 'the self-attention module's output dim is the same as its input' — and LayerNorm "
                "then gives every position mean 0 and variance 1 again.",
          .zh = "Transformer 的每个子层都这样包起来（种子文档 000 残差规范化，种子文档 002 3.1 Add & Norm）：\n"
                "    AddNorm(X, Y) = LayerNorm(dropout(Y) + X)\n"
                "其中 X 是子层的输入，Y 是它的输出。残差连接的相加要求 X 和 Y 形状相同——种子文档 000：“自注意力模块的"
                "输出维度与输入相同”——然后层归一化让每个位置重新具有均值 0、方差 1。"});
    nn::AddNorm add_norm({.normalized_shape = 4, .dropout = 0.5}, lesson.gen);
    add_norm.to(DType::float64);
    const Variable X(c::randn({2, 3, 4}, lesson.gen, DType::float64)),
        Y(c::randn({2, 3, 4}, lesson.gen, DType::float64));
    add_norm.eval();
    const c::Tensor out = add_norm(X, Y).value();
    show("AddNorm(X, Y)[0]", out.select(0, 0));
    nn::LayerNorm ln({.normalized_shape = 4});
    ln.to(DType::float64);
    t.check_close(out, ln(X + Y).value(), 1e-15,
                  {.en = "in eval mode (dropout off) it is exactly LayerNorm(X + Y)",
                   .zh = "评估模式下（dropout 关闭）它恰好就是 LayerNorm(X + Y)"});
    t.check_close(c::mean(out, {2}), c::zeros({2, 3}, DType::float64), 1e-15,
                  {.en = "every position has mean 0", .zh = "每个位置的均值为 0"});
    t.check_close(c::var(out, {2}, false), c::ones({2, 3}, DType::float64), 1e-3,
                  {.en = "and variance 1 (up to eps), whatever the scales of X and Y were",
                   .zh = "方差为 1（除 eps 的影响外），不论 X 和 Y 原来的尺度如何"});
    add_norm.train();
    const c::Tensor noisy = add_norm(X, Y).value();
    t.check(max_abs_diff(noisy, out) > 1e-3, {.en = "in training mode, dropout on Y changes the result",
                                              .zh = "训练模式下，作用在 Y 上的 dropout 会改变结果"});
    t.check_close(c::mean(noisy, {2}), c::zeros({2, 3}, DType::float64), 1e-14,
                  {.en = "but every position is still normalised", .zh = "但每个位置仍然是归一化的"});
    note({.en = "\nShapes that differ are an error that names both:",
          .zh = "\n形状不同是一个错误，错误信息会说出两个形状："});
    t.check_throws<ShapeError>({.en = "AddNorm with X (2, 3, 4) and Y (2, 3, 5) throws ShapeError",
                                .zh = "X 为 (2, 3, 4)、Y 为 (2, 3, 5) 的 AddNorm 抛出 ShapeError"},
                               [&] {
                                   (void)add_norm(X, Variable(c::zeros({2, 3, 5}, DType::float64)));
                               });
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 层归一化, run by torch (tests/fixtures/layer_norms.safetensors)
void seed000_example_against_pytorch(Tutorial& t, const tutorial::Reference& ref) {
    nn::LayerNorm ln({.normalized_shape = 2});
    nn::BatchNorm1d bn({.num_features = 2});
    for (auto [prefix, layer] : {std::pair<std::string, nn::UnaryModule*>{"seed000_ln", &ln}, {"seed000_bn", &bn}}) {
        std::vector<std::pair<std::string, Variable>> params;
        for (const auto& [name, p] : layer->named_parameters()) params.emplace_back(name, p);
        check_against_torch(
            t, ref, prefix, [&](const Variable& x) { return (*layer)(x); }, params);
    }
    t.check_allclose(bn.buffer("running_mean"), ref["seed000_bn.running_mean"], 1e-6,
                     {.en = "seed000_bn: running_mean matches", .zh = "seed000_bn：running_mean 一致"});
    t.check_allclose(bn.buffer("running_var"), ref["seed000_bn.running_var"], 1e-6,
                     {.en = "seed000_bn: running_var matches", .zh = "seed000_bn：running_var 一致"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 3.1 Add & Norm and seed 004 (004_a3b87e182ede5d90.txt) › class
// LayerNorm, run by torch with their own scales and shifts, beside nn.LayerNorm
void three_layer_norms_against_pytorch(Tutorial& t, const tutorial::Reference& ref) {
    const nn::StateDict torch_p = ref.params("torch"), p002 = ref.params("seed002"), p004 = ref.params("seed004");
    const Variable w000(torch_p.at("weight"), true), b000(torch_p.at("bias"), true);
    const Variable g002(p002.at("gamma"), true), be002(p002.at("beta"), true);
    const Variable a004(p004.at("a_2"), true), b004(p004.at("b_2"), true);
    check_against_torch(t, ref, "torch", [&](const Variable& x) { return ag::layer_norm(x, w000, b000, 1e-5); },
                        {{"weight", w000}, {"bias", b000}});
    check_against_torch(t, ref, "seed002",
                        [&](const Variable& x) { return g002 * seed002_layer_norm(x, 1e-12) + be002; },
                        {{"gamma", g002}, {"beta", be002}});
    check_against_torch(t, ref, "seed004",
                        [&](const Variable& x) {
                            nn::LayerNorm ln({.normalized_shape = 6, .eps = 1e-6, .unbiased_std = true});
                            ln.weight = a004;
                            ln.bias = b004;
                            return ln(x);
                        },
                        {{"a_2", a004}, {"b_2", b004}});
}

// seed 000 › 层归一化, seed 002 › 3.1 Add & Norm, seed 004 › class LayerNorm: derive, port, compare with PyTorch
void every_layer_norm_against_pytorch(Tutorial& t) {
    note({.en = "tests/fixtures/layer_norms.safetensors holds torch's numbers for the layers of this tutorial: seed "
                "000's nn.LayerNorm(2) and nn.BatchNorm1d(2) on [[1, 2], [2, 3]] (training mode), and "
                "nn.LayerNorm(6), seed 002's hand-written LayerNorm and seed 004's LayerNorm (both copied into "
                "make_fixtures.py as the documents write them) on one (2, 3, 6) input, their scales and shifts "
                "moved away from 1 and 0. For each: the output, and the gradients of sum(output · u) for a fixed "
                "random u with respect to the input and the parameters. The same computations here:",
          .zh = "tests/fixtures/layer_norms.safetensors 存放着 torch 为本教程各层算出的数：种子文档 000 的 "
                "nn.LayerNorm(2) 和 nn.BatchNorm1d(2) 作用于 [[1, 2], [2, 3]]（训练模式），以及 nn.LayerNorm(6)、"
                "种子文档 002 手写的 LayerNorm 和种子文档 004 的 LayerNorm（后两者照文档原样抄进了 make_fixtures.py）"
                "作用于同一个 (2, 3, 6) 的输入，它们的缩放和平移参数都挪离了 1 和 0。每一个都有：输出，以及对一个固定的"
                "随机 u，sum(output · u) 对输入和各参数的梯度。这里做同样的计算："});
    const tutorial::Reference ref("layer_norms");
    seed000_example_against_pytorch(t, ref);
    three_layer_norms_against_pytorch(t, ref);
    const double gap = c::max(c::abs(c::sub(ref["seed002.output"], ref["torch.output"]))).item();
    note({.en = "Seed 002's layer and nn.LayerNorm differ by up to {:.3f} on this input (step 3's √((D-1)/D), and "
                "different scales here): matching torch on each one separately is what shows the three are "
                "three different functions, each computed right.",
          .zh = "在这个输入上，种子文档 002 的层与 nn.LayerNorm 最多相差 {:.3f}（第 3 步的 √((D-1)/D)，加上这里不同"
                "的缩放参数）：三者各自分别与 torch 吻合，这正说明它们是三个不同的函数，而且每个都算对了。"},
         gap);
}

// ---- the exercise (--exercise): tutorials/09_normalization/exercise.cpp -------------------

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 › class LayerNorm, written by the reader
void exercise_seed004_layer_norm(Tutorial& t) {
    note({.en = "Write exercise::seed004_layer_norm with autograd ops. The checks run it on the (2, 3, 6) input of "
                "tests/fixtures/layer_norms.safetensors with that file's a_2 and b_2 and compare the output and all "
                "three gradients with what torch computed for the document's class; then gradcheck in float64.",
          .zh = "用 autograd 运算写出 exercise::seed004_layer_norm。检查会在 tests/fixtures/layer_norms.safetensors 的 "
                "(2, 3, 6) 输入上、用该文件里的 a_2 和 b_2 运行它，把输出和全部三个梯度与 torch 为文档中那个类算出的"
                "结果比较；然后在 float64 下做 gradcheck。"});
    const tutorial::Reference ref("layer_norms");
    const nn::StateDict p = ref.params("seed004");
    const Variable x(ref["seed004.input.X"], true), a(p.at("a_2"), true), b(p.at("b_2"), true);
    const Variable y = exercise::seed004_layer_norm(x, a, b, 1e-6);
    ag::sum(y * Variable(ref["seed004.input.upstream"])).backward();
    t.check_allclose(y.value(), ref["seed004.output"], 1e-5,
                     {.en = "the output matches PyTorch's", .zh = "输出与 PyTorch 的一致"});
    t.check_allclose(x.grad(), ref["seed004.grad.input.X"], 1e-4, {.en = "d/dX matches", .zh = "d/dX 一致"});
    t.check_allclose(a.grad(), ref["seed004.grad.param.a_2"], 1e-4, {.en = "d/d a_2 matches", .zh = "d/d a_2 一致"});
    t.check_allclose(b.grad(), ref["seed004.grad.param.b_2"], 1e-4, {.en = "d/d b_2 matches", .zh = "d/d b_2 一致"});
    c::Generator g(909);
    const ag::GradcheckResult r = ag::gradcheck(
        [](const std::vector<Variable>& in) { return exercise::seed004_layer_norm(in[0], in[1], in[2], 1e-6); },
        {Variable(c::randn({2, 5}, g, DType::float64), true), Variable(c::randn({5}, g, DType::float64), true),
         Variable(c::randn({5}, g, DType::float64), true)});
    if (!r.passed) quote(r.report);
    t.check(r.passed, {.en = "gradcheck in float64 with respect to x, a_2 and b_2",
                       .zh = "对 x、a_2 和 b_2 在 float64 下做 gradcheck"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 09 · Normalisation: LayerNorm, BatchNorm, AddNorm",
                   .zh = "tformer 教程 09 · 归一化：层归一化、批量归一化、AddNorm"},
         .follows = {.en = "seed 000 层归一化 and 残差规范化; seed 002 3.1 Add & Norm; seed 004 LayerNorm",
                     .zh = "种子文档 000 层归一化、残差规范化；种子文档 002 3.1 Add & Norm；种子文档 004 LayerNorm"},
         .exercise = {.en = "write seed 004's LayerNorm with autograd ops and match PyTorch's output and "
                            "gradients (tutorials/09_normalization/exercise.cpp)",
                      .zh = "用 autograd 运算写出种子文档 004 的 LayerNorm，输出和梯度都要与 PyTorch 的一致"
                            "（tutorials/09_normalization/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Seed 000: LayerNorm and BatchNorm on [[1, 2], [2, 3]]",
            .zh = "1. 种子文档 000：在 [[1, 2], [2, 3]] 上做层归一化和批量归一化"},
           [&] { layer_norm_and_batch_norm(t); });
    t.step({.en = "2. Why sequences use LayerNorm", .zh = "2. 为什么序列要用层归一化"},
           [&] { why_sequences_use_layer_norm(t, lesson); });
    t.step({.en = "3. Seed 002's hand-written LayerNorm (eps 1e-12) against the library",
            .zh = "3. 种子文档 002 手写的 LayerNorm（eps 1e-12）与库的对照"},
           [&] { seed002_hand_written_layer_norm(t, lesson); });
    t.step({.en = "4. Seed 004's LayerNorm: unbiased std, eps added to the std",
            .zh = "4. 种子文档 004 的 LayerNorm：无偏标准差，eps 加在标准差上"},
           [&] { seed004_layer_norm_class(t, lesson); });
    t.step({.en = "5. AddNorm: the residual connection, then LayerNorm", .zh = "5. AddNorm：先残差连接，再层归一化"},
           [&] { add_norm(t, lesson); });
    t.step({.en = "6. Derive, port, compare: every LayerNorm against PyTorch",
            .zh = "6. 推导、移植、比较：每种 LayerNorm 都与 PyTorch 对照"},
           [&] { every_layer_norm_against_pytorch(t); });
    t.exercise({.en = "Exercise. Seed 004's LayerNorm, against PyTorch",
                .zh = "练习. 种子文档 004 的 LayerNorm，与 PyTorch 对照"},
               [&] { exercise_seed004_layer_norm(t); });
    return t.finish();
}
