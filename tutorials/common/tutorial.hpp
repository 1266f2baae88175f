// The small framework every tutorial program is written with.
//
//   struct Lesson {                       // what the steps share
//       c::Tensor x = c::arange(6).view({2, 3});  // (2, 3)
//   };
//
//   // seed 000 (000_7dfff3ea5ac0d0a3.txt) › 基于位置的前馈网络
//   void shapes_and_strides(Tutorial& t, const Lesson& lesson) {
//       note({.en = "A tensor is a buffer plus shape, strides and offset.",
//             .zh = "张量就是一块缓冲区，加上形状、步幅和偏移。"});
//       show("x", lesson.x);
//       t.check(lesson.x.strides() == c::Strides{3, 1},
//               {.en = "rows are {} elements apart", .zh = "相邻两行相隔 {} 个元素"}, 3);
//   }
//
//   int main(int argc, char** argv) {
//       Tutorial t(argc, argv, {.title = {.en = "01 · Tensors", .zh = "01 · 张量"},
//                               .follows = {.en = "seed 000, ...", .zh = "种子文档 000, ..."}});
//       Lesson lesson;
//       t.step({.en = "1. Shapes and strides", .zh = "1. 形状与步幅"}, [&] { shapes_and_strides(t, lesson); });
//       return t.finish();   // 1 when any check failed
//   }
//
// A tutorial is a list of named steps, one function each, named after the
// document section it follows; `main` lists them. Each step prints what it
// computes and checks its own numbers with check / check_close /
// check_throws, so a tutorial that runs to the end with every check passed
// is also a test (ctest runs each one as `tutorial:NN_topic`). A step prints
// only through note, line, show, describe and quote and the checks, never
// with fmt::print: that is what lets --from keep the earlier steps quiet and
// --no-prose print only what does not depend on the language.
//
// Two languages. Every sentence is a Text, {.en = "...", .zh = "..."}; the
// framework prints the one --lang chooses (default: the locale, LC_ALL,
// LC_MESSAGES or LANG starting with "zh" → Chinese, anything else →
// English). Numbers are never typed into the sentences: they are values
// passed beside the Text and placed into its `{}` fields, so that each is
// formatted once, by one format spec, the same in both languages:
//
//   note({.en = "the largest ratio is {:.4f}", .zh = "最大的比值是 {:.4f}"}, widest);
//
// Both languages must use the same fields with the same specs (the Chinese
// may reorder them by number: "{1} … {0:.2f}"); a Text whose two languages
// disagree, or that lacks one, throws std::logic_error, which fails the
// step. A Text with no values is printed as written (its braces are
// literal); with values it is a fmt format string ("{{" for a brace).
//
// Command line:
//   --step          pause after each step until Enter is pressed (q quits)
//   --from STEP     start at that step ("3", "2b": the label before the first '.');
//                   the steps before it run quietly, since later steps use their results
//   --only STEP     that step alone (the steps before it run quietly first)
//   --lang en|zh    the language of the prose (default: from the locale)
//   --quiet-tensors print a tensor's shape and a few of its values instead of all of them
//   --no-prose      print only what does not depend on the language: the values
//                   of the sentences, tensors, table rows, the checks' outcomes
//                   (the test tutorial:NN_topic:languages compares --lang en with --lang zh)
//   --out DIR       where pictures go (created when needed)
//   --plot-format png|svg   the pictures' format (default png)
//   --exercise      run the tutorial's exercise instead of its steps
//   --literal       (tutorials that offer it) run the document's recipe exactly as written
//   --help          the usage and what the tutorial follows
// and the tutorial's own options that take a value (Info::options, read with
// Tutorial::option: tutorial 13's --checkpoint FILE and --data FILE), and one option that --help does not list, for the tests:
//   --inject-fault NAME   t.injected(NAME) returns true: the step swaps a
//                   computation for a deliberately wrong one, and the test
//                   tutorial:NN_topic:fault:NAME expects a named check to fail
//                   (see the "tutorial-fault:" lines in tutorials/CMakeLists.txt).
//
// Exercises. A tutorial folder may hold exercise.hpp (the functions the reader
// writes), exercise.cpp (the reader's file, with TODOs) and solution.cpp.
// CMake builds the program twice: tutorial_NN_topic with exercise.cpp and
// solutions/tutorial_NN_topic with solution.cpp. With --exercise only the
// t.exercise(...) parts run, and finish() says what to edit and how to
// rebuild while a check fails.
//
// Every tutorial speaks English and Chinese: prose, step names and checks
// are Text{.en, .zh} (or a Phrase), and no overload takes a plain string for
// them, so a sentence without its translation does not compile.
#pragma once

#include "autograd/variable.hpp"
#include "core/tensor.hpp"

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tformer::tutorial {

// ---- two languages ----------------------------------------------------------------------

enum class Language { en, zh };

/// The language the prose is printed in: --lang, else the locale.
Language language();
/// Chooses it, as --lang does.
void set_language(Language chosen);
/// What a locale name asks for: "zh_CN.UTF-8", "zh_TW" … → zh; anything else, "" included → en.
Language language_of_locale(std::string_view locale);

/// One sentence in both languages. With values (phrase, note, check … take
/// them after the Text) it is a format string whose `{}` fields they fill.
struct Text {
    std::string_view en;
    std::string_view zh;
};

/// A Text in the chosen language with its values filled in.
struct Phrase {
    std::string text;                 ///< the sentence in the chosen language
    std::vector<std::string> values;  ///< each value as its field formatted it: the same in both languages
};

/// A Text that reads the same in both languages: a format for a row of
/// values, or a piece of code ("    Y = linear(X2, W, bias)").
constexpr Text both(std::string_view s) { return {s, s}; }

namespace detail {
/// Checks that text.en and text.zh are both there and use the same fields
/// (argument number and format spec), formats each value once, and fills the
/// chosen language's sentence. Throws std::logic_error naming the sentence
/// otherwise. nested[i] is value i when it is a Phrase (words, not a value:
/// only its own values count), else null.
Phrase fill(const Text& text, fmt::format_args args, const std::vector<const Phrase*>& nested);

template <class T>
const Phrase* nested(const T& value) {
    if constexpr (std::is_same_v<T, Phrase>)
        return &value;
    else
        return nullptr;
}
}  // namespace detail

/// The Text in the chosen language, as written (braces are literal).
Phrase phrase(const Text& text);
/// The Text in the chosen language with `args` in its fields. An argument
/// may itself be a Phrase: a word or clause that depends on the value, e.g.
///   phrase({.en = "the band gets {}", .zh = "亮带变得{}"}, w > 1 ? phrase(narrower) : phrase(wider))
template <class... Args>
requires(sizeof...(Args) > 0) Phrase phrase(const Text& text, const Args&... args) {
    return detail::fill(text, fmt::make_format_args(args...), {detail::nested(args)...});
}

}  // namespace tformer::tutorial

/// A Phrase inside another prints its words.
template <>
struct fmt::formatter<tformer::tutorial::Phrase> : fmt::formatter<std::string_view> {
    auto format(const tformer::tutorial::Phrase& p, fmt::format_context& ctx) const {
        return fmt::formatter<std::string_view>::format(p.text, ctx);
    }
};

namespace tformer::tutorial {

// ---- the program ---------------------------------------------------------------------------

/// A command-line option of one tutorial alone, taking a value, e.g.
/// {.name = "--data", .value = "FILE", .help = {...}}.
struct Option {
    std::string name;   ///< the option, "--data"
    std::string value;  ///< what its value is, for the usage: "FILE"
    Text help;          ///< what it does, one line
};

/// What a tutorial says about itself at the top of its output and in --help.
struct Info {
    Text title;    ///< e.g. "tformer tutorial 01 · Tensors, shapes and strides"
    Text follows;  ///< the document sections it follows, e.g. "seed 000 基于位置的前馈网络"
    /// What the exercise asks, one sentence (empty when the tutorial has none).
    Text exercise{};
    /// What --literal runs (empty when the tutorial has no literal mode: --literal is then refused).
    Text literal{};
    /// The tutorial's own options, listed in --help after the common ones.
    std::vector<Option> options{};
};

/// The name of a tformer error class ("ShapeError", ...) or "exception".
std::string error_kind(const std::exception& e);

class Tutorial {
public:
    /// Parses the command line above; --help prints the usage and exits.
    /// An unknown argument prints the usage to stderr and exits with status 2.
    Tutorial(int argc, char** argv, Info info);

    /// Runs `body` under a banner with `name` ("3. ...", "2b. ...": the label
    /// before the first '.', the same in both languages, is what --from and
    /// --only name). An exception escaping `body` is reported with the step's
    /// name and counts as one failed check; the next step still runs. With
    /// --step, waits for Enter afterwards. Skipped with --exercise. Before
    /// the step --from or --only names, runs `body` quietly: nothing printed,
    /// only failed checks counted; after the step --only names, does not run it.
    void step(const Text& name, const std::function<void()>& body);
    /// A part of the exercise: runs like a step, but only with --exercise.
    void exercise(const Text& name, const std::function<void()>& body);

    /// Whether --exercise was given.
    bool exercise_mode() const { return exercise_mode_; }
    /// Whether --literal was given (only accepted when Info::literal says what it does).
    bool literal() const { return literal_; }
    /// The value given to `name`, one of Info::options; empty when it was not given.
    std::string option(std::string_view name) const;
    /// Whether --inject-fault names `fault`. A step asks right where it
    /// computes what a check then tests, and computes it wrongly on purpose:
    ///   if (t.injected("additive-ignores-keys")) out = faults::ignoring_keys(...);
    /// so that a test can see the check fail. Every tutorial keeps its wrong
    /// variants together, in a namespace `faults` at the end of main.cpp.
    bool injected(std::string_view fault);

    /// Records a check and prints "✓ what" or "✗ what". Returns `condition`.
    bool check(bool condition, const Phrase& what);
    template <class... Args>
    bool check(bool condition, const Text& what, const Args&... args) {
        return check(condition, phrase(what, args...));
    }
    /// |actual - expected| <= tol, printed with the difference.
    bool check_close(double actual, double expected, double tol, const Phrase& what);
    template <class... Args>
    bool check_close(double actual, double expected, double tol, const Text& what, const Args&... args) {
        return check_close(actual, expected, tol, phrase(what, args...));
    }
    /// Same shape and max |actual - expected| <= tol over all elements (any dtypes).
    bool check_close(const core::Tensor& actual, const core::Tensor& expected, double tol, const Phrase& what);
    template <class... Args>
    bool check_close(const core::Tensor& actual, const core::Tensor& expected, double tol, const Text& what,
                     const Args&... args) {
        return check_close(actual, expected, tol, phrase(what, args...));
    }
    /// Same shape and |actual - expected| <= tol·(1 + |expected|) everywhere:
    /// for comparing with float32 reference numbers such as PyTorch's (an
    /// absolute floor near 0, relative above). Prints the largest difference.
    bool check_allclose(const core::Tensor& actual, const core::Tensor& expected, double tol, const Phrase& what);
    template <class... Args>
    bool check_allclose(const core::Tensor& actual, const core::Tensor& expected, double tol, const Text& what,
                        const Args&... args) {
        return check_allclose(actual, expected, tol, phrase(what, args...));
    }

    /// Runs `body` and checks that it throws E whose message contains
    /// `contains` (when not empty); prints the message, since reading a
    /// good error message is part of the lesson.
    template <class E, class F>
    bool check_throws(const Phrase& what, F&& body, std::string_view contains = {}) {
        try {
            body();
        } catch (const E& e) {
            const std::string message = e.what();
            const bool ok = contains.empty() || message.find(contains) != std::string::npos;
            record(ok, what, thrown(error_kind(e), message, true));
            return ok;
        } catch (const std::exception& e) {
            record(false, what, thrown(error_kind(e), e.what(), false));
            return false;
        }
        record(false, what, phrase({.en = "did not throw", .zh = "没有抛出异常"}));
        return false;
    }
    template <class E, class F>
    bool check_throws(const Text& what, F&& body, std::string_view contains = {}) {
        return check_throws<E>(phrase(what), std::forward<F>(body), contains);
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
    /// What both constructors do once info_ is set: read the command line, print the banner.
    void start(int argc, char** argv);
    void print_banner() const;
    void record(bool ok, const Phrase& what, const Phrase& detail);
    static Phrase thrown(const std::string& kind, const std::string& message, bool right_kind);
    void pause();
    void run_part(const Text& name, const std::function<void()>& body);
    void run_quietly(const Text& name, const std::function<void()>& body);

    Info info_;
    std::string name_;  ///< "01_tensors": the program name without "tutorial_"
    std::filesystem::path out_dir_;
    std::string plot_format_ = "png";
    std::map<std::string, std::string, std::less<>> options_;  ///< Info::options' values, by name
    bool exercise_mode_ = false;
    bool literal_ = false;
    bool stepping_ = false;
    bool quit_ = false;
    int steps_run_ = 0;
    int steps_skipped_ = 0;
    std::string current_step_;              ///< the running step's name in the chosen language
    std::string current_id_;                ///< and its label ("2b")
    int checks_in_step_ = 0;                ///< the running step's checks so far, for --no-prose
    std::string jump_to_;                   ///< the STEP of --from or --only ("" runs every step)
    bool only_ = false;                     ///< --only: nothing runs after that step
    bool reached_ = false;                  ///< the step jump_to_ names has started
    std::vector<std::string> step_ids_;     ///< every step's label, for the error when jump_to_ names none
    std::vector<std::string> quiet_steps_;  ///< the labels of the steps run quietly before it
    std::string fault_;                     ///< --inject-fault NAME ("" for none)
    std::set<std::string> faults_asked_;    ///< the names injected() was asked about
    int passed_ = 0;
    std::vector<std::string> failures_;  // "[step] what"
};

// ---- printing -------------------------------------------------------------------

/// Prints a paragraph of explanation, indented and wrapped to the terminal
/// width (Chinese wraps between any two characters). Lines that start with a
/// space are printed as they are (for small tables and formulas); a line
/// starting with "- " is a bullet; an empty line separates paragraphs.
void note(const Phrase& text);
template <class... Args>
void note(const Text& text, const Args&... args) {
    note(phrase(text, args...));
}

/// Prints one line of data as it is, without indent or wrapping: a row of a
/// table whose columns the caller lines up, the same in both languages (and
/// printed with --no-prose). line() prints an empty line.
void line(std::string_view text = {});
template <class... Args>
requires(sizeof...(Args) > 0) void line(fmt::format_string<Args...> format, Args&&... args) {
    line(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
}
/// One line as it is that holds words, such as a table's header, or a row
/// with a word in it: --no-prose prints only its values.
void line(const Phrase& text);
template <class... Args>
void line(const Text& text, const Args&... args) {
    line(phrase(text, args...));
}

/// Prints a program's own text (a gradcheck report, an error message)
/// verbatim, each line behind a "│" margin so it stands apart from the notes.
void quote(std::string_view text);

/// Prints "name = tensor([...], shape=(...), dtype=...)" via core::to_string,
/// continuation lines aligned under the first; with --quiet-tensors a tensor
/// of more than 8 elements is one line: its first and last values, its shape.
void show(std::string_view name, const core::Tensor& t);
/// The Variable's value, then which op made it and whether it requires a gradient.
void show(std::string_view name, const autograd::Variable& v);
/// The same with a name that is words rather than code.
void show(const Text& name, const core::Tensor& t);
void show(const Text& name, const autograd::Variable& v);
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
