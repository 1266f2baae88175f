// Optimizers: SGD, Adam and AdamW against hand-computed steps, skipping
// parameters without gradients, convergence on a quadratic, option and
// parameter checks, and state_dict round trips that resume bit for bit.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/module.hpp"
#include "optim/optim.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>

using namespace tformer;
using namespace tformer::optim;
using core::DType;
using core::Tensor;

namespace {

Variable param(std::vector<double> values, DType dtype = DType::float64) {
    const int64_t n = static_cast<int64_t>(values.size());
    return Variable(core::tensor(values, {n}, dtype), true);
}

void set_grad(const Variable& p, std::vector<double> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    p.set_grad(core::tensor(values, {n}, p.dtype()));
}

// loss = Σ w·(p - c)², a quadratic with its minimum at c
void quadratic_backward(const Variable& p, const std::vector<double>& c, const std::vector<double>& w) {
    const int64_t n = static_cast<int64_t>(c.size());
    Variable target(core::tensor(c, {n}, p.dtype()));
    Variable weight(core::tensor(w, {n}, p.dtype()));
    Variable d = autograd::sub(p, target);
    autograd::sum(autograd::mul(weight, autograd::mul(d, d))).backward();
}

}  // namespace

// ---- SGD ------------------------------------------------------------------------------------------

TEST_CASE(
    "SGD(params, options).step(): three steps with momentum, dampening, nesterov and weight decay match "
    "hand-computed values",
    "[optim][sgd]") {
    // p starts at 1, the gradient is 1 at every step, lr = 0.1.
    struct Case {
        const char* what;
        SGDOptions options;
        std::array<double, 3> expected;  // p after steps 1, 2, 3
    };
    const std::vector<Case> cases = {
        // p ← p - 0.1
        {"plain", {.lr = 0.1}, {0.9, 0.8, 0.7}},
        // b = 1, 1.9, 2.71 (first b = g);  p = 1 - 0.1, - 0.19, - 0.271
        {"momentum 0.9", {.lr = 0.1, .momentum = 0.9}, {0.9, 0.71, 0.439}},
        // b = 1 (the first step is not dampened), 0.9 + 0.5 = 1.4, 1.26 + 0.5 = 1.76
        {"momentum 0.9, dampening 0.5", {.lr = 0.1, .momentum = 0.9, .dampening = 0.5}, {0.9, 0.76, 0.584}},
        // b as with momentum; g' = g + 0.9 b = 1.9, 2.71, 3.439
        {"nesterov", {.lr = 0.1, .momentum = 0.9, .nesterov = true}, {0.81, 0.539, 0.1951}},
        // g' = 1 + 0.1 p = 1.1, 1.089, 1.07811
        {"weight decay 0.1", {.lr = 0.1, .weight_decay = 0.1}, {0.89, 0.7811, 0.673289}},
        // g' = 1.1 → b = 1.1, p = 0.89;  g' = 1.089 → b = 0.99 + 1.089 = 2.079, p = 0.6821;
        // g' = 1.06821 → b = 1.8711 + 1.06821 = 2.93931, p = 0.388169
        {"momentum 0.9, weight decay 0.1", {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1}, {0.89, 0.6821, 0.388169}},
    };
    for (const Case& c : cases) {
        for (DType dtype : {DType::float64, DType::float32}) {
            INFO(c.what << ", " << core::dtype_name(dtype));
            // the second element mirrors the first: p = -1, g = -1 gives -p
            Variable p = param({1.0, -1.0}, dtype);
            SGD opt({p}, c.options);
            for (int s = 0; s < 3; ++s) {
                set_grad(p, {1.0, -1.0});
                const Tensor g = p.grad();
                opt.step();
                const double eps = dtype == DType::float64 ? 1e-12 : 1e-6;
                CHECK(p.value().at({0}) == Approx(c.expected[s]).margin(eps));
                CHECK(p.value().at({1}) == Approx(-c.expected[s]).margin(eps));
                CHECK(g.to_vector() == std::vector<double>{1.0, -1.0});  // the gradient is only read
            }
            CHECK(opt.steps() == 3);
            CHECK(opt.state(0).step == 3);
        }
    }
}

TEST_CASE("SGD(params, options): invalid options throw ValueError naming them", "[optim][sgd]") {
    Variable p = param({1.0});
    CHECK_THROWS_WITH(SGD({p}, {.lr = -1}), Catch::Contains("SGD: learning rate must be finite and >= 0, got -1"));
    CHECK_THROWS_WITH(SGD({p}, {.momentum = -0.5}), Catch::Contains("momentum must be >= 0, got -0.5"));
    CHECK_THROWS_WITH(SGD({p}, {.weight_decay = -1}), Catch::Contains("weight_decay must be >= 0"));
    CHECK_THROWS_WITH(SGD({p}, {.nesterov = true}), Catch::Contains("nesterov momentum needs momentum > 0"));
    CHECK_THROWS_AS(SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), ValueError);
}

// ---- Adam and AdamW ---------------------------------------------------------------------------------

TEST_CASE("Adam(params).step(): the first step moves each element by lr·sign(g)", "[optim][adam]") {
    // t = 1: m̂ = g and v̂ = g², so the step is lr·g/(|g| + eps) ≈ lr·sign(g) whatever |g| is
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(core::dtype_name(dtype));
        const std::vector<double> start = {0.5, -1.0, 2.0, 0.0};
        const std::vector<double> grad = {3.0, -0.5, 1e-3, -200.0};
        Variable p = param(start, dtype);
        Adam opt({p}, {.lr = 0.01});
        set_grad(p, grad);
        opt.step();
        for (int64_t i = 0; i < 4; ++i) {
            const double sign = grad[i] > 0 ? 1.0 : -1.0;
            CHECK(p.value().at({i}) == Approx(start[i] - 0.01 * sign).margin(1e-6));
        }
    }
}

TEST_CASE("Adam(params, {.lr = 0.1}).step(): three float64 steps match a hand computation", "[optim][adam]") {
    // p = (1, -0.5), gradients (0.5, -1), (0.3, 0.2), (-0.4, 0.8); step 1 is
    // p - 0.1·g/(|g| + 1e-8). Steps 2 and 3 from m, v and the bias corrections
    // (m = 0.1 g1 → 0.09 g1 + 0.1 g2, v = 0.001 g1² → 0.000999 g1² + 0.001 g2², ...).
    Variable p = param({1.0, -0.5});
    Adam opt({p}, {.lr = 0.1});
    const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.3, 0.2}, {-0.4, 0.8}};
    const std::vector<std::vector<double>> expected = {{0.900000002, -0.400000001},
                                                       {0.8042509867088761, -0.3488973939904946},
                                                       {0.7793923040411518, -0.35728102465251027}};
    for (size_t s = 0; s < 3; ++s) {
        set_grad(p, grads[s]);
        opt.step();
        CHECK(p.value().at({0}) == Approx(expected[s][0]).epsilon(1e-13));
        CHECK(p.value().at({1}) == Approx(expected[s][1]).epsilon(1e-13));
    }
    // the moments themselves: m = 0.081 g1 + 0.09 g2 + 0.1 g3
    const Tensor m = opt.state(0).slots[0];
    CHECK(m.at({0}) == Approx(0.081 * 0.5 + 0.09 * 0.3 + 0.1 * -0.4).epsilon(1e-13));
    CHECK(opt.slot_names() == std::vector<std::string>{"exp_avg", "exp_avg_sq"});
}

TEST_CASE("AdamW(params, {.weight_decay}) decouples the decay, Adam adds it to the gradient", "[optim][adam]") {
    // p = 1, g = 0.5 at both steps, lr = 0.1, λ = 0.1.
    // AdamW: p·0.99 = 0.99, then m̂/√v̂ = 1: 0.89;  0.89·0.99 = 0.8811, - 0.1: 0.7811.
    // Adam:  g' = 0.5 + 0.1·1 = 0.6: 0.9;  g' = 0.59, m̂ = 0.113/0.19, v̂ = 0.00070774/0.001999: 0.8000473...
    struct Case {
        const char* what;
        std::function<std::unique_ptr<Optimizer>(Variable)> make;
        std::array<double, 2> expected;
    };
    const std::vector<Case> cases = {
        {"AdamW",
         [](Variable p) {
             return std::make_unique<AdamW>(std::vector{p}, AdamWOptions{.lr = 0.1, .weight_decay = 0.1});
         },
         {0.890000002, 0.7811000039800006}},
        {"Adam",
         [](Variable p) { return std::make_unique<Adam>(std::vector{p}, AdamOptions{.lr = 0.1, .weight_decay = 0.1}); },
         {0.9000000016666666, 0.8000473404883316}},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        Variable p = param({1.0});
        auto opt = c.make(p);
        for (int s = 0; s < 2; ++s) {
            set_grad(p, {0.5});
            opt->step();
            CHECK(p.value().item() == Approx(c.expected[s]).epsilon(1e-13));
        }
    }
}

TEST_CASE("AdamW(params): weight_decay defaults to 1e-2, and with 0 it equals Adam bit for bit", "[optim][adam]") {
    Variable p0 = param({1.0});
    CHECK(AdamW({p0}).options().weight_decay == 1e-2);
    CHECK(Adam({p0}).options().weight_decay == 0);
    CHECK(AdamW({p0}).type_name() == "AdamW");

    Variable a = param({0.3, -0.7, 1.1}, DType::float32);
    Variable b = param({0.3, -0.7, 1.1}, DType::float32);
    Adam adam({a}, {.lr = 0.01});
    AdamW adamw({b}, {.lr = 0.01, .weight_decay = 0});
    for (int s = 0; s < 5; ++s) {
        set_grad(a, {0.1 * s, -0.2, 0.3 - s});
        set_grad(b, {0.1 * s, -0.2, 0.3 - s});
        adam.step();
        adamw.step();
    }
    CHECK(a.value().to_vector<float>() == b.value().to_vector<float>());
}

TEST_CASE("Adam.step() and AdamW.step(): the SIMD and multi-threaded float32 loop equals a plain loop bit for bit",
          "[optim][adam]") {
    // The plain loop is PyTorch's formula with PyTorch's grouping, in float.
    // 1003 elements end in a scalar tail; 70001 are split across threads.
    struct Case {
        const char* what;
        bool decoupled;
        double weight_decay;
    };
    const std::vector<Case> cases = {{"Adam", false, 0.0}, {"Adam L2", false, 0.05}, {"AdamW", true, 0.05}};
    for (const Case& c : cases) {
        for (int64_t n : {1003, 70001}) {
            INFO(c.what << ", " << n << " elements");
            core::Generator gen(3);
            Variable p(core::randn({n}, gen), true);
            std::vector<float> ref = p.value().to_vector<float>(), m(n, 0.0f), v(n, 0.0f);
            const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
            std::unique_ptr<Optimizer> opt;
            if (c.decoupled)
                opt = std::make_unique<AdamW>(std::vector{p}, AdamWOptions{.lr = lr, .weight_decay = c.weight_decay});
            else
                opt = std::make_unique<Adam>(std::vector{p}, AdamOptions{.lr = lr, .weight_decay = c.weight_decay});
            for (int t = 1; t <= 4; ++t) {
                p.set_grad(core::randn({n}, gen));
                const std::vector<float> g = p.grad().to_vector<float>();
                opt->step();
                const float step_size = static_cast<float>(lr / (1 - std::pow(b1, t)));
                const float bias2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(b2, t)));
                const float decay = static_cast<float>(1 - lr * c.weight_decay);
                for (int64_t i = 0; i < n; ++i) {
                    float x = ref[i], gi = g[i];
                    if (c.decoupled)
                        x = x * decay;
                    else if (c.weight_decay != 0)
                        gi = gi + static_cast<float>(c.weight_decay) * x;
                    m[i] = static_cast<float>(b1) * m[i] + static_cast<float>(1 - b1) * gi;
                    v[i] = static_cast<float>(b2) * v[i] + static_cast<float>(1 - b2) * gi * gi;
                    ref[i] = x - step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + static_cast<float>(eps));
                }
            }
            CHECK(p.value().to_vector<float>() == ref);
            CHECK(opt->state(0).slots[1].to_vector<float>() == v);
        }
    }
}

TEST_CASE("Adam(params, options): invalid options throw ValueError naming them", "[optim][adam]") {
    Variable p = param({1.0});
    CHECK_THROWS_WITH(Adam({p}, {.betas = {1.0, 0.999}}), Catch::Contains("Adam: betas[0] must be in [0, 1), got 1"));
    CHECK_THROWS_WITH(AdamW({p}, {.betas = {0.9, -0.1}}), Catch::Contains("AdamW: betas[1] must be in [0, 1)"));
    CHECK_THROWS_WITH(Adam({p}, {.eps = -1}), Catch::Contains("eps must be >= 0"));
    CHECK_THROWS_WITH(AdamW({p}, {.weight_decay = -1}), Catch::Contains("weight_decay must be >= 0"));
    CHECK_THROWS_WITH(Adam({p}, {.lr = std::nan("")}), Catch::Contains("learning rate must be finite"));
}

// ---- behaviour shared by every optimizer -------------------------------------------------------------

namespace {
struct Maker {
    const char* name;
    std::function<std::unique_ptr<Optimizer>(const NamedParameters&)> make;
};

const std::vector<Maker>& all_optimizers() {
    static const std::vector<Maker> makers = {
        {"SGD", [](const NamedParameters& p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.05}); }},
        {"SGD momentum",
         [](const NamedParameters& p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.02, .momentum = 0.9}); }},
        {"SGD nesterov",
         [](const NamedParameters& p) {
             return std::make_unique<SGD>(p, SGDOptions{.lr = 0.02, .momentum = 0.9, .nesterov = true});
         }},
        {"Adam", [](const NamedParameters& p) { return std::make_unique<Adam>(p, AdamOptions{.lr = 0.05}); }},
        {"AdamW",
         [](const NamedParameters& p) {
             return std::make_unique<AdamW>(p, AdamWOptions{.lr = 0.05, .weight_decay = 1e-4});
         }},
    };
    return makers;
}
}  // namespace

TEST_CASE("Optimizer::step(): each optimizer minimises Σ w(p - c)² to p = c", "[optim][optimizer]") {
    const std::vector<double> c = {1.0, -2.0, 3.0, 0.5};
    const std::vector<double> w = {1.0, 0.5, 2.0, 1.5};
    for (const Maker& m : all_optimizers()) {
        for (DType dtype : {DType::float64, DType::float32}) {
            INFO(m.name << ", " << core::dtype_name(dtype));
            Variable p = param({0, 0, 0, 0}, dtype);
            auto opt = m.make({{"p", p}});
            for (int s = 0; s < 1000; ++s) {
                opt->zero_grad();
                quadratic_backward(p, c, w);
                opt->step();
            }
            for (int64_t i = 0; i < 4; ++i) CHECK(p.value().at({i}) == Approx(c[i]).margin(2e-3));
        }
    }
}

TEST_CASE("Optimizer::step(): a parameter without a gradient and its state stay untouched", "[optim][optimizer]") {
    for (const Maker& m : all_optimizers()) {
        INFO(m.name);
        Variable a = param({1.0, 2.0});
        Variable b = param({3.0, 4.0});
        auto opt = m.make({{"a", a}, {"b", b}});
        for (int s = 0; s < 3; ++s) {
            set_grad(a, {0.5, -0.5});
            opt->step();
        }
        CHECK(b.value().to_vector() == std::vector<double>{3.0, 4.0});
        CHECK(opt->state(1).step == 0);
        CHECK(opt->state(1).slots.empty());  // no state allocated for it
        CHECK(opt->state(0).step == 3);
        CHECK(opt->steps() == 3);

        // zero_grad forgets the gradient: the next step moves nothing
        opt->zero_grad();
        CHECK_FALSE(a.grad().defined());
        const std::vector<double> before = a.value().to_vector();
        opt->step();
        CHECK(a.value().to_vector() == before);
        CHECK(opt->state(0).step == 3);
    }
}

TEST_CASE("Adam.step(): a parameter that first gets a gradient late starts its bias correction at t = 1",
          "[optim][adam]") {
    Variable a = param({0.0});
    Variable b = param({0.0});
    Adam opt({a, b}, {.lr = 0.1});
    for (int s = 0; s < 4; ++s) {
        set_grad(a, {1.0});
        opt.step();
    }
    set_grad(b, {-3.0});
    opt.step();
    CHECK(opt.state(1).step == 1);
    CHECK(b.value().item() == Approx(0.1).margin(1e-8));  // a first step: lr·sign(-g)
}

TEST_CASE("Optimizer::step(): the update is in place, so every handle to the parameter sees it", "[optim][optimizer]") {
    nn::Module model("Toy");
    Variable w = model.register_parameter("w", core::tensor({1, 2, 3, 4}, {2, 2}));
    const float* storage = w.value().data<float>();
    SGD opt(model.named_parameters(), {.lr = 0.5});
    w.set_grad(core::ones({2, 2}));
    opt.step();
    CHECK(model.named_parameters()[0].second.value().to_vector() == std::vector<double>{0.5, 1.5, 2.5, 3.5});
    CHECK(w.value().data<float>() == storage);
}

TEST_CASE("Optimizer::step(): a non-contiguous gradient (an expanded view) is read correctly", "[optim][optimizer]") {
    Variable p = param({1.0, 2.0, 3.0});
    SGD opt({p}, {.lr = 1.0});
    p.set_grad(core::scalar(0.25, DType::float64).expand({3}));  // stride 0
    REQUIRE_FALSE(p.grad().is_contiguous());
    opt.step();
    CHECK(p.value().to_vector() == std::vector<double>{0.75, 1.75, 2.75});
}

TEST_CASE("Optimizer(params): bad parameter lists and gradients throw ValueError naming the parameter",
          "[optim][optimizer]") {
    Variable p = param({1.0, 2.0});
    CHECK_THROWS_WITH(SGD(std::vector<Variable>{}), Catch::Contains("SGD: got an empty parameter list"));
    CHECK_THROWS_WITH(Adam({p, p}), Catch::Contains("Adam: parameter 1 appears more than once"));
    Variable ids(core::tensor({1, 2}, {2}, DType::int64));
    CHECK_THROWS_WITH(Adam(NamedParameters{{"w", p}, {"ids", ids}}),
                      Catch::Contains("parameter 1 (ids) has dtype int64"));
    Variable transposed(core::ones({2, 3}).transpose(0, 1), true);
    CHECK_THROWS_WITH(SGD({transposed}), Catch::Contains("parameter 0 of shape (3x2) is not contiguous"));
    CHECK_THROWS_WITH(SGD({Variable()}), Catch::Contains("parameter 0 is an undefined Variable"));

    // a float32 gradient for a float64 parameter (set_grad checks only the shape)
    SGD opt(NamedParameters{{"layer.weight", p}});
    p.set_grad(core::ones({2}, DType::float32));
    CHECK_THROWS_WITH(opt.step(), Catch::Contains("SGD.step: parameter 0 (layer.weight) has dtype float64 but its "
                                                  "gradient has dtype float32"));
    CHECK_THROWS_WITH(opt.set_lr(-0.1), Catch::Contains("learning rate must be finite and >= 0, got -0.1"));
    opt.set_lr(0.25);
    CHECK(opt.lr() == 0.25);
    CHECK_THROWS_AS(opt.state(1), IndexError);
    CHECK_THROWS_WITH(opt.state(1), Catch::Contains("SGD.state: parameter index 1 out of range for 1 parameters"));
}

// ---- state dict ---------------------------------------------------------------------------------------

namespace {

// A small model with parameters of several shapes, trained on a fixed
// quadratic whose gradients change with the parameters.
struct Toy {
    nn::Module module{"Toy"};
    Toy() {
        core::Generator gen(7);
        module.register_parameter("weight", core::randn({3, 4}, gen));
        module.register_parameter("bias", core::randn({4}, gen));
        module.register_parameter("scale", core::randn({2}, gen));
    }
    void backward() const {
        for (const auto& [name, p] : module.named_parameters()) {
            // loss_p = Σ (p - 0.3)² · (1 + p²)  (not quadratic, so the gradients keep changing)
            Variable d = autograd::sub(p, 0.3);
            autograd::sum(autograd::mul(autograd::mul(d, d), autograd::add(autograd::mul(p, p), 1.0))).backward();
        }
    }
};

void train(Toy& toy, Optimizer& opt, const LRSchedule& schedule, int steps) {
    for (int s = 0; s < steps; ++s) {
        opt.zero_grad();
        toy.backward();
        schedule.apply(opt, opt.steps());
        opt.step();
    }
}

}  // namespace

TEST_CASE("Optimizer::load_state_dict(state_dict()): 5 + 5 resumed steps equal 10 uninterrupted ones bit for bit",
          "[optim][state]") {
    using Make = std::function<std::unique_ptr<Optimizer>(const NamedParameters&)>;
    const std::vector<std::pair<const char*, Make>> makers = {
        {"SGD nesterov",
         [](const NamedParameters& p) {
             return std::make_unique<SGD>(p, SGDOptions{.lr = 0.01, .momentum = 0.9, .nesterov = true});
         }},
        {"SGD dampening",
         [](const NamedParameters& p) {
             return std::make_unique<SGD>(
                 p, SGDOptions{.lr = 0.01, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01});
         }},
        {"Adam", [](const NamedParameters& p) { return std::make_unique<Adam>(p, AdamOptions{.weight_decay = 0.01}); }},
        {"AdamW",
         [](const NamedParameters& p) { return std::make_unique<AdamW>(p, AdamWOptions{.weight_decay = 0.1}); }},
    };
    const NoamLR schedule({.d_model = 16, .warmup = 4, .factor = 0.5});
    for (const auto& [name, make] : makers) {
        INFO(name);
        Toy straight;
        auto opt = make(straight.module.named_parameters());
        train(straight, *opt, schedule, 10);

        Toy first;
        auto opt1 = make(first.module.named_parameters());
        train(first, *opt1, schedule, 5);
        const nn::StateDict model_state = first.module.state_dict();
        const nn::StateDict opt_state = opt1->state_dict();

        Toy resumed;
        resumed.module.load_state_dict(model_state);
        auto opt2 = make(resumed.module.named_parameters());
        opt2->load_state_dict(opt_state);
        CHECK(opt2->steps() == 5);
        CHECK(opt2->lr() == opt1->lr());
        train(resumed, *opt2, schedule, 5);

        for (const auto& [key, value] : straight.module.state_dict()) {
            INFO(key);
            CHECK(resumed.module.state_dict().at(key).to_vector<float>() == value.to_vector<float>());
        }
        // and the optimizer states agree too
        const nn::StateDict a = opt->state_dict(), b = opt2->state_dict();
        REQUIRE(a.size() == b.size());
        for (const auto& [key, value] : a) {
            INFO(key);
            CHECK(b.at(key).to_vector() == value.to_vector());
        }
    }
}

TEST_CASE("Optimizer::allocate_state(): zero slots for every parameter up front, the same steps as lazy allocation",
          "[optim][state]") {
    const NoamLR schedule({.d_model = 16, .warmup = 4, .factor = 0.5});
    Toy lazy, eager;
    Adam lazy_opt(lazy.module.named_parameters(), AdamOptions{.weight_decay = 0.01});
    Adam eager_opt(eager.module.named_parameters(), AdamOptions{.weight_decay = 0.01});
    eager_opt.allocate_state();
    for (size_t i = 0; i < eager_opt.parameters().size(); ++i) {
        const ParamState& st = eager_opt.state(i);
        REQUIRE(st.slots.size() == 2);  // exp_avg, exp_avg_sq
        CHECK(st.step == 0);
        for (const Tensor& slot : st.slots) {
            CHECK(slot.shape() == eager_opt.parameters()[i].shape());
            CHECK(slot.dtype() == eager_opt.parameters()[i].dtype());
            for (double v : slot.to_vector()) CHECK(v == 0.0);
        }
        CHECK(lazy_opt.state(i).slots.empty());
    }
    // a second call keeps the slots it made
    const void* first = eager_opt.state(0).slots[0].raw_data();
    eager_opt.allocate_state();
    CHECK(eager_opt.state(0).slots[0].raw_data() == first);
    // the state dicts agree before any step (slots not yet made are saved as zeros)
    for (const auto& [key, value] : lazy_opt.state_dict()) {
        INFO(key);
        CHECK(eager_opt.state_dict().at(key).to_vector() == value.to_vector());
    }

    train(lazy, lazy_opt, schedule, 4);
    train(eager, eager_opt, schedule, 4);
    for (const auto& [key, value] : lazy.module.state_dict()) {
        INFO(key);
        CHECK(eager.module.state_dict().at(key).to_vector<float>() == value.to_vector<float>());
    }
    for (const auto& [key, value] : lazy_opt.state_dict()) {
        INFO(key);
        CHECK(eager_opt.state_dict().at(key).to_vector() == value.to_vector());
    }
}

TEST_CASE("Optimizer::state_dict(): keys carry the parameter index and name, scalars are 0-d", "[optim][state]") {
    Toy toy;
    Adam opt(toy.module.named_parameters(), {.lr = 0.01});
    // before any step the slots are saved as zeros, so every key is present
    nn::StateDict fresh = opt.state_dict();
    CHECK(fresh.at("state.2.scale.exp_avg").to_vector() == std::vector<double>{0, 0});
    toy.backward();
    opt.step();
    const nn::StateDict state = opt.state_dict();
    std::vector<std::string> keys;
    for (const auto& [key, _] : state) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"lr", "param_count", "state.0.weight.exp_avg", "state.0.weight.exp_avg_sq",
                                           "state.0.weight.step", "state.1.bias.exp_avg", "state.1.bias.exp_avg_sq",
                                           "state.1.bias.step", "state.2.scale.exp_avg", "state.2.scale.exp_avg_sq",
                                           "state.2.scale.step", "step"});
    CHECK(state.at("lr").dim() == 0);
    CHECK(state.at("lr").dtype() == DType::float64);
    CHECK(state.at("lr").item() == 0.01);
    CHECK(state.at("step").dtype() == DType::int64);
    CHECK(state.at("step").item() == 1);
    CHECK(state.at("param_count").item() == 3);
    CHECK(state.at("state.0.weight.exp_avg").shape() == core::Shape{3, 4});
    // a copy: changing it does not change the optimizer
    core::fill_(state.at("state.1.bias.exp_avg"), 42.0);
    CHECK(opt.state(1).slots[0].at({0}) != 42.0);

    Variable p = param({1.0});
    SGD sgd({p}, {.momentum = 0.9});
    std::vector<std::string> sgd_keys;
    for (const auto& [key, _] : sgd.state_dict()) sgd_keys.push_back(key);
    CHECK(sgd_keys == std::vector<std::string>{"lr", "param_count", "state.0.momentum_buffer", "state.0.step", "step"});
}

TEST_CASE(
    "Optimizer::load_state_dict(): a dict that does not fit is a ValueError listing every problem, and "
    "changes nothing",
    "[optim][state]") {
    Variable a = param({1.0, 2.0});
    Variable b = param({3.0});
    Variable c = param({4.0, 5.0, 6.0});
    Adam three({a, b, c}, {.lr = 0.5});
    set_grad(a, {1, 1});
    set_grad(b, {1});
    set_grad(c, {1, 1, 1});
    three.step();

    Variable x = param({1.0, 2.0});
    Variable y = param({3.0, 4.0});
    Adam two({x, y}, {.lr = 0.01});
    set_grad(x, {0.5, 0.5});
    two.step();
    const nn::StateDict before = two.state_dict();

    auto unchanged = [&] {
        CHECK(two.lr() == 0.01);
        CHECK(two.steps() == 1);
        const nn::StateDict now = two.state_dict();
        for (const auto& [key, value] : before) CHECK(now.at(key).to_vector() == value.to_vector());
    };

    SECTION("a different parameter count and shapes") {
        try {
            two.load_state_dict(three.state_dict());
            FAIL("no error");
        } catch (const ValueError& e) {
            const std::string message = e.what();
            CHECK_THAT(message, Catch::Contains("Adam.load_state_dict: the state dict does not fit this optimizer"));
            CHECK_THAT(message, Catch::Contains("the state dict is for 3 parameters, this Adam has 2"));
            CHECK_THAT(message, Catch::Contains("unexpected: state.2.exp_avg, state.2.exp_avg_sq, state.2.step"));
            CHECK_THAT(message, Catch::Contains("wrong shape: state.1.exp_avg (expected (2), got (1))"));
        }
        unchanged();
    }
    SECTION("an SGD dict into Adam") {
        SGD sgd({x, y}, {.momentum = 0.9});
        REQUIRE_THROWS_WITH(two.load_state_dict(sgd.state_dict()),
                            Catch::Contains("missing: state.0.exp_avg, state.0.exp_avg_sq") &&
                                Catch::Contains("unexpected: state.0.momentum_buffer, state.1.momentum_buffer"));
        unchanged();
    }
    SECTION("named keys do not match unnamed ones") {
        Adam named(NamedParameters{{"x", x}, {"y", y}});
        REQUIRE_THROWS_WITH(two.load_state_dict(named.state_dict()),
                            Catch::Contains("missing: state.0.step, state.0.exp_avg,") &&
                                Catch::Contains("unexpected: state.0.x.exp_avg"));
        unchanged();
    }
    SECTION("missing and bad scalars") {
        nn::StateDict broken = before;
        broken.erase("lr");
        broken["step"] = core::scalar(-2, DType::int64);
        broken["state.1.step"] = core::tensor({1, 2}, {2}, DType::int64);
        REQUIRE_THROWS_WITH(two.load_state_dict(broken),
                            Catch::Contains("step must be a non-negative integer, got -2") &&
                                Catch::Contains("missing: lr") &&
                                Catch::Contains("wrong shape: state.1.step (expected a scalar, got (2))"));
        unchanged();
    }
    SECTION("a float32 dict loads into float64 parameters, converted") {
        nn::StateDict as_float;
        for (const auto& [key, value] : before)
            as_float[key] = core::is_floating(value.dtype()) && value.dim() > 0 ? value.to(DType::float32) : value;
        Adam fresh({x, y});
        fresh.load_state_dict(as_float);
        CHECK(fresh.state(0).slots[0].dtype() == DType::float64);
        CHECK(fresh.state(0).slots[0].at({0}) == Approx(before.at("state.0.exp_avg").at({0})).epsilon(1e-6));
        CHECK(fresh.state(0).step == 1);
        CHECK(fresh.state(1).step == 0);
    }
}

// ---- gradient clipping ------------------------------------------------------------------------------

TEST_CASE("clip_grad_norm(params, max_norm, options): returns the total norm and scales only when above",
          "[optim][clip]") {
    // gradients (3, 4) and (12): ‖g‖₂ = √(9 + 16 + 144) = 13, ‖g‖₁ = 19, ‖g‖∞ = 12, ‖g‖₃ = (27 + 64 + 1728)^(1/3)
    struct Case {
        double norm_type, max_norm, expected_norm;
        bool scales;
    };
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<Case> cases = {
        {2, 1.0, 13.0, true},   {2, 100.0, 13.0, false},  {1, 1.0, 19.0, true},
        {inf, 6.0, 12.0, true}, {inf, 12.5, 12.0, false}, {3, 1.0, std::cbrt(1819.0), true},
    };
    for (const Case& c : cases) {
        for (DType dtype : {DType::float64, DType::float32}) {
            INFO("norm_type " << c.norm_type << ", max_norm " << c.max_norm << ", " << core::dtype_name(dtype));
            Variable a = param({0, 0}, dtype);
            Variable b = param({0}, dtype);
            Variable no_grad = param({0, 0, 0}, dtype);
            set_grad(a, {3, 4});
            set_grad(b, {12});
            const Tensor old_a = a.grad();
            const double norm = clip_grad_norm({a, b, no_grad}, c.max_norm, {.norm_type = c.norm_type});
            CHECK(norm == Approx(c.expected_norm).epsilon(1e-12));
            const double factor = c.scales ? c.max_norm / (c.expected_norm + 1e-6) : 1.0;
            const double eps = dtype == DType::float64 ? 1e-12 : 1e-6;
            CHECK(a.grad().at({0}) == Approx(3 * factor).epsilon(eps));
            CHECK(a.grad().at({1}) == Approx(4 * factor).epsilon(eps));
            CHECK(b.grad().at({0}) == Approx(12 * factor).epsilon(eps));
            CHECK(a.grad().shares_storage(old_a) == !c.scales);  // replaced, never scaled in place
            CHECK(old_a.to_vector() == std::vector<double>{3, 4});
            CHECK_FALSE(no_grad.grad().defined());
            if (c.scales)
                CHECK(clip_grad_norm({a, b}, c.max_norm, {.norm_type = c.norm_type}) ==
                      Approx(c.max_norm).epsilon(1e-6));
        }
    }
}

TEST_CASE("clip_grad_norm(params, max_norm): a gradient shared with a parameter outside the list is unaffected",
          "[optim][clip]") {
    Variable a = param({0, 0});
    Variable outside = param({0, 0});
    const Tensor shared = core::tensor({30, 40}, {2}, DType::float64);
    a.set_grad(shared);
    outside.set_grad(shared);  // the same storage, as backward may hand out
    CHECK(clip_grad_norm({a}, 5.0) == Approx(50.0));
    CHECK(a.grad().at({0}) == Approx(3.0).epsilon(1e-6));
    CHECK(outside.grad().to_vector() == std::vector<double>{30, 40});
    CHECK(outside.grad().shares_storage(shared));
}

TEST_CASE(
    "clip_grad_norm(params, max_norm, {.error_if_nonfinite}): NaN or Inf throws naming the first bad "
    "parameter, or passes through",
    "[optim][clip]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (double bad : {nan, inf}) {
        INFO(bad);
        Variable w = param({1, 2});
        Variable b = param({3, bad});
        set_grad(w, {1, 2});
        set_grad(b, {3, bad});
        const NamedParameters named = {{"layer.weight", w}, {"layer.bias", b}};
        CHECK_THROWS_AS(clip_grad_norm(named, 1.0, {.error_if_nonfinite = true}), ValueError);
        CHECK_THROWS_WITH(clip_grad_norm(named, 1.0, {.error_if_nonfinite = true}),
                          Catch::Contains("clip_grad_norm: the total norm of order 2 of the gradients is") &&
                              Catch::Contains("parameter 1 (layer.bias)"));
        CHECK_THROWS_WITH(clip_grad_norm({w, b}, 1.0, {.norm_type = inf, .error_if_nonfinite = true}),
                          Catch::Contains("is that of parameter 1, shape (2)"));
        // without the flag: the norm comes back and the gradients stay as they are
        const double norm = clip_grad_norm(named, 1.0);
        CHECK_FALSE(std::isfinite(norm));
        CHECK(w.grad().to_vector() == std::vector<double>{1, 2});
    }
    // a finite but huge float64 gradient overflows the sum of squares
    Variable big = param({0, 0});
    set_grad(big, {1e200, 1e200});
    CHECK_THROWS_WITH(clip_grad_norm({big}, 1.0, {.error_if_nonfinite = true}),
                      Catch::Contains("no single gradient holds one"));
    CHECK_THROWS_WITH(clip_grad_norm({big}, 1.0, {.norm_type = 0}), Catch::Contains("norm_type must be > 0"));
    CHECK_THROWS_WITH(clip_grad_norm({big}, -1.0), Catch::Contains("max_norm must be >= 0, got -1"));
}

// ---- schedules ------------------------------------------------------------------------------------------

TEST_CASE("NoamLR({d_model, warmup, factor}).lr_at(step): peaks at step = warmup with factor·d^-0.5·warmup^-0.5",
          "[optim][schedule]") {
    const NoamLR noam({.d_model = 512, .warmup = 4000, .factor = 2.0});
    const double peak = 2.0 / std::sqrt(512.0) / std::sqrt(4000.0);
    struct Case {
        int64_t step;
        double expected;
    };
    const std::vector<Case> cases = {
        {0, 2.0 / std::sqrt(512.0) * std::pow(4000.0, -1.5)},  // step 0 counts as 1
        {1, 2.0 / std::sqrt(512.0) * std::pow(4000.0, -1.5)},
        {2000, peak / 2},  // linear warm-up: half way, half the peak
        {4000, peak},
        {16000, peak / 2},  // 1/√step after: four times the steps, half the rate
    };
    for (const Case& c : cases) {
        INFO("step " << c.step);
        CHECK(noam.lr_at(c.step) == Approx(c.expected).epsilon(1e-12));
    }
    CHECK(noam.lr_at(3999) < noam.lr_at(4000));
    CHECK(noam.lr_at(4001) < noam.lr_at(4000));
    CHECK_THROWS_WITH(NoamLR({.d_model = 0}), Catch::Contains("NoamLR: d_model must be > 0, got 0"));
    CHECK_THROWS_WITH(NoamLR({.warmup = -1}), Catch::Contains("warmup must be > 0"));
}

TEST_CASE("CosineLR({base_lr, warmup_steps, total_steps, min_lr}).lr_at(step): warm-up, cosine, floor",
          "[optim][schedule]") {
    const CosineLR cosine({.base_lr = 1e-3, .warmup_steps = 10, .total_steps = 110, .min_lr = 1e-5});
    struct Case {
        int64_t step;
        double expected;
    };
    const std::vector<Case> cases = {
        {0, 1e-4},
        {1, 1e-4},
        {5, 5e-4},
        {10, 1e-3},
        {60, (1e-3 + 1e-5) / 2},  // half way down the cosine
        {35, 1e-5 + (1e-3 - 1e-5) * (1 + std::cos(std::numbers::pi / 4)) / 2},
        {110, 1e-5},
        {1000, 1e-5},
    };
    for (const Case& c : cases) {
        INFO("step " << c.step);
        CHECK(cosine.lr_at(c.step) == Approx(c.expected).epsilon(1e-12));
    }
    for (int64_t s = 10; s < 110; ++s) CHECK(cosine.lr_at(s + 1) < cosine.lr_at(s));
    // without warm-up the decay starts at once
    const CosineLR no_warmup({.base_lr = 1.0, .warmup_steps = 0, .total_steps = 4, .min_lr = 0});
    CHECK(no_warmup.lr_at(2) == Approx(0.5));
    CHECK(no_warmup.lr_at(4) == 0.0);
    CHECK_THROWS_WITH(CosineLR({.warmup_steps = 10, .total_steps = 5}),
                      Catch::Contains("CosineLR: total_steps (5) must be >= max(warmup_steps, 1)"));
    CHECK_THROWS_WITH(CosineLR({.min_lr = -1}), Catch::Contains("min_lr must be finite and >= 0"));
}

TEST_CASE("LRSchedule::apply(opt, step) sets the optimizer's learning rate, ConstantLR never changes it",
          "[optim][schedule]") {
    Variable p = param({1.0});
    SGD opt({p}, {.lr = 0.1});
    const NoamLR noam({.d_model = 64, .warmup = 10});
    noam.apply(opt, 10);
    CHECK(opt.lr() == Approx(1 / std::sqrt(640.0)));
    const ConstantLR constant(0.003);
    constant.apply(opt, 123456);
    CHECK(opt.lr() == 0.003);
    CHECK(constant.lr_at(0) == 0.003);
    CHECK_THROWS_WITH(ConstantLR(-1), Catch::Contains("ConstantLR: lr must be finite and >= 0, got -1"));
}
