// Tutorial 01 · Tensors: shapes, strides, offsets, broadcasting, views and copies.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 基于位置的前馈网络:
// "将输入形状由 (b,n,d) 变换成 (bn,d) … 输出形状由 (bn,d) 变化回 (b,n,d)",
// and 代码实现 › 多头注意力 (transpose_qkv), whose reshapes only make sense
// once you know what a view is. The layout lessons follow minitorch's
// tensor_data.py: index_to_position written out by hand.
// Read it with tutorials/01_tensors/README.md.
#include "common/prelude.hpp"
#include "exercise.hpp"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

using tutorial::tuple_str;

namespace {

// ---- the layout rules, written out by hand ---------------------------------------------

// Row-major strides: the last dimension moves by 1 element, and each earlier
// dimension moves by the product of all the sizes after it.
//   (3, 4) -> (4, 1)      (2, 3, 4) -> (12, 4, 1)
c::Strides row_major_strides(const c::Shape& shape) {
    c::Strides strides = c::Dims::filled(shape.size(), 1);
    for (int d = shape.size() - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
    return strides;
}

// Where element `index` lives in the storage buffer (minitorch's index_to_position):
//   position = offset + Σ_k index[k] · strides[k]
int64_t index_to_position(const c::Dims& index, const c::Strides& strides, int64_t offset) {
    int64_t position = offset;
    for (int k = 0; k < index.size(); ++k) position += index[k] * strides[k];
    return position;
}

// The inverse for row-major order (minitorch's to_index): the n-th element
// counted row by row has index (n ÷ 12, (n ÷ 4) mod 3, n mod 4) in shape (2, 3, 4).
c::Dims to_index(int64_t ordinal, const c::Shape& shape) {
    c::Dims index = c::Dims::filled(shape.size(), 0);
    for (int d = shape.size() - 1; d >= 0; --d) {
        index[d] = ordinal % shape[d];
        ordinal /= shape[d];
    }
    return index;
}

// Every index of a shape, in row-major order.
std::vector<c::Dims> all_indices(const c::Shape& shape) {
    std::vector<c::Dims> out;
    for (int64_t n = 0; n < c::shape_numel(shape); ++n) out.push_back(to_index(n, shape));
    return out;
}

// NumPy's broadcasting rule, by hand: line the shapes up from the right;
// two sizes fit when they are equal or one of them is 1 (which stretches);
// a missing leading size counts as 1. Returns nothing when they do not fit.
std::optional<c::Shape> broadcast_by_hand(const c::Shape& a, const c::Shape& b) {
    const int n = std::max(a.size(), b.size());
    c::Shape out = c::Dims::filled(n, 1);
    for (int i = 1; i <= n; ++i) {  // i-th size from the right
        const int64_t sa = i <= a.size() ? a[a.size() - i] : 1;
        const int64_t sb = i <= b.size() ? b[b.size() - i] : 1;
        if (sa != sb && sa != 1 && sb != 1) return std::nullopt;
        out[n - i] = sa == 1 ? sb : sa;
    }
    return out;
}

// The raw storage buffer of an int64 tensor, from its very first element
// (Tensor::data() would start at the view's offset).
const int64_t* buffer_of(const c::Tensor& t) { return static_cast<const int64_t*>(t.storage()->data()); }

// What the steps share.
struct Lesson {
    c::Tensor x = c::arange(12, DType::int64).view({3, 4});  // (3, 4): the numbers 0..11, for steps 1-4 and exercise 2
};

// ---- the steps --------------------------------------------------------------------------

// minitorch tensor_data.py (strides, contiguity); seed 000's reshapes rest on it
void buffer_shape_strides_offset(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    note(
        "A tensor is a flat buffer of numbers (the storage) and three small pieces of metadata that say "
        "how to read it as a grid: the shape (how many entries along each dimension), the strides (how far "
        "to move in the buffer to take one step along each dimension) and the offset (where element "
        "(0, 0, ...) is). Strides count elements, not bytes.");
    show("x", x);
    describe("x", x);
    note(
        "\nMoving one row down in x skips a whole row of 4 numbers, so stride[0] = 4; moving one column "
        "right moves to the next number, so stride[1] = 1. This row-major ('C order') layout is what every "
        "new tensor gets: the last stride is 1 and each earlier stride is the product of the sizes after it.");
    t.check(x.strides() == c::Strides{4, 1}, "x has strides (4, 1)");
    t.check(x.offset() == 0 && x.numel() == 12, "x starts at offset 0 and has 3 · 4 = 12 elements");
    t.check(x.is_contiguous(), "x is contiguous (row-major, no gaps)");
    for (const c::Shape& shape : {c::Shape{3, 4}, c::Shape{2, 3, 4}, c::Shape{2, 1, 5}, c::Shape{7}}) {
        const c::Strides mine = row_major_strides(shape);
        t.check(mine == c::contiguous_strides(shape),
                fmt::format("row-major strides of {} by hand: {} (same as the library's)", tuple_str(shape),
                            tuple_str(mine)));
    }
}

// minitorch tensor_data.py › index_to_position, to_index
void index_to_position_by_hand(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    note(
        "Element (i, j) of x lives at buffer position offset + i·stride[0] + j·stride[1]. That one line "
        "is the whole secret of strided tensors (minitorch calls it index_to_position); every kernel in "
        "core/ is a fast way of doing it for many elements at once.");
    const int64_t* buffer = buffer_of(x);
    line("\n    index    position = 0 + i·4 + j·1    buffer[position]    x.at(index)");
    for (const c::Dims& index : {c::Dims{0, 0}, c::Dims{0, 3}, c::Dims{1, 0}, c::Dims{2, 1}, c::Dims{2, 3}}) {
        const int64_t pos = index_to_position(index, x.strides(), x.offset());
        line("    {:<8} {:>10} {:>24} {:>16}", tuple_str(index), pos, buffer[pos], x.at(index));
    }
    line();
    bool all_match = true, round_trip = true;
    for (const c::Dims& index : all_indices(x.shape())) {
        const int64_t pos = index_to_position(index, x.strides(), x.offset());
        all_match = all_match && static_cast<double>(buffer[pos]) == x.at(index);
        round_trip = round_trip && to_index(pos, x.shape()) == index;
    }
    t.check(all_match, "for all 12 indices, buffer[index_to_position(index)] == x.at(index)");
    t.check(round_trip, "to_index undoes index_to_position for a contiguous tensor");
    note(
        "\nIn 3-D the same rule holds with one more term: element (1, 2, 3) of a (2, 3, 4) tensor is at "
        "1·12 + 2·4 + 3·1 = 23, the last one.");
    t.check(index_to_position({1, 2, 3}, c::contiguous_strides({2, 3, 4}), 0) == 23,
            "index (1, 2, 3) of a (2, 3, 4) tensor is at position 23");
}

// minitorch tensor_data.py (views: permute keeps the buffer); the transposes of seed 000's code
void views_share_storage(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    note(
        "A view is a new (shape, strides, offset) over the SAME buffer. Nothing is copied, so views are "
        "free, and writing through a view changes the original.");
    c::Tensor xt = x.transpose(0, 1);
    show("x.transpose(0, 1)", xt);
    describe("xt", xt);
    describe("x ", x);
    note(
        "\nTransposing just swaps the shape and the strides: xt(i, j) = buffer[i·1 + j·4] = x(j, i). The "
        "buffer is the same (same storage number), and xt is not contiguous: reading it row by row jumps "
        "through the buffer in steps of 4.");
    t.check(xt.shares_storage(x), "xt shares x's storage (no copy)");
    t.check(xt.strides() == c::Strides{1, 4} && !xt.is_contiguous(), "xt has strides (1, 4): not contiguous");
    bool transposed = true;
    for (const c::Dims& index : all_indices(xt.shape()))
        transposed = transposed && xt.at(index) == x.at({index[1], index[0]}) &&
                     buffer_of(xt)[index_to_position(index, xt.strides(), xt.offset())] == xt.at(index);
    t.check(transposed, "xt(i, j) == x(j, i), and index_to_position with xt's strides finds it");

    const c::Tensor cols = x.slice(1, 1, 3);  // columns 1 and 2
    line();
    show("x.slice(1, 1, 3)", cols);
    describe("cols", cols);
    note("A slice keeps the strides and moves the offset: column 1 starts at buffer position 1.");
    t.check(cols.offset() == 1 && cols.strides() == c::Strides{4, 1}, "the slice has offset 1, strides (4, 1)");
    t.check(cols.at({2, 1}) == static_cast<double>(buffer_of(x)[1 + 2 * 4 + 1 * 1]),
            "cols(2, 1) is buffer[1 + 2·4 + 1·1] = 10");

    const c::Tensor every_other = x.slice(1, 0, 4, 2);  // columns 0 and 2
    describe("x.slice(1, 0, 4, 2)", every_other);
    t.check(every_other.strides() == c::Strides{4, 2}, "a slice with step 2 doubles the stride: (4, 2)");

    const c::Tensor row1 = x.select(0, 1);
    describe("x.select(0, 1)", row1);
    t.check(row1.offset() == 4 && row1.shape() == c::Shape{4}, "select(0, 1) is row 1: offset 4, shape (4)");

    note("\nWriting through a view writes into the shared buffer. After xt.set({3, 0}, 100):");
    xt.set({3, 0}, 100);
    show("x", x);
    t.check(x.at({0, 3}) == 100, "x(0, 3) is now 100: the view and x are the same memory");
    xt.set({3, 0}, 3);  // put it back for the next steps
}

// minitorch tensor_data.py (contiguous); PyTorch's view / reshape rule, which seed 000's transpose_qkv relies on
void copies_contiguous_reshape(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    const c::Tensor xt = x.transpose(0, 1);
    note(
        "Some code needs row-major data (BLAS, for example). contiguous() returns the tensor itself when "
        "it already is row-major and a fresh row-major copy otherwise.");
    const c::Tensor copy = xt.contiguous();
    describe("xt             ", xt);
    describe("xt.contiguous()", copy);
    t.check(!copy.shares_storage(x) && copy.strides() == c::Strides{3, 1},
            "xt.contiguous() is a new buffer with row-major strides (3, 1)");
    t.check_close(copy, xt, 0, "and it holds the same values as xt");
    t.check(x.contiguous().shares_storage(x), "x.contiguous() is x itself: nothing to copy");

    note(
        "\nview(shape) reinterprets the same buffer with a new shape. For x that always works: "
        "x.view({2, 6}) and x.view({6, -1}) (-1 means 'whatever size is left').");
    describe("x.view({2, 6})", x.view({2, 6}));
    describe("x.view({6, -1})", x.view({6, -1}));
    t.check(x.view({2, 6}).shares_storage(x) && x.view({6, -1}).shape() == c::Shape{6, 2},
            "views of x share its storage; -1 is inferred as 2");

    std::vector<int64_t> order;
    for (const c::Dims& index : all_indices(xt.shape()))
        order.push_back(index_to_position(index, xt.strides(), xt.offset()));
    note(
        "\nBut flattening xt cannot be a view. Read row by row, xt visits the buffer positions\n"
        "    {}\nand no single stride walks 0, 4, 8, 1, ... so there is no (shape, strides, offset) that "
        "describes it:",
        fmt::join(order, ", "));
    t.check_throws<ShapeError>(
        "xt.view({12}) throws ShapeError", [&] { (void)xt.view({12}); }, "without a copy");
    const c::Tensor flat = xt.reshape({12});
    t.check(!flat.shares_storage(x) && flat.at({1}) == 4,
            "xt.reshape({12}) copies instead (a new buffer; its element 1 is x(1, 0) = 4)");
    note(
        "reshape() is 'view if you can, copy if you must'. That is exactly PyTorch's rule, and the "
        "reason seed 000's transpose_qkv works (step 7).");
}

// Broadcasting, part 1: the rule by hand against core::broadcast_shapes
void broadcast_rule(Tutorial& t) {
    note(
        "Elementwise ops (add, mul, ...) accept operands of different shapes when they broadcast:\n"
        "  1. line the shapes up from the right (a missing leading size counts as 1);\n"
        "  2. at each position the sizes must be equal, or one of them must be 1;\n"
        "  3. a size 1 stretches to match the other, by reusing the same element.\n"
        "Here is that rule written by hand next to the library's core::broadcast_shapes:");
    struct Case {
        c::Shape a, b;
        const char* comment;
    };
    const Case cases[] = {
        {{2, 3}, {3}, "a bias added to every row"},
        {{2, 1}, {1, 3}, "column + row: an outer sum"},
        {{2, 1, 4}, {3, 1}, "three dimensions, both stretch"},
        {{2, 4, 5}, {2, 1, 5}, "scores (B, T, S) + mask (B, 1, S)"},
        {{4}, {}, "a 0-d scalar fits anything"},
        {{2, 3}, {2}, "3 vs 2 at the right: no"},
    };
    line("\n    {:<10} {:<10} {}", "a", "b", "broadcast");
    for (const Case& k : cases) {
        const std::optional<c::Shape> mine = broadcast_by_hand(k.a, k.b);
        line("    {:<10} {:<10} {:<12} {}", tuple_str(k.a), tuple_str(k.b), mine ? tuple_str(*mine) : "error",
             k.comment);
    }
    line();
    for (const Case& k : cases) {
        const std::optional<c::Shape> mine = broadcast_by_hand(k.a, k.b);
        std::optional<c::Shape> library;
        try {
            library = c::broadcast_shapes(k.a, k.b, "add");
        } catch (const ShapeError&) {
            // library stays empty: the shapes do not broadcast
        }
        t.check(mine.has_value() == library.has_value() && (!mine || *mine == *library),
                fmt::format("{} with {}: the hand rule agrees with broadcast_shapes", tuple_str(k.a), tuple_str(k.b)));
    }
}

// Broadcasting, part 2: the values, the stride-0 view, and the error
void broadcast_values(Tutorial& t) {
    note("\nWith values: a (2, 3) matrix plus a (3) row adds the row to each row of the matrix.");
    const c::Tensor a = c::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
    const c::Tensor b = c::tensor({10, 20, 30}, {3});
    const c::Tensor sum = c::add(a, b);
    show("a", a);
    show("b", b);
    show("a + b", sum);
    bool rows_ok = true;
    for (const c::Dims& index : all_indices(sum.shape()))
        rows_ok = rows_ok && sum.at(index) == a.at(index) + b.at({index[1]});
    t.check(rows_ok, "(a + b)(i, j) == a(i, j) + b(j) for every i, j");

    note(
        "\nBroadcasting copies nothing: it is a view with stride 0, so stepping along the stretched "
        "dimension stays on the same element. expand() shows the view the kernel reads:");
    const c::Tensor stretched = b.expand({2, 3});
    describe("b.expand({2, 3})", stretched);
    t.check(stretched.strides() == c::Strides{0, 1} && stretched.shares_storage(b),
            "b.expand({2, 3}) has strides (0, 1) over b's own storage");

    const c::Tensor col = c::tensor({100, 200}, {2, 1});
    show("col", col);
    show("col + b", c::add(col, b));
    t.check_close(c::add(col, b), c::tensor({110, 120, 130, 210, 220, 230}, {2, 3}), 0,
                  "a (2, 1) column plus a (3) row is the (2, 3) table of all sums");

    note("\nShapes that do not broadcast are an error that names the op and both shapes:");
    t.check_throws<ShapeError>(
        "add((2, 3), (2)) throws ShapeError",
        [&] {
            (void)c::add(a, c::tensor({1, 2}, {2}));
        },
        "cannot broadcast");
    note(
        "To add one number per ROW, make it a column first: a (2) tensor unsqueezed to (2, 1) "
        "(PyTorch: x[:, None]).");
    const c::Tensor per_row = c::add(a, c::tensor({100, 200}, {2}).unsqueeze(1));
    show("a + [100, 200].unsqueeze(1)", per_row);
    t.check(per_row.at({1, 0}) == 204, "row 1 got 200 added: 4 + 200 = 204");
}

// NumPy's broadcasting rule, which every document's elementwise op assumes
void broadcasting(Tutorial& t) {
    broadcast_rule(t);
    broadcast_values(t);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 基于位置的前馈网络
void position_wise_ffn_reshape(Tutorial& t) {
    note(
        "Seed 000 (基于位置的前馈网络) explains the position-wise feed-forward network this way: turn the "
        "input of shape (b, n, d) into (bn, d), apply the dense layers to each of the bn rows, and turn "
        "the (bn, d') result back into (b, n, d'). n is the sequence length, which changes from batch to "
        "batch, so the layer must not depend on it: it treats every position the same way.");
    note("\nHere b = 2 sequences, n = 3 positions, d = 4 features:");
    const c::Tensor X = c::arange(24, DType::float64).view({2, 3, 4});  // (b, n, d)
    const c::Tensor X2 = X.view({6, 4});                                // (bn, d)
    show("X", X);
    describe("X      ", X);
    describe("X2 = X.view({6, 4})", X2);
    t.check(X2.shares_storage(X), "(b, n, d) -> (bn, d) is a view: X2 shares X's storage, nothing moved");
    bool rows_ok = true;
    for (int64_t r = 0; r < 6; ++r)
        for (int64_t k = 0; k < 4; ++k) rows_ok = rows_ok && X2.at({r, k}) == X.at({r / 3, r % 3, k});
    t.check(rows_ok, "row r of X2 is position r mod 3 of sequence r div 3, i.e. X2[r] == X[r / n, r % n]");

    note("\nA dense layer y = x Wᵀ + bias with W of shape (d', d) = (5, 4), applied to all 6 rows at once:");
    const c::Tensor W = c::sub(c::mul(c::arange(20, DType::float64).view({5, 4}), 0.1), 1.0);  // (d', d)
    const c::Tensor bias = c::tensor({0.5, -0.5, 1, 0, 2}, {5}, DType::float64);               // (d')
    const c::Tensor Y2 = c::linear(X2, W, bias);                                               // (bn, d')
    const c::Tensor Y = Y2.view({2, 3, 5});                                                    // (b, n, d')
    note("    Y = linear(X2, W, bias).view({2, 3, 5})");
    show("Y", Y);
    t.check(Y.shares_storage(Y2) && Y.shape() == c::Shape{2, 3, 5},
            "(bn, d') -> (b, n, d') is a view too: only the shape changes");

    bool per_position = true;
    for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
            const c::Tensor one = c::linear(X.select(0, i).select(0, j).unsqueeze(0), W, bias);  // (1, d')
            for (int64_t k = 0; k < 5; ++k) per_position = per_position && one.at({0, k}) == Y.at({i, j, k});
        }
    t.check(per_position, "Y[i, j] equals the dense layer applied to position X[i, j] alone (all 6 positions)");
    t.check_close(c::linear(X, W, bias), Y, 0,
                  "linear() on the 3-D X directly gives the same Y (it works on the last dimension, like nn.Linear)");
    note(
        "\nThat last check is the remark in seed 000's code: nn.Linear accepts any number of leading "
        "dimensions and only looks at the last one, so the reshape is a view, not work.");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_qkv, transpose_output)
void transpose_qkv_copies(Tutorial& t) {
    note(
        "Multi-head attention (多头注意力) splits the d features of every position into h heads of d/h "
        "features and moves the head dimension next to the batch, so that all heads of all sequences are "
        "one batch of attention problems. Seed 000's transpose_qkv does it in three lines:\n"
        "    X.reshape(b, n, h, d/h)   a view: just splits the last dimension\n"
        "    X.permute(0, 2, 1, 3)     a view: shape (b, h, n, d/h), strides reordered\n"
        "    X.reshape(b*h, n, d/h)    a COPY: the permuted layout has no single stride for b*h");
    const int64_t b = 2, n = 3, d = 4, h = 2;
    const c::Tensor X = c::arange(b * n * d, DType::int64).view({b, n, d});
    const c::Tensor split = X.view({b, n, h, d / h});
    const c::Tensor moved = split.permute({0, 2, 1, 3});
    const c::Tensor heads = moved.reshape({-1, n, d / h});
    describe("X                    ", X);
    describe("view (b, n, h, d/h)  ", split);
    describe("permute(0, 2, 1, 3)  ", moved);
    describe("reshape (b*h, n, d/h)", heads);
    show("heads", heads);
    t.check(split.shares_storage(X) && moved.shares_storage(X), "the first reshape and the permute are views");
    t.check(!heads.shares_storage(X) && heads.is_contiguous(), "the last reshape had to copy into a new buffer");
    bool heads_ok = true;
    for (int64_t i = 0; i < b; ++i)
        for (int64_t k = 0; k < h; ++k)
            for (int64_t p = 0; p < n; ++p)
                for (int64_t f = 0; f < d / h; ++f)
                    heads_ok = heads_ok && heads.at({i * h + k, p, f}) == X.at({i, p, k * (d / h) + f});
    t.check(heads_ok, "heads[i·h + k, p] holds features k·d/h .. (k+1)·d/h - 1 of X[i, p]: head k of sequence i");

    note("\ntranspose_output undoes it: (b*h, n, d/h) -> (b, h, n, d/h) -> permute -> (b, n, d).");
    const c::Tensor back = heads.view({b, h, n, d / h}).permute({0, 2, 1, 3}).reshape({b, n, d});
    t.check_close(back, X, 0, "transpose_output(transpose_qkv(X)) == X");
    note("Tutorial 07 does this with autograd Variables inside nn::MultiHeadAttention.");
}

// ---- the exercise (--exercise): tutorials/01_tensors/exercise.cpp -------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_output)
void exercise_transpose_output(Tutorial& t) {
    note(
        "Write exercise::transpose_output(X, num_heads): X (B·H, T, d) -> (B, T, H·d), the inverse of "
        "step 7's transpose_qkv. The checks run it on the heads of two random (B, T, D) tensors and "
        "compare with the tensor they came from, and with the library's nn-level transpose_output.");
    c::Generator gen(101);
    for (const auto& [B, T, D, H] : {std::array<int64_t, 4>{2, 3, 4, 2}, std::array<int64_t, 4>{3, 5, 12, 4}}) {
        const c::Tensor X = c::randn({B, T, D}, gen, DType::float64);
        const c::Tensor heads = X.view({B, T, H, D / H}).permute({0, 2, 1, 3}).reshape({B * H, T, D / H});
        const c::Tensor back = exercise::transpose_output(heads, H);
        t.check_close(
            back, X, 0,
            fmt::format("transpose_output(transpose_qkv(X)) == X for (B, T, D) = ({}, {}, {}), H = {}", B, T, D, H));
    }
    const c::Tensor heads = c::arange(24, DType::float64).view({4, 3, 2});
    const c::Tensor back = exercise::transpose_output(heads, 2);
    t.check(back.shape() == c::Shape{2, 3, 4}, "(B·H, T, d) = (4, 3, 2) with H = 2 becomes (2, 3, 4)");
    t.check(back.defined() && back.shape() == c::Shape{2, 3, 4} && back.at({1, 2, 3}) == heads.at({3, 2, 1}),
            "element (b, t, h·d + f) comes from head row b·H + h: back[1, 2, 3] == heads[3, 2, 1]");
}

// minitorch tensor_data.py (views) and seed 000's transpose_qkv with one head
void exercise_predict_layouts(Tutorial& t, const Lesson& lesson) {
    const c::Tensor view = lesson.x.transpose(0, 1).slice(0, 1, 3);
    const c::Strides mine = exercise::predicted_strides();
    t.check(mine == view.strides(),
            fmt::format("your strides {} for x.transpose(0, 1).slice(0, 1, 3)", tuple_str(mine)));
    const int64_t b = 2, n = 3, d = 4;
    const c::Tensor X = c::arange(b * n * d, DType::int64).view({b, n, d});
    const c::Tensor one_head = X.view({b, n, 1, d}).permute({0, 2, 1, 3}).reshape({b, n, d});
    t.check(exercise::last_reshape_copies_with_one_head() == !one_head.shares_storage(X),
            "your answer to 'does the last reshape copy when h = 1?'");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 01 · Tensors: shapes, strides, views and broadcasting",
                .follows = "seed 000 基于位置的前馈网络 and transpose_qkv; minitorch's index_to_position",
                .exercise = "write seed 000's transpose_output with view / permute / reshape, and predict "
                            "two layouts (tutorials/01_tensors/exercise.cpp)"});
    const Lesson lesson{};
    t.step("1. A tensor is a buffer plus shape, strides and offset", [&] { buffer_shape_strides_offset(t, lesson); });
    t.step("2. index_to_position by hand", [&] { index_to_position_by_hand(t, lesson); });
    t.step("3. Views: transpose, slice and select share the storage", [&] { views_share_storage(t, lesson); });
    t.step("4. Copies: contiguous(), reshape() and when view() refuses", [&] { copies_contiguous_reshape(t, lesson); });
    t.step("5. Broadcasting", [&] { broadcasting(t); });
    t.step("6. Seed 000: the position-wise FFN reshape (b, n, d) -> (bn, d) -> (b, n, d)",
           [&] { position_wise_ffn_reshape(t); });
    t.step("7. Seed 000's transpose_qkv: when a reshape has to copy", [&] { transpose_qkv_copies(t); });
    t.exercise("Exercise 1. transpose_output, the inverse of transpose_qkv", [&] { exercise_transpose_output(t); });
    t.exercise("Exercise 2. Predict the layouts", [&] { exercise_predict_layouts(t, lesson); });
    return t.finish();
}
