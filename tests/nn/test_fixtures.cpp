// Seed 000's layers against PyTorch: for each fixture in tests/fixtures/
// (made by make_fixtures.py from d2l's code as the seed writes it), build the
// same layer here, load PyTorch's parameters under d2l's names (strictly, so
// every name must match), run the forward pass in training mode with dropout
// 0, compare the output, then backpropagate the same scalar loss
// sum(output * upstream) and compare the gradient of every float input and
// every parameter.
//
// Tolerances (float32 on both sides, different summation orders):
//   outputs    |a - b| <= 1e-5 + 1e-5·|b|
//   gradients  |a - b| <= 1e-4 + 1e-4·|b|
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "fixtures/fixture.hpp"
#include "nn/loss.hpp"
#include "nn/transformer.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::nn;
using core::Tensor;
using testing::Fixture;

namespace {

constexpr double kOutputTol = 1e-5;
constexpr double kGradTol = 1e-4;

// The sizes make_fixtures.py uses: D 8, 2 heads, FFN 16, 2 layers, vocabularies 13 and 17.
TransformerOptions tiny() {
    return {.key_size = 8,
            .query_size = 8,
            .value_size = 8,
            .num_hiddens = 8,
            .norm_shape = 8,
            .ffn_num_input = 8,
            .ffn_num_hiddens = 16,
            .num_heads = 2,
            .num_layers = 2,
            .dropout = 0.0};
}

// PyTorch's parameters, loaded strictly (a name d2l uses that tformer does
// not, or the reverse, is an error listing the names); training mode.
template <class M>
std::shared_ptr<M> loaded(const Fixture& fx, std::shared_ptr<M> module) {
    module->load_state_dict(fx.params());
    module->train();
    return module;
}

// What one case gives back: the module (null for a plain function) and its output.
struct Run {
    std::shared_ptr<Module> module;
    Variable output;
};

struct FixtureCase {
    const char* name;  // tests/fixtures/<name>.safetensors
    std::function<Run(Fixture&)> run;
};

const std::vector<FixtureCase> kCases = {
    {"multihead_attention",
     [](Fixture& fx) {
         // query, key and value sizes all differ (6, 7, 5), as in the script
         auto m = loaded(fx, std::make_shared<MultiHeadAttention>(MultiHeadAttention::Options{
                                 .key_size = 7, .query_size = 6, .value_size = 5, .num_hiddens = 8, .num_heads = 2}));
         return Run{m, m->forward(fx.input("queries"), fx.input("keys"), fx.input("values"), fx.ids("valid_lens"))};
     }},
    {"encoder_block",
     [](Fixture& fx) {
         auto m = loaded(fx, std::make_shared<EncoderBlock>(tiny()));
         return Run{m, m->forward(fx.input("X"), fx.ids("valid_lens"))};
     }},
    {"decoder_block",
     [](Fixture& fx) {
         auto m = loaded(fx, std::make_shared<DecoderBlock>(tiny(), 0));
         DecoderState state;  // d2l's [enc_outputs, enc_valid_lens, [None]]
         state.enc_outputs = fx.input("enc_outputs");
         state.enc_valid_lens = fx.ids("enc_valid_lens");
         state.caches.resize(1);
         return Run{m, m->forward(fx.input("X"), state)};
     }},
    {"encoder_decoder",
     [](Fixture& fx) {
         auto m = loaded(fx, std::make_shared<EncoderDecoder>(std::make_shared<TransformerEncoder>(13, tiny()),
                                                              std::make_shared<TransformerDecoder>(17, tiny())));
         return Run{m, m->forward(fx.ids("enc_X"), fx.ids("dec_X"), fx.ids("enc_valid_lens"))};
     }},
    {"masked_softmax_ce_loss",
     [](Fixture& fx) {
         return Run{nullptr, masked_softmax_ce_loss(fx.input("pred"), fx.ids("label"), fx.ids("valid_len"))};
     }},
};

}  // namespace

TEST_CASE(
    "MultiHeadAttention, EncoderBlock, DecoderBlock, EncoderDecoder, masked_softmax_ce_loss: forward and "
    "gradients match PyTorch running seed 000's d2l code",
    "[nn][fixtures]") {
    for (const FixtureCase& c : kCases) {
        SECTION(c.name) {
            Fixture fx(c.name);
            // (the name only: Catch2 v2's console reporter crashes wrapping some long descriptions)
            INFO("fixture " << c.name);
            Run run = c.run(fx);
            testing::check_close("output", run.output.value(), fx.tensor("output"), kOutputTol);

            // loss = Σ output ⊙ upstream, so d loss / d output = upstream
            Variable upstream(fx.tensor("input.upstream"));
            autograd::sum(autograd::mul(run.output, upstream)).backward();

            // every float input has a reference gradient (int64 ids and lengths have none)
            std::vector<std::string> float_inputs;
            for (const std::string& name : fx.names_after("input."))
                if (name != "upstream" && fx.ids(name).dtype() != core::DType::int64) float_inputs.push_back(name);
            const std::vector<std::string> grad_inputs = fx.names_after("grad.input.");
            CHECK(grad_inputs == float_inputs);
            for (const std::string& name : grad_inputs)
                testing::check_close("grad.input." + name, fx.input(name).grad(), fx.tensor("grad.input." + name),
                                     kGradTol);

            // every parameter has a reference gradient and every reference
            // gradient a parameter (load_state_dict already matched the values)
            std::vector<std::string> param_names;
            if (run.module)
                for (const auto& [name, p] : run.module->named_parameters()) {
                    param_names.push_back(name);
                    testing::check_close("grad.param." + name, p.grad(), fx.tensor("grad.param." + name), kGradTol);
                }
            std::sort(param_names.begin(), param_names.end());
            CHECK(param_names == fx.names_after("grad.param."));
        }
    }
}

TEST_CASE(
    "EncoderDecoder: the fixture's parameter names are exactly seed 000's, e.g. "
    "encoder.blks.block0.attention.W_q.weight",
    "[nn][fixtures]") {
    // A readable spot check next to the strict load above: the names come from
    // PyTorch's state_dict() of d2l's classes, not from tformer.
    Fixture fx("encoder_decoder");
    const nn::StateDict params = fx.params();
    for (const char* name :
         {"encoder.embedding.weight", "encoder.blks.block0.attention.W_q.weight", "encoder.blks.block1.ffn.dense2.bias",
          "encoder.blks.block1.addnorm2.ln.weight", "decoder.blks.block0.attention2.W_o.weight",
          "decoder.blks.block1.addnorm3.ln.bias", "decoder.dense.weight", "decoder.dense.bias"})
        CHECK(params.count(name) == 1);
    // encoder: embedding 1 + 2 blocks × (W_q,k,v,o 4 + ffn 4 + two LayerNorms 4);
    // decoder: embedding 1 + 2 blocks × (8 + 4 + three LayerNorms 6) + dense 2
    CHECK(params.size() == 1 + 2 * 12 + 1 + 2 * 18 + 2);
}
