// Tutorial 15 · Subword tokenization: why a word vocabulary fails on new
// sentences, byte-pair encoding (BPE) written out and run merge by merge,
// and SentencePiece's BPE on the same text, the tokenizer `tformer train
// translate` uses.
//
// Follows seed 002 (002_36798a9f04a86cc8.txt), 1.1 tokenizer 预处理 (text ->
// tokens -> input ids, with BERT's WordPiece tokenizer: step 4b trains a
// WordPiece vocabulary on the corpus, lays it out as BERT's vocab.txt and
// reproduces what of the document's ids does not depend on BERT's own
// vocabulary file) and seed 000's d2l word vocabulary (d2l.Vocab with
// min_freq 2, whose unknown words become <unk>).
// Read it with tutorials/15_subword_tokenization/README.md.
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
// tutorial-languages: en zh
// tutorial-fault: layout-without-reserved | the document's ids 101, 138 and 102
// tutorial-fault: wordpiece-by-frequency | every merge is the pair with the largest count(ab)
#include "common/prelude.hpp"
#include "core/utf8.hpp"
#include "exercise.hpp"
#include "nn/layers.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/text.hpp"
#include "tasks/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// ---- the data -----------------------------------------------------------------------------

// A seeded random sample of sentence pairs from the whole corpus (the file is
// sorted by length, so its first lines would all be short).
std::vector<tasks::RawPair> sample_pairs(const std::string& text, int64_t count, uint64_t seed) {
    tasks::FraEngReport report;
    std::vector<tasks::RawPair> all = tasks::read_valid_lines(text, 0, report);
    core::Generator gen(seed);
    core::shuffle(all.begin(), all.end(), gen);
    all.resize(static_cast<size_t>(count));
    return all;
}

// d2l's preprocessing turns U+202F and U+00A0 (French spaces before ! ? :) into
// spaces; SentencePiece's NFKC normalisation does the same, so both
// tokenizers below see one kind of space.
std::string plain_spaces(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        if (s.substr(i, 3) == "\u202f")
            out += ' ', i += 3;
        else if (s.substr(i, 2) == "\u00a0")
            out += ' ', i += 2;
        else
            out += s[i++];
    }
    return out;
}

// ---- BPE, written out ----------------------------------------------------------------------

// The characters (UTF-8 code points) of a text.
std::vector<std::string> characters_of(std::string_view text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size(); i += out.back().size())
        out.emplace_back(text.substr(i, core::utf8_char_length(text, i)));
    return out;
}

// The characters of a word, the first one marked with "▁" for "a word
// starts here", as SentencePiece writes it.
std::vector<std::string> characters(std::string_view word) {
    std::vector<std::string> out = characters_of(word);
    if (!out.empty()) out.front() = "\u2581" + out.front();
    return out;
}

std::vector<std::string> words_of(std::string_view sentence) {
    std::vector<std::string> out;
    for (const std::string& w : tasks::tokenize(sentence))
        if (!w.empty()) out.push_back(w);
    return out;
}

// The training text as BPE sees it: each distinct word once, as a list of
// symbols, with how often it occurs.
struct WordCounts {
    std::vector<std::string> word;
    std::vector<std::vector<std::string>> symbols;
    std::vector<int64_t> count;
    int64_t total_symbols() const {
        int64_t n = 0;
        for (size_t i = 0; i < symbols.size(); ++i) n += count[i] * static_cast<int64_t>(symbols[i].size());
        return n;
    }
};

WordCounts count_words(const std::vector<std::string>& sentences) {
    std::map<std::string, int64_t> freq;  // ordered: the same ties every run
    for (const std::string& s : sentences)
        for (const std::string& w : words_of(s)) ++freq[w];
    WordCounts wc;
    for (const auto& [w, n] : freq) {
        wc.word.push_back(w);
        wc.symbols.push_back(characters(w));
        wc.count.push_back(n);
    }
    return wc;
}

using Pair = std::pair<std::string, std::string>;

// How often each adjacent pair of symbols occurs in the text (a word's pairs
// count as often as the word).
std::map<Pair, int64_t> pair_counts(const WordCounts& wc) {
    std::map<Pair, int64_t> counts;
    for (size_t i = 0; i < wc.symbols.size(); ++i)
        for (size_t j = 0; j + 1 < wc.symbols[i].size(); ++j)
            counts[{wc.symbols[i][j], wc.symbols[i][j + 1]}] += wc.count[i];
    return counts;
}

// Replaces every occurrence of the pair (left to right, not overlapping) by
// one symbol, `joined` (BPE's is the two glued; WordPiece drops the second's "##").
std::vector<std::string> merge(const std::vector<std::string>& symbols, const Pair& pair, const std::string& joined) {
    std::vector<std::string> out;
    for (size_t j = 0; j < symbols.size(); ++j) {
        if (j + 1 < symbols.size() && symbols[j] == pair.first && symbols[j + 1] == pair.second) {
            out.push_back(joined);
            ++j;
        } else {
            out.push_back(symbols[j]);
        }
    }
    return out;
}

// Sennrich et al. (2016): repeat `merges` times: find the most frequent pair,
// make it one symbol everywhere. Ties go to the pair that sorts first.
std::vector<Pair> learn_bpe(WordCounts& wc, int64_t merges,
                            const std::function<void(const std::vector<Pair>& learned, int64_t count)>& seen) {
    std::vector<Pair> learned;
    for (int64_t m = 0; m < merges; ++m) {
        const std::map<Pair, int64_t> counts = pair_counts(wc);
        if (counts.empty()) break;
        const auto best = std::max_element(counts.begin(), counts.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
        for (auto& s : wc.symbols) s = merge(s, best->first, best->first.first + best->first.second);
        learned.push_back(best->first);
        seen(learned, best->second);
    }
    return learned;
}

// Encoding new text replays the merges in the order they were learnt.
std::vector<std::string> apply_bpe(std::string_view word, const std::vector<Pair>& merges) {
    std::vector<std::string> symbols = characters(word);
    for (const Pair& p : merges) symbols = merge(symbols, p, p.first + p.second);
    return symbols;
}

std::vector<std::string> bpe_sentence(std::string_view sentence, const std::vector<Pair>& merges) {
    std::vector<std::string> out;
    for (const std::string& w : words_of(sentence))
        for (std::string& piece : apply_bpe(w, merges)) out.push_back(std::move(piece));
    return out;
}

// BERT's WordPiece encoding of one word: greedy longest match first. From the
// start of the word take the longest piece in the vocabulary, then go on from
// there with pieces marked "##" (they continue a word); a word that cannot be
// covered becomes [UNK].
std::vector<std::string> wordpiece(const std::string& word, const std::set<std::string>& vocab) {
    std::vector<std::string> pieces;
    size_t start = 0;
    while (start < word.size()) {
        size_t end = word.size();
        std::string piece;
        for (; end > start; --end) {
            piece = (start > 0 ? "##" : "") + word.substr(start, end - start);
            if (vocab.count(piece)) break;
        }
        if (end == start) return {"[UNK]"};
        pieces.push_back(piece);
        start = end;
    }
    return pieces;
}

// ---- WordPiece, trained on the corpus and laid out as BERT's vocab.txt ----------------------

// BERT's BasicTokenizer, cased (as bert-base-multilingual-cased): split at
// white space, and every punctuation character becomes a word of its own
// ("I'm" -> I ' m); letters and digits stay together ("24GB").
std::vector<std::string> bert_words(std::string_view text) {
    static const std::set<std::string> marks = {"«", "»", "‘", "’", "“", "”", "…", "–", "—", "¡", "¿"};
    std::vector<std::string> words;
    std::string word;
    auto flush = [&] {
        if (!word.empty()) words.push_back(word);
        word.clear();
    };
    for (const std::string& ch : characters_of(text)) {
        const auto c = static_cast<unsigned char>(ch[0]);
        const bool ascii_punct = ch.size() == 1 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
                                                    (c >= 91 && c <= 96) || (c >= 123 && c <= 126));
        if (ch == " " || ch == "\t") {
            flush();
        } else if (ascii_punct || marks.count(ch)) {
            flush();
            words.push_back(ch);
        } else {
            word += ch;
        }
    }
    flush();
    return words;
}

// A WordPiece vocabulary learnt from word counts.
struct WordPieceVocab {
    std::vector<std::string> characters;  // the single characters: a word's first as it is, the others with "##"
    std::vector<std::string> learnt;      // the merged pieces, in the order they were learnt
    std::vector<Pair> joined;             // what each of them joined
};

// The piece that a followed by b make: b's "##" goes ("Ti" + "##tan" -> "Titan").
std::string joined_piece(const std::string& a, const std::string& b) {
    return a + b.substr(b.starts_with("##") ? 2 : 0);
}

namespace faults {
double by_frequency(int64_t pair, int64_t a, int64_t b);
}

// WordPiece training (Schuster and Nakajima, 2012; BERT's vocabulary was made
// this way): every word starts as its characters, the first as it is and
// the others marked "##" (they continue a word); then, `merges` times, the
// adjacent pair (a, b) with the largest
//     score = count(ab) / (count(a) · count(b))
// becomes one piece everywhere. count() weighs each occurrence by how often
// its word occurs. Ties go to the pair whose two strings sort first. The
// counts are updated in place, only in the words that hold the merged pair.
WordPieceVocab learn_wordpiece(const std::map<std::string, int64_t>& words, int64_t merges,
                               const std::function<double(int64_t, int64_t, int64_t)>& score) {
    std::vector<std::string> names;  // symbol id -> piece
    std::unordered_map<std::string, int32_t> ids;
    auto symbol = [&](const std::string& piece) {
        const auto [it, fresh] = ids.emplace(piece, static_cast<int32_t>(names.size()));
        if (fresh) names.push_back(piece);
        return it->second;
    };
    std::vector<std::vector<int32_t>> text;  // each distinct word as symbol ids
    std::vector<int64_t> times;              // how often each word occurs
    for (const auto& [word, n] : words) {
        std::vector<int32_t> s;
        for (const std::string& ch : characters_of(word)) s.push_back(symbol(s.empty() ? ch : "##" + ch));
        text.push_back(std::move(s));
        times.push_back(n);
    }
    WordPieceVocab vocab;
    vocab.characters = names;
    std::sort(vocab.characters.begin(), vocab.characters.end());

    auto key = [](int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); };
    std::vector<int64_t> count(names.size(), 0);
    std::unordered_map<uint64_t, int64_t> pairs;
    std::unordered_map<uint64_t, std::vector<size_t>> holders;  // pair -> the words that held it (may be stale)
    auto tally = [&](size_t w, int64_t sign) {                  // add (+1) or remove (-1) word w's counts
        const std::vector<int32_t>& s = text[w];
        for (size_t i = 0; i < s.size(); ++i) {
            count[s[i]] += sign * times[w];
            if (i + 1 == s.size()) continue;
            const uint64_t k = key(s[i], s[i + 1]);
            if ((pairs[k] += sign * times[w]) == 0) pairs.erase(k);
            if (sign > 0) holders[k].push_back(w);
        }
    };
    for (size_t w = 0; w < text.size(); ++w) tally(w, +1);

    for (int64_t m = 0; m < merges && !pairs.empty(); ++m) {
        uint64_t best = 0;
        double top = -1;
        for (const auto& [k, n] : pairs) {
            const int32_t a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xffffffffu);
            const double sc = score(n, count[a], count[b]);
            const int32_t ba = static_cast<int32_t>(best >> 32), bb = static_cast<int32_t>(best & 0xffffffffu);
            if (sc > top || (sc == top && std::pair(names[a], names[b]) < std::pair(names[ba], names[bb])))
                best = k, top = sc;
        }
        const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
        const int32_t ab = symbol(joined_piece(names[a], names[b]));
        count.resize(names.size(), 0);
        vocab.learnt.push_back(names[ab]);
        vocab.joined.push_back({names[a], names[b]});
        std::vector<size_t> affected = std::move(holders[best]);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        for (const size_t w : affected) {
            std::vector<int32_t>& s = text[w];
            bool holds = false;
            for (size_t i = 0; i + 1 < s.size(); ++i) holds = holds || (s[i] == a && s[i + 1] == b);
            if (!holds) continue;
            tally(w, -1);
            std::vector<int32_t> merged;
            for (size_t i = 0; i < s.size(); ++i) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    merged.push_back(ab);
                    ++i;
                } else {
                    merged.push_back(s[i]);
                }
            }
            s = std::move(merged);
            tally(w, +1);
        }
        holders.erase(best);
    }
    return vocab;
}

// WordPiece's own score: count(ab) / (count(a) · count(b)).
double wordpiece_score(int64_t pair, int64_t a, int64_t b) {
    return static_cast<double>(pair) / (static_cast<double>(a) * static_cast<double>(b));
}

// BERT's vocab.txt layout: [PAD] at 0, [unused1] .. [unused99] at 1-99, [UNK]
// [CLS] [SEP] [MASK] at 100-103, two more reserved entries at 104-105, then
// the single characters in code point order, every printable ASCII one
// included ("!" at 106, so "A" at 106 + 65 - 33 = 138), then the "##"
// characters (every printable ASCII one again), then the learnt pieces in
// the order they were learnt.
std::vector<std::string> bert_vocab_file(const WordPieceVocab& v, int64_t reserved_after_mask = 2) {
    std::vector<std::string> file = {"[PAD]"};
    for (int i = 1; i <= 99; ++i) file.push_back(fmt::format("[unused{}]", i));
    for (const char* special : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) file.push_back(special);
    for (int64_t i = 0; i < reserved_after_mask; ++i) file.push_back(fmt::format("[unused{}]", 100 + i));
    std::set<std::string> singles, continuing;
    for (int c = 33; c <= 126; ++c) {
        singles.insert(std::string(1, static_cast<char>(c)));
        continuing.insert("##" + std::string(1, static_cast<char>(c)));
    }
    for (const std::string& ch : v.characters) (ch.starts_with("##") ? continuing : singles).insert(ch);
    // std::set<std::string> sorts UTF-8 by bytes, which is code point order
    file.insert(file.end(), singles.begin(), singles.end());
    file.insert(file.end(), continuing.begin(), continuing.end());
    std::set<std::string> listed(file.begin(), file.end());
    for (const std::string& piece : v.learnt)
        if (listed.insert(piece).second) file.push_back(piece);
    return file;
}

// BERT's tokenizer on one sentence: [CLS], the WordPiece pieces of every word, [SEP].
std::vector<std::string> bert_pieces(std::string_view sentence, const std::set<std::string>& vocab) {
    std::vector<std::string> pieces = {"[CLS]"};
    for (const std::string& word : bert_words(sentence))
        for (const std::string& p : wordpiece(word, vocab)) pieces.push_back(p);
    pieces.push_back("[SEP]");
    return pieces;
}

// The merges of step 4b's WordPiece vocabulary.
constexpr int64_t kWordPieceMerges = 10000;

// What the steps share: the sentences, and the BPE that step 2 learns from them for steps 3 and 4.
struct Lesson {
    // 3,000 pairs to learn from, 500 held out; both languages, as the translator's joint vocabulary
    std::vector<std::string> train, held_out;  // each pair as its English, then its French sentence
    WordCounts wc;                             // the training words as symbols; step 2 merges them in place
    std::vector<Pair> merges;                  // step 2's 600 merges, in the order they were learnt
    std::set<std::string> alphabet;            // step 2's starting symbols (characters, "▁" + first characters)

    Lesson() {
        const std::string text = tasks::read_text_file(tutorial::find_corpus().string(), "tutorial 15");
        const std::vector<tasks::RawPair> pairs = sample_pairs(text, 3500, 15);
        for (size_t i = 0; i < pairs.size(); ++i) {
            auto& side = i < 3000 ? train : held_out;
            side.push_back(plain_spaces(pairs[i].src));
            side.push_back(plain_spaces(pairs[i].tgt));
        }
        wc = count_words(train);
    }
};

// ---- the steps --------------------------------------------------------------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 训练 (d2l.load_data_nmt: d2l.Vocab, min_freq 2, <unk>)
void why_not_words(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 000 (d2l) tokenises by words and keeps those seen at least twice (min_freq 2); everything "
                "else becomes <unk>. Build that vocabulary on 3,000 random sentence pairs of the corpus, English and "
                "French together, and read 500 other pairs with it:",
          .zh =
              "种子文档 000（d2l）按词分词，只保留至少出现两次的词（min_freq 2），其余的都变成 <unk>。"
              "在语料中随机抽取的 3,000 个句子对上（英语和法语合在一起）建立这样的词表，再用它读另外 500 个句子对："});
    tasks::TokenLines lines;
    for (const std::string& s : lesson.train) lines.push_back(tasks::tokenize(tasks::preprocess_nmt(s)));
    const tasks::Vocab vocab(lines, 2, tasks::kNmtReserved);
    int64_t words = 0, unknown = 0;
    std::set<std::string> examples;
    for (const std::string& s : lesson.held_out)
        for (const std::string& w : words_of(tasks::preprocess_nmt(s))) {
            ++words;
            if (vocab.contains(w)) continue;
            ++unknown;
            if (examples.size() < 8) examples.insert(w);
        }
    note({.en = "vocabulary: {} words; held-out words: {}, of which <unk>: {} ({:.1f}%)",
          .zh = "词表：{} 个词；留出的词：{} 个，其中 <unk>：{} 个（{:.1f}%）"},
         vocab.size(), words, unknown, 100.0 * static_cast<double>(unknown) / static_cast<double>(words));
    note({.en = "some of them: {}", .zh = "其中一些：{}"}, fmt::format("{}", fmt::join(examples, ", ")));
    note({.en = "Every one of those loses its meaning for the model: \"appesantissez\" and \"embouteillages\" are "
                "just <unk>. A bigger corpus only moves the problem to rarer words, and each new word costs a row of "
                "the embedding and of the output layer.",
          .zh = "对模型来说，这些词每一个都失去了意义：“appesantissez”和“embouteillages”都只是 <unk>。"
                "更大的语料只是把问题推给更罕见的词，而每个新词都要在词嵌入和输出层里各占一行。"});
    t.check(unknown > words / 50, {.en = "more than 2% of the held-out words are unknown to the word vocabulary",
                                   .zh = "留出的词中有超过 2% 不在这个词表里"});
    t.check(!vocab.contains("appesantissez") && !vocab.contains("embouteillages"),
            {.en = "\"appesantissez\" and \"embouteillages\" (a validation sentence's words) are <unk>",
             .zh = "“appesantissez”和“embouteillages”（一个验证句子里的词）是 <unk>"});
}

// seed 003 (003_8fde783e4908788c.txt) › (1) Tokenization（分词） (BPE, WordPiece: subword units)
void byte_pair_encoding(Tutorial& t, Lesson& lesson) {
    for (const auto& s : lesson.wc.symbols) lesson.alphabet.insert(s.begin(), s.end());
    std::set<std::string> chars;  // without the word-start mark
    for (const std::string& a : lesson.alphabet) chars.insert(a.starts_with("\u2581") ? a.substr(3) : a);
    note({.en = "BPE (Sennrich, Haddow and Birch, 2016) starts from characters and learns which ones to glue. The "
                "{} distinct words of the training text become lists of characters; \"▁\" marks where a word starts "
                "(SentencePiece's convention), so a piece knows whether it begins a word. {} distinct characters, {} "
                "starting symbols, {} symbols in the whole text.",
          .zh = "BPE（字节对编码；Sennrich、Haddow 和 Birch，2016）从字符出发，学习该把哪些字符粘在一起。"
                "训练文本中的 {} 个不同的词变成字符列表；“▁”标出词从哪里开始（SentencePiece 的约定），"
                "这样一个子词知道自己是否位于词首。共 {} 个不同字符，{} 个初始符号，整个文本共 {} 个符号。"},
         lesson.wc.symbols.size(), chars.size(), lesson.alphabet.size(), lesson.wc.total_symbols());
    note({.en = "Then, again and again: count every adjacent pair of symbols (a word's pairs count as often as the "
                "word), and make the most frequent pair one symbol everywhere. The first merges:",
          .zh = "然后一遍又一遍：统计每一对相邻符号（一个词里的符号对，这个词出现几次就算几次），"
                "把最频繁的一对在所有地方合并成一个符号。最初的几次合并："});
    const std::string watched = "maison";
    bool counts_ok = true, drops_ok = true;
    int64_t before = lesson.wc.total_symbols();
    lesson.merges = learn_bpe(lesson.wc, 600, [&](const std::vector<Pair>& learned, int64_t count) {
        const auto m = static_cast<int64_t>(learned.size()) - 1;
        const Pair& p = learned.back();
        const int64_t after = lesson.wc.total_symbols();
        drops_ok &= before - after == count;  // each occurrence of the pair became one symbol
        before = after;
        if (m < 12)
            note({.en = "  merge {:>3}: {:>8} + {:<8} -> {:<10} ({} times)",
                  .zh = "  合并 {:>3}：{:>8} + {:<8} -> {:<10}（{} 次）"},
                 m + 1, p.first, p.second, p.first + p.second, count);
        if (m == 0 || m == 49 || m == 299 || m == 599)
            note({.en = "  after {:>3} merges, \"{}\" is {}", .zh = "  {:>3} 次合并之后，“{}”是 {}"}, m + 1, watched,
                 fmt::format("{}", fmt::join(apply_bpe(watched, learned), " ")));
    });
    t.check(static_cast<int64_t>(lesson.merges.size()) == 600, {.en = "600 merges learnt", .zh = "学到了 600 次合并"});
    t.check(drops_ok, {.en = "each merge removes exactly as many symbols from the text as its pair occurred",
                       .zh = "每次合并从文本中去掉的符号数，正好等于这一对出现的次数"});
    // the pair counts the loop saw equal a recount from scratch for the first merges
    WordCounts fresh = count_words(lesson.train);
    for (size_t k = 0; k < 5; ++k) {
        const auto counts = pair_counts(fresh);
        const auto best = std::max_element(counts.begin(), counts.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
        counts_ok &= best->first == lesson.merges[k];
        for (auto& s : fresh.symbols) s = merge(s, lesson.merges[k], lesson.merges[k].first + lesson.merges[k].second);
    }
    t.check(counts_ok, {.en = "a recount from the raw words picks the same first 5 merges",
                        .zh = "从原始的词重新计数，选出的前 5 次合并相同"});
    bool joins = true;
    for (size_t i = 0; i < lesson.wc.symbols.size(); ++i) {
        std::string joined;
        for (const std::string& s : lesson.wc.symbols[i]) joined += s;
        joins &= joined == "\u2581" + lesson.wc.word[i];
    }
    t.check(joins,
            {.en = "every word's pieces join back into \"▁\" + the word", .zh = "每个词的子词拼回去就是“▁”+ 这个词"});
    note({.en = "The symbols in the text went from {} to {}: the same text in {:.0f}% of the tokens.",
          .zh = "文本中的符号从 {} 个变成 {} 个：同样的文本，词元数只有原来的 {:.0f}%。"},
         count_words(lesson.train).total_symbols(), lesson.wc.total_symbols(),
         100.0 * static_cast<double>(lesson.wc.total_symbols()) /
             static_cast<double>(count_words(lesson.train).total_symbols()));
}

// seed 003 (003_8fde783e4908788c.txt) › (1) Tokenization（分词）: a word never seen, spelled with pieces that were
void encoding_new_text(Tutorial& t, const Lesson& lesson) {
    note({.en = "A new word is split into characters and the merges are applied in the order they were learnt. A "
                "word never seen is spelled with pieces that were: nothing is unknown as long as its characters are "
                "known.",
          .zh = "新词先拆成字符，再按学到的顺序依次应用合并。从没见过的词，用见过的子词拼出来："
                "只要它的字符都认识，就没有未知词。"});
    int64_t spelled = 0, words = 0;
    std::set<std::string> pieces_known(lesson.alphabet);
    for (const Pair& p : lesson.merges) pieces_known.insert(p.first + p.second);
    bool all_known = true;
    for (const std::string& s : lesson.held_out)
        for (const std::string& w : words_of(s)) {
            ++words;
            const auto pieces = apply_bpe(w, lesson.merges);
            spelled += pieces.size() > 1;
            for (const std::string& p : pieces) all_known &= pieces_known.count(p) > 0 || p.size() <= 4;
        }
    for (const std::string w : {"appesantissez", "embouteillages", "unbelievably", "Tom"})
        note(both("  {:<16} -> {}"), w, fmt::format("{}", fmt::join(apply_bpe(w, lesson.merges), " ")));
    note({.en = "Of {} held-out words, {} are spelled with more than one piece.",
          .zh = "在 {} 个留出的词中，有 {} 个要用不止一个子词拼写。"},
         words, spelled);
    t.check(all_known, {.en = "every held-out word is written with pieces of the vocabulary (or single characters)",
                        .zh = "每个留出的词都由词表中的子词（或单个字符）写成"});
    std::string joined;
    for (const std::string& p : apply_bpe("embouteillages", lesson.merges)) joined += p;
    t.check(joined == "\u2581embouteillages",
            {.en = "the pieces of an unseen word join back into it", .zh = "没见过的词，它的子词拼回去就是它本身"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (text -> tokens -> input ids), with SentencePiece's BPE
void sentencepiece_bpe(Tutorial& t, const Lesson& lesson) {
    const auto sp = tasks::SentencePieceTokenizer::train(
        lesson.train, {.vocab_size = static_cast<int64_t>(4 + lesson.alphabet.size() + lesson.merges.size()),
                       .model_type = "bpe",
                       .threads = 1});
    note({.en = "SentencePiece (Kudo and Richardson, 2018), trained on the same {} sentences with as many pieces "
                "as ours plus its 4 specials (<unk> <pad> <bos> <eos>, ids 0-3 as d2l's): vocabulary {}. It works on "
                "raw text (spaces are symbols, \"▁\"), normalises with NFKC and splits punctuation from words only "
                "where its merges say so, where ours split at spaces only.",
          .zh = "SentencePiece（Kudo 和 Richardson，2018）在同样的 {} 个句子上训练，子词数与我们的相同，"
                "再加上它的 4 个特殊词元（<unk> <pad> <bos> <eos>，编号 0-3，与 d2l 相同）：词表大小 {}。"
                "它直接处理原始文本（空格也是符号，“▁”），用 NFKC 做规范化，只在它的合并规则要求的地方把标点"
                "与词分开，而我们的只在空格处切分。"},
         lesson.train.size(), sp->size());
    std::set<std::string> ours(lesson.alphabet), theirs;
    for (const Pair& p : lesson.merges) ours.insert(p.first + p.second);
    for (int64_t id = 4; id < sp->size(); ++id) theirs.insert(sp->piece(id));
    int64_t shared = 0;
    for (const std::string& p : ours) shared += theirs.count(p);
    note({.en = "pieces in both vocabularies: {} of our {} ({:.0f}%)",
          .zh = "两个词表共有的子词：我们的 {1} 个中有 {0} 个（{2:.0f}%）"},
         shared, ours.size(), 100.0 * static_cast<double>(shared) / static_cast<double>(ours.size()));
    for (const std::string s :
         {"I'm home.", "Don't dwell too much upon the subject.", "Ne vous appesantissez pas trop sur le sujet."})
        note({.en = "  {}\n    ours:          {}\n    SentencePiece: {}",
              .zh = "  {}\n    我们的：       {}\n    SentencePiece：{}"},
             s, fmt::format("{}", fmt::join(bpe_sentence(s, lesson.merges), " ")),
             fmt::format("{}", fmt::join(sp->encode_pieces(s), " ")));
    int64_t ours_n = 0, sp_n = 0, same = 0, with_unk = 0;
    std::vector<std::string> changed;
    for (const std::string& s : lesson.held_out) {
        ours_n += static_cast<int64_t>(bpe_sentence(s, lesson.merges).size());
        const std::vector<int64_t> ids = sp->encode(s);
        sp_n += static_cast<int64_t>(ids.size());
        const bool unk = std::count(ids.begin(), ids.end(), tasks::Tokenizer::kUnk) > 0;
        with_unk += unk;
        if (sp->decode(ids) == s)
            ++same;
        else if (!unk && changed.size() < 3)
            changed.push_back(fmt::format("\"{}\" -> \"{}\"", s, sp->decode(ids)));
    }
    note({.en = "decode(encode(s)) == s for {} of the {} held-out sentences; {} hold a character the training "
                "sentences never had (it becomes <unk>, printed ⁇), and NFKC rewrites a few others, for example: {}",
          .zh = "在 {1} 个留出的句子中，有 {0} 个满足 decode(encode(s)) == s；{2} 个含有训练句子里从未出现过的字符"
                "（它变成 <unk>，打印为 ⁇），还有几个被 NFKC 改写，例如：{3}"},
         same, lesson.held_out.size(), with_unk,
         changed.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(changed, "; ")));
    const bool round_trip = same + with_unk + 5 >= static_cast<int64_t>(lesson.held_out.size());
    note({.en = "tokens per held-out sentence: ours {:.2f}, SentencePiece {:.2f} (ours keeps \".\" glued to words "
                "it follows, so it spends merges on \"e.\" and \"?\" endings)",
          .zh = "每个留出句子的词元数：我们的 {:.2f}，SentencePiece {:.2f}（我们的把“.”粘在它前面的词上，"
                "所以要把合并花在“e.”和“?”这样的词尾上）"},
         static_cast<double>(ours_n) / lesson.held_out.size(), static_cast<double>(sp_n) / lesson.held_out.size());
    t.check(shared * 2 > static_cast<int64_t>(ours.size()),
            {.en = "most of our pieces are also SentencePiece's", .zh = "我们的子词大多也是 SentencePiece 的"});
    t.check(round_trip,
            {.en = "decode(encode(s)) == s except where a character was never seen or NFKC rewrote one (at most 5)",
             .zh = "除了含有没见过的字符或被 NFKC 改写的句子（至多 5 个），decode(encode(s)) == s"});
    const std::vector<int64_t> ids = sp->encode("I'm home.");
    note({.en = "\"I'm home.\" as input ids (seed 002's last step of tokenisation): [{}]",
          .zh = "“I'm home.” 的 input ids（种子文档 002 所说分词的最后一步）：[{}]"},
         fmt::format("{}", fmt::join(ids, ", ")));
    t.check(std::none_of(ids.begin(), ids.end(), [](int64_t id) { return id == tasks::Tokenizer::kUnk; }),
            {.en = "no <unk> in a sentence whose characters were seen", .zh = "字符都见过的句子里没有 <unk>"});
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.1 单词 Embedding: the padded batch through nn.Embedding(vocab_size, 512)
void token_embedding(Tutorial& t, const std::vector<std::string>& file,
                     const std::vector<std::vector<std::string>>& batch) {
    std::unordered_map<std::string, int64_t> id_of;
    for (size_t i = 0; i < file.size(); ++i) id_of.emplace(file[i], static_cast<int64_t>(i));
    const int64_t T = static_cast<int64_t>(std::max(batch[0].size(), batch[1].size()));
    std::vector<int64_t> padded;
    for (const auto& pieces : batch)
        for (int64_t i = 0; i < T; ++i)
            padded.push_back(i < static_cast<int64_t>(pieces.size()) ? id_of.at(pieces[i]) : id_of.at("[PAD]"));
    const c::Tensor input_ids = c::from_vector(padded, {2, T});
    show({.en = "input_ids (our vocabulary's ids, padded)", .zh = "input_ids（我们词表的编号，已填充）"}, input_ids);
    c::Generator g(1512);
    const int64_t V = static_cast<int64_t>(file.size());
    nn::Embedding embedding({.num_embeddings = V, .embedding_dim = 512}, g);
    const c::Tensor embedded = embedding(input_ids).value();
    note({.en = "    padding=True pads the shorter sentence to the longer one's {}; nn::Embedding({}, 512) then gives "
                "embedded_output.shape = {} (the seed's torch.Size([2, 12, 512]) has the multilingual tokenizer's 12)",
          .zh = "    padding=True 把较短的句子填充到较长句子的 {} 个词元；nn::Embedding({}, 512) 于是给出 "
                "embedded_output.shape = {}（种子文档的 torch.Size([2, 12, 512]) 里是多语言分词器的 12）"},
         T, V, c::shape_str(embedded.shape()));
    t.check(embedded.shape() == c::Shape{2, T, 512},
            {.en = "(batch_size, sequence_length, embedding_dim) = (2, {}, 512)",
             .zh = "(batch_size, sequence_length, embedding_dim) = (2, {}, 512)"},
            T);
    const int64_t short_row = batch[0].size() < batch[1].size() ? 0 : 1;
    t.check_close(embedded.select(0, short_row).select(0, T - 1), embedding.weight.value().select(0, id_of.at("[PAD]")),
                  0,
                  {.en = "a padded position is just the [PAD] row of the table (seed 002's TokenEmbedding zeroes it "
                         "with padding_idx)",
                   .zh = "填充的位置就是表里 [PAD] 那一行（种子文档 002 的 TokenEmbedding 用 padding_idx 把它置零）"});
    note({.en = "The table is the layer's only parameter, vocab_size × d_model (1.2.1's param_TE): {} for ours, "
                "30,522 × 512 = 15,627,264 for bert-base-uncased, 119,547 × 512 = 61,208,064 for the multilingual "
                "vocabulary.",
          .zh = "这张表是这一层唯一的参数，vocab_size × d_model（1.2.1 的 param_TE）：我们的是 {}，"
                "bert-base-uncased 是 30,522 × 512 = 15,627,264，多语言词表是 119,547 × 512 = 61,208,064。"},
         embedding.num_parameters());
    t.check(embedding.num_parameters() == V * 512,
            {.en = "param_TE = vocab_size · d_model", .zh = "param_TE = vocab_size · d_model"});
}

// What bert-base-multilingual-cased's tokenizer makes of the seed's sentence: its pieces and the ids
// the seed prints, [CLS] and [SEP] included.
const std::vector<std::string> kSeedPieces = {"[CLS]", "A",    "Titan", "RT", "##X",  "has",
                                              "24",    "##GB", "of",    "VR", "##AM", "[SEP]"};
const std::vector<int64_t> kSeedIds = {101, 138, 28318, 56898, 12674, 10393, 10233, 32469, 10108, 74727, 36535, 102};

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (the printed ids), 1.2.1 单词 Embedding
void seed002_input_ids_and_embedding(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 002 (1.1) tokenises 'A Titan RTX has 24GB of VRAM' with BertTokenizer.from_pretrained("
                "'bert-base-uncased') and prints the input ids [101, 138, 28318, 56898, 12674, 10393, 10233, 32469, "
                "10108, 74727, 36535, 102]. Then (1.2.1) it tokenises that sentence and 'I have a dog and cat' as one "
                "padded batch with 'bert-base-multilingual-cased', embeds it with nn.Embedding(vocab_size, 512) and "
                "prints torch.Size([2, 12, 512]). The printed ids say which tokenizer made them:",
          .zh = "种子文档 002（1.1）用 BertTokenizer.from_pretrained('bert-base-uncased') 对 "
                "'A Titan RTX has 24GB of VRAM' 分词，打印出 input ids [101, 138, 28318, 56898, 12674, 10393, "
                "10233, 32469, 10108, 74727, 36535, 102]。接着（1.2.1）它用 'bert-base-multilingual-cased' "
                "把这个句子和 'I have a dog and cat' 作为一个填充后的批量来分词，用 nn.Embedding(vocab_size, 512) "
                "嵌入，打印出 torch.Size([2, 12, 512])。打印出的编号本身说明了它们出自哪个分词器："});
    const int64_t uncased = 30'522, multilingual = 119'547;  // the two vocabularies' sizes
    int64_t beyond = 0;
    for (int64_t id : kSeedIds) beyond += id >= uncased;
    note({.en = "    12 ids: [CLS] = 101 first, [SEP] = 102 last, 10 pieces between; {} of them are ≥ {}, the size of "
                "bert-base-uncased's vocabulary, and all are < {}, the size of bert-base-multilingual-cased's.",
          .zh = "    12 个编号：开头 [CLS] = 101，结尾 [SEP] = 102，中间 10 个子词；其中 {} 个 ≥ {}，即 "
                "bert-base-uncased 词表的大小，而全部都 < {}，即 bert-base-multilingual-cased 词表的大小。"},
         beyond, uncased, multilingual);
    note({.en = "A slip in seed 002: {} ids lie beyond bert-base-uncased's 30,522 entries, so the printed ids come "
                "from the multilingual tokenizer of 1.2.1, not from the uncased one 1.1's code loads. Run with it, "
                "the tokenizer cuts the sentence into {}.",
          .zh = "种子文档 002 的一处疏漏：有 {} 个编号超出了 bert-base-uncased 的 30,522 个词条，所以打印出的编号来自 "
                "1.2.1 的多语言分词器，而不是 1.1 的代码加载的 uncased 分词器。用多语言分词器运行，句子被切成 {}。"},
         beyond, fmt::format("{}", fmt::join(kSeedPieces, " ")));

    note({.en = "\nThat vocabulary file (119,547 pieces learnt from Wikipedia in 104 languages) is not available "
                "offline. What can be rebuilt is the method: BERT's tokenizer splits at spaces and punctuation, "
                "then WordPiece cuts each word into the longest pieces of its vocabulary, '##' marking a piece that "
                "continues a word; the vocabulary is learnt by WordPiece's merges and written out in BERT's layout. "
                "Trained here on the {} training sentences, {} merges:",
          .zh = "\n那个词表文件（从 104 种语言的维基百科学到的 119,547 个子词）离线拿不到。能重建的是方法："
                "BERT 的分词器先按空格和标点切开，再由 WordPiece 把每个词切成词表里最长的子词，"
                "“##”标出接在词中间的子词；词表由 WordPiece 的合并学得，并按 BERT 的布局写出。"
                "这里在 {} 个训练句子上训练，合并 {} 次："},
         lesson.train.size(), kWordPieceMerges);
    std::map<std::string, int64_t> counts;
    for (const std::string& s : lesson.train)
        for (const std::string& w : bert_words(s)) ++counts[w];
    const bool by_frequency = t.injected("wordpiece-by-frequency");
    const WordPieceVocab wp =
        learn_wordpiece(counts, kWordPieceMerges, by_frequency ? faults::by_frequency : wordpiece_score);
    note({.en = "    {} distinct words, {} single characters (a word's first and '##' ones), {} pieces learnt; "
                "the first: {}",
          .zh = "    {} 个不同的词，{} 个单字符（词首的和带“##”的），学到 {} 个子词；最先学到的：{}"},
         counts.size(), wp.characters.size(), wp.learnt.size(),
         fmt::format("{}", fmt::join(std::vector<std::string>(wp.learnt.begin(), wp.learnt.begin() + 8), " ")));
    // an independent recount with step 2's helpers: for the first merges, score every pair of the words afresh
    bool first_merges_ok = true;
    WordCounts fresh;
    for (const auto& [w, n] : counts) {
        std::vector<std::string> symbols;
        for (const std::string& ch : characters_of(w)) symbols.push_back(symbols.empty() ? ch : "##" + ch);
        fresh.word.push_back(w), fresh.symbols.push_back(std::move(symbols)), fresh.count.push_back(n);
    }
    for (size_t m = 0; m < 3 && m < wp.joined.size(); ++m) {
        std::map<std::string, int64_t> symbol_count;
        for (size_t i = 0; i < fresh.symbols.size(); ++i)
            for (const std::string& s : fresh.symbols[i]) symbol_count[s] += fresh.count[i];
        const std::map<Pair, int64_t> pairs = pair_counts(fresh);
        auto score = [&](const auto& entry) {
            return wordpiece_score(entry.second, symbol_count[entry.first.first], symbol_count[entry.first.second]);
        };
        // max_element keeps the first of equal scores: the pair that sorts first
        const auto best = std::max_element(pairs.begin(), pairs.end(),
                                           [&](const auto& a, const auto& b) { return score(a) < score(b); });
        first_merges_ok = first_merges_ok && best->first == wp.joined[m];
        for (auto& s : fresh.symbols) s = merge(s, best->first, joined_piece(best->first.first, best->first.second));
    }
    t.check(first_merges_ok,
            {.en = "every merge is the pair with the largest count(ab) / (count(a) · count(b)): a recount from the "
                   "raw words agrees on the first 3",
             .zh = "每次合并的都是 count(ab) / (count(a) · count(b)) 最大的一对：从原始的词重新计数，前 3 次合并一致"});

    const std::vector<std::string> file =
        bert_vocab_file(wp, t.injected("layout-without-reserved") ? 0 : 2);  // the vocab.txt, one piece per line
    const std::set<std::string> vocab(file.begin(), file.end());
    std::unordered_map<std::string, int64_t> id_of;
    for (size_t i = 0; i < file.size(); ++i) id_of.emplace(file[i], static_cast<int64_t>(i));
    std::vector<std::vector<std::string>> batch;
    std::vector<int64_t> ids;
    for (const std::string sentence : {"A Titan RTX has 24GB of VRAM", "I have a dog and cat"}) {
        batch.push_back(bert_pieces(sentence, vocab));
        for (const std::string& p : batch.back())
            if (batch.size() == 1) ids.push_back(id_of.at(p));
        note(both("    {:<30} → {}"), sentence, fmt::format("{}", fmt::join(batch.back(), " ")));
    }
    note({.en = "    our input ids: [{}] (vocabulary of {} lines)", .zh = "    我们的 input ids：[{}]（词表共 {} 行）"},
         fmt::format("{}", fmt::join(ids, ", ")), file.size());
    int64_t same_pieces = 0;
    for (const std::string& p : batch[0]) same_pieces += std::count(kSeedPieces.begin(), kSeedPieces.end(), p) > 0;
    // the document's ids that our file reproduces: the piece is in it, at the document's id
    std::vector<std::string> reproduced;
    for (size_t i = 0; i < kSeedPieces.size(); ++i)
        if (id_of.count(kSeedPieces[i]) && id_of.at(kSeedPieces[i]) == kSeedIds[i])
            reproduced.push_back(fmt::format("{} {}", kSeedPieces[i], kSeedIds[i]));
    const bool layout_ids = ids.front() == kSeedIds.front() && ids.back() == kSeedIds.back() && id_of.at("A") == 138;
    t.check(layout_ids, {.en = "the document's ids 101, 138 and 102 for [CLS], 'A' and [SEP]: they follow from BERT's "
                               "layout alone (specials at 100-103, the characters in code point order from 106)",
                         .zh = "[CLS]、'A' 和 [SEP] 得到文档里的编号 101、138 和 102：它们只由 BERT 的布局决定"
                               "（特殊词元在 100-103，字符按码位顺序从 106 开始）"});
    bool joins = true;
    for (const std::string& word : bert_words("A Titan RTX has 24GB of VRAM")) {
        std::string joined;
        for (const std::string& p : wordpiece(word, vocab)) joined += p.starts_with("##") ? p.substr(2) : p;
        joins = joins && joined == word;
    }
    t.check(joins, {.en = "every word's pieces are in the vocabulary and join back into the word",
                    .zh = "每个词的子词都在词表里，拼回去就是这个词"});
    std::vector<std::string> whole, spelled;  // the multilingual tokenizer's word pieces, in our vocabulary or not
    for (const std::string& p : kSeedPieces)
        if (!p.starts_with("[") && !p.starts_with("##") && p.size() > 1)
            (vocab.count(p) ? whole : spelled).push_back(p);
    note({.en = "    the document's ids reproduced: {} of 12 ({}); pieces shared with the multilingual tokenizer: {} "
                "of our {}; its words that are pieces of ours: {}; that are not: {}",
          .zh = "    复现了文档的编号：12 个中的 {0} 个（{1}）；与多语言分词器相同的子词：我们的 {3} 个中有 {2} 个；"
                "它的词中是我们的子词的：{4}；不是的：{5}"},
         reproduced.size(), fmt::format("{}", fmt::join(reproduced, ", ")), same_pieces, batch[0].size(),
         fmt::format("{}", fmt::join(whole, " ")), fmt::format("{}", fmt::join(spelled, " ")));
    note({.en = "So what the document's ids are made of can be reproduced, and measured: the frame [CLS] … [SEP] "
                "(101, 102) and every single character's id (\"A\" = 138) come from BERT's layout, the same in our "
                "file; the pieces and their places come from the vocabulary. Ours was learnt from {} short "
                "everyday sentences, so the words above that it lacks are spelled with more pieces, and its ids are "
                "places in a file of {} lines, not of 119,547. The first merges glue rare symbols (capitals, "
                "digits): the score favours pairs whose parts are rare elsewhere (the exercise), so common short "
                "words become whole pieces only after thousands of merges. The other {} ids can only be read off "
                "the multilingual vocabulary itself, which the document does not print.",
          .zh = "所以，文档里的编号由什么组成，是可以复现并测量的：外框 [CLS] … [SEP]（101、102）和每个单字符的编号"
                "（“A” = 138）来自 BERT 的布局，在我们的文件里也一样；子词及其位置则取决于词表。我们的词表学自 {} "
                "个简短的日常句子，所以上面它没有的那些词要用更多子词去拼，它的编号是在一个 {} 行的文件里的位置，"
                "而不是 119,547 行。最先的合并把罕见的符号（大写字母、数字）粘在一起：这个得分偏爱组成部分在别处很少"
                "出现的一对（见练习），所以常见的短词要在几千次合并之后才成为完整的子词。其余 {} 个编号只能从多语言"
                "词表本身读出，而文档没有给出这个词表。"},
         lesson.train.size(), file.size(), kSeedIds.size() - reproduced.size());
    token_embedding(t, file, batch);
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (BertTokenizer: WordPiece)
void wordpiece_and_the_translator() {
    note({.en = "Seed 002 tokenises with BERT's tokenizer: WordPiece, the same idea as BPE with two differences. "
                "Pieces that continue a word carry \"##\" (\"##ing\") instead of marking the word's start with "
                "\"▁\", and a merge is chosen by how much it raises the likelihood of the text (count(ab) / "
                "(count(a) count(b))) rather than by raw frequency. Its output is the same kind of thing: input ids, "
                "one per piece, with [CLS] and [SEP] added where BERT wants them (SentencePiece here adds nothing; "
                "the translator adds <eos> itself).",
          .zh = "种子文档 002 用 BERT 的分词器分词：WordPiece，与 BPE 思路相同，区别有两点。接在词中间的子词带“##”"
                "（“##ing”），而不是用“▁”标出词首；合并的选择依据是它能让文本的似然提高多少（count(ab) / "
                "(count(a) count(b))），而不是原始频次。它的输出是同一类东西：input ids，每个子词一个，"
                "再在 BERT 需要的地方加上 [CLS] 和 [SEP]（这里的 SentencePiece 什么也不加；翻译器自己加 <eos>）。"});
    note({.en = "`tformer train translate` trains a joint English-French SentencePiece BPE of 4,000 pieces on its "
                "training split only, so validation stays unseen, and stores the model inside the checkpoint: the "
                "checkpoint alone translates. One vocabulary for both languages lets the encoder's embedding, the "
                "decoder's embedding and the output layer be one matrix. Against d2l's words on the whole corpus "
                "it removes every <unk>, keeps case and punctuation in the output, and (docs/training.md, "
                "\"What each choice bought\") scores higher in the same training time.",
          .zh = "`tformer train translate` 只在训练集上训练一个英法共用的 SentencePiece BPE，4,000 个子词，"
                "所以验证集始终没见过；模型存放在检查点里面：只凭检查点就能翻译。两种语言共用一个词表，"
                "编码器的词嵌入、解码器的词嵌入和输出层就可以是同一个矩阵。与在整个语料上用 d2l 的按词分词相比，"
                "它消除了所有 <unk>，输出保留大小写和标点，并且（docs/training.md 的 “What each choice bought”）"
                "在相同的训练时间内得分更高。"});
}

// ---- the exercise (--exercise): tutorials/15_subword_tokenization/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理: WordPiece's choice of merge, written by the reader
void exercise_wordpiece_merge(Tutorial& t) {
    note({.en = "BPE merges the most frequent pair; WordPiece the pair with the largest count(ab) / (count(a) "
                "count(b)): a pair whose parts are rare elsewhere wins over a frequent pair of common symbols. "
                "Write exercise::wordpiece_best_pair; the checks use a small word list where the two choices differ.",
          .zh = "BPE 合并最频繁的一对；WordPiece 合并 count(ab) / (count(a) count(b)) 最大的一对："
                "组成部分在别处很少出现的一对，会胜过由常见符号组成的频繁的一对。写出 exercise::wordpiece_best_pair；"
                "检查用的是一个两种选择不同的小词表。"});
    const std::vector<exercise::Word> words = {{{"h", "u", "g"}, 10},
                                               {{"p", "u", "g"}, 5},
                                               {{"p", "u", "n"}, 12},
                                               {{"b", "u", "n"}, 4},
                                               {{"h", "u", "g", "s"}, 5}};
    const exercise::Pair pick = exercise::wordpiece_best_pair(words);
    note({.en = "    your choice: ({}, {})", .zh = "    你的选择：({}, {})"}, pick.first, pick.second);
    // symbols: h 15, u 36, g 20, p 17, n 16, b 4, s 5; pairs: (u, g) 20 (BPE's pick), (g, s) 5 scores 5 / (20·5) = 0.05
    t.check(pick == exercise::Pair{"g", "s"},
            {.en = "WordPiece picks (g, s): 5 / (20 · 5) = 0.05 beats (u, g): 20 / (36 · 20) = 0.028, BPE's most "
                   "frequent pair",
             .zh = "WordPiece 选 (g, s)：5 / (20 · 5) = 0.05 胜过 (u, g)：20 / (36 · 20) = 0.028，后者是 BPE "
                   "选的最频繁的一对"});
    const std::vector<exercise::Word> tie = {{{"a", "b"}, 3}, {{"c", "d"}, 3}};
    t.check(exercise::wordpiece_best_pair(tie) == exercise::Pair{"a", "b"},
            {.en = "on a tie, the pair that sorts first", .zh = "得分相同时，取排序在前的一对"});
}

// ---- wrong variants, for the tests that show a check can fail -----------------------------

namespace faults {

// BPE's rule in WordPiece's place: the most frequent pair, whatever its parts' counts.
double by_frequency(int64_t pair, int64_t, int64_t) { return static_cast<double>(pair); }

}  // namespace faults

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "15 · Subword tokenization: byte-pair encoding by hand, then SentencePiece",
                          .zh = "15 · 子词分词：手写字节对编码（BPE），再用 SentencePiece"},
                .follows = {.en = "seed 002 › 1.1 tokenizer 预处理 (WordPiece), 1.2.1 单词 Embedding; seed 003 (1) "
                                  "Tokenization; seed 000's d2l.Vocab (min_freq 2, <unk>)",
                            .zh = "种子文档 002 › 1.1 tokenizer 预处理（WordPiece）、1.2.1 单词 Embedding；"
                                  "种子文档 003 (1) Tokenization；种子文档 000 的 d2l.Vocab（min_freq 2，<unk>）"},
                .exercise = {.en = "choose merges as WordPiece does, by count(ab) / (count(a) count(b)) "
                                   "(tutorials/15_subword_tokenization/exercise.cpp)",
                             .zh = "像 WordPiece 那样按 count(ab) / (count(a) count(b)) 选择合并"
                                   "（tutorials/15_subword_tokenization/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Why not words: a word vocabulary meets new sentences", .zh = "1. 为什么不按词：词表遇上新句子"},
           [&] { why_not_words(t, lesson); });
    t.step({.en = "2. Byte-pair encoding, merge by merge", .zh = "2. 字节对编码，一次一次地合并"},
           [&] { byte_pair_encoding(t, lesson); });
    t.step({.en = "3. Encoding new text: replay the merges", .zh = "3. 给新文本编码：按顺序重放合并"},
           [&] { encoding_new_text(t, lesson); });
    t.step({.en = "4. SentencePiece's BPE on the same text", .zh = "4. 同一文本上的 SentencePiece BPE"},
           [&] { sentencepiece_bpe(t, lesson); });
    t.step({.en = "4b. Seed 002's input ids, rebuilt with a WordPiece vocabulary of the corpus",
            .zh = "4b. 种子文档 002 的 input ids：用语料训练的 WordPiece 词表重建"},
           [&] { seed002_input_ids_and_embedding(t, lesson); });
    t.step({.en = "5. Seed 002's WordPiece, and the translator", .zh = "5. 种子文档 002 的 WordPiece，以及翻译器"},
           [&] { wordpiece_and_the_translator(); });
    t.exercise({.en = "Exercise. WordPiece's choice of merge", .zh = "练习. WordPiece 如何选择合并"},
               [&] { exercise_wordpiece_merge(t); });
    return t.finish();
}
