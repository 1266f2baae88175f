// core/check: one-line argument checks whose messages name the op, the
// argument, its shape and the sizes it had to match.
#include "core/check.hpp"
#include "core/tensor.hpp"

#include <catch2/catch.hpp>

using namespace tformer;
using Catch::Contains;
using core::Shape;

TEST_CASE("check(ok, format, args): throws the given error with the formatted message only when ok is false",
          "[core][check]") {
    CHECK_NOTHROW(check(true, "never formatted {}", 1));
    REQUIRE_THROWS_AS(check(false, "Dropout: probability {} not in [0, 1)", 1.5), ValueError);
    REQUIRE_THROWS_WITH(check(false, "Dropout: probability {} not in [0, 1)", 1.5),
                        "Dropout: probability 1.5 not in [0, 1)");
    REQUIRE_THROWS_AS(check<ShapeError>(false, "op: shape {}", Shape{2, 3}), ShapeError);
    REQUIRE_THROWS_WITH(check<ShapeError>(false, "op: shape {}", Shape{2, 3}), "op: shape (2x3)");
    CHECK(fmt::format("{}", Shape{}) == "()");
}

TEST_CASE("ShapeCheck: names bind sizes across arguments, numbers and known() sizes must match", "[core][check]") {
    const ShapeCheck dims = ShapeCheck("MultiHeadAttention")
                                .known("query_size", 4)
                                .arg("queries", Shape{2, 3, 4}, "B T query_size")
                                .arg("keys", Shape{2, 5, 6}, "B S k")
                                .arg("values", Shape{2, 5, 1}, "B S 1");
    CHECK(dims["B"] == 2);
    CHECK(dims["T"] == 3);
    CHECK(dims["S"] == 5);
    CHECK(dims["k"] == 6);
    CHECK(dims["query_size"] == 4);
    REQUIRE_THROWS_WITH(dims["V"], "MultiHeadAttention: ShapeCheck: no argument gave the size of 'V'");

    auto mha = [] {
        return ShapeCheck("MultiHeadAttention").known("key_size", 4).arg("queries", Shape{2, 3, 4}, "B T d");
    };
    // a size fixed by an earlier argument or by known() is shown with its value
    REQUIRE_THROWS_AS(mha().arg("keys", Shape{3, 5, 4}, "B S key_size"), ShapeError);
    REQUIRE_THROWS_WITH(mha().arg("keys", Shape{3, 5, 4}, "B S key_size"),
                        "MultiHeadAttention: keys of shape (3x5x4) must be (B=2, S, key_size=4)");
    REQUIRE_THROWS_WITH(mha().arg("keys", Shape{2, 5, 7}, "B S key_size"),
                        "MultiHeadAttention: keys of shape (2x5x7) must be (B=2, S, key_size=4)");
    REQUIRE_THROWS_WITH(mha().arg("keys", Shape{2, 5}, "B S key_size"),
                        "MultiHeadAttention: keys of shape (2x5) must be (B=2, S, key_size=4)");
    REQUIRE_THROWS_WITH(ShapeCheck("op").arg("x", Shape{2, 3}, "B 4"), "op: x of shape (2x3) must be (B, 4)");
    // a name twice in one pattern: both dimensions the same size (a square matrix)
    CHECK_NOTHROW(ShapeCheck("op").arg("A", Shape{3, 3}, "n n"));
    REQUIRE_THROWS_WITH(ShapeCheck("op").arg("A", Shape{3, 4}, "n n"), "op: A of shape (3x4) must be (n, n)");
    // a failed argument binds nothing
    ShapeCheck c("op");
    REQUIRE_THROWS_AS(c.arg("x", Shape{2, 3}, "B 4"), ShapeError);
    REQUIRE_THROWS_AS(c["B"], ValueError);
}

TEST_CASE("ShapeCheck: '...' stands for the same leading dimensions in every argument", "[core][check]") {
    const ShapeCheck dims = ShapeCheck("DotProductAttention")
                                .arg("queries", Shape{2, 4, 3, 8}, "... T d")
                                .arg("keys", Shape{2, 4, 5, 8}, "... S d");
    CHECK(dims["S"] == 5);
    auto attention = [] { return ShapeCheck("DotProductAttention").arg("queries", Shape{2, 3, 8}, "... T d"); };
    CHECK_NOTHROW(attention().arg("values", Shape{2, 5, 6}, "... S v"));
    REQUIRE_THROWS_WITH(attention().arg("keys", Shape{3, 5, 8}, "... S d"),
                        "DotProductAttention: keys of shape (3x5x8) must be (...=(2), S, d=8)");
    REQUIRE_THROWS_WITH(attention().arg("keys", Shape{2, 2, 5, 8}, "... S d"),
                        "DotProductAttention: keys of shape (2x2x5x8) must be (...=(2), S, d=8)");
    REQUIRE_THROWS_WITH(ShapeCheck("op").arg("x", Shape{4}, "... T d"), "op: x of shape (4) must be (..., T, d)");
    CHECK_NOTHROW(ShapeCheck("op").arg("x", Shape{4, 5}, "... T d"));  // no leading dimensions at all
}

TEST_CASE("ShapeCheck.arg(name, tensor, pattern): an undefined tensor is an error naming it", "[core][check]") {
    REQUIRE_THROWS_AS(ShapeCheck("MultiHeadAttention").arg("keys", core::Tensor(), "B S key_size"), ValueError);
    REQUIRE_THROWS_WITH(
        ShapeCheck("MultiHeadAttention").known("key_size", 4).arg("keys", core::Tensor(), "B S key_size"),
        "MultiHeadAttention: keys (undefined) must be (B, S, key_size=4)");
    REQUIRE_THROWS_WITH(ShapeCheck("op").known("n", 1).known("n", 2), "op: ShapeCheck: the size of 'n' is given twice");
}
