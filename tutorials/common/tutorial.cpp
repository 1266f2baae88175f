// The tutorial framework: steps, checks, notes in English and Chinese.
#include "common/tutorial.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/print.hpp"
#include "core/utf8.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace tformer::tutorial {

namespace {

constexpr int kWidth = 78;  // the width text is wrapped to
constexpr std::string_view kIndent = "  ";

// The language of the prose: the locale's until --lang says otherwise.
Language locale_language() {
    for (const char* variable : {"LC_ALL", "LC_MESSAGES", "LANG"}) {
        const char* value = std::getenv(variable);
        if (value != nullptr && *value != '\0') return language_of_locale(value);
    }
    return Language::en;
}
Language chosen = locale_language();

// --no-prose: print only what is the same in both languages.
bool no_prose = false;
// --quiet-tensors: one line per large tensor.
bool quiet_tensors = false;

// Everything a step prints (notes, tensors, table rows, check marks) goes
// through say(), the one place that can keep it quiet: with --from or
// --only the steps before the chosen one still run, since later steps use
// their results, but print nothing.
bool quiet = false;
template <class... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
    if (!quiet) fmt::print(format, std::forward<Args>(args)...);
}

// The sentence of `text` in the chosen language.
std::string_view in_language(const Text& text) { return chosen == Language::zh ? text.zh : text.en; }

// "2b" for the step "2b. The document's printed numbers": the label before the first '.'.
std::string step_id(std::string_view name) { return std::string(name.substr(0, name.find('.'))); }

// The values of a phrase as --no-prose prints them.
std::string values_str(const Phrase& p) { return fmt::format("{}", fmt::join(p.values, " · ")); }

// ---- filling a Text's fields ----------------------------------------------------------

// One replacement field of a format string: which value, and its format spec.
struct Field {
    int arg = 0;
    std::string spec;
    bool operator<(const Field& o) const { return arg != o.arg ? arg < o.arg : spec < o.spec; }
    bool operator==(const Field& o) const { return arg == o.arg && spec == o.spec; }
};

// A format string cut into literal text and fields, as fmt reads it: "{{" and
// "}}" are braces, "{}" takes the next value, "{1:.2f}" value 1 with spec ".2f".
struct Parsed {
    std::vector<std::string> literals;  // literals[i] comes before fields[i]; one more at the end
    std::vector<Field> fields;
};

[[noreturn]] void bad_text(const Text& text, std::string_view why) {
    throw std::logic_error(fmt::format("tutorial text \"{}\" / \"{}\": {}", text.en, text.zh, why));
}

Parsed parse_fields(std::string_view s, const Text& text) {
    Parsed p;
    p.literals.emplace_back();
    int next_auto = 0;
    bool automatic = false, manual = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char ch = s[i];
        if (ch == '}') {
            if (i + 1 < s.size() && s[i + 1] == '}')
                ++i;
            else
                bad_text(text, "a single '}' (write '}}' for a brace)");
            p.literals.back() += '}';
        } else if (ch == '{' && i + 1 < s.size() && s[i + 1] == '{') {
            p.literals.back() += '{';
            ++i;
        } else if (ch == '{') {
            const size_t end = s.find('}', i);
            const size_t nested = s.find('{', i + 1);
            if (end == std::string_view::npos || (nested != std::string_view::npos && nested < end))
                bad_text(text, "a field without its '}' (or with a nested one)");
            const std::string_view inside = s.substr(i + 1, end - i - 1);
            const size_t colon = inside.find(':');
            const std::string_view id = inside.substr(0, colon);
            Field f;
            f.spec = colon == std::string_view::npos ? "" : std::string(inside.substr(colon + 1));
            if (id.empty()) {
                f.arg = next_auto++;
                automatic = true;
            } else {
                f.arg = 0;
                for (char d : id) {
                    if (d < '0' || d > '9')
                        bad_text(text, fmt::format("field '{{{}}}' is not a value's number", inside));
                    f.arg = f.arg * 10 + (d - '0');
                }
                manual = true;
            }
            p.fields.push_back(f);
            p.literals.emplace_back();
            i = end;
        } else {
            p.literals.back() += ch;
        }
    }
    if (automatic && manual) bad_text(text, "mixes '{}' and numbered fields");
    return p;
}

// ---- wrapping ----------------------------------------------------------------------------

// Columns a UTF-8 string takes on a terminal (two for CJK and full-width characters).
int display_width(std::string_view s) { return core::utf8_display_width(s); }

// Chinese punctuation that must not start a line, and that must not end one.
bool closes(std::string_view atom) {
    static const std::vector<std::string_view> marks = {"，", "。", "、", "；", "：", "？", "！", "）",
                                                        "」", "』", "》", "〉", "”",  "’",  ",",  ".",
                                                        ";",  ":",  "?",  "!",  ")",  "]"};
    return std::find(marks.begin(), marks.end(), atom) != marks.end();
}
bool opens(std::string_view atom) {
    static const std::vector<std::string_view> marks = {"（", "「", "『", "《", "〈", "“", "‘"};
    return std::find(marks.begin(), marks.end(), atom) != marks.end();
}

// Whether the character `ch` is a piece of its own for line breaking: a wide
// character, or a Chinese opening or closing mark.
bool stands_alone(std::string_view ch) { return display_width(ch) == 2 || opens(ch) || (ch.size() > 1 && closes(ch)); }

// A line cut into the pieces a line break may fall between: runs of
// non-space narrow characters (words), and single wide characters, each
// remembering whether a space came before it.
struct Atom {
    std::string_view text;
    bool space_before = false;
    bool wide = false;
};
std::vector<Atom> atoms_of(std::string_view line) {
    std::vector<Atom> atoms;
    bool space = false;
    for (size_t i = 0; i < line.size();) {
        if (line[i] == ' ') {
            space = true;
            ++i;
            continue;
        }
        const std::string_view ch = line.substr(i, core::utf8_char_length(line, i));
        if (stands_alone(ch)) {
            atoms.push_back({ch, space, true});
            i += ch.size();
        } else {
            size_t j = i;
            while (j < line.size() && line[j] != ' ') {
                const std::string_view next = line.substr(j, core::utf8_char_length(line, j));
                if (stands_alone(next)) break;
                j += next.size();
            }
            atoms.push_back({line.substr(i, j - i), space, false});
            i = j;
        }
        space = false;
    }
    return atoms;
}

// Whether a line may break before atoms[k]: at a space, or between two
// pieces one of which is a wide character, unless that puts a closing mark
// at the start of a line or an opening one at the end.
bool may_break_before(const std::vector<Atom>& atoms, size_t k) {
    if (k == 0) return false;
    if (closes(atoms[k].text) || opens(atoms[k - 1].text)) return false;
    return atoms[k].space_before || atoms[k].wide || atoms[k - 1].wide;
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

// Prints `text` wrapped to kWidth, every line starting with `indent`. Lines
// that start with a space are preformatted (tables, formulas) and printed as
// they are; a line starting with "- " is a bullet whose wrapped lines are
// indented under its text; empty lines stay empty.
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
        const std::string hanging = std::string(indent) + (line.starts_with("- ") ? "  " : "");
        const int width = kWidth - display_width(hanging);
        const std::vector<Atom> atoms = atoms_of(line);
        bool first = true;
        std::string out;
        int used = 0;
        for (size_t k = 0; k < atoms.size(); ++k) {
            const int w = display_width(atoms[k].text);
            const int gap = used > 0 && atoms[k].space_before ? 1 : 0;
            if (used > 0 && used + gap + w > width && may_break_before(atoms, k)) {
                say("{}{}\n", first ? std::string(indent) : hanging, out);
                first = false;
                out.clear();
                used = 0;
            }
            if (used > 0 && atoms[k].space_before) {
                out += ' ';
                ++used;
            }
            out += atoms[k].text;
            used += w;
        }
        say("{}{}\n", first ? std::string(indent) : hanging, out);
    }
}

// Storage buffers get small numbers in order of first appearance, so the
// output can say "storage #1" instead of an address. A number is reused
// only while its buffer is alive.
int storage_number(const core::Tensor& t) {
    static std::map<const core::Storage*, std::pair<std::weak_ptr<core::Storage>, int>> labels;
    static int next = 1;
    const core::Storage* key = t.storage().get();
    auto it = labels.find(key);
    if (it == labels.end() || it->second.first.expired())
        it = labels.insert_or_assign(key, std::pair{std::weak_ptr<core::Storage>(t.storage()), next++}).first;
    return it->second.second;
}

void usage(std::FILE* to, const char* program, const Info& info) {
    const bool has_exercise = !info.exercise.en.empty(), has_literal = !info.literal.en.empty();
    std::string own_options;
    for (const Option& o : info.options) own_options += fmt::format(" [{} {}]", o.name, o.value);
    fmt::print(to, "{}\n{}{}\n\n", in_language(info.title), in_language({.en = "Follows: ", .zh = "对应文档："}),
               in_language(info.follows));
    fmt::print(to,
               "{} {} [--step] [--from STEP | --only STEP] [--lang en|zh] [--quiet-tensors] [--no-prose]\n"
               "       [--out DIR] [--plot-format png|svg]{}{}{} [--help]\n",
               in_language({.en = "usage:", .zh = "用法："}), program, has_exercise ? " [--exercise]" : "",
               has_literal ? " [--literal]" : "", own_options);
    const Text options[] = {
        {.en = "  --step          pause after each step until Enter is pressed (q + Enter quits)",
         .zh = "  --step          每一步之后暂停，按回车继续（输入 q 再回车则结束）"},
        {.en = "  --from STEP     start at that step (e.g. 3 or 2b); the steps before it run quietly",
         .zh = "  --from STEP     从该步开始（例如 3 或 2b）；它之前的步骤静默运行"},
        {.en = "  --only STEP     that step alone, after the steps before it have run quietly",
         .zh = "  --only STEP     只显示该步；它之前的步骤先静默运行"},
        {.en = "  --lang en|zh    the language of the explanations (default: from the locale, LANG=zh_CN... → zh)",
         .zh = "  --lang en|zh    讲解所用的语言（默认取自系统区域设置：LANG=zh_CN... → 中文）"},
        {.en = "  --quiet-tensors print a large tensor's shape and a few of its values, not all of them",
         .zh = "  --quiet-tensors 大张量只打印形状和几个值，而不是全部"},
        {.en = "  --no-prose      print only what is the same in every language: values, tensors, table rows, checks",
         .zh = "  --no-prose      只打印与语言无关的内容：数值、张量、表格行、检查结果"},
        {.en = "  --out DIR       where pictures are written (created when needed)",
         .zh = "  --out DIR       图片的输出目录（需要时自动创建）"},
        {.en = "  --plot-format png|svg   the pictures' format (default png)",
         .zh = "  --plot-format png|svg   图片格式（默认 png）"},
    };
    for (const Text& option : options) fmt::print(to, "{}\n", in_language(option));
    if (has_exercise)
        fmt::print(to, "  --exercise      {} {}\n",
                   in_language({.en = "the exercise instead of the steps:", .zh = "做练习而不是运行各步："}),
                   in_language(info.exercise));
    if (has_literal) fmt::print(to, "  --literal       {}\n", in_language(info.literal));
    for (const Option& o : info.options) {  // aligned with the options above, as --plot-format's help is when longer
        const std::string head = o.name + " " + o.value;
        fmt::print(to, "  {}{:{}}{}\n", head, "", head.size() < 16 ? 16 - head.size() : 3, in_language(o.help));
    }
    fmt::print(to, "  --help          {}\n", in_language({.en = "this text", .zh = "显示本说明"}));
}

// ---- the command line -------------------------------------------------------------------

// The language a --lang en or --lang zh on the command line asks for (the
// last one), read before the rest so that every message about the command
// line, the refusals included, is in that language.
std::optional<Language> language_asked(int argc, char** argv) {
    std::optional<Language> asked;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const std::string_view value = arg == "--lang" && i + 1 < argc ? std::string_view(argv[i + 1])
                                       : arg.starts_with("--lang=")    ? arg.substr(7)
                                                                       : std::string_view();
        if (value == "en" || value == "zh") asked = value == "zh" ? Language::zh : Language::en;
    }
    return asked;
}

// Refuses an empty value ("--out ''"), which would name no folder, step or
// fault, and one that starts with '-': in "--from --lang zh" the step is
// missing, --from does not name a step "--lang".
const CLI::Validator a_value(
    [](std::string& value) { return value.empty() || value[0] == '-' ? std::string("missing") : ""; }, "");

// The refusal of a command line CLI11 could not parse: for an option that
// takes a value, what it needs after it (the value was missing or not one of
// its choices, or for one of the tutorial's `own` options, missing);
// otherwise CLI11's own words.
Phrase refusal(const CLI::ParseError& e, const std::vector<Option>& own) {
    const Text step{.en = "{0} needs a step after it, e.g. {0} 3 or {0} 2b",
                    .zh = "{0} 后面要跟一个步骤，例如 {0} 3 或 {0} 2b"};
    const std::map<std::string, Text, std::less<>> needs = {
        {"--out", {.en = "{} needs a folder after it", .zh = "{} 后面要跟一个目录"}},
        {"--from", step},
        {"--only", step},
        {"--lang", {.en = "{} needs en or zh after it", .zh = "{} 后面要跟 en 或 zh"}},
        {"--plot-format", {.en = "{} needs png or svg after it", .zh = "{} 后面要跟 png 或 svg"}},
        {"--inject-fault", {.en = "{} needs a fault's name after it", .zh = "{} 后面要跟一个故障名"}},
    };
    const std::string what = e.what();
    const std::string option = what.substr(0, what.find(':'));  // CLI11 starts with the option's name
    if (const auto it = needs.find(option); it != needs.end()) return phrase(it->second, option);
    for (const Option& o : own)
        if (o.name == option) return phrase({.en = "{} needs {} after it", .zh = "{} 后面要跟 {}"}, option, o.value);
    return phrase({.en = "{}", .zh = "命令行有误：{}"}, what);
}

}  // namespace

// ---- two languages ----------------------------------------------------------------------

Language language() { return chosen; }

void set_language(Language language) { chosen = language; }

Language language_of_locale(std::string_view locale) { return locale.starts_with("zh") ? Language::zh : Language::en; }

namespace detail {

Phrase fill(const Text& text, fmt::format_args args, const std::vector<const Phrase*>& nested) {
    if (text.en.empty() || text.zh.empty())
        bad_text(text, text.en.empty() ? "the English is missing" : "the Chinese is missing");
    const int count = static_cast<int>(nested.size());
    if (count == 0) return Phrase{std::string(in_language(text)), {}};
    const Parsed en = parse_fields(text.en, text), zh = parse_fields(text.zh, text);
    std::set<Field> en_set(en.fields.begin(), en.fields.end()), zh_set(zh.fields.begin(), zh.fields.end());
    if (en_set != zh_set) bad_text(text, "the two languages do not use the same fields with the same format specs");
    std::vector<bool> used(count, false);
    for (const Field& f : en.fields) {
        if (f.arg >= count) bad_text(text, fmt::format("field {} but only {} values", f.arg, count));
        used[f.arg] = true;
    }
    if (std::find(used.begin(), used.end(), false) != used.end()) bad_text(text, "a value that no field shows");
    // each value formatted once, by its field's spec
    std::map<Field, std::string> formatted;
    for (const Field& f : en_set)
        formatted[f] = fmt::vformat(fmt::format("{{{}{}{}}}", f.arg, f.spec.empty() ? "" : ":", f.spec), args);
    Phrase p;
    for (const Field& f : en.fields) {
        if (nested[f.arg] != nullptr)
            p.values.insert(p.values.end(), nested[f.arg]->values.begin(), nested[f.arg]->values.end());
        else
            p.values.push_back(formatted.at(f));
    }
    const Parsed& mine = chosen == Language::zh ? zh : en;
    for (size_t i = 0; i < mine.fields.size(); ++i) p.text += mine.literals[i] + formatted.at(mine.fields[i]);
    p.text += mine.literals.back();
    return p;
}

}  // namespace detail

Phrase phrase(const Text& text) { return detail::fill(text, {}, {}); }

std::string error_kind(const std::exception& e) {
    if (dynamic_cast<const ShapeError*>(&e)) return "ShapeError";
    if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
    if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
    if (dynamic_cast<const IOError*>(&e)) return "IOError";
    if (dynamic_cast<const Error*>(&e)) return "tformer::Error";
    return "exception";
}

// ---- Tutorial ---------------------------------------------------------------------

Tutorial::Tutorial(int argc, char** argv, Info info) : info_(info) { start(argc, argv); }

void Tutorial::start(int argc, char** argv) {
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
    if (const auto asked = language_asked(argc, argv)) chosen = *asked;  // every message below in that language
    // Says what is wrong with the command line, then the usage, and exits with status 2.
    auto refuse = [&](const Phrase& why) {
        fmt::print(stderr, "{}: {}\n\n", program, why.text);
        usage(stderr, program, info_);
        std::exit(2);
    };
    CLI::App app;
    app.allow_extras();  // refused below, in the chosen language
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    bool exercise = false, literal = false;
    std::string out, from, only;
    app.add_flag("--step", stepping_);
    app.add_flag("--exercise", exercise);
    app.add_flag("--literal", literal);
    app.add_flag("--quiet-tensors", quiet_tensors);
    app.add_flag("--no-prose", no_prose);
    app.add_option("--lang")->check(CLI::IsMember({"en", "zh"}));  // read above
    app.add_option("--inject-fault", fault_)->check(a_value);
    app.add_option("--out", out)->check(a_value);
    app.add_option("--from", from)->check(a_value);
    app.add_option("--only", only)->check(a_value);
    app.add_option("--plot-format", plot_format_)->check(CLI::IsMember({"png", "svg"}));
    for (const Option& o : info_.options) app.add_option(o.name, options_[o.name])->check(a_value);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        usage(stdout, program, info_);
        std::exit(0);
    } catch (const CLI::ParseError& e) {
        refuse(refusal(e, info_.options));
    }
    if (!app.remaining().empty())
        refuse(phrase({.en = "unknown argument '{}'", .zh = "未知参数 '{}'"}, app.remaining().front()));
    for (const auto& [given, offered, mode] : {std::tuple{exercise, !info_.exercise.en.empty(), "exercise"},
                                               std::tuple{literal, !info_.literal.en.empty(), "literal"}})
        if (given && !offered)
            refuse(phrase({.en = "this tutorial has no {} mode", .zh = "这个教程没有 {} 模式"}, std::string(mode)));
    if (app.count("--from") + app.count("--only") > 1)
        refuse(phrase({.en = "give one --from or --only, not several", .zh = "--from 和 --only 只能给一个"}));
    exercise_mode_ = exercise;
    literal_ = literal;
    only_ = !only.empty();
    jump_to_ = only_ ? only : from;
    if (exercise_mode_ && !jump_to_.empty())
        refuse(phrase({.en = "--from and --only choose among the steps; --exercise runs the exercise instead",
                       .zh = "--from 和 --only 在各步之间选择；--exercise 则改为做练习"}));
    if (!out.empty()) out_dir_ = out;
    return !out.empty();
}

std::string Tutorial::option(std::string_view name) const {
    const auto it = options_.find(name);
    if (it == options_.end())
        throw std::logic_error(fmt::format("Tutorial::option: '{}' is not in Info::options", name));
    return it->second;
}

void Tutorial::print_banner() const {
    if (no_prose) {
        fmt::print("tutorial {}{}{}{}\n", name_, exercise_mode_ ? " --exercise" : "", literal_ ? " --literal" : "",
                   jump_to_.empty() ? "" : fmt::format(" --{} {}", only_ ? "only" : "from", jump_to_));
        return;
    }
    const std::string rule(kWidth, '=');
    fmt::print("{}\n{}\n{}{}\n", rule, in_language(info_.title), in_language({.en = "Follows: ", .zh = "对应文档："}),
               in_language(info_.follows));
    if (exercise_mode_)
        fmt::print("{}{}\n", in_language({.en = "EXERCISE: ", .zh = "练习："}), in_language(info_.exercise));
    if (literal_)
        fmt::print("{}{}\n", in_language({.en = "LITERAL: ", .zh = "照原文运行："}), in_language(info_.literal));
    if (!jump_to_.empty())
        fmt::print("{}\n",
                   phrase(only_ ? Text{.en = "ONLY STEP {}: the steps before it run quietly, for the results it uses",
                                       .zh = "只看第 {} 步：它之前的步骤静默运行，以得到它要用的结果"}
                                : Text{.en = "FROM STEP {}: the steps before it run quietly, for the results it uses",
                                       .zh = "从第 {} 步开始：它之前的步骤静默运行，以得到它要用的结果"},
                          jump_to_)
                       .text);
    if (!stepping_)
        fmt::print("{}\n", in_language({.en = "(Run with --step to pause after each step; --lang zh for Chinese.)",
                                        .zh = "（加 --step 可在每步之后暂停；--lang en 显示英文。）"}));
    fmt::print("{}\n", rule);
}

void Tutorial::step(const Text& name, const std::function<void()>& body) {
    if (exercise_mode_) return;
    if (step_id(name.en) != step_id(name.zh))  // a mistake in the tutorial's code: say so, and run the step
        failures_.push_back(
            fmt::format("step \"{}\" / \"{}\": the two languages give it different labels", name.en, name.zh));
    if (jump_to_.empty()) return run_part(name, body);
    const std::string id = step_id(name.en);
    step_ids_.push_back(id);
    if (!reached_ && id != jump_to_) return run_quietly(name, body);
    if (reached_ && only_) return;
    reached_ = true;
    run_part(name, body);
}

void Tutorial::exercise(const Text& name, const std::function<void()>& body) {
    if (exercise_mode_) run_part(name, body);
}

bool Tutorial::injected(std::string_view fault) {
    faults_asked_.insert(std::string(fault));
    return fault == fault_;
}

void Tutorial::run_part(const Text& name, const std::function<void()>& body) {
    if (quit_) {
        ++steps_skipped_;
        return;
    }
    current_step_ = std::string(in_language(name));
    current_id_ = step_id(name.en);
    checks_in_step_ = 0;
    if (no_prose) {
        say("\n── {}\n", current_id_);
    } else {
        const std::string title = fmt::format("── {} ", current_step_);
        std::string rule;
        for (int i = display_width(title); i < kWidth || rule.empty(); ++i) rule += "─";
        say("\n{}{}\n\n", title, rule);
    }
    ++steps_run_;
    try {
        body();
    } catch (const std::exception& e) {
        record(false, phrase({.en = "the step ran to the end", .zh = "这一步完整地运行结束"}),
               phrase({.en = "it threw {}: {}", .zh = "它抛出了 {}：{}"}, error_kind(e), std::string(e.what())));
    }
    std::fflush(stdout);
    if (stepping_) pause();
    current_step_.clear();
    current_id_.clear();
}

void Tutorial::run_quietly(const Text& name, const std::function<void()>& body) {
    if (quit_) return;
    current_step_ = std::string(in_language(name));
    current_id_ = step_id(name.en);
    quiet_steps_.push_back(current_id_);
    quiet = true;
    try {
        body();
    } catch (const std::exception& e) {
        record(false, phrase({.en = "the step ran to the end", .zh = "这一步完整地运行结束"}),
               phrase({.en = "it threw {}: {}", .zh = "它抛出了 {}：{}"}, error_kind(e), std::string(e.what())));
    }
    quiet = false;
    current_step_.clear();
    current_id_.clear();
}

void Tutorial::pause() {
    fmt::print("\n  {} ", in_language({.en = "[Enter: next step · q then Enter: stop here]",
                                       .zh = "[回车：下一步 · q 再回车：到此为止]"}));
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {  // no terminal (stdin closed): just carry on
        fmt::print("\n");
        stepping_ = false;
        return;
    }
    if (line == "q" || line == "Q") quit_ = true;
}

Phrase Tutorial::thrown(const std::string& kind, const std::string& message, bool right_kind) {
    return right_kind ? phrase({.en = "threw {}: {}", .zh = "抛出了 {}：{}"}, kind, message)
                      : phrase({.en = "threw the wrong kind of error, {}: {}", .zh = "抛出的异常类型不对，{}：{}"},
                               kind, message);
}

void Tutorial::record(bool ok, const Phrase& what, const Phrase& detail) {
    ++checks_in_step_;
    if (no_prose) {
        const std::string values = values_str(what);
        say("{}{}{}{}\n", kIndent, ok ? "✓" : "✗", values.empty() ? "" : " ", values);
        if (!detail.values.empty()) say("{}    {}\n", kIndent, values_str(detail));
    } else {
        say("{}{} {}\n", kIndent, ok ? "✓" : "✗", what.text);
        if (!detail.text.empty()) print_wrapped(detail.text, fmt::format("{}    ", kIndent));
    }
    if (ok) {
        if (!quiet) ++passed_;  // a quiet step's checks count only when they fail
    } else if (no_prose) {
        failures_.push_back(fmt::format("[{}] check {} {}", current_id_, checks_in_step_, values_str(what)));
    } else {
        failures_.push_back(current_step_.empty() ? what.text : fmt::format("[{}] {}", current_step_, what.text));
    }
}

bool Tutorial::check(bool condition, const Phrase& what) {
    record(condition, what, {});
    return condition;
}

bool Tutorial::check_close(double actual, double expected, double tol, const Phrase& what) {
    const double diff = std::abs(actual - expected);
    const bool ok = diff <= tol;  // false for NaN, as it should be
    record(ok, what,
           ok ? Phrase{}
              : phrase({.en = "got {:.10g}, expected {:.10g}: |difference| {:.3g} > tolerance {:.3g}",
                        .zh = "得到 {:.10g}，应为 {:.10g}：|差| {:.3g} > 容差 {:.3g}"},
                       actual, expected, diff, tol));
    return ok;
}

bool Tutorial::check_close(const core::Tensor& actual, const core::Tensor& expected, double tol, const Phrase& what) {
    if (!actual.defined() || !expected.defined()) {
        record(false, what, phrase({.en = "one of the tensors is undefined", .zh = "有一个张量未定义"}));
        return false;
    }
    if (!(actual.shape() == expected.shape())) {
        record(false, what,
               phrase({.en = "shapes differ: {} vs {}", .zh = "形状不同：{} 与 {}"}, core::shape_str(actual.shape()),
                      core::shape_str(expected.shape())));
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
           ok ? Phrase{}
           : nan
               ? phrase({.en = "a NaN where a number was expected", .zh = "应为数值的地方出现了 NaN"})
               : phrase({.en = "largest |difference| {:.3g} > tolerance {:.3g} at flat element {} ({:.10g} vs {:.10g})",
                         .zh = "最大 |差| {:.3g} > 容差 {:.3g}，在展平后的第 {} 个元素（{:.10g} 与 {:.10g}）"},
                        worst, tol, where, a[where], b[where]));
    return ok;
}

bool Tutorial::check_allclose(const core::Tensor& actual, const core::Tensor& expected, double tol,
                              const Phrase& what) {
    if (!actual.defined() || !expected.defined() || !(actual.shape() == expected.shape())) {
        record(false, what,
               !actual.defined() || !expected.defined()
                   ? phrase({.en = "one of the tensors is undefined", .zh = "有一个张量未定义"})
                   : phrase({.en = "shapes differ: {} vs {}", .zh = "形状不同：{} 与 {}"},
                            core::shape_str(actual.shape()), core::shape_str(expected.shape())));
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
    Phrase shown = what;  // "... (largest |difference| 1.2e-07)"
    const Phrase largest_note = phrase({.en = " (largest |difference| {:.1e})", .zh = "（最大 |差| {:.1e}）"}, largest);
    shown.text += largest_note.text;
    shown.values.insert(shown.values.end(), largest_note.values.begin(), largest_note.values.end());
    record(ok, shown,
           ok    ? Phrase{}
           : nan ? phrase({.en = "a NaN where a number was expected", .zh = "应为数值的地方出现了 NaN"})
                 : phrase({.en = "at flat element {}: {:.10g} vs {:.10g}, beyond tolerance {:.1e}·(1 + |expected|)",
                           .zh = "展平后的第 {} 个元素：{:.10g} 与 {:.10g}，超出容差 {:.1e}·(1 + |期望值|)"},
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
    if (!fault_.empty() && !faults_asked_.count(fault_))
        failures_.push_back(fmt::format("--inject-fault {}: no step has that fault (the steps ask for: {})", fault_,
                                        fmt::join(faults_asked_, ", ")));
    if (!jump_to_.empty() && !exercise_mode_ && !reached_)
        failures_.push_back(
            phrase({.en = "--{} {}: no such step; the steps are {}", .zh = "--{} {}：没有这一步；各步是 {}"},
                   only_ ? "only" : "from", jump_to_, fmt::join(step_ids_, ", "))
                .text);
    if (no_prose) {
        fmt::print("\n{} passed, {} failed\n", passed_, failures_.size());
        for (const std::string& f : failures_) fmt::print("  ✗ {}\n", f);
        std::fflush(stdout);
        return failures_.empty() ? 0 : 1;
    }
    const std::string rule(kWidth, '=');
    fmt::print("\n{}\n", rule);
    if (!jump_to_.empty() && !exercise_mode_ && reached_ && !quiet_steps_.empty())
        fmt::print(
            "{}\n",
            phrase({.en = "Ran quietly first: {}.", .zh = "先静默运行了：{}。"}, fmt::join(quiet_steps_, ", ")).text);
    if (steps_skipped_ > 0)
        fmt::print("{}\n",
                   phrase({.en = "Stopped after {} steps; {} not run.", .zh = "运行 {} 步后停止；{} 步没有运行。"},
                          steps_run_, steps_skipped_)
                       .text);
    fmt::print("{}{}\n", in_language(info_.title),
               exercise_mode_ ? in_language({.en = " · EXERCISE", .zh = " · 练习"}) : "");
    fmt::print("{}\n", phrase({.en = "{} checks passed, {} failed", .zh = "{} 项检查通过，{} 项失败"}, passed_,
                              failures_.size())
                           .text);
    for (const std::string& f : failures_) fmt::print("  ✗ {}\n", f);
    if (exercise_mode_ && !failures_.empty()) {
        const std::string digits = name_.substr(0, name_.find('_'));
        const std::string number = digits.find_first_not_of('0') == std::string::npos
                                       ? digits
                                       : digits.substr(digits.find_first_not_of('0'));  // "01" -> "1"
        fmt::print("\n{}\n",
                   phrase({.en = "The exercise is not solved yet. What to do:\n"
                                 "  1. edit tutorials/{0}/exercise.cpp: the lines marked TODO\n"
                                 "  2. rebuild:  cmake --build --preset release --target tutorial_{0}\n"
                                 "  3. run:      ./build/release/tutorials/tutorial_{0} --exercise   (or: tformer "
                                 "tutorial {1} --exercise)\n"
                                 "Stuck? tutorials/{0}/solution.cpp is one answer.",
                           .zh = "练习还没有完成。接下来：\n"
                                 "  1. 编辑 tutorials/{0}/exercise.cpp 中标有 TODO 的几行\n"
                                 "  2. 重新编译：cmake --build --preset release --target tutorial_{0}\n"
                                 "  3. 运行：    ./build/release/tutorials/tutorial_{0} --exercise   （或：tformer "
                                 "tutorial {1} --exercise）\n"
                                 "卡住了？tutorials/{0}/solution.cpp 是一种解答。"},
                          name_, number)
                       .text);
    } else if (exercise_mode_) {
        fmt::print("\n{}\n", in_language({.en = "Solved: every check of the exercise passes.",
                                          .zh = "完成了：练习的每一项检查都通过了。"}));
    } else if (!info_.exercise.en.empty() && !quit_) {
        fmt::print("{}{}\n  {}\n", in_language({.en = "Exercise: ", .zh = "练习："}), in_language(info_.exercise),
                   in_language({.en = "(run this program with --exercise)", .zh = "（用 --exercise 运行本程序）"}));
    }
    fmt::print("{}\n", rule);
    std::fflush(stdout);
    return failures_.empty() ? 0 : 1;
}

// ---- printing -------------------------------------------------------------------

void note(const Phrase& text) {
    if (!no_prose) return print_wrapped(text.text, kIndent);
    if (!text.values.empty()) say("{}· {}\n", kIndent, values_str(text));
}

void line(std::string_view text) { say("{}\n", text); }

void line(const Phrase& text) {
    if (!no_prose) return say("{}\n", text.text);
    if (!text.values.empty()) say("{}· {}\n", kIndent, values_str(text));
}

void quote(std::string_view text) {
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        say("{}  │ {}\n", kIndent, text.substr(start, end - start));
        start = end + 1;
    }
}

namespace {

// A tensor as show() prints it: all of it, or with --quiet-tensors, when it
// has more than 8 elements, its shape, dtype and first and last values.
std::string tensor_text(const core::Tensor& t, int width) {
    constexpr int64_t kQuietMost = 8;
    if (quiet_tensors && t.defined() && t.dim() > 0 && t.numel() > kQuietMost) {
        const std::string flat =
            core::to_string(t.reshape({-1}), {.threshold = 6, .edge_items = 3, .line_width = 100000});
        const size_t open = flat.find('['), close = flat.rfind(']');
        const Text summary{.en = "{} {}, {} values: {}", .zh = "{} {}，共 {} 个值：{}"};
        return phrase(no_prose ? Text{summary.en, summary.en} : summary, tuple_str(t.shape()),
                      core::dtype_name(t.dtype()), t.numel(), flat.substr(open, close - open + 1))
            .text;
    }
    core::PrintOptions options;
    options.line_width = width;
    return core::to_string(t, options);
}

void show_named(std::string_view name, const core::Tensor& t) {
    const std::string prefix = fmt::format("{}{} = ", kIndent, name);
    print_hanging(prefix, tensor_text(t, std::max(40, kWidth - display_width(prefix))));
}

void show_named(std::string_view name, const autograd::Variable& v) {
    if (!v.defined()) {
        say("{}{} = {}\n", kIndent, name,
            no_prose ? "undefined Variable"
                     : in_language({.en = "(undefined Variable)", .zh = "（未定义的 Variable）"}));
        return;
    }
    show_named(name, v.value());
    const std::string pad(display_width(name) + 3, ' ');
    const bool grad = v.requires_grad();
    if (no_prose)
        say("{}{}{} requires_grad={}\n", kIndent, pad, v.is_leaf() ? "leaf" : "op " + v.op_name(), grad);
    else if (v.is_leaf())
        say("{}{}{}\n", kIndent, pad,
            phrase({.en = "leaf, requires_grad={}", .zh = "叶子节点，requires_grad={}"}, grad).text);
    else
        say("{}{}{}\n", kIndent, pad,
            phrase({.en = "made by '{}', requires_grad=true", .zh = "由 '{}' 生成，requires_grad=true"}, v.op_name())
                .text);
}

// The name a Text gives a tensor: its words, or with --no-prose only its values.
std::string shown_name(const Text& name) {
    const Phrase p = phrase(name);
    return no_prose ? "·" : p.text;
}

}  // namespace

void show(std::string_view name, const core::Tensor& t) { show_named(name, t); }
void show(std::string_view name, const autograd::Variable& v) { show_named(name, v); }
void show(const Text& name, const core::Tensor& t) { show_named(shown_name(name), t); }
void show(const Text& name, const autograd::Variable& v) { show_named(shown_name(name), v); }

std::string tuple_str(const core::Dims& d) {
    return d.size() == 1 ? fmt::format("({})", d[0]) : fmt::format("({})", fmt::join(d, ", "));
}

void describe(std::string_view name, const core::Tensor& t) {
    if (!t.defined()) {
        say("{}{}: {}\n", kIndent, name, no_prose ? "undefined" : in_language({.en = "undefined", .zh = "未定义"}));
        return;
    }
    const int64_t elements = t.storage()->nbytes() / static_cast<int64_t>(core::dtype_size(t.dtype()));
    if (no_prose) {
        say("{}{}: {} {} {} {} #{} {}\n", kIndent, name, tuple_str(t.shape()), tuple_str(t.strides()), t.offset(),
            t.is_contiguous() ? "contiguous" : "strided", storage_number(t), elements);
        return;
    }
    const Text contiguous =
        t.is_contiguous() ? Text{.en = "contiguous", .zh = "连续"} : Text{.en = "not contiguous", .zh = "不连续"};
    say("{}{}\n", kIndent,
        phrase({.en = "{}: shape {}, strides {}, offset {}, {}, storage #{} ({} elements)",
                .zh = "{}：形状 {}，步幅 {}，偏移 {}，{}，存储 #{}（共 {} 个元素）"},
               name, tuple_str(t.shape()), tuple_str(t.strides()), t.offset(), phrase(contiguous), storage_number(t),
               elements)
            .text);
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
