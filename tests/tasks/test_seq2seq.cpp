// tasks/seq2seq: configuration, checkpoints, greedy and beam decoding.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/safetensors.hpp"
#include "optim/adam.hpp"
#include "tasks/seq2seq.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

using namespace tformer;
using namespace tformer::tasks;
using autograd::Variable;
using core::Tensor;

namespace {
ModelConfig small_config() {
    ModelConfig c;
    c.task = "copy";
    c.src_vocab_size = 11;
    c.tgt_vocab_size = 11;
    c.num_steps = 6;
    c.transformer = {.key_size = 8,
                     .query_size = 8,
                     .value_size = 8,
                     .num_hiddens = 8,
                     .norm_shape = 8,
                     .ffn_num_input = 8,
                     .ffn_num_hiddens = 16,
                     .num_heads = 2,
                     .num_layers = 2,
                     .dropout = 0.1};
    return c;
}

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("tformer-test-" + std::to_string(::getpid()) + "-" + name))
        .string();
}
}  // namespace

TEST_CASE("config_to_json / config_from_json: round trip and validation", "[tasks][seq2seq]") {
    const ModelConfig c = small_config();
    const ModelConfig back = config_from_json(config_to_json(c));
    CHECK(back.task == "copy");
    CHECK(back.transformer.num_heads == 2);
    CHECK(back.transformer.dropout == Approx(0.1));
    CHECK_THROWS_WITH(config_from_json("{"), Catch::Contains("checkpoint config is not valid JSON"));
    CHECK_THROWS_WITH(config_from_json(R"({"task": "copy"})"),
                      Catch::Contains("checkpoint field 'config.src_vocab_size' is missing"));
    std::string bad = config_to_json(c);
    bad.replace(bad.find("\"copy\""), 6, "\"poem\"");
    CHECK_THROWS_WITH(config_from_json(bad), Catch::Contains("unknown task 'poem'"));
    // a size that is not an int64 is refused: 1e300 (converting it to int64 would be undefined behaviour),
    // a fraction, 2^64 - 1, a string, a bool
    for (const char* value : {"1e300", "2.5", "18446744073709551615", "\"8\"", "true"}) {
        nlohmann::json j = nlohmann::json::parse(config_to_json(c));
        j["num_hiddens"] = nlohmann::json::parse(value);
        INFO(value);
        CHECK_THROWS_AS(config_from_json(j.dump()), IOError);
        CHECK_THROWS_WITH(
            config_from_json(j.dump()),
            Catch::Contains(
                "checkpoint field 'config.num_hiddens' should be a whole number from -2^63 to 2^63-1, got "));
    }
    for (const char* value : {"0", "-3"}) {
        nlohmann::json j = nlohmann::json::parse(config_to_json(c));
        j["num_heads"] = nlohmann::json::parse(value);
        CHECK_THROWS_WITH(
            config_from_json(j.dump()),
            "checkpoint field 'config.num_heads' should be a positive whole number, got " + std::string(value));
    }
}

TEST_CASE("save_checkpoint / load_checkpoint: weights, optimizer state and info survive", "[tasks][seq2seq]") {
    core::Generator gen(1);
    const ModelConfig c = small_config();
    auto model = build_model(c, gen);
    optim::Adam opt(model->named_parameters(), {.lr = 0.01});
    // one real step so the optimizer has state
    const Tensor src = core::randint({2, 6}, 0, 11, gen);
    auto loss = autograd::sum(model->forward(src, src, core::from_vector(std::vector<int64_t>{6, 3}, {2})));
    loss.backward();
    opt.step();
    CheckpointInfo info{.config = c,
                        .src_vocab = std::nullopt,
                        .tgt_vocab = std::nullopt,
                        .step = 1,
                        .epoch = 0,
                        .rng = gen.state(),
                        .extra = {{"preset", "test"}}};
    const std::string path = temp_path("ckpt.safetensors");
    save_checkpoint(path, *model, &opt, info);

    core::Generator gen2(99);
    auto model2 = build_model(c, gen2);
    optim::Adam opt2(model2->named_parameters(), {.lr = 0.01});
    const CheckpointInfo back = load_checkpoint(path, *model2, &opt2);
    CHECK(back.step == 1);
    CHECK(back.rng == gen.state());
    CHECK(back.extra.at("preset") == "test");
    const auto a = model->state_dict(), b = model2->state_dict();
    for (const auto& [name, t] : a) REQUIRE(t.to_vector() == b.at(name).to_vector());
    CHECK(opt2.state(0).step == 1);

    // a corrupt file and a non-checkpoint file give clear errors, not crashes
    const std::string junk = temp_path("junk.safetensors");
    std::ofstream(junk) << "not a checkpoint";
    CHECK_THROWS_AS(load_checkpoint(junk, *model2, nullptr), IOError);
    CHECK_THROWS_WITH(load_checkpoint(temp_path("missing.safetensors"), *model2, nullptr),
                      Catch::Contains("missing.safetensors"));
    std::filesystem::remove(path);
    std::filesystem::remove(junk);
}

TEST_CASE("checkpoint metadata is one JSON document: vocabularies as arrays, generator state, loss history",
          "[tasks][seq2seq][checkpoint]") {
    core::Generator gen(4);
    ModelConfig c = small_config();
    c.task = "translate";
    auto model = build_model(c, gen);
    const Vocab vocab = Vocab::from_tokens(
        {"<unk>", "<pad>", "<bos>", "<eos>", "a", "b", "c", "d", "new\nline", "\"quoted\"", "j\u2019ai"});
    const CheckpointInfo info{
        .config = c,
        .src_vocab = vocab,
        .tgt_vocab = vocab,
        .step = 12,
        .epoch = 3,
        .rng = {1, 2, 3, 18446744073709551615ULL},
        .losses = {.epochs = {2.5, 0.1 + 0.2, 1e-300}, .epoch_loss_sum = 7.25, .epoch_tokens = 40},
        .extra = {{"preset", "d2l"}}};
    const std::string path = temp_path("json.safetensors");
    save_checkpoint(path, *model, nullptr, info);

    // what a reader in another language sees: one key, JSON with arrays and numbers
    const nn::SafeTensors st = nn::load_safetensors(path);
    REQUIRE(st.metadata.size() == 1);
    const auto j = nlohmann::json::parse(st.metadata.at("tformer"));
    CHECK(j.at("format") == "tformer-checkpoint-2");
    CHECK(j.at("config").at("num_hiddens") == 8);
    CHECK(j.at("src_vocab").is_array());
    CHECK(j.at("src_vocab").at(10) == "j\u2019ai");
    CHECK(j.at("rng").at(3).get<uint64_t>() == 18446744073709551615ULL);
    CHECK(j.at("loss").at("epochs").size() == 3);
    CHECK(j.at("extra").at("preset") == "d2l");

    // and back, exactly (doubles round-trip through JSON's shortest form)
    const CheckpointInfo back = read_checkpoint_info(path);
    CHECK(back.step == 12);
    CHECK(back.epoch == 3);
    CHECK(back.rng == info.rng);
    CHECK(*back.src_vocab == vocab);
    CHECK(*back.tgt_vocab == vocab);
    CHECK(back.losses.epochs == info.losses.epochs);
    CHECK(back.losses.epoch_loss_sum == 7.25);
    CHECK(back.losses.epoch_tokens == 40);
    CHECK(back.extra == info.extra);

    // a field of the wrong type is named
    nn::SafeTensors bad = st;
    auto broken = j;
    broken["step"] = "twelve";
    bad.metadata["tformer"] = broken.dump();
    nn::save_safetensors(path, bad);
    CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("metadata field 'step' should be a whole number"));
    broken = j;
    broken["src_vocab"] = {"<unk>", "a", "a"};
    bad.metadata["tformer"] = broken.dump();
    nn::save_safetensors(path, bad);
    CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("token 'a' appears twice"));
    bad.metadata["tformer"] = "{";
    nn::save_safetensors(path, bad);
    CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("metadata 'tformer' is not valid JSON"));
    std::filesystem::remove(path);
}

TEST_CASE("beam_decode with K = 1 equals greedy_decode, batch greedy equals one by one", "[tasks][seq2seq]") {
    core::Generator gen(3);
    auto model = build_model(small_config(), gen);
    const Tensor src = core::randint({3, 6}, 4, 11, gen);
    const Tensor lens = core::from_vector(std::vector<int64_t>{6, 4, 2}, {3});
    const DecodeOptions o{.bos = 1, .eos = 3, .max_steps = 8};
    const std::vector<Decoded> batch = greedy_decode(*model, src, lens, o);
    for (int64_t b = 0; b < 3; ++b) {
        const Tensor one = src.slice(0, b, b + 1).contiguous();
        const Tensor one_len = lens.slice(0, b, b + 1).contiguous();
        const Decoded g = greedy_decode(*model, one, one_len, o).front();
        CHECK(g.tokens == batch[b].tokens);
        DecodeOptions beam1 = o;
        beam1.beam = 1;
        const Decoded k1 = beam_decode(*model, one, one_len, beam1);
        CHECK(k1.tokens == g.tokens);
        // beam scores are log p / length; the length counts <eos> only when
        // the translation ended with one (an untrained model mostly runs out)
        const double length = static_cast<double>(k1.tokens.size() + (k1.tokens.size() < 8 ? 1 : 0));
        CHECK(k1.score * length == Approx(g.score).margin(1e-5));
        DecodeOptions beam4 = o;
        beam4.beam = 4;
        const Decoded k4 = beam_decode(*model, one, one_len, beam4);
        CHECK(k4.tokens.size() <= 8);
    }
    CHECK(model->is_training());  // decoding restored the mode
}

TEST_CASE("beam_decode_batch: each sentence gets what beam_decode gives it alone", "[tasks][seq2seq]") {
    core::Generator gen(4);
    auto model = build_model(small_config(), gen);
    const Tensor src = core::randint({4, 6}, 4, 11, gen);
    const Tensor lens = core::from_vector(std::vector<int64_t>{6, 4, 2, 5}, {4});
    for (double alpha : {0.0, 0.6, 1.0})
        for (int64_t K : {1, 3}) {
            const DecodeOptions o{.bos = 1, .eos = 3, .max_steps = 7, .beam = K, .length_penalty = alpha};
            const std::vector<Decoded> batch = beam_decode_batch(*model, src, lens, o);
            REQUIRE(batch.size() == 4);
            for (int64_t b = 0; b < 4; ++b) {
                const Decoded one =
                    beam_decode(*model, src.slice(0, b, b + 1).contiguous(), lens.slice(0, b, b + 1).contiguous(), o);
                INFO("K " << K << " alpha " << alpha << " sentence " << b);
                CHECK(one.tokens == batch[b].tokens);
                CHECK(one.score == Approx(batch[b].score).margin(1e-6));
            }
        }
    CHECK_THROWS_WITH(beam_decode_batch(*model, src, lens, {.beam = 0}), Catch::Contains("at least 1"));
    CHECK_THROWS_WITH(beam_decode_batch(*model, src, lens, {.max_steps = 3, .beam = 2, .length_penalty = std::nan("")}),
                      Catch::Contains("finite"));
}

TEST_CASE("build_model with tie_embeddings: one matrix for both embeddings and the output layer", "[tasks][seq2seq]") {
    ModelConfig c = small_config();
    c.task = "translate";
    c.tie_embeddings = true;
    core::Generator gen(5);
    auto tied = build_model(c, gen);
    const Variable w = tied->encoder->embedding->weight;
    CHECK(tied->decoder->embedding->weight.impl() == w.impl());
    CHECK(tied->decoder->dense->weight.impl() == w.impl());
    // listed once for optimizers, under every name in the state dict
    int64_t listed = 0;
    for (const auto& [name, p] : tied->named_parameters()) listed += p.impl() == w.impl();
    CHECK(listed == 1);
    const nn::StateDict state = tied->state_dict();
    CHECK(state.count("decoder.dense.weight") == 1);
    CHECK(state.at("decoder.dense.weight").to_vector() == w.value().to_vector());

    // the tied gradient is the sum of the three an untied copy of the model gets
    ModelConfig untied_config = c;
    untied_config.tie_embeddings = false;
    core::Generator gen2(6);
    auto untied = build_model(untied_config, gen2);
    untied->load_state_dict(state);
    tied->eval();
    untied->eval();
    const Tensor src = core::randint({2, 5}, 0, 11, gen), tgt = core::randint({2, 4}, 0, 11, gen);
    const Tensor lens = core::from_vector(std::vector<int64_t>{5, 3}, {2});
    autograd::sum(autograd::mul(tied->forward(src, tgt, lens), tied->forward(src, tgt, lens))).backward();
    autograd::sum(autograd::mul(untied->forward(src, tgt, lens), untied->forward(src, tgt, lens))).backward();
    const Tensor expected =
        core::add(core::add(untied->encoder->embedding->weight.grad(), untied->decoder->embedding->weight.grad()),
                  untied->decoder->dense->weight.grad());
    const std::vector<double> got = w.grad().to_vector(), want = expected.to_vector();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-4));

    // a state dict whose tied names disagree cannot be loaded into the tied model
    nn::StateDict bad = state;
    bad.at("decoder.dense.weight") = core::zeros(w.shape(), core::DType::float32);
    // "values differ", naming the copy that differs and the one it should equal (not "wrong shape")
    CHECK_THROWS_WITH(tied->load_state_dict(bad),
                      Catch::Contains("values differ: decoder.dense.weight differs from encoder.embedding.weight, "
                                      "the same tied parameter, in ") &&
                          !Catch::Contains("wrong shape"));
    // NaN in the same place of all three copies: the copies agree (what they hold is load_checkpoint's to refuse)
    nn::StateDict nan_everywhere = state;
    for (const char* name : {"encoder.embedding.weight", "decoder.embedding.weight", "decoder.dense.weight"}) {
        nan_everywhere.at(name) = nan_everywhere.at(name).clone();
        nan_everywhere.at(name).set({0, 0}, std::nan(""));
    }
    CHECK_NOTHROW(tied->load_state_dict(nan_everywhere));
    c.tgt_vocab_size = 12;
    CHECK_THROWS_WITH(build_model(c, gen), Catch::Contains("needs one vocabulary"));
}

TEST_CASE("build_model: embeddings start N(0, 1) as in d2l, or N(0, 1/d) with scaled_embedding_init",
          "[tasks][seq2seq]") {
    ModelConfig c = small_config();
    c.task = "translate";
    c.src_vocab_size = c.tgt_vocab_size = 4000;  // many draws, so the spread is measured tightly
    auto spread = [&](bool scaled) {
        c.scaled_embedding_init = scaled;
        core::Generator gen(3);
        const auto model = build_model(c, gen);
        std::vector<double> stds;
        for (const auto* e : {&model->encoder->embedding->weight, &model->decoder->embedding->weight}) {
            const std::vector<double> v = e->value().to_vector();
            double sq = 0;
            for (double x : v) sq += x * x;
            stds.push_back(std::sqrt(sq / static_cast<double>(v.size())));
        }
        return stds;
    };
    for (double s : spread(false)) CHECK(s == Approx(1.0).epsilon(0.03));
    for (double s : spread(true)) CHECK(s == Approx(1.0 / std::sqrt(8.0)).epsilon(0.03));
    CHECK(config_from_json(config_to_json(c)).scaled_embedding_init);
    CHECK_FALSE(config_from_json(config_to_json(small_config())).scaled_embedding_init);
}

TEST_CASE("state_dict_size counts what build_model's state dict holds, check_config refuses models that cannot work",
          "[tasks][seq2seq]") {
    for (bool tie : {false, true})
        for (bool bias : {false, true})
            for (int64_t layers : {1, 3}) {
                ModelConfig c = small_config();
                c.task = "translate";
                c.tie_embeddings = tie;
                c.transformer.use_bias = bias;
                c.transformer.num_layers = layers;
                c.transformer.ffn_num_hiddens = 24;
                core::Generator gen(1);
                int64_t values = 0;
                for (const auto& [name, t] : build_model(c, gen)->state_dict()) values += t.numel();
                CHECK(state_dict_size(c) == static_cast<double>(values));
            }
    ModelConfig c = small_config();
    c.transformer.num_layers = 0;
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("num_layers must be at least 1, got 0"));
    core::Generator gen(1);
    CHECK_THROWS_WITH(build_model(c, gen), Catch::Contains("build_model: num_layers must be at least 1"));
    // num_steps 1 is refused with the config, not later by translate (which needs max_len 2: ids + <eos>)
    c = small_config();
    c.num_steps = 1;
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("num_steps must be at least 2, got 1"));
    CHECK_THROWS_WITH(config_from_json(config_to_json(c)), Catch::Contains("num_steps must be at least 2, got 1"));
    // and its second: num_steps 1001 loaded, then the positional encoding's 1000 rows ran out
    c.num_steps = 1001;
    CHECK_THROWS_WITH(config_from_json(config_to_json(c)),
                      Catch::Contains("num_steps 1001 exceeds the 1000 positions of the positional encoding"));
    c.num_steps = 1000;
    CHECK_NOTHROW(check_config(c, "test"));
    c = small_config();
    c.transformer.num_heads = 3;
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("not divisible by num_heads 3"));
    c = small_config();
    c.transformer.dropout = -1;
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("dropout must be in [0, 1)"));
    c = small_config();
    c.transformer.num_hiddens = c.transformer.key_size = c.transformer.query_size = c.transformer.value_size = 1 << 20;
    c.transformer.norm_shape = c.transformer.ffn_num_input = 1 << 20;
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("more than any machine holds"));
    // sizes whose int64 sum would overflow (undefined behaviour, which the
    // asan preset's UBSan reports) are counted as doubles
    c = small_config();
    c.transformer.query_size = c.transformer.key_size = std::numeric_limits<int64_t>::max();
    // each attention's query and key projections alone are (2^63 - 1) x num_hiddens numbers
    CHECK(state_dict_size(c) > 2.0 * 9.2e18 * static_cast<double>(c.transformer.num_hiddens));
    CHECK_THROWS_WITH(check_config(c, "test"), Catch::Contains("more than any machine holds"));
}

TEST_CASE(
    "estimate_training_memory: weights as built (tied once), Adam's state three times that, activations per batch",
    "[tasks][seq2seq]") {
    for (bool tie : {false, true}) {
        ModelConfig c = small_config();
        c.task = "translate";
        c.tie_embeddings = tie;
        core::Generator gen(1);
        const auto model = build_model(c, gen);
        const MemoryEstimate m = estimate_training_memory(c, 8, 10, 12);
        CHECK(m.parameters == 4.0 * static_cast<double>(model->num_parameters()));
        CHECK(m.optimizer == 3 * m.parameters);
        // twice the rows, twice the activations; longer sequences cost more than in proportion (attention)
        CHECK(estimate_training_memory(c, 16, 10, 12).activations == Approx(2 * m.activations));
        CHECK(estimate_training_memory(c, 8, 20, 24).activations > 2 * m.activations);
        CHECK(m.total() == m.parameters + m.optimizer + m.activations);
    }
}

TEST_CASE("load_checkpoint: a config that does not match the stored tensors is refused before a model is built",
          "[tasks][seq2seq]") {
    // a valid file whose config asks for a huge model and holds no tensors
    core::Generator gen(2);
    const ModelConfig c = small_config();
    auto model = build_model(c, gen);
    nn::SafeTensors st;
    st.metadata["format"] = "tformer-checkpoint-1";
    ModelConfig huge = c;
    huge.transformer.num_hiddens = huge.transformer.key_size = huge.transformer.query_size = 20000;
    huge.transformer.value_size = huge.transformer.norm_shape = huge.transformer.ffn_num_input = 20000;
    st.metadata["config"] = config_to_json(huge);
    st.metadata["step"] = "0";
    st.metadata["epoch"] = "0";
    const std::string path = temp_path("crafted.safetensors");
    nn::save_safetensors(path, st);
    CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("stores 0 under 'model.'"));
    std::filesystem::remove(path);
}

TEST_CASE("read_checkpoint_info: tampered metadata is refused naming the key and the value", "[tasks][seq2seq]") {
    // each tampered value is named with its key, never a bare "stoll" from the conversion
    core::Generator gen(2);
    const ModelConfig c = small_config();
    auto model = build_model(c, gen);
    CheckpointInfo info;
    info.config = c;
    info.step = 3;
    const std::string path = temp_path("tampered.safetensors");
    save_checkpoint(path, *model, nullptr, info);
    const nn::SafeTensors good = nn::load_safetensors(path);
    REQUIRE(read_checkpoint_info(path).step == 3);
    const nlohmann::json meta = nlohmann::json::parse(good.metadata.at("tformer"));
    // a field and the JSON it is given; the message names the field
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"step", R"("abc")", "metadata field 'step' should be a whole number from -2^63 to 2^63-1, got string \"abc\""},
        {"step", "3.5", "metadata field 'step' should be a whole number from -2^63 to 2^63-1, got number 3.5"},
        {"epoch", "1e99", "metadata field 'epoch' should be a whole number from -2^63 to 2^63-1, got number 1e+99"},
        {"epoch", "99999999999999999999", "metadata field 'epoch' should be a whole number"},
        {"epoch", "9223372036854775808", "metadata field 'epoch' should be a whole number from -2^63 to 2^63-1"},
        {"step", "-3", "metadata field 'step' should be a count from 0 to 2^63-1, got -3"},
        {"rng", R"("garbage")", "metadata field 'rng' should be an array, got string \"garbage\""},
        {"rng", "[1, 2, 3]", "metadata field 'rng' should hold 4 numbers (the generator's state), got 3"},
        {"rng", "[1, 2, 3, -4]", "metadata field 'rng[3]' should be a whole number from 0 to 2^64-1, got number -4"},
        {"rng", "[1, 2, 3, 4.5]", "metadata field 'rng[3]' should be a whole number from 0 to 2^64-1, got number 4.5"},
        {"config", "{}", "metadata field 'config.task' is missing"},
        // one of each kind: a string, a number, an object, an array, and members inside them
        {"config", "[]", "metadata field 'config' should be an object, got array []"},
        {"loss", "3", "metadata field 'loss' should be an object, got number 3"},
        {"loss", R"({"epochs": "x", "epoch_loss_sum": 0, "epoch_tokens": 0})",
         "metadata field 'loss.epochs' should be an array, got string \"x\""},
        {"loss", R"({"epochs": [1, null], "epoch_loss_sum": 0, "epoch_tokens": 0})",
         "metadata field 'loss.epochs[1]' should be a number, got null null"},
        {"loss", R"({"epochs": [], "epoch_tokens": 0})", "metadata field 'loss.epoch_loss_sum' is missing"},
        {"extra", R"({"preset": 5})", "metadata field 'extra.preset' should be a string, got number 5"},
        {"extra", "[]", "metadata field 'extra' should be an object, got array []"},
        {"src_vocab", R"({"a": 1})", "metadata field 'src_vocab' should be an array, got object {\"a\":1}"},
        {"src_vocab", R"(["<unk>", 7])", "metadata field 'src_vocab[1]' should be a string, got number 7"},
        {"tokenizer", R"({"type": 2, "model": ""})",
         "metadata field 'tokenizer.type' should be a string, got number 2"},
        {"tokenizer", R"({"type": "sentencepiece", "model": "AAAA!AAA"})",
         "metadata field 'tokenizer.model' is not base64 (base64_decode: invalid character at offset 4)"},
        {"tokenizer", R"({"type": "sentencepiece", "model": "AAAA"})",
         "metadata field 'tokenizer.model' does not hold a usable SentencePiece model"},
        {"tokenizer", R"({"type": "bpe", "model": ""})",
         "metadata field 'tokenizer.type' should be \"sentencepiece\", got 'bpe'"},
    };
    for (const auto& [key, value, message] : cases) {
        nlohmann::json tampered = meta;
        tampered[key] = nlohmann::json::parse(value);
        nn::SafeTensors bad = good;
        bad.metadata["tformer"] = tampered.dump();
        nn::save_safetensors(path, bad);
        INFO(key << " = " << value);
        CHECK_THROWS_AS(read_checkpoint_info(path), IOError);
        CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("checkpoint '" + path + "': " + message));
    }
    nn::SafeTensors bad = good;  // not JSON at all
    bad.metadata["tformer"] = "{";
    nn::save_safetensors(path, bad);
    CHECK_THROWS_WITH(read_checkpoint_info(path), Catch::Contains("metadata 'tformer' is not valid JSON"));
    std::filesystem::remove(path);
}

TEST_CASE("load_checkpoint: weights that are not finite are refused naming each tensor and the count",
          "[tasks][seq2seq][checkpoint]") {
    core::Generator gen(3);
    const ModelConfig c = small_config();
    auto model = build_model(c, gen);
    optim::Adam opt(model->named_parameters(), {.lr = 0.01});
    opt.allocate_state();
    CheckpointInfo info;
    info.config = c;
    const std::string path = temp_path("not-finite.safetensors");
    save_checkpoint(path, *model, &opt, info);
    const nn::SafeTensors good = nn::load_safetensors(path);
    optim::Adam opt2(model->named_parameters(), {.lr = 0.01});
    REQUIRE_NOTHROW(load_checkpoint(path, *model, &opt2));

    // three NaN and an infinity in a bias, a NaN in an attention weight
    nn::SafeTensors bad = good;
    Tensor bias = bad.tensors.at("model.decoder.dense.bias").clone();
    for (int64_t i : {0, 3, 7}) bias.set({i}, std::nan(""));
    bias.set({9}, -std::numeric_limits<double>::infinity());
    bad.tensors["model.decoder.dense.bias"] = bias;
    Tensor w = bad.tensors.at("model.encoder.blks.block0.attention.W_q.weight").clone();
    w.set({1, 1}, std::nan(""));
    bad.tensors["model.encoder.blks.block0.attention.W_q.weight"] = w;
    nn::save_safetensors(path, bad);
    CHECK_THROWS_AS(load_checkpoint(path, *model, nullptr), IOError);
    CHECK_THROWS_WITH(load_checkpoint(path, *model, nullptr),
                      "checkpoint '" + path +
                          "': 2 tensor(s) hold values that are not finite (NaN or infinity): "
                          "'model.decoder.dense.bias' (4 of 11), 'model.encoder.blks.block0.attention.W_q.weight' "
                          "(1 of 64); nothing can be computed from them (a damaged file, or one saved by a run that "
                          "diverged?)");

    // Adam's state: read, and so checked, when a run resumes; translating does not read it
    bad = good;
    std::string slot;
    for (const auto& [name, t] : bad.tensors)
        if (name.starts_with("optim.") && t.numel() > 1) slot = name;
    REQUIRE(!slot.empty());
    Tensor m = bad.tensors.at(slot).clone();
    core::fill_(m, std::numeric_limits<double>::infinity());
    bad.tensors[slot] = m;
    nn::save_safetensors(path, bad);
    CHECK_NOTHROW(load_checkpoint(path, *model, nullptr));
    CHECK_THROWS_WITH(load_checkpoint(path, *model, &opt2),
                      Catch::Contains("1 tensor(s) hold values that are not finite (NaN or infinity): '" + slot +
                                      "' (" + std::to_string(m.numel()) + " of " + std::to_string(m.numel()) + ")"));
    std::filesystem::remove(path);
}
