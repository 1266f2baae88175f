// tasks/text: d2l's preprocess_nmt, tokenize_nmt, Vocab, truncate_pad and
// build_array_nmt (seed 000 uses them through d2l.load_data_nmt).
#include "tasks/text.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

namespace {
std::vector<int64_t> ints(const core::Tensor& t) { return t.to_vector<int64_t>(); }
}  // namespace

TEST_CASE("preprocess_nmt(text): d2l's spaces, lowercase and space before , . ! ?", "[tasks][text]") {
    struct Case {
        std::string input, expected;
    };
    const std::vector<Case> cases = {
        // the first lines of fra.txt, as the d2l book prints them after preprocessing
        {"Go.\tVa !", "go .\tva !"},
        {"Run!\tCours\u202f!", "run !\tcours !"},        // U+202F NARROW NO-BREAK SPACE -> ' '
        {"Wow!\tÇa alors\u202f!", "wow !\tça alors !"},  // Ç -> ç
        {"Go.\tVa !\nHi.\tSalut !\n", "go .\tva !\nhi .\tsalut !\n"},
        {"I'd\u00a0do it.", "i'd do it ."},  // U+00A0 NO-BREAK SPACE -> ' '
        // capitals with accents (core/utf8's tests compare every code point with Python's str.lower())
        {"ÉCOLE À ÇA ÊTRE ÔTER Â", "école à ça être ôter â"},
        {"ŒUVRE Ÿ Ł Ĳ Ś Ž", "œuvre ÿ ł ĳ ś ž"},
        {"İ", "i\u0307"},  // as Python: "İ".lower() == "i̇"
        {"СТОП Ѐ", "стоп ѐ"},
        {"× ß ı ΟΔΟΣ", "× ß ı οδος"},  // as Python: final sigma
        // the space rule looks at the previous character of the lowercased text
        {"a..", "a . ."},
        {"Hi, you?", "hi , you ?"},
        {"x ,y", "x ,y"},
        {".start", ".start"},             // i > 0 in d2l: no space at the very start
        {"thin\u2009!", "thin\u2009 !"},  // U+2009 is kept and is not a space
        {"a\u202f\u202f?", "a  ?"},       // two replaced spaces, no extra one
        {"", ""},
    };
    for (const Case& c : cases) {
        INFO(c.input);
        CHECK(preprocess_nmt(c.input) == c.expected);
    }
}

TEST_CASE("preprocess_nmt(text): invalid UTF-8 throws ValueError with the byte", "[tasks][text]") {
    REQUIRE_THROWS_AS(preprocess_nmt("ok \xff"), ValueError);
    REQUIRE_THROWS_WITH(preprocess_nmt("ok \xff"), "preprocess_nmt: invalid UTF-8 at byte 3 (0xFF)");
    REQUIRE_THROWS_WITH(preprocess_nmt("\xe2\x80"), "preprocess_nmt: invalid UTF-8 at byte 0 (0xE2)");
}

TEST_CASE("tokenize(line): Python's split(' '), keeping empty pieces", "[tasks][text]") {
    struct Case {
        std::string line;
        TokenLine tokens;
    };
    const std::vector<Case> cases = {
        {"go .", {"go", "."}},    {"ça alors !", {"ça", "alors", "!"}},
        {"a  b", {"a", "", "b"}}, {" a", {"", "a"}},
        {"a ", {"a", ""}},        {"", {""}},
    };
    for (const Case& c : cases) {
        INFO("'" << c.line << "'");
        CHECK(tokenize(c.line) == c.tokens);
    }
}

TEST_CASE("tokenize_nmt(text, num_examples): d2l's line limit i > num_examples and skipped lines", "[tasks][text]") {
    const std::string text = "go .\tva !\nhi .\tsalut !\nno tab\nrun !\tcours !\na\tb\tc\nwho ?\tqui ?\n";
    // All lines: the one without a tab and the one with two are skipped.
    const NmtTokens all = tokenize_nmt(text);
    REQUIRE(all.source.size() == 4);
    CHECK(all.source[0] == TokenLine{"go", "."});
    CHECK(all.target[3] == TokenLine{"qui", "?"});
    // num_examples = 1 reads lines 0 and 1 (d2l's off-by-one), so two pairs.
    CHECK(tokenize_nmt(text, 1).source.size() == 2);
    // num_examples = 3 reads lines 0..3, of which line 2 has no tab: three pairs.
    const NmtTokens three = tokenize_nmt(text, 3);
    CHECK(three.source.size() == 3);
    CHECK(three.target.back() == TokenLine{"cours", "!"});
    REQUIRE_THROWS_WITH(tokenize_nmt(text, -1), "tokenize_nmt: num_examples must be >= 0, got -1");
}

TEST_CASE("Vocab(lines, min_freq, reserved): d2l order, ties by first appearance", "[tasks][text]") {
    // counts: b 2, a 2, c 2, d 1, e 3; first appearance b, a, c, d, e
    const TokenLines corpus = {{"b", "a", "c", "a"}, {"c", "d", "b", "e"}, {"e", "e"}};
    struct Case {
        int64_t min_freq;
        std::vector<std::string> expected;
    };
    const std::vector<Case> cases = {
        {2, {"<unk>", "<pad>", "<bos>", "<eos>", "e", "b", "a", "c"}},
        {0, {"<unk>", "<pad>", "<bos>", "<eos>", "e", "b", "a", "c", "d"}},
        {3, {"<unk>", "<pad>", "<bos>", "<eos>", "e"}},
        {4, {"<unk>", "<pad>", "<bos>", "<eos>"}},
    };
    for (const Case& c : cases) {
        INFO("min_freq " << c.min_freq);
        const Vocab vocab(corpus, c.min_freq, kNmtReserved);
        CHECK(vocab.tokens() == c.expected);
        CHECK(vocab.size() == static_cast<int64_t>(c.expected.size()));
    }
    // No reserved tokens: <unk> then the counted ones.
    CHECK(Vocab(corpus, 2).tokens() == std::vector<std::string>{"<unk>", "e", "b", "a", "c"});
    // A reserved token that also occurs in the text keeps its reserved index.
    const Vocab with_eos({{"<eos>", "x", "<eos>", "x"}}, 1, kNmtReserved);
    CHECK(with_eos.tokens() == std::vector<std::string>{"<unk>", "<pad>", "<bos>", "<eos>", "x"});
}

TEST_CASE("Vocab: to_index, to_tokens, unknown tokens and errors", "[tasks][text]") {
    const Vocab vocab({{"va", "!", "va", "!", "salut"}}, 2, kNmtReserved);
    CHECK(vocab.to_index("va") == 4);
    CHECK(vocab.to_index("!") == 5);
    CHECK(vocab.to_index("salut") == Vocab::kUnk);  // below min_freq
    CHECK(vocab.to_index("jamais") == 0);
    CHECK(vocab.contains("<pad>"));
    CHECK_FALSE(vocab.contains("salut"));
    CHECK(vocab.to_indices({"va", "?", "!"}) == std::vector<int64_t>{4, 0, 5});
    CHECK(vocab.to_tokens({3, 4, 0}) == TokenLine{"<eos>", "va", "<unk>"});
    REQUIRE_THROWS_AS(vocab.to_token(6), IndexError);
    REQUIRE_THROWS_WITH(vocab.to_token(-1), "Vocab::to_token: index -1 out of range for vocabulary of 6");
    REQUIRE_THROWS_WITH(Vocab({}, 0, {"<pad>", "<pad>"}), "Vocab: reserved token '<pad>' appears twice (or is <unk>)");
    REQUIRE_THROWS_AS(Vocab({}, 0, {"<unk>"}), ValueError);
    CHECK(Vocab().tokens() == std::vector<std::string>{"<unk>"});
}

TEST_CASE("Vocab::from_tokens: the tokens() of a vocabulary give it back, repeats and a missing <unk> refused",
          "[tasks][text]") {
    const Vocab vocab({{"a", "back\\slash", "new\nline", "j\u2019ai", "", "cr\r"}}, 0, kNmtReserved);
    const Vocab back = Vocab::from_tokens(vocab.tokens());
    CHECK(back == vocab);
    CHECK(back.to_index("j\u2019ai") == vocab.to_index("j\u2019ai"));
    CHECK_THROWS_WITH(Vocab::from_tokens({"<unk>", "a", "a"}), "Vocab::from_tokens: token 'a' appears twice");
    CHECK_THROWS_WITH(Vocab::from_tokens({"<pad>", "<unk>"}),
                      "Vocab::from_tokens: the first token must be <unk>, got '<pad>'");
    CHECK_THROWS_AS(Vocab::from_tokens({}), ValueError);
}

TEST_CASE("Vocab::deserialize (tformer-checkpoint-1's text): escapes and corrupt input", "[tasks][text]") {
    const Vocab vocab({{"a", "back\\slash", "new\nline", "tab\tbed", "", "cr\r"}}, 0, kNmtReserved);
    const std::string text =
        "tformer-vocab 1 10\n<unk>\n<pad>\n<bos>\n<eos>\na\nback\\\\slash\nnew\\nline\n"
        "tab\\tbed\n\ncr\\r\n";
    const Vocab back = Vocab::deserialize(text);
    CHECK(back == vocab);
    CHECK(back.to_index("tab\tbed") == vocab.to_index("tab\tbed"));
    CHECK(back.to_index("") == 8);

    struct Bad {
        std::string text, message;
    };
    const std::vector<Bad> bad = {
        {"vocab 3\n", "Vocab::deserialize: missing header 'tformer-vocab 1 <size>'"},
        {"tformer-vocab 1 x\n", "Vocab::deserialize: bad token count 'x'"},
        {"tformer-vocab 1 3\n<unk>\na\n", "Vocab::deserialize: header says 3 tokens but the text ends after 2"},
        {"tformer-vocab 1 1\n<unk>\nmore\n",
         "Vocab::deserialize: text continues after the 1 tokens the header announces"},
        {"tformer-vocab 1 2\n<unk>\nbad\\q\n", "Vocab::deserialize: bad escape in token 1 (line 3)"},
        {"tformer-vocab 1 3\n<unk>\na\na\n", "Vocab::deserialize: token 'a' appears twice"},
        {"tformer-vocab 1 1\n<pad>\n", "Vocab::deserialize: the first token must be <unk>"},
        {"tformer-vocab 1 0\n", "Vocab::deserialize: the first token must be <unk>"},
    };
    for (const Bad& b : bad) {
        INFO(b.text);
        REQUIRE_THROWS_AS(Vocab::deserialize(b.text), IOError);
        REQUIRE_THROWS_WITH(Vocab::deserialize(b.text), b.message);
    }
}

TEST_CASE("truncate_pad(line, num_steps, padding): d2l's cut or fill", "[tasks][text]") {
    struct Case {
        std::vector<int64_t> line;
        int64_t num_steps;
        std::vector<int64_t> expected;
    };
    const std::vector<Case> cases = {
        {{47, 4}, 10, {47, 4, 1, 1, 1, 1, 1, 1, 1, 1}},  // d2l's example shape: ids then <pad> = 1
        {{5, 6, 7}, 3, {5, 6, 7}},
        {{5, 6, 7, 8}, 2, {5, 6}},
        {{}, 3, {1, 1, 1}},
    };
    for (const Case& c : cases) CHECK(truncate_pad(c.line, c.num_steps, 1) == c.expected);
    REQUIRE_THROWS_WITH(truncate_pad({1}, 0, 1), "truncate_pad: num_steps must be >= 1, got 0");
}

TEST_CASE("build_array_nmt(lines, vocab, num_steps): ids + <eos>, padding and valid lengths", "[tasks][text]") {
    // vocab: <unk> 0, <pad> 1, <bos> 2, <eos> 3, a 4, b 5, c 6
    const Vocab vocab({{"a", "b", "c"}}, 0, kNmtReserved);
    const TokenLines lines = {
        {"a", "b"},                 // 4 5 <eos> <pad>: valid 3
        {"c", "a", "b", "c", "a"},  // truncated to 4 ids: no <eos>, valid 4
        {"a", "b", "c"},            // exactly fills with <eos>: valid 4
        {"zz"},                     // unknown -> <unk>: valid 2
        {},                         // only <eos>: valid 1
    };
    const NmtArray array = build_array_nmt(lines, vocab, 4);
    CHECK(array.tokens.shape() == core::Shape{5, 4});
    CHECK(array.tokens.dtype() == core::DType::int64);
    CHECK(array.valid_lens.shape() == core::Shape{5});
    CHECK(ints(array.tokens) == std::vector<int64_t>{4, 5, 3, 1,  //
                                                     6, 4, 5, 6,  //
                                                     4, 5, 6, 3,  //
                                                     0, 3, 1, 1,  //
                                                     3, 1, 1, 1});
    CHECK(ints(array.valid_lens) == std::vector<int64_t>{3, 4, 4, 2, 1});

    CHECK(build_array_nmt({}, vocab, 4).tokens.shape() == core::Shape{0, 4});
    REQUIRE_THROWS_WITH(build_array_nmt(lines, vocab, 0), "build_array_nmt: num_steps must be >= 1, got 0");
    REQUIRE_THROWS_WITH(build_array_nmt(lines, Vocab({{"a"}}), 4),
                        "build_array_nmt: the vocabulary (2 tokens) has no <pad> or no <eos>");
}
