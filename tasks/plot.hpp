/// \file
/// Plots for users, in the style of d2l's `plot` and `show_heatmaps`, drawn
/// on a tasks::Canvas (cairo) and written as PNG or SVG files, as the path's
/// extension says.
///
/// ```
///   plot_lines     one or more named series on shared axes: the training loss
///                  curve, the positional-encoding columns (document 000,
///                  positional encoding), the attention-pooling regression of
///                  document 003 (truth, prediction and the training points).
///   plot_heatmaps  a grid of attention-weight matrices (queries, keys), like
///                  d2l.show_heatmaps(matrices, xlabel='Keys', ylabel='Queries',
///                  titles=..., cmap='Reds'), with token tick labels and one
///                  shared colour bar.
/// ```
///
/// Both return the layout they used (axis limits and ticks, where the plotting
/// area, panels and cells are), so tests and callers can check the data behind
/// a picture and find a data point's pixel; layout_lines and layout_heatmaps
/// compute it without drawing. Non-finite data
/// never crash a plot: heatmap cells with NaN or inf are drawn grey
/// (colors::missing); line series break at a non-finite point and mark its x
/// with a small grey cross along the bottom of the plot. Files are written
/// atomically, so a failed plot leaves any earlier picture at the path intact.
#pragma once

#include "core/tensor.hpp"
#include "tasks/canvas.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tformer::tasks {

// ============================================================================
// Ticks
// ============================================================================

/// Tick values in [lo, hi] at the multiples of a "nice" step 1, 2 or 5 times a
/// power of ten: the smallest such step that gives at most `max_ticks` ticks
/// (at least 2 are asked for). E.g. nice_ticks(0, 1, 6) = 0, 0.2, ..., 1.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

/// A tick label with as many decimals as `step` needs: format_tick(0.5, 0.25)
/// = "0.50", format_tick(2000, 1000) = "2000"; steps from 1e5 up, and tiny
/// values, use a compact exponent form ("2.5e6", "1e-5"); -0 prints as "0".
std::string format_tick(double value, double step);

// ============================================================================
// Line plots
// ============================================================================

/// How a series is drawn.
enum class SeriesStyle {
    line,             ///< a polyline through the points in order
    points,           ///< a disc at each point (a scatter plot)
    line_and_points,  ///< both
};

/// One named curve. x and y have one value per point.
struct Series {
    std::string name{};                     ///< legend entry; unnamed series stay out of the legend
    std::vector<double> x{};                ///< empty means 0, 1, ..., y.size() - 1
    std::vector<double> y{};                ///< one value per point
    SeriesStyle style = SeriesStyle::line;  ///< line, points or both
    Dash dash = Dash::solid;                ///< like d2l's fmts '-', '--', ':', '-.'
    std::optional<Rgb> color{};             ///< default: matplotlib's cycle (blue, orange, green, ...) by index
    double line_width = 2.0;                ///< pixels
    double marker_radius = 3.5;             ///< pixels, for points
};

/// Everything plot_lines draws.
struct LinePlot {
    std::vector<Series> series{};  ///< the curves, drawn in order
    std::string title{};           ///< the title above the plot; empty for none
    std::string xlabel{};          ///< the x axis label; empty for none
    std::string ylabel{};          ///< the y axis label; empty for none
    bool log_y = false;            ///< logarithmic y axis (non-positive y count as missing)
    int width = 800;               ///< image size in pixels
    int height = 540;              ///< image height in pixels
};

/// Where plot_lines put things.
struct LinePlotLayout {
    int width = 0;   ///< image width in pixels
    int height = 0;  ///< image height in pixels
    /// The plotting area; the axes frame is the one-pixel border just around it.
    Rect area{};
    /// Axis limits in data units; (x_lo, y_lo) is the bottom-left frame corner.
    /// @{
    double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
    /// @}
    bool log_y = false;             ///< the y axis is logarithmic (y_lo, y_hi and the ticks are data values)
    std::vector<double> x_ticks{};  ///< tick positions on the x axis, in data units
    std::vector<double> y_ticks{};  ///< tick positions on the y axis, in data units
    /// The legend box (width 0 when there is no legend).
    Rect legend{};

    /// The pixel coordinates of data point (x, y).
    PointF to_pixel(double x, double y) const;
};

/// Where plot_lines would put things, without drawing (its checks included).
LinePlotLayout layout_lines(const LinePlot& plot);

/// Draws `plot` and writes it at `path`, a PNG or SVG file as its extension
/// says. Throws ValueError when there are no series, a series has no points,
/// x and y sizes differ, limits are empty, the image is too small for its
/// labels or the extension is neither; IOError naming the path when the file
/// cannot be written.
LinePlotLayout plot_lines(const std::filesystem::path& path, const LinePlot& plot);

// ============================================================================
// Heatmaps
// ============================================================================

/// Sequential colour maps from low values to high ones.
enum class Colormap {
    reds,     ///< near-white to dark red, like matplotlib's 'Reds' (d2l's choice)
    viridis,  ///< dark purple through teal to yellow, like matplotlib's 'viridis'
};

/// The colour of `t` in [0, 1] (clamped) on `map`; NaN gives colors::missing.
Rgb colormap_color(Colormap map, double t);

/// Everything plot_heatmaps draws.
struct Heatmaps {
    /// rows x cols panels, each a 2-D float32/float64 tensor (queries, keys)
    /// of the same shape; any strides. heatmap_grid() builds this from a
    /// (rows, cols, queries, keys) tensor.
    std::vector<std::vector<core::Tensor>> matrices{};
    std::string xlabel = "Keys";     ///< the x axis label of every panel
    std::string ylabel = "Queries";  ///< the y axis label of every panel
    /// Panel titles: one per column (shared by all rows, as in d2l) or one
    /// per panel in row-major order; empty for none.
    std::vector<std::string> titles{};
    /// A title over the whole figure; empty for none.
    std::string title{};
    /// One label per key (e.g. source tokens); empty labels the columns 0, 1, ...
    std::vector<std::string> x_ticks{};
    /// One label per query (e.g. target tokens); empty labels the rows 0, 1, ...
    std::vector<std::string> y_ticks{};
    Colormap cmap = Colormap::reds;  ///< the colour map
    /// Colour-scale limits; unset ones are the smallest / largest finite value.
    std::optional<double> vmin{};
    std::optional<double> vmax{};  ///< see vmin
    /// Pixels per cell side; 0 picks one (26 for a 10x10 matrix), shrunk as
    /// needed to keep the picture within 2400 x 2400 pixels.
    int cell_size = 0;
};

/// Where plot_heatmaps put things.
struct HeatmapLayout {
    int width = 0;        ///< image width in pixels
    int height = 0;       ///< image height in pixels
    int rows = 0;         ///< panel rows
    int cols = 0;         ///< panel columns
    int64_t queries = 0;  ///< rows of each matrix
    int64_t keys = 0;     ///< columns of each matrix
    /// Side of one cell in pixels.
    int cell = 0;
    /// The panels in row-major order; panel (r, c) is panels[r * cols + c] and
    /// shows key k, query q in the cell at column k, row q of the panel.
    std::vector<Rect> panels{};
    /// The colour bar (vmax at the top, vmin at the bottom).
    Rect colorbar{};
    double vmin = 0;  ///< the colour-scale limits used
    double vmax = 1;  ///< see vmin

    /// The centre pixel of the cell of (query, key) in panel (row, col).
    PointF cell_center(int row, int col, int64_t query, int64_t key) const;
};

/// Splits a (queries, keys), (cols, queries, keys) or (rows, cols, queries,
/// keys) tensor into the panel grid of Heatmaps::matrices (views, no copies).
std::vector<std::vector<core::Tensor>> heatmap_grid(const core::Tensor& weights);

/// Where plot_heatmaps would put things, without drawing (its checks included).
HeatmapLayout layout_heatmaps(const Heatmaps& maps);

/// Draws `maps` and writes it at `path`, a PNG or SVG file as its extension
/// says. Throws ValueError for a path that ends in neither, for
/// an empty grid or empty matrices, ragged rows, tick or title lists of the
/// wrong length, bad limits or a grid that cannot fit in the size cap;
/// ShapeError for matrices that are not 2-D or differ in shape; IOError naming
/// the path when the file cannot be written.
HeatmapLayout plot_heatmaps(const std::filesystem::path& path, const Heatmaps& maps);

}  // namespace tformer::tasks
