// Fuzz target (b): a checkpoint file -> a model, as the tformer program
// loads one. Each input is a whole checkpoint (a safetensors file), and
// goes through the three commands that read checkpoints:
//  - `tformer translate --checkpoint FILE "Go." "i'm home ."` (apps'
//    run_translate itself: the config, the vocabularies or the SentencePiece
//    model, the tensors, decoding with the model's limits; greedy or beam 2);
//  - `tformer eval --checkpoint FILE --data <40 lines of fra.txt>` for
//    translation checkpoints (the "x." metadata that recreates the data
//    split: sample size, seed, validation share, ...);
//  - what `--resume` reads: the model and Adam's state, the generator state;
//    and the copy task's evaluation, decoding fresh sequences.
// Refusals must be tformer::Error; anything else is a finding (fuzz_util.hpp).
// So is a checkpoint that loads but then cannot translate "Go." (or decode
// the copy task): the loader should have refused it with a clear message.
// A checkpoint whose model decodes more than kLongLimit steps goes through
// the two commands on one input in kLongEvery (below: seconds each under the
// sanitizers).
// The seeds (fuzz/corpus/checkpoint) are real checkpoints of tiny models made
// by fuzz_make_seeds, so that most mutants get past the framing and the config.
#include "fuzz/fuzz_util.hpp"
#include "fuzz/safetensors_mutator.hpp"

#include "apps/commands.hpp"
#include "core/core.hpp"
#include "optim/adam.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace {
// d2l's and the corpus pipeline's eval read their data split from this file
// (the seeds were trained on it, so their vocabularies match it)
const std::string kTinyCorpus = std::string(TFORMER_SOURCE_DIR) + "/fuzz/data/fra-40.txt";
constexpr int64_t kCopyVocab = 11;  // the copy task's vocabulary in `tformer train copy` and `tformer eval`

// Decoding a crafted model to a limit of hundreds of steps takes seconds under
// the sanitizers: the corpus' checkpoints with num_steps 900-1000 (112 of the
// 3,882 whose config a script could read) took 3-6 s of CPU each, and their
// mutants held the target at 37-72 inputs a second per process. So a checkpoint whose limit is above kLongLimit decodes to
// it (`tformer translate`, `tformer eval`, the copy task to its length) for one
// input in kLongEvery, chosen by size; the others load, translate 3 steps, decode the
// copy task for kLongLimit steps and read what --resume reads. Both kinds keep
// coming: a limit's boundary (the positional encoding's last row, the KV
// cache's full length) is still reached.
constexpr int64_t kLongLimit = 64;
// One in 8 is not rare enough: in 400 inputs drawn from a corpus of 12,285
// files, the two that decoded to a limit of 999-1000 steps took 7.8 s of the
// 10.2 s (2.1 s and 5.7 s: each sentence of both commands, and eval's report,
// decoded to the limit); the other 398 took 6 ms each on average. At one in
// 64 such inputs still come thousands of times in 10 million.
constexpr size_t kLongEvery = 64;

[[noreturn]] void finding(const std::string& what) { tformer::fuzz::finding("fuzz_checkpoint", what); }
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    tformer::fuzz::one_thread();
    // eval below reads this file for every translation checkpoint, and the target allows
    // the Error a missing file gives: without this check, a binary whose source folder
    // moved would go on fuzzing without eval and say nothing (the other targets read
    // it here too). An uncaught Error stops the run before the first input.
    (void)tformer::tasks::read_text_file(kTinyCorpus, "fuzz_checkpoint");
    return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
    return tformer::fuzz::mutate_safetensors(data, size, max_size, seed, true);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tformer;
    const std::string& path = fuzz::write_input(data, size, "checkpoint");

    // Loading as translate and eval do. A checkpoint the loader accepts must then
    // work: a short sentence translates, the copy task's sequences decode.
    // An error there means the loader let through a model that cannot run.
    bool translation = false;
    std::optional<nn::SafeTensors> file;
    std::optional<tasks::CheckpointInfo> info;
    std::shared_ptr<nn::EncoderDecoder> model;
    core::Generator gen(0);
    tasks::TokenizerPair tok;
    try {
        file = nn::load_safetensors(path);
        info = tasks::read_checkpoint_info(*file, path);
        translation = info->config.task == "translate";
        model = tasks::build_model(info->config, gen);
        tasks::load_checkpoint(*file, path, *model, nullptr);
        if (translation) tok = tasks::tokenizers_of(*info);
    } catch (const Error&) {
        model = nullptr;
    }
    // size / 2, not size: the beam width below takes size % 2
    const bool full_length = !info || info->config.num_steps <= kLongLimit || (size / 2) % kLongEvery == 0;
    if (model) {
        const int64_t steps = info->config.num_steps;
        try {
            if (translation) {
                const bool d2l = !info->extra.count("pipeline") || info->extra.at("pipeline") == "d2l";
                (void)tasks::translate(*model, tok, "Go.",
                                       {.max_len = steps, .pad_to = d2l ? steps : 0, .decode = {.max_steps = 3}});
            } else if (info->config.src_vocab_size == kCopyVocab && info->config.tgt_vocab_size == kCopyVocab) {
                // as `tformer eval` does for the copy task (apps' copy_accuracy), on 2 sequences instead of 1,000
                const tasks::Batch batch = tasks::copy_batch(2, steps, kCopyVocab, gen);
                (void)tasks::greedy_decode(*model, batch.enc_X, batch.enc_valid,
                                           {.bos = 1, .eos = -1, .max_steps = full_length ? steps - 1 : kLongLimit});
            }
        } catch (const Error& e) {
            finding(std::string("a checkpoint that loads cannot run: ") + e.what());
        }
        // what --resume reads besides: Adam's state and the generator's
        try {
            optim::Adam adam(model->named_parameters(), {});
            tasks::load_checkpoint(*file, path, *model, &adam);
            gen.set_state(info->rng);
            (void)gen.uniform();
        } catch (const Error&) {
        }
    }

    if (!full_length) return 0;
    // tformer translate, and tformer eval for translation models
    try {
        apps::TranslateArgs args{.checkpoint = path, .sentences = {"Go.", "i'm home ."}, .beam = size % 2 ? 2 : 1};
        (void)apps::run_translate(args);
    } catch (const Error&) {
    }
    if (translation) {
        try {
            // --beam applies to whole-corpus checkpoints only (eval refuses it for d2l's)
            const bool corpus = info && info->extra.count("pipeline") && info->extra.at("pipeline") == "corpus";
            apps::EvalArgs args{.checkpoint = path,
                                .data = kTinyCorpus,
                                .max_sentences = 2,
                                .beam = corpus ? std::optional<int64_t>(size % 2 ? 2 : 1) : std::nullopt};
            (void)apps::run_eval(args);
        } catch (const Error&) {
        }
    }
    return 0;
}
