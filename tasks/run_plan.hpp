/// \file
/// The plan of a training run: every setting of `tformer train` in one value,
/// resolved once from a preset and the command line's flags before anything
/// is read or made. The training commands, `tformer bench`'s translate
/// preset, the ranks' settings check of a data-parallel job and the
/// checkpoint's metadata all read it; nothing writes to it after it is made.
///
/// A preset is the base plan (the default translation run) plus named
/// differences:
/// ```
///   default   the whole corpus, joint SentencePiece vocabulary of 4,000 pieces,
///             D 128, FFN 512, 4 heads, 1 layer, tied embeddings, batches of
///             1,500 tokens, 5,150 steps at lr 0.0025, Adam's beta2 0.98
///   long      default with 2 layers over 8,000 pieces, batches of 2,000
///             tokens, 9,000 steps at lr 0.002, beta2 0.999
///   d2l       seed 000's training cell: d2l's 600 pairs and word vocabularies,
///             D 32, FFN 64, dropout 0.1, batch 64, 200 epochs at lr 0.005
///   copy      seed 004's copy task: d2l's model sizes, batches of 30, 80 epochs, noam schedule
/// ```
#pragma once

#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tformer::tasks {

/// How a run's data is read and batched.
enum class Pipeline {
    copy,    ///< seed 004: fresh random sequences to copy
    d2l,     ///< seed 000: a prefix (or sample) of fra.txt, word vocabularies, fixed batches
    corpus,  ///< the whole corpus: validation drawn from the file, SentencePiece, length buckets
};

/// Every setting of one training run (see the file's comment).
struct RunPlan {
    std::string task = "translate";        ///< copy | translate
    std::string preset = "default";        ///< default | long | d2l | copy
    Pipeline pipeline = Pipeline::corpus;  ///< how the data is read and batched
    uint64_t seed = 0;                     ///< weights, batches, dropout, the validation draw and the tokenizer
    int threads = 0;                       ///< 0: every core

    /// @name The data
    /// @{
    std::string data;            ///< fra.txt (translate)
    int64_t num_examples = 0;    ///< d2l: the file's first N pairs (0: all)
    int64_t sample_size = 0;     ///< a seeded random sample of N pairs instead (0: the whole file)
    double val_fraction = 0;     ///< d2l: share of distinct English sentences held out
    int64_t val_sentences = 0;   ///< corpus: validation sentences drawn from the whole file
    std::string tokenizer;       ///< corpus: sentencepiece | word
    int64_t vocab_size = 0;      ///< corpus: SentencePiece's pieces (source and target together)
    int64_t batch_tokens = 0;    ///< corpus: positions per batch, source + target, padding included
    bool buckets = true;         ///< corpus: batches from length buckets (false: random batches)
    double subword_dropout = 0;  ///< corpus: BPE-dropout of the training pairs (tasks::SubwordDropout; 0: off)
    /// @}

    ModelConfig model;  ///< the vocabulary sizes are 0: the data sets them
    /// The loop: steps, batch, learning rate, schedule, output; its `extra`
    /// holds plan_metadata(plan) once the flags are applied.
    TrainOptions train;
    std::optional<double> max_memory;  ///< GB the run may take (none: what the machine has available)
};

/// The plan of preset `name` for `task` (copy | translate; an empty name is
/// the task's first preset). ValueError naming the presets for any other name.
RunPlan preset_plan(const std::string& task, const std::string& name);

/// The presets of a task, in the order `tformer train --help` lists them.
std::vector<std::string> preset_names(const std::string& task);

/// What the checkpoint's metadata keeps of a plan: the preset, the seed and
/// how the data was read, so that `translate`, `eval` and `--resume` read it
/// as the run did.
std::map<std::string, std::string> plan_metadata(const RunPlan& plan);

/// The settings the ranks of a data-parallel job must share, each named by
/// its flag (`--vocab-size`, `--lr`...) with its value: everything that
/// changes the data, the vocabulary, the model or the run's length, which
/// would otherwise make the ranks call different exchanges. Not included:
/// what only one process uses (--out, --threads, output, --max-memory).
std::vector<std::pair<std::string, std::string>> plan_settings(const RunPlan& plan);

}  // namespace tformer::tasks
