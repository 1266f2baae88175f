// core::PackedMask and the storage byte counter: what backward keeps of a
// dropout mask; and where large buffers come from (a region of their own).
#include "core/mask.hpp"
#include "core/tensor.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

using namespace tformer;
using namespace tformer::core;

namespace {
bool same_bits(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel() * dtype_size(a.dtype()))) == 0;
}
}  // namespace

TEST_CASE("PackedMask: a dropout mask comes back bit for bit from one bit per element", "[core][mask]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        Generator gen(7);
        const Tensor keep = dropout_mask({3, 100, 77}, 0.1, gen, dtype);  // 23,100 elements, not a multiple of 64
        const int64_t before = storage_bytes();
        const PackedMask mask(keep);
        CHECK(mask.packed());
        CHECK(storage_bytes() - before == (keep.numel() + 63) / 64 * 8);  // the bits alone
        CHECK(same_bits(mask.unpack(), keep));
    }
}

TEST_CASE("PackedMask: other masks are kept as they are", "[core][mask]") {
    Generator gen(3);
    const Tensor small = dropout_mask({4, 5}, 0.5, gen);  // below kMinPackedElements
    CHECK_FALSE(PackedMask(small).packed());
    CHECK(PackedMask(small).unpack().shares_storage(small));

    Tensor mixed = dropout_mask({1 << 15}, 0.5, gen);  // one element neither 0 nor the scale
    mixed.set({5}, 0.25);
    const PackedMask kept(mixed);
    CHECK_FALSE(kept.packed());
    CHECK(same_bits(kept.unpack(), mixed));

    // the odd element in each part of the packing: a later lane of a whole word, the last partial word
    for (const int64_t at : {int64_t{64 * 3 + 50}, int64_t{(1 << 15) + 40}}) {
        Tensor odd = dropout_mask({(1 << 15) + 41}, 0.5, gen);
        odd.set({at}, 0.5);
        INFO("the odd element at " << at);
        CHECK_FALSE(PackedMask(odd).packed());
    }

    Tensor negative_zero = zeros({1 << 15});  // -0 is not +0: its bits would not come back
    negative_zero.set({0}, -0.0);
    negative_zero.set({1}, 2.0);
    CHECK_FALSE(PackedMask(negative_zero).packed());

    CHECK_FALSE(PackedMask(Tensor()).defined());
}

TEST_CASE("storage_bytes counts live buffers, small and large, and the peak since a reset", "[core][mask]") {
    const int64_t base = storage_bytes();
    reset_storage_peak();
    {
        const Tensor small = zeros({10});              // from the heap
        Tensor large = zeros({3 << 20});               // 12 MB: a block of the large-buffer region
        const Tensor medium = zeros({(1 << 18) + 1});  // just over 1 MB, not a whole number of pages
        CHECK(storage_bytes() - base == (10 + (3 << 20) + (1 << 18) + 1) * 4);
        CHECK(large.at({(3 << 20) - 1}) == 0.0);  // zeros() writes them, fresh or reused
        large.set({123}, 5.0);
        CHECK(large.at({123}) == 5.0);
        CHECK(medium.at({1 << 18}) == 0.0);
    }
    CHECK(storage_bytes() == base);
    CHECK(storage_peak_bytes() - base == (10 + (3 << 20) + (1 << 18) + 1) * 4);
    reset_storage_peak();
    CHECK(storage_peak_bytes() == base);
}

TEST_CASE(
    "small buffers: on one thread a freed buffer serves the next request of its size, the last freed first, "
    "another thread keeps its own",
    "[core][mask]") {
    const auto address = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); };
    const int64_t base = storage_bytes();
    uintptr_t a_at = 0;
    [[maybe_unused]] uintptr_t b_at = 0;  // read only outside AddressSanitizer
    {
        const Tensor a = Tensor::empty({1000}), b = Tensor::empty({1000});  // 4,000 bytes each
        a_at = address(a);
        b_at = address(b);
        CHECK(a_at % 64 == 0);
    }                                // b is freed first, then a
    CHECK(storage_bytes() == base);  // cached buffers are not live ones
    Tensor again = zeros({1000});    // zeros() writes a reused buffer like a fresh one
    CHECK(again.at({999}) == 0.0);
    Tensor other_size = Tensor::empty({1100});  // 4,400 bytes round up to 4,416: another size (4,000 -> 4,032)
#if !defined(__SANITIZE_ADDRESS__)              // under AddressSanitizer every buffer goes back to its heap
    CHECK(address(again) == a_at);              // the last freed
    CHECK(address(other_size) != b_at);         // not the buffer of another size
#endif
    const Tensor third = Tensor::empty({1000});
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(address(third) == b_at);
#endif
    // a buffer made here and freed on another thread goes to that thread's cache,
    // which hands its buffers back to the heap when the thread ends
    Tensor moved = Tensor::empty({3000});
    std::thread([t = std::move(moved)]() mutable { t = Tensor(); }).join();
    CHECK(storage_bytes() - base == (1000 + 1100 + 1000) * 4);  // again, other_size and third (or their sizes)
}

TEST_CASE("large buffers: a freed block serves the next request of its size, and freed neighbours merge",
          "[core][mask]") {
    const auto address = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); };
    uintptr_t first = 0;
    {
        const Tensor a = Tensor::empty({1 << 19});  // 2 MB
        first = address(a);
        CHECK(first % 4096 == 0);  // whole pages
    }
    {
        const Tensor again = Tensor::empty({1 << 19});  // the same size again: the same pages, no new ones
        CHECK(address(again) == first);
    }
    // Sixteen 1 MB buffers: once the free blocks left by other tests are used
    // up, they come one after another from the end of the region. Two
    // neighbours freed together then hold a 2 MB request at (or below, if
    // free space lay under them) the lower one's address: merged, not
    // served from the end of the region above them all.
    std::vector<Tensor> held;
    for (int i = 0; i < 16; ++i) held.push_back(Tensor::empty({1 << 18}));
    size_t lower = held.size();
    for (size_t i = 0; i + 1 < held.size() && lower == held.size(); ++i) {
        const uintptr_t gap = address(held[i + 1]) - address(held[i]);
        if (gap >= (size_t{1} << 20) && gap <= (size_t{1} << 20) + 4096) lower = i;  // + a redzone under ASan
    }
    REQUIRE(lower < held.size());
    const uintptr_t low = address(held[lower]);
    held[lower] = Tensor();
    held[lower + 1] = Tensor();
    const Tensor both = Tensor::empty({1 << 19});
    CHECK(address(both) <= low);
    const Tensor small = Tensor::empty({100});  // small buffers stay in the heap
    CHECK(address(small) % 64 == 0);
}
