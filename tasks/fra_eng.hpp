/// \file
/// The English->French corpus of d2l.ai (data/fra-eng/fra.txt, see the README
/// there) loaded into training and validation arrays, as d2l.load_data_nmt
/// does for the Transformer of seed 000, with two additions d2l lacks: a
/// seeded random sample instead of a prefix, and a validation split.
///
/// The file path is always a parameter: this library does not know where the
/// repository is. Apps take a --data option whose default is
/// default_fra_eng_path(); tests pass TFORMER_SOURCE_DIR "/data/fra-eng/fra.txt".
#pragma once

#include "core/tensor.hpp"
#include "tasks/text.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tasks {

/// $TFORMER_DATA_DIR/fra-eng/fra.txt when that variable is set and not empty,
/// otherwise "data/fra-eng/fra.txt" (relative: right when run from the
/// repository root, where the corpus ships).
std::string default_fra_eng_path();

/// What to load. Exactly one of the modes applies:
///   num_examples > 0: d2l's prefix, lines 0..num_examples of the file (601
///     lines for 600, d2l's off-by-one; see tokenize_nmt);
///   sample_size > 0: a random sample of that many valid pairs from the whole
///     file, drawn with `seed` and kept in file order;
///   both 0: every valid pair.
struct FraEngOptions {
    std::string path;           ///< fra.txt: "english<TAB>french" per line
    int64_t num_examples = 0;   ///< > 0: d2l prefix mode
    int64_t sample_size = 0;    ///< > 0: seeded random sample of pairs
    uint64_t seed = 0;          ///< for the sample and the validation split
    double val_fraction = 0.0;  ///< share of distinct English sentences held out, in [0, 1)
    int64_t num_steps = 10;     ///< T: every sequence is truncated/padded to this (d2l: 10)
    int64_t min_freq = 2;       ///< vocabulary threshold (d2l: 2)
};

/// Counts from loading, for the log and for checks.
struct FraEngReport {
    int64_t lines_read = 0;              ///< lines looked at (the prefix only, in prefix mode)
    int64_t skipped_columns = 0;         ///< lines without exactly one tab (blank lines included)
    int64_t blank_lines = 0;             ///< of those, the empty ones
    int64_t skipped_empty = 0;           ///< lines with a side that is empty or only spaces
    int64_t skipped_utf8 = 0;            ///< lines that are not valid UTF-8
    std::vector<int64_t> first_skipped;  ///< 1-based numbers of the first (up to 10) skipped lines
    int64_t valid_pairs = 0;             ///< lines_read minus the skipped ones
    int64_t train_pairs = 0;             ///< pairs in the training split
    int64_t val_pairs = 0;               ///< pairs in the validation split
    int64_t train_sentences = 0;         ///< distinct English sentences in training
    int64_t val_sentences = 0;           ///< distinct English sentences in validation
};

/// One preprocessed sentence pair (preprocess_nmt applied to each side).
struct SentencePair {
    std::string src;  ///< English, e.g. "go ."
    std::string tgt;  ///< French, e.g. "va !"
    /// Both sides equal.
    friend bool operator==(const SentencePair&, const SentencePair&) = default;
};

/// Arrays of one split, in the layout of d2l's build_array_nmt.
struct NmtSplit {
    core::Tensor src;                 ///< (N, T) int64 source ids, each sentence + `<eos>`, padded
    core::Tensor src_valid_len;       ///< (N) int64
    core::Tensor tgt;                 ///< (N, T) int64 target ids
    core::Tensor tgt_valid_len;       ///< (N) int64
    std::vector<SentencePair> pairs;  ///< the N preprocessed pairs, same order as the rows
};

/// Everything load_fra_eng produces.
struct FraEngData {
    Vocab src_vocab;      ///< built on train.pairs' English side only
    Vocab tgt_vocab;      ///< built on train.pairs' French side only
    NmtSplit train;       ///< the training split
    NmtSplit val;         ///< empty (N = 0) when val_fraction is 0
    FraEngReport report;  ///< what loading found: lines read, skipped, kept
};

/// The whole file as text; IOError naming `op` and the path when it cannot
/// be read, or is a directory, a device or a pipe rather than a file.
std::string read_text_file(const std::string& path, const char* op);

/// The raw (English, French) sides of one accepted line, viewing the file text.
struct RawPair {
    /// The English side.
    std::string_view src, tgt;  ///< The French side.
};

/// Step 1 of load_fra_eng: splits `text` into lines and keeps those with
/// exactly one tab, two non-blank sides and valid UTF-8 (a trailing carriage
/// return is dropped first); the others are counted in `report`. With num_examples > 0
/// only lines 0..num_examples are looked at (d2l's tokenize_nmt).
std::vector<RawPair> read_valid_lines(std::string_view text, int64_t num_examples, FraEngReport& report);

/// Throws ValueError naming `op`, the path and the counts when the lines
/// read_valid_lines looked at hold no pair, or fewer than one pair per ten
/// non-blank lines: a binary or a file of another format is refused instead
/// of training on the odd line that happens to hold a tab.
void check_corpus_lines(const FraEngReport& report, const std::string& path, const char* op);

/// Reads `options.path` and builds vocabularies and arrays:
///  1. every line is checked: exactly one tab, two non-blank sides, valid
///     UTF-8; other lines are skipped and counted in the report (a trailing
///     carriage return is dropped first, so CRLF files load too);
///  2. pairs are chosen by prefix, sample or whole file (FraEngOptions);
///  3. both sides go through preprocess_nmt and tokenize (d2l);
///  4. validation split by distinct preprocessed English sentence: the
///     sentences are shuffled with `seed` and round(val_fraction * count) of
///     them, with all their translations, go to validation, so no English
///     sentence is on both sides;
///  5. Vocab(train side, min_freq, {"<pad>", "<bos>", "<eos>"}) per language;
///  6. build_array_nmt for both splits (validation words unknown to the
///     training vocabulary become `<unk>`).
/// Throws IOError when the file cannot be read, ValueError for bad options or
/// when no training pair is left.
FraEngData load_fra_eng(const FraEngOptions& options);

}  // namespace tformer::tasks
