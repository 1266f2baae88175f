// Tutorial 13 · English→French translation: the corpus and its vocabularies,
// a trained model, seed 003's walk-through decoded one token at a time,
// beam search, BLEU and the attention heatmaps.
//
// Follows seed 000 (000_7dfff3ea5ac0d0a3.txt), 代码实现 › 训练 (d2l.load_data_nmt,
// train_seq2seq with num_hiddens 32, 2 layers, 4 heads, batch 64, num_steps 10)
// and 预测 (predict_seq2seq, d2l.bleu with k = 2 on "go .", "i lost .",
// "he's calm .", "i'm home ."), 理论学习 › 预测 and 信息传递; and seed 003
// (003_8fde783e4908788c.txt), "Transformer 处理 'I arrived at the' → 'Je suis
// arrivé' 的全过程": (1) tokenization, (2) word embeddings, (3) positional
// encoding, (4) self-attention, (6) masked self-attention, (7) cross-attention,
// 4. 生成翻译 (softmax over the French vocabulary).
// Read it with tutorials/13_translation/README.md.
//
// --literal trains seed 000's cell exactly as written (num_hiddens 32, 2
// layers, 4 heads, FFN 64, dropout 0.1, batch 64, num_steps 10, Adam at lr
// 0.005, 200 epochs, clipping at 1, on d2l's 601 pairs) and checks what its
// prediction cell prints:
// tutorial-literal-test: slow timeout=1500
//
// Besides the common --step / --out / --help this program takes
//   --checkpoint FILE   a model written by `tformer train translate` (otherwise a
//                       small model is trained here, in a few seconds)
//   --data FILE         fra.txt (otherwise found from the program's folder upwards)
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
// tutorial-languages: en zh
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "exercise.hpp"
#include "nn/transformer.hpp"
#include "tasks/bleu.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/plot.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/text.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using c::Tensor;
using tasks::TokenLine;

namespace {

// ---- small helpers -------------------------------------------------------------------------

std::string join(const std::vector<std::string>& words, std::string_view sep = " ") {
    return fmt::format("{}", fmt::join(words, sep));
}

// A raw corpus line with its invisible characters named: the tab, U+202F
// NARROW NO-BREAK SPACE and U+00A0 NO-BREAK SPACE.
std::string visible(std::string_view line) {
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\t') {
            out += "⟨TAB⟩";
        } else if (line.substr(i, 3) == "\u202F") {
            out += "⟨U+202F⟩";
            i += 2;
        } else if (line.substr(i, 2) == "\u00A0") {
            out += "⟨U+00A0⟩";
            i += 1;
        } else {
            out += line[i];
        }
    }
    return out;
}

// The k largest entries of a probability vector, largest first (ties: lower id first).
std::vector<std::pair<int64_t, double>> top_k(const std::vector<double>& p, size_t k) {
    std::vector<int64_t> ids(p.size());
    std::iota(ids.begin(), ids.end(), 0);
    k = std::min(k, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    std::vector<std::pair<int64_t, double>> out;
    for (size_t i = 0; i < k; ++i) out.emplace_back(ids[i], p[ids[i]]);
    return out;
}

// A sentence as the encoder sees it (d2l's predict_seq2seq): preprocessed,
// tokenised, ids + <eos>, padded to num_steps, with its valid length.
struct Source {
    TokenLine words;           // e.g. {"i", "left", "."}
    std::vector<int64_t> ids;  // padded to num_steps
    int64_t valid = 0;         // ids that are not <pad>
    Tensor src;                // (1, num_steps) int64
    Tensor lens;               // (1) int64
};

Source encode_source(const std::string& sentence, const tasks::Vocab& vocab, int64_t num_steps) {
    Source s;
    s.words = tasks::tokenize(tasks::preprocess_nmt(sentence));
    std::vector<int64_t> ids = vocab.to_indices(s.words);
    ids.push_back(vocab.to_index("<eos>"));
    s.valid = std::min<int64_t>(static_cast<int64_t>(ids.size()), num_steps);
    s.ids = tasks::truncate_pad(ids, num_steps, vocab.to_index("<pad>"));
    s.src = c::from_vector(s.ids, {1, num_steps});
    s.lens = c::from_vector(std::vector<int64_t>{s.valid}, {1});
    return s;
}

// log P(tokens, <eos> | source) by ONE teacher-forced pass of the whole
// decoder (no cache): an independent way to recompute a decoder's score.
// Without `with_eos` (a hypothesis that ran out of steps) the <eos> term is left out.
double sequence_logp(nn::EncoderDecoder& model, const Source& s, const std::vector<int64_t>& tokens, int64_t bos,
                     int64_t eos, bool with_eos = true) {
    ag::NoGradGuard no_grad;
    std::vector<int64_t> label = tokens;
    if (with_eos) label.push_back(eos);
    if (label.empty()) return 0;
    std::vector<int64_t> dec_in = {bos};  // the labels shifted right behind <bos>
    dec_in.insert(dec_in.end(), label.begin(), label.end() - 1);
    const auto n = static_cast<int64_t>(dec_in.size());
    const Tensor logp =
        c::log_softmax(model.forward(s.src, c::from_vector(dec_in, {1, n}), s.lens).value());  // (1, n, V)
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += logp.at({0, i, label[i]});
    return total;
}

// A decoded translation ended with <eos> when it stopped before max_steps
// tokens. Beam scores divide log p by the number of scored tokens: the
// tokens, plus that <eos> when there is one (as tasks::beam_decode does).
bool ended(const tasks::Decoded& d, int64_t max_steps) { return static_cast<int64_t>(d.tokens.size()) < max_steps; }
double scored_length(const tasks::Decoded& d, int64_t max_steps) {
    return static_cast<double>(d.tokens.size() + (ended(d, max_steps) ? 1 : 0));
}

// d2l's bleu written out with every intermediate kept, to print and to check
// tasks::bleu against:
//   score = exp(min(0, 1 - len_label / len_pred)) · Π_{n=1..k} p_n^(1/2^n)
struct BleuWorking {
    int64_t len_pred = 0, len_label = 0;
    double brevity = 0;
    std::vector<int64_t> matches, totals;
    double score = 0;
};

BleuWorking bleu_by_hand(const TokenLine& pred, const TokenLine& label, int k) {
    BleuWorking w;
    w.len_pred = static_cast<int64_t>(pred.size());
    w.len_label = static_cast<int64_t>(label.size());
    w.brevity = std::exp(std::min(0.0, 1.0 - static_cast<double>(w.len_label) / static_cast<double>(w.len_pred)));
    w.score = w.brevity;
    for (int n = 1; n <= k; ++n) {
        // the label's n-grams with their counts; each may be matched as often as it occurs
        std::map<std::string, int64_t> label_count;
        for (int64_t i = 0; i + n <= w.len_label; ++i)
            ++label_count[join(TokenLine(label.begin() + i, label.begin() + i + n))];
        int64_t matched = 0;
        for (int64_t i = 0; i + n <= w.len_pred; ++i) {
            auto it = label_count.find(join(TokenLine(pred.begin() + i, pred.begin() + i + n)));
            if (it != label_count.end() && it->second > 0) {
                ++matched;
                --it->second;
            }
        }
        const int64_t total = w.len_pred - n + 1;
        w.matches.push_back(matched);
        w.totals.push_back(std::max<int64_t>(total, 0));
        // a prediction with no n-grams of this order: d2l divides by zero, tasks::bleu says 0
        w.score *=
            total <= 0 ? 0.0 : std::pow(static_cast<double>(matched) / static_cast<double>(total), std::pow(0.5, n));
    }
    return w;
}

// Largest |row sum - 1| over the first `rows` rows of a (rows, keys)
// matrix, and the largest weight on the keys from `valid` on.
std::pair<double, double> row_sums_and_padding(const Tensor& w, int64_t valid) {
    double worst_sum = 0, worst_pad = 0;
    for (int64_t q = 0; q < w.size(0); ++q) {
        double sum = 0;
        for (int64_t k = 0; k < w.size(1); ++k) {
            sum += w.at({q, k});
            if (k >= valid) worst_pad = std::max(worst_pad, std::abs(w.at({q, k})));
        }
        worst_sum = std::max(worst_sum, std::abs(sum - 1.0));
    }
    return {worst_sum, worst_pad};
}

// The whole of fra.txt; IOError naming the path when it cannot be opened.
std::string read_corpus(const std::string& corpus) {
    std::ifstream in(corpus, std::ios::binary);
    if (!in) fail<IOError>("cannot open the corpus '{}' (give it with --data FILE)", corpus);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return std::move(buffer).str();
}

// The lines of `text` (without their '\n'), viewing `text`.
std::vector<std::string_view> lines_of(const std::string& text) {
    std::vector<std::string_view> lines;
    for (size_t start = 0; start < text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        lines.emplace_back(text.data() + start, end - start);
        start = end + 1;
    }
    return lines;
}

// The training text of the short fit: d2l's 601 lines, then the corpus's lines that start with "I arrived "
// and are short (8 English tokens at most, 9 French), so that seed 003's walk-through sentence can be
// translated; `added` counts the latter.
std::string d2l_prefix_and_arrived(const std::string& corpus_text, int64_t& added) {
    std::string text;
    size_t start = 0;
    for (int line = 0; line < 601 && start < corpus_text.size(); ++line) {  // d2l's prefix
        const size_t end = corpus_text.find('\n', start);
        text += corpus_text.substr(start, end - start) + "\n";
        start = end == std::string::npos ? corpus_text.size() : end + 1;
    }
    for (size_t at = corpus_text.find("\nI arrived "); at != std::string::npos;
         at = corpus_text.find("\nI arrived ", at + 1)) {
        const size_t end = corpus_text.find('\n', at + 1);
        const std::string line = corpus_text.substr(at + 1, end - at - 1);
        const std::string processed = tasks::preprocess_nmt(line);
        const size_t tab = processed.find('\t');
        if (tab == std::string::npos || tasks::tokenize(processed.substr(0, tab)).size() > 8 ||
            tasks::tokenize(processed.substr(tab + 1)).size() > 9)
            continue;
        text += line + "\n";
        ++added;
    }
    return text;
}

// Seed 000's model for d's vocabularies: num_hiddens 32, 2 blocks, 4 heads, FFN 64, num_steps 10; dropout
// 0.1 as the seed writes it (--literal), or 0 for the short fit.
tasks::ModelConfig translation_config(const tasks::FraEngData& d, bool literal) {
    tasks::ModelConfig config;
    config.num_steps = 10;
    config.src_vocab_size = d.src_vocab.size();
    config.tgt_vocab_size = d.tgt_vocab.size();
    config.transformer = tutorial::block_options(
        {.num_hiddens = 32, .ffn_num_hiddens = 64, .num_heads = 4, .num_layers = 2, .dropout = literal ? 0.1 : 0.0});
    return config;
}

// Seed 000's training cell (--literal: Adam at a constant 0.005 for 200 epochs), or the short fit (40 epochs,
// a warm-up of 40 steps to 0.01 and a cosine decay); batches of 64, clipping at 1. The checkpoint, loss.csv
// and loss.png go to out_dir.
tasks::TrainOptions train_options(bool literal, uint64_t seed, const std::string& out_dir) {
    tasks::TrainOptions o{.epochs = 40,
                          .batch_size = 64,
                          .lr = 0.01,
                          .schedule = "cosine",
                          .warmup = 40,
                          .clip = 1.0,
                          .seed = seed,
                          .out_dir = out_dir,
                          .quiet = true,
                          .extra = {}};
    if (literal) o.epochs = 200, o.lr = 0.005, o.schedule = "constant", o.warmup = 0;
    // what `tformer eval` needs to reload the data of this checkpoint (the augmented file: --data it)
    o.extra = {{"preset", literal ? "tutorial-13-literal" : "tutorial-13"},
               {"seed", std::to_string(seed)},
               {"num_examples", literal ? "600" : "0"},
               {"sample_size", "0"},
               {"data_seed", "0"},
               {"val_fraction", "0"},
               {"num_steps", "10"}};
    return o;
}

// What tasks::train is given: the model's configuration and the training options.
struct TrainingRun {
    tasks::ModelConfig config;
    tasks::TrainOptions options;
};

// ---- what the steps share ---------------------------------------------------------------

// seed 000's four test sentences and d2l's references
const std::vector<std::pair<std::string, std::string>> kSeedSentences = {{"go .", "va !"},
                                                                         {"i lost .", "j'ai perdu ."},
                                                                         {"he's calm .", "il est calme ."},
                                                                         {"i'm home .", "je suis chez moi ."}};

// Seed 003's walk-through sentence (step 3), cut off as the seed cuts it, and
// the translation the seed gives it in both genders. A model whose
// vocabulary lacks "arrived" (d2l's 601 pairs: --literal, or a checkpoint of
// --preset d2l) walks through "I left." instead, the closest sentence those
// pairs support.
const std::string kSeedWalkSentence = "I arrived at the";
const std::vector<std::string> kSeedWalkReferences = {"je suis arrivé", "je suis arrivée"};
const std::string kFallbackWalkSentence = "I left.";
const std::vector<std::string> kFallbackWalkReferences = {"je suis parti .", "je suis partie ."};

// The translation model of steps 3-6, with its vocabularies and how it came to be.
struct Model {
    std::shared_ptr<nn::EncoderDecoder> net;
    tasks::Vocab src_vocab, tgt_vocab;
    int64_t num_steps = 10;
    bool trained_here = false;
    bool on_d2l_pairs = false;  // trained on d2l's 601 pairs (here, or `--preset d2l`)
    std::string how;            // one line: which path was taken
};

// What step 3 records for the heatmaps of step 6.
struct WalkThrough {
    std::string sentence;  // kSeedWalkSentence or kFallbackWalkSentence
    std::vector<std::string> references;
    Source source;
    std::vector<std::string> fed;                  // <bos>, then the generated tokens fed back
    std::vector<std::string> produced;             // the generated tokens, then <eos> if it came
    std::vector<Tensor> encoder;                   // [block] (H, S, S)
    std::vector<std::vector<Tensor>> self, cross;  // [block][step] (H, step + 1) and (H, S)
};

// What the steps share: the corpus (step 1 reads it, step 3 searches it), d2l's 601 pairs, the model of
// step 2 with its vocabularies, and what step 3 decodes for the heatmaps of step 6.
struct Lesson {
    std::string checkpoint;                 // --checkpoint FILE ("" trains a model in step 2)
    std::string corpus;                     // the path of fra.txt
    bool threads_given = false;             // OMP_NUM_THREADS was set
    std::optional<tasks::FraEngData> data;  // d2l's 600-example prefix, kept for training
    std::string corpus_text;                // the whole file, for the searches of step 3
    Model model;
    WalkThrough walk;
};

// ---- the heatmaps of step 6 --------------------------------------------------------------

// One matrix per (block, head), and how far their rows are from distributions over the valid keys.
struct Panels {
    std::vector<std::vector<Tensor>> grid;  // [block][head] (queries, keys)
    double worst_sum = 0;                   // largest |row sum - 1|
    double worst_pad = 0;                   // largest weight on a padded key
};

// The encoder's weights of step 3 (H, S, S) per block, cut to the V valid tokens; the padded keys must get 0.
Panels encoder_panels(const WalkThrough& walk, int64_t H, int64_t V) {
    Panels enc;
    for (const Tensor& w : walk.encoder) {
        std::vector<Tensor> row;
        for (int64_t h = 0; h < H; ++h) {
            const auto [sum_err, pad] = row_sums_and_padding(w.select(0, h).slice(0, 0, V), V);
            enc.worst_sum = std::max(enc.worst_sum, sum_err);
            enc.worst_pad = std::max(enc.worst_pad, pad);
            row.push_back(w.select(0, h).slice(0, 0, V).slice(1, 0, V));
        }
        enc.grid.push_back(row);
    }
    return enc;
}

// The decoder's per-step rows of step 3 as (steps, keys) matrices: self-attention (steps, steps), whose
// worst_sum is over each step's t keys, and cross-attention (steps, V) over num_steps source positions.
struct DecoderPanels {
    Panels self, cross;
};
DecoderPanels decoder_panels(const WalkThrough& walk, int64_t H, int64_t V, int64_t num_steps) {
    const auto steps = static_cast<int64_t>(walk.produced.size());
    DecoderPanels dec;
    for (size_t b = 0; b < walk.cross.size(); ++b) {
        std::vector<Tensor> self_row, cross_row;
        for (int64_t h = 0; h < H; ++h) {
            Tensor self = c::zeros({steps, steps});
            Tensor cross = c::zeros({steps, num_steps});
            for (int64_t q = 0; q < steps; ++q) {
                double row_sum = 0;
                for (int64_t k = 0; k <= q; ++k) {
                    self.set({q, k}, walk.self[b][q].at({h, k}));
                    row_sum += walk.self[b][q].at({h, k});
                }
                dec.self.worst_sum = std::max(dec.self.worst_sum, std::abs(row_sum - 1.0));
                c::copy_(cross.select(0, q), walk.cross[b][q].select(0, h));
            }
            const auto [sum_err, pad] = row_sums_and_padding(cross, V);
            dec.cross.worst_sum = std::max(dec.cross.worst_sum, sum_err);
            dec.cross.worst_pad = std::max(dec.cross.worst_pad, pad);
            self_row.push_back(self);
            cross_row.push_back(cross.slice(1, 0, V));
        }
        dec.self.grid.push_back(self_row);
        dec.cross.grid.push_back(cross_row);
    }
    return dec;
}

// ---- the steps --------------------------------------------------------------------------

// d2l's preprocess_nmt and tokenize on five raw lines of the corpus (1-based numbers 1, 6, 8, 48, 470).
void preprocess_nmt_by_hand(Tutorial& t, const std::vector<std::string_view>& lines) {
    note({.en = "\nThe file has {} lines. Five raw lines (1-based numbers), the invisible characters named:",
          .zh = "\n文件共 {} 行。五行原始文本（行号从 1 开始），不可见字符标出名字："},
         lines.size());
    for (int number : {1, 6, 8, 48, 470})
        line("      {:>4}  {}", number, visible(lines.at(static_cast<size_t>(number - 1))));
    line();
    note({.en = "d2l's preprocess_nmt does three things: U+202F NARROW NO-BREAK SPACE and U+00A0 NO-BREAK SPACE "
                "become ordinary spaces (French typography puts them before ! ? : ;), everything is lowercased, and "
                "a space goes before every , . ! ? that follows a non-space, so punctuation becomes its own token. "
                "tokenize then splits at single spaces (Python's split(' ')):",
          .zh = "d2l 的 preprocess_nmt 做三件事：U+202F NARROW NO-BREAK SPACE 和 U+00A0 NO-BREAK SPACE "
                "变成普通空格（法语排版把它们放在 ! ? : ; 前面），全部转成小写，并在每个紧跟非空格字符的 , . ! ? "
                "前加一个空格，让标点成为单独的词元。然后 tokenize 按单个空格切分（Python 的 split(' ')）："});
    for (int number : {1, 6, 8, 48, 470}) {
        const std::string processed = tasks::preprocess_nmt(lines.at(static_cast<size_t>(number - 1)));
        const size_t tab = processed.find('\t');
        const std::string english = "[" + join(tasks::tokenize(processed.substr(0, tab)), ", ") + "]";
        const std::string french = "[" + join(tasks::tokenize(processed.substr(tab + 1)), ", ") + "]";
        line("      {:>4}  {:<18} | {}", number, english, french);
    }
    line();
    t.check(tasks::preprocess_nmt(lines.at(5)) == "wow !\tça alors !",
            {.en = "line 6 'Wow!<TAB>Ça alors<U+202F>!' becomes 'wow !<TAB>ça alors !' (Ç lowercased too)",
             .zh = "第 6 行 'Wow!<TAB>Ça alors<U+202F>!' 变成 'wow !<TAB>ça alors !'（Ç 也转成小写）"});
    t.check(tasks::preprocess_nmt(lines.at(469)) == "who fell ?\tqui est tombé ?",
            {.en = "line 470's U+00A0 becomes a plain space", .zh = "第 470 行的 U+00A0 变成普通空格"});
}

// d2l.load_data_nmt's pipeline (tasks::load_fra_eng on 600 examples), its vocabularies and min_freq = 2.
void load_data_nmt(Tutorial& t, Lesson& lesson) {
    note({.en = "\nNow the whole pipeline: tasks::load_fra_eng with d2l's num_examples = 600, num_steps = 10 and "
                "min_freq = 2. (d2l's tokenize_nmt stops AFTER line index 600, so it reads 601 lines; the library "
                "keeps that off-by-one so the vocabularies match d2l's.)",
          .zh = "\n现在是整条流水线：tasks::load_fra_eng，用 d2l 的 num_examples = 600、num_steps = 10 和 "
                "min_freq = 2。（d2l 的 tokenize_nmt 在行下标 600 “之后”才停，所以读了 601 行；库保留了这个差一错误，"
                "好让词表与 d2l 的一致。）"});
    lesson.data = tasks::load_fra_eng({.path = lesson.corpus, .num_examples = 600, .num_steps = 10, .min_freq = 2});
    const tasks::FraEngData& d = *lesson.data;
    note({.en = "    {} pairs; vocabularies: {} English tokens, {} French tokens",
          .zh = "    {} 个句子对；词表：英语 {} 个词元，法语 {} 个词元"},
         d.report.train_pairs, d.src_vocab.size(), d.tgt_vocab.size());
    t.check(d.report.train_pairs == 601, {.en = "601 pairs, as d2l reads for num_examples = 600",
                                          .zh = "601 个句子对，与 d2l 在 num_examples = 600 时读到的一样"});
    t.check(d.src_vocab.size() == 184 && d.tgt_vocab.size() == 201,
            {.en = "d2l's vocabulary sizes: len(src_vocab) = 184, len(tgt_vocab) = 201",
             .zh = "d2l 的词表大小：len(src_vocab) = 184，len(tgt_vocab) = 201"});

    std::vector<std::string> first;
    for (int64_t i = 0; i < 12; ++i) first.push_back(fmt::format("{}:{}", i, d.tgt_vocab.to_token(i)));
    note({.en = "\nThe French vocabulary begins (index:token)\n    {}\n'<unk>' is always 0, then the reserved "
                "'<pad>' (padding), '<bos>' (begin: the decoder's first input) and '<eos>' (end of sentence), then "
                "every token that occurs at least min_freq = 2 times, most frequent first.",
          .zh = "\n法语词表的开头（编号:词元）\n    {}\n'<unk>' 总是 0，然后是保留的 '<pad>'（填充）、"
                "'<bos>'（开始：解码器的第一个输入）和 '<eos>'（句子结束），再往后是出现至少 min_freq = 2 次的"
                "每个词元，越常见越靠前。"},
         join(first));
    t.check(d.tgt_vocab.to_index("<unk>") == 0 && d.tgt_vocab.to_index("<pad>") == 1 &&
                d.tgt_vocab.to_index("<bos>") == 2 && d.tgt_vocab.to_index("<eos>") == 3,
            {.en = "<unk> <pad> <bos> <eos> are 0 1 2 3 in both vocabularies",
             .zh = "两个词表里 <unk> <pad> <bos> <eos> 都是 0 1 2 3"});

    // min_freq by hand: count two French words in the training side
    std::map<std::string, int64_t> count;
    for (const auto& p : d.train.pairs)
        for (const std::string& w : tasks::tokenize(p.tgt)) ++count[w];
    note({.en = "\nmin_freq = 2 by example: 'parti' occurs {} times in the French side, 'resté' {} time(s). So "
                "'resté' is not in the vocabulary and maps to <unk> (index {}): a model trained on these 601 pairs "
                "can never write 'je suis resté', although 'I stayed.' is in the data.",
          .zh = "\n用例子说明 min_freq = 2：'parti' 在法语一侧出现 {} 次，'resté' 出现 {} 次。所以 'resté' "
                "不在词表里，映射为 <unk>（编号 {}）：在这 601 个句子对上训练的模型永远写不出 'je suis resté'，"
                "尽管数据里有 'I stayed.'。"},
         count["parti"], count["resté"], d.tgt_vocab.to_index("resté"));
    t.check(count["parti"] >= 2 && d.tgt_vocab.contains("parti"),
            {.en = "'parti' (2 or more times) has its own index", .zh = "'parti'（2 次或更多）有自己的编号"});
    t.check(count["resté"] == 1 && d.tgt_vocab.to_index("resté") == tasks::Vocab::kUnk,
            {.en = "'resté' (once) is <unk>", .zh = "'resté'（1 次）是 <unk>"});
}

// d2l's build_array_nmt: padding and valid lengths on the pair 'i left .', truncation on seed 003's sentence.
void padding_and_truncation(Tutorial& t, const tasks::FraEngData& d, const std::vector<std::string_view>& lines) {
    int64_t row = -1;
    for (size_t i = 0; i < d.train.pairs.size(); ++i)
        if (d.train.pairs[i].src == "i left ." && row < 0) row = static_cast<int64_t>(i);
    const Tensor src_row = d.train.src.select(0, row), tgt_row = d.train.tgt.select(0, row);
    note({.en = "\nbuild_array_nmt turns each sentence into its ids + <eos>, padded with <pad> (1) to num_steps = 10; "
                "the valid length counts the ids that are not padding. Row {} of the arrays, the pair "
                "'{}' → '{}':",
          .zh = "\nbuild_array_nmt 把每个句子变成它的编号 + <eos>，用 <pad>（1）填充到 num_steps = 10；"
                "有效长度只数不是填充的编号。数组的第 {} 行，句子对 '{}' → '{}'："},
         row, d.train.pairs[row].src, d.train.pairs[row].tgt);
    show("src[row]", src_row);
    note({.en = "    = [{}], valid length {}", .zh = "    = [{}]，有效长度 {}"},
         join(d.src_vocab.to_tokens(src_row.to_vector<int64_t>()), ", "), d.train.src_valid_len.at({row}));
    show("tgt[row]", tgt_row);
    note({.en = "    = [{}], valid length {}", .zh = "    = [{}]，有效长度 {}"},
         join(d.tgt_vocab.to_tokens(tgt_row.to_vector<int64_t>()), ", "), d.train.tgt_valid_len.at({row}));
    t.check(d.train.src_valid_len.at({row}) == 4 && src_row.at({3}) == 3 && src_row.at({4}) == 1,
            {.en = "'i left .' + <eos> = 4 valid ids, then <pad> = 1 up to 10",
             .zh = "'i left .' + <eos> = 4 个有效编号，然后用 <pad> = 1 填到 10 个"});

    size_t station = 0;  // seed 003's sentence, as the corpus has it
    while (station < lines.size() && !lines[station].starts_with("I arrived at the station.\t")) ++station;
    note({.en = "\nA sentence longer than num_steps is cut: d2l's truncate_pad keeps the first 10 ids and the "
                "<eos> is lost (valid length 10). Seed 003's sentence, as the corpus has it on line {}, with "
                "num_steps = 5:",
          .zh = "\n长于 num_steps 的句子会被截断：d2l 的 truncate_pad 保留前 10 个编号，<eos> 丢失（有效长度 10）。"
                "种子文档 003 的句子，取语料第 {} 行的写法，num_steps = 5："},
         station + 1);
    const std::string long_line = tasks::preprocess_nmt("I arrived at the station.");
    const tasks::NmtArray cut = tasks::build_array_nmt({tasks::tokenize(long_line)}, d.src_vocab, 5);
    show("build_array_nmt(['i arrived at the station .'], num_steps=5).tokens", cut.tokens);
    note({.en = "    = [{}]  — 'arrived' and 'station' are not among the 184 words: <unk>",
          .zh = "    = [{}]  —— 'arrived' 和 'station' 不在这 184 个词里：<unk>"},
         join(d.src_vocab.to_tokens(cut.tokens.to_vector<int64_t>()), ", "));
    t.check(cut.valid_lens.at({0}) == 5 && cut.tokens.at({0, 4}) != d.src_vocab.to_index("<eos>"),
            {.en = "truncated to 5 ids, valid length 5, no <eos>", .zh = "截断为 5 个编号，有效长度 5，没有 <eos>"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 训练 (d2l.load_data_nmt(batch_size, num_steps))
void corpus_and_vocabularies(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 000's training cell starts with d2l.load_data_nmt(batch_size, num_steps): read fra.txt "
                "(one 'English<TAB>French' pair per line, from Tatoeba), preprocess, tokenise, build a vocabulary "
                "per language, and turn every sentence into num_steps = 10 ids. tasks::load_fra_eng does the same; "
                "here is each stage by hand first. Corpus: {}",
          .zh = "种子文档 000 的训练单元以 d2l.load_data_nmt(batch_size, num_steps) 开始：读 fra.txt"
                "（每行一个 '英语<TAB>法语' 句子对，来自 Tatoeba），预处理，分词，为每种语言建一个词表，"
                "再把每个句子变成 num_steps = 10 个编号。tasks::load_fra_eng 做的是同样的事；"
                "这里先把每一步手工做一遍。语料：{}"},
         lesson.corpus);
    lesson.corpus_text = read_corpus(lesson.corpus);
    const std::vector<std::string_view> lines = lines_of(lesson.corpus_text);
    preprocess_nmt_by_hand(t, lines);
    load_data_nmt(t, lesson);
    padding_and_truncation(t, *lesson.data, lines);
}

// A model written by `tformer train translate`, with its own vocabularies (--checkpoint FILE).
void load_the_checkpoint(Tutorial& t, Lesson& lesson) {
    note({.en = "PATH TAKEN: loading the checkpoint given with --checkpoint:\n    {}",
          .zh = "所走的路径：加载 --checkpoint 给出的检查点：\n    {}"},
         lesson.checkpoint);
    const tasks::CheckpointInfo info = tasks::read_checkpoint_info(lesson.checkpoint);
    if (info.config.task != "translate")
        fail<ValueError>("tutorial 13: '{}' is a {} checkpoint, not a translation model", lesson.checkpoint,
                         info.config.task);
    c::Generator gen(0);
    lesson.model.net = tasks::build_model(info.config, gen);
    tasks::load_checkpoint(lesson.checkpoint, *lesson.model.net, nullptr);
    lesson.model.src_vocab = *info.src_vocab;
    lesson.model.tgt_vocab = *info.tgt_vocab;
    lesson.model.num_steps = info.config.num_steps;
    const auto preset = info.extra.find("preset");
    const auto examples = info.extra.find("num_examples");
    lesson.model.on_d2l_pairs = examples != info.extra.end() && examples->second == "600";
    lesson.model.how = phrase({.en = "loaded from {} ({} optimizer steps, preset '{}')",
                               .zh = "从 {} 加载（优化器 {} 步，预设 '{}'）"},
                              lesson.checkpoint, info.step, preset == info.extra.end() ? "?" : preset->second)
                           .text;
    const nn::TransformerOptions& o = info.config.transformer;
    note({.en = "{} optimizer steps, {} epochs; d = {}, FFN {}, {} heads, {} blocks; num_steps {}; "
                "vocabularies {} / {}; {} parameters. Steps 3-6 use this model and ITS vocabularies (the "
                "600-pair vocabularies of step 1 were only the example).",
          .zh = "优化器 {} 步，{} 个迭代周期；d = {}，前馈网络 {}，{} 个头，{} 个块；num_steps {}；"
                "词表 {} / {}；{} 个参数。第 3-6 步用这个模型和“它自己的”词表（第 1 步 600 个句子对的词表只是示例）。"},
         info.step, info.epoch, o.num_hiddens, o.ffn_num_hiddens, o.num_heads, o.num_layers, lesson.model.num_steps,
         lesson.model.src_vocab.size(), lesson.model.tgt_vocab.size(), lesson.model.net->num_parameters());
    t.check(lesson.model.src_vocab.size() == info.config.src_vocab_size &&
                lesson.model.tgt_vocab.size() == info.config.tgt_vocab_size,
            {.en = "the checkpoint's vocabularies fit its embedding and output layers",
             .zh = "检查点的词表与它的嵌入层和输出层相符"});
}

// One batch in d2l's framing, then tasks::train with `run`, reporting the loss per epoch. Returns the seconds.
double train_and_report(Tutorial& t, Lesson& lesson, const tasks::FraEngData& d, const TrainingRun& run,
                        c::Generator& gen) {
    const bool literal = t.literal();
    const tasks::ModelConfig& config = run.config;
    const tasks::TrainOptions& o = run.options;
    const int64_t bos = d.tgt_vocab.to_index("<bos>");
    const tasks::BatchSource source = tasks::translation_source(d.train, o.batch_size, bos, o.seed);
    const tasks::Batch first = source.get(0, 0);
    note({.en = "\nOne batch in d2l's framing (train_seq2seq): the decoder input is the target shifted right "
                "behind <bos> (teacher forcing), the label is the target itself. Its first row:",
          .zh = "\n按 d2l 的方式（train_seq2seq）组织的一个批量：解码器的输入是目标序列右移一位、前面接上 <bos>"
                "（教师强制），标签就是目标序列本身。它的第一行："});
    show("enc_X[0]", first.enc_X.select(0, 0));
    show("dec_in[0]", first.dec_in.select(0, 0));
    show("label[0]", first.label.select(0, 0));
    t.check(first.dec_in.at({0, 0}) == static_cast<double>(bos) && first.dec_in.at({0, 1}) == first.label.at({0, 0}),
            both("dec_in = [<bos>, label[:-1]]"));

    const auto start = std::chrono::steady_clock::now();
    const tasks::TrainResult r = tasks::train(*lesson.model.net, gen, source, o,
                                              {.config = config,
                                               .src_vocab = d.src_vocab,
                                               .tgt_vocab = d.tgt_vocab,
                                               .step = 0,
                                               .epoch = 0,
                                               .rng = {},
                                               .extra = {}});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Text threads =
        c::get_num_threads() == 1 ? Text{.en = "thread", .zh = "个线程"} : Text{.en = "threads", .zh = "个线程"};
    const Text from = lesson.threads_given
                          ? Text{.en = ", from OMP_NUM_THREADS", .zh = "，取自 OMP_NUM_THREADS"}
                          : Text{.en = "; set OMP_NUM_THREADS for more", .zh = "；设置 OMP_NUM_THREADS 可用更多线程"};
    note({.en = "\nTraining ({} steps, {} {}{}): d2l's loss per epoch, Σ masked cross-entropy / Σ valid "
                "target tokens:",
          .zh = "\n训练（{} 步，{} {}{}）：d2l 的每个迭代周期的损失，Σ 掩码交叉熵 / Σ 有效目标词元数："},
         r.steps, c::get_num_threads(), phrase(threads), phrase(from));
    for (size_t e = 0; e < r.epoch_loss.size(); ++e)
        if (e == 0 || (e + 1) % (literal ? 20 : 5) == 0)
            line({.en = "      epoch {:>3}  loss {:.4f}", .zh = "      第 {:>3} 个迭代周期  损失 {:.4f}"}, e + 1,
                 r.epoch_loss[e]);
    line();
    // times differ from run to run: printed, but left out of --no-prose (a Phrase without values)
    note(Phrase{phrase({.en = "{:.1f} s for {} steps ({:.0f} target tokens/s). Written to {}: checkpoint.safetensors, "
                              "loss.csv, loss.png.",
                        .zh = "{:.1f} 秒训练 {} 步（每秒 {:.0f} 个目标词元）。已写入 {}：checkpoint.safetensors、"
                              "loss.csv、loss.png。"},
                       seconds, r.steps, r.tokens_per_second, t.out_dir().string())
                    .text,
                {}});
    if (literal) {
        note({.en = "d2l's book prints, for this cell (its section 10.7, run by d2l; seed 000 copies the code "
                    "without its output), 'loss 0.033, ... tokens/sec'; here:",
              .zh = "d2l 的书中这个单元打印的是 'loss 0.033, ... tokens/sec'（书的 10.7 节，由 d2l 运行；"
                    "种子文档 000 只抄了代码，没有它的输出）；这里："});
        note(both("    loss {:.3f}"), r.final_loss);
        t.check(r.steps == 2000, {.en = "2,000 optimizer steps: 200 epochs of 10 batches",
                                  .zh = "优化器 2,000 步：200 个迭代周期，每个 10 个批量"});
        t.check(r.final_loss < 0.06,
                {.en = "the final loss {:.4f} is near d2l's printed 0.033 (below 0.06)",
                 .zh = "最终损失 {:.4f} 接近 d2l 书中打印的 0.033（低于 0.06）"},
                r.final_loss);
    } else {
        t.check(r.steps == 400, {.en = "400 optimizer steps: 40 epochs of 10 batches",
                                 .zh = "优化器 400 步：40 个迭代周期，每个 10 个批量"});
        t.check(r.final_loss < 0.1 * r.epoch_loss.front(),
                {.en = "the loss fell more than tenfold ({:.3f} → {:.4f}); the 200-epoch run d2l's book prints "
                       "ends near 0.03",
                 .zh = "损失下降了十倍以上（{:.3f} → {:.4f}）；d2l 书中打印的 200 个迭代周期的运行结束时约为 0.03"},
                r.epoch_loss.front(), r.final_loss);
    }
    return seconds;
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 训练: the model trained here, as the cell writes it (--literal)
// or shortened, on d2l's 601 pairs and (not --literal) the corpus's short pairs that start with 'I arrived'
void train_here(Tutorial& t, Lesson& lesson) {
    if (!lesson.data) fail<ValueError>("tutorial 13: no corpus, so nothing to train on (step 1 failed)");
    const bool literal = t.literal();
    // The training pairs: d2l's 601 (--literal), or those plus the corpus's short sentences that
    // start with "I arrived", so that seed 003's walk-through sentence can be translated (step 3).
    std::optional<tasks::FraEngData> augmented;
    int64_t added = 0;
    if (!literal) {
        const fs::path file = t.out_path("fra-601-and-arrived.txt");
        std::ofstream(file) << d2l_prefix_and_arrived(lesson.corpus_text, added);
        augmented = tasks::load_fra_eng({.path = file.string(), .num_steps = 10, .min_freq = 2});
    }
    const tasks::FraEngData& d = literal ? *lesson.data : *augmented;
    const tasks::ModelConfig config = translation_config(d, literal);
    const uint64_t seed = 1;  // `tformer train translate --preset d2l`'s seed
    const tasks::TrainOptions o = train_options(literal, seed, t.out_dir().string());
    if (literal)
        note({.en = "PATH TAKEN: --literal, seed 000's training cell exactly as written:\n"
                    "    num_hiddens, num_layers, dropout, batch_size, num_steps = 32, 2, 0.1, 64, 10\n"
                    "    lr, num_epochs = 0.005, 200;  ffn_num_hiddens, num_heads = 64, 4\n"
                    "    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size, num_steps)\n"
                    "    d2l.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, device)\n"
                    "on the 601 pairs of step 1: Adam at a constant 0.005, gradient clipping at 1 and Xavier-uniform "
                    "weights as train_seq2seq does, 200 epochs of 10 batches = 2,000 steps, dropout 0.1 (the same "
                    "run as `tformer train translate --preset d2l`).",
              .zh = "所走的路径：--literal，完全按种子文档 000 的训练单元原样运行：\n"
                    "    num_hiddens, num_layers, dropout, batch_size, num_steps = 32, 2, 0.1, 64, 10\n"
                    "    lr, num_epochs = 0.005, 200;  ffn_num_hiddens, num_heads = 64, 4\n"
                    "    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size, num_steps)\n"
                    "    d2l.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, device)\n"
                    "在第 1 步的 601 个句子对上：Adam 学习率恒为 0.005，像 train_seq2seq 那样梯度裁剪到 1、"
                    "用 Xavier 均匀分布初始化权重，200 个迭代周期、每个 10 个批量 = 2,000 步，dropout 0.1"
                    "（与 `tformer train translate --preset d2l` 是同一个运行）。"});
    else
        note({.en = "PATH TAKEN: no --checkpoint given, so a small model is trained here, now.\n\n"
                    "Seed 000 trains num_hiddens 32, 2 blocks, 4 heads, FFN 64, dropout 0.1, batch 64, num_steps "
                    "10, Adam at lr 0.005 for 200 epochs on d2l's 601 pairs (2000 steps; `--literal` runs exactly "
                    "that). This run keeps the model and shortens the schedule to 40 epochs (400 steps): Adam with "
                    "a warm-up of 40 steps to lr 0.01 and a cosine decay, gradient clipping at 1 as d2l, dropout 0 "
                    "— the goal is to fit the pairs quickly, not to generalise. To the 601 pairs it adds the {} "
                    "short pairs of the corpus that start with 'I arrived' (the first is line 22,852; d2l's "
                    "prefix never reaches it), so that step 3 can follow seed 003's own sentence: {} pairs, "
                    "vocabularies {} / {}.",
              .zh = "所走的路径：没有给出 --checkpoint，所以现在就在这里训练一个小模型。\n\n"
                    "种子文档 000 训练的是 num_hiddens 32、2 个块、4 个头、前馈网络 64、dropout 0.1、批量 64、"
                    "num_steps 10，在 d2l 的 601 个句子对上用 Adam、学习率 0.005 训练 200 个迭代周期（2000 步；"
                    "`--literal` 正是这样运行）。这次运行保留模型，把训练缩短为 40 个迭代周期（400 步）："
                    "Adam 先用 40 步预热到学习率 0.01，再按余弦衰减，像 d2l 一样梯度裁剪到 1，dropout 0 —— "
                    "目标是快速拟合这些句子对，而不是泛化。在 601 个句子对之外，它还加入语料中以 'I arrived' "
                    "开头的 {} 个短句子对（第一个在第 22,852 行；d2l 的前缀从来到不了那里），好让第 3 步能跟随种子文档 "
                    "003 自己的句子：共 {} 个句子对，词表 {} / {}。"},
             added, d.report.train_pairs, d.src_vocab.size(), d.tgt_vocab.size());
    c::Generator gen(seed);
    lesson.model.net = tasks::build_model(config, gen);
    note({.en = "{} parameters. Batches: each epoch a fresh shuffle of the {} pairs in batches of 64.",
          .zh = "{} 个参数。批量：每个迭代周期把 {} 个句子对重新打乱，每批 64 个。"},
         lesson.model.net->num_parameters(), d.report.train_pairs);
    const double seconds = train_and_report(t, lesson, d, {.config = config, .options = o}, gen);
    lesson.model.src_vocab = d.src_vocab;
    lesson.model.tgt_vocab = d.tgt_vocab;
    lesson.model.num_steps = config.num_steps;
    lesson.model.trained_here = true;
    lesson.model.on_d2l_pairs = true;
    // (the seconds differ from run to run: Model::how is printed but left out of --no-prose)
    lesson.model.how =
        literal ? phrase({.en = "trained here with --literal: seed 000's recipe, 601 pairs, 2,000 steps in {:.1f} s",
                          .zh = "在这里用 --literal 训练：种子文档 000 的配方，601 个句子对，2,000 步，用时 {:.1f} 秒"},
                         seconds)
                      .text
                : phrase({.en = "trained here: seed 000's model, 601 + {} pairs, 400 steps in {:.1f} s",
                          .zh = "在这里训练：种子文档 000 的模型，601 + {} 个句子对，400 步，用时 {:.1f} 秒"},
                         added, seconds)
                      .text;
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 训练 (num_hiddens 32, 2 layers, 4 heads, lr 0.005, 200 epochs)
void the_model(Tutorial& t, Lesson& lesson) {
    if (!lesson.checkpoint.empty())
        load_the_checkpoint(t, lesson);
    else
        train_here(t, lesson);
    lesson.model.net->eval();  // dropout off from here on (seed 000 predicts with net.eval())
    note(Phrase{phrase({.en = "\nModel: {}", .zh = "\n模型：{}"}, lesson.model.how).text, {}});  // holds a time
}

// Where the corpus first has the seed's words (1-based line numbers), against d2l's 601 lines.
void where_the_corpus_has_arrived(Tutorial& t, const std::string& corpus_text) {
    // where the corpus first has the seed's words (1-based line numbers)
    auto line_of = [&](std::string_view needle) -> int64_t {
        size_t pos = corpus_text.find(needle);
        if (pos == std::string::npos) return -1;
        if (needle.front() == '\n') ++pos;  // the match starts at the end of the line before
        return 1 + std::count(corpus_text.begin(), corpus_text.begin() + static_cast<std::ptrdiff_t>(pos), '\n');
    };
    const int64_t arrived = line_of(" arrived"), i_arrived = line_of("\nI arrived"),
                  at_the = line_of("\nI arrived at the");
    note({.en = "    first English sentence with 'arrived':          line {}\n"
                "    first sentence starting 'I arrived':            line {}\n"
                "    first sentence starting 'I arrived at the':     line {}\n"
                "The file is sorted by length and d2l trains on its first 601 lines, whose vocabulary has no "
                "'arrived' (step 1).",
          .zh = "    第一个含 'arrived' 的英语句子：                 第 {} 行\n"
                "    第一个以 'I arrived' 开头的句子：               第 {} 行\n"
                "    第一个以 'I arrived at the' 开头的句子：        第 {} 行\n"
                "文件按长度排序，d2l 只用前 601 行训练，它们的词表里没有 'arrived'（第 1 步）。"},
         arrived, i_arrived, at_the);
    t.check(arrived > 601 && i_arrived > 601, {.en = "neither 'arrived' nor 'I arrived' occurs in d2l's 601 lines",
                                               .zh = "d2l 的 601 行里既没有 'arrived' 也没有 'I arrived'"});
}

// seed 003 (003_8fde783e4908788c.txt) › 1. 输入处理 › (1) Tokenization（分词）: the sentence as the encoder's ids
void tokenization(Tutorial& t, Lesson& lesson) {
    const tasks::Vocab& sv = lesson.model.src_vocab;
    lesson.walk.source = encode_source(lesson.walk.sentence, sv, lesson.model.num_steps);
    const Source& s = lesson.walk.source;
    const int64_t S = lesson.model.num_steps;
    note({.en = "\n(1) Tokenization. d2l splits at spaces after preprocess_nmt (seed 003 mentions BPE and "
                "WordPiece: subword units, tutorial 15). '{}' → [{}] + <eos>, padded to num_steps = {}:",
          .zh = "\n(1) 分词。d2l 在 preprocess_nmt 之后按空格切分（种子文档 003 提到 BPE 和 WordPiece："
                "子词单元，见教程 15）。'{}' → [{}] + <eos>，填充到 num_steps = {}："},
         lesson.walk.sentence, join(s.words, ", "), S);
    show("ids", s.src);
    note({.en = "    = [{}], valid length {}", .zh = "    = [{}]，有效长度 {}"}, join(sv.to_tokens(s.ids), ", "),
         s.valid);
    bool known = true;
    for (const std::string& w : s.words) known = known && sv.contains(w);
    t.check(known,
            {.en = "every word of '{}' is in the source vocabulary (no <unk>)",
             .zh = "'{}' 的每个词都在源语言词表里（没有 <unk>）"},
            join(s.words));
}

// seed 003 (003_8fde783e4908788c.txt) › (2) 词嵌入, (3) 位置编码: X = embedding × √d + P, (1, S, D)
Tensor embeddings_and_positions(Tutorial& t, const Lesson& lesson) {
    const tasks::Vocab& sv = lesson.model.src_vocab;
    const Source& s = lesson.walk.source;
    const int64_t S = lesson.model.num_steps, D = lesson.model.net->encoder->options.num_hiddens;
    const int64_t show_n = std::min<int64_t>(6, D);
    const Tensor E = lesson.model.net->encoder->embedding->forward(s.src).value();  // (1, S, D)
    const Tensor scaled = c::mul(E, std::sqrt(static_cast<double>(D)));
    const Tensor P = lesson.model.net->encoder->pos_encoding->P.slice(1, 0, S);  // (1, S, D)
    const Tensor X = c::add(scaled, P);
    note({.en = "\n(2) Word embeddings: row id of the learned table encoder.embedding.weight ({} × {}), "
                "seed 003's 'Embeddings(I) → [0.1, 0.5, 0.8, ...]'. Seed 000's encoder multiplies them by √d = "
                "√{} = {:.3f} (the positional encoding lies in [-1, 1] and should not drown them). First {} of {} "
                "features, one row per token ({}, <eos>):",
          .zh = "\n(2) 词嵌入：学到的表 encoder.embedding.weight（{} × {}）中编号所在的那一行，即种子文档 003 的 "
                "'Embeddings(I) → [0.1, 0.5, 0.8, ...]'。种子文档 000 的编码器把它们乘以 √d = √{} = {:.3f}"
                "（位置编码在 [-1, 1] 之间，不应把词嵌入淹没）。{} 个特征中的前 {} 个，每个词元一行（{}, <eos>）："},
         sv.size(), D, D, std::sqrt(static_cast<double>(D)), show_n, D, join(s.words, ", "));
    show("embedding × √d", scaled.select(0, 0).slice(0, 0, s.valid).slice(1, 0, show_n));
    note({.en = "\n(3) Positional encoding: P[pos, 2j] = sin(pos / 10000^(2j/d)), P[pos, 2j+1] = cos(...). Row 0 is "
                "[0, 1, 0, 1, ...]; seed 003's 'PositionalEncoding(0) = [0.0000, 0.8415, ...]' are sin 1, sin 2, "
                "... one position off (tutorial 08).",
          .zh = "\n(3) 位置编码：P[pos, 2j] = sin(pos / 10000^(2j/d))，P[pos, 2j+1] = cos(...)。第 0 行是 "
                "[0, 1, 0, 1, ...]；种子文档 003 的 'PositionalEncoding(0) = [0.0000, 0.8415, ...]' 是 sin 1、"
                "sin 2……错了一个位置（教程 08）。"});
    show("P[:4, :6]", P.select(0, 0).slice(0, 0, s.valid).slice(1, 0, show_n));
    show("X = embedding × √d + P", X.select(0, 0).slice(0, 0, s.valid).slice(1, 0, show_n));
    t.check_close(P.select(0, 0).select(0, 0).slice(0, 0, 4), c::from_vector(std::vector<float>{0, 1, 0, 1}, {4}), 0,
                  {.en = "P[0] starts [0, 1, 0, 1]", .zh = "P[0] 以 [0, 1, 0, 1] 开头"});
    t.check_close(
        P.at({0, 1, 0}), std::sin(1.0), 1e-6,
        {.en = "P[1, 0] = sin 1 = 0.8415 (seed 003's number)", .zh = "P[1, 0] = sin 1 = 0.8415（种子文档 003 的数）"});

    return X;
}

// A row of attention weights w (H, keys), averaged over the heads, beside the valid source tokens they
// weigh: "  i 0.12  arrived 0.55 ...".
std::string mean_over_heads(const Tensor& w, const Source& s, const tasks::Vocab& sv) {
    const int64_t H = w.size(0);
    std::string row;
    for (int64_t k = 0; k < s.valid; ++k) {
        double mean = 0;
        for (int64_t h = 0; h < H; ++h) mean += w.at({h, k}) / static_cast<double>(H);
        row += fmt::format("  {} {:.2f}", sv.to_token(s.ids[k]), mean);
    }
    return row;
}

// seed 003 (003_8fde783e4908788c.txt) › 2. 编码阶段 › (4) 多头自注意力, (5) 前馈神经网络: enc_outputs (1, S, D)
Tensor the_encoder(Tutorial& t, Lesson& lesson, const Tensor& X) {
    const tasks::Vocab& sv = lesson.model.src_vocab;
    const Source& s = lesson.walk.source;
    const int64_t D = lesson.model.net->encoder->options.num_hiddens, H = lesson.model.net->encoder->options.num_heads;
    const int64_t show_n = std::min<int64_t>(6, D);
    note({.en = "\n(4)-(5) The encoder: {} blocks of multi-head self-attention (every source token looks at every "
                "valid source token) + AddNorm + FFN + AddNorm. Running the blocks by hand on X, then asking the "
                "encoder itself:",
          .zh = "\n(4)-(5) 编码器：{} 个块，每块是多头自注意力（每个源词元看所有有效的源词元）+ AddNorm + "
                "前馈网络 + AddNorm。先在 X 上手工运行这些块，再问编码器本身："},
         lesson.model.net->encoder->blks->size());
    Variable Hh(X);
    for (auto& blk : *lesson.model.net->encoder->blks) Hh = blk->forward(Hh, s.lens);
    const Tensor enc = lesson.model.net->encoder->forward(s.src, s.lens).value();  // (1, S, D)
    for (const Tensor& w : lesson.model.net->encoder->attention_weights())
        lesson.walk.encoder.push_back(w.clone());  // [block] (H, S, S)
    show("enc_outputs[0, :4, :6]", enc.select(0, 0).slice(0, 0, s.valid).slice(1, 0, show_n));
    note({.en = "    enc_outputs: {}; encoder self-attention weights: {} blocks of {}",
          .zh = "    enc_outputs：{}；编码器自注意力权重：{} 个块，每块 {}"},
         c::shape_str(enc.shape()), lesson.walk.encoder.size(), c::shape_str(lesson.walk.encoder.front().shape()));
    t.check_close(Hh.value(), enc, 1e-5,
                  {.en = "embedding × √d + P, then the blocks == encoder.forward(src)",
                   .zh = "embedding × √d + P，再经过各块 == encoder.forward(src)"});
    const Tensor last_enc = lesson.walk.encoder.back();
    note({.en = "Where each token looks in the last encoder block (mean of the {} heads; the padded keys get 0):",
          .zh = "最后一个编码器块里每个词元看向哪里（{} 个头的平均；填充的键得到 0）："},
         H);
    for (int64_t q = 0; q < s.valid; ++q)
        line("      {:>6} →{}", sv.to_token(s.ids[q]), mean_over_heads(last_enc.select(1, q), s, sv));
    line();

    return enc;
}

// What decoding the walk-through sentence one token at a time produced (beside lesson.walk).
struct Decoding {
    std::vector<int64_t> generated;                             // the tokens before <eos>
    std::vector<std::vector<std::pair<int64_t, double>>> tops;  // per step, the three most likely tokens
    double logp_total = 0;                                      // the sum of the chosen tokens' log p
    int64_t steps_done = 0, self_steps = 0, cross_steps = 0;    // the state's steps and block 0's cache
};

// seed 003 (003_8fde783e4908788c.txt) › 3. 解码阶段 › (6), (7), and 4. 生成翻译: greedy, one token per step
Decoding decode_one_token_at_a_time(Lesson& lesson, const Tensor& enc) {
    const tasks::Vocab& sv = lesson.model.src_vocab;
    const tasks::Vocab& tv = lesson.model.tgt_vocab;
    const Source& s = lesson.walk.source;
    const int64_t H = lesson.model.net->encoder->options.num_heads;
    const int64_t bos = tv.to_index("<bos>"), eos = tv.to_index("<eos>");
    note({.en = "(6)-(7) and 4. 生成翻译. The decoder starts from <bos> and produces one token per step. Each step "
                "feeds ONLY the newest token: nn::DecoderState keeps, per block, the projected keys and values of "
                "the tokens fed so far (masked self-attention over the prefix) and of the encoder outputs "
                "(cross-attention: queries from the French side, keys and values from the English side, seed 000 "
                "信息传递). The logits of the new position go through a softmax over the {} French tokens; greedy "
                "search takes the largest. Printed per step: the three most likely next tokens, and the "
                "cross-attention row of the last block (mean over heads) over the source tokens.",
          .zh = "(6)-(7) 和 4. 生成翻译。解码器从 <bos> 出发，每个时间步生成一个词元。每一步“只”输入最新的词元："
                "nn::DecoderState 为每个块保存已输入词元投影后的键和值（对前缀做有掩码的自注意力），以及编码器输出"
                "投影后的键和值（交叉注意力：查询来自法语一侧，键和值来自英语一侧，种子文档 000 信息传递）。"
                "新位置的 logits 经过对 {} 个法语词元的 softmax；贪心搜索取最大的那个。每一步打印：最可能的三个"
                "下一个词元，以及最后一个块在源词元上的交叉注意力行（各头的平均）。"},
         tv.size());
    nn::DecoderState state = lesson.model.net->decoder->init_state(Variable(enc), s.lens);
    const size_t blocks = lesson.model.net->decoder->blks->size();
    lesson.walk.self.assign(blocks, {});
    lesson.walk.cross.assign(blocks, {});
    lesson.walk.fed = {"<bos>"};
    std::vector<int64_t> generated;
    std::vector<std::vector<std::pair<int64_t, double>>> tops;
    double logp_total = 0;
    int64_t next = bos;
    line();
    for (int64_t step = 0; step < lesson.model.num_steps; ++step) {
        const Tensor fed = c::from_vector(std::vector<int64_t>{next}, {1, 1});              // (B, t) = (1, 1)
        const Tensor logits = lesson.model.net->decoder->forward_step(fed, state).value();  // (1, 1, V)
        const std::vector<double> probs = c::softmax(logits).to_vector();                   // (1, 1, V) → V
        const auto top = top_k(probs, 3);
        tops.push_back(top);
        const auto weights = lesson.model.net->decoder->attention_weights();
        for (size_t b = 0; b < blocks; ++b) {
            lesson.walk.self[b].push_back(weights[0][b].reshape({H, -1}).clone());   // (H, step + 1)
            lesson.walk.cross[b].push_back(weights[1][b].reshape({H, -1}).clone());  // (H, S)
        }
        const std::string cross_row = mean_over_heads(lesson.walk.cross.back().back(), s, sv);
        next = top.front().first;
        logp_total += std::log(top.front().second);
        line({.en = "    step {}  fed {:<7} next: {:<9} {:.3f} | {:<9} {:.3f} | {:<9} {:.3f}  → {}\n"
                    "            cross-attention:{}",
              .zh = "    第 {} 步  输入 {:<7} 下一个：{:<9} {:.3f} | {:<9} {:.3f} | {:<9} {:.3f}  → {}\n"
                    "            交叉注意力：{}"},
             step + 1, lesson.walk.fed.back(), tv.to_token(top[0].first), top[0].second, tv.to_token(top[1].first),
             top[1].second, tv.to_token(top[2].first), top[2].second, tv.to_token(next), cross_row);
        lesson.walk.produced.push_back(tv.to_token(next));
        if (next == eos) break;
        generated.push_back(next);
        lesson.walk.fed.push_back(tv.to_token(next));
    }
    const std::string translation = join(tv.to_tokens(generated));
    note({.en = "\n    '{}' → '{}'   (log-probability {:.4f})", .zh = "\n    '{}' → '{}'   （对数概率 {:.4f}）"},
         lesson.walk.sentence, translation, logp_total);

    note({.en = "\nSeed 003 writes P(Je | I) = 0.92, P(suis | arrived) = 0.87, P(arrivé | at) = 0.95, as if each "
                "French word were predicted from one English word. The decoder's softmax is P(y_t | y_1 .. y_t-1, "
                "whole source): every step sees every source token through the cross-attention above and every "
                "earlier French token through its self-attention. Read the rows above as where the last block "
                "looked, not as an alignment: a step may spread its attention over several source tokens, and "
                "'suis' has no English word of its own.",
          .zh = "\n种子文档 003 写 P(Je | I) = 0.92、P(suis | arrived) = 0.87、P(arrivé | at) = 0.95，"
                "好像每个法语词都由一个英语词预测出来。解码器的 softmax 是 P(y_t | y_1 .. y_t-1, 整个源句)："
                "每一步都通过上面的交叉注意力看到每个源词元，通过自注意力看到之前的每个法语词元。上面那些行应当"
                "读作最后一个块看向了哪里，而不是对齐关系：一步的注意力可能分散在好几个源词元上，而 'suis' "
                "根本没有对应的英语词。"});

    return {.generated = generated,
            .tops = tops,
            .logp_total = logp_total,
            .steps_done = state.steps_done,
            .self_steps = state.caches.front().self.steps(),
            .cross_steps = state.caches.front().cross.steps()};
}

// The step-by-step decoding of the walk-through against tasks::greedy_decode, and what the model answered.
void against_greedy_decode(Tutorial& t, const Lesson& lesson, const Decoding& decoding) {
    const tasks::Vocab& tv = lesson.model.tgt_vocab;
    const Source& s = lesson.walk.source;
    const int64_t S = lesson.model.num_steps;
    const int64_t bos = tv.to_index("<bos>"), eos = tv.to_index("<eos>");
    const std::string translation = join(tv.to_tokens(decoding.generated));
    const int64_t steps = static_cast<int64_t>(lesson.walk.produced.size());
    t.check(decoding.steps_done == steps && decoding.self_steps == steps && decoding.cross_steps == S,
            {.en = "after {} steps each block caches {} self keys and the {} encoder keys",
             .zh = "{} 步之后，每个块缓存了 {} 个自注意力的键和 {} 个编码器的键"},
            steps, steps, S);
    const tasks::Decoded greedy =
        tasks::greedy_decode(*lesson.model.net, s.src, s.lens,
                             {.bos = bos, .eos = eos, .max_steps = lesson.model.num_steps, .keep_attention = true})
            .front();
    t.check(
        greedy.tokens == decoding.generated,
        {.en = "tasks::greedy_decode gives the same tokens: '{}'", .zh = "tasks::greedy_decode 给出相同的词元：'{}'"},
        join(tv.to_tokens(greedy.tokens)));
    t.check_close(greedy.score, decoding.logp_total, 1e-4,
                  {.en = "and the same log-probability (sum of the chosen tokens' log p)",
                   .zh = "对数概率也相同（所选词元的 log p 之和）"});
    double worst = 0;
    for (int64_t i = 0; i < steps && i < static_cast<int64_t>(greedy.cross_attention.size()); ++i)
        worst = std::max(worst, c::max(c::abs(c::sub(greedy.cross_attention[i], lesson.walk.cross.back()[i]))).item());
    t.check(static_cast<int64_t>(greedy.cross_attention.size()) == steps && worst < 1e-6,
            {.en = "and the same cross-attention rows at every step", .zh = "每一步的交叉注意力行也相同"});
    if (lesson.model.trained_here && lesson.walk.sentence == kSeedWalkSentence) {
        const std::string start3 = join(
            std::vector<std::string>(lesson.walk.produced.begin(),
                                     lesson.walk.produced.begin() + std::min<size_t>(3, lesson.walk.produced.size())));
        t.check(std::find(lesson.walk.references.begin(), lesson.walk.references.end(), start3) !=
                    lesson.walk.references.end(),
                {.en = "the translation starts with the seed's 'je suis arrivé' (or arrivée): '{}'",
                 .zh = "译文以种子文档的 'je suis arrivé'（或 arrivée）开头：'{}'"},
                start3);
        note({.en = "Seed 003 shows only these three words. Its sentence stops after 'the', a sentence the model never "
                    "saw in training, so after them the model has no good continuation and may wander (as printed "
                    "above) until it runs out of steps.",
              .zh = "种子文档 003 只给出这三个词。它的句子在 'the' 之后就停了，模型在训练中从没见过这样的句子，"
                    "所以这三个词之后模型没有好的续写，可能会（如上所示）一直游荡到步数用完。"});
    } else if (lesson.model.trained_here) {
        t.check(std::find(lesson.walk.references.begin(), lesson.walk.references.end(), translation) !=
                    lesson.walk.references.end(),
                {.en = "the trained model translates 'I left.' as the corpus does (parti or partie)",
                 .zh = "训练好的模型像语料那样翻译 'I left.'（parti 或 partie）"});
    } else {
        note({.en = "(With a loaded checkpoint the translation is reported, not checked.)",
              .zh = "（对于加载的检查点，只报告译文，不检查。）"});
    }
    const auto is_participle = [&](int64_t id) {
        const std::string w = tv.to_token(id);
        return w == "parti" || w == "partie" || w == "arrivé" || w == "arrivée";
    };
    if (decoding.tops.size() >= 3 && is_participle(decoding.tops[2][0].first) &&
        is_participle(decoding.tops[2][1].first)) {
        const auto& third = decoding.tops[2];
        note({.en = "Look at step 3: after 'je suis' the choice is between the two genders of the participle, both in "
                    "the corpus; the model's split is {} {:.2f} / {} {:.2f}.",
              .zh = "看第 3 步：在 'je suis' 之后，要在分词的两种性别之间选择，两者语料里都有；模型的分配是 "
                    "{} {:.2f} / {} {:.2f}。"},
             tv.to_token(third[0].first), third[0].second, tv.to_token(third[1].first), third[1].second);
    }
}

// seed 003 (003_8fde783e4908788c.txt) › Transformer 处理 "I arrived at the" → "Je suis arrivé" 的全过程
void walk_through(Tutorial& t, Lesson& lesson) {
    if (!lesson.model.net) fail<ValueError>("tutorial 13: there is no model (step 2 failed)");
    const bool seed_sentence = lesson.model.src_vocab.contains("arrived") && lesson.model.src_vocab.contains("at") &&
                               lesson.model.src_vocab.contains("the");
    lesson.walk.sentence = seed_sentence ? kSeedWalkSentence : kFallbackWalkSentence;
    lesson.walk.references = seed_sentence ? kSeedWalkReferences : kFallbackWalkReferences;
    note({.en = "Seed 003 follows 'I arrived at the' → 'Je suis arrivé' through the Transformer: (1) tokenization, (2) "
                "word embeddings, (3) positional encoding, the encoder's (4) self-attention and (5) feed-forward "
                "network, the decoder's (6) masked self-attention and (7) cross-attention, and 4. 生成翻译, a "
                "softmax over the French vocabulary.",
          .zh = "种子文档 003 跟随 'I arrived at the' → 'Je suis arrivé' 走完 Transformer：(1) 分词，(2) 词嵌入，"
                "(3) 位置编码，编码器的 (4) 自注意力和 (5) 前馈神经网络，解码器的 (6) 有掩码的自注意力和 (7) "
                "交叉注意力，以及 4. 生成翻译，即在法语词表上的 softmax。"});
    if (!lesson.corpus_text.empty()) where_the_corpus_has_arrived(t, lesson.corpus_text);
    if (seed_sentence)
        note({.en = "This model was trained with the corpus's short 'I arrived ...' pairs added (step 2), so it knows "
                    "the words: we follow the seed's own, unfinished sentence 'I arrived at the'. Seed 003 (7): "
                    "'注意性别和语法，使 arrivé 变为正确的 je suis arrivé': the English 'I arrived' becomes the French "
                    "passé composé with être, two French words for one English one, and the participle agrees with the "
                    "speaker's gender (arrivé / arrivée), which the English 'I' does not show.",
              .zh = "这个模型训练时加入了语料中 'I arrived ...' 开头的短句子对（第 2 步），所以认识这些词："
                    "我们跟随种子文档自己那个没写完的句子 'I arrived at the'。种子文档 003 的 (7)："
                    "“注意性别和语法，使 arrivé 变为正确的 je suis arrivé”：英语的 'I arrived' 变成法语带 être "
                    "的复合过去时，一个英语词对应两个法语词，而且过去分词要与说话人的性别一致（arrivé / arrivée），"
                    "这一点英语的 'I' 看不出来。"});
    else
        note({.en = "This model knows only d2l's 601 pairs (--literal, or a checkpoint trained on them), so it has no "
                    "'arrived'. We follow the closest sentence those pairs support, 'I left.' → 'Je suis parti.' / 'Je "
                    "suis partie.' (lines 48 and 49): the same construction, passé composé with être and a participle "
                    "that agrees with the speaker (parti / partie).",
              .zh = "这个模型只认识 d2l 的 601 个句子对（--literal，或在它们上训练的检查点），所以没有 'arrived'。"
                    "我们跟随这些句子对能支持的最接近的句子：'I left.' → 'Je suis parti.' / 'Je suis partie.'"
                    "（第 48 和 49 行）：同样的结构，带 être 的复合过去时，过去分词与说话人一致（parti / partie）。"});

    tokenization(t, lesson);
    ag::NoGradGuard no_grad;
    const Tensor X = embeddings_and_positions(t, lesson);
    const Tensor enc = the_encoder(t, lesson, X);
    against_greedy_decode(t, lesson, decode_one_token_at_a_time(lesson, enc));
}

// Greedy, beam 1 and beam 4 on the walk-through sentence and seed 000's four, each beam-4 score recomputed.
void greedy_and_beam_on_five(Tutorial& t, const Lesson& lesson) {
    const tasks::Vocab& tv = lesson.model.tgt_vocab;
    const int64_t bos = tv.to_index("<bos>"), eos = tv.to_index("<eos>");
    std::vector<std::string> sentences = {lesson.walk.sentence.empty() ? kFallbackWalkSentence : lesson.walk.sentence};
    for (const auto& [eng, fra] : kSeedSentences) sentences.push_back(eng);
    bool beam1_same = true, score_same = true;
    double worst_recomputed = 0;
    note({.en = "\nScores are log p / length (higher is better):", .zh = "\n得分是 log p / 长度（越高越好）："});
    for (const std::string& sentence : sentences) {
        const Source s = encode_source(sentence, lesson.model.src_vocab, lesson.model.num_steps);
        const tasks::DecodeOptions o{.bos = bos, .eos = eos, .max_steps = lesson.model.num_steps};
        const tasks::Decoded greedy = tasks::greedy_decode(*lesson.model.net, s.src, s.lens, o).front();
        tasks::DecodeOptions o1 = o, o4 = o;
        o1.beam = 1;
        o4.beam = 4;
        const tasks::Decoded beam1 = tasks::beam_decode(*lesson.model.net, s.src, s.lens, o1);
        const tasks::Decoded beam4 = tasks::beam_decode(*lesson.model.net, s.src, s.lens, o4);
        const double len1 = scored_length(beam1, lesson.model.num_steps);
        beam1_same = beam1_same && beam1.tokens == greedy.tokens;
        score_same = score_same && std::abs(beam1.score * len1 - greedy.score) < 1e-4;
        // recompute the beam's score with one teacher-forced pass (no cache)
        // a hypothesis that ran out of steps has no <eos>, in log p or in its length
        const double logp4 =
            sequence_logp(*lesson.model.net, s, beam4.tokens, bos, eos, ended(beam4, lesson.model.num_steps));
        worst_recomputed =
            std::max(worst_recomputed, std::abs(logp4 / scored_length(beam4, lesson.model.num_steps) - beam4.score));
        line({.en = "      {:<12} greedy: {:<22} {:>7.3f}   beam 4: {:<22} {:>7.3f}",
              .zh = "      {:<12} 贪心：{:<22} {:>7.3f}   束宽 4：{:<22} {:>7.3f}"},
             sentence, join(tv.to_tokens(greedy.tokens)), greedy.score / len1, join(tv.to_tokens(beam4.tokens)),
             beam4.score);
    }
    line();
    t.check(beam1_same, {.en = "beam 1 gives exactly greedy's tokens for all five sentences",
                         .zh = "对全部五个句子，束宽 1 给出的词元与贪心搜索完全相同"});
    t.check(score_same, {.en = "and greedy's log-probability (beam 1's score × length)",
                         .zh = "对数概率也与贪心搜索相同（束宽 1 的得分 × 长度）"});
    t.check(worst_recomputed < 1e-4,
            {.en = "each beam-4 score equals log p / length recomputed by a teacher-forced pass of the full "
                   "decoder, without the cache (largest difference {:.1e})",
             .zh = "束宽 4 的每个得分都等于用教师强制、不带缓存地把整个解码器跑一遍重新算出的 log p / 长度"
                   "（最大差 {:.1e}）"},
            worst_recomputed);
}

// The walk-through sentence's two correct translations (the participle's two genders), scored by teacher forcing.
void the_two_genders(const Lesson& lesson) {
    const tasks::Vocab& tv = lesson.model.tgt_vocab;
    const int64_t bos = tv.to_index("<bos>"), eos = tv.to_index("<eos>");
    const Source s = encode_source(lesson.walk.sentence.empty() ? kFallbackWalkSentence : lesson.walk.sentence,
                                   lesson.model.src_vocab, lesson.model.num_steps);
    note({.en = "The two correct translations of the walk-through sentence, scored by teacher forcing:",
          .zh = "示例句子的两个正确译文，用教师强制打分："});
    for (const std::string& ref : lesson.walk.sentence.empty() ? kFallbackWalkReferences : lesson.walk.references) {
        const std::vector<int64_t> ids = tv.to_indices(tasks::tokenize(ref));
        const double lp = sequence_logp(*lesson.model.net, s, ids, bos, eos);
        line("      P('{}' | '{}') = exp({:.4f}) = {:.4f}", ref, join(s.words), lp, std::exp(lp));
    }
    note({.en = "A beam cannot help here: both share 'je suis' and differ in one token, so the search only "
                "reads off which of the two the model prefers.",
          .zh = "束搜索在这里帮不上忙：两者共享 'je suis'，只差一个词元，所以搜索只是读出模型更偏爱哪一个。"});
}

// Greedy against beam 4 on every distinct English sentence of d2l's 601 pairs, with corpus BLEU-4.
void beam_on_the_601_pairs(Tutorial& t, const Lesson& lesson) {
    const tasks::Vocab& tv = lesson.model.tgt_vocab;
    const int64_t bos = tv.to_index("<bos>"), eos = tv.to_index("<eos>");
    // every distinct English sentence of the 601 pairs, with all its French translations
    std::vector<std::string> english;
    std::map<std::string, std::vector<TokenLine>> references;
    for (const auto& p : lesson.data->train.pairs) {
        if (!references.count(p.src)) english.push_back(p.src);
        references[p.src].push_back(tasks::tokenize(p.tgt));
    }
    std::vector<TokenLine> greedy_out, beam_out;
    std::vector<std::vector<TokenLine>> refs;
    std::vector<Phrase> changed;
    int64_t n_changed = 0, n_higher = 0;
    for (const std::string& sentence : english) {
        const Source s2 = encode_source(sentence, lesson.model.src_vocab, lesson.model.num_steps);
        const tasks::DecodeOptions o{.bos = bos, .eos = eos, .max_steps = lesson.model.num_steps, .beam = 4};
        const tasks::Decoded greedy = tasks::greedy_decode(*lesson.model.net, s2.src, s2.lens, o).front();
        const tasks::Decoded beam = tasks::beam_decode(*lesson.model.net, s2.src, s2.lens, o);
        greedy_out.push_back(tv.to_tokens(greedy.tokens));
        beam_out.push_back(tv.to_tokens(beam.tokens));
        refs.push_back(references[sentence]);
        if (beam.tokens == greedy.tokens) continue;
        const double greedy_score = greedy.score / scored_length(greedy, lesson.model.num_steps);
        ++n_changed;
        n_higher += beam.score > greedy_score;
        if (n_changed <= 4)
            changed.push_back(phrase({.en = "      {:<16} greedy: {:<24} {:>7.3f}   beam 4: {:<24} {:>7.3f}",
                                      .zh = "      {:<16} 贪心：{:<24} {:>7.3f}   束宽 4：{:<24} {:>7.3f}"},
                                     sentence, join(greedy_out.back()), greedy_score, join(beam_out.back()),
                                     beam.score));
    }
    const tasks::CorpusBleu greedy_bleu = tasks::corpus_bleu(greedy_out, refs, 4);
    const tasks::CorpusBleu beam_bleu = tasks::corpus_bleu(beam_out, refs, 4);
    note({.en = "\nOn all {} distinct English sentences of d2l's 601 pairs, beam 4 changes {} translations "
                "(the first ones below); its choice scores higher by log p / length in {} of them (beam search "
                "prunes, so it is not guaranteed to beat greedy).",
          .zh = "\n在 d2l 的 601 个句子对中全部 {} 个不同的英语句子上，束宽 4 改变了 {} 个译文（下面是前几个）；"
                "其中 {} 个按 log p / 长度得分更高（束搜索会剪枝，所以不保证胜过贪心搜索）。"},
         english.size(), n_changed, n_higher);
    for (const Phrase& p : changed) line(p);
    const Text fitted = lesson.model.on_d2l_pairs
                            ? Text{.en = " (the training data, so this measures how well the pairs were fitted)",
                                   .zh = "（这是训练数据，所以衡量的是这些句子对拟合得多好）"}
                            : Text{.en = "", .zh = ""};
    note({.en = "A higher score is what the model believes, not a better translation: a sequence that avoids one "
                "unlikely token (an <unk>, say) can outscore the right words.\n"
                "Corpus BLEU-4 against all the corpus's translations of each sentence{}: greedy {:.1f}, beam 4 "
                "{:.1f}.",
          .zh = "得分更高只说明模型更相信它，而不是译文更好：一个避开了某个不太可能的词元（比如 <unk>）的序列，"
                "得分可能超过正确的词。\n以语料中每个句子的全部译文为参考的语料级 BLEU-4{}：贪心 {:.1f}，"
                "束宽 4 {:.1f}。"},
         fitted.en.empty() ? Phrase{} : phrase(fitted), 100 * greedy_bleu.score, 100 * beam_bleu.score);
    t.check(static_cast<int64_t>(greedy_out.size()) == static_cast<int64_t>(english.size()),
            {.en = "decoded all {} sentences both ways", .zh = "全部 {} 个句子都用两种方式解码了"}, english.size());
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 预测 (predict_seq2seq), beside a beam search
void beam_search(Tutorial& t, const Lesson& lesson) {
    if (!lesson.model.net) fail<ValueError>("tutorial 13: there is no model (step 2 failed)");
    note({.en = "Greedy search commits to the best token at every step. Beam search keeps the K best partial "
                "translations by total log-probability, extends each by every token, and keeps the K best again; "
                "a hypothesis that ends with <eos> is scored log p / length^α (α = 1 here, the length counting "
                "<eos>) so that short ones are not favoured just for having fewer factors below 1. With K = 1 it "
                "is greedy search.",
          .zh = "贪心搜索在每个时间步都认定最好的那个词元。束搜索按总对数概率保留 K 个最好的部分译文，"
                "把每个都用每个词元延长一步，再保留最好的 K 个；以 <eos> 结束的假设按 log p / length^α 打分"
                "（这里 α = 1，长度把 <eos> 算在内），这样短的假设不会仅仅因为小于 1 的因子更少而占便宜。"
                "K = 1 时它就是贪心搜索。"});
    greedy_and_beam_on_five(t, lesson);
    the_two_genders(lesson);
    if (lesson.data) beam_on_the_601_pairs(t, lesson);
}

// d2l's bleu computed by hand, on the first imperfect translation long enough to have bigrams (else the first
// one that has them); results: (translation, reference) tokens of seed 000's four sentences.
void bleu_worked_by_hand(Tutorial& t, const std::vector<std::pair<TokenLine, TokenLine>>& results) {
    std::optional<size_t> pick;
    for (size_t i = 0; i < results.size(); ++i) {
        if (results[i].first.size() < 2) continue;
        if (!pick) pick = i;
        if (tasks::bleu(results[i].first, results[i].second, 2) < 1.0) {
            pick = i;
            break;
        }
    }
    if (pick) {
        const auto& [pred, label] = results[*pick];
        const BleuWorking w = bleu_by_hand(pred, label, 2);
        std::string factors = fmt::format("{:.4f}", w.brevity);
        note({.en = "By hand for '{}' => '{}' (reference '{}'):\n"
                    "    len_pred = {}, len_label = {}: brevity factor exp(min(0, 1 - {}/{})) = {:.4f}",
              .zh = "手算 '{}' => '{}'（参考译文 '{}'）：\n"
                    "    len_pred = {}，len_label = {}：长度惩罚因子 exp(min(0, 1 - {}/{})) = {:.4f}"},
             kSeedSentences[*pick].first, join(pred), join(label), w.len_pred, w.len_label, w.len_label, w.len_pred,
             w.brevity);
        for (int n = 1; n <= 2; ++n) {
            const double p_n = double(w.matches[n - 1]) / double(w.totals[n - 1]);
            note({.en = "    {}-grams matched {}/{}: p_{} = {:.4f}, weight 1/{}",
                  .zh = "    {}-gram 匹配 {}/{}：p_{} = {:.4f}，权重 1/{}"},
                 n, w.matches[n - 1], w.totals[n - 1], n, p_n, 1 << n);
            factors += fmt::format(" · {:.4f}^(1/{})", p_n, 1 << n);
        }
        note(both("    bleu = {} = {:.4f}"), factors, w.score);
        t.check_close(tasks::bleu(pred, label, 2), w.score, 1e-12,
                      {.en = "tasks::bleu gives the same number", .zh = "tasks::bleu 给出相同的数"});
    } else {
        note({.en = "No translation has two tokens, so there is no bigram to count; the examples below show the "
                    "computation instead.",
              .zh = "没有哪个译文有两个词元，所以没有二元组可数；下面的例子展示了计算过程。"});
    }
}

// Two BLEU scores to check on paper: one wrong word, and a translation two words short.
void bleu_on_paper(Tutorial& t) {
    note({.en = "\nTwo more with numbers to check on paper:", .zh = "\n再来两个，数字可以在纸上验算："});
    const double wrong_word = tasks::bleu("il est riche .", "il est calme .", 2);
    const double too_short = tasks::bleu("je suis .", "je suis chez moi .", 2);
    note({.en = "    'il est riche .' vs 'il est calme .': p_1 = 3/4, p_2 = 1/3 (only 'il est'), no brevity factor\n"
                "        bleu = (3/4)^(1/2) · (1/3)^(1/4) = {:.4f}\n"
                "    'je suis .' vs 'je suis chez moi .': p_1 = 3/3, p_2 = 1/2, brevity exp(1 - 5/3) = {:.4f}\n"
                "        bleu = {:.4f} · 1 · (1/2)^(1/4) = {:.4f}",
          .zh = "    'il est riche .' 对 'il est calme .'：p_1 = 3/4，p_2 = 1/3（只有 'il est'），没有长度惩罚\n"
                "        bleu = (3/4)^(1/2) · (1/3)^(1/4) = {:.4f}\n"
                "    'je suis .' 对 'je suis chez moi .'：p_1 = 3/3，p_2 = 1/2，长度惩罚 exp(1 - 5/3) = {:.4f}\n"
                "        bleu = {:.4f} · 1 · (1/2)^(1/4) = {:.4f}"},
         wrong_word, std::exp(1.0 - 5.0 / 3.0), std::exp(1.0 - 5.0 / 3.0), too_short);
    t.check_close(wrong_word, std::sqrt(0.75) * std::pow(1.0 / 3.0, 0.25), 1e-12,
                  {.en = "one wrong word of four: 0.6580", .zh = "四个词错一个：0.6580"});
    t.check_close(too_short, std::exp(1.0 - 5.0 / 3.0) * std::pow(0.5, 0.25), 1e-12,
                  {.en = "every word right but two missing: the brevity factor makes it 0.4317",
                   .zh = "每个词都对但少了两个：长度惩罚使它成为 0.4317"});
    t.check(tasks::bleu("je suis parti .", "je suis partie .", 2) == wrong_word,
            {.en = "BLEU does not know that 'parti' and 'partie' are both right: against one reference, either "
                   "scores like a wrong word",
             .zh = "BLEU 不知道 'parti' 和 'partie' 都对：只对照一个参考译文时，哪个都像错了一个词"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 预测 (d2l.bleu with k = 2 on four sentences)
void bleu(Tutorial& t, Lesson& lesson) {
    if (!lesson.model.net) fail<ValueError>("tutorial 13: there is no model (step 2 failed)");
    note({.en = "Seed 000 ends with predict_seq2seq on four sentences and d2l.bleu(translation, reference, k=2):\n"
                "    bleu = exp(min(0, 1 - len_label / len_pred)) · Π_{n=1..k} p_n^(1/2^n)\n"
                "p_n: the share of the prediction's n-grams found in the reference (each reference n-gram used at "
                "most as often as it occurs there). The first factor punishes a prediction shorter than the "
                "reference; the weights 1/2, 1/4 make long n-grams count less. Seed 000's printout, run here (the "
                "seed shows the code, not its output):",
          .zh = "种子文档 000 最后对四个句子运行 predict_seq2seq 和 d2l.bleu(translation, reference, k=2)：\n"
                "    bleu = exp(min(0, 1 - len_label / len_pred)) · Π_{n=1..k} p_n^(1/2^n)\n"
                "p_n：预测的 n-gram 中能在参考译文里找到的比例（参考译文的每个 n-gram 至多用它出现的次数）。"
                "第一个因子惩罚比参考译文短的预测；权重 1/2、1/4 让长的 n-gram 算得少些。种子文档 000 的打印，"
                "在这里运行（种子文档只给出代码，没有它的输出）："});
    std::vector<std::pair<TokenLine, TokenLine>> results;
    for (const auto& [eng, fra] : kSeedSentences) {
        const tasks::Translation tr =
            tasks::translate(*lesson.model.net, lesson.model.src_vocab, lesson.model.tgt_vocab, eng,
                             lesson.model.num_steps, {.max_steps = lesson.model.num_steps});
        const double b = tasks::bleu(tr.text, fra, 2);
        line("      {} => {},  bleu {:.3f}", eng, tr.text, b);
        results.emplace_back(tasks::tokenize(tr.text), tasks::tokenize(fra));
    }
    line();
    int perfect = 0;
    bool by_hand = true;
    for (size_t i = 0; i < results.size(); ++i) {
        const double b = tasks::bleu(results[i].first, results[i].second, 2);
        perfect += b == 1.0;
        if (!results[i].first.empty())
            by_hand = by_hand && std::abs(b - bleu_by_hand(results[i].first, results[i].second, 2).score) < 1e-12;
    }
    t.check(by_hand, {.en = "each printed BLEU equals d2l's formula computed by hand (below) on that translation",
                      .zh = "打印出的每个 BLEU 都等于对那个译文手算 d2l 公式的结果（见下）"});
    if (t.literal() && lesson.model.trained_here)
        t.check(perfect >= 3,
                {.en = "--literal: {} of the 4 sentences at BLEU 1.000 (the run printed in d2l's book has 4; this "
                       "recipe with seed 1 measured 4 of 4, other seeds 2-4)",
                 .zh = "--literal：4 个句子中有 {} 个 BLEU 为 1.000（d2l 书中打印的运行是 4 个；这个配方用种子 1 "
                       "测得 4 个中 4 个，其他种子 2-4 个）"},
                perfect);
    else
        note({.en = "{} of the 4 at BLEU 1.000 (checked with --literal, which trains seed 000's full recipe).",
              .zh = "4 个中有 {} 个 BLEU 为 1.000（用 --literal 检查，它训练种子文档 000 的完整配方）。"},
             perfect);
    if (lesson.data && lesson.model.on_d2l_pairs) {
        bool seen = false;
        for (const auto& p : lesson.data->train.pairs) seen = seen || p.src == "he's calm .";
        if (!seen)
            note({.en = "'he's calm .' is not one of the 601 training pairs (they have 'i'm calm .' and 'be calm .'): "
                        "it tests whether the model combines 'he's' → 'il est' with 'calm' → 'calme'. The run d2l's "
                        "book prints for this code (200 epochs, dropout 0.1) gets it right; a short fit without "
                        "dropout often does not.\n",
                  .zh = "'he's calm .' 不在 601 个训练句子对里（有的是 'i'm calm .' 和 'be calm .'）："
                        "它检验模型能否把 'he's' → 'il est' 和 'calm' → 'calme' 组合起来。d2l 书中为这段代码打印的"
                        "运行结果（200 个迭代周期，dropout 0.1）译对了；不带 dropout 的短训练常常译不对。\n"});
    }
    bleu_worked_by_hand(t, results);
    bleu_on_paper(t);
}

// tasks::plot_attention, the pictures `tformer train translate` draws, for the walk-through sentence.
void plot_attention_of_translate(Tutorial& t, const Lesson& lesson) {
    note({.en = "\ntasks::plot_attention draws the same three pictures for a tasks::translate result (the "
                "pictures `tformer train translate` writes; it draws the decoder's last block only):",
          .zh = "\ntasks::plot_attention 为 tasks::translate 的结果画同样的三张图（即 `tformer train translate` "
                "写出的图；它只画解码器的最后一个块）："});
    const tasks::Translation tr =
        tasks::translate(*lesson.model.net, lesson.model.src_vocab, lesson.model.tgt_vocab, lesson.walk.sentence,
                         lesson.model.num_steps, {.max_steps = lesson.model.num_steps, .keep_attention = true});
    const std::vector<std::string> pictures =
        tasks::plot_attention(t.out_dir().string(), "plot_attention", *lesson.model.net, tr);
    for (const std::string& picture : pictures) line("      {}", picture);
    t.check(pictures.size() == 3 && tr.tokens == std::vector<std::string>(lesson.walk.produced.begin(),
                                                                          lesson.walk.produced.end() -
                                                                              (lesson.walk.produced.back() == "<eos>")),
            {.en = "plot_attention drew three pictures of the same translation as step 3's",
             .zh = "plot_attention 为与第 3 步相同的译文画了三张图"});
    double worst = 0;
    for (size_t i = 0; i < tr.decoded.cross_attention.size() && i < lesson.walk.cross.back().size(); ++i)
        worst =
            std::max(worst, c::max(c::abs(c::sub(tr.decoded.cross_attention[i], lesson.walk.cross.back()[i]))).item());
    t.check(tr.decoded.cross_attention.size() == lesson.walk.cross.back().size() && worst < 1e-6,
            {.en = "and its cross-attention rows are step 3's, row for row", .zh = "它的交叉注意力逐行就是第 3 步的"});
    note({.en = "Like decoder_self_attention.png above, its decoder self-attention picture labels the rows with "
                "the tokens produced and the key columns with the tokens fed: <bos>, then the tokens so far.",
          .zh = "和上面的 decoder_self_attention.png 一样，它的解码器自注意力图用生成的词元标注行，用输入的词元标注"
                "键所在的列：<bos>，然后是到目前为止的词元。"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 预测 (d2l's show_heatmaps of the attention weights)
void attention_heatmaps(Tutorial& t, Lesson& lesson) {
    if (lesson.walk.encoder.empty() || lesson.walk.cross.empty())
        fail<ValueError>("tutorial 13: step 3 did not run to the end");
    const Source& s = lesson.walk.source;
    const int64_t H = lesson.model.net->encoder->options.num_heads, V = s.valid;
    const auto steps = static_cast<int64_t>(lesson.walk.produced.size());
    const size_t enc_blocks = lesson.walk.encoder.size(), dec_blocks = lesson.walk.cross.size();
    std::vector<std::string> src_tokens =
        lesson.model.src_vocab.to_tokens(std::vector<int64_t>(s.ids.begin(), s.ids.begin() + V));
    const std::vector<std::string> head_titles = tutorial::head_titles(H);
    note({.en = "d2l's show_heatmaps for the sentence of step 3, one panel per (block, head), rows = queries, "
                "columns = keys; as in d2l only the {} valid source tokens are drawn.",
          .zh = "对第 3 步的句子画 d2l 的 show_heatmaps，每个（块，头）一个面板，行 = 查询，列 = 键；"
                "和 d2l 一样，只画 {} 个有效的源词元。"},
         V);
    const Panels enc = encoder_panels(lesson.walk, H, V);
    const DecoderPanels dec = decoder_panels(lesson.walk, H, V, lesson.model.num_steps);
    // the tokens fed at the `steps` steps (a translation that ran out of steps without <eos>
    // has fed one more token than it has rows)
    const std::vector<std::string> fed(lesson.walk.fed.begin(), lesson.walk.fed.begin() + steps);
    const auto enc_png = t.out_path("encoder_self_attention.png");
    const auto self_png = t.out_path("decoder_self_attention.png");
    const auto cross_png = t.out_path("decoder_cross_attention.png");
    const tasks::HeatmapLayout enc_layout = tasks::plot_heatmaps(
        enc_png, {.matrices = enc.grid,
                  .xlabel = "Keys (source tokens)",
                  .ylabel = "Queries",
                  .titles = head_titles,
                  .title = fmt::format("encoder self-attention, '{}' (rows: blocks)", join(s.words)),
                  .x_ticks = src_tokens,
                  .y_ticks = src_tokens});
    const tasks::HeatmapLayout self_layout =
        tasks::plot_heatmaps(self_png, {.matrices = dec.self.grid,
                                        .xlabel = "Keys (tokens fed)",
                                        .ylabel = "Queries (token fed)",
                                        .titles = head_titles,
                                        .title = "decoder self-attention (rows: blocks)",
                                        .x_ticks = fed,
                                        .y_ticks = fed});
    const tasks::HeatmapLayout cross_layout =
        tasks::plot_heatmaps(cross_png, {.matrices = dec.cross.grid,
                                         .xlabel = "Keys (source tokens)",
                                         .ylabel = "Queries (token produced)",
                                         .titles = head_titles,
                                         .title = "encoder-decoder attention (rows: blocks)",
                                         .x_ticks = src_tokens,
                                         .y_ticks = lesson.walk.produced});
    note({.en = "Wrote\n"
                "    {}  {} × {} panels of {} × {}\n"
                "    {}  {} × {} panels of {} × {}\n"
                "    {}  {} × {} panels of {} × {}",
          .zh = "已写出\n"
                "    {}  {} × {} 个面板，每个 {} × {}\n"
                "    {}  {} × {} 个面板，每个 {} × {}\n"
                "    {}  {} × {} 个面板，每个 {} × {}"},
         enc_png.string(), enc_layout.rows, enc_layout.cols, enc_layout.queries, enc_layout.keys, self_png.string(),
         self_layout.rows, self_layout.cols, self_layout.queries, self_layout.keys, cross_png.string(),
         cross_layout.rows, cross_layout.cols, cross_layout.queries, cross_layout.keys);
    t.check(enc_layout.rows == static_cast<int>(enc_blocks) && enc_layout.cols == H && enc_layout.queries == V &&
                enc_layout.keys == V,
            {.en = "encoder: {} blocks × {} heads of {} × {}", .zh = "编码器：{} 个块 × {} 个头，每个 {} × {}"},
            enc_blocks, H, V, V);
    t.check(self_layout.rows == static_cast<int>(dec_blocks) && self_layout.queries == steps &&
                self_layout.keys == steps && cross_layout.queries == steps && cross_layout.keys == V,
            {.en = "decoder: {} blocks × {} heads; self {} × {} (one row per step), cross {} × {}",
             .zh = "解码器：{} 个块 × {} 个头；自注意力 {} × {}（每步一行），交叉注意力 {} × {}"},
            dec_blocks, H, steps, steps, steps, V);
    t.check(enc.worst_sum < 1e-5 && enc.worst_pad == 0,
            {.en = "encoder: every valid query's row sums to 1 over the valid tokens; the padded keys get exactly 0",
             .zh = "编码器：每个有效查询的行在有效词元上之和为 1；填充的键恰好得到 0"});
    t.check(dec.cross.worst_sum < 1e-5 && dec.cross.worst_pad == 0,
            {.en = "cross-attention: every row sums to 1 over the valid source tokens; the padding gets exactly 0",
             .zh = "交叉注意力：每一行在有效的源词元上之和为 1；填充恰好得到 0"});
    t.check(dec.self.worst_sum < 1e-5,
            {.en = "decoder self-attention: step t's row sums to 1 over the t tokens fed so far",
             .zh = "解码器自注意力：第 t 步的行在到目前为止输入的 t 个词元上之和为 1"});
    plot_attention_of_translate(t, lesson);
}

// ---- the exercise (--exercise): tutorials/13_translation/exercise.cpp ----------------------

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 训练 (d2l's preprocess_nmt), written by the reader
void exercise_preprocess_nmt(Tutorial& t, const Lesson& lesson) {
    note({.en = "Write exercise::preprocess_nmt. The checks compare it with tasks::preprocess_nmt on hand-picked "
                "lines and on the first 2,000 lines of the corpus.",
          .zh = "写出 exercise::preprocess_nmt。检查在挑选出的几行和语料的前 2,000 行上把它与 tasks::preprocess_nmt "
                "比较。"});
    const std::vector<std::string> cases = {"Go.\tVa !",
                                            "Wow!\tÇa alors\u202F!",
                                            "Who fell?\tQui est tombé\u00A0?",
                                            "I'm home.\tJe suis chez moi.",
                                            "Hi, Tom!\tSalut, Tom !",
                                            "Stop...\tArrête...",
                                            " ! ,"};
    for (const std::string& line : cases)
        t.check(exercise::preprocess_nmt(line) == tasks::preprocess_nmt(line), both("'{}' → '{}'"), visible(line),
                visible(tasks::preprocess_nmt(line)));
    std::ifstream in(lesson.corpus);
    std::string line;
    int total = 0, same = 0;
    while (total < 2000 && std::getline(in, line)) {
        ++total;
        same += exercise::preprocess_nmt(line) == tasks::preprocess_nmt(line);
    }
    t.check(total == 2000 && same == total,
            {.en = "{} of the corpus's first {} lines agree", .zh = "语料的前 {1} 行中有 {0} 行一致"}, same, total);
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "tformer tutorial 13 · English→French: data, training, greedy and beam search, "
                                "BLEU, heatmaps",
                          .zh = "tformer 教程 13 · 英译法：数据、训练、贪心搜索与束搜索、BLEU、热力图"},
                .follows = {.en = "seed 000 训练, 预测 (BLEU), 信息传递, 总结; seed 003 'I arrived at the' → 'Je "
                                  "suis arrivé' 的全过程 (1. 输入处理 … 4. 生成翻译)",
                            .zh = "种子文档 000 训练、预测（BLEU）、信息传递、总结；种子文档 003 'I arrived at the' → "
                                  "'Je suis arrivé' 的全过程（1. 输入处理 … 4. 生成翻译）"},
                .exercise = {.en = "write d2l's preprocess_nmt (the no-break spaces, lowercasing, a space before "
                                   "punctuation) (tutorials/13_translation/exercise.cpp)",
                             .zh = "写出 d2l 的 preprocess_nmt（不换行空格、转小写、标点前加空格）"
                                   "（tutorials/13_translation/exercise.cpp）"},
                .literal = {.en = "train seed 000's cell exactly as written (200 epochs of d2l's 601 pairs, "
                                  "dropout 0.1, lr 0.005, 2,000 steps) and check what its prediction cell prints",
                            .zh = "完全按种子文档 000 的训练单元原样训练（在 d2l 的 601 个句子对上 200 个迭代周期，"
                                  "dropout 0.1，lr 0.005，2,000 步），并检查它的预测单元打印的结果"},
                .options = {
                    {.name = "--checkpoint",
                     .value = "FILE",
                     .help = {.en = "use a model written by `tformer train translate` instead of training a "
                                    "small one here",
                              .zh = "使用 `tformer train translate` 写出的模型，而不是在这里训练一个小模型"}},
                    {.name = "--data",
                     .value = "FILE",
                     .help = {.en = "the corpus fra.txt (default: data/fra-eng/fra.txt, looked for from the "
                                    "program's folder and the working folder upwards)",
                              .zh = "语料 fra.txt（默认：data/fra-eng/fra.txt，从程序所在目录和工作目录向上查找）"}}}});
    Lesson lesson;
    lesson.checkpoint = t.option("--checkpoint");
    // One thread unless OMP_NUM_THREADS says otherwise: this model's tensors
    // (batches of 64 × 10 × 32) are too small for a second thread to pay for
    // itself, and on a shared machine OpenMP's spinning threads make the run
    // many times slower (measured: 3 s with one thread, 19-75 s with two).
    lesson.threads_given = std::getenv("OMP_NUM_THREADS") != nullptr;
    if (!lesson.threads_given) c::set_num_threads(1);
    try {
        lesson.corpus = tutorial::find_corpus(t.option("--data")).string();
    } catch (const std::exception& e) {
        fmt::print(stderr, "tutorial 13: {}\n", e.what());
        return 2;
    }
    t.step({.en = "1. The corpus, d2l's preprocessing, vocabularies and padding",
            .zh = "1. 语料、d2l 的预处理、词表与填充"},
           [&] { corpus_and_vocabularies(t, lesson); });
    t.step({.en = "2. The model: loaded or trained here", .zh = "2. 模型：加载，或在这里训练"},
           [&] { the_model(t, lesson); });
    t.step({.en = "3. Seed 003's walk-through, one token at a time", .zh = "3. 种子文档 003 的全过程，一次一个词元"},
           [&] { walk_through(t, lesson); });
    t.step({.en = "4. Beam search", .zh = "4. 束搜索"}, [&] { beam_search(t, lesson); });
    t.step({.en = "5. BLEU", .zh = "5. BLEU"}, [&] { bleu(t, lesson); });
    t.step({.en = "6. Attention heatmaps", .zh = "6. 注意力热力图"}, [&] { attention_heatmaps(t, lesson); });
    t.exercise({.en = "Exercise. d2l's preprocess_nmt", .zh = "练习. d2l 的 preprocess_nmt"},
               [&] { exercise_preprocess_nmt(t, lesson); });
    if (!t.exercise_mode()) {
        if (lesson.model.how.empty())
            note({.en = "\nNo model was available.", .zh = "\n没有可用的模型。"});
        else  // Model::how holds a time: printed, but left out of --no-prose
            note(Phrase{phrase({.en = "\nModel used: {}", .zh = "\n所用的模型：{}"}, lesson.model.how).text, {}});
    }
    return t.finish();
}
