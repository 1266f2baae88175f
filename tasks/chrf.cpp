#include "tasks/chrf.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace tformer::tasks {

namespace {

using Counts = std::unordered_map<std::u32string_view, int64_t>;

// The text's code points without whitespace (sacreBLEU joins str.split()).
std::u32string characters(const std::string& text) {
    std::u32string cps = core::utf8_code_points(text, "chrF");
    std::erase_if(cps, core::is_unicode_space);
    return cps;
}

// The n-grams of each order 1..order, as views into `text` (which must outlive them).
std::vector<Counts> char_ngrams(const std::u32string& text, int order) {
    std::vector<Counts> out(static_cast<size_t>(order));
    const std::u32string_view view(text);
    for (int n = 1; n <= order; ++n)
        for (size_t i = 0; i + static_cast<size_t>(n) <= view.size(); ++i) ++out[n - 1][view.substr(i, n)];
    return out;
}

int64_t total(const Counts& c) {
    int64_t sum = 0;
    for (const auto& [gram, count] : c) sum += count;
    return sum;
}

ChrfStats match(const std::vector<Counts>& hyp, const std::vector<Counts>& ref) {
    ChrfStats s;
    for (size_t n = 0; n < hyp.size(); ++n) {
        int64_t matched = 0;
        for (const auto& [gram, count] : hyp[n])
            if (const auto it = ref[n].find(gram); it != ref[n].end()) matched += std::min(count, it->second);
        // an order the reference lacks counts no hypothesis n-grams (sacreBLEU's rule)
        s.hyp.push_back(ref[n].empty() ? 0 : total(hyp[n]));
        s.ref.push_back(total(ref[n]));
        s.match.push_back(matched);
    }
    return s;
}

}  // namespace

ChrfStats chrf_stats(const std::string& hypothesis, const std::vector<std::string>& references, int order) {
    if (references.empty()) fail<ValueError>("chrF: a hypothesis needs at least one reference; got none");
    if (order < 1) fail<ValueError>("chrF: the n-gram order must be at least 1; got {}", order);
    const std::u32string hyp_text = characters(hypothesis);
    const std::vector<Counts> hyp = char_ngrams(hyp_text, order);
    ChrfStats best;
    double best_score = -1;
    for (const std::string& reference : references) {
        const std::u32string ref_text = characters(reference);
        ChrfStats s = match(hyp, char_ngrams(ref_text, order));
        if (const double score = chrf_score(s); score > best_score) {
            best_score = score;
            best = std::move(s);
        }
    }
    return best;
}

double chrf_score(const ChrfStats& s, double beta) {
    double precision = 0, recall = 0;
    int effective = 0;  // orders present in both hypothesis and reference
    for (size_t n = 0; n < s.hyp.size(); ++n) {
        if (s.hyp[n] == 0 || s.ref[n] == 0) continue;
        precision += static_cast<double>(s.match[n]) / static_cast<double>(s.hyp[n]);
        recall += static_cast<double>(s.match[n]) / static_cast<double>(s.ref[n]);
        ++effective;
    }
    if (effective == 0 || precision + recall == 0) return 0.0;
    precision /= effective;
    recall /= effective;
    const double b2 = beta * beta;
    return 100 * (1 + b2) * precision * recall / (b2 * precision + recall);
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references,
                   int order, double beta) {
    if (hypotheses.size() != references.size())
        fail<ValueError>("corpus chrF: {} hypotheses but {} reference lists", hypotheses.size(), references.size());
    const std::vector<int64_t> zeros(static_cast<size_t>(std::max(order, 1)));
    ChrfStats sum{.hyp = zeros, .ref = zeros, .match = zeros};
    for (size_t i = 0; i < hypotheses.size(); ++i) {
        const ChrfStats s = chrf_stats(hypotheses[i], references[i], order);
        for (size_t n = 0; n < s.hyp.size(); ++n) {
            sum.hyp[n] += s.hyp[n];
            sum.ref[n] += s.ref[n];
            sum.match[n] += s.match[n];
        }
    }
    return chrf_score(sum, beta);
}

}  // namespace tformer::tasks
