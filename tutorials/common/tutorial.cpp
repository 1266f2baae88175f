#include "common/tutorial.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tformer::tutorial {

namespace {

constexpr int kWidth = 78;  // the width text is wrapped to
constexpr std::string_view kIndent = "  ";

// Everything a step prints (notes, tensors, table rows, check marks) goes
// through say(), the one place that can keep it quiet: with --from or
// --only the steps before the chosen one still run, since later steps use
// their results, but print nothing.
bool quiet = false;
template <class... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
    if (!quiet) fmt::print(format, std::forward<Args>(args)...);
}

// "2b" for the step "2b. The document's printed numbers": the label before the first '.'.
std::string step_id(std::string_view name) { return std::string(name.substr(0, name.find('.'))); }

// Columns a UTF-8 string takes on a terminal: one per code point, two for
// the wide CJK ranges (the documents' Chinese terms appear in the notes).
int display_width(std::string_view s) {
    int width = 0;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        char32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
        for (int k = 1; k < len && i + k < s.size(); ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        const bool wide = (cp >= 0x2E80 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                          (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFF00 && cp <= 0xFF60);
        width += wide ? 2 : 1;
        i += len;
    }
    return width;
}

// Prints `text` after `prefix`, with every further line indented by the
// prefix's width (so a tensor's rows stay aligned under "name = ").
void print_hanging(std::string_view prefix, std::string_view text) {
    const std::string pad(display_width(prefix), ' ');
    bool first = true;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        const std::string_view line = text.substr(start, end - start);
        if (line.empty())
            say("\n");  // no trailing spaces on the blank lines between blocks
        else
            say("{}{}\n", first ? std::string(prefix) : pad, line);
        first = false;
        start = end + 1;
    }
}

// Prints `text` word-wrapped to kWidth, every line starting with `indent`.
// Lines that start with a space are preformatted (tables, formulas) and
// printed as they are; a line starting with "- " is a bullet whose wrapped
// lines are indented under its text; empty lines stay empty.
void print_wrapped(std::string_view text, std::string_view indent) {
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        const std::string_view line = text.substr(start, end - start);
        start = end + 1;
        if (line.empty() || line.front() == ' ') {
            say("{}{}\n", line.empty() ? "" : indent, line);
            continue;
        }
        // greedy word wrap: a word that does not fit starts the next line
        const std::string hanging = std::string(indent) + (line.starts_with("- ") ? "  " : "");
        const int width = kWidth - display_width(hanging);
        bool first = true;
        std::string out;
        int used = 0;
        size_t pos = 0;
        while (pos < line.size()) {
            size_t next = line.find(' ', pos);
            if (next == std::string_view::npos) next = line.size();
            const std::string_view word = line.substr(pos, next - pos);
            const int w = display_width(word);
            if (used > 0 && used + 1 + w > width) {
                say("{}{}\n", first ? std::string(indent) : hanging, out);
                first = false;
                out.clear();
                used = 0;
            }
            if (used > 0) {
                out += ' ';
                ++used;
            }
            out += word;
            used += w;
            pos = next + 1;
        }
        say("{}{}\n", first ? std::string(indent) : hanging, out);
    }
}

// Storage buffers get small numbers in order of first appearance, so the
// output can say "storage #1" instead of an address. A number is reused
// only while its buffer is alive.
std::string storage_label(const core::Tensor& t) {
    static std::map<const core::Storage*, std::pair<std::weak_ptr<core::Storage>, int>> labels;
    static int next = 1;
    const core::Storage* key = t.storage().get();
    auto it = labels.find(key);
    if (it == labels.end() || it->second.first.expired())
        it = labels.insert_or_assign(key, std::pair{std::weak_ptr<core::Storage>(t.storage()), next++}).first;
    return fmt::format("storage #{}", it->second.second);
}

void usage(std::FILE* to, const char* program, const Info& info) {
    fmt::print(to,
               "{}\nFollows: {}\n\n"
               "usage: {} [--step] [--from STEP | --only STEP] [--out DIR] [--plot-format png|svg]{}{} [--help]\n"
               "  --step      pause after each step until Enter is pressed (q + Enter quits)\n"
               "  --from STEP start at that step (e.g. 3 or 2b); the steps before it run quietly\n"
               "  --only STEP that step alone, after the steps before it have run quietly\n"
               "  --out DIR   where pictures are written (created when needed)\n"
               "  --plot-format png|svg   the pictures' format (default png)\n",
               info.title, info.follows, program, info.exercise.empty() ? "" : " [--exercise]",
               info.literal.empty() ? "" : " [--literal]");
    if (!info.exercise.empty()) fmt::print(to, "  --exercise  the exercise instead of the steps: {}\n", info.exercise);
    if (!info.literal.empty()) fmt::print(to, "  --literal   {}\n", info.literal);
    fmt::print(to, "  --help      this text\n");
}

}  // namespace

std::string error_kind(const std::exception& e) {
    if (dynamic_cast<const ShapeError*>(&e)) return "ShapeError";
    if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
    if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
    if (dynamic_cast<const IOError*>(&e)) return "IOError";
    if (dynamic_cast<const Error*>(&e)) return "tformer::Error";
    return "exception";
}

// ---- Tutorial ---------------------------------------------------------------------

Tutorial::Tutorial(int argc, char** argv, Info info) : info_(std::move(info)) {
    const char* program = argc > 0 ? argv[0] : "tutorial";
    std::string name = std::filesystem::path(program).filename().string();
    if (name.starts_with("tutorial_")) name.erase(0, 9);
    name_ = name;
    out_dir_ = std::filesystem::path("build") / "tutorial-out" / name;  // generated output stays out of git
    if (parse_arguments(argc, argv)) std::filesystem::create_directories(out_dir_);
    // One thread unless OMP_NUM_THREADS says otherwise: the tutorials' tensors
    // are small, and on a busy machine OpenMP threads that spin while waiting
    // make a two-second tutorial take minutes (measured: tutorial 10, 16 s
    // alone, 815 s at a load of 15 on 2 cores).
    if (std::getenv("OMP_NUM_THREADS") == nullptr) core::set_num_threads(1);
    print_banner();
}

bool Tutorial::parse_arguments(int argc, char** argv) {
    const char* program = argc > 0 ? argv[0] : "tutorial";
    // Says what is wrong with the command line, then the usage, and exits with status 2.
    auto refuse = [&](const std::string& why) {
        fmt::print(stderr, "{}: {}\n\n", program, why);
        usage(stderr, program, info_);
        std::exit(2);
    };
    bool out_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc && argv[i + 1][0] != '\0' && argv[i + 1][0] != '-';
        if (arg == "--help" || arg == "-h") {
            usage(stdout, program, info_);
            std::exit(0);
        } else if (arg == "--step") {
            stepping_ = true;
        } else if (arg == "--exercise" && !info_.exercise.empty()) {
            exercise_mode_ = true;
        } else if (arg == "--literal" && !info_.literal.empty()) {
            literal_ = true;
        } else if (arg == "--out" && i + 1 < argc) {
            out_dir_ = argv[++i];
            out_given = true;
        } else if (arg.starts_with("--out=")) {
            out_dir_ = std::string(arg.substr(6));
            out_given = true;
        } else if ((arg == "--from" || arg == "--only") && has_value) {
            if (!jump_to_.empty()) refuse("give one --from or --only, not several");
            only_ = arg == "--only";
            jump_to_ = argv[++i];
        } else if (arg == "--plot-format" && i + 1 < argc &&
                   (std::string_view(argv[i + 1]) == "png" || std::string_view(argv[i + 1]) == "svg")) {
            plot_format_ = argv[++i];
        } else if (arg == "--out") {
            refuse("--out needs a folder after it");
        } else if (arg == "--from" || arg == "--only") {
            refuse(fmt::format("{} needs a step after it, e.g. {} 3 or {} 2b", arg, arg, arg));
        } else if (arg == "--plot-format") {
            refuse("--plot-format needs png or svg after it");
        } else if (arg == "--exercise" || arg == "--literal") {
            refuse(fmt::format("this tutorial has no {} mode", arg.substr(2)));
        } else {
            refuse(fmt::format("unknown argument '{}'", arg));
        }
    }
    if (exercise_mode_ && !jump_to_.empty())
        refuse("--from and --only choose among the steps; --exercise runs the exercise instead");
    return out_given;
}

void Tutorial::print_banner() const {
    const std::string rule(kWidth, '=');
    fmt::print("{}\n{}\nFollows: {}\n", rule, info_.title, info_.follows);
    if (exercise_mode_) fmt::print("EXERCISE: {}\n", info_.exercise);
    if (literal_) fmt::print("LITERAL: {}\n", info_.literal);
    if (!jump_to_.empty())
        fmt::print("{} STEP {}: the steps before it run quietly, for the results it uses\n", only_ ? "ONLY" : "FROM",
                   jump_to_);
    if (!stepping_) fmt::print("(Run with --step to pause after each step.)\n");
    fmt::print("{}\n", rule);
}

void Tutorial::step(std::string_view name, const std::function<void()>& body) {
    if (exercise_mode_) return;
    if (jump_to_.empty()) return run_part(name, body);
    const std::string id = step_id(name);
    step_ids_.push_back(id);
    if (!reached_ && id != jump_to_) return run_quietly(name, body);
    if (reached_ && only_) return;
    reached_ = true;
    run_part(name, body);
}

void Tutorial::exercise(std::string_view name, const std::function<void()>& body) {
    if (exercise_mode_) run_part(name, body);
}

void Tutorial::run_part(std::string_view name, const std::function<void()>& body) {
    if (quit_) {
        ++steps_skipped_;
        return;
    }
    current_step_ = std::string(name);
    const std::string title = fmt::format("── {} ", name);
    std::string rule;
    for (int i = display_width(title); i < kWidth || rule.empty(); ++i) rule += "─";
    say("\n{}{}\n\n", title, rule);
    ++steps_run_;
    try {
        body();
    } catch (const std::exception& e) {
        record(false, "the step ran to the end", fmt::format("it threw {}: {}", error_kind(e), e.what()));
    }
    std::fflush(stdout);
    if (stepping_) pause();
    current_step_.clear();
}

void Tutorial::run_quietly(std::string_view name, const std::function<void()>& body) {
    if (quit_) return;
    current_step_ = std::string(name);
    quiet_steps_.push_back(step_id(name));
    quiet = true;
    try {
        body();
    } catch (const std::exception& e) {
        record(false, "the step ran to the end", fmt::format("it threw {}: {}", error_kind(e), e.what()));
    }
    quiet = false;
    current_step_.clear();
}

void Tutorial::pause() {
    fmt::print("\n  [Enter: next step · q then Enter: stop here] ");
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {  // no terminal (stdin closed): just carry on
        fmt::print("\n");
        stepping_ = false;
        return;
    }
    if (line == "q" || line == "Q") quit_ = true;
}

void Tutorial::record(bool ok, std::string_view what, std::string_view detail) {
    say("{}{} {}\n", kIndent, ok ? "✓" : "✗", what);
    if (!detail.empty()) print_wrapped(detail, fmt::format("{}    ", kIndent));
    if (ok) {
        if (!quiet) ++passed_;  // a quiet step's checks count only when they fail
    } else
        failures_.push_back(current_step_.empty() ? std::string(what) : fmt::format("[{}] {}", current_step_, what));
}

bool Tutorial::check(bool condition, std::string_view what) {
    record(condition, what, {});
    return condition;
}

bool Tutorial::check_close(double actual, double expected, double tol, std::string_view what) {
    const double diff = std::abs(actual - expected);
    const bool ok = diff <= tol;  // false for NaN, as it should be
    record(ok, what,
           ok ? std::string()
              : fmt::format("got {:.10g}, expected {:.10g}: |difference| {:.3g} > tolerance {:.3g}", actual, expected,
                            diff, tol));
    return ok;
}

bool Tutorial::check_close(const core::Tensor& actual, const core::Tensor& expected, double tol,
                           std::string_view what) {
    if (!actual.defined() || !expected.defined()) {
        record(false, what, "one of the tensors is undefined");
        return false;
    }
    if (!(actual.shape() == expected.shape())) {
        record(
            false, what,
            fmt::format("shapes differ: {} vs {}", core::shape_str(actual.shape()), core::shape_str(expected.shape())));
        return false;
    }
    const std::vector<double> a = actual.to_vector(), b = expected.to_vector();
    double worst = 0;
    size_t where = 0;
    bool nan = false;
    for (size_t i = 0; i < a.size(); ++i) {
        const double diff = std::abs(a[i] - b[i]);
        if (std::isnan(diff)) nan = true;
        if (diff > worst) {
            worst = diff;
            where = i;
        }
    }
    const bool ok = !nan && worst <= tol;
    record(ok, what,
           ok    ? std::string()
           : nan ? std::string("a NaN where a number was expected")
                 : fmt::format("largest |difference| {:.3g} > tolerance {:.3g} at flat element {} ({:.10g} vs {:.10g})",
                               worst, tol, where, a[where], b[where]));
    return ok;
}

bool Tutorial::check_allclose(const core::Tensor& actual, const core::Tensor& expected, double tol,
                              std::string_view what) {
    if (!actual.defined() || !expected.defined() || !(actual.shape() == expected.shape())) {
        record(false, what,
               !actual.defined() || !expected.defined()
                   ? std::string("one of the tensors is undefined")
                   : fmt::format("shapes differ: {} vs {}", core::shape_str(actual.shape()),
                                 core::shape_str(expected.shape())));
        return false;
    }
    const std::vector<double> a = actual.to_vector(), b = expected.to_vector();
    double worst_excess = -1, largest = 0;
    size_t where = 0;
    bool nan = false;
    for (size_t i = 0; i < a.size(); ++i) {
        const double diff = std::abs(a[i] - b[i]);
        if (std::isnan(diff)) nan = true;
        largest = std::max(largest, diff);
        const double excess = diff - tol * (1 + std::abs(b[i]));
        if (excess > worst_excess || i == 0) worst_excess = excess, where = i;
    }
    const bool ok = !nan && worst_excess <= 0;
    record(ok, fmt::format("{} (largest |difference| {:.1e})", what, largest),
           ok    ? std::string()
           : nan ? std::string("a NaN where a number was expected")
                 : fmt::format("at flat element {}: {:.10g} vs {:.10g}, beyond tolerance {:.1e}·(1 + |expected|)",
                               where, a[where], b[where], tol));
    return ok;
}

std::filesystem::path Tutorial::out_path(std::string_view file) const {
    std::filesystem::create_directories(out_dir_);
    std::filesystem::path path = out_dir_ / file;
    if (path.extension() == ".png") path.replace_extension(plot_format_);
    return path;
}

int Tutorial::finish() {
    const std::string rule(kWidth, '=');
    fmt::print("\n{}\n", rule);
    if (!jump_to_.empty() && !exercise_mode_) {
        if (!reached_)
            failures_.push_back(fmt::format("--{} {}: no such step; the steps are {}", only_ ? "only" : "from",
                                            jump_to_, fmt::join(step_ids_, ", ")));
        else if (!quiet_steps_.empty())
            fmt::print("Ran quietly first: step{} {}.\n", quiet_steps_.size() == 1 ? "" : "s",
                       fmt::join(quiet_steps_, ", "));
    }
    if (steps_skipped_ > 0) fmt::print("Stopped after {} steps; {} not run.\n", steps_run_, steps_skipped_);
    fmt::print("{}{}\n{} check{} passed, {} failed\n", info_.title, exercise_mode_ ? " · EXERCISE" : "", passed_,
               passed_ == 1 ? "" : "s", failures_.size());
    for (const std::string& f : failures_) fmt::print("  ✗ {}\n", f);
    if (exercise_mode_ && !failures_.empty()) {
        const std::string digits = name_.substr(0, name_.find('_'));
        const std::string number = digits.find_first_not_of('0') == std::string::npos
                                       ? digits
                                       : digits.substr(digits.find_first_not_of('0'));  // "01" -> "1"
        fmt::print(
            "\nThe exercise is not solved yet. What to do:\n"
            "  1. edit tutorials/{0}/exercise.cpp: the lines marked TODO\n"
            "  2. rebuild:  cmake --build --preset release --target tutorial_{0}\n"
            "  3. run:      ./build/release/tutorials/tutorial_{0} --exercise   (or: tformer tutorial {1} --exercise)\n"
            "Stuck? tutorials/{0}/solution.cpp is one answer.\n",
            name_, number);
    } else if (exercise_mode_) {
        fmt::print("\nSolved: every check of the exercise passes.\n");
    } else if (!info_.exercise.empty() && !quit_) {
        fmt::print("Exercise: {}\n  (run this program with --exercise)\n", info_.exercise);
    }
    fmt::print("{}\n", rule);
    std::fflush(stdout);
    return failures_.empty() ? 0 : 1;
}

// ---- printing -------------------------------------------------------------------

void note(std::string_view text) { print_wrapped(text, kIndent); }

void line(std::string_view text) { say("{}\n", text); }

void quote(std::string_view text) {
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        say("{}  │ {}\n", kIndent, text.substr(start, end - start));
        start = end + 1;
    }
}

void show(std::string_view name, const core::Tensor& t) {
    const std::string prefix = fmt::format("{}{} = ", kIndent, name);
    core::PrintOptions options;
    options.line_width = std::max(40, kWidth - display_width(prefix));
    print_hanging(prefix, core::to_string(t, options));
}

void show(std::string_view name, const autograd::Variable& v) {
    if (!v.defined()) {
        say("{}{} = (undefined Variable)\n", kIndent, name);
        return;
    }
    show(name, v.value());
    const std::string pad(display_width(name) + 3, ' ');
    if (v.is_leaf())
        say("{}{}leaf, requires_grad={}\n", kIndent, pad, v.requires_grad());
    else
        say("{}{}made by '{}', requires_grad=true\n", kIndent, pad, v.op_name());
}

std::string tuple_str(const core::Dims& d) {
    return d.size() == 1 ? fmt::format("({})", d[0]) : fmt::format("({})", fmt::join(d, ", "));
}

void describe(std::string_view name, const core::Tensor& t) {
    if (!t.defined()) {
        say("{}{}: undefined\n", kIndent, name);
        return;
    }
    say("{}{}: shape {}, strides {}, offset {}, {}, {} ({} elements)\n", kIndent, name, tuple_str(t.shape()),
        tuple_str(t.strides()), t.offset(), t.is_contiguous() ? "contiguous" : "not contiguous", storage_label(t),
        t.storage()->nbytes() / static_cast<int64_t>(core::dtype_size(t.dtype())));
}

// ---- data ---------------------------------------------------------------------------------

std::filesystem::path find_corpus(std::string_view given) {
    namespace fs = std::filesystem;
    if (!given.empty()) {
        if (!fs::exists(fs::path(given))) fail<IOError>("--data {}: no such file", given);
        return fs::path(given);
    }
    const char* data_dir = std::getenv("TFORMER_DATA_DIR");
    if (data_dir != nullptr && *data_dir != '\0') {
        const fs::path p = fs::path(data_dir) / "fra-eng" / "fra.txt";
        if (fs::exists(p)) return p;
        fail<IOError>("TFORMER_DATA_DIR is set, but {} does not exist", p.string());
    }
    std::vector<fs::path> starts = {fs::current_path()};
    std::error_code ec;
    const fs::path exe = fs::canonical("/proc/self/exe", ec);
    if (!ec) starts.push_back(exe.parent_path());
    for (const fs::path& start : starts)
        for (fs::path dir = start;; dir = dir.parent_path()) {
            const fs::path candidate = dir / "data" / "fra-eng" / "fra.txt";
            if (fs::exists(candidate)) return candidate;
            if (dir == dir.parent_path()) break;
        }
    fail<IOError>(
        "data/fra-eng/fra.txt not found in {} or {} or their parents (run from the repository, pass "
        "--data FILE or set TFORMER_DATA_DIR)",
        starts.front().string(), starts.back().string());
}

}  // namespace tformer::tutorial
