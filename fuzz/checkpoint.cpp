// Fuzz target (b): a checkpoint file -> a model, as the tformer program
// loads one. Each input is a whole checkpoint (a safetensors file), and
// goes through the three commands that read checkpoints:
//  - `tformer translate --checkpoint FILE "Go." "i'm home ."` (apps'
//    run_translate itself: the config, the vocabularies or the SentencePiece
//    model, the tensors, decoding with the model's limits; greedy or beam 2);
//  - `tformer eval --checkpoint FILE --data <40 lines of fra.txt>` for
//    translation checkpoints (the "x." metadata that recreates the data
//    split: sample size, seed, validation share, ...);
//  - what `--resume` reads: the model and Adam's state, the step, the
//    generator state; and the copy task's evaluation, decoding fresh sequences.
// Refusals must be tformer::Error; anything else is a finding (fuzz_util.hpp).
// The seeds (fuzz/corpus/checkpoint) are real checkpoints of tiny models made
// by fuzz_make_seeds, so that most mutants get past the framing and the config.
#include "fuzz/fuzz_util.hpp"
#include "fuzz/safetensors_mutator.hpp"

#include "apps/commands.hpp"
#include "core/core.hpp"
#include "optim/adam.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <cstdio>
#include <string>

namespace {
// d2l's and the corpus pipeline's eval read their data split from this file
// (the seeds were trained on it, so their vocabularies match it)
const std::string kTinyCorpus = std::string(TFORMER_SOURCE_DIR) + "/fuzz/data/fra-40.txt";
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    tformer::fuzz::one_thread();
    return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
    return tformer::fuzz::mutate_safetensors(data, size, max_size, seed, true);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tformer;
    const std::string& path = fuzz::write_input(data, size, "checkpoint");

    // what --resume reads, and the copy task's evaluation
    bool translation = false;
    try {
        const tasks::CheckpointInfo info = tasks::read_checkpoint_info(path);
        translation = info.config.task == "translate";
        core::Generator gen(0);
        auto model = tasks::build_model(info.config, gen);
        optim::Adam adam(model->named_parameters(), {});
        tasks::load_checkpoint(path, *model, &adam);
        gen.set_state(info.rng);
        (void)gen.uniform();
        if (info.config.task == "copy") {
            // as `tformer eval` does (apps' copy_accuracy), on 2 sequences instead of 1,000
            const int64_t length = info.config.num_steps;
            const tasks::Batch batch = tasks::copy_batch(2, length, 11, gen);
            (void)tasks::greedy_decode(*model, batch.enc_X, batch.enc_valid, {.bos = 1, .eos = -1, .max_steps = length - 1});
        }
    } catch (const Error&) {
    }

    // tformer translate, and tformer eval for translation models
    try {
        apps::TranslateArgs args{.checkpoint = path, .sentences = {"Go.", "i'm home ."}, .beam = size % 2 ? 2 : 1};
        (void)apps::run_translate(args);
    } catch (const Error&) {
    }
    if (translation) {
        try {
            apps::EvalArgs args{.checkpoint = path, .data = kTinyCorpus, .max_sentences = 2, .beam = size % 2 ? 2 : 1};
            (void)apps::run_eval(args);
        } catch (const Error&) {
        }
    }
    return 0;
}
