/// \file
/// tasks::Canvas: where the pictures tformer writes for its users (loss
/// curves, attention heatmaps, the tutorials' plots) are drawn. It is the one
/// file that calls cairo (Debian libcairo2-dev), as core/blas.cpp is for BLAS:
/// anti-aliased shapes, text in a real font (DejaVu Sans, from
/// fonts-dejavu-core, found through fontconfig), and the file written as PNG
/// or SVG, chosen by the path's extension, atomically (a temporary file
/// renamed over the path once complete, so a failed write never leaves a
/// broken or half-overwritten picture behind).
///
/// Coordinates are pixels (SVG: CSS pixels): x grows to the right, y grows
/// downwards, (0, 0) is the top-left corner and pixel (x, y) covers
/// [x, x+1) x [y, y+1).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace tformer::tasks {

/// An 8-bit sRGB colour.
struct Rgb {
    uint8_t r = 0;  ///< red, 0 to 255
    uint8_t g = 0;  ///< green, 0 to 255
    uint8_t b = 0;  ///< blue, 0 to 255
    /// The same three components.
    friend bool operator==(const Rgb&, const Rgb&) = default;
};

/// Colours used across the plots.
namespace colors {
inline constexpr Rgb white{255, 255, 255};    ///< the background
inline constexpr Rgb black{0, 0, 0};          ///< the default stroke
inline constexpr Rgb text{34, 34, 34};        ///< labels and tick labels
inline constexpr Rgb axis{51, 51, 51};        ///< axes frames and tick marks
inline constexpr Rgb grid{224, 224, 224};     ///< grid lines behind the data
inline constexpr Rgb missing{160, 160, 160};  ///< NaN / inf data
}  // namespace colors

/// A point with sub-pixel precision; pixel (x, y) has its centre at (x + 0.5, y + 0.5).
struct PointF {
    double x = 0;  ///< pixels from the left edge
    double y = 0;  ///< pixels from the top edge
};

/// An axis-aligned rectangle of whole pixels: columns [x, x + width), rows [y, y + height).
struct Rect {
    int x = 0;                                 ///< first column
    int y = 0;                                 ///< first row
    int width = 0;                             ///< columns
    int height = 0;                            ///< rows
    int right() const { return x + width; }    ///< one past the last column
    int bottom() const { return y + height; }  ///< one past the last row
    /// True when pixel (px, py) lies inside.
    bool contains(int px, int py) const { return px >= x && px < right() && py >= y && py < bottom(); }
};

/// How a stroke is broken into dashes (d2l's '-', '--', ':', '-.').
enum class Dash { solid, dashed, dotted, dash_dot };

/// The pen for lines.
struct Stroke {
    Rgb color = colors::black;  ///< the line's colour
    double width = 2.0;         ///< in pixels
    Dash dash = Dash::solid;    ///< solid or a dash pattern
};

/// Where text sits horizontally relative to its anchor: left, centre or right of it.
enum class Align { start, center, end };

/// How text is drawn: DejaVu Sans at `size` pixels.
struct TextStyle {
    Rgb color = colors::text;     ///< the text's colour
    double size = 14;             ///< the font size in pixels (the em square)
    bool bold = false;            ///< bold face
    bool vertical = false;        ///< turned a quarter turn, reading bottom to top
    Align halign = Align::start;  ///< along the reading direction
};

/// The vertical measures of the font at a size, in pixels.
struct FontMetrics {
    double ascent = 0;      ///< above the baseline
    double descent = 0;     ///< below it
    double cap_height = 0;  ///< of capitals and digits
    /// Ascent plus descent: the height of a line of text.
    double height() const { return ascent + descent; }
};
/// The font's measures at style.size (and style.bold).
FontMetrics font_metrics(const TextStyle& style);

/// The advance width of `text` (any bytes: ill-formed UTF-8 shows as U+FFFD).
double text_width(std::string_view text, const TextStyle& style);

/// The two formats a picture can be written in.
enum class PictureFormat { png, svg };

/// The format a path's extension names (".png" or ".svg", any case); ValueError naming `op` otherwise.
PictureFormat picture_format(const std::filesystem::path& path, std::string_view op);

/// "png" or "svg".
const char* picture_extension(PictureFormat format);

/// Parses "png" or "svg" (a flag's value); ValueError naming `op` otherwise.
PictureFormat parse_picture_format(std::string_view name, std::string_view op);

/// Pictures larger than this on either side are refused (ValueError).
inline constexpr int kMaxImageSide = 16384;

/// A picture being drawn, for one file of one format. Drawing outside the
/// picture or the clip rectangle is clipped.
class Canvas {
public:
    /// A width x height white picture; ValueError naming `op` for sizes outside [1, kMaxImageSide].
    Canvas(int width, int height, PictureFormat format, std::string_view op);
    /// Frees cairo's surface.
    ~Canvas();
    Canvas(const Canvas&) = delete;
    Canvas& operator=(const Canvas&) = delete;

    /// The picture's width in pixels.
    int width() const { return width_; }
    /// The picture's height in pixels.
    int height() const { return height_; }

    /// Restricts drawing to `clip` until reset_clip().
    void set_clip(const Rect& clip);
    /// Lifts the clip set by set_clip().
    void reset_clip();

    /// Fills a rectangle, optionally translucent.
    void fill_rect(const Rect& rect, Rgb color, double alpha = 1.0);
    /// Draws the border of `rect`, one pixel wide, on its outermost pixels.
    void stroke_rect(const Rect& rect, Rgb color);
    /// A straight line.
    void line(PointF from, PointF to, const Stroke& stroke);
    /// Connected segments, joined (no dark spots where they meet); dashes run on along the path.
    void polyline(std::span<const PointF> points, const Stroke& stroke);
    /// A filled disc.
    void circle(PointF centre, double radius, Rgb color, double alpha = 1.0);
    /// `text` with its baseline starting at (x, y) as `style.halign` says (for
    /// vertical text the baseline runs upwards from (x, y)).
    void text(double x, double y, std::string_view text, const TextStyle& style);

    /// Writes the picture to `path` atomically; IOError naming `op` and the path on failure.
    void write(const std::filesystem::path& path);

private:
    struct Cairo;  // the surface and the drawing context
    std::unique_ptr<Cairo> cairo_;
    int width_ = 0, height_ = 0;
    PictureFormat format_;
    std::string op_;
    std::string svg_;  // what the SVG surface has written so far
};

/// What a picture file holds, read back to check it: its format and size.
/// PNG files are decoded whole (so a broken one fails); SVG files must start
/// with an XML declaration and an `<svg>` element with width and height.
/// IOError naming the path otherwise.
struct PictureInfo {
    PictureFormat format = PictureFormat::png;  ///< PNG or SVG
    int width = 0;                              ///< pixels
    int height = 0;                             ///< pixels
};
/// Reads the format and size of the picture at `path` (see PictureInfo).
PictureInfo read_picture_info(const std::filesystem::path& path);

}  // namespace tformer::tasks
