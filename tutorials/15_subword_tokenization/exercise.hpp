// Tutorial 15's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_15_subword_tokenization --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_15_subword_tokenization
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace exercise {

/// A word as a list of symbols, and how often the word occurs.
struct Word {
    std::vector<std::string> symbols;
    int64_t count = 0;
};
using Pair = std::pair<std::string, std::string>;

/// The pair WordPiece merges next: the adjacent pair (a, b) with the largest
///   score = count(ab) / (count(a) · count(b))
/// where count(ab) counts the pair's occurrences and count(a), count(b) the
/// symbols' occurrences, each weighted by the word counts. Ties: the pair
/// that sorts first (std::pair's <).
Pair wordpiece_best_pair(const std::vector<Word>& words);

}  // namespace exercise
