// The small framework every tutorial program is written with.
//
//   struct Lesson {                       // what the steps share
//       c::Tensor x = c::arange(6).view({2, 3});  // (2, 3)
//   };
//
//   // seed 000 (000_7dfff3ea5ac0d0a3.txt) › 基于位置的前馈网络
//   void shapes_and_strides(Tutorial& t, const Lesson& lesson) {
//       note("A tensor is a buffer plus shape, strides and offset.");
//       show("x", lesson.x);
//       t.check(lesson.x.strides() == c::Strides{3, 1}, "rows are 3 elements apart");
//   }
//
//   int main(int argc, char** argv) {
//       Tutorial t(argc, argv, {.title = "01 · Tensors", .follows = "seed 000, ..."});
//       Lesson lesson;
//       t.step("1. Shapes and strides", [&] { shapes_and_strides(t, lesson); });
//       return t.finish();   // 1 when any check failed
//   }
//
// A tutorial is a list of named steps, one function each, named after the
// document section it follows; `main` lists them. Each step prints what it
// computes and checks its own numbers with check / check_close /
// check_throws, so a tutorial that runs to the end with every check passed
// is also a test (ctest runs each one as `tutorial:NN_topic`). A step prints
// only through note, show, describe, line and quote and the checks, never
// with fmt::print: that is what lets --from keep the earlier steps quiet
// (and gives one place to translate the prose). Command line:
//   --step      pause after each step until Enter is pressed (q quits)
//   --from STEP start at that step ("3", "2b": the label before the first '.');
//               the steps before it run quietly, since later steps use their results
//   --only STEP that step alone (the steps before it run quietly first)
//   --out DIR   where pictures go (created when needed)
//   --plot-format png|svg   the pictures' format (default png)
//   --exercise  run the tutorial's exercise instead of its steps
//   --literal   (tutorials that offer it) run the document's recipe exactly as written
//   --help      the usage and what the tutorial follows
//
// Exercises. A tutorial folder may hold exercise.hpp (the functions the reader
// writes), exercise.cpp (the reader's file, with TODOs) and solution.cpp.
// CMake builds the program twice: tutorial_NN_topic with exercise.cpp and
// solutions/tutorial_NN_topic with solution.cpp. With --exercise only the
// t.exercise(...) parts run, and finish() says what to edit and how to
// rebuild while a check fails.
#pragma once

#include "autograd/variable.hpp"
#include "core/tensor.hpp"

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tformer::tutorial {

/// What a tutorial says about itself at the top of its output and in --help.
struct Info {
    std::string title;    ///< e.g. "01 · Tensors, shapes and strides"
    std::string follows;  ///< the document sections it follows, e.g. "seed 000 基于位置的前馈网络"
    /// What the exercise asks, one sentence ("" when the tutorial has none).
    std::string exercise{};
    /// What --literal runs ("" when the tutorial has no literal mode: --literal is then refused).
    std::string literal{};
};

/// The name of a tformer error class ("ShapeError", ...) or "exception".
std::string error_kind(const std::exception& e);

class Tutorial {
public:
    /// Parses the command line above; --help prints the usage and exits.
    /// An unknown argument prints the usage to stderr and exits with status 2.
    Tutorial(int argc, char** argv, Info info);

    /// Runs `body` under a banner with `name` ("3. ...", "2b. ...": the label
    /// before the first '.' is what --from and --only name). An exception
    /// escaping `body` is reported with the step's name and counts as one
    /// failed check; the next step still runs. With --step, waits for Enter
    /// afterwards. Skipped with --exercise. Before the step --from or --only
    /// names, runs `body` quietly: nothing printed, only failed checks
    /// counted; after the step --only names, does not run it.
    void step(std::string_view name, const std::function<void()>& body);

    /// A part of the exercise: runs like a step, but only with --exercise.
    void exercise(std::string_view name, const std::function<void()>& body);

    /// Whether --exercise was given.
    bool exercise_mode() const { return exercise_mode_; }
    /// Whether --literal was given (only accepted when Info::literal says what it does).
    bool literal() const { return literal_; }

    /// Records a check and prints "✓ what" or "✗ what". Returns `condition`.
    bool check(bool condition, std::string_view what);
    /// |actual - expected| <= tol, printed with the difference.
    bool check_close(double actual, double expected, double tol, std::string_view what);
    /// Same shape and max |actual - expected| <= tol over all elements (any dtypes).
    bool check_close(const core::Tensor& actual, const core::Tensor& expected, double tol, std::string_view what);
    /// Same shape and |actual - expected| <= tol·(1 + |expected|) everywhere:
    /// for comparing with float32 reference numbers such as PyTorch's (an
    /// absolute floor near 0, relative above). Prints the largest difference.
    bool check_allclose(const core::Tensor& actual, const core::Tensor& expected, double tol, std::string_view what);

    /// Runs `body` and checks that it throws E whose message contains
    /// `contains` (when not empty); prints the message, since reading a
    /// good error message is part of the lesson.
    template <class E, class F>
    bool check_throws(std::string_view what, F&& body, std::string_view contains = {}) {
        try {
            body();
        } catch (const E& e) {
            const std::string message = e.what();
            const bool ok = contains.empty() || message.find(contains) != std::string::npos;
            record(ok, what, fmt::format("threw {}: {}", error_kind(e), message));
            return ok;
        } catch (const std::exception& e) {
            record(false, what, fmt::format("threw the wrong kind of error, {}: {}", error_kind(e), e.what()));
            return false;
        }
        record(false, what, "did not throw");
        return false;
    }

    /// The folder given with --out (default "build/tutorial-out/<program name>").
    const std::filesystem::path& out_dir() const { return out_dir_; }
    /// out_dir() / file, creating out_dir() first. A picture's name ending in
    /// ".png" gets the extension --plot-format asks for.
    std::filesystem::path out_path(std::string_view file) const;

    /// Prints the summary "N checks passed, M failed" (naming each failed
    /// check) and returns the exit status: 0 when nothing failed, 1 otherwise.
    /// With --exercise it also says, while a check fails, which file to edit
    /// and how to rebuild ("not solved yet"), or that the exercise is solved.
    int finish();

    int passed() const { return passed_; }
    int failed() const { return static_cast<int>(failures_.size()); }

private:
    /// Reads the command line into the members; true when --out was given.
    /// A bad argument prints the usage to stderr and exits with status 2.
    bool parse_arguments(int argc, char** argv);
    void print_banner() const;
    void record(bool ok, std::string_view what, std::string_view detail);
    void pause();
    void run_part(std::string_view name, const std::function<void()>& body);
    void run_quietly(std::string_view name, const std::function<void()>& body);

    Info info_;
    std::string name_;  ///< "01_tensors": the program name without "tutorial_"
    std::filesystem::path out_dir_;
    std::string plot_format_ = "png";
    bool exercise_mode_ = false;
    bool literal_ = false;
    bool stepping_ = false;
    bool quit_ = false;
    int steps_run_ = 0;
    int steps_skipped_ = 0;
    std::string current_step_;
    std::string jump_to_;                   ///< the STEP of --from or --only ("" runs every step)
    bool only_ = false;                     ///< --only: nothing runs after that step
    bool reached_ = false;                  ///< the step jump_to_ names has started
    std::vector<std::string> step_ids_;     ///< every step's label, for the error when jump_to_ names none
    std::vector<std::string> quiet_steps_;  ///< the labels of the steps run quietly before it
    int passed_ = 0;
    std::vector<std::string> failures_;  // "[step] what"
};

// ---- printing -------------------------------------------------------------------

/// Prints a paragraph of explanation, indented and wrapped to the terminal
/// width. Lines that start with a space are printed as they are (for small
/// tables and formulas); a line starting with "- " is a bullet; an empty
/// line separates paragraphs.
void note(std::string_view text);
template <class... Args>
requires(sizeof...(Args) > 0) void note(fmt::format_string<Args...> format, Args&&... args) {
    note(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
}

/// Prints one line as it is, without indent or wrapping: a row of a table
/// whose columns the caller lines up. line() prints an empty line.
void line(std::string_view text = {});
template <class... Args>
requires(sizeof...(Args) > 0) void line(fmt::format_string<Args...> format, Args&&... args) {
    line(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
}

/// Prints a program's own text (a gradcheck report, an error message)
/// verbatim, each line behind a "│" margin so it stands apart from the notes.
void quote(std::string_view text);

/// Prints "name = tensor([...], shape=(...), dtype=...)" via core::to_string,
/// continuation lines aligned under the first.
void show(std::string_view name, const core::Tensor& t);
/// The Variable's value, then which op made it and whether it requires a gradient.
void show(std::string_view name, const autograd::Variable& v);
/// A shape or an index the way Python prints a tuple, "(3, 4)" ("(4)" for one entry).
std::string tuple_str(const core::Dims& dims);
/// One line about the memory layout: shape, strides, offset, contiguity,
/// and which storage buffer it views ("storage #2"), so that two tensors
/// sharing memory are visibly the same buffer.
void describe(std::string_view name, const core::Tensor& t);

// ---- data ---------------------------------------------------------------------------------

/// The bundled corpus data/fra-eng/fra.txt for the tutorials that train on
/// it: `given` when not empty (a --data option), else
/// $TFORMER_DATA_DIR/fra-eng/fra.txt, else the first data/fra-eng/fra.txt in
/// the working folder, the program's folder or one of their parents (ctest
/// runs the programs inside build/release/tutorials). Throws IOError naming
/// the places it looked when none exists.
std::filesystem::path find_corpus(std::string_view given = {});

}  // namespace tformer::tutorial
