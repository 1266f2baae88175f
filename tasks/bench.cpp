#include "tasks/bench.hpp"

#include "tasks/batch_translate.hpp"

#include "autograd/autograd.hpp"
#include "core/blas.hpp"
#include "core/core.hpp"
#include "core/file.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "tasks/corpus.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/run_plan.hpp"
#include "tasks/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <time.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;

// ---- presets ------------------------------------------------------------------------------------

namespace {
// Seed 000's sizes: key/query/value sizes, the FFN input and the norm shape all follow D.
// Every preset runs the fused layers: the bench measures tformer's fast path.
nn::TransformerOptions sizes(int64_t D, int64_t ffn, int64_t heads, int64_t layers, double dropout) {
    return nn::TransformerOptions{.ffn_num_hiddens = ffn,
                                  .num_heads = heads,
                                  .num_layers = layers,
                                  .dropout = dropout,
                                  .use_bias = false,
                                  .fused = true}
        .with_width(D);
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
    static const std::vector<std::string> names = {"d2l", "copy", "small", "base", "translate"};
    return names;
}

BenchPreset bench_preset(const std::string& name) {
    // repeats and warm-up shrink with the model so every preset takes a minute or less
    if (name == "d2l") return make_preset(name, "translate", 184, 201, sizes(32, 64, 4, 2, 0.1), 64, 10, 30, 3);
    if (name == "copy") return make_preset(name, "copy", 11, 11, sizes(32, 64, 8, 2, 0.0), 30, 10, 30, 3);
    if (name == "small") return make_preset(name, "translate", 8000, 8000, sizes(256, 1024, 8, 3, 0.1), 64, 32, 5, 1);
    if (name == "base") return make_preset(name, "translate", 8000, 8000, sizes(512, 2048, 8, 6, 0.1), 32, 32, 3, 1);
    if (name == "translate") {
        // the default preset of `tformer train translate` (tasks/run_plan.hpp), batch for batch;
        // the vocabulary sizes are set when SentencePiece has been trained (bench_batches)
        const RunPlan plan = preset_plan("translate", "default");
        BenchPreset p = make_preset(name, "translate", 0, 0, plan.model.transformer, 0, plan.model.num_steps, 20, 3);
        p.config = plan.model;
        p.seed = plan.seed;
        p.corpus = true;
        p.vocab_size = plan.vocab_size;
        p.batch_tokens = plan.batch_tokens;
        p.val_sentences = plan.val_sentences;
        p.label_smoothing = plan.train.label_smoothing;
        return p;
    }
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

// Random presets weight each real position 1/T (d2l's masked loss summed
// over the batch; PyTorch's side computes it as d2l does, logits first), the
// corpus preset 1/tokens with label smoothing (the default translation run).
Variable bench_step_loss(nn::EncoderDecoder& model, const Batch& batch, const BenchPreset& p) {
    if (!p.corpus) return fused_output_loss(model, batch, 1.0 / static_cast<double>(batch.label.size(1)), 0.0);
    const double tokens = core::sum(batch.label_valid.to(core::DType::float64)).item();
    return fused_output_loss(model, batch, 1.0 / tokens, p.label_smoothing);
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

namespace {
// The first `count` batches of epoch 0 of the default translation run's data
// pipeline (apps/commands.cpp: train_translate_corpus), with seed p.seed.
std::vector<Batch> corpus_batches(BenchPreset& p, int64_t count, const std::string& data) {
    const Corpus corpus = load_corpus({.path = data.empty() ? default_fra_eng_path() : data,
                                       .val_sentences = p.val_sentences,
                                       .seed = p.seed,
                                       .sample_size = p.sample_size});
    std::vector<std::string> sentences;  // the joint vocabulary learns from both sides
    for (const auto& pair : corpus.train) sentences.push_back(pair.src);
    for (const auto& pair : corpus.train) sentences.push_back(pair.tgt);
    const auto sp = SentencePieceTokenizer::train(sentences, {.vocab_size = p.vocab_size,
                                                              .model_type = "bpe",
                                                              .seed = static_cast<uint32_t>(p.seed),
                                                              .threads = std::max(1, core::get_num_threads())});
    const TokenizerPair tok{sp, sp};
    auto encoded = std::make_shared<EncodedPairs>(encode_pairs(corpus.train, tok, p.num_steps));
    const BucketBatcher batcher(encoded, p.batch_tokens, p.seed);
    p.config.src_vocab_size = p.config.tgt_vocab_size = sp->size();
    const std::vector<std::vector<int64_t>> plan = batcher.epoch_plan(0);
    std::vector<Batch> out;
    for (int64_t i = 0; i < count; ++i) out.push_back(batcher.batch(plan[static_cast<size_t>(i) % plan.size()]));
    return out;
}

using Json = nlohmann::ordered_json;

Json tensor_json(const Tensor& t) {  // int64 (B) or (B, T) as nested lists
    const std::vector<int64_t> v = t.to_vector<int64_t>();
    if (t.dim() == 1) return v;
    Json rows = Json::array();
    const int64_t cols = t.size(1);
    for (int64_t r = 0; r < t.size(0); ++r)
        rows.push_back(std::vector<int64_t>(v.begin() + r * cols, v.begin() + (r + 1) * cols));
    return rows;
}

Tensor tensor_from_json(const Json& j, const std::string& path) {
    if (!j.is_array() || j.empty()) fail<IOError>("bench: {}: a batch holds an empty or non-list tensor", path);
    if (!j.front().is_array())
        return core::from_vector(j.get<std::vector<int64_t>>(), {static_cast<int64_t>(j.size())});
    std::vector<int64_t> flat;
    const auto cols = static_cast<int64_t>(j.front().size());
    for (const Json& row : j) {
        if (static_cast<int64_t>(row.size()) != cols) fail<IOError>("bench: {}: rows of different lengths", path);
        for (const Json& v : row) flat.push_back(v.get<int64_t>());
    }
    return core::from_vector(flat, {static_cast<int64_t>(j.size()), cols});
}
}  // namespace

std::vector<Batch> bench_batches(BenchPreset& p, int64_t count, const std::string& data) {
    if (p.corpus) return corpus_batches(p, count, data);
    core::Generator gen(p.seed);
    (void)build_model(p.config, gen);  // measure_model draws its batch after the weights: the same draws
    const Batch batch = bench_batch(p, gen);
    return std::vector<Batch>(static_cast<size_t>(count), batch);
}

void save_bench_batches(const std::string& path, const BenchPreset& p, const std::vector<Batch>& batches) {
    Json j{
        {"preset", p.name}, {"src_vocab_size", p.config.src_vocab_size}, {"tgt_vocab_size", p.config.tgt_vocab_size}};
    Json list = Json::array();
    for (const Batch& b : batches)
        list.push_back({{"enc_X", tensor_json(b.enc_X)},
                        {"enc_valid", tensor_json(b.enc_valid)},
                        {"dec_in", tensor_json(b.dec_in)},
                        {"label", tensor_json(b.label)},
                        {"label_valid", tensor_json(b.label_valid)}});
    j["batches"] = std::move(list);
    std::ofstream out(path);
    out << j.dump() << "\n";
    if (!out.flush()) fail<IOError>("bench: cannot write the batches to {}", path);
}

std::vector<Batch> load_bench_batches(const std::string& path, BenchPreset& p) {
    const std::string text = core::read_regular_file(path, "bench", "a batch file of tformer bench --save-batches");
    Json j;
    try {
        j = Json::parse(text);
        p.config.src_vocab_size = j.at("src_vocab_size").get<int64_t>();
        p.config.tgt_vocab_size = j.at("tgt_vocab_size").get<int64_t>();
        std::vector<Batch> out;
        for (const Json& b : j.at("batches"))
            out.push_back({.enc_X = tensor_from_json(b.at("enc_X"), path),
                           .enc_valid = tensor_from_json(b.at("enc_valid"), path),
                           .dec_in = tensor_from_json(b.at("dec_in"), path),
                           .label = tensor_from_json(b.at("label"), path),
                           .label_valid = tensor_from_json(b.at("label_valid"), path)});
        if (out.empty()) fail<IOError>("bench: {} holds no batches", path);
        return out;
    } catch (const nlohmann::json::exception& e) {
        fail<IOError>("bench: {} is not a batch file of tformer bench --save-batches ({})", path, e.what());
    }
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

// Σ 2mnk of the products in `calls`, in GFLOP.
double gflop_of(const std::vector<core::blas::GemmCall>& calls) {
    double flops = 0;
    for (const auto& c : calls) flops += c.flops();
    return flops * 1e-9;
}

// The time bare BLAS takes for `calls` one after the other (the median of a
// few replays, ms), on matrices of random numbers with tight leading
// dimensions: what the same products cost with nothing around them.
double replay_gemm_ms(const std::vector<core::blas::GemmCall>& calls, int64_t replays) {
    int64_t a_max = 1, b_max = 1, c_max = 1;
    bool any_f32 = false, any_f64 = false;
    for (const auto& c : calls) {
        a_max = std::max(a_max, c.m * c.k);
        b_max = std::max(b_max, c.k * c.n);
        c_max = std::max(c_max, c.m * c.n);
        (c.f64 ? any_f64 : any_f32) = true;
    }
    // operands only for the dtypes called: the float64 ones of a float32
    // model (twice the size of its largest logits) would show in peak RSS
    core::Generator gen(1);
    const auto operands = [&](core::DType dtype) {
        return std::array<Tensor, 3>{core::rand({a_max}, gen, dtype), core::rand({b_max}, gen, dtype),
                                     core::zeros({c_max}, dtype)};
    };
    const std::array<Tensor, 3> f32 = any_f32 ? operands(core::DType::float32) : std::array<Tensor, 3>{};
    const std::array<Tensor, 3> f64 = any_f64 ? operands(core::DType::float64) : std::array<Tensor, 3>{};
    const Tensor &a32 = f32[0], &b32 = f32[1], &c32 = f32[2], &a64 = f64[0], &b64 = f64[1], &c64 = f64[2];
    auto replay = [&] {
        for (const auto& c : calls) {
            const int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
            if (c.f64)
                core::blas::gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0, a64.data<double>(),
                                 std::max<int64_t>(1, lda), b64.data<double>(), std::max<int64_t>(1, ldb), 0.0,
                                 c64.data<double>(), std::max<int64_t>(1, c.n));
            else
                core::blas::gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a32.data<float>(),
                                 std::max<int64_t>(1, lda), b32.data<float>(), std::max<int64_t>(1, ldb), 0.0f,
                                 c32.data<float>(), std::max<int64_t>(1, c.n));
        }
    };
    return median_ms(1, replays, replay).wall_ms;
}

// What one kind of run (train step, forward, decoding) did: its time per run
// and the products it called over the logged runs.
struct Measured {
    Timing time;                              ///< per run
    std::vector<core::blas::GemmCall> gemms;  ///< every product of the logged runs
    int64_t runs = 0;
};

// Runs body(i) for i in [0, warmup) untimed, then for i in [warmup, warmup +
// repeats) timed. Fixed batches report the median run; a corpus preset's
// runs are different batches, so their mean (total / runs) is the figure.
// The products are logged afterwards, on untimed runs (logging costs a lock
// per product, which tiny products would feel): one run for a fixed batch,
// every timed batch again for a corpus preset.
Measured measure_runs(int64_t warmup, int64_t repeats, bool mean, const std::function<void(int64_t)>& body) {
    for (int64_t i = 0; i < warmup; ++i) body(i);
    std::vector<double> wall, cpu;
    for (int64_t i = warmup; i < warmup + repeats; ++i) {
        const auto start = Clock::now();
        const double cpu_start = process_cpu_ms();
        body(i);
        wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        cpu.push_back(process_cpu_ms() - cpu_start);
    }
    const int64_t logged = mean ? repeats : 1;
    core::blas::start_gemm_log();
    for (int64_t i = warmup; i < warmup + logged; ++i) body(i);
    Measured m{.time = {}, .gemms = core::blas::stop_gemm_log(), .runs = logged};
    if (mean) {
        m.time.wall_ms = std::accumulate(wall.begin(), wall.end(), 0.0) / static_cast<double>(repeats);
        m.time.cpu_ms = std::accumulate(cpu.begin(), cpu.end(), 0.0) / static_cast<double>(repeats);
    } else {
        m.time = {median(wall), median(cpu)};
    }
    return m;
}

// The GFLOP figures of one kind of run: its GEMM work, what it achieved, and
// what bare sgemm achieves on the same shapes.
void report_gflops(const char* what, const Measured& m, const std::function<void(const BenchFigure&)>& report) {
    const double per_run = gflop_of(m.gemms) / static_cast<double>(std::max<int64_t>(1, m.runs));
    const double bare_ms = replay_gemm_ms(m.gemms, 3) / static_cast<double>(std::max<int64_t>(1, m.runs));
    report({fmt::format("{}_gflop", what), round_to(per_run, 7)});
    report({fmt::format("{}_gflops", what), round_to(per_run / (m.time.wall_ms * 1e-3), 2)});
    report({fmt::format("{}_sgemm_gflops", what), round_to(bare_ms > 0 ? per_run / (bare_ms * 1e-3) : 0.0, 2)});
}

// Builds the model, tells `on_model` its parameter count, then measures every
// figure in order, handing each to `report` as soon as it is known.
void measure(const BenchPreset& p, int64_t repeats, const std::vector<Batch>& given,
             const std::function<void(int64_t)>& on_model, const std::function<void(const BenchFigure&)>& report,
             bool profile = false, bool train_only = false) {
    if (repeats < 0) fail<ValueError>("bench: repeats must be positive (0: the preset's default), got {}", repeats);
    if (repeats == 0) repeats = p.repeats;
    if (p.corpus && given.empty()) fail<ValueError>("bench: preset {} needs its batches (bench_batches)", p.name);
    core::Generator gen(p.seed);
    const auto model = build_model(p.config, gen);
    std::vector<Batch> batches = given;
    if (batches.empty()) batches.push_back(bench_batch(p, gen));  // random presets: drawn after the weights
    optim::Adam optimizer(model->named_parameters(), {.lr = 0.005});
    optimizer.allocate_state();  // next to the parameters, as tasks::train does
    on_model(model->num_parameters());
    const auto batch_at = [&](int64_t i) -> const Batch& { return batches[static_cast<size_t>(i) % batches.size()]; };

    // train step: d2l's train_seq2seq body
    model->train();
    auto train_step = [&](int64_t i) {
        const Batch& batch = batch_at(i);
        Variable loss = bench_step_loss(*model, batch, p);
        loss.backward();
        autograd::profile_mark();  // clipping and the update record no ops: their own entry
        const auto t0 = std::chrono::steady_clock::now();
        optim::clip_grad_norm(optimizer.parameters(), 1.0);
        optimizer.step();
        optimizer.zero_grad();
        if (autograd::profiling())
            autograd::profile_phase("[clip + Adam]",
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    const Measured train = measure_runs(p.warmup, repeats, p.corpus, train_step);
    const double train_ms = train.time.wall_ms;
    report({"train_step_ms", round_to(train_ms, 3)});
    report({"train_step_cpu_ms", round_to(train.time.cpu_ms, 3)});
    if (profile) {  // the same steps again, op by op; the timed figures above ran without the profiler
        autograd::profile_reset();
        autograd::ProfileGuard guard;
        for (int64_t i = 0; i < repeats; ++i) {
            autograd::profile_mark();
            train_step(p.warmup + i);
        }
        std::fprintf(stderr, "where a training step's time goes (preset %s, %lld steps):\n%s", p.name.c_str(),
                     static_cast<long long>(repeats), autograd::profile_table(repeats).c_str());
    }
    if (train_only) {
        report({"peak_rss_mb", round_to(peak_rss_mb(), 1)});
        return;
    }

    // evaluation forward pass: no dropout, no graph
    model->eval();
    const Measured eval = measure_runs(p.warmup, repeats, p.corpus, [&](int64_t i) {
        autograd::NoGradGuard no_grad;
        const Batch& batch = batch_at(i);
        Variable logits = model->forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
    });
    report({"forward_eval_ms", round_to(eval.time.wall_ms, 3)});
    report({"forward_eval_cpu_ms", round_to(eval.time.cpu_ms, 3)});  // steadier than wall time on a busy machine

    // greedy decoding of the whole batch; an <eos> id of -1 never matches, so
    // every run feeds exactly T tokens through the KV cache
    const Measured decode = measure_runs(p.warmup, repeats, p.corpus, [&](int64_t i) {
        const Batch& batch = batch_at(i);
        const DecodeOptions options{.bos = 2, .eos = -1, .max_steps = batch.label.size(1)};
        const std::vector<Decoded> out = greedy_decode(*model, batch.enc_X, batch.enc_valid, options);
    });
    report({"greedy_decode_ms", round_to(decode.time.wall_ms, 3)});
    report({"greedy_decode_cpu_ms", round_to(decode.time.cpu_ms, 3)});

    double tokens = 0;  // per timed step
    for (int64_t i = p.warmup; i < p.warmup + repeats; ++i)
        for (double n : batch_at(i).label_valid.to_vector()) tokens += n;
    tokens /= static_cast<double>(repeats);
    report({"train_tokens_per_s", round_to(tokens / (train_ms * 1e-3), 1)});
    report_gflops("train_step", train, report);
    report_gflops("forward_eval", eval, report);
    report_gflops("greedy_decode", decode, report);
    report({"peak_rss_mb", round_to(peak_rss_mb(), 1)});
}
}  // namespace

std::vector<BenchFigure> measure_model(const BenchPreset& preset, int64_t repeats, const std::vector<Batch>& batches) {
    std::vector<BenchFigure> out;
    measure(
        preset, repeats, batches, [](int64_t) {}, [&](const BenchFigure& f) { out.push_back(f); });
    return out;
}

int run_model_bench(const BenchOptions& o) {
    if (o.preset == "decode") return run_decode_bench(o);
    if (o.threads < 0) fail<ValueError>("bench: --threads must be positive (0: all cores), got {}", o.threads);
    if (o.repeats < 0)
        fail<ValueError>("bench: --repeats must be positive (0: the preset's default), got {}", o.repeats);
    BenchPreset preset = bench_preset(o.preset);
    if (o.threads > 0) core::set_num_threads(o.threads);
    const int64_t repeats = o.repeats > 0 ? o.repeats : preset.repeats;

    // the batches first: for the corpus preset they set the vocabulary sizes
    std::vector<Batch> batches;
    if (!o.load_batches.empty()) {
        batches = load_bench_batches(o.load_batches, preset);
    } else if (preset.corpus || !o.save_batches.empty()) {
        batches = bench_batches(preset, preset.warmup + repeats, o.data);
    }
    if (!o.save_batches.empty()) save_bench_batches(o.save_batches, preset, batches);
    if (!preset.corpus) batches.resize(std::min<size_t>(batches.size(), 1));  // one fixed batch

    // ordered_json keeps the keys in the order written, so lines read the same every time
    auto line = [&](const char* figure) {
        return Json{
            {"engine", "tformer"}, {"preset", preset.name}, {"threads", core::get_num_threads()}, {"figure", figure}};
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
        info["libxsmm_target"] = core::blas::xsmm_target();  // the float products it runs (core/blas.cpp)
        info["parameters"] = parameters;
        info["batch"] = preset.corpus ? Json("buckets of " + std::to_string(preset.batch_tokens) + " tokens")
                                      : Json(preset.batch_size);
        info["num_steps"] = preset.num_steps;
        info["vocab"] = preset.config.tgt_vocab_size;
        info["repeats"] = repeats;
        info["warmup"] = preset.warmup;
        info["decode"] = "kv-cache";
        print(info);
    };
    measure(
        preset, repeats, batches, print_info,
        [&](const BenchFigure& f) {
            Json j = line(f.figure.c_str());
            j["value"] = f.value;
            print(j);
        },
        o.profile, o.train_only);
    return 0;
}

// ---- decoding: --preset decode ----------------------------------------------------------------

namespace {
// The first n validation sentences of the default translation run.
std::vector<std::string> validation_sentences(const std::string& data, int64_t n) {
    const Corpus corpus = load_corpus({.path = data.empty() ? default_fra_eng_path() : data, .val_sentences = 1500});
    std::vector<std::string> out;
    for (const ValSentence& v : corpus.val)
        if (static_cast<int64_t>(out.size()) < n) out.push_back(v.src);
    return out;
}

// One configuration's figures: the list translated `repeats` times (after a
// warm-up), then once more with the products logged.
void measure_decoding(const std::string& name, ModelReplicas& models, const TokenizerPair& tok,
                      const std::vector<std::string>& sentences, const BatchTranslateOptions& options, int64_t repeats,
                      const std::function<void(const BenchFigure&)>& report) {
    int64_t target_tokens = 0;
    const Measured m = measure_runs(1, repeats, false, [&](int64_t) {
        target_tokens = 0;
        for (const Translation& t : translate_batches(models, tok, sentences, options))
            target_tokens +=
                static_cast<int64_t>(t.decoded.tokens.size()) +  // and <eos>, unless it ran out of steps
                (t.error.empty() && static_cast<int64_t>(t.decoded.tokens.size()) < options.translate.max_len);
    });
    const double seconds = m.time.wall_ms * 1e-3;
    report({name + "_ms", round_to(m.time.wall_ms, 1)});
    report({name + "_sentences_per_s", round_to(static_cast<double>(sentences.size()) / seconds, 1)});
    report({name + "_target_tokens_per_s", round_to(static_cast<double>(target_tokens) / seconds, 1)});
    const double work = gflop_of(m.gemms), bare_ms = replay_gemm_ms(m.gemms, 3);
    report({name + "_gflop", round_to(work, 3)});
    report({name + "_gflops", round_to(work / seconds, 2)});
    report({name + "_sgemm_gflops", round_to(work / (bare_ms * 1e-3), 2)});
    report({name + "_product_ratio", round_to(bare_ms / m.time.wall_ms, 3)});
}
}  // namespace

int run_decode_bench(const BenchOptions& o) {
    if (o.threads < 0) fail<ValueError>("bench: --threads must be positive (0: all cores), got {}", o.threads);
    if (o.sentences < 1 || o.batch_tokens < 1)
        fail<ValueError>("bench: --sentences and --batch-tokens must be at least 1, got {} and {}", o.sentences,
                         o.batch_tokens);
    if (o.threads > 0) core::set_num_threads(o.threads);
    const int threads = core::get_num_threads();
    const int64_t repeats = o.repeats > 0 ? o.repeats : 3;
    const auto t = load_translator(nn::load_safetensors(o.checkpoint), o.checkpoint, "bench");
    const std::vector<std::string> sentences = validation_sentences(o.data, o.sentences);
    if (!o.save_sentences.empty()) {
        std::ofstream out(o.save_sentences);
        for (const std::string& s : sentences) out << s << '\n';
        if (!out) fail<IOError>("bench: cannot write {}", o.save_sentences);
    }
    const auto print = [&](const char* figure, Json j) {
        Json line{{"engine", "tformer"}, {"preset", "decode"}, {"threads", threads}, {"figure", figure}};
        line.update(j);
        std::fputs((line.dump() + "\n").c_str(), stdout);
        std::fflush(stdout);
    };
    print("info", {{"openblas_core", core::blas::core_name()},
                   {"libxsmm_target", core::blas::xsmm_target()},
                   {"parameters", t->model->num_parameters()},
                   {"sentences", sentences.size()},
                   {"batch_tokens", o.batch_tokens},
                   {"repeats", repeats},
                   {"decode", "batched, kv-cache"}});
    const auto report = [&](const BenchFigure& f) { print(f.figure.c_str(), {{"value", f.value}}); };
    ModelReplicas models(*t->model, threads);
    const TranslateOptions translate{.max_len = t->info.config.num_steps};
    for (const auto& [name, beam] : {std::pair<std::string, int64_t>{"beam4", 4}, {"greedy", 1}}) {
        BatchTranslateOptions options{.translate = translate, .batch_tokens = o.batch_tokens, .threads = threads};
        options.translate.decode.beam = beam;
        measure_decoding(name, models, t->tok, sentences, options, repeats, report);
        if (threads > 1) {  // one batch at a time, its kernels on every thread
            options.threads = 1;
            const Measured one = measure_runs(
                1, repeats, false, [&](int64_t) { (void)translate_batches(models, t->tok, sentences, options); });
            report({name + "_one_batch_ms", round_to(one.time.wall_ms, 1)});
        }
    }
    report({"peak_rss_mb", round_to(peak_rss_mb(), 1)});
    return 0;
}

}  // namespace tformer::tasks
