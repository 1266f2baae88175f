// core::Tensor: metadata, views sharing storage, copies, factories, randomness.
#include "core/elementwise.hpp"
#include "core/tensor.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace tformer;
using namespace tformer::core;

TEST_CASE("Tensor: factories fill shape, dtype and values", "[core][tensor]") {
    const Tensor z = zeros({2, 3}, DType::float64);
    CHECK(z.dim() == 2);
    CHECK(z.numel() == 6);
    CHECK(z.dtype() == DType::float64);
    CHECK(z.is_contiguous());
    for (double v : z.to_vector()) CHECK(v == 0.0);
    CHECK(full({2}, 3.5).to_vector() == std::vector<double>{3.5, 3.5});
    CHECK(arange(4).to_vector() == std::vector<double>{0, 1, 2, 3});
    CHECK(arange(1.0, 2.0, 0.25).to_vector() == std::vector<double>{1, 1.25, 1.5, 1.75});
    CHECK(eye(2).to_vector() == std::vector<double>{1, 0, 0, 1});
    CHECK(scalar(2.0).dim() == 0);
    CHECK(scalar(2.0).item() == 2.0);
    const Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(t.at({1, 2}) == 6.0);
    CHECK(t.at({-1, -1}) == 6.0);
    CHECK(from_vector(std::vector<int64_t>{7, 8}, {2}).dtype() == DType::int64);
}

TEST_CASE("Tensor: views share storage and follow strides", "[core][tensor]") {
    Tensor t = arange(24, DType::float64).view({2, 3, 4});
    CHECK(t.strides() == Strides{12, 4, 1});

    const Tensor tr = t.transpose(0, 2);  // (4, 3, 2)
    CHECK(tr.shape() == Shape{4, 3, 2});
    CHECK(tr.strides() == Strides{1, 4, 12});
    CHECK_FALSE(tr.is_contiguous());
    CHECK(tr.shares_storage(t));
    CHECK(tr.at({3, 2, 1}) == t.at({1, 2, 3}));

    const Tensor p = t.permute({1, 2, 0});
    CHECK(p.shape() == Shape{3, 4, 2});
    CHECK(p.at({2, 1, 1}) == t.at({1, 2, 1}));

    const Tensor s = t.slice(2, 1, 4, 2);  // columns 1 and 3
    CHECK(s.shape() == Shape{2, 3, 2});
    CHECK(s.at({1, 0, 1}) == t.at({1, 0, 3}));
    CHECK(t.slice(1, -2, 100).shape() == Shape{2, 2, 4});

    const Tensor sel = t.select(1, -1);
    CHECK(sel.shape() == Shape{2, 4});
    CHECK(sel.at({1, 2}) == t.at({1, 2, 2}));

    const Tensor e = arange(3).view({3, 1}).expand({2, 3, 4});
    CHECK(e.shape() == Shape{2, 3, 4});
    CHECK(e.strides() == Strides{0, 1, 0});
    CHECK(e.at({1, 2, 3}) == 2.0);

    CHECK(t.unsqueeze(0).shape() == Shape{1, 2, 3, 4});
    CHECK(t.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
    CHECK(t.unsqueeze(1).squeeze(1).shape() == Shape{2, 3, 4});
    CHECK(zeros({1, 3, 1}).squeeze().shape() == Shape{3});

    // writes through a view are visible in the base
    Tensor v = t.select(0, 1);
    v.set({0, 0}, -1.0);
    CHECK(t.at({1, 0, 0}) == -1.0);
}

TEST_CASE("Tensor: reshape views when it can and copies when it must", "[core][tensor]") {
    const Tensor t = arange(24).view({2, 3, 4});
    // (b, n, d) -> (b*n, d): the position-wise FFN reshape of seed 000
    const Tensor flat = t.reshape({-1, 4});
    CHECK(flat.shape() == Shape{6, 4});
    CHECK(flat.shares_storage(t));

    const Tensor tr = t.transpose(1, 2);  // (2, 4, 3), not contiguous
    CHECK_THROWS_AS(tr.view({8, 3}), ShapeError);
    const Tensor r = tr.reshape({8, 3});
    CHECK_FALSE(r.shares_storage(t));
    CHECK(r.at({1, 0}) == tr.at({0, 1, 0}));
    // splitting a dimension of a transposed tensor is a valid view
    const Tensor split = tr.view({2, 2, 2, 3});
    CHECK(split.shares_storage(t));
    CHECK(split.at({1, 1, 0, 2}) == tr.at({1, 2, 2}));

    CHECK(tr.contiguous().is_contiguous());
    CHECK(t.contiguous().shares_storage(t));
    CHECK(t.flatten().shape() == Shape{24});
    CHECK(t.flatten(1).shape() == Shape{2, 12});
}

TEST_CASE("Tensor: copies and dtype conversion", "[core][tensor]") {
    const Tensor t = tensor({1.5, -2.5, 3, 4}, {2, 2});
    const Tensor c = t.clone();
    CHECK_FALSE(c.shares_storage(t));
    CHECK(c.to_vector() == t.to_vector());
    CHECK(t.to(DType::float64).dtype() == DType::float64);
    CHECK(t.to(DType::int64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, 4});
    CHECK(t.to(DType::boolean).to_vector() == std::vector<double>{1, 1, 1, 1});

    Tensor dst = zeros({2, 3});
    copy_(dst, tensor({1, 2, 3}, {3}));  // broadcast rows
    CHECK(dst.to_vector() == std::vector<double>{1, 2, 3, 1, 2, 3});
    fill_(dst.select(1, 0), 9.0);
    CHECK(dst.to_vector() == std::vector<double>{9, 2, 3, 9, 2, 3});
    CHECK_THROWS_AS(copy_(dst, zeros({4})), ShapeError);
}

TEST_CASE("Tensor: bad input throws errors naming the operation", "[core][tensor][errors]") {
    const Tensor t = zeros({2, 3});
    CHECK_THROWS_WITH(t.view({4, 2}), "view: cannot reshape (2x3) (6 elements) into (4x2)");
    CHECK_THROWS_WITH(t.transpose(0, 2), "transpose: dimension 2 out of range for a 2-d tensor (expected -2 to 1)");
    CHECK_THROWS_WITH(t.select(0, 5), "select: index 5 out of range for dimension 0 of size 2");
    CHECK_THROWS_WITH(t.at({0, 3}), "at: index 3 out of range for dimension 1 of size 3");
    CHECK_THROWS_WITH(t.expand({4, 3, 2}), Catch::Contains("expand: cannot expand (2x3)"));
    CHECK_THROWS_WITH(t.squeeze(0), "squeeze: dimension 0 of (2x3) has size 2, not 1");
    CHECK_THROWS_WITH(t.permute({0, 0}), "permute: dimension 0 repeated in [0, 0]");
    CHECK_THROWS_WITH(t.item(), "item: tensor of shape (2x3) has 6 elements, not 1");
    CHECK_THROWS_WITH(t.data<double>(), "data: expected dtype float64, got float32");
    CHECK_THROWS_AS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ShapeError);
    CHECK_THROWS_AS(zeros({-1}), ValueError);
    CHECK_THROWS_AS(bernoulli({2}, 1.5), ValueError);
    CHECK_THROWS_AS(zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), ShapeError);
}

TEST_CASE("dropout_mask: 1/(1 - p) where a 16-bit quarter of a draw is below (1 - p) 2^16, four per draw",
          "[core][random]") {
    for (DType dtype : {DType::float32, DType::float64})
        for (double p : {0.0, 0.1, 0.5, 0.9})
            for (int64_t n : {1, 3, 4, 255, 256, 257, 1031}) {  // whole draws, a last partly used one, chunks of 256
                Generator a(7), b(7);
                const Tensor mask = dropout_mask({n}, p, a, dtype);
                // the rule spelled out: element i reads bits 16 (i % 4) .. 16 (i % 4) + 15 of draw i / 4
                const double threshold = std::ceil((1.0 - p) * 65536.0);
                const double scale = dtype == DType::float32 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0 / (1.0 - p);
                std::vector<double> expected;
                uint64_t bits = 0;
                for (int64_t i = 0; i < n; ++i) {
                    if (i % 4 == 0) bits = b.next_u64();
                    const double quarter = static_cast<double>((bits >> (16 * (i % 4))) & 0xffff);
                    expected.push_back(quarter < threshold ? scale : 0.0);
                }
                CHECK(mask.dtype() == dtype);
                CHECK(mask.to_vector() == expected);
                CHECK(a.state() == b.state());  // ⌈n / 4⌉ draws, so what follows is the same stream
            }
    // the kept fraction is 1 - p: 100,000 masks, 3.5 standard deviations (about 0.005 at p = 0.5)
    for (double p : {0.1, 0.3, 0.5}) {
        Generator g(3);
        const std::vector<double> m = dropout_mask({100000}, p, g, DType::float64).to_vector();
        double kept = 0;
        for (double v : m) kept += v != 0.0;
        CHECK(std::abs(kept / 1e5 - (1.0 - p)) < 3.5 * std::sqrt(p * (1 - p) / 1e5));
    }
    Generator g(1);
    CHECK_THROWS_WITH(dropout_mask({2}, 1.0, g), "dropout_mask: probability 1 not in [0, 1)");
    CHECK_THROWS_WITH(dropout_mask({2}, 0.5, g, DType::int64),
                      "dropout_mask: dtype must be float32 or float64, got int64");
}

TEST_CASE("uniform_(t, low, high, gen): in place, the numbers uniform() draws, with no temporary", "[core][random]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        Generator a(3), b(3);
        const Tensor want = uniform({64, 48}, -0.5, 0.25, a, dtype);
        const Tensor t = Tensor::empty({64, 48}, dtype);
        const int64_t before = storage_bytes();
        reset_storage_peak();
        uniform_(t, -0.5, 0.25, b);
        CHECK(storage_peak_bytes() == before);  // written where it lies: no buffer of its size beside it
        CHECK(t.to_vector() == want.to_vector());
        CHECK(a.uniform() == b.uniform());  // and the generator moved on by as many draws

        // a strided view: the same draws in row-major order of the view
        Generator c(3);
        const Tensor base = zeros({48, 64}, dtype);
        const Tensor view = base.transpose(0, 1);  // (64, 48), not contiguous
        uniform_(view, -0.5, 0.25, c);
        CHECK(view.to_vector() == want.to_vector());
    }
    Generator g(1);
    CHECK_THROWS_WITH(uniform_(Tensor::empty({2}), 1.0, 0.0, g), "uniform_: low 1 must not exceed high 0");
}

TEST_CASE("Tensor: the same seed gives the same numbers", "[core][random]") {
    Generator a(42), b(42), c(43);
    const Tensor x = randn({100}, a), y = randn({100}, b), z = randn({100}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
    // moments of 10,000 normals and uniforms are near their expected values
    Generator g(7);
    const std::vector<double> n = randn({10000}, g, DType::float64).to_vector();
    double mean = 0, sq = 0;
    for (double v : n) {
        mean += v;
        sq += v * v;
    }
    mean /= n.size();
    CHECK(std::abs(mean) < 0.05);
    CHECK(std::abs(sq / n.size() - 1.0) < 0.05);
    const std::vector<double> u = uniform({10000}, -2, 2, g).to_vector();
    for (double v : u) REQUIRE((v >= -2 && v < 2));
    const std::vector<double> m = bernoulli({10000}, 0.3, g).to_vector();
    double ones_count = 0;
    for (double v : m) ones_count += v;
    CHECK(std::abs(ones_count / 10000 - 0.3) < 0.02);
    for (int64_t v : randint({1000}, 3, 7, g).to_vector<int64_t>()) REQUIRE((v >= 3 && v < 7));
    // saving and restoring the state replays the stream
    const Generator::State s = g.state();
    const double first = g.uniform();
    g.set_state(s);
    CHECK(g.uniform() == first);
}

TEST_CASE("broadcast_shapes(a, b) and broadcasts_to(from, to): NumPy rules, aligned at the right", "[core][shape]") {
    CHECK(broadcast_shapes(Shape{2, 1, 4}, Shape{3, 1}, "test") == Shape{2, 3, 4});
    CHECK(broadcast_shapes(Shape{}, Shape{5}, "test") == Shape{5});
    CHECK_THROWS_WITH(broadcast_shapes(Shape{3}, Shape{4}, "add"),
                      Catch::Contains("add: cannot broadcast (3) with (4)"));
    CHECK(broadcasts_to(Shape{3, 1}, Shape{2, 3, 4}));
    CHECK(broadcasts_to(Shape{}, Shape{2, 3}));
    CHECK(broadcasts_to(Shape{2, 3}, Shape{2, 3}));
    CHECK_FALSE(broadcasts_to(Shape{2, 3, 4}, Shape{3, 4}));  // more dimensions than the target
    CHECK_FALSE(broadcasts_to(Shape{3}, Shape{3, 4}));        // 3 against 4 at the right
    CHECK_FALSE(broadcasts_to(Shape{1, 4}, Shape{4, 1}));     // would grow the target's size-1 dim
}

// GCC 12.2 with AVX-512 stores a broadcast of the first element for inline
// copies of constants like these (equal elements, then zeros): logical_or's
// expected {1, 1, 1, 0} would become {1, 1, 1, 1}. CMakeLists.txt caps such
// copies at 16 bytes; this checks the build it made.
TEST_CASE("build: constant arrays with trailing zeros survive inline copies (the GCC 12 AVX-512 miscompile)",
          "[core][build]") {
    const std::vector<double> d{1, 1, 1, 0};
    CHECK(d[3] == 0);
    const std::vector<int64_t> l{5, 5, 0, 0, 0, 0, 0, 0};
    CHECK(l[7] == 0);
    const std::vector<float> f{2, 2, 2, 2, 2, 2, 0, 0};
    CHECK(f[6] == 0);
    const Tensor t = from_vector(std::vector<double>{1, 1, 1, 0}, {4});
    CHECK(t.at({3}) == 0);
}
