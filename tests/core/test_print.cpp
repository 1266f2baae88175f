// Printing: exact expected strings for the layouts and dtypes a student meets.
#include "core/print.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

using namespace tformer;
using namespace tformer::core;

namespace {

// The longest line of a multi-line string.
size_t longest_line(const std::string& s) {
    size_t longest = 0, start = 0;
    while (start <= s.size()) {
        size_t end = s.find('\n', start);
        if (end == std::string::npos) end = s.size();
        longest = std::max(longest, end - start);
        start = end + 1;
    }
    return longest;
}

}  // namespace

TEST_CASE("to_string(t): exact output for each rank, dtype and layout", "[core][print]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    struct Case {
        const char* name;
        Tensor t;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {"0-d float32 (a loss)", scalar(3.5), "tensor(3.5000)"},
        {"0-d float64 names its dtype", scalar(-0.25, DType::float64), "tensor(-0.2500, dtype=float64)"},
        {"0-d int64", scalar(3, DType::int64), "tensor(3, dtype=int64)"},
        {"1-D float32, common width", tensor({1.5, -2, 0.25}, {3}),
         "tensor([ 1.5000, -2.0000,  0.2500], shape=(3), dtype=float32)"},
        {"2-D float32", tensor({0.1, -1.2, 3, 4}, {2, 2}),
         "tensor([[ 0.1000, -1.2000],\n"
         "        [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32)"},
        {"3-D int64, blank line between blocks", arange(8, DType::int64).view({2, 2, 2}),
         "tensor([[[0, 1],\n"
         "         [2, 3]],\n"
         "\n"
         "        [[4, 5],\n"
         "         [6, 7]]], shape=(2, 2, 2), dtype=int64)"},
        {"transposed view prints logical values", arange(6).view({2, 3}).transpose(0, 1),
         "tensor([[0.0000, 3.0000],\n"
         "        [1.0000, 4.0000],\n"
         "        [2.0000, 5.0000]], shape=(3, 2), dtype=float32)"},
        {"sliced view", arange(10, DType::float64).slice(0, 1, 10, 3),
         "tensor([1.0000, 4.0000, 7.0000], shape=(3), dtype=float64)"},
        {"expanded view", tensor({1, 2}, {2, 1}).expand({2, 3}),
         "tensor([[1.0000, 1.0000, 1.0000],\n"
         "        [2.0000, 2.0000, 2.0000]], shape=(2, 3), dtype=float32)"},
        {"int64 right-aligned", from_vector(std::vector<int64_t>{-10, 5, 123}, {3}),
         "tensor([-10,   5, 123], shape=(3), dtype=int64)"},
        {"bool as True/False", from_vector(std::vector<bool>{true, false, true, true}, {2, 2}),
         "tensor([[ True, False],\n"
         "        [ True,  True]], shape=(2, 2), dtype=bool)"},
        {"nan and inf", tensor({nan, inf, -inf, 1.5}, {4}),
         "tensor([   nan,    inf,   -inf, 1.5000], shape=(4), dtype=float32)"},
        {"nan does not force scientific", tensor({nan, 0, 2}, {3}, DType::float64),
         "tensor([   nan, 0.0000, 2.0000], shape=(3), dtype=float64)"},
        {"small values switch to scientific", tensor({1e-5, 1}, {2}),
         "tensor([1.0000e-05, 1.0000e+00], shape=(2), dtype=float32)"},
        {"large values switch to scientific", tensor({2e9, -3}, {2}, DType::float64),
         "tensor([ 2.0000e+09, -3.0000e+00], shape=(2), dtype=float64)"},
        {"a ratio up to 1000 stays fixed", tensor({0.5, 500}, {2}),
         "tensor([  0.5000, 500.0000], shape=(2), dtype=float32)"},
        {"0-d tiny value", scalar(1e-6, DType::float64), "tensor(1.0000e-06, dtype=float64)"},
        {"empty", zeros({0, 3}), "tensor([], shape=(0, 3), dtype=float32)"},
        {"empty int64 1-D", Tensor::empty({0}, DType::int64), "tensor([], shape=(0), dtype=int64)"},
        {"undefined", Tensor(), "tensor(undefined)"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CHECK(to_string(c.t) == c.expected);
    }
}

TEST_CASE("to_string(t, options): precision, summaries and line wrapping", "[core][print]") {
    struct Case {
        const char* name;
        Tensor t;
        PrintOptions options;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {"precision 2",
         tensor({3.14159, -1}, {2}),
         {.precision = 2},
         "tensor([ 3.14, -1.00], shape=(2), dtype=float32)"},
        {"precision 0", tensor({2.5, 7}, {2}), {.precision = 0}, "tensor([2, 7], shape=(2), dtype=float32)"},
        {"1-D summary",
         arange(10, DType::int64),
         {.threshold = 5, .edge_items = 2},
         "tensor([0, 1, ..., 8, 9], shape=(10), dtype=int64)"},
        {"2-D summary: rows and columns",
         arange(36, DType::int64).view({6, 6}),
         {.threshold = 10, .edge_items = 1},
         "tensor([[ 0, ...,  5],\n"
         "        ...,\n"
         "        [30, ..., 35]], shape=(6, 6), dtype=int64)"},
        {"short dimensions are not summarised",
         arange(12, DType::int64).view({2, 6}),
         {.threshold = 10, .edge_items = 2},
         "tensor([[ 0,  1, ...,  4,  5],\n"
         "        [ 6,  7, ..., 10, 11]], shape=(2, 6), dtype=int64)"},
        {"wraps long rows; suffix on its own line",
         arange(10, DType::int64),
         {.line_width = 20},
         "tensor([0, 1, 2, 3,\n"
         "        4, 5, 6, 7,\n"
         "        8, 9],\n"
         "       shape=(10), dtype=int64)"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CHECK(to_string(c.t, c.options) == c.expected);
    }
}

TEST_CASE("to_string(t): a 1000x1000 tensor is summarised to a few short lines", "[core][print]") {
    const Tensor big = arange(1000000).view({1000, 1000});
    const std::string s = to_string(big);
    CHECK_THAT(s, Catch::Contains("..."));
    CHECK_THAT(s, Catch::StartsWith("tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,"));
    // 999999 rounds to 1.0000e+06 at 4 digits
    CHECK_THAT(s, Catch::EndsWith(" 1.0000e+06]], shape=(1000, 1000), dtype=float32)"));
    CHECK(s.size() < 1000);
    CHECK(longest_line(s) <= 80);
    // 7 lines (first 3 rows, "...,", last 3 rows), and each row of 7 items wraps once at 80 columns
    CHECK(std::count(s.begin(), s.end(), '\n') == 6 + 6);
    // a transposed view of it prints the transposed values
    CHECK_THAT(to_string(big.transpose(0, 1)), Catch::StartsWith("tensor([[0.0000e+00, 1.0000e+03, 2.0000e+03,"));
}

TEST_CASE("operator<<(os, t) and fmt::format(\"{}\", t) give to_string(t)", "[core][print]") {
    const Tensor t = tensor({1, 2, 3, 4}, {2, 2}, DType::float64);
    std::ostringstream os;
    os << t;
    CHECK(os.str() == to_string(t));
    CHECK(fmt::format("{}", t) == to_string(t));
    CHECK(fmt::format("x = {}", scalar(2)) == "x = tensor(2.0000)");
}
