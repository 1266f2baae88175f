/// \file
/// chrF (Popović, 2015): the F-score of character n-grams, the second figure
/// a translation run reports beside corpus BLEU. It credits a translation
/// for every shared piece of a word ("mangé" against "mange" shares
/// m, a, n, g, ma, an, ng, ..., mang), so it moves smoothly where BLEU's
/// exact-word matches jump, and it needs no tokenizer.
///
/// The definition is sacreBLEU's default chrF2 (its figures are the field's
/// common reference): whitespace removed, character n-grams of orders 1..6
/// counted per sentence, each hypothesis n-gram matched at most as often as
/// it occurs in the reference. Per order n over the corpus:
///   P_n = matches / hypothesis n-grams,  R_n = matches / reference n-grams,
/// both averaged over the orders that occur in hypothesis and reference
/// alike (P, R), and
///   chrF = (1 + beta^2) P R / (beta^2 P + R),  beta = 2 (recall weighs more).
/// With several references, each sentence counts the one whose sentence
/// chrF is highest (the first on a tie).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tasks {

/// One sentence's counts for each n-gram order: hypothesis n-grams,
/// reference n-grams, matched n-grams (clipped).
struct ChrfStats {
    std::vector<int64_t> hyp;    ///< hypothesis n-grams of order n at index n - 1
    std::vector<int64_t> ref;    ///< reference n-grams of order n at index n - 1
    std::vector<int64_t> match;  ///< matched n-grams of order n at index n - 1
};

/// The counts of one hypothesis against the best of its references (see the
/// file comment). Throws ValueError on invalid UTF-8, no references, or
/// order < 1.
ChrfStats chrf_stats(const std::string& hypothesis, const std::vector<std::string>& references, int order = 6);

/// chrF in [0, 100] of counts summed over a corpus (or of one sentence's).
double chrf_score(const ChrfStats& stats, double beta = 2.0);

/// Corpus chrF2 of `hypotheses` against `references` (refs[i]: every
/// reference of hypothesis i, at least one); sizes that differ throw
/// ValueError.
double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::vector<std::string>>& references,
                   int order = 6, double beta = 2.0);

}  // namespace tformer::tasks
