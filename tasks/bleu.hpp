/// \file
/// BLEU, in the two forms the translation task reports:
///  * d2l's sentence score bleu(pred, label, k), which seed 000 prints after
///    each translation ("go . => va !,  bleu 1.000");
///  * corpus BLEU-4 (Papineni et al., 2002) for a whole validation set.
/// Both compare whitespace tokens exactly; preprocess_nmt the text first.
#pragma once

#include "tasks/text.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace tformer::tasks {

/// d2l's sentence BLEU:
///   exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n^(1 / 2^n)
/// where p_n = (n-grams of pred matched in label, each label n-gram used at
/// most as often as it occurs there) / (len_pred - n + 1). The exponents
/// 1/2, 1/4, 1/8, ... shrink with n, so a given precision of long n-grams
/// lowers the score less than the same precision of short ones; k >= 1.
/// Where d2l divides by zero (len_pred < n for some n <= k, including an
/// empty prediction) this returns 0: no n-gram of that order can match.
double bleu(const TokenLine& pred, const TokenLine& label, int k);

/// bleu() of two space-separated strings, split as d2l does (`split(' ')`,
/// see tokenize), e.g. bleu("va !", "va !", 2) == 1.
double bleu(std::string_view pred_seq, std::string_view label_seq, int k);

/// Corpus BLEU with its parts, as reported by common BLEU tools.
struct CorpusBleu {
    double score = 0.0;              ///< BP * exp(mean_n log p_n), in [0, 1]
    std::vector<double> precisions;  ///< p_1 .. p_N, clipped n-gram precisions over the corpus
    double brevity_penalty = 0.0;    ///< 1 if c > r, else exp(1 - r / c) (0 when c = 0)
    int64_t pred_length = 0;         ///< c: total tokens of all predictions
    int64_t ref_length = 0;          ///< r: total effective reference length
};

/// Papineni's corpus BLEU-N (N = max_n, 4 by default), without smoothing:
///   p_n = sum over sentences of clipped n-gram matches / sum of pred n-grams,
/// where a pred n-gram is clipped to the largest count it has in any one
/// reference of that sentence;
///   BLEU = BP * exp(sum_n log(p_n) / N), BP = min(1, exp(1 - r / c)),
/// with c the total prediction length and r the sum of the reference lengths
/// closest to each prediction's length (the shorter one on a tie). Any p_n
/// = 0 gives BLEU 0. refs[i] holds the references of preds[i] (at least one
/// each); sizes that differ, an empty reference list or max_n < 1 throw
/// ValueError.
CorpusBleu corpus_bleu(const std::vector<TokenLine>& preds, const std::vector<std::vector<TokenLine>>& refs,
                       int max_n = 4);

/// corpus_bleu() with one reference per prediction.
CorpusBleu corpus_bleu(const std::vector<TokenLine>& preds, const std::vector<TokenLine>& refs, int max_n = 4);

}  // namespace tformer::tasks
