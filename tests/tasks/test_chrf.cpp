// chrF against sacreBLEU's figures (tests/fixtures/chrf_sacrebleu.json,
// written by make_chrf_fixture.py): every sentence's counts and score, and
// the corpus score, which sums the counts before dividing.
#include "core/error.hpp"
#include "tasks/chrf.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

using namespace tformer;
using nlohmann::json;

namespace {
json fixture() {
    std::ifstream in(std::string(TFORMER_SOURCE_DIR) + "/tests/fixtures/chrf_sacrebleu.json");
    REQUIRE(in);
    return json::parse(in);
}
}  // namespace

TEST_CASE("chrF: each sentence's n-gram counts and score are sacreBLEU's", "[tasks][chrf]") {
    const json f = fixture();
    REQUIRE(f["sentences"].size() == 14);
    for (const json& s : f["sentences"]) {
        const auto hyp = s["hypothesis"].get<std::string>();
        const auto refs = s["references"].get<std::vector<std::string>>();
        INFO(hyp);
        const tasks::ChrfStats st = tasks::chrf_stats(hyp, refs);
        std::vector<int64_t> flat;
        for (size_t n = 0; n < st.hyp.size(); ++n) flat.insert(flat.end(), {st.hyp[n], st.ref[n], st.match[n]});
        CHECK(flat == s["stats"].get<std::vector<int64_t>>());
        CHECK(tasks::chrf_score(st) == Approx(s["chrf"].get<double>()).margin(1e-9));
    }
}

TEST_CASE("chrF: the corpus score is sacreBLEU's, with one reference and with several", "[tasks][chrf]") {
    const json f = fixture();
    std::vector<std::string> hyps, single_hyps;
    std::vector<std::vector<std::string>> refs, single_refs;
    for (const json& s : f["sentences"]) {
        hyps.push_back(s["hypothesis"]);
        refs.push_back(s["references"]);
        if (refs.back().size() == 1) {
            single_hyps.push_back(hyps.back());
            single_refs.push_back(refs.back());
        }
    }
    CHECK(tasks::corpus_chrf(hyps, refs) == Approx(f["corpus_chrf"].get<double>()).margin(1e-9));
    REQUIRE(single_hyps.size() == f["single_reference_count"].get<size_t>());
    CHECK(tasks::corpus_chrf(single_hyps, single_refs) ==
          Approx(f["single_reference_corpus_chrf"].get<double>()).margin(1e-9));
    // counts are summed before dividing: not the mean of the sentences' scores (100 and 0). Order 1 matches
    // 1 of 11 characters both ways, orders 2-6 match none of what both sides have, so P = R = (1/11) / 6
    CHECK(tasks::corpus_chrf({"a", "xxxxxxxxxx"}, {{"a"}, {"yyyyyyyyyy"}}) == Approx(100.0 / 66));
}

TEST_CASE("chrF: identical text scores 100 whatever its spacing, and bad input is refused by name", "[tasks][chrf]") {
    CHECK(tasks::corpus_chrf({"le chat\u00a0!"}, {{"lechat!"}}) == Approx(100));
    CHECK(tasks::corpus_chrf({}, {}) == 0);
    CHECK_THROWS_WITH(tasks::chrf_stats("a", {}), Catch::Contains("at least one reference"));
    CHECK_THROWS_WITH(tasks::chrf_stats("a", {"a"}, 0), Catch::Contains("order must be at least 1; got 0"));
    CHECK_THROWS_WITH(tasks::chrf_stats("a\xff", {"a"}), Catch::Contains("chrF: invalid UTF-8 at byte 1 (0xFF)"));
    CHECK_THROWS_WITH(tasks::corpus_chrf({"a", "b"}, {{"a"}}),
                      Catch::Contains("2 hypotheses but 1 reference lists"));
}
