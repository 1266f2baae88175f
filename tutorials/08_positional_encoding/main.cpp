// Tutorial 08 · Positional encoding: the sin/cos table, its picture, the
// binary-counter intuition, relative positions, and embedding × √d.
//
// Follows seed 002 (002_36798a9f04a86cc8.txt), 1.2.2 位置 Embedding (the
// formula) and 1.2.3 TransformerEmbedding 层实现 (PositionalEncoding,
// TokenEmbedding with padding_idx=1); seed 000 (000_7dfff3ea5ac0d0a3.txt),
// 代码实现 › 编码器 (pos_encoding(embedding(X) * sqrt(num_hiddens)) and its
// comment on why); seed 004 (004_a3b87e182ede5d90.txt), the `pe` table with
// div_term and Embeddings × sqrt(d_model); seed 001's _position_embedding and
// seed 003's (3) 位置编码 example values.
// Read it with tutorials/08_positional_encoding/README.md.
// tutorial-languages: en zh
#include "common/prelude.hpp"
#include "exercise.hpp"
#include "nn/layers.hpp"
#include "nn/transformer.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>

namespace {

// The (L, d) table by three formulas, all in double:
//   seed 002:  P[pos, 2i] = sin(pos / 10000^(2i/d)),  P[pos, 2i+1] = cos(pos / 10000^(2i/d))
//   seed 004:  div_term = exp(2i · -(ln 10000) / d),  P[pos, 2i] = sin(pos · div_term), ...
//   seed 001:  angle[pos, j] = pos / 10000^((j - j mod 2) / d), then sin on even j, cos on odd j
enum class Formula { seed002, seed004, seed001 };
c::Tensor table_by_hand(int64_t L, int64_t d, Formula formula) {
    c::Tensor P = c::zeros({L, d}, DType::float64);
    for (int64_t pos = 0; pos < L; ++pos)
        for (int64_t j = 0; j < d; ++j) {
            const int64_t two_i = j - j % 2;
            double angle = 0;
            switch (formula) {
                case Formula::seed002: angle = pos / std::pow(10000.0, double(two_i) / d); break;
                case Formula::seed004: angle = pos * std::exp(two_i * -(std::log(10000.0) / d)); break;
                case Formula::seed001: angle = pos / std::pow(10000, double(j - j % 2) / d); break;
            }
            P.set({pos, j}, j % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    return P;
}

// Sign changes along a column of a (L, d) table: how many times that sine or
// cosine crosses zero within the L positions.
int64_t zero_crossings(const c::Tensor& P, int64_t column) {
    const std::vector<double> v = P.select(1, column).to_vector();
    int64_t n = 0;
    for (size_t i = 1; i < v.size(); ++i) n += v[i - 1] * v[i] < 0;
    return n;
}

// Mean Euclidean norm of the rows of a (rows, d) tensor.
double mean_row_norm(const c::Tensor& x) { return c::mean(c::sqrt(c::sum(c::mul(x, x), {1}))).item(); }

// What the steps share: the random numbers of steps 6 and 7 come from one generator.
struct Lesson {
    c::Generator gen{8};
};

// ---- the steps --------------------------------------------------------------------------

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding; seed 001 › _position_embedding(); seed 004 › pe
void the_table(Tutorial& t) {
    note({.en = "Self-attention ignores the order of its inputs (tutorial 06, step 5), so the Transformer adds "
                "to each token's embedding a vector that depends only on its position. Seed 002 gives the "
                "formula, for position pos and feature pair (2i, 2i+1) of d features:\n"
                "    PE(pos, 2i)   = sin(pos / 10000^(2i/d))\n"
                "    PE(pos, 2i+1) = cos(pos / 10000^(2i/d))\n"
                "nn::PositionalEncoding builds this table once, P of shape (1, max_len, d). For d = 8, the first "
                "5 positions:",
          .zh = "自注意力不理会输入的顺序（教程 06 第 5 步），所以 Transformer 给每个词元的嵌入加上一个只取决于其位置的"
                "向量。种子文档 002 给出了公式，对位置 pos 和 d 个特征中的特征对 (2i, 2i+1)：\n"
                "    PE(pos, 2i)   = sin(pos / 10000^(2i/d))\n"
                "    PE(pos, 2i+1) = cos(pos / 10000^(2i/d))\n"
                "nn::PositionalEncoding 把这张表一次建好，即形状为 (1, max_len, d) 的 P。d = 8 时的前 5 个位置："});
    nn::PositionalEncoding pe({.num_hiddens = 8, .max_len = 100});
    const c::Tensor P = pe.P.select(0, 0);  // (max_len, d)
    line({.en = "\n      pos     col 0    col 1    col 2    col 3    col 4    col 5    col 6    col 7",
          .zh = "\n     位置      第0列    第1列    第2列    第3列    第4列    第5列    第6列    第7列"});
    for (int64_t pos = 0; pos < 5; ++pos) {
        std::string row = fmt::format("      {:>3} ", pos);
        for (int64_t j = 0; j < 8; ++j) row += fmt::format("{:9.4f}", P.at({pos, j}));
        line(row);
    }
    line();
    const c::Tensor mine = table_by_hand(100, 8, Formula::seed002);
    t.check_close(P, mine, 1e-6,
                  {.en = "the library's table equals seed 002's formula (float32 vs double)",
                   .zh = "库的表等于种子文档 002 的公式（float32 对 double）"});
    t.check_close(table_by_hand(100, 8, Formula::seed004), mine, 1e-12,
                  {.en = "seed 004's div_term = exp(2i · -ln(10000)/d) is the same table",
                   .zh = "种子文档 004 的 div_term = exp(2i · -ln(10000)/d) 给出同一张表"});
    t.check_close(table_by_hand(100, 8, Formula::seed001), mine, 1e-12,
                  {.en = "seed 001's pos / 10000^((i - i mod 2)/d) is the same table",
                   .zh = "种子文档 001 的 pos / 10000^((i - i mod 2)/d) 给出同一张表"});
    t.check_close(P.select(0, 0), c::tensor({0, 1, 0, 1, 0, 1, 0, 1}, {8}), 0,
                  {.en = "position 0 is [0, 1, 0, 1, ...]: sin 0 and cos 0 in every pair",
                   .zh = "位置 0 是 [0, 1, 0, 1, ...]：每一对都是 sin 0 和 cos 0"});
    note({.en = "Every value lies in [-1, 1], and P is a constant: no gradient, not in the state dict.",
          .zh = "每个值都在 [-1, 1] 内，而且 P 是常量：没有梯度，也不在 state dict 里。"});
}

// seed 003 (003_8fde783e4908788c.txt) › (3) 位置编码（Positional Encoding）
void seed_003_example_values(Tutorial& t) {
    note({.en = "Seed 003 prints PositionalEncoding(0) = [0.0000, 0.8415, ...], (1) = [0.0001, 0.9093, ...], "
                "(2) = [0.0002, 0.1411, ...], (3) = [0.0003, 0.7568, ...]. These are not the first two features "
                "of the table: step 1 shows that position 0 must start [0, 1]. With d = 512 (the paper's size):",
          .zh = "种子文档 003 打印 PositionalEncoding(0) = [0.0000, 0.8415, ...]，(1) = [0.0001, 0.9093, ...]，"
                "(2) = [0.0002, 0.1411, ...]，(3) = [0.0003, 0.7568, ...]。这些不是表的前两个特征：第 1 步表明位置 0 "
                "必定以 "
                "[0, 1] 开头。取 d = 512（论文的大小）："});
    nn::PositionalEncoding pe({.num_hiddens = 512, .max_len = 8});
    const c::Tensor P = pe.P.select(0, 0);
    line({.en = "\n      pos    P[pos, 0] = sin(pos)    P[pos, 1] = cos(pos)    P[pos, 510] = sin(pos / 9646.6)",
          .zh = "\n     位置    P[pos, 0] = sin(pos)    P[pos, 1] = cos(pos)    P[pos, 510] = sin(pos / 9646.6)"});
    for (int64_t pos = 0; pos < 5; ++pos)
        line("      {:>3} {:>22.4f} {:>23.4f} {:>34.6f}", pos, P.at({pos, 0}), P.at({pos, 1}), P.at({pos, 510}));
    line();
    note({.en = "So the seed's second numbers 0.8415, 0.9093, 0.1411, 0.7568 are sin(1), sin(2), sin(3) and "
                "|sin(4)|: feature 0 of positions 1 to 4, one position off and with the sign of sin(4) = -0.7568 "
                "lost. The first numbers 0.0000 ... 0.0003 match the slowest sine of the table, feature 510, "
                "whose angle is pos / 10000^(510/512) = pos / 9646.6. Read the seed's values as a sketch.",
          .zh = "所以种子文档的第二个数 0.8415、0.9093、0.1411、0.7568 是 sin(1)、sin(2)、sin(3) 和 |sin(4)|：位置 1 "
                "到 4 的"
                "特征 0，错开了一个位置，而且 sin(4) = -0.7568 的负号丢了。第一个数 0.0000 ... 0.0003 "
                "对上的是表里最慢的那个"
                "正弦，即特征 510，它的角度是 pos / 10000^(510/512) = pos / 9646.6。种子文档的这些值只能当作示意。"});
    t.check_close(P.at({1, 0}), 0.8415, 5e-5, both("P[1, 0] = sin(1) = 0.8415"));
    t.check_close(P.at({2, 0}), 0.9093, 5e-5, both("P[2, 0] = sin(2) = 0.9093"));
    t.check_close(P.at({3, 0}), 0.1411, 5e-5, both("P[3, 0] = sin(3) = 0.1411"));
    t.check_close(P.at({4, 0}), -0.7568, 5e-5,
                  {.en = "P[4, 0] = sin(4) = -0.7568 (negative)", .zh = "P[4, 0] = sin(4) = -0.7568（为负）"});
    bool slow = true;
    for (int64_t pos = 0; pos < 4; ++pos) slow = slow && std::round(P.at({pos, 510}) * 1e4) == double(pos);
    t.check(slow, {.en = "P[pos, 510] rounds to 0.0000, 0.0001, 0.0002, 0.0003 for pos = 0 .. 3",
                   .zh = "pos = 0 .. 3 时，P[pos, 510] 舍入后是 0.0000、0.0001、0.0002、0.0003"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding, drawn as d2l draws it
void d2l_picture(Tutorial& t) {
    note(
        {.en = "d2l plots columns 6, 7, 8 and 9 of the table for d = 32 and 60 positions. Columns 6 and 7 are "
               "the sine and cosine of pair i = 3, with wavelength 2π · 10000^(6/32) = {:.1f} positions; "
               "columns 8 and 9 are pair i = 4, wavelength 2π · 10000^(8/32) = {:.1f}. Higher columns turn "
               "more slowly.",
         .zh =
             "d2l 对 d = 32、60 个位置画出表的第 6、7、8、9 列。第 6、7 列是 i = 3 这一对的正弦和余弦，波长 "
             "2π · 10000^(6/32) = {:.1f} 个位置；第 8、9 列是 i = 4 这一对，波长 2π · 10000^(8/32) = {:.1f}。越往后的列"
             "转得越慢。"},
        2 * std::numbers::pi * std::pow(10000.0, 6.0 / 32), 2 * std::numbers::pi * std::pow(10000.0, 8.0 / 32));
    nn::PositionalEncoding pe({.num_hiddens = 32, .max_len = 60});
    const c::Tensor P = pe.P.select(0, 0);  // (60, 32)
    tasks::LinePlot plot{.title = "positional encoding, d = 32 (d2l's figure)", .xlabel = "Row (position)"};
    const std::vector<tasks::Dash> dashes = {tasks::Dash::solid, tasks::Dash::dashed, tasks::Dash::dash_dot,
                                             tasks::Dash::dotted};
    for (int64_t col = 6; col < 10; ++col)
        plot.series.push_back(
            {.name = fmt::format("Col {}", col), .y = P.select(1, col).to_vector(), .dash = dashes[col - 6]});
    const auto png = t.out_path("positional_encoding_columns.png");
    tasks::plot_lines(png, plot);

    tasks::Heatmaps maps{.matrices = {{P}},
                         .xlabel = "Column (encoding dimension)",
                         .ylabel = "Row (position)",
                         .title = "the whole table: frequency falls from left to right",
                         .cmap = tasks::Colormap::viridis,
                         .cell_size = 10};
    const auto heat = t.out_path("positional_encoding_table.png");
    tasks::plot_heatmaps(heat, maps);
    note({.en = "Wrote\n    {}\n    {}", .zh = "已写出\n    {}\n    {}"}, png.string(), heat.string());
    double worst = 0;  // the four plotted curves against the formula, all 60 points each
    for (int64_t col = 6; col < 10; ++col) {
        const std::vector<double>& y = plot.series[col - 6].y;
        for (int64_t pos = 0; pos < 60; ++pos) {
            const double angle = pos / std::pow(10000.0, double(col - col % 2) / 32);
            worst = std::max(worst, std::abs(y.at(pos) - (col % 2 == 0 ? std::sin(angle) : std::cos(angle))));
        }
    }
    t.check(worst < 1e-6,
            {.en = "the four plotted curves are sin/cos(pos / 10000^(2i/32)) at all 60 positions "
                   "(largest difference {:.1e})",
             .zh = "画出的四条曲线在全部 60 个位置上都是 sin/cos(pos / 10000^(2i/32))（最大差 {:.1e}）"},
            worst);
    t.check_close(maps.matrices[0][0], table_by_hand(60, 32, Formula::seed002), 1e-6,
                  {.en = "the heatmap is the whole (60, 32) table of seed 002's formula",
                   .zh = "热力图就是种子文档 002 公式给出的整张 (60, 32) 表"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding (d2l's binary-counter intuition)
void binary_counter(Tutorial& t) {
    note({.en = "d2l compares the table with counting in binary: the lowest bit flips at every number, the next "
                "every 2 numbers, the next every 4. The columns of P do the same with continuous values: the "
                "first columns oscillate fast, later ones ever more slowly, so the columns together give every "
                "position a distinct pattern.",
          .zh =
              "d2l 把这张表比作二进制计数：最低位每个数翻转一次，下一位每 2 个数翻转一次，再下一位每 4 个数。P 的各列用"
              "连续值做同样的事：前面的列振荡得快，后面的越来越慢，于是各列合起来给每个位置一个独特的模式。"});
    line({.en = "\n      n   binary    P[n, 0]   P[n, 2]   P[n, 4]   (d = 8)",
          .zh = "\n      n   二进制    P[n, 0]   P[n, 2]   P[n, 4]   (d = 8)"});
    nn::PositionalEncoding small({.num_hiddens = 8, .max_len = 8});
    for (int64_t n = 0; n < 8; ++n)
        line("      {}   {}{}{}    {:>7.3f}   {:>7.3f}   {:>7.3f}", n, (n >> 2) & 1, (n >> 1) & 1, n & 1,
             small.P.at({0, n, 0}), small.P.at({0, n, 2}), small.P.at({0, n, 4}));
    line();
    nn::PositionalEncoding pe({.num_hiddens = 32, .max_len = 60});
    const c::Tensor P = pe.P.select(0, 0);
    std::vector<int64_t> crossings;
    for (int64_t col = 0; col < 12; col += 2) crossings.push_back(zero_crossings(P, col));
    note({.en = "Zero crossings of the sine columns 0, 2, 4, 6, 8, 10 over 60 positions (d = 32): {}",
          .zh = "在 60 个位置上，正弦列 0、2、4、6、8、10 穿过零点的次数（d = 32）：{}"},
         fmt::join(crossings, ", "));
    bool falling = crossings.front() > crossings.back();
    for (size_t i = 1; i < crossings.size(); ++i) falling = falling && crossings[i] <= crossings[i - 1];
    t.check(falling, {.en = "measured on the table: each sine column crosses zero no more often than the one before",
                      .zh = "在表上实测：每个正弦列穿过零点的次数都不多于前一列"});
    note({.en = "The wavelengths form a geometric series, 2π up to 2π · 10000, each pair {:.3f} times longer than "
                "the previous one (10000^(2/d) for d = 32).",
          .zh = "各波长构成等比数列，从 2π 到 2π · 10000，每一对都比前一对长 {:.3f} 倍（d = 32 时为 10000^(2/d)）。"},
         std::pow(10000.0, 2.0 / 32));
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding (relative positions, as d2l explains them)
void relative_positions(Tutorial& t) {
    note(
        {.en = "For one pair with frequency ω, moving k positions on is a rotation by the angle ωk:\n"
               "    [sin ω(p+k)]   [ cos ωk   sin ωk] [sin ωp]\n"
               "    [cos ω(p+k)] = [-sin ωk   cos ωk] [cos ωp]\n"
               "The matrix depends on k, not on p. So 'three positions earlier' is the same linear map "
               "everywhere in the sequence, which a model's projections can learn (d2l, relative positional "
               "information). Checked on the whole table for k = 3, d = 32:",
         .zh =
             "对频率为 ω 的一对，往后移 k 个位置就是旋转角度 ωk：\n"
             "    [sin ω(p+k)]   [ cos ωk   sin ωk] [sin ωp]\n"
             "    [cos ω(p+k)] = [-sin ωk   cos ωk] [cos ωp]\n"
             "这个矩阵只取决于 k，与 p 无关。所以“往前三个位置”在序列的任何地方都是同一个线性映射，模型的投影可以学会它"
             "（d2l 的相对位置信息）。在 k = 3、d = 32 时对整张表检验："});
    const int64_t d = 32, L = 60, k = 3;
    nn::PositionalEncoding pe({.num_hiddens = d, .max_len = L});
    const c::Tensor P = pe.P.select(0, 0).to(DType::float64);  // (L, d)
    c::Tensor R = c::zeros({d, d}, DType::float64);            // block diagonal, acts on rows: P R
    for (int64_t j = 0; j < d; j += 2) {
        const double w = 1 / std::pow(10000.0, double(j) / d);
        R.set({j, j}, std::cos(w * k));
        R.set({j + 1, j}, std::sin(w * k));
        R.set({j, j + 1}, -std::sin(w * k));
        R.set({j + 1, j + 1}, std::cos(w * k));
    }
    note({.en = "    R: (d, d), block diagonal; its first two 2×2 blocks:",
          .zh = "    R：(d, d)，分块对角；它的前两个 2×2 块："});
    show("R[:4, :4]", R.slice(0, 0, 4).slice(1, 0, 4));
    const c::Tensor shifted = c::matmul(P.slice(0, 0, L - k), R);  // (L - k, d)
    t.check_close(shifted, P.slice(0, k, L), 1e-5,
                  {.en = "P[0 : 57] R equals P[3 : 60], row for row", .zh = "P[0 : 57] R 逐行等于 P[3 : 60]"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (Embeddings × sqrt(d_model)); seed 000 › 代码实现 › 编码器
void embedding_times_sqrt_d(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000's encoder computes pos_encoding(embedding(X) * sqrt(num_hiddens)), and seed 004's "
                "Embeddings return lut(x) * sqrt(d_model). Seed 000's reason: the positional encoding lies in "
                "[-1, 1], so the embedding is scaled up before the two are added, and the position does not "
                "drown the word. The sizes, for d = 32 (mean row length):",
          .zh =
              "种子文档 000 的编码器计算 pos_encoding(embedding(X) * sqrt(num_hiddens))，种子文档 004 的 Embeddings "
              "返回 "
              "lut(x) * sqrt(d_model)。种子文档 000 给的理由：位置编码在 [-1, 1] 内，所以先把嵌入放大再相加，位置才不会"
              "淹没词本身。d = 32 时的大小（行的平均长度）："});
    const int64_t d = 32, V = 1000;
    const double root_d = std::sqrt(double(d));
    nn::PositionalEncoding pe({.num_hiddens = d, .max_len = 100});
    const double p_norm = mean_row_norm(pe.P.select(0, 0));
    const c::Tensor normal = c::randn({V, d}, lesson.gen, DType::float64);                 // nn::Embedding's N(0, 1)
    const c::Tensor small = c::div(c::randn({V, d}, lesson.gen, DType::float64), root_d);  // N(0, 1/d)
    const double bound = std::sqrt(6.0 / (V + d));                                         // Xavier uniform, (V, d)
    const c::Tensor xavier = c::uniform({V, d}, -bound, bound, lesson.gen, DType::float64);
    const double n1 = mean_row_norm(normal), ns = mean_row_norm(small), nx = mean_row_norm(xavier);
    auto row = [&](const Phrase& label, double norm, bool scaled) {
        const Phrase times = scaled ? phrase(both("   × √d: {:>7.3f}"), norm * root_d) : Phrase{};
        line(both("      {:<44} {:>7.3f}{}"), label, norm, times);
    };
    line();
    row(phrase({.en = "positional encoding row (√(d/2) = {:.3f})", .zh = "位置编码的一行（√(d/2) = {:.3f}）"},
               std::sqrt(d / 2.0)),
        p_norm, false);
    row(phrase({.en = "embedding N(0, 1), PyTorch's default", .zh = "嵌入 N(0, 1)，PyTorch 的默认值"}), n1, true);
    row(phrase({.en = "embedding N(0, 1/d), rows of length ≈ 1", .zh = "嵌入 N(0, 1/d)，行长约为 1"}), ns, true);
    row(phrase({.en = "embedding Xavier U(±{:.3f}), V = {}", .zh = "嵌入 Xavier U(±{:.3f})，V = {}"}, bound, V), nx,
        true);
    line();
    t.check_close(p_norm, std::sqrt(d / 2.0), 1e-5,
                  {.en = "every P row has length √(d/2): sin² + cos² = 1 per pair",
                   .zh = "P 的每一行长度都是 √(d/2)：每一对 sin² + cos² = 1"});
    t.check(std::abs(n1 / root_d - 1) < 0.05,
            {.en = "an N(0, 1) embedding row has length ≈ √d", .zh = "N(0, 1) 嵌入的一行长约 √d"});
    t.check(ns * root_d > 0.5 * p_norm && ns * root_d < 2 * p_norm,
            {.en = "an N(0, 1/d) row × √d has the size of a P row (within a factor 2)",
             .zh = "N(0, 1/d) 的一行乘以 √d 后与 P 的一行大小相当（相差不到 2 倍）"});
    t.check(nx * root_d < p_norm, {.en = "a Xavier row of a 1000-word table stays smaller than P even after × √d",
                                   .zh = "1000 个词的 Xavier 表，其一行即使乘以 √d 也仍比 P 小"});
    note(
        {.en = "So the argument holds for embeddings whose rows start with length about 1: × √d brings them to "
               "the size of P, and neither term drowns the other. (In the original paper the embedding matrix "
               "is shared with the output layer, which keeps it small.) How much the scaling does depends on "
               "the initialisation: with PyTorch's (and nn::Embedding's) default N(0, 1) the rows are already √d "
               "long and × √d makes them d long, about 8 times the encoding here, while a Xavier-initialised "
               "table with a large vocabulary stays below P. Seed 002's TransformerEmbedding does not scale at "
               "all. The library follows seed 000, on which tutorials 10 to 13 build.",
         .zh =
             "所以这个理由对行长起初约为 1 的嵌入成立：乘以 √d 把它们放大到 P 的大小，两项谁也不淹没谁。（原论文里嵌入"
             "矩阵与输出层共享，这让它保持较小。）缩放起多大作用取决于初始化：用 PyTorch（以及 nn::Embedding）默认的 "
             "N(0, 1)，各行本来就长 √d，乘以 √d 后长 d，这里约为位置编码的 8 倍；而大词表、Xavier 初始化的表仍比 P 小。"
             "种子文档 002 的 TransformerEmbedding 根本不缩放。库遵循种子文档 000，教程 10 到 13 都以它为基础。"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.3 TransformerEmbedding 层实现; seed 000 › 编码器块 [sic] (TransformerEncoder)
void transformer_embedding(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 002's TransformerEmbedding adds the token embedding (TokenEmbedding, an nn.Embedding with "
                "padding_idx = 1) and the table's first T rows. The padding row of the embedding is zero and "
                "receives no gradient, so a padded position carries only its position's code:",
          .zh = "种子文档 002 的 TransformerEmbedding 把词元嵌入（TokenEmbedding，一个 padding_idx = 1 的 "
                "nn.Embedding）与表"
                "的前 T 行相加。嵌入里填充的那一行是零，而且得不到梯度，所以填充位置上只带有它的位置编码："});
    const int64_t d = 8;
    nn::Embedding tok_emb({.num_embeddings = 10, .embedding_dim = d, .padding_idx = 1}, lesson.gen);
    nn::PositionalEncoding pos_emb({.num_hiddens = d, .max_len = 50});
    pos_emb.eval();
    const c::Tensor ids = c::from_vector(std::vector<int64_t>{2, 5, 7, 1, 1}, {1, 5});  // two pads at the end
    const Variable tok = tok_emb(ids);                                                  // (1, 5, d)
    const Variable summed = pos_emb(tok);                                               // (1, 5, d): tok + P[:, :5]
    show("ids", ids);
    note({.en = "    position 3 holds the pad id 1:", .zh = "    位置 3 是填充 id 1："});
    show("tok_emb(ids)[0, 3]", tok.value().select(0, 0).select(0, 3));
    show("(tok + pos)[0, 3]", summed.value().select(0, 0).select(0, 3));
    t.check(c::sum(c::abs(tok_emb.weight.value().select(0, 1))).item() == 0,
            {.en = "row padding_idx = 1 of the embedding is zero", .zh = "嵌入的第 padding_idx = 1 行是零"});
    t.check_close(summed.value().select(0, 0).select(0, 3), pos_emb.P.select(0, 0).select(0, 3), 0,
                  {.en = "so the pad at position 3 becomes exactly P[3]", .zh = "所以位置 3 的填充恰好变成 P[3]"});
    ag::sum(summed).backward();
    t.check(c::sum(c::abs(tok_emb.weight.grad().select(0, 1))).item() == 0 &&
                c::sum(c::abs(tok_emb.weight.grad().select(0, 2))).item() > 0,
            {.en = "after backward, the padding row has zero gradient; token 2's row does not",
             .zh = "backward 之后，填充那一行的梯度为零；词元 2 那一行则不是"});

    note({.en = "\nSeed 000's version, which nn::TransformerEncoder runs first, scales before adding. An encoder "
                "with no blocks returns exactly that sum:",
          .zh = "\n种子文档 000 的写法（nn::TransformerEncoder "
                "最先执行的就是它）先缩放再相加。一个没有块的编码器正好返回这个和："});
    nn::TransformerOptions options{
        .num_hiddens = d, .norm_shape = d, .ffn_num_input = d, .num_heads = 2, .num_layers = 0};
    nn::TransformerEncoder encoder(10, options, lesson.gen);
    encoder.eval();  // dropout off
    const Variable enc = encoder.forward(ids, c::Tensor());
    const c::Tensor expected = c::add(c::mul(encoder.embedding->forward(ids).value(), std::sqrt(double(d))),
                                      encoder.pos_encoding->P.slice(1, 0, 5));
    t.check_close(enc.value(), expected, 1e-6,
                  {.en = "TransformerEncoder (0 blocks) = embedding(X) · √d + P[:, :T]",
                   .zh = "TransformerEncoder（0 个块）= embedding(X) · √d + P[:, :T]"});

    note({.en = "\nDuring step-by-step decoding a token at position 4 must get P[4], not P[0]; forward takes the "
                "position of the first step:",
          .zh = "\n逐步解码时，位置 4 上的词元必须得到 P[4] 而不是 P[0]；forward 接受第一步所在的位置："});
    const Variable one = pos_emb(Variable(c::zeros({1, 1, d})), /*start=*/4);
    t.check_close(one.value().select(0, 0).select(0, 0), pos_emb.P.select(0, 0).select(0, 4), 0,
                  {.en = "pos_encoding(zeros (1, 1, d), start = 4) is P[4]",
                   .zh = "pos_encoding(zeros (1, 1, d), start = 4) 就是 P[4]"});
}

// ---- the exercise (--exercise): tutorials/08_positional_encoding/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding: the table and the shift by k positions
void exercise_table_and_shift(Tutorial& t) {
    note({.en = "Write exercise::positional_encoding(max_len, d) and exercise::shift_matrix(d, k). The checks compare "
                "your table with nn::PositionalEncoding, and test P[pos + k] = P[pos] R for k = 3 and k = -2 "
                "(the rotation the other way).",
          .zh = "写出 exercise::positional_encoding(max_len, d) 和 exercise::shift_matrix(d, k)。检查把你的表与 "
                "nn::PositionalEncoding 比较，并对 k = 3 和 k = -2（反方向旋转）检验 P[pos + k] = P[pos] R。"});
    const c::Tensor P = exercise::positional_encoding(60, 32);
    nn::PositionalEncoding pe({.num_hiddens = 32, .max_len = 60});
    t.check_close(P, pe.P.select(0, 0), 1e-6,
                  {.en = "your (60, 32) table equals nn::PositionalEncoding's",
                   .zh = "你的 (60, 32) 表等于 nn::PositionalEncoding 的表"});
    const c::Tensor Pd = table_by_hand(60, 32, Formula::seed002);
    for (int64_t k : {3, -2}) {
        const c::Tensor R = exercise::shift_matrix(32, k);
        const c::Tensor from = k > 0 ? Pd.slice(0, 0, 60 - k) : Pd.slice(0, -k, 60);
        const c::Tensor to = k > 0 ? Pd.slice(0, k, 60) : Pd.slice(0, 0, 60 + k);
        t.check_close(c::matmul(from, R), to, 1e-12,
                      {.en = "k = {0}: P[pos] R equals P[pos + {0}] for every pos",
                       .zh = "k = {0}：对每个 pos，P[pos] R 等于 P[pos + {0}]"},
                      k);
    }
    const c::Tensor R3 = exercise::shift_matrix(32, 3), Rm3 = exercise::shift_matrix(32, -3);
    t.check_close(
        c::matmul(R3, Rm3), c::eye(32, DType::float64), 1e-12,
        {.en = "R(3) R(-3) = identity: moving back undoes moving on", .zh = "R(3) R(-3) = 单位矩阵：往回移抵消往前移"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 08 · Positional encoding", .zh = "tformer 教程 08 · 位置编码"},
         .follows = {.en = "seed 002 1.2.2–1.2.3; seed 000 编码器 (embedding × √d); seed 004 pe and "
                           "Embeddings; seed 001 _position_embedding; seed 003 (3) 位置编码",
                     .zh = "种子文档 002 的 1.2.2–1.2.3；种子文档 000 编码器（embedding × √d）；种子文档 004 的 pe 和 "
                           "Embeddings；种子文档 001 _position_embedding；种子文档 003 (3) 位置编码"},
         .exercise = {.en = "write the sin/cos table and the rotation that moves it k positions, also for "
                            "k < 0 (tutorials/08_positional_encoding/exercise.cpp)",
                      .zh = "写出 sin/cos 表，以及把它移动 k 个位置的旋转（k < 0 也要）"
                            "（tutorials/08_positional_encoding/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. The table: sines and cosines of decreasing frequency", .zh = "1. 这张表：频率递减的正弦和余弦"},
           [&] { the_table(t); });
    t.step({.en = "2. Seed 003's example values, checked", .zh = "2. 检验种子文档 003 的示例值"},
           [&] { seed_003_example_values(t); });
    t.step({.en = "3. d2l's picture: columns 6 to 9 over 60 positions", .zh = "3. d2l 的图：第 6 到 9 列，60 个位置"},
           [&] { d2l_picture(t); });
    t.step({.en = "4. The binary counter it resembles", .zh = "4. 它像一个二进制计数器"}, [&] { binary_counter(t); });
    t.step({.en = "5. Relative positions: P[pos + k] is a rotation of P[pos]",
            .zh = "5. 相对位置：P[pos + k] 是 P[pos] 的旋转"},
           [&] { relative_positions(t); });
    t.step({.en = "6. Embedding × √d: why seeds 000 and 004 scale the embeddings",
            .zh = "6. 嵌入 × √d：种子文档 000 和 004 为什么要缩放嵌入"},
           [&] { embedding_times_sqrt_d(t, lesson); });
    t.step({.en = "7. TransformerEmbedding: token embedding + position, with padding",
            .zh = "7. TransformerEmbedding：词元嵌入 + 位置，含填充"},
           [&] { transformer_embedding(t, lesson); });
    t.exercise({.en = "Exercise. The table, and the shift by k positions", .zh = "练习. 这张表，以及移动 k 个位置"},
               [&] { exercise_table_and_shift(t); });
    return t.finish();
}
