// Differentiable matrix products: matmul and the affine map of nn::Linear.
// Notation as in elementwise.cpp: y is the output, dy the gradient arriving
// at y. Dimension letters: n rows of a, k the shared (contracted) dimension,
// m columns of b; for linear, N rows of x, `in` and `out` its features.
//
// Every gradient is itself a matrix product. The transposes in them
// (bᵀ, aᵀ, dyᵀ) are views with the last two strides swapped, which
// core::matmul hands to BLAS as a transpose flag: nothing is copied.
#include "autograd/linalg.hpp"

#include "core/elementwise.hpp"
#include "core/matmul.hpp"
#include "core/reduce.hpp"

namespace tformer::autograd {

namespace c = tformer::core;

namespace {
// The last two dimensions swapped: a view, never a copy.
Tensor mT(const Tensor& t) { return t.transpose(-2, -1); }
}  // namespace

// ============================ matmul ============================

// y = a @ b         a (..., n, k), b (..., k, m), y (batch..., n, m)
Variable matmul(const Variable& a, const Variable& b) {
    Tensor y = c::matmul(a.value(), b.value());  // also checks shapes and dtypes

    // A 1-D operand is a row vector on the left, (k) -> (1, k), or a column
    // vector on the right, (k) -> (k, 1), and y lost that size-1 dimension.
    // Backward works with these 2-D forms and puts the dimensions back.
    const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
    // Save each operand only if the other one needs it: da needs b, db needs a.
    Tensor a2 = b.requires_grad() ? (a_vec ? a.value().unsqueeze(0) : a.value()) : Tensor();  // (..., n, k)
    Tensor b2 = a.requires_grad() ? (b_vec ? b.value().unsqueeze(1) : b.value()) : Tensor();  // (..., k, m)
    return record("matmul", std::move(y), {a, b},
                  [a2, b2, a_vec, b_vec, sa = a.shape(), sb = b.shape()](const Tensor& dy_in, Grads& g) {
                      // dy (batch..., n, m): restore the dimensions a 1-D operand dropped
                      Tensor dy = dy_in;
                      if (b_vec) dy = dy.unsqueeze(-1);  // (..., n) -> (..., n, 1)
                      if (a_vec) dy = dy.unsqueeze(-2);  // (..., m) -> (..., 1, m)

                      // y_ij = Σ_p a_ip b_pj, so ∂y_ij/∂a_ip = b_pj:  da = dy @ bᵀ  (batch..., n, k)
                      // An operand broadcast over batch dims was used by every batch, so its
                      // gradient sums over them (sum_to_shape), as in elementwise broadcasting.
                      if (g.wanted(0)) {
                          const core::Shape a2_shape = a_vec ? core::Shape{1, sa[0]} : sa;
                          g[0] = c::sum_to_shape(c::matmul(dy, mT(b2)), a2_shape).reshape(sa);
                      }

                      // ... and ∂y_ij/∂b_pj = a_ip:  db = aᵀ @ dy  (batch..., k, m)
                      if (g.wanted(1)) {
                          const core::Shape b2_shape = b_vec ? core::Shape{sb[0], 1} : sb;
                          const int64_t k = a2.size(-1), m = dy.size(-1);
                          if (b2_shape.size() == 2 && a2.dim() > 2) {
                              // b is one matrix shared by all batches (x @ W on (B, T, D)):
                              // Σ_batches a_iᵀ dy_i is a single product of the stacked rows,
                              // (N, k)ᵀ @ (N, m), instead of B products summed afterwards.
                              const Tensor a_rows = a2.reshape({-1, k});   // (N, k)
                              const Tensor dy_rows = dy.reshape({-1, m});  // (N, m)
                              g[1] = c::matmul(mT(a_rows), dy_rows).reshape(sb);
                          } else {
                              g[1] = c::sum_to_shape(c::matmul(mT(a2), dy), b2_shape).reshape(sb);
                          }
                      }
                  });
}

// ============================ linear ============================

namespace {
// The gradients of y = x Wᵀ + b given dy (..., out), for linear and linear_relu.
void linear_backward(const Tensor& dy, const Tensor& xv, const Tensor& wv, const core::Shape& sx, const core::Shape& sw,
                     Grads& g) {
    const int64_t out = sw[0], in = sw[1];
    // y = x Wᵀ + b  ->  dx = dy W   (..., out) @ (out, in) = (..., in)
    if (g.wanted(0)) g[0] = c::matmul(dy, wv).reshape(sx);
    // y_ro = Σ_i x_ri W_oi  ->  dW_oi = Σ_r dy_ro x_ri: every leading dim of
    // x and dy is a row r, so dW = dy_rowsᵀ @ x_rows = (N, out)ᵀ (N, in)
    if (g.wanted(1)) {
        const Tensor dy_rows = dy.reshape({-1, out});  // (N, out)
        const Tensor x_rows = xv.reshape({-1, in});    // (N, in)
        g[1] = c::matmul(mT(dy_rows), x_rows);         // (out, in)
    }
    // the bias is added to every row: dbias = Σ_rows dy   (out)
    if (g.wanted(2)) g[2] = c::sum_to_shape(dy, {out});
}
}  // namespace

// y = x @ Wᵀ + bias          x (..., in), W (out, in), bias (out), y (..., out)
Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
    Tensor y = c::linear(x.value(), weight.value(), bias.defined() ? bias.value() : Tensor());
    // dx needs W, dW needs x, dbias needs neither: save only what a wanted
    // gradient uses (x as a SavedValue: a layer norm's or attention's output
    // is made again in backward rather than kept)
    SavedValue xv = weight.requires_grad() ? SavedValue(x) : SavedValue();
    Tensor wv = x.requires_grad() ? weight.value() : Tensor();
    return record("linear", std::move(y), {x, weight, bias},
                  [xv = std::move(xv), wv, sx = x.shape(), sw = weight.shape()](const Tensor& dy, Grads& g) {
                      linear_backward(dy, xv.get(), wv, sx, sw, g);
                  });
}

// y = max(x @ Wᵀ + bias, 0)   x (..., in), W (out, in), bias (out), y (..., out)
Variable linear_relu(const Variable& x, const Variable& weight, const Variable& bias) {
    Tensor y = c::linear(x.value(), weight.value(), bias.defined() ? bias.value() : Tensor());
    c::relu_(y);  // over the fresh output: no second tensor
    SavedValue xv = weight.requires_grad() ? SavedValue(x) : SavedValue();
    Tensor wv = x.requires_grad() ? weight.value() : Tensor();
    // saved: what linear saves, and the output y, whose sign is relu's slope
    return record("linear_relu", y, {x, weight, bias},
                  [y, xv = std::move(xv), wv, sx = x.shape(), sw = weight.shape()](const Tensor& dy, Grads& g) {
                      // relu passes dy where it passed its input (y > 0), then the linear's gradients
                      linear_backward(c::relu_backward(dy, y), xv.get(), wv, sx, sw, g);
                  });
}

}  // namespace tformer::autograd
