// Tutorial 15 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_15_subword_tokenization --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include <map>

namespace exercise {

Pair wordpiece_best_pair(const std::vector<Word>& words) {
    std::map<Pair, int64_t> pairs;
    for (const Word& w : words)
        for (size_t i = 0; i + 1 < w.symbols.size(); ++i) pairs[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    // TODO: also count every symbol (weighted by the word counts) and pick the pair with the
    // largest count(ab) / (count(a) · count(b)); keep the first pair on a tie.
    // This placeholder is BPE's choice: the most frequent pair.
    Pair best;
    int64_t most = -1;
    for (const auto& [pair, n] : pairs)
        if (n > most) best = pair, most = n;
    return best;
}

}  // namespace exercise
