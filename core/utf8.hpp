/// \file
/// UTF-8 text: validation, lowercasing as Python's str.lower() does, and
/// making any bytes safe to draw. The one place that calls utf8proc (Debian
/// libutf8proc-dev), as core/blas.cpp is for BLAS; the corpus reader, the
/// safetensors reader and the plots all come here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tformer::core {

/// Byte offset of the first byte that does not begin a well-formed UTF-8
/// sequence, or std::string_view::npos when `text` is all well-formed.
/// Well-formed is the Unicode standard's (table 3-7): no stray continuation
/// bytes, no overlong forms, no surrogates, nothing above U+10FFFF, no
/// sequence cut short.
size_t find_invalid_utf8(std::string_view text);

/// True when `text` is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

/// `text` lowercased exactly as Python 3's str.lower(): every code point's
/// Unicode lowercase mapping, including the full mappings (U+0130 İ becomes
/// "i̇", i and U+0307) and the Final_Sigma rule (Σ at the end of a word is ς,
/// elsewhere σ). d2l's preprocess_nmt lowercases with str.lower(). Throws
/// ValueError naming the byte on invalid UTF-8.
std::string utf8_lower(std::string_view text);

/// The length of the longest prefix of `text` of at most `limit` bytes that
/// does not end inside a character (for messages that show the start of a
/// long name); the whole length when it is within `limit`.
size_t utf8_prefix_length(std::string_view text, size_t limit);

/// The length in bytes of the character that starts at text[pos] (1 to 4),
/// or 1 when the byte there does not begin a well-formed sequence: stepping
/// by it visits every character and never stops inside one. `pos` must be
/// below text.size().
size_t utf8_char_length(std::string_view text, size_t pos);

/// The columns `text` takes on a terminal: utf8proc_charwidth of each
/// character (2 for East Asian wide and full-width characters, 0 for
/// combining marks, 1 for the rest), and 1 for each byte that does not begin
/// a well-formed sequence.
int utf8_display_width(std::string_view text);

/// `text` with each byte that does not begin a well-formed sequence replaced
/// by U+FFFD (�): what a picture shows for bytes that are not text.
std::string utf8_replace_invalid(std::string_view text);

/// The code points of `text`, in order. Throws ValueError naming `what` and
/// the byte on invalid UTF-8.
std::u32string utf8_code_points(std::string_view text, std::string_view what);

/// True for the code points Python 3's str.isspace() calls whitespace:
/// general category Zs or bidirectional class WS, B or S. Besides ASCII's
/// space, tab and line ends, that is U+00A0 and U+202F, the no-break spaces
/// French text puts before ? and !.
bool is_unicode_space(char32_t cp);

}  // namespace tformer::core
