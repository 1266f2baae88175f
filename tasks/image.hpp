// tasks::Image: a small RGB canvas for the pictures tformer writes for its
// users (loss curves, attention heatmaps, positional-encoding curves).
//
// Everything is drawn by hand so that no plotting library is needed:
//   - anti-aliased lines: a pixel's coverage is how much of it lies within
//     width/2 of the segment, estimated from the distance d of the pixel
//     centre to the segment as clamp(width/2 + 1/2 - d, 0, 1);
//   - text from a built-in 5x7 bitmap font (with 2 rows of descender), drawn
//     at an integer scale, horizontally or rotated a quarter turn;
//   - PNG files through libpng, written atomically (a temporary file in the
//     same folder, then rename), so a failed write never leaves a broken or
//     half-overwritten picture behind.
//
// Coordinates are pixels: x grows to the right, y grows downwards, (0, 0) is
// the top-left pixel and pixel (x, y) covers [x, x+1) x [y, y+1).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace tformer::tasks {

/// An 8-bit sRGB colour.
struct Rgb {
    uint8_t r = 0;
    uint8_t g = 0;
    uint8_t b = 0;
    friend bool operator==(const Rgb&, const Rgb&) = default;
};

/// Colours used across the plots.
namespace colors {
inline constexpr Rgb white{255, 255, 255};
inline constexpr Rgb black{0, 0, 0};
inline constexpr Rgb text{34, 34, 34};        ///< labels and tick labels
inline constexpr Rgb axis{51, 51, 51};        ///< axes frames and tick marks
inline constexpr Rgb grid{224, 224, 224};     ///< grid lines behind the data
inline constexpr Rgb missing{160, 160, 160};  ///< NaN / inf data
}  // namespace colors

/// A point with sub-pixel precision; pixel (x, y) has its centre at (x + 0.5, y + 0.5).
struct PointF {
    double x = 0;
    double y = 0;
};

/// An axis-aligned rectangle of whole pixels: columns [x, x + width), rows [y, y + height).
struct Rect {
    int x = 0;
    int y = 0;
    int width = 0;
    int height = 0;
    int right() const { return x + width; }    ///< one past the last column
    int bottom() const { return y + height; }  ///< one past the last row
    bool contains(int px, int py) const { return px >= x && px < right() && py >= y && py < bottom(); }
};

/// How a stroke is broken into dashes (d2l's '-', '--', ':', '-.').
enum class Dash { solid, dashed, dotted, dash_dot };

/// The pen for lines.
struct Stroke {
    Rgb color = colors::black;
    double width = 2.0;  ///< in pixels; anti-aliased, so fractional widths are fine
    Dash dash = Dash::solid;
};

/// Where text sits relative to its anchor point along one screen axis.
enum class Align { start, center, end };

/// How text is drawn. Alignment refers to screen axes even for vertical text.
struct TextStyle {
    Rgb color = colors::text;
    int scale = 2;                ///< each font pixel becomes scale x scale pixels (1..64)
    bool bold = false;            ///< each glyph drawn twice, one pixel apart
    bool vertical = false;        ///< rotated a quarter turn, reading bottom to top
    Align halign = Align::start;  ///< left / centre / right of the anchor x
    Align valign = Align::start;  ///< top / centre / bottom of the anchor y
};

// ---- the bitmap font ---------------------------------------------------------

/// Glyphs are 5 font pixels wide and 9 high: rows 0-6 sit on the baseline
/// (capital height 7, lower case x-height 5) and rows 7-8 hold descenders.
inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 9;
/// One blank font pixel between characters.
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;

/// Text scales are clamped to [1, kMaxTextScale].
inline constexpr int kMaxTextScale = 64;

/// One glyph: row r has bit (4 - c) set when column c is ink (bit 4 = leftmost).
using Glyph = std::array<uint8_t, kGlyphHeight>;

/// The glyph of a Unicode code point: printable ASCII (' ' to '~'), the
/// accented letters of French and a few other Latin-1 letters (capitals drawn
/// without their accent), and typographic quotes; anything else draws as '?'.
/// Text is UTF-8 everywhere.
Glyph font_glyph(char32_t code_point);

/// The pixel size of `text` drawn unrotated at `scale`: every glyph box,
/// descender rows included, without the blank column after the last glyph.
struct TextSize {
    int width = 0;
    int height = 0;
};
TextSize text_size(std::string_view text, int scale);

// ---- the canvas ----------------------------------------------------------------

/// Images larger than this on either side are refused (ValueError).
inline constexpr int kMaxImageSide = 16384;

/// An RGB image with drawing primitives. Every drawing call is clipped to the
/// image and to the current clip rectangle, so drawing out of bounds is safe.
class Image {
public:
    /// A width x height image filled with `background`; throws ValueError for
    /// sizes that are not in [1, kMaxImageSide].
    Image(int width, int height, Rgb background = colors::white);

    int width() const { return width_; }
    int height() const { return height_; }
    /// Row-major RGB bytes, 3 per pixel.
    const std::vector<uint8_t>& rgb() const { return rgb_; }

    /// The colour at (x, y); throws IndexError outside the image.
    Rgb pixel(int x, int y) const;
    /// Sets one pixel (ignored outside the image or the clip rectangle).
    void set_pixel(int x, int y, Rgb color);
    /// pixel = (1 - alpha) * pixel + alpha * color, alpha clamped to [0, 1].
    void blend_pixel(int x, int y, Rgb color, double alpha);

    /// Restricts all drawing to `clip` (intersected with the image).
    void set_clip(const Rect& clip);
    /// Drawing may touch the whole image again.
    void reset_clip();

    /// Fills a rectangle, optionally translucent.
    void fill_rect(const Rect& rect, Rgb color, double alpha = 1.0);
    /// Draws the border of `rect`, `thickness` pixels wide, inside the rectangle.
    void stroke_rect(const Rect& rect, Rgb color, int thickness = 1);

    /// An anti-aliased straight line.
    void draw_line(PointF from, PointF to, const Stroke& stroke);
    /// Anti-aliased connected segments; joints are drawn once (no dark spots
    /// where segments overlap) and dashes run on along the whole path.
    void draw_polyline(std::span<const PointF> points, const Stroke& stroke);
    /// An anti-aliased filled disc.
    void fill_circle(PointF centre, double radius, Rgb color, double alpha = 1.0);

    /// Draws `text` anchored at (x, y) according to `style`; returns the
    /// screen rectangle the text box occupies (whether or not it was clipped).
    Rect draw_text(int x, int y, std::string_view text, const TextStyle& style = {});

private:
    /// Blends a coverage mask `cover` over the rectangle `box` in one pass.
    void blend_mask(const Rect& box, const std::vector<float>& cover, Rgb color, double alpha);

    int width_ = 0;
    int height_ = 0;
    Rect clip_;
    std::vector<uint8_t> rgb_;  // (height, width, 3)
};

/// The screen rectangle that draw_text(x, y, text, style) would cover.
Rect text_box(int x, int y, std::string_view text, const TextStyle& style);

// ---- PNG files -------------------------------------------------------------------

/// Writes `image` as an 8-bit RGB PNG file, atomically: the data goes to a
/// temporary file next to `path` that is renamed over `path` only once it is
/// complete. Throws IOError naming the path on failure; `op` prefixes the
/// message (e.g. "plot_lines").
void write_png(const Image& image, const std::filesystem::path& path, std::string_view op = "write_png");

/// Reads a PNG file (any colour type; converted to 8-bit RGB, alpha composed
/// on white). Throws IOError naming the path when it cannot be read.
Image read_png(const std::filesystem::path& path);

}  // namespace tformer::tasks
