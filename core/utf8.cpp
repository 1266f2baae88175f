// All of tformer's Unicode goes through utf8proc here.
#include "core/utf8.hpp"

#include "core/error.hpp"

#include <utf8proc.h>

namespace tformer::core {

namespace {

// The code point that starts at text[pos] and its length in bytes; length <= 0 when ill-formed.
struct CodePoint {
    int32_t value = 0;
    ptrdiff_t length = 0;
};

CodePoint decode_at(std::string_view text, size_t pos) {
    CodePoint c;
    c.length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                static_cast<utf8proc_ssize_t>(text.size() - pos), &c.value);
    return c;
}

void append(std::string& out, int32_t cp) {
    utf8proc_uint8_t bytes[4];
    const utf8proc_ssize_t n = utf8proc_encode_char(cp, bytes);
    out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
}

// ---- the Final_Sigma rule -----------------------------------------------------------------
// Unicode's table 3-17 (SpecialCasing.txt): capital sigma lowercases to final
// ς when a cased letter comes before it and none after it, with
// case-ignorable characters (marks, apostrophes, full stops ...) skipped on
// both sides: C (I)* Σ !((I)* C).

// Case_Ignorable: general category Mn, Me, Cf, Lm or Sk, or Word_Break
// MidLetter, MidNumLet or Single_Quote (the list below, from
// WordBreakProperty.txt, which utf8proc does not carry).
bool is_case_ignorable(int32_t cp) {
    switch (utf8proc_category(cp)) {
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_SK: return true;
        default: break;
    }
    switch (cp) {
        case 0x0027:
        case 0x002E:
        case 0x003A:
        case 0x00B7:
        case 0x0387:
        case 0x055F:
        case 0x05F4:
        case 0x2018:
        case 0x2019:
        case 0x2024:
        case 0x2027:
        case 0xFE13:
        case 0xFE52:
        case 0xFE55:
        case 0xFF07:
        case 0xFF0E:
        case 0xFF1A: return true;
        default: return false;
    }
}

// Cased: a letter of category Lu, Ll or Lt, or anything with a case mapping
// (circled letters, Roman numerals), or the rest of Other_Lowercase and
// Other_Uppercase that is not case-ignorable anyway: ª, º and the squared
// and negative circled capitals U+1F130..1F189 (PropList.txt, which utf8proc
// does not carry).
bool is_cased(int32_t cp) {
    const utf8proc_category_t cat = utf8proc_category(cp);
    if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
    if (utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp) return true;
    return cp == 0xAA || cp == 0xBA || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
           (cp >= 0x1F170 && cp <= 0x1F189);
}

// The start of the code point before byte `pos` of well-formed text[0, pos).
size_t previous_start(std::string_view text, size_t pos) {
    do --pos;
    while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
    return pos;
}

// True when the Σ at text[pos, pos + 2) ends a word. The text before it is
// well-formed (utf8_lower has read it); after it, an ill-formed byte ends the scan.
bool is_final_sigma(std::string_view text, size_t pos) {
    bool cased_before = false;
    for (size_t i = pos; i > 0;) {
        i = previous_start(text, i);
        const int32_t cp = decode_at(text, i).value;
        if (is_case_ignorable(cp)) continue;
        cased_before = is_cased(cp);
        break;
    }
    if (!cased_before) return false;
    for (size_t i = pos + 2; i < text.size();) {
        const CodePoint c = decode_at(text, i);
        if (c.length <= 0) return true;
        if (!is_case_ignorable(c.value)) return !is_cased(c.value);
        i += static_cast<size_t>(c.length);
    }
    return true;
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
        if (static_cast<unsigned char>(text[pos]) < 0x80) {  // ASCII: most of the corpus
            ++pos;
            continue;
        }
        const CodePoint c = decode_at(text, pos);
        if (c.length <= 0) return pos;
        pos += static_cast<size_t>(c.length);
    }
    return std::string_view::npos;
}

bool is_valid_utf8(std::string_view text) { return find_invalid_utf8(text) == std::string_view::npos; }

std::string utf8_lower(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const auto byte = static_cast<unsigned char>(text[pos]);
        if (byte < 0x80) {
            out += static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte + ('a' - 'A') : byte);
            ++pos;
            continue;
        }
        const CodePoint c = decode_at(text, pos);
        if (c.length <= 0) fail<ValueError>("utf8_lower: invalid UTF-8 at byte {} (0x{:02X})", pos, byte);
        if (c.value == 0x130) {  // the one full mapping of SpecialCasing.txt: İ -> i + COMBINING DOT ABOVE
            out += 'i';
            append(out, 0x307);
        } else if (c.value == 0x3A3) {
            append(out, is_final_sigma(text, pos) ? 0x3C2 : 0x3C3);
        } else {
            append(out, utf8proc_tolower(c.value));
        }
        pos += static_cast<size_t>(c.length);
    }
    return out;
}

std::string utf8_replace_invalid(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const CodePoint c = decode_at(text, pos);
        if (c.length > 0) {
            out.append(text.substr(pos, static_cast<size_t>(c.length)));
            pos += static_cast<size_t>(c.length);
            continue;
        }
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER for this byte
        ++pos;
    }
    return out;
}

size_t utf8_char_length(std::string_view text, size_t pos) {
    const CodePoint c = decode_at(text, pos);
    return c.length > 0 ? static_cast<size_t>(c.length) : 1;
}

int utf8_display_width(std::string_view text) {
    int width = 0;
    for (size_t pos = 0; pos < text.size();) {
        const CodePoint c = decode_at(text, pos);
        if (c.length <= 0) {
            ++width, ++pos;
            continue;
        }
        width += utf8proc_charwidth(c.value);
        pos += static_cast<size_t>(c.length);
    }
    return width;
}

size_t utf8_prefix_length(std::string_view text, size_t limit) {
    if (text.size() <= limit) return text.size();
    size_t n = limit;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // text[n] continues a character
    return n;
}

std::u32string utf8_code_points(std::string_view text, std::string_view what) {
    std::u32string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const CodePoint c = decode_at(text, pos);
        if (c.length <= 0)
            fail<ValueError>("{}: invalid UTF-8 at byte {} (0x{:02X})", what, pos,
                             static_cast<unsigned char>(text[pos]));
        out += static_cast<char32_t>(c.value);
        pos += static_cast<size_t>(c.length);
    }
    return out;
}

bool is_unicode_space(char32_t cp) {
    if (cp > 0x10FFFF) return false;
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

}  // namespace tformer::core
