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
    note(
        "Self-attention ignores the order of its inputs (tutorial 06, step 5), so the Transformer adds "
        "to each token's embedding a vector that depends only on its position. Seed 002 gives the "
        "formula, for position pos and feature pair (2i, 2i+1) of d features:\n"
        "    PE(pos, 2i)   = sin(pos / 10000^(2i/d))\n"
        "    PE(pos, 2i+1) = cos(pos / 10000^(2i/d))\n"
        "nn::PositionalEncoding builds this table once, P of shape (1, max_len, d). For d = 8, the first "
        "5 positions:");
    nn::PositionalEncoding pe({.num_hiddens = 8, .max_len = 100});
    const c::Tensor P = pe.P.select(0, 0);  // (max_len, d)
    line("\n      pos {}", fmt::join(std::vector<std::string>{"    col 0", "    col 1", "    col 2", "    col 3",
                                                              "    col 4", "    col 5", "    col 6", "    col 7"},
                                     ""));
    for (int64_t pos = 0; pos < 5; ++pos) {
        std::string row = fmt::format("      {:>3} ", pos);
        for (int64_t j = 0; j < 8; ++j) row += fmt::format("{:9.4f}", P.at({pos, j}));
        line(row);
    }
    line();
    const c::Tensor mine = table_by_hand(100, 8, Formula::seed002);
    t.check_close(P, mine, 1e-6, "the library's table equals seed 002's formula (float32 vs double)");
    t.check_close(table_by_hand(100, 8, Formula::seed004), mine, 1e-12,
                  "seed 004's div_term = exp(2i · -ln(10000)/d) is the same table");
    t.check_close(table_by_hand(100, 8, Formula::seed001), mine, 1e-12,
                  "seed 001's pos / 10000^((i - i mod 2)/d) is the same table");
    t.check_close(P.select(0, 0), c::tensor({0, 1, 0, 1, 0, 1, 0, 1}, {8}), 0,
                  "position 0 is [0, 1, 0, 1, ...]: sin 0 and cos 0 in every pair");
    note("Every value lies in [-1, 1], and P is a constant: no gradient, not in the state dict.");
}

// seed 003 (003_8fde783e4908788c.txt) › (3) 位置编码（Positional Encoding）
void seed_003_example_values(Tutorial& t) {
    note(
        "Seed 003 prints PositionalEncoding(0) = [0.0000, 0.8415, ...], (1) = [0.0001, 0.9093, ...], "
        "(2) = [0.0002, 0.1411, ...], (3) = [0.0003, 0.7568, ...]. These are not the first two features "
        "of the table: step 1 shows that position 0 must start [0, 1]. With d = 512 (the paper's size):");
    nn::PositionalEncoding pe({.num_hiddens = 512, .max_len = 8});
    const c::Tensor P = pe.P.select(0, 0);
    line("\n      pos    P[pos, 0] = sin(pos)    P[pos, 1] = cos(pos)    P[pos, 510] = sin(pos / 9646.6)");
    for (int64_t pos = 0; pos < 5; ++pos)
        line("      {:>3} {:>22.4f} {:>23.4f} {:>34.6f}", pos, P.at({pos, 0}), P.at({pos, 1}), P.at({pos, 510}));
    line();
    note(
        "So the seed's second numbers 0.8415, 0.9093, 0.1411, 0.7568 are sin(1), sin(2), sin(3) and "
        "|sin(4)|: feature 0 of positions 1 to 4, one position off and with the sign of sin(4) = -0.7568 "
        "lost. The first numbers 0.0000 ... 0.0003 match the slowest sine of the table, feature 510, "
        "whose angle is pos / 10000^(510/512) = pos / 9646.6. Read the seed's values as a sketch.");
    t.check_close(P.at({1, 0}), 0.8415, 5e-5, "P[1, 0] = sin(1) = 0.8415");
    t.check_close(P.at({2, 0}), 0.9093, 5e-5, "P[2, 0] = sin(2) = 0.9093");
    t.check_close(P.at({3, 0}), 0.1411, 5e-5, "P[3, 0] = sin(3) = 0.1411");
    t.check_close(P.at({4, 0}), -0.7568, 5e-5, "P[4, 0] = sin(4) = -0.7568 (negative)");
    bool slow = true;
    for (int64_t pos = 0; pos < 4; ++pos) slow = slow && std::round(P.at({pos, 510}) * 1e4) == double(pos);
    t.check(slow, "P[pos, 510] rounds to 0.0000, 0.0001, 0.0002, 0.0003 for pos = 0 .. 3");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding, drawn as d2l draws it
void d2l_picture(Tutorial& t) {
    note(
        "d2l plots columns 6, 7, 8 and 9 of the table for d = 32 and 60 positions. Columns 6 and 7 are "
        "the sine and cosine of pair i = 3, with wavelength 2π · 10000^(6/32) = {:.1f} positions; "
        "columns 8 and 9 are pair i = 4, wavelength 2π · 10000^(8/32) = {:.1f}. Higher columns turn "
        "more slowly.",
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
    note("Wrote\n    {}\n    {}", png.string(), heat.string());
    double worst = 0;  // the four plotted curves against the formula, all 60 points each
    for (int64_t col = 6; col < 10; ++col) {
        const std::vector<double>& y = plot.series[col - 6].y;
        for (int64_t pos = 0; pos < 60; ++pos) {
            const double angle = pos / std::pow(10000.0, double(col - col % 2) / 32);
            worst = std::max(worst, std::abs(y.at(pos) - (col % 2 == 0 ? std::sin(angle) : std::cos(angle))));
        }
    }
    t.check(worst < 1e-6, fmt::format("the four plotted curves are sin/cos(pos / 10000^(2i/32)) at all 60 positions "
                                      "(largest difference {:.1e})",
                                      worst));
    t.check_close(maps.matrices[0][0], table_by_hand(60, 32, Formula::seed002), 1e-6,
                  "the heatmap is the whole (60, 32) table of seed 002's formula");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding (d2l's binary-counter intuition)
void binary_counter(Tutorial& t) {
    note(
        "d2l compares the table with counting in binary: the lowest bit flips at every number, the next "
        "every 2 numbers, the next every 4. The columns of P do the same with continuous values: the "
        "first columns oscillate fast, later ones ever more slowly, so the columns together give every "
        "position a distinct pattern.");
    line("\n      n   binary    P[n, 0]   P[n, 2]   P[n, 4]   (d = 8)");
    nn::PositionalEncoding small({.num_hiddens = 8, .max_len = 8});
    for (int64_t n = 0; n < 8; ++n)
        line("      {}   {}{}{}    {:>7.3f}   {:>7.3f}   {:>7.3f}", n, (n >> 2) & 1, (n >> 1) & 1, n & 1,
             small.P.at({0, n, 0}), small.P.at({0, n, 2}), small.P.at({0, n, 4}));
    line();
    nn::PositionalEncoding pe({.num_hiddens = 32, .max_len = 60});
    const c::Tensor P = pe.P.select(0, 0);
    std::vector<int64_t> crossings;
    for (int64_t col = 0; col < 12; col += 2) crossings.push_back(zero_crossings(P, col));
    note("Zero crossings of the sine columns 0, 2, 4, 6, 8, 10 over 60 positions (d = 32): {}",
         fmt::join(crossings, ", "));
    bool falling = crossings.front() > crossings.back();
    for (size_t i = 1; i < crossings.size(); ++i) falling = falling && crossings[i] <= crossings[i - 1];
    t.check(falling, "measured on the table: each sine column crosses zero no more often than the one before");
    note(
        "The wavelengths form a geometric series, 2π up to 2π · 10000, each pair {:.3f} times longer than "
        "the previous one (10000^(2/d) for d = 32).",
        std::pow(10000.0, 2.0 / 32));
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding (relative positions, as d2l explains them)
void relative_positions(Tutorial& t) {
    note(
        "For one pair with frequency ω, moving k positions on is a rotation by the angle ωk:\n"
        "    [sin ω(p+k)]   [ cos ωk   sin ωk] [sin ωp]\n"
        "    [cos ω(p+k)] = [-sin ωk   cos ωk] [cos ωp]\n"
        "The matrix depends on k, not on p. So 'three positions earlier' is the same linear map "
        "everywhere in the sequence, which a model's projections can learn (d2l, relative positional "
        "information). Checked on the whole table for k = 3, d = 32:");
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
    note("    R: (d, d), block diagonal; its first two 2×2 blocks:");
    show("R[:4, :4]", R.slice(0, 0, 4).slice(1, 0, 4));
    const c::Tensor shifted = c::matmul(P.slice(0, 0, L - k), R);  // (L - k, d)
    t.check_close(shifted, P.slice(0, k, L), 1e-5, "P[0 : 57] R equals P[3 : 60], row for row");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (Embeddings × sqrt(d_model)); seed 000 › 代码实现 › 编码器
void embedding_times_sqrt_d(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 000's encoder computes pos_encoding(embedding(X) * sqrt(num_hiddens)), and seed 004's "
        "Embeddings return lut(x) * sqrt(d_model). Seed 000's reason: the positional encoding lies in "
        "[-1, 1], so the embedding is scaled up before the two are added, and the position does not "
        "drown the word. The sizes, for d = 32 (mean row length):");
    const int64_t d = 32, V = 1000;
    const double root_d = std::sqrt(double(d));
    nn::PositionalEncoding pe({.num_hiddens = d, .max_len = 100});
    const double p_norm = mean_row_norm(pe.P.select(0, 0));
    const c::Tensor normal = c::randn({V, d}, lesson.gen, DType::float64);                 // nn::Embedding's N(0, 1)
    const c::Tensor small = c::div(c::randn({V, d}, lesson.gen, DType::float64), root_d);  // N(0, 1/d)
    const double bound = std::sqrt(6.0 / (V + d));                                         // Xavier uniform, (V, d)
    const c::Tensor xavier = c::uniform({V, d}, -bound, bound, lesson.gen, DType::float64);
    const double n1 = mean_row_norm(normal), ns = mean_row_norm(small), nx = mean_row_norm(xavier);
    auto row = [&](const std::string& label, double norm, bool scaled) {
        line("      {:<44} {:>7.3f}{}", label, norm, scaled ? fmt::format("   × √d: {:>7.3f}", norm * root_d) : "");
    };
    line();
    row(fmt::format("positional encoding row (√(d/2) = {:.3f})", std::sqrt(d / 2.0)), p_norm, false);
    row("embedding N(0, 1), PyTorch's default", n1, true);
    row("embedding N(0, 1/d), rows of length ≈ 1", ns, true);
    row(fmt::format("embedding Xavier U(±{:.3f}), V = {}", bound, V), nx, true);
    line();
    t.check_close(p_norm, std::sqrt(d / 2.0), 1e-5, "every P row has length √(d/2): sin² + cos² = 1 per pair");
    t.check(std::abs(n1 / root_d - 1) < 0.05, "an N(0, 1) embedding row has length ≈ √d");
    t.check(ns * root_d > 0.5 * p_norm && ns * root_d < 2 * p_norm,
            "an N(0, 1/d) row × √d has the size of a P row (within a factor 2)");
    t.check(nx * root_d < p_norm, "a Xavier row of a 1000-word table stays smaller than P even after × √d");
    note(
        "So the argument holds for embeddings whose rows start with length about 1: × √d brings them to "
        "the size of P, and neither term drowns the other. (In the original paper the embedding matrix "
        "is shared with the output layer, which keeps it small.) How much the scaling does depends on "
        "the initialisation: with PyTorch's (and nn::Embedding's) default N(0, 1) the rows are already √d "
        "long and × √d makes them d long, about 8 times the encoding here, while a Xavier-initialised "
        "table with a large vocabulary stays below P. Seed 002's TransformerEmbedding does not scale at "
        "all. The library follows seed 000, on which tutorials 10 to 13 build.");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.3 TransformerEmbedding 层实现; seed 000 › 编码器块 [sic] (TransformerEncoder)
void transformer_embedding(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 002's TransformerEmbedding adds the token embedding (TokenEmbedding, an nn.Embedding with "
        "padding_idx = 1) and the table's first T rows. The padding row of the embedding is zero and "
        "receives no gradient, so a padded position carries only its position's code:");
    const int64_t d = 8;
    nn::Embedding tok_emb({.num_embeddings = 10, .embedding_dim = d, .padding_idx = 1}, lesson.gen);
    nn::PositionalEncoding pos_emb({.num_hiddens = d, .max_len = 50});
    pos_emb.eval();
    const c::Tensor ids = c::from_vector(std::vector<int64_t>{2, 5, 7, 1, 1}, {1, 5});  // two pads at the end
    const Variable tok = tok_emb(ids);                                                  // (1, 5, d)
    const Variable summed = pos_emb(tok);                                               // (1, 5, d): tok + P[:, :5]
    show("ids", ids);
    note("    position 3 holds the pad id 1:");
    show("tok_emb(ids)[0, 3]", tok.value().select(0, 0).select(0, 3));
    show("(tok + pos)[0, 3]", summed.value().select(0, 0).select(0, 3));
    t.check(c::sum(c::abs(tok_emb.weight.value().select(0, 1))).item() == 0,
            "row padding_idx = 1 of the embedding is zero");
    t.check_close(summed.value().select(0, 0).select(0, 3), pos_emb.P.select(0, 0).select(0, 3), 0,
                  "so the pad at position 3 becomes exactly P[3]");
    ag::sum(summed).backward();
    t.check(c::sum(c::abs(tok_emb.weight.grad().select(0, 1))).item() == 0 &&
                c::sum(c::abs(tok_emb.weight.grad().select(0, 2))).item() > 0,
            "after backward, the padding row has zero gradient; token 2's row does not");

    note(
        "\nSeed 000's version, which nn::TransformerEncoder runs first, scales before adding. An encoder "
        "with no blocks returns exactly that sum:");
    nn::TransformerOptions options{
        .num_hiddens = d, .norm_shape = d, .ffn_num_input = d, .num_heads = 2, .num_layers = 0};
    nn::TransformerEncoder encoder(10, options, lesson.gen);
    encoder.eval();  // dropout off
    const Variable enc = encoder.forward(ids, c::Tensor());
    const c::Tensor expected = c::add(c::mul(encoder.embedding->forward(ids).value(), std::sqrt(double(d))),
                                      encoder.pos_encoding->P.slice(1, 0, 5));
    t.check_close(enc.value(), expected, 1e-6, "TransformerEncoder (0 blocks) = embedding(X) · √d + P[:, :T]");

    note(
        "\nDuring step-by-step decoding a token at position 4 must get P[4], not P[0]; forward takes the "
        "position of the first step:");
    const Variable one = pos_emb(Variable(c::zeros({1, 1, d})), /*start=*/4);
    t.check_close(one.value().select(0, 0).select(0, 0), pos_emb.P.select(0, 0).select(0, 4), 0,
                  "pos_encoding(zeros (1, 1, d), start = 4) is P[4]");
}

// ---- the exercise (--exercise): tutorials/08_positional_encoding/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.2 位置 Embedding: the table and the shift by k positions
void exercise_table_and_shift(Tutorial& t) {
    note(
        "Write exercise::positional_encoding(max_len, d) and exercise::shift_matrix(d, k). The checks compare "
        "your table with nn::PositionalEncoding, and test P[pos + k] = P[pos] R for k = 3 and k = -2 "
        "(the rotation the other way).");
    const c::Tensor P = exercise::positional_encoding(60, 32);
    nn::PositionalEncoding pe({.num_hiddens = 32, .max_len = 60});
    t.check_close(P, pe.P.select(0, 0), 1e-6, "your (60, 32) table equals nn::PositionalEncoding's");
    const c::Tensor Pd = table_by_hand(60, 32, Formula::seed002);
    for (int64_t k : {3, -2}) {
        const c::Tensor R = exercise::shift_matrix(32, k);
        const c::Tensor from = k > 0 ? Pd.slice(0, 0, 60 - k) : Pd.slice(0, -k, 60);
        const c::Tensor to = k > 0 ? Pd.slice(0, k, 60) : Pd.slice(0, 0, 60 + k);
        t.check_close(c::matmul(from, R), to, 1e-12,
                      fmt::format("k = {}: P[pos] R equals P[pos + {}] for every pos", k, k));
    }
    const c::Tensor R3 = exercise::shift_matrix(32, 3), Rm3 = exercise::shift_matrix(32, -3);
    t.check_close(c::matmul(R3, Rm3), c::eye(32, DType::float64), 1e-12,
                  "R(3) R(-3) = identity: moving back undoes moving on");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 08 · Positional encoding",
                .follows = "seed 002 1.2.2–1.2.3; seed 000 编码器 (embedding × √d); seed 004 pe and "
                           "Embeddings; seed 001 _position_embedding; seed 003 (3) 位置编码",
                .exercise = "write the sin/cos table and the rotation that moves it k positions, also for "
                            "k < 0 (tutorials/08_positional_encoding/exercise.cpp)"});
    Lesson lesson;
    t.step("1. The table: sines and cosines of decreasing frequency", [&] { the_table(t); });
    t.step("2. Seed 003's example values, checked", [&] { seed_003_example_values(t); });
    t.step("3. d2l's picture: columns 6 to 9 over 60 positions", [&] { d2l_picture(t); });
    t.step("4. The binary counter it resembles", [&] { binary_counter(t); });
    t.step("5. Relative positions: P[pos + k] is a rotation of P[pos]", [&] { relative_positions(t); });
    t.step("6. Embedding × √d: why seeds 000 and 004 scale the embeddings", [&] { embedding_times_sqrt_d(t, lesson); });
    t.step("7. TransformerEmbedding: token embedding + position, with padding",
           [&] { transformer_embedding(t, lesson); });
    t.exercise("Exercise. The table, and the shift by k positions", [&] { exercise_table_and_shift(t); });
    return t.finish();
}
