// Gradient checks of the attention layers and attention pooling (float64,
// dropout 0): one table of cases, each a function of float64 leaves, checked
// by autograd::gradcheck (central differences against backward()). Layer
// weights are among the leaves: f points the layer's weight members at the
// leaves it is given, so the check covers d out / d W too. Keys come in as a
// transposed (non-contiguous) view where the layer takes them as they are.
#include "nn/attention.hpp"
#include "nn/attention_pooling.hpp"

#include "autograd/autograd.hpp"
#include "autograd/gradcheck_inputs.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::nn;
using autograd::gradcheck;
using core::DType;
using core::Generator;

namespace {

using testing::GradCase;
Variable leaf(const core::Shape& shape, Generator& gen) { return testing::randn_leaf(shape, gen); }

// A (B, S, d) leaf stored as (B, d, S) and transposed: a non-contiguous view.
Variable transposed_leaf(int64_t B, int64_t S, int64_t d, Generator& gen) {
    return Variable(core::randn({B, d, S}, gen, DType::float64).transpose(1, 2), true);
}

// The current weight (and bias) of a layer, as a leaf for gradcheck.
Variable weight_leaf(const Linear& lin) { return Variable(lin.weight.value(), true); }
Variable bias_leaf(const Linear& lin) { return Variable(lin.bias.value(), true); }

const Tensor kLens = core::from_vector(std::vector<int64_t>{3, 2}, {2});                                  // (B)
const Tensor kRowLens = core::from_vector(std::vector<int64_t>{1, 4, 2, 2, 0, 3}, {2, 3});                // (B, T)
const Tensor kNoPeek = core::from_vector(std::vector<bool>{1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}, {3, 4});  // (T, S)
const Tensor kPad = core::from_vector(std::vector<bool>{1, 1, 1, 0, 1, 1, 0, 0}, {2, 1, 4});              // (B, 1, S)

std::vector<GradCase> cases() {
    Generator gen(42);
    std::vector<GradCase> out;

    // ---- masked_softmax: X (2, 3, 4) ----
    for (const auto& [name, mask] :
         std::vector<std::pair<std::string, Tensor>>{{"valid_lens (B)", kLens},
                                                     {"valid_lens (B, T) with a 0", kRowLens},
                                                     {"bool no-peek", kNoPeek},
                                                     {"no mask", Tensor()}}) {
        Tensor m = mask;
        out.push_back({"masked_softmax(X, " + name + ")", {leaf({2, 3, 4}, gen)}, [m](const std::vector<Variable>& x) {
                           return nn::masked_softmax(x[0], m);
                       }});
    }

    // ---- DotProductAttention: queries (2, 3, 4), keys (2, 4, 4), values (2, 4, 3) ----
    auto dot = std::make_shared<DotProductAttention>(DotProductAttention::Options{.dropout = 0.0});
    for (const auto& [name, mask] : std::vector<std::pair<std::string, Tensor>>{{"valid_lens (B)", kLens},
                                                                                {"valid_lens (B, T)", kRowLens},
                                                                                {"bool no-peek (T, S)", kNoPeek},
                                                                                {"bool pad (B, 1, S)", kPad}}) {
        Tensor m = mask;
        out.push_back({"DotProductAttention(queries, keys, values, " + name + ")",
                       {leaf({2, 3, 4}, gen), transposed_leaf(2, 4, 4, gen), leaf({2, 4, 3}, gen)},
                       [dot, m](const std::vector<Variable>& x) { return (*dot)(x[0], x[1], x[2], m); }});
    }
    // 4-D (B, H, T, d) with seed 002's pad mask (B, 1, 1, S)
    out.push_back({"DotProductAttention(4-D queries, keys, values, bool pad (B, 1, 1, S))",
                   {leaf({2, 2, 3, 2}, gen), leaf({2, 2, 4, 2}, gen), leaf({2, 2, 4, 3}, gen)},
                   [dot](const std::vector<Variable>& x) { return (*dot)(x[0], x[1], x[2], kPad.unsqueeze(1)); }});

    // ---- AdditiveAttention: queries (2, 3, 5), keys (2, 4, 3), values (2, 4, 2), and W_q, W_k, w_v ----
    {
        auto add = std::make_shared<AdditiveAttention>(
            AdditiveAttention::Options{.key_size = 3, .query_size = 5, .num_hiddens = 4, .dropout = 0.0}, gen);
        add->to(DType::float64);
        out.push_back({"AdditiveAttention(queries, keys, values, valid_lens (B)) and W_q, W_k, w_v",
                       {leaf({2, 3, 5}, gen), transposed_leaf(2, 4, 3, gen), leaf({2, 4, 2}, gen),
                        weight_leaf(*add->W_q), weight_leaf(*add->W_k), weight_leaf(*add->w_v)},
                       [add](const std::vector<Variable>& x) {
                           add->W_q->weight = x[3];
                           add->W_k->weight = x[4];
                           add->w_v->weight = x[5];
                           return (*add)(x[0], x[1], x[2], kLens);
                       }});
    }

    // ---- MultiHeadAttention: queries (2, 3, 4), keys/values (2, 4, 4), 2 heads, and W_q, W_k, W_v, W_o ----
    // The layer in float64, its linear layers, and the inputs: queries, keys,
    // values, then the layers' weights (and biases).
    struct Mha {
        std::shared_ptr<MultiHeadAttention> mha;
        std::vector<Linear*> layers;
        std::vector<Variable> inputs;
    };
    const auto make_mha = [&gen](bool bias, bool fused) {
        Mha m;
        m.mha = std::make_shared<MultiHeadAttention>(MultiHeadAttention::Options{.key_size = 4,
                                                                                 .query_size = 4,
                                                                                 .value_size = 4,
                                                                                 .num_hiddens = 4,
                                                                                 .num_heads = 2,
                                                                                 .dropout = 0.0,
                                                                                 .bias = bias,
                                                                                 .fused = fused},
                                                     gen);
        m.mha->to(DType::float64);
        m.inputs = {leaf({2, 3, 4}, gen), transposed_leaf(2, 4, 4, gen), leaf({2, 4, 4}, gen)};
        m.layers = {m.mha->W_q.get(), m.mha->W_k.get(), m.mha->W_v.get(), m.mha->W_o.get()};
        for (Linear* lin : m.layers) m.inputs.push_back(weight_leaf(*lin));
        if (bias)
            for (Linear* lin : m.layers) m.inputs.push_back(bias_leaf(*lin));
        return m;
    };
    for (const bool bias : {false, true}) {
        const Mha m = make_mha(bias, false);
        const auto mha = m.mha;
        const auto layers = m.layers;
        const Tensor mask = bias ? kPad : kRowLens;
        out.push_back({std::string("MultiHeadAttention(queries, keys, values, ") +
                           (bias ? "bool pad (B, 1, S)) and W_q, W_k, W_v, W_o with biases"
                                 : "valid_lens (B, T)) and W_q, W_k, W_v, W_o"),
                       m.inputs, [mha, layers, bias, mask](const std::vector<Variable>& x) {
                           for (size_t i = 0; i < layers.size(); ++i) {
                               layers[i]->weight = x[3 + i];
                               if (bias) layers[i]->bias = x[7 + i];
                           }
                           return (*mha)(x[0], x[1], x[2], mask);
                       }});
    }
    // ---- the fused kernel: MultiHeadAttention with fused = true, every kind of valid lengths ----
    for (const auto& [mask_name, mask] : std::vector<std::pair<std::string, Tensor>>{
             {"none", Tensor()}, {"valid_lens (B)", kLens}, {"valid_lens (B, T)", kRowLens}}) {
        const Mha m = make_mha(false, true);
        const auto mha = m.mha;
        const auto layers = m.layers;
        out.push_back({"MultiHeadAttention fused (queries, keys, values, " + mask_name + ") and W_q, W_k, W_v, W_o",
                       m.inputs, [mha, layers, mask](const std::vector<Variable>& x) {
                           for (size_t i = 0; i < layers.size(); ++i) layers[i]->weight = x[3 + i];
                           return (*mha)(x[0], x[1], x[2], mask);
                       }});
    }
    // autograd::multi_head_attention itself, with a dropout mask and transposed (non-contiguous) q and v
    {
        const Tensor keep = core::mul(core::bernoulli({2, 2, 3, 4}, 0.7, gen, DType::float64), 1.0 / 0.7);
        out.push_back({"multi_head_attention(q, k, v, 2 heads, valid_lens (B, T), dropout mask)",
                       {transposed_leaf(2, 3, 4, gen), leaf({2, 4, 4}, gen), transposed_leaf(2, 4, 4, gen)},
                       [keep](const std::vector<Variable>& x) {
                           return autograd::multi_head_attention(x[0], x[1], x[2], 2, kRowLens, keep);
                       }});
    }
    // the same at a head size the kernel knows at compile time (8: its vector path) with 18 keys
    // (two chunks of 16 of the score kernel) and 5 queries (a block of 4 rows and one more)
    {
        const Tensor keep = core::mul(core::bernoulli({2, 2, 5, 18}, 0.7, gen, DType::float64), 1.0 / 0.7);
        const Tensor lens = core::from_vector(std::vector<int64_t>{18, 17, 0, 5, 16, 3, 9, 18, 1, 12}, {2, 5});
        out.push_back({"multi_head_attention(q, k, v, 2 heads of 8, 18 keys, valid_lens (B, T), dropout mask)",
                       {leaf({2, 5, 16}, gen), transposed_leaf(2, 18, 16, gen), leaf({2, 18, 16}, gen)},
                       [keep, lens](const std::vector<Variable>& x) {
                           return autograd::multi_head_attention(x[0], x[1], x[2], 2, lens, keep);
                       }});
    }
    // forward_step: gradients reach the queries, W_q and W_o (the cache has no graph)
    {
        auto mha = std::make_shared<MultiHeadAttention>(
            MultiHeadAttention::Options{
                .key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4, .num_heads = 2, .dropout = 0.0},
            gen);
        mha->to(DType::float64);
        const Variable kv(core::randn({2, 3, 4}, gen, DType::float64));
        out.push_back({"MultiHeadAttention.forward_step(queries, ...) and W_q, W_o",
                       {leaf({2, 1, 4}, gen), weight_leaf(*mha->W_q), weight_leaf(*mha->W_o)},
                       [mha, kv](const std::vector<Variable>& x) {
                           mha->W_q->weight = x[1];
                           mha->W_o->weight = x[2];
                           KVCache cache;
                           return mha->forward_step(x[0], kv, kv, kLens, cache);
                       }});
    }

    // ---- attention pooling ----
    out.push_back({"nadaraya_watson(queries, keys, values)",
                   {leaf({3}, gen), leaf({3, 4}, gen), leaf({3, 4}, gen)},
                   [](const std::vector<Variable>& x) { return nadaraya_watson(x[0], x[1], x[2]).output; }});
    out.push_back({"average_pooling(queries, values)",
                   {leaf({3}, gen), leaf({5}, gen)},
                   [](const std::vector<Variable>& x) { return average_pooling(x[0], x[1]); }});
    {
        auto net = std::make_shared<NWKernelRegression>(gen);
        net->to(DType::float64);
        out.push_back({"NWKernelRegression(queries, keys, values) and w",
                       {Variable(net->w.value(), true), leaf({3}, gen), leaf({3, 4}, gen), leaf({3, 4}, gen)},
                       [net](const std::vector<Variable>& x) {
                           net->w = x[0];
                           return (*net)(x[1], x[2], x[3]);
                       }});
    }
    out.push_back({"transpose_output(transpose_qkv(X, 2) * 2, 2)",
                   {leaf({2, 3, 4}, gen)},
                   [](const std::vector<Variable>& x) { return transpose_output(transpose_qkv(x[0], 2) * 2.0, 2); }});
    return out;
}

}  // namespace

TEST_CASE("gradcheck(attention layers and pooling): backward matches central differences for every case",
          "[nn][attention][gradcheck]") {
    testing::check_gradcheck_table(cases());
}
