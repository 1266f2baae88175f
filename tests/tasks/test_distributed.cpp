// tasks/distributed: what holds in a world of one rank (every build, every
// process not started by mpirun). tests/mpi/test_mpi.cpp runs the same
// module under `mpirun -np 2`.
#include "tasks/distributed.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include "tasks/small_model.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace tformer;
using autograd::Variable;
using core::Tensor;
namespace dist = tformer::tasks::dist;

namespace {
std::shared_ptr<nn::EncoderDecoder> small_model(uint64_t seed) { return tformer::testing::small_copy_model(seed); }

// The mean over the batch's real tokens, as training computes it.
Variable token_mean_loss(nn::EncoderDecoder& model, const tasks::Batch& b) {
    const double tokens = core::sum(b.label_valid.to(core::DType::float64)).item();
    const Variable logits = model.forward(b.enc_X, b.dec_in, b.enc_valid);
    const Variable l = nn::masked_softmax_ce_loss(logits, b.label, b.label_valid, 0.1);
    return autograd::mul(autograd::sum(l), static_cast<double>(b.label.size(1)) / tokens);
}

std::vector<Tensor> grads_of(const std::vector<Variable>& params) {
    std::vector<Tensor> out;
    for (const Variable& p : params) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    return out;
}
}  // namespace

TEST_CASE("dist: one process is a world of one rank", "[tasks][dist]") {
    // ctest does not start this program with mpirun
    CHECK(dist::rank() == 0);
    CHECK(dist::size() == 1);
    CHECK(dist::is_root());
    CHECK(dist::local_size() == 1);
    const Tensor t = core::tensor({1, 2, 3}, {3});
    dist::broadcast(t);
    CHECK(t.to_vector() == std::vector<double>{1, 2, 3});
    std::vector<double> v = {0.5, -2};
    dist::all_reduce_sum(v);
    CHECK(v == std::vector<double>{0.5, -2});
    std::string s = "unchanged";
    dist::broadcast(s);
    CHECK(s == "unchanged");
    dist::check_same(42, "a number");
    dist::barrier();
}

TEST_CASE("dist::shard_rows: contiguous shares in rank order that cover the batch", "[tasks][dist]") {
    for (int64_t rows : {0, 1, 2, 7, 64, 1001})
        for (int size : {1, 2, 3, 4, 16}) {
            int64_t next = 0, smallest = rows, largest = 0;
            for (int r = 0; r < size; ++r) {
                const dist::RowRange share = dist::shard_rows(rows, r, size);
                CHECK(share.begin == next);
                next = share.end;
                smallest = std::min(smallest, share.size());
                largest = std::max(largest, share.size());
            }
            CHECK(next == rows);
            CHECK(largest - smallest <= 1);
        }
    CHECK(dist::shard_rows(1, 0, 2).size() == 0);  // more ranks than rows: some get nothing
    CHECK(dist::shard_rows(1, 1, 2).size() == 1);
    CHECK_THROWS_WITH(dist::shard_rows(5, 2, 2), Catch::Contains("0 <= rank < size"));
    CHECK_THROWS_WITH(dist::shard_rows(-1, 0, 1), Catch::Contains("rows -1"));
}

TEST_CASE("dist::together: alone, the work's own error comes out unchanged", "[tasks][dist]") {
    int ran = 0;
    dist::together([&] { ++ran; });
    CHECK(ran == 1);
    CHECK_THROWS_AS(dist::together([] { fail<IOError>("load: cannot open 'x'"); }), IOError);
    CHECK_THROWS_WITH(dist::together([] { fail<IOError>("load: cannot open 'x'"); }), "load: cannot open 'x'");
}

TEST_CASE("dist::fingerprint: values, shape and dtype all count", "[tasks][dist]") {
    const Tensor a = core::tensor({1, 2, 3, 4}, {2, 2});
    CHECK(dist::fingerprint(a) == dist::fingerprint(a.clone()));
    CHECK(dist::fingerprint(a) == dist::fingerprint(a.transpose(0, 1).transpose(0, 1)));
    CHECK(dist::fingerprint(a) != dist::fingerprint(a.reshape({4})));
    CHECK(dist::fingerprint(a) != dist::fingerprint(a.to(core::DType::float64)));
    CHECK(dist::fingerprint(a) != dist::fingerprint(core::tensor({1, 2, 3, 5}, {2, 2})));
    CHECK(dist::fingerprint(a) != dist::fingerprint(a.transpose(0, 1)));  // the values in order
}

TEST_CASE("dist::GradientReducer: alone, the gradients are the ones backward made, in every bucket layout",
          "[tasks][dist]") {
    auto model = small_model(3);
    const std::vector<Variable> params = model->parameters();
    core::Generator gen(7);
    const tasks::Batch batch = tasks::copy_batch(6, 8, 11, gen);

    token_mean_loss(*model, batch).backward();
    const std::vector<Tensor> expected = grads_of(params);
    for (const Variable& p : params) p.zero_grad();

    for (const bool overlap : {true, false})
        for (const int64_t bucket_bytes : {int64_t{1}, int64_t{4096}, int64_t{1} << 30}) {
            INFO("overlap " << overlap << ", buckets of " << bucket_bytes << " bytes");
            dist::GradientReducer reducer(params, {.bucket_bytes = bucket_bytes, .overlap = overlap});
            if (bucket_bytes == 1) CHECK(reducer.num_buckets() == static_cast<int64_t>(params.size()));
            if (bucket_bytes == int64_t{1} << 30) CHECK(reducer.num_buckets() == 1);
            for (int step = 0; step < 2; ++step) {  // the second step reuses the reducer
                token_mean_loss(*model, batch).backward();
                reducer.finish();
                for (size_t i = 0; i < params.size(); ++i) {
                    REQUIRE(params[i].grad().defined());
                    CHECK(params[i].grad().to_vector() == expected[i].to_vector());  // copies: bit for bit
                }
                for (const Variable& p : params) p.zero_grad();
            }
            CHECK(reducer.stats().steps == 2);
            // with overlap, every bucket starts inside backward, as its last gradient arrives
            CHECK(reducer.stats().early_buckets == (overlap ? 2 * reducer.num_buckets() : 0));
            CHECK(reducer.stats().bytes == 4 * model->num_parameters());
        }
}

TEST_CASE("dist::GradientReducer: a parameter without a gradient keeps none, the mean of one rank is the sum",
          "[tasks][dist]") {
    const Variable used(core::tensor({1, 2, 3}, {3}), true);
    const Variable unused(core::tensor({4, 5}, {2}), true);
    for (const bool average : {false, true}) {
        dist::GradientReducer reducer({used, unused}, {.overlap = true, .average = average});
        autograd::sum(autograd::mul(used, used)).backward();  // d/dx Σx² = 2x
        reducer.finish();
        CHECK(used.grad().to_vector() == std::vector<double>{2, 4, 6});
        CHECK_FALSE(unused.grad().defined());
        used.zero_grad();
    }
}

TEST_CASE("dist::GradientReducer: bad parameters and a second backward before finish() are clear errors",
          "[tasks][dist]") {
    CHECK_THROWS_WITH(dist::GradientReducer({}), Catch::Contains("no parameters"));
    CHECK_THROWS_WITH(dist::GradientReducer({Variable(core::zeros({2}), false)}),
                      Catch::Contains("does not require a gradient"));
    CHECK_THROWS_WITH(dist::GradientReducer(
                          {Variable(core::zeros({2}), true), Variable(core::zeros({2}, core::DType::float64), true)}),
                      Catch::Contains("one dtype; parameter 0 is float32, parameter 1 is float64"));
    const Variable x(core::tensor({1, 2}, {2}), true);
    dist::GradientReducer reducer({x});
    autograd::sum(x).backward();
    CHECK_THROWS_WITH(autograd::sum(x).backward(), Catch::Contains("arrived twice before finish()"));
}

TEST_CASE("dist::GradientReducer: once it is gone its hooks do nothing", "[tasks][dist]") {
    const Variable x(core::tensor({1, 2}, {2}), true);
    { dist::GradientReducer reducer({x}); }
    autograd::sum(x).backward();
    autograd::sum(x).backward();  // a live reducer would refuse a second pass
    CHECK(x.grad().to_vector() == std::vector<double>{2, 2});
}

TEST_CASE("dist::ReducerOptions::from_environment: the measuring knobs, checked", "[tasks][dist]") {
    setenv("TFORMER_BUCKET_KB", "64", 1);
    setenv("TFORMER_OVERLAP", "0", 1);
    dist::ReducerOptions o = dist::ReducerOptions::from_environment();
    CHECK(o.bucket_bytes == 64 * 1024);
    CHECK_FALSE(o.overlap);
    setenv("TFORMER_OVERLAP", "yes", 1);
    CHECK_THROWS_WITH(dist::ReducerOptions::from_environment(),
                      Catch::Contains("TFORMER_OVERLAP must be a whole number from 0 to 1, got 'yes'"));
    unsetenv("TFORMER_BUCKET_KB");
    unsetenv("TFORMER_OVERLAP");
    o = dist::ReducerOptions::from_environment();
    CHECK(o.bucket_bytes == dist::ReducerOptions{}.bucket_bytes);
    CHECK(o.overlap);
}

TEST_CASE("dist::broadcast_parameters and broadcast_optimizer: alone, nothing changes", "[tasks][dist]") {
    auto model = small_model(1);
    optim::Adam adam(model->named_parameters(), {.lr = 0.01});
    const std::vector<Variable> params = model->parameters();
    const uint64_t before = dist::fingerprint(params.front().value());
    dist::broadcast_parameters(params);
    dist::broadcast_optimizer(adam);
    CHECK(dist::fingerprint(params.front().value()) == before);
}
