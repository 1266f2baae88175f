// Indexing and joining kernels. Every kernel accepts inputs of any layout
// (transposed, sliced, broadcast) and writes a fresh row-major output.
//
// All index tensors are int64. Indices are validated in one serial pass
// before any kernel runs, so a bad index throws a clear error and no worker
// thread ever reads outside a tensor (an exception must not leave an OpenMP
// parallel region).
#include "core/index.hpp"

#include "core/parallel.hpp"
#include "core/strided.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace tformer::core {

// ---- checks shared by the family -----------------------------------------------------

namespace {

void check_defined(const Tensor& t, const char* op, const char* name) {
    if (!t.defined()) fail<ValueError>("{}: {} is undefined", op, name);
}

// Index tensors must be int64 (token ids are never stored as floats, so a
// float index is almost always a mix-up worth reporting).
void check_index_dtype(const Tensor& index, const char* op, const char* name) {
    check_defined(index, op, name);
    if (index.dtype() != DType::int64)
        fail<ValueError>("{}: {} must be int64, got {}", op, name, dtype_name(index.dtype()));
}

// Calls f(value) for every element of an int64 tensor of any layout, in
// row-major order, on the calling thread.
template <class F>
void for_each_index(const Tensor& index, F&& f) {
    if (index.numel() == 0) return;
    StridedLoop<1> loop(index.shape(), {index.strides()});
    const int64_t* base = index.data<int64_t>();
    const int64_t stride = loop.inner_stride(0);
    loop.for_runs(0, loop.num_runs(), {0}, [&](int64_t len, const std::array<int64_t, 1>& off) {
        for (int64_t k = 0; k < len; ++k) f(base[off[0] + k * stride]);
    });
}

// Every index must lie in [0, size): "gather: index 7 out of range for dimension 1 of size 5".
void check_index_range(const Tensor& index, int64_t size, int dim, const char* op) {
    for_each_index(index, [&](int64_t i) {
        if (i < 0 || i >= size)
            fail<IndexError>("{}: index {} out of range for dimension {} of size {}", op, i, dim, size);
    });
}

// Token ids must lie in [0, V): "embedding: token id 57 out of range for vocabulary of 40".
void check_token_ids(const Tensor& ids, int64_t vocab, const char* op) {
    for_each_index(ids, [&](int64_t i) {
        if (i < 0 || i >= vocab) fail<IndexError>("{}: token id {} out of range for vocabulary of {}", op, i, vocab);
    });
}

// ---- the lookup kernel shared by index_select and embedding ---------------------------

// out = x with dimension d replaced by the n positions idx[0..n) (already checked).
// Every slice x.select(d, i) has the same layout, and so has every
// out.select(d, k); one StridedLoop describes them all, and slice k is that
// loop started at offset idx[k] * x.stride(d). When a slice is contiguous (the
// rows of an embedding table) each copy is a single memcpy.
Tensor lookup(const Tensor& x, int d, const int64_t* idx, int64_t n) {
    Shape out_shape = x.shape();
    out_shape[d] = n;
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;

    Shape slice_shape = x.shape();
    Strides x_strides = x.strides(), out_strides = out.strides();
    slice_shape.erase(d);
    x_strides.erase(d);
    out_strides.erase(d);
    const StridedLoop<2> loop(slice_shape, {out_strides, x_strides});
    const int64_t x_step = x.strides()[d], out_step = out.strides()[d];
    const int64_t slice_numel = shape_numel(slice_shape);

    visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* dst = out.data<T>();
        const T* src = x.data<T>();
        const int64_t so = loop.inner_stride(0), si = loop.inner_stride(1);
        const bool unit = so == 1 && si == 1;
        // slices are disjoint in out, so the n copies may run on any threads
        parallel_for(0, n, slice_numel, [&](int64_t first, int64_t last) {
            for (int64_t k = first; k < last; ++k) {
                loop.for_runs(0, loop.num_runs(), {k * out_step, idx[k] * x_step},
                              [&](int64_t len, const std::array<int64_t, 2>& off) {
                                  if (unit) {
                                      std::memcpy(dst + off[0], src + off[1], static_cast<size_t>(len) * sizeof(T));
                                  } else {
                                      for (int64_t j = 0; j < len; ++j) dst[off[0] + j * so] = src[off[1] + j * si];
                                  }
                              });
            }
        });
    });
    return out;
}

}  // namespace

// ---- index_select ---------------------------------------------------------------------

// out[..., k, ...] = x[..., index[k], ...]   (k runs along dim)
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
    check_defined(x, "index_select", "x");
    check_index_dtype(index, "index_select", "index");
    const int d = normalize_dim(dim, x.dim(), "index_select");
    if (index.dim() != 1) fail<ShapeError>("index_select: index must be 1-D, got shape {}", shape_str(index.shape()));
    check_index_range(index, x.shape()[d], d, "index_select");
    const Tensor idx = index.contiguous();
    return lookup(x, d, idx.data<int64_t>(), idx.numel());
}

// ---- embedding ------------------------------------------------------------------------

// out[*i, :] = weight[ids[*i], :]        weight (V, D), ids (*), out (*, D)
Tensor embedding(const Tensor& weight, const Tensor& ids) {
    check_defined(weight, "embedding", "weight");
    check_index_dtype(ids, "embedding", "ids");
    if (weight.dim() != 2)
        fail<ShapeError>("embedding: weight must be 2-D (V, D), got shape {}", shape_str(weight.shape()));
    const int64_t V = weight.shape()[0], D = weight.shape()[1];
    check_token_ids(ids, V, "embedding");
    const Tensor flat = ids.contiguous();                                 // (N) with N = ids.numel()
    Tensor rows = lookup(weight, 0, flat.data<int64_t>(), flat.numel());  // (N, D)
    Shape out_shape = ids.shape();
    out_shape.push_back(D);
    return rows.view(out_shape);  // (*, D)
}

// out[b, t, :] = (weight[ids[b, t], :] · scale + pos[t, :]) ⊙ keep[b, t, :]
Tensor embedding_positional(const Tensor& weight, const Tensor& ids, double scale, const Tensor& pos,
                            const Tensor& keep) {
    const char* op = "embedding_positional";
    check_defined(weight, op, "weight");
    check_defined(pos, op, "pos");
    check_index_dtype(ids, op, "ids");
    if (weight.dim() != 2 || ids.dim() != 2)
        fail<ShapeError>("{}: weight {} and ids {} must be (V, D) and (B, T)", op, shape_str(weight.shape()),
                         shape_str(ids.shape()));
    const int64_t V = weight.size(0), D = weight.size(1), B = ids.size(0), T = ids.size(1);
    if (!(pos.shape() == Shape{T, D}) || pos.dtype() != weight.dtype() || !is_floating(weight.dtype()))
        fail<ShapeError>("{}: pos {} must be (T, D) = ({}, {}) of weight's floating dtype", op, shape_str(pos.shape()),
                         T, D);
    if (keep.defined() && (!(keep.shape() == Shape{B, T, D}) || keep.dtype() != weight.dtype()))
        fail<ShapeError>("{}: dropout mask {} must be (B, T, D) = ({}, {}, {}) of weight's dtype", op,
                         shape_str(keep.shape()), B, T, D);
    check_token_ids(ids, V, op);
    const Tensor id_t = ids.contiguous(), w_t = weight.contiguous(), p_t = pos.contiguous();
    const Tensor k_t = keep.defined() ? keep.contiguous() : Tensor();
    Tensor out = Tensor::empty({B, T, D}, weight.dtype());  // (B, T, D)
    visit_floating(weight.dtype(), op, [&](auto tag) {
        using Ty = typename decltype(tag)::type;
        const int64_t* id = id_t.data<int64_t>();
        const Ty *w = w_t.data<Ty>(), *p = p_t.data<Ty>(), *k = k_t.defined() ? k_t.data<Ty>() : nullptr;
        Ty* o = out.data<Ty>();
        const Ty s = static_cast<Ty>(scale);  // as mul(x, scale) rounds it
        parallel_for(0, B * T, D, [&](int64_t first, int64_t last) {
            for (int64_t n = first; n < last; ++n) {
                const Ty* wr = w + id[n] * D;
                const Ty* pr = p + (n % T) * D;
                Ty* orow = o + n * D;
                if (k) {
                    const Ty* kr = k + n * D;
                    for (int64_t c = 0; c < D; ++c) orow[c] = (wr[c] * s + pr[c]) * kr[c];
                } else {
                    for (int64_t c = 0; c < D; ++c) orow[c] = wr[c] * s + pr[c];
                }
            }
        });
    });
    return out;
}

// dweight[v, :] = sum over positions i with ids[i] == v of grad[i, :]; dweight[padding_idx, :] = 0
//
// Several positions may hold the same token, so a row of dweight may receive
// several contributions: the loop adds grad rows one after another, in
// position order. It is serial on purpose. It is race-free and gives the same
// bits on every run, and it is cheap: for 2048 positions of D = 512 the adds
// take about 0.8 ms on one core, while clearing the (20000, 512) output takes
// about 17 ms; splitting the D columns over two threads made it slower on
// our two-core machine (parallel start-up costs more than the adds).
Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t num_embeddings, int64_t padding_idx) {
    check_defined(grad, "embedding_backward", "grad");
    check_index_dtype(ids, "embedding_backward", "ids");
    if (num_embeddings < 0)
        fail<ValueError>("embedding_backward: num_embeddings must be non-negative, got {}", num_embeddings);
    if (padding_idx != -1 && (padding_idx < 0 || padding_idx >= num_embeddings))
        fail<IndexError>("embedding_backward: padding_idx {} out of range for vocabulary of {} (use -1 for none)",
                         padding_idx, num_embeddings);
    // grad must be (*ids.shape, D)
    Shape expected = ids.shape();
    const bool rank_ok = grad.dim() == ids.dim() + 1;
    if (rank_ok) expected.push_back(grad.shape().back());
    if (!rank_ok || !(grad.shape() == expected))
        fail<ShapeError>("embedding_backward: grad shape {} does not match ids shape {} plus an embedding dimension",
                         shape_str(grad.shape()), shape_str(ids.shape()));
    check_token_ids(ids, num_embeddings, "embedding_backward");

    const int64_t N = ids.numel(), D = grad.shape().back();
    const Tensor flat = ids.contiguous();                   // (N)
    const Tensor g = grad.reshape({N, D});                  // (N, D), a view whenever the layout allows
    Tensor out = zeros({num_embeddings, D}, grad.dtype());  // (V, D)
    const int64_t* id = flat.data<int64_t>();
    const int64_t g_row = g.strides()[0], g_col = g.strides()[1];

    visit_floating(grad.dtype(), "embedding_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* dw = out.data<T>();
        const T* gp = g.data<T>();
        for (int64_t i = 0; i < N; ++i) {
            if (id[i] == padding_idx) continue;  // the padding row gets no gradient
            T* dst = dw + id[i] * D;             // dweight[ids[i], :]
            const T* src = gp + i * g_row;       // grad[i, :]
            if (g_col == 1) {
                for (int64_t c = 0; c < D; ++c) dst[c] += src[c];
            } else {
                for (int64_t c = 0; c < D; ++c) dst[c] += src[c * g_col];
            }
        }
    });
    return out;
}

// ---- gather and scatter_add -----------------------------------------------------------

namespace {

// Shape rules shared by gather and scatter_add (as in PyTorch): index has
// x's number of dimensions and is no larger than x except along dim.
void check_index_fits(const Tensor& x, int d, const Tensor& index, const char* op) {
    if (index.dim() != x.dim())
        fail<ShapeError>("{}: index shape {} must have as many dimensions as x shape {}", op, shape_str(index.shape()),
                         shape_str(x.shape()));
    for (int k = 0; k < x.dim(); ++k)
        if (k != d && index.shape()[k] > x.shape()[k])
            fail<ShapeError>("{}: index shape {} is larger than x shape {} at dimension {}", op,
                             shape_str(index.shape()), shape_str(x.shape()), k);
}

}  // namespace

// out[i][j][k] = x[index[i][j][k]][j][k]   (dim 0; likewise for other dims)
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
    check_defined(x, "gather", "x");
    check_index_dtype(index, "gather", "index");
    const int d = normalize_dim(dim, x.dim(), "gather");
    check_index_fits(x, d, index, "gather");
    check_index_range(index, x.shape()[d], d, "gather");

    Tensor out = Tensor::empty(index.shape(), x.dtype());
    if (out.numel() == 0) return out;
    // Walk index's shape with three operands. x's stride along d is set to 0:
    // its position along d comes from the index value, added per element.
    Strides x_strides = x.strides();
    x_strides[d] = 0;
    const StridedLoop<3> loop(index.shape(), {out.strides(), index.strides(), x_strides});
    const int64_t x_step = x.strides()[d];
    const int64_t* id = index.data<int64_t>();
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* dst = out.data<T>();
        const T* src = x.data<T>();
        const int64_t so = loop.inner_stride(0), sid = loop.inner_stride(1), sx = loop.inner_stride(2);
        loop.for_all_runs({0, 0, 0}, [&](int64_t len, const std::array<int64_t, 3>& off) {
            for (int64_t j = 0; j < len; ++j)
                dst[off[0] + j * so] = src[off[2] + j * sx + id[off[1] + j * sid] * x_step];
        });
    });
    return out;
}

// out = x;  out[index[i][j][k]][j][k] += src[i][j][k]   (dim 0; likewise for other dims)
//
// This is the adjoint of gather: <gather(x, d, index), y> == <x, scatter_add(0, d, index, y)>.
// Several positions may add into the same element, so the loop is serial:
// the sums are race-free and come out in the same order every run.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    check_defined(x, "scatter_add", "x");
    check_defined(src, "scatter_add", "src");
    check_index_dtype(index, "scatter_add", "index");
    if (x.dtype() == DType::boolean) fail<ValueError>("scatter_add: cannot add bool tensors");
    if (src.dtype() != x.dtype())
        fail<ValueError>("scatter_add: src has dtype {} but x has {}", dtype_name(src.dtype()), dtype_name(x.dtype()));
    const int d = normalize_dim(dim, x.dim(), "scatter_add");
    check_index_fits(x, d, index, "scatter_add");
    if (src.dim() != index.dim())
        fail<ShapeError>("scatter_add: src shape {} must have as many dimensions as index shape {}",
                         shape_str(src.shape()), shape_str(index.shape()));
    for (int k = 0; k < index.dim(); ++k)
        if (index.shape()[k] > src.shape()[k])
            fail<ShapeError>("scatter_add: index shape {} is larger than src shape {} at dimension {}",
                             shape_str(index.shape()), shape_str(src.shape()), k);
    check_index_range(index, x.shape()[d], d, "scatter_add");

    Tensor out = x.clone();
    if (index.numel() == 0) return out;
    // as in gather, out's position along d comes from the index value
    Strides out_strides = out.strides();
    out_strides[d] = 0;
    const StridedLoop<3> loop(index.shape(), {out_strides, index.strides(), src.strides()});
    const int64_t out_step = out.strides()[d];
    const int64_t* id = index.data<int64_t>();
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            T* dst = out.data<T>();
            const T* s = src.data<T>();
            const int64_t so = loop.inner_stride(0), sid = loop.inner_stride(1), ss = loop.inner_stride(2);
            loop.for_runs(0, loop.num_runs(), {0, 0, 0}, [&](int64_t len, const std::array<int64_t, 3>& off) {
                for (int64_t j = 0; j < len; ++j)
                    dst[off[0] + j * so + id[off[1] + j * sid] * out_step] += s[off[2] + j * ss];
            });
        }
    });
    return out;
}

// ---- concat, stack, split -------------------------------------------------------------

namespace {

// "[2, 3, 1]" (a split list may be longer than a Dims can hold)
std::string sizes_str(const std::vector<int64_t>& sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

// Same dtype and same number of dimensions as tensors[0], all defined.
void check_join_inputs(const std::vector<Tensor>& tensors, const char* op) {
    if (tensors.empty()) fail<ValueError>("{}: expected a non-empty list of tensors", op);
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].defined()) fail<ValueError>("{}: tensor {} is undefined", op, i);
        if (tensors[i].dtype() != tensors[0].dtype())
            fail<ValueError>("{}: tensor {} has dtype {} but tensor 0 has {}", op, i, dtype_name(tensors[i].dtype()),
                             dtype_name(tensors[0].dtype()));
    }
}

}  // namespace

// out = [t0 | t1 | ...] along dim; every other size must agree.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
    check_join_inputs(tensors, "concat");
    const Tensor& first = tensors[0];
    const int d = normalize_dim(dim, first.dim(), "concat");
    Shape out_shape = first.shape();
    out_shape[d] = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const Shape& s = tensors[i].shape();
        bool match = s.size() == first.dim();
        for (int k = 0; match && k < first.dim(); ++k)
            if (k != d && s[k] != first.shape()[k]) match = false;
        if (!match)
            fail<ShapeError>(
                "concat: tensor {} has shape {} but tensor 0 has {}; sizes must match except in dimension {}", i,
                shape_str(s), shape_str(first.shape()), d);
        out_shape[d] += s[d];
    }
    Tensor out = Tensor::empty(out_shape, first.dtype());
    // each input fills its own slab of out; copy_ handles any input layout
    int64_t start = 0;
    for (const Tensor& t : tensors) {
        copy_(out.slice(d, start, start + t.shape()[d]), t);
        start += t.shape()[d];
    }
    return out;
}

// out[..., i, ...] = tensors[i]   (i runs along the new dimension dim)
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
    check_join_inputs(tensors, "stack");
    const Tensor& first = tensors[0];
    const int d = normalize_dim(dim, first.dim() + 1, "stack");  // the new dim may also go last
    for (size_t i = 1; i < tensors.size(); ++i)
        if (!(tensors[i].shape() == first.shape()))
            fail<ShapeError>("stack: tensor {} has shape {} but tensor 0 has {}; all shapes must be equal", i,
                             shape_str(tensors[i].shape()), shape_str(first.shape()));
    Shape out_shape = first.shape();
    out_shape.insert(d, static_cast<int64_t>(tensors.size()));
    Tensor out = Tensor::empty(out_shape, first.dtype());
    for (size_t i = 0; i < tensors.size(); ++i) copy_(out.select(d, static_cast<int64_t>(i)), tensors[i]);
    return out;
}

// pieces = x[0:s], x[s:2s], ... along dim (views; the last may be shorter)
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
    check_defined(x, "split", "x");
    const int d = normalize_dim(dim, x.dim(), "split");
    if (split_size <= 0) fail<ValueError>("split: split_size must be positive, got {}", split_size);
    const int64_t n = x.shape()[d];
    if (n == 0) return {x};  // one empty piece, as in PyTorch
    std::vector<Tensor> pieces;
    for (int64_t start = 0; start < n;) {
        const int64_t len = std::min(split_size, n - start);  // the last piece may be shorter
        pieces.push_back(x.slice(d, start, start + len));
        start += len;
    }
    return pieces;
}

// pieces = x[0:s0], x[s0:s0+s1], ... along dim (views); the sizes must add up to x.size(dim)
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
    check_defined(x, "split", "x");
    const int d = normalize_dim(dim, x.dim(), "split");
    int64_t total = 0;
    for (int64_t s : sizes) {
        if (s < 0) fail<ValueError>("split: sizes {} contain the negative size {}", sizes_str(sizes), s);
        total += s;
    }
    if (total != x.shape()[d])
        fail<ShapeError>("split: sizes {} add up to {} but dimension {} of {} has size {}", sizes_str(sizes), total, d,
                         shape_str(x.shape()), x.shape()[d]);
    std::vector<Tensor> pieces;
    int64_t start = 0;
    for (int64_t s : sizes) {
        pieces.push_back(x.slice(d, start, start + s));
        start += s;
    }
    return pieces;
}

}  // namespace tformer::core
