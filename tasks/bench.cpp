#include "tasks/bench.hpp"

#include "autograd/autograd.hpp"
#include "core/blas.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;

// ---- presets ------------------------------------------------------------------------------------

namespace {
// Seed 000's sizes: key/query/value sizes, the FFN input and the norm shape all follow D.
nn::TransformerOptions sizes(int64_t D, int64_t ffn, int64_t heads, int64_t layers, double dropout) {
    return {.key_size = D,
            .query_size = D,
            .value_size = D,
            .num_hiddens = D,
            .norm_shape = D,
            .ffn_num_input = D,
            .ffn_num_hiddens = ffn,
            .num_heads = heads,
            .num_layers = layers,
            .dropout = dropout,
            .use_bias = false};
}

BenchPreset make_preset(std::string name, std::string task, int64_t src_vocab, int64_t tgt_vocab,
                        nn::TransformerOptions transformer, int64_t batch, int64_t steps, int64_t repeats,
                        int64_t warmup) {
    BenchPreset p;
    p.name = std::move(name);
    p.config = {.task = std::move(task),
                .src_vocab_size = src_vocab,
                .tgt_vocab_size = tgt_vocab,
                .num_steps = steps,
                .transformer = transformer};
    p.batch_size = batch;
    p.num_steps = steps;
    p.repeats = repeats;
    p.warmup = warmup;
    return p;
}
}  // namespace

const std::vector<std::string>& bench_preset_names() {
    static const std::vector<std::string> names = {"d2l", "copy", "small", "base"};
    return names;
}

BenchPreset bench_preset(const std::string& name) {
    // repeats and warm-up shrink with the model so every preset takes a minute or less
    if (name == "d2l") return make_preset(name, "translate", 184, 201, sizes(32, 64, 4, 2, 0.1), 64, 10, 30, 3);
    if (name == "copy") return make_preset(name, "copy", 11, 11, sizes(32, 64, 8, 2, 0.0), 30, 10, 30, 3);
    if (name == "small") return make_preset(name, "translate", 8000, 8000, sizes(256, 1024, 8, 3, 0.1), 64, 32, 5, 1);
    if (name == "base") return make_preset(name, "translate", 8000, 8000, sizes(512, 2048, 8, 6, 0.1), 32, 32, 3, 1);
    fail<ValueError>("bench: unknown preset '{}' (available: {})", name, fmt::join(bench_preset_names(), ", "));
}

// ---- data ---------------------------------------------------------------------------------------------

std::vector<int64_t> bench_valid_lengths(uint64_t seed, int64_t n, int64_t T) {
    if (T < 1) fail<ValueError>("bench: num_steps must be positive, got {}", T);
    // splitmix64 (Steele, Lea & Flood 2014): a Weyl sequence through a bijective mixer
    uint64_t state = seed;
    std::vector<int64_t> out(n);
    for (auto& len : out) {
        state += 0x9e3779b97f4a7c15ULL;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        len = 1 + static_cast<int64_t>(z % static_cast<uint64_t>(T));
    }
    return out;
}

Batch bench_batch(const BenchPreset& p, core::Generator& gen) {
    const int64_t B = p.batch_size, T = p.num_steps;
    constexpr int64_t kBos = 2, kFirstWord = 4;  // d2l's ids: <unk> 0, <pad> 1, <bos> 2, <eos> 3
    Batch out;
    out.enc_X = core::randint({B, T}, kFirstWord, p.config.src_vocab_size, gen);  // (B, S)
    out.label = core::randint({B, T}, kFirstWord, p.config.tgt_vocab_size, gen);  // (B, T)
    // source lengths from the first B draws, target lengths from the next B
    const std::vector<int64_t> lens = bench_valid_lengths(p.seed, 2 * B, T);
    out.enc_valid = core::from_vector(std::vector<int64_t>(lens.begin(), lens.begin() + B), {B});
    out.label_valid = core::from_vector(std::vector<int64_t>(lens.begin() + B, lens.end()), {B});
    // d2l: dec_input = cat([<bos>, Y[:, :-1]], 1) (teacher forcing)
    const Tensor bos_col = core::full({B, 1}, static_cast<double>(kBos), core::DType::int64);
    out.dec_in = core::concat({bos_col, out.label.slice(1, 0, T - 1)}, 1);  // (B, T)
    return out;
}

// ---- measuring ------------------------------------------------------------------------------------------

namespace {
using Clock = std::chrono::steady_clock;

// CPU time of the whole process (all threads) in ms.
double process_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
    double wall_ms = 0;  ///< median wall-clock time
    double cpu_ms = 0;   ///< median process CPU time (every thread, spinning included)
};

// Runs `body` warmup times untimed, then `repeats` times; the medians in ms.
// The median, not the mean: on a shared machine a few runs are slowed by
// other processes, and the median ignores them.
Timing median_ms(int64_t warmup, int64_t repeats, const std::function<void()>& body) {
    for (int64_t i = 0; i < warmup; ++i) body();
    std::vector<double> wall, cpu;
    for (int64_t i = 0; i < repeats; ++i) {
        const auto start = Clock::now();
        const double cpu_start = process_cpu_ms();
        body();
        wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        cpu.push_back(process_cpu_ms() - cpu_start);
    }
    return {median(wall), median(cpu)};
}

double peak_rss_mb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports kilobytes
}

double round_to(double x, int decimals) {
    const double scale = std::pow(10.0, decimals);
    return std::round(x * scale) / scale;
}

// Builds the model, tells `on_model` its parameter count, then measures every
// figure in order, handing each to `report` as soon as it is known.
void measure(const BenchPreset& p, int64_t repeats, const std::function<void(int64_t)>& on_model,
             const std::function<void(const BenchFigure&)>& report, bool profile = false) {
    if (repeats < 0) fail<ValueError>("bench: repeats must be positive (0: the preset's default), got {}", repeats);
    if (repeats == 0) repeats = p.repeats;
    core::Generator gen(p.seed);
    const auto model = build_model(p.config, gen);
    const Batch batch = bench_batch(p, gen);
    optim::Adam optimizer(model->named_parameters(), {.lr = 0.005});
    on_model(model->num_parameters());

    // train step: d2l's train_seq2seq body
    model->train();
    auto train_step = [&] {
        Variable logits = model->forward(batch.enc_X, batch.dec_in, batch.enc_valid);             // (B, T, V)
        Variable loss = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid);        // (B)
        autograd::sum(loss).backward();
        autograd::profile_mark();  // clipping and the update record no ops: their own entry
        const auto t0 = std::chrono::steady_clock::now();
        optim::clip_grad_norm(optimizer.parameters(), 1.0);
        optimizer.step();
        optimizer.zero_grad();
        if (autograd::profiling())
            autograd::profile_phase("[clip + Adam]", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    const Timing train = median_ms(p.warmup, repeats, train_step);
    const double train_ms = train.wall_ms;
    report({"train_step_ms", round_to(train_ms, 3)});
    report({"train_step_cpu_ms", round_to(train.cpu_ms, 3)});
    if (profile) {  // the same steps again, op by op; the timed figures above ran without the profiler
        autograd::profile_reset();
        autograd::ProfileGuard guard;
        for (int64_t i = 0; i < repeats; ++i) {
            autograd::profile_mark();
            train_step();
        }
        std::fprintf(stderr, "where a training step's time goes (preset %s, %lld steps):\n%s", p.name.c_str(),
                     static_cast<long long>(repeats), autograd::profile_table(repeats).c_str());
    }

    // evaluation forward pass: no dropout, no graph
    model->eval();
    const double eval_ms = median_ms(p.warmup, repeats, [&] {
        autograd::NoGradGuard no_grad;
        Variable logits = model->forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
    }).wall_ms;
    report({"forward_eval_ms", round_to(eval_ms, 3)});

    // greedy decoding of the whole batch; an <eos> id of -1 never matches, so
    // every run feeds exactly T tokens through the KV cache
    const DecodeOptions decode{.bos = 2, .eos = -1, .max_steps = p.num_steps};
    const double decode_ms = median_ms(p.warmup, repeats, [&] {
        const std::vector<Decoded> out = greedy_decode(*model, batch.enc_X, batch.enc_valid, decode);
    }).wall_ms;
    report({"greedy_decode_ms", round_to(decode_ms, 3)});

    const std::vector<double> lens = batch.label_valid.to_vector();
    double tokens = 0;
    for (double n : lens) tokens += n;
    report({"train_tokens_per_s", round_to(tokens / (train_ms * 1e-3), 1)});
    report({"peak_rss_mb", round_to(peak_rss_mb(), 1)});
}
}  // namespace

std::vector<BenchFigure> measure_model(const BenchPreset& preset, int64_t repeats) {
    std::vector<BenchFigure> out;
    measure(preset, repeats, [](int64_t) {}, [&](const BenchFigure& f) { out.push_back(f); });
    return out;
}

int run_model_bench(const std::string& preset_name, int threads, int64_t repeats, bool profile) {
    if (threads < 0) fail<ValueError>("bench: --threads must be positive (0: all cores), got {}", threads);
    if (repeats < 0) fail<ValueError>("bench: --repeats must be positive (0: the preset's default), got {}", repeats);
    const BenchPreset preset = bench_preset(preset_name);
    if (threads > 0) core::set_num_threads(threads);

    // ordered_json keeps the keys in the order written, so lines read the same every time
    using Json = nlohmann::ordered_json;
    auto line = [&](const char* figure) {
        return Json{{"engine", "tformer"}, {"preset", preset.name}, {"threads", core::get_num_threads()}, {"figure", figure}};
    };
    auto print = [](const Json& j) {
        std::fputs((j.dump() + "\n").c_str(), stdout);
        std::fflush(stdout);  // one line per figure as it comes, for long presets
    };

    // what decides the speed of the products: the OpenBLAS kernel set and whether the user forced one
    auto print_info = [&](int64_t parameters) {
        const char* coretype = std::getenv("OPENBLAS_CORETYPE");
        Json info = line("info");
        info["openblas_core"] = core::blas::core_name();
        info["openblas_coretype"] = coretype != nullptr ? coretype : "";
        info["parameters"] = parameters;
        info["batch"] = preset.batch_size;
        info["num_steps"] = preset.num_steps;
        info["repeats"] = repeats > 0 ? repeats : preset.repeats;
        info["warmup"] = preset.warmup;
        info["decode"] = "kv-cache";
        print(info);
    };
    measure(
        preset, repeats, print_info,
        [&](const BenchFigure& f) {
            Json j = line(f.figure.c_str());
            j["value"] = f.value;
            print(j);
        },
        profile);
    return 0;
}

}  // namespace tformer::tasks
