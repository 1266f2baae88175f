#include "core/tensor.hpp"

#include "core/parallel.hpp"
#include "core/strided.hpp"

#include <sys/mman.h>
#include <unistd.h>
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without AddressSanitizer
#endif
// AddressSanitizer builds: GCC says so with __SANITIZE_ADDRESS__, clang (the
// fuzz build) with __has_feature
#if defined(__SANITIZE_ADDRESS__)
#define TFORMER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TFORMER_ASAN 1
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>

namespace tformer::core {

// ---- Storage ------------------------------------------------------------------------

namespace {
std::atomic<int64_t> g_storage_bytes{0};
std::atomic<int64_t> g_storage_peak{0};

// Large buffers (activations, gradients, optimizer state) come from a region
// of their own rather than from the heap.
//
// In glibc's heap they shared pages with the small allocations (graph nodes,
// shapes, strings) and, since tformer keeps the heap from shrinking (see
// apps/tformer.cpp), every hole a step left stayed resident: base's peak RSS
// stood 330 MB above its peak of live tensors, and grew from step to step.
// Unmapping freed buffers fixes the RSS but faults every page in and zeroes
// it again each step (+7% on base's step with a cache of mappings, +20%
// without).
//
// Here the blocks are carved from one reserved range of addresses, best fit
// (the smallest free block that holds the request, the lowest address among
// equals) with neighbours merged when freed, and the pages once touched are
// kept: a step that asks for the same sizes in the same order as the last one
// gets the same pages back, no page faults, and RSS follows the most that was
// ever live plus what the placement could not pack.
constexpr size_t kLargeBytes = size_t{1} << 20;  // from here, a block of the region
constexpr size_t kPage = 4096;
constexpr size_t kCommitStep = size_t{64} << 20;  // pages made writable 64 MB at a time

class LargeBlocks {
public:
    LargeBlocks() {
        // Address space only (PROT_NONE costs no memory and no commit charge),
        // as much as the machine has RAM: a request past it takes the heap.
        const long pages = sysconf(_SC_PHYS_PAGES);
        const size_t want = pages > 0 ? static_cast<size_t>(pages) * kPage : size_t{0};
        void* p =
            want > 0 ? mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
        if (p != MAP_FAILED) {
            base_ = static_cast<char*>(p);
            reserved_ = want;
        }
    }

    // `len` bytes (a multiple of kPage), or nullptr when the region is full.
    void* take(size_t len) {
        std::lock_guard lock(mutex_);
        size_t offset = 0;
        if (auto fit = by_size_.lower_bound({len, 0}); fit != by_size_.end()) {
            const auto [free_len, free_offset] = *fit;
            by_size_.erase(fit);
            by_offset_.erase(free_offset);
            if (free_len > len) insert_free(free_offset + len, free_len - len);
            offset = free_offset;
        } else {
            if (top_ + len > reserved_) return nullptr;
            offset = top_;
            top_ += len;
            if (top_ > committed_) {
                const size_t want = std::min(reserved_, (top_ + kCommitStep - 1) / kCommitStep * kCommitStep);
                if (mprotect(base_ + committed_, want - committed_, PROT_READ | PROT_WRITE) != 0) {
                    top_ -= len;
                    return nullptr;
                }
                committed_ = want;
            }
        }
        void* p = base_ + offset;
        ASAN_UNPOISON_MEMORY_REGION(p, len);
        return p;
    }

    void give(void* p, size_t len) {
        std::lock_guard lock(mutex_);
        ASAN_POISON_MEMORY_REGION(p, len);
        size_t offset = static_cast<size_t>(static_cast<char*>(p) - base_);
        // merge with the free neighbours on either side
        auto next = by_offset_.lower_bound(offset);
        if (next != by_offset_.end() && offset + len == next->first) {
            len += next->second;
            by_size_.erase({next->second, next->first});
            next = by_offset_.erase(next);
        }
        if (next != by_offset_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == offset) {
                offset = prev->first;
                len += prev->second;
                by_size_.erase({prev->second, prev->first});
                by_offset_.erase(prev);
            }
        }
        if (offset + len == top_)
            top_ = offset;  // the end of the used range comes down; its pages stay, for the next request
        else
            insert_free(offset, len);
    }

    // True for a block take() gave out (the heap's never fall in the region).
    bool owns(const void* p) const {
        const char* c = static_cast<const char*>(p);
        return c >= base_ && c < base_ + reserved_;
    }

private:
    void insert_free(size_t offset, size_t len) {
        by_offset_.emplace(offset, len);
        by_size_.emplace(len, offset);
    }

    std::mutex mutex_;
    char* base_ = nullptr;
    size_t reserved_ = 0;                          // bytes of address space
    size_t committed_ = 0;                         // bytes made writable, from base_
    size_t top_ = 0;                               // bytes below which blocks are used or free; above, nothing is
    std::map<size_t, size_t> by_offset_;           // free blocks: offset -> length
    std::set<std::pair<size_t, size_t>> by_size_;  // the same: (length, offset)
};

LargeBlocks& large_blocks() {
    static auto* blocks = new LargeBlocks;  // never destroyed: tensors may outlive static destructors
    return *blocks;
}

// What a buffer of `nbytes` takes: 64-byte multiples (as aligned_alloc
// requires), whole pages from the region.
size_t rounded_bytes(int64_t nbytes) { return (static_cast<size_t>(nbytes) + 63) / 64 * 64; }
// Under AddressSanitizer each block ends in a poisoned page (the heap's
// redzone), so a write past a large tensor is caught as it is in the heap.
#if defined(TFORMER_ASAN)
constexpr size_t kRedzone = kPage;
#else
constexpr size_t kRedzone = 0;
#endif
size_t region_bytes(size_t rounded) { return (rounded + kRedzone + kPage - 1) / kPage * kPage; }

// Buffers below kLargeBytes come from the heap, through a cache per thread
// of the ones freed, by size, the last freed handed out first. A training
// step asks for the same sizes in the same order every time: it gets back a
// buffer that was just freed, still in the cache of the processor, without
// the heap's bookkeeping (malloc, free and the heap's merging of free chunks
// took about 3% of the d2l train step and 4% of its decoding). At most
// kSmallCacheBytes per thread stay cached; past that a buffer goes back to the
// heap. Not under AddressSanitizer: a freed buffer must go back to the heap for
// it to catch a use after free.
#if defined(TFORMER_ASAN)
constexpr bool kSmallCache = false;
#else
constexpr bool kSmallCache = true;
#endif
constexpr size_t kSmallCacheBytes = size_t{16} << 20;

class SmallCache {
public:
    void* take(size_t rounded) {
        const auto it = free_.find(rounded);
        if (it == free_.end() || it->second.empty()) return nullptr;
        void* p = it->second.back();
        it->second.pop_back();
        bytes_ -= rounded;
        return p;
    }
    // false: the caller frees p (the cache is full, or keeping p would need
    // memory the machine does not have: a destructor must not throw)
    bool give(void* p, size_t rounded) noexcept {
        if (bytes_ + rounded > kSmallCacheBytes) return false;
        try {
            free_[rounded].push_back(p);
        } catch (const std::bad_alloc&) {
            return false;
        }
        bytes_ += rounded;
        return true;
    }
    ~SmallCache() {
        t_small_cache_gone = true;  // buffers freed later on this thread (static tensors) go to the heap
        for (auto& [rounded, blocks] : free_)
            for (void* p : blocks) std::free(p);
    }
    static thread_local bool t_small_cache_gone;

private:
    std::unordered_map<size_t, std::vector<void*>> free_;  // rounded size -> freed buffers, the last freed last
    size_t bytes_ = 0;
};
thread_local bool SmallCache::t_small_cache_gone = false;

SmallCache* small_cache() {
    if (!kSmallCache || SmallCache::t_small_cache_gone) return nullptr;
    thread_local SmallCache cache;
    return &cache;
}
}  // namespace

Storage::Storage(int64_t nbytes) : nbytes_(nbytes) {
    if (nbytes < 0) fail<ValueError>("Storage: negative size {}", nbytes);
    // 64-byte alignment suits AVX-512 loads (the region's blocks are page-aligned)
    const size_t rounded = rounded_bytes(nbytes);
    if (rounded >= kLargeBytes) {
        const size_t len = region_bytes(rounded);
        data_ = large_blocks().take(len);
        if (data_ != nullptr) ASAN_POISON_MEMORY_REGION(static_cast<char*>(data_) + rounded, len - rounded);
    }
    if (data_ == nullptr && rounded < kLargeBytes) {
        if (SmallCache* cache = small_cache()) data_ = cache->take(rounded);
    }
    if (data_ == nullptr) {
        data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
        if (data_ == nullptr) throw std::bad_alloc();
    }
    // two relaxed atomics per buffer: nothing next to the allocation itself
    const int64_t now = g_storage_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    int64_t peak = g_storage_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_storage_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

Storage::~Storage() {
    const size_t rounded = rounded_bytes(nbytes_);
    if (rounded >= kLargeBytes && large_blocks().owns(data_)) {
        large_blocks().give(data_, region_bytes(rounded));
    } else {
        SmallCache* cache = rounded < kLargeBytes ? small_cache() : nullptr;
        if (cache == nullptr || !cache->give(data_, rounded)) std::free(data_);
    }
    g_storage_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
}

int64_t storage_bytes() { return g_storage_bytes.load(std::memory_order_relaxed); }
int64_t storage_peak_bytes() { return g_storage_peak.load(std::memory_order_relaxed); }
void reset_storage_peak() { g_storage_peak.store(storage_bytes(), std::memory_order_relaxed); }

// ---- construction and metadata --------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides, int64_t offset,
               DType dtype)
    : storage_(std::move(storage)), shape_(shape), strides_(strides), offset_(offset), dtype_(dtype) {
    if (shape.size() != strides.size())
        fail<ShapeError>("Tensor: shape {} and strides {} differ in length", shape_str(shape), dims_list_str(strides));
    numel_ = shape_numel(shape);
    if (numel_ == 0 || !storage_) return;
    // the lowest and highest element this view can touch must lie inside the storage
    int64_t lo = offset, hi = offset;
    for (int d = 0; d < shape.size(); ++d) {
        const int64_t reach = (shape[d] - 1) * strides[d];
        (reach < 0 ? lo : hi) += reach;
    }
    const int64_t capacity = storage_->nbytes() / dtype_size(dtype);
    if (lo < 0 || hi >= capacity)
        fail<IndexError>(
            "Tensor: view of shape {} with strides {} and offset {} reaches outside a storage of {} elements",
            shape_str(shape), dims_list_str(strides), offset, capacity);
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
    const int64_t n = shape_numel(shape);
    auto storage = std::make_shared<Storage>(n * dtype_size(dtype));
    return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

int64_t Tensor::size(int64_t d) const { return shape_[normalize_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
    if (numel_ == 0) return true;  // nothing to lay out (PyTorch agrees)
    int64_t expected = 1;
    for (int d = dim() - 1; d >= 0; --d) {
        if (shape_[d] == 1) continue;
        if (strides_[d] != expected) return false;
        expected *= shape_[d];
    }
    return true;
}

void* Tensor::raw_data() const {
    if (!defined()) fail<ValueError>("raw_data: tensor is undefined");
    return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

void Tensor::check_dtype(DType expected, const char* op) const {
    if (!defined()) fail<ValueError>("{}: tensor is undefined", op);
    if (dtype_ != expected)
        fail<ValueError>("{}: expected dtype {}, got {}", op, dtype_name(expected), dtype_name(dtype_));
}

// ---- element access ---------------------------------------------------------------------

namespace {
double read_element(const void* base, DType dtype, int64_t offset) {
    switch (dtype) {
        case DType::float32: return static_cast<const float*>(base)[offset];
        case DType::float64: return static_cast<const double*>(base)[offset];
        case DType::int64: return static_cast<double>(static_cast<const int64_t*>(base)[offset]);
        case DType::boolean: return static_cast<const bool*>(base)[offset] ? 1.0 : 0.0;
    }
    return 0.0;
}

void write_element(void* base, DType dtype, int64_t offset, double value) {
    switch (dtype) {
        case DType::float32: static_cast<float*>(base)[offset] = static_cast<float>(value); break;
        case DType::float64: static_cast<double*>(base)[offset] = value; break;
        case DType::int64: static_cast<int64_t*>(base)[offset] = static_cast<int64_t>(value); break;
        case DType::boolean: static_cast<bool*>(base)[offset] = value != 0.0; break;
    }
}

int64_t element_offset(const Tensor& t, const Dims& index, const char* op) {
    if (!t.defined()) fail<ValueError>("{}: tensor is undefined", op);
    if (index.size() != t.dim())
        fail<IndexError>("{}: index {} has {} entries for a tensor of shape {}", op, dims_list_str(index), index.size(),
                         shape_str(t.shape()));
    int64_t off = t.offset();
    for (int d = 0; d < t.dim(); ++d) {
        int64_t i = index[d];
        if (i < -t.shape()[d] || i >= t.shape()[d])
            fail<IndexError>("{}: index {} out of range for dimension {} of size {}", op, i, d, t.shape()[d]);
        if (i < 0) i += t.shape()[d];
        off += i * t.strides()[d];
    }
    return off;
}
}  // namespace

double Tensor::item() const {
    if (numel_ != 1) fail<ValueError>("item: tensor of shape {} has {} elements, not 1", shape_str(shape_), numel_);
    int64_t off = offset_;  // all sizes are 1, so only the offset matters
    return read_element(storage_->data(), dtype_, off);
}

double Tensor::at(const Dims& index) const {
    return read_element(storage_->data(), dtype_, element_offset(*this, index, "at"));
}

void Tensor::set(const Dims& index, double value) {
    write_element(storage_->data(), dtype_, element_offset(*this, index, "set"), value);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
    if (!defined()) fail<ValueError>("to_vector: tensor is undefined");
    std::vector<T> out;
    out.reserve(numel_);
    StridedLoop<1> loop(shape_, {strides_});
    const void* base = storage_->data();
    loop.for_runs(0, numel_ == 0 ? 0 : loop.num_runs(), {offset_}, [&](int64_t len, const std::array<int64_t, 1>& off) {
        const int64_t s = loop.inner_stride(0);
        for (int64_t i = 0; i < len; ++i) out.push_back(static_cast<T>(read_element(base, dtype_, off[0] + i * s)));
    });
    return out;
}
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

// ---- views ------------------------------------------------------------------------------------

namespace {
// Replaces one -1 in `shape` so the element count equals numel.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
    Shape out = shape;
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < shape.size(); ++d) {
        if (shape[d] == -1) {
            if (infer >= 0) fail<ShapeError>("{}: only one dimension can be -1, got {}", op, dims_list_str(shape));
            infer = d;
        } else if (shape[d] < 0) {
            fail<ShapeError>("{}: invalid size {} in {}", op, shape[d], dims_list_str(shape));
        } else {
            known *= shape[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            fail<ShapeError>("{}: cannot reshape {} ({} elements) into {}", op, shape_str(from), numel,
                             dims_list_str(shape));
        out[infer] = numel / known;
    } else if (known != numel) {
        fail<ShapeError>("{}: cannot reshape {} ({} elements) into {}", op, shape_str(from), numel, shape_str(shape));
    }
    return out;
}

// Strides for viewing (old_shape, old_strides) as new_shape without a copy,
// or false when impossible (the same rule as PyTorch's computeStride).
bool view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape, Strides& out) {
    out = Dims::filled(new_shape.size(), 1);
    int64_t numel = shape_numel(old_shape);
    if (numel == 0 || old_shape.empty()) {  // nothing to keep in place: any layout works
        out = contiguous_strides(new_shape);
        return true;
    }
    // walk old dims from the innermost, grouping runs that are contiguous among themselves
    int view_d = new_shape.size() - 1;
    int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = old_shape.size() - 1; tensor_d >= 0; --tensor_d) {
        tensor_numel *= old_shape[tensor_d];
        // end of a contiguous chunk?
        if (tensor_d == 0 ||
            (old_shape[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return false;
            if (tensor_d > 0) {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}
}  // namespace

Tensor Tensor::view(const Shape& shape) const {
    const Shape target = infer_shape(shape, numel_, "view", shape_);
    Strides strides;
    if (!view_strides(shape_, strides_, target, strides))
        fail<ShapeError>("view: cannot view {} with strides {} as {} without a copy; use reshape", shape_str(shape_),
                         dims_list_str(strides_), shape_str(target));
    return Tensor(storage_, target, strides, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
    const Shape target = infer_shape(shape, numel_, "reshape", shape_);
    Strides strides;
    if (view_strides(shape_, strides_, target, strides)) return Tensor(storage_, target, strides, offset_, dtype_);
    return clone().view(target);
}

Tensor Tensor::permute(const Dims& dims) const {
    if (dims.size() != dim())
        fail<ShapeError>("permute: {} dimensions given for a tensor of shape {}", dims_list_str(dims),
                         shape_str(shape_));
    Shape shape;
    Strides strides;
    std::array<bool, kMaxDims> seen{};
    for (int i = 0; i < dims.size(); ++i) {
        const int d = normalize_dim(dims[i], dim(), "permute");
        if (seen[d]) fail<ShapeError>("permute: dimension {} repeated in {}", d, dims_list_str(dims));
        seen[d] = true;
        shape.push_back(shape_[d]);
        strides.push_back(strides_[d]);
    }
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
    const int a = normalize_dim(dim0, dim(), "transpose"), b = normalize_dim(dim1, dim(), "transpose");
    Shape shape = shape_;
    Strides strides = strides_;
    std::swap(shape[a], shape[b]);
    std::swap(strides[a], strides[b]);
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
    const int dd = normalize_dim(d, dim(), "slice");
    if (step <= 0) fail<ValueError>("slice: step must be positive, got {}", step);
    const int64_t n = shape_[dd];
    // Python-style clamping of negative and out-of-range bounds
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
    Shape shape = shape_;
    Strides strides = strides_;
    shape[dd] = (end - start + step - 1) / step;
    strides[dd] = strides_[dd] * step;
    return Tensor(storage_, shape, strides, offset_ + start * strides_[dd], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
    const int dd = normalize_dim(d, dim(), "select");
    const int64_t n = shape_[dd];
    if (index < -n || index >= n)
        fail<IndexError>("select: index {} out of range for dimension {} of size {}", index, dd, n);
    if (index < 0) index += n;
    Shape shape = shape_;
    Strides strides = strides_;
    shape.erase(dd);
    strides.erase(dd);
    return Tensor(storage_, shape, strides, offset_ + index * strides_[dd], dtype_);
}

Tensor Tensor::expand(const Shape& target) const {
    if (target.size() < dim())
        fail<ShapeError>("expand: cannot expand {} to fewer dimensions {}", shape_str(shape_), dims_list_str(target));
    const int lead = target.size() - dim();
    Shape shape = target;
    Strides strides = Dims::filled(target.size(), 0);
    for (int d = 0; d < target.size(); ++d) {
        if (d < lead) {
            if (target[d] < 0) fail<ShapeError>("expand: size -1 not allowed for new leading dimension {}", d);
            continue;  // new dimension: stride 0
        }
        const int64_t have = shape_[d - lead];
        const int64_t want = target[d] == -1 ? have : target[d];
        if (have == want) {
            strides[d] = strides_[d - lead];
        } else if (have == 1) {
            strides[d] = 0;
        } else {
            fail<ShapeError>("expand: cannot expand {} to {}: size {} at dimension {} is not 1", shape_str(shape_),
                             dims_list_str(target), have, d);
        }
        shape[d] = want;
    }
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
    const int dd = normalize_dim(d, dim(), "squeeze");
    if (shape_[dd] != 1)
        fail<ShapeError>("squeeze: dimension {} of {} has size {}, not 1", dd, shape_str(shape_), shape_[dd]);
    Shape shape = shape_;
    Strides strides = strides_;
    shape.erase(dd);
    strides.erase(dd);
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
    Shape shape;
    Strides strides;
    for (int d = 0; d < dim(); ++d) {
        if (shape_[d] == 1) continue;
        shape.push_back(shape_[d]);
        strides.push_back(strides_[d]);
    }
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
    const int dd = normalize_dim(d, dim() + 1, "unsqueeze");
    Shape shape = shape_;
    Strides strides = strides_;
    // a stride that keeps the tensor contiguous when it was
    const int64_t stride = dd < dim() ? strides_[dd] * shape_[dd] : 1;
    shape.insert(dd, 1);
    strides.insert(dd, stride);
    return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
    if (dim() == 0) return reshape({1});
    const int s = normalize_dim(start_dim, dim(), "flatten"), e = normalize_dim(end_dim, dim(), "flatten");
    if (s > e) fail<ValueError>("flatten: start_dim {} is after end_dim {}", s, e);
    Shape shape;
    for (int d = 0; d < s; ++d) shape.push_back(shape_[d]);
    int64_t merged = 1;
    for (int d = s; d <= e; ++d) merged *= shape_[d];
    shape.push_back(merged);
    for (int d = e + 1; d < dim(); ++d) shape.push_back(shape_[d]);
    return reshape(shape);
}

// ---- copies ------------------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
    if (!defined()) fail<ValueError>("contiguous: tensor is undefined");
    if (is_contiguous()) return *this;
    return clone();
}

Tensor Tensor::clone() const {
    if (!defined()) fail<ValueError>("clone: tensor is undefined");
    Tensor out = Tensor::empty(shape_, dtype_);
    copy_(out, *this);
    return out;
}

Tensor Tensor::to(DType dtype) const {
    if (!defined()) fail<ValueError>("to: tensor is undefined");
    if (dtype == dtype_) return *this;
    Tensor out = Tensor::empty(shape_, dtype);
    copy_(out, *this);
    return out;
}

void copy_(const Tensor& dst, const Tensor& src) {
    if (!dst.defined() || !src.defined()) fail<ValueError>("copy_: tensor is undefined");
    const Shape b = broadcast_shapes(dst.shape(), src.shape(), "copy_");
    if (!(b == dst.shape()))
        fail<ShapeError>("copy_: cannot copy {} into {}", shape_str(src.shape()), shape_str(dst.shape()));
    const Tensor s = src.expand(dst.shape());
    StridedLoop<2> loop(dst.shape(), {dst.strides(), s.strides()});
    visit_dtype(dst.dtype(), [&](auto dtag) {
        using D = typename decltype(dtag)::type;
        visit_dtype(src.dtype(), [&](auto stag) {
            using S = typename decltype(stag)::type;
            D* out = static_cast<D*>(dst.storage()->data());
            const S* in = static_cast<const S*>(src.storage()->data());
            const int64_t so = loop.inner_stride(0), si = loop.inner_stride(1);
            loop.for_all_runs({dst.offset(), s.offset()}, [&](int64_t len, const std::array<int64_t, 2>& off) {
                D* o = out + off[0];
                const S* i = in + off[1];
                if (so == 1 && si == 1) {
                    for (int64_t k = 0; k < len; ++k) o[k] = static_cast<D>(i[k]);
                } else {
                    for (int64_t k = 0; k < len; ++k) o[k * so] = static_cast<D>(i[k * si]);
                }
            });
        });
    });
}

void fill_(const Tensor& dst, double value) {
    if (!dst.defined()) fail<ValueError>("fill_: tensor is undefined");
    StridedLoop<1> loop(dst.shape(), {dst.strides()});
    visit_dtype(dst.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* out = static_cast<T*>(dst.storage()->data());
        const T v = static_cast<T>(value);
        const int64_t s = loop.inner_stride(0);
        loop.for_all_runs({dst.offset()}, [&](int64_t len, const std::array<int64_t, 1>& off) {
            for (int64_t k = 0; k < len; ++k) out[off[0] + k * s] = v;
        });
    });
}

// ---- factories -------------------------------------------------------------------------------------

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor full(const Shape& shape, double value, DType dtype) {
    Tensor t = Tensor::empty(shape, dtype);
    if (value == 0.0 && t.numel() > 0) {
        // all-zero bytes are 0 in every dtype; large buffers are cleared by every thread
        auto* bytes = static_cast<unsigned char*>(t.raw_data());
        const auto size = static_cast<int64_t>(dtype_size(dtype));
        parallel_for(0, t.numel(), 1, [&](int64_t first, int64_t last) {
            std::memset(bytes + first * size, 0, static_cast<size_t>((last - first) * size));
        });
    } else {
        fill_(t, value);
    }
    return t;
}

Tensor scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor arange(int64_t n, DType dtype) {
    if (n < 0) fail<ValueError>("arange: negative length {}", n);
    return arange(0.0, static_cast<double>(n), 1.0, dtype);
}

Tensor arange(double start, double end, double step, DType dtype) {
    if (step == 0.0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(end))
        fail<ValueError>("arange: invalid range start={} end={} step={}", start, end, step);
    const double count = std::ceil((end - start) / step);
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    Tensor t = Tensor::empty({n}, dtype);
    for (int64_t i = 0; i < n; ++i) t.set({i}, start + static_cast<double>(i) * step);
    return t;
}

Tensor eye(int64_t n, DType dtype) {
    if (n < 0) fail<ValueError>("eye: negative size {}", n);
    Tensor t = zeros({n, n}, dtype);
    for (int64_t i = 0; i < n; ++i) t.set({i, i}, 1.0);
    return t;
}

namespace {
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape) {
    const int64_t n = shape_numel(shape);
    if (static_cast<int64_t>(values.size()) != n)
        fail<ShapeError>("from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape_str(shape),
                         n);
    Tensor t = Tensor::empty(shape, dtype_v<T>);
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = values[i];
    return t;
}
}  // namespace

Tensor from_vector(const std::vector<float>& values, const Shape& shape) { return from_values(values, shape); }
Tensor from_vector(const std::vector<double>& values, const Shape& shape) { return from_values(values, shape); }
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape) { return from_values(values, shape); }
Tensor from_vector(const std::vector<bool>& values, const Shape& shape) { return from_values(values, shape); }

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
    return from_values(values, shape).to(dtype);
}

namespace {
// Fills a fresh tensor with draw() in row-major order, sequentially, so the
// numbers depend only on the generator's state, never on the thread count.
template <class Draw>
void fill_random_into(const Tensor& t, Draw&& draw) {
    visit_dtype(t.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* out = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(draw());
    });
}
template <class Draw>
Tensor fill_random(const Shape& shape, DType dtype, Draw&& draw) {
    Tensor t = Tensor::empty(shape, dtype);
    fill_random_into(t, draw);
    return t;
}
}  // namespace

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
    return fill_random(shape, dtype, [&] { return gen.uniform(); });
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
    return fill_random(shape, dtype, [&] { return gen.normal(); });
}

namespace {
// One number of U(low, high) per call, for uniform and uniform_ alike.
auto uniform_draw(double low, double high, Generator& gen) {
    return [low, high, &gen] { return low + (high - low) * gen.uniform(); };
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
    if (!(low <= high)) fail<ValueError>("uniform: low {} must not exceed high {}", low, high);
    return fill_random(shape, dtype, uniform_draw(low, high, gen));
}

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
    if (!(low <= high)) fail<ValueError>("uniform_: low {} must not exceed high {}", low, high);
    const auto draw = uniform_draw(low, high, gen);
    if (t.is_contiguous())
        fill_random_into(t, draw);  // no temporary: initialising a model allocates only its parameters
    else
        copy_(t, fill_random(t.shape(), t.dtype(), draw));
}

Tensor bernoulli(const Shape& shape, double p, Generator& gen, DType dtype) {
    if (!(p >= 0.0 && p <= 1.0)) fail<ValueError>("bernoulli: probability {} not in [0, 1]", p);
    return fill_random(shape, dtype, [&] { return gen.uniform() < p ? 1.0 : 0.0; });
}

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype) {
    if (!(p >= 0.0 && p < 1.0)) fail<ValueError>("dropout_mask: probability {} not in [0, 1)", p);
    if (dtype != DType::float32 && dtype != DType::float64)
        fail<ValueError>("dropout_mask: dtype must be float32 or float64, got {}", dtype_name(dtype));
    const double keep = 1.0 - p;
    Tensor t = Tensor::empty(shape, dtype);
    visit_dtype(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_floating_point_v<T>) {
            const T scale = static_cast<T>(1.0 / keep);
            T* out = t.data<T>();
            const int64_t n = t.numel();
            // Four masks per draw: the 16-bit quarters u of next_u64(), lowest
            // first, each keep its element when u < ⌈keep · 2^16⌉, i.e. with
            // probability ⌈keep · 2^16⌉ / 2^16, within 2^-16 of keep (p = 0
            // keeps all). One draw per element would cost 11% of a d2l training step.
            const auto threshold = static_cast<uint32_t>(std::ceil(std::ldexp(keep, 16)));  // at most 2^16
            // Draws for up to kChunk elements are made first (the generator is one
            // chain of dependent steps), their quarters laid out in element order,
            // then one loop the compiler vectorises turns them into masks: each is
            // the bits of scale ANDed with all ones (keep) or all zeros (drop), no
            // branch, which a drop (p of the time) would mispredict.
            using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
            const Bits scale_bits = std::bit_cast<Bits>(scale);
            constexpr int64_t kChunk = 256;
            std::array<uint16_t, kChunk> quarter;  // quarter[4k + j] = bits j of draw k, lowest first
            for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
                const int64_t len = std::min(kChunk, n - i0);
                for (int64_t k = 0; 4 * k < len;
                     ++k) {  // the last 1 to 3 elements take the lowest quarters of one more draw
                    const uint64_t bits = gen.next_u64();
                    for (int64_t j = 0; j < 4; ++j)
                        quarter[static_cast<size_t>(4 * k + j)] = static_cast<uint16_t>(bits >> (16 * j));
                }
                T* o = out + i0;
                for (int64_t i = 0; i < len; ++i) {
                    const Bits all =
                        Bits(0) - static_cast<Bits>(uint32_t{quarter[static_cast<size_t>(i)]} < threshold);  // ~0 or 0
                    o[i] = std::bit_cast<T>(static_cast<Bits>(scale_bits & all));
                }
            }
        }
    });
    return t;
}

Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen) {
    if (low >= high) fail<ValueError>("randint: empty range [{}, {})", low, high);
    return fill_random(shape, DType::int64, [&] { return static_cast<double>(low + gen.randint(high - low)); });
}

}  // namespace tformer::core
