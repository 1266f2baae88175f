// tasks::Image: canvas, anti-aliased drawing, bitmap text and PNG files.
#include "tasks/image.hpp"

#include "core/error.hpp"
#include "core/file.hpp"

#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace tformer::tasks {

// ============================================================================
// The bitmap font
// ============================================================================

namespace {

// The font, drawn as a sheet: each band names ten characters on its first
// line (each centred above its glyph) and then gives their 5x9 bitmaps side
// by side, '#' for ink and '.' for paper, one blank column between glyphs.
// Rows 1-7 of a band stand on the baseline; rows 8-9 are the descender
// (g j p q y and the tails of , ; _). The space character is blank and is
// not drawn here. The sheet is parsed at compile time, so a malformed row or
// a missing or repeated character stops the build.
constexpr std::string_view kFontSheet = R"font(
  !     "     #     $     %     &     '     (     )     *
..#.. .#.#. .#.#. ..#.. ##... .##.. ..#.. ...#. .#... .....
..#.. .#.#. .#.#. .#### ##..# #..#. ..#.. ..#.. ..#.. ..#..
..#.. .#.#. ##### #.#.. ...#. #.#.. ..#.. .#... ...#. #.#.#
..#.. ..... .#.#. .###. ..#.. .#... ..... .#... ...#. .###.
..#.. ..... ##### ..#.# .#... #.#.# ..... .#... ...#. #.#.#
..... ..... .#.#. ####. #..## #..#. ..... ..#.. ..#.. ..#..
..#.. ..... .#.#. ..#.. ...## .##.# ..... ...#. .#... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  +     ,     -     .     /     0     1     2     3     4
..... ..... ..... ..... ....# .###. ..#.. .###. ##### ...#.
..#.. ..... ..... ..... ....# #...# .##.. #...# ...#. ..##.
..#.. ..... ..... ..... ...#. #..## ..#.. ....# ..#.. .#.#.
##### ..... ##### ..... ..#.. #.#.# ..#.. ...#. ...#. #..#.
..#.. ..... ..... ..... .#... ##..# ..#.. ..#.. ....# #####
..#.. .##.. ..... .##.. #.... #...# ..#.. .#... #...# ...#.
..... .##.. ..... .##.. #.... .###. .###. ##### .###. ...#.
..... ..#.. ..... ..... ..... ..... ..... ..... ..... .....
..... .#... ..... ..... ..... ..... ..... ..... ..... .....

  5     6     7     8     9     :     ;     <     =     >
##### ..##. ##### .###. .###. ..... ..... ...#. ..... .#...
#.... .#... ....# #...# #...# .##.. .##.. ..#.. ..... ..#..
####. #.... ...#. #...# #...# .##.. .##.. .#... ##### ...#.
....# ####. ..#.. .###. .#### ..... ..... #.... ..... ....#
....# #...# .#... #...# ....# .##.. .##.. .#... ##### ...#.
#...# #...# .#... #...# ...#. .##.. .##.. ..#.. ..... ..#..
.###. .###. .#... .###. .##.. ..... ..#.. ...#. ..... .#...
..... ..... ..... ..... ..... ..... .#... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  ?     @     A     B     C     D     E     F     G     H
.###. .###. .###. ####. .###. ###.. ##### ##### .###. #...#
#...# #...# #...# #...# #...# #..#. #.... #.... #...# #...#
....# #.### #...# #...# #.... #...# #.... #.... #.... #...#
...#. #.#.# ##### ####. #.... #...# ####. ####. #.### #####
..#.. #.### #...# #...# #.... #...# #.... #.... #...# #...#
..... #.... #...# #...# #...# #..#. #.... #.... #...# #...#
..#.. .#### #...# ####. .###. ###.. ##### #.... .#### #...#
..... ..... ..... ..... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  I     J     K     L     M     N     O     P     Q     R
.###. ..### #...# #.... #...# #...# .###. ####. .###. ####.
..#.. ...#. #..#. #.... ##.## #...# #...# #...# #...# #...#
..#.. ...#. #.#.. #.... #.#.# ##..# #...# #...# #...# #...#
..#.. ...#. ##... #.... #.#.# #.#.# #...# ####. #...# ####.
..#.. ...#. #.#.. #.... #...# #..## #...# #.... #.#.# #.#..
..#.. #..#. #..#. #.... #...# #...# #...# #.... #..#. #..#.
.###. .##.. #...# ##### #...# #...# .###. #.... .##.# #...#
..... ..... ..... ..... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  S     T     U     V     W     X     Y     Z     [     \
.#### ##### #...# #...# #...# #...# #...# ##### .###. #....
#.... ..#.. #...# #...# #...# #...# #...# ....# .#... #....
#.... ..#.. #...# #...# #...# .#.#. .#.#. ...#. .#... .#...
.###. ..#.. #...# #...# #.#.# ..#.. ..#.. ..#.. .#... ..#..
....# ..#.. #...# #...# #.#.# .#.#. ..#.. .#... .#... ...#.
....# ..#.. #...# .#.#. #.#.# #...# ..#.. #.... .#... ....#
####. ..#.. .###. ..#.. .#.#. #...# ..#.. ##### .###. ....#
..... ..... ..... ..... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  ]     ^     _     `     a     b     c     d     e     f
.###. ..#.. ..... .#... ..... #.... ..... ....# ..... ..##.
...#. .#.#. ..... ..#.. ..... #.... ..... ....# ..... .#..#
...#. #...# ..... ...#. .###. #.##. .###. .##.# .###. .#...
...#. ..... ..... ..... ....# ##..# #.... #..## #...# ###..
...#. ..... ..... ..... .#### #...# #.... #...# ##### .#...
...#. ..... ..... ..... #...# #...# #...# #...# #.... .#...
.###. ..... ..... ..... .#### ####. .###. .#### .###. .#...
..... ..... ##### ..... ..... ..... ..... ..... ..... .....
..... ..... ..... ..... ..... ..... ..... ..... ..... .....

  g     h     i     j     k     l     m     n     o     p
..... #.... ..#.. ...#. #.... .##.. ..... ..... ..... .....
..... #.... ..... ..... #.... ..#.. ..... ..... ..... .....
.#### #.##. .##.. ..##. #..#. ..#.. ##.#. #.##. .###. #.##.
#...# ##..# ..#.. ...#. #.#.. ..#.. #.#.# ##..# #...# ##..#
#...# #...# ..#.. ...#. ##... ..#.. #.#.# #...# #...# #...#
#..## #...# ..#.. ...#. #.#.. ..#.. #...# #...# #...# ##..#
.##.# #...# .###. ...#. #..#. .###. #...# #...# .###. #.##.
....# ..... ..... #..#. ..... ..... ..... ..... ..... #....
.###. ..... ..... .##.. ..... ..... ..... ..... ..... #....

  q     r     s     t     u     v     w     x     y     z
..... ..... ..... .#... ..... ..... ..... ..... ..... .....
..... ..... ..... .#... ..... ..... ..... ..... ..... .....
.##.# #.##. .#### ####. #...# #...# #...# #...# #...# #####
#..## ##..# #.... .#... #...# #...# #...# .#.#. #...# ...#.
#...# #.... .###. .#... #...# #...# #.#.# ..#.. #...# ..#..
#..## #.... ....# .#..# #..## .#.#. #.#.# .#.#. #..## .#...
.##.# #.... ####. ..##. .##.# ..#.. .#.#. #...# .##.# #####
....# ..... ..... ..... ..... ..... ..... ..... ....# .....
....# ..... ..... ..... ..... ..... ..... ..... .###. .....

  {     |     }     ~
...## ..#.. ##... .....
..#.. ..#.. ..#.. .....
..#.. ..#.. ..#.. .#...
.#... ..#.. ...#. #.#.#
..#.. ..#.. ..#.. ...#.
..#.. ..#.. ..#.. .....
...## ..#.. ##... .....
..... ..#.. ..... .....
..... ..#.. ..... .....
)font";

constexpr int kFirstPrintable = ' ';
constexpr int kLastPrintable = '~';
constexpr int kPrintableCount = kLastPrintable - kFirstPrintable + 1;

struct FontTable {
    std::array<Glyph, kPrintableCount> glyphs{};
    std::array<bool, kPrintableCount> defined{};
};

// Reads the sheet above. Throwing inside a constant expression is a compile
// error, which is how mistakes in the sheet are reported.
constexpr FontTable parse_font_sheet(std::string_view sheet) {
    FontTable table;
    table.defined[0] = true;  // ' ' stays blank
    size_t pos = 0;
    const auto next_line = [&]() {
        const size_t end = std::min(sheet.find('\n', pos), sheet.size());
        const std::string_view line = sheet.substr(pos, end - pos);
        pos = end + 1;
        return line;
    };
    while (pos < sheet.size()) {
        const std::string_view header = next_line();
        if (header.empty()) continue;
        // Character i of the band is at column 6i + 2, above the middle of its glyph.
        const size_t count = (header.size() + 3) / kGlyphAdvance;
        for (int row = 0; row < kGlyphHeight; ++row) {
            const std::string_view line = next_line();
            if (line.size() != count * kGlyphAdvance - 1) throw "font sheet: a row has the wrong length";
            for (size_t i = 0; i < count; ++i) {
                const char ch = header[i * kGlyphAdvance + 2];
                if (ch < kFirstPrintable || ch > kLastPrintable) throw "font sheet: not printable ASCII";
                uint8_t bits = 0;
                for (int c = 0; c < kGlyphWidth; ++c) {
                    const char cell = line[i * kGlyphAdvance + c];
                    if (cell != '#' && cell != '.') throw "font sheet: cells must be '#' or '.'";
                    if (cell == '#') bits = static_cast<uint8_t>(bits | (1 << (kGlyphWidth - 1 - c)));
                }
                table.glyphs[ch - kFirstPrintable][row] = bits;
            }
        }
        for (size_t i = 0; i < count; ++i) {
            const int index = header[i * kGlyphAdvance + 2] - kFirstPrintable;
            if (table.defined[index]) throw "font sheet: a character is drawn twice";
            table.defined[index] = true;
        }
    }
    for (bool defined : table.defined)
        if (!defined) throw "font sheet: a printable character is missing";
    return table;
}

constexpr FontTable kFont = parse_font_sheet(kFontSheet);

// ---- accented letters ----------------------------------------------------------
// Translation data (fra-eng) is lower-cased French, so tick labels meet é, à,
// ç, ... The lower-case letters leave rows 0-1 free above the x-height, so an
// accented letter is its base letter with two accent rows on top (or, for
// the cedilla, two rows below). Capitals have no room above them and are
// drawn without their accent.

enum class Accent { none, grave, acute, circumflex, diaeresis, tilde, ring, cedilla };

struct AccentedLetter {
    char32_t code_point;
    char base;
    Accent accent;
};

constexpr AccentedLetter kAccented[] = {
    {U'à', 'a', Accent::grave}, {U'á', 'a', Accent::acute}, {U'â', 'a', Accent::circumflex},
    {U'ã', 'a', Accent::tilde}, {U'ä', 'a', Accent::diaeresis}, {U'å', 'a', Accent::ring},
    {U'ç', 'c', Accent::cedilla}, {U'è', 'e', Accent::grave}, {U'é', 'e', Accent::acute},
    {U'ê', 'e', Accent::circumflex}, {U'ë', 'e', Accent::diaeresis}, {U'ì', 'i', Accent::grave},
    {U'í', 'i', Accent::acute}, {U'î', 'i', Accent::circumflex}, {U'ï', 'i', Accent::diaeresis},
    {U'ñ', 'n', Accent::tilde}, {U'ò', 'o', Accent::grave}, {U'ó', 'o', Accent::acute},
    {U'ô', 'o', Accent::circumflex}, {U'õ', 'o', Accent::tilde}, {U'ö', 'o', Accent::diaeresis},
    {U'ù', 'u', Accent::grave}, {U'ú', 'u', Accent::acute}, {U'û', 'u', Accent::circumflex},
    {U'ü', 'u', Accent::diaeresis}, {U'ý', 'y', Accent::acute}, {U'ÿ', 'y', Accent::diaeresis},
    {U'À', 'A', Accent::none}, {U'Â', 'A', Accent::none}, {U'Ç', 'C', Accent::none},
    {U'È', 'E', Accent::none}, {U'É', 'E', Accent::none}, {U'Ê', 'E', Accent::none},
    {U'Ë', 'E', Accent::none}, {U'Î', 'I', Accent::none}, {U'Ï', 'I', Accent::none},
    {U'Ô', 'O', Accent::none}, {U'Ù', 'U', Accent::none}, {U'Û', 'U', Accent::none},
    {U'Ü', 'U', Accent::none},
    // Punctuation that d2l's preprocessing leaves in the French text.
    {U'\u00a0', ' ', Accent::none}, {U'\u202f', ' ', Accent::none}, {U'\u2019', '\'', Accent::none},
    {U'\u2018', '\'', Accent::none}, {U'«', '"', Accent::none}, {U'»', '"', Accent::none},
};

// The two accent rows, as 5-bit masks (bit 4 = leftmost column).
constexpr std::array<uint8_t, 2> accent_rows(Accent accent) {
    switch (accent) {
        case Accent::grave: return {0b01000, 0b00100};       // .#... / ..#..
        case Accent::acute: return {0b00010, 0b00100};       // ...#. / ..#..
        case Accent::circumflex: return {0b00100, 0b01010};  // ..#.. / .#.#.
        case Accent::diaeresis: return {0b01010, 0b00000};   // .#.#. / .....
        case Accent::tilde: return {0b01101, 0b10110};       // .##.# / #.##.
        case Accent::ring: return {0b00100, 0b01010};        // drawn like the circumflex
        case Accent::cedilla: return {0b00100, 0b01000};     // below: ..#.. / .#...
        case Accent::none: break;
    }
    return {0, 0};
}

// œ (as in "cœur") has no ASCII base, so it gets its own glyph.
constexpr Glyph kOeLigature = {0b00000, 0b00000, 0b01010, 0b10101, 0b10111, 0b10100, 0b01011, 0, 0};

const Glyph& ascii_glyph(char c) {
    const int code = static_cast<unsigned char>(c);
    if (code < kFirstPrintable || code > kLastPrintable) return kFont.glyphs['?' - kFirstPrintable];
    return kFont.glyphs[code - kFirstPrintable];
}

// Decodes the UTF-8 code point starting at text[i] and advances i past it;
// malformed bytes decode as U+FFFD one byte at a time (drawn as '?').
char32_t next_code_point(std::string_view text, size_t& i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    int extra = 0;
    char32_t cp = 0;
    if (lead < 0x80) {
        ++i;
        return lead;
    } else if ((lead & 0xE0) == 0xC0) {
        extra = 1, cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
        extra = 2, cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
        extra = 3, cp = lead & 0x07;
    } else {
        ++i;
        return U'\uFFFD';
    }
    if (i + extra >= text.size()) {  // truncated sequence
        ++i;
        return U'\uFFFD';
    }
    for (int k = 1; k <= extra; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) {
            ++i;
            return U'\uFFFD';
        }
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    i += extra + 1;
    return cp;
}

int64_t code_point_count(std::string_view text) {
    int64_t n = 0;
    for (size_t i = 0; i < text.size();) {
        next_code_point(text, i);
        ++n;
    }
    return n;
}

}  // namespace

Glyph font_glyph(char32_t code_point) {
    if (code_point < 0x80) return ascii_glyph(static_cast<char>(code_point));
    if (code_point == U'œ') return kOeLigature;
    for (const AccentedLetter& letter : kAccented) {
        if (letter.code_point != code_point) continue;
        Glyph glyph = ascii_glyph(letter.base);
        const std::array<uint8_t, 2> rows = accent_rows(letter.accent);
        if (letter.accent == Accent::cedilla) {
            glyph[7] = rows[0], glyph[8] = rows[1];
        } else if (letter.accent != Accent::none) {
            glyph[0] = rows[0], glyph[1] = rows[1];  // replaces the dot of i
        }
        return glyph;
    }
    return ascii_glyph('?');
}

TextSize text_size(std::string_view text, int scale) {
    scale = std::clamp(scale, 1, kMaxTextScale);
    const int64_t n = code_point_count(text);
    const int64_t width = n == 0 ? 0 : (n * kGlyphAdvance - 1) * scale;
    // Absurdly long strings are measured as 2^24 pixels so box arithmetic cannot overflow.
    return {static_cast<int>(std::min<int64_t>(width, int64_t{1} << 24)), kGlyphHeight * scale};
}

// ============================================================================
// The canvas
// ============================================================================

namespace {

Rect intersect(const Rect& a, const Rect& b) {
    const int x0 = std::max(a.x, b.x), y0 = std::max(a.y, b.y);
    const int x1 = std::min(a.right(), b.right()), y1 = std::min(a.bottom(), b.bottom());
    return {x0, y0, std::max(0, x1 - x0), std::max(0, y1 - y0)};
}

// The smallest whole-pixel rectangle holding every point within `pad` of [lo, hi].
Rect bounding_rect(PointF lo, PointF hi, double pad) {
    const int x0 = static_cast<int>(std::floor(std::min(lo.x, hi.x) - pad));
    const int y0 = static_cast<int>(std::floor(std::min(lo.y, hi.y) - pad));
    const int x1 = static_cast<int>(std::ceil(std::max(lo.x, hi.x) + pad));
    const int y1 = static_cast<int>(std::ceil(std::max(lo.y, hi.y) + pad));
    return {x0, y0, x1 - x0 + 1, y1 - y0 + 1};
}

bool finite(PointF p) { return std::isfinite(p.x) && std::isfinite(p.y); }

// Liang-Barsky clipping: shrinks [t0, t1] to the part of a + t (b - a) that
// lies inside `box` (in continuous coordinates); false when nothing does.
// Clipping before any pixel arithmetic keeps far-away points (a curve leaving
// a zoomed-in plot) from overflowing int coordinates.
bool clip_segment(PointF a, PointF b, double x0, double y0, double x1, double y1, double& t0, double& t1) {
    const double dx = b.x - a.x, dy = b.y - a.y;
    // Each edge as p * t <= q: left, right, top, bottom.
    const double p[] = {-dx, dx, -dy, dy};
    const double q[] = {a.x - x0, x1 - a.x, a.y - y0, y1 - a.y};
    t0 = 0, t1 = 1;
    for (int k = 0; k < 4; ++k) {
        if (p[k] == 0) {
            if (q[k] < 0) return false;  // parallel to the edge and outside it
            continue;
        }
        const double t = q[k] / p[k];
        if (p[k] < 0)
            t0 = std::max(t0, t);
        else
            t1 = std::min(t1, t);
    }
    return t0 <= t1;
}

// Dash patterns as alternating on/off lengths, in multiples of the stroke width.
struct DashPattern {
    std::array<double, 4> lengths{};
    int count = 0;
};

DashPattern dash_pattern(Dash dash, double width) {
    const double w = std::max(width, 1.0);
    switch (dash) {
        case Dash::dashed: return {{4.0 * w, 2.5 * w}, 2};
        case Dash::dotted: return {{1.0 * w, 1.5 * w}, 2};
        case Dash::dash_dot: return {{4.0 * w, 1.5 * w, 1.0 * w, 1.5 * w}, 4};
        case Dash::solid: break;
    }
    return {{1.0}, 1};
}

// How much ink the pattern puts at arc length s: 1 inside an "on" piece, 0
// in a gap, with a half-pixel ramp at the ends of each piece.
double dash_coverage(const DashPattern& pattern, double s) {
    if (pattern.count == 1) return 1.0;
    double period = 0;
    for (int k = 0; k < pattern.count; ++k) period += pattern.lengths[k];
    double m = std::fmod(s, period);
    if (m < 0) m += period;
    double start = 0;
    for (int k = 0; k < pattern.count; ++k) {
        const double end = start + pattern.lengths[k];
        if (m < end) {
            if (k % 2 == 1) return 0.0;  // odd pieces are gaps
            return std::clamp(std::min(m - start, end - m) + 0.5, 0.0, 1.0);
        }
        start = end;
    }
    return 0.0;
}

}  // namespace

Image::Image(int width, int height, Rgb background) {
    if (width < 1 || height < 1 || width > kMaxImageSide || height > kMaxImageSide)
        fail<ValueError>("Image: size {}x{} is outside 1..{} pixels per side", width, height, kMaxImageSide);
    width_ = width;
    height_ = height;
    clip_ = {0, 0, width, height};
    rgb_.resize(static_cast<size_t>(width) * height * 3);
    for (size_t i = 0; i < rgb_.size(); i += 3) {
        rgb_[i] = background.r;
        rgb_[i + 1] = background.g;
        rgb_[i + 2] = background.b;
    }
}

Rgb Image::pixel(int x, int y) const {
    if (x < 0 || y < 0 || x >= width_ || y >= height_)
        fail<IndexError>("Image::pixel: ({}, {}) is outside the {}x{} image", x, y, width_, height_);
    const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
    return {rgb_[i], rgb_[i + 1], rgb_[i + 2]};
}

void Image::set_pixel(int x, int y, Rgb color) {
    if (!clip_.contains(x, y)) return;
    const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
    rgb_[i] = color.r;
    rgb_[i + 1] = color.g;
    rgb_[i + 2] = color.b;
}

void Image::blend_pixel(int x, int y, Rgb color, double alpha) {
    if (!clip_.contains(x, y) || !(alpha > 0)) return;
    alpha = std::min(alpha, 1.0);
    const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
    // out = (1 - alpha) * under + alpha * over, per channel, rounded.
    const auto mix = [alpha](uint8_t under, uint8_t over) {
        return static_cast<uint8_t>(std::lround((1.0 - alpha) * under + alpha * over));
    };
    rgb_[i] = mix(rgb_[i], color.r);
    rgb_[i + 1] = mix(rgb_[i + 1], color.g);
    rgb_[i + 2] = mix(rgb_[i + 2], color.b);
}

void Image::set_clip(const Rect& clip) { clip_ = intersect(clip, {0, 0, width_, height_}); }

void Image::reset_clip() { clip_ = {0, 0, width_, height_}; }

void Image::fill_rect(const Rect& rect, Rgb color, double alpha) {
    const Rect r = intersect(rect, clip_);
    for (int y = r.y; y < r.bottom(); ++y)
        for (int x = r.x; x < r.right(); ++x) {
            if (alpha >= 1.0)
                set_pixel(x, y, color);
            else
                blend_pixel(x, y, color, alpha);
        }
}

void Image::stroke_rect(const Rect& rect, Rgb color, int thickness) {
    const int t = std::max(1, std::min({thickness, rect.width, rect.height}));
    fill_rect({rect.x, rect.y, rect.width, t}, color);                   // top
    fill_rect({rect.x, rect.bottom() - t, rect.width, t}, color);        // bottom
    fill_rect({rect.x, rect.y, t, rect.height}, color);                  // left
    fill_rect({rect.right() - t, rect.y, t, rect.height}, color);        // right
}

void Image::blend_mask(const Rect& box, const std::vector<float>& cover, Rgb color, double alpha) {
    for (int y = 0; y < box.height; ++y)
        for (int x = 0; x < box.width; ++x) {
            const float c = cover[static_cast<size_t>(y) * box.width + x];
            if (c > 0) blend_pixel(box.x + x, box.y + y, color, alpha * c);
        }
}

void Image::draw_line(PointF from, PointF to, const Stroke& stroke) {
    const PointF points[] = {from, to};
    draw_polyline(points, stroke);
}

void Image::draw_polyline(std::span<const PointF> points, const Stroke& stroke) {
    if (points.empty() || !(stroke.width > 0)) return;
    for (PointF p : points)
        if (!finite(p)) return;  // callers break lines at non-finite data themselves
    const double half = std::min(stroke.width, 2.0 * kMaxImageSide) / 2;
    if (points.size() == 1) {
        fill_circle(points[0], half, stroke.color);
        return;
    }
    // Clip every segment to the clip rectangle first (plus the reach of the
    // pen), remembering where along the path each clipped piece starts.
    struct Piece {
        PointF from, to;
        double arc;  // path length from points[0] to `from`, for the dashes
    };
    std::vector<Piece> pieces;
    const double pad = half + 1;  // pixels farther than this from the path stay untouched
    double arc = 0;
    PointF lo{std::numeric_limits<double>::max(), std::numeric_limits<double>::max()}, hi{-lo.x, -lo.y};
    for (size_t k = 0; k + 1 < points.size(); ++k) {
        const PointF a = points[k], b = points[k + 1];
        const double dx = b.x - a.x, dy = b.y - a.y, len = std::hypot(dx, dy);
        double t_in = 0, t_out = 1;
        const bool visible = std::isfinite(len) && clip_segment(a, b, clip_.x - pad, clip_.y - pad,
                                                                clip_.right() + pad, clip_.bottom() + pad, t_in, t_out);
        if (visible) {
            const Piece piece{{a.x + t_in * dx, a.y + t_in * dy}, {a.x + t_out * dx, a.y + t_out * dy},
                              arc + t_in * len};
            pieces.push_back(piece);
            lo = {std::min({lo.x, piece.from.x, piece.to.x}), std::min({lo.y, piece.from.y, piece.to.y})};
            hi = {std::max({hi.x, piece.from.x, piece.to.x}), std::max({hi.y, piece.from.y, piece.to.y})};
        }
        if (std::isfinite(len)) arc += len;
    }
    if (pieces.empty()) return;
    const Rect box = intersect(bounding_rect(lo, hi, pad), clip_);
    if (box.width == 0 || box.height == 0) return;

    // The whole path's coverage goes into one mask, taking the maximum over
    // segments, and is blended once: overlapping joints are not darkened.
    std::vector<float> cover(static_cast<size_t>(box.width) * box.height, 0.0f);
    const DashPattern pattern = dash_pattern(stroke.dash, stroke.width);
    for (const Piece& piece : pieces) {
        const PointF a = piece.from, b = piece.to;
        const double dx = b.x - a.x, dy = b.y - a.y;
        const double len2 = dx * dx + dy * dy, len = std::sqrt(len2);
        const Rect seg = intersect(bounding_rect(a, b, pad), box);
        for (int y = seg.y; y < seg.bottom(); ++y)
            for (int x = seg.x; x < seg.right(); ++x) {
                // Nearest point of the segment to the pixel centre p: a + t (b - a).
                const double px = x + 0.5 - a.x, py = y + 0.5 - a.y;
                const double t = len2 > 0 ? std::clamp((px * dx + py * dy) / len2, 0.0, 1.0) : 0.0;
                const double d = std::hypot(px - t * dx, py - t * dy);
                double c = std::clamp(half + 0.5 - d, 0.0, 1.0);
                if (!(c > 0)) continue;
                c *= dash_coverage(pattern, piece.arc + t * len);
                float& cell = cover[static_cast<size_t>(y - box.y) * box.width + (x - box.x)];
                cell = std::max(cell, static_cast<float>(c));
            }
    }
    blend_mask(box, cover, stroke.color, 1.0);
}

void Image::fill_circle(PointF centre, double radius, Rgb color, double alpha) {
    if (!finite(centre) || !(radius > 0)) return;
    radius = std::min(radius, 2.0 * kMaxImageSide);
    const double reach = radius + 1;  // compare in doubles before any int conversion
    if (centre.x < clip_.x - reach || centre.x > clip_.right() + reach || centre.y < clip_.y - reach ||
        centre.y > clip_.bottom() + reach)
        return;
    const Rect box = intersect(bounding_rect(centre, centre, radius + 1), clip_);
    for (int y = box.y; y < box.bottom(); ++y)
        for (int x = box.x; x < box.right(); ++x) {
            const double d = std::hypot(x + 0.5 - centre.x, y + 0.5 - centre.y);
            blend_pixel(x, y, color, alpha * std::clamp(radius + 0.5 - d, 0.0, 1.0));
        }
}

Rect text_box(int x, int y, std::string_view text, const TextStyle& style) {
    const int scale = std::clamp(style.scale, 1, kMaxTextScale);
    const TextSize size = text_size(text, scale);
    int w = size.width + (style.bold && size.width > 0 ? 1 : 0), h = size.height;
    if (style.vertical) std::swap(w, h);
    const auto shift = [](Align align, int extent) {
        return align == Align::center ? extent / 2 : align == Align::end ? extent : 0;
    };
    return {x - shift(style.halign, w), y - shift(style.valign, h), w, h};
}

Rect Image::draw_text(int x, int y, std::string_view text, const TextStyle& style) {
    const Rect box = text_box(x, y, text, style);
    const int s = std::clamp(style.scale, 1, kMaxTextScale);
    // Lay the text out unrotated in a (along x across) box, then map each
    // inked font pixel to the screen. Vertical text turns a quarter turn
    // counter-clockwise: unrotated (u, v) lands at screen (v, along - 1 - u).
    const int along = style.vertical ? box.height : box.width;
    const auto put = [&](int u, int v) {  // one screen pixel of the unrotated layout
        if (style.vertical)
            set_pixel(box.x + v, box.y + along - 1 - u, style.color);
        else
            set_pixel(box.x + u, box.y + v, style.color);
    };
    int64_t index = 0;
    for (size_t i = 0; i < text.size(); ++index) {
        if (index * kGlyphAdvance * s >= along) break;  // past the (capped) box of a very long string
        const Glyph glyph = font_glyph(next_code_point(text, i));
        for (int row = 0; row < kGlyphHeight; ++row)
            for (int col = 0; col < kGlyphWidth; ++col) {
                if (!(glyph[row] >> (kGlyphWidth - 1 - col) & 1)) continue;
                const int u0 = static_cast<int>((index * kGlyphAdvance + col) * s), v0 = row * s;
                for (int dv = 0; dv < s; ++dv)
                    for (int du = 0; du < s + (style.bold ? 1 : 0); ++du) put(u0 + du, v0 + dv);
            }
    }
    return box;
}

// ============================================================================
// PNG files
// ============================================================================

void write_png(const Image& image, const std::filesystem::path& path, std::string_view op) {
    if (path.empty() || !path.has_filename())
        fail<IOError>("{}: cannot write '{}': not a file name", op, path.string());
    // libpng's simplified API encodes into memory (no setjmp/longjmp crosses
    // our C++ frames); the bytes then go to the disk atomically.
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    png.width = static_cast<png_uint_32>(image.width());
    png.height = static_cast<png_uint_32>(image.height());
    png.format = PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    bool encoded = png_image_write_to_memory(&png, nullptr, &size, 0, image.rgb().data(), 0, nullptr) != 0;
    std::string bytes(encoded ? size : 0, '\0');
    if (encoded) encoded = png_image_write_to_memory(&png, bytes.data(), &size, 0, image.rgb().data(), 0, nullptr) != 0;
    const std::string png_message = png.message;
    png_image_free(&png);
    if (!encoded) fail<IOError>("{}: cannot write '{}': libpng: {}", op, path.string(), png_message);
    bytes.resize(size);
    core::write_file_atomic(path.string(), bytes, op);
}

Image read_png(const std::filesystem::path& path) {
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&png, path.c_str()))
        fail<IOError>("read_png: cannot read '{}': {}", path.string(), png.message);
    if (png.width < 1 || png.height < 1 || png.width > kMaxImageSide || png.height > kMaxImageSide) {
        png_image_free(&png);
        fail<IOError>("read_png: '{}' is {}x{}, outside 1..{} pixels per side", path.string(), png.width,
                      png.height, kMaxImageSide);
    }
    png.format = PNG_FORMAT_RGB;  // grey and palette images are expanded, alpha composed on white
    std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(png));
    png_color white{255, 255, 255};
    if (!png_image_finish_read(&png, &white, rgb.data(), 0, nullptr))
        fail<IOError>("read_png: cannot read '{}': {}", path.string(), png.message);
    Image image(static_cast<int>(png.width), static_cast<int>(png.height));
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const size_t i = (static_cast<size_t>(y) * image.width() + x) * 3;
            image.set_pixel(x, y, {rgb[i], rgb[i + 1], rgb[i + 2]});
        }
    return image;
}

}  // namespace tformer::tasks
