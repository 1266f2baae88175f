// d2l's sentence BLEU (seed 000 prints it per translation) and Papineni's
// corpus BLEU.
#include "tasks/bleu.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace tformer::tasks {

namespace {

// An n-gram as views of consecutive tokens; compared token by token, so
// tokens that contain spaces cannot run into each other as joined strings could.
using NGram = std::vector<std::string_view>;
using NGramCounts = std::map<NGram, int64_t>;

// Counts of every n-gram of `line` (len - n + 1 of them, none if len < n).
NGramCounts count_ngrams(const TokenLine& line, int n) {
    NGramCounts counts;
    const auto len = static_cast<int64_t>(line.size());
    for (int64_t i = 0; i + n <= len; ++i) ++counts[NGram(line.begin() + i, line.begin() + i + n)];
    return counts;
}

// sum over pred's n-grams of min(count in pred, clip[n-gram]): d2l's loop
// "match and decrement the label count" counts exactly this.
int64_t clipped_matches(const NGramCounts& pred, const NGramCounts& clip) {
    int64_t matches = 0;
    for (const auto& [gram, count] : pred) {
        const auto it = clip.find(gram);
        if (it != clip.end()) matches += std::min(count, it->second);
    }
    return matches;
}

}  // namespace

// d2l:
//   score = math.exp(min(0, 1 - len_label / len_pred))
//   for n in range(1, k + 1):
//       (count label n-grams; each pred n-gram found with count > 0 is a match
//        and decrements the count)
//       score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
double bleu(const TokenLine& pred, const TokenLine& label, int k) {
    if (k < 1) fail<ValueError>("bleu: k must be >= 1, got {}", k);
    const auto len_pred = static_cast<int64_t>(pred.size()), len_label = static_cast<int64_t>(label.size());
    if (len_pred < k) return 0.0;  // d2l: ZeroDivisionError at n = len_pred + 1
    double score = std::exp(std::min(0.0, 1.0 - static_cast<double>(len_label) / static_cast<double>(len_pred)));
    for (int n = 1; n <= k; ++n) {
        const int64_t matches = clipped_matches(count_ngrams(pred, n), count_ngrams(label, n));
        const double p_n = static_cast<double>(matches) / static_cast<double>(len_pred - n + 1);
        score *= std::pow(p_n, std::pow(0.5, n));
    }
    return score;
}

double bleu(std::string_view pred_seq, std::string_view label_seq, int k) {
    return bleu(tokenize(pred_seq), tokenize(label_seq), k);
}

CorpusBleu corpus_bleu(const std::vector<TokenLine>& preds, const std::vector<std::vector<TokenLine>>& refs,
                       int max_n) {
    if (max_n < 1) fail<ValueError>("corpus_bleu: max_n must be >= 1, got {}", max_n);
    if (preds.size() != refs.size())
        fail<ValueError>("corpus_bleu: {} predictions but {} reference lists", preds.size(), refs.size());
    std::vector<int64_t> matches(static_cast<size_t>(max_n), 0), totals(static_cast<size_t>(max_n), 0);
    CorpusBleu result;
    for (size_t s = 0; s < preds.size(); ++s) {
        const TokenLine& pred = preds[s];
        if (refs[s].empty()) fail<ValueError>("corpus_bleu: prediction {} has no reference", s);
        const auto c = static_cast<int64_t>(pred.size());
        // Effective reference length: the one closest to c, the shorter on a tie.
        int64_t best = -1;
        for (const TokenLine& ref : refs[s]) {
            const auto r = static_cast<int64_t>(ref.size());
            if (best < 0 || std::abs(r - c) < std::abs(best - c) || (std::abs(r - c) == std::abs(best - c) && r < best))
                best = r;
        }
        result.pred_length += c;
        result.ref_length += best;
        for (int n = 1; n <= max_n; ++n) {
            // clip[g] = max over references of count_ref(g)
            NGramCounts clip;
            for (const TokenLine& ref : refs[s])
                for (const auto& [gram, count] : count_ngrams(ref, n)) clip[gram] = std::max(clip[gram], count);
            matches[n - 1] += clipped_matches(count_ngrams(pred, n), clip);
            totals[n - 1] += std::max<int64_t>(0, c - n + 1);
        }
    }
    double log_sum = 0.0;
    bool any_zero = false;
    for (int n = 0; n < max_n; ++n) {
        const double p = totals[n] > 0 ? static_cast<double>(matches[n]) / static_cast<double>(totals[n]) : 0.0;
        result.precisions.push_back(p);
        if (p == 0.0)
            any_zero = true;
        else
            log_sum += std::log(p);
    }
    const auto c = static_cast<double>(result.pred_length), r = static_cast<double>(result.ref_length);
    result.brevity_penalty = c == 0.0 ? 0.0 : c > r ? 1.0 : std::exp(1.0 - r / c);
    result.score = any_zero ? 0.0 : result.brevity_penalty * std::exp(log_sum / max_n);
    return result;
}

CorpusBleu corpus_bleu(const std::vector<TokenLine>& preds, const std::vector<TokenLine>& refs, int max_n) {
    std::vector<std::vector<TokenLine>> wrapped;
    wrapped.reserve(refs.size());
    for (const TokenLine& ref : refs) wrapped.push_back({ref});
    return corpus_bleu(preds, wrapped, max_n);
}

}  // namespace tformer::tasks
