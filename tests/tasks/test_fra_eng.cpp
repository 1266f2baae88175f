// tasks/fra_eng: loading data/fra-eng/fra.txt as d2l.load_data_nmt does
// (seed 000), plus line checks, sampling and the validation split.
#include "tasks/fra_eng.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

namespace {

const std::string kFraEng = TFORMER_SOURCE_DIR "/data/fra-eng/fra.txt";

std::vector<int64_t> ints(const core::Tensor& t) { return t.to_vector<int64_t>(); }

// A file in the temporary directory, removed when the test ends.
struct TempFile {
    std::filesystem::path path;
    TempFile(const std::string& name, const std::string& contents)
        : path(std::filesystem::temp_directory_path() / ("tformer_test_" + std::to_string(::getpid()) + "_" + name)) {
        std::ofstream(path, std::ios::binary) << contents;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

TokenLines tokenize_all(const std::vector<SentencePair>& pairs, bool source) {
    TokenLines lines;
    for (const SentencePair& p : pairs) lines.push_back(tokenize(source ? p.src : p.tgt));
    return lines;
}

}  // namespace

TEST_CASE("load_fra_eng(options): d2l prefix mode, num_examples 600 gives 601 pairs and vocabs 184/201",
          "[tasks][fra_eng]") {
    const FraEngData data = load_fra_eng({.path = kFraEng, .num_examples = 600, .num_steps = 10, .min_freq = 2});
    // d2l reads lines 0..600 (`if i > num_examples: break`): 601 pairs.
    CHECK(data.report.lines_read == 601);
    CHECK(data.report.valid_pairs == 601);
    CHECK(data.report.train_pairs == 601);
    CHECK(data.report.val_pairs == 0);
    // The sizes d2l reports for load_data_nmt(batch_size, num_steps=10) with
    // its default 600 examples: the lines held back from this copy of the file
    // do not change them.
    CHECK(data.src_vocab.size() == 184);
    CHECK(data.tgt_vocab.size() == 201);
    CHECK(data.src_vocab.tokens()[4] == ".");
    CHECK(data.src_vocab.tokens()[9] == "go");
    CHECK(data.tgt_vocab.tokens()[16] == "va");

    CHECK(data.train.pairs.front() == SentencePair{.src = "go .", .tgt = "va !"});
    CHECK(data.train.pairs[2] == SentencePair{.src = "run !", .tgt = "cours !"});  // "Cours\u202f!"
    CHECK(data.train.src.shape() == core::Shape{601, 10});
    CHECK(data.train.tgt.shape() == core::Shape{601, 10});
    // "go ." -> go . <eos> <pad> ...  and  "va !" -> va ! <eos> <pad> ...
    CHECK(ints(data.train.src.select(0, 0)) == std::vector<int64_t>{9, 4, 3, 1, 1, 1, 1, 1, 1, 1});
    CHECK(ints(data.train.tgt.select(0, 0)) == std::vector<int64_t>{16, 5, 3, 1, 1, 1, 1, 1, 1, 1});
    CHECK(data.train.src_valid_len.at({0}) == 3);
    CHECK(data.train.tgt_valid_len.at({0}) == 3);
    CHECK(data.val.src.shape() == core::Shape{0, 10});
    CHECK(data.val.pairs.empty());

    // The same as running d2l's functions one by one on the preprocessed text.
    std::ifstream in(kFraEng, std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const NmtTokens tokens = tokenize_nmt(preprocess_nmt(raw), 600);
    CHECK(tokens.source.size() == 601);
    CHECK(Vocab(tokens.source, 2, kNmtReserved) == data.src_vocab);
    CHECK(Vocab(tokens.target, 2, kNmtReserved) == data.tgt_vocab);
    const NmtArray tgt = build_array_nmt(tokens.target, data.tgt_vocab, 10);
    CHECK(ints(tgt.tokens) == ints(data.train.tgt));
    CHECK(ints(tgt.valid_lens) == ints(data.train.tgt_valid_len));
}

TEST_CASE("load_fra_eng(options): the whole file loads with no skipped line", "[tasks][fra_eng]") {
    const FraEngData data = load_fra_eng({.path = kFraEng, .num_steps = 10, .min_freq = 2});
    CHECK(data.report.lines_read == 165001);
    CHECK(data.report.valid_pairs == 165001);
    CHECK(data.report.skipped_columns + data.report.skipped_empty + data.report.skipped_utf8 == 0);
    // 115,776 distinct English sentences in the file; lowercasing merges three
    // pairs of them ("Christmas day." / "Christmas Day." ...).
    CHECK(data.report.train_sentences == 115773);
    // Vocabularies of the whole shipped file; d2l's own Python code gives the
    // same sizes on it (the full original file, before 2,129 lines were held
    // back, gives slightly larger ones).
    CHECK(data.src_vocab.size() == 9980);
    CHECK(data.tgt_vocab.size() == 17759);
    // The last lines are long paragraphs: truncated to 10 ids, no <eos>.
    CHECK(data.train.src_valid_len.at({-1}) == 10);
}

TEST_CASE("load_fra_eng(options): validation split shares no English sentence with training", "[tasks][fra_eng]") {
    const FraEngOptions options{
        .path = kFraEng, .sample_size = 30000, .seed = 11, .val_fraction = 0.2, .num_steps = 12, .min_freq = 2};
    const FraEngData data = load_fra_eng(options);
    const FraEngReport& r = data.report;
    CHECK(r.train_pairs + r.val_pairs == 30000);
    CHECK(r.val_sentences == std::llround(0.2 * static_cast<double>(r.train_sentences + r.val_sentences)));

    std::set<std::string> train_en, val_en;
    for (const SentencePair& p : data.train.pairs) train_en.insert(p.src);
    for (const SentencePair& p : data.val.pairs) val_en.insert(p.src);
    CHECK(static_cast<int64_t>(train_en.size()) == r.train_sentences);
    CHECK(static_cast<int64_t>(val_en.size()) == r.val_sentences);
    int64_t shared = 0;
    for (const std::string& s : val_en) shared += train_en.count(s);
    CHECK(shared == 0);

    // Vocabularies come from the training side only; validation rows use them.
    CHECK(Vocab(tokenize_all(data.train.pairs, true), 2, kNmtReserved) == data.src_vocab);
    CHECK(Vocab(tokenize_all(data.train.pairs, false), 2, kNmtReserved) == data.tgt_vocab);
    const NmtArray val_src = build_array_nmt(tokenize_all(data.val.pairs, true), data.src_vocab, 12);
    CHECK(data.val.src.shape() == core::Shape{r.val_pairs, 12});
    CHECK(ints(val_src.tokens) == ints(data.val.src));
    CHECK(ints(val_src.valid_lens) == ints(data.val.src_valid_len));
    CHECK(data.val.tgt_valid_len.shape() == core::Shape{r.val_pairs});
}

TEST_CASE("load_fra_eng(options): sample mode is deterministic for a seed", "[tasks][fra_eng]") {
    const FraEngOptions options{.path = kFraEng, .sample_size = 2000, .seed = 5, .val_fraction = 0.1};
    const FraEngData a = load_fra_eng(options);
    const FraEngData b = load_fra_eng(options);
    CHECK(a.train.pairs == b.train.pairs);
    CHECK(a.val.pairs == b.val.pairs);
    CHECK(a.src_vocab == b.src_vocab);
    CHECK(ints(a.train.tgt) == ints(b.train.tgt));

    FraEngOptions other = options;
    other.seed = 6;
    const FraEngData c = load_fra_eng(other);
    CHECK(c.report.train_pairs + c.report.val_pairs == 2000);
    CHECK_FALSE(c.train.pairs == a.train.pairs);

    // A sample is spread over the file, unlike d2l's prefix of short sentences:
    // some pair comes from the last half, whose sentences are 5+ words long.
    int64_t long_ones = 0;
    for (const SentencePair& p : a.train.pairs) long_ones += tokenize(p.src).size() >= 8;
    CHECK(long_ones > 100);
}

TEST_CASE("load_fra_eng(options): bad lines are skipped and counted", "[tasks][fra_eng]") {
    const TempFile file("bad_lines.txt",
                        "Go.\tVa !\n"               // 1 good
                        "no tab here\n"             // 2 no tab
                        "Hello.\t\n"                // 3 empty French side
                        "Bad \xff byte\tMauvais\n"  // 4 invalid UTF-8
                        "a\tb\tc\n"                 // 5 two tabs
                        "\n"                        // 6 blank
                        "Hi.\tSalut !\r\n"          // 7 good, CRLF
                        "  \tblank English\n"       // 8 English side only spaces
                        "Run!\tCours\u202f!");      // 9 good, no final newline
    const FraEngData data = load_fra_eng({.path = file.path.string(), .min_freq = 1});
    const FraEngReport& r = data.report;
    CHECK(r.lines_read == 9);
    CHECK(r.skipped_columns == 3);
    CHECK(r.skipped_empty == 2);
    CHECK(r.skipped_utf8 == 1);
    CHECK(r.valid_pairs == 3);
    CHECK(r.first_skipped == std::vector<int64_t>{2, 3, 4, 5, 6, 8});
    CHECK(data.train.pairs == std::vector<SentencePair>{{"go .", "va !"}, {"hi .", "salut !"}, {"run !", "cours !"}});
    // min_freq 1: "." twice first, then go hi run ! in order of appearance
    CHECK(data.src_vocab.tokens() ==
          std::vector<std::string>{"<unk>", "<pad>", "<bos>", "<eos>", ".", "go", "hi", "run", "!"});

    // Prefix mode looks only at lines 0..num_examples: lines 1-3 hold one good pair.
    const FraEngData prefix = load_fra_eng({.path = file.path.string(), .num_examples = 2, .min_freq = 1});
    CHECK(prefix.report.lines_read == 3);
    CHECK(prefix.report.valid_pairs == 1);
    CHECK(prefix.report.skipped_columns + prefix.report.skipped_empty == 2);
}

TEST_CASE("load_fra_eng(options): missing file, empty file and bad options throw", "[tasks][fra_eng]") {
    REQUIRE_THROWS_AS(load_fra_eng({.path = "/nonexistent/fra.txt"}), IOError);
    REQUIRE_THROWS_WITH(load_fra_eng({.path = "/nonexistent/fra.txt"}),
                        "load_fra_eng: cannot open '/nonexistent/fra.txt': No such file or directory");
    const TempFile empty("empty.txt", "");
    REQUIRE_THROWS_WITH(load_fra_eng({.path = empty.path.string()}),
                        "load_fra_eng: '" + empty.path.string() + "' is empty: it holds no 'English<TAB>French' line");
    // a file without tabs, or a binary with a tab on some line, is not a corpus: the message says so and
    // counts the lines, and no training starts on the odd line that holds a tab
    const TempFile no_tabs("no_tabs.txt", "hello world\nno tabs on this line\n\nnor on this one\n");
    REQUIRE_THROWS_WITH(
        load_fra_eng({.path = no_tabs.path.string()}),
        "load_fra_eng: '" + no_tabs.path.string() +
            "' is not a corpus of 'English<TAB>French' lines: "
            "only 0 of its 3 non-blank lines are such pairs (3 without exactly one tab, 0 with an empty "
            "side, 0 not UTF-8; the first skipped lines: 1, 2, 3, 4)");
    std::string binary = "Go.\tVa !\n";
    for (int i = 0; i < 20; ++i)
        binary +=
            "\x7f"
            "ELF\x02\x01\xff\xfe\n";
    const TempFile elf("binary.txt", binary);
    REQUIRE_THROWS_WITH(load_fra_eng({.path = elf.path.string()}), Catch::Contains("only 1 of its 21 non-blank lines"));
    REQUIRE_THROWS_WITH(load_fra_eng({.path = std::filesystem::temp_directory_path().string()}),
                        Catch::Contains("is a directory; give the path of a text file"));
    REQUIRE_THROWS_WITH(load_fra_eng({.path = "/dev/zero"}),
                        Catch::Contains("'/dev/zero' is a character device, not a regular file"));
    const TempFile one("one.txt", "Go.\tVa !\nGo.\tMarche.\n");  // one English sentence, two translations
    REQUIRE_THROWS_AS(load_fra_eng({.path = one.path.string(), .val_fraction = 0.6}), ValueError);

    struct Bad {
        FraEngOptions options;
        std::string message;
    };
    using O = FraEngOptions;  // named in each row: GCC 12 warns falsely about nested braces here
    const std::vector<Bad> bad = {
        {O{.path = ""}, "load_fra_eng: no path given (apps default to default_fra_eng_path())"},
        {O{.path = kFraEng, .num_examples = 10, .sample_size = 10},
         "load_fra_eng: num_examples (10) and sample_size (10) exclude each other; set one to 0"},
        {O{.path = kFraEng, .num_examples = -1}, "load_fra_eng: num_examples must be >= 0, got -1"},
        {O{.path = kFraEng, .val_fraction = 1.0}, "load_fra_eng: val_fraction must be in [0, 1), got 1"},
        {O{.path = kFraEng, .num_steps = 0}, "load_fra_eng: num_steps must be >= 1, got 0"},
        {O{.path = one.path.string(), .sample_size = 3},
         "load_fra_eng: sample_size 3 exceeds the 2 valid pairs in '" + one.path.string() + "'"},
    };
    for (const Bad& b : bad) {
        INFO(b.message);
        REQUIRE_THROWS_AS(load_fra_eng(b.options), ValueError);
        REQUIRE_THROWS_WITH(load_fra_eng(b.options), b.message);
    }
}

TEST_CASE("default_fra_eng_path(): TFORMER_DATA_DIR or the repository-relative path", "[tasks][fra_eng]") {
    const char* old = std::getenv("TFORMER_DATA_DIR");
    const std::string saved = old ? old : "";
    ::setenv("TFORMER_DATA_DIR", "/opt/tformer-data", 1);
    CHECK(default_fra_eng_path() == "/opt/tformer-data/fra-eng/fra.txt");
    ::setenv("TFORMER_DATA_DIR", "", 1);
    CHECK(default_fra_eng_path() == "data/fra-eng/fra.txt");
    ::unsetenv("TFORMER_DATA_DIR");
    CHECK(default_fra_eng_path() == "data/fra-eng/fra.txt");
    if (old) ::setenv("TFORMER_DATA_DIR", saved.c_str(), 1);
}
