// tasks/tokenizer: d2l's words and SentencePiece behind one interface, base64.
#include "tasks/tokenizer.hpp"

#include "core/error.hpp"
#include "tasks/fra_eng.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

namespace {
// Both sides of the first n lines of the bundled corpus, as training text.
std::vector<std::string> corpus_sentences(int64_t n) {
    const std::string text = read_text_file(TFORMER_SOURCE_DIR "/data/fra-eng/fra.txt", "test");
    FraEngReport report;
    std::vector<std::string> out;
    for (const RawPair& p : read_valid_lines(text, n, report)) {
        out.emplace_back(p.src);
        out.emplace_back(p.tgt);
    }
    return out;
}

// One small model for every test here: training takes a moment.
const SentencePieceTokenizer& small_model() {
    static const auto sp = SentencePieceTokenizer::train(corpus_sentences(3000), {.vocab_size = 400, .threads = 1});
    return *sp;
}
}  // namespace

TEST_CASE("base64_encode / base64_decode: RFC 4648 vectors and a round trip of every byte", "[tasks][tokenizer]") {
    // RFC 4648 §10
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foo") == "Zm9v");
    CHECK(base64_encode("foob") == "Zm9vYg==");
    CHECK(base64_encode("fooba") == "Zm9vYmE=");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (size_t n = 0; n <= all.size(); n += 37)
        CHECK(base64_decode(base64_encode(all.substr(0, n))) == all.substr(0, n));
    CHECK_THROWS_WITH(base64_decode("Zm9"), Catch::Contains("not a multiple of 4"));
    CHECK_THROWS_WITH(base64_decode("Zm!v"), Catch::Contains("invalid character at offset 2"));
    CHECK_THROWS_WITH(base64_decode("Z=9v"), Catch::Contains("invalid character"));
    CHECK_THROWS_WITH(base64_decode("Zg==Zg=="), Catch::Contains("invalid character"));
}

TEST_CASE("WordTokenizer: d2l's preprocessing and ids, decode joins the words", "[tasks][tokenizer]") {
    const Vocab vocab({{"je", "suis", "chez", "moi", "."}, {"je", "suis", "."}}, 0, kNmtReserved);
    const WordTokenizer tok(vocab);
    CHECK(tok.kind() == "word");
    CHECK(tok.size() == vocab.size());
    const std::vector<int64_t> ids =
        tok.encode("Je suis  chez moi.");  // lowercased, '.' split off, empty token dropped
    CHECK(ids == vocab.to_indices({"je", "suis", "chez", "moi", "."}));
    CHECK(tok.decode(ids) == "je suis chez moi .");
    CHECK(tok.encode("je dors") == std::vector<int64_t>{vocab.to_index("je"), Tokenizer::kUnk});
    // specials are left out of the text
    CHECK(tok.decode({Tokenizer::kBos, ids[0], Tokenizer::kEos, Tokenizer::kPad}) == "je");
    CHECK(tok.piece(Tokenizer::kEos) == "<eos>");
    CHECK_THROWS_AS(tok.encode("caf\xc3"), ValueError);
    // a vocabulary without d2l's reserved tokens in d2l's places is refused
    CHECK_THROWS_WITH(WordTokenizer(Vocab({{"a"}}, 0, {})), Catch::Contains("<pad> at index 1"));
}

TEST_CASE("SentencePieceTokenizer: d2l's special ids, readable round trip, same model after serialising",
          "[tasks][tokenizer]") {
    const SentencePieceTokenizer& sp = small_model();
    CHECK(sp.kind() == "sentencepiece");
    CHECK(sp.size() == 400);
    CHECK(sp.piece(Tokenizer::kUnk) == "<unk>");
    CHECK(sp.piece(Tokenizer::kPad) == "<pad>");
    CHECK(sp.piece(Tokenizer::kBos) == "<bos>");
    CHECK(sp.piece(Tokenizer::kEos) == "<eos>");
    // round trip: decode(encode(s)) gives s back, case and punctuation kept,
    // also for words the model never saw whole (spelt with smaller pieces)
    for (const std::string s : {"I'm home.", "He's calm.", "Tom wasn't able to see her off at the station.",
                                "Je suis chez moi.", "Il n'a pas pu la voir partir depuis la gare."}) {
        const std::vector<int64_t> ids = sp.encode(s);
        CHECK(ids.size() >= 2);
        for (int64_t id : ids) CHECK((id > Tokenizer::kEos && id < sp.size()));
        CHECK(sp.decode(ids) == s);
    }
    // pieces mark the start of a word with U+2581
    const std::vector<std::string> pieces = sp.encode_pieces("I'm home.");
    REQUIRE(!pieces.empty());
    CHECK(pieces.front().starts_with("\xe2\x96\x81"));
    // specials are dropped from the text; out-of-range ids are an error
    std::vector<int64_t> ids = sp.encode("Go.");
    ids.insert(ids.begin(), Tokenizer::kBos);
    ids.push_back(Tokenizer::kEos);
    CHECK(sp.decode(ids) == "Go.");
    CHECK_THROWS_AS(sp.decode({400}), IndexError);
    CHECK_THROWS_AS(sp.piece(-1), IndexError);
    CHECK_THROWS_AS(sp.encode("caf\xc3"), ValueError);

    const auto copy = SentencePieceTokenizer::from_serialized(sp.serialized());
    CHECK(copy->size() == sp.size());
    CHECK(copy->encode("We are friends.") == sp.encode("We are friends."));
    CHECK_THROWS_AS(SentencePieceTokenizer::from_serialized("not a model"), IOError);
}

TEST_CASE("SentencePieceTokenizer::train: the same sentences and seed give the same model, bad options are refused",
          "[tasks][tokenizer]") {
    const std::vector<std::string> text = corpus_sentences(1000);
    const auto a = SentencePieceTokenizer::train(text, {.vocab_size = 200, .threads = 1});
    const auto b = SentencePieceTokenizer::train(text, {.vocab_size = 200, .threads = 1});
    CHECK(a->serialized() == b->serialized());
    const auto uni = SentencePieceTokenizer::train(text, {.vocab_size = 200, .model_type = "unigram", .threads = 1});
    CHECK(uni->decode(uni->encode("I lost.")) == "I lost.");
    CHECK_THROWS_WITH(SentencePieceTokenizer::train(text, {.vocab_size = 200, .model_type = "wordpiece"}),
                      Catch::Contains("bpe or unigram"));
    CHECK_THROWS_WITH(SentencePieceTokenizer::train({}, {}), Catch::Contains("no sentences"));
    CHECK_THROWS_WITH(SentencePieceTokenizer::train({"ok", "caf\xc3"}, {}),
                      Catch::Contains("sentence 2 is not valid UTF-8"));
    // more pieces than the text can make: SentencePiece's own message comes through
    CHECK_THROWS_WITH(SentencePieceTokenizer::train({"a b", "b a"}, {.vocab_size = 5000, .threads = 1}),
                      Catch::Contains("SentencePiece says"));
}

TEST_CASE("SentencePieceTokenizer::sample_encode: BPE-dropout spells the same text in more pieces, the same for a seed",
          "[tasks][tokenizer]") {
    const SentencePieceTokenizer& sp = small_model();
    const std::vector<std::string> text = corpus_sentences(300);
    const std::vector<std::string_view> views(text.begin(), text.end());
    std::vector<std::vector<int64_t>> best;
    for (const std::string& s : text) best.push_back(sp.encode(s));
    const auto a = sp.sample_encode(views, 0.1, 7);
    REQUIRE(a.size() == text.size());
    CHECK(sp.sample_encode(views, 0.1, 7) == a);  // the same seed: the same pieces
    std::vector<std::vector<int64_t>> from_thread;
    std::thread([&] { from_thread = sp.sample_encode(views, 0.1, 7); }).join();
    CHECK(from_thread == a);  // whichever thread asks
    CHECK(sp.sample_encode(views, 0.1, 8) != a);
    size_t best_pieces = 0, drawn_pieces = 0, differ = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        CHECK(sp.decode(a[i]) == sp.decode(best[i]));  // the same text, in other pieces
        for (int64_t id : a[i]) CHECK((id > Tokenizer::kEos && id < sp.size()));
        best_pieces += best[i].size();
        drawn_pieces += a[i].size();
        differ += a[i] != best[i] ? 1 : 0;
    }
    INFO("pieces: one-best " << best_pieces << ", drawn " << drawn_pieces << "; sentences spelled otherwise "
                             << differ);
    CHECK(drawn_pieces > best_pieces);  // a skipped merge leaves smaller pieces
    CHECK(drawn_pieces < 2 * best_pieces);
    CHECK(differ > text.size() / 10);
    CHECK(sp.sample_encode(views, 0, 7) == best);  // dropout 0: the one-best segmentation
    for (double bad : {-0.1, 1.0, std::nan("")})
        CHECK_THROWS_WITH(sp.sample_encode(views, bad, 7), Catch::Contains("dropout must be in [0, 1)"));
    CHECK_THROWS_WITH(sp.sample_encode({"ok", "caf\xc3"}, 0.1, 7), Catch::Contains("sentence 2 is not valid UTF-8"));
    // a unigram model samples from all its segmentations
    const auto uni = SentencePieceTokenizer::train(corpus_sentences(1000),
                                                   {.vocab_size = 200, .model_type = "unigram", .threads = 1});
    const auto drawn = uni->sample_encode({"I lost my way.", "Je suis perdu."}, 0.1, 3);
    CHECK(uni->decode(drawn[0]) == "I lost my way.");
    CHECK(uni->decode(drawn[1]) == "Je suis perdu.");
}
