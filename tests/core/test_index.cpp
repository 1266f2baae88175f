// Indexing and joining: index_select, embedding (+ backward), gather,
// scatter_add, concat, stack, split. Fast kernels are checked against the
// plain-loop oracles on contiguous and non-contiguous inputs of each dtype.
#include "core/index.hpp"
#include "core/parallel.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <string>

using namespace tformer;
using namespace tformer::core;

namespace {

enum class Layout { contiguous, transposed, sliced };

const char* layout_name(Layout l) {
    switch (l) {
        case Layout::contiguous: return "contiguous";
        case Layout::transposed: return "transposed";
        case Layout::sliced: return "sliced";
    }
    return "?";
}

// Random values of `dtype`: normals for floats, [-50, 50) for int64, coin flips for bool.
Tensor random_values(const Shape& shape, DType dtype, Generator& gen) {
    switch (dtype) {
        case DType::int64: return randint(shape, -50, 50, gen);
        case DType::boolean: return bernoulli(shape, 0.5, gen, DType::boolean);
        default: return randn(shape, gen, dtype);
    }
}

// A random tensor of logical shape `shape` whose memory layout is `layout`:
// transposed swaps the first and last dimensions in memory; sliced keeps
// every other element of the last dimension (inner stride 2, non-zero offset).
Tensor make_input(const Shape& shape, Layout layout, DType dtype, Generator& gen) {
    const int last = shape.size() - 1;
    if (layout == Layout::transposed && shape.size() >= 2) {
        Shape stored = shape;
        std::swap(stored[0], stored[last]);
        Tensor t = random_values(stored, dtype, gen).transpose(0, last);
        REQUIRE_FALSE(t.is_contiguous());
        return t;
    }
    if (layout == Layout::contiguous) return random_values(shape, dtype, gen);
    Shape stored = shape;  // sliced (also used for "transposed" 1-D tensors)
    stored[last] = 2 * shape[last] + 1;
    Tensor t = random_values(stored, dtype, gen).slice(last, 1, stored[last], 2);
    REQUIRE_FALSE(t.is_contiguous());
    return t;
}

// Same shape, dtype and values (exactly).
void require_same(const Tensor& actual, const Tensor& expected) {
    REQUIRE(shape_str(actual.shape()) == shape_str(expected.shape()));
    REQUIRE(actual.dtype() == expected.dtype());
    REQUIRE(actual.to_vector() == expected.to_vector());
}

// sum_i a[i] * b[i] in double
double dot(const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.to_vector(), y = b.to_vector();
    REQUIRE(x.size() == y.size());
    double s = 0.0;
    for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
}

Tensor ids_tensor(const std::vector<int64_t>& values, const Shape& shape) { return from_vector(values, shape); }

const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::sliced};

// Shapes with a dimension to index along, shared by the lookup tests.
struct DimCase {
    Shape shape;
    int64_t dim;
};
const DimCase kDimCases[] = {
    {{7}, 0}, {{5, 4}, 0}, {{5, 4}, 1}, {{5, 4}, -1}, {{3, 4, 6}, 0}, {{3, 4, 6}, 1}, {{3, 4, 6}, 2},
};

}  // namespace

// ---- lookups ------------------------------------------------------------------------------

TEST_CASE("index_select(x, dim, index): matches the oracle for every layout and dtype", "[core][index]") {
    Generator gen(1);
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    for (DType dtype : dtypes)
        for (Layout layout : kLayouts)
            for (const DimCase& c : kDimCases) {
                CAPTURE(dtype_name(dtype), layout_name(layout), shape_str(c.shape), c.dim);
                const Tensor x = make_input(c.shape, layout, dtype, gen);
                const int64_t n = x.size(c.dim);
                // repeated and reordered entries, and an index longer than the dimension
                const Tensor index = randint({n + 3}, 0, n, gen);
                require_same(index_select(x, c.dim, index), reference::index_select(x, c.dim, index));
                // a non-contiguous index (every other entry)
                const Tensor strided_index = randint({2 * n}, 0, n, gen).slice(0, 0, 2 * n, 2);
                require_same(index_select(x, c.dim, strided_index), reference::index_select(x, c.dim, strided_index));
            }
}

TEST_CASE("index_select(x, dim, index): hand-computed rows and columns, empty index", "[core][index]") {
    const Tensor x = arange(12, DType::float64).view({3, 4});
    require_same(index_select(x, 0, ids_tensor({2, 0, 2}, {3})),
                 tensor({8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}, {3, 4}, DType::float64));
    require_same(index_select(x, 1, ids_tensor({3, 1}, {2})), tensor({3, 1, 7, 5, 11, 9}, {3, 2}, DType::float64));
    const Tensor none = index_select(x, 0, Tensor::empty({0}, DType::int64));
    CHECK(none.shape() == Shape{0, 4});
}

TEST_CASE("embedding(weight, ids): rows of the table for ids of any shape and layout", "[core][index]") {
    Generator gen(2);
    const int64_t V = 11, D = 6;
    const DType dtypes[] = {DType::float32, DType::float64};
    for (DType dtype : dtypes)
        for (Layout weight_layout : kLayouts)
            for (Layout ids_layout : kLayouts) {
                CAPTURE(dtype_name(dtype), layout_name(weight_layout), layout_name(ids_layout));
                const Tensor weight = make_input({V, D}, weight_layout, dtype, gen);  // (V, D)
                Tensor ids = randint({4, 5}, 0, V, gen);                              // (B, T)
                if (ids_layout == Layout::transposed) ids = randint({5, 4}, 0, V, gen).transpose(0, 1);
                if (ids_layout == Layout::sliced) ids = randint({4, 10}, 0, V, gen).slice(1, 0, 10, 2);
                const Tensor out = embedding(weight, ids);  // (B, T, D)
                CHECK(out.shape() == Shape{4, 5, D});
                const Tensor expected = reference::index_select(weight, 0, ids.reshape({-1})).view({4, 5, D});
                require_same(out, expected);
            }
    // a 0-d id gives one (D) row
    const Tensor w = arange(6, DType::float32).view({3, 2});
    require_same(embedding(w, from_vector(std::vector<int64_t>{2}, {})), tensor({4, 5}, {2}));
}

TEST_CASE("embedding_backward(grad, ids, V, padding_idx): scatter-add of rows, padding row exactly 0",
          "[core][index]") {
    Generator gen(3);
    const int64_t V = 9, D = 5;
    struct Case {
        const char* name;
        int64_t padding_idx;
        DType dtype;
        Layout grad_layout;
    };
    const Case cases[] = {
        {"no padding, float32", -1, DType::float32, Layout::contiguous},
        {"padding 0, float32", 0, DType::float32, Layout::contiguous},
        {"padding 4, float64", 4, DType::float64, Layout::contiguous},
        {"padding 4, float64, sliced grad", 4, DType::float64, Layout::sliced},
        {"padding 8, float32, transposed grad", 8, DType::float32, Layout::transposed},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        const Tensor ids = randint({3, 7}, 0, V, gen);                      // (B, T), every id appears about twice
        Tensor grad = make_input({3, 7, D}, c.grad_layout, c.dtype, gen);   // (B, T, D)
        const Tensor dw = embedding_backward(grad, ids, V, c.padding_idx);  // (V, D)
        CHECK(dw.shape() == Shape{V, D});
        CHECK(dw.dtype() == c.dtype);
        // oracle: scatter-add every grad row into the row its id names, then clear the padding row
        const int64_t N = ids.numel();
        const Tensor index = ids.reshape({N, 1}).expand({N, D});
        Tensor expected = reference::scatter_add(zeros({V, D}, c.dtype), 0, index, grad.reshape({N, D}));
        if (c.padding_idx >= 0) fill_(expected.select(0, c.padding_idx), 0.0);
        const std::vector<double> a = dw.to_vector(), e = expected.to_vector();
        for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(e[i]).margin(1e-6));
        if (c.padding_idx >= 0)
            for (double v : dw.select(0, c.padding_idx).to_vector()) CHECK(v == 0.0);
    }
}

TEST_CASE("embedding_backward(grad, ids, V, padding_idx): deterministic, same bits for 1 and 2 threads",
          "[core][index]") {
    // large enough that a parallel version would split the work
    Generator gen(4);
    const int64_t V = 50, D = 256;
    const Tensor ids = randint({64, 20}, 0, V, gen);  // (B, T)
    const Tensor grad = randn({64, 20, D}, gen);      // (B, T, D)
    const int threads = get_num_threads();
    set_num_threads(1);
    const std::vector<float> serial = embedding_backward(grad, ids, V, 3).to_vector<float>();
    set_num_threads(std::max(threads, 2));
    const std::vector<float> parallel = embedding_backward(grad, ids, V, 3).to_vector<float>();
    set_num_threads(threads);
    CHECK(serial == parallel);
}

// ---- gather and scatter_add ------------------------------------------------------------------

TEST_CASE("gather(x, dim, index) and scatter_add(x, dim, index, src): match the oracles", "[core][index]") {
    Generator gen(5);
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64};
    for (DType dtype : dtypes)
        for (Layout layout : kLayouts)
            for (const DimCase& c : kDimCases) {
                CAPTURE(dtype_name(dtype), layout_name(layout), shape_str(c.shape), c.dim);
                const Tensor x = make_input(c.shape, layout, dtype, gen);
                const int d = normalize_dim(c.dim, x.dim(), "test");
                // index: one smaller than x in the other dimensions, longer along d
                Shape index_shape = c.shape;
                for (int k = 0; k < index_shape.size(); ++k)
                    index_shape[k] = k == d ? index_shape[k] + 2 : std::max<int64_t>(1, index_shape[k] - 1);
                const Tensor index = randint(index_shape, 0, x.size(d), gen);
                require_same(gather(x, c.dim, index), reference::gather(x, c.dim, index));
                // a transposed index
                if (index_shape.size() >= 2) {
                    const int last = index_shape.size() - 1;
                    const Tensor t_index = index.transpose(0, last).contiguous().transpose(0, last);
                    REQUIRE_FALSE(t_index.is_contiguous());
                    require_same(gather(x, c.dim, t_index), reference::gather(x, c.dim, t_index));
                }
                // scatter_add: repeated indices add up; src larger than index is allowed
                Shape src_shape = index_shape;
                src_shape[0] += 1;
                const Tensor src = make_input(src_shape, layout, dtype, gen);
                require_same(scatter_add(x, c.dim, index, src), reference::scatter_add(x, c.dim, index, src));
            }
}

TEST_CASE("gather(x, dim, index): hand-computed example", "[core][index]") {
    const Tensor x = tensor({1, 2, 3, 4}, {2, 2});
    const Tensor index = ids_tensor({0, 0, 1, 0}, {2, 2});
    require_same(gather(x, 1, index), tensor({1, 1, 4, 3}, {2, 2}));
    require_same(gather(x, 0, index), tensor({1, 2, 3, 2}, {2, 2}));
    // scatter_add with repeats: out[0][0] += 10 + 20, out[1][1] += 30, out[1][0] += 40
    const Tensor src = tensor({10, 20, 30, 40}, {2, 2});
    require_same(scatter_add(zeros({2, 2}), 1, ids_tensor({0, 0, 1, 0}, {2, 2}), src), tensor({30, 0, 40, 30}, {2, 2}));
}

TEST_CASE("gather(x, dim, index) and scatter_add: adjoint, <gather(x), y> == <x, scatter_add(0, y)>", "[core][index]") {
    Generator gen(6);
    for (Layout layout : kLayouts)
        for (const DimCase& c : kDimCases) {
            CAPTURE(layout_name(layout), shape_str(c.shape), c.dim);
            const Tensor x = make_input(c.shape, layout, DType::float64, gen);
            const int d = normalize_dim(c.dim, x.dim(), "test");
            Shape index_shape = c.shape;
            index_shape[d] += 3;  // some positions are read twice, so scatter_add must add
            const Tensor index = randint(index_shape, 0, x.size(d), gen);
            const Tensor y = randn(index_shape, gen, DType::float64);
            const double lhs = dot(gather(x, c.dim, index), y);
            const double rhs = dot(x, scatter_add(zeros(c.shape, DType::float64), c.dim, index, y));
            CHECK(lhs == Approx(rhs).epsilon(1e-12));
        }
}

// ---- concat, stack, split --------------------------------------------------------------------

TEST_CASE("concat(split(x)) == x, split returns views that share storage", "[core][index]") {
    Generator gen(7);
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    for (DType dtype : dtypes)
        for (Layout layout : kLayouts)
            for (int64_t dim : {0, 1, 2, -1}) {
                CAPTURE(dtype_name(dtype), layout_name(layout), dim);
                const Tensor x = make_input({4, 6, 5}, layout, dtype, gen);
                const int64_t n = x.size(dim);
                // by size: pieces of 2, the last one shorter when n is odd
                const std::vector<Tensor> by_size = split(x, 2, dim);
                REQUIRE(static_cast<int64_t>(by_size.size()) == (n + 1) / 2);
                CHECK(by_size.back().size(dim) == (n % 2 == 0 ? 2 : 1));
                // by a list of sizes, including an empty piece
                const std::vector<Tensor> by_list = split(x, {1, 0, n - 1}, dim);
                REQUIRE(by_list.size() == 3);
                CHECK(by_list[1].size(dim) == 0);
                for (const auto* pieces : {&by_size, &by_list}) {
                    for (const Tensor& p : *pieces) CHECK(p.shares_storage(x));
                    require_same(concat(*pieces, dim), x.contiguous());
                }
                // a piece is a view: writing through it changes x
                Tensor piece = by_list[2];
                piece.set(Dims::filled(3, 0), 1.0);
                const Tensor x_piece = x.slice(dim, 1, n);
                CHECK(x_piece.at(Dims::filled(3, 0)) == 1.0);
            }
}

TEST_CASE("concat(tensors, dim): hand-computed example with mixed layouts", "[core][index]") {
    const Tensor a = tensor({1, 2, 3, 4}, {2, 2});
    const Tensor b = tensor({5, 6}, {2, 1});
    const Tensor bt = tensor({5, 6}, {1, 2}).transpose(0, 1);  // the same values as b, non-contiguous
    require_same(concat({a, b}, 1), tensor({1, 2, 5, 3, 4, 6}, {2, 3}));
    require_same(concat({a, bt}, -1), tensor({1, 2, 5, 3, 4, 6}, {2, 3}));
    require_same(concat({a.transpose(0, 1), a}, 0), tensor({1, 3, 2, 4, 1, 2, 3, 4}, {4, 2}));
    require_same(concat({a}, 0), a);
}

TEST_CASE("stack(tensors, dim): new dimension at any position, select undoes it", "[core][index]") {
    Generator gen(8);
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    for (DType dtype : dtypes)
        for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
            CAPTURE(dtype_name(dtype), dim);
            const std::vector<Tensor> inputs = {make_input({3, 4}, Layout::contiguous, dtype, gen),
                                                make_input({3, 4}, Layout::transposed, dtype, gen),
                                                make_input({3, 4}, Layout::sliced, dtype, gen)};
            const Tensor out = stack(inputs, dim);
            REQUIRE(out.dim() == 3);
            const int d = normalize_dim(dim, 3, "test");
            CHECK(out.size(d) == 3);
            for (int64_t i = 0; i < 3; ++i) require_same(out.select(d, i).contiguous(), inputs[i].contiguous());
        }
    // stack == concat of unsqueezed inputs
    const Tensor a = tensor({1, 2}, {2}), b = tensor({3, 4}, {2});
    require_same(stack({a, b}, 0), tensor({1, 2, 3, 4}, {2, 2}));
    require_same(stack({a, b}, 1), tensor({1, 3, 2, 4}, {2, 2}));
}

TEST_CASE("split, concat, embedding, embedding_backward, gather: tensors with no elements", "[core][index]") {
    const std::vector<Tensor> pieces = split(zeros({0, 3}), 2, 0);
    REQUIRE(pieces.size() == 1);
    CHECK(pieces[0].shape() == Shape{0, 3});
    require_same(concat({zeros({0, 3}), ones({2, 3})}, 0), ones({2, 3}));
    const Tensor no_ids = Tensor::empty({2, 0}, DType::int64);  // (B, T) with T = 0
    CHECK(embedding(ones({5, 4}), no_ids).shape() == Shape{2, 0, 4});
    require_same(embedding_backward(zeros({2, 0, 4}), no_ids, 5, 1), zeros({5, 4}));
    CHECK(gather(ones({3, 4}), 1, Tensor::empty({3, 0}, DType::int64)).shape() == Shape{3, 0});
    require_same(scatter_add(ones({3, 4}), 0, Tensor::empty({0, 4}, DType::int64), zeros({0, 4})), ones({3, 4}));
}

// ---- errors -----------------------------------------------------------------------------------

TEST_CASE("index_select, embedding, gather, scatter_add, concat, stack, split: bad input throws clear errors",
          "[core][index][errors]") {
    const Tensor x = zeros({40, 3});
    const Tensor w = zeros({40, 4});
    const auto ids = [](std::vector<int64_t> v) {
        const int64_t n = static_cast<int64_t>(v.size());
        return from_vector(v, {n});
    };
    enum class Kind { index, value, shape };
    struct Case {
        std::function<void()> call;
        std::string message;
        Kind kind;
    };
    const std::vector<Case> cases = {
        // index_select
        {[&] {
             index_select(x, 0, ids({1, 57}));
         },
         "index_select: index 57 out of range for dimension 0 of size 40", Kind::index},
        {[&] { index_select(x, 0, ids({-1})); }, "index_select: index -1 out of range for dimension 0 of size 40",
         Kind::index},
        {[&] { index_select(x, 0, tensor({1}, {1})); }, "index_select: index must be int64, got float32", Kind::value},
        {[&] {
             index_select(x, 0, ids({1, 2, 3, 4}).view({2, 2}));
         },
         "index_select: index must be 1-D, got shape (2x2)", Kind::shape},
        {[&] { index_select(x, 2, ids({0})); },
         "index_select: dimension 2 out of range for a 2-d tensor (expected -2 to 1)", Kind::index},
        // embedding
        {[&] {
             embedding(w, ids({3, 57}));
         },
         "embedding: token id 57 out of range for vocabulary of 40", Kind::index},
        {[&] { embedding(w, ids({-3})); }, "embedding: token id -3 out of range for vocabulary of 40", Kind::index},
        {[&] { embedding(w, tensor({1}, {1})); }, "embedding: ids must be int64, got float32", Kind::value},
        {[&] { embedding(zeros({40}), ids({1})); }, "embedding: weight must be 2-D (V, D), got shape (40)",
         Kind::shape},
        // embedding_backward
        {[&] {
             embedding_backward(zeros({2, 4}), ids({1, 40}), 40, -1);
         },
         "embedding_backward: token id 40 out of range for vocabulary of 40", Kind::index},
        {[&] {
             embedding_backward(zeros({2, 4}), ids({1, 2, 3}), 40, -1);
         },
         "embedding_backward: grad shape (2x4) does not match ids shape (3) plus an embedding dimension", Kind::shape},
        {[&] {
             embedding_backward(zeros({3}), ids({1, 2, 3}), 40, -1);
         },
         "embedding_backward: grad shape (3) does not match ids shape (3) plus an embedding dimension", Kind::shape},
        {[&] {
             embedding_backward(zeros({2, 4}), ids({1, 2}), 40, 40);
         },
         "embedding_backward: padding_idx 40 out of range for vocabulary of 40 (use -1 for none)", Kind::index},
        {[&] {
             embedding_backward(zeros({2, 4}, DType::int64), ids({1, 2}), 40, -1);
         },
         "embedding_backward: expected a floating dtype (float32 or float64), got int64", Kind::value},
        {[&] {
             embedding_backward(zeros({2, 4}), tensor({1, 2}, {2}), 40, -1);
         },
         "embedding_backward: ids must be int64, got float32", Kind::value},
        // gather
        {[&] {
             gather(zeros({4, 5}), 1, ids({0, 5}).view({1, 2}));
         },
         "gather: index 5 out of range for dimension 1 of size 5", Kind::index},
        {[&] {
             gather(zeros({4, 5}), 1, ids({0, 1, 2}));
         },
         "gather: index shape (3) must have as many dimensions as x shape (4x5)", Kind::shape},
        {[&] {
             gather(zeros({4, 5}), 1, zeros({5, 2}, DType::int64));
         },
         "gather: index shape (5x2) is larger than x shape (4x5) at dimension 0", Kind::shape},
        {[&] {
             gather(zeros({4, 5}), 1, zeros({1, 2}));
         },
         "gather: index must be int64, got float32", Kind::value},
        // scatter_add
        {[&] {
             scatter_add(zeros({4, 5}), 0, zeros({1, 2}, DType::int64), zeros({1, 2}, DType::float64));
         },
         "scatter_add: src has dtype float64 but x has float32", Kind::value},
        {[&] { scatter_add(zeros({4}, DType::boolean), 0, ids({0}), zeros({1}, DType::boolean)); },
         "scatter_add: cannot add bool tensors", Kind::value},
        {[&] {
             scatter_add(zeros({4, 5}), 0, zeros({2, 3}, DType::int64), zeros({2, 2}));
         },
         "scatter_add: index shape (2x3) is larger than src shape (2x2) at dimension 1", Kind::shape},
        {[&] {
             scatter_add(zeros({4, 5}), 0, ids({-1}).view({1, 1}), zeros({1, 1}));
         },
         "scatter_add: index -1 out of range for dimension 0 of size 4", Kind::index},
        // concat and stack
        {[&] {
             concat({zeros({2, 3}), zeros({2, 4})}, 0);
         },
         "concat: tensor 1 has shape (2x4) but tensor 0 has (2x3); sizes must match except in dimension 0",
         Kind::shape},
        {[&] {
             concat({zeros({2, 3}), zeros({2, 3, 1})}, 1);
         },
         "concat: tensor 1 has shape (2x3x1) but tensor 0 has (2x3); sizes must match except in dimension 1",
         Kind::shape},
        {[&] { concat({}, 0); }, "concat: expected a non-empty list of tensors", Kind::value},
        {[&] {
             concat({zeros({2}), zeros({2}, DType::float64)}, 0);
         },
         "concat: tensor 1 has dtype float64 but tensor 0 has float32", Kind::value},
        {[&] {
             stack({zeros({2, 3}), zeros({2, 4})}, 0);
         },
         "stack: tensor 1 has shape (2x4) but tensor 0 has (2x3); all shapes must be equal", Kind::shape},
        {[&] { stack({}, 0); }, "stack: expected a non-empty list of tensors", Kind::value},
        {[&] {
             stack({zeros({2, 3})}, 3);
         },
         "stack: dimension 3 out of range for a 3-d tensor (expected -3 to 2)", Kind::index},
        // split
        {[&] {
             split(zeros({4, 6}), {2, 3}, 1);
         },
         "split: sizes [2, 3] add up to 5 but dimension 1 of (4x6) has size 6", Kind::shape},
        {[&] {
             split(zeros({4, 6}), {7, -1}, 1);
         },
         "split: sizes [7, -1] contain the negative size -1", Kind::value},
        {[&] {
             split(zeros({4, 6}), 0, 1);
         },
         "split: split_size must be positive, got 0", Kind::value},
    };
    for (const Case& c : cases) {
        CAPTURE(c.message);
        REQUIRE_THROWS_WITH(c.call(), c.message);
        switch (c.kind) {
            case Kind::index: REQUIRE_THROWS_AS(c.call(), IndexError); break;
            case Kind::value: REQUIRE_THROWS_AS(c.call(), ValueError); break;
            case Kind::shape: REQUIRE_THROWS_AS(c.call(), ShapeError); break;
        }
    }
}
