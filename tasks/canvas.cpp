// All of tformer's drawing goes through cairo here.
#include "tasks/canvas.hpp"

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/utf8.hpp"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>

namespace tformer::tasks {

namespace {

constexpr const char* kFont = "DejaVu Sans";

void set_color(cairo_t* cr, Rgb c, double alpha = 1.0) {
    cairo_set_source_rgba(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0, std::clamp(alpha, 0.0, 1.0));
}

void set_font(cairo_t* cr, const TextStyle& style) {
    cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                           style.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, style.size);
}

// A context on a 1x1 surface, for measuring text before anything is drawn.
cairo_t* measuring_context() {
    struct Measurer {
        cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
        cairo_t* cr = cairo_create(surface);
        ~Measurer() {
            cairo_destroy(cr);
            cairo_surface_destroy(surface);
        }
    };
    thread_local Measurer m;
    return m.cr;
}

// cairo writes files through a callback: appends to a std::string.
cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
}

void set_dash(cairo_t* cr, const Stroke& stroke) {
    // On-off lengths in line widths, as matplotlib scales its dash patterns.
    const double w = stroke.width;
    switch (stroke.dash) {
        case Dash::solid: cairo_set_dash(cr, nullptr, 0, 0); break;
        case Dash::dashed: {
            const double d[] = {3.7 * w, 1.6 * w};
            cairo_set_dash(cr, d, 2, 0);
            break;
        }
        case Dash::dotted: {
            const double d[] = {0, 2 * w};  // round caps turn zero-length dashes into dots
            cairo_set_dash(cr, d, 2, 0);
            break;
        }
        case Dash::dash_dot: {
            const double d[] = {3.2 * w, 1.6 * w, 0, 1.6 * w};
            cairo_set_dash(cr, d, 4, 0);
            break;
        }
    }
    cairo_set_line_cap(
        cr, stroke.dash == Dash::dotted || stroke.dash == Dash::dash_dot ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
}

}  // namespace

// ---- text measures --------------------------------------------------------------------------

FontMetrics font_metrics(const TextStyle& style) {
    cairo_t* cr = measuring_context();
    set_font(cr, style);
    cairo_font_extents_t font;
    cairo_font_extents(cr, &font);
    cairo_text_extents_t caps;
    cairo_text_extents(cr, "H", &caps);
    return {.ascent = font.ascent, .descent = font.descent, .cap_height = -caps.y_bearing};
}

double text_width(std::string_view text, const TextStyle& style) {
    cairo_t* cr = measuring_context();
    set_font(cr, style);
    cairo_text_extents_t extents;
    cairo_text_extents(cr, core::utf8_replace_invalid(text).c_str(), &extents);
    return extents.x_advance;
}

// ---- formats ----------------------------------------------------------------------------------

PictureFormat picture_format(const std::filesystem::path& path, std::string_view op) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".png") return PictureFormat::png;
    if (ext == ".svg") return PictureFormat::svg;
    fail<ValueError>("{}: '{}' must end in .png or .svg (the picture's format)", op, path.string());
}

const char* picture_extension(PictureFormat format) { return format == PictureFormat::svg ? "svg" : "png"; }

PictureFormat parse_picture_format(std::string_view name, std::string_view op) {
    if (name == "png") return PictureFormat::png;
    if (name == "svg") return PictureFormat::svg;
    fail<ValueError>("{}: --plot-format must be png or svg, got '{}'", op, name);
}

// ---- the canvas -------------------------------------------------------------------------------

struct Canvas::Cairo {
    cairo_surface_t* surface = nullptr;
    cairo_t* cr = nullptr;
    ~Cairo() {
        if (cr) cairo_destroy(cr);
        if (surface) cairo_surface_destroy(surface);
    }
};

Canvas::Canvas(int width, int height, PictureFormat format, std::string_view op)
    : cairo_(std::make_unique<Cairo>()), width_(width), height_(height), format_(format), op_(op) {
    if (width < 1 || height < 1 || width > kMaxImageSide || height > kMaxImageSide)
        fail<ValueError>("{}: picture size {}x{} is outside 1..{} pixels per side", op, width, height, kMaxImageSide);
    if (format == PictureFormat::png) {
        cairo_->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);  // PNG without alpha
    } else {
        cairo_->surface = cairo_svg_surface_create_for_stream(append_bytes, &svg_, width, height);
        cairo_svg_surface_set_document_unit(cairo_->surface, CAIRO_SVG_UNIT_PX);
    }
    cairo_->cr = cairo_create(cairo_->surface);
    if (cairo_status(cairo_->cr) != CAIRO_STATUS_SUCCESS)
        fail<ValueError>("{}: cannot make a {}x{} picture: {}", op, width, height,
                         cairo_status_to_string(cairo_status(cairo_->cr)));
    cairo_set_line_join(cairo_->cr, CAIRO_LINE_JOIN_ROUND);
    set_color(cairo_->cr, colors::white);
    cairo_paint(cairo_->cr);
}

Canvas::~Canvas() = default;

void Canvas::set_clip(const Rect& clip) {
    cairo_reset_clip(cairo_->cr);
    cairo_rectangle(cairo_->cr, clip.x, clip.y, clip.width, clip.height);
    cairo_clip(cairo_->cr);
}

void Canvas::reset_clip() { cairo_reset_clip(cairo_->cr); }

void Canvas::fill_rect(const Rect& rect, Rgb color, double alpha) {
    cairo_t* cr = cairo_->cr;
    cairo_rectangle(cr, rect.x, rect.y, rect.width, rect.height);
    set_color(cr, color, alpha);
    cairo_fill(cr);
}

void Canvas::stroke_rect(const Rect& rect, Rgb color) {
    cairo_t* cr = cairo_->cr;
    // a one-pixel line along the centres of the outermost pixels covers exactly them
    cairo_rectangle(cr, rect.x + 0.5, rect.y + 0.5, rect.width - 1, rect.height - 1);
    set_color(cr, color);
    cairo_set_line_width(cr, 1.0);
    cairo_set_dash(cr, nullptr, 0, 0);
    cairo_stroke(cr);
}

void Canvas::line(PointF from, PointF to, const Stroke& stroke) {
    const PointF points[] = {from, to};
    polyline(points, stroke);
}

void Canvas::polyline(std::span<const PointF> points, const Stroke& stroke) {
    if (points.size() < 2) return;
    cairo_t* cr = cairo_->cr;
    cairo_move_to(cr, points[0].x, points[0].y);
    for (size_t i = 1; i < points.size(); ++i) cairo_line_to(cr, points[i].x, points[i].y);
    set_color(cr, stroke.color);
    cairo_set_line_width(cr, stroke.width);
    set_dash(cr, stroke);
    cairo_stroke(cr);
}

void Canvas::circle(PointF centre, double radius, Rgb color, double alpha) {
    cairo_t* cr = cairo_->cr;
    cairo_new_path(cr);
    cairo_arc(cr, centre.x, centre.y, radius, 0, 2 * M_PI);
    set_color(cr, color, alpha);
    cairo_fill(cr);
}

void Canvas::text(double x, double y, std::string_view text, const TextStyle& style) {
    cairo_t* cr = cairo_->cr;
    const std::string utf8 = core::utf8_replace_invalid(text);  // cairo takes only well-formed UTF-8
    set_font(cr, style);
    cairo_text_extents_t extents;
    cairo_text_extents(cr, utf8.c_str(), &extents);
    const double shift = style.halign == Align::start    ? 0
                         : style.halign == Align::center ? -extents.x_advance / 2
                                                         : -extents.x_advance;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (style.vertical) cairo_rotate(cr, -M_PI / 2);
    cairo_move_to(cr, shift, 0);
    set_color(cr, style.color);
    cairo_show_text(cr, utf8.c_str());
    cairo_restore(cr);
}

void Canvas::write(const std::filesystem::path& path) {
    cairo_surface_flush(cairo_->surface);
    std::string bytes;
    if (format_ == PictureFormat::png) {
        const cairo_status_t status = cairo_surface_write_to_png_stream(cairo_->surface, append_bytes, &bytes);
        if (status != CAIRO_STATUS_SUCCESS)
            fail<IOError>("{}: cannot write '{}': cairo: {}", op_, path.string(), cairo_status_to_string(status));
    } else {
        cairo_surface_finish(cairo_->surface);  // the SVG document is complete only now
        if (cairo_surface_status(cairo_->surface) != CAIRO_STATUS_SUCCESS)
            fail<IOError>("{}: cannot write '{}': cairo: {}", op_, path.string(),
                          cairo_status_to_string(cairo_surface_status(cairo_->surface)));
        bytes = std::move(svg_);
    }
    core::write_file_atomic(path.string(), bytes, op_);
}

// ---- reading back ---------------------------------------------------------------------------------

PictureInfo read_picture_info(const std::filesystem::path& path) {
    const PictureFormat format = picture_format(path, "read_picture_info");
    const std::string bytes = core::read_regular_file(path.string(), "read_picture_info", "a picture");
    if (format == PictureFormat::png) {
        struct Reader {
            const std::string& bytes;
            size_t pos = 0;
        } reader{bytes};
        auto read = [](void* closure, unsigned char* data, unsigned int length) {
            auto* r = static_cast<Reader*>(closure);
            if (r->pos + length > r->bytes.size()) return CAIRO_STATUS_READ_ERROR;
            std::copy_n(r->bytes.data() + r->pos, length, data);
            r->pos += length;
            return CAIRO_STATUS_SUCCESS;
        };
        cairo_surface_t* image = cairo_image_surface_create_from_png_stream(read, &reader);
        const cairo_status_t status = cairo_surface_status(image);
        const PictureInfo info{format, cairo_image_surface_get_width(image), cairo_image_surface_get_height(image)};
        cairo_surface_destroy(image);
        if (status != CAIRO_STATUS_SUCCESS)
            fail<IOError>("read_picture_info: '{}' is not a PNG picture: {}", path.string(),
                          cairo_status_to_string(status));
        return info;
    }
    // <?xml ...?> then <svg ... width="800px" height="540px" ...>
    static const std::regex svg_start(
        R"(^<\?xml[^>]*\?>\s*<svg\b[^>]*\bwidth="([0-9.]+)(px|pt)?"[^>]*\bheight="([0-9.]+)(px|pt)?")");
    std::smatch m;
    const std::string head = bytes.substr(0, 1000);
    if (!std::regex_search(head, m, svg_start) || bytes.find("</svg>") == std::string::npos)
        fail<IOError>("read_picture_info: '{}' is not an SVG picture", path.string());
    return {format, static_cast<int>(std::lround(std::stod(m[1].str()))),
            static_cast<int>(std::lround(std::stod(m[3].str())))};
}

}  // namespace tformer::tasks
