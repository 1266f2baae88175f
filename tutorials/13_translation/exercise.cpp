// Tutorial 13 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_13_translation --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include <cctype>

namespace exercise {

std::string preprocess_nmt(std::string_view line) {
    std::string out;
    for (char ch : line) out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    // TODO: the two no-break spaces (the bytes E2 80 AF and C2 A0) must become ' '
    //       before anything else;
    // TODO: lowercase the two-byte capitals too (Ç is C3 87, ç is C3 A7: add 0x20 to
    //       the second byte for C3 80 .. C3 9E except × = C3 97);
    // TODO: a space before , . ! ? when the previous character of the output is not a space.
    // This placeholder only lowercases ASCII.
    return out;
}

}  // namespace exercise
