// gradcheck of every basic layer in float64 (module.to(DType::float64)),
// with respect to its input and its parameters. One table lists the layers;
// each entry builds its layer and says which inputs and which parameter
// members gradcheck differentiates.
#include "nn/init.hpp"
#include "nn/layers.hpp"

#include "autograd/autograd.hpp"
#include "autograd/gradcheck_inputs.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::nn;
using autograd::GradcheckResult;
using autograd::Variable;
using core::DType;
using core::Tensor;

namespace {

using Inputs = std::vector<Variable>;
using testing::check_layer;

/// A float64 leaf with N(0, 1) values that requires a gradient.
Variable input(const core::Shape& shape, core::Generator& gen) { return testing::randn_leaf(shape, gen); }

// Parameters start at 1 and 0 in the norms; random values make every term of
// the gradient visible.
void randomise(const std::vector<Variable*>& members, core::Generator& gen) {
    for (Variable* m : members) init::uniform_(*m, 0.5, 1.5, gen);
}

struct LayerCase {
    const char* signature;
    std::function<GradcheckResult(core::Generator&)> run;
};

const std::vector<LayerCase>& layer_cases() {
    static const std::vector<LayerCase> cases = {
        {"Linear(3 -> 2)(x) of (4,3), w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             Linear layer({.in_features = 3, .out_features = 2}, gen);
             layer.to(DType::float64);
             return check_layer({input({4, 3}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"Linear(3 -> 2, no bias)(x) of (4,3), w.r.t. x, weight",
         [](core::Generator& gen) {
             Linear layer({.in_features = 3, .out_features = 2, .bias = false}, gen);
             layer.to(DType::float64);
             return check_layer({input({4, 3}, gen)}, {&layer.weight}, [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"Linear(4 -> 3)(x) of (2,3,4), 3-D input, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             Linear layer({.in_features = 4, .out_features = 3}, gen);
             layer.to(DType::float64);
             return check_layer({input({2, 3, 4}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"Linear(4 -> 2, no bias)(x) of (2,3,4), 3-D input, w.r.t. x, weight",
         [](core::Generator& gen) {
             Linear layer({.in_features = 4, .out_features = 2, .bias = false}, gen);
             layer.to(DType::float64);
             return check_layer({input({2, 3, 4}, gen)}, {&layer.weight},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"Linear(3 -> 2)(x) of a transposed (4,3) view, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             Linear layer({.in_features = 3, .out_features = 2}, gen);
             layer.to(DType::float64);
             const Variable x(core::randn({3, 4}, gen, DType::float64).transpose(0, 1), true);
             return check_layer({x}, {&layer.weight, &layer.bias}, [&](const Inputs& in) { return layer(in[0]); });
         }},
        // The padding row's zero gradient is a convention, not a derivative
        // (perturbing that row does change the output), so gradcheck runs on
        // ids that avoid it; test_layers.cpp checks the zero gradient itself.
        {"Embedding(6, 3)(ids) of (2,3) ids, w.r.t. weight",
         [](core::Generator& gen) {
             Embedding layer({.num_embeddings = 6, .embedding_dim = 3}, gen);
             layer.to(DType::float64);
             const Tensor ids = core::from_vector(std::vector<int64_t>{0, 5, 2, 2, 3, 0}, {2, 3});
             return check_layer({}, {&layer.weight}, [&](const Inputs&) { return layer(ids); });
         }},
        {"Embedding(6, 3, padding_idx 1)(ids) of (2,3) ids without the padding id, w.r.t. weight",
         [](core::Generator& gen) {
             Embedding layer({.num_embeddings = 6, .embedding_dim = 3, .padding_idx = 1}, gen);
             layer.to(DType::float64);
             const Tensor ids = core::from_vector(std::vector<int64_t>{4, 5, 2, 2, 3, 0}, {2, 3});
             return check_layer({}, {&layer.weight}, [&](const Inputs&) { return layer(ids); });
         }},
        {"LayerNorm(4)(x) of (2,3,4), fused, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             LayerNorm layer({.normalized_shape = 4});
             layer.to(DType::float64);
             randomise({&layer.weight, &layer.bias}, gen);
             return check_layer({input({2, 3, 4}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"LayerNorm(4, no affine)(x) of (3,4), fused, w.r.t. x",
         [](core::Generator& gen) {
             LayerNorm layer({.normalized_shape = 4, .elementwise_affine = false});
             layer.to(DType::float64);
             return check_layer({input({3, 4}, gen)}, {}, [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"LayerNorm(4, unbiased_std, eps 1e-6)(x) of (2,3,4), seed 004, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             LayerNorm layer({.normalized_shape = 4, .eps = 1e-6, .unbiased_std = true});
             layer.to(DType::float64);
             randomise({&layer.weight, &layer.bias}, gen);
             return check_layer({input({2, 3, 4}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"LayerNorm(4, unbiased_std, no affine)(x) of (3,4), seed 004, w.r.t. x",
         [](core::Generator& gen) {
             LayerNorm layer({.normalized_shape = 4, .eps = 1e-6, .elementwise_affine = false, .unbiased_std = true});
             layer.to(DType::float64);
             return check_layer({input({3, 4}, gen)}, {}, [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"BatchNorm1d(3)(x) of (4,3), training, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             BatchNorm1d layer({.num_features = 3});
             layer.to(DType::float64);
             randomise({&layer.weight, &layer.bias}, gen);
             return check_layer({input({4, 3}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"BatchNorm1d(2)(x) of (3,2,4), training, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             BatchNorm1d layer({.num_features = 2});
             layer.to(DType::float64);
             randomise({&layer.weight, &layer.bias}, gen);
             return check_layer({input({3, 2, 4}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"BatchNorm1d(2)(x) of (3,2,4), eval with running statistics, w.r.t. x, weight, bias",
         [](core::Generator& gen) {
             BatchNorm1d layer({.num_features = 2});
             layer.to(DType::float64);
             randomise({&layer.weight, &layer.bias}, gen);
             layer.set_buffer("running_mean", core::tensor({0.3, -0.2}, {2}, DType::float64));
             layer.set_buffer("running_var", core::tensor({0.5, 2.0}, {2}, DType::float64));
             layer.eval();
             return check_layer({input({3, 2, 4}, gen)}, {&layer.weight, &layer.bias},
                                [&](const Inputs& in) { return layer(in[0]); });
         }},
        {"PositionalEncoding(4, dropout 0)(X, start 2) of (2,3,4), w.r.t. X",
         [](core::Generator& gen) {
             PositionalEncoding layer({.num_hiddens = 4, .dropout = 0.0, .max_len = 10}, gen);
             return check_layer({input({2, 3, 4}, gen)}, {}, [&](const Inputs& in) { return layer(in[0], 2); });
         }},
        // Each call of f must draw the same mask, so f reseeds the dropout's generator.
        {"Dropout(0.5)(x) of (3,4), training, same mask on every call, w.r.t. x",
         [](core::Generator& gen) {
             auto mask_gen = std::make_shared<core::Generator>(0);
             auto layer = std::make_shared<Dropout>(Dropout::Options{.p = 0.5}, *mask_gen);
             return check_layer({input({3, 4}, gen)}, {}, [layer, mask_gen](const Inputs& in) {
                 mask_gen->manual_seed(21);
                 return (*layer)(in[0]);
             });
         }},
        {"Sequential(Linear(3 -> 4), ReLU, Linear(4 -> 2))(x) of (5,3), w.r.t. x and all four parameters",
         [](core::Generator& gen) {
             auto first = std::make_shared<Linear>(Linear::Options{.in_features = 3, .out_features = 4}, gen);
             auto last = std::make_shared<Linear>(Linear::Options{.in_features = 4, .out_features = 2}, gen);
             Sequential seq;
             seq.push_back(first);
             seq.push_back(std::make_shared<ReLU>());
             seq.push_back(last);
             seq.to(DType::float64);
             // with this seed no pre-activation lies within the finite-difference
             // step 1e-6 of ReLU's kink at 0, so the derivative exists everywhere probed
             return check_layer({input({5, 3}, gen)}, {&first->weight, &first->bias, &last->weight, &last->bias},
                                [&](const Inputs& in) { return seq(in[0]); });
         }},
    };
    return cases;
}

}  // namespace

TEST_CASE("gradcheck of every basic layer w.r.t. its input and parameters (float64)", "[nn][layers][gradcheck]") {
    for (const LayerCase& c : layer_cases()) {
        DYNAMIC_SECTION(c.signature) {
            core::Generator gen(2024);
            const GradcheckResult result = c.run(gen);
            INFO(result.report);
            CHECK(result);
        }
    }
}

TEST_CASE("check_layer(): perturbations reach the parameters, and the layer's own handles come back",
          "[nn][layers][gradcheck]") {
    core::Generator gen(3);
    Linear layer({.in_features = 2, .out_features = 2}, gen);
    layer.to(DType::float64);
    const Variable weight = layer.weight;
    REQUIRE(check_layer({input({3, 2}, gen)}, {&layer.weight, &layer.bias},
                        [&](const Inputs& in) { return layer(in[0]); }));
    CHECK(layer.weight.impl() == weight.impl());
    CHECK(layer.named_parameters()[0].second.impl() == weight.impl());

    // a forward that cuts the weight out of the graph must fail: the numerical
    // Jacobian sees the perturbed weight (the swap works), backward sends nothing
    const GradcheckResult broken =
        check_layer({input({3, 2}, gen)}, {&layer.weight, &layer.bias},
                    [&](const Inputs& in) { return autograd::linear(in[0], layer.weight.detach(), layer.bias); });
    CHECK_FALSE(broken);
    CHECK(broken.input == 1);  // the weight
    CHECK(layer.weight.impl() == weight.impl());
}
