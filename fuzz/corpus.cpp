// Fuzz target (c): the corpus reader. Each input is a whole fra.txt
// ("English<TAB>French" lines) and goes through both pipelines, as far as
// training's first batches:
//  - d2l's (--preset d2l): load_fra_eng as a whole file with a validation
//    split, as d2l's prefix and as a seeded sample; vocabularies, arrays and
//    the shuffled batches of translation_source;
//  - the whole-corpus one (default and long presets): load_corpus with a
//    validation sentence, word and SentencePiece tokenizers, encode_pairs,
//    length buckets and random batches, the first batch of an epoch, and
//    BLEU's tokens of the validation references.
// Beyond "refuse with a tformer::Error or work", it checks what the code
// promises: the report's counts add up, every batch plan holds every pair
// exactly once, batches have the shapes the data implies.
#include "fuzz/fuzz_util.hpp"

#include "core/core.hpp"
#include "tasks/corpus.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/train.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {
using namespace tformer;

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz_corpus: %s\n", what.c_str());
    std::abort();
}

void check(bool ok, const char* what) {
    if (!ok) finding(what);
}

std::shared_ptr<tasks::SentencePieceTokenizer> sentencepiece;

void check_report(const tasks::FraEngReport& r) {
    check(r.lines_read == r.valid_pairs + r.skipped_columns + r.skipped_empty + r.skipped_utf8,
          "lines read != valid pairs + skipped lines");
}

void d2l_pipeline(const std::string& path, int64_t num_examples, int64_t sample_size, double val_fraction) {
    try {
        const tasks::FraEngData d = tasks::load_fra_eng({.path = path,
                                                         .num_examples = num_examples,
                                                         .sample_size = sample_size,
                                                         .seed = 1,
                                                         .val_fraction = val_fraction,
                                                         .num_steps = 6,
                                                         .min_freq = 2});
        check_report(d.report);
        check(d.report.train_pairs + d.report.val_pairs == (sample_size > 0 ? sample_size : d.report.valid_pairs),
              "load_fra_eng: train + validation pairs != the pairs chosen");
        check(d.train.src.size(0) == d.report.train_pairs && d.train.src.size(1) == 6,
              "load_fra_eng: train array shape");
        const tasks::BatchSource source = tasks::translation_source(d.train, 4, tasks::Tokenizer::kBos, 1);
        for (int64_t i = 0; i < std::min<int64_t>(2, source.batches_per_epoch); ++i) {
            const tasks::Batch b = source.get(1, source.batches_per_epoch - 1 - i);
            check(b.enc_X.size(1) == 6 && b.dec_in.size(1) == 6 && b.label.size(0) == b.enc_X.size(0),
                  "translation_source: batch shapes");
        }
    } catch (const Error&) {
    }
}

void check_plan(const tasks::BucketBatcher& batcher, int64_t pairs, int64_t epoch) {
    std::vector<int> seen(static_cast<size_t>(pairs), 0);
    for (const auto& rows : batcher.epoch_plan(epoch))
        for (int64_t i : rows) {
            check(i >= 0 && i < pairs, "BucketBatcher: a row outside the pairs");
            ++seen[static_cast<size_t>(i)];
        }
    for (int s : seen) check(s == 1, "BucketBatcher: an epoch plan does not hold every pair exactly once");
}

void corpus_pipeline(const std::string& path, int64_t sample_size) {
    try {
        const tasks::Corpus c =
            tasks::load_corpus({.path = path, .val_sentences = 1, .seed = 2, .sample_size = sample_size});
        check_report(c.report.lines);
        check(static_cast<int64_t>(c.train.size()) == c.report.train_pairs && c.val.size() == 1,
              "load_corpus: sizes differ from the report");
        for (const auto& v : c.val)
            for (const auto& r : v.refs) (void)tasks::bleu_tokens(r);
        // d2l's word vocabularies, as `--tokenizer word` builds them
        tasks::TokenLines src, tgt;
        for (const auto& p : c.train) {
            src.push_back(tasks::tokenize(tasks::preprocess_nmt(p.src)));
            tgt.push_back(tasks::tokenize(tasks::preprocess_nmt(p.tgt)));
        }
        const tasks::TokenizerPair words{
            std::make_shared<tasks::WordTokenizer>(tasks::Vocab(src, 2, tasks::kNmtReserved)),
            std::make_shared<tasks::WordTokenizer>(tasks::Vocab(tgt, 2, tasks::kNmtReserved))};
        for (const tasks::TokenizerPair& tok : {words, tasks::TokenizerPair{sentencepiece, sentencepiece}}) {
            try {
                auto encoded = std::make_shared<tasks::EncodedPairs>(tasks::encode_pairs(c.train, tok, 8));
                check(encoded->size() + encoded->dropped == static_cast<int64_t>(c.train.size()),
                      "encode_pairs: kept + dropped != pairs");
                for (bool by_length : {true, false}) {
                    const tasks::BucketBatcher batcher(encoded, 24, 3, by_length);
                    check_plan(batcher, encoded->size(), 0);
                    const auto plan = batcher.epoch_plan(1);
                    const tasks::Batch b = batcher.batch(plan.front());
                    check(b.enc_X.size(0) == static_cast<int64_t>(plan.front().size()) && b.enc_X.size(1) <= 8 &&
                              b.label.size(1) <= 8,
                          "BucketBatcher: batch shapes");
                }
            } catch (const Error&) {
            }
        }
    } catch (const Error&) {
    }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    fuzz::one_thread();
    // a small SentencePiece model, trained once on the first lines of the bundled corpus
    const std::string text =
        tasks::read_text_file(std::string(TFORMER_SOURCE_DIR) + "/fuzz/data/fra-40.txt", "fuzz_corpus");
    tasks::FraEngReport report;
    std::vector<std::string> sentences;
    for (const auto& p : tasks::read_valid_lines(text, 0, report)) {
        sentences.emplace_back(p.src);
        sentences.emplace_back(p.tgt);
    }
    sentencepiece = tasks::SentencePieceTokenizer::train(sentences, {.vocab_size = 100, .threads = 1});
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& path = fuzz::write_input(data, size, "corpus");
    // each input takes one way of choosing its pairs, by its length: a
    // mutation that adds or removes a byte moves it to another, so all
    // are fuzzed, at a third of the cost of running each on every input
    switch (size % 3) {
        case 0: d2l_pipeline(path, 0, 0, 0.3); break;   // the whole file, a validation split
        case 1: d2l_pipeline(path, 3, 0, 0.0); break;   // d2l's prefix (lines 0..3)
        default: d2l_pipeline(path, 0, 2, 0.0); break;  // a sample of 2 pairs
    }
    corpus_pipeline(path, size % 2 ? 2 : 0);  // all the training pairs, or a sample of 2
    return 0;
}
