// Checkpoints of the first format ("tformer-checkpoint-1": every field of the
// info as its own metadata string, text vocabularies, the generator state and
// the loss history as space-separated numbers) load, translate as the tformer
// that wrote them did, and resume training.
// tests/fixtures/checkpoint-v1-d2l.safetensors was written by a tformer of
// that format (tests/fixtures/make_checkpoint_v1.sh says which and how); the
// translations below are what that tformer printed for it.
#include "nn/safetensors.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/tokenizer.hpp"
#include "tasks/train.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

namespace {
const std::string kD2l = TFORMER_SOURCE_DIR "/tests/fixtures/checkpoint-v1-d2l.safetensors";

struct Loaded {
    CheckpointInfo info;
    core::Generator gen{0};
    std::shared_ptr<nn::EncoderDecoder> model;
    TokenizerPair tok;
};

std::unique_ptr<Loaded> load(const std::string& path) {
    auto l = std::make_unique<Loaded>();
    l->info = read_checkpoint_info(path);
    l->model = build_model(l->info.config, l->gen);
    load_checkpoint(path, *l->model, nullptr);
    l->tok = tokenizers_of(l->info);
    return l;
}

// As `tformer translate`: d2l's pipeline pads the source to num_steps.
std::string translated(Loaded& l, const std::string& sentence, int64_t beam, bool d2l) {
    const int64_t n = l.info.config.num_steps;
    return translate(*l.model, l.tok, sentence, {.max_len = n, .pad_to = d2l ? n : 0, .decode = {.beam = beam}}).text;
}
}  // namespace

TEST_CASE("a tformer-checkpoint-1 d2l checkpoint (word vocabularies) loads and translates as before",
          "[tasks][checkpoint]") {
    const auto l = load(kD2l);
    CHECK(l->info.config.task == "translate");
    CHECK(l->info.config.transformer.num_hiddens == 8);
    CHECK(l->info.step == 400);
    CHECK(l->info.epoch == 100);
    CHECK(l->info.rng == core::Generator::State{14697921518506607377ULL, 5403497434002804714ULL,
                                                13338749249978383639ULL, 1626068820867607349ULL});
    REQUIRE(l->info.src_vocab);
    REQUIRE(l->info.tgt_vocab);
    CHECK(l->info.src_vocab->size() == 69);
    CHECK(l->info.tgt_vocab->size() == 67);
    CHECK(l->info.tgt_vocab->to_token(6) == "je");
    CHECK(l->info.tgt_vocab->contains("j\u2019ai"));  // a token beyond ASCII survives
    CHECK(l->info.extra.at("preset") == "d2l");
    CHECK(l->info.extra.at("num_examples") == "200");
    // what the format-1 tformer printed (make_checkpoint_v1.sh)
    CHECK(translated(*l, "i'm home .", 1, true) == "soyez <unk> .");
    CHECK(translated(*l, "i'm home .", 4, true) == "je suis <unk> .");
    CHECK(translated(*l, "he's calm .", 1, true) == "<unk> !");
    CHECK(translated(*l, "i lost .", 1, true) == "je suis <unk> .");
}

TEST_CASE("a tformer-checkpoint-1 d2l checkpoint resumes training with its loss history", "[tasks][checkpoint]") {
    const auto dir = std::filesystem::temp_directory_path() / ("tformer-compat-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kD2l, dir / "checkpoint.safetensors");
    const CheckpointInfo info = read_checkpoint_info(kD2l);
    const FraEngData data = load_fra_eng({.path = TFORMER_SOURCE_DIR "/data/fra-eng/fra.txt",
                                          .num_examples = 200,
                                          .sample_size = 0,
                                          .seed = 1,
                                          .val_fraction = 0,
                                          .num_steps = 10,
                                          .min_freq = 2});
    REQUIRE(data.src_vocab == *info.src_vocab);
    core::Generator gen(0);
    auto model = build_model(info.config, gen);
    TrainOptions o{.epochs = 101,
                   .batch_size = 64,
                   .lr = 0.005,
                   .seed = 1,
                   .out_dir = dir.string(),
                   .resume = true,
                   .quiet = true};
    const auto source = translation_source(data.train, o.batch_size, Tokenizer::kBos, 1);
    const TrainResult r = train(*model, gen, source, o, info);
    CHECK(r.steps == 404);
    REQUIRE(r.epoch_loss.size() == 101);
    CHECK(r.epoch_loss[0] == 0.40776920438261521);  // the history the old checkpoint carried, exactly
    CHECK(r.epoch_loss[99] == 0.11572968077330548);
    CHECK(r.epoch_loss[100] < 0.2);
    std::filesystem::remove_all(dir);
}

// A SentencePiece checkpoint of format 1 is not kept as a file (its model
// alone is over 300 KB), so this one is written here, key by key, in the
// layout tformer-checkpoint-1 used: every field of the info as its own
// metadata string, the tokenizer as JSON, the extras under "x.".
TEST_CASE("a tformer-checkpoint-1 SentencePiece checkpoint (written in that layout here) loads",
          "[tasks][checkpoint]") {
    std::vector<std::string> sentences;
    for (const char* s : {"I'm home.", "He's calm.", "We are friends.", "Je suis chez moi.", "Il est calme.",
                          "Nous sommes amis.", "I lost.", "J'ai perdu."})
        for (int i = 0; i < 4; ++i) sentences.emplace_back(s);
    const auto sp = SentencePieceTokenizer::train(sentences, {.vocab_size = 40, .threads = 1});
    ModelConfig c;
    c.task = "translate";
    c.src_vocab_size = c.tgt_vocab_size = sp->size();
    c.num_steps = 12;
    c.tie_embeddings = true;
    c.transformer = {.key_size = 8,
                     .query_size = 8,
                     .value_size = 8,
                     .num_hiddens = 8,
                     .norm_shape = 8,
                     .ffn_num_input = 8,
                     .ffn_num_hiddens = 16,
                     .num_heads = 2,
                     .num_layers = 1};
    core::Generator gen(5);
    const auto model = build_model(c, gen);
    nn::SafeTensors st;
    for (auto& [name, t] : model->state_dict()) st.tensors["model." + name] = t;
    st.metadata = {
        {"format", "tformer-checkpoint-1"},
        {"config", config_to_json(c)},
        {"step", "800"},
        {"epoch", "9"},
        {"rng", "1 2 3 18446744073709551615"},
        {"tokenizer", nlohmann::json{{"type", "sentencepiece"}, {"model", base64_encode(sp->serialized())}}.dump()},
        {"x.pipeline", "corpus"},
        {"x.epoch_losses", "4.4060917531731087 3.7219899926031448"},
        {"x.epoch_partial", "128205.06970477104 40632"}};
    const auto path = std::filesystem::temp_directory_path() / ("tformer-compat-sp-" + std::to_string(::getpid()));
    nn::save_safetensors(path.string(), st);

    const CheckpointInfo info = read_checkpoint_info(path.string());
    CHECK(info.step == 800);
    CHECK(info.epoch == 9);
    CHECK(info.rng == core::Generator::State{1, 2, 3, 18446744073709551615ULL});
    REQUIRE(info.sentencepiece);
    CHECK(info.sentencepiece->serialized() == sp->serialized());
    CHECK_FALSE(info.src_vocab);
    CHECK(info.losses.epochs == std::vector<double>{4.4060917531731087, 3.7219899926031448});
    CHECK(info.losses.epoch_loss_sum == 128205.06970477104);
    CHECK(info.losses.epoch_tokens == 40632);
    CHECK(info.extra == std::map<std::string, std::string>{{"pipeline", "corpus"}});  // the history is no extra
    // and it translates with the tokenizer it carries, as a new checkpoint would
    auto loaded = build_model(info.config, gen);
    load_checkpoint(path.string(), *loaded, nullptr);
    const auto tok = tokenizers_of(info);
    CHECK(translate(*loaded, tok, "I'm home.", {.max_len = 12}).text ==
          translate(*model, tok, "I'm home.", {.max_len = 12}).text);
    std::filesystem::remove(path);
}
