// tasks::Image, the bitmap font, PNG files, plot_lines and plot_heatmaps.
// Pictures are written to a temporary folder and read back with libpng, and
// pixels are checked at positions taken from the layout the plot returns.
#include "tasks/image.hpp"
#include "tasks/plot.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
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
        path = fs::temp_directory_path() / ("tformer-plot-test-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(counter++));
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

int color_distance(Rgb a, Rgb b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b); }
int brightness(Rgb c) { return c.r + c.g + c.b; }

// True when some pixel within `radius` of (x, y) is within `tolerance` of `color`.
bool color_near(const Image& image, PointF at, int radius, Rgb color, int tolerance = 24) {
    const int cx = static_cast<int>(at.x), cy = static_cast<int>(at.y);
    for (int y = cy - radius; y <= cy + radius; ++y)
        for (int x = cx - radius; x <= cx + radius; ++x)
            if (x >= 0 && y >= 0 && x < image.width() && y < image.height() &&
                color_distance(image.pixel(x, y), color) <= tolerance)
                return true;
    return false;
}

Rgb pixel_at(const Image& image, PointF p) { return image.pixel(static_cast<int>(p.x), static_cast<int>(p.y)); }

LinePlot diagonal_plot() {
    return {.series = {{.name = "y = x", .x = {0, 0.25, 0.5, 0.75, 1}, .y = {0, 0.25, 0.5, 0.75, 1}}},
            .title = "diagonal",
            .xlabel = "x",
            .ylabel = "y"};
}

}  // namespace

// ---- font --------------------------------------------------------------------------------

TEST_CASE("font_glyph(c) / draw_text: every printable ASCII character stays inside its box", "[tasks][plot]") {
    std::set<Glyph> distinct;
    for (int scale : {1, 2, 3}) {
        for (char c = '!'; c <= '~'; ++c) {
            const std::string text(1, c);
            const Glyph glyph = font_glyph(static_cast<char32_t>(c));
            for (uint8_t row : glyph) CHECK(row < (1 << kGlyphWidth));  // 5 columns only
            if (scale == 1) distinct.insert(glyph);

            Image image(40, 50);
            const TextStyle style{.color = colors::black, .scale = scale};
            const Rect box = image.draw_text(7, 5, text, style);
            CHECK(box.x == 7);
            CHECK(box.y == 5);
            CHECK(box.width == kGlyphWidth * scale);
            CHECK(box.height == kGlyphHeight * scale);
            int inked = 0;
            for (int y = 0; y < image.height(); ++y)
                for (int x = 0; x < image.width(); ++x) {
                    if (image.pixel(x, y) == colors::white) continue;
                    ++inked;
                    INFO("character '" << c << "' at scale " << scale << " inks (" << x << ", " << y << ")");
                    CHECK(box.contains(x, y));
                }
            INFO("character '" << c << "'");
            CHECK(inked > 0);
        }
    }
    CHECK(distinct.size() == 94);  // no two characters look the same
    // The space draws nothing; anything outside the font falls back to '?'.
    Image blank(20, 20);
    blank.draw_text(0, 0, " ");
    CHECK(blank.rgb() == Image(20, 20).rgb());
    CHECK(font_glyph(U'\u4e2d') == font_glyph(U'?'));
    CHECK(font_glyph(U'\t') == font_glyph(U'?'));
}

TEST_CASE("text_size(text, scale) / font_glyph: UTF-8 letters count once, accents sit above the base letter",
          "[tasks][plot]") {
    CHECK(text_size("", 2).width == 0);
    CHECK(text_size("abc", 1).width == 17);  // 3 glyphs of 5, 2 gaps of 1
    CHECK(text_size("abc", 2).width == 34);
    CHECK(text_size("abc", 2).height == 18);
    CHECK(text_size("été", 2).width == text_size("ete", 2).width);  // é is 2 bytes, 1 glyph
    const Glyph e = font_glyph(U'e'), e_acute = font_glyph(U'é');
    CHECK(e_acute != e);
    for (int row = 2; row < kGlyphHeight; ++row) CHECK(e_acute[row] == e[row]);
    CHECK(font_glyph(U'ç')[8] != 0);                     // cedilla below
    CHECK(font_glyph(U'É') == font_glyph(U'E'));         // capitals drop the accent
    CHECK(font_glyph(U'\u2019') == font_glyph(U'\''));  // typographic apostrophe
    // Malformed UTF-8 draws '?' per bad byte instead of reading past the end.
    CHECK(text_size("a\xc3", 1).width == text_size("a?", 1).width);

    // Vertical text swaps the box and stays inside it.
    Image image(60, 60);
    const Rect box = image.draw_text(30, 30, "Keys", {.color = colors::black, .vertical = true,
                                                      .halign = Align::center, .valign = Align::center});
    CHECK(box.width == 18);
    CHECK(box.height == text_size("Keys", 2).width);
    for (int y = 0; y < 60; ++y)
        for (int x = 0; x < 60; ++x)
            if (image.pixel(x, y) != colors::white) CHECK(box.contains(x, y));
}

// ---- canvas and PNG files -------------------------------------------------------------------

TEST_CASE("Image(width, height) / draw_line: anti-aliased lines are clipped, sizes are checked", "[tasks][plot]") {
    Image image(50, 30);
    // A 2-pixel line along the boundary y = 16 covers rows 15 and 16 exactly.
    image.draw_line({-100, 16}, {200, 16}, {.color = colors::black, .width = 2});
    CHECK(image.pixel(25, 15) == colors::black);
    CHECK(image.pixel(25, 16) == colors::black);
    CHECK(image.pixel(25, 14) == colors::white);
    CHECK(image.pixel(25, 17) == colors::white);
    // Along a pixel centre row it covers that row and half of each neighbour.
    Image centred(50, 30);
    centred.draw_line({0, 15.5}, {50, 15.5}, {.color = colors::black, .width = 2});
    CHECK(centred.pixel(25, 15) == colors::black);
    CHECK(centred.pixel(25, 14) == Rgb{128, 128, 128});
    CHECK(centred.pixel(25, 16) == Rgb{128, 128, 128});
    // A diagonal's edge pixels are partly covered: grey, not black.
    Image diag(40, 40);
    diag.draw_line({0, 0}, {40, 40}, {.color = colors::black, .width = 1.5});
    CHECK(diag.pixel(20, 20) == colors::black);
    const Rgb edge = diag.pixel(21, 20);
    CHECK(brightness(edge) > 0);
    CHECK(brightness(edge) < 3 * 255);

    CHECK_THROWS_AS(Image(0, 10), ValueError);
    CHECK_THROWS_WITH(Image(10, kMaxImageSide + 1), Catch::Contains("Image: size 10x16385"));
    CHECK_THROWS_AS(image.pixel(50, 0), IndexError);
    image.set_pixel(-1, 500, colors::black);  // outside: ignored
}

TEST_CASE("write_png(image, path) / read_png(path): round trip keeps every pixel, no temporary left",
          "[tasks][plot]") {
    TempDir dir;
    Image image(37, 23);
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            image.set_pixel(x, y, {static_cast<uint8_t>(7 * x), static_cast<uint8_t>(11 * y),
                                   static_cast<uint8_t>((x * y) % 256)});
    const fs::path path = dir.path / "pattern.png";
    write_png(image, path);
    const Image back = read_png(path);
    CHECK(back.width() == 37);
    CHECK(back.height() == 23);
    CHECK(back.rgb() == image.rgb());
    CHECK(dir.files() == std::vector<std::string>{"pattern.png"});

    // Overwriting replaces the file as a whole.
    write_png(Image(5, 4, colors::black), path);
    CHECK(read_png(path).width() == 5);

    CHECK_THROWS_WITH(read_png(dir.path / "missing.png"),
                      Catch::Contains("read_png") && Catch::Contains("missing.png"));
}

// ---- ticks and colours ----------------------------------------------------------------------

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
        {0.5, 0.25, "0.50"},
        {2000, 1000, "2000"},
        {3, 1, "3"},
        {-1.5, 0.5, "-1.5"},
        {0.1 + 0.2, 0.1, "0.3"},
        {0.001, 0.001, "0.001"},
        {-0.0, 0.1, "0.0"},
        {1e-17, 0.2, "0.0"},
        {0, 1, "0"},
        {0, 1e-6, "0"},
        {50000, 10000, "50000"},
        {200000, 100000, "2e5"},
        {2.5e6, 5e5, "2.5e6"},
        {1e20, 1e20, "1e20"},
        {1e-6, 1e-6, "1e-6"},
        {-3e-5, 1e-5, "-3e-5"},
        {1.00001, 0.00001, "1.00001"},
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

// ---- line plots -----------------------------------------------------------------------------------

TEST_CASE("plot_lines(path, plot): y = x runs along the diagonal on a white page", "[tasks][plot]") {
    TempDir dir;
    const LinePlot plot = diagonal_plot();
    const LinePlotLayout layout = plot_lines(dir.path / "diagonal.png", plot);
    const Image image = read_png(dir.path / "diagonal.png");
    CHECK(image.width() == plot.width);
    CHECK(image.height() == plot.height);
    CHECK(layout.width == plot.width);
    CHECK(image.pixel(0, 0) == colors::white);
    CHECK(image.pixel(image.width() - 1, image.height() - 1) == colors::white);
    CHECK(image.pixel(image.width() - 1, 0) == colors::white);

    const Rgb blue = palette_color(0);
    for (double x : {0.1, 0.3, 0.5, 0.7, 0.9}) {
        INFO("x = " << x);
        CHECK(color_near(image, layout.to_pixel(x, x), 1, blue, 10));
        // Far from the diagonal there is no series colour.
        CHECK_FALSE(color_near(image, layout.to_pixel(x, 1 - x + (x == 0.5 ? 0.3 : 0)), 2, blue, 60));
    }
    // Axes limits: x exactly the data, y padded by 5%; ticks are 1-2-5 values inside.
    CHECK(layout.x_lo == 0);
    CHECK(layout.x_hi == 1);
    CHECK(layout.y_lo == Approx(-0.05));
    CHECK(layout.y_hi == Approx(1.05));
    REQUIRE(layout.x_ticks.size() >= 3);
    for (double t : layout.x_ticks) CHECK((t >= 0 && t <= 1));
    // The frame's corners are axis-coloured and the plotting area lies inside the picture.
    CHECK(image.pixel(layout.area.x - 1, layout.area.y - 1) == colors::axis);
    CHECK(layout.area.right() < image.width());
    CHECK(layout.area.bottom() < image.height());
    // The legend avoided the occupied upper-right corner: upper left is empty.
    CHECK(layout.legend.width > 0);
    CHECK(layout.legend.x < layout.area.x + layout.area.width / 2);
    CHECK(layout.legend.y < layout.area.y + layout.area.height / 2);
    CHECK(dir.files() == std::vector<std::string>{"diagonal.png"});
}

TEST_CASE("plot_lines(path, plot): NaN breaks a line and is marked grey, points and log axes draw",
          "[tasks][plot]") {
    TempDir dir;
    LinePlot plot{.series = {{.name = "loss", .x = {1, 2, 3, 4, 5}, .y = {1, 0.5, kNaN, 0.1, kInf}},
                             {.name = "samples", .x = {1, 3, 5}, .y = {0.8, 0.2, 0.05}, .style = SeriesStyle::points},
                             {.name = "zero", .x = {2, 4}, .y = {0, -1}}},  // nothing drawable on a log axis
                  .log_y = true};
    const LinePlotLayout layout = plot_lines(dir.path / "log.png", plot);
    const Image image = read_png(dir.path / "log.png");
    CHECK(layout.log_y);
    CHECK(layout.y_lo < 0.05);
    CHECK(layout.y_hi > 1);
    // Missing points at x = 3 and 5 (NaN, inf) get grey crosses on the bottom edge.
    for (double x : {3.0, 5.0}) {
        const PointF mark{layout.to_pixel(x, 1).x, layout.area.bottom() - 7.0};
        INFO("missing mark at x = " << x);
        CHECK(color_near(image, mark, 2, colors::missing, 6));
    }
    // The scatter points are drawn in the second palette colour (translucent over white).
    const Rgb orange = palette_color(1);
    const Rgb at_point = pixel_at(image, layout.to_pixel(3, 0.2));
    CHECK(color_distance(at_point, orange) < 120);
    // The first series is not drawn between x = 2 and 4 (the NaN breaks it).
    CHECK_FALSE(color_near(image, layout.to_pixel(3, std::sqrt(0.5 * 0.1)), 2, palette_color(0), 60));
    CHECK(color_near(image, layout.to_pixel(1.5, std::sqrt(1 * 0.5)), 2, palette_color(0), 60));
}

TEST_CASE("plot_lines(path, plot): bad input throws ValueError naming plot_lines", "[tasks][plot]") {
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
        {"x/y sizes", {.series = {{.name = "a", .x = {1, 2, 3}, .y = {1, 2}}}},
         "plot_lines: series 0 ('a') has 3 x values but 2 y values"},
        {"empty x limits", {.series = {{.y = {1, 2}}}, .x_min = 5, .x_max = 5}, "plot_lines: x axis limits [5, 5]"},
        {"log with y_min 0", {.series = {{.y = {1, 2}}}, .log_y = true, .y_min = 0}, "logarithmic y axis"},
        {"non-finite limit", {.series = {{.y = {1, 2}}}, .y_max = kInf}, "plot_lines: y_max must be finite"},
        {"tiny image", {.series = {{.y = {1, 2}}}, .width = 50, .height = 50}, "plot_lines: image size 50x50"},
    };
    for (const Row& row : rows) {
        INFO(row.what);
        CHECK_THROWS_AS(plot_lines(path, row.plot), ValueError);
        CHECK_THROWS_WITH(plot_lines(path, row.plot), Catch::Contains(row.message));
    }
    CHECK(dir.files().empty());  // nothing written
    CHECK_THROWS_WITH(render_lines(LinePlot{}), Catch::Contains("render_lines: no series"));
}

TEST_CASE("plot_lines(path, plot): unwritable path throws IOError naming it and keeps the old picture",
          "[tasks][plot]") {
    TempDir dir;
    const fs::path missing_dir = dir.path / "no" / "such" / "dir" / "loss.png";
    CHECK_THROWS_AS(plot_lines(missing_dir, diagonal_plot()), IOError);
    CHECK_THROWS_WITH(plot_lines(missing_dir, diagonal_plot()),
                      Catch::Contains("plot_lines: cannot write") && Catch::Contains(missing_dir.string()));
    // A folder where the file should go: the rename fails and the temporary is removed.
    fs::create_directory(dir.path / "taken.png");
    CHECK_THROWS_WITH(plot_lines(dir.path / "taken.png", diagonal_plot()),
                      Catch::Contains((dir.path / "taken.png").string()));
    CHECK(dir.files() == std::vector<std::string>{"taken.png"});
    CHECK(fs::is_directory(dir.path / "taken.png"));

    // A failing plot never touches an existing picture.
    const fs::path good = dir.path / "good.png";
    plot_lines(good, diagonal_plot());
    const Image before = read_png(good);
    CHECK_THROWS_AS(plot_lines(good, LinePlot{}), ValueError);
    CHECK(read_png(good).rgb() == before.rgb());
}

TEST_CASE("render_lines(plot): one point, all-NaN, zoomed-in and huge data draw or fail cleanly", "[tasks][plot]") {
    // One point: a unit window around it, the point drawn as a dot (a line needs two).
    const Rendered<LinePlotLayout> one = render_lines({.series = {{.y = {3}}}});
    CHECK(one.layout.x_lo == -0.5);
    CHECK(one.layout.x_hi == 0.5);
    CHECK(one.layout.y_lo < 3);
    CHECK(one.layout.y_hi > 3);
    CHECK(color_near(one.image, one.layout.to_pixel(0, 3), 1, palette_color(0), 60));
    CHECK(one.layout.legend.width == 0);  // unnamed series: no legend

    // Nothing finite: default limits, grey crosses for both points.
    const Rendered<LinePlotLayout> none = render_lines({.series = {{.name = "nan", .y = {kNaN, kNaN}}}});
    CHECK(none.layout.x_lo == 0);
    CHECK(none.layout.x_hi == 1);
    for (double x : {0.0, 1.0})
        CHECK(color_near(none.image, {none.layout.to_pixel(x, 0).x, none.layout.area.bottom() - 7.0}, 2,
                         colors::missing, 30));  // half clipped by the frame, so anti-aliased

    // Limits zoomed far into a steep line: the far end is ~1e12 pixels away and is clipped.
    const Rendered<LinePlotLayout> zoom = render_lines(
        {.series = {{.x = {0, 1}, .y = {0, 1e9}}}, .x_min = 0, .x_max = 1e-9, .y_min = 0, .y_max = 1});
    for (double f : {0.25, 0.5, 0.75})
        CHECK(color_near(zoom.image, zoom.layout.to_pixel(f * 1e-9, f), 1, palette_color(0), 10));

    // A range no double can span is refused, not drawn as garbage.
    CHECK_THROWS_WITH(render_lines({.series = {{.y = {-1e308, 1e308}}}}),
                      Catch::Contains("render_lines: axis limits") && Catch::Contains("too wide"));

    // A long training run (100k steps) draws with its ticks inside the limits.
    std::vector<double> steps(100000);
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = 5.0 / (1.0 + i / 1000.0);
    const Rendered<LinePlotLayout> run = render_lines({.series = {{.name = "loss", .y = steps}}, .log_y = true});
    CHECK(run.layout.x_hi == 99999);
    for (double t : run.layout.x_ticks) CHECK((t >= 0 && t <= 99999));
    CHECK(color_near(run.image, run.layout.to_pixel(50000, steps[50000]), 2, palette_color(0), 30));
}

TEST_CASE("render_heatmaps(maps): 1x1, constant, all-NaN and one-sided limits", "[tasks][plot]") {
    const Rendered<HeatmapLayout> constant = render_heatmaps({.matrices = {{core::full({1, 1}, 5.0)}}});
    CHECK(constant.layout.vmin == 4.5);
    CHECK(constant.layout.vmax == 5.5);
    CHECK(pixel_at(constant.image, constant.layout.cell_center(0, 0, 0, 0)) ==
          colormap_color(Colormap::reds, 0.5));
    CHECK(constant.layout.cell == 32);

    const Rendered<HeatmapLayout> nan = render_heatmaps({.matrices = {{core::full({2, 2}, kNaN)}}});
    CHECK(nan.layout.vmin == 0);
    CHECK(nan.layout.vmax == 1);
    CHECK(pixel_at(nan.image, nan.layout.cell_center(0, 0, 1, 1)) == colors::missing);

    // vmax given alone: values above it saturate at the darkest colour.
    const Rendered<HeatmapLayout> capped =
        render_heatmaps({.matrices = {{core::tensor({0, 0.5, 2, 7}, {2, 2})}}, .vmax = 1.0});
    CHECK(capped.layout.vmin == 0);
    CHECK(pixel_at(capped.image, capped.layout.cell_center(0, 0, 1, 1)) == colormap_color(Colormap::reds, 1));
    CHECK(pixel_at(capped.image, capped.layout.cell_center(0, 0, 0, 1)) == colormap_color(Colormap::reds, 0.5));
    CHECK_THROWS_WITH(render_heatmaps({.matrices = {{core::tensor({-1e308, 1e308}, {1, 2}, core::DType::float64)}}}),
                      Catch::Contains("render_heatmaps: the colour scale") && Catch::Contains("too wide"));
}

// ---- heatmaps --------------------------------------------------------------------------------------

TEST_CASE("plot_heatmaps(path, maps): [[0, 1], [1, 0]] is darkest at (0, 1) and lightest at (0, 0)",
          "[tasks][plot]") {
    TempDir dir;
    const Heatmaps maps{.matrices = {{core::tensor({0, 1, 1, 0}, {2, 2})}}};
    const HeatmapLayout layout = plot_heatmaps(dir.path / "2x2.png", maps);
    const Image image = read_png(dir.path / "2x2.png");
    CHECK(image.width() == layout.width);
    CHECK(image.height() == layout.height);
    CHECK(image.pixel(0, 0) == colors::white);
    CHECK(image.pixel(image.width() - 1, image.height() - 1) == colors::white);
    CHECK(layout.vmin == 0);
    CHECK(layout.vmax == 1);
    CHECK(layout.cell >= 24);  // small matrices get big cells

    const Rgb c00 = pixel_at(image, layout.cell_center(0, 0, 0, 0));
    const Rgb c01 = pixel_at(image, layout.cell_center(0, 0, 0, 1));
    const Rgb c10 = pixel_at(image, layout.cell_center(0, 0, 1, 0));
    const Rgb c11 = pixel_at(image, layout.cell_center(0, 0, 1, 1));
    CHECK(c01 == colormap_color(Colormap::reds, 1));
    CHECK(c00 == colormap_color(Colormap::reds, 0));
    CHECK(c10 == c01);
    CHECK(c11 == c00);
    CHECK(brightness(c01) < brightness(c00));
    // The colour bar runs from vmax (dark, top) to vmin (light, bottom).
    const Rect& bar = layout.colorbar;
    CHECK(color_distance(image.pixel(bar.x + bar.width / 2, bar.y), colormap_color(Colormap::reds, 1)) < 12);
    CHECK(color_distance(image.pixel(bar.x + bar.width / 2, bar.bottom() - 1), colormap_color(Colormap::reds, 0)) <
          12);
    CHECK_THROWS_AS(layout.cell_center(0, 0, 2, 0), IndexError);
}

TEST_CASE("plot_heatmaps(path, maps): NaN and inf cells are grey, the scale uses the finite values",
          "[tasks][plot]") {
    TempDir dir;
    const Heatmaps maps{.matrices = {{core::tensor({kNaN, 4, kInf, 2, -kInf, 3}, {2, 3}, core::DType::float64)}},
                        .cmap = Colormap::viridis};
    const HeatmapLayout layout = plot_heatmaps(dir.path / "nan.png", maps);
    const Image image = read_png(dir.path / "nan.png");
    CHECK(layout.vmin == 2);
    CHECK(layout.vmax == 4);
    // [[nan, 4, inf], [2, -inf, 3]]
    CHECK(pixel_at(image, layout.cell_center(0, 0, 0, 0)) == colors::missing);
    CHECK(pixel_at(image, layout.cell_center(0, 0, 0, 2)) == colors::missing);
    CHECK(pixel_at(image, layout.cell_center(0, 0, 1, 1)) == colors::missing);
    CHECK(pixel_at(image, layout.cell_center(0, 0, 0, 1)) == colormap_color(Colormap::viridis, 1));
    CHECK(pixel_at(image, layout.cell_center(0, 0, 1, 0)) == colormap_color(Colormap::viridis, 0));
    CHECK(pixel_at(image, layout.cell_center(0, 0, 1, 2)) == colormap_color(Colormap::viridis, 0.5));
}

TEST_CASE("plot_heatmaps(path, maps): strided views, grids, titles and token labels", "[tasks][plot]") {
    TempDir dir;
    // A transposed float64 view: cell (q, k) must show weights.at({q, k}).
    const core::Tensor base = core::arange(12, core::DType::float64).view({3, 4});
    const core::Tensor weights = base.transpose(0, 1);  // (4, 3), not contiguous
    Heatmaps maps{.matrices = {{weights, weights}, {weights, weights}},
                  .titles = {"head 1", "head 2"},
                  .x_ticks = {"je", "suis", "arrivé"},
                  .y_ticks = {"i", "arrived", ".", "<eos>"},
                  .vmin = 0,
                  .vmax = 11};
    const HeatmapLayout layout = plot_heatmaps(dir.path / "grid.png", maps);
    const Image image = read_png(dir.path / "grid.png");
    CHECK(layout.rows == 2);
    CHECK(layout.cols == 2);
    CHECK(layout.queries == 4);
    CHECK(layout.keys == 3);
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
            for (int64_t q = 0; q < 4; ++q)
                for (int64_t k = 0; k < 3; ++k)
                    CHECK(pixel_at(image, layout.cell_center(r, c, q, k)) ==
                          colormap_color(Colormap::reds, weights.at({q, k}) / 11.0));
    // Panels do not overlap and stay inside the picture.
    const Rect& a = layout.panels[0];
    const Rect& b = layout.panels[1];
    const Rect& d = layout.panels[2];
    CHECK(a.right() < b.x);
    CHECK(a.bottom() < d.y);
    CHECK(layout.panels[3].right() < layout.colorbar.x);
    CHECK(layout.colorbar.right() < layout.width);
    // Text was drawn left of the first panel (the y tick labels).
    bool text_left = false;
    for (int x = 0; x < a.x - 8; ++x)
        text_left = text_left || image.pixel(x, static_cast<int>(layout.cell_center(0, 0, 1, 0).y)) == colors::text;
    CHECK(text_left);
}

TEST_CASE("plot_heatmaps(path, maps): the size cap shrinks the cells", "[tasks][plot]") {
    const core::Tensor m = core::rand({10, 10}, core::default_generator());
    Heatmaps maps{.matrices = heatmap_grid(m.unsqueeze(0).expand({2, 4, 10, 10}))};
    const Rendered<HeatmapLayout> big = render_heatmaps(maps);
    CHECK(big.layout.cell == 26);
    maps.max_width = 800;
    const Rendered<HeatmapLayout> small = render_heatmaps(maps);
    CHECK(small.layout.cell < 26);
    CHECK(small.image.width() <= 800);
    CHECK(small.layout.width == small.image.width());
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
        {"cap", {.matrices = {{core::zeros({300, 300})}}, .max_width = 200, .max_height = 200}, "over the cap"},
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
                      Catch::Contains("plot_heatmaps: cannot write") && Catch::Contains(unwritable.string()));
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
// The pictures of the tutorials and the training loop, rendered end to end.
// They go to a temporary folder; set TFORMER_PLOT_EXAMPLES=/some/dir to keep
// them there and look at them.

TEST_CASE("plot_lines / plot_heatmaps: the example pictures render and read back", "[tasks][plot]") {
    TempDir tmp;
    const char* env = std::getenv("TFORMER_PLOT_EXAMPLES");
    const fs::path out = env ? fs::path(env) : tmp.path;
    fs::create_directories(out);
    core::Generator gen(7);

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
    plot_lines(out / "loss.png", loss);
    LinePlot log_loss = loss;
    log_loss.log_y = true;
    log_loss.title = "loss (log scale)";
    plot_lines(out / "loss-log.png", log_loss);

    // Positional encoding columns 6-9 against the row (position), as in d2l.
    LinePlot encoding{.title = "Positional encoding", .xlabel = "Row (position)", .legend = LegendPosition::best};
    const Dash dashes[] = {Dash::solid, Dash::dashed, Dash::dash_dot, Dash::dotted};
    for (int col = 6; col < 10; ++col) {
        Series s{.name = "Col " + std::to_string(col), .dash = dashes[col - 6]};
        for (int row = 0; row < 60; ++row) {
            const double freq = std::pow(10000.0, -(col / 2 * 2) / 32.0);
            s.y.push_back(col % 2 == 0 ? std::sin(row * freq) : std::cos(row * freq));
        }
        encoding.series.push_back(s);
    }
    plot_lines(out / "positional-encoding.png", encoding);

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
    plot_lines(out / "attention-pooling.png",
               {.series = {{.name = "Truth", .x = x_test, .y = truth},
                           {.name = "Pred", .x = x_test, .y = pred, .dash = Dash::dashed},
                           {.name = "train", .x = x_train, .y = y_train, .style = SeriesStyle::points}},
                .xlabel = "x",
                .ylabel = "y",
                .x_min = 0,
                .x_max = 5,
                .y_min = -1,
                .y_max = 5});

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
    const HeatmapLayout heads = plot_heatmaps(out / "attention-heads.png",
                  {.matrices = heatmap_grid(weights),
                   .titles = {"layer 1, head 1", "layer 1, head 2", "layer 1, head 3", "layer 1, head 4",
                              "layer 2, head 1", "layer 2, head 2", "layer 2, head 3", "layer 2, head 4"},
                   .x_ticks = source,
                   .y_ticks = target});
    Heatmaps viridis{.matrices = {{weights.select(0, 0).select(0, 0)}},
                     .title = "Encoder self-attention",
                     .x_ticks = source,
                     .y_ticks = source,
                     .cmap = Colormap::viridis};
    viridis.matrices[0][0].set({2, 7}, kNaN);
    const HeatmapLayout single = plot_heatmaps(out / "attention-viridis.png", viridis);
    const std::vector<std::string> sentence = {"<bos>", "il", "y", "a", "beaucoup", "de", "gens", "qui",
                                               "pensent", "que", "c'est", "une", "très", "bonne", "idée",
                                               "mais", "je", "ne", "suis", "pas", "d'accord", ".", "<eos>",
                                               "<pad>", "<pad>"};
    const core::Tensor long_scores = core::rand({4, 25, 25}, gen);
    const HeatmapLayout long_heads = plot_heatmaps(out / "attention-long.png", {.matrices = heatmap_grid(long_scores),
                                               .titles = {"decoder head 1", "decoder head 2", "decoder head 3",
                                                          "decoder head 4"},
                                               .x_ticks = sentence,
                                               .y_ticks = sentence});
    plot_lines(out / "large-values.png",
               {.series = {{.name = "tokens/s", .x = {0, 1, 2, 3}, .y = {0, 1.2e6, 2.9e6, 3.1e6}}},
                .xlabel = "epoch"});
    const core::Tensor big = core::rand({60, 80}, gen);
    const HeatmapLayout wide =
        plot_heatmaps(out / "attention-60x80.png", {.matrices = {{big, big}}, .titles = {"a", "b"}});

    // The font: every printable ASCII character and some French.
    Image sheet(720, 200);
    std::string ascii;
    for (char c = ' '; c <= '~'; ++c) ascii += c;
    for (int line = 0; line < 3; ++line)
        sheet.draw_text(10, 10 + 26 * line, ascii.substr(line * 32, 32));
    sheet.draw_text(10, 90, "Je suis arrivé à la gare. Ça, c'est où ? Noël, cœur, être.");
    sheet.draw_text(10, 120, "Quick brown fox: 0.123, -4.5e-06, [x] {y} (z) <eos>", {.bold = true});
    sheet.draw_text(10, 150, "scale 3: Keys", {.scale = 3});
    write_png(sheet, out / "font.png");
    Image zoom(1180, 560);
    for (int line = 0; line < 3; ++line)
        zoom.draw_text(10, 10 + 60 * line, ascii.substr(line * 32, 32), {.scale = 6});
    zoom.draw_text(10, 200, "àâçéèêëîïôùûüÿœ É", {.scale = 6});
    write_png(zoom, out / "font-zoom.png");

    // Every picture is a readable PNG of the size its layout announced.
    const std::pair<const char*, std::pair<int, int>> expected[] = {
        {"loss.png", {800, 540}},
        {"loss-log.png", {800, 540}},
        {"positional-encoding.png", {800, 540}},
        {"attention-pooling.png", {800, 540}},
        {"attention-heads.png", {heads.width, heads.height}},
        {"attention-viridis.png", {single.width, single.height}},
        {"attention-long.png", {long_heads.width, long_heads.height}},
        {"large-values.png", {800, 540}},
        {"attention-60x80.png", {wide.width, wide.height}},
        {"font.png", {720, 200}},
        {"font-zoom.png", {1180, 560}},
    };
    for (const auto& [name, size] : expected) {
        INFO(name);
        const Image image = read_png(out / name);
        CHECK(image.width() == size.first);
        CHECK(image.height() == size.second);
        CHECK(image.pixel(0, 0) == colors::white);
    }
    // The 2x4 grid of 10x10 maps keeps its 26-pixel cells and word labels fit the cap.
    CHECK(heads.cell == 26);
    CHECK(heads.width <= 2400);
    // 25-token labels are thinned: the long grid still fits with readable cells.
    CHECK(long_heads.cell >= 8);
}
