// Batched decoding on a whole-corpus translation model: on the first 1,000
// validation sentences, batches of sorted sentences give what one sentence
// at a time gives, but for near-ties that the products' last bits decide
// (their bits may change with the number of rows); and the thread count
// changes no translation.
//
// The model: TFORMER_DECODE_CHECKPOINT if set, else runs/translate's in the
// source tree when it is a default-preset checkpoint, else the default preset
// shortened here to 600 steps (BLEU about 13: a weaker model
// decodes longer and more repetitive outputs, a harder case for batching) by
// `tformer train translate` into the build tree (a minute or two) and reused.
// The sanitizer run leaves it out (CMakePresets.json, the asan test preset):
// there the training and 6,000 decodings would take hours; the small decode
// tests run there.
#include "apps/shell.hpp"
#include "tasks/batch_translate.hpp"
#include "tasks/corpus.hpp"
#include "tasks/fra_eng.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace {
using namespace tformer;

bool default_preset(const std::string& path) {
    if (!std::filesystem::exists(path)) return false;
    const tasks::CheckpointInfo info = tasks::read_checkpoint_info(path);
    const auto preset = info.extra.find("preset");
    return preset != info.extra.end() && preset->second == "default";
}

std::string default_checkpoint() {
    if (const char* env = std::getenv("TFORMER_DECODE_CHECKPOINT")) return env;
    const std::string source = std::string(TFORMER_SOURCE_DIR) + "/runs/translate/checkpoint.safetensors";
    if (default_preset(source)) return source;
    const std::string dir = std::string(TFORMER_BINARY_DIR) + "/test-models/translate-600-steps";
    const std::string built = dir + "/checkpoint.safetensors";
    if (default_preset(built)) return built;
    const auto trained = testing::run_shell(
        "TFORMER_DATA_DIR='" + std::string(TFORMER_SOURCE_DIR) + "/data' '" + std::string(TFORMER_BINARY_DIR) +
        "/apps/tformer' train translate --steps 600 --quiet --overwrite --out '" + dir + "' 2>&1");
    INFO(trained.output);
    REQUIRE(trained.status == 0);
    return built;
}

// Two scores of one translation agree to `relative` of the larger (at least
// 10): a score sums one float32 log-probability per token, so its rounding
// grows with the length of the output.
bool near(double a, double b, double relative) {
    return std::abs(a - b) <= relative * std::max({10.0, std::abs(a), std::abs(b)});
}
}  // namespace

TEST_CASE(
    "whole-corpus model, 1,000 validation sentences: batched equals one at a time on at least 995 lines, the others "
    "near-ties, and any thread count gives the same translations",
    "[apps][decode][slow]") {
    const std::string path = default_checkpoint();
    const auto t = tasks::load_translator(nn::load_safetensors(path), path, "test");
    const tasks::Corpus corpus =
        tasks::load_corpus({.path = std::string(TFORMER_SOURCE_DIR) + "/data/fra-eng/fra.txt", .val_sentences = 1500});
    std::vector<std::string> sentences;
    for (size_t i = 0; i < 1000 && i < corpus.val.size(); ++i) sentences.push_back(corpus.val[i].src);
    REQUIRE(sentences.size() == 1000);
    for (int64_t beam : {4, 1}) {
        const tasks::TranslateOptions translate{.max_len = t->info.config.num_steps, .decode = {.beam = beam}};
        tasks::ModelReplicas one(*t->model, 1), two(*t->model, 2);
        const auto alone =
            tasks::translate_batches(one, t->tok, sentences, {.translate = translate, .batch_tokens = 1, .threads = 1});
        const auto batched = tasks::translate_batches(two, t->tok, sentences,
                                                      {.translate = translate, .batch_tokens = 2000, .threads = 2});
        const auto batched1 = tasks::translate_batches(one, t->tok, sentences,
                                                       {.translate = translate, .batch_tokens = 2000, .threads = 1});
        int same = 0;
        for (size_t i = 0; i < sentences.size(); ++i) {
            // the thread count changes no translation; a score's last bits may move, as one batch at a
            // time runs its kernels on every thread, and OpenBLAS's bits depend on its thread count
            CHECK(batched[i].text == batched1[i].text);
            CHECK(near(batched[i].decoded.score, batched1[i].decoded.score, 1e-6));
            if (batched[i].text == alone[i].text) {
                ++same;
                CHECK(near(batched[i].decoded.score, alone[i].decoded.score, 1e-5));
                continue;
            }
            const double margin = std::abs(batched[i].decoded.score - alone[i].decoded.score);
            std::cout << "beam " << beam << ", line " << i + 1 << ": margin " << margin
                      << "\n  one at a time: " << alone[i].text << " (" << alone[i].decoded.score
                      << ")\n  batched:       " << batched[i].text << " (" << batched[i].decoded.score << ")\n";
            CHECK(near(batched[i].decoded.score, alone[i].decoded.score, 1e-5));
        }
        std::cout << "beam " << beam << ": batched equals one at a time on " << same << " of 1000 lines\n";
        CHECK(same >= 995);
    }
}
