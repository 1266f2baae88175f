// Tutorial 13 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include <cctype>

namespace exercise {

std::string preprocess_nmt(std::string_view line) {
    // 1. the two no-break spaces become plain spaces
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
        if (line.substr(i, 3) == "\u202F") {
            text += ' ';
            i += 2;
        } else if (line.substr(i, 2) == "\u00A0") {
            text += ' ';
            i += 1;
        } else {
            text += line[i];
        }
    }
    // 2. lowercase: ASCII, and Latin-1 capitals À..Þ (C3 80 .. C3 9E) except × (C3 97)
    for (size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            text[i] = static_cast<char>(std::tolower(byte));
        } else if (byte == 0xC3 && i + 1 < text.size()) {
            const auto next = static_cast<unsigned char>(text[i + 1]);
            if (next >= 0x80 && next <= 0x9E && next != 0x97) text[i + 1] = static_cast<char>(next + 0x20);
            ++i;
        }
    }
    // 3. a space before , . ! ? that follows a non-space
    std::string out;
    for (char ch : text) {
        const bool punctuation = ch == ',' || ch == '.' || ch == '!' || ch == '?';
        if (punctuation && !out.empty() && out.back() != ' ') out += ' ';
        out += ch;
    }
    return out;
}

}  // namespace exercise
