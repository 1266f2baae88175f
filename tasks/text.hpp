/// \file
/// Text side of the translation task: d2l's preprocessing, tokenising and
/// vocabulary, as used by the Transformer notes of seed 000
/// (`d2l.load_data_nmt(batch_size, num_steps)`, which calls
/// `preprocess_nmt`, `tokenize_nmt`, `d2l.Vocab` and `build_array_nmt`).
///
/// Every function here reproduces the Python of d2l.ai's chapter "Machine
/// Translation and the Dataset" exactly, quirks included; where a quirk is
/// kept or changed, the comment says which. For the first 600 examples of the
/// shipped fra.txt this gives the same vocabularies as d2l (184 source and
/// 201 target tokens).
#pragma once

#include "core/tensor.hpp"
#include "core/utf8.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

/// Everything a training run needs beyond the model: data and vocabularies,
/// tokenizers, the training loop, checkpoints, decoding, BLEU, plots and the
/// benchmark, and data-parallel training (tasks::dist).
namespace tformer::tasks {

/// One tokenised sentence.
using TokenLine = std::vector<std::string>;
/// A corpus: one tokenised sentence per entry.
using TokenLines = std::vector<TokenLine>;

// ---- UTF-8 (core/utf8.hpp) -------------------------------------------------------

using core::is_valid_utf8;
using core::utf8_lower;  ///< Python's str.lower(), which d2l's preprocess_nmt calls

// ---- d2l preprocessing and tokenising --------------------------------------------

/// d2l's preprocess_nmt: U+202F and U+00A0 become ' ', the text is lowercased
/// as Python's str.lower() does (core::utf8_lower), and a space is put before each of `, . ! ?` whose
/// previous character is not a space. U+2009 THIN SPACE is left as it is, as
/// in d2l. Works on a whole file or on one line alike. Throws ValueError on
/// invalid UTF-8.
std::string preprocess_nmt(std::string_view text);

/// Python's `line.split(' ')`: splits at every single space and keeps empty
/// pieces, so "a  b" gives {"a", "", "b"} and "" gives {""}. d2l tokenises
/// with exactly this, and we keep its empty tokens so that vocabularies match
/// d2l's. The whole fra.txt yields 17 of them, from doubled spaces such as
/// "fille\u202f ?" (U+202F then a space: two spaces after preprocessing).
TokenLine tokenize(std::string_view line);

/// Source and target token lines, as returned by d2l's tokenize_nmt.
struct NmtTokens {
    TokenLines source;  ///< one tokenised English sentence per pair
    TokenLines target;  ///< the French translation of the same pair
};

/// d2l's tokenize_nmt(text, num_examples): for each line of `text` with
/// exactly one tab, tokenize() both sides. Lines without exactly one tab are
/// skipped silently. With num_examples > 0 it stops when the line index i
/// exceeds num_examples (`if num_examples and i > num_examples: break`), so
/// it reads lines 0..num_examples: num_examples = 600 gives 601 pairs. That
/// off-by-one is d2l's and is kept on purpose. num_examples = 0 reads all.
NmtTokens tokenize_nmt(std::string_view text, int64_t num_examples = 0);

// ---- vocabulary ------------------------------------------------------------------

/// Token <-> index map in d2l's order: "<unk>" at 0, then the reserved tokens,
/// then every token with frequency >= min_freq by descending frequency, ties
/// in order of first appearance (d2l sorts a collections.Counter, which keeps
/// insertion order, with Python's stable sort).
class Vocab {
public:
    /// The index of every token that is not in the vocabulary.
    static constexpr int64_t kUnk = 0;

    /// A vocabulary with just "<unk>".
    Vocab();

    /// d2l.Vocab(tokens, min_freq, reserved_tokens). A reserved token that
    /// repeats, or "<unk>" passed as reserved, throws ValueError.
    explicit Vocab(const TokenLines& lines, int64_t min_freq = 0, const std::vector<std::string>& reserved = {});

    /// Number of tokens, "<unk>" and the reserved tokens included (len(vocab)).
    int64_t size() const { return static_cast<int64_t>(idx_to_token_.size()); }

    /// Index of `token`, or kUnk when it is not in the vocabulary (vocab[token]).
    int64_t to_index(std::string_view token) const;
    /// to_index() of every token of a line.
    std::vector<int64_t> to_indices(const TokenLine& line) const;
    /// True when `token` has its own index.
    bool contains(std::string_view token) const;

    /// The token at `index`; throws IndexError outside [0, size()).
    const std::string& to_token(int64_t index) const;
    /// to_token() of every index (vocab.to_tokens(indices)).
    TokenLine to_tokens(const std::vector<int64_t>& indices) const;

    /// All tokens in index order.
    const std::vector<std::string>& tokens() const { return idx_to_token_; }

    /// The vocabulary whose tokens() are `tokens` (a checkpoint stores them
    /// as a JSON array); ValueError when a token repeats or "<unk>" is not first.
    static Vocab from_tokens(std::vector<std::string> tokens);

    /// Reads the text form of tformer-checkpoint-1 (older checkpoints): the
    /// line "tformer-vocab 1 <size>", then one token per line in index order,
    /// with backslash, newline, tab and carriage return escaped as in C (a backslash, then a
    /// backslash, n, t or r). Throws IOError naming the problem (bad header, wrong count, bad
    /// escape, duplicate token, "<unk>" not at 0).
    static Vocab deserialize(std::string_view text);

    /// Same tokens in the same order.
    friend bool operator==(const Vocab& a, const Vocab& b) { return a.idx_to_token_ == b.idx_to_token_; }

private:
    /// Appends a token that is not yet present.
    void add(std::string token);

    // Transparent hash so lookups by string_view need no temporary string.
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::vector<std::string> idx_to_token_;
    std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> token_to_idx_;
};

/// The reserved tokens of the translation task, in d2l's order.
inline const std::vector<std::string> kNmtReserved = {"<pad>", "<bos>", "<eos>"};

// ---- arrays -------------------------------------------------------------------

/// d2l's truncate_pad: the first num_steps entries of `line`, or `line`
/// followed by `padding` up to num_steps. Throws ValueError if num_steps < 1.
std::vector<int64_t> truncate_pad(const std::vector<int64_t>& line, int64_t num_steps, int64_t padding);

/// Token ids of a batch of sentences and how many of them are real.
struct NmtArray {
    core::Tensor tokens;      ///< (N, T) int64 token ids, T = num_steps
    core::Tensor valid_lens;  ///< (N) int64 number of ids that are not "<pad>"
};

/// d2l's build_array_nmt(lines, vocab, num_steps): each line becomes its ids
/// plus "<eos>", truncated or padded with "<pad>" to num_steps; valid_len
/// counts the entries that are not "<pad>" (so a truncated line has
/// valid_len = num_steps and no "<eos>", as in d2l). `vocab` must contain
/// "<pad>" and "<eos>" (ValueError otherwise); num_steps >= 1.
NmtArray build_array_nmt(const TokenLines& lines, const Vocab& vocab, int64_t num_steps);

}  // namespace tformer::tasks
