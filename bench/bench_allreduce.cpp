// How long the gradient all-reduce of data-parallel training takes for our
// model sizes (tasks/distributed.hpp). Run it with the ranks to measure:
//
//   mpirun -np 2 build/release/bench/bench_allreduce [--repeats 20] [--models default,base]
//
// For each model it builds the real parameters (tasks::build_model), gives
// every one a gradient and times, on rank 0 after a barrier, the median of
//   flat_ms      one all-reduce of every gradient in one float32 buffer
//                (the wire time and MPI's own cost, no packing)
//   reducer_ms   GradientReducer::finish() without overlap: the gradients
//                packed into 1 MB buckets, one all-reduce per bucket, the
//                results handed back as the gradients (what a training step
//                pays when nothing overlaps backward)
// One JSON line per figure on stdout, as `tformer bench` prints them:
//   {"bench":"allreduce","model":"default","ranks":2,"params":1954624,"mb":7.82,"figure":"flat_ms","value":1.23}
// scripts/mpi_bench.sh runs it and turns the figures into docs/distributed.md's estimates.
#include "core/core.hpp"
#include "tasks/bench.hpp"
#include "tasks/distributed.hpp"
#include "tasks/run_plan.hpp"
#include "tasks/seq2seq.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace tformer;
namespace dist = tformer::tasks::dist;

namespace {
// The default translation preset's model (tasks/run_plan.hpp) over
// SentencePiece's joint 4,000 pieces: d 128, FFN 512, 4 heads, 2 layers, tied embeddings.
tasks::ModelConfig default_translation() {
    const tasks::RunPlan plan = tasks::preset_plan("translate", "default");
    tasks::ModelConfig c = plan.model;
    c.src_vocab_size = c.tgt_vocab_size = plan.vocab_size;
    return c;
}

tasks::ModelConfig model_config(const std::string& name) {
    if (name == "default") return default_translation();
    return tasks::bench_preset(name).config;  // d2l, copy, small, base
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
double time_ms(F&& work) {
    dist::barrier();  // start together: the time is then the collective's, not the wait for a late rank
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
    dist::Session mpi(argc, argv);
    dist::quiet_other_ranks();
    int repeats = 20;
    std::string models = "d2l,copy,default,small,base";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--repeats" && i + 1 < argc)
            repeats = std::max(1, std::atoi(argv[++i]));
        else if (arg == "--models" && i + 1 < argc)
            models = argv[++i];
        else {
            fmt::print(stderr,
                       "usage: mpirun -np N bench_allreduce [--repeats N] [--models d2l,copy,default,small,base]\n");
            return 2;
        }
    }
    try {
        fmt::print("{{\"bench\":\"allreduce\",\"info\":true,\"ranks\":{},\"ranks_per_machine\":{},\"mpi\":\"{}\"}}\n",
                   dist::size(), dist::local_size(), dist::library_version());
        std::stringstream list(models);
        for (std::string name; std::getline(list, name, ',');) {
            core::Generator gen(0);
            const auto model = tasks::build_model(model_config(name), gen);
            const std::vector<autograd::Variable> params = model->parameters();
            const int64_t numel = model->num_parameters();
            auto give_gradients = [&] {
                for (const auto& p : params) p.set_grad(core::full(p.shape(), 1.0));
            };
            auto line = [&](const char* figure, double value) {
                fmt::print(
                    "{{\"bench\":\"allreduce\",\"model\":\"{}\",\"ranks\":{},\"params\":{},\"mb\":{:.2f},"
                    "\"figure\":\"{}\",\"value\":{:.4g}}}\n",
                    name, dist::size(), numel, 4.0 * static_cast<double>(numel) / 1e6, figure, value);
            };

            const core::Tensor flat = core::full({numel}, 1.0);
            std::vector<double> flat_ms;
            for (int r = 0; r < repeats + 1; ++r) flat_ms.push_back(time_ms([&] { dist::all_reduce_sum(flat); }));
            flat_ms.erase(flat_ms.begin());  // the first one sets up MPI's buffers
            line("flat_ms", median(flat_ms));

            dist::ReducerOptions options = dist::ReducerOptions::from_environment();
            options.overlap = false;
            dist::GradientReducer reducer(params, options);
            std::vector<double> reducer_ms;
            for (int r = 0; r < repeats + 1; ++r) {
                give_gradients();
                reducer_ms.push_back(time_ms([&] { reducer.finish(); }));
            }
            reducer_ms.erase(reducer_ms.begin());
            line("reducer_ms", median(reducer_ms));
            line("buckets", static_cast<double>(reducer.num_buckets()));
            // every rank added ones: each gradient must now be the number of ranks
            const double expect = dist::size();
            for (const auto& p : params)
                if (const double got = p.grad().reshape({-1}).at({0}); got != expect)
                    fail<ValueError>("bench_allreduce: a reduced gradient is {}, expected {}", got, expect);
        }
    } catch (const std::exception& e) {
        return dist::report_error(e.what());
    }
    return 0;
}
