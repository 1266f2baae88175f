// tasks/bleu: d2l's sentence BLEU (printed by seed 000 after each translation)
// and Papineni's corpus BLEU, against hand-computed values.
#include "tasks/bleu.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

TEST_CASE("bleu(pred, label, k): d2l's sentence score on hand-computed examples", "[tasks][bleu]") {
    struct Case {
        std::string pred, label;
        int k;
        double expected;
    };
    const std::vector<Case> cases = {
        // seed 000's four test sentences translated exactly: d2l prints "bleu 1.000"
        {"va !", "va !", 2, 1.0},
        {"j'ai perdu .", "j'ai perdu .", 2, 1.0},
        {"il est calme .", "il est calme .", 2, 1.0},
        {"je suis chez moi .", "je suis chez moi .", 2, 1.0},
        // "il est paresseux ." for "il est calme .": same length, so no penalty;
        // unigrams il est . match (3 of 4); bigrams: only "il est" (1 of 3):
        //   (3/4)^(1/2) * (1/3)^(1/4) = 0.8660 * 0.7598 = 0.6580
        {"il est paresseux .", "il est calme .", 2, std::sqrt(0.75) * std::pow(1.0 / 3.0, 0.25)},
        // "je suis en retard ." for "je suis chez moi .": 3 of 5 unigrams, 1 of 4 bigrams:
        //   (3/5)^(1/2) * (1/4)^(1/4) = 0.7746 * 0.7071 = 0.5477
        {"je suis en retard .", "je suis chez moi .", 2, std::sqrt(0.6) * std::pow(0.25, 0.25)},
        // too short: penalty exp(1 - 2/1) = e^-1, unigram "va" matches (1 of 1)
        {"va", "va !", 1, std::exp(-1.0)},
        // longer than the label: 1 - 2/3 > 0, so the penalty is exp(0) = 1;
        // unigrams 2 of 3 ("!" clipped to one), bigrams "va !" 1 of 2:
        //   (2/3)^(1/2) * (1/2)^(1/4)
        {"va ! !", "va !", 2, std::sqrt(2.0 / 3.0) * std::pow(0.5, 0.25)},
        // clipping: "the" occurs once in the label, so only one of the four counts:
        // penalty exp(min(0, 1 - 2/4)) = 1, p1 = 1/4, (1/4)^(1/2) = 0.5
        {"the the the the", "the cat", 1, 0.5},
        // k = 3 weights 1/2, 1/4, 1/8; all 3 unigrams, 2 bigrams, 1 trigram match
        {"a b c", "a b c", 3, 1.0},
        // no trigram matches: p3 = 0 makes the whole score 0
        {"a b d", "a b c", 3, 0.0},
        // shorter than k: d2l divides by zero; we return 0
        {"va", "va !", 2, 0.0},
    };
    for (const Case& c : cases) {
        INFO("pred '" << c.pred << "' label '" << c.label << "' k " << c.k);
        CHECK(bleu(c.pred, c.label, c.k) == Approx(c.expected).margin(1e-12));
        CHECK(bleu(tokenize(c.pred), tokenize(c.label), c.k) == Approx(c.expected).margin(1e-12));
    }
    // the rounded values d2l's print would show
    CHECK(bleu("il est paresseux .", "il est calme .", 2) == Approx(0.658).margin(5e-4));
    CHECK(bleu("je suis en retard .", "je suis chez moi .", 2) == Approx(0.548).margin(5e-4));
}

TEST_CASE("bleu(pred, label, k): empty prediction, empty label and bad k", "[tasks][bleu]") {
    CHECK(bleu(TokenLine{}, TokenLine{"va", "!"}, 1) == 0.0);
    CHECK(bleu(TokenLine{}, TokenLine{}, 2) == 0.0);
    // an empty label: no penalty (1 - 0/2 > 0) but nothing matches
    CHECK(bleu(TokenLine{"va", "!"}, TokenLine{}, 1) == 0.0);
    REQUIRE_THROWS_AS(bleu("va !", "va !", 0), ValueError);
    REQUIRE_THROWS_WITH(bleu("va !", "va !", 0), "bleu: k must be >= 1, got 0");
}

TEST_CASE("corpus_bleu(preds, refs, max_n): sums n-gram counts over the corpus", "[tasks][bleu]") {
    // Sentence 1: pred "the cat sat on the mat", ref "the cat sat on a mat" (both 6 tokens)
    //   1-grams: the(2, clipped to 1) cat sat on mat -> 5 of 6
    //   2-grams: "the cat" "cat sat" "sat on" match, "on the" "the mat" do not -> 3 of 5
    //   3-grams: "the cat sat" "cat sat on" -> 2 of 4
    //   4-grams: "the cat sat on" -> 1 of 3
    // Sentence 2: pred "hello world" (2), ref "hello there world" (3)
    //   1-grams 2 of 2, 2-grams 0 of 1, no 3- or 4-grams
    // Corpus: p1 = 7/8, p2 = 3/6, p3 = 2/4, p4 = 1/3; c = 8, r = 9
    //   BP = exp(1 - 9/8) = exp(-0.125) = 0.8825
    //   BLEU = BP * (7/8 * 1/2 * 1/2 * 1/3)^(1/4) = 0.8825 * (7/96)^(1/4) = 0.8825 * 0.5196 = 0.4586
    const std::vector<TokenLine> preds = {tokenize("the cat sat on the mat"), tokenize("hello world")};
    const std::vector<TokenLine> refs = {tokenize("the cat sat on a mat"), tokenize("hello there world")};
    const CorpusBleu result = corpus_bleu(preds, refs);
    REQUIRE(result.precisions.size() == 4);
    CHECK(result.precisions[0] == Approx(7.0 / 8.0));
    CHECK(result.precisions[1] == Approx(0.5));
    CHECK(result.precisions[2] == Approx(0.5));
    CHECK(result.precisions[3] == Approx(1.0 / 3.0));
    CHECK(result.pred_length == 8);
    CHECK(result.ref_length == 9);
    CHECK(result.brevity_penalty == Approx(std::exp(-0.125)));
    CHECK(result.score == Approx(std::exp(-0.125) * std::pow(7.0 / 96.0, 0.25)));
    CHECK(result.score == Approx(0.4586).margin(1e-4));

    // A perfect corpus scores 1 (the 3-token sentence has no 4-grams, but the
    // other one has three, all matched); a corpus with no 4-gram at all has
    // p4 = 0 and scores 0 (no smoothing).
    CHECK(corpus_bleu(refs, refs).score == Approx(1.0));
    CHECK(corpus_bleu({tokenize("a b c")}, {tokenize("a b c")}).score == 0.0);  // no 4-grams at all
    CHECK(corpus_bleu({tokenize("a b c")}, {tokenize("a b c")}, 3).score == Approx(1.0));
}

TEST_CASE("corpus_bleu(preds, refs, max_n): several references clip and choose the closest length", "[tasks][bleu]") {
    // Papineni's example: "the" x7 against two references; "the" occurs at most
    // twice in one reference, so the modified unigram precision is 2/7. The
    // reference lengths are 6 and 7; 7 is closest to c = 7, so BP = 1.
    const std::vector<TokenLine> preds = {tokenize("the the the the the the the")};
    const std::vector<std::vector<TokenLine>> refs = {
        {tokenize("the cat is on the mat"), tokenize("there is a cat on the mat")}};
    const CorpusBleu result = corpus_bleu(preds, refs, 1);
    CHECK(result.precisions[0] == Approx(2.0 / 7.0));
    CHECK(result.ref_length == 7);
    CHECK(result.brevity_penalty == 1.0);
    CHECK(result.score == Approx(2.0 / 7.0));

    // Tie: c = 5 is as close to 4 as to 6; the shorter (4) counts, so c > r and
    // BP = 1 (with 6 it would be exp(1 - 6/5) = 0.819). Clipping takes the
    // largest count over the references, so "e" (only in the second) matches.
    const CorpusBleu tie =
        corpus_bleu({tokenize("a b c d e")},
                    std::vector<std::vector<TokenLine>>{{tokenize("a b c d"), tokenize("a b c d e f")}}, 1);
    CHECK(tie.ref_length == 4);
    CHECK(tie.brevity_penalty == 1.0);
    CHECK(tie.score == Approx(1.0));
}

TEST_CASE("corpus_bleu(preds, refs, max_n): empty corpus and bad arguments", "[tasks][bleu]") {
    const CorpusBleu empty = corpus_bleu(std::vector<TokenLine>{}, std::vector<TokenLine>{});
    CHECK(empty.score == 0.0);
    CHECK(empty.brevity_penalty == 0.0);
    REQUIRE_THROWS_WITH(corpus_bleu({tokenize("a")}, std::vector<TokenLine>{}),
                        "corpus_bleu: 1 predictions but 0 reference lists");
    REQUIRE_THROWS_WITH(corpus_bleu({tokenize("a")}, std::vector<std::vector<TokenLine>>{{}}),
                        "corpus_bleu: prediction 0 has no reference");
    REQUIRE_THROWS_AS(corpus_bleu({tokenize("a")}, {tokenize("a")}, 0), ValueError);
}
