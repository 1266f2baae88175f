/// \file
/// core::Tensor: a strided view of a shared storage buffer.
///
/// A tensor is (storage, shape, strides, offset, dtype). Element
/// (i0, i1, ..., ik) lives at storage[offset + i0*strides[0] + ... + ik*strides[k]]
/// (strides in elements, not bytes). Views such as transpose, slice or
/// expand make a new (shape, strides, offset) over the same storage and copy
/// nothing; contiguous() copies only when the layout is not row-major.
///
/// Tensors are cheap handles: copying a Tensor shares its storage, as in
// PyTorch. Use clone() for a deep copy.
#pragma once

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/shape.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace tformer::core {

/// A reference-counted, 64-byte aligned buffer.
class Storage {
public:
    /// A buffer of `nbytes` bytes, uninitialised; counted by storage_bytes().
    explicit Storage(int64_t nbytes);
    /// Frees the buffer.
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    /// The first byte.
    void* data() const { return data_; }
    /// The buffer's size in bytes.
    int64_t nbytes() const { return nbytes_; }

private:
    void* data_ = nullptr;
    int64_t nbytes_ = 0;
};

/// Bytes held by every Storage alive right now (what the tensors hold, not
/// the allocator's slack), like torch.cuda.memory_allocated().
int64_t storage_bytes();
/// The most storage_bytes() has been since the last reset_storage_peak(),
/// like torch.cuda.max_memory_allocated(): tests and the bench use it to see
/// what a training step keeps alive at its peak.
int64_t storage_peak_bytes();
/// Starts a new peak from what is alive now.
void reset_storage_peak();

/// An n-dimensional array: a cheap handle to a strided view of a shared Storage.
/// Copying a Tensor shares the data (as in PyTorch); clone() copies it. Element
/// (i0, ..., ik) is at storage[offset + i0·strides[0] + ... + ik·strides[k]].
class Tensor {
public:
    /// An undefined tensor (defined() is false), like a null handle.
    Tensor() = default;

    /// A view of `storage`; throws IndexError if it would reach outside it.
    Tensor(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides, int64_t offset, DType dtype);

    /// Uninitialised row-major tensor.
    static Tensor empty(const Shape& shape, DType dtype = DType::float32);

    // ---- metadata ---------------------------------------------------------
    /// False for the undefined tensor of Tensor() (an absent bias, no mask).
    bool defined() const { return storage_ != nullptr; }
    /// The element type.
    DType dtype() const { return dtype_; }
    /// The sizes, outermost dimension first.
    const Shape& shape() const { return shape_; }
    /// The strides in elements, one per dimension.
    const Strides& strides() const { return strides_; }
    /// Where element (0, ..., 0) is in the storage, in elements.
    int64_t offset() const { return offset_; }
    /// Number of dimensions (0 for a scalar).
    int dim() const { return shape_.size(); }
    /// Number of elements (the product of the sizes).
    int64_t numel() const { return numel_; }
    /// Size of dimension `d` (negative counts from the end).
    int64_t size(int64_t d) const;
    /// Row-major with no gaps (size-1 dimensions may have any stride).
    bool is_contiguous() const;
    /// The shared buffer this tensor views.
    const std::shared_ptr<Storage>& storage() const { return storage_; }
    /// True when both tensors view the same storage buffer.
    bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

    // ---- raw data -----------------------------------------------------------
    /// Pointer to the first element (storage + offset). Throws ValueError if T
    /// does not match dtype(). Use with strides(), or after contiguous().
    template <class T>
    T* data() const {
        check_dtype(dtype_v<T>, "data");
        return static_cast<T*>(storage_->data()) + offset_;
    }
    /// Pointer to the first element, untyped (storage + offset · element size).
    void* raw_data() const;

    // ---- element access (tests, printing, small loops; not for kernels) ----
    /// The single value of a one-element tensor, as double.
    double item() const;
    /// The element at a full index, as double; throws IndexError when out of range.
    double at(const Dims& index) const;
    /// Writes one element (into the shared storage, so views see it).
    void set(const Dims& index, double value);
    /// All elements in row-major order, converted to T.
    template <class T = double>
    std::vector<T> to_vector() const;

    // ---- views (share storage) ---------------------------------------------
    /// Same data, new shape; one size may be -1. Throws ShapeError when the
    /// strides cannot express it without a copy.
    Tensor view(const Shape& shape) const;
    /// view() when possible, otherwise a contiguous copy.
    Tensor reshape(const Shape& shape) const;
    /// Reorders dimensions: result dim i is input dim dims[i].
    Tensor permute(const Dims& dims) const;
    /// Swaps two dimensions.
    Tensor transpose(int64_t dim0, int64_t dim1) const;
    /// Elements start, start+step, ... < end of dimension `dim` (negative
    /// start/end count from the end and are clamped like Python slices).
    Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
    /// Index `index` of dimension `dim`, which is removed.
    Tensor select(int64_t dim, int64_t index) const;
    /// Broadcasts size-1 dimensions (stride 0) and prepends new ones; -1 keeps a size.
    Tensor expand(const Shape& shape) const;
    /// Removes dimension `dim`, which must have size 1.
    Tensor squeeze(int64_t dim) const;
    /// Removes every size-1 dimension.
    Tensor squeeze() const;
    /// Inserts a size-1 dimension at `dim` (in [-dim()-1, dim()]).
    Tensor unsqueeze(int64_t dim) const;
    /// Collapses dimensions start..end into one.
    Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

    // ---- copies -------------------------------------------------------------
    /// This tensor if already contiguous, otherwise a row-major copy.
    Tensor contiguous() const;
    /// A row-major deep copy.
    Tensor clone() const;
    /// Converted to `dtype` (a copy; this tensor if the dtype already matches).
    Tensor to(DType dtype) const;

    /// Throws ValueError "op: expected dtype X, got Y" when dtype() != expected.
    void check_dtype(DType expected, const char* op) const;

private:
    std::shared_ptr<Storage> storage_;
    Shape shape_;
    Strides strides_;
    int64_t offset_ = 0;
    int64_t numel_ = 0;
    DType dtype_ = DType::float32;
};

// ---- factories ---------------------------------------------------------------
/// A tensor of zeros.
Tensor zeros(const Shape& shape, DType dtype = DType::float32);
/// A tensor of ones.
Tensor ones(const Shape& shape, DType dtype = DType::float32);
/// A tensor with every element equal to `value`.
Tensor full(const Shape& shape, double value, DType dtype = DType::float32);
/// 0-d tensor holding `value`.
Tensor scalar(double value, DType dtype = DType::float32);
/// 0, 1, ..., n-1.
Tensor arange(int64_t n, DType dtype = DType::float32);
/// start, start+step, ... < end (floating steps allowed).
Tensor arange(double start, double end, double step, DType dtype = DType::float32);
/// n x n identity.
Tensor eye(int64_t n, DType dtype = DType::float32);
/// A tensor holding `values` (copied) with `shape`; sizes must match.
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
/// The same for double values (float64).
Tensor from_vector(const std::vector<double>& values, const Shape& shape);
/// The same for int64 values (token ids, lengths).
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
/// The same for bool values (masks).
Tensor from_vector(const std::vector<bool>& values, const Shape& shape);
/// `values` converted to `dtype`, e.g. tensor({1, 2, 3, 4}, {2, 2}, DType::float64).
Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype = DType::float32);

/// Uniform in [0, 1).
Tensor rand(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::float32);
/// Standard normal.
Tensor randn(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::float32);
/// Uniform in [low, high).
Tensor uniform(const Shape& shape, double low, double high, Generator& gen = default_generator(),
               DType dtype = DType::float32);
/// Fills `t` in place with the numbers uniform(t.shape(), low, high, gen,
/// t.dtype()) would hold (the same draws, in row-major order).
void uniform_(const Tensor& t, double low, double high, Generator& gen = default_generator());
/// 1 with probability p, else 0 (in `dtype`; bool gives a mask).
Tensor bernoulli(const Shape& shape, double p, Generator& gen = default_generator(), DType dtype = DType::float32);
/// Inverted dropout's mask: 1/(1 - p) with probability 1 - p, else 0. Four
/// elements per 64-bit draw: element i keeps when the 16-bit quarter i % 4
/// (lowest first) of draw i / 4 is below ⌈(1 - p) · 2^16⌉, so the keep
/// probability is 1 - p to within 2^-16.
Tensor dropout_mask(const Shape& shape, double p, Generator& gen = default_generator(), DType dtype = DType::float32);
/// Uniform integers in [low, high) as int64.
Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen = default_generator());

// ---- copying into existing storage ------------------------------------------------
/// dst[...] = src[...] broadcast to dst's shape, converting dtype; dst may be a view.
void copy_(const Tensor& dst, const Tensor& src);
/// Every element of dst (a view allowed) set to value.
void fill_(const Tensor& dst, double value);

}  // namespace tformer::core
