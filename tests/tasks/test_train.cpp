// tasks/train: the copy task learns to copy, and a resumed run repeats an
// uninterrupted one exactly.
#include "core/core.hpp"
#include "nn/safetensors.hpp"
#include "optim/adam.hpp"
#include "tasks/canvas.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

using namespace tformer;
using namespace tformer::tasks;

namespace {
ModelConfig copy_config(double dropout) {
    ModelConfig c;
    c.task = "copy";
    c.src_vocab_size = c.tgt_vocab_size = 11;
    c.num_steps = 10;
    c.transformer = {.key_size = 32,
                     .query_size = 32,
                     .value_size = 32,
                     .num_hiddens = 32,
                     .norm_shape = 32,
                     .ffn_num_input = 32,
                     .ffn_num_hiddens = 64,
                     .num_heads = 4,
                     .num_layers = 2,
                     .dropout = dropout};
    return c;
}

std::string fresh_dir(const std::string& name) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("tformer-train-" + std::to_string(::getpid()) + "-" + name);
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
    REQUIRE(rest.step_loss.size() == 9);  // the whole run: steps 1-4 from the checkpoint, 5-9 trained here
    for (size_t i = 0; i < 4; ++i) CHECK(first.step_loss[i] == full.step_loss[i]);
    CHECK(rest.step_loss == full.step_loss);
    CHECK(rest.epoch_loss == full.epoch_loss);

    // the files of the run hold the whole run too, as the uninterrupted run's do
    const auto text = [](const std::string& path) {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    for (const char* name : {"/loss-steps.csv", "/loss.csv"}) {
        INFO(name);
        CHECK(text(b.out_dir + name) == text(a.out_dir + name));
    }
    const std::string steps = text(b.out_dir + "/loss-steps.csv");
    CHECK(std::count(steps.begin(), steps.end(), '\n') == 10);  // the header and 9 steps
    // and the picture is drawn from the same numbers, step for step, as the uninterrupted run's
    const LinePlot resumed_plot = loss_plot(rest.epoch_loss, "t", rest.step_loss);
    const LinePlot full_plot = loss_plot(full.epoch_loss, "t", full.step_loss);
    REQUIRE(resumed_plot.series.size() == full_plot.series.size());
    for (size_t i = 0; i < full_plot.series.size(); ++i) {
        CHECK(resumed_plot.series[i].x == full_plot.series[i].x);
        CHECK(resumed_plot.series[i].y == full_plot.series[i].y);
    }
    CHECK(std::filesystem::exists(b.out_dir + "/loss.png"));
}

TEST_CASE("train(): a resume from a checkpoint without per-step losses writes the steps it trained", "[tasks][train]") {
    // a checkpoint without per-step losses (an earlier writer's): loss-steps.csv starts at the resumed step
    const ModelConfig c = copy_config(0.0);
    const BatchSource source = copy_source(8, 10, 11, 3, 42);
    TrainOptions o{.epochs = 2,
                   .batch_size = 8,
                   .lr = 0.003,
                   .seed = 42,
                   .out_dir = fresh_dir("old-history"),
                   .stop_after_steps = 2,
                   .quiet = true};
    core::Generator gen(42);
    auto model = build_model(c, gen);
    train(*model, gen, source, o, info_for(c));
    const std::string path = o.out_dir + "/checkpoint.safetensors";
    nn::SafeTensors st = nn::load_safetensors(path);
    CheckpointInfo info = read_checkpoint_info(st, path);
    REQUIRE(info.losses.steps.size() == 2);
    optim::Adam adam(model->named_parameters(), {});
    load_checkpoint(st, path, *model, &adam);
    info.losses.steps.clear();
    save_checkpoint(path, *model, &adam, info);
    TrainOptions resume = o;
    resume.stop_after_steps = 0;
    resume.resume = true;
    const TrainResult r = train(*model, gen, source, resume, info_for(c));
    CHECK(r.step_loss.size() == 4);
    std::ifstream in(o.out_dir + "/loss-steps.csv");
    std::string header, line;
    std::getline(in, header);
    std::getline(in, line);
    CHECK(line.starts_with("3,"));
    // and its checkpoint keeps no partial history, so the next resume does the same
    CHECK(read_checkpoint_info(path).losses.steps.empty());
}

TEST_CASE(
    "train(): --resume refuses a run that differs from the saved one, a warm-up longer than the run names --warmup",
    "[tasks][train]") {
    // --resume with another --batch-size would train on other batches: refused
    ModelConfig c = copy_config(0.0);
    c.transformer = {.key_size = 8,
                     .query_size = 8,
                     .value_size = 8,
                     .num_hiddens = 8,
                     .norm_shape = 8,
                     .ffn_num_input = 8,
                     .ffn_num_hiddens = 16,
                     .num_heads = 2,
                     .num_layers = 1,
                     .dropout = 0.0};
    const BatchSource source = copy_source(4, 10, 11, 2, 1);
    TrainOptions o{
        .epochs = 1, .batch_size = 4, .lr = 0.003, .seed = 1, .out_dir = fresh_dir("resume-differs"), .quiet = true};
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
    // check_resume_settings: the same refusals before any data (the vocabularies' sizes, which the data
    // decides, left out), nothing to compare without a checkpoint
    again.extra["batch_size"] = "8";
    REQUIRE_THROWS_WITH(check_resume_settings(again, c, 0),
                        Catch::Contains("but this run differs: batch_size 8 (the checkpoint's: 4)"));
    again.extra["batch_size"] = "4";
    REQUIRE_THROWS_WITH(check_resume_settings(again, other, 0),
                        Catch::Contains("this run differs: dropout 0.1 (the checkpoint's: 0.0)"));
    ModelConfig planned = c;
    planned.src_vocab_size = planned.tgt_vocab_size = 0;
    CHECK_NOTHROW(check_resume_settings(again, planned, 0));
    TrainOptions elsewhere = again;
    elsewhere.out_dir = fresh_dir("resume-nothing-there");
    CHECK_NOTHROW(check_resume_settings(elsewhere, other, 0));
    CHECK(train(*model, gen, source, again, info_for(c)).steps == 4);  // the same run continues

    // another rate, β2, clip or objective would train another run from the saved step
    TrainOptions other_updates = again;
    other_updates.epochs = 3;
    other_updates.lr = 0.002;
    other_updates.adam_beta2 = 0.98;
    REQUIRE_THROWS_WITH(train(*model, gen, source, other_updates, info_for(c)),
                        Catch::Contains("this run differs: adam_beta2 0.98 (the checkpoint's: 0.999), lr 0.002 "
                                        "(the checkpoint's: 0.003)"));
    other_updates = again;
    other_updates.epochs = 3;
    other_updates.schedule = "noam";
    REQUIRE_THROWS_WITH(train(*model, gen, source, other_updates, info_for(c)),
                        Catch::Contains("this run differs: schedule noam (the checkpoint's: constant)"));

    // under cosine decay the run's length sets every rate, so it may not change either
    TrainOptions decaying = o;
    decaying.out_dir = fresh_dir("resume-cosine");
    decaying.schedule = "cosine";
    decaying.warmup = 1;
    train(*model, gen, source, decaying, info_for(c));
    decaying.resume = true;
    decaying.epochs = 2;
    REQUIRE_THROWS_WITH(train(*model, gen, source, decaying, info_for(c)),
                        Catch::Contains("this run differs: total_steps 4 (the checkpoint's: 2)"));
    REQUIRE_THROWS_WITH(check_resume_settings(decaying, c, 4),
                        Catch::Contains("this run differs: total_steps 4 (the checkpoint's: 2)"));
    CHECK_NOTHROW(check_resume_settings(decaying, c, 0));  // a length not known yet is compared by train()

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

TEST_CASE("loss_plot(epochs, title, steps): the per-step line, a running mean and the epoch means, plot_loss writes it",
          "[tasks][train]") {
    std::vector<double> steps;
    for (int i = 0; i < 40; ++i) steps.push_back(1.0 / (1 + i));
    const LinePlot plot = loss_plot({0.5, 0.1, 0.06, 0.04}, "test", steps, 0, 10, "cross-entropy per token");
    REQUIRE(plot.series.size() == 3);
    const Series& per_step = plot.series[0];
    CHECK(per_step.name == "per step");
    CHECK(per_step.y == steps);
    CHECK(per_step.x.front() == Approx(0.1));  // step 1 of 10 per epoch
    CHECK(per_step.x.back() == Approx(4.0));
    const Series& running = plot.series[1];  // fewer than five epochs: a running mean of 10 steps
    CHECK(running.name == "mean of 10 steps");
    REQUIRE(running.y.size() == 31);
    CHECK(running.y[0] == Approx(std::accumulate(steps.begin(), steps.begin() + 10, 0.0) / 10));
    CHECK(running.x[0] == Approx(0.55));  // centred on steps 1..10
    const Series& epochs = plot.series[2];
    CHECK(epochs.name == "epoch mean");
    CHECK(epochs.x == std::vector<double>{1, 2, 3, 4});
    CHECK(epochs.y == std::vector<double>{0.5, 0.1, 0.06, 0.04});
    CHECK(plot.log_y);  // 1 down to 0.025: more than a factor 20
    CHECK(plot.ylabel == "cross-entropy per token");
    CHECK(plot.xlabel == "epoch");
    // epochs only: one series, a linear axis
    const LinePlot few = loss_plot({0.5, 0.4}, "epochs only");
    REQUIRE(few.series.size() == 1);
    CHECK_FALSE(few.log_y);
    CHECK_THROWS_WITH(loss_plot({0.5}, "bad", steps, 0, 0), Catch::Contains("steps_per_epoch must be positive"));

    const std::string dir = fresh_dir("plot-loss");
    std::filesystem::create_directories(dir);
    for (const char* name : {"/loss.png", "/loss.svg"}) {
        plot_loss(dir + name, {0.5, 0.1, 0.06, 0.04}, "test", steps, 0, 10);
        const PictureInfo info = read_picture_info(dir + name);
        CHECK(info.width == 800);
        CHECK(info.height == 540);
    }
}

TEST_CASE("train(): the fused output loss gives the losses of dense + masked cross-entropy, token mean",
          "[tasks][train]") {
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

TEST_CASE("train(): adam_beta2 is Adam's beta2", "[tasks][train]") {
    // Adam's first update is lr * sign(g) whatever beta2 is (bias correction makes m and v g and g^2), so two
    // runs that differ only in beta2 have the same losses at steps 1 and 2 and part from step 3 on
    const ModelConfig c = copy_config(0.0);
    std::vector<std::vector<double>> losses;
    for (double beta2 : {0.999, 0.98}) {
        core::Generator gen(3);
        auto model = build_model(c, gen);
        TrainOptions o;
        o.epochs = 1;
        o.lr = 0.003;
        o.adam_beta2 = beta2;
        o.quiet = true;
        losses.push_back(train(*model, gen, copy_source(8, 10, 11, 4, 7), o, info_for(c)).step_loss);
    }
    REQUIRE(losses[0].size() == 4);
    CHECK(losses[1][0] == losses[0][0]);
    CHECK(losses[1][1] == Approx(losses[0][1]).epsilon(1e-6));
    CHECK(losses[1][2] != Approx(losses[0][2]).epsilon(1e-6));
    CHECK(losses[1][3] != Approx(losses[0][3]).epsilon(1e-6));
}

TEST_CASE("attention_heatmaps(model, t): encoder blocks x heads, the decoder's last block per head, one row per token",
          "[tasks][train]") {
    const ModelConfig c = copy_config(0.0);
    core::Generator gen(3);
    auto model = build_model(c, gen);
    const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const core::Tensor src = core::from_vector(ids, {1, 10});
    const auto d = greedy_decode(*model, src, core::full({1}, 10.0, core::DType::int64),
                                 {.bos = 1, .eos = -1, .max_steps = 4, .keep_attention = true});
    Translation t;
    for (int64_t id : ids) t.src_tokens.push_back(std::to_string(id));
    for (int64_t id : d[0].tokens) t.tokens.push_back(std::to_string(id));
    t.decoded = d[0];
    const std::vector<AttentionPicture> pictures = attention_heatmaps(*model, t);
    REQUIRE(pictures.size() == 3);
    const Heatmaps& enc = pictures[0].maps;
    CHECK(pictures[0].name == "encoder");
    REQUIRE(enc.matrices.size() == 2);     // blocks
    REQUIRE(enc.matrices[0].size() == 4);  // heads
    CHECK(enc.matrices[1][3].shape() == core::Shape{10, 10});
    CHECK(enc.x_ticks == t.src_tokens);
    CHECK(enc.titles == std::vector<std::string>{"head 1", "head 2", "head 3", "head 4"});
    const Heatmaps& self = pictures[1].maps;
    CHECK(pictures[1].name == "decoder-self");
    REQUIRE(self.matrices.size() == 1);
    REQUIRE(self.matrices[0].size() == 4);
    const core::Tensor& s = self.matrices[0][2];  // (steps, steps): step q sees its inputs 0..q
    REQUIRE(s.shape() == core::Shape{4, 4});
    for (int64_t q = 0; q < 4; ++q) {
        double row = 0;
        for (int64_t k = 0; k < 4; ++k) {
            if (k > q) CHECK(s.at({q, k}) == 0.0);
            row += s.at({q, k});
        }
        CHECK(row == Approx(1.0).epsilon(1e-5));
    }
    CHECK(self.x_ticks.front() == "<bos>");
    CHECK(self.y_ticks == t.tokens);
    const Heatmaps& cross = pictures[2].maps;
    CHECK(cross.matrices[0][0].shape() == core::Shape{4, 10});
    CHECK(cross.x_ticks == t.src_tokens);
    // the layer's own weights for the last step of the last block
    CHECK(cross.matrices[0][1].at({3, 5}) == Approx(d[0].cross_attention[3].at({1, 5})));

    const std::string dir = fresh_dir("plot-attention");
    const auto written = plot_attention(dir, "copy", *model, t, PictureFormat::svg);
    REQUIRE(written.size() == 3);
    CHECK(written[1] == dir + "/copy-decoder-self.svg");
    for (size_t i = 0; i < 3; ++i)
        CHECK(read_picture_info(written[i]).width == layout_heatmaps(pictures[i].maps).width);
}
