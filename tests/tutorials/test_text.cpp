// The tutorials' two languages (tutorials/common/tutorial.hpp): a Text's
// values are formatted once and fill either language; a Text whose two
// languages disagree is refused; the locale chooses the default language.
#include "common/tutorial.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

using namespace tformer::tutorial;

namespace {

// Restores the language a test changed.
struct LanguageGuard {
    Language saved = language();
    ~LanguageGuard() { set_language(saved); }
};

}  // namespace

TEST_CASE("phrase(Text, values): each value formatted once, by its field's spec, in either language", "[tutorials]") {
    LanguageGuard guard;
    const Text text{.en = "w = {:.2f} after {} steps", .zh = "{1} 步之后 w = {0:.2f}"};
    set_language(Language::en);
    const Phrase en = phrase(text, 24.8431, 5);
    set_language(Language::zh);
    const Phrase zh = phrase(text, 24.8431, 5);
    CHECK(en.text == "w = 24.84 after 5 steps");
    CHECK(zh.text == "5 步之后 w = 24.84");
    CHECK(en.values == std::vector<std::string>{"24.84", "5"});
    CHECK(zh.values == en.values);  // in the order of the English fields, whatever the language
}

TEST_CASE("phrase(Text): without values the braces are literal, with values '{{' is a brace", "[tutorials]") {
    LanguageGuard guard;
    set_language(Language::en);
    CHECK(phrase(Text{.en = "x.view({2, 6})", .zh = "x.view({2, 6})"}).text == "x.view({2, 6})");
    CHECK(phrase(Text{.en = "{{{}}}", .zh = "{{{}}}"}, 3).text == "{3}");
    CHECK(phrase(both("    {:>5}|"), 42).text == "       42|");
}

TEST_CASE("phrase(Text, values): a Phrase among the values is words, and only its values count", "[tutorials]") {
    LanguageGuard guard;
    set_language(Language::zh);
    const Phrase narrower = phrase({.en = "narrower (w = {:.1f})", .zh = "更窄（w = {:.1f}）"}, 2.5);
    const Phrase p = phrase({.en = "the band gets {} at {}", .zh = "亮带在 {1} 处变得{0}"}, narrower, 7);
    CHECK(p.text == "亮带在 7 处变得更窄（w = 2.5）");
    CHECK(p.values == std::vector<std::string>{"2.5", "7"});
}

TEST_CASE("phrase(Text, values): a Text whose languages disagree is refused, naming it", "[tutorials]") {
    LanguageGuard guard;
    set_language(Language::en);
    // the same value with another spec would print different numbers in the two languages
    CHECK_THROWS_WITH(phrase(Text{.en = "{:.2f}", .zh = "{:.3f}"}, 1.0),
                      Catch::Contains("do not use the same fields") && Catch::Contains("{:.2f}"));
    CHECK_THROWS_AS(phrase(Text{.en = "{} and {}", .zh = "{}"}, 1, 2), std::logic_error);
    CHECK_THROWS_WITH(phrase(Text{.en = "a sentence", .zh = ""}), Catch::Contains("the Chinese is missing"));
    CHECK_THROWS_WITH(phrase(Text{.en = "{}", .zh = "{}"}, 1, 2), Catch::Contains("a value that no field shows"));
    CHECK_THROWS_WITH(phrase(Text{.en = "{} {1}", .zh = "{} {1}"}, 1, 2), Catch::Contains("mixes"));
    CHECK_THROWS_WITH(phrase(Text{.en = "50} ", .zh = "50} "}, 1), Catch::Contains("a single '}'"));
}

TEST_CASE("language_of_locale: zh_* is Chinese, anything else English", "[tutorials]") {
    CHECK(language_of_locale("zh_CN.UTF-8") == Language::zh);
    CHECK(language_of_locale("zh_TW") == Language::zh);
    CHECK(language_of_locale("zh") == Language::zh);
    CHECK(language_of_locale("en_US.UTF-8") == Language::en);
    CHECK(language_of_locale("C.UTF-8") == Language::en);
    CHECK(language_of_locale("") == Language::en);
}
