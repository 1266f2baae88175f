// Tutorial 15 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include <map>

namespace exercise {

Pair wordpiece_best_pair(const std::vector<Word>& words) {
    std::map<Pair, int64_t> pairs;
    std::map<std::string, int64_t> symbols;
    for (const Word& w : words) {
        for (const std::string& s : w.symbols) symbols[s] += w.count;
        for (size_t i = 0; i + 1 < w.symbols.size(); ++i) pairs[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    }
    Pair best;
    double top = -1;
    for (const auto& [pair, n] : pairs) {  // std::map: pairs in sorted order, so '>' keeps the first on a tie
        const double score = static_cast<double>(n) / (static_cast<double>(symbols[pair.first]) * symbols[pair.second]);
        if (score > top) best = pair, top = score;
    }
    return best;
}

}  // namespace exercise
