// tasks/corpus: the honest validation split, encoded pairs, length buckets.
#include "tasks/corpus.hpp"

#include "autograd/autograd.hpp"
#include "core/error.hpp"
#include "nn/loss.hpp"
#include "tasks/small_model.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace tformer;
using namespace tformer::tasks;

namespace {
const std::string kFraEng = TFORMER_SOURCE_DIR "/data/fra-eng/fra.txt";

struct TempFile {
    std::filesystem::path path;
    TempFile(const std::string& name, const std::string& contents)
        : path(std::filesystem::temp_directory_path() / ("tformer_corpus_" + std::to_string(::getpid()) + "_" + name)) {
        std::ofstream(path, std::ios::binary) << contents;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

// word-level tokenizers over a list of pairs (fast, no training)
TokenizerPair word_tokenizers(const std::vector<TextPair>& pairs) {
    TokenLines src, tgt;
    for (const auto& p : pairs) {
        src.push_back(tokenize(preprocess_nmt(p.src)));
        tgt.push_back(tokenize(preprocess_nmt(p.tgt)));
    }
    return {std::make_shared<WordTokenizer>(Vocab(src, 1, kNmtReserved)),
            std::make_shared<WordTokenizer>(Vocab(tgt, 1, kNmtReserved))};
}

// pairs of given (source, target) lengths, ids counting up
std::shared_ptr<EncodedPairs> synthetic(const std::vector<std::pair<int, int>>& lengths) {
    auto d = std::make_shared<EncodedPairs>();
    d->max_len = 100;
    int32_t next = 4;
    for (auto [s, t] : lengths) {
        d->src.emplace_back();
        d->tgt.emplace_back();
        for (int i = 0; i < s; ++i) d->src.back().push_back(next++);
        for (int i = 0; i < t; ++i) d->tgt.back().push_back(next++);
    }
    return d;
}
}  // namespace

TEST_CASE("load_corpus: validation sentences keep all their references and share no sentence with training",
          "[tasks][corpus]") {
    // "Go." has two translations; "Run!" shares its French with "Go."; "Hi." and "Hello." share one French
    const TempFile file("small.txt",
                        "Go.\tVa !\nGo.\tMarche.\nHi.\tSalut !\nRun!\tMarche.\nHello.\tSalut !\nI see.\tJe vois.\n"
                        "Wait.\tAttends.\nbroken line\nStop!\tArrête !\n");
    // every seed: the split is a partition minus the overlaps, validation never leaks
    for (uint64_t seed = 0; seed < 8; ++seed) {
        const Corpus c = load_corpus({.path = file.path.string(), .val_sentences = 2, .seed = seed});
        CHECK(c.report.lines.skipped_columns == 1);
        CHECK(c.report.val_sentences == 2);
        CHECK(c.val.size() == 2);
        std::set<std::string> val_src, val_tgt;
        int64_t refs = 0;
        for (const auto& v : c.val) {
            val_src.insert(preprocess_nmt(v.src));
            for (const auto& r : v.refs) val_tgt.insert(preprocess_nmt(r)), ++refs;
            if (v.src == "Go.") CHECK(v.refs == std::vector<std::string>{"Va !", "Marche."});
        }
        CHECK(refs == c.report.val_pairs);
        for (const auto& p : c.train) {
            CHECK(!val_src.count(preprocess_nmt(p.src)));
            CHECK(!val_tgt.count(preprocess_nmt(p.tgt)));
        }
        CHECK(c.report.train_pairs + c.report.val_pairs + c.report.dropped_overlap == 8);
    }
    // the same seed gives the same split
    const Corpus a = load_corpus({.path = file.path.string(), .val_sentences = 3, .seed = 5});
    const Corpus b = load_corpus({.path = file.path.string(), .val_sentences = 3, .seed = 5});
    CHECK(a.train == b.train);
    CHECK_THROWS_WITH(load_corpus({.path = file.path.string(), .val_sentences = 7}),
                      Catch::Contains("leaves no English sentence for training"));
    CHECK_THROWS_WITH(load_corpus({.path = file.path.string(), .val_sentences = -1}), Catch::Contains(">= 0"));
    CHECK_THROWS_AS(load_corpus({.path = "/nonexistent/fra.txt"}), IOError);
}

TEST_CASE("load_corpus on the bundled corpus: validation is drawn from every length", "[tasks][corpus]") {
    const Corpus c = load_corpus({.path = kFraEng, .val_sentences = 1500, .seed = 0});
    CHECK(c.report.val_pairs >= 1500);
    CHECK(c.report.train_pairs > 150000);
    // the file is sorted by length: a prefix would hold only short sentences
    int64_t long_ones = 0;
    for (const auto& v : c.val) long_ones += bleu_tokens(v.src).size() >= 10;
    CHECK(long_ones > 100);
    const Corpus sample = load_corpus({.path = kFraEng, .val_sentences = 100, .seed = 0, .sample_size = 1000});
    CHECK(sample.train.size() == 1000);
}

TEST_CASE("encode_pairs: ids per side, long pairs left out and counted", "[tasks][corpus]") {
    const std::vector<TextPair> pairs = {{"Go.", "Va !"},
                                         {"I see a big red house.", "Je vois une grande maison rouge."}};
    const TokenizerPair tok = word_tokenizers(pairs);
    const EncodedPairs all = encode_pairs(pairs, tok, 10);
    REQUIRE(all.size() == 2);
    CHECK(all.dropped == 0);
    CHECK(all.src[0].size() == 2);  // go .
    CHECK(all.tgt[1].size() == 7);
    const EncodedPairs short_only = encode_pairs(pairs, tok, 7);  // the second needs 8 with <eos> on the target
    CHECK(short_only.size() == 1);
    CHECK(short_only.dropped == 1);
    CHECK_THROWS_WITH(encode_pairs(pairs, tok, 1), Catch::Contains("at least 2"));
    CHECK_THROWS_WITH(encode_pairs(pairs, tok, 2), Catch::Contains("longer than max_len 2"));
}

TEST_CASE("BucketBatcher: every pair exactly once per epoch, within the token budget, batches differ by epoch",
          "[tasks][corpus]") {
    std::vector<std::pair<int, int>> lengths;
    for (int i = 0; i < 500; ++i) lengths.emplace_back(1 + (i * 7) % 23, 1 + (i * 5) % 19);
    const auto data = synthetic(lengths);
    const BucketBatcher batcher(data, 200, 3);
    std::vector<std::vector<std::vector<int64_t>>> plans;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
        const auto plan = batcher.epoch_plan(epoch);
        CHECK(static_cast<int64_t>(plan.size()) == batcher.batches_per_epoch());
        std::vector<int64_t> seen;
        for (const auto& rows : plan) {
            seen.insert(seen.end(), rows.begin(), rows.end());
            const Batch b = batcher.batch(rows);
            // the budget, B · (S + T), unless a single pair is already larger
            CHECK((rows.size() == 1 || b.enc_X.size(0) * (b.enc_X.size(1) + b.label.size(1)) <= 200));
        }
        std::sort(seen.begin(), seen.end());
        std::vector<int64_t> all(500);
        for (int64_t i = 0; i < 500; ++i) all[i] = i;
        CHECK(seen == all);
        plans.push_back(plan);
    }
    CHECK(plans[0] != plans[1]);
    CHECK(batcher.epoch_plan(1) == plans[1]);  // deterministic in (seed, epoch)
    CHECK(batcher.padding_fraction() < 0.15);
    // random batches (the comparison of the README's table): also every pair once, as many batches
    const BucketBatcher random(data, 200, 3, false);
    CHECK(random.batches_per_epoch() == batcher.batches_per_epoch());
    std::vector<int64_t> seen;
    for (const auto& rows : random.epoch_plan(2)) seen.insert(seen.end(), rows.begin(), rows.end());
    std::sort(seen.begin(), seen.end());
    CHECK(seen.size() == 500);
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    CHECK(random.padding_fraction() > batcher.padding_fraction());
    CHECK_THROWS_AS(BucketBatcher(data, 1, 0), ValueError);
    CHECK_THROWS_AS(BucketBatcher(std::make_shared<EncodedPairs>(), 100, 0), ValueError);
}

TEST_CASE("BucketBatcher::batch: <eos> after the source, <bos> before the decoder input, labels shifted",
          "[tasks][corpus]") {
    const auto data = synthetic({{2, 3}, {1, 1}});
    const BucketBatcher batcher(data, 1000, 0);
    const Batch b = batcher.batch({0, 1});
    // pair 0: src 4 5, tgt 6 7 8; pair 1: src 9, tgt 10
    CHECK(b.enc_X.to_vector<int64_t>() == std::vector<int64_t>{4, 5, 3, 9, 3, 1});
    CHECK(b.enc_valid.to_vector<int64_t>() == std::vector<int64_t>{3, 2});
    CHECK(b.dec_in.to_vector<int64_t>() == std::vector<int64_t>{2, 6, 7, 8, 2, 10, 1, 1});
    CHECK(b.label.to_vector<int64_t>() == std::vector<int64_t>{6, 7, 8, 3, 10, 3, 1, 1});
    CHECK(b.label_valid.to_vector<int64_t>() == std::vector<int64_t>{4, 2});
}

TEST_CASE("BucketBatcher with subword dropout: every epoch spells the pairs anew, its batches cut from those lengths",
          "[tasks][corpus]") {
    const Corpus c = load_corpus({.path = kFraEng, .val_sentences = 50, .seed = 0, .sample_size = 2000});
    std::vector<std::string> text;
    for (const TextPair& p : c.train) text.push_back(p.src), text.push_back(p.tgt);
    const std::shared_ptr<const SentencePieceTokenizer> sp =
        SentencePieceTokenizer::train(text, {.vocab_size = 300, .threads = 1});
    const auto data = std::make_shared<EncodedPairs>(encode_pairs(c.train, {sp, sp}, 64));
    REQUIRE(data->origin.size() == data->src.size());
    const SubwordDropout subword{
        .p = 0.1, .tokenizer = sp, .text = std::make_shared<const std::vector<TextPair>>(c.train)};
    const BucketBatcher plain(data, 400, 5);
    const BucketBatcher dropped(data, 400, 5, true, subword);
    CHECK(dropped.batches_per_epoch() == plain.batches_per_epoch());
    CHECK(plain.spelled(3) == data);  // no dropout: the one-best ids themselves
    const auto e0 = dropped.spelled(0), e1 = dropped.spelled(1);
    CHECK(e0->src != e1->src);
    CHECK(dropped.spelled(1)->src == e1->src);  // the same draw for the same epoch
    CHECK(dropped.spelled(1)->tgt == e1->tgt);
    auto ids = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
    size_t best = 0, drawn = 0;
    for (int64_t i = 0; i < data->size(); ++i) {
        CHECK(data->origin[i] < static_cast<int64_t>(c.train.size()));
        CHECK(sp->decode(ids(e0->src[i])) == sp->decode(ids(data->src[i])));  // the same text
        CHECK(sp->decode(ids(e0->tgt[i])) == sp->decode(ids(data->tgt[i])));
        CHECK((static_cast<int64_t>(e0->src[i].size()) < 64 && static_cast<int64_t>(e0->tgt[i].size()) < 64));
        best += data->src[i].size() + data->tgt[i].size();
        drawn += e0->src[i].size() + e0->tgt[i].size();
    }
    CHECK(drawn > best);
    // the epoch's plan: every pair once, sorted by the drawn lengths, so padding stays low
    const auto plan = dropped.epoch_plan(1, *e1);
    CHECK(plan == dropped.epoch_plan(1));
    std::vector<int64_t> seen;
    double real = 0, padded = 0;
    for (const auto& rows : plan) {
        seen.insert(seen.end(), rows.begin(), rows.end());
        const Batch b = dropped.batch(rows, *e1);
        const std::vector<int64_t> enc = b.enc_X.to_vector<int64_t>();
        const int64_t S = b.enc_X.size(1);
        std::vector<int64_t> first(enc.begin(), enc.begin() + static_cast<int64_t>(e1->src[rows[0]].size()));
        CHECK(first == ids(e1->src[rows[0]]));  // the epoch's ids, then <eos>
        CHECK(enc[e1->src[rows[0]].size()] == Tokenizer::kEos);
        for (const core::Tensor& v : {b.enc_valid, b.label_valid})
            for (int64_t n : v.to_vector<int64_t>()) real += static_cast<double>(n);
        padded += static_cast<double>(b.enc_X.size(0) * (S + b.label.size(1)));
    }
    std::sort(seen.begin(), seen.end());
    CHECK(static_cast<int64_t>(seen.size()) == data->size());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    CHECK(1 - real / padded < 0.15);
    // the training source gives the epoch's batches
    const BatchSource source =
        BucketBatcher::source(std::make_shared<const BucketBatcher>(data, 400, 5, true, subword));
    CHECK(source.get(1, 0).enc_X.to_vector<int64_t>() == dropped.batch(plan[0], *e1).enc_X.to_vector<int64_t>());
    CHECK(source.get(1, 1).label.to_vector<int64_t>() == dropped.batch(plan[1], *e1).label.to_vector<int64_t>());
    // refused
    CHECK_THROWS_WITH(BucketBatcher(data, 400, 5, true, {.p = 1.0, .tokenizer = sp, .text = subword.text}),
                      Catch::Contains("subword dropout must be in [0, 1), got 1"));
    CHECK_THROWS_WITH(BucketBatcher(data, 400, 5, true, {.p = 0.1, .tokenizer = nullptr, .text = nullptr}),
                      Catch::Contains("needs the SentencePiece model"));
    CHECK_THROWS_WITH(BucketBatcher(synthetic({{2, 3}}), 400, 5, true, subword), Catch::Contains("origin"));
    CHECK_THROWS_WITH(dropped.batch({0}, *synthetic({{2, 3}})), Catch::Contains("a spelling of 1 pairs"));
}

TEST_CASE("BucketBatcher on the bundled corpus: padding under 15% of tokens", "[tasks][corpus]") {
    const Corpus c = load_corpus({.path = kFraEng, .val_sentences = 100, .seed = 0, .sample_size = 30000});
    const TokenizerPair tok = word_tokenizers(c.train);
    const auto data = std::make_shared<EncodedPairs>(encode_pairs(c.train, tok, 64));
    for (int64_t budget : {2000, 4000, 8000}) {
        const BucketBatcher batcher(data, budget, 0);
        INFO("batch_tokens " << budget);
        CHECK(batcher.padding_fraction() < 0.15);
        CHECK(batcher.max_batch() * 4 <= budget);  // the shortest pairs have at least 2 + 2 positions
    }
}

TEST_CASE("count_words, bleu_by_length: sentences go to the 1-5, 6-10, 11-20 or 21+ word bucket of their source",
          "[tasks][corpus][bleu]") {
    CHECK(count_words("") == 0);
    CHECK(count_words("  Go.  ") == 1);
    CHECK(count_words("Who is\u00a0there ?\tme") == 5);  // a no-break space and a tab separate words too
    auto words = [](int n) {
        std::string s;
        for (int i = 0; i < n; ++i) s += (i ? " w" : "w") + std::to_string(i);
        return s;
    };
    const std::vector<std::string> sources = {words(1),  words(5),  words(6),  words(10), words(11),
                                              words(20), words(21), words(40), ""};
    // the 6-10 bucket translated perfectly, the others with one wrong word of four
    const TokenLine right = {"a", "b", "c", "d"}, wrong = {"a", "b", "c", "x"};
    std::vector<TokenLine> preds;
    std::vector<std::vector<TokenLine>> refs;
    for (size_t i = 0; i < sources.size(); ++i) {
        preds.push_back(i == 2 || i == 3 ? right : wrong);
        refs.push_back({right});
    }
    const std::vector<LengthBucket> b = bleu_by_length(sources, preds, refs);
    REQUIRE(b.size() == 4);
    CHECK((b[0].min_words == 1 && b[0].max_words == 5 && b[3].min_words == 21 && b[3].max_words == 0));
    CHECK(b[0].sentences == 3);  // 1, 5 and the empty source
    CHECK(b[1].sentences == 2);
    CHECK(b[2].sentences == 2);
    CHECK(b[3].sentences == 2);
    CHECK(b[1].bleu.score == Approx(1.0));
    CHECK(b[0].bleu.score == 0);  // no 4-gram matches
    CHECK(b[0].bleu.precisions[0] == Approx(0.75));
    CHECK(bleu_by_length({}, {}, {})[2].sentences == 0);
    CHECK_THROWS_WITH(bleu_by_length({"a"}, {}, {}), Catch::Contains("1 sources, 0 predictions and 0 reference"));
}

TEST_CASE("pair_loss: the teacher-forced cross-entropy per target token, in eval mode, pairs too long left out",
          "[tasks][corpus]") {
    const std::vector<TextPair> pairs = {{"Go.", "Va !"},
                                         {"I lost.", "J'ai perdu."},
                                         {"He's calm.", "Il est calme."},
                                         {"I see a big red house.", "Je vois une grande maison rouge."},
                                         {"We are friends.", "Nous sommes amis."}};
    const TokenizerPair tok = word_tokenizers(pairs);
    ModelConfig c;
    c.task = "translate";
    c.src_vocab_size = tok.src->size();
    c.tgt_vocab_size = tok.tgt->size();
    c.num_steps = 10;
    c.transformer = testing::transformer_of_width(8);
    c.transformer.dropout = 0.3;  // eval mode: no dropout, the same figure every call
    c.transformer.fused = true;
    core::Generator gen(5);
    auto model = build_model(c, gen);
    model->train(true);

    // each pair alone through the unfused model and the dense loss: Σ_t −log p / tokens
    const EncodedPairs encoded = encode_pairs(pairs, tok, c.num_steps);
    const BucketBatcher one_by_one(std::make_shared<EncodedPairs>(encoded), 2, 0);
    double sum = 0;
    int64_t tokens = 0;
    {
        model->eval();
        autograd::NoGradGuard no_grad;
        for (int64_t i = 0; i < encoded.size(); ++i) {
            const Batch b = one_by_one.batch({i});
            const autograd::Variable logits = model->forward(b.enc_X, b.dec_in, b.enc_valid);
            const double T = static_cast<double>(b.label.size(1));
            sum += nn::masked_softmax_ce_loss(logits, b.label, b.label_valid).value().item() * T;
            tokens += static_cast<int64_t>(b.label_valid.at({0}));
        }
        model->train(true);
    }
    const PairLoss l = pair_loss(*model, pairs, tok, c.num_steps, 30);  // a few pairs per batch
    CHECK(l.pairs == 5);
    CHECK(l.tokens == tokens);
    CHECK(l.loss == Approx(sum / static_cast<double>(tokens)).epsilon(1e-5));
    CHECK(pair_loss(*model, pairs, tok, c.num_steps, 30).loss == l.loss);
    CHECK(model->is_training());  // the mode it had

    const PairLoss shorter = pair_loss(*model, pairs, tok, 6, 30);  // the long pair does not fit
    CHECK(shorter.pairs == 4);
    CHECK(pair_loss(*model, {}, tok, c.num_steps, 30).pairs == 0);
    const PairLoss none = pair_loss(*model, {pairs[3]}, tok, 6, 30);  // no pair fits: nothing scored, no error
    CHECK(none.pairs == 0);
    CHECK(none.tokens == 0);

    // held_out_loss: every reference of every validation sentence, as many training pairs (drawn by the seed)
    Corpus corpus;
    corpus.train = {pairs[0], pairs[1], pairs[2], pairs[3]};
    corpus.val = {{.src = "We are friends.", .refs = {"Nous sommes amis.", "Va !"}}};
    const HeldOutLoss h = held_out_loss(*model, corpus, tok, c.num_steps, 30, 7);
    CHECK(h.validation.pairs == 2);
    CHECK(h.train.pairs == 2);
    CHECK(h.validation.loss ==
          Approx(pair_loss(*model, {{"We are friends.", "Nous sommes amis."}, {"We are friends.", "Va !"}}, tok,
                           c.num_steps, 30)
                     .loss)
              .epsilon(1e-6));
    CHECK(held_out_loss(*model, corpus, tok, c.num_steps, 30, 7).train.loss == h.train.loss);
}
