// Line plots and heatmaps, drawn on a tasks::Canvas (see plot.hpp). Each is
// planned first (limits, ticks, margins from the font's measures, where every
// part goes), then drawn.
#include "tasks/plot.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tformer::tasks {

namespace {

// All text is DejaVu Sans at 14 pixels, titles in bold.
const TextStyle kLabel{};
const TextStyle kTitle{.size = 15, .bold = true};
const FontMetrics& metrics() {
    static const FontMetrics m = font_metrics(kLabel);
    return m;
}
// The text box's height (ascent + descent) and the capitals' height, in whole pixels.
int text_height() { return static_cast<int>(std::ceil(metrics().height())); }
int cap_height() { return static_cast<int>(std::lround(metrics().cap_height)); }
constexpr int kMargin = 14;            // around the whole picture
constexpr int kTickLength = 5;         // tick marks point outwards from the frame
constexpr int kTickGap = 5;            // between a tick mark and its label
constexpr int kLabelGap = 10;          // between tick labels and the axis label
constexpr int kMaxHeatmapSide = 2400;  // the cells of a larger grid of heatmaps shrink

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int text_width(std::string_view text) { return static_cast<int>(std::ceil(tasks::text_width(text, kLabel))); }
int title_width(std::string_view text) { return static_cast<int>(std::ceil(tasks::text_width(text, kTitle))); }

// The baseline that puts text in a box whose top is y, and the one that
// centres capitals on row y (numbers and most labels have no descenders, so
// this is what looks centred).
double baseline_below(double top) { return top + metrics().ascent; }
double caps_centred_on(double y) { return y + 0.5 + metrics().cap_height / 2; }
TextStyle aligned(Align halign) { return {.halign = halign}; }

// ---- the parts both kinds of picture draw ----

// The margin from the picture's edge to the frame on a side with an axis:
// the picture's margin, the axis label (if any), the tick labels, the ticks.
int margin_to_frame(std::string_view axis_label, int tick_labels) {
    return kMargin + (axis_label.empty() ? 0 : text_height() + kLabelGap) + tick_labels + kTickGap + kTickLength + 1;
}

// The one-pixel axis-coloured frame just around `area`.
void frame(Canvas& canvas, const Rect& area) {
    canvas.stroke_rect({area.x - 1, area.y - 1, area.width + 2, area.height + 2}, colors::axis);
}

// A tick mark pointing down from the frame row `frame_y` at column x, and
// its label centred under it (or, vertical, reading upwards and ending there).
void x_tick(Canvas& canvas, int x, int frame_y, std::string_view label, bool vertical = false) {
    canvas.fill_rect({x, frame_y + 1, 1, kTickLength}, colors::axis);
    const int label_y = frame_y + 1 + kTickLength + kTickGap;
    if (vertical)  // capitals centred on the tick
        canvas.text(x + 0.5 + metrics().cap_height / 2, label_y, label, {.vertical = true, .halign = Align::end});
    else
        canvas.text(x + 0.5, baseline_below(label_y), label, aligned(Align::center));
}

// A tick mark pointing out from the frame column `frame_x` at row y, to the
// left (the label right-aligned before it) or to the right (the label after it).
void y_tick(Canvas& canvas, int y, int frame_x, std::string_view label, bool left = true) {
    const int mark_x = left ? frame_x - kTickLength : frame_x + 1;
    canvas.fill_rect({mark_x, y, kTickLength, 1}, colors::axis);
    if (left)
        canvas.text(mark_x - kTickGap, caps_centred_on(y), label, aligned(Align::end));
    else
        canvas.text(mark_x + kTickLength + kTickGap, caps_centred_on(y), label, kLabel);
}

// The x axis label (if any) centred on column x, under the band of tick
// labels `band` pixels deep below the frame row frame_y.
void x_axis_label(Canvas& canvas, double x, int frame_y, int band, std::string_view label) {
    if (label.empty()) return;
    canvas.text(x, baseline_below(frame_y + 1 + kTickLength + kTickGap + band + kLabelGap), label,
                aligned(Align::center));
}

// The y axis label (if any) along the left margin, reading upwards, centred on row y.
void y_axis_label(Canvas& canvas, double y, std::string_view label) {
    if (!label.empty()) canvas.text(kMargin + metrics().ascent, y, label, {.vertical = true, .halign = Align::center});
}

// The picture's title in bold, centred on column x at the top margin.
void title_at(Canvas& canvas, double x, std::string_view title) {
    TextStyle style = kTitle;
    style.halign = Align::center;
    canvas.text(x, baseline_below(kMargin), title, style);
}

// One tick: where (in data units) and what it says.
struct Tick {
    double value;
    std::string label;
};

// The widest of `texts` in pixels, each taken through `text_of`.
template <class Range, class Get>
int widest(const Range& texts, Get text_of) {
    int w = 0;
    for (const auto& t : texts) w = std::max(w, text_width(text_of(t)));
    return w;
}
int widest_label(const std::vector<Tick>& ticks) {
    return widest(ticks, [](const Tick& t) -> const std::string& { return t.label; });
}

std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks) {
    const std::vector<double> values = nice_ticks(lo, hi, max_ticks);
    const double step = values.size() > 1 ? values[1] - values[0] : std::max(std::abs(lo), 1.0);
    std::vector<Tick> ticks;
    for (double v : values) ticks.push_back({v, format_tick(v, step)});
    return ticks;
}

// Ticks of a logarithmic axis spanning 10^lo_exp .. 10^hi_exp: whole decades
// when the range holds at least two, else 1-2-5 multiples of powers of ten,
// else plain linear ticks (a narrow range looks almost linear anyway).
std::vector<Tick> log_ticks(double lo_exp, double hi_exp, int max_ticks) {
    std::vector<Tick> ticks;
    const auto add = [&](double v) { ticks.push_back({v, format_tick(v, v)}); };
    // Whole decades, every 1, 2, 5, 10, ... decades so that at most max_ticks
    // show (no more asked for than there are decades: the step stays whole).
    const double first = std::ceil(lo_exp - 1e-9), last = std::floor(hi_exp + 1e-9);
    if (last - first >= 1) {
        for (double k : nice_ticks(first, last, static_cast<int>(std::min<double>(max_ticks, last - first + 1))))
            add(std::pow(10.0, k));
        return ticks;
    }
    for (double k = std::floor(lo_exp); k <= std::ceil(hi_exp); ++k)
        for (double m : {1.0, 2.0, 5.0}) {
            const double e = k + std::log10(m);
            if (e >= lo_exp - 1e-9 && e <= hi_exp + 1e-9) add(m * std::pow(10.0, k));
        }
    if (ticks.size() >= 2 && static_cast<int>(ticks.size()) <= max_ticks) return ticks;
    return linear_ticks(std::pow(10.0, lo_exp), std::pow(10.0, hi_exp), max_ticks);
}

// A y value in plotting coordinates: log10 of it on a log axis (NaN, not
// drawn, for y <= 0), itself on a linear one.
double on_axis(bool log, double y) { return log ? (y > 0 ? std::log10(y) : kNaN) : y; }

// An axis: limits in plotting coordinates (log10 of the data for a log axis).
struct AxisRange {
    double lo = 0;
    double hi = 1;
};

// The limits of `range` widened to the finite ones of `values`; nothing when
// neither holds a finite value.
std::optional<AxisRange> finite_range(const std::vector<double>& values, std::optional<AxisRange> range = {}) {
    for (double v : values)
        if (std::isfinite(v))
            range = range ? AxisRange{std::min(range->lo, v), std::max(range->hi, v)} : AxisRange{v, v};
    return range;
}

// Data limits padded by `pad` of the span on each side; a single value gets
// a unit-sized window around it, no data the range [0, 1].
AxisRange padded(std::optional<AxisRange> data, double pad) {
    if (!data) return {};
    if (data->lo == data->hi) {
        const double half = std::max(0.5, std::abs(data->lo) * 0.05);
        return {data->lo - half, data->hi + half};
    }
    const double span = data->hi - data->lo;
    return {data->lo - pad * span, data->hi + pad * span};
}

}  // namespace

// ============================================================================
// Ticks and colours
// ============================================================================

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
    if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo || !std::isfinite(hi - lo)) return {};
    if (hi == lo) return {lo};
    max_ticks = std::max(max_ticks, 2);
    const double span = hi - lo;
    // A span too small for its magnitude (1 .. 1 + 1e-13) or for any power of
    // ten to divide: only the ends can be told apart.
    if (span <= 1e-12 * std::max(std::abs(lo), std::abs(hi)) || span < 1e-280) return {lo, hi};
    // Try steps 1, 2, 5 x 10^k upwards, starting below span / max_ticks; the
    // first with few enough multiples k * step inside [lo, hi] wins.
    for (double power = std::pow(10.0, std::floor(std::log10(span / max_ticks)) - 1); std::isfinite(power); power *= 10)
        for (double m : {1.0, 2.0, 5.0}) {
            const double step = m * power;
            const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
            if (last - first + 1 > max_ticks) continue;
            std::vector<double> ticks;
            for (int i = 0; i <= static_cast<int>(last - first); ++i) {
                const double v = (first + i) * step;
                ticks.push_back(v == 0 ? 0.0 : v);  // no -0
            }
            return ticks;
        }
    return {lo, hi};  // steps ran out of doubles (spans near 1e308)
}

std::string format_tick(double value, double step) {
    if (!std::isfinite(value)) return fmt::format("{}", value);
    step = std::abs(step);
    if (!(step > 0) || !std::isfinite(step)) step = std::max(std::abs(value), 1.0);
    if (std::abs(value) < step * 1e-9) value = 0;  // rounding noise of k * step
    if (value == 0 && step < 1e-4) return "0";     // the neighbours use exponent form
    const double magnitude = std::abs(value);
    // Exponent form for big steps and for tiny values, decided by the step so
    // that the labels of one axis share a form.
    if (value != 0 && (step >= 1e5 || magnitude >= 1e15 || (step < 1e-4 && magnitude < 1e-3))) {
        // As many significant digits as the step resolves, written compactly: 2.5e6, 1e-5.
        const int digits = static_cast<int>(std::floor(std::log10(magnitude)) - std::floor(std::log10(step))) + 1;
        const std::string text = fmt::format("{:.{}g}", value, std::clamp(digits, 1, 15));
        const size_t e = text.find('e');  // "2.5e+06" becomes "2.5e6", "1e-05" "1e-5"
        return e == std::string::npos ? text : text.substr(0, e + 1) + std::to_string(std::stoi(text.substr(e + 1)));
    }
    // Fixed form with the fewest decimals that write the step exactly.
    int decimals = 0;
    for (double scaled = step; decimals < 10; ++decimals, scaled *= 10)
        if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    std::string text = fmt::format("{:.{}f}", value, decimals);
    if (text.front() == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
    return text;
}

Rgb colormap_color(Colormap map, double t) {
    if (std::isnan(t)) return colors::missing;
    // Each map is a few hand-picked anchor colours at t = 0, 1/4, 1/2, 3/4, 1,
    // interpolated linearly in RGB. Both get darker (reds) or lighter
    // (viridis) monotonically, so the order of values reads off the shade.
    static constexpr Rgb kReds[] = {{255, 245, 240}, {252, 187, 161}, {246, 110, 80}, {203, 27, 30}, {103, 0, 13}};
    static constexpr Rgb kViridis[] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    const Rgb* anchors = map == Colormap::viridis ? kViridis : kReds;
    const double x = std::clamp(t, 0.0, 1.0) * 4;
    const int i = std::min(static_cast<int>(x), 3);
    const double f = x - i;
    const auto mix = [f](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + f * (b - a))); };
    const Rgb a = anchors[i], b = anchors[i + 1];
    return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

// ============================================================================
// Line plots
// ============================================================================

PointF LinePlotLayout::to_pixel(double x, double y) const {
    // x_lo / x_hi sit on the centres of the left / right frame columns.
    const double ty = on_axis(log_y, y), ty_lo = on_axis(log_y, y_lo), ty_hi = on_axis(log_y, y_hi);
    return {area.x - 0.5 + (x - x_lo) / (x_hi - x_lo) * (area.width + 1),
            area.bottom() + 0.5 - (ty - ty_lo) / (ty_hi - ty_lo) * (area.height + 1)};
}

namespace {

// A series in pixel space: runs of consecutive drawable points (a line
// breaks at missing data) and the x pixels of the missing points.
struct SeriesPixels {
    std::vector<std::vector<PointF>> runs;
    std::vector<double> missing_x;
};

SeriesPixels series_pixels(const Series& s, const LinePlotLayout& layout) {
    SeriesPixels out;
    bool in_run = false;
    for (size_t i = 0; i < s.y.size(); ++i) {
        const double x = s.x.empty() ? static_cast<double>(i) : s.x[i];
        const PointF p = layout.to_pixel(x, s.y[i]);
        if (!std::isfinite(x)) {
            in_run = false;
        } else if (!std::isfinite(p.y)) {
            out.missing_x.push_back(p.x);
            in_run = false;
        } else {
            if (!in_run) out.runs.emplace_back();
            out.runs.back().push_back(p);
            in_run = true;
        }
    }
    return out;
}

// How many series pixels (lines sampled every few pixels) fall inside `box`;
// the 'best' legend corner is the one that covers the fewest.
int points_under(const Rect& box, const std::vector<SeriesPixels>& all) {
    int count = 0;
    const auto hit = [&](PointF p) {  // compared as doubles: far-away points must not overflow an int
        count += p.x >= box.x && p.x < box.right() && p.y >= box.y && p.y < box.bottom();
    };
    for (const SeriesPixels& s : all)
        for (const std::vector<PointF>& run : s.runs) {
            for (size_t k = 0; k < run.size(); ++k) {
                hit(run[k]);
                if (k + 1 == run.size()) break;
                const double len = std::hypot(run[k + 1].x - run[k].x, run[k + 1].y - run[k].y);
                const int steps = static_cast<int>(std::min(len / 3, 2000.0));
                for (int j = 1; j < steps; ++j) {
                    const double f = static_cast<double>(j) / steps;
                    hit({run[k].x + f * (run[k + 1].x - run[k].x), run[k].y + f * (run[k + 1].y - run[k].y)});
                }
            }
        }
    return count;
}

Rgb palette_color(size_t index) {
    // The familiar matplotlib / d2l cycle, so the curves look as in the book.
    static constexpr Rgb kPalette[] = {
        {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
        {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
    };
    return kPalette[index % std::size(kPalette)];
}

Rgb series_color(const Series& s, size_t index) { return s.color.value_or(palette_color(index)); }

void validate(const LinePlot& plot, const char* op) {
    if (plot.series.empty()) fail<ValueError>("{}: no series to plot", op);
    for (size_t i = 0; i < plot.series.size(); ++i) {
        const Series& s = plot.series[i];
        if (s.y.empty()) fail<ValueError>("{}: series {} ('{}') has no points", op, i, s.name);
        if (!s.x.empty() && s.x.size() != s.y.size())
            fail<ValueError>("{}: series {} ('{}') has {} x values but {} y values", op, i, s.name, s.x.size(),
                             s.y.size());
        if (!(s.line_width > 0 && s.line_width <= 50) || !(s.marker_radius > 0 && s.marker_radius <= 50))
            fail<ValueError>("{}: series {} ('{}') needs line_width and marker_radius in (0, 50], got {} and {}", op, i,
                             s.name, s.line_width, s.marker_radius);
    }
    if (plot.width < 200 || plot.height < 150 || plot.width > kMaxImageSide || plot.height > kMaxImageSide)
        fail<ValueError>("{}: image size {}x{} is outside 200x150 .. {}x{}", op, plot.width, plot.height, kMaxImageSide,
                         kMaxImageSide);
}

// Everything plot_lines draws, placed.
struct LinePlan {
    LinePlotLayout layout;
    std::vector<Tick> x_ticks, y_ticks;
    std::vector<SeriesPixels> pixels;  // per series
    std::vector<size_t> named;         // the series in the legend
};

// The axis limits: the data's (only points drawn count: finite x, and
// finite y, positive on a log axis).
void set_limits(const LinePlot& plot, LinePlotLayout& layout, const char* op) {
    std::vector<double> xs, ys, all_x;
    bool scatter = false;
    for (const Series& s : plot.series) {
        scatter = scatter || s.style != SeriesStyle::line;
        for (size_t i = 0; i < s.y.size(); ++i) {
            const double x = s.x.empty() ? static_cast<double>(i) : s.x[i];
            const double y = on_axis(plot.log_y, s.y[i]);
            all_x.push_back(x);
            if (std::isfinite(x) && std::isfinite(y)) xs.push_back(x), ys.push_back(y);
        }
    }
    // Lines run edge to edge as in d2l; markers get a little room so the
    // outermost ones are not cut in half. y always gets 5% each side.
    const AxisRange x_data = padded(finite_range(xs.empty() ? all_x : xs), scatter ? 0.03 : 0.0);
    const std::optional<AxisRange> y_range = finite_range(ys);
    AxisRange y_data = padded(y_range, 0.05);
    if (plot.log_y && y_range && y_range->lo == y_range->hi)
        y_data = {ys[0] - 0.5, ys[0] + 0.5};  // half a decade either side of a constant
    layout.width = plot.width;
    layout.height = plot.height;
    layout.log_y = plot.log_y;
    layout.x_lo = x_data.lo;
    layout.x_hi = x_data.hi;
    layout.y_lo = plot.log_y ? std::pow(10.0, y_data.lo) : y_data.lo;
    layout.y_hi = plot.log_y ? std::pow(10.0, y_data.hi) : y_data.hi;
    if (!(layout.x_lo < layout.x_hi))
        fail<ValueError>("{}: x axis limits [{}, {}] are empty", op, layout.x_lo, layout.x_hi);
    if (!(layout.y_lo < layout.y_hi))
        fail<ValueError>("{}: y axis limits [{}, {}] are empty", op, layout.y_lo, layout.y_hi);
    const double ty_lo = on_axis(plot.log_y, layout.y_lo), ty_hi = on_axis(plot.log_y, layout.y_hi);
    // Ranges wider than the largest double (e.g. -1e308 .. 1e308) cannot be scaled.
    if (!std::isfinite(layout.x_hi - layout.x_lo) || !std::isfinite(ty_hi - ty_lo))
        fail<ValueError>("{}: axis limits x [{}, {}], y [{}, {}] span too wide a range to draw", op, layout.x_lo,
                         layout.x_hi, layout.y_lo, layout.y_hi);
}

// The margins hold the title, tick labels and axis labels; the ticks depend
// on the room left, the left margin on the y tick labels.
void set_area_and_ticks(const LinePlot& plot, LinePlan& plan, const char* op) {
    LinePlotLayout& layout = plan.layout;
    const double ty_lo = on_axis(plot.log_y, layout.y_lo), ty_hi = on_axis(plot.log_y, layout.y_hi);
    const int top = kMargin + (plot.title.empty() ? 0 : text_height() + 10) + 1;
    const int bottom = margin_to_frame(plot.xlabel, text_height());
    const int area_h = plot.height - top - bottom;
    if (area_h < 40)
        fail<ValueError>("{}: a {}x{} image is too small for the plot and its labels", op, plot.width, plot.height);
    // About one y tick per 45 pixels.
    plan.y_ticks =
        plot.log_y ? log_ticks(ty_lo, ty_hi, std::max(2, area_h / 45)) : linear_ticks(ty_lo, ty_hi, area_h / 45);
    const int left = margin_to_frame(plot.ylabel, widest_label(plan.y_ticks));
    // x ticks: as many as fit with 20 pixels between labels; the right margin
    // leaves room for half of the last label, which is centred on its tick.
    int right = kMargin + 1, area_w = 0;
    for (int pass = 0; pass < 2; ++pass) {
        area_w = plot.width - left - right;
        if (area_w < 40)
            fail<ValueError>("{}: a {}x{} image is too small for the plot and its labels", op, plot.width, plot.height);
        for (int max_ticks = std::max(2, area_w / 60);; --max_ticks) {
            plan.x_ticks = linear_ticks(layout.x_lo, layout.x_hi, max_ticks);
            if (max_ticks <= 2 || static_cast<int>(plan.x_ticks.size()) * (widest_label(plan.x_ticks) + 20) <= area_w)
                break;
        }
        if (!plan.x_ticks.empty()) right = std::max(right, text_width(plan.x_ticks.back().label) / 2 + 4);
    }
    layout.area = {left, top, area_w, area_h};
    for (const Tick& t : plan.x_ticks) layout.x_ticks.push_back(t.value);
    for (const Tick& t : plan.y_ticks) layout.y_ticks.push_back(t.value);
}

// The legend's box: its size from the names, its corner the one over the
// fewest drawn points, in matplotlib's order ('best').
constexpr int kLegendPad = 8, kLegendSample = 30, kLegendInset = 10;
int legend_row() { return text_height() + 6; }

void place_legend(const LinePlot& plot, LinePlan& plan) {
    for (size_t i = 0; i < plot.series.size(); ++i)
        if (!plot.series[i].name.empty()) plan.named.push_back(i);
    if (plan.named.empty()) return;
    const int name_w = widest(plan.named, [&](size_t i) -> const std::string& { return plot.series[i].name; });
    const int w = kLegendPad + kLegendSample + 8 + name_w + kLegendPad;
    const int h = kLegendPad + static_cast<int>(plan.named.size()) * legend_row() - 6 + kLegendPad;
    const Rect& area = plan.layout.area;
    const Rect corners[] = {
        {area.right() - kLegendInset - w, area.y + kLegendInset, w, h},             // upper right
        {area.x + kLegendInset, area.y + kLegendInset, w, h},                       // upper left
        {area.x + kLegendInset, area.bottom() - kLegendInset - h, w, h},            // lower left
        {area.right() - kLegendInset - w, area.bottom() - kLegendInset - h, w, h},  // lower right
    };
    int choice = 0, fewest = std::numeric_limits<int>::max();
    for (int c = 0; c < 4; ++c) {
        const int n = points_under(corners[c], plan.pixels);
        if (n < fewest) fewest = n, choice = c;
    }
    plan.layout.legend = corners[choice];
}

LinePlan plan_lines(const LinePlot& plot, const char* op) {
    validate(plot, op);
    LinePlan plan;
    set_limits(plot, plan.layout, op);
    set_area_and_ticks(plot, plan, op);
    for (const Series& s : plot.series) plan.pixels.push_back(series_pixels(s, plan.layout));
    place_legend(plot, plan);
    return plan;
}

// ---- drawing a line plot ---------------------------------------------------------------

int column_of(const LinePlotLayout& layout, double x) {
    return static_cast<int>(std::floor(layout.to_pixel(x, layout.y_lo).x));
}
int row_of(const LinePlotLayout& layout, double y) {
    return static_cast<int>(std::floor(layout.to_pixel(layout.x_lo, y).y));
}

// The grid behind, then every series, clipped to the plotting area.
void draw_series(Canvas& canvas, const LinePlot& plot, const LinePlan& plan) {
    const LinePlotLayout& layout = plan.layout;
    const Rect& area = layout.area;
    for (double x : layout.x_ticks) canvas.fill_rect({column_of(layout, x), area.y, 1, area.height}, colors::grid);
    for (double y : layout.y_ticks) canvas.fill_rect({area.x, row_of(layout, y), area.width, 1}, colors::grid);
    canvas.set_clip(area);
    for (size_t i = 0; i < plot.series.size(); ++i) {
        const Series& s = plot.series[i];
        const Rgb color = series_color(s, i);
        const SeriesPixels& pixels = plan.pixels[i];
        if (s.style != SeriesStyle::points)
            for (const std::vector<PointF>& run : pixels.runs) {
                if (run.size() == 1 && s.style == SeriesStyle::line)  // a lone point: a dot, so it shows
                    canvas.circle(run[0], std::max(s.line_width, 3.0), color);
                else
                    canvas.polyline(run, {.color = color, .width = s.line_width, .dash = s.dash});
            }
        if (s.style != SeriesStyle::line) {
            // Scatter markers are a little transparent so that piles of points show.
            const double alpha = s.style == SeriesStyle::points ? 0.7 : 1.0;
            for (const std::vector<PointF>& run : pixels.runs)
                for (PointF p : run) canvas.circle(p, s.marker_radius, color, alpha);
        }
        // Missing data: a small grey cross on the bottom edge at its x.
        for (double px : pixels.missing_x) {
            const double cy = area.bottom() - 7.0, r = 4.0;
            const Stroke pen{.color = colors::missing, .width = 1.5};
            canvas.line({px - r, cy - r}, {px + r, cy + r}, pen);
            canvas.line({px - r, cy + r}, {px + r, cy - r}, pen);
        }
    }
    canvas.reset_clip();
}

// The frame, tick marks with their labels, the axis labels and the title.
void draw_axes(Canvas& canvas, const LinePlot& plot, const LinePlan& plan) {
    const LinePlotLayout& layout = plan.layout;
    const Rect& area = layout.area;
    frame(canvas, area);
    for (const Tick& t : plan.x_ticks) x_tick(canvas, column_of(layout, t.value), area.bottom(), t.label);
    for (const Tick& t : plan.y_ticks) y_tick(canvas, row_of(layout, t.value), area.x - 1, t.label);
    const double centre_x = area.x + area.width / 2.0;
    x_axis_label(canvas, centre_x, area.bottom(), text_height(), plot.xlabel);
    y_axis_label(canvas, area.y + area.height / 2.0, plot.ylabel);
    if (!plot.title.empty()) title_at(canvas, centre_x, plot.title);
}

// The legend: a sample of each named series' line or marker, then its name.
void draw_legend(Canvas& canvas, const LinePlot& plot, const LinePlan& plan) {
    const Rect& box = plan.layout.legend;
    if (box.width == 0) return;
    canvas.set_clip(plan.layout.area);
    canvas.fill_rect(box, colors::white, 0.9);
    canvas.stroke_rect(box, {204, 204, 204});
    for (size_t k = 0; k < plan.named.size(); ++k) {
        const Series& s = plot.series[plan.named[k]];
        const Rgb color = series_color(s, plan.named[k]);
        const int row = box.y + kLegendPad + static_cast<int>(k) * legend_row() + cap_height() / 2;
        const double x0 = box.x + kLegendPad, x1 = x0 + kLegendSample, y = row + 0.5;
        if (s.style != SeriesStyle::points)
            canvas.line({x0, y}, {x1, y}, {.color = color, .width = s.line_width, .dash = s.dash});
        if (s.style != SeriesStyle::line) canvas.circle({(x0 + x1) / 2, y}, s.marker_radius, color);
        canvas.text(box.x + kLegendPad + kLegendSample + 8, caps_centred_on(row), s.name, kLabel);
    }
    canvas.reset_clip();
}

}  // namespace

LinePlotLayout layout_lines(const LinePlot& plot) { return plan_lines(plot, "layout_lines").layout; }

LinePlotLayout plot_lines(const std::filesystem::path& path, const LinePlot& plot) {
    const PictureFormat format = picture_format(path, "plot_lines");
    const LinePlan plan = plan_lines(plot, "plot_lines");
    Canvas canvas(plot.width, plot.height, format, "plot_lines");
    draw_series(canvas, plot, plan);
    draw_axes(canvas, plot, plan);
    draw_legend(canvas, plot, plan);
    canvas.write(path);
    return plan.layout;
}

// ============================================================================
// Heatmaps
// ============================================================================

PointF HeatmapLayout::cell_center(int row, int col, int64_t query, int64_t key) const {
    if (row < 0 || row >= rows || col < 0 || col >= cols || query < 0 || query >= queries || key < 0 || key >= keys)
        fail<IndexError>(
            "HeatmapLayout::cell_center: panel ({}, {}) cell ({}, {}) is outside a {}x{} grid of "
            "({}x{}) matrices",
            row, col, query, key, rows, cols, queries, keys);
    const Rect& p = panels[static_cast<size_t>(row) * cols + col];
    return {p.x + (key + 0.5) * cell, p.y + (query + 0.5) * cell};
}

std::vector<std::vector<core::Tensor>> heatmap_grid(const core::Tensor& weights) {
    if (!weights.defined()) fail<ValueError>("heatmap_grid: tensor is undefined");
    const int d = weights.dim();
    if (d < 2 || d > 4)
        fail<ShapeError>(
            "heatmap_grid: expected (queries, keys), (cols, queries, keys) or (rows, cols, queries, "
            "keys), got shape {}",
            shape_str(weights.shape()));
    const core::Tensor grid = d == 2 ? weights.unsqueeze(0).unsqueeze(0) : d == 3 ? weights.unsqueeze(0) : weights;
    std::vector<std::vector<core::Tensor>> out(static_cast<size_t>(grid.size(0)));
    for (int64_t r = 0; r < grid.size(0); ++r)
        for (int64_t c = 0; c < grid.size(1); ++c) out[r].push_back(grid.select(0, r).select(0, c));  // (Q, K)
    return out;
}

namespace {

// The matrices of a grid, checked and read (any strides), with the panel titles spelt out.
struct HeatmapData {
    int rows = 0, cols = 0;
    int64_t queries = 0, keys = 0;
    std::vector<std::vector<double>> values;  // per panel in row-major order, each (Q, K) row-major
    std::vector<std::string> titles;          // one per panel, or none
    double vmin = 0, vmax = 1;                // the colour scale
};

// The colour scale: the finite values' range unless given; a constant is centred on it.
void set_color_scale(const Heatmaps& maps, HeatmapData& d, const char* op) {
    for (const auto& [limit, name] : {std::pair{maps.vmin, "vmin"}, std::pair{maps.vmax, "vmax"}})
        if (limit && !std::isfinite(*limit)) fail<ValueError>("{}: {} must be finite, got {}", op, name, *limit);
    std::optional<AxisRange> range;
    for (const std::vector<double>& panel : d.values) range = finite_range(panel, range);
    const AxisRange data = range.value_or(AxisRange{0, 1});  // nothing finite: every cell is grey anyway
    double vmin = maps.vmin.value_or(data.lo), vmax = maps.vmax.value_or(data.hi);
    if (maps.vmin && maps.vmax && !(vmin < vmax)) fail<ValueError>("{}: vmin {} must be below vmax {}", op, vmin, vmax);
    if (!std::isfinite(vmax - vmin))
        fail<ValueError>("{}: the colour scale [{}, {}] spans too wide a range to draw", op, vmin, vmax);
    if (!(vmin < vmax)) {
        const double half = std::max(0.5, std::abs(vmin) * 0.05);
        if (maps.vmin && !maps.vmax)
            vmax = vmin + 2 * half;
        else if (maps.vmax && !maps.vmin)
            vmin = vmax - 2 * half;
        else
            vmin -= half, vmax += half;
    }
    d.vmin = vmin, d.vmax = vmax;
}

// The matrices checked and read, the titles spelt out, the colour scale set.
HeatmapData read_heatmaps(const Heatmaps& maps, const char* op) {
    if (maps.matrices.empty() || maps.matrices[0].empty()) fail<ValueError>("{}: no matrices to plot", op);
    HeatmapData d;
    d.rows = static_cast<int>(maps.matrices.size());
    d.cols = static_cast<int>(maps.matrices[0].size());
    for (int r = 0; r < d.rows; ++r) {
        if (static_cast<int>(maps.matrices[r].size()) != d.cols)
            fail<ValueError>("{}: row {} of the grid has {} matrices but row 0 has {}", op, r, maps.matrices[r].size(),
                             d.cols);
        for (int c = 0; c < d.cols; ++c) {
            const core::Tensor& m = maps.matrices[r][c];
            if (!m.defined()) fail<ValueError>("{}: matrix [{}][{}] is undefined", op, r, c);
            if (!core::is_floating(m.dtype()))
                fail<ValueError>("{}: matrix [{}][{}] has dtype {}, expected float32 or float64", op, r, c,
                                 core::dtype_name(m.dtype()));
            if (m.dim() != 2)
                fail<ShapeError>("{}: matrix [{}][{}] must be 2-D (queries, keys), got shape {}", op, r, c,
                                 shape_str(m.shape()));
            if (m.numel() == 0) fail<ValueError>("{}: matrix [{}][{}] is empty {}", op, r, c, shape_str(m.shape()));
            if (r == 0 && c == 0) d.queries = m.size(0), d.keys = m.size(1);
            if (m.size(0) != d.queries || m.size(1) != d.keys)
                fail<ShapeError>("{}: matrix [{}][{}] has shape {} but matrix [0][0] has shape {}", op, r, c,
                                 shape_str(m.shape()), shape_str(maps.matrices[0][0].shape()));
            d.values.push_back(m.to_vector<double>());  // follows any strides
        }
    }
    if (!maps.x_ticks.empty() && static_cast<int64_t>(maps.x_ticks.size()) != d.keys)
        fail<ValueError>("{}: {} x tick labels for {} keys", op, maps.x_ticks.size(), d.keys);
    if (!maps.y_ticks.empty() && static_cast<int64_t>(maps.y_ticks.size()) != d.queries)
        fail<ValueError>("{}: {} y tick labels for {} queries", op, maps.y_ticks.size(), d.queries);
    // Titles: one per column (repeated on every row, as d2l does) or one per panel.
    if (!maps.titles.empty()) {
        if (static_cast<int>(maps.titles.size()) == d.cols) {
            for (int r = 0; r < d.rows; ++r) d.titles.insert(d.titles.end(), maps.titles.begin(), maps.titles.end());
        } else if (static_cast<int>(maps.titles.size()) == d.rows * d.cols) {
            d.titles = maps.titles;
        } else {
            fail<ValueError>("{}: {} titles for a {}x{} grid (give {} or {})", op, maps.titles.size(), d.rows, d.cols,
                             d.cols, d.rows * d.cols);
        }
    }
    set_color_scale(maps, d, op);
    return d;
}

// A row or column of tick labels: which cells are labelled and with what.
struct TickLabels {
    std::vector<std::pair<int64_t, std::string>> shown;  // (cell index, label)
    bool vertical = false;                               // x labels turned a quarter turn
    int width = 0;                                       // widest shown label (unrotated)
};

// Labels cells 0..n-1 with `tokens` (or their indices when there are none),
// thinning them so neighbours keep a few pixels apart. Token labels along x
// that are wider than a cell are turned vertical; index labels stay
// horizontal and step by 1, 2, 5, 10, ... instead.
TickLabels tick_labels(const std::vector<std::string>& tokens, int64_t n, int cell, bool along_x) {
    TickLabels out;
    const auto label = [&](int64_t i) { return tokens.empty() ? std::to_string(i) : tokens[i]; };
    int widest = 0;
    for (int64_t i = 0; i < n; ++i) widest = std::max(widest, text_width(label(i)));
    int64_t step = 1;
    if (tokens.empty()) {
        // Index labels: the smallest 1-2-5 step whose pitch fits the label.
        const int need = along_x ? widest + 16 : text_height() + 4;
        for (int64_t power = 1; step * cell < need; power *= 10) {
            for (int64_t m : {1, 2, 5}) {
                step = m * power;
                if (step * cell >= need) break;
            }
        }
    } else {
        out.vertical = along_x && widest + 6 > cell;
        const int need = along_x && !out.vertical ? widest + 6 : text_height() + 2;
        step = std::max<int64_t>(1, (need + cell - 1) / cell);
    }
    for (int64_t i = 0; i < n; i += step) {
        out.shown.emplace_back(i, label(i));
        out.width = std::max(out.width, text_width(out.shown.back().second));
    }
    return out;
}

// Everything about the picture that depends on the cell size.
struct HeatmapPlan {
    HeatmapLayout layout;
    TickLabels x_labels, y_labels;
    std::vector<Tick> bar_ticks;
    bool xlabel_per_panel = true, ylabel_per_panel = true;
    int title_band = 0;  // height reserved above each panel row for panel titles
    int x_band = 0;      // depth of the x tick labels (their width when vertical)
};

HeatmapPlan plan_heatmaps(const Heatmaps& maps, const HeatmapData& d, int cell) {
    HeatmapPlan plan;
    HeatmapLayout& L = plan.layout;
    L.rows = d.rows, L.cols = d.cols, L.queries = d.queries, L.keys = d.keys, L.cell = cell;
    L.vmin = d.vmin, L.vmax = d.vmax;
    const int rows = d.rows, cols = d.cols;
    const int64_t queries = d.queries, keys = d.keys;
    plan.x_labels = tick_labels(maps.x_ticks, keys, cell, true);
    plan.y_labels = tick_labels(maps.y_ticks, queries, cell, false);
    const int64_t panel_w = keys * cell, panel_h = queries * cell;

    const int title_w = widest(d.titles, [](const std::string& t) -> const std::string& { return t; });
    plan.title_band = d.titles.empty() ? 0 : text_height() + 8;
    // Panels sit 1 pixel inside their frames; gaps leave room for titles.
    const int64_t col_gap = std::max<int64_t>(20, title_w + 16 - panel_w);
    const int64_t row_gap = 20 + plan.title_band;
    const int64_t grid_w = cols * panel_w + (cols - 1) * col_gap;
    const int64_t grid_h = rows * panel_h + (rows - 1) * row_gap;
    // One axis label per panel when it fits beside the panel, else one for the grid.
    plan.xlabel_per_panel = cols == 1 || text_width(maps.xlabel) + 12 <= panel_w + col_gap;
    plan.ylabel_per_panel = rows == 1 || text_width(maps.ylabel) + 12 <= panel_h + row_gap;

    plan.x_band = plan.x_labels.vertical ? plan.x_labels.width : text_height();
    const int64_t left = margin_to_frame(maps.ylabel, plan.y_labels.width);
    const int64_t top = kMargin + (maps.title.empty() ? 0 : text_height() + 12) + plan.title_band + 1;
    const int64_t bottom = margin_to_frame(maps.xlabel, plan.x_band);

    // The colour bar spans the grid's height, with about one tick per 40 pixels.
    plan.bar_ticks = linear_ticks(d.vmin, d.vmax, static_cast<int>(std::max<int64_t>(2, grid_h / 40)));
    if (plan.bar_ticks.size() < 2) {
        const double step = d.vmax - d.vmin;
        plan.bar_ticks = {{d.vmin, format_tick(d.vmin, step)}, {d.vmax, format_tick(d.vmax, step)}};
    }
    constexpr int kBarGap = 24, kBarWidth = 16;
    const int64_t width = std::max<int64_t>(
        left + grid_w + kBarGap + kBarWidth + 1 + kTickLength + kTickGap + widest_label(plan.bar_ticks) + kMargin,
        2 * kMargin + title_width(maps.title));
    const int64_t height = top + grid_h + bottom;
    L.width = static_cast<int>(std::min<int64_t>(width, std::numeric_limits<int>::max()));
    L.height = static_cast<int>(std::min<int64_t>(height, std::numeric_limits<int>::max()));
    if (width > kMaxHeatmapSide || height > kMaxHeatmapSide) return plan;  // caller shrinks the cells

    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            L.panels.push_back({static_cast<int>(left + c * (panel_w + col_gap)),
                                static_cast<int>(top + r * (panel_h + row_gap)), static_cast<int>(panel_w),
                                static_cast<int>(panel_h)});
    L.colorbar = {static_cast<int>(left + grid_w + kBarGap), static_cast<int>(top), kBarWidth,
                  static_cast<int>(grid_h)};
    return plan;
}

// The plan with the largest cell size (up to the requested one) that fits the size cap.
HeatmapPlan fit_heatmaps(const Heatmaps& maps, const HeatmapData& d, const char* op) {
    if (maps.cell_size < 0 || maps.cell_size > 200)
        fail<ValueError>("{}: cell_size {} is outside 0..200", op, maps.cell_size);
    const int64_t longest = std::max(d.queries, d.keys);
    int cell = maps.cell_size > 0 ? maps.cell_size : static_cast<int>(std::clamp<int64_t>(260 / longest, 4, 32));
    HeatmapPlan plan = plan_heatmaps(maps, d, cell);
    while (plan.layout.panels.empty() && cell > 1) plan = plan_heatmaps(maps, d, --cell);
    if (plan.layout.panels.empty())
        fail<ValueError>(
            "{}: a {}x{} grid of ({}x{}) matrices needs {}x{} pixels even at 1 pixel per cell, over "
            "the cap of {}x{}",
            op, d.rows, d.cols, d.queries, d.keys, plan.layout.width, plan.layout.height, kMaxHeatmapSide,
            kMaxHeatmapSide);
    return plan;
}

// Every panel's cells, frame and title.
void draw_panels(Canvas& canvas, const Heatmaps& maps, const HeatmapData& d, const HeatmapPlan& plan) {
    const HeatmapLayout& L = plan.layout;
    const auto color_of = [&](double v) {
        return std::isfinite(v) ? colormap_color(maps.cmap, (v - d.vmin) / (d.vmax - d.vmin)) : colors::missing;
    };
    for (size_t index = 0; index < L.panels.size(); ++index) {
        const Rect& p = L.panels[index];
        for (int64_t q = 0; q < d.queries; ++q)
            for (int64_t k = 0; k < d.keys; ++k)
                canvas.fill_rect(
                    {p.x + static_cast<int>(k) * L.cell, p.y + static_cast<int>(q) * L.cell, L.cell, L.cell},
                    color_of(d.values[index][q * d.keys + k]));
        frame(canvas, p);
        if (!d.titles.empty())
            canvas.text(p.x + p.width / 2.0, baseline_below(p.y - text_height() - 5), d.titles[index],
                        aligned(Align::center));
    }
}

// Ticks and labels: x along the bottom row, y along the left column (shared
// axes), the axis labels per panel or once for the grid, the figure's title.
void draw_heatmap_axes(Canvas& canvas, const Heatmaps& maps, const HeatmapPlan& plan) {
    const HeatmapLayout& L = plan.layout;
    for (int c = 0; c < L.cols; ++c) {
        const Rect& p = L.panels[static_cast<size_t>(L.rows - 1) * L.cols + c];
        for (const auto& [k, text] : plan.x_labels.shown)
            x_tick(canvas, p.x + static_cast<int>(k) * L.cell + L.cell / 2, p.bottom(), text, plan.x_labels.vertical);
        if (plan.xlabel_per_panel) x_axis_label(canvas, p.x + p.width / 2.0, p.bottom(), plan.x_band, maps.xlabel);
    }
    for (int r = 0; r < L.rows; ++r) {
        const Rect& p = L.panels[static_cast<size_t>(r) * L.cols];
        for (const auto& [q, text] : plan.y_labels.shown)
            y_tick(canvas, p.y + static_cast<int>(q) * L.cell + L.cell / 2, p.x - 1, text);
        if (plan.ylabel_per_panel) y_axis_label(canvas, p.y + p.height / 2.0, maps.ylabel);
    }
    const Rect& first = L.panels.front();
    const Rect& last = L.panels.back();
    if (!plan.xlabel_per_panel)
        x_axis_label(canvas, (first.x + last.right()) / 2.0, last.bottom(), plan.x_band, maps.xlabel);
    if (!plan.ylabel_per_panel) y_axis_label(canvas, (first.y + last.bottom()) / 2.0, maps.ylabel);
    if (!maps.title.empty()) {  // centred over the panels, but kept inside the picture
        const int half = (title_width(maps.title) + 1) / 2;
        title_at(canvas, std::clamp((first.x + last.right()) / 2, kMargin + half, L.width - kMargin - half),
                 maps.title);
    }
}

// The colour bar, vmax at the top, with its ticks.
void draw_colorbar(Canvas& canvas, const Heatmaps& maps, const HeatmapPlan& plan) {
    const HeatmapLayout& L = plan.layout;
    const Rect& bar = L.colorbar;
    for (int y = 0; y < bar.height; ++y) {
        const double t = 1.0 - (y + 0.5) / bar.height;
        canvas.fill_rect({bar.x, bar.y + y, bar.width, 1}, colormap_color(maps.cmap, t));
    }
    frame(canvas, bar);
    for (const Tick& t : plan.bar_ticks) {
        const double f = (t.value - L.vmin) / (L.vmax - L.vmin);
        const int y = std::clamp(static_cast<int>(std::floor(bar.bottom() - f * bar.height)), bar.y, bar.bottom() - 1);
        y_tick(canvas, y, bar.right(), t.label, false);
    }
}

}  // namespace

HeatmapLayout layout_heatmaps(const Heatmaps& maps) {
    const HeatmapData d = read_heatmaps(maps, "layout_heatmaps");
    return fit_heatmaps(maps, d, "layout_heatmaps").layout;
}

HeatmapLayout plot_heatmaps(const std::filesystem::path& path, const Heatmaps& maps) {
    const PictureFormat format = picture_format(path, "plot_heatmaps");
    const HeatmapData d = read_heatmaps(maps, "plot_heatmaps");
    const HeatmapPlan plan = fit_heatmaps(maps, d, "plot_heatmaps");
    Canvas canvas(plan.layout.width, plan.layout.height, format, "plot_heatmaps");
    draw_panels(canvas, maps, d, plan);
    draw_heatmap_axes(canvas, maps, plan);
    draw_colorbar(canvas, maps, plan);
    canvas.write(path);
    return plan.layout;
}

}  // namespace tformer::tasks
