// Tutorial 13's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_13_translation --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_13_translation
#pragma once

#include <string>
#include <string_view>

namespace exercise {

/// d2l's preprocess_nmt on one line of fra.txt (UTF-8):
///   1. U+202F NARROW NO-BREAK SPACE and U+00A0 NO-BREAK SPACE become ' '
///   2. lowercase (ASCII letters, and the Latin-1 capitals the corpus has: À..Þ
///      except ×, written as two bytes 0xC3 0x80 .. 0xC3 0x9E, are 0xC3 0xA0 .. 0xC3 0xBE)
///   3. a space goes before every , . ! ? that follows a character other than a space
std::string preprocess_nmt(std::string_view line);

}  // namespace exercise
