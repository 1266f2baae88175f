// Optimisers against torch.optim: ten steps from the same start with the same
// gradients (tests/fixtures/<name>.safetensors, made by make_fixtures.py),
// comparing both parameters after every step. The parameter b has no gradient
// at step 4, so that step skips b entirely and b's own step count, which
// Adam's bias correction uses, stays one behind w's from then on.
//
// Tolerance: |a - b| <= 1e-5 + 1e-5·|b| (float32 on both sides).
#include "autograd/variable.hpp"
#include "core/core.hpp"
#include "fixtures/fixture.hpp"
#include "optim/optim.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::optim;
using testing::Fixture;

namespace {

constexpr double kTol = 1e-5;

struct OptimizerCase {
    const char* name;         // tests/fixtures/<name>.safetensors
    const char* description;  // the fixture's metadata: the torch.optim call it ran
    std::function<std::unique_ptr<Optimizer>(const NamedParameters&)> make;
};

const std::vector<OptimizerCase> kCases = {
    {"adam", "torch.optim.Adam(lr=0.01)",
     [](const NamedParameters& ps) { return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01}); }},
    {"adamw", "torch.optim.AdamW(lr=0.01, betas=(0.9, 0.98), weight_decay=0.1)",
     [](const NamedParameters& ps) {
         return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01, .betas = {0.9, 0.98}, .weight_decay = 0.1});
     }},
    {"sgd_momentum", "torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01)",
     [](const NamedParameters& ps) {
         return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
     }},
    {"sgd_nesterov", "torch.optim.SGD(lr=0.1, momentum=0.9, nesterov=True)",
     [](const NamedParameters& ps) {
         return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
     }},
};

}  // namespace

TEST_CASE(
    "Adam, AdamW, SGD (momentum, Nesterov).step(): ten steps match torch.optim, including a step where one "
    "parameter has no gradient",
    "[optim][fixtures]") {
    for (const OptimizerCase& c : kCases) {
        SECTION(c.name) {
            Fixture fx(c.name);
            // the table's options are the ones the fixture was made with
            REQUIRE(fx.metadata("description") == c.description);
            const int steps = std::stoi(fx.metadata("steps"));
            REQUIRE(steps == 10);

            NamedParameters params;
            for (const std::string& name : fx.names_after("param."))
                params.emplace_back(name, Variable(fx.tensor("param." + name).clone(), /*requires_grad=*/true));
            REQUIRE(params.size() == 2);
            std::unique_ptr<Optimizer> optimizer = c.make(params);

            for (int k = 1; k <= steps; ++k) {
                optimizer->zero_grad();
                for (const auto& [name, p] : params) {
                    const std::string key = "input.grad.step" + std::to_string(k) + "." + name;
                    if (fx.has(key)) p.set_grad(fx.tensor(key).clone());
                }
                optimizer->step();
                for (const auto& [name, p] : params) {
                    const std::string key = "output.step" + std::to_string(k) + "." + name;
                    testing::check_close(std::string(c.name) + " after step " + std::to_string(k) + ": " + name,
                                         p.value(), fx.tensor(key), kTol);
                }
            }
            // b sat out one step
            CHECK(fx.has("input.grad.step3.b"));
            CHECK_FALSE(fx.has("input.grad.step4.b"));
        }
    }
}
