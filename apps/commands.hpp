// The subcommands of the tformer program, one function each, called by
// tformer.cpp after CLI11 has parsed the command line into these structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tformer::apps {

/// Everything `tformer train copy|translate` can set. A flag not given is
/// an empty optional and takes the preset's value; tformer.cpp checks each
/// given value's range as it parses.
struct TrainArgs {
    std::string task;      ///< copy | translate
    std::string preset;    ///< copy: copy; translate: default | long | d2l
    std::string out = "";  ///< output directory (default runs/<task>)
    std::string data;      ///< fra.txt (translate)
    std::optional<int64_t> epochs, batch_size, num_steps, num_hiddens, ffn_num_hiddens;
    std::optional<int64_t> num_heads, num_layers, num_examples, sample_size, warmup, batches_per_epoch;
    int64_t checkpoint_every = 0, stop_after_steps = 0;
    std::optional<double> lr, adam_beta2, dropout, val_fraction, label_smoothing, clip;
    std::optional<double> max_memory;       ///< GB a run may take (default: what the machine has available)
    std::optional<double> subword_dropout;  ///< BPE-dropout of the training pairs (whole-corpus presets)
    std::string schedule;
    std::string tokenizer;  ///< sentencepiece | word (whole-corpus presets)
    std::string batching;   ///< buckets | random (whole-corpus presets)
    std::optional<int64_t> vocab_size, batch_tokens, val_sentences, average, steps;
    int tie_embeddings = 0;  ///< 1: --tie-embeddings, -1: --no-tie-embeddings, 0: the preset's
    std::optional<int64_t> seed;
    int threads = 0;  ///< 0: the preset's
    bool resume = false;
    bool overwrite = false;  ///< replace a checkpoint already in --out
    bool quiet = false;
    bool profile = false;
    bool detect_anomaly = false;
    std::string plot_format = "png";  ///< png | svg: loss and attention pictures
    double mpi_timeout = 300;         ///< under mpirun: seconds a collective waits for the others (0: no limit)
};

struct TranslateArgs {
    std::string checkpoint;
    std::vector<std::string> sentences;  ///< empty: read lines from stdin
    int64_t beam = 4;
    double length_penalty = 1.0;
    std::string show_attention;       ///< directory for heatmaps (empty: none)
    std::string plot_format = "png";  ///< png | svg
    int threads = 0;
    int64_t n_best = 1;           ///< > 1: the n best translations of each line, "LINE ||| text ||| score"
    bool exhaustive = false;      ///< beam search without early stopping (tasks::DecodeOptions::exhaustive)
    int64_t batch_tokens = 500;   ///< source tokens per batch (tasks::translate_batches)
    int64_t chunk_lines = 10000;  ///< lines of stdin read, sorted and decoded together
};

struct EvalArgs {
    std::string checkpoint;
    std::string data;
    int64_t max_sentences = 0;  ///< 0: the whole validation split
    /// beam search of whole-corpus models (default 4, length penalty 1); a
    /// d2l or copy checkpoint, evaluated greedily, refuses them when given
    std::optional<int64_t> beam;
    std::optional<double> length_penalty;
    bool exhaustive = false;  ///< beam search without early stopping (tasks::DecodeOptions::exhaustive)
    int threads = 0;
};

int run_train(const TrainArgs& args);
int run_translate(const TranslateArgs& args);
int run_eval(const EvalArgs& args);
/// `tformer tutorial`: the list, or one tutorial program started with the flags given.
struct TutorialArgs {
    std::string which;                ///< number ("5") or name ("05_attention_scoring"); empty: list them
    std::string out;                  ///< --out DIR, passed on
    bool step = false;                ///< --step
    bool exercise = false;            ///< --exercise
    bool literal = false;             ///< --literal
    std::string plot_format = "png";  ///< --plot-format png|svg, passed on
    std::string lang;                 ///< --lang en|zh, passed on ("": the tutorial asks the locale)
    std::string from, only;           ///< --from STEP / --only STEP, passed on
    bool quiet_tensors = false;       ///< --quiet-tensors
};
int run_tutorial(const TutorialArgs& a);

}  // namespace tformer::apps
