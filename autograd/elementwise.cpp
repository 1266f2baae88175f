// Differentiable elementwise ops: forward with a core kernel, backward right
// below it. Notation: y is the output, dy the gradient arriving at y, and
// da, db the gradients this op sends to its inputs. A broadcasting op sums
// its gradient back to each input's shape (core::sum_to_shape): an input
// that was stretched along a dimension contributed to every element there.
#include "autograd/elementwise.hpp"

#include "core/elementwise.hpp"
#include "core/mask.hpp"
#include "core/reduce.hpp"

namespace tformer::autograd {

namespace c = tformer::core;

// ============================ unary ============================

// y = -x
Variable neg(const Variable& x) {
    return record("neg", c::neg(x.value()), {x}, [](const Tensor& dy, Grads& g) {
        g[0] = c::neg(dy);  // d(-x)/dx = -1
    });
}

// y = e^x
Variable exp(const Variable& x) {
    Tensor y = c::exp(x.value());
    return record("exp", y, {x}, [y](const Tensor& dy, Grads& g) {
        g[0] = c::mul(dy, y);  // d e^x/dx = e^x = y (saved: the output, not x)
    });
}

// y = ln x
Variable log(const Variable& x) {
    return record("log", c::log(x.value()), {x}, [x = x.value()](const Tensor& dy, Grads& g) {
        g[0] = c::div(dy, x);  // d ln x/dx = 1/x
    });
}

// y = √x
Variable sqrt(const Variable& x) {
    Tensor y = c::sqrt(x.value());
    return record("sqrt", y, {x}, [y](const Tensor& dy, Grads& g) {
        g[0] = c::div(c::mul(dy, 0.5), y);  // d √x/dx = 1/(2√x) = 0.5/y
    });
}

// y = tanh x
Variable tanh(const Variable& x) {
    Tensor y = c::tanh(x.value());
    return record("tanh", y, {x}, [y](const Tensor& dy, Grads& g) {
        g[0] = c::mul(dy, c::rsub(1.0, c::mul(y, y)));  // d tanh x/dx = 1 - y²
    });
}

// y = max(x, 0)
Variable relu(const Variable& x) {
    Tensor y = c::relu(x.value());
    return record("relu", y, {x}, [y](const Tensor& dy, Grads& g) {
        // slope 1 where x > 0 (equivalently y > 0), 0 elsewhere (also at 0, as PyTorch)
        g[0] = c::relu_backward(dy, y);
    });
}

// y = 1 / (1 + e^-x)
Variable sigmoid(const Variable& x) {
    Tensor y = c::sigmoid(x.value());
    return record("sigmoid", y, {x}, [y](const Tensor& dy, Grads& g) {
        g[0] = c::mul(dy, c::mul(y, c::rsub(1.0, y)));  // dσ/dx = σ(1 - σ)
    });
}

// y = |x|
Variable abs(const Variable& x) {
    return record("abs", c::abs(x.value()), {x}, [x = x.value()](const Tensor& dy, Grads& g) {
        g[0] = c::mul(dy, c::sign(x));  // d|x|/dx = sign(x), 0 at 0 (as PyTorch)
    });
}

// y = x^p
Variable pow(const Variable& x, double p) {
    return record("pow", c::pow(x.value(), p), {x}, [x = x.value(), p](const Tensor& dy, Grads& g) {
        if (p == 0.0) {
            g[0] = c::zeros(x.shape(), x.dtype());
            return;
        }
        g[0] = c::mul(dy, c::mul(c::pow(x, p - 1.0), p));  // d x^p/dx = p x^(p-1)
    });
}

// ============================ binary (broadcasting) ============================

// y = a + b
Variable add(const Variable& a, const Variable& b) {
    return record("add", c::add(a.value(), b.value()), {a, b},
                  [sa = a.shape(), sb = b.shape()](const Tensor& dy, Grads& g) {
                      // ∂y/∂a = ∂y/∂b = 1: the gradient passes through, summed to each shape
                      if (g.wanted(0)) g[0] = c::sum_to_shape(dy, sa);
                      if (g.wanted(1)) g[1] = c::sum_to_shape(dy, sb);
                  });
}

// y = a - b
Variable sub(const Variable& a, const Variable& b) {
    return record("sub", c::sub(a.value(), b.value()), {a, b},
                  [sa = a.shape(), sb = b.shape()](const Tensor& dy, Grads& g) {
                      if (g.wanted(0)) g[0] = c::sum_to_shape(dy, sa);
                      if (g.wanted(1)) g[1] = c::neg(c::sum_to_shape(dy, sb));  // ∂y/∂b = -1
                  });
}

// y = a ⊙ b
Variable mul(const Variable& a, const Variable& b) {
    // save each input only if the other one needs it
    Tensor av = b.requires_grad() ? a.value() : Tensor();
    Tensor bv = a.requires_grad() ? b.value() : Tensor();
    return record("mul", c::mul(a.value(), b.value()), {a, b},
                  [av, bv, sa = a.shape(), sb = b.shape()](const Tensor& dy, Grads& g) {
                      // ∂y/∂a = b, ∂y/∂b = a
                      if (g.wanted(0)) g[0] = c::sum_to_shape(c::mul(dy, bv), sa);
                      if (g.wanted(1)) g[1] = c::sum_to_shape(c::mul(dy, av), sb);
                  });
}

// y = a / b
Variable div(const Variable& a, const Variable& b) {
    Tensor y = c::div(a.value(), b.value());
    return record("div", y, {a, b}, [y, sa = a.shape(), bv = b.value()](const Tensor& dy, Grads& g) {
        // ∂y/∂a = 1/b;  ∂y/∂b = -a/b² = -y/b
        if (g.wanted(0)) g[0] = c::sum_to_shape(c::div(dy, bv), sa);
        if (g.wanted(1)) g[1] = c::sum_to_shape(c::neg(c::div(c::mul(dy, y), bv)), bv.shape());
    });
}

// y = max(a, b)
Variable maximum(const Variable& a, const Variable& b) {
    return record("maximum", c::maximum(a.value(), b.value()), {a, b},
                  [av = a.value(), bv = b.value()](const Tensor& dy, Grads& g) {
                      // the larger input gets the gradient; on a tie each gets half (PyTorch)
                      const Tensor a_wins = c::gt(av, bv), tie = c::eq(av, bv);
                      const Tensor half = c::mul(dy, 0.5);
                      if (g.wanted(0)) {
                          const Tensor da = c::where(a_wins, dy, c::where(tie, half, c::zeros({}, dy.dtype())));
                          g[0] = c::sum_to_shape(da, av.shape());
                      }
                      if (g.wanted(1)) {
                          const Tensor b_wins = c::lt(av, bv);
                          const Tensor db = c::where(b_wins, dy, c::where(tie, half, c::zeros({}, dy.dtype())));
                          g[1] = c::sum_to_shape(db, bv.shape());
                      }
                  });
}

// ============================ scalar variants ============================

// y = a + s
Variable add(const Variable& a, double s) {
    return record("add", c::add(a.value(), s), {a}, [](const Tensor& dy, Grads& g) { g[0] = dy; });
}

// y = a - s
Variable sub(const Variable& a, double s) {
    return record("sub", c::sub(a.value(), s), {a}, [](const Tensor& dy, Grads& g) { g[0] = dy; });
}

// y = s - a
Variable rsub(double s, const Variable& a) {
    return record("rsub", c::rsub(s, a.value()), {a}, [](const Tensor& dy, Grads& g) { g[0] = c::neg(dy); });
}

// y = a · s
Variable mul(const Variable& a, double s) {
    return record("mul", c::mul(a.value(), s), {a}, [s](const Tensor& dy, Grads& g) { g[0] = c::mul(dy, s); });
}

// y = a / s
Variable div(const Variable& a, double s) {
    return record("div", c::div(a.value(), s), {a}, [s](const Tensor& dy, Grads& g) { g[0] = c::div(dy, s); });
}

// y = s / a
Variable rdiv(double s, const Variable& a) {
    Tensor y = c::rdiv(s, a.value());
    return record("rdiv", y, {a}, [y, av = a.value()](const Tensor& dy, Grads& g) {
        g[0] = c::neg(c::div(c::mul(dy, y), av));  // d(s/a)/da = -s/a² = -y/a
    });
}

// ============================ selection ============================

// y = cond ? a : b
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
    return record("where", c::where(cond, a.value(), b.value()), {a, b},
                  [cond, sa = a.shape(), sb = b.shape()](const Tensor& dy, Grads& g) {
                      const Tensor zero = c::zeros({}, dy.dtype());
                      if (g.wanted(0)) g[0] = c::sum_to_shape(c::where(cond, dy, zero), sa);
                      if (g.wanted(1)) g[1] = c::sum_to_shape(c::where(cond, zero, dy), sb);
                  });
}

// y = mask ? value : x
Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
    return record("masked_fill", c::masked_fill(x.value(), mask, value), {x}, [mask](const Tensor& dy, Grads& g) {
        g[0] = c::masked_fill(dy, mask, 0.0);  // filled positions no longer depend on x
    });
}

// y = x ⊙ m / (1 - p), m ~ Bernoulli(1 - p)
Variable dropout(const Variable& x, double p, bool training, core::Generator& gen) {
    if (!(p >= 0.0 && p < 1.0)) fail<ValueError>("dropout: probability {} not in [0, 1)", p);
    if (!training || p == 0.0) return x;
    // the mask already carries the 1/(1-p) scale, so forward and backward are one multiply each
    const Tensor scaled_mask = c::dropout_mask(x.shape(), p, gen, x.dtype());
    return record("dropout", c::mul(x.value(), scaled_mask), {x},
                  [mask = c::PackedMask(scaled_mask)](const Tensor& dy, Grads& g) {
                      g[0] = c::mul(dy, mask.unpack());  // saved: the scaled mask, as bits
                  });
}

}  // namespace tformer::autograd
