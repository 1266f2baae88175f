// tasks/bench: the presets, the random batch and the figures of `tformer bench`.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "tasks/bench.hpp"
#include "tasks/seq2seq.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace tformer;
using namespace tformer::tasks;

TEST_CASE("bench_preset(name): the sizes of each preset", "[tasks][bench]") {
    struct Row {
        const char* name;
        int64_t src_vocab, tgt_vocab, D, ffn, heads, layers;
        double dropout;
        int64_t batch, steps;
    };
    const Row rows[] = {
        {"d2l", 184, 201, 32, 64, 4, 2, 0.1, 64, 10},
        {"copy", 11, 11, 32, 64, 8, 2, 0.0, 30, 10},
        {"small", 8000, 8000, 256, 1024, 8, 3, 0.1, 64, 32},
        {"base", 8000, 8000, 512, 2048, 8, 6, 0.1, 32, 32},
    };
    REQUIRE(bench_preset_names() == std::vector<std::string>{"d2l", "copy", "small", "base", "translate"});
    for (const Row& r : rows) {
        INFO(r.name);
        const BenchPreset p = bench_preset(r.name);
        const nn::TransformerOptions& t = p.config.transformer;
        CHECK(p.name == r.name);
        CHECK(p.config.src_vocab_size == r.src_vocab);
        CHECK(p.config.tgt_vocab_size == r.tgt_vocab);
        CHECK(t.num_hiddens == r.D);
        CHECK(t.key_size == r.D);
        CHECK(t.norm_shape == r.D);
        CHECK(t.ffn_num_input == r.D);
        CHECK(t.ffn_num_hiddens == r.ffn);
        CHECK(t.num_heads == r.heads);
        CHECK(t.num_layers == r.layers);
        CHECK(t.dropout == r.dropout);
        CHECK(p.batch_size == r.batch);
        CHECK(p.num_steps == r.steps);
        CHECK(p.repeats > 0);
        CHECK(t.fused);  // the bench measures the fast path
        CHECK_FALSE(p.corpus);
    }
    // translate: the default translation model; its vocabulary comes from SentencePiece later
    const BenchPreset t = bench_preset("translate");
    CHECK(t.corpus);
    CHECK(t.config.transformer.num_hiddens == 128);
    CHECK(t.config.transformer.ffn_num_hiddens == 512);
    CHECK(t.config.transformer.num_heads == 4);
    CHECK(t.config.transformer.num_layers == 1);
    CHECK(t.config.transformer.dropout == 0.0);
    CHECK(t.config.tie_embeddings);
    CHECK(t.vocab_size == 4000);
    CHECK(t.batch_tokens == 1500);
    CHECK(t.num_steps == 64);
}

TEST_CASE("bench_preset(name): an unknown name lists the presets", "[tasks][bench]") {
    CHECK_THROWS_AS(bench_preset("huge"), ValueError);
    CHECK_THROWS_WITH(bench_preset("huge"),
                      Catch::Contains("bench: unknown preset 'huge' (available: d2l, copy, small, base, translate)"));
    CHECK_THROWS_WITH(run_model_bench({.preset = "D2L", .threads = 1, .repeats = 1}),
                      Catch::Contains("unknown preset 'D2L'"));
    CHECK_THROWS_WITH(run_model_bench({.preset = "d2l", .threads = -1, .repeats = 1}),
                      Catch::Contains("--threads must be positive"));
    CHECK_THROWS_WITH(run_model_bench({.preset = "d2l", .threads = 1, .repeats = -3}),
                      Catch::Contains("--repeats must be positive"));
    CHECK_THROWS_WITH(
        run_model_bench({.preset = "copy", .threads = 1, .repeats = 1, .load_batches = "/nonexistent/b.json"}),
        Catch::Contains("bench: cannot open '/nonexistent/b.json': No such file or directory"));
    CHECK_THROWS_WITH(measure_model(bench_preset("copy"), -1), Catch::Contains("repeats must be positive"));
}

TEST_CASE("bench_valid_lengths(seed, n, T): splitmix64's reference stream", "[tasks][bench]") {
    // splitmix64 from seed 0 gives 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
    // 0x06c45d188009454f, 0xf88bb8a8724c81ec (the published reference values);
    // a length is 1 + output mod T
    struct Row {
        int64_t T;
        std::vector<int64_t> expected;
    };
    const Row rows[] = {
        {10,
         {1 + 0xe220a8397b1dcdafULL % 10, 1 + 0x6e789e6aa1b965f4ULL % 10, 1 + 0x06c45d188009454fULL % 10,
          1 + 0xf88bb8a8724c81ecULL % 10}},
        {10, {6, 1, 10, 5}},  // the same, worked out by hand
        {32, {16, 21, 16, 13}},
        {1, {1, 1, 1, 1}},
    };
    for (const Row& r : rows) CHECK(bench_valid_lengths(0, 4, r.T) == r.expected);
    CHECK_THROWS_WITH(bench_valid_lengths(0, 4, 0), Catch::Contains("num_steps must be positive"));
}

TEST_CASE("bench_batch(preset, gen): random ids, d2l's decoder input, shared valid lengths", "[tasks][bench]") {
    for (const char* name : {"d2l", "copy", "small"}) {
        INFO(name);
        const BenchPreset p = bench_preset(name);
        core::Generator gen(0);
        const Batch b = bench_batch(p, gen);
        const int64_t B = p.batch_size, T = p.num_steps;
        REQUIRE(b.enc_X.shape() == core::Shape{B, T});
        REQUIRE(b.label.shape() == core::Shape{B, T});
        REQUIRE(b.dec_in.shape() == core::Shape{B, T});
        REQUIRE(b.enc_valid.shape() == core::Shape{B});
        REQUIRE(b.label_valid.shape() == core::Shape{B});
        // ids are words: 4 <= id < V
        const std::vector<double> src = b.enc_X.to_vector(), tgt = b.label.to_vector();
        CHECK(*std::min_element(src.begin(), src.end()) >= 4);
        CHECK(*std::max_element(src.begin(), src.end()) < static_cast<double>(p.config.src_vocab_size));
        CHECK(*std::min_element(tgt.begin(), tgt.end()) >= 4);
        CHECK(*std::max_element(tgt.begin(), tgt.end()) < static_cast<double>(p.config.tgt_vocab_size));
        // dec_in = [<bos>, label[:, :-1]]
        for (int64_t i = 0; i < B; ++i) {
            CHECK(b.dec_in.at({i, 0}) == 2);
            for (int64_t t = 1; t < T; ++t) CHECK(b.dec_in.at({i, t}) == b.label.at({i, t - 1}));
        }
        // valid lengths: the first B draws for the source, the next B for the target
        const std::vector<int64_t> lens = bench_valid_lengths(p.seed, 2 * B, T);
        for (int64_t i = 0; i < B; ++i) {
            CHECK(b.enc_valid.at({i}) == static_cast<double>(lens[i]));
            CHECK(b.label_valid.at({i}) == static_cast<double>(lens[B + i]));
        }
    }
}

TEST_CASE("bench_step_loss: the fused output loss is d2l's masked loss summed over the batch, value and gradients",
          "[tasks][bench]") {
    // d2l's preset, its weights drawn once; eval mode so that both passes see no dropout
    const BenchPreset p = bench_preset("d2l");
    core::Generator gen(p.seed);
    const auto model = build_model(p.config, gen);
    const Batch batch = bench_batch(p, gen);
    model->eval();
    auto run = [&](bool fused) {
        for (const autograd::Variable& w : model->parameters()) w.zero_grad();
        autograd::Variable loss =
            fused ? bench_step_loss(*model, batch, p)
                  : autograd::sum(nn::masked_softmax_ce_loss(model->forward(batch.enc_X, batch.dec_in, batch.enc_valid),
                                                             batch.label, batch.label_valid));
        loss.backward();
        std::vector<std::vector<double>> out{loss.value().to_vector()};
        for (const auto& [name, w] : model->named_parameters()) out.push_back(w.grad().to_vector());
        return out;
    };
    const auto fused = run(true), composed = run(false);
    REQUIRE(fused.size() == composed.size());
    CHECK(fused[0][0] == Approx(composed[0][0]).epsilon(1e-5));
    CHECK(fused[0][0] > 100.0);  // 64 rows of about log 201 = 5.3 each: a real loss, not 0
    double worst = 0, largest = 0;
    for (size_t i = 1; i < fused.size(); ++i) {
        REQUIRE(fused[i].size() == composed[i].size());
        for (size_t j = 0; j < fused[i].size(); ++j) {
            worst = std::max(worst, std::abs(fused[i][j] - composed[i][j]));
            largest = std::max(largest, std::abs(composed[i][j]));
        }
    }
    CHECK(largest > 0.01);
    CHECK(worst <= 1e-5 * largest);
}

TEST_CASE("measure_model(preset, repeats): every figure, consistent with each other", "[tasks][bench]") {
    const BenchPreset p = bench_preset("copy");
    const std::vector<BenchFigure> figures = measure_model(p, 1);
    std::map<std::string, double> by_name;
    for (const BenchFigure& f : figures) by_name[f.figure] = f.value;
    const std::vector<std::string> expected = {"train_step_ms",
                                               "train_step_cpu_ms",
                                               "forward_eval_ms",
                                               "forward_eval_cpu_ms",
                                               "greedy_decode_ms",
                                               "greedy_decode_cpu_ms",
                                               "train_tokens_per_s",
                                               "train_step_gflop",
                                               "train_step_gflops",
                                               "train_step_sgemm_gflops",
                                               "forward_eval_gflop",
                                               "forward_eval_gflops",
                                               "forward_eval_sgemm_gflops",
                                               "greedy_decode_gflop",
                                               "greedy_decode_gflops",
                                               "greedy_decode_sgemm_gflops",
                                               "peak_rss_mb"};
    REQUIRE(figures.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        CHECK(figures[i].figure == expected[i]);
        CHECK(figures[i].value > 0);
    }
    // the GEMM work of a copy-task step, counted by hand: per token, each
    // encoder block has 4 (D x D) projections and the FFN's D x 64 and 64 x D,
    // each decoder block 8 projections and the FFN (cross-attention's keys and
    // values over the source), and the output layer D x V; a product costs 2mnk
    // forward and twice that backward. Attention's own products run in the
    // fused kernel, not in GEMM. The training step's output layer runs inside
    // the fused loss, on the real target tokens only: x Wᵀ, then G W, Gᵀ x
    // and the bias gradient Gᵀ 1 (V x 1 per token).
    const std::vector<int64_t> lens = bench_valid_lengths(p.seed, 2 * p.batch_size, p.num_steps);
    double tokens = 0;  // the target's: the second B draws
    for (int64_t i = p.batch_size; i < 2 * p.batch_size; ++i) tokens += static_cast<double>(lens[i]);
    const double N = static_cast<double>(p.batch_size * p.num_steps), D = 32, F = 64, V = 11;
    const double L = 2, blocks = L * ((4 * D * D + 2 * D * F) + (8 * D * D + 2 * D * F));  // multiply-adds per token
    CHECK(by_name["forward_eval_gflop"] == Approx(2 * N * (blocks + D * V) * 1e-9).epsilon(1e-4));
    const double output_layer = tokens * (3 * D * V + V);
    CHECK(by_name["train_step_gflop"] == Approx(2 * (3 * N * blocks + output_layer) * 1e-9).epsilon(1e-4));
    // tokens per second = the batch's target tokens / the train step
    CHECK(by_name["train_tokens_per_s"] == Approx(tokens / (by_name["train_step_ms"] * 1e-3)).epsilon(1e-3));
    CHECK(by_name["peak_rss_mb"] > 1);
}
