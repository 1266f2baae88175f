// tasks/plot and tasks/canvas: the data behind each picture (axis limits,
// ticks, where panels, cells and legends go, the colour scale) and that the
// files written are real PNG and SVG pictures of the announced size. The
// pixels are cairo's; look at them with TFORMER_PLOT_EXAMPLES=/some/dir.
#include "tasks/canvas.hpp"
#include "tasks/plot.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

using namespace tformer;
using namespace tformer::tasks;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A fresh folder under the system temp dir, removed with everything in it.
struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("tformer-plot-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::vector<std::string> files() const {
        std::vector<std::string> names;
        for (const auto& entry : fs::directory_iterator(path)) names.push_back(entry.path().filename().string());
        return names;
    }
};

int brightness(Rgb c) { return c.r + c.g + c.b; }

std::string bytes_of(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

// True when every tag of an XML document closes in order (<a><b/></a>), after its declaration.
bool xml_well_formed(const std::string& xml) {
    std::vector<std::string> open;
    size_t pos = xml.find("?>");
    if (!xml.starts_with("<?xml") || pos == std::string::npos) return false;
    while ((pos = xml.find('<', pos)) != std::string::npos) {
        const size_t end = xml.find('>', pos);
        if (end == std::string::npos) return false;
        const std::string tag = xml.substr(pos + 1, end - pos - 1);
        pos = end + 1;
        if (tag.starts_with("!") || tag.starts_with("?")) continue;  // comments, declarations
        const std::string name = tag.substr(tag[0] == '/', tag.find_first_of(" \t\n/", 1) - (tag[0] == '/'));
        if (tag[0] == '/') {
            if (open.empty() || open.back() != name) return false;
            open.pop_back();
        } else if (tag.back() != '/') {
            open.push_back(name);
        }
    }
    return open.empty();
}

// The checks every written picture passes: it reads back (a PNG is decoded
// whole) as the format its name says, at the size expected; an SVG is
// well-formed XML.
void check_picture(const fs::path& path, int width, int height) {
    INFO(path.string());
    const PictureInfo info = read_picture_info(path);
    CHECK(info.format == picture_format(path, "test"));
    CHECK(info.width == width);
    CHECK(info.height == height);
    const std::string bytes = bytes_of(path);
    if (info.format == PictureFormat::png) {
        CHECK(bytes.starts_with("\x89PNG\r\n\x1a\n"));
        CHECK(bytes.substr(bytes.size() - 8, 4) == "IEND");
    } else {
        CHECK(xml_well_formed(bytes));
    }
}

LinePlot diagonal_plot() {
    return {.series = {{.name = "y = x", .x = {0, 0.25, 0.5, 0.75, 1}, .y = {0, 0.25, 0.5, 0.75, 1}}},
            .title = "diagonal",
            .xlabel = "x",
            .ylabel = "y"};
}

}  // namespace

// ---- text and files -------------------------------------------------------------------------

TEST_CASE("text_width(text, style), font_metrics(style): DejaVu's measures scale with the size", "[tasks][plot]") {
    const TextStyle normal{}, big{.size = 28}, bold{.bold = true};
    CHECK(text_width("", normal) == 0);
    CHECK(text_width("Keys", normal) > 20);
    CHECK(text_width("Keys", big) == Approx(2 * text_width("Keys", normal)).epsilon(0.05));
    CHECK(text_width("Keys", bold) > text_width("Keys", normal));
    CHECK(text_width("W", normal) > text_width("i", normal));                     // a proportional font
    CHECK(text_width("arrivé", normal) == Approx(text_width("arrive", normal)));  // é is one letter, as wide as e
    CHECK(text_width("a\xff", normal) > text_width("a", normal));                 // ill-formed bytes show as U+FFFD
    const FontMetrics m = font_metrics(normal);
    CHECK(m.ascent > m.cap_height);
    CHECK(m.cap_height > 8);
    CHECK(m.descent > 0);
    CHECK(m.height() < 2 * normal.size);
}

TEST_CASE("picture_format(path), parse_picture_format(name): .png and .svg, nothing else", "[tasks][plot]") {
    CHECK(picture_format("a/loss.png", "op") == PictureFormat::png);
    CHECK(picture_format("LOSS.SVG", "op") == PictureFormat::svg);
    CHECK_THROWS_AS(picture_format("loss.jpg", "plot_lines"), ValueError);
    CHECK_THROWS_WITH(picture_format("loss", "plot_lines"),
                      Catch::Contains("plot_lines: 'loss' must end in .png or .svg"));
    CHECK(parse_picture_format("svg", "train") == PictureFormat::svg);
    CHECK(std::string(picture_extension(PictureFormat::svg)) == "svg");
    CHECK_THROWS_WITH(parse_picture_format("pdf", "train"), "train: --plot-format must be png or svg, got 'pdf'");
}

TEST_CASE("Canvas: every shape and text drawn, written as PNG and SVG, bad sizes and files refused", "[tasks][plot]") {
    TempDir dir;
    for (const PictureFormat format : {PictureFormat::png, PictureFormat::svg}) {
        Canvas canvas(320, 120, format, "test");
        canvas.fill_rect({10, 10, 50, 30}, {200, 30, 30});
        canvas.stroke_rect({5, 5, 310, 110}, colors::axis);
        canvas.set_clip({0, 0, 160, 120});
        canvas.polyline(std::vector<PointF>{{10, 100}, {80, 50}, {300, 90}},
                        {.color = {31, 119, 180}, .dash = Dash::dashed});
        canvas.reset_clip();
        canvas.line({10, 60}, {300, 60}, {.dash = Dash::dotted});
        canvas.circle({200, 30}, 6, {44, 160, 44}, 0.7);
        canvas.text(70, 30, "Je suis arrivé à la gare. Ça, c'est où ? Noël, cœur.", {});
        canvas.text(20, 110, "Keys", {.vertical = true, .halign = Align::center});
        canvas.text(300, 110, "bold \xff", {.bold = true, .halign = Align::end});
        const fs::path path = dir.path / (std::string("canvas.") + picture_extension(format));
        canvas.write(path);
        check_picture(path, 320, 120);
    }
    CHECK_THROWS_WITH(Canvas(0, 10, PictureFormat::png, "plot_lines"),
                      Catch::Contains("plot_lines: picture size 0x10"));
    CHECK_THROWS_AS(Canvas(10, kMaxImageSide + 1, PictureFormat::svg, "op"), ValueError);
    std::ofstream(dir.path / "broken.png") << "not a png";
    CHECK_THROWS_WITH(read_picture_info(dir.path / "broken.png"), Catch::Contains("is not a PNG picture"));
    std::ofstream(dir.path / "broken.svg") << "<html></html>";
    CHECK_THROWS_WITH(read_picture_info(dir.path / "broken.svg"), Catch::Contains("is not an SVG picture"));
}

// ---- ticks and colours ------------------------------------------------------------------------

TEST_CASE("nice_ticks(lo, hi, max_ticks): multiples of 1-2-5 steps inside the range", "[tasks][plot]") {
    struct Row {
        double lo, hi;
        int max_ticks;
        std::vector<double> expected;
    };
    const Row rows[] = {
        {0, 1, 6, {0, 0.2, 0.4, 0.6, 0.8, 1}},
        {0, 1, 11, {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}},
        {0, 10, 6, {0, 2, 4, 6, 8, 10}},
        {-1, 1, 5, {-1, -0.5, 0, 0.5, 1}},
        {0.13, 0.87, 5, {0.2, 0.4, 0.6, 0.8}},
        {0, 100, 3, {0, 50, 100}},
        {1, 200, 4, {50, 100, 150, 200}},
        {1, 200, 3, {100, 200}},
        {-0.05, 1.05, 8, {0, 0.2, 0.4, 0.6, 0.8, 1}},
        {1e-5, 3e-5, 3, {1e-5, 2e-5, 3e-5}},
        {3, 3, 5, {3}},
        {1, 1 + 1e-14, 5, {1, 1 + 1e-14}},  // too narrow to resolve: just the ends
        {-1e307, 1e307, 4, {-1e307, 0, 1e307}},
        {1, 0, 5, {}},
        {0, kNaN, 5, {}},
    };
    for (const Row& row : rows) {
        INFO("nice_ticks(" << row.lo << ", " << row.hi << ", " << row.max_ticks << ")");
        const std::vector<double> got = nice_ticks(row.lo, row.hi, row.max_ticks);
        REQUIRE(got.size() == row.expected.size());
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(row.expected[i]).margin(1e-12));
    }
}

TEST_CASE("format_tick(value, step): decimals follow the step, no -0", "[tasks][plot]") {
    struct Row {
        double value, step;
        const char* expected;
    };
    const Row rows[] = {
        {0.5, 0.25, "0.50"},    {2000, 1000, "2000"},          {3, 1, "3"},
        {-1.5, 0.5, "-1.5"},    {0.1 + 0.2, 0.1, "0.3"},       {0.001, 0.001, "0.001"},
        {-0.0, 0.1, "0.0"},     {1e-17, 0.2, "0.0"},           {0, 1, "0"},
        {0, 1e-6, "0"},         {50000, 10000, "50000"},       {200000, 100000, "2e5"},
        {2.5e6, 5e5, "2.5e6"},  {1e20, 1e20, "1e20"},          {1e-6, 1e-6, "1e-6"},
        {-3e-5, 1e-5, "-3e-5"}, {1.00001, 0.00001, "1.00001"},
    };
    for (const Row& row : rows) {
        INFO("format_tick(" << row.value << ", " << row.step << ")");
        CHECK(format_tick(row.value, row.step) == row.expected);
    }
}

TEST_CASE("colormap_color(map, t): reds darken and viridis brightens with t, NaN is grey", "[tasks][plot]") {
    for (int i = 0; i < 20; ++i) {
        const double t = i / 20.0, next = (i + 1) / 20.0;
        CHECK(brightness(colormap_color(Colormap::reds, next)) < brightness(colormap_color(Colormap::reds, t)));
        CHECK(brightness(colormap_color(Colormap::viridis, next)) > brightness(colormap_color(Colormap::viridis, t)));
    }
    CHECK(colormap_color(Colormap::reds, -3) == colormap_color(Colormap::reds, 0));  // clamped
    CHECK(colormap_color(Colormap::reds, 7) == colormap_color(Colormap::reds, 1));
    CHECK(colormap_color(Colormap::viridis, kNaN) == colors::missing);
    CHECK(colormap_color(Colormap::reds, 0) != colors::white);  // cells stand out from the page
}

// ---- line plots: the data behind them -------------------------------------------------------------

TEST_CASE("layout_lines(plot): y = x gets the data's x range, 5% more in y, 1-2-5 ticks, the legend in an empty corner",
          "[tasks][plot]") {
    const LinePlot plot = diagonal_plot();
    const LinePlotLayout layout = layout_lines(plot);
    CHECK(layout.width == plot.width);
    CHECK(layout.height == plot.height);
    CHECK(layout.x_lo == 0);
    CHECK(layout.x_hi == 1);
    CHECK(layout.y_lo == Approx(-0.05));
    CHECK(layout.y_hi == Approx(1.05));
    REQUIRE(layout.x_ticks.size() >= 3);
    for (double t : layout.x_ticks) CHECK((t >= 0 && t <= 1));
    CHECK(layout.y_ticks.front() >= layout.y_lo);
    CHECK(layout.y_ticks.back() <= layout.y_hi);
    // The plotting area lies inside the picture, with room for labels on the left and below.
    CHECK(layout.area.x > 40);
    CHECK(layout.area.right() < layout.width);
    CHECK(layout.area.bottom() < layout.height - 30);
    // The data's corners map onto the frame's edges.
    CHECK(layout.to_pixel(0, layout.y_lo).x == Approx(layout.area.x - 0.5));
    CHECK(layout.to_pixel(1, layout.y_lo).y == Approx(layout.area.bottom() + 0.5));
    // The legend avoided the occupied upper-right and lower-left corners: upper left.
    CHECK(layout.legend.width > 0);
    CHECK(layout.legend.x < layout.area.x + layout.area.width / 2);
    CHECK(layout.legend.y < layout.area.y + layout.area.height / 2);
    // plot_lines draws exactly this layout, as PNG or SVG.
    TempDir dir;
    for (const char* name : {"diagonal.png", "diagonal.svg"}) {
        const LinePlotLayout drawn = plot_lines(dir.path / name, plot);
        CHECK(drawn.area.x == layout.area.x);
        CHECK(drawn.legend.x == layout.legend.x);
        check_picture(dir.path / name, plot.width, plot.height);
    }
    CHECK(dir.files().size() == 2);  // no temporary left
}

TEST_CASE("layout_lines(plot): a log axis, NaN, one point, nothing finite, huge runs", "[tasks][plot]") {
    const LinePlotLayout log = layout_lines(
        {.series = {{.name = "loss", .x = {1, 2, 3, 4, 5}, .y = {1, 0.5, kNaN, 0.1, kInf}},
                    {.name = "samples", .x = {1, 3, 5}, .y = {0.8, 0.2, 0.05}, .style = SeriesStyle::points},
                    {.name = "zero", .x = {2, 4}, .y = {0, -1}}},  // nothing drawable on a log axis
         .log_y = true});
    CHECK(log.log_y);
    CHECK(log.y_lo < 0.05);
    CHECK(log.y_hi > 1);
    CHECK(log.x_lo < 1);  // points get a little room
    CHECK(log.x_hi > 5);
    for (double t : log.y_ticks)
        CHECK(std::log10(t) == Approx(std::round(std::log10(t))).margin(0.31));  // 1-2-5 decades

    // One point: a unit window around it; an unnamed series: no legend.
    const LinePlotLayout one = layout_lines({.series = {{.y = {3}}}});
    CHECK(one.x_lo == -0.5);
    CHECK(one.x_hi == 0.5);
    CHECK(one.y_lo < 3);
    CHECK(one.y_hi > 3);
    CHECK(one.legend.width == 0);

    // Nothing finite: the default limits.
    const LinePlotLayout none = layout_lines({.series = {{.name = "nan", .y = {kNaN, kNaN}}}});
    CHECK(none.x_lo == 0);
    CHECK(none.x_hi == 1);
    CHECK(none.y_lo == 0);
    CHECK(none.y_hi == 1);

    // A range no double can span is refused, not drawn as garbage.
    CHECK_THROWS_WITH(layout_lines({.series = {{.y = {-1e308, 1e308}}}}),
                      Catch::Contains("layout_lines: axis limits") && Catch::Contains("too wide"));

    // A long training run (100k steps) has its ticks inside the limits and draws.
    std::vector<double> steps(100000);
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = 5.0 / (1.0 + i / 1000.0);
    const LinePlot run{.series = {{.name = "loss", .y = steps}}, .log_y = true};
    const LinePlotLayout long_run = layout_lines(run);
    CHECK(long_run.x_hi == 99999);
    for (double t : long_run.x_ticks) CHECK((t >= 0 && t <= 99999));
    TempDir dir;
    plot_lines(dir.path / "run.svg", run);
    check_picture(dir.path / "run.svg", run.width, run.height);
}

TEST_CASE("plot_lines(path, plot): bad input throws ValueError naming plot_lines and writes nothing", "[tasks][plot]") {
    TempDir dir;
    const fs::path path = dir.path / "bad.png";
    struct Row {
        const char* what;
        LinePlot plot;
        const char* message;
    };
    const Row rows[] = {
        {"no series", {}, "plot_lines: no series to plot"},
        {"empty series", {.series = {{.name = "train"}}}, "plot_lines: series 0 ('train') has no points"},
        {"x/y sizes",
         {.series = {{.name = "a", .x = {1, 2, 3}, .y = {1, 2}}}},
         "plot_lines: series 0 ('a') has 3 x values but 2 y values"},
        {"tiny image", {.series = {{.y = {1, 2}}}, .width = 50, .height = 50}, "plot_lines: image size 50x50"},
    };
    for (const Row& row : rows) {
        INFO(row.what);
        CHECK_THROWS_AS(plot_lines(path, row.plot), ValueError);
        CHECK_THROWS_WITH(plot_lines(path, row.plot), Catch::Contains(row.message));
    }
    CHECK_THROWS_WITH(plot_lines(dir.path / "loss.jpg", diagonal_plot()), Catch::Contains("must end in .png or .svg"));
    CHECK(dir.files().empty());
    CHECK_THROWS_WITH(layout_lines(LinePlot{}), Catch::Contains("layout_lines: no series"));
}

TEST_CASE("plot_lines(path, plot): unwritable path throws IOError naming it and keeps the old picture",
          "[tasks][plot]") {
    TempDir dir;
    const fs::path missing_dir = dir.path / "no" / "such" / "dir" / "loss.png";
    CHECK_THROWS_AS(plot_lines(missing_dir, diagonal_plot()), IOError);
    CHECK_THROWS_WITH(plot_lines(missing_dir, diagonal_plot()),
                      Catch::Contains("plot_lines") && Catch::Contains(missing_dir.string()));
    // A folder where the file should go: the rename fails and the temporary is removed.
    fs::create_directory(dir.path / "taken.svg");
    CHECK_THROWS_WITH(plot_lines(dir.path / "taken.svg", diagonal_plot()),
                      Catch::Contains((dir.path / "taken.svg").string()));
    CHECK(dir.files() == std::vector<std::string>{"taken.svg"});
    CHECK(fs::is_directory(dir.path / "taken.svg"));

    // A failing plot never touches an existing picture.
    const fs::path good = dir.path / "good.png";
    plot_lines(good, diagonal_plot());
    const std::string before = bytes_of(good);
    CHECK_THROWS_AS(plot_lines(good, LinePlot{}), ValueError);
    CHECK(bytes_of(good) == before);
}

// ---- heatmaps: the data behind them ----------------------------------------------------------------

TEST_CASE("layout_heatmaps(maps): the colour scale of 1x1, constant, all-NaN, NaN and one-sided limits",
          "[tasks][plot]") {
    const HeatmapLayout constant = layout_heatmaps({.matrices = {{core::full({1, 1}, 5.0)}}});
    CHECK(constant.vmin == 4.5);
    CHECK(constant.vmax == 5.5);
    CHECK(constant.cell == 32);
    const HeatmapLayout nan = layout_heatmaps({.matrices = {{core::full({2, 2}, kNaN)}}});
    CHECK(nan.vmin == 0);
    CHECK(nan.vmax == 1);
    const HeatmapLayout mixed =
        layout_heatmaps({.matrices = {{core::tensor({kNaN, 4, kInf, 2, -kInf, 3}, {2, 3}, core::DType::float64)}}});
    CHECK(mixed.vmin == 2);  // the finite values only
    CHECK(mixed.vmax == 4);
    const HeatmapLayout capped = layout_heatmaps({.matrices = {{core::tensor({0, 0.5, 2, 7}, {2, 2})}}, .vmax = 1.0});
    CHECK(capped.vmin == 0);
    CHECK(capped.vmax == 1);
    CHECK_THROWS_WITH(layout_heatmaps({.matrices = {{core::tensor({-1e308, 1e308}, {1, 2}, core::DType::float64)}}}),
                      Catch::Contains("layout_heatmaps: the colour scale") && Catch::Contains("too wide"));
}

TEST_CASE("layout_heatmaps(maps): a 2x2 grid of (4x3) views with titles and token labels, drawn as PNG and SVG",
          "[tasks][plot]") {
    const core::Tensor base = core::arange(12, core::DType::float64).view({3, 4});
    const core::Tensor weights = base.transpose(0, 1);  // (4, 3), not contiguous
    const Heatmaps maps{.matrices = {{weights, weights}, {weights, weights}},
                        .titles = {"head 1", "head 2"},
                        .x_ticks = {"je", "suis", "arrivé"},
                        .y_ticks = {"i", "arrived", ".", "<eos>"},
                        .vmin = 0,
                        .vmax = 11};
    const HeatmapLayout layout = layout_heatmaps(maps);
    CHECK(layout.rows == 2);
    CHECK(layout.cols == 2);
    CHECK(layout.queries == 4);
    CHECK(layout.keys == 3);
    CHECK(layout.cell >= 24);  // small matrices get big cells
    // Panels do not overlap and stay inside the picture, left of the colour bar.
    const Rect& a = layout.panels[0];
    const Rect& b = layout.panels[1];
    const Rect& d = layout.panels[2];
    CHECK(a.right() < b.x);
    CHECK(a.bottom() < d.y);
    CHECK(a.x > 40);  // room for the y tick labels
    CHECK(layout.panels[3].right() < layout.colorbar.x);
    CHECK(layout.colorbar.right() < layout.width);
    CHECK(layout.colorbar.height == d.bottom() - a.y);
    // cell (q, k) of panel (r, c) is at column k, row q
    const PointF c = layout.cell_center(1, 1, 2, 1);
    CHECK(c.x == layout.panels[3].x + 1.5 * layout.cell);
    CHECK(c.y == layout.panels[3].y + 2.5 * layout.cell);
    CHECK_THROWS_AS(layout.cell_center(0, 0, 4, 0), IndexError);
    TempDir dir;
    for (const char* name : {"grid.png", "grid.svg"}) {
        const HeatmapLayout drawn = plot_heatmaps(dir.path / name, maps);
        CHECK(drawn.width == layout.width);
        check_picture(dir.path / name, layout.width, layout.height);
    }
}

TEST_CASE("layout_heatmaps(maps): the size cap shrinks the cells", "[tasks][plot]") {
    const core::Tensor m = core::rand({10, 10}, core::default_generator());
    CHECK(layout_heatmaps({.matrices = heatmap_grid(m.unsqueeze(0).expand({2, 4, 10, 10}))}).cell == 26);
    // twelve 26-pixel panels of 10 cells side by side would be over 3,000 pixels wide
    const HeatmapLayout small = layout_heatmaps({.matrices = heatmap_grid(m.unsqueeze(0).expand({12, 10, 10}))});
    CHECK(small.cell < 26);
    CHECK(small.cell >= 15);
    CHECK(small.width <= 2400);
}

TEST_CASE("plot_heatmaps(path, maps): bad input throws errors naming plot_heatmaps", "[tasks][plot]") {
    TempDir dir;
    const fs::path path = dir.path / "bad.png";
    const core::Tensor m = core::zeros({2, 3});
    struct Row {
        const char* what;
        Heatmaps maps;
        const char* message;
    };
    const Row value_errors[] = {
        {"no matrices", {}, "plot_heatmaps: no matrices to plot"},
        {"empty row", {.matrices = {{}}}, "plot_heatmaps: no matrices to plot"},
        {"empty matrix", {.matrices = {{core::zeros({0, 3})}}}, "plot_heatmaps: matrix [0][0] is empty (0x3)"},
        {"ragged grid", {.matrices = {{m, m}, {m}}}, "plot_heatmaps: row 1 of the grid has 1 matrices"},
        {"undefined", {.matrices = {{core::Tensor()}}}, "plot_heatmaps: matrix [0][0] is undefined"},
        {"int64", {.matrices = {{core::zeros({2, 2}, core::DType::int64)}}}, "has dtype int64"},
        {"x ticks", {.matrices = {{m}}, .x_ticks = {"a", "b"}}, "plot_heatmaps: 2 x tick labels for 3 keys"},
        {"y ticks", {.matrices = {{m}}, .y_ticks = {"a"}}, "plot_heatmaps: 1 y tick labels for 2 queries"},
        {"titles", {.matrices = {{m, m}}, .titles = {"a", "b", "c"}}, "plot_heatmaps: 3 titles for a 1x2 grid"},
        {"limits", {.matrices = {{m}}, .vmin = 1, .vmax = 1}, "plot_heatmaps: vmin 1 must be below vmax 1"},
        {"cap", {.matrices = {std::vector<core::Tensor>(100, core::zeros({30, 30}))}}, "over the cap of 2400x2400"},
    };
    for (const Row& row : value_errors) {
        INFO(row.what);
        CHECK_THROWS_AS(plot_heatmaps(path, row.maps), ValueError);
        CHECK_THROWS_WITH(plot_heatmaps(path, row.maps), Catch::Contains(row.message));
    }
    const Row shape_errors[] = {
        {"3-D matrix", {.matrices = {{core::zeros({2, 2, 2})}}}, "matrix [0][0] must be 2-D (queries, keys)"},
        {"shapes differ", {.matrices = {{m, core::zeros({3, 2})}}}, "matrix [0][1] has shape (3x2)"},
    };
    for (const Row& row : shape_errors) {
        INFO(row.what);
        CHECK_THROWS_AS(plot_heatmaps(path, row.maps), ShapeError);
        CHECK_THROWS_WITH(plot_heatmaps(path, row.maps), Catch::Contains(row.message));
    }
    CHECK(dir.files().empty());

    const fs::path unwritable = dir.path / "missing" / "attention.png";
    CHECK_THROWS_AS(plot_heatmaps(unwritable, {.matrices = {{m}}}), IOError);
    CHECK_THROWS_WITH(plot_heatmaps(unwritable, {.matrices = {{m}}}),
                      Catch::Contains("plot_heatmaps") && Catch::Contains(unwritable.string()));
}

TEST_CASE("heatmap_grid(weights): 2-D, 3-D and 4-D tensors become panel grids of views", "[tasks][plot]") {
    const core::Tensor w = core::arange(2 * 4 * 3 * 5, core::DType::float64).view({2, 4, 3, 5});
    const auto grid = heatmap_grid(w);
    REQUIRE(grid.size() == 2);
    REQUIRE(grid[1].size() == 4);
    CHECK(grid[1][2].shape() == core::Shape{3, 5});
    CHECK(grid[1][2].shares_storage(w));
    CHECK(grid[1][2].at({2, 4}) == w.at({1, 2, 2, 4}));
    CHECK(heatmap_grid(w.select(0, 0)).size() == 1);
    CHECK(heatmap_grid(w.select(0, 0))[0].size() == 4);
    CHECK(heatmap_grid(w.select(0, 0).select(0, 0)).size() == 1);
    CHECK_THROWS_AS(heatmap_grid(core::zeros({1, 1, 1, 1, 1})), ShapeError);
    CHECK_THROWS_WITH(heatmap_grid(core::zeros({4})), Catch::Contains("heatmap_grid") && Catch::Contains("(4)"));
}

// ---- examples ---------------------------------------------------------------------------------
// The pictures of the tutorials and the training loop, drawn end to end as
// PNG and SVG. They go to a temporary folder; set TFORMER_PLOT_EXAMPLES=/some/dir
// to keep them there and look at them.

TEST_CASE("plot_lines / plot_heatmaps: the example pictures are written as PNG and SVG of their layout's size",
          "[tasks][plot]") {
    TempDir tmp;
    const char* env = std::getenv("TFORMER_PLOT_EXAMPLES");
    const fs::path out = env ? fs::path(env) : tmp.path;
    fs::create_directories(out);
    core::Generator gen(7);
    std::vector<std::pair<std::string, std::pair<int, int>>> expected;
    const auto both = [&](const std::string& name, auto&& draw) {  // draw(path) -> layout
        for (const char* ext : {".png", ".svg"}) {
            const auto layout = draw(out / (name + ext));
            expected.push_back({name + ext, {layout.width, layout.height}});
        }
    };

    // A d2l-style training run: train loss and validation loss per epoch.
    std::vector<double> epochs, train, valid;
    const core::Tensor noise = core::randn({2, 200}, gen, core::DType::float64);
    for (int e = 1; e <= 200; ++e) {
        epochs.push_back(e);
        train.push_back(3.2 * std::exp(-e / 35.0) + 0.18 + 0.03 * noise.at({0, e - 1}));
        valid.push_back(3.0 * std::exp(-e / 45.0) + 0.35 + 0.002 * e + 0.04 * noise.at({1, e - 1}));
    }
    const LinePlot loss{.series = {{.name = "train", .x = epochs, .y = train},
                                   {.name = "valid", .x = epochs, .y = valid, .dash = Dash::dashed}},
                        .title = "Transformer on fra-eng",
                        .xlabel = "epoch",
                        .ylabel = "loss"};
    both("loss", [&](const fs::path& p) { return plot_lines(p, loss); });
    LinePlot log_loss = loss;
    log_loss.log_y = true;
    log_loss.title = "loss (log scale)";
    both("loss-log", [&](const fs::path& p) { return plot_lines(p, log_loss); });

    // Positional encoding columns 6-9 against the row (position), as in d2l.
    LinePlot encoding{.title = "Positional encoding", .xlabel = "Row (position)"};
    const Dash dashes[] = {Dash::solid, Dash::dashed, Dash::dash_dot, Dash::dotted};
    for (int col = 6; col < 10; ++col) {
        Series s{.name = "Col " + std::to_string(col), .dash = dashes[col - 6]};
        for (int row = 0; row < 60; ++row) {
            const double freq = std::pow(10000.0, -(col / 2 * 2) / 32.0);
            s.y.push_back(col % 2 == 0 ? std::sin(row * freq) : std::cos(row * freq));
        }
        encoding.series.push_back(s);
    }
    both("positional-encoding", [&](const fs::path& p) { return plot_lines(p, encoding); });

    // Nadaraya-Watson regression: truth, prediction and the noisy training points.
    const int n_train = 50;
    const core::Tensor xs = core::rand({n_train}, gen, core::DType::float64);
    const core::Tensor eps = core::randn({n_train}, gen, core::DType::float64);
    std::vector<double> x_train, y_train, x_test, truth, pred;
    const auto f = [](double x) { return 2 * std::sin(x) + std::pow(x, 0.8); };
    for (int i = 0; i < n_train; ++i) {
        x_train.push_back(5 * xs.at({i}));
        y_train.push_back(f(x_train.back()) + 0.5 * eps.at({i}));
    }
    for (double x = 0; x < 5; x += 0.1) {
        x_test.push_back(x);
        truth.push_back(f(x));
        double num = 0, den = 0;
        for (int i = 0; i < n_train; ++i) {
            const double w = std::exp(-0.5 * std::pow(x - x_train[i], 2));
            num += w * y_train[i], den += w;
        }
        pred.push_back(num / den);
    }
    const LinePlot pooling{.series = {{.name = "Truth", .x = x_test, .y = truth},
                                      {.name = "Pred", .x = x_test, .y = pred, .dash = Dash::dashed},
                                      {.name = "train", .x = x_train, .y = y_train, .style = SeriesStyle::points}},
                           .xlabel = "x",
                           .ylabel = "y"};
    both("attention-pooling", [&](const fs::path& p) { return plot_lines(p, pooling); });

    // 2 layers x 4 heads of 10x10 attention weights (rows are softmax outputs).
    const std::vector<std::string> source = {"i",     "'m",    "home",  ".",     "<eos>",
                                             "<pad>", "<pad>", "<pad>", "<pad>", "<pad>"};
    const std::vector<std::string> target = {"<bos>", "je", "suis", "chez", "moi", ".", "<eos>", "à", "la", "maison"};
    const core::Tensor scores = core::randn({2, 4, 10, 10}, gen, core::DType::float64);
    core::Tensor weights = core::zeros({2, 4, 10, 10}, core::DType::float64);
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t h = 0; h < 4; ++h)
            for (int64_t q = 0; q < 10; ++q) {
                double total = 0;
                for (int64_t k = 0; k < 5; ++k) total += std::exp(2.5 * scores.at({l, h, q, k}));
                for (int64_t k = 0; k < 5; ++k)  // valid length 5: padding gets no weight
                    weights.set({l, h, q, k}, std::exp(2.5 * scores.at({l, h, q, k})) / total);
            }
    const Heatmaps heads{.matrices = heatmap_grid(weights),
                         .titles = {"layer 1, head 1", "layer 1, head 2", "layer 1, head 3", "layer 1, head 4",
                                    "layer 2, head 1", "layer 2, head 2", "layer 2, head 3", "layer 2, head 4"},
                         .x_ticks = source,
                         .y_ticks = target};
    both("attention-heads", [&](const fs::path& p) { return plot_heatmaps(p, heads); });
    Heatmaps viridis{.matrices = {{weights.select(0, 0).select(0, 0)}},
                     .title = "Encoder self-attention",
                     .x_ticks = source,
                     .y_ticks = source,
                     .cmap = Colormap::viridis};
    viridis.matrices[0][0].set({2, 7}, kNaN);
    both("attention-viridis", [&](const fs::path& p) { return plot_heatmaps(p, viridis); });
    const std::vector<std::string> sentence = {"<bos>", "il",      "y",     "a",     "beaucoup", "de",   "gens",
                                               "qui",   "pensent", "que",   "c'est", "une",      "très", "bonne",
                                               "idée",  "mais",    "je",    "ne",    "suis",     "pas",  "d'accord",
                                               ".",     "<eos>",   "<pad>", "<pad>"};
    const core::Tensor long_scores = core::rand({4, 25, 25}, gen);
    const Heatmaps long_heads{.matrices = heatmap_grid(long_scores),
                              .titles = {"decoder head 1", "decoder head 2", "decoder head 3", "decoder head 4"},
                              .x_ticks = sentence,
                              .y_ticks = sentence};
    both("attention-long", [&](const fs::path& p) { return plot_heatmaps(p, long_heads); });
    both("large-values", [&](const fs::path& p) {
        return plot_lines(
            p, {.series = {{.name = "tokens/s", .x = {0, 1, 2, 3}, .y = {0, 1.2e6, 2.9e6, 3.1e6}}}, .xlabel = "epoch"});
    });
    const core::Tensor big = core::rand({60, 80}, gen);
    both("attention-60x80", [&](const fs::path& p) {
        return plot_heatmaps(p, {.matrices = {{big, big}}, .titles = {"a", "b"}});
    });

    for (const auto& [name, size] : expected) check_picture(out / name, size.first, size.second);
    // The 2x4 grid of 10x10 maps keeps its 26-pixel cells and word labels fit the cap.
    const HeatmapLayout grid = layout_heatmaps(heads);
    CHECK(grid.cell == 26);
    CHECK(grid.width <= 2400);
    // 25-token labels are thinned: the long grid still fits with readable cells.
    CHECK(layout_heatmaps(long_heads).cell >= 8);
}
