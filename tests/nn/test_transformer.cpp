// The seed 000 Transformer: shapes, parameter names, the KV cache, gradients.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "nn/transformer.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace tformer;
using namespace tformer::nn;
using core::DType;
using core::Tensor;

namespace {
TransformerOptions tiny(double dropout = 0.0) {
    return {.key_size = 8,
            .query_size = 8,
            .value_size = 8,
            .num_hiddens = 8,
            .norm_shape = 8,
            .ffn_num_input = 8,
            .ffn_num_hiddens = 16,
            .num_heads = 2,
            .num_layers = 2,
            .dropout = dropout};
}

// Without dropout: a Dropout module keeps a pointer to the generator it was
// given, which dies here (tests with dropout keep their generator in scope).
std::shared_ptr<EncoderDecoder> tiny_model(int64_t src_vocab, int64_t tgt_vocab, uint64_t seed) {
    core::Generator gen(seed);
    auto enc = std::make_shared<TransformerEncoder>(src_vocab, tiny(), gen);
    auto dec = std::make_shared<TransformerDecoder>(tgt_vocab, tiny(), gen);
    return std::make_shared<EncoderDecoder>(enc, dec);
}
}  // namespace

TEST_CASE("TransformerOptions::with_width(d): every size that follows D, nothing else", "[nn][transformer]") {
    const TransformerOptions base{
        .ffn_num_hiddens = 96, .num_heads = 3, .num_layers = 5, .dropout = 0.25, .fused = true};
    const TransformerOptions o = base.with_width(48);
    for (int64_t size : {o.key_size, o.query_size, o.value_size, o.num_hiddens, o.norm_shape, o.ffn_num_input})
        CHECK(size == 48);
    CHECK(o.ffn_num_hiddens == 96);
    CHECK(o.num_heads == 3);
    CHECK(o.num_layers == 5);
    CHECK(o.dropout == 0.25);
    CHECK(o.fused);
    CHECK(base.num_hiddens == 32);  // a copy: the options it came from are unchanged
}

TEST_CASE("EncoderDecoder: parameter names follow seed 000", "[nn][transformer]") {
    auto net = tiny_model(11, 13, 1);
    std::vector<std::string> names;
    for (auto& [name, _] : net->named_parameters()) names.push_back(name);
    auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
    CHECK(has("encoder.embedding.weight"));
    CHECK(has("encoder.blks.block0.attention.W_q.weight"));
    CHECK(has("encoder.blks.block1.addnorm2.ln.bias"));
    CHECK(has("encoder.blks.block0.ffn.dense1.weight"));
    CHECK(has("decoder.blks.block1.attention2.W_o.weight"));
    CHECK(has("decoder.blks.block0.addnorm3.ln.weight"));
    CHECK(has("decoder.dense.weight"));
    CHECK(has("decoder.dense.bias"));
    CHECK_FALSE(has("encoder.blks.block0.attention.W_q.bias"));  // seed 000: bias=False
}

TEST_CASE("EncoderDecoder::forward(enc_X, dec_X, valid_lens): logits (B, T, V)", "[nn][transformer]") {
    auto net = tiny_model(11, 13, 2);
    const Tensor src = core::randint({3, 5}, 0, 11), tgt = core::randint({3, 4}, 0, 13);
    const Tensor lens = core::from_vector(std::vector<int64_t>{5, 3, 1}, {3});
    Variable logits = net->forward(src, tgt, lens);
    CHECK(logits.shape() == core::Shape{3, 4, 13});
    const auto enc_w = net->encoder->attention_weights();
    REQUIRE(enc_w.size() == 2);
    CHECK(enc_w[0].shape() == core::Shape{6, 5, 5});  // (B·H, S, S)
    // keys beyond each valid length get exactly zero weight: batch 2 sees one key
    CHECK(enc_w[0].at({4, 0, 1}) == 0.0);
    CHECK(enc_w[0].at({4, 0, 0}) == Approx(1.0));
    const auto dec_w = net->decoder->attention_weights();
    CHECK(dec_w[0][1].shape() == core::Shape{6, 4, 4});
    CHECK(dec_w[0][1].at({0, 0, 1}) == 0.0);  // causal: step 0 never sees step 1
    CHECK(dec_w[1][0].shape() == core::Shape{6, 4, 5});
}

TEST_CASE(
    "EncoderDecoder with TransformerOptions::fused: the composed model's logits, gradients and decoding, "
    "dropout included",
    "[nn][transformer]") {
    // the same weights and the same dropout draws twice (each model has its own generator from one seed)
    core::Generator gen_a(5), gen_b(5);
    auto make = [](core::Generator& gen, bool fused) {
        TransformerOptions o = tiny(0.2);
        o.fused = fused;
        auto net = std::make_shared<EncoderDecoder>(std::make_shared<TransformerEncoder>(11, o, gen),
                                                    std::make_shared<TransformerDecoder>(13, o, gen));
        net->to(DType::float64);
        return net;
    };
    auto composed = make(gen_a, false), fused = make(gen_b, true);
    core::Generator data(6);
    const Tensor src = core::randint({3, 5}, 0, 11, data), tgt = core::randint({3, 4}, 0, 13, data);
    const Tensor lens = core::from_vector(std::vector<int64_t>{5, 3, 1}, {3});
    auto run = [&](EncoderDecoder& net) {
        Variable logits = net.forward(src, tgt, lens);  // (B, T, V)
        autograd::sum(autograd::mul(logits, logits)).backward();
        std::vector<Tensor> out{logits.value()};
        for (auto& [name, p] : net.named_parameters()) out.push_back(p.grad());
        return out;
    };
    const auto a = run(*composed), b = run(*fused);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        INFO("tensor " << i << " (0: logits, then the parameters' gradients)");
        const std::vector<double> va = a[i].to_vector(), vb = b[i].to_vector();
        REQUIRE(va.size() == vb.size());
        for (size_t j = 0; j < va.size(); ++j) REQUIRE(va[j] == Approx(vb[j]).margin(1e-12));
    }
    // decoding one token at a time (eval mode: no dropout) agrees too
    composed->eval();
    fused->eval();
    autograd::NoGradGuard no_grad;
    auto decode = [&](EncoderDecoder& net) {
        DecoderState state = net.decoder->init_state(net.encoder->forward(src, lens), lens);
        std::vector<double> out;
        for (int64_t t = 0; t < 3; ++t) {
            const auto v = net.decoder->forward_step(tgt.slice(1, t, t + 1), state).value().to_vector();
            out.insert(out.end(), v.begin(), v.end());
        }
        return out;
    };
    const auto da = decode(*composed), db = decode(*fused);
    REQUIRE(da.size() == db.size());
    for (size_t j = 0; j < da.size(); ++j) REQUIRE(da[j] == Approx(db[j]).margin(1e-12));
}

TEST_CASE(
    "EncoderDecoder: layer-norm and attention outputs made again in backward instead of kept give the same "
    "gradients to the bit and hold less",
    "[nn][transformer]") {
    core::Generator data(8);
    const Tensor src = core::randint({3, 5}, 0, 11, data), tgt = core::randint({3, 4}, 0, 13, data);
    const Tensor lens = core::from_vector(std::vector<int64_t>{5, 3, 1}, {3});
    const bool fused = GENERATE(false, true);
    const auto run = [&](int64_t threshold) {
        const autograd::RemakeThresholdGuard guard(threshold);
        core::Generator gen(9);  // the same weights and dropout draws each time (the model keeps the generator)
        TransformerOptions o = tiny(0.2);
        o.fused = fused;
        auto net = std::make_shared<EncoderDecoder>(std::make_shared<TransformerEncoder>(11, o, gen),
                                                    std::make_shared<TransformerDecoder>(13, o, gen));
        const int64_t start = core::storage_bytes();
        Variable logits = net->forward(src, tgt, lens);  // (B, T, V)
        Variable loss = autograd::sum(autograd::mul(logits, logits));
        const int64_t held = core::storage_bytes() - start;
        loss.backward();
        std::vector<Tensor> out{logits.value()};
        for (auto& [name, p] : net->named_parameters()) out.push_back(p.grad());
        return std::pair{held, out};
    };
    INFO("fused: " << fused);
    const auto [held_kept, kept] = run(std::numeric_limits<int64_t>::max());
    const auto [held_remade, remade] = run(0);
    // not held: the output of every add+norm (2 per encoder block, 3 per decoder block: (3, 5, 8) and
    // (3, 4, 8) floats) and, with the fused attention, of every attention (1 per encoder block, 2 per
    // decoder block); the composed attention's output is a reshape, which W_o keeps
    const int64_t enc = fused ? 2 + 1 : 2, dec = fused ? 3 + 2 : 3;
    CHECK(held_kept - held_remade == (enc * 2 * 3 * 5 * 8 + dec * 2 * 3 * 4 * 8) * 4);
    REQUIRE(kept.size() == remade.size());
    for (size_t i = 0; i < kept.size(); ++i) {
        INFO("tensor " << i << " (0: logits, then the parameters' gradients)");
        CHECK(kept[i].to_vector() == remade[i].to_vector());
    }
}

TEST_CASE("TransformerDecoder::forward_step: the KV cache gives the full pass's logits", "[nn][transformer]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        auto net = tiny_model(11, 13, 3);
        net->to(dtype);
        net->eval();
        const Tensor src = core::randint({2, 6}, 0, 11), tgt = core::randint({2, 5}, 0, 13);
        const Tensor lens = core::from_vector(std::vector<int64_t>{6, 4}, {2});
        autograd::NoGradGuard no_grad;
        const Tensor full = net->forward(src, tgt, lens).value();  // (2, 5, 13)

        Variable enc = net->encoder->forward(src, lens);
        DecoderState state = net->decoder->init_state(enc, lens);
        for (int64_t t = 0; t < 5; ++t) {
            const Tensor step = net->decoder->forward_step(tgt.slice(1, t, t + 1).contiguous(), state).value();
            const Tensor want = full.slice(1, t, t + 1);
            const double tol = dtype == DType::float32 ? 1e-5 : 1e-12;
            const std::vector<double> a = step.to_vector(), b = want.to_vector();
            REQUIRE(a.size() == b.size());
            for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(tol));
        }
        CHECK(state.steps_done == 5);
        // the self-attention cache of block 0 holds the 5 projected steps: (B·H, 5, D/H)
        CHECK(state.caches[0].self.keys.shape() == core::Shape{4, 5, 4});

        // feeding the last three steps as one chunk after two single steps agrees too
        DecoderState chunked = net->decoder->init_state(enc, lens);
        net->decoder->forward_step(tgt.slice(1, 0, 1).contiguous(), chunked);
        net->decoder->forward_step(tgt.slice(1, 1, 2).contiguous(), chunked);
        const Tensor rest = net->decoder->forward_step(tgt.slice(1, 2, 5).contiguous(), chunked).value();
        const std::vector<double> a = rest.to_vector(), b = full.slice(1, 2, 5).to_vector();
        for (size_t i = 0; i < a.size(); ++i)
            REQUIRE(a[i] == Approx(b[i]).margin(dtype == DType::float32 ? 1e-5 : 1e-12));
    }
}

TEST_CASE("masked_softmax_ce_loss(pred, label, valid_len): d2l's averaging", "[nn][loss]") {
    // two sequences of T = 3 over V = 2 with all-zero logits: every token costs ln 2
    Variable pred(core::zeros({2, 3, 2}, DType::float64), true);
    const Tensor label = core::zeros({2, 3}, DType::int64);
    const Tensor valid = core::from_vector(std::vector<int64_t>{3, 1}, {2});
    Variable l = masked_softmax_ce_loss(pred, label, valid);
    REQUIRE(l.shape() == core::Shape{2});
    CHECK(l.value().at({0}) == Approx(std::log(2.0)));
    CHECK(l.value().at({1}) == Approx(std::log(2.0) / 3));  // one valid token, averaged over T = 3
    autograd::sum(l).backward();
    CHECK(pred.grad().at({1, 2, 0}) == 0.0);  // padding gets no gradient
    CHECK(pred.grad().at({1, 0, 0}) == Approx(-0.5 / 3));
}

TEST_CASE("gradcheck EncoderBlock and DecoderBlock (float64, dropout 0)", "[nn][transformer][gradcheck]") {
    core::Generator gen(5);
    TransformerOptions o = tiny();
    o.num_hiddens = o.norm_shape = o.ffn_num_input = o.key_size = o.query_size = o.value_size = 4;
    o.ffn_num_hiddens = 6;
    EncoderBlock enc(o, gen);
    enc.to(DType::float64);
    const Tensor lens = core::from_vector(std::vector<int64_t>{3, 2}, {2});
    Variable X(core::randn({2, 3, 4}, gen, DType::float64), true);
    auto r = autograd::gradcheck([&](const std::vector<Variable>& in) { return enc.forward(in[0], lens); }, {X});
    INFO(r.report);
    CHECK(r);

    DecoderBlock dec(o, 0, gen);
    dec.to(DType::float64);
    Variable Y(core::randn({2, 2, 4}, gen, DType::float64), true);
    auto r2 = autograd::gradcheck(
        [&](const std::vector<Variable>& in) {
            DecoderState state;
            state.enc_outputs = in[1];
            state.enc_valid_lens = lens;
            state.caches.resize(1);
            return dec.forward(in[0], state);
        },
        {Y, X});
    INFO(r2.report);
    CHECK(r2);
}
