// Elementwise kernels: out[i] = f(a[i], b[i], ...) over a broadcast shape.
//
// Every op in this file is a small functor with its formula in the comment
// above it, handed to one of the drivers:
//   map_elements  any number of operands (unary ops, where)
//   map_binary    two inputs, with extra fast paths for a single value on
//                 either side (binary ops, comparisons, masked_fill, add_),
//                 and a plain number as the second input (scalar variants, mul_)
// A driver decides once per call how the innermost loop reads each operand:
//   Dense    p[i]       laid out like the output (stride 1)
//   Splat    v          one value repeated (stride 0): a scalar, a bias
//                       broadcast along the last dimension
//   Strided  p[i * s]   anything else (a transposed or sliced view)
// so the common cases compile to plain vector loops, and the fixed cost of a
// tiny op is the output allocation plus a few comparisons: no extra heap
// allocation, no virtual call, no per-element dispatch.
#include "core/elementwise.hpp"

#include "core/parallel.hpp"
#include "core/strided.hpp"

#include <array>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tformer::core {

namespace {

// ---- reading operands along a run ------------------------------------------------------
// `at(base, off, s)` makes the accessor for a run whose first element is
// base[off] and whose next ones are s apart.

template <class T>
struct Dense {
    using Pointer = T*;
    T* p;
    static Dense at(T* base, int64_t off, int64_t) { return {base + off}; }
    T& operator[](int64_t i) const { return p[i]; }
};

template <class T>
struct Splat {
    using Pointer = T*;
    std::remove_const_t<T> v;  // loaded once, kept in a register
    static Splat at(T* base, int64_t off, int64_t) { return {base[off]}; }
    std::remove_const_t<T> operator[](int64_t) const { return v; }
};

template <class T>
struct Strided {
    using Pointer = T*;
    T* p;
    int64_t s;
    static Strided at(T* base, int64_t off, int64_t s) { return {base + off, s}; }
    T& operator[](int64_t i) const { return p[i * s]; }
};

// out[i] = f(in[i]...) for i in [begin, end): the one loop every kernel ends in.
template <class F, class Out, class... In>
void run(int64_t begin, int64_t end, const F& f, Out out, In... in) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]...);
}

// ---- walking the runs -------------------------------------------------------------------
// The threading glue (parallel_for and its OpenMP region) is compiled once
// per number of operands; only the loops over runs and elements are compiled
// per op, dtype and layout. The two meet through RunFn, function pointers
// plus a context, called once per thread chunk (never per run or element),
// much as PyTorch's TensorIterator hands its kernels a 2-d loop. With the
// glue inlined into every kernel instead, this file compiled 2.5 times slower
// into 3 MB of code, and ran no faster.

/// The two entry points of one kernel.
template <size_t N>
struct RunFn {
    /// Elements [begin, end) of the single run whose operands start at their bases.
    void (*elements)(const void* ctx, int64_t begin, int64_t end);
    /// Runs [first, last) of the kernel's StridedLoop.
    void (*runs)(const void* ctx, int64_t first, int64_t last);
    const void* ctx;
};

// n elements of operands laid out like the output: one run, split across threads when long.
template <size_t N>
void walk_flat(int64_t n, RunFn<N> fn) {
    parallel_for(0, n, 1, [&](int64_t begin, int64_t end) { fn.elements(fn.ctx, begin, end); });
}

// Every run of `loop`: runs are split across threads when there are many
// elements, and a single long run (a strided 1-d view) is split by elements.
template <size_t N>
void walk_strided(const StridedLoop<N>& loop, RunFn<N> fn) {
    if (loop.num_runs() == 1) {
        walk_flat(loop.run_length(), fn);
        return;
    }
    parallel_for(0, loop.num_runs(), loop.run_length(),
                 [&](int64_t first, int64_t last) { fn.runs(fn.ctx, first, last); });
}

// One kernel: functor f over operands read through accessors Acc (output
// first) from their base pointers, `stride` apart along a run.
template <class F, class... Acc>
struct Kernel {
    static constexpr size_t N = sizeof...(Acc);
    const F& f;
    std::tuple<typename Acc::Pointer...> base;
    const StridedLoop<N>* loop = nullptr;  // only for walk_strided
    std::array<int64_t, N> stride{};       // inner strides (Dense and Splat ignore them)

    RunFn<N> run_fn() const { return {&elements, &runs, this}; }

    // elements [begin, end) of the run whose operand k starts at base_k + off[k]
    void part(int64_t begin, int64_t end, const std::array<int64_t, N>& off) const {
        [&]<size_t... k>(std::index_sequence<k...>) {
            run(begin, end, f, Acc::at(std::get<k>(base), off[k], stride[k])...);
        }
        (std::make_index_sequence<N>{});
    }
    static void elements(const void* ctx, int64_t begin, int64_t end) {
        static_cast<const Kernel*>(ctx)->part(begin, end, {});
    }
    static void runs(const void* ctx, int64_t first, int64_t last) {
        const Kernel& k = *static_cast<const Kernel*>(ctx);
        k.loop->for_runs(first, last, {}, [&](int64_t len, const std::array<int64_t, N>& off) { k.part(0, len, off); });
    }
};

// Whole tensors of n elements read through accessors Acc (output first).
template <class... Acc, class F, class... P>
void flat(int64_t n, const F& f, P*... base) {
    const Kernel<F, Acc...> kernel{f, {base...}};
    walk_flat(n, kernel.run_fn());
}

// Every run of `loop` (operand 0 is the output) read through accessors Acc.
template <class... Acc, size_t N, class F, class... P>
void walk(const StridedLoop<N>& loop, const F& f, P*... base) {
    Kernel<F, Acc...> kernel{f, {base...}, &loop};
    for (size_t k = 0; k < N; ++k) kernel.stride[k] = loop.inner_stride(k);
    walk_strided(loop, kernel.run_fn());
}

template <size_t N>
bool unit_inner_strides(const StridedLoop<N>& loop) {
    for (size_t k = 0; k < N; ++k)
        if (loop.inner_stride(k) != 1) return false;
    return true;
}

// ---- operands --------------------------------------------------------------------------

/// One operand of a kernel as seen from an output of n elements.
template <class T>
struct Operand {
    T* data;               // the element at index (0, ..., 0)
    const Tensor* tensor;  // where the strides come from
    bool dense;            // same element order as the output: element i is data[i]
    bool single;           // one element, used everywhere

    /// The strides this operand would have after expand(shape): 0 along
    /// broadcast dimensions. Only the general path needs them, so the fast
    /// paths never pay for working them out.
    Strides strides(const Shape& shape) const {
        Strides st = Dims::filled(shape.size(), 0);
        const int lead = shape.size() - tensor->dim();
        for (int d = 0; d < tensor->dim(); ++d) st[lead + d] = tensor->shape()[d] == 1 ? 0 : tensor->strides()[d];
        return st;
    }
};

// Tensor t, whose dtype the caller has checked, read for an output of n elements.
template <class T>
Operand<T> operand(const Tensor& t, int64_t n) {
    T* data = static_cast<T*>(t.storage()->data()) + t.offset();
    // a contiguous input with as many elements as the output can only differ
    // from it by leading or size-1 dimensions, so its elements line up
    return {data, &t, t.numel() == n && t.is_contiguous(), t.numel() == 1};
}

/// A plain number (the s of add(a, s)): always read as a Splat, so kernels
/// for it are compiled in the two layouts it can meet, not all four.
template <class T>
struct Number {
    const T& value;
};

// ---- drivers ---------------------------------------------------------------------------

// out = f(in...) for any number of inputs.
template <class F, class O, class... I>
void map_elements(const Shape& shape, int64_t n, const F& f, const Operand<O>& out, const Operand<I>&... in) {
    if (n == 0) return;
    if (out.dense && (in.dense && ...)) {
        flat<Dense<O>, Dense<I>...>(n, f, out.data, in.data...);
        return;
    }
    const StridedLoop<1 + sizeof...(I)> loop(shape, {out.strides(shape), in.strides(shape)...});
    if (unit_inner_strides(loop)) {
        walk<Dense<O>, Dense<I>...>(loop, f, out.data, in.data...);
    } else {
        walk<Strided<O>, Strided<I>...>(loop, f, out.data, in.data...);
    }
}

// out = f(a, b), also fast when one side is a single value, or is broadcast
// along the innermost dimension, e.g. (B, T, D) · (B, T, 1).
template <class F, class O, class A, class B>
void map_binary(const Shape& shape, int64_t n, const F& f, const Operand<O>& out, const Operand<A>& a,
                const Operand<B>& b) {
    if (n == 0) return;
    if (out.dense && a.dense && b.dense) {
        flat<Dense<O>, Dense<A>, Dense<B>>(n, f, out.data, a.data, b.data);
    } else if (out.dense && a.dense && b.single) {
        flat<Dense<O>, Dense<A>, Splat<B>>(n, f, out.data, a.data, b.data);
    } else if (out.dense && a.single && b.dense) {
        flat<Dense<O>, Splat<A>, Dense<B>>(n, f, out.data, a.data, b.data);
    } else {
        const StridedLoop<3> loop(shape, {out.strides(shape), a.strides(shape), b.strides(shape)});
        const int64_t so = loop.inner_stride(0), sa = loop.inner_stride(1), sb = loop.inner_stride(2);
        if (so == 1 && sa == 1 && sb == 1) {
            walk<Dense<O>, Dense<A>, Dense<B>>(loop, f, out.data, a.data, b.data);
        } else if (so == 1 && sa == 1 && sb == 0) {
            walk<Dense<O>, Dense<A>, Splat<B>>(loop, f, out.data, a.data, b.data);
        } else if (so == 1 && sa == 0 && sb == 1) {
            walk<Dense<O>, Splat<A>, Dense<B>>(loop, f, out.data, a.data, b.data);
        } else {
            walk<Strided<O>, Strided<A>, Strided<B>>(loop, f, out.data, a.data, b.data);
        }
    }
}

// out = f(a, s) for a number s (scalar variants, mul_).
template <class F, class O, class A, class S>
void map_binary(const Shape& shape, int64_t n, const F& f, const Operand<O>& out, const Operand<A>& a,
                const Number<S>& s) {
    if (n == 0) return;
    if (out.dense && a.dense) {
        flat<Dense<O>, Dense<A>, Splat<const S>>(n, f, out.data, a.data, &s.value);
        return;
    }
    const StridedLoop<3> loop(shape, {out.strides(shape), a.strides(shape), Dims::filled(shape.size(), 0)});
    if (loop.inner_stride(0) == 1 && loop.inner_stride(1) == 1) {
        walk<Dense<O>, Dense<A>, Splat<const S>>(loop, f, out.data, a.data, &s.value);
    } else {
        walk<Strided<O>, Strided<A>, Splat<const S>>(loop, f, out.data, a.data, &s.value);
    }
}

// ---- checks and allocation shared by the families ------------------------------------------

void require_defined(const char* op, const Tensor& t) {
    if (!t.defined()) fail<ValueError>("{}: tensor is undefined", op);
}

// The dtype two inputs share; they must have the same one.
DType common_dtype(const char* op, const Tensor& a, const Tensor& b) {
    require_defined(op, a);
    require_defined(op, b);
    if (a.dtype() != b.dtype())
        fail<ValueError>("{}: inputs have different dtypes ({} and {})", op, dtype_name(a.dtype()),
                         dtype_name(b.dtype()));
    return a.dtype();
}

// Throws unless a dst of add_ / mul_ can be written element by element: a
// stride-0 dimension (an expanded view) would write one element several times.
void require_writable(const char* op, const Tensor& dst) {
    for (int d = 0; d < dst.dim(); ++d)
        if (dst.strides()[d] == 0 && dst.shape()[d] > 1)
            fail<ValueError>("{}: dst of shape {} repeats elements (stride 0 in dimension {}); write into a copy", op,
                             shape_str(dst.shape()), d);
}

// y = f(x) for a floating x.
template <class F>
Tensor unary_math(const char* op, const Tensor& x, const F& f) {
    require_defined(op, x);
    return visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        Tensor out = Tensor::empty(x.shape(), x.dtype());
        const int64_t n = out.numel();
        map_elements(x.shape(), n, f, operand<T>(out, n), operand<const T>(x, n));
        return out;
    });
}

// y = f(a, b) for a and b of one floating dtype, broadcast together.
template <class F>
Tensor binary_math(const char* op, const Tensor& a, const Tensor& b, const F& f) {
    const DType dtype = common_dtype(op, a, b);
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    return visit_floating(dtype, op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        Tensor out = Tensor::empty(shape, dtype);
        const int64_t n = out.numel();
        map_binary(shape, n, f, operand<T>(out, n), operand<const T>(a, n), operand<const T>(b, n));
        return out;
    });
}

// y = f(a, s) for a floating a and a number s (converted to a's dtype).
template <class F>
Tensor scalar_math(const char* op, const Tensor& a, double s, const F& f) {
    require_defined(op, a);
    return visit_floating(a.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        Tensor out = Tensor::empty(a.shape(), a.dtype());
        const int64_t n = out.numel();
        const T value = static_cast<T>(s);
        map_binary(a.shape(), n, f, operand<T>(out, n), operand<const T>(a, n), Number<T>{value});
        return out;
    });
}

// visit_dtype for the dtypes comparisons accept (float32, float64, int64);
// bool throws "op: expected a float32, float64 or int64 tensor, got bool".
template <class F>
void visit_comparable(DType dtype, const char* op, F&& f) {
    if (dtype == DType::int64) return f(std::type_identity<int64_t>{});
    visit_floating(dtype, op, f);
}

void require_comparable(const char* op, DType dtype) {
    if (dtype == DType::boolean)
        fail<ValueError>("{}: expected a float32, float64 or int64 tensor, got {}", op, dtype_name(dtype));
}

// mask = f(a, b) for a and b of one dtype (float32, float64, int64).
template <class F>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, const F& f) {
    const DType dtype = common_dtype(op, a, b);
    require_comparable(op, dtype);
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    Tensor out = Tensor::empty(shape, DType::boolean);
    const int64_t n = out.numel();
    visit_comparable(dtype, op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        map_binary(shape, n, f, operand<bool>(out, n), operand<const T>(a, n), operand<const T>(b, n));
    });
    return out;
}

// mask = f(a, s): s in a's dtype when a is floating, an int64 a compared in double.
template <class F>
Tensor compare(const char* op, const Tensor& a, double s, const F& f) {
    require_defined(op, a);
    require_comparable(op, a.dtype());
    Tensor out = Tensor::empty(a.shape(), DType::boolean);
    const int64_t n = out.numel();
    visit_comparable(a.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
        const C value = static_cast<C>(s);
        map_binary(a.shape(), n, f, operand<bool>(out, n), operand<const T>(a, n), Number<C>{value});
    });
    return out;
}

// mask = f(a, b) for bool masks.
template <class F>
Tensor logical(const char* op, const Tensor& a, const Tensor& b, const F& f) {
    a.check_dtype(DType::boolean, op);
    b.check_dtype(DType::boolean, op);
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    Tensor out = Tensor::empty(shape, DType::boolean);
    const int64_t n = out.numel();
    map_binary(shape, n, f, operand<bool>(out, n), operand<const bool>(a, n), operand<const bool>(b, n));
    return out;
}

}  // namespace

// ---- unary ----------------------------------------------------------------------------------
namespace {
// y = -x
struct Neg {
    template <class T>
    T operator()(T x) const {
        return -x;
    }
};

// y = e^x
struct Exp {
    template <class T>
    T operator()(T x) const {
        return std::exp(x);
    }
};

// y = ln x
struct Log {
    template <class T>
    T operator()(T x) const {
        return std::log(x);
    }
};

// y = √x
struct Sqrt {
    template <class T>
    T operator()(T x) const {
        return std::sqrt(x);
    }
};

// y = 1/√x
struct Rsqrt {
    template <class T>
    T operator()(T x) const {
        return T(1) / std::sqrt(x);
    }
};

// y = tanh x
struct Tanh {
    template <class T>
    T operator()(T x) const {
        return std::tanh(x);
    }
};

// y = max(x, 0), written so that NaN stays NaN
struct Relu {
    template <class T>
    T operator()(T x) const {
        return x < T(0) ? T(0) : x;
    }
};

// y = 1/(1+e^-x) = e^x/(1+e^x); with e = e^-|x| ≤ 1 picking the form whose
// exponent is never positive, nothing overflows: x = ±1e4 gives exactly 1 or 0
struct Sigmoid {
    template <class T>
    T operator()(T x) const {
        const T e = std::exp(-std::abs(x));
        return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
    }
};

// y = |x|
struct Abs {
    template <class T>
    T operator()(T x) const {
        return std::abs(x);
    }
};

// y = 1 if x > 0, -1 if x < 0, else x (so ±0 and NaN pass through)
struct Sign {
    template <class T>
    T operator()(T x) const {
        return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;
    }
};

// y = x²
struct Square {
    template <class T>
    T operator()(T x) const {
        return x * x;
    }
};

// y = 1/x
struct Reciprocal {
    template <class T>
    T operator()(T x) const {
        return T(1) / x;
    }
};

// y = x^p (std::pow handles negative x with an integer p: (-2)³ = -8)
struct Pow {
    double p;
    template <class T>
    T operator()(T x) const {
        return std::pow(x, static_cast<T>(p));
    }
};

}  // namespace

Tensor neg(const Tensor& x) { return unary_math("neg", x, Neg{}); }
Tensor exp(const Tensor& x) { return unary_math("exp", x, Exp{}); }
Tensor log(const Tensor& x) { return unary_math("log", x, Log{}); }
Tensor sqrt(const Tensor& x) { return unary_math("sqrt", x, Sqrt{}); }
Tensor rsqrt(const Tensor& x) { return unary_math("rsqrt", x, Rsqrt{}); }
Tensor tanh(const Tensor& x) { return unary_math("tanh", x, Tanh{}); }
Tensor relu(const Tensor& x) { return unary_math("relu", x, Relu{}); }
Tensor sigmoid(const Tensor& x) { return unary_math("sigmoid", x, Sigmoid{}); }
Tensor abs(const Tensor& x) { return unary_math("abs", x, Abs{}); }
Tensor sign(const Tensor& x) { return unary_math("sign", x, Sign{}); }

Tensor pow(const Tensor& x, double exponent) {
    // the powers a Transformer uses get a one-operation formula: exact and vectorisable
    if (exponent == 2.0) return unary_math("pow", x, Square{});
    if (exponent == 0.5) return unary_math("pow", x, Sqrt{});
    if (exponent == -1.0) return unary_math("pow", x, Reciprocal{});
    return unary_math("pow", x, Pow{exponent});
}

// ---- binary ---------------------------------------------------------------------------------
namespace {
// y = a + b
struct Add {
    template <class T>
    T operator()(T a, T b) const {
        return a + b;
    }
};

// y = a - b
struct Sub {
    template <class T>
    T operator()(T a, T b) const {
        return a - b;
    }
};

// y = s - a (the number comes second in the kernel, so the formula swaps)
struct SubFrom {
    template <class T>
    T operator()(T a, T s) const {
        return s - a;
    }
};

// y = a · b
struct Mul {
    template <class T>
    T operator()(T a, T b) const {
        return a * b;
    }
};

// y = a / b
struct Div {
    template <class T>
    T operator()(T a, T b) const {
        return a / b;
    }
};

// y = s / a
struct DivInto {
    template <class T>
    T operator()(T a, T s) const {
        return s / a;
    }
};

// y = max(a, b), NaN if either is (a NaN a is kept; a NaN b fails a > b and is returned)
struct Maximum {
    template <class T>
    T operator()(T a, T b) const {
        return (a > b || std::isnan(a)) ? a : b;
    }
};

// y = min(a, b), NaN if either is
struct Minimum {
    template <class T>
    T operator()(T a, T b) const {
        return (a < b || std::isnan(a)) ? a : b;
    }
};

// dx = dy · [y > 0]: the slope of relu is 1 where it passed x through, 0 elsewhere
struct ReluGrad {
    template <class T>
    T operator()(T dy, T y) const {
        return y > T(0) ? dy : T(0);
    }
};
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_math("add", a, b, Add{}); }
Tensor add(const Tensor& a, double s) { return scalar_math("add", a, s, Add{}); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_math("sub", a, b, Sub{}); }
Tensor sub(const Tensor& a, double s) { return scalar_math("sub", a, s, Sub{}); }
Tensor rsub(double s, const Tensor& a) { return scalar_math("rsub", a, s, SubFrom{}); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_math("mul", a, b, Mul{}); }
Tensor mul(const Tensor& a, double s) { return scalar_math("mul", a, s, Mul{}); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_math("div", a, b, Div{}); }
Tensor div(const Tensor& a, double s) { return scalar_math("div", a, s, Div{}); }
Tensor rdiv(double s, const Tensor& a) { return scalar_math("rdiv", a, s, DivInto{}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_math("maximum", a, b, Maximum{}); }
Tensor maximum(const Tensor& a, double s) { return scalar_math("maximum", a, s, Maximum{}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_math("minimum", a, b, Minimum{}); }
Tensor relu_backward(const Tensor& dy, const Tensor& y) { return binary_math("relu_backward", dy, y, ReluGrad{}); }

// ---- comparisons ----------------------------------------------------------------------------
// Templated on both sides, so an int64 tensor can meet a double number.
namespace {
// m = a == b
struct Eq {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a == b;
    }
};

// m = a != b
struct Ne {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a != b;
    }
};

// m = a < b
struct Lt {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a < b;
    }
};

// m = a <= b
struct Le {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a <= b;
    }
};

// m = a > b
struct Gt {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a > b;
    }
};

// m = a >= b
struct Ge {
    template <class X, class Y>
    bool operator()(X a, Y b) const {
        return a >= b;
    }
};
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", a, b, Eq{}); }
Tensor eq(const Tensor& a, double s) { return compare("eq", a, s, Eq{}); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", a, b, Ne{}); }
Tensor ne(const Tensor& a, double s) { return compare("ne", a, s, Ne{}); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", a, b, Lt{}); }
Tensor lt(const Tensor& a, double s) { return compare("lt", a, s, Lt{}); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", a, b, Le{}); }
Tensor le(const Tensor& a, double s) { return compare("le", a, s, Le{}); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", a, b, Gt{}); }
Tensor gt(const Tensor& a, double s) { return compare("gt", a, s, Gt{}); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", a, b, Ge{}); }
Tensor ge(const Tensor& a, double s) { return compare("ge", a, s, Ge{}); }

// ---- logical --------------------------------------------------------------------------------
namespace {
// m = ¬a
struct Not {
    bool operator()(bool a) const { return !a; }
};

// m = a ∧ b
struct And {
    bool operator()(bool a, bool b) const { return a && b; }
};

// m = a ∨ b
struct Or {
    bool operator()(bool a, bool b) const { return a || b; }
};
}  // namespace

Tensor logical_not(const Tensor& mask) {
    mask.check_dtype(DType::boolean, "logical_not");
    Tensor out = Tensor::empty(mask.shape(), DType::boolean);
    const int64_t n = out.numel();
    map_elements(mask.shape(), n, Not{}, operand<bool>(out, n), operand<const bool>(mask, n));
    return out;
}

Tensor logical_and(const Tensor& a, const Tensor& b) { return logical("logical_and", a, b, And{}); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical("logical_or", a, b, Or{}); }

// ---- selection ------------------------------------------------------------------------------
namespace {
// y = c ? a : b
struct Select {
    template <class T>
    T operator()(bool c, T a, T b) const {
        return c ? a : b;
    }
};

// y = m ? v : x
template <class T>
struct FillWhere {
    T v;
    T operator()(T x, bool m) const { return m ? v : x; }
};
}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    require_defined("where", cond);
    if (cond.dtype() != DType::boolean)
        fail<ValueError>("where: condition must be a bool mask, got {}", dtype_name(cond.dtype()));
    const DType dtype = common_dtype("where", a, b);
    const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
    Tensor out = Tensor::empty(shape, dtype);
    const int64_t n = out.numel();
    visit_dtype(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        map_elements(shape, n, Select{}, operand<T>(out, n), operand<const bool>(cond, n), operand<const T>(a, n),
                     operand<const T>(b, n));
    });
    return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
    require_defined("masked_fill", x);
    require_defined("masked_fill", mask);
    if (mask.dtype() != DType::boolean)
        fail<ValueError>("masked_fill: mask must be bool, got {}", dtype_name(mask.dtype()));
    // the mask stretches to x, never the other way round
    if (!broadcasts_to(mask.shape(), x.shape())) {
        broadcast_shapes(x.shape(), mask.shape(), "masked_fill");  // throws if they do not broadcast at all
        fail<ShapeError>("masked_fill: mask of shape {} does not broadcast to x's shape {}", shape_str(mask.shape()),
                         shape_str(x.shape()));
    }
    const Shape& shape = x.shape();
    Tensor out = Tensor::empty(shape, x.dtype());
    const int64_t n = out.numel();
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        map_binary(shape, n, FillWhere<T>{static_cast<T>(value)}, operand<T>(out, n), operand<const T>(x, n),
                   operand<const bool>(mask, n));
    });
    return out;
}

// ---- in place -------------------------------------------------------------------------------
namespace {
// d = d + α·s
template <class T>
struct AddScaled {
    T alpha;
    T operator()(T d, T s) const { return d + alpha * s; }
};
}  // namespace

void add_(const Tensor& dst, const Tensor& src, double alpha) {
    const DType dtype = common_dtype("add_", dst, src);
    if (!broadcasts_to(src.shape(), dst.shape())) {
        broadcast_shapes(dst.shape(), src.shape(), "add_");  // throws if they do not broadcast at all
        fail<ShapeError>("add_: src of shape {} does not broadcast to dst's shape {}", shape_str(src.shape()),
                         shape_str(dst.shape()));
    }
    require_writable("add_", dst);
    const Shape& shape = dst.shape();
    const int64_t n = dst.numel();
    visit_floating(dtype, "add_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        // dst is both the output and the first input: each element is read, then written, by one iteration
        map_binary(shape, n, AddScaled<T>{static_cast<T>(alpha)}, operand<T>(dst, n), operand<const T>(dst, n),
                   operand<const T>(src, n));
    });
}

void mul_(const Tensor& dst, double s) {
    require_defined("mul_", dst);
    require_writable("mul_", dst);
    const Shape& shape = dst.shape();
    const int64_t n = dst.numel();
    visit_floating(dst.dtype(), "mul_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T value = static_cast<T>(s);
        map_binary(shape, n, Mul{}, operand<T>(dst, n), operand<const T>(dst, n), Number<T>{value});
    });
}

void relu_(const Tensor& dst) {
    require_defined("relu_", dst);
    require_writable("relu_", dst);
    const int64_t n = dst.numel();
    visit_floating(dst.dtype(), "relu_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        map_elements(dst.shape(), n, Relu{}, operand<T>(dst, n), operand<const T>(dst, n));
    });
}

}  // namespace tformer::core
