// tasks/train: the copy task learns to copy, and a resumed run repeats an
// uninterrupted one exactly.
#include "core/core.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/image.hpp"
#include "tasks/train.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace tformer;
using namespace tformer::tasks;

namespace {
ModelConfig copy_config(double dropout) {
    ModelConfig c;
    c.task = "copy";
    c.src_vocab_size = c.tgt_vocab_size = 11;
    c.num_steps = 10;
    c.transformer = {.key_size = 32, .query_size = 32, .value_size = 32, .num_hiddens = 32, .norm_shape = 32,
                     .ffn_num_input = 32, .ffn_num_hiddens = 64, .num_heads = 4, .num_layers = 2, .dropout = dropout};
    return c;
}

std::string fresh_dir(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / ("tformer-train-" + name);
    std::filesystem::remove_all(dir);
    return dir.string();
}

CheckpointInfo info_for(const ModelConfig& c) {
    return {.config = c, .src_vocab = {}, .tgt_vocab = {}, .step = 0, .epoch = 0, .rng = {}, .extra = {}};
}
}  // namespace

TEST_CASE("copy_batch(batch, length, vocab): seed 004's data with shifted targets", "[tasks][train]") {
    core::Generator gen(1);
    const Batch b = copy_batch(4, 10, 11, gen);
    CHECK(b.enc_X.shape() == core::Shape{4, 10});
    CHECK(b.dec_in.shape() == core::Shape{4, 9});
    for (int64_t i = 0; i < 4; ++i) {
        CHECK(b.enc_X.at({i, 0}) == 1.0);  // the start symbol
        for (int64_t t = 0; t < 9; ++t) {
            CHECK(b.dec_in.at({i, t}) == b.enc_X.at({i, t}));
            CHECK(b.label.at({i, t}) == b.enc_X.at({i, t + 1}));
        }
        for (int64_t t = 0; t < 10; ++t) REQUIRE((b.enc_X.at({i, t}) >= 1 && b.enc_X.at({i, t}) <= 10));
    }
}

TEST_CASE("train(): a resumed run gives the same losses as an uninterrupted one", "[tasks][train]") {
    const ModelConfig c = copy_config(0.1);  // dropout on, so the generator state matters
    const BatchSource source = copy_source(8, 10, 11, 3, 42);
    TrainOptions base;
    base.epochs = 3;
    base.batch_size = 8;
    base.lr = 0.003;
    base.seed = 42;
    base.quiet = true;

    core::Generator gen_a(42);
    auto model_a = build_model(c, gen_a);
    TrainOptions a = base;
    a.out_dir = fresh_dir("uninterrupted");
    const TrainResult full = train(*model_a, gen_a, source, a, info_for(c));
    REQUIRE(full.step_loss.size() == 9);

    core::Generator gen_b(42);
    auto model_b = build_model(c, gen_b);
    TrainOptions b = base;
    b.out_dir = fresh_dir("interrupted");
    b.stop_after_steps = 4;  // stops mid-epoch and saves
    const TrainResult first = train(*model_b, gen_b, source, b, info_for(c));
    REQUIRE(first.step_loss.size() == 4);

    core::Generator gen_c(777);  // a fresh process: a different generator, weights loaded from the checkpoint
    auto model_c = build_model(c, gen_c);
    TrainOptions resume = base;
    resume.out_dir = b.out_dir;
    resume.resume = true;
    const TrainResult rest = train(*model_c, gen_c, source, resume, info_for(c));
    REQUIRE(rest.step_loss.size() == 5);
    for (size_t i = 0; i < 4; ++i) CHECK(first.step_loss[i] == full.step_loss[i]);
    for (size_t i = 0; i < 5; ++i) CHECK(rest.step_loss[i] == full.step_loss[4 + i]);
    CHECK(rest.epoch_loss == full.epoch_loss);
}

TEST_CASE("train(): --resume refuses a run that differs from the saved one; a warm-up longer than the run names --warmup",
          "[tasks][train]") {
    // issue 12's probe: --resume with another --batch-size was accepted, and trained on other batches
    ModelConfig c = copy_config(0.0);
    c.transformer = {.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .norm_shape = 8,
                     .ffn_num_input = 8, .ffn_num_hiddens = 16, .num_heads = 2, .num_layers = 1, .dropout = 0.0};
    const BatchSource source = copy_source(4, 10, 11, 2, 1);
    TrainOptions o{.epochs = 1, .batch_size = 4, .lr = 0.003, .seed = 1, .out_dir = fresh_dir("resume-differs"),
                   .quiet = true};
    o.extra = {{"batch_size", "4"}, {"seed", "1"}};
    core::Generator gen(1);
    auto model = build_model(c, gen);
    train(*model, gen, source, o, info_for(c));

    TrainOptions again = o;
    again.epochs = 2;
    again.resume = true;
    again.extra["batch_size"] = "8";
    REQUIRE_THROWS_WITH(train(*model, gen, source, again, info_for(c)),
                        Catch::Contains("train: --resume continues the run saved in '" + o.out_dir) &&
                            Catch::Contains("but this run differs: batch_size 8 (the checkpoint's: 4)"));
    again.extra["batch_size"] = "4";
    ModelConfig other = c;
    other.transformer.dropout = 0.1;
    REQUIRE_THROWS_WITH(train(*model, gen, source, again, info_for(other)),
                        Catch::Contains("this run differs: dropout 0.1 (the checkpoint's: 0.0)"));
    CHECK(train(*model, gen, source, again, info_for(c)).steps == 4);  // the same run continues

    TrainOptions cosine = o;
    cosine.out_dir = fresh_dir("warmup");
    cosine.schedule = "cosine";
    cosine.warmup = 50;
    REQUIRE_THROWS_WITH(train(*model, gen, source, cosine, info_for(c)),
                        "train: the warm-up (--warmup 50) is longer than the whole run (2 steps); give a smaller "
                        "--warmup, or more --steps or --epochs");
}

TEST_CASE("train(): the copy task reaches 100% exact-sequence accuracy", "[tasks][train][slow]") {
    // one thread: the model is tiny, and ctest runs other tests beside this one
    const int saved_threads = core::get_num_threads();
    core::set_num_threads(1);
    const ModelConfig c = copy_config(0.0);
    core::Generator gen(0);
    auto model = build_model(c, gen);
    TrainOptions o;  // the copy preset of `tformer train copy`
    o.epochs = 80;
    o.batch_size = 30;
    o.lr = 0.005;
    o.schedule = "noam";
    o.warmup = 100;
    o.quiet = true;
    const TrainResult r = train(*model, gen, copy_source(30, 10, 11, 20, 0), o, info_for(c));
    CHECK(r.final_loss < 0.01);
    core::Generator test_gen(12345);
    const Batch test = copy_batch(1000, 10, 11, test_gen);
    const auto decoded = greedy_decode(*model, test.enc_X, test.enc_valid, {.bos = 1, .eos = -1, .max_steps = 9});
    int correct = 0;
    for (int64_t i = 0; i < 1000; ++i) {
        bool same = decoded[i].tokens.size() == 9;
        for (int64_t t = 0; same && t < 9; ++t) same = decoded[i].tokens[t] == test.enc_X.at({i, t + 1});
        correct += same;
    }
    CHECK(correct == 1000);
    core::set_num_threads(saved_threads);
}

TEST_CASE("plot_loss(path, epochs, title, steps): a PNG with both curves; bad steps_per_epoch throws", "[tasks][train]") {
    const std::string dir = fresh_dir("plot-loss");
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/loss.png";
    std::vector<double> steps;
    for (int i = 0; i < 40; ++i) steps.push_back(1.0 / (1 + i));
    plot_loss(path, {0.5, 0.1, 0.06, 0.04}, "test", steps, 0, 10);
    const Image png = read_png(path);
    CHECK(png.width() > 100);
    CHECK(png.height() > 100);
    // the light per-step line's colour is somewhere in the picture
    bool light = false;
    for (int y = 0; y < png.height() && !light; ++y)
        for (int x = 0; x < png.width() && !light; ++x) light = png.pixel(x, y) == Rgb{190, 205, 225};
    CHECK(light);
    plot_loss(path, {0.5, 0.1}, "epochs only");  // no steps: still a picture
    CHECK(read_png(path).width() > 100);
    CHECK_THROWS_WITH(plot_loss(path, {0.5}, "bad", steps, 0, 0), Catch::Contains("steps_per_epoch must be positive"));
}

TEST_CASE("train(): the fused output loss gives the losses of dense + masked cross-entropy, token mean", "[tasks][train]") {
    // the copy task with padding: valid lengths below T, so padded rows must not count
    ModelConfig c = copy_config(0.0);
    c.task = "translate";
    c.tie_embeddings = true;
    BatchSource padded = copy_source(8, 10, 11, 4, 7);
    const auto get = padded.get;
    padded.get = [get](int64_t epoch, int64_t index) {
        Batch b = get(epoch, index);
        for (int64_t i = 0; i < 8; ++i) b.label_valid.set({i}, static_cast<double>(2 + i));  // 2..9 of 9 steps
        return b;
    };
    std::vector<std::vector<double>> losses;
    for (bool fused : {false, true}) {
        core::Generator gen(3);
        auto model = build_model(c, gen);
        TrainOptions o;
        o.epochs = 2;
        o.lr = 0.003;
        o.label_smoothing = 0.1;
        o.token_mean = true;
        o.fused_loss = fused;
        o.quiet = true;
        losses.push_back(train(*model, gen, padded, o, info_for(c)).step_loss);
    }
    REQUIRE(losses[0].size() == 8);
    for (size_t i = 0; i < losses[0].size(); ++i) CHECK(losses[1][i] == Approx(losses[0][i]).epsilon(1e-4));
    TrainOptions bad;
    bad.fused_loss = true;
    core::Generator gen(3);
    auto model = build_model(c, gen);
    CHECK_THROWS_WITH(train(*model, gen, padded, bad, info_for(c)), Catch::Contains("set token_mean too"));
}
