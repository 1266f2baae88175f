// tasks/distributed under `mpirun -np 2` (ctest runs it so: the test
// "mpi:collectives"): the collectives, errors on one rank reaching all, and
// the gradient all-reduce against the gradient of the whole batch computed
// in one process. Every rank runs every test; checks never stop a test
// half-way (CHECK, not REQUIRE), so the ranks keep calling the same
// collectives in the same order even when one of them fails a check.
#define CATCH_CONFIG_RUNNER
#include "tasks/distributed.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include "tasks/small_model.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace tformer;
using autograd::Variable;
using core::Tensor;
namespace dist = tformer::tasks::dist;

namespace {
std::shared_ptr<nn::EncoderDecoder> small_model(uint64_t seed) { return tformer::testing::small_copy_model(seed); }

// Rows [begin, end) of a batch.
tasks::Batch rows_of(const tasks::Batch& b, int64_t begin, int64_t end) {
    auto cut = [&](const Tensor& t) { return t.slice(0, begin, end).contiguous(); };
    return {cut(b.enc_X), cut(b.enc_valid), cut(b.dec_in), cut(b.label), cut(b.label_valid)};
}

// This rank's part of the mean over the global batch's real tokens: the
// sum over its own tokens divided by the global count, so that the ranks'
// parts add up to the global loss (and their gradients to its gradient).
Variable share_of_loss(nn::EncoderDecoder& model, const tasks::Batch& share, double global_tokens) {
    const Variable logits = model.forward(share.enc_X, share.dec_in, share.enc_valid);
    const Variable l = nn::masked_softmax_ce_loss(logits, share.label, share.label_valid, 0.1);
    return autograd::mul(autograd::sum(l), static_cast<double>(share.label.size(1)) / global_tokens);
}

double tokens_of(const tasks::Batch& b) { return core::sum(b.label_valid.to(core::DType::float64)).item(); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.to_vector(), y = b.to_vector();
    double m = 0;
    for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
    return m;
}

double max_abs(const Tensor& a) {
    double m = 0;
    for (double v : a.to_vector()) m = std::max(m, std::abs(v));
    return m;
}
}  // namespace

int main(int argc, char** argv) {
    dist::Session mpi(argc, argv);
    if (dist::size() < 2) {
        std::fprintf(stderr, "test_mpi: run it with mpirun -np 2 (or more); this process is alone\n");
        return 1;
    }
    return Catch::Session().run(argc, argv);
}

TEST_CASE("dist: ranks, broadcast and all-reduce", "[mpi]") {
    const int r = dist::rank(), n = dist::size();
    CHECK(dist::built_with_mpi());
    CHECK(dist::local_size() == n);  // one machine
    CHECK(dist::library_version() != "none");

    const Tensor t = core::full({3, 2}, static_cast<double>(r + 1));
    dist::broadcast(t);
    CHECK(t.to_vector() == std::vector<double>(6, 1.0));
    const Tensor from_last = core::full({4}, static_cast<double>(r), core::DType::float64);
    dist::broadcast(from_last, n - 1);
    CHECK(from_last.to_vector() == std::vector<double>(4, n - 1));

    std::string text = r == 0 ? std::string(100000, 'x') + "end" : "short";
    dist::broadcast(text);
    CHECK(text.size() == 100003);
    CHECK(text.ends_with("xend"));

    std::vector<double> v = {1.0, static_cast<double>(r), 0.25};
    dist::all_reduce_sum(v);
    CHECK(v == std::vector<double>{static_cast<double>(n), n * (n - 1) / 2.0, 0.25 * n});

    core::Generator gen(100 + r);
    core::Generator::State state = gen.state();
    dist::broadcast(state);
    CHECK(state == core::Generator(100).state());
    dist::barrier();
}

TEST_CASE("dist::together: an error on one rank is an error on every rank, with that rank's message", "[mpi]") {
    const int r = dist::rank();
    std::string message;
    bool threw = false;
    try {
        dist::together([&] {
            if (r == 1) fail<IOError>("load_corpus: cannot open '/no/such/fra.txt'");
        });
    } catch (const IOError& e) {  // the rank that failed: its own error, unchanged
        threw = true;
        message = e.what();
        CHECK(r == 1);
    } catch (const Error& e) {  // the others: who failed and why
        threw = true;
        message = e.what();
        CHECK(r != 1);
    }
    CHECK(threw);
    CHECK_THAT(message, Catch::Contains("load_corpus: cannot open '/no/such/fra.txt'"));
    if (r != 1) CHECK_THAT(message, Catch::StartsWith("rank 1: "));

    // nobody fails: nothing happens, and the ranks are still in step
    int ran = 0;
    dist::together([&] { ++ran; });
    CHECK(ran == 1);
    std::vector<double> one = {1};
    dist::all_reduce_sum(one);
    CHECK(one[0] == dist::size());
}

TEST_CASE("dist::check_same: a value that differs on one rank fails on every rank", "[mpi]") {
    dist::check_same(12345, "the data");
    std::string message;
    try {
        dist::check_same(dist::rank() == 1 ? 7 : 12345, "the training data");
    } catch (const Error& e) {
        message = e.what();
    }
    CHECK_THAT(message, Catch::Contains("the training data differs between ranks (rank 1 has fingerprint"));
}

TEST_CASE("dist::check_same_settings: every setting that differs is named with both values, on every rank", "[mpi]") {
    const int r = dist::rank();
    // the same everywhere: nothing happens
    CHECK_NOTHROW(dist::check_same_settings({{"the command", "train copy"}, {"--lr", "0.1"}}));
    // rank 1 has another --lr, lacks --seed and has a --steps rank 0 lacks
    std::vector<std::pair<std::string, std::string>> settings = {
        {"the command", "train copy"}, {"--lr", "0.1"}, {"--seed", "3"}};
    if (r == 1) settings = {{"the command", "train copy"}, {"--lr", "0.2"}, {"--steps", "9"}};
    std::string message;
    try {
        dist::check_same_settings(settings);
    } catch (const Error& e) {
        message = e.what();
    }
    CHECK_THAT(message, Catch::Contains("the ranks were started with different settings: --lr is 0.2 on rank 1 but "
                                        "0.1 on rank 0; --steps is 9 on rank 1 but (not given) on rank 0; --seed is "
                                        "(not given) on rank 1 but 3 on rank 0; start every rank with the same flags "
                                        "and the same data"));
    if (r == 0) CHECK_THAT(message, Catch::StartsWith("rank 1: "));
    // names and values of any bytes travel as they are
    CHECK_NOTHROW(dist::check_same_settings({{"a:b", "1:2"}, {"", ""}, {"x", std::string(100000, ':')}}));
    CHECK_THROWS_AS(dist::set_timeout(-1), ValueError);
    dist::barrier();
}

TEST_CASE("dist::broadcast_parameters and broadcast_optimizer: every rank gets rank 0's", "[mpi]") {
    auto model = small_model(1 + dist::rank());  // different weights on every rank
    const std::vector<Variable> params = model->parameters();
    optim::Adam adam(model->named_parameters(), {.lr = 0.01 * (1 + dist::rank())});
    if (dist::rank() == 0) {  // rank 0 alone has taken a step: its Adam has moments and a step count
        for (const Variable& p : params) p.set_grad(core::full(p.shape(), 0.5));
        adam.step();
    }
    dist::broadcast_parameters(params);
    dist::broadcast_optimizer(adam);

    const auto reference = small_model(1);  // what rank 0 started from
    optim::Adam reference_adam(reference->named_parameters(), {.lr = 0.01});
    for (const Variable& p : reference->parameters()) p.set_grad(core::full(p.shape(), 0.5));
    reference_adam.step();
    const std::vector<Variable> expected = reference->parameters();
    for (size_t i = 0; i < params.size(); ++i) CHECK(params[i].value().to_vector() == expected[i].value().to_vector());
    CHECK(adam.lr() == 0.01);
    CHECK(adam.steps() == 1);
    const nn::StateDict a = adam.state_dict(), b = reference_adam.state_dict();
    for (const auto& [key, value] : b) CHECK(a.at(key).to_vector() == value.to_vector());
}

TEST_CASE("dist::GradientReducer: the ranks' shares add up to the gradient of the whole batch", "[mpi]") {
    const int r = dist::rank(), n = dist::size();
    // the global batch, the same on every rank; 1 row means some ranks have none
    for (const int64_t rows : {int64_t{7}, int64_t{1}})
        for (const bool overlap : {true, false})
            for (const int64_t bucket_bytes : {int64_t{256}, int64_t{1} << 20}) {
                INFO("rows " << rows << ", overlap " << overlap << ", buckets of " << bucket_bytes << " bytes");
                core::Generator gen(11);
                const tasks::Batch batch = tasks::copy_batch(rows, 8, 11, gen);
                const double tokens = tokens_of(batch);

                // the reference: the whole batch in this one process
                auto model = small_model(5);
                const std::vector<Variable> params = model->parameters();
                share_of_loss(*model, batch, tokens).backward();
                std::vector<Tensor> expected;
                for (const Variable& p : params) expected.push_back(p.grad().clone());
                for (const Variable& p : params) p.zero_grad();

                dist::GradientReducer reducer(params, {.bucket_bytes = bucket_bytes, .overlap = overlap});
                const dist::RowRange share = dist::shard_rows(rows, r, n);
                if (share.size() > 0) share_of_loss(*model, rows_of(batch, share.begin, share.end), tokens).backward();
                reducer.finish();
                double worst = 0;
                for (size_t i = 0; i < params.size(); ++i) {
                    CHECK(params[i].grad().defined());
                    if (params[i].grad().defined())
                        worst = std::max(worst,
                                         max_abs_diff(params[i].grad(), expected[i]) / (1e-3 + max_abs(expected[i])));
                }
                CHECK(worst < 1e-5);  // float32 sums in another order
                // with overlap, the buckets of the last layers left during backward (none on a rank without rows)
                if (overlap && share.size() > 0) CHECK(reducer.stats().early_buckets > 0);
                if (!overlap) CHECK(reducer.stats().early_buckets == 0);
                // every rank holds the very same gradient, bit for bit
                uint64_t h = 0;
                for (const Variable& p : params) h = dist::fingerprint(p.grad(), h);
                dist::check_same(h, "the reduced gradient");
            }
}

TEST_CASE("dist::GradientReducer: a gradient only one rank has, none at all, and the mean", "[mpi]") {
    const int r = dist::rank(), n = dist::size();
    const Variable everyone(core::tensor({1, 2}, {2}), true);
    const Variable only_rank_1(core::tensor({3}, {1}), true);
    const Variable nobody(core::tensor({4, 5, 6}, {3}), true);
    for (const bool average : {false, true}) {
        dist::GradientReducer reducer({everyone, only_rank_1, nobody}, {.bucket_bytes = 8, .average = average});
        Variable loss = autograd::mul(autograd::sum(everyone), static_cast<double>(r + 1));  // gradient r + 1
        if (r == 1) loss = autograd::add(loss, autograd::sum(autograd::mul(only_rank_1, only_rank_1)));  // 2x = 6
        loss.backward();
        reducer.finish();
        const double sum = n * (n + 1) / 2.0;  // Σ (r + 1)
        const double scale = average ? 1.0 / n : 1.0;
        CHECK(everyone.grad().to_vector() == std::vector<double>{sum * scale, sum * scale});
        CHECK(only_rank_1.grad().defined());
        if (only_rank_1.grad().defined()) CHECK(only_rank_1.grad().to_vector() == std::vector<double>{6 * scale});
        CHECK_FALSE(nobody.grad().defined());
        for (const Variable& p : {everyone, only_rank_1, nobody}) p.zero_grad();
    }
}
