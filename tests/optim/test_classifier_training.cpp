// Seed 001's encoder-only classifier trained with Adam on a task that needs
// every valid token: which of two tokens a sequence holds more of.
#include "nn/classifier.hpp"
#include "optim/adam.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

using namespace tformer;
using namespace tformer::nn;
using core::Tensor;

namespace {
Tensor ids(std::vector<int64_t> v, int64_t B, int64_t T) { return core::from_vector(v, {B, T}); }
Tensor lens(std::vector<int64_t> v) { return core::from_vector(v, {static_cast<int64_t>(v.size())}); }
}  // namespace

TEST_CASE("TransformerClassifier learns which of two tokens a sequence holds more of", "[nn][classifier]") {
    // Sequences of 2..6 tokens drawn from {1, 2}; label 1 when 2 is the
    // majority token. The answer depends on every valid token and on no padding.
    core::Generator gen(8);
    TransformerClassifier m({.vocab_size = 3,
                             .num_classes = 2,
                             .max_len = 6,
                             .num_hiddens = 16,
                             .ffn_num_hiddens = 32,
                             .num_heads = 2,
                             .num_layers = 1,
                             .dropout = 0.0,
                             .pooling = TransformerClassifier::Pooling::mean},
                            gen);
    optim::Adam opt(m.parameters(), {.lr = 0.01});
    auto batch = [&](int64_t B, Tensor& X, Tensor& L, Tensor& y) {
        std::vector<int64_t> x(B * 6, 0), l(B), lab(B);
        for (int64_t b = 0; b < B; ++b) {
            l[b] = 3 + 2 * static_cast<int64_t>(gen.next_u64() % 2);  // odd length 3 or 5: no ties
            int64_t twos = 0;
            for (int64_t t = 0; t < l[b]; ++t) {
                x[b * 6 + t] = 1 + static_cast<int64_t>(gen.next_u64() % 2);
                twos += x[b * 6 + t] == 2;
            }
            lab[b] = 2 * twos > l[b];
        }
        X = ids(x, B, 6);
        L = lens(l);
        y = lens(lab);
    };
    Tensor X, L, y;
    for (int step = 0; step < 300; ++step) {
        batch(32, X, L, y);
        opt.zero_grad();
        m.loss(m(X, L), y, 1e-4).backward();
        opt.step();
    }
    m.eval();
    autograd::NoGradGuard no_grad;
    batch(500, X, L, y);
    const Tensor pred = core::argmax(m(X, L).value(), 1);
    const auto p = pred.to_vector<int64_t>(), t = y.to_vector<int64_t>();
    int64_t right = 0;
    for (size_t i = 0; i < p.size(); ++i) right += p[i] == t[i];
    INFO("accuracy " << right << " / 500");
    CHECK(right >= 490);
}
