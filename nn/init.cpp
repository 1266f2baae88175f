// Parameter initialisation: draw numbers in the parameter's dtype, then copy
// them into the parameter's existing storage (core::copy_), so the Variable
// keeps its identity and everything holding it sees the new values.
#include "nn/init.hpp"

#include "core/elementwise.hpp"
#include "core/tensor.hpp"

#include <cmath>

namespace tformer::nn::init {

using autograd::Variable;
using core::Tensor;

namespace {

// Initialisers write into floating-point parameters only.
void check_target(const Variable& w, const char* op) {
    if (!w.defined()) fail<ValueError>("{}: the Variable is undefined", op);
    if (!core::is_floating(w.dtype()))
        fail<ValueError>("{}: expected a float32 or float64 parameter, got {}", op, core::dtype_name(w.dtype()));
}

// fan_in = in · Πk, fan_out = out · Πk for a weight (out, in, k...), as torch.nn.init.
struct Fans {
    int64_t in = 0;
    int64_t out = 0;
};
Fans fans_of(const Variable& w, const char* op) {
    const core::Shape& s = w.shape();
    if (s.size() < 2)
        fail<ValueError>("{}: fan in and fan out need a weight with at least 2 dimensions, got shape {}", op,
                         core::shape_str(s));
    int64_t receptive = 1;
    for (int d = 2; d < s.size(); ++d) receptive *= s[d];
    return {.in = s[1] * receptive, .out = s[0] * receptive};
}

}  // namespace

// w ~ U(low, high)
void uniform_(const Variable& w, double low, double high, core::Generator& gen) {
    check_target(w, "uniform_");
    core::uniform_(w.value(), low, high, gen);  // refuses low > high, naming uniform_ too
}

// w ~ N(mean, std²) = mean + std · N(0, 1)
void normal_(const Variable& w, double mean, double std, core::Generator& gen) {
    check_target(w, "normal_");
    if (!(std >= 0)) fail<ValueError>("normal_: standard deviation {} must be non-negative", std);
    const Tensor z = core::randn(w.shape(), gen, w.dtype());
    core::copy_(w.value(), core::add(core::mul(z, std), mean));
}

// w = value everywhere
namespace {
void fill(const Variable& w, double value, const char* op) {
    check_target(w, op);
    core::fill_(w.value(), value);
}
}  // namespace

void constant_(const Variable& w, double value) { fill(w, value, "constant_"); }
void zeros_(const Variable& w) { fill(w, 0.0, "zeros_"); }
void ones_(const Variable& w) { fill(w, 1.0, "ones_"); }

// w ~ U(-a, a), a = gain · √(6 / (fan_in + fan_out))
// (the variance a²/3 = 2/(fan_in + fan_out) keeps activations and gradients at
// the same scale on the way forward and back, Glorot & Bengio 2010)
void xavier_uniform_(const Variable& w, core::Generator& gen, double gain) {
    check_target(w, "xavier_uniform_");
    const Fans f = fans_of(w, "xavier_uniform_");
    const double a = f.in + f.out > 0 ? gain * std::sqrt(6.0 / static_cast<double>(f.in + f.out)) : 0.0;
    uniform_(w, -a, a, gen);
}

// w ~ U(-1/√fan_in, 1/√fan_in)
// (PyTorch's kaiming_uniform_(a=√5): bound = gain·√(3/fan_in) with gain = √(2/(1+a²)) = √(1/3))
void linear_default_(const Variable& w, int64_t fan_in, core::Generator& gen) {
    check_target(w, "linear_default_");
    if (fan_in < 0) fail<ValueError>("linear_default_: fan_in must be non-negative, got {}", fan_in);
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    uniform_(w, -bound, bound, gen);
}

}  // namespace tformer::nn::init
