// Tutorial 01 · Tensors: shapes, strides, offsets, broadcasting, views and copies.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 理论学习 › 基于位置的前馈网络:
// "将输入形状由 (b,n,d) 变换成 (bn,d) … 输出形状由 (bn,d) 变化回 (b,n,d)",
// and 代码实现 › 多头注意力 (transpose_qkv), whose reshapes only make sense
// once you know what a view is. The layout lessons follow minitorch's
// tensor_data.py: index_to_position written out by hand.
// Read it with tutorials/01_tensors/README.md.
// tutorial-languages: en zh
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
    note({.en = "A tensor is a flat buffer of numbers (the storage) and three small pieces of metadata that say "
                "how to read it as a grid: the shape (how many entries along each dimension), the strides (how far "
                "to move in the buffer to take one step along each dimension) and the offset (where element "
                "(0, 0, ...) is). Strides count elements, not bytes.",
          .zh = "张量就是一块扁平的数字缓冲区（存储，storage），外加三项小小的元数据，说明怎样把它读成一个网格："
                "形状（每个维度上有多少个元素）、步幅（沿某个维度走一步，要在缓冲区里移动多远）和偏移"
                "（元素 (0, 0, ...) 在哪里）。步幅以元素为单位，而不是字节。"});
    show("x", x);
    describe("x", x);
    note({.en = "\nMoving one row down in x skips a whole row of 4 numbers, so stride[0] = 4; moving one column "
                "right moves to the next number, so stride[1] = 1. This row-major ('C order') layout is what every "
                "new tensor gets: the last stride is 1 and each earlier stride is the product of the sizes after it.",
          .zh = "\n在 x 中往下走一行，要跳过一整行的 4 个数，所以 stride[0] = 4；往右走一列，就是下一个数，所以 "
                "stride[1] = 1。新建的张量都采用这种行优先（“C 顺序”）的布局：最后一个步幅是 1，前面每个步幅都是"
                "它后面各维大小的乘积。"});
    t.check(x.strides() == c::Strides{4, 1}, {.en = "x has strides (4, 1)", .zh = "x 的步幅是 (4, 1)"});
    t.check(x.offset() == 0 && x.numel() == 12, {.en = "x starts at offset 0 and has 3 · 4 = 12 elements",
                                                 .zh = "x 从偏移 0 开始，共有 3 · 4 = 12 个元素"});
    t.check(x.is_contiguous(), {.en = "x is contiguous (row-major, no gaps)", .zh = "x 是连续的（行优先，没有空隙）"});
    for (const c::Shape& shape : {c::Shape{3, 4}, c::Shape{2, 3, 4}, c::Shape{2, 1, 5}, c::Shape{7}}) {
        const c::Strides mine = row_major_strides(shape);
        t.check(mine == c::contiguous_strides(shape),
                {.en = "row-major strides of {} by hand: {} (same as the library's)",
                 .zh = "手算 {} 的行优先步幅：{}（与库的结果相同）"},
                tuple_str(shape), tuple_str(mine));
    }
}

// minitorch tensor_data.py › index_to_position, to_index
void index_to_position_by_hand(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    note({.en = "Element (i, j) of x lives at buffer position offset + i·stride[0] + j·stride[1]. That one line "
                "is the whole secret of strided tensors (minitorch calls it index_to_position); every kernel in "
                "core/ is a fast way of doing it for many elements at once.",
          .zh = "x 的元素 (i, j) 位于缓冲区的 offset + i·stride[0] + j·stride[1] 处。带步幅的张量的全部秘密就是这"
                "一行（minitorch 把它叫作 index_to_position）；core/ 里的每个计算核，都只是对许多元素同时快速地做"
                "这件事。"});
    const int64_t* buffer = buffer_of(x);
    line({.en = "\n    index    position = 0 + i·4 + j·1    buffer[position]    x.at(index)",
          .zh = "\n    下标     位置 = 0 + i·4 + j·1        buffer[位置]        x.at(下标)"});
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
    t.check(all_match, {.en = "for all 12 indices, buffer[index_to_position(index)] == x.at(index)",
                        .zh = "对全部 12 个下标，buffer[index_to_position(index)] == x.at(index)"});
    t.check(round_trip, {.en = "to_index undoes index_to_position for a contiguous tensor",
                         .zh = "对连续张量，to_index 正好是 index_to_position 的逆"});
    note({.en = "\nIn 3-D the same rule holds with one more term: element (1, 2, 3) of a (2, 3, 4) tensor is at "
                "1·12 + 2·4 + 3·1 = 23, the last one.",
          .zh =
              "\n三维时规则相同，只是多一项：(2, 3, 4) 张量的元素 (1, 2, 3) 位于 1·12 + 2·4 + 3·1 = 23，即最后一个。"});
    t.check(index_to_position({1, 2, 3}, c::contiguous_strides({2, 3, 4}), 0) == 23,
            {.en = "index (1, 2, 3) of a (2, 3, 4) tensor is at position 23",
             .zh = "(2, 3, 4) 张量的下标 (1, 2, 3) 位于位置 23"});
}

// minitorch tensor_data.py (views: permute keeps the buffer); the transposes of seed 000's code
void views_share_storage(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    note({.en = "A view is a new (shape, strides, offset) over the SAME buffer. Nothing is copied, so views are "
                "free, and writing through a view changes the original.",
          .zh = "视图就是在同一块缓冲区上换一组（形状、步幅、偏移）。什么也不复制，所以视图不花代价；通过视图写入，"
                "原张量也随之改变。"});
    c::Tensor xt = x.transpose(0, 1);
    show("x.transpose(0, 1)", xt);
    describe("xt", xt);
    describe("x ", x);
    note({.en = "\nTransposing just swaps the shape and the strides: xt(i, j) = buffer[i·1 + j·4] = x(j, i). The "
                "buffer is the same (same storage number), and xt is not contiguous: reading it row by row jumps "
                "through the buffer in steps of 4.",
          .zh = "\n转置只是交换形状和步幅：xt(i, j) = buffer[i·1 + j·4] = x(j, i)。缓冲区还是同一块（存储编号相同），"
                "而 xt 不再连续：逐行读它时，要在缓冲区里以 4 为步长跳着走。"});
    t.check(xt.shares_storage(x), {.en = "xt shares x's storage (no copy)", .zh = "xt 与 x 共用存储（没有复制）"});
    t.check(xt.strides() == c::Strides{1, 4} && !xt.is_contiguous(),
            {.en = "xt has strides (1, 4): not contiguous", .zh = "xt 的步幅是 (1, 4)：不连续"});
    bool transposed = true;
    for (const c::Dims& index : all_indices(xt.shape()))
        transposed = transposed && xt.at(index) == x.at({index[1], index[0]}) &&
                     buffer_of(xt)[index_to_position(index, xt.strides(), xt.offset())] == xt.at(index);
    t.check(transposed, {.en = "xt(i, j) == x(j, i), and index_to_position with xt's strides finds it",
                         .zh = "xt(i, j) == x(j, i)，而且用 xt 的步幅做 index_to_position 正好找到它"});

    const c::Tensor cols = x.slice(1, 1, 3);  // columns 1 and 2
    line();
    show("x.slice(1, 1, 3)", cols);
    describe("cols", cols);
    note({.en = "A slice keeps the strides and moves the offset: column 1 starts at buffer position 1.",
          .zh = "切片保留步幅、移动偏移：第 1 列从缓冲区位置 1 开始。"});
    t.check(cols.offset() == 1 && cols.strides() == c::Strides{4, 1},
            {.en = "the slice has offset 1, strides (4, 1)", .zh = "切片的偏移是 1，步幅是 (4, 1)"});
    t.check(cols.at({2, 1}) == static_cast<double>(buffer_of(x)[1 + 2 * 4 + 1 * 1]),
            {.en = "cols(2, 1) is buffer[1 + 2·4 + 1·1] = 10", .zh = "cols(2, 1) 就是 buffer[1 + 2·4 + 1·1] = 10"});

    const c::Tensor every_other = x.slice(1, 0, 4, 2);  // columns 0 and 2
    describe("x.slice(1, 0, 4, 2)", every_other);
    t.check(every_other.strides() == c::Strides{4, 2},
            {.en = "a slice with step 2 doubles the stride: (4, 2)", .zh = "步长为 2 的切片把步幅加倍：(4, 2)"});

    const c::Tensor row1 = x.select(0, 1);
    describe("x.select(0, 1)", row1);
    t.check(row1.offset() == 4 && row1.shape() == c::Shape{4},
            {.en = "select(0, 1) is row 1: offset 4, shape (4)", .zh = "select(0, 1) 就是第 1 行：偏移 4，形状 (4)"});

    note({.en = "\nWriting through a view writes into the shared buffer. After xt.set({3, 0}, 100):",
          .zh = "\n通过视图写入，就是写进共用的缓冲区。执行 xt.set({3, 0}, 100) 之后："});
    xt.set({3, 0}, 100);
    show("x", x);
    t.check(x.at({0, 3}) == 100, {.en = "x(0, 3) is now 100: the view and x are the same memory",
                                  .zh = "x(0, 3) 现在是 100：视图和 x 是同一块内存"});
    xt.set({3, 0}, 3);  // put it back for the next steps
}

// minitorch tensor_data.py (contiguous); PyTorch's view / reshape rule, which seed 000's transpose_qkv relies on
void copies_contiguous_reshape(Tutorial& t, const Lesson& lesson) {
    const c::Tensor& x = lesson.x;
    const c::Tensor xt = x.transpose(0, 1);
    note({.en = "Some code needs row-major data (BLAS, for example). contiguous() returns the tensor itself when "
                "it already is row-major and a fresh row-major copy otherwise.",
          .zh = "有些代码（比如 BLAS）需要行优先的数据。contiguous() 在张量已经是行优先时返回它本身，否则返回一份"
                "新的行优先副本。"});
    const c::Tensor copy = xt.contiguous();
    describe("xt             ", xt);
    describe("xt.contiguous()", copy);
    t.check(!copy.shares_storage(x) && copy.strides() == c::Strides{3, 1},
            {.en = "xt.contiguous() is a new buffer with row-major strides (3, 1)",
             .zh = "xt.contiguous() 是一块新缓冲区，步幅为行优先的 (3, 1)"});
    t.check_close(copy, xt, 0, {.en = "and it holds the same values as xt", .zh = "而且其中的值与 xt 相同"});
    t.check(x.contiguous().shares_storage(x),
            {.en = "x.contiguous() is x itself: nothing to copy", .zh = "x.contiguous() 就是 x 本身：无需复制"});

    note({.en = "\nview(shape) reinterprets the same buffer with a new shape. For x that always works: "
                "x.view({2, 6}) and x.view({6, -1}) (-1 means 'whatever size is left').",
          .zh = "\nview(shape) 用新的形状重新解读同一块缓冲区。对 x 这总是可行的：x.view({2, 6}) 和 x.view({6, -1})"
                "（-1 的意思是“剩下多少就是多少”）。"});
    describe("x.view({2, 6})", x.view({2, 6}));
    describe("x.view({6, -1})", x.view({6, -1}));
    t.check(x.view({2, 6}).shares_storage(x) && x.view({6, -1}).shape() == c::Shape{6, 2},
            {.en = "views of x share its storage; -1 is inferred as 2", .zh = "x 的视图共用它的存储；-1 被推断为 2"});

    std::vector<int64_t> order;
    for (const c::Dims& index : all_indices(xt.shape()))
        order.push_back(index_to_position(index, xt.strides(), xt.offset()));
    note({.en = "\nBut flattening xt cannot be a view. Read row by row, xt visits the buffer positions\n"
                "    {}\nand no single stride walks 0, 4, 8, 1, ... so there is no (shape, strides, offset) that "
                "describes it:",
          .zh = "\n但把 xt 展平不可能是视图。逐行读 xt，访问的缓冲区位置依次是\n"
                "    {}\n没有哪个单一步幅能走出 0, 4, 8, 1, ...，所以不存在描述它的（形状、步幅、偏移）："},
         fmt::join(order, ", "));
    t.check_throws<ShapeError>(
        {.en = "xt.view({12}) throws ShapeError", .zh = "xt.view({12}) 抛出 ShapeError"}, [&] { (void)xt.view({12}); },
        "without a copy");
    const c::Tensor flat = xt.reshape({12});
    t.check(!flat.shares_storage(x) && flat.at({1}) == 4,
            {.en = "xt.reshape({12}) copies instead (a new buffer; its element 1 is x(1, 0) = 4)",
             .zh = "xt.reshape({12}) 则改为复制（新缓冲区；它的第 1 个元素是 x(1, 0) = 4）"});
    note({.en = "reshape() is 'view if you can, copy if you must'. That is exactly PyTorch's rule, and the "
                "reason seed 000's transpose_qkv works (step 7).",
          .zh = "reshape() 的规则是“能做视图就做视图，不得已才复制”。这正是 PyTorch 的规则，也是种子文档 000 的 "
                "transpose_qkv 能够成立的原因（第 7 步）。"});
}

// Broadcasting, part 1: the rule by hand against core::broadcast_shapes
void broadcast_rule(Tutorial& t) {
    note({.en = "Elementwise ops (add, mul, ...) accept operands of different shapes when they broadcast:\n"
                "  1. line the shapes up from the right (a missing leading size counts as 1);\n"
                "  2. at each position the sizes must be equal, or one of them must be 1;\n"
                "  3. a size 1 stretches to match the other, by reusing the same element.\n"
                "Here is that rule written by hand next to the library's core::broadcast_shapes:",
          .zh = "逐元素运算（add、mul 等）在两个操作数可以广播时，接受不同的形状：\n"
                "  1. 把两个形状右对齐（前面缺的维度当作大小 1）；\n"
                "  2. 每个位置上两个大小必须相等，或者其中一个是 1；\n"
                "  3. 大小为 1 的维度重复使用同一个元素，伸展到与另一个相同。\n"
                "下面是手写的这条规则，与库里的 core::broadcast_shapes 对照："});
    struct Case {
        c::Shape a, b;
        Text comment;
    };
    const Case cases[] = {
        {{2, 3}, {3}, {.en = "a bias added to every row", .zh = "给每一行加上偏置"}},
        {{2, 1}, {1, 3}, {.en = "column + row: an outer sum", .zh = "列 + 行：外和"}},
        {{2, 1, 4}, {3, 1}, {.en = "three dimensions, both stretch", .zh = "三维，两边都伸展"}},
        {{2, 4, 5}, {2, 1, 5}, {.en = "scores (B, T, S) + mask (B, 1, S)", .zh = "分数 (B, T, S) + 掩码 (B, 1, S)"}},
        {{4}, {}, {.en = "a 0-d scalar fits anything", .zh = "0 维标量与任何形状都相容"}},
        {{2, 3}, {2}, {.en = "3 vs 2 at the right: no", .zh = "最右边 3 对 2：不行"}},
    };
    line({.en = "\n    a          b          broadcast", .zh = "\n    a          b          广播结果"});
    for (const Case& k : cases) {
        const std::optional<c::Shape> mine = broadcast_by_hand(k.a, k.b);
        const Phrase result = mine ? phrase(both("{}"), tuple_str(*mine)) : phrase({.en = "error", .zh = "出错"});
        line(both("    {:<10} {:<10} {:<12} {}"), tuple_str(k.a), tuple_str(k.b), result, phrase(k.comment));
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
                {.en = "{} with {}: the hand rule agrees with broadcast_shapes",
                 .zh = "{} 与 {}：手写规则与 broadcast_shapes 一致"},
                tuple_str(k.a), tuple_str(k.b));
    }
}

// Broadcasting, part 2: the values, the stride-0 view, and the error
void broadcast_values(Tutorial& t) {
    note({.en = "\nWith values: a (2, 3) matrix plus a (3) row adds the row to each row of the matrix.",
          .zh = "\n看具体数值：(2, 3) 矩阵加上一个 (3) 的行向量，就是把这行加到矩阵的每一行上。"});
    const c::Tensor a = c::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
    const c::Tensor b = c::tensor({10, 20, 30}, {3});
    const c::Tensor sum = c::add(a, b);
    show("a", a);
    show("b", b);
    show("a + b", sum);
    bool rows_ok = true;
    for (const c::Dims& index : all_indices(sum.shape()))
        rows_ok = rows_ok && sum.at(index) == a.at(index) + b.at({index[1]});
    t.check(rows_ok, {.en = "(a + b)(i, j) == a(i, j) + b(j) for every i, j",
                      .zh = "对所有 i、j，(a + b)(i, j) == a(i, j) + b(j)"});

    note({.en = "\nBroadcasting copies nothing: it is a view with stride 0, so stepping along the stretched "
                "dimension stays on the same element. expand() shows the view the kernel reads:",
          .zh = "\n广播什么也不复制：它是一个步幅为 0 的视图，沿伸展出来的维度走，始终停在同一个元素上。expand() "
                "展示了计算核读取的那个视图："});
    const c::Tensor stretched = b.expand({2, 3});
    describe("b.expand({2, 3})", stretched);
    t.check(stretched.strides() == c::Strides{0, 1} && stretched.shares_storage(b),
            {.en = "b.expand({2, 3}) has strides (0, 1) over b's own storage",
             .zh = "b.expand({2, 3}) 的步幅是 (0, 1)，用的就是 b 自己的存储"});

    const c::Tensor col = c::tensor({100, 200}, {2, 1});
    show("col", col);
    show("col + b", c::add(col, b));
    t.check_close(c::add(col, b), c::tensor({110, 120, 130, 210, 220, 230}, {2, 3}), 0,
                  {.en = "a (2, 1) column plus a (3) row is the (2, 3) table of all sums",
                   .zh = "(2, 1) 的列加上 (3) 的行，得到所有和组成的 (2, 3) 表"});

    note({.en = "\nShapes that do not broadcast are an error that names the op and both shapes:",
          .zh = "\n不能广播的形状会报错，错误信息写明运算名和两个形状："});
    t.check_throws<ShapeError>(
        {.en = "add((2, 3), (2)) throws ShapeError", .zh = "add((2, 3), (2)) 抛出 ShapeError"},
        [&] {
            (void)c::add(a, c::tensor({1, 2}, {2}));
        },
        "cannot broadcast");
    note({.en = "To add one number per ROW, make it a column first: a (2) tensor unsqueezed to (2, 1) "
                "(PyTorch: x[:, None]).",
          .zh = "要给每一行各加一个数，先把它变成列：把 (2) 的张量 unsqueeze 成 (2, 1)（PyTorch 写作 x[:, None]）。"});
    const c::Tensor per_row = c::add(a, c::tensor({100, 200}, {2}).unsqueeze(1));
    show("a + [100, 200].unsqueeze(1)", per_row);
    t.check(per_row.at({1, 0}) == 204,
            {.en = "row 1 got 200 added: 4 + 200 = 204", .zh = "第 1 行加上了 200：4 + 200 = 204"});
}

// NumPy's broadcasting rule, which every document's elementwise op assumes
void broadcasting(Tutorial& t) {
    broadcast_rule(t);
    broadcast_values(t);
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 理论学习 › 基于位置的前馈网络
void position_wise_ffn_reshape(Tutorial& t) {
    note({.en = "Seed 000 (基于位置的前馈网络) explains the position-wise feed-forward network this way: turn the "
                "input of shape (b, n, d) into (bn, d), apply the dense layers to each of the bn rows, and turn "
                "the (bn, d') result back into (b, n, d'). n is the sequence length, which changes from batch to "
                "batch, so the layer must not depend on it: it treats every position the same way.",
          .zh = "种子文档 000（基于位置的前馈网络）这样解释这个网络：把形状为 (b, n, d) 的输入变换成 (bn, d)，对这 bn "
                "行分别做全连接，再把 (bn, d') 的结果变回 (b, n, d')。n 是序列长度，每个批量都可能不同，所以这一层不"
                "能依赖它：它对每个位置一视同仁。"});
    note({.en = "\nHere b = 2 sequences, n = 3 positions, d = 4 features:",
          .zh = "\n这里 b = 2 个序列，n = 3 个位置，d = 4 个特征："});
    const c::Tensor X = c::arange(24, DType::float64).view({2, 3, 4});  // (b, n, d)
    const c::Tensor X2 = X.view({6, 4});                                // (bn, d)
    show("X", X);
    describe("X      ", X);
    describe("X2 = X.view({6, 4})", X2);
    t.check(X2.shares_storage(X), {.en = "(b, n, d) -> (bn, d) is a view: X2 shares X's storage, nothing moved",
                                   .zh = "(b, n, d) -> (bn, d) 是视图：X2 与 X 共用存储，什么也没搬动"});
    bool rows_ok = true;
    for (int64_t r = 0; r < 6; ++r)
        for (int64_t k = 0; k < 4; ++k) rows_ok = rows_ok && X2.at({r, k}) == X.at({r / 3, r % 3, k});
    t.check(rows_ok, {.en = "row r of X2 is position r mod 3 of sequence r div 3, i.e. X2[r] == X[r / n, r % n]",
                      .zh = "X2 的第 r 行是第 r div 3 个序列的第 r mod 3 个位置，即 X2[r] == X[r / n, r % n]"});

    note({.en = "\nA dense layer y = x Wᵀ + bias with W of shape (d', d) = (5, 4), applied to all 6 rows at once:",
          .zh = "\n一个全连接层 y = x Wᵀ + bias，W 的形状为 (d', d) = (5, 4)，一次作用于全部 6 行："});
    const c::Tensor W = c::sub(c::mul(c::arange(20, DType::float64).view({5, 4}), 0.1), 1.0);  // (d', d)
    const c::Tensor bias = c::tensor({0.5, -0.5, 1, 0, 2}, {5}, DType::float64);               // (d')
    const c::Tensor Y2 = c::linear(X2, W, bias);                                               // (bn, d')
    const c::Tensor Y = Y2.view({2, 3, 5});                                                    // (b, n, d')
    note(both("    Y = linear(X2, W, bias).view({2, 3, 5})"));
    show("Y", Y);
    t.check(Y.shares_storage(Y2) && Y.shape() == c::Shape{2, 3, 5},
            {.en = "(bn, d') -> (b, n, d') is a view too: only the shape changes",
             .zh = "(bn, d') -> (b, n, d') 也是视图：只有形状变了"});

    bool per_position = true;
    for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
            const c::Tensor one = c::linear(X.select(0, i).select(0, j).unsqueeze(0), W, bias);  // (1, d')
            for (int64_t k = 0; k < 5; ++k) per_position = per_position && one.at({0, k}) == Y.at({i, j, k});
        }
    t.check(per_position, {.en = "Y[i, j] equals the dense layer applied to position X[i, j] alone (all 6 positions)",
                           .zh = "Y[i, j] 等于把全连接层单独作用于位置 X[i, j] 的结果（全部 6 个位置）"});
    t.check_close(
        c::linear(X, W, bias), Y, 0,
        {.en = "linear() on the 3-D X directly gives the same Y (it works on the last dimension, like nn.Linear)",
         .zh = "直接对三维的 X 调用 linear() 得到同样的 Y（它只作用于最后一维，和 nn.Linear 一样）"});
    note({.en = "\nThat last check is the remark in seed 000's code: nn.Linear accepts any number of leading "
                "dimensions and only looks at the last one, so the reshape is a view, not work.",
          .zh =
              "\n最后这项检查就是种子文档 000 代码里的那句注释：nn.Linear 接受任意多个前导维度，只看最后一维，所以这次"
              "变形只是视图，不花计算。"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_qkv, transpose_output)
void transpose_qkv_copies(Tutorial& t) {
    note({.en = "Multi-head attention (多头注意力) splits the d features of every position into h heads of d/h "
                "features and moves the head dimension next to the batch, so that all heads of all sequences are "
                "one batch of attention problems. Seed 000's transpose_qkv does it in three lines:\n"
                "    X.reshape(b, n, h, d/h)   a view: just splits the last dimension\n"
                "    X.permute(0, 2, 1, 3)     a view: shape (b, h, n, d/h), strides reordered\n"
                "    X.reshape(b*h, n, d/h)    a COPY: the permuted layout has no single stride for b*h",
          .zh = "多头注意力把每个位置的 d 个特征分成 h 个头，每头 d/h 个特征，并把“头”这一维挪到批量维旁边，于是所有"
                "序列的所有头就成了一批注意力问题。种子文档 000 的 transpose_qkv 用三行完成：\n"
                "    X.reshape(b, n, h, d/h)   视图：只是拆开最后一维\n"
                "    X.permute(0, 2, 1, 3)     视图：形状 (b, h, n, d/h)，步幅重新排列\n"
                "    X.reshape(b*h, n, d/h)    复制：置换后的布局在 b*h 上没有单一的步幅"});
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
    t.check(split.shares_storage(X) && moved.shares_storage(X),
            {.en = "the first reshape and the permute are views", .zh = "第一次 reshape 和 permute 都是视图"});
    t.check(!heads.shares_storage(X) && heads.is_contiguous(),
            {.en = "the last reshape had to copy into a new buffer", .zh = "最后一次 reshape 不得不复制到新缓冲区"});
    bool heads_ok = true;
    for (int64_t i = 0; i < b; ++i)
        for (int64_t k = 0; k < h; ++k)
            for (int64_t p = 0; p < n; ++p)
                for (int64_t f = 0; f < d / h; ++f)
                    heads_ok = heads_ok && heads.at({i * h + k, p, f}) == X.at({i, p, k * (d / h) + f});
    t.check(heads_ok,
            {.en = "heads[i·h + k, p] holds features k·d/h .. (k+1)·d/h - 1 of X[i, p]: head k of sequence i",
             .zh = "heads[i·h + k, p] 存放 X[i, p] 的第 k·d/h .. (k+1)·d/h - 1 个特征：第 i 个序列的第 k 个头"});

    note({.en = "\ntranspose_output undoes it: (b*h, n, d/h) -> (b, h, n, d/h) -> permute -> (b, n, d).",
          .zh = "\ntranspose_output 把它还原：(b*h, n, d/h) -> (b, h, n, d/h) -> permute -> (b, n, d)。"});
    const c::Tensor back = heads.view({b, h, n, d / h}).permute({0, 2, 1, 3}).reshape({b, n, d});
    t.check_close(back, X, 0,
                  {.en = "transpose_output(transpose_qkv(X)) == X", .zh = "transpose_output(transpose_qkv(X)) == X"});
    note({.en = "Tutorial 07 does this with autograd Variables inside nn::MultiHeadAttention.",
          .zh = "教程 07 在 nn::MultiHeadAttention 内部用自动微分的 Variable 做同样的事。"});
}

// ---- the exercise (--exercise): tutorials/01_tensors/exercise.cpp -------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 多头注意力 (transpose_output)
void exercise_transpose_output(Tutorial& t) {
    note({.en = "Write exercise::transpose_output(X, num_heads): X (B·H, T, d) -> (B, T, H·d), the inverse of "
                "step 7's transpose_qkv. The checks run it on the heads of two random (B, T, D) tensors and "
                "compare with the tensor they came from, then check the layout on numbers you can read.",
          .zh = "写出 exercise::transpose_output(X, num_heads)：X (B·H, T, d) -> (B, T, H·d)，即第 7 步 transpose_qkv "
                "的逆。检查会把它用在两个随机 (B, T, D) "
                "张量拆出的头上，与原来的张量比较，再用一眼就能读懂的数检查布局。"});
    c::Generator gen(101);
    for (const auto& [B, T, D, H] : {std::array<int64_t, 4>{2, 3, 4, 2}, std::array<int64_t, 4>{3, 5, 12, 4}}) {
        const c::Tensor X = c::randn({B, T, D}, gen, DType::float64);
        const c::Tensor heads = X.view({B, T, H, D / H}).permute({0, 2, 1, 3}).reshape({B * H, T, D / H});
        const c::Tensor back = exercise::transpose_output(heads, H);
        t.check_close(back, X, 0,
                      {.en = "transpose_output(transpose_qkv(X)) == X for (B, T, D) = ({}, {}, {}), H = {}",
                       .zh = "(B, T, D) = ({}, {}, {})、H = {} 时，transpose_output(transpose_qkv(X)) == X"},
                      B, T, D, H);
    }
    const c::Tensor heads = c::arange(24, DType::float64).view({4, 3, 2});
    const c::Tensor back = exercise::transpose_output(heads, 2);
    t.check(back.shape() == c::Shape{2, 3, 4}, {.en = "(B·H, T, d) = (4, 3, 2) with H = 2 becomes (2, 3, 4)",
                                                .zh = "H = 2 时，(B·H, T, d) = (4, 3, 2) 变成 (2, 3, 4)"});
    t.check(back.defined() && back.shape() == c::Shape{2, 3, 4} && back.at({1, 2, 3}) == heads.at({3, 2, 1}),
            {.en = "element (b, t, h·d + f) comes from head row b·H + h: back[1, 2, 3] == heads[3, 2, 1]",
             .zh = "元素 (b, t, h·d + f) 来自头的第 b·H + h 行：back[1, 2, 3] == heads[3, 2, 1]"});
}

// minitorch tensor_data.py (views) and seed 000's transpose_qkv with one head
void exercise_predict_layouts(Tutorial& t, const Lesson& lesson) {
    const c::Tensor view = lesson.x.transpose(0, 1).slice(0, 1, 3);
    const c::Strides mine = exercise::predicted_strides();
    t.check(mine == view.strides(),
            {.en = "your strides {} for x.transpose(0, 1).slice(0, 1, 3)",
             .zh = "你给出的 x.transpose(0, 1).slice(0, 1, 3) 的步幅 {}"},
            tuple_str(mine));
    const int64_t b = 2, n = 3, d = 4;
    const c::Tensor X = c::arange(b * n * d, DType::int64).view({b, n, d});
    const c::Tensor one_head = X.view({b, n, 1, d}).permute({0, 2, 1, 3}).reshape({b, n, d});
    t.check(exercise::last_reshape_copies_with_one_head() == !one_head.shares_storage(X),
            {.en = "your answer to 'does the last reshape copy when h = 1?'",
             .zh = "你对“h = 1 时最后一次 reshape 还要复制吗？”的回答"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 01 · Tensors: shapes, strides, views and broadcasting",
                   .zh = "tformer 教程 01 · 张量：形状、步幅、视图与广播"},
         .follows = {.en = "seed 000 基于位置的前馈网络 and transpose_qkv; minitorch's index_to_position",
                     .zh = "种子文档 000 基于位置的前馈网络、transpose_qkv；minitorch 的 index_to_position"},
         .exercise = {.en = "write seed 000's transpose_output with view / permute / reshape, and predict "
                            "two layouts (tutorials/01_tensors/exercise.cpp)",
                      .zh = "用 view / permute / reshape 写出种子文档 000 的 transpose_output，并预测两个内存布局"
                            "（tutorials/01_tensors/exercise.cpp）"}});
    const Lesson lesson{};
    t.step(
        {.en = "1. A tensor is a buffer plus shape, strides and offset", .zh = "1. 张量 = 缓冲区 + 形状、步幅和偏移"},
        [&] { buffer_shape_strides_offset(t, lesson); });
    t.step({.en = "2. index_to_position by hand", .zh = "2. 手写 index_to_position"},
           [&] { index_to_position_by_hand(t, lesson); });
    t.step({.en = "3. Views: transpose, slice and select share the storage",
            .zh = "3. 视图：transpose、slice、select 共用存储"},
           [&] { views_share_storage(t, lesson); });
    t.step({.en = "4. Copies: contiguous(), reshape() and when view() refuses",
            .zh = "4. 副本：contiguous()、reshape()，以及 view() 何时拒绝"},
           [&] { copies_contiguous_reshape(t, lesson); });
    t.step({.en = "5. Broadcasting", .zh = "5. 广播"}, [&] { broadcasting(t); });
    t.step({.en = "6. Seed 000: the position-wise FFN reshape (b, n, d) -> (bn, d) -> (b, n, d)",
            .zh = "6. 种子文档 000：基于位置的前馈网络的变形 (b, n, d) -> (bn, d) -> (b, n, d)"},
           [&] { position_wise_ffn_reshape(t); });
    t.step({.en = "7. Seed 000's transpose_qkv: when a reshape has to copy",
            .zh = "7. 种子文档 000 的 transpose_qkv：reshape 何时必须复制"},
           [&] { transpose_qkv_copies(t); });
    t.exercise({.en = "Exercise 1. transpose_output, the inverse of transpose_qkv",
                .zh = "练习 1. transpose_output：transpose_qkv 的逆"},
               [&] { exercise_transpose_output(t); });
    t.exercise({.en = "Exercise 2. Predict the layouts", .zh = "练习 2. 预测内存布局"},
               [&] { exercise_predict_layouts(t, lesson); });
    return t.finish();
}
