// Tokenizers (see tokenizer.hpp). The only file that includes SentencePiece.
#include "tasks/tokenizer.hpp"

#include "core/error.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace tformer::tasks {

// ---- words (d2l) ---------------------------------------------------------------------------

WordTokenizer::WordTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    // d2l's order puts the reserved tokens right after <unk>: the ids of Tokenizer
    const std::array<const char*, 3> specials = {"<pad>", "<bos>", "<eos>"};
    for (size_t i = 0; i < specials.size(); ++i)
        if (!vocab_.contains(specials[i]) || vocab_.to_index(specials[i]) != static_cast<int64_t>(i) + 1)
            fail<ValueError>("WordTokenizer: the vocabulary must hold {} at index {} (d2l's reserved tokens)",
                             specials[i], i + 1);
}

std::vector<int64_t> WordTokenizer::encode(std::string_view sentence) const {
    TokenLine words = tokenize(preprocess_nmt(sentence));
    std::erase(words, std::string());
    return vocab_.to_indices(words);
}

std::string WordTokenizer::decode(const std::vector<int64_t>& ids) const {
    std::string text;
    for (int64_t id : ids) {
        if (id == kPad || id == kBos || id == kEos) continue;
        if (!text.empty()) text += ' ';
        text += vocab_.to_token(id);
    }
    return text;
}

// ---- SentencePiece ------------------------------------------------------------------------------

struct SentencePieceTokenizer::Impl {
    sentencepiece::SentencePieceProcessor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string serialized)
    : impl_(std::move(impl)), serialized_(std::move(serialized)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

namespace {
// Feeds a vector of sentences to SentencePiece's trainer without a file.
class VectorIterator : public sentencepiece::SentenceIterator {
public:
    explicit VectorIterator(const std::vector<std::string>& s) : s_(s) {}
    bool done() const override { return i_ >= s_.size(); }
    void Next() override { ++i_; }
    const std::string& value() const override { return s_[i_]; }
    sentencepiece::util::Status status() const override { return {}; }

private:
    const std::vector<std::string>& s_;
    size_t i_ = 0;
};
}  // namespace

std::shared_ptr<SentencePieceTokenizer> SentencePieceTokenizer::train(const std::vector<std::string>& sentences,
                                                                      const SentencePieceOptions& o) {
    if (o.vocab_size < 8)
        fail<ValueError>("SentencePieceTokenizer::train: vocab_size must be at least 8, got {}", o.vocab_size);
    if (o.model_type != "bpe" && o.model_type != "unigram")
        fail<ValueError>("SentencePieceTokenizer::train: model_type must be bpe or unigram, got '{}'", o.model_type);
    if (o.normalization != "nmt_nfkc" && o.normalization != "identity")
        fail<ValueError>("SentencePieceTokenizer::train: normalization must be nmt_nfkc or identity, got '{}'",
                         o.normalization);
    if (sentences.empty()) fail<ValueError>("SentencePieceTokenizer::train: no sentences to train on");
    if (o.max_sentences < 0 || o.threads < 1)
        fail<ValueError>("SentencePieceTokenizer::train: max_sentences {} and threads {} must be >= 0 and >= 1",
                         o.max_sentences, o.threads);
    for (size_t i = 0; i < sentences.size(); ++i)
        if (!is_valid_utf8(sentences[i]))
            fail<ValueError>("SentencePieceTokenizer::train: sentence {} is not valid UTF-8", i + 1);
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", o.model_type},
        {"vocab_size", std::to_string(o.vocab_size)},
        {"character_coverage", "1.0"},  // Latin scripts: keep every character the corpus has
        {"normalization_rule_name", o.normalization},
        {"input_sentence_size", std::to_string(o.max_sentences)},
        {"shuffle_input_sentence", "true"},
        {"num_threads", std::to_string(o.threads)},
        // d2l's ids and names for the special tokens
        {"unk_id", "0"},
        {"pad_id", "1"},
        {"bos_id", "2"},
        {"eos_id", "3"},
        {"unk_piece", "<unk>"},
        {"pad_piece", "<pad>"},
        {"bos_piece", "<bos>"},
        {"eos_piece", "<eos>"},
        {"minloglevel", "2"},  // errors only: its per-iteration log would bury our progress line
    };
    sentencepiece::SetRandomGeneratorSeed(o.seed);  // its sampling of input sentences
    VectorIterator it(sentences);
    std::string model;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
    if (!status.ok()) fail<ValueError>("SentencePieceTokenizer::train: SentencePiece says: {}", status.ToString());
    return from_serialized(model);
}

std::shared_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(std::string_view model) {
    auto impl = std::make_unique<Impl>();
    const auto status = impl->processor.LoadFromSerializedProto(model);
    if (!status.ok()) fail<IOError>("SentencePieceTokenizer: not a SentencePiece model ({})", status.ToString());
    const auto& p = impl->processor;
    if (p.unk_id() != kUnk || p.pad_id() != kPad || p.bos_id() != kBos || p.eos_id() != kEos)
        fail<IOError>("SentencePieceTokenizer: special ids unk/pad/bos/eos are {}/{}/{}/{}, expected 0/1/2/3",
                      p.unk_id(), p.pad_id(), p.bos_id(), p.eos_id());
    return std::shared_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl), std::string(model)));
}

int64_t SentencePieceTokenizer::size() const { return impl_->processor.GetPieceSize(); }

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view sentence) const {
    if (!is_valid_utf8(sentence)) fail<ValueError>("SentencePieceTokenizer::encode: the text is not valid UTF-8");
    std::vector<int> ids;
    const auto status = impl_->processor.Encode(sentence, &ids);
    if (!status.ok()) fail<ValueError>("SentencePieceTokenizer::encode: {}", status.ToString());
    return {ids.begin(), ids.end()};
}

std::vector<std::string> SentencePieceTokenizer::encode_pieces(std::string_view sentence) const {
    if (!is_valid_utf8(sentence))
        fail<ValueError>("SentencePieceTokenizer::encode_pieces: the text is not valid UTF-8");
    std::vector<std::string> pieces;
    const auto status = impl_->processor.Encode(sentence, &pieces);
    if (!status.ok()) fail<ValueError>("SentencePieceTokenizer::encode_pieces: {}", status.ToString());
    return pieces;
}

std::vector<std::vector<int64_t>> SentencePieceTokenizer::sample_encode(const std::vector<std::string_view>& sentences,
                                                                        double dropout, uint64_t seed) const {
    if (!(dropout >= 0 && dropout < 1))
        fail<ValueError>("SentencePieceTokenizer::sample_encode: dropout must be in [0, 1), got {}", dropout);
    for (size_t i = 0; i < sentences.size(); ++i)
        if (!is_valid_utf8(sentences[i]))
            fail<ValueError>("SentencePieceTokenizer::sample_encode: sentence {} is not valid UTF-8", i + 1);
    std::vector<std::vector<int64_t>> out(sentences.size());
    if (dropout == 0) {
        for (size_t i = 0; i < sentences.size(); ++i) out[i] = encode(sentences[i]);
        return out;
    }
    // SentencePiece draws from a generator of its own per thread, seeded from
    // its global seed when the thread first draws. A thread of its own for
    // each call, started after setting that seed, makes the draws depend on
    // `seed` alone; the lock keeps two callers from setting the seed at once.
    // SentencePiece reserves the seed 2^32 - 1 for "random", so it is folded.
    static std::mutex seed_lock;
    const std::lock_guard hold(seed_lock);
    auto s32 = static_cast<uint32_t>(seed ^ (seed >> 32));
    if (s32 == UINT32_MAX) s32 = 0;
    std::string error;
    std::thread worker([&] {
        try {  // an exception must not leave the thread
            sentencepiece::SetRandomGeneratorSeed(s32);
            std::vector<int> ids;
            for (size_t i = 0; i < sentences.size(); ++i) {
                const auto status = impl_->processor.SampleEncode(sentences[i], -1, static_cast<float>(dropout), &ids);
                if (!status.ok()) {
                    error = status.ToString();
                    return;
                }
                out[i].assign(ids.begin(), ids.end());
            }
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    worker.join();
    if (!error.empty()) fail<ValueError>("SentencePieceTokenizer::sample_encode: {}", error);
    return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
    std::vector<int> kept;
    for (int64_t id : ids) {
        if (id < 0 || id >= size())
            fail<IndexError>("SentencePieceTokenizer::decode: id {} outside [0, {})", id, size());
        if (id != kPad && id != kBos && id != kEos) kept.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = impl_->processor.Decode(kept, &text);
    if (!status.ok()) fail<ValueError>("SentencePieceTokenizer::decode: {}", status.ToString());
    return text;
}

std::string SentencePieceTokenizer::piece(int64_t id) const {
    if (id < 0 || id >= size()) fail<IndexError>("SentencePieceTokenizer::piece: id {} outside [0, {})", id, size());
    return impl_->processor.IdToPiece(static_cast<int>(id));
}

// ---- base64 ------------------------------------------------------------------------------------------

namespace {
constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        // three bytes -> one 24-bit group -> four 6-bit letters, '=' for missing bytes
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t group = 0;
        for (size_t k = 0; k < 3; ++k) group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[group >> (18 - 6 * k) & 63] : '=';
    }
    return out;
}

std::string base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) fail<IOError>("base64_decode: length {} is not a multiple of 4", text.size());
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        uint32_t group = 0;
        size_t pad = 0;
        for (size_t k = 0; k < 4; ++k) {
            const char c = text[i + k];
            const bool last_group = i + 4 == text.size();
            if (c == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
                ++pad;
                group <<= 6;
                continue;
            }
            const size_t v = kAlphabet.find(c);
            if (v == std::string_view::npos || pad > 0)
                fail<IOError>("base64_decode: invalid character at offset {}", i + k);
            group = group << 6 | static_cast<uint32_t>(v);
        }
        for (size_t k = 0; k < 3 - pad; ++k) out += static_cast<char>(group >> (16 - 8 * k) & 255);
    }
    return out;
}

}  // namespace tformer::tasks
