// core/utf8: validation, Python's str.lower() and replacement of ill-formed
// bytes, through utf8proc. Expected values come from Python 3.11
// (/usr/bin/python3 on Debian 12); a test compares every code point with
// what that Python says, when it is installed.
#include "core/utf8.hpp"

#include "core/error.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::core;

TEST_CASE("find_invalid_utf8(text), is_valid_utf8(text): Unicode's well-formed sequences (table 3-7)", "[core][utf8]") {
    struct Case {
        std::string bytes;
        size_t bad;  // npos: well-formed
    };
    const size_t ok = std::string_view::npos;
    const std::vector<Case> cases = {
        {"plain ascii", ok},
        {"", ok},
        {"\xc3\xa9", ok},          // é
        {"\xe2\x80\xaf", ok},      // U+202F
        {"\xf0\x9f\x98\x80", ok},  // U+1F600
        {"\xf4\x8f\xbf\xbf", ok},  // U+10FFFF, the last code point
        {"\xef\xbf\xbf", ok},      // U+FFFF, a noncharacter but well-formed
        {"ab\x80", 2},             // a lone continuation byte
        {"\xc0\x80", 0},           // overlong NUL
        {"\xc1\xbf", 0},           // overlong
        {"x\xe0\x80\x80", 1},      // overlong 3-byte form
        {"\xf0\x80\x80\x80", 0},   // overlong 4-byte form
        {"\xed\xa0\x80", 0},       // surrogate U+D800
        {"\xed\xbf\xbf", 0},       // surrogate U+DFFF
        {"\xf4\x90\x80\x80", 0},   // above U+10FFFF
        {"\xf5\x80\x80\x80", 0},
        {"é\xe2\x82", 2},  // truncated at the end
        {"\xc3\x28", 0},   // bad continuation
        {"\xff", 0},
    };
    for (const Case& c : cases) {
        INFO(c.bytes.size() << " bytes");
        CHECK(find_invalid_utf8(c.bytes) == c.bad);
        CHECK(is_valid_utf8(c.bytes) == (c.bad == ok));
    }
}

TEST_CASE("utf8_lower(text): Python's str.lower(), full mappings and final sigma included", "[core][utf8]") {
    struct Case {
        std::string text, lower;  // lower: Python 3.11's text.lower()
    };
    const std::vector<Case> cases = {
        {"Go. Va !", "go. va !"},
        {"ÉCOLE À ÇA ÊTRE ÔTER Â", "école à ça être ôter â"},
        {"ŒUVRE Ÿ Ł Ĳ Ś Ž", "œuvre ÿ ł ĳ ś ž"},
        {"İSTANBUL", "i\u0307stanbul"},  // the one full mapping: i + COMBINING DOT ABOVE
        {"СТОП Ѐ", "стоп ѐ"},
        {"× ß ı Ω ẞ", "× ß ı ω ß"},
        {"ǅ Ⅻ Ⓐ", "ǆ ⅻ ⓐ"},  // titlecase, Roman numeral, circled letter
        {"ΟΔΟΣ", "οδος"},    // Σ at the end of a word is final ς
        {"Σ", "σ"},          // ... but not alone
        {"ΑΣ Β", "ας β"},
        {"ΑΣΑ", "ασα"},  // inside a word
        {"Α.Σ", "α.ς"},  // '.' is case-ignorable
        {"ΑΣ.", "ας."},
        {"Α'Σ", "α'ς"},
        {"ΑΣ\u0301", "ας\u0301"},  // a combining mark after it is skipped
        {"1Σ", "1σ"},              // a digit is not cased
        {"aΣ", "aς"},
        {"ªΣ", "ªς"},  // ª is cased (Other_Lowercase)
        {"𐐀", "𐐨"},    // outside the BMP (Deseret)
    };
    for (const Case& c : cases) {
        INFO(c.text);
        CHECK(utf8_lower(c.text) == c.lower);
    }
    REQUIRE_THROWS_AS(utf8_lower("ok \xff"), ValueError);
    REQUIRE_THROWS_WITH(utf8_lower("ok \xff"), "utf8_lower: invalid UTF-8 at byte 3 (0xFF)");
    REQUIRE_THROWS_WITH(utf8_lower("\xc3"), "utf8_lower: invalid UTF-8 at byte 0 (0xC3)");
}

TEST_CASE("utf8_replace_invalid(text): each ill-formed byte becomes U+FFFD, the rest is kept", "[core][utf8]") {
    CHECK(utf8_replace_invalid("Hôtel") == "Hôtel");
    CHECK(utf8_replace_invalid("a\xff"
                               "b") == "a\uFFFDb");
    CHECK(utf8_replace_invalid("\xc3") == "\uFFFD");
    CHECK(utf8_replace_invalid("\xe2\x82x") == "\uFFFD\uFFFDx");  // a cut sequence: one per byte
    CHECK(is_valid_utf8(utf8_replace_invalid("\xed\xa0\x80\xf4\x90\x80\x80")));
}

namespace {
// Runs `cmd`, returns its exit status.
int run(const std::string& cmd) {
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

TEST_CASE("utf8_lower agrees with /usr/bin/python3's str.lower() on every code point, alone and around a sigma",
          "[core][utf8][slow]") {
    if (run("/usr/bin/python3 -c 'pass' 2>/dev/null") != 0) {
        WARN("skipped: no /usr/bin/python3 to compare with");
        return;
    }
    // For every code point c but the surrogates and NUL: c, "Α" c "Σ" (is c
    // case-ignorable?) and "ΑΣ" c (is c cased?), each lowercased, NUL-separated.
    const auto dir = std::filesystem::temp_directory_path() / ("tformer-utf8-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string inputs = (dir / "inputs").string(), expected = (dir / "expected").string();
    std::vector<std::string> texts;
    std::string joined;
    for (char32_t c = 1; c < 0x110000; ++c) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        std::string ch;  // c in UTF-8
        if (c < 0x80) {
            ch += static_cast<char>(c);
        } else if (c < 0x800) {
            ch += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
        } else if (c < 0x10000) {
            ch += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                   static_cast<char>(0x80 | (c & 0x3F))};
        } else {
            ch += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                   static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
        }
        for (const std::string& t : {ch, "Α" + ch + "Σ", "ΑΣ" + ch}) {
            texts.push_back(t);
            joined += t;
            joined += '\0';
        }
    }
    std::ofstream(inputs, std::ios::binary) << joined;
    // Python 3.11 knows Unicode 14, utf8proc 2.8 Unicode 15: a code point that
    // Python's Unicode does not assign yet (category Cn) gets an empty answer
    // and is left out.
    const std::string script =
        "import sys, unicodedata as u; t = open(sys.argv[1], 'rb').read().decode('utf-8').split('\\0')[:-1]; "
        "new = lambda s: any(u.category(c) == 'Cn' for c in s); "
        "open(sys.argv[2], 'wb').write('\\0'.join('' if new(s) else s.lower() for s in t).encode('utf-8') + b'\\0')";
    REQUIRE(run("/usr/bin/python3 -c \"" + script + "\" '" + inputs + "' '" + expected + "'") == 0);
    std::ifstream in(expected, std::ios::binary);
    const std::string python((std::istreambuf_iterator<char>(in)), {});
    std::filesystem::remove_all(dir);
    size_t pos = 0, differ = 0, compared = 0;
    std::string examples;
    for (const std::string& t : texts) {
        const size_t end = python.find('\0', pos);
        REQUIRE(end != std::string::npos);
        const std::string want = python.substr(pos, end - pos);
        pos = end + 1;
        if (want.empty()) continue;  // unassigned in Python's Unicode
        ++compared;
        if (utf8_lower(t) != want && differ++ < 20)
            examples += "'" + t + "': ours '" + utf8_lower(t) + "', Python '" + want + "'\n";
    }
    INFO(differ << " of " << compared << " texts differ, first:\n" << examples);
    CHECK(compared > 3 * 280000);  // Unicode 14 assigns 284,278 code points besides the surrogates and private use
    CHECK(differ == 0);
}

TEST_CASE("utf8_prefix_length(text, limit): at most limit bytes, never inside a character", "[core][utf8]") {
    CHECK(utf8_prefix_length("abc", 5) == 3);
    CHECK(utf8_prefix_length("abcdef", 4) == 4);
    CHECK(utf8_prefix_length("ab\u00e9cd", 3) == 2);  // é is bytes 2-3: cutting after byte 3 would split it
    CHECK(utf8_prefix_length("ab\u00e9cd", 4) == 4);
    CHECK(utf8_prefix_length("\u20ac\u20ac", 4) == 3);  // € is three bytes
    CHECK(utf8_prefix_length("\u20ac", 2) == 0);
}

TEST_CASE("utf8_char_length(text, pos): one character's bytes, 1 for a byte that begins none", "[core][utf8]") {
    const std::string text = "a\u00e9\u4e2d\U0001F600";  // 1, 2, 3 and 4 bytes
    CHECK(utf8_char_length(text, 0) == 1);
    CHECK(utf8_char_length(text, 1) == 2);
    CHECK(utf8_char_length(text, 3) == 3);
    CHECK(utf8_char_length(text, 6) == 4);
    CHECK(utf8_char_length("\x80z", 0) == 1);     // a stray continuation byte
    CHECK(utf8_char_length("\xE4\xB8", 0) == 1);  // a sequence cut short
    CHECK(utf8_char_length("\xC0\xAF", 0) == 1);  // an overlong '/'
}

TEST_CASE("utf8_display_width(text): terminal columns, 2 for wide characters, 0 for combining marks", "[core][utf8]") {
    CHECK(utf8_display_width("") == 0);
    CHECK(utf8_display_width("abc") == 3);
    CHECK(utf8_display_width("\u4e2d\u6587") == 4);        // 中文
    CHECK(utf8_display_width("\uff0c\u3002") == 4);        // full-width ，。
    CHECK(utf8_display_width("\uac00") == 2);              // Hangul 가
    CHECK(utf8_display_width("e\u0301") == 1);             // e + combining acute: one column
    CHECK(utf8_display_width("\u2500\u00b7\u2192") == 3);  // ─·→ take one column each
    CHECK(utf8_display_width("a\x80z") == 3);              // the invalid byte counts one
}

TEST_CASE("utf8_code_points(text), is_unicode_space(cp): code points, and Python's str.isspace() on all of them",
          "[core][utf8]") {
    CHECK(utf8_code_points("a\u00e0\u202f\u732b", "test") == std::u32string{U'a', U'\u00e0', U'\u202f', U'\u732b'});
    CHECK(utf8_code_points("", "test").empty());
    CHECK_THROWS_WITH(utf8_code_points("ab\xc3", "reading x"), Catch::Contains("reading x: invalid UTF-8 at byte 2"));
    // [c for c in range(0x110000) if chr(c).isspace()], Python 3.11
    const std::vector<char32_t> python = {0x9,    0xa,    0xb,    0xc,    0xd,    0x1c,   0x1d,   0x1e,
                                          0x1f,   0x20,   0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002,
                                          0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
                                          0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    std::vector<char32_t> ours;
    for (char32_t cp = 0; cp < 0x110000; ++cp)
        if (is_unicode_space(cp)) ours.push_back(cp);
    CHECK(ours == python);
    CHECK_FALSE(is_unicode_space(0x110000));
}
