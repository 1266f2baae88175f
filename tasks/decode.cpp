// Batched greedy and beam search (see decode.hpp), and the plain search the
// tests compare them with (namespace reference, at the end).
#include "tasks/decode.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;

namespace {

// ---- what both searches share -----------------------------------------------------------------

void check_source(const Tensor& src, const Tensor& lens, const char* op) {
    if (src.dim() != 2 || src.dtype() != core::DType::int64)
        fail<ShapeError>("{}: source ids must be int64 (batch, steps), got {} {}", op, core::dtype_name(src.dtype()),
                         core::shape_str(src.shape()));
    if (lens.defined() && (lens.dim() != 1 || lens.size(0) != src.size(0)))
        fail<ShapeError>("{}: valid lengths of shape {} for a batch of {}", op, core::shape_str(lens.shape()),
                         src.size(0));
}

void check_options(const DecodeOptions& o, const char* op) {
    if (o.beam < 1) fail<ValueError>("{}: beam size must be at least 1, got {}", op, o.beam);
    if (o.max_steps < 1) fail<ValueError>("{}: max_steps must be at least 1, got {}", op, o.max_steps);
    if (!std::isfinite(o.length_penalty))
        fail<ValueError>("{}: length penalty must be finite, got {}", op, o.length_penalty);
    if (o.n_best < 1 || o.n_best > o.beam)
        fail<ValueError>("{}: n_best must be between 1 and the beam size {}, got {}", op, o.beam, o.n_best);
}

// One live hypothesis: a row of the decoder's batch.
struct Hyp {
    std::vector<int64_t> tokens;
    double logp = 0;       // Σ log-probabilities of its tokens
    int64_t sentence = 0;  // the source sentence it extends (its batch index)
};

// Per sentence, the hypotheses that ended, with their normalised scores, in the order they ended.
using Finished = std::vector<std::vector<std::pair<double, Hyp>>>;

// log p / length^α, the length counting every scored token: the <eos> of a
// finished hypothesis too, none for one that ran out of steps (it has no
// <eos> term in log p, so dividing by one more would give it a bonus)
double normalised(const Hyp& h, bool ended, double alpha) {
    const double length = static_cast<double>(h.tokens.size() + (ended ? 1 : 0));
    return length == 0 ? h.logp : h.logp / std::pow(length, alpha);
}

// Each sentence's best finished hypothesis (the first of equal scores, as
// max_element keeps it) and, for n_best > 1, its n best in that order.
std::vector<Decoded> best_of(const Finished& finished, int64_t n_best) {
    std::vector<Decoded> out(finished.size());
    for (size_t b = 0; b < finished.size(); ++b) {
        if (finished[b].empty()) continue;
        std::vector<std::pair<double, Hyp>> ranked = finished[b];
        std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        out[b].tokens = ranked.front().second.tokens;
        out[b].score = ranked.front().first;
        if (n_best > 1)
            for (size_t i = 0; i < ranked.size() && static_cast<int64_t>(i) < n_best; ++i)
                out[b].n_best.push_back({ranked[i].second.tokens, ranked[i].first});
    }
    return out;
}

// A batch being searched: the decoder's state (KV caches, one row per live
// hypothesis), the source lengths (one per sentence), the live hypotheses
// and the finished ones.
struct SearchState {
    nn::DecoderState decoder;
    Tensor source_lens;  // (B)
    std::vector<Hyp> live;
    Finished finished;
};

// The encoder, once for the batch: src (B, S), lens (B); one live row per sentence.
SearchState encode(nn::EncoderDecoder& model, const Tensor& src, const Tensor& lens) {
    const Variable enc = model.encoder->forward(src, lens);  // (B, S, D)
    const int64_t B = src.size(0);
    SearchState s{.decoder = model.decoder->init_state(enc, lens),
                  .source_lens = lens,
                  .live = std::vector<Hyp>(static_cast<size_t>(B)),
                  .finished = Finished(static_cast<size_t>(B))};
    for (int64_t b = 0; b < B; ++b) s.live[b].sentence = b;
    return s;
}

// The end of a beam search: the hypotheses still live ran out of steps and
// finish as they are; each sentence's best (and n best).
std::vector<Decoded> finish_beams(SearchState& s, const DecodeOptions& o) {
    for (const Hyp& h : s.live) s.finished[h.sentence].emplace_back(normalised(h, false, o.length_penalty), h);
    return best_of(s.finished, o.n_best);
}

// Rows i of the new batch continue rows parents[i] of the old one, and
// s.live[i] is the hypothesis of row i: the self-attention caches are gathered
// to follow them (nothing moves when every row stays where it was); the
// encoder's keys and values stay once per sentence, and each row reads its
// sentence's (cross_rows).
void follow_survivors(SearchState& s, const std::vector<int64_t>& parents, int64_t H) {
    const std::vector<Hyp>& live = s.live;
    bool same_rows = s.decoder.cross_rows.size() == parents.size();
    for (size_t i = 0; i < parents.size() && same_rows; ++i) same_rows = parents[i] == static_cast<int64_t>(i);
    if (!same_rows) {
        const std::vector<int64_t> self_rows = nn::head_rows(parents, H);
        for (auto& cache : s.decoder.caches) cache.self.select_rows(self_rows);
    }
    s.decoder.cross_rows.resize(live.size());
    for (size_t i = 0; i < live.size(); ++i) s.decoder.cross_rows[i] = live[i].sentence;
    const auto n = static_cast<int64_t>(live.size());
    s.decoder.enc_valid_lens =
        core::index_select(s.source_lens, 0, core::from_vector(s.decoder.cross_rows, {n}));  // (n)
}

// The last token of every live hypothesis (<bos> at first) through the
// decoder's blocks, advancing the caches: (n, D), before the output layer.
Tensor step_hidden(nn::EncoderDecoder& model, SearchState& s, int64_t bos) {
    const std::vector<Hyp>& live = s.live;
    const auto n = static_cast<int64_t>(live.size());
    std::vector<int64_t> last(live.size());
    for (size_t i = 0; i < live.size(); ++i) last[i] = live[i].tokens.empty() ? bos : live[i].tokens.back();
    const Tensor hidden = model.decoder->forward_step_hidden(core::from_vector(last, {n, 1}), s.decoder).value();
    return hidden.reshape({n, hidden.size(-1)});  // (n, D)
}

// The output layer for blocks of at most this many rows at a time. BLAS
// copies (packs) the whole (V, D) weight at every call, which for a few rows
// costs as much as the product: 64 rows spent a quarter of a beam search's
// time in OpenBLAS's packing. 512 rows pack it once per step for most
// batches, and still bound the logits held at once (8 MB at V = 8000).
constexpr int64_t kOutputRows = 512;

// Calls pick(logits, first) for each block of rows [first, first + rows) of
// hidden (n, D), logits (rows, V) = dense(hidden rows).
template <class Pick>
void for_output_blocks(nn::Linear& dense, const Tensor& hidden, Pick&& pick) {
    const Tensor bias = dense.bias.defined() ? dense.bias.value() : Tensor();
    for (int64_t first = 0; first < hidden.size(0); first += kOutputRows) {
        const int64_t last = std::min(hidden.size(0), first + kOutputRows);
        pick(core::linear(hidden.slice(0, first, last), dense.weight.value(), bias), first);
    }
}

// ---- greedy ----------------------------------------------------------------------------------------

// One greedy step for the live rows: each row's most likely token. A row
// that picks <eos> ends (out[sentence] has its tokens and score so far); the
// rest go on. Returns the rows that go on, in order.
std::vector<int64_t> greedy_step(nn::EncoderDecoder& model, SearchState& s, std::vector<Decoded>& out,
                                 const DecodeOptions& o) {
    std::vector<Hyp>& live = s.live;
    const Tensor hidden = step_hidden(model, s, o.bos);  // (n, D)
    std::vector<int64_t> going_on;
    for_output_blocks(*model.decoder->dense, hidden, [&](const Tensor& logits, int64_t first) {
        // the next tokens and their log-probabilities, (rows) each (the other V - 1 are not needed)
        const core::ArgmaxLogSoftmax pick = core::argmax_log_softmax(logits);
        const int64_t* ids = pick.ids.data<int64_t>();
        for (int64_t r = 0; r < logits.size(0); ++r) {
            Hyp& h = live[static_cast<size_t>(first + r)];
            out[h.sentence].score += pick.log_probs.at({r});
            if (ids[r] == o.eos) {
                out[h.sentence].tokens = std::move(h.tokens);
                continue;
            }
            h.tokens.push_back(ids[r]);
            going_on.push_back(first + r);
        }
    });
    return going_on;
}

// For greedy decoding of one sentence: the last block's attention weights of this step.
void keep_attention(nn::EncoderDecoder& model, Decoded& d) {
    const int64_t H = model.decoder->options.num_heads;
    const auto w = model.decoder->attention_weights();
    d.cross_attention.push_back(w[1].back().reshape({H, -1}).clone());  // (H, S)
    d.self_attention.push_back(w[0].back().reshape({H, -1}).clone());   // (H, step+1)
}

// ---- beam ------------------------------------------------------------------------------------------

// One candidate continuation: row `row`'s hypothesis extended by token `id`.
struct Candidate {
    double total;  // the hypothesis's log p + the token's
    int64_t row, id;
};

// Larger total first; equal totals by row, then by id (as one pass over rows and ids in order keeps them).
bool better(const Candidate& a, const Candidate& b) {
    return a.total > b.total || (a.total == b.total && (a.row < b.row || (a.row == b.row && a.id < b.id)));
}

// Every row's K best continuations, (n, K), best first. A sentence's K best
// over all its rows' n·V continuations are among these: within a row the
// total orders the tokens as their log-probabilities do.
std::vector<Candidate> row_candidates(nn::EncoderDecoder& model, const Tensor& hidden, const std::vector<Hyp>& live,
                                      int64_t K) {
    std::vector<Candidate> out(static_cast<size_t>(hidden.size(0) * K));
    for_output_blocks(*model.decoder->dense, hidden, [&](const Tensor& logits, int64_t first) {
        const core::ArgmaxLogSoftmax top = core::top_k_log_softmax(logits, K);  // (rows, K) each
        const int64_t* ids = top.ids.data<int64_t>();
        const Tensor lp = top.log_probs.to(core::DType::float64);
        const double* lps = lp.data<double>();
        for (int64_t r = 0; r < logits.size(0); ++r)
            for (int64_t j = 0; j < K; ++j) {
                const int64_t row = first + r;
                out[static_cast<size_t>(row * K + j)] = {live[static_cast<size_t>(row)].logp + lps[r * K + j], row,
                                                         ids[r * K + j]};
            }
    });
    return out;
}

// The rows of each sentence's hypotheses, [first, last) (they are contiguous, sentences in order).
std::vector<std::pair<int64_t, int64_t>> sentence_rows(const std::vector<Hyp>& live) {
    std::vector<std::pair<int64_t, int64_t>> groups;
    const auto n = static_cast<int64_t>(live.size());
    for (int64_t first = 0, last = 0; first < n; first = last) {
        while (last < n && live[last].sentence == live[first].sentence) ++last;
        groups.emplace_back(first, last);
    }
    return groups;
}

// One beam step's choice: per sentence, the K best of its rows' candidates
// (cands, K per row), best first, sentences in order.
std::vector<Candidate> choose(const std::vector<Hyp>& live, const std::vector<Candidate>& cands, int64_t K) {
    std::vector<Candidate> chosen;
    for (const auto& [first, last] : sentence_rows(live)) {
        std::vector<Candidate> best(cands.begin() + first * K, cands.begin() + last * K);
        const auto keep = std::min<int64_t>(K, static_cast<int64_t>(best.size()));
        std::partial_sort(best.begin(), best.begin() + keep, best.end(), better);
        chosen.insert(chosen.end(), best.begin(), best.begin() + keep);
    }
    return chosen;
}

// The chosen continuations applied: those ending in <eos> finish; the others
// are the next live hypotheses, returned, with their parent rows in `parents`.
std::vector<Hyp> advance(const std::vector<Hyp>& live, const std::vector<Candidate>& chosen, const DecodeOptions& o,
                         Finished& finished, std::vector<int64_t>& parents) {
    std::vector<Hyp> next;
    parents.clear();
    for (const Candidate& c : chosen) {
        Hyp h{live[c.row].tokens, c.total, live[c.row].sentence};
        if (c.id == o.eos) {
            finished[h.sentence].emplace_back(normalised(h, true, o.length_penalty), h);
        } else {
            h.tokens.push_back(c.id);
            next.push_back(std::move(h));
            parents.push_back(c.row);
        }
    }
    return next;
}

// Early stopping: a sentence is decided once it has K finished hypotheses
// and none of its live ones scores better, as it stands, than the K-th best
// of them (the rule of Hugging Face's beam search without early_stopping). A
// live hypothesis could still improve, but rarely does: with the default
// model, 5 of 1,000 translations differ from the exhaustive search's and
// validation BLEU moves by +0.04, for a third of the work. Without it a sentence runs until its K
// best continuations all end, which weak hypotheses rarely do before the
// step limit. The decided sentences' live rows leave the batch (with their
// entries in `parents`).
void retire_decided(std::vector<Hyp>& live, std::vector<int64_t>& parents, const Finished& finished,
                    const DecodeOptions& o) {
    if (o.exhaustive) return;
    const int64_t K = o.beam;
    std::vector<double> kth_best(finished.size(), -std::numeric_limits<double>::infinity());  // per sentence
    std::vector<bool> has_k(finished.size(), false);
    for (size_t b = 0; b < finished.size(); ++b) {
        if (static_cast<int64_t>(finished[b].size()) < K) continue;
        std::vector<double> scores;
        for (const auto& f : finished[b]) scores.push_back(f.first);
        std::nth_element(scores.begin(), scores.begin() + (K - 1), scores.end(), std::greater<>());
        kth_best[b] = scores[static_cast<size_t>(K - 1)];
        has_k[b] = true;
    }
    std::vector<bool> still_open(finished.size(), false);
    for (const Hyp& h : live)
        if (!has_k[h.sentence] || normalised(h, false, o.length_penalty) > kth_best[h.sentence])
            still_open[h.sentence] = true;
    size_t kept = 0;
    for (size_t i = 0; i < live.size(); ++i)
        if (still_open[live[i].sentence]) {
            if (kept != i) live[kept] = std::move(live[i]), parents[kept] = parents[i];
            ++kept;
        }
    live.resize(kept);
    parents.resize(kept);
}

}  // namespace

// ---- the searches ----------------------------------------------------------------------------------

std::vector<Decoded> greedy_decode(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                                   const DecodeOptions& options) {
    check_source(src, src_valid_len, "greedy_decode");
    check_options(options, "greedy_decode");
    nn::EvalScope eval(model);
    autograd::NoGradGuard no_grad;
    const int64_t B = src.size(0), H = model.decoder->options.num_heads;
    SearchState s = encode(model, src, src_valid_len);
    std::vector<Decoded> out(static_cast<size_t>(B));
    for (int64_t step = 0; step < options.max_steps && !s.live.empty(); ++step) {
        const std::vector<int64_t> going_on = greedy_step(model, s, out, options);
        if (options.keep_attention && B == 1) keep_attention(model, out[0]);
        std::vector<Hyp> next;  // the rows that go on, the others have ended
        for (int64_t r : going_on) next.push_back(std::move(s.live[r]));
        s.live = std::move(next);
        if (s.live.empty() || step + 1 == options.max_steps) break;
        follow_survivors(s, going_on, H);
    }
    for (const Hyp& h : s.live) out[h.sentence].tokens = h.tokens;  // ran out of steps
    return out;
}

std::vector<Decoded> beam_decode_batch(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                                       const DecodeOptions& options) {
    check_source(src, src_valid_len, "beam_decode");
    check_options(options, "beam_decode");
    nn::EvalScope eval(model);
    autograd::NoGradGuard no_grad;
    const int64_t K = options.beam, H = model.decoder->options.num_heads;
    SearchState s = encode(model, src, src_valid_len);  // rows: every sentence's live hypotheses, in order
    std::vector<int64_t> parents;
    // A sentence stops when it is decided (retire_decided) or, exhaustive, when its K best continuations have all ended.
    for (int64_t step = 0; step < options.max_steps && !s.live.empty(); ++step) {
        const Tensor hidden = step_hidden(model, s, options.bos);  // (n, D)
        const std::vector<Candidate> chosen = choose(s.live, row_candidates(model, hidden, s.live, K), K);
        s.live = advance(s.live, chosen, options, s.finished, parents);
        retire_decided(s.live, parents, s.finished, options);
        if (!s.live.empty() && step + 1 < options.max_steps) follow_survivors(s, parents, H);
    }
    return finish_beams(s, options);
}

std::vector<Decoded> decode_batch(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                                  const DecodeOptions& options) {
    check_options(options, "decode_batch");
    return options.beam > 1 ? beam_decode_batch(model, src, src_valid_len, options)
                            : greedy_decode(model, src, src_valid_len, options);
}

Decoded beam_decode(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                    const DecodeOptions& options) {
    check_source(src, src_valid_len, "beam_decode");
    if (src.size(0) != 1) fail<ShapeError>("beam_decode: decodes one sentence, got a batch of {}", src.size(0));
    return beam_decode_batch(model, src, src_valid_len, options).front();
}

// ---- reference ---------------------------------------------------------------------------------------

namespace reference {

std::vector<Decoded> greedy_decode(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                                   const DecodeOptions& options) {
    check_source(src, src_valid_len, "greedy_decode");
    nn::EvalScope eval(model);
    autograd::NoGradGuard no_grad;
    const int64_t B = src.size(0);
    SearchState s = encode(model, src, src_valid_len);
    std::vector<Decoded> out(B);
    std::vector<bool> done(B, false);
    Tensor dec_X = core::full({B, 1}, static_cast<double>(options.bos), core::DType::int64);
    for (int64_t step = 0; step < options.max_steps; ++step) {
        const Tensor logits = model.decoder->forward_step(dec_X, s.decoder).value();  // (B, 1, V)
        const core::ArgmaxLogSoftmax pick = core::argmax_log_softmax(logits);         // (B, 1) each
        bool all_done = true;
        for (int64_t b = 0; b < B; ++b) {
            if (done[b]) continue;
            const auto id = static_cast<int64_t>(pick.ids.at({b, 0}));
            out[b].score += pick.log_probs.at({b, 0});
            done[b] = id == options.eos;
            if (!done[b]) out[b].tokens.push_back(id), all_done = false;
        }
        if (all_done) break;
        dec_X = pick.ids;
    }
    return out;
}

std::vector<Decoded> beam_decode_batch(nn::EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_len,
                                       const DecodeOptions& options) {
    check_source(src, src_valid_len, "beam_decode");
    check_options(options, "beam_decode");
    nn::EvalScope eval(model);
    autograd::NoGradGuard no_grad;
    const int64_t K = options.beam, H = model.decoder->options.num_heads;
    SearchState s = encode(model, src, src_valid_len);
    std::vector<Hyp>& live = s.live;
    std::vector<int64_t> parents;
    for (int64_t step = 0; step < options.max_steps && !live.empty(); ++step) {
        const auto n = static_cast<int64_t>(live.size());
        std::vector<int64_t> fed(static_cast<size_t>(n));  // each row's last token
        for (int64_t i = 0; i < n; ++i) fed[i] = live[i].tokens.empty() ? options.bos : live[i].tokens.back();
        const Tensor logp =
            core::log_softmax(model.decoder->forward_step(core::from_vector(fed, {n, 1}), s.decoder).value());
        const int64_t V = logp.size(-1);
        const float* lp = logp.data<float>();  // (n, 1, V)
        // per sentence, its K best of all its rows' n·V candidates, one by one
        std::vector<Candidate> chosen;
        for (const auto& [first, last] : sentence_rows(live)) {
            std::vector<Candidate> best;  // at most K, best first
            for (int64_t r = first; r < last; ++r)
                for (int64_t id = 0; id < V; ++id) {
                    const Candidate c{live[r].logp + lp[r * V + id], r, id};
                    if (static_cast<int64_t>(best.size()) == K && !better(c, best.back())) continue;
                    best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
                    if (static_cast<int64_t>(best.size()) > K) best.pop_back();
                }
            chosen.insert(chosen.end(), best.begin(), best.end());
        }
        live = advance(live, chosen, options, s.finished, parents);
        retire_decided(live, parents, s.finished, options);
        if (!live.empty()) follow_survivors(s, parents, H);
    }
    return finish_beams(s, options);
}

}  // namespace reference

}  // namespace tformer::tasks
