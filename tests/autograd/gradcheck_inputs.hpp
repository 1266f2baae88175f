// What every gradcheck test shares (tests/autograd, tests/nn): small float64
// leaves, whose values stay clear of the points where an op is not
// differentiable (the kink of relu and abs at 0, the pole of log, 1/x and
// x^-1.5 at 0, ties of max), laid out contiguously or as non-contiguous
// views of a bigger tensor, so every backward is also checked on strided
// inputs; tables of cases run through autograd::gradcheck; and the check of
// a layer with respect to its parameters.
#pragma once

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tformer::testing {

/// Which values an input holds.
enum class Domain {
    away_from_zero,  ///< ±[0.5, 2], random signs: both sides of the kinks, never near them
    positive,        ///< [0.5, 2]: log, sqrt and fractional or negative powers
    grid_above,      ///< an integer in [-2, 2] plus 0.25 ...
    grid_below,      ///< ... or minus 0.25: a grid_above and a grid_below value differ by >= 0.5 (maximum)
    distinct,        ///< a shuffled ramp -3, -2.75, -2.5, ...: no two equal (max reductions)
};

/// How an input's elements sit in memory.
enum class Layout {
    contiguous,  ///< row-major
    transposed,  ///< the last two dims of a row-major tensor swapped (needs >= 2 dims)
    strided,     ///< every other element of the last dim of a tensor twice as wide (a step-2 slice)
};

inline const char* layout_name(Layout layout) {
    switch (layout) {
        case Layout::contiguous: return "contiguous";
        case Layout::transposed: return "transposed view";
        case Layout::strided: return "step-2 slice";
    }
    return "?";
}

/// n values of `domain`, drawn from gen.
inline std::vector<double> draw(int64_t n, Domain domain, core::Generator& gen) {
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i) {
        switch (domain) {
            case Domain::away_from_zero:
                values[i] = (0.5 + 1.5 * gen.uniform()) * (gen.uniform() < 0.5 ? -1.0 : 1.0);
                break;
            case Domain::positive: values[i] = 0.5 + 1.5 * gen.uniform(); break;
            case Domain::grid_above: values[i] = static_cast<double>(gen.randint(5) - 2) + 0.25; break;
            case Domain::grid_below: values[i] = static_cast<double>(gen.randint(5) - 2) - 0.25; break;
            case Domain::distinct: values[i] = -3.0 + 0.25 * static_cast<double>(i); break;
        }
    }
    if (domain == Domain::distinct)  // Fisher-Yates shuffle
        for (int64_t i = n - 1; i > 0; --i) std::swap(values[i], values[gen.randint(i + 1)]);
    return values;
}

/// A float64 leaf of `shape` that requires a gradient, holding values of
/// `domain` in `layout`. The non-contiguous layouts build a bigger row-major
/// tensor and return a view of it, so the Variable's value has real strides.
inline autograd::Variable make_input(const core::Shape& shape, Layout layout, Domain domain, core::Generator& gen) {
    core::Shape base_shape = shape;
    if (layout == Layout::transposed) {
        REQUIRE(shape.size() >= 2);
        std::swap(base_shape[shape.size() - 1], base_shape[shape.size() - 2]);
    } else if (layout == Layout::strided) {
        REQUIRE(shape.size() >= 1);
        base_shape[shape.size() - 1] *= 2;
    }
    core::Tensor base =
        core::tensor(draw(core::shape_numel(base_shape), domain, gen), base_shape, core::DType::float64);
    core::Tensor value = base;
    if (layout == Layout::transposed) value = base.transpose(-1, -2);
    if (layout == Layout::strided) value = base.slice(-1, 1, base_shape.back(), 2);  // odd positions
    REQUIRE(value.shape() == shape);
    return autograd::Variable(value, true);
}

using Function = std::function<autograd::Variable(const std::vector<autograd::Variable>&)>;

/// gradcheck f at inputs; on failure the report says which entry disagrees.
inline void require_gradcheck(const Function& f, const std::vector<autograd::Variable>& inputs) {
    const autograd::GradcheckResult result = autograd::gradcheck(f, inputs);
    INFO(result.report);
    REQUIRE(result);
}

/// A float64 leaf holding `values` (row-major) of `shape`, for tests that
/// need exact numbers (ties, known gradients).
inline autograd::Variable f64_leaf(const std::vector<double>& values, const core::Shape& shape,
                                   bool requires_grad = true) {
    return autograd::Variable(core::tensor(values, shape, core::DType::float64), requires_grad);
}

/// A float64 leaf of N(0, 1) values that requires a gradient.
inline autograd::Variable randn_leaf(const core::Shape& shape, core::Generator& gen) {
    return autograd::Variable(core::randn(shape, gen, core::DType::float64), true);
}

/// One row of a gradcheck table: what it covers (the signature), the leaves
/// it differentiates with respect to, and the function of them. Constants
/// that take no gradient (ids, lengths, masks) are captured by f.
struct GradCase {
    std::string name;
    std::vector<autograd::Variable> inputs;
    Function f;
};

/// gradcheck of every case of a table; a failure names the case and the entry that disagrees.
inline void check_gradcheck_table(const std::vector<GradCase>& cases) {
    for (const GradCase& c : cases) {
        const autograd::GradcheckResult result = autograd::gradcheck(c.f, c.inputs);
        INFO("gradcheck of " << c.name << (result ? ": passed" : ":\n") << result.report);
        CHECK(result.passed);
    }
}

// ---- differentiating with respect to a layer's parameters ------------------------------------
//
// gradcheck differentiates f with respect to the Variables it passes to f,
// so f must build its graph from those Variables, not from the layer's own
// parameters. Every layer reads its parameters from its public members
// (weight, bias) when forward runs. So check_layer passes the members'
// current values to gradcheck as extra inputs, and inside f a MemberSwap
// points each member at the Variable gradcheck handed over, for the length
// of one forward call; its destructor puts the layer's own handles back,
// also when the forward throws. Nothing is copied in or out of the
// parameters, and the module's registered parameter list is never touched.

class MemberSwap {
public:
    MemberSwap(const std::vector<autograd::Variable*>& members, std::span<const autograd::Variable> replacements)
        : members_(members) {
        for (size_t i = 0; i < members_.size(); ++i) {
            saved_.push_back(*members_[i]);
            *members_[i] = replacements[i];
        }
    }
    ~MemberSwap() {
        for (size_t i = 0; i < members_.size(); ++i) *members_[i] = saved_[i];
    }
    MemberSwap(const MemberSwap&) = delete;
    MemberSwap& operator=(const MemberSwap&) = delete;

private:
    const std::vector<autograd::Variable*>& members_;
    std::vector<autograd::Variable> saved_;
};

/// gradcheck of forward(data) with respect to the data Variables that require
/// a gradient and to every listed parameter member (float64: module.to(DType::float64) first).
inline autograd::GradcheckResult check_layer(const std::vector<autograd::Variable>& data,
                                             const std::vector<autograd::Variable*>& members, const Function& forward) {
    std::vector<autograd::Variable> inputs = data;
    for (autograd::Variable* m : members) {
        REQUIRE(m->defined());
        REQUIRE(m->dtype() == core::DType::float64);
        inputs.push_back(*m);
    }
    const size_t k = data.size();
    auto f = [&](const std::vector<autograd::Variable>& in) {
        MemberSwap swap(members, std::span<const autograd::Variable>(in).subspan(k));
        return forward(std::vector<autograd::Variable>(in.begin(), in.begin() + k));
    };
    return autograd::gradcheck(f, inputs);
}

}  // namespace tformer::testing
