// Loading fra.txt into vocabularies and arrays: d2l.load_data_nmt (seed 000)
// plus line checks, random sampling and a validation split.
#include "tasks/fra_eng.hpp"

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace tformer::tasks {

std::string default_fra_eng_path() {
    const char* dir = std::getenv("TFORMER_DATA_DIR");
    if (dir != nullptr && *dir != '\0') return std::string(dir) + "/fra-eng/fra.txt";
    return "data/fra-eng/fra.txt";
}

namespace {

void check_options(const FraEngOptions& o) {
    if (o.path.empty()) fail<ValueError>("load_fra_eng: no path given (apps default to default_fra_eng_path())");
    if (o.num_examples < 0) fail<ValueError>("load_fra_eng: num_examples must be >= 0, got {}", o.num_examples);
    if (o.sample_size < 0) fail<ValueError>("load_fra_eng: sample_size must be >= 0, got {}", o.sample_size);
    if (o.num_examples > 0 && o.sample_size > 0)
        fail<ValueError>("load_fra_eng: num_examples ({}) and sample_size ({}) exclude each other; set one to 0",
                         o.num_examples, o.sample_size);
    if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0))
        fail<ValueError>("load_fra_eng: val_fraction must be in [0, 1), got {}", o.val_fraction);
    if (o.num_steps < 1) fail<ValueError>("load_fra_eng: num_steps must be >= 1, got {}", o.num_steps);
}

bool is_blank(std::string_view side) { return side.find_first_not_of(' ') == std::string_view::npos; }
}  // namespace

std::string read_text_file(const std::string& path, const char* op) {
    return core::read_regular_file(path, op, "a text file");
}

// Step 1: split into lines and keep those that pass the checks. In prefix
// mode only lines 0..num_examples are looked at, as in d2l's tokenize_nmt.
std::vector<RawPair> read_valid_lines(std::string_view text, int64_t num_examples, FraEngReport& report) {
    std::vector<RawPair> pairs;
    size_t start = 0;
    for (int64_t i = 0; start < text.size(); ++i) {  // a final '\n' ends the last line, it does not start one
        if (num_examples > 0 && i > num_examples) break;
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        if (line.ends_with('\r')) line.remove_suffix(1);
        ++report.lines_read;

        const size_t tab = line.find('\t');
        int64_t* skipped = nullptr;
        if (!is_valid_utf8(line))
            skipped = &report.skipped_utf8;
        else if (tab == std::string_view::npos || line.find('\t', tab + 1) != std::string_view::npos)
            skipped = &report.skipped_columns;
        else if (is_blank(line.substr(0, tab)) || is_blank(line.substr(tab + 1)))
            skipped = &report.skipped_empty;
        if (skipped != nullptr) {
            ++*skipped;
            report.blank_lines += line.empty();
            if (report.first_skipped.size() < 10) report.first_skipped.push_back(i + 1);
            continue;
        }
        pairs.push_back({.src = line.substr(0, tab), .tgt = line.substr(tab + 1)});
    }
    report.valid_pairs = static_cast<int64_t>(pairs.size());
    return pairs;
}

void check_corpus_lines(const FraEngReport& r, const std::string& path, const char* op) {
    const int64_t lines = r.lines_read - r.blank_lines;            // non-blank
    if (r.valid_pairs > 0 && 10 * r.valid_pairs >= lines) return;  // at least one line in ten is a pair
    if (lines == 0) fail<ValueError>("{}: '{}' is empty: it holds no 'English<TAB>French' line", op, path);
    std::string first;
    for (int64_t line : r.first_skipped) first += fmt::format("{}{}", first.empty() ? "" : ", ", line);
    fail<ValueError>(
        "{}: '{}' is not a corpus of 'English<TAB>French' lines: only {} of its {} non-blank lines are "
        "such pairs ({} without exactly one tab, {} with an empty side, {} not UTF-8; the first skipped "
        "lines: {})",
        op, path, r.valid_pairs, lines, r.skipped_columns - r.blank_lines, r.skipped_empty, r.skipped_utf8, first);
}

namespace {

// Step 2, sample mode: `count` distinct pairs chosen uniformly by a partial
// Fisher-Yates shuffle (the first `count` slots of a random permutation),
// then put back in file order so that the result reads like the file.
std::vector<RawPair> sample_pairs(const std::vector<RawPair>& pairs, int64_t count, core::Generator& gen) {
    const auto n = static_cast<int64_t>(pairs.size());
    std::vector<int64_t> index(static_cast<size_t>(n));
    std::iota(index.begin(), index.end(), 0);
    for (int64_t i = 0; i < count; ++i) std::swap(index[i], index[i + gen.randint(n - i)]);
    index.resize(static_cast<size_t>(count));
    std::sort(index.begin(), index.end());
    std::vector<RawPair> sample;
    sample.reserve(index.size());
    for (int64_t i : index) sample.push_back(pairs[static_cast<size_t>(i)]);
    return sample;
}

NmtSplit make_split(std::vector<SentencePair> pairs, const TokenLines& src_tokens, const TokenLines& tgt_tokens,
                    const Vocab& src_vocab, const Vocab& tgt_vocab, int64_t num_steps) {
    NmtArray src = build_array_nmt(src_tokens, src_vocab, num_steps);
    NmtArray tgt = build_array_nmt(tgt_tokens, tgt_vocab, num_steps);
    return NmtSplit{.src = src.tokens,
                    .src_valid_len = src.valid_lens,
                    .tgt = tgt.tokens,
                    .tgt_valid_len = tgt.valid_lens,
                    .pairs = std::move(pairs)};
}

// Step 3: d2l preprocessing, one side at a time. That equals d2l's call on
// the whole file except for a side that starts with , . ! ? (d2l would put a
// space before it, as its previous character is '\n' or '\t'); fra.txt has
// no such side. Pairs are independent, so both cores share the work; nothing
// here can throw, as step 1 has already checked the UTF-8.
std::vector<SentencePair> preprocess_pairs(const std::vector<RawPair>& raw) {
    std::vector<SentencePair> pairs(raw.size());
    core::parallel_for(0, static_cast<int64_t>(raw.size()), 64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const RawPair& p = raw[static_cast<size_t>(i)];
            pairs[static_cast<size_t>(i)] = {.src = preprocess_nmt(p.src), .tgt = preprocess_nmt(p.tgt)};
        }
    });
    return pairs;
}

// The pairs of a training split and a validation split.
struct TrainVal {
    std::vector<SentencePair> train, val;
};

// Step 4: validation split by distinct English sentence. Group ids follow
// first appearance; shuffling them with the seeded generator picks the
// held-out sentences.
TrainVal split_by_sentence(std::vector<SentencePair> pairs, double val_fraction, core::Generator& gen,
                           FraEngReport& report) {
    std::unordered_map<std::string_view, int64_t> group_of;
    std::vector<int64_t> group(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i)
        group[i] = group_of.try_emplace(pairs[i].src, static_cast<int64_t>(group_of.size())).first->second;
    const auto num_groups = static_cast<int64_t>(group_of.size());
    const auto num_val_groups = static_cast<int64_t>(std::llround(val_fraction * num_groups));
    std::vector<int64_t> order(static_cast<size_t>(num_groups));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = 0; i < num_val_groups; ++i) std::swap(order[i], order[i + gen.randint(num_groups - i)]);
    std::vector<bool> is_val(static_cast<size_t>(num_groups), false);
    for (int64_t i = 0; i < num_val_groups; ++i) is_val[static_cast<size_t>(order[i])] = true;
    report.val_sentences = num_val_groups;
    report.train_sentences = num_groups - num_val_groups;
    if (report.train_sentences == 0)
        fail<ValueError>("load_fra_eng: no training pair left ({} valid pairs, {} English sentences, val_fraction {})",
                         pairs.size(), num_groups, val_fraction);
    // group_of views pairs[i].src: clear it before moving
    group_of.clear();
    TrainVal out;
    for (size_t i = 0; i < pairs.size(); ++i)
        (is_val[static_cast<size_t>(group[i])] ? out.val : out.train).push_back(std::move(pairs[i]));
    return out;
}

// d2l's tokenize of one side of every pair of a split.
TokenLines tokenize_side(const std::vector<SentencePair>& split, std::string SentencePair::*side) {
    TokenLines lines(split.size());
    core::parallel_for(0, static_cast<int64_t>(split.size()), 64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            lines[static_cast<size_t>(i)] = tokenize(split[static_cast<size_t>(i)].*side);
    });
    return lines;
}

}  // namespace

FraEngData load_fra_eng(const FraEngOptions& options) {
    check_options(options);
    const std::string text = read_text_file(options.path, "load_fra_eng");
    FraEngData data;
    FraEngReport& report = data.report;
    core::Generator gen(options.seed);

    // 1-2: checked lines, then the prefix / sample / whole file.
    std::vector<RawPair> raw = read_valid_lines(text, options.num_examples, report);
    check_corpus_lines(report, options.path, "load_fra_eng");
    if (options.sample_size > 0) {
        if (options.sample_size > report.valid_pairs)
            fail<ValueError>("load_fra_eng: sample_size {} exceeds the {} valid pairs in '{}'", options.sample_size,
                             report.valid_pairs, options.path);
        raw = sample_pairs(raw, options.sample_size, gen);
    }

    // 3-4: d2l preprocessing, then the split by English sentence; tokenise each side of each split.
    TrainVal split = split_by_sentence(preprocess_pairs(raw), options.val_fraction, gen, report);
    std::vector<SentencePair>& train_pairs = split.train;
    std::vector<SentencePair>& val_pairs = split.val;
    const TokenLines train_src = tokenize_side(train_pairs, &SentencePair::src);
    const TokenLines train_tgt = tokenize_side(train_pairs, &SentencePair::tgt);
    const TokenLines val_src = tokenize_side(val_pairs, &SentencePair::src);
    const TokenLines val_tgt = tokenize_side(val_pairs, &SentencePair::tgt);
    report.train_pairs = static_cast<int64_t>(train_pairs.size());
    report.val_pairs = static_cast<int64_t>(val_pairs.size());

    // 5: d2l.Vocab(source, min_freq=2, reserved_tokens=['<pad>', '<bos>', '<eos>']), training side only.
    data.src_vocab = Vocab(train_src, options.min_freq, kNmtReserved);
    data.tgt_vocab = Vocab(train_tgt, options.min_freq, kNmtReserved);

    // 6: build_array_nmt(source, src_vocab, num_steps) and the same for the target.
    data.train =
        make_split(std::move(train_pairs), train_src, train_tgt, data.src_vocab, data.tgt_vocab, options.num_steps);
    data.val = make_split(std::move(val_pairs), val_src, val_tgt, data.src_vocab, data.tgt_vocab, options.num_steps);
    return data;
}

}  // namespace tformer::tasks
