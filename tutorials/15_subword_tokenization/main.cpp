// Tutorial 15 · Subword tokenization: why a word vocabulary fails on new
// sentences, byte-pair encoding (BPE) written out and run merge by merge,
// and SentencePiece's BPE on the same text, the tokenizer `tformer train
// translate` uses.
//
// Follows seed 002 (002_36798a9f04a86cc8.txt), 1.1 tokenizer 预处理 (text ->
// tokens -> input ids, with BERT's WordPiece tokenizer) and seed 000's d2l
// word vocabulary (d2l.Vocab with min_freq 2, whose unknown words become
// <unk>). Read it with tutorials/15_subword_tokenization/README.md.
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
#include "common/prelude.hpp"
#include "exercise.hpp"
#include "nn/layers.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/text.hpp"
#include "tasks/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
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

// The characters (UTF-8 code points) of a word, the first one marked with
// "▁" for "a word starts here", as SentencePiece writes it.
std::vector<std::string> characters(std::string_view word) {
    std::vector<std::string> out;
    for (size_t i = 0; i < word.size();) {
        const auto lead = static_cast<unsigned char>(word[i]);
        const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        out.emplace_back(word.substr(i, n));
        i += n;
    }
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

// Replaces every occurrence of the pair (left to right, not overlapping) by one symbol.
std::vector<std::string> merge(const std::vector<std::string>& symbols, const Pair& pair) {
    std::vector<std::string> out;
    for (size_t j = 0; j < symbols.size(); ++j) {
        if (j + 1 < symbols.size() && symbols[j] == pair.first && symbols[j + 1] == pair.second) {
            out.push_back(symbols[j] + symbols[j + 1]);
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
        for (auto& s : wc.symbols) s = merge(s, best->first);
        learned.push_back(best->first);
        seen(learned, best->second);
    }
    return learned;
}

// Encoding new text replays the merges in the order they were learnt.
std::vector<std::string> apply_bpe(std::string_view word, const std::vector<Pair>& merges) {
    std::vector<std::string> symbols = characters(word);
    for (const Pair& p : merges) symbols = merge(symbols, p);
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
    note(
        "Seed 000 (d2l) tokenises by words and keeps those seen at least twice (min_freq 2); everything "
        "else becomes <unk>. Build that vocabulary on 3,000 random sentence pairs of the corpus, English and "
        "French together, and read 500 other pairs with it:");
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
    note("vocabulary: {} words; held-out words: {}, of which <unk>: {} ({:.1f}%)", vocab.size(), words, unknown,
         100.0 * static_cast<double>(unknown) / static_cast<double>(words));
    note("some of them: {}", fmt::join(examples, ", "));
    note(
        "Every one of those loses its meaning for the model: \"appesantissez\" and \"embouteillages\" are "
        "just <unk>. A bigger corpus only moves the problem to rarer words, and each new word costs a row of "
        "the embedding and of the output layer.");
    t.check(unknown > words / 50, "more than 2% of the held-out words are unknown to the word vocabulary");
    t.check(!vocab.contains("appesantissez") && !vocab.contains("embouteillages"),
            "\"appesantissez\" and \"embouteillages\" (a validation sentence's words) are <unk>");
}

// seed 003 (003_8fde783e4908788c.txt) › (1) Tokenization（分词） (BPE, WordPiece: subword units)
void byte_pair_encoding(Tutorial& t, Lesson& lesson) {
    for (const auto& s : lesson.wc.symbols) lesson.alphabet.insert(s.begin(), s.end());
    std::set<std::string> chars;  // without the word-start mark
    for (const std::string& a : lesson.alphabet) chars.insert(a.starts_with("\u2581") ? a.substr(3) : a);
    note(
        "BPE (Sennrich, Haddow and Birch, 2016) starts from characters and learns which ones to glue. The "
        "{} distinct words of the training text become lists of characters; \"▁\" marks where a word starts "
        "(SentencePiece's convention), so a piece knows whether it begins a word. {} distinct characters, {} "
        "starting symbols, {} symbols in the whole text.",
        lesson.wc.symbols.size(), chars.size(), lesson.alphabet.size(), lesson.wc.total_symbols());
    note(
        "Then, again and again: count every adjacent pair of symbols (a word's pairs count as often as the "
        "word), and make the most frequent pair one symbol everywhere. The first merges:");
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
            note("  merge {:>3}: {:>8} + {:<8} -> {:<10} ({} times)", m + 1, p.first, p.second, p.first + p.second,
                 count);
        if (m == 0 || m == 49 || m == 299 || m == 599)
            note("  after {:>3} merges, \"{}\" is {}", m + 1, watched, fmt::join(apply_bpe(watched, learned), " "));
    });
    t.check(static_cast<int64_t>(lesson.merges.size()) == 600, "600 merges learnt");
    t.check(drops_ok, "each merge removes exactly as many symbols from the text as its pair occurred");
    // the pair counts the loop saw equal a recount from scratch for the first merges
    WordCounts fresh = count_words(lesson.train);
    for (size_t k = 0; k < 5; ++k) {
        const auto counts = pair_counts(fresh);
        const auto best = std::max_element(counts.begin(), counts.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
        counts_ok &= best->first == lesson.merges[k];
        for (auto& s : fresh.symbols) s = merge(s, lesson.merges[k]);
    }
    t.check(counts_ok, "a recount from the raw words picks the same first 5 merges");
    bool joins = true;
    for (size_t i = 0; i < lesson.wc.symbols.size(); ++i) {
        std::string joined;
        for (const std::string& s : lesson.wc.symbols[i]) joined += s;
        joins &= joined == "\u2581" + lesson.wc.word[i];
    }
    t.check(joins, "every word's pieces join back into \"▁\" + the word");
    note("The symbols in the text went from {} to {}: the same text in {:.0f}% of the tokens.",
         count_words(lesson.train).total_symbols(), lesson.wc.total_symbols(),
         100.0 * static_cast<double>(lesson.wc.total_symbols()) /
             static_cast<double>(count_words(lesson.train).total_symbols()));
}

// seed 003 (003_8fde783e4908788c.txt) › (1) Tokenization（分词）: a word never seen, spelled with pieces that were
void encoding_new_text(Tutorial& t, const Lesson& lesson) {
    note(
        "A new word is split into characters and the merges are applied in the order they were learnt. A "
        "word never seen is spelled with pieces that were: nothing is unknown as long as its characters are "
        "known.");
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
        note("  {:<16} -> {}", w, fmt::join(apply_bpe(w, lesson.merges), " "));
    note("Of {} held-out words, {} are spelled with more than one piece.", words, spelled);
    t.check(all_known, "every held-out word is written with pieces of the vocabulary (or single characters)");
    std::string joined;
    for (const std::string& p : apply_bpe("embouteillages", lesson.merges)) joined += p;
    t.check(joined == "\u2581embouteillages", "the pieces of an unseen word join back into it");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (text -> tokens -> input ids), with SentencePiece's BPE
void sentencepiece_bpe(Tutorial& t, const Lesson& lesson) {
    const auto sp = tasks::SentencePieceTokenizer::train(
        lesson.train, {.vocab_size = static_cast<int64_t>(4 + lesson.alphabet.size() + lesson.merges.size()),
                       .model_type = "bpe",
                       .threads = 1});
    note(
        "SentencePiece (Kudo and Richardson, 2018), trained on the same {} sentences with as many pieces "
        "as ours plus its 4 specials (<unk> <pad> <bos> <eos>, ids 0-3 as d2l's): vocabulary {}. It works on "
        "raw text (spaces are symbols, \"▁\"), normalises with NFKC and splits punctuation from words only "
        "where its merges say so, where ours split at spaces only.",
        lesson.train.size(), sp->size());
    std::set<std::string> ours(lesson.alphabet), theirs;
    for (const Pair& p : lesson.merges) ours.insert(p.first + p.second);
    for (int64_t id = 4; id < sp->size(); ++id) theirs.insert(sp->piece(id));
    int64_t shared = 0;
    for (const std::string& p : ours) shared += theirs.count(p);
    note("pieces in both vocabularies: {} of our {} ({:.0f}%)", shared, ours.size(),
         100.0 * static_cast<double>(shared) / static_cast<double>(ours.size()));
    for (const std::string s :
         {"I'm home.", "Don't dwell too much upon the subject.", "Ne vous appesantissez pas trop sur le sujet."})
        note("  {}\n    ours:          {}\n    SentencePiece: {}", s, fmt::join(bpe_sentence(s, lesson.merges), " "),
             fmt::join(sp->encode_pieces(s), " "));
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
    note(
        "decode(encode(s)) == s for {} of the {} held-out sentences; {} hold a character the training "
        "sentences never had (it becomes <unk>, printed ⁇), and NFKC rewrites a few others, for example: {}",
        same, lesson.held_out.size(), with_unk,
        changed.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(changed, "; ")));
    const bool round_trip = same + with_unk + 5 >= static_cast<int64_t>(lesson.held_out.size());
    note(
        "tokens per held-out sentence: ours {:.2f}, SentencePiece {:.2f} (ours keeps \".\" glued to words "
        "it follows, so it spends merges on \"e.\" and \"?\" endings)",
        static_cast<double>(ours_n) / lesson.held_out.size(), static_cast<double>(sp_n) / lesson.held_out.size());
    t.check(shared * 2 > static_cast<int64_t>(ours.size()), "most of our pieces are also SentencePiece's");
    t.check(round_trip,
            "decode(encode(s)) == s except where a character was never seen or NFKC rewrote one (at most 5)");
    const std::vector<int64_t> ids = sp->encode("I'm home.");
    note("\"I'm home.\" as input ids (seed 002's last step of tokenisation): [{}]", fmt::join(ids, ", "));
    t.check(std::none_of(ids.begin(), ids.end(), [](int64_t id) { return id == tasks::Tokenizer::kUnk; }),
            "no <unk> in a sentence whose characters were seen");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.2.1 单词 Embedding: the padded batch through nn.Embedding(vocab_size, 512)
void token_embedding(Tutorial& t, const std::set<std::string>& vocab,
                     const std::vector<std::vector<std::string>>& batch) {
    const std::vector<std::string> ordered(vocab.begin(), vocab.end());
    auto id_of = [&](const std::string& p) {
        return static_cast<int64_t>(std::find(ordered.begin(), ordered.end(), p) - ordered.begin());
    };
    const int64_t T = static_cast<int64_t>(std::max(batch[0].size(), batch[1].size()));
    std::vector<int64_t> padded;
    for (const auto& pieces : batch)
        for (int64_t i = 0; i < T; ++i)
            padded.push_back(i < static_cast<int64_t>(pieces.size()) ? id_of(pieces[i]) : id_of("[PAD]"));
    const c::Tensor input_ids = c::from_vector(padded, {2, T});
    show("input_ids (our vocabulary's ids)", input_ids);
    c::Generator g(1512);
    nn::Embedding embedding({.num_embeddings = static_cast<int64_t>(vocab.size()), .embedding_dim = 512}, g);
    const c::Tensor embedded = embedding(input_ids).value();
    note(
        "    padding=True pads the shorter sentence to the longer one's 12; nn::Embedding({}, 512) then gives "
        "embedded_output.shape = {}",
        vocab.size(), c::shape_str(embedded.shape()));
    t.check(embedded.shape() == c::Shape{2, 12, 512},
            "(batch_size, sequence_length, embedding_dim) = (2, 12, 512), the seed's shape");
    t.check_close(embedded.select(0, 1).select(0, 9), embedding.weight.value().select(0, id_of("[PAD]")), 0,
                  "a padded position is just the [PAD] row of the table (seed 002's TokenEmbedding zeroes it with "
                  "padding_idx)");
    note(
        "The table is the layer's only parameter, vocab_size × d_model (1.2.1's param_TE): {} for ours, "
        "30,522 × 512 = 15,627,264 for bert-base-uncased, 119,547 × 512 = 61,208,064 for the multilingual "
        "vocabulary.",
        embedding.num_parameters());
    t.check(embedding.num_parameters() == static_cast<int64_t>(vocab.size()) * 512, "param_TE = vocab_size · d_model");
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (the printed ids), 1.2.1 单词 Embedding
void seed002_input_ids_and_embedding(Tutorial& t) {
    note(
        "Seed 002 (1.1) tokenises 'A Titan RTX has 24GB of VRAM' with BertTokenizer.from_pretrained("
        "'bert-base-uncased') and prints the input ids [101, 138, 28318, 56898, 12674, 10393, 10233, 32469, "
        "10108, 74727, 36535, 102]. Then (1.2.1) it tokenises that sentence and 'I have a dog and cat' as one "
        "padded batch with 'bert-base-multilingual-cased', embeds it with nn.Embedding(vocab_size, 512) and "
        "prints torch.Size([2, 12, 512]). The printed ids say which tokenizer made them:");
    const std::vector<int64_t> ids = {101, 138, 28318, 56898, 12674, 10393, 10233, 32469, 10108, 74727, 36535, 102};
    const int64_t uncased = 30'522, multilingual = 119'547;  // the two vocabularies' sizes
    int64_t beyond = 0;
    for (int64_t id : ids) beyond += id >= uncased;
    note(
        "    12 ids: [CLS] = 101 first, [SEP] = 102 last, 10 pieces between; {} of them are ≥ {}, the size of "
        "bert-base-uncased's vocabulary, and all are < {}, the size of bert-base-multilingual-cased's.",
        beyond, uncased, multilingual);
    note(
        "A slip in seed 002: {} ids lie beyond bert-base-uncased's 30,522 entries, so the printed ids come "
        "from the multilingual tokenizer of 1.2.1, not from the uncased one 1.1's code loads.",
        beyond);
    note(
        "\nWordPiece cuts a word into the longest pieces its vocabulary has, '##' marking a piece that "
        "continues a word. The multilingual vocabulary itself is not bundled here, so below is a small "
        "vocabulary of our own that splits the sentence into 10 pieces, as many as the seed's ids show (the "
        "exact pieces of the real vocabulary may differ):");
    const std::set<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "A", "Titan", "RT", "##X", "has", "24",
                                         "##GB",  "of",    "VR",    "##AM",  "I", "have",  "a",  "dog", "and", "cat"};
    std::vector<std::vector<std::string>> batch;
    for (const std::string sentence : {"A Titan RTX has 24GB of VRAM", "I have a dog and cat"}) {
        std::vector<std::string> pieces = {"[CLS]"};
        for (const std::string& word : words_of(sentence))
            for (const std::string& p : wordpiece(word, vocab)) pieces.push_back(p);
        pieces.push_back("[SEP]");
        note("    {:<30} → {}", sentence, fmt::join(pieces, " "));
        batch.push_back(pieces);
    }
    t.check(batch[0].size() == ids.size(), "the first sentence: 12 tokens, as many as the seed's ids");
    t.check(batch[1].size() == 8, "the second: [CLS] + 6 words + [SEP] = 8 tokens");
    token_embedding(t, vocab, batch);
}

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理 (BertTokenizer: WordPiece)
void wordpiece_and_the_translator() {
    note(
        "Seed 002 tokenises with BERT's tokenizer: WordPiece, the same idea with two differences. Pieces "
        "that continue a word carry \"##\" (\"##ing\") instead of marking the word's start with \"▁\", and a "
        "merge is chosen by how much it raises the likelihood of the text (count(ab) / (count(a) count(b))) "
        "rather than by raw frequency. Its output is the same kind of thing: input ids, one per piece, with "
        "[CLS] and [SEP] added where BERT wants them (SentencePiece here adds nothing; the translator adds "
        "<eos> itself).");
    note(
        "`tformer train translate` trains a joint English-French SentencePiece BPE of 8,000 pieces on its "
        "training split only, so validation stays unseen, and stores the model inside the checkpoint: the "
        "checkpoint alone translates. One vocabulary for both languages lets the encoder's embedding, the "
        "decoder's embedding and the output layer be one matrix. Against d2l's words on the whole corpus "
        "it removes every <unk>, keeps case and punctuation in the output, and (README, \"What each choice "
        "bought\") scores higher in the same training time.");
}

// ---- the exercise (--exercise): tutorials/15_subword_tokenization/exercise.cpp -------------

// seed 002 (002_36798a9f04a86cc8.txt) › 1.1 tokenizer 预处理: WordPiece's choice of merge, written by the reader
void exercise_wordpiece_merge(Tutorial& t) {
    note(
        "BPE merges the most frequent pair; WordPiece the pair with the largest count(ab) / (count(a) "
        "count(b)): a pair whose parts are rare elsewhere wins over a frequent pair of common symbols. "
        "Write exercise::wordpiece_best_pair; the checks use a small word list where the two choices differ.");
    const std::vector<exercise::Word> words = {{{"h", "u", "g"}, 10},
                                               {{"p", "u", "g"}, 5},
                                               {{"p", "u", "n"}, 12},
                                               {{"b", "u", "n"}, 4},
                                               {{"h", "u", "g", "s"}, 5}};
    const exercise::Pair pick = exercise::wordpiece_best_pair(words);
    note("    your choice: ({}, {})", pick.first, pick.second);
    // symbols: h 15, u 36, g 20, p 17, n 16, b 4, s 5; pairs: (u, g) 20 (BPE's pick), (g, s) 5 scores 5 / (20·5) = 0.05
    t.check(pick == exercise::Pair{"g", "s"},
            "WordPiece picks (g, s): 5 / (20 · 5) = 0.05 beats (u, g): 20 / (36 · 20) = 0.028, BPE's most frequent "
            "pair");
    const std::vector<exercise::Word> tie = {{{"a", "b"}, 3}, {{"c", "d"}, 3}};
    t.check(exercise::wordpiece_best_pair(tie) == exercise::Pair{"a", "b"}, "on a tie, the pair that sorts first");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "15 · Subword tokenization: byte-pair encoding by hand, then SentencePiece",
                .follows = "seed 002 › 1.1 tokenizer 预处理 (WordPiece), 1.2.1 单词 Embedding; seed 003 (1) "
                           "Tokenization; seed 000's d2l.Vocab (min_freq 2, <unk>)",
                .exercise = "choose merges as WordPiece does, by count(ab) / (count(a) count(b)) "
                            "(tutorials/15_subword_tokenization/exercise.cpp)"});
    Lesson lesson;
    t.step("1. Why not words: a word vocabulary meets new sentences", [&] { why_not_words(t, lesson); });
    t.step("2. Byte-pair encoding, merge by merge", [&] { byte_pair_encoding(t, lesson); });
    t.step("3. Encoding new text: replay the merges", [&] { encoding_new_text(t, lesson); });
    t.step("4. SentencePiece's BPE on the same text", [&] { sentencepiece_bpe(t, lesson); });
    t.step("4b. Seed 002's input ids and the (2, 12, 512) embedding", [&] { seed002_input_ids_and_embedding(t); });
    t.step("5. Seed 002's WordPiece, and the translator", [&] { wordpiece_and_the_translator(); });
    t.exercise("Exercise. WordPiece's choice of merge", [&] { exercise_wordpiece_merge(t); });
    return t.finish();
}
