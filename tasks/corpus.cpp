// The whole corpus: honest validation split, tokenised pairs, length buckets.
#include "tasks/corpus.hpp"

#include "tasks/batch_translate.hpp"
#include "tasks/chrf.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace tformer::tasks {
using core::Tensor;
}

namespace tformer::tasks {

// ---- the split --------------------------------------------------------------------------------

Corpus load_corpus(const CorpusOptions& o) {
    if (o.path.empty()) fail<ValueError>("load_corpus: no path given");
    if (o.val_sentences < 0) fail<ValueError>("load_corpus: val_sentences must be >= 0, got {}", o.val_sentences);
    if (o.sample_size < 0) fail<ValueError>("load_corpus: sample_size must be >= 0, got {}", o.sample_size);
    const std::string text = read_text_file(o.path, "load_corpus");
    Corpus corpus;
    CorpusReport& report = corpus.report;
    const std::vector<RawPair> raw = read_valid_lines(text, 0, report.lines);
    check_corpus_lines(report.lines, o.path, "load_corpus");
    const auto n = static_cast<int64_t>(raw.size());

    // Sentences count as the same when d2l's normalisation makes them equal
    // ("Go." and "go ." are one sentence): that is also how BLEU sees them.
    std::vector<std::string> src_key(raw.size()), tgt_key(raw.size());
    core::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            src_key[i] = preprocess_nmt(raw[i].src);
            tgt_key[i] = preprocess_nmt(raw[i].tgt);
        }
    });
    // group the pairs by English sentence, groups in order of first appearance
    std::unordered_map<std::string_view, int64_t> group_of;
    std::vector<std::vector<int64_t>> groups;
    for (int64_t i = 0; i < n; ++i) {
        auto [it, fresh] = group_of.try_emplace(src_key[i], static_cast<int64_t>(groups.size()));
        if (fresh) groups.emplace_back();
        groups[it->second].push_back(i);
    }
    const auto num_groups = static_cast<int64_t>(groups.size());
    if (o.val_sentences >= num_groups)
        fail<ValueError>("load_corpus: val_sentences {} leaves no English sentence for training ('{}' has {})",
                         o.val_sentences, o.path, num_groups);

    // draw the validation sentences: the first val_sentences of a seeded shuffle
    core::Generator gen(o.seed);
    std::vector<int64_t> order(static_cast<size_t>(num_groups));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = 0; i < o.val_sentences; ++i) std::swap(order[i], order[i + gen.randint(num_groups - i)]);
    std::vector<bool> in_val(raw.size(), false);
    std::unordered_set<std::string_view> val_french;
    for (int64_t g = 0; g < o.val_sentences; ++g) {
        ValSentence v;
        for (int64_t i : groups[order[g]]) {
            in_val[i] = true;
            val_french.insert(tgt_key[i]);
            if (v.src.empty()) v.src = std::string(raw[i].src);
            v.refs.emplace_back(raw[i].tgt);
        }
        report.val_pairs += static_cast<int64_t>(v.refs.size());
        corpus.val.push_back(std::move(v));
    }
    report.val_sentences = o.val_sentences;

    // training: everything else, less the pairs whose French is a validation reference
    std::vector<int64_t> train_rows;
    for (int64_t i = 0; i < n; ++i) {
        if (in_val[i]) continue;
        if (val_french.count(tgt_key[i])) {
            ++report.dropped_overlap;
            continue;
        }
        train_rows.push_back(i);
    }
    if (o.sample_size > 0 && o.sample_size < static_cast<int64_t>(train_rows.size())) {
        core::Generator sample_gen(core::mix_seed(o.seed, 1, 0));
        core::shuffle(train_rows.begin(), train_rows.end(), sample_gen);
        train_rows.resize(static_cast<size_t>(o.sample_size));
        std::sort(train_rows.begin(), train_rows.end());  // back to file order
    }
    if (train_rows.empty()) fail<ValueError>("load_corpus: no training pair left in '{}'", o.path);
    corpus.train.reserve(train_rows.size());
    for (int64_t i : train_rows) corpus.train.push_back({std::string(raw[i].src), std::string(raw[i].tgt)});
    report.train_pairs = static_cast<int64_t>(corpus.train.size());
    return corpus;
}

// ---- encoding ---------------------------------------------------------------------------------

namespace {
// encode_pairs without its refusal when no pair is kept
EncodedPairs encode_fitting(const std::vector<TextPair>& pairs, const TokenizerPair& tok, int64_t max_len) {
    if (max_len < 2) fail<ValueError>("encode_pairs: max_len must be at least 2 (a token and <eos>), got {}", max_len);
    if (!tok.src || !tok.tgt) fail<ValueError>("encode_pairs: both tokenizers are needed");
    const auto n = static_cast<int64_t>(pairs.size());
    std::vector<std::vector<int32_t>> src(pairs.size()), tgt(pairs.size());
    // Work is split across threads; an exception must not cross OpenMP's
    // region, so the first message is kept and thrown afterwards.
    std::string error;
    core::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
        try {
            for (int64_t i = begin; i < end; ++i) {
                for (int64_t id : tok.src->encode(pairs[i].src)) src[i].push_back(static_cast<int32_t>(id));
                for (int64_t id : tok.tgt->encode(pairs[i].tgt)) tgt[i].push_back(static_cast<int32_t>(id));
            }
        } catch (const std::exception& e) {
#pragma omp critical(tformer_encode_pairs)
            if (error.empty()) error = e.what();
        }
    });
    if (!error.empty()) fail<ValueError>("encode_pairs: {}", error);
    EncodedPairs out;
    out.max_len = max_len;
    for (int64_t i = 0; i < n; ++i) {
        // room for <eos> after the source and for <bos> / <eos> around the target
        const bool fits =
            static_cast<int64_t>(src[i].size()) < max_len && static_cast<int64_t>(tgt[i].size()) < max_len;
        const bool empty = src[i].empty() || tgt[i].empty();
        if (!fits || empty) {
            ++out.dropped;
            continue;
        }
        out.src.push_back(std::move(src[i]));
        out.tgt.push_back(std::move(tgt[i]));
        out.origin.push_back(i);
    }
    return out;
}
}  // namespace

EncodedPairs encode_pairs(const std::vector<TextPair>& pairs, const TokenizerPair& tok, int64_t max_len) {
    EncodedPairs out = encode_fitting(pairs, tok, max_len);
    if (out.src.empty())
        fail<ValueError>("encode_pairs: every one of the {} pairs is longer than max_len {}", pairs.size(), max_len);
    return out;
}

// ---- length buckets ---------------------------------------------------------------------------------

namespace {
int64_t src_steps(const EncodedPairs& d, int64_t i) { return static_cast<int64_t>(d.src[i].size()) + 1; }  // + <eos>
int64_t tgt_steps(const EncodedPairs& d, int64_t i) {
    return static_cast<int64_t>(d.tgt[i].size()) + 1;
}  // + <bos> or <eos>

// A spelling of the batcher's pairs must hold as many pairs (spelled() gives one per epoch).
void check_spelling(const EncodedPairs& spelling, const EncodedPairs& data) {
    if (spelling.size() != data.size())
        fail<ValueError>("BucketBatcher: a spelling of {} pairs for a batcher of {}", spelling.size(), data.size());
}
}  // namespace

std::vector<int64_t> BucketBatcher::sorted_order(int64_t epoch, const EncodedPairs& d) const {
    check_spelling(d, *data_);
    std::vector<int64_t> order(static_cast<size_t>(d.size()));
    std::iota(order.begin(), order.end(), 0);
    core::Generator gen(core::mix_seed(seed_, static_cast<uint64_t>(epoch), 0xb0c));
    core::shuffle(order.begin(), order.end(), gen);  // the order among equal lengths
    if (!by_length_) return order;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const int64_t ta = tgt_steps(d, a), tb = tgt_steps(d, b);
        return ta != tb ? ta < tb : src_steps(d, a) < src_steps(d, b);
    });
    return order;
}

BucketBatcher::BucketBatcher(std::shared_ptr<const EncodedPairs> data, int64_t batch_tokens, uint64_t seed,
                             bool by_length, SubwordDropout subword)
    : data_(std::move(data)), seed_(seed), by_length_(true), subword_(std::move(subword)) {
    if (!data_ || data_->size() == 0) fail<ValueError>("BucketBatcher: no pairs to batch");
    if (batch_tokens < 2) fail<ValueError>("BucketBatcher: batch_tokens must be at least 2, got {}", batch_tokens);
    if (!(subword_.p >= 0 && subword_.p < 1))
        fail<ValueError>("BucketBatcher: subword dropout must be in [0, 1), got {}", subword_.p);
    if (subword_.p > 0) {
        if (!subword_.tokenizer || !subword_.text)
            fail<ValueError>("BucketBatcher: subword dropout {} needs the SentencePiece model and the text",
                             subword_.p);
        const auto n = static_cast<int64_t>(subword_.text->size());
        if (data_->origin.size() != data_->src.size() ||
            std::any_of(data_->origin.begin(), data_->origin.end(), [n](int64_t i) { return i < 0 || i >= n; }))
            fail<ValueError>("BucketBatcher: subword dropout needs the pairs' origin in the {} text pairs", n);
    }
    // The lengths along the sorted order are the same in every epoch, so the
    // cut points found here hold for all of them.
    const EncodedPairs& d = *data_;
    int64_t n = 0, S = 0, T = 0, real = 0, padded = 0;
    auto close = [&] {
        sizes_.push_back(n);
        padded += n * (S + T);
        n = S = T = 0;
    };
    for (int64_t i : sorted_order(0, d)) {
        const int64_t s = src_steps(d, i), t = tgt_steps(d, i);
        if (n > 0 && (n + 1) * (std::max(S, s) + std::max(T, t)) > batch_tokens) close();
        ++n;
        S = std::max(S, s);
        T = std::max(T, t);
        real += s + t;
    }
    close();
    padding_fraction_ = 1.0 - static_cast<double>(real) / static_cast<double>(padded);
    if (by_length) return;
    // random batches: the same number of batches, of equal numbers of pairs
    by_length_ = false;
    const int64_t count = d.size(), batches = static_cast<int64_t>(sizes_.size());
    sizes_.clear();
    for (int64_t b = 0; b < batches; ++b) sizes_.push_back((b + 1) * count / batches - b * count / batches);
    const std::vector<int64_t> order = sorted_order(0, d);
    real = padded = 0;
    auto it = order.begin();
    for (int64_t size : sizes_) {
        int64_t S = 0, T = 0;
        for (auto j = it; j != it + size; ++j) {
            S = std::max(S, src_steps(d, *j)), T = std::max(T, tgt_steps(d, *j));
            real += src_steps(d, *j) + tgt_steps(d, *j);
        }
        padded += size * (S + T);
        it += size;
    }
    padding_fraction_ = 1.0 - static_cast<double>(real) / static_cast<double>(padded);
}

std::shared_ptr<const EncodedPairs> BucketBatcher::spelled(int64_t epoch) const {
    if (subword_.p == 0) return data_;
    const EncodedPairs& d = *data_;
    const auto n = static_cast<size_t>(d.size());
    std::vector<std::string_view> text;  // the sources, then the targets
    text.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) text.emplace_back((*subword_.text)[static_cast<size_t>(d.origin[i])].src);
    for (size_t i = 0; i < n; ++i) text.emplace_back((*subword_.text)[static_cast<size_t>(d.origin[i])].tgt);
    const std::vector<std::vector<int64_t>> ids = subword_.tokenizer->sample_encode(
        text, subword_.p, core::mix_seed(seed_, static_cast<uint64_t>(epoch), 0x5b3d));
    auto out = std::make_shared<EncodedPairs>(d);
    for (size_t i = 0; i < 2 * n; ++i) {
        const std::vector<int64_t>& drawn = ids[i];
        if (drawn.empty() || static_cast<int64_t>(drawn.size()) >= d.max_len) continue;  // keeps its one-best ids
        std::vector<int32_t>& side = i < n ? out->src[i] : out->tgt[i - n];
        side.assign(drawn.begin(), drawn.end());
    }
    return out;
}

std::vector<std::vector<int64_t>> BucketBatcher::epoch_plan(int64_t epoch) const {
    return epoch_plan(epoch, *spelled(epoch));
}

std::vector<std::vector<int64_t>> BucketBatcher::epoch_plan(int64_t epoch, const EncodedPairs& spelling) const {
    const std::vector<int64_t> order = sorted_order(epoch, spelling);
    std::vector<std::vector<int64_t>> plan;
    plan.reserve(sizes_.size());
    auto it = order.begin();
    for (int64_t size : sizes_) {
        plan.emplace_back(it, it + size);
        it += size;
    }
    core::Generator gen(core::mix_seed(seed_, static_cast<uint64_t>(epoch), 0xba7c4));
    core::shuffle(plan.begin(), plan.end(), gen);
    return plan;
}

int64_t BucketBatcher::min_batch() const { return *std::min_element(sizes_.begin(), sizes_.end()); }
int64_t BucketBatcher::max_batch() const { return *std::max_element(sizes_.begin(), sizes_.end()); }
double BucketBatcher::mean_batch() const {
    return static_cast<double>(data_->size()) / static_cast<double>(sizes_.size());
}

Batch BucketBatcher::batch(const std::vector<int64_t>& rows) const { return batch(rows, *data_); }

Batch BucketBatcher::batch(const std::vector<int64_t>& rows, const EncodedPairs& d) const {
    check_spelling(d, *data_);
    const auto B = static_cast<int64_t>(rows.size());
    int64_t S = 0, T = 0;
    for (int64_t i : rows) S = std::max(S, src_steps(d, i)), T = std::max(T, tgt_steps(d, i));
    std::vector<int64_t> enc(B * S, Tokenizer::kPad), dec(B * T, Tokenizer::kPad), label(B * T, Tokenizer::kPad);
    std::vector<int64_t> enc_valid(B), label_valid(B);
    for (int64_t b = 0; b < B; ++b) {
        const auto& s = d.src[rows[b]];
        const auto& t = d.tgt[rows[b]];
        std::copy(s.begin(), s.end(), enc.begin() + b * S);
        enc[b * S + static_cast<int64_t>(s.size())] = Tokenizer::kEos;  // source: ids <eos> <pad>...
        dec[b * T] = Tokenizer::kBos;                                   // decoder input: <bos> ids <pad>...
        std::copy(t.begin(), t.end(), dec.begin() + b * T + 1);
        std::copy(t.begin(), t.end(), label.begin() + b * T);  // label: ids <eos> <pad>...
        label[b * T + static_cast<int64_t>(t.size())] = Tokenizer::kEos;
        enc_valid[b] = static_cast<int64_t>(s.size()) + 1;
        label_valid[b] = static_cast<int64_t>(t.size()) + 1;
    }
    return {.enc_X = core::from_vector(enc, {B, S}),
            .enc_valid = core::from_vector(enc_valid, {B}),
            .dec_in = core::from_vector(dec, {B, T}),
            .label = core::from_vector(label, {B, T}),
            .label_valid = core::from_vector(label_valid, {B})};
}

// ---- held-out loss ----------------------------------------------------------------------------------

PairLoss pair_loss(nn::EncoderDecoder& model, const std::vector<TextPair>& pairs, const TokenizerPair& tokenizers,
                   int64_t max_len, int64_t batch_tokens) {
    auto encoded = std::make_shared<EncodedPairs>(encode_fitting(pairs, tokenizers, max_len));
    PairLoss out;
    out.pairs = encoded->size();
    if (out.pairs == 0) return out;
    for (const std::vector<int32_t>& t : encoded->tgt) out.tokens += static_cast<int64_t>(t.size()) + 1;  // <eos>
    const BucketBatcher batcher(encoded, batch_tokens, 0);
    nn::EvalScope eval(model);
    autograd::NoGradGuard no_grad;
    double sum = 0;
    for (const std::vector<int64_t>& rows : batcher.epoch_plan(0))  // Σ over each batch's tokens
        sum += fused_output_loss(model, batcher.batch(rows), 1.0, 0.0).value().item();
    out.loss = sum / static_cast<double>(out.tokens);
    return out;
}

HeldOutLoss held_out_loss(nn::EncoderDecoder& model, const Corpus& corpus, const TokenizerPair& tokenizers,
                          int64_t max_len, int64_t batch_tokens, uint64_t seed) {
    std::vector<TextPair> val;
    for (const ValSentence& v : corpus.val)
        for (const std::string& ref : v.refs) val.push_back({.src = v.src, .tgt = ref});
    std::vector<int64_t> order(corpus.train.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    core::Generator gen(core::mix_seed(seed, 2, 0));
    core::shuffle(order.begin(), order.end(), gen);
    order.resize(std::min(order.size(), val.size()));
    std::vector<TextPair> train;
    train.reserve(order.size());
    for (int64_t i : order) train.push_back(corpus.train[static_cast<size_t>(i)]);
    return {.train = pair_loss(model, train, tokenizers, max_len, batch_tokens),
            .validation = pair_loss(model, val, tokenizers, max_len, batch_tokens)};
}

BatchSource BucketBatcher::source(std::shared_ptr<const BucketBatcher> batcher) {
    // the plan of the current epoch, made once per epoch
    struct Cache {
        int64_t epoch = -1;
        std::shared_ptr<const EncodedPairs> spelling;
        std::vector<std::vector<int64_t>> plan;
    };
    auto cache = std::make_shared<Cache>();
    BatchSource s;
    s.batches_per_epoch = batcher->batches_per_epoch();
    s.get = [batcher, cache](int64_t epoch, int64_t index) {
        if (cache->epoch != epoch) {
            auto spelling = batcher->spelled(epoch);
            auto plan = batcher->epoch_plan(epoch, *spelling);
            *cache = {epoch, std::move(spelling), std::move(plan)};
        }
        return batcher->batch(cache->plan.at(static_cast<size_t>(index)), *cache->spelling);
    };
    return s;
}

// ---- validation BLEU ------------------------------------------------------------------------------

TokenLine bleu_tokens(std::string_view text) {
    TokenLine words = tokenize(preprocess_nmt(text));
    std::erase(words, std::string());
    return words;
}

int64_t count_words(std::string_view text) {
    int64_t words = 0;
    bool in_word = false;
    for (const char32_t cp : core::utf8_code_points(text, "count_words")) {
        const bool space = core::is_unicode_space(cp);
        words += !space && !in_word ? 1 : 0;
        in_word = !space;
    }
    return words;
}

std::vector<LengthBucket> bleu_by_length(const std::vector<std::string>& sources, const std::vector<TokenLine>& preds,
                                         const std::vector<std::vector<TokenLine>>& refs) {
    if (sources.size() != preds.size() || preds.size() != refs.size())
        fail<ValueError>("bleu_by_length: {} sources, {} predictions and {} reference lists; need as many of each",
                         sources.size(), preds.size(), refs.size());
    const int64_t bounds[][2] = {{1, 5}, {6, 10}, {11, 20}, {21, 0}};  // max 0: no limit
    std::vector<LengthBucket> buckets(std::size(bounds));
    for (size_t b = 0; b < buckets.size(); ++b) {
        buckets[b].min_words = bounds[b][0];
        buckets[b].max_words = bounds[b][1];
    }
    std::vector<std::vector<TokenLine>> p(buckets.size());
    std::vector<std::vector<std::vector<TokenLine>>> r(buckets.size());
    for (size_t i = 0; i < sources.size(); ++i) {
        const int64_t words = count_words(sources[i]);
        size_t b = 0;  // the last bucket that starts at or below `words` (an empty source goes in the first)
        while (b + 1 < buckets.size() && words >= buckets[b + 1].min_words) ++b;
        p[b].push_back(preds[i]);
        r[b].push_back(refs[i]);
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
        buckets[b].sentences = static_cast<int64_t>(p[b].size());
        if (!p[b].empty()) buckets[b].bleu = corpus_bleu(p[b], r[b], 4);
    }
    return buckets;
}

BleuReport evaluate_bleu(nn::EncoderDecoder& model, const TokenizerPair& tok, const std::vector<ValSentence>& val,
                         const BleuOptions& o) {
    if (o.max_len < 2 || o.batch_tokens < 1 || o.max_sentences < 0 || o.threads < 0)
        fail<ValueError>(
            "evaluate_bleu: need max_len >= 2, batch_tokens >= 1, max_sentences >= 0, threads >= 0; got {}, {}, {}, {}",
            o.max_len, o.batch_tokens, o.max_sentences, o.threads);
    const auto n =
        static_cast<int64_t>(o.max_sentences > 0 ? std::min<size_t>(val.size(), o.max_sentences) : val.size());
    BleuReport report;
    report.sentences = n;
    std::vector<std::string> sources;
    for (int64_t i = 0; i < n; ++i) sources.push_back(val[i].src);
    const int threads = o.threads > 0 ? o.threads : core::get_num_threads();
    ModelReplicas models(model, threads);
    const std::vector<Translation> out = translate_batches(
        models, tok, sources,
        {.translate = {.max_len = o.max_len, .decode = o.decode}, .batch_tokens = o.batch_tokens, .threads = threads});
    for (const Translation& t : out) {
        report.hypotheses.push_back(t.text);
        report.truncated += t.truncated ? 1 : 0;
    }
    std::vector<TokenLine> preds;
    std::vector<std::vector<TokenLine>> refs;
    std::vector<std::string> lower_hyps;
    std::vector<std::vector<std::string>> lower_refs;
    for (int64_t i = 0; i < n; ++i) {
        preds.push_back(bleu_tokens(report.hypotheses[i]));
        lower_hyps.push_back(core::utf8_lower(report.hypotheses[i]));
        refs.emplace_back();
        lower_refs.emplace_back();
        for (const std::string& r : val[i].refs) {
            refs.back().push_back(bleu_tokens(r));
            lower_refs.back().push_back(core::utf8_lower(r));
        }
    }
    report.bleu = corpus_bleu(preds, refs, 4);
    report.chrf = corpus_chrf(lower_hyps, lower_refs);
    report.by_length = bleu_by_length(sources, preds, refs);
    return report;
}

}  // namespace tformer::tasks
