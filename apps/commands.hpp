// The subcommands of the tformer program, one function each, called by
// tformer.cpp after CLI11 has parsed the command line into these structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::apps {

/// Everything `tformer train copy|translate` can set. Fields left at their
/// "unset" value (-1 or empty) take the preset's value.
struct TrainArgs {
    std::string task;              ///< copy | translate
    std::string preset;            ///< copy: copy; translate: default | long | d2l
    std::string out = "";          ///< output directory (default runs/<task>)
    std::string data;              ///< fra.txt (translate)
    int64_t epochs = -1, batch_size = -1, num_steps = -1, num_hiddens = -1, ffn_num_hiddens = -1;
    int64_t num_heads = -1, num_layers = -1, num_examples = -1, sample_size = -1, warmup = -1;
    int64_t checkpoint_every = 0, stop_after_steps = 0, batches_per_epoch = -1;
    double lr = -1, dropout = -1, val_fraction = -1, label_smoothing = -1, clip = -1;
    std::string schedule;
    std::string tokenizer;         ///< sentencepiece | word (whole-corpus presets)
    std::string batching;          ///< buckets | random (whole-corpus presets)
    int64_t vocab_size = -1, batch_tokens = -1, val_sentences = -1, average = -1, steps = -1;
    int tie_embeddings = 0;        ///< 1: --tie-embeddings, -1: --no-tie-embeddings, 0: the preset's
    int64_t seed = -1;             ///< -1: the preset's seed
    int threads = 0;
    bool resume = false;
    bool quiet = false;
    bool profile = false;
};

struct TranslateArgs {
    std::string checkpoint;
    std::vector<std::string> sentences;  ///< empty: read lines from stdin
    int64_t beam = 4;
    double length_penalty = 1.0;
    std::string show_attention;  ///< directory for heatmaps (empty: none)
    int threads = 0;
};

struct EvalArgs {
    std::string checkpoint;
    std::string data;
    int64_t max_sentences = 0;  ///< 0: the whole validation split
    int64_t beam = 4;
    double length_penalty = 1.0;
    int threads = 0;
};

int run_train(const TrainArgs& args);
int run_translate(const TranslateArgs& args);
int run_eval(const EvalArgs& args);
int run_tutorial(const std::string& which, bool step, const std::string& out);

}  // namespace tformer::apps
