// Tutorial 14 · An encoder-only Transformer sentence classifier: is this
// sentence English or French?
//
// Follows seed 001 (001_57ca8c5b7ec56526.txt), 核心代码: embedded_words +
// _position_embedding(), the blocks of _multihead_attention (key and query
// masks, residual, _layer_normalization) and _feed_forward (conv1d with
// kernel 1), the flatten to [-1, sequence_length · embedding_size], dropout,
// the "output" layer (xavier_initializer, bias 0.1) and
// loss = cal_loss() + l2_reg_lambda · l2_loss. The data are the d2l fra-eng
// corpus of seed 000, read and tokenised as there (tasks/fra_eng.hpp, tasks/text.hpp).
// Library: nn::TransformerClassifier (nn/classifier.hpp).
// Read it with tutorials/14_text_classifier/README.md.
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
// tutorial-languages: en zh
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "exercise.hpp"
#include "nn/classifier.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/plot.hpp"
#include "tasks/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Pooling = nn::TransformerClassifier::Pooling;

namespace {

constexpr int64_t kEnglish = 0, kFrench = 1;
const char* language(int64_t label) { return label == kEnglish ? "English" : "French"; }

// The hyperparameters. Seed 001 reads them from self.config without printing
// the values; these are small ones that train in seconds.
constexpr int64_t kMaxLen = 10;   // sequence_length (d2l's num_steps for this corpus, seed 000)
constexpr int64_t kHiddens = 32;  // embedding_size
constexpr int64_t kFilters = 64;  // filters: the FFN's inner width
constexpr int64_t kHeads = 4;     // num_heads
constexpr int64_t kBlocks = 1;    // num_blocks
constexpr double kDropout = 0.1;  // 1 - keep_prob
constexpr double kLambda = 1e-3;  // l2_reg_lambda
constexpr int64_t kBatch = 64;
constexpr int64_t kSteps = 300;
constexpr double kLr = 2e-3;

// One labelled sentence: d2l-preprocessed text, its tokens, 0 = English, 1 = French.
struct Sentence {
    std::string text;
    tasks::TokenLine tokens;
    int64_t label = 0;
};

// A split as the arrays the classifier reads.
struct Split {
    std::vector<Sentence> rows;
    c::Tensor X;           // (N, T) int64 token ids, padded with <pad>
    c::Tensor valid_lens;  // (N) int64
    c::Tensor labels;      // (N) int64
};

// Every sentence padded or truncated to `max_len` ids (d2l's truncate_pad,
// without the <eos> that translation needs); valid length = real tokens kept.
Split encode(std::vector<Sentence> rows, const tasks::Vocab& vocab, int64_t max_len) {
    const int64_t pad = vocab.to_index("<pad>");
    std::vector<int64_t> ids, lens, labels;
    for (const Sentence& s : rows) {
        const std::vector<int64_t> line = tasks::truncate_pad(vocab.to_indices(s.tokens), max_len, pad);
        ids.insert(ids.end(), line.begin(), line.end());
        lens.push_back(std::min<int64_t>(static_cast<int64_t>(s.tokens.size()), max_len));
        labels.push_back(s.label);
    }
    const auto N = static_cast<int64_t>(rows.size());
    return {std::move(rows), c::from_vector(ids, {N, max_len}), c::from_vector(lens, {N}), c::from_vector(labels, {N})};
}

// A sentence typed by hand, preprocessed and tokenised like the corpus.
Sentence sentence(std::string_view raw, int64_t label) {
    const std::string text = tasks::preprocess_nmt(raw);
    return {text, tasks::tokenize(text), label};
}

// Rows `index` of a split, as one batch.
struct Batch {
    c::Tensor X, valid_lens, labels;
};
Batch rows_of(const Split& s, const std::vector<int64_t>& index) {
    const c::Tensor i = c::from_vector(index, {static_cast<int64_t>(index.size())});
    return {c::index_select(s.X, 0, i), c::index_select(s.valid_lens, 0, i), c::index_select(s.labels, 0, i)};
}

// P(French) of every row, in evaluation mode (no dropout) and without a graph.
// Leaves the model in evaluation mode.
std::vector<double> prob_french(nn::TransformerClassifier& model, const c::Tensor& X, const c::Tensor& valid_lens) {
    ag::NoGradGuard no_grad;
    model.eval();
    const c::Tensor p = c::softmax(model(X, valid_lens).value());  // (N, 2)
    return p.select(1, kFrench).to_vector();
}

double accuracy(const std::vector<double>& p_french, const c::Tensor& labels) {
    const auto y = labels.to_vector<int64_t>();
    int64_t right = 0;
    for (size_t i = 0; i < y.size(); ++i) right += (p_french[i] > 0.5) == (y[i] == kFrench);
    return static_cast<double>(right) / static_cast<double>(y.size());
}

// The tokens of row r of a split as the model sees them, "<unk>" included:
// the first `valid_lens[r]` ids, or all of them (the padding too) with `all`.
std::string ids_to_text(const tasks::Vocab& vocab, const Split& s, int64_t r, bool all = false) {
    const int64_t n = all ? s.X.size(1) : static_cast<int64_t>(s.valid_lens.at({r}));
    return fmt::format("{}", fmt::join(vocab.to_tokens(s.X.select(0, r).slice(0, 0, n).to_vector<int64_t>()), " "));
}

// Seed 001's _position_embedding, written out in double:
//   angle[pos, i] = pos / 10000^((i - i % 2) / embedding_size)
//   then sin on the even columns (0::2) and cos on the odd ones (1::2).
c::Tensor seed001_position_embedding(int64_t sequence_length, int64_t embedding_size) {
    c::Tensor P = c::zeros({sequence_length, embedding_size}, DType::float64);
    for (int64_t pos = 0; pos < sequence_length; ++pos)
        for (int64_t i = 0; i < embedding_size; ++i) {
            const double angle = pos / std::pow(10000.0, double(i - i % 2) / embedding_size);
            P.set({pos, i}, i % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    return P;
}

// Training as seed 001's train_op: Adam on loss = CE + λ·l2, shuffled
// mini-batches of the training split, a fresh shuffle each epoch.
struct Curve {
    std::vector<double> step, total, ce, l2;  // per step: loss, its cross-entropy part, λ·l2_loss
};
Curve train(nn::TransformerClassifier& model, const Split& train_split, c::Generator& gen, bool verbose) {
    optim::Adam opt(model.named_parameters(), {.lr = kLr});
    const auto N = static_cast<int64_t>(train_split.rows.size());
    std::vector<int64_t> order(static_cast<size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    int64_t cursor = N;  // start with a shuffle
    Curve curve;
    double window_loss = 0, window_ce = 0, window_right = 0, window_rows = 0;
    model.train();
    for (int64_t step = 1; step <= kSteps; ++step) {
        if (cursor + kBatch > N) {  // Fisher-Yates shuffle with the tutorial's generator
            for (int64_t i = N - 1; i > 0; --i) std::swap(order[i], order[gen.randint(i + 1)]);
            cursor = 0;
        }
        const Batch b = rows_of(train_split, {order.begin() + cursor, order.begin() + cursor + kBatch});
        cursor += kBatch;
        const Variable logits = model(b.X, b.valid_lens);
        const Variable ce = ag::cross_entropy(logits, b.labels);
        const Variable loss = model.loss(logits, b.labels, kLambda);  // ce + λ·l2
        opt.zero_grad();
        loss.backward();
        opt.step();
        curve.step.push_back(static_cast<double>(step));
        curve.total.push_back(loss.value().item());
        curve.ce.push_back(ce.value().item());
        curve.l2.push_back(curve.total.back() - curve.ce.back());
        window_loss += curve.total.back();
        window_ce += curve.ce.back();
        window_right += c::sum(c::eq(c::argmax(logits.value(), 1), b.labels).to(DType::float32)).item();
        window_rows += static_cast<double>(kBatch);
        if (verbose && step % 50 == 0) {
            line({.en =
                      "      step {:>3}/{}  loss {:.4f} = cross-entropy {:.4f} + λ·l2 {:.5f}   batch accuracy {:5.1f}%",
                  .zh = "      第 {:>3}/{} 步  损失 {:.4f} = 交叉熵 {:.4f} + λ·l2 {:.5f}   批量准确率 {:5.1f}%"},
                 step, kSteps, window_loss / 50, window_ce / 50, curve.l2.back(), 100 * window_right / window_rows);
            window_loss = window_ce = window_right = window_rows = 0;
        }
    }
    model.eval();
    return curve;
}

// Seed 001's tf.concat(tf.split(y, H, axis=-1), axis=0): (B, T, H·d) -> (H·B, T, d), head h of
// sequence b in row h·B + b.
c::Tensor heads_first(const c::Tensor& y, int64_t H) {
    const int64_t d = y.size(2) / H;
    std::vector<c::Tensor> parts;
    for (int64_t h = 0; h < H; ++h) parts.push_back(y.slice(2, h * d, (h + 1) * d));
    return c::concat(parts, 0);  // (H·B, T, d)
}

// The end of seed 001's _multihead_attention for weights w (H·B, T, T): outputs = w V_, the heads put back
// side by side (tf.concat(tf.split(outputs, H, axis=0), axis=2)), outputs += queries Q (B, T, D), then
// _layer_normalization. Returns the block's output before and after the layer norm, both (B, T, D).
std::pair<c::Tensor, c::Tensor> seed001_block_output(const c::Tensor& w, const c::Tensor& V_, const c::Tensor& Q,
                                                     int64_t H) {
    const int64_t B = Q.size(0);
    const c::Tensor o = c::matmul(w, V_);  // (H·B, T, d)
    std::vector<c::Tensor> parts;
    for (int64_t h = 0; h < H; ++h) parts.push_back(o.slice(0, h * B, (h + 1) * B));
    const c::Tensor merged = c::add(c::concat(parts, 2), Q);  // (B, T, D), += queries
    const c::Tensor mean = c::mean(merged, {2}, true);
    const c::Tensor var = c::var(merged, {2}, false, true);  // tf.nn.moments: biased
    return {merged, c::div(c::sub(merged, mean), c::sqrt(c::add(var, 1e-8)))};
}

// The labelled sentences of step 1: each training pair gives an English and a French sentence, and so
// does each test pair, less the sentences that also occur in training or twice in the test.
struct Sentences {
    std::vector<Sentence> train, test;
    std::set<std::string> seen;  // every training sentence, in either language
    int64_t dropped = 0;         // test sentences left out
};
Sentences labelled_sentences(const tasks::FraEngData& data) {
    Sentences out;
    for (const auto& p : data.train.pairs)
        for (auto [text, label] : {std::pair{p.src, kEnglish}, std::pair{p.tgt, kFrench}}) {
            out.train.push_back({text, tasks::tokenize(text), label});
            out.seen.insert(text);
        }
    std::set<std::string> in_test;
    for (const auto& p : data.val.pairs)
        for (auto [text, label] : {std::pair{p.src, kEnglish}, std::pair{p.tgt, kFrench}}) {
            // Two English sentences can share a French translation ("Hi." and "Hello!" are both "Salut !"),
            // so a French test sentence may also be a training sentence: drop those, and repeats.
            if (out.seen.count(text) || !in_test.insert(text).second) {
                ++out.dropped;
                continue;
            }
            out.test.push_back({text, tasks::tokenize(text), label});
        }
    return out;
}

// The classifier of this tutorial: seed 001's encoder with the sizes above, and `pooling`.
nn::TransformerClassifier::Options classifier_options(const tasks::Vocab& vocab, Pooling pooling) {
    return {.vocab_size = vocab.size(),
            .num_classes = 2,
            .max_len = kMaxLen,
            .num_hiddens = kHiddens,
            .ffn_num_hiddens = kFilters,
            .num_heads = kHeads,
            .num_layers = kBlocks,
            .dropout = kDropout,
            .pooling = pooling};
}

// What the steps share: the generators, the vocabulary and the two splits of step 1, the classifier
// built in step 3 and trained in step 5, and its training curve.
struct Lesson {
    c::Generator gen{14};         // the probe model of step 2, training batches
    c::Generator model_gen{140};  // the classifier's weights and its dropout masks: the model keeps
                                  // a pointer to it, so it must live as long as the model
    tasks::Vocab vocab;
    Split train_split, test_split;
    std::unique_ptr<nn::TransformerClassifier> model;
    Curve curve;
    std::array<double, 2> unk_rate{};  // % of training tokens that are <unk>, English and French
};

// ---- the steps --------------------------------------------------------------------------

// One vocabulary for both languages, built on the training sentences only, and what the two sides share.
void one_vocabulary(Lesson& lesson, const std::vector<Sentence>& train_rows) {
    // One vocabulary for both languages, built on the training sentences only (d2l's Vocab,
    // min_freq 2): "<unk>" at 0, then "<pad>", then the tokens by frequency.
    tasks::TokenLines lines;
    for (const Sentence& s : train_rows) lines.push_back(s.tokens);
    lesson.vocab = tasks::Vocab(lines, 2, {"<pad>"});
    std::set<std::string> english_words, french_words;
    for (const Sentence& s : train_rows)
        for (const auto& w : s.tokens)
            if (lesson.vocab.contains(w)) (s.label == kEnglish ? english_words : french_words).insert(w);
    std::vector<std::string> shared;  // in vocabulary order, so the most frequent first
    for (const auto& w : lesson.vocab.tokens())
        if (english_words.count(w) && french_words.count(w)) shared.push_back(w);
    note({.en = "The vocabulary has {} tokens; the 12 most frequent: {}. {} of them occur on both sides, for "
                "example: {}. A word seen fewer than 2 times in training becomes <unk> (index 0), in training and "
                "in the test alike.",
          .zh = "词表有 {} 个词元；最常见的 12 个：{}。其中 {} 个在两种语言里都出现，例如：{}。"
                "训练中出现少于 2 次的词变成 <unk>（编号 0），训练和测试都一样。"},
         lesson.vocab.size(),
         fmt::format("{}", fmt::join(std::vector<std::string>(lesson.vocab.tokens().begin(),
                                                              lesson.vocab.tokens().begin() + 12),
                                     " ")),
         shared.size(),
         fmt::format("{}", fmt::join(std::vector<std::string>(shared.begin(),
                                                              shared.begin() + std::min<size_t>(12, shared.size())),
                                     " ")));
}

// The first rows of the training split as ids and tokens, and the tokens that hide a thin space.
void first_training_rows(const Lesson& lesson) {
    note({.en = "Every sentence is cut or padded with <pad> (index {}) to sequence_length = {} ids; its valid length "
                "counts the real ones. (Seed 001 never prints its sequence_length; we take seed 000's num_steps "
                "for this corpus.) The first rows of the training split:",
          .zh = "每个句子都截断或用 <pad>（编号 {}）填充到 sequence_length = {} 个编号；有效长度只数真实的词元。"
                "（种子文档 001 从未打印它的 sequence_length；我们取种子文档 000 对这个语料用的 num_steps。）"
                "训练集的前几行："},
         lesson.vocab.to_index("<pad>"), kMaxLen);
    for (int64_t r = 0; r < 6; ++r) {
        const Sentence& s = lesson.train_split.rows[static_cast<size_t>(r)];
        line("      {} {:<8} valid {:>2}  \"{}\"", lesson.train_split.labels.at({r}) == kFrench ? 1 : 0,
             language(s.label), static_cast<int64_t>(lesson.train_split.valid_lens.at({r})), s.text);
        line("        ids {}\n        =   {}", fmt::join(lesson.train_split.X.select(0, r).to_vector<int64_t>(), " "),
             ids_to_text(lesson.vocab, lesson.train_split, r, true));
    }
    line();
    int64_t thin = 0;  // tokens holding U+2009 THIN SPACE (UTF-8 E2 80 89)
    std::set<std::string> thin_words;
    for (const Sentence& s : lesson.train_split.rows)
        for (const auto& w : s.tokens)
            if (w.find("\xE2\x80\x89") != std::string::npos) ++thin, thin_words.insert(w);
    if (thin > 0)
        note({.en = "A token may hide a character: {} training tokens ({} distinct) hold U+2009 THIN SPACE, which "
                    "French typography puts before ! and ?, and which d2l's preprocess_nmt leaves as it is (it only "
                    "replaces U+202F and U+00A0). So \"retire-toi\" followed by a thin space is one token, different "
                    "from \"retire-toi\"; {} of these tokens made it into the vocabulary.",
              .zh = "一个词元里可能藏着一个字符：有 {} 个训练词元（{} 个不同的）含有 U+2009 THIN SPACE，"
                    "法语排版把它放在 ! 和 ? 前面，而 d2l 的 preprocess_nmt 不处理它（只替换 U+202F 和 U+00A0）。"
                    "所以“retire-toi”后面跟一个细空格是一个词元，与“retire-toi”不同；这样的词元有 {} 个进了词表。"},
             thin, thin_words.size(), std::count_if(thin_words.begin(), thin_words.end(), [&](const std::string& w) {
                 return lesson.vocab.contains(w);
             }));
    show("train X[:4]", lesson.train_split.X.slice(0, 0, 4));
    show("train valid_lens[:4]", lesson.train_split.valid_lens.slice(0, 0, 4));
    show("train labels[:4]", lesson.train_split.labels.slice(0, 0, 4));
}

// What the numbers say about the splits (`seen`: every training sentence); sets lesson.unk_rate.
void what_the_splits_hold(Tutorial& t, Lesson& lesson, const std::set<std::string>& seen) {
    const auto lens = lesson.train_split.valid_lens.to_vector<int64_t>();
    const auto labels = lesson.train_split.labels.to_vector<int64_t>();
    int64_t french = std::count(labels.begin(), labels.end(), kFrench), full = 0;
    for (size_t i = 0; i < lesson.train_split.rows.size(); ++i)
        full += lesson.train_split.rows[i].tokens.size() > size_t(kMaxLen);
    // The share of tokens that are <unk>, per split and language (whole sentences, before truncation).
    auto unk_share = [&](const Split& s, int64_t label) {
        double tokens = 0, unknown = 0;
        for (const Sentence& row : s.rows)
            if (row.label == label)
                for (const auto& w : row.tokens) tokens += 1, unknown += !lesson.vocab.contains(w);
        return 100 * unknown / tokens;
    };
    lesson.unk_rate = {unk_share(lesson.train_split, kEnglish), unk_share(lesson.train_split, kFrench)};
    note({.en = "{} of the {} training sentences are French (each pair gives one of each); {} are longer than {} "
                "tokens and lose their end. <unk> tokens: {:.1f}% of the English and {:.1f}% of the French "
                "training tokens (words seen once), {:.1f}% and {:.1f}% of the test tokens.",
          .zh = "{1} 个训练句子中有 {0} 个是法语（每个句子对各给出一句）；{2} 个长于 {3} 个词元，结尾被截掉。"
                "<unk> 词元：英语训练词元的 {4:.1f}%、法语训练词元的 {5:.1f}%（只出现过一次的词），"
                "测试词元中分别为 {6:.1f}% 和 {7:.1f}%。"},
         french, labels.size(), full, kMaxLen, lesson.unk_rate[kEnglish], lesson.unk_rate[kFrench],
         unk_share(lesson.test_split, kEnglish), unk_share(lesson.test_split, kFrench));
    t.check(2 * french == static_cast<int64_t>(labels.size()),
            {.en = "the training split is half English, half French", .zh = "训练集一半是英语，一半是法语"});
    t.check(lesson.train_split.X.shape() == c::Shape{static_cast<int64_t>(labels.size()), kMaxLen},
            {.en = "X is (N, sequence_length) token ids", .zh = "X 是 (N, sequence_length) 的词元编号"});
    bool lens_ok = true, pads_ok = true;
    const auto ids = lesson.train_split.X.to_vector<int64_t>();
    const int64_t pad = lesson.vocab.to_index("<pad>");
    for (size_t r = 0; r < lens.size(); ++r) {
        lens_ok = lens_ok && lens[r] == std::min<int64_t>(lesson.train_split.rows[r].tokens.size(), kMaxLen);
        for (int64_t k = 0; k < kMaxLen; ++k) pads_ok = pads_ok && ((ids[r * kMaxLen + k] == pad) == (k >= lens[r]));
    }
    t.check(lens_ok && pads_ok, {.en = "valid length = min(tokens, sequence_length), and <pad> fills exactly the rest",
                                 .zh = "有效长度 = min(词元数, sequence_length)，<pad> 恰好填满其余位置"});
    bool no_leak = true;
    for (const Sentence& s : lesson.test_split.rows) no_leak = no_leak && !seen.count(s.text);
    t.check(no_leak, {.en = "no test sentence occurs in the training split", .zh = "没有测试句子出现在训练集里"});
    t.check(lesson.vocab.to_index("<unk>") == 0 && lesson.vocab.to_index("<pad>") == 1, both("<unk> = 0, <pad> = 1"));
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 (the classifier's input_x, input_y), on seed 000's fra-eng corpus
void the_data(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 001 trains its encoder as a sentence classifier. Our sentences come from the corpus every "
                "other tutorial uses, data/fra-eng/fra.txt (English<TAB>French per line): each side becomes a "
                "sentence of its own, labelled 0 = English or 1 = French. tasks::load_fra_eng draws a seeded "
                "random sample of pairs, applies d2l's preprocessing (lowercase, a space before , . ! ?) and holds "
                "out a test split by distinct English sentence, with all its translations, so that the translation "
                "of a test sentence is never a training sentence.",
          .zh = "种子文档 001 把它的编码器训练成句子分类器。我们的句子来自其他教程都用的语料 data/fra-eng/fra.txt"
                "（每行 英语<TAB>法语）：每一边各成一个句子，标签 0 = 英语，1 = 法语。tasks::load_fra_eng "
                "按种子随机抽取句子对，做 d2l 的预处理（小写，在 , . ! ? 前加空格），并按不同的英语句子留出测试集，"
                "连同它的所有译文一起留出，这样测试句子的译文绝不会是训练句子。"});
    const fs::path corpus = tutorial::find_corpus();
    const tasks::FraEngData data = tasks::load_fra_eng(
        {.path = corpus.string(), .sample_size = 3000, .seed = 14, .val_fraction = 0.2, .num_steps = kMaxLen});
    note({.en = "Read {} lines of {}: {} pairs sampled, {} for training, {} held out.",
          .zh = "读了 {} 行 {}：抽取 {} 个句子对，{} 个用于训练，{} 个留出。"},
         data.report.lines_read, corpus.string(), data.train.pairs.size() + data.val.pairs.size(),
         data.train.pairs.size(), data.val.pairs.size());
    Sentences sentences = labelled_sentences(data);
    note({.en = "{} training sentences; {} test sentences after dropping {} that also occur in training or twice in "
                "the test split.",
          .zh = "{0} 个训练句子；去掉 {2} 个也出现在训练集里或在测试集里重复的句子后，剩 {1} 个测试句子。"},
         sentences.train.size(), sentences.test.size(), sentences.dropped);
    one_vocabulary(lesson, sentences.train);
    lesson.train_split = encode(std::move(sentences.train), lesson.vocab, kMaxLen);
    lesson.test_split = encode(std::move(sentences.test), lesson.vocab, kMaxLen);
    first_training_rows(lesson);
    what_the_splits_hold(t, lesson, sentences.seen);
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 › _position_embedding()
void position_embedding(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 001's _position_embedding builds a (sequence_length, embedding_size) table\n"
                "    angle[pos, i] = pos / 10000^((i - i % 2) / embedding_size)\n"
                "then applies sin to the even columns ([:, 0::2]) and cos to the odd ones ([:, 1::2]); i - i % 2 is "
                "the 2i of seed 002's formula, so columns 2i and 2i+1 share one frequency (tutorial 08). The "
                "classifier's encoder holds this table as nn::PositionalEncoding::P. Columns 0 to 5 of the first "
                "4 positions, by hand:",
          .zh = "种子文档 001 的 _position_embedding 建一张 (sequence_length, embedding_size) 的表\n"
                "    angle[pos, i] = pos / 10000^((i - i % 2) / embedding_size)\n"
                "然后对偶数列（[:, 0::2]）取 sin，对奇数列（[:, 1::2]）取 cos；i - i % 2 就是种子文档 002 公式里的 "
                "2i，所以第 2i 列和第 2i+1 列共用一个频率（教程 08）。分类器的编码器把这张表存为 "
                "nn::PositionalEncoding::P。前 4 个位置的第 0 到 5 列，手算："});
    const c::Tensor mine = seed001_position_embedding(kMaxLen, kHiddens);
    show("angle -> sin/cos [:4, :6]", mine.slice(0, 0, 4).slice(1, 0, 6));
    nn::TransformerClassifier probe({.vocab_size = lesson.vocab.size(),
                                     .max_len = kMaxLen,
                                     .num_hiddens = kHiddens,
                                     .ffn_num_hiddens = kFilters,
                                     .num_heads = kHeads,
                                     .num_layers = 0},
                                    lesson.gen);
    const c::Tensor P = probe.encoder->pos_encoding->P.select(0, 0).slice(0, 0, kMaxLen);  // (T, D)
    t.check_close(P, mine, 1e-6,
                  {.en = "the library's table equals seed 001's formula (float32 against double)",
                   .zh = "库里的表等于种子文档 001 的公式（float32 对 double）"});

    note({.en = "Seed 001 then adds it to the word embeddings as they are, embedded_words + embedded_position. "
                "Seed 000's encoder first multiplies the embeddings by √D (tutorial 08, step 6); the classifier "
                "turns that off (TransformerOptions::scale_embedding = false). With no block at all (num_layers "
                "= 0) the encoder's output is just that sum, which we check on two training sentences:",
          .zh = "种子文档 001 接着把它直接加到词嵌入上：embedded_words + embedded_position。种子文档 000 "
                "的编码器会先把词嵌入乘以 √D（教程 08 第 6 步）；分类器关掉了这一步"
                "（TransformerOptions::scale_embedding = false）。完全没有块（num_layers = 0）时，"
                "编码器的输出就是这个和，我们在两个训练句子上检查："});
    probe.eval();  // no dropout on the sum
    const Batch b = rows_of(lesson.train_split, {0, 1});
    ag::NoGradGuard no_grad;
    const c::Tensor H = probe.encoder->forward(b.X, b.valid_lens).value();  // (2, T, D)
    const c::Tensor E =
        c::index_select(probe.encoder->embedding->weight.value(), 0, b.X.flatten()).view({2, kMaxLen, kHiddens});
    t.check(!probe.encoder->options.scale_embedding, {.en = "the classifier's encoder has scale_embedding = false",
                                                      .zh = "分类器的编码器 scale_embedding = false"});
    t.check_close(H, c::add(E, P.unsqueeze(0)), 1e-6,
                  {.en = "encoder output = E[X] + P, with no √D", .zh = "编码器输出 = E[X] + P，没有 √D"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 › _multihead_attention() (the query mask, after the softmax)
void seed001_query_mask(Tutorial& t, const Lesson& lesson, const Batch& b, const c::Tensor& logits) {
    note({.en = "Three places where this model is not seed 001's TensorFlow, listed at the top of nn/classifier.hpp:\n"
                "- seed 001 makes Q, K and V with tf.layers.dense(..., activation=tf.nn.relu); ours are plain "
                "linear maps, as in seeds 000, 002 and 004;\n"
                "- seed 001 concatenates the heads and adds the residual directly; ours passes the concatenation "
                "through one more matrix, W_o (attention.W_o.weight above);\n"
                "- the query mask, which seed 001 applies after the softmax:\n"
                "    masked_weights = tf.where(tf.equal(query_masks, 0), paddings, weights)\n"
                "with paddings = -2 ** 32 + 1, the constant of the key mask. That puts -4294967295 into every row "
                "whose query is padding, not 0. Here is one head of a 3-step sentence with valid length 2, done "
                "the seed's way:",
          .zh = "这个模型与种子文档 001 的 TensorFlow 代码有三处不同，列在 nn/classifier.hpp 的开头：\n"
                "- 种子文档 001 用 tf.layers.dense(..., activation=tf.nn.relu) 生成 Q、K、V；我们的是普通的线性映射，"
                "与种子文档 000、002、004 相同；\n"
                "- 种子文档 001 把各头拼接后直接加上残差；我们的把拼接结果再乘一个矩阵 W_o（上面的 "
                "attention.W_o.weight）；\n"
                "- 查询掩码，种子文档 001 在 softmax 之后施加：\n"
                "    masked_weights = tf.where(tf.equal(query_masks, 0), paddings, weights)\n"
                "其中 paddings = -2 ** 32 + 1，即键掩码用的常数。这会把 -4294967295 写进查询是填充的每一行，"
                "而不是 0。下面是一个 3 步、有效长度为 2 的句子的一个头，按种子文档的做法："});
    const c::Tensor scores = c::tensor({0.2, 0.1, 0.4, 0.3, 0.5, 0.6, 0.9, 0.7, 0.8}, {3, 3}, DType::float64);
    const double paddings = -4294967295.0;  // Python's -2 ** 32 + 1 = -(2 ** 32) + 1
    c::Tensor key_masked = scores.clone();
    for (int64_t q = 0; q < 3; ++q) key_masked.set({q, 2}, paddings);  // key 2 is padding
    c::Tensor weights = c::softmax(key_masked);
    show("softmax(key-masked scores)", weights);
    c::Tensor seed_weights = weights.clone();
    for (int64_t k = 0; k < 3; ++k) seed_weights.set({2, k}, paddings);  // query 2 is padding
    show("seed 001's masked_weights", seed_weights);
    t.check(weights.at({0, 2}) == 0 && std::abs(weights.at({0, 0}) + weights.at({0, 1}) - 1) < 1e-12,
            {.en = "the key mask works: padded key 2 gets weight 0, each row still sums to 1",
             .zh = "键掩码起作用：填充的键 2 权重为 0，每行之和仍为 1"});
    note({.en = "Row 2 (the padded query) now holds -4294967295 where it should hold nothing; step 3b runs seed 001's "
                "_multihead_attention as written and measures what that does to the output.",
          .zh = "第 2 行（填充的查询）现在是 -4294967295，而它本应什么都没有；第 3b 步按原样运行种子文档 001 的 "
                "_multihead_attention，测量这对输出有什么影响。"});
    note({.en = "A mask after the softmax must multiply by 0 or 1: a padded query should contribute nothing. "
                "The library leaves the attention of padded queries alone (they attend to the valid keys like any "
                "other) and zeroes the padded steps of H before pooling, as the piece-by-piece forward above did. "
                "That is what the query mask is for: whatever the padding holds, the logits do not change.",
          .zh = "softmax 之后的掩码必须乘以 0 或 1：填充的查询不应贡献任何东西。库里不去动填充查询的注意力"
                "（它们像其他查询一样关注有效的键），而是在汇聚之前把 H 的填充时间步置零，正如上面逐步的前向计算那样。"
                "这才是查询掩码的用处：不管填充位置上是什么，logits 都不变。"});
    c::Tensor other_padding = b.X.clone();
    for (int64_t r = 0; r < 2; ++r)
        for (int64_t k = static_cast<int64_t>(b.valid_lens.at({r})); k < kMaxLen; ++k) other_padding.set({r, k}, 5 + k);
    t.check_close(lesson.model->forward(other_padding, b.valid_lens).value(), logits, 0,
                  {.en = "other tokens in the padded steps give exactly the same logits",
                   .zh = "填充位置换成别的词元，logits 完全相同"});
}

// Two training sentences through the classifier piece by piece: the encoder, the zeroed padding, the
// flatten and the output layer (xavier_initializer, bias 0.1), against the model's own forward.
void piece_by_piece(Tutorial& t, Lesson& lesson) {
    note({.en = "The blocks are seed 000's EncoderBlock (tutorial 10): self-attention, then residual + layer "
                "norm (seed 001's `outputs += queries` and _layer_normalization), then the kernel-1 convolution "
                "FFN (_feed_forward), residual + layer norm again. Each sentence ends as a (T, D) matrix; seed 001 "
                "flattens it, tf.reshape(..., [-1, sequence_length * embedding_size]), so every position has its "
                "own weights in the output layer. We take two sentences through the model piece by piece:",
          .zh = "这些块就是种子文档 000 的 EncoderBlock（教程 10）：自注意力，然后残差 + 层归一化（种子文档 001 的 "
                "`outputs += queries` 和 _layer_normalization），然后是卷积核为 1 的卷积前馈网络（_feed_forward），"
                "再残差 + 层归一化。每个句子最后是一个 (T, D) 矩阵；种子文档 001 把它展平，"
                "tf.reshape(..., [-1, sequence_length * embedding_size])，于是每个位置在输出层里都有自己的权重。"
                "我们把两个句子一块一块地送过模型："});
    lesson.model->eval();  // dropout off, to compare exactly
    const Batch b = rows_of(lesson.train_split, {0, 1});
    ag::NoGradGuard no_grad;
    const c::Tensor H = lesson.model->encoder->forward(b.X, b.valid_lens).value();  // (B, T, D)
    const c::Tensor mask = nn::sequence_mask(b.valid_lens, kMaxLen, DType::float32).view({2, kMaxLen, 1});
    const c::Tensor flat = c::mul(H, mask).reshape({2, kMaxLen * kHiddens});  // (B, T·D)
    const c::Tensor W = lesson.model->output->weight.value(), bias = lesson.model->output->bias.value();
    const c::Tensor logits = c::add(c::matmul(flat, W.transpose(0, 1)), bias);  // xw_plus_b
    describe("H (B, T, D)", H);
    // Seed 001's _layer_normalization: tf.nn.moments over the last axis (the biased variance), then
    // gamma · (x - mean) / √(variance + ε) + beta with gamma = 1, beta = 0 at the start: nn::LayerNorm.
    const c::Tensor row_mean = c::mean(H, {2}), row_var = c::mean(c::mul(H, H), {2});
    t.check_close(row_mean, c::zeros({2, kMaxLen}), 1e-5,
                  {.en = "the block ends in _layer_normalization: every step of H has mean 0 over its D features ...",
                   .zh = "块以 _layer_normalization 结束：H 的每个时间步在 D 个特征上的均值为 0……"});
    t.check_close(row_var, c::ones({2, kMaxLen}), 1e-3,
                  {.en = "... and variance 1 (gamma = 1, beta = 0 as initialised)",
                   .zh = "……方差为 1（初始化时 gamma = 1，beta = 0）"});
    describe("flat (B, T·D)", flat);
    show("output.weight[:, :6]", W.slice(1, 0, 6));
    show("output.bias", bias);
    show({.en = "logits by hand", .zh = "手算的 logits"}, logits);
    t.check_close(lesson.model->forward(b.X, b.valid_lens).value(), logits, 1e-5,
                  {.en = "model(X, valid_lens) = output(flatten(H with padded steps zeroed))",
                   .zh = "model(X, valid_lens) = output(flatten(填充时间步置零后的 H))"});
    t.check(
        W.shape() == c::Shape{2, kMaxLen * kHiddens},
        {.en = "output.weight is (2, T·D): seed 001's output_w [T·D, 2], stored (out, in) like every Linear",
         .zh = "output.weight 是 (2, T·D)：即种子文档 001 的 output_w [T·D, 2]，像每个 Linear 一样按 (out, in) 存储"});
    t.check_close(bias, c::full({2}, 0.1), 0,
                  {.en = "output_b = tf.constant(0.1): both biases are 0.1",
                   .zh = "output_b = tf.constant(0.1)：两个偏置都是 0.1"});
    const double bound = std::sqrt(6.0 / (kMaxLen * kHiddens + 2));
    t.check(c::max(c::abs(W)).item() <= bound,
            {.en = "xavier_initializer: |w| ≤ √(6 / (fan_in + fan_out)) = √(6 / {}) = {:.4f}",
             .zh = "xavier_initializer：|w| ≤ √(6 / (fan_in + fan_out)) = √(6 / {}) = {:.4f}"},
            kMaxLen * kHiddens + 2, bound);
    t.check_close(std::sqrt(c::mean(c::mul(W, W)).item()), bound / std::sqrt(3.0), 0.01,
                  {.en = "and its root mean square is about bound / √3, as a uniform distribution gives",
                   .zh = "它的均方根约为 bound / √3，正是均匀分布给出的值"});
    seed001_query_mask(t, lesson, b, logits);
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 (the blocks, the flatten, dropout and the "output" layer)
void the_model(Tutorial& t, Lesson& lesson) {
    lesson.model = std::make_unique<nn::TransformerClassifier>(classifier_options(lesson.vocab, Pooling::flatten),
                                                               lesson.model_gen);
    note({.en = "nn::TransformerClassifier({{.vocab_size = {}, .num_classes = 2, .max_len = {}, .num_hiddens = {}, "
                ".ffn_num_hiddens = {}, .num_heads = {}, .num_layers = {}, .dropout = {}, .pooling = flatten}}). "
                "Its parameters:",
          .zh = "nn::TransformerClassifier({{.vocab_size = {}, .num_classes = 2, .max_len = {}, .num_hiddens = {}, "
                ".ffn_num_hiddens = {}, .num_heads = {}, .num_layers = {}, .dropout = {}, .pooling = flatten}})。"
                "它的参数："},
         lesson.vocab.size(), kMaxLen, kHiddens, kFilters, kHeads, kBlocks, kDropout);
    int64_t total = 0;
    for (const auto& [name, p] : lesson.model->named_parameters()) {
        line("      {:<44} {}", name, c::shape_str(p.shape()));
        total += p.value().numel();
    }
    line();
    t.check(total == lesson.model->num_parameters(), {.en = "{} parameters in all", .zh = "共 {} 个参数"}, total);
    const int64_t block = 4 * kHiddens * kHiddens + (kHiddens * kFilters + kFilters) +
                          (kFilters * kHiddens + kHiddens) + 2 * 2 * kHiddens;
    t.check(total == lesson.vocab.size() * kHiddens + kBlocks * block + (kMaxLen * kHiddens * 2 + 2),
            {.en = "= V·D embedding ({}) + {} block(s) of 4·D² + FFN + 2 LayerNorms ({}) + output T·D·2 + 2 ({})",
             .zh = "= V·D 词嵌入（{}）+ {} 个块，每块 4·D² + 前馈网络 + 2 个 LayerNorm（{}）+ 输出层 T·D·2 + 2（{}）"},
            lesson.vocab.size() * kHiddens, kBlocks, block, kMaxLen * kHiddens * 2 + 2);
    piece_by_piece(t, lesson);
    lesson.model->train();
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 › _multihead_attention() (key and query masks), run as written
void seed001_multihead_attention_as_written(Tutorial& t) {
    note({.en = "The library's block differs from seed 001's _multihead_attention in three ways (above). Here is "
                "seed 001's function itself, line by line, on two sentences of 4 token ids (0 = padding), D = 8, "
                "2 heads:\n"
                "    Q = K = V = tf.layers.dense(x, D, activation=tf.nn.relu)    (three dense layers with a ReLU)\n"
                "    Q_ = tf.concat(tf.split(Q, H, axis=-1), axis=0)             (H·B, T, D/H), head-major\n"
                "    similarity = Q_ K_ᵀ / √(D/H)\n"
                "    key mask: -2^32 + 1 where the key id is 0; softmax\n"
                "    query mask: tf.where(query id == 0, -2^32 + 1, weights)\n"
                "    outputs = weights V_, heads back: tf.concat(tf.split(outputs, H, axis=0), axis=2)\n"
                "    outputs += queries; _layer_normalization(outputs)",
          .zh = "库里的块与种子文档 001 的 _multihead_attention 有三处不同（见上）。下面是种子文档 001 的函数本身，"
                "逐行运行，输入是两个各 4 个词元编号的句子（0 = 填充），D = 8，2 个头：\n"
                "    Q = K = V = tf.layers.dense(x, D, activation=tf.nn.relu)    （三个带 ReLU 的 dense 层）\n"
                "    Q_ = tf.concat(tf.split(Q, H, axis=-1), axis=0)             (H·B, T, D/H)，头在前\n"
                "    similarity = Q_ K_ᵀ / √(D/H)\n"
                "    键掩码：键的编号为 0 处填 -2^32 + 1；softmax\n"
                "    查询掩码：tf.where(query id == 0, -2^32 + 1, weights)\n"
                "    outputs = weights V_，各头放回：tf.concat(tf.split(outputs, H, axis=0), axis=2)\n"
                "    outputs += queries; _layer_normalization(outputs)"});
    c::Generator g(1401);
    const int64_t B = 2, T = 4, D = 8, H = 2, d = D / H;
    const c::Tensor ids = c::from_vector(std::vector<int64_t>{5, 3, 8, 0, 2, 7, 0, 0}, {B, T});
    const c::Tensor x = c::randn({B, T, D}, g, DType::float64);  // embedded words + positions
    std::vector<std::unique_ptr<nn::Linear>> dense;              // tf.layers.dense: weights and a bias
    for (int i = 0; i < 3; ++i) {
        dense.push_back(std::make_unique<nn::Linear>(nn::Linear::Options{.in_features = D, .out_features = D}, g));
        dense.back()->to(DType::float64);
    }
    ag::NoGradGuard no_grad;
    const c::Tensor Q = c::relu((*dense[0])(Variable(x)).value()), K = c::relu((*dense[1])(Variable(x)).value()),
                    V = c::relu((*dense[2])(Variable(x)).value());
    const c::Tensor Q_ = heads_first(Q, H), K_ = heads_first(K, H), V_ = heads_first(V, H);
    t.check_close(Q_.select(0, 1 * B + 0), Q.select(0, 0).slice(1, d, D), 0,
                  {.en = "row h·B + b of Q_ is head h of sequence b: row 2 is head 1 of sequence 0 (d2l puts it at "
                         "b·H + h = 1)",
                   .zh = "Q_ 的第 h·B + b 行是序列 b 的头 h：第 2 行是序列 0 的头 1（d2l 把它放在 b·H + h = 1）"});
    const double paddings = -4294967295.0;            // Python's -2 ** 32 + 1
    const c::Tensor mask = c::concat({ids, ids}, 0);  // tf.tile(inputs, [num_heads, 1]): (H·B, T)
    const c::Tensor similarity = c::div(c::matmul(Q_, K_.transpose(1, 2)), std::sqrt(double(d)));
    const c::Tensor key_pad = c::eq(mask, 0.0).unsqueeze(1).expand({H * B, T, T});
    const c::Tensor weights =
        c::softmax(c::where(key_pad, c::full({H * B, T, T}, paddings, DType::float64), similarity));
    const c::Tensor query_pad = c::eq(mask, 0.0).unsqueeze(2).expand({H * B, T, T});
    const c::Tensor seed_weights = c::where(query_pad, c::full({H * B, T, T}, paddings, DType::float64), weights);
    const c::Tensor right_weights = c::where(query_pad, c::zeros({H * B, T, T}, DType::float64), weights);
    const auto [seed_raw, seed_out] = seed001_block_output(seed_weights, V_, Q, H);
    const auto [right_raw, right_out] = seed001_block_output(right_weights, V_, Q, H);
    show({.en = "seed 001's masked_weights, head 0 of sequence 1",
          .zh = "种子文档 001 的 masked_weights，序列 1 的头 0"},
         seed_weights.select(0, 1));
    t.check(c::max(c::abs(c::where(key_pad, weights, c::zeros(weights.shape(), DType::float64)))).item() == 0,
            {.en = "the key mask works: every padded key gets weight exactly 0 (e^(-4294967295) underflows)",
             .zh = "键掩码起作用：每个填充的键权重恰好为 0（e^(-4294967295) 下溢）"});
    const double huge = c::max(c::abs(seed_raw.select(0, 1).slice(0, 2, 4))).item();
    note({.en = "    largest |output| at the padded positions before the layer norm: seed 001's {:.3g}, multiplying "
                "by 0 instead: {:.3g}",
          .zh = "    层归一化之前，填充位置上最大的 |output|：种子文档 001 的做法 {:.3g}，改为乘以 0：{:.3g}"},
         huge, c::max(c::abs(right_raw.select(0, 1).slice(0, 2, 4))).item());
    t.check(huge > 1e8,
            {.en = "the seed's query mask puts -4294967295 weights into padded rows: outputs of size ~1e9 there",
             .zh = "种子文档的查询掩码把 -4294967295 的权重放进填充行：那里的输出大小约为 1e9"});
    t.check_close(seed_out.select(0, 0).slice(0, 0, 3), right_out.select(0, 0).slice(0, 0, 3), 1e-12,
                  {.en = "the real positions are not affected by it (a query row only feeds its own position)",
                   .zh = "真实位置不受影响（一行查询只影响它自己的位置）"});
    t.check_close(seed_out.select(0, 1).slice(0, 0, 2), right_out.select(0, 1).slice(0, 0, 2), 1e-12,
                  {.en = "in the second sentence too", .zh = "第二个句子也是如此"});
    note({.en = "So inside the block the damage stays at the padded positions, and the next block's key mask hides "
                "them as keys. But seed 001 then flattens every position, padding included, into the output layer, "
                "so whatever the padded rows hold reaches the logits: that is why the library zeroes the padded "
                "steps of H before pooling (above), and why the query mask should multiply by 0 (the exercise).",
          .zh = "所以在块内部，损害只停留在填充位置，下一个块的键掩码会把它们作为键屏蔽掉。但种子文档 001 "
                "接着把每个位置（包括填充）都展平送进输出层，于是填充行里的任何东西都会到达 logits："
                "这就是库在汇聚之前把 H 的填充时间步置零（见上）的原因，也是查询掩码应当乘以 0 的原因（见练习）。"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 (l2_loss, loss = cal_loss() + l2_reg_lambda · l2_loss)
void l2_term(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 001 adds tf.nn.l2_loss(output_w) and tf.nn.l2_loss(output_b) to self.l2_loss, and "
                "tf.nn.l2_loss(t) is sum(t²) / 2, so\n"
                "    l2_loss = ½‖output_w‖² + ½‖output_b‖²\n"
                "    loss    = cross_entropy + l2_reg_lambda · l2_loss\n"
                "Only the output layer is penalised, not the encoder. By hand, in double:",
          .zh = "种子文档 001 把 tf.nn.l2_loss(output_w) 和 tf.nn.l2_loss(output_b) 加到 self.l2_loss 上，"
                "而 tf.nn.l2_loss(t) 是 sum(t²) / 2，所以\n"
                "    l2_loss = ½‖output_w‖² + ½‖output_b‖²\n"
                "    loss    = cross_entropy + l2_reg_lambda · l2_loss\n"
                "只惩罚输出层，不惩罚编码器。用 double 手算："});
    double w2 = 0, b2 = 0;
    for (double w : lesson.model->output->weight.value().to_vector()) w2 += w * w;
    for (double v : lesson.model->output->bias.value().to_vector()) b2 += v * v;
    const double l2 = 0.5 * w2 + 0.5 * b2;
    line("      ½‖W‖² = ½ · {:.6f} = {:.6f}\n      ½‖b‖² = ½ · (0.1² + 0.1²) = {:.6f}\n      l2_loss = {:.6f}\n", w2,
         0.5 * w2, 0.5 * b2, l2);
    t.check_close(
        lesson.model->l2_loss().value().item(), l2, 1e-5,
        {.en = "TransformerClassifier::l2_loss() is the same", .zh = "TransformerClassifier::l2_loss() 与之相同"});
    t.check_close(0.5 * b2, 0.01, 1e-9,
                  {.en = "the bias part at initialisation is ½ · 2 · 0.01 = 0.01",
                   .zh = "初始化时偏置部分是 ½ · 2 · 0.01 = 0.01"});

    lesson.model->eval();
    const Batch b = rows_of(lesson.train_split, {0, 1, 2, 3, 4, 5, 6, 7});
    const Variable logits = lesson.model->forward(b.X, b.valid_lens);
    const c::Tensor logp = c::log_softmax(logits.value().to(DType::float64));  // (B, 2)
    double ce = 0;
    for (int64_t r = 0; r < 8; ++r) ce -= logp.at({r, static_cast<int64_t>(b.labels.at({r}))});
    ce /= 8;
    const Variable loss = lesson.model->loss(logits, b.labels, kLambda);
    line({.en = "      cross-entropy of 8 sentences  = mean(-log softmax(logits)[label]) = {:.6f}\n"
                "      + λ · l2_loss = {} · {:.6f}         = {:.6f}\n",
          .zh = "      8 个句子的交叉熵              = mean(-log softmax(logits)[label]) = {:.6f}\n"
                "      + λ · l2_loss = {} · {:.6f}         = {:.6f}\n"},
         ce, kLambda, l2, ce + kLambda * l2);
    t.check_close(loss.value().item(), ce + kLambda * l2, 1e-5, both("model.loss(logits, labels, λ) = CE + λ·l2"));
    note({.en = "Its gradient adds λ·W to the output weights' gradient, weight decay on the output layer only. "
                "One backward with λ and one without:",
          .zh = "它的梯度在输出权重的梯度上加了 λ·W，即只对输出层做权重衰减。分别带 λ 和不带 λ 各做一次反向传播："});
    lesson.model->zero_grad();
    lesson.model->loss(lesson.model->forward(b.X, b.valid_lens), b.labels, 0.0).backward();
    const c::Tensor g0 = lesson.model->output->weight.grad().clone();
    lesson.model->zero_grad();
    loss.backward();
    const c::Tensor g1 = lesson.model->output->weight.grad().clone();
    t.check_close(c::sub(g1, g0), c::mul(lesson.model->output->weight.value(), kLambda), 1e-7,
                  {.en = "∂(loss)/∂W with λ minus without λ = λ·W", .zh = "带 λ 的 ∂(loss)/∂W 减去不带 λ 的 = λ·W"});
    lesson.model->zero_grad();
    lesson.model->train();
}

// The training curve of step 5 as a picture: the loss per batch, its running mean and the L2 part.
void loss_picture(Tutorial& t, const Curve& curve) {
    const auto png = t.out_path("loss.png");
    std::vector<double> smooth;  // mean of the last (up to) 20 batches
    for (size_t i = 0; i < curve.total.size(); ++i) {
        const size_t from = i >= 19 ? i - 19 : 0;
        smooth.push_back(std::accumulate(curve.total.begin() + from, curve.total.begin() + i + 1, 0.0) /
                         (i + 1 - from));
    }
    // (the picture's font has no Greek letters: lambda is spelt out)
    tasks::plot_lines(
        png, {.series = {{.name = "loss per batch", .x = curve.step, .y = curve.total, .line_width = 1},
                         {.name = "mean of 20 batches", .x = curve.step, .y = smooth},
                         {.name = "lambda * L2 term", .x = curve.step, .y = curve.l2, .dash = tasks::Dash::dashed}},
              .title = "English or French? loss = CE + lambda * L2",
              .xlabel = "step",
              .ylabel = "loss",
              .log_y = true});
    note({.en = "Wrote {}: the loss per batch, its running mean, and the L2 part alone (dashed), which stays near "
                "{:.4f}, a thousandth of the cross-entropy at the start.",
          .zh = "已写出 {}：每个批量的损失、它的滑动平均，以及单独的 L2 部分（虚线），它保持在 {:.4f} 附近，"
                "只有开始时交叉熵的千分之一。"},
         png.string(), curve.l2.back());
    const double first = std::accumulate(curve.total.begin(), curve.total.begin() + 20, 0.0) / 20;
    const double last = std::accumulate(curve.total.end() - 20, curve.total.end(), 0.0) / 20;
    t.check(last < 0.25 * first,
            {.en = "the loss fell: mean of the first 20 steps {:.3f}, of the last 20 {:.3f}",
             .zh = "损失下降了：前 20 步的均值 {:.3f}，最后 20 步的均值 {:.3f}"},
            first, last);
}

// The trained classifier on the test split: accuracy, a few sentences and the mistakes.
void test_accuracy_and_mistakes(Tutorial& t, const Lesson& lesson) {
    const std::vector<double> p = prob_french(*lesson.model, lesson.test_split.X, lesson.test_split.valid_lens);
    const double acc = accuracy(p, lesson.test_split.labels);
    const double train_acc = accuracy(prob_french(*lesson.model, lesson.train_split.X, lesson.train_split.valid_lens),
                                      lesson.train_split.labels);
    note({.en = "Accuracy on the {} test sentences: {:.2f}% (training sentences: {:.2f}%).",
          .zh = "在 {} 个测试句子上的准确率：{:.2f}%（训练句子：{:.2f}%）。"},
         lesson.test_split.rows.size(), 100 * acc, 100 * train_acc);
    t.check(acc > 0.96, {.en = "test accuracy above 96%", .zh = "测试准确率高于 96%"});

    note({.en = "A few test sentences with P(French), then every mistake (word-for-word what the model saw, "
                "<unk> included):",
          .zh = "几个测试句子及其 P(French)，然后是每一个错误（逐词列出模型看到的东西，包括 <unk>）："});
    auto print_row = [&](size_t r) {
        const Sentence& s = lesson.test_split.rows[r];
        const Phrase lang =
            phrase(s.label == kFrench ? Text{.en = "French", .zh = "法语"} : Text{.en = "English", .zh = "英语"});
        const Phrase verdict = phrase((p[r] > 0.5) == (s.label == kFrench) ? Text{.en = "right", .zh = "对"}
                                                                           : Text{.en = "WRONG", .zh = "错"});
        line({.en = "      {:<8} P(French) = {:.3f}  {:<5}  \"{}\"",
              .zh = "      {:<8} P(French) = {:.3f}  {:<5}  “{}”"},
             lang, p[r], verdict, ids_to_text(lesson.vocab, lesson.test_split, int64_t(r)));
    };
    for (size_t r = 0; r < 8; ++r) print_row(r);
    line("      ...");
    int64_t mistakes = 0;
    for (size_t r = 0; r < p.size(); ++r)
        if ((p[r] > 0.5) != (lesson.test_split.rows[r].label == kFrench)) {
            if (++mistakes <= 12) print_row(r);
        }
    line();
    note({.en = "{} mistakes. Most are short, or lean on <unk>, names (\"tom\") and punctuation, which carry "
                "little evidence either way; a few are plain sentences the model has simply not learned.",
          .zh = "{} 个错误。大多很短，或者依赖 <unk>、人名（“tom”）和标点，这些几乎不提供哪一方的证据；"
                "少数是模型就是没学会的普通句子。"},
         mistakes);
}

// Sentences typed here, preprocessed and tokenised like the corpus, through the trained classifier.
void sentences_of_our_own(Tutorial& t, const Lesson& lesson) {
    note({.en = "Sentences of our own, preprocessed and tokenised like the corpus:",
          .zh = "我们自己的句子，像语料一样做预处理和分词："});
    const std::vector<Sentence> mine = {sentence("I would like a cup of tea, please.", kEnglish),
                                        sentence("Je voudrais une tasse de thé, s'il vous plaît.", kFrench),
                                        sentence("Where is the station?", kEnglish),
                                        sentence("Où est la gare ?", kFrench),
                                        sentence("Tom is my friend.", kEnglish),
                                        sentence("Tom est mon ami.", kFrench),
                                        sentence("Tom!", kEnglish),
                                        sentence("Xyzzy plugh.", kEnglish)};
    const Split own = encode(mine, lesson.vocab, kMaxLen);
    const std::vector<double> q = prob_french(*lesson.model, own.X, own.valid_lens);
    for (size_t r = 0; r < mine.size(); ++r)
        line({.en = "      P(French) = {:.3f}  \"{}\"  (seen as \"{}\")",
              .zh = "      P(French) = {:.3f}  “{}”（模型看到的是“{}”）"},
             q[r], mine[r].text, ids_to_text(lesson.vocab, own, int64_t(r)));
    line();
    note({.en = "The French sentence of 11 tokens lost its final \".\" to sequence_length = 10, and still reads "
                "as French. The last two have no language. \"tom !\" is made of tokens both sides use, so the "
                "answer is whatever leaned one way in training (other seeds give anything from 0.4 to 0.9). "
                "\"xyzzy plugh .\" is \"<unk> <unk> .\" to the model, and <unk> is not neutral: French has more "
                "word forms (gender, conjugation), so more of its words are rare, and {:.1f}% of the French training "
                "tokens are <unk> against {:.1f}% of the English ones; with twelve other seeds it leaned French ten "
                "times.",
          .zh = "11 个词元的法语句子因 sequence_length = 10 丢了结尾的“.”，仍被读成法语。最后两句没有语言。"
                "“tom !”由两种语言都用的词元组成，所以答案取决于训练中碰巧偏向了哪边（换别的种子，结果从 0.4 到 "
                "0.9 都有）。“xyzzy plugh .”对模型来说是“<unk> <unk> .”，而 <unk> 并不中立：法语的词形更多"
                "（性、变位），罕见词也更多，法语训练词元有 {:.1f}% 是 <unk>，英语只有 {:.1f}%；"
                "换另外十二个种子，有十次偏向法语。"},
         lesson.unk_rate[kFrench], lesson.unk_rate[kEnglish]);
    bool clear_ok = true;
    for (size_t r = 0; r < 6; ++r) clear_ok = clear_ok && (q[r] > 0.5) == (mine[r].label == kFrench);
    t.check(clear_ok, {.en = "the six full sentences of our own are all classified right",
                       .zh = "我们自己的六个完整句子都分类正确"});
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 (train_op: Adam on the loss)
void training(Tutorial& t, Lesson& lesson) {
    note({.en = "Adam (lr {}), batches of {} shuffled training sentences, {} steps (about {:.1f} epochs), dropout "
                "{} on, λ = {}. One line per 50 steps, with the means over those 50 batches:",
          .zh = "Adam（lr {}），每批 {} 个打乱的训练句子，{} 步（约 {:.1f} 个迭代周期），dropout {} 打开，λ = {}。"
                "每 50 步一行，给出这 50 个批量的均值："},
         kLr, kBatch, kSteps, double(kSteps * kBatch) / lesson.train_split.rows.size(), kDropout, kLambda);
    const auto t0 = std::chrono::steady_clock::now();
    lesson.curve = train(*lesson.model, lesson.train_split, lesson.gen, true);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    line();
    // a time differs from run to run: printed, but left out of --no-prose (a Phrase without values)
    note(Phrase{
        phrase({.en = "Training took {:.1f} s ({:.1f} ms per step).", .zh = "训练用了 {:.1f} 秒（每步 {:.1f} 毫秒）。"},
               seconds, 1000 * seconds / kSteps)
            .text,
        {}});
    loss_picture(t, lesson.curve);
    test_accuracy_and_mistakes(t, lesson);
    sentences_of_our_own(t, lesson);
}

// The self-attention of block 1 on test sentence `pick` (L tokens), as the forward just left it.
void attention_heatmap(Tutorial& t, const Lesson& lesson, size_t pick, int64_t L) {
    const c::Tensor A = lesson.model->attention_weights().at(0);  // (B·H, T, T) = (H, T, T)
    note({.en = "The self-attention weights of \"{}\" ({} tokens), block 1: {} heads of shape (T, T) = ({}, {}). "
                "The heatmaps show the valid {}×{} corner; every column beyond it is 0 (the key mask).",
          .zh = "“{}”（{} 个词元）在第 1 块的自注意力权重：{} 个头，形状 (T, T) = ({}, {})。"
                "热力图显示有效的 {}×{} 一角；其外的每一列都是 0（键掩码）。"},
         lesson.test_split.rows[pick].text, L, kHeads, kMaxLen, kMaxLen, L, L);
    t.check(A.shape() == c::Shape{kHeads, kMaxLen, kMaxLen}, {.en = "attention_weights()[0] is (B·H, T, T) for B = 1",
                                                              .zh = "B = 1 时 attention_weights()[0] 是 (B·H, T, T)"});
    t.check_close(c::sum(A.slice(2, L, kMaxLen)).item(), 0.0, 0,
                  {.en = "no weight on the padded keys", .zh = "填充的键上没有权重"});
    t.check_close(c::sum(A, {2}), c::ones({kHeads, kMaxLen}), 1e-5,
                  {.en = "every row of every head sums to 1", .zh = "每个头的每一行之和都为 1"});
    const c::Tensor corner = A.slice(1, 0, L).slice(2, 0, L);  // (H, L, L)
    const tasks::TokenLine& tokens = lesson.test_split.rows[pick].tokens;
    std::vector<std::string> ticks(tokens.begin(), tokens.begin() + L);
    for (auto& w : ticks)
        if (!lesson.vocab.contains(w)) w += " (unk)";
    const std::vector<std::string> titles = tutorial::head_titles(kHeads);
    const auto png = t.out_path("attention.png");
    tasks::plot_heatmaps(png, {.matrices = tasks::heatmap_grid(corner),
                               .titles = titles,
                               .title = "encoder self-attention, block 1",
                               .x_ticks = ticks,
                               .y_ticks = ticks,
                               .vmin = 0.0,
                               .vmax = 1.0});
    note({.en = "Wrote {}.", .zh = "已写出 {}。"}, png.string());
    t.check(corner.shape() == c::Shape{kHeads, L, L} && static_cast<int64_t>(ticks.size()) == L &&
                c::max(c::abs(c::sub(c::sum(corner, {2}), c::ones({kHeads, L})))).item() < 1e-5,
            {.en = "the picture's {} panels of {} × {}: every row still sums to 1 over the valid keys alone",
             .zh = "图中 {} 个 {} × {} 的面板：只在有效的键上，每一行之和仍为 1"},
            kHeads, L, L);
}

// Pooling::mean beside seed 001's flatten: the same model trained the same way, and any length accepted.
void mean_pooling_instead_of_flatten(Tutorial& t, const Lesson& lesson, const Batch& one, int64_t L) {
    note({.en = "Flatten pooling ties each output weight to one position, so the input must have exactly "
                "sequence_length steps:",
          .zh = "展平汇聚把每个输出权重绑定到一个位置，所以输入必须恰好有 sequence_length 个时间步："});
    const c::Tensor short_X = one.X.slice(1, 0, L).contiguous();
    t.check_throws<ShapeError>(
        phrase({.en = "flatten pooling refuses the sentence as {} steps", .zh = "展平汇聚拒绝只有 {} 个时间步的句子"},
               L),
        [&] { (*lesson.model)(short_X, one.valid_lens); }, "flatten pooling needs exactly max_len");
    note({.en = "Pooling::mean averages the valid steps, (B, T, D) → (B, D), so its output layer has D·2 + 2 = "
                "{} parameters instead of T·D·2 + 2 = {}, and any length up to max_len is accepted. The same model "
                "with mean pooling, trained the same way:",
          .zh = "Pooling::mean 对有效时间步取平均，(B, T, D) → (B, D)，所以它的输出层有 D·2 + 2 = {} 个参数，"
                "而不是 T·D·2 + 2 = {}，并且接受不超过 max_len 的任何长度。同一个模型换成平均汇聚，同样训练："},
         kHiddens * 2 + 2, kMaxLen * kHiddens * 2 + 2);
    c::Generator init_gen(140), train_gen(14);
    nn::TransformerClassifier mean_model(classifier_options(lesson.vocab, Pooling::mean), init_gen);
    const auto t0 = std::chrono::steady_clock::now();
    const Curve mean_curve = train(mean_model, lesson.train_split, train_gen, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flat_acc = accuracy(prob_french(*lesson.model, lesson.test_split.X, lesson.test_split.valid_lens),
                                     lesson.test_split.labels);
    const double mean_acc =
        accuracy(prob_french(mean_model, lesson.test_split.X, lesson.test_split.valid_lens), lesson.test_split.labels);
    line({.en = "      pooling   output parameters   final loss (mean of last 20)   test accuracy",
          .zh = "      汇聚      输出层参数          最终损失（最后 20 步均值）     测试准确率"});
    auto tail = [](const Curve& cv) { return std::accumulate(cv.total.end() - 20, cv.total.end(), 0.0) / 20; };
    line("      flatten   {:>17}   {:>28.4f}   {:>12.2f}%", lesson.model->output->weight.value().numel() + 2,
         tail(lesson.curve), 100 * flat_acc);
    line("      mean      {:>17}   {:>28.4f}   {:>12.2f}%", mean_model.output->weight.value().numel() + 2,
         tail(mean_curve), 100 * mean_acc);
    note(Phrase{
        phrase({.en = "      (mean pooling trained in {:.1f} s)", .zh = "      （平均汇聚的训练用了 {:.1f} 秒）"},
               seconds)
            .text,
        {}});  // a time: left out of --no-prose
    line();
    t.check(mean_acc > 0.96,
            {.en = "mean pooling also passes 96% on the test sentences", .zh = "平均汇聚在测试句子上也超过 96%"});
    {
        ag::NoGradGuard no_grad;
        const c::Tensor padded = mean_model(one.X, one.valid_lens).value();
        const c::Tensor unpadded = mean_model(short_X, one.valid_lens).value();
        show("mean_model(X (1, 10))", padded);
        show(fmt::format("mean_model(X (1, {}))", L), unpadded);
        t.check_close(unpadded, padded, 1e-5,
                      {.en = "mean pooling gives the same logits with or without the padding",
                       .zh = "无论有没有填充，平均汇聚给出的 logits 都相同"});
    }
    note({.en = "The two are within a point of each other (over ten seeds of data, weights and batches we tried, "
                "flatten gave 97.4–98.9% and mean 97.8–98.9%). Which language a sentence is in does not depend on "
                "where its words stand, so the position-specific weights of flatten pooling buy nothing here, and "
                "mean pooling does as well with {} times fewer output weights.",
          .zh = "两者相差不到一个百分点（在我们试过的十组数据、权重和批量的种子上，展平汇聚得到 97.4–98.9%，"
                "平均汇聚 97.8–98.9%）。一个句子是哪种语言，与词的位置无关，所以展平汇聚按位置分配的权重在这里"
                "毫无用处，而平均汇聚用少 {} 倍的输出权重就做得一样好。"},
         kMaxLen);
}

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 (the attention weights, the flatten against mean pooling)
void attention_and_mean_pooling(Tutorial& t, Lesson& lesson) {
    // A French test sentence of at least 6 tokens that fits in sequence_length.
    size_t pick = 0;
    for (size_t r = 0; r < lesson.test_split.rows.size(); ++r) {
        const auto& s = lesson.test_split.rows[r];
        if (s.label == kFrench && s.tokens.size() >= 7 && s.tokens.size() <= size_t(kMaxLen)) {
            pick = r;
            break;
        }
    }
    const Batch one = rows_of(lesson.test_split, {static_cast<int64_t>(pick)});
    const int64_t L = one.valid_lens.at({0});
    {
        ag::NoGradGuard no_grad;
        lesson.model->eval();
        lesson.model->forward(one.X, one.valid_lens);
    }
    attention_heatmap(t, lesson, pick, L);
    mean_pooling_instead_of_flatten(t, lesson, one, L);
}

// ---- the exercise (--exercise): tutorials/14_text_classifier/exercise.cpp ------------------

// seed 001 (001_57ca8c5b7ec56526.txt) › 核心代码 › _multihead_attention() (the query mask), written by the reader
void exercise_query_mask(Tutorial& t) {
    note({.en = "Write exercise::mask_queries: zero the rows of padded queries in seed 001's head-major layout. "
                "The checks use 3 sentences and 2 heads, so that the head-major order (row h·B + b) and d2l's "
                "order (row b·H + h) put different sequences in the same row.",
          .zh = "写出 exercise::mask_queries：在种子文档 001 头在前的布局里，把填充查询所在的行置零。"
                "检查用 3 个句子、2 个头，这样头在前的顺序（第 h·B + b 行）和 d2l 的顺序（第 b·H + h 行）"
                "会把不同的序列放在同一行。"});
    c::Generator g(1414);
    const c::Tensor ids = c::from_vector(std::vector<int64_t>{4, 9, 0, 0, 3, 3, 3, 0, 7, 0, 0, 0}, {3, 4});
    const c::Tensor w = c::softmax(c::randn({6, 4, 4}, g, DType::float64));
    const c::Tensor mine = exercise::mask_queries(w, ids);
    c::Tensor want = w.clone();
    for (int64_t h = 0; h < 2; ++h)
        for (int64_t b = 0; b < 3; ++b)
            for (int64_t q = 0; q < 4; ++q)
                if (ids.at({b, q}) == 0) c::fill_(want.select(0, h * 3 + b).select(0, q), 0.0);
    t.check_close(mine, want, 0,
                  {.en = "every padded query's row is 0 in both heads, every other row unchanged",
                   .zh = "两个头里每个填充查询的行都是 0，其他行不变"});
    t.check(mine.defined() && mine.shape() == w.shape() && mine.at({4, 1, 0}) == w.at({4, 1, 0}),
            {.en = "row 4 = head 1 of sequence 1 (3 real tokens): its query 1 keeps its weights",
             .zh = "第 4 行 = 序列 1（3 个真实词元）的头 1：它的查询 1 保留原来的权重"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = {.en = "tformer tutorial 14 · A Transformer sentence classifier: English or French?",
                          .zh = "tformer 教程 14 · Transformer 句子分类器：英语还是法语？"},
                .follows = {.en = "seed 001 核心代码 (_position_embedding, _layer_normalization, "
                                  "_multihead_attention, _feed_forward, output layer and l2_loss)",
                            .zh = "种子文档 001 核心代码（_position_embedding、_layer_normalization、"
                                  "_multihead_attention、_feed_forward、输出层和 l2_loss）"},
                .exercise = {.en = "apply seed 001's query mask the way it was meant, by multiplying, in its "
                                   "head-major layout (tutorials/14_text_classifier/exercise.cpp)",
                             .zh = "按种子文档 001 查询掩码本来的意图，用乘法在它头在前的布局里施加"
                                   "（tutorials/14_text_classifier/exercise.cpp）"}});
    const auto started = std::chrono::steady_clock::now();
    // The tensors here are small (a batch is 64 × 10 × 32): a second thread
    // gains nothing, and on one thread every printed number is the same on
    // every machine (the library's results depend on the thread count only).
    c::set_num_threads(1);
    Lesson lesson;
    t.step({.en = "1. The data: English and French sentences, one shared vocabulary",
            .zh = "1. 数据：英语和法语句子，一个共用的词表"},
           [&] { the_data(t, lesson); });
    t.step({.en = "2. Seed 001's position embedding, by hand and in the library",
            .zh = "2. 种子文档 001 的位置嵌入，手算与库里的实现"},
           [&] { position_embedding(t, lesson); });
    t.step({.en = "3. The model: seed 001's encoder, flatten, dropout and output layer",
            .zh = "3. 模型：种子文档 001 的编码器、展平、dropout 和输出层"},
           [&] { the_model(t, lesson); });
    t.step({.en = "3b. Seed 001's _multihead_attention, run as written",
            .zh = "3b. 按原样运行种子文档 001 的 _multihead_attention"},
           [&] { seed001_multihead_attention_as_written(t); });
    t.step({.en = "4. Seed 001's L2 term: l2_loss and loss = CE + λ·l2",
            .zh = "4. 种子文档 001 的 L2 项：l2_loss 与 loss = CE + λ·l2"},
           [&] { l2_term(t, lesson); });
    t.step({.en = "5. Training with Adam; test accuracy; sentences of our own",
            .zh = "5. 用 Adam 训练；测试准确率；我们自己的句子"},
           [&] { training(t, lesson); });
    t.step({.en = "6. What the encoder attends to, and mean pooling instead of flatten",
            .zh = "6. 编码器关注什么，以及用平均汇聚代替展平"},
           [&] { attention_and_mean_pooling(t, lesson); });
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    note(Phrase{phrase({.en = "The whole tutorial took {:.1f} s.", .zh = "整个教程用了 {:.1f} 秒。"}, total).text,
                {}});  // a time: left out of --no-prose
    t.exercise({.en = "Exercise. Seed 001's query mask, done right", .zh = "练习. 正确地实现种子文档 001 的查询掩码"},
               [&] { exercise_query_mask(t); });
    return t.finish();
}
