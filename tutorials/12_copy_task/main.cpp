// Tutorial 12 · The copy task: seed 004's data, model, training with Adam and
// the Noam schedule, greedy decoding with the KV cache, and what the trained
// attention looks at.
//
// Follows seed 004 (004_a3b87e182ede5d90.txt): data_gen, Batch (tgt[:, :-1],
// tgt_y = tgt[:, 1:], ntokens), subsequent_mask, train_test (Adam, the
// cross-entropy criterion, zero_grad / backward / step) and inference_test
// (greedy decoding of [[1, 2, ..., 10]]); seed 000 (000_7dfff3ea5ac0d0a3.txt),
// 训练 (d2l's sizes and train_seq2seq: Adam, clipping, the masked loss) and
// 预测 (decoding from <bos>, one token at a time). Step 0 runs seed 004's own
// model — train_test and inference_test as written — from PyTorch's initial
// weights and batches (tests/fixtures/seed004_copy.safetensors) and compares
// every printed loss and the prediction; --literal runs them from tformer's
// own random initialisation instead, with the same checks on what they print
// (step 0 runs those checks too, so that the fault tests below reach them).
// Step 3 saves the trained model under the --out folder and a rerun loads it
// (see "the trained model, cached").
//
// tutorial-literal-test: timeout=120
// Read it with tutorials/12_copy_task/README.md.
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
// tutorial-languages: en zh
// tutorial-fault: init-xavier | tformer's initialisation: every Linear weight and bias lies in
// tutorial-fault: data-gen-draws-zero | tformer's data_gen: 10 batches
// tutorial-fault: labels-not-shifted | every printed loss equals
// tutorial-fault: inference-reads-first-position | one teacher-forced pass over the prediction
#include "common/compare.hpp"
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/loss.hpp"
#include "nn/safetensors.hpp"
#include "nn/transformer.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "tasks/distributed.hpp"
#include "tasks/plot.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

// Seed 004's copy task: vocabulary 11, sequences of 10 that start with symbol 1.
constexpr int64_t kVocab = 11;
constexpr int64_t kLength = 10;
// `tformer train copy`'s preset (apps/commands.cpp, kCopy) and its default seed.
constexpr uint64_t kSeed = 0;
constexpr int64_t kBatch = 30, kBatchesPerEpoch = 20, kEpochs = 80, kWarmup = 100;
constexpr double kPeakLr = 0.005, kClip = 1.0;

// Two id tensors with the same shape and the same ids.
bool same_ids(const c::Tensor& a, const c::Tensor& b) {
    return a.shape() == b.shape() && a.contiguous().to_vector<int64_t>() == b.contiguous().to_vector<int64_t>();
}

std::string join(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

std::vector<int64_t> row(const c::Tensor& ids, int64_t b) { return ids.select(0, b).contiguous().to_vector<int64_t>(); }

// Attention weights in whole percent, which read better than 1e-13s.
c::Tensor percent(const c::Tensor& w) { return c::add(c::mul(w, 100.0), 0.5).to(DType::int64); }

// The mean of v[from .. to).
double mean_of(const std::vector<double>& v, size_t from, size_t to) {
    return std::accumulate(v.begin() + from, v.begin() + to, 0.0) / static_cast<double>(to - from);
}

// A sentence about this run rather than the lesson (whether the model was trained here or loaded, how
// long training took): printed in full, but --no-prose leaves it out, so that a run that trained and
// one that loaded print the same values (tutorial:12_copy_task:languages runs twice into one folder).
void note_about_this_run(const Phrase& sentence) { note(Phrase{sentence.text, {}}); }

// The model of `tformer train copy`: seed 000's sizes with dropout 0.
tasks::ModelConfig copy_config(bool use_bias = false) {
    tasks::ModelConfig config;
    config.task = "copy";
    config.src_vocab_size = config.tgt_vocab_size = kVocab;
    config.num_steps = kLength;
    config.transformer = tutorial::block_options({.num_hiddens = 32,
                                                  .ffn_num_hiddens = 64,
                                                  .num_heads = 4,
                                                  .num_layers = 2,
                                                  .dropout = 0.0,
                                                  .use_bias = use_bias});
    return config;
}

// The Annotated Transformer's rate(), written out (seed 004 imports LambdaLR but never uses it):
//   rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5),  step 0 counted as 1
double rate(int64_t step, int64_t d_model, double factor, int64_t warmup) {
    const double s = step == 0 ? 1.0 : static_cast<double>(step);
    return factor * (std::pow(static_cast<double>(d_model), -0.5) *
                     std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5)));
}

// ---- seed 004's model, as written ------------------------------------------------------------
//
// Transform(encoder, decoder, src_embed, tgt_embed, d_model=32, tgt_vocab=11, N=2)
// with h = 8 heads and d_ff = 64, written with autograd ops and its weights
// held by their PyTorch names, so a state from PyTorch loads one to one:
//   encoders.{0,1}.multi_attn.linears.{0..3}   four Linear(32, 32) with biases
//   encoders.{0,1}.layer_norm.{0,1}.{a_2,b_2}  seed 004's LayerNorm (unbiased std, eps 1e-6)
//   encoders.{0,1}.ffn.{0,2}                   Linear(32, 64), ReLU, Linear(64, 32)
//   decoders.{0,1}.{mask,cross}_multi_attn, .ffn, .layer_norm.{0,1,2}
//   src_embed.lut, tgt_embed.lut               Embedding(11, 32), multiplied by √32
//   proj                                       Linear(32, 11), then log_softmax (generator)
// No mask in the encoder and none in the cross-attention, as the document's code.
class Seed004Transform {
public:
    static constexpr int64_t kModel = 32, kHeads = 8;

    /// The state with the document's deepcopies filled in: `init` holds only
    /// encoders.0.*, decoders.0.* (one attention) and the rest.
    explicit Seed004Transform(const nn::StateDict& init) {
        for (const auto& [name, value] : init) {
            std::vector<std::string> copies = {name};
            if (name.starts_with("encoders.0.")) copies.push_back("encoders.1." + name.substr(11));
            if (name.starts_with("decoders.0.")) copies.push_back("decoders.1." + name.substr(11));
            for (const std::string& copy : std::vector<std::string>(copies)) {
                const size_t at = copy.find("mask_multi_attn");
                if (at != std::string::npos) copies.push_back(copy.substr(0, at) + "cross" + copy.substr(at + 4));
            }
            for (const std::string& copy : copies) params.emplace(copy, Variable(value.clone(), true));
        }
    }

    optim::NamedParameters named_parameters() const { return {params.begin(), params.end()}; }

    Variable encode(const c::Tensor& src) const {
        Variable x = embed("src_embed", src);
        for (const char* l : {"encoders.0.", "encoders.1."}) {
            const std::string e = l;
            const Variable x2 = norm(x + attention(x, x, c::Tensor(), e + "multi_attn"), e + "layer_norm.0");
            x = norm(x2 + ffn(x2, e + "ffn"), e + "layer_norm.1");
        }
        return x;  // memory (B, S, 32)
    }
    Variable decode(const Variable& memory, const c::Tensor& tgt, const c::Tensor& mask) const {
        Variable x = embed("tgt_embed", tgt);
        for (const char* l : {"decoders.0.", "decoders.1."}) {
            const std::string d = l;
            const Variable x2 = norm(x + attention(x, x, mask, d + "mask_multi_attn"), d + "layer_norm.0");
            const Variable x4 =
                norm(x2 + attention(x2, memory, c::Tensor(), d + "cross_multi_attn"), d + "layer_norm.1");
            x = norm(x4 + ffn(x4, d + "ffn"), d + "layer_norm.2");
        }
        return x;  // (B, T, 32)
    }
    Variable generator(const Variable& x) const { return ag::log_softmax(linear(x, "proj")); }
    Variable forward(const c::Tensor& src, const c::Tensor& tgt, const c::Tensor& mask) const {
        return generator(decode(encode(src), tgt, mask));
    }

    std::map<std::string, Variable> params;

private:
    const Variable& p(const std::string& name) const { return params.at(name); }
    Variable linear(const Variable& x, const std::string& name) const {
        return ag::linear(x, p(name + ".weight"), p(name + ".bias"));
    }
    Variable embed(const std::string& name, const c::Tensor& ids) const {  // Embeddings, then positional_encoding
        nn::PositionalEncoding pe({.num_hiddens = kModel, .max_len = 64});
        return ag::embedding(p(name + ".lut.weight"), ids) * std::sqrt(static_cast<double>(kModel)) +
               Variable(pe.P.slice(1, 0, ids.size(1)));
    }
    Variable heads(const Variable& x) const {  // view(nbatches, -1, h, d_k).transpose(1, 2)
        const auto s = x.shape();
        return ag::transpose(ag::reshape(x, {s[0], s[1], kHeads, kModel / kHeads}), 1, 2);
    }
    Variable attention(const Variable& query, const Variable& kv, const c::Tensor& mask,
                       const std::string& name) const {
        const Variable q = heads(linear(query, name + ".linears.0")), k = heads(linear(kv, name + ".linears.1")),
                       v = heads(linear(kv, name + ".linears.2"));
        const Variable scores = ag::matmul(q, ag::transpose(k, 2, 3)) / std::sqrt(static_cast<double>(kModel / kHeads));
        const Variable w = mask.defined() ? ag::masked_softmax_by_mask(scores, mask.unsqueeze(1)) : ag::softmax(scores);
        const Variable o = ag::contiguous(ag::transpose(ag::matmul(w, v), 1, 2));  // (B, T, h, d_k)
        const auto s = o.shape();
        return linear(ag::reshape(o, {s[0], s[1], kModel}), name + ".linears.3");
    }
    Variable norm(const Variable& x, const std::string& name) const {  // a_2 (x - mean) / (std + eps) + b_2
        const Variable mean = ag::mean(x, {-1}, true), std = ag::sqrt(ag::var(x, {-1}, true, true));
        return p(name + ".a_2") * (x - mean) / (std + 1e-6) + p(name + ".b_2");
    }
    Variable ffn(const Variable& x, const std::string& name) const {
        return linear(ag::relu(linear(x, name + ".0")), name + ".2");
    }
};

// Seed 004's data_gen batch as Batch sees it: src = tgt = data, tgt[:, :-1] in,
// tgt[:, 1:] out, make_std_mask(tgt[:, :-1], 0).
struct Seed004Batch {
    c::Tensor src, tgt, tgt_y, tgt_mask;
};
Seed004Batch seed004_batch(const c::Tensor& data) {
    const int64_t L = data.size(1);
    Seed004Batch b{data, data.slice(1, 0, L - 1).contiguous(), data.slice(1, 1, L).contiguous(), {}};
    b.tgt_mask = c::logical_and(c::ne(b.tgt, 0.0).unsqueeze(1), nn::subsequent_mask(L - 1));  // (B, T, T)
    return b;
}

// How a batch is made from data_gen's data: seed004_batch (or, for a test, a wrong variant).
using BatchMaker = Seed004Batch (*)(const c::Tensor& data);

// How a Linear(in, out) of seed 004's model gets its first weight and bias, stored under `name`.
using LinearInit = void (*)(nn::StateDict& init, const std::string& name, int64_t in, int64_t out, c::Generator& g);

// PyTorch's: U(±1/√in) for weight and bias, which is nn::Linear's own initialisation.
void pytorch_linear_init(nn::StateDict& init, const std::string& name, int64_t in, int64_t out, c::Generator& g) {
    nn::Linear l({.in_features = in, .out_features = out}, g);
    init[name + ".weight"] = l.weight.value();
    init[name + ".bias"] = l.bias.value();
}

namespace faults {
Seed004Batch batch_with_unshifted_labels(const c::Tensor& data);
void xavier_linear_init(nn::StateDict& init, const std::string& name, int64_t in, int64_t out, c::Generator& g);
}  // namespace faults

// What train_test prints, and the same losses recomputed another way.
struct TrainTest {
    std::vector<double> losses;   // the ten printed losses
    std::vector<double> by_hand;  // -mean log p(data[:, t + 1]) read off the model's log-probabilities
};

// train_test's loop: for each batch, zero_grad, forward, CrossEntropyLoss on
// the log-probabilities (the document applies log_softmax twice: harmless,
// log_softmax(log_softmax(z)) = log_softmax(z)), backward, Adam step. Beside
// each printed loss it reads the same number off the log-probabilities by a
// loop, with the labels taken from the data directly (data[b, t + 1]), not
// from Batch: the test that Batch shifted them. `make_batch` is seed004_batch
// (or, for the test, a wrong variant).
TrainTest seed004_train_test(Seed004Transform& model, const std::vector<c::Tensor>& batches,
                             BatchMaker make_batch = seed004_batch) {
    optim::Adam optimizer(model.named_parameters(), {.lr = 1e-3});
    TrainTest out;
    for (const c::Tensor& data : batches) {
        const Seed004Batch batch = make_batch(data);
        optimizer.zero_grad();
        const Variable outputs = model.forward(batch.src, batch.tgt, batch.tgt_mask);  // (B, T, V) log-probabilities
        const Variable loss = ag::cross_entropy(ag::reshape(outputs, {-1, kVocab}), batch.tgt_y.reshape({-1}));
        out.losses.push_back(loss.item());
        line("    loss:  tensor({:.4f}, grad_fn=<NllLossBackward0>)", loss.item());
        const int64_t B = data.size(0), T = data.size(1) - 1;
        double nll = 0;
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < T; ++t)
                nll -= outputs.value().at({b, t, static_cast<int64_t>(data.at({b, t + 1}))});
        out.by_hand.push_back(nll / static_cast<double>(B * T));
        loss.backward();
        optimizer.step();
    }
    return out;
}

// The stored weights of seed 004's Transform as PyTorch's default initialisation draws them (Linear:
// U(±1/√in) for weight and bias, Embedding: N(0, 1), LayerNorm: ones and zeros), from `g`: encoders.0,
// decoders.0 with one attention (the deepcopies are Seed004Transform's), the embeddings and proj.
nn::StateDict seed004_default_init(c::Generator& g, LinearInit linear = pytorch_linear_init) {
    nn::StateDict init;
    auto linear_init = [&](const std::string& name, int64_t in, int64_t out) { linear(init, name, in, out, g); };
    for (const std::string a : {"encoders.0.multi_attn", "decoders.0.mask_multi_attn"})
        for (int i = 0; i < 4; ++i) linear_init(fmt::format("{}.linears.{}", a, i), 32, 32);
    for (const std::string l : {"encoders.0", "decoders.0"}) {
        linear_init(l + ".ffn.0", 32, 64);
        linear_init(l + ".ffn.2", 64, 32);
        for (int i = 0; i < (l == "encoders.0" ? 2 : 3); ++i) {
            init[fmt::format("{}.layer_norm.{}.a_2", l, i)] = c::ones({32});
            init[fmt::format("{}.layer_norm.{}.b_2", l, i)] = c::zeros({32});
        }
    }
    init["src_embed.lut.weight"] = c::randn({kVocab, 32}, g);
    init["tgt_embed.lut.weight"] = c::randn({kVocab, 32}, g);
    linear_init("proj", 32, kVocab);
    return init;
}

// Seed 004's data_gen(11, 3, 10): ten batches (3, 10) of symbols 1..10, each sequence starting with 1.
// `lowest` is the smallest symbol drawn: 1, as torch.randint(1, V) (0 for the test's wrong variant).
std::vector<c::Tensor> seed004_data_gen(c::Generator& g, int64_t lowest = 1) {
    std::vector<c::Tensor> batches;
    for (int i = 0; i < 10; ++i) {
        c::Tensor data = c::zeros({3, 10}, DType::int64);
        for (int64_t b = 0; b < 3; ++b)
            for (int64_t j = 0; j < 10; ++j)
                data.set({b, j}, j == 0 ? 1.0 : static_cast<double>(lowest + g.randint(kVocab - lowest)));
        batches.push_back(data);
    }
    return batches;
}

// Where inference_test reads the next symbol: the document's out[:, -1], the newest position (or, for
// the test, out[:, 0]).
enum class ReadPosition { last, first };

// inference_test's loop: encode [[1..10]], then 9 times decode the whole
// prefix with subsequent_mask and append the argmax of the last position.
std::vector<int64_t> seed004_inference_test(const Seed004Transform& model, c::Tensor* memory_out = nullptr,
                                            ReadPosition read = ReadPosition::last) {
    ag::NoGradGuard no_grad;
    const c::Tensor src = c::arange(1, 11, 1, DType::int64).view({1, 10});
    const Variable memory = model.encode(src);
    line("    memory shape:  torch.Size([{}])", fmt::join(memory.shape(), ", "));
    if (memory_out) *memory_out = memory.value();
    std::vector<int64_t> tgt = {0};
    for (int i = 0; i < 9; ++i) {
        const int64_t T = static_cast<int64_t>(tgt.size());
        const Variable out = model.decode(memory, c::from_vector(tgt, {1, T}), nn::subsequent_mask(T));
        line("    out shape:  torch.Size([{}])", fmt::join(out.shape(), ", "));
        const int64_t position = read == ReadPosition::last ? T - 1 : 0;
        const c::Tensor prob = model.generator(ag::select(out, 1, position)).value();  // (1, V)
        tgt.push_back(static_cast<int64_t>(c::argmax(prob, 1).item()));
    }
    line("    Example Untrained Model Prediction: tensor([[{}]])", fmt::join(tgt, ", "));
    return tgt;
}

// ---- checks on what seed 004's code draws and prints: step 0 and --literal ------------------------

// The rules of PyTorch's default initialisation, which seed 004's Transform gets: a Linear(in, out)'s
// weight and bias uniform in ±1/√in, an Embedding N(0, 1), a LayerNorm's a_2 = 1 and b_2 = 0. `whose`
// names the weights (PyTorch's in step 0's file, or tformer's seed004_default_init).
void check_default_init(Tutorial& t, const nn::StateDict& init, const Phrase& whose) {
    bool within = true, filled = true, norms = true;
    std::vector<double> embedding;
    for (const auto& [name, w] : init) {
        const std::string layer = name.substr(0, name.rfind('.')), kind = name.substr(name.rfind('.') + 1);
        if (kind == "a_2" || kind == "b_2") {
            norms = norms && tutorial::max_abs(c::sub(w, kind == "a_2" ? 1.0 : 0.0)) == 0;
        } else if (layer.ends_with(".lut")) {
            const std::vector<double> v = w.to_vector();
            embedding.insert(embedding.end(), v.begin(), v.end());
        } else {  // a Linear's weight (out, in) or bias (out)
            const double bound = 1 / std::sqrt(static_cast<double>(init.at(layer + ".weight").size(1)));
            const double largest = tutorial::max_abs(w);
            within = within && largest <= bound * (1 + 1e-6);  // float32 rounding of the bound
            if (kind == "weight") filled = filled && largest > 0.9 * bound;
        }
    }
    const double n = static_cast<double>(embedding.size());
    const double mean = std::accumulate(embedding.begin(), embedding.end(), 0.0) / n;
    double var = 0;
    for (double x : embedding) var += (x - mean) * (x - mean) / n;
    t.check(within && filled,
            {.en = "{}: every Linear weight and bias lies in ±1/√in, and every weight comes within 10% of the bound",
             .zh = "{}：每个 Linear 的权重和偏置都落在 ±1/√in 之内，而且每个权重都达到边界的 90% 以上"},
            whose);
    t.check(std::abs(mean) < 0.15 && std::abs(std::sqrt(var) - 1) < 0.1,
            {.en = "{}: the embeddings are N(0, 1): mean {:.3f}, standard deviation {:.3f} over {} values",
             .zh = "{0}：嵌入服从 N(0, 1)：{3} 个值的均值 {1:.3f}，标准差 {2:.3f}"},
            whose, mean, std::sqrt(var), embedding.size());
    t.check(norms,
            {.en = "{}: every LayerNorm starts at a_2 = 1, b_2 = 0",
             .zh = "{}：每个 LayerNorm 的初值都是 a_2 = 1、b_2 = 0"},
            whose);
}

// What data_gen(11, 3, 10) must give, as a whole: ten (3, 10) batches, every sequence 1 and then symbols
// 1..10 (0 is the padding symbol), each of 1..10 drawn somewhere in the 270 draws, no batch twice.
void check_data_gen(Tutorial& t, const std::vector<c::Tensor>& batches, const Phrase& whose) {
    bool ok = batches.size() == 10;
    std::vector<int64_t> counts(kVocab, 0);
    std::vector<std::vector<int64_t>> seen;
    for (const c::Tensor& data : batches) {
        ok = ok && data.shape() == c::Shape{3, 10};
        if (!ok) break;
        const std::vector<int64_t> ids = data.contiguous().to_vector<int64_t>();
        for (size_t i = 0; i < ids.size(); ++i) {
            ok = ok && ids[i] >= 0 && ids[i] < kVocab && (i % 10 == 0 ? ids[i] == 1 : ids[i] != 0);
            if (ok && i % 10 != 0) ++counts[ids[i]];
        }
        ok = ok && std::find(seen.begin(), seen.end(), ids) == seen.end();
        seen.push_back(ids);
    }
    ok = ok && std::all_of(counts.begin() + 1, counts.end(), [](int64_t n) { return n > 0; });
    t.check(
        ok,
        {.en = "{}: 10 batches (3, 10), every sequence 1 and then symbols of 1..10 (never the padding 0), each "
               "of the ten drawn, no batch twice",
         .zh =
             "{}：10 个 (3, 10) 的批量，每个序列先是 1，然后是 1..10 中的符号（从不出现填充符号 0），十个符号都出现过，"
             "没有重复的批量"},
        whose);
}

// The ten printed losses against the same numbers read off the log-probabilities by a loop.
void check_losses_by_hand(Tutorial& t, const TrainTest& run) {
    double worst = 0;
    for (size_t i = 0; i < run.losses.size(); ++i) worst = std::max(worst, std::abs(run.losses[i] - run.by_hand[i]));
    t.check(run.losses.size() == 10 && worst < 1e-5,
            {.en = "every printed loss equals -mean log p(data[:, t + 1]) read off the model's log-probabilities by a "
                   "loop (largest difference {:.1e}): the labels are the data shifted by one",
             .zh = "每个打印出的损失都等于用循环从模型的对数概率里读出的 -mean log p(data[:, t + 1])（最大差 {:.1e}）："
                   "标签就是把数据移了一位"},
            worst);
}

// Greedy decoding chose prediction[t + 1] as the argmax at the last position of the prefix
// prediction[0..t]; one teacher-forced pass over prediction[0..8] with subsequent_mask(9) shows position
// t exactly that prefix, so its argmax must be prediction[t + 1] at every t.
void check_greedy_consistent(Tutorial& t, const Seed004Transform& model, const c::Tensor& memory,
                             const std::vector<int64_t>& prediction) {
    ag::NoGradGuard no_grad;
    const c::Tensor fed = c::from_vector(std::vector<int64_t>(prediction.begin(), prediction.end() - 1), {1, 9});
    const c::Tensor logp = model.generator(model.decode(Variable(memory), fed, nn::subsequent_mask(9))).value();
    const std::vector<int64_t> picks = c::argmax(logp, -1).reshape({-1}).to_vector<int64_t>();  // (9)
    t.check(std::equal(picks.begin(), picks.end(), prediction.begin() + 1),
            {.en = "one teacher-forced pass over the prediction (subsequent_mask(9)) picks the same nine symbols: {}",
             .zh = "对预测结果做一次教师强制的前向（subsequent_mask(9)），选出同样的九个符号：{}"},
            join(picks));
}

// What the steps share: the model of `tformer train copy`, its generator and its batches, and the
// per-step figures of its training (step 3) for the pictures.
struct Lesson {
    const tasks::ModelConfig config = copy_config();
    c::Generator gen{kSeed};                    // the model's initialisation (and its dropout, here 0)
    std::shared_ptr<nn::EncoderDecoder> model;  // built in step 2, trained (or loaded) in step 3
    const tasks::BatchSource source = tasks::copy_source(kBatch, kLength, kVocab, kBatchesPerEpoch, kSeed);
    std::vector<double> step_ce, step_lr;  // step 3: mean cross-entropy per token and learning rate, per update
};

// ---- the trained model, cached -------------------------------------------------------------
//
// Step 3 trains for 1600 updates: seconds on one idle core, minutes on a busy machine. It saves the
// trained weights and the figures of the training (every update's loss and learning rate) in the --out
// folder, as copy_model-seed<seed>-v<kCacheVersion>.safetensors, and a rerun (--from 4, say) loads them
// instead of training. The file is used only when all of this holds; otherwise the model is trained
// again and the file rewritten:
// - its key is this program's: the seed, kCacheVersion, the model's configuration and the training's
//   settings;
// - it reads as a safetensors file (every offset and size checked) holding the weights and 1600 finite
//   losses and learning rates;
// - the fingerprint of the weights and figures is the one written beside them: nothing changed on disk;
// - every update's recorded learning rate is the one the schedule gives now;
// - the first 20 updates, run again from the same initialisation, give the recorded losses bit for bit:
//   the training code and the machine's arithmetic are those that trained it;
// - the loaded weights give the recorded loss on batch (0, 0): the forward pass is the same.

// Raise it when the training changes in a way the checks above would miss.
constexpr int kCacheVersion = 1;
constexpr int64_t kSteps = kEpochs * kBatchesPerEpoch;
constexpr int64_t kReplayedSteps = 20;

// What step 3's training leaves behind, whether it ran here or was loaded.
struct TrainingRecord {
    std::vector<double> loss_sum;  // per update: Σ_b l[b], d2l's loss summed over the batch's 30 sequences
    std::vector<double> lr;        // per update: its learning rate
    double seconds = 0;            // how long the updates took when they ran
};

// The loop of tasks::train, written out (step 3 explains it): `steps` updates of `model` on the
// source's batches in order, update k (from 1) at the learning rate noam.lr_at(k).
TrainingRecord run_updates(nn::EncoderDecoder& model, const tasks::BatchSource& source, const optim::NoamLR& noam,
                           int64_t steps) {
    optim::Adam adam(model.named_parameters(), {.lr = kPeakLr});
    model.train();
    TrainingRecord record;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < steps; ++step) {
        const tasks::Batch batch = source.get(step / kBatchesPerEpoch, step % kBatchesPerEpoch);
        adam.set_lr(noam.lr_at(step + 1));
        const Variable logits = model.forward(batch.enc_X, batch.dec_in, batch.enc_valid);      // (B, T, V)
        const Variable l = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid);  // (B)
        const Variable sum = ag::sum(l);
        sum.backward();
        optim::clip_grad_norm(adam.parameters(), kClip);
        adam.step();
        adam.zero_grad();
        record.loss_sum.push_back(sum.item());
        record.lr.push_back(adam.lr());
    }
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return record;
}

// The key a saved model must carry to be loaded: everything that decides its weights.
std::string cache_key(const tasks::ModelConfig& config) {
    return fmt::format(
        "tutorial 12 copy model, version {}; seed {}; {} updates of batches of {} ({} an epoch); Adam, "
        "Noam schedule peaking at {} after {}; clipping at {}; model {}",
        kCacheVersion, kSeed, kSteps, kBatch, kBatchesPerEpoch, kPeakLr, kWarmup, kClip, tasks::config_to_json(config));
}

// The fingerprint of a trained model and its record (FNV-1a over every tensor of its state dict, in name
// order, then the losses and learning rates).
std::string fingerprint(const nn::Module& model, const TrainingRecord& record) {
    uint64_t h = tasks::dist::fingerprint(nullptr, 0);  // FNV-1a's starting value
    for (const auto& [name, value] : model.state_dict()) h = tasks::dist::fingerprint(value, h);
    for (const std::vector<double>* figures : {&record.loss_sum, &record.lr})
        h = tasks::dist::fingerprint(figures->data(), figures->size() * sizeof(double), h);
    return fmt::format("{:016x}", h);
}

// The model's loss on batch (0, 0), Σ_b l[b] as in training, without updating anything.
double probe_loss(nn::EncoderDecoder& model, const tasks::BatchSource& source) {
    ag::NoGradGuard no_grad;
    const tasks::Batch batch = source.get(0, 0);
    const Variable logits = model.forward(batch.enc_X, batch.dec_in, batch.enc_valid);
    return ag::sum(nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid)).item();
}

// Writes the trained model and its record to `path` (atomically: a crash leaves the old file or the new one).
void save_trained(const std::filesystem::path& path, nn::EncoderDecoder& model, const Lesson& lesson,
                  const TrainingRecord& record) {
    nn::SafeTensors st;
    for (const auto& [name, value] : model.state_dict()) st.tensors["model." + name] = value;
    const int64_t n = static_cast<int64_t>(record.loss_sum.size());
    st.tensors["training.loss_sum"] = c::tensor(record.loss_sum, {n}, DType::float64);
    st.tensors["training.lr"] = c::tensor(record.lr, {n}, DType::float64);
    st.metadata = {{"key", cache_key(lesson.config)},
                   {"fingerprint", fingerprint(model, record)},
                   {"probe_loss", fmt::format("{:.17g}", probe_loss(model, lesson.source))},
                   {"seconds", fmt::format("{:.17g}", record.seconds)}};
    nn::save_safetensors(path.string(), st);
}

// The model an earlier run saved at `path`, loaded into lesson.model, and its record; or nothing, with
// `why` saying what was wrong (see the list above). lesson.model is left untouched unless it loads.
std::optional<TrainingRecord> load_trained(const std::filesystem::path& path, Lesson& lesson, const optim::NoamLR& noam,
                                           Phrase& why) {
    if (!std::filesystem::exists(path)) {
        why = phrase({.en = "there is none yet", .zh = "还没有"});
        return std::nullopt;
    }
    nn::SafeTensors st;
    try {
        st = nn::load_safetensors(path.string());
    } catch (const Error& e) {
        why = phrase({.en = "it cannot be read: {}", .zh = "它读不出来：{}"}, std::string(e.what()));
        return std::nullopt;
    }
    if (st.metadata["key"] != cache_key(lesson.config)) {
        why = phrase({.en = "it was written for another seed, version, configuration or training",
                      .zh = "它是为另一个种子、版本、配置或训练方式保存的"});
        return std::nullopt;
    }
    TrainingRecord record;
    for (auto [name, figures] : {std::pair{"training.loss_sum", &record.loss_sum}, {"training.lr", &record.lr}}) {
        const auto it = st.tensors.find(name);
        if (it != st.tensors.end() && it->second.shape() == c::Shape{kSteps}) *figures = it->second.to_vector();
    }
    const auto finite = [](const std::vector<double>& v) {
        return v.size() == static_cast<size_t>(kSteps) &&
               std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
    };
    if (!finite(record.loss_sum) || !finite(record.lr)) {
        why = phrase({.en = "its training figures are missing or damaged", .zh = "它的训练记录缺失或已损坏"});
        return std::nullopt;
    }
    c::Generator scratch(kSeed);
    const std::shared_ptr<nn::EncoderDecoder> loaded = tasks::build_model(lesson.config, scratch);
    nn::StateDict weights;
    for (const auto& [name, value] : st.tensors)
        if (name.starts_with("model.")) weights[name.substr(6)] = value;
    try {
        loaded->load_state_dict(weights);
    } catch (const Error& e) {
        why = phrase({.en = "its weights do not fit the model: {}", .zh = "它的权重与模型对不上：{}"},
                     std::string(e.what()));
        return std::nullopt;
    }
    if (fingerprint(*loaded, record) != st.metadata["fingerprint"]) {
        why = phrase({.en = "its weights or figures are not those it was saved with (another fingerprint)",
                      .zh = "它的权重或训练记录不是保存时的那些（指纹不同）"});
        return std::nullopt;
    }
    for (int64_t k = 0; k < kSteps; ++k)
        if (record.lr[k] != noam.lr_at(k + 1)) {
            why = phrase({.en = "update {} ran at another learning rate than the schedule gives now",
                          .zh = "第 {} 次更新用的学习率与现在的调度给出的不同"},
                         k + 1);
            return std::nullopt;
        }
    c::Generator g_replay(kSeed);
    const std::shared_ptr<nn::EncoderDecoder> replay = tasks::build_model(lesson.config, g_replay);
    const TrainingRecord again = run_updates(*replay, lesson.source, noam, kReplayedSteps);
    if (!std::equal(again.loss_sum.begin(), again.loss_sum.end(), record.loss_sum.begin())) {
        why = phrase({.en = "its first {} updates, run again, give other losses: the training code or the arithmetic "
                            "changed since",
                      .zh = "重新运行它的前 {} 次更新，得到的损失不同：训练代码或者运算在那之后变了"},
                     kReplayedSteps);
        return std::nullopt;
    }
    const double probe = probe_loss(*loaded, lesson.source);
    double saved_probe = std::nan("");
    try {
        saved_probe = std::stod(st.metadata["probe_loss"]);
    } catch (const std::exception&) {
    }
    if (!(std::abs(probe - saved_probe) <= 1e-6 * std::abs(saved_probe))) {
        why = phrase({.en = "its weights give another loss on batch (0, 0) than when they were saved: the forward pass "
                            "changed since",
                      .zh = "它的权重在批量 (0, 0) 上给出的损失与保存时不同：前向计算在那之后变了"});
        return std::nullopt;
    }
    try {
        record.seconds = std::stod(st.metadata["seconds"]);
    } catch (const std::exception&) {
    }
    lesson.model->load_state_dict(loaded->state_dict());
    return record;
}

// Step 3's 1600 updates of lesson.model: loaded from the --out folder when an earlier run saved them and
// they pass every test above, else run here and saved. Says which, in a sentence about this run.
TrainingRecord trained_or_loaded(Tutorial& t, Lesson& lesson, const optim::NoamLR& noam) {
    const std::filesystem::path path =
        t.out_path(fmt::format("copy_model-seed{}-v{}.safetensors", kSeed, kCacheVersion));
    Phrase why;
    if (std::optional<TrainingRecord> loaded = load_trained(path, lesson, noam, why)) {
        note_about_this_run(phrase(
            {.en = "LOADED, not trained: {} holds this model, trained by an earlier run in {:.1f} s. Its seed, "
                   "version and configuration are this program's, its weights and figures match their "
                   "fingerprint, its learning rates are the schedule's, its first {} updates replayed bit for bit "
                   "and it gives the loss recorded on batch (0, 0). Delete the file to train again.",
             .zh = "已加载，没有训练：{} 保存着这个模型，由之前的一次运行用 {:.1f} 秒训练而成。它的种子、版本和配置与"
                   "本程序一致，权重和训练记录与指纹相符，学习率与调度一致，前 {} 次更新重新运行后逐位相同，在批量 "
                   "(0, 0) 上给出记录的损失。删掉这个文件即可重新训练。"},
            path.string(), loaded->seconds, kReplayedSteps));
        return *loaded;
    }
    note_about_this_run(phrase(
        {.en = "TRAINING here ({} updates), not loading {}: {}.", .zh = "在这里训练（{} 次更新），没有加载 {}：{}。"},
        kSteps, path.string(), why));
    const TrainingRecord record = run_updates(*lesson.model, lesson.source, noam, kSteps);
    try {
        save_trained(path, *lesson.model, lesson, record);
        note_about_this_run(phrase({.en = "Trained in {:.1f} s and saved to {}: the next run loads it instead.",
                                    .zh = "用 {:.1f} 秒训练完毕，已保存到 {}：下次运行将直接加载它。"},
                                   record.seconds, path.string()));
    } catch (const Error& e) {
        note_about_this_run(
            phrase({.en = "Trained in {:.1f} s, but it could not be saved ({}): the next run trains again.",
                    .zh = "用 {:.1f} 秒训练完毕，但没能保存（{}）：下次运行还要重新训练。"},
                   record.seconds, std::string(e.what())));
    }
    return record;
}

// ---- the steps --------------------------------------------------------------------------

// The weights --literal starts from and the batches it trains on: tformer's own draws of PyTorch's
// default initialisation and of data_gen(11, 3, 10), from one generator (step 0 draws them too, to check them).
struct LiteralRun {
    nn::StateDict init;
    std::vector<c::Tensor> batches;
};
LiteralRun literal_draws(Tutorial& t) {
    c::Generator g(2004);
    LiteralRun run;
    // --inject-fault init-xavier / data-gen-draws-zero: the tests that check_default_init and
    // check_data_gen can fail
    run.init = seed004_default_init(g, t.injected("init-xavier") ? faults::xavier_linear_init : pytorch_linear_init);
    run.batches = seed004_data_gen(g, t.injected("data-gen-draws-zero") ? 0 : 1);
    return run;
}

// The two ways seed 004's code may be run wrongly on purpose (the tests of check_losses_by_hand and
// check_greedy_consistent).
BatchMaker batch_maker(Tutorial& t) {
    return t.injected("labels-not-shifted") ? faults::batch_with_unshifted_labels : seed004_batch;
}
ReadPosition read_position(Tutorial& t) {
    return t.injected("inference-reads-first-position") ? ReadPosition::first : ReadPosition::last;
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test), 模型预估 (inference_test), exactly as written
void literal_train_and_inference(Tutorial& t) {
    note({.en = "Seed 004 ends with train_test() and inference_test(). Both build Transform(Encoder(32, 64, "
                "MultiHeadedAttention(8, 32)), Decoder(...), Embeddings(32, 11) × 2, 32, 11, N=2) with PyTorch's "
                "default initialisation; here the same model is initialised the same way (Linear: U(±1/√in), "
                "Embedding: N(0, 1), LayerNorm: ones and zeros) from tformer's generator, and the document's "
                "deepcopies are kept: both encoder layers, both decoder layers, and the two attentions of a "
                "decoder layer start from the same weights. train_test draws data_gen(11, 3, 10): ten batches of "
                "three sequences of 10 symbols in 1..10 starting with 1, and prints the loss of each:",
          .zh =
              "种子文档 004 最后是 train_test() 和 inference_test()。两者都用 PyTorch 的默认初始化构造 "
              "Transform(Encoder(32, 64, MultiHeadedAttention(8, 32)), Decoder(...), Embeddings(32, 11) × 2, 32, 11, "
              "N=2)；这里用 tformer 的随机数生成器，以同样的方式初始化同一个模型（Linear：U(±1/√in)，Embedding："
              "N(0, 1)，LayerNorm：全 1 和全 0），并保留文档里的 deepcopy：两个编码器层、两个解码器层，以及一个解码器层"
              "里的两个注意力，都从相同的权重开始。train_test 用 data_gen(11, 3, 10) 取数据：十个批量，每批三个序列，"
              "每个序列是以 1 开头、由 1..10 中的符号组成的 10 个符号，并打印每个批量的损失："});
    const LiteralRun draws = literal_draws(t);
    Seed004Transform model(draws.init);
    t.check(static_cast<int64_t>(model.params.size()) == 2 * 16 + 2 * 26 + 4 &&
                [&] {
                    int64_t n = 0;
                    for (const auto& [name, p] : model.params) n += p.numel();
                    return n == 43'819;
                }(),
            {.en = "88 weight tensors, 43,819 numbers: seed 004's model with its biases (tutorial step 2)",
             .zh = "88 个权重张量，43,819 个数：带偏置的种子文档 004 模型（本教程第 2 步）"});
    check_default_init(t, draws.init, phrase({.en = "tformer's initialisation", .zh = "tformer 的初始化"}));
    note({.en = "\ninference_test() first, on the untrained weights (the document builds a fresh model for it):",
          .zh = "\n先运行 inference_test()，用未训练的权重（文档为它新建了一个模型）："});
    c::Tensor memory;
    const std::vector<int64_t> prediction = seed004_inference_test(model, &memory, read_position(t));
    t.check(
        prediction.size() == 10 && prediction.front() == 0,
        {.en = "it prints 10 symbols, starting with the 0 it was given", .zh = "它打印出 10 个符号，以给定的 0 开头"});
    check_greedy_consistent(t, model, memory, prediction);
    note({.en = "\ntrain_test():", .zh = "\ntrain_test()："});
    check_data_gen(t, draws.batches, phrase({.en = "tformer's data_gen", .zh = "tformer 的 data_gen"}));
    const TrainTest run = seed004_train_test(model, draws.batches, batch_maker(t));
    const std::vector<double>& losses = run.losses;
    check_losses_by_hand(t, run);
    t.check(losses.front() > std::log(11.0) - 0.3 && losses.front() < 3.5,
            {.en = "the first is near ln 11 = {:.3f}, the loss of a uniform guess",
             .zh = "第一个损失接近 ln 11 = {:.3f}，即均匀猜测的损失"},
            std::log(11.0));
    t.check(*std::min_element(losses.begin(), losses.end()) < losses.front(),
            {.en = "and some later batch scores lower", .zh = "而且后面有批量的损失更低"});
    note({.en = "Ten Adam steps on thirty sequences barely move the model: the losses wander around ln 11 (step 0 "
                "runs the same from PyTorch's own weights and batches and matches its printout). Steps 3-5 of this "
                "tutorial train the copy task for real.",
          .zh = "在三十个序列上走十步 Adam，模型几乎没动：损失在 ln 11 附近徘徊（第 0 步从 PyTorch 自己的权重和批量出发"
                "做同样的事，并与它的打印结果一致）。本教程的第 3-5 步才真正训练复制任务。"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › transform · 模型结构, 模型训练, 模型预估, run by torch (tests/fixtures/)
void seed004_against_pytorch(Tutorial& t) {
    note(
        {.en = "Seed 004's own code, run by torch: tests/fixtures/seed004_copy.safetensors holds the initial "
               "weights of its Transform (d_model 32, 8 heads, FFN 64, N = 2, biases everywhere, seed 004's "
               "LayerNorm), the ten batches its data_gen(11, 3, 10) drew, the ten losses train_test printed and "
               "inference_test's prediction on the untrained weights. The model is written out in this file "
               "(class Seed004Transform) with autograd ops; it starts from the same weights and sees the same "
               "batches:",
         .zh =
             "种子文档 004 自己的代码，由 torch 运行：tests/fixtures/seed004_copy.safetensors 存放着它的 Transform 的"
             "初始权重（d_model 32，8 个头，前馈网络 64，N = 2，处处带偏置，种子文档 004 的 LayerNorm）、它的 "
             "data_gen(11, 3, 10) 取出的十个批量、train_test 打印的十个损失，以及 inference_test 在未训练权重上的预测。"
             "模型在本文件里用 autograd 运算写出（Seed004Transform 类）；它从同样的权重出发，看到同样的批量："});
    note({.en = "Seed 004's structure description swaps two words: it calls the left side (a stack of encoders "
                "that reads src and outputs the memory) '解码部分' and the right side (the decoders) '编码部分'. The "
                "code below follows the code: encoders on the source, decoders on the target and the memory.",
          .zh =
              "种子文档 004 对结构的描述把两个词弄反了：它把左边（读入 src、输出 memory 的一叠编码器）叫作“解码部分”，"
              "把右边（解码器）叫作“编码部分”。下面的代码以代码为准：编码器作用于源序列，解码器作用于目标序列和 "
              "memory。"});
    const tutorial::Reference ref("seed004_copy");
    nn::StateDict init;
    for (const auto& [name, value] : ref.with_prefix("init")) init[name] = value;
    Seed004Transform model(init);
    t.check(
        init.size() == 38 && model.params.size() == 88,
        {.en = "the deepcopies: 38 stored weights (encoders.0, decoders.0 with one attention) become the model's 88",
         .zh = "deepcopy：存下来的 38 个权重（encoders.0，只含一个注意力的 decoders.0）变成模型的 88 个"});
    note({.en = "The initial weights follow the rules of PyTorch's default initialisation; so do those tformer draws "
                "for --literal (from its own generator), and its data_gen draws batches like the document's:",
          .zh =
              "初始权重符合 PyTorch 默认初始化的规则；tformer 为 --literal 抽取的权重（用它自己的随机数生成器）也符合，"
              "它的 data_gen 抽出的批量也与文档的一样："});
    const LiteralRun draws = literal_draws(t);
    check_default_init(t, init, phrase({.en = "PyTorch's initialisation", .zh = "PyTorch 的初始化"}));
    check_default_init(t, draws.init, phrase({.en = "tformer's initialisation", .zh = "tformer 的初始化"}));

    note({.en = "\ninference_test() on the untrained weights:", .zh = "\n在未训练的权重上运行 inference_test()："});
    c::Tensor memory;
    const std::vector<int64_t> prediction = seed004_inference_test(model, &memory, read_position(t));
    t.check_allclose(memory, ref["inference.memory"], 1e-5,
                     {.en = "memory (1, 10, 32) matches PyTorch's", .zh = "memory (1, 10, 32) 与 PyTorch 的一致"});
    const std::vector<int64_t> theirs_prediction = ref["inference.prediction"].reshape({-1}).to_vector<int64_t>();
    t.check(prediction == theirs_prediction,
            {.en = "the prediction equals PyTorch's [{}] (every step's top two log-probabilities differ by at least "
                   "{:.3f}, so rounding cannot swap them)",
             .zh = "预测等于 PyTorch 的 [{}]（每一步最大的两个对数概率至少相差 {:.3f}，所以舍入误差不会让它们交换）"},
            fmt::format("{}", fmt::join(theirs_prediction, ", ")), c::min(ref["inference.margin"]).item());
    check_greedy_consistent(t, model, memory, prediction);
    note({.en = "\ntrain_test() on the same ten batches:", .zh = "\n在同样的十个批量上运行 train_test()："});
    std::vector<c::Tensor> batches;
    for (int i = 0; i < 10; ++i) batches.push_back(ref[fmt::format("train.batch{}", i)]);
    check_data_gen(t, batches, phrase({.en = "PyTorch's data_gen", .zh = "PyTorch 的 data_gen"}));
    check_data_gen(t, draws.batches, phrase({.en = "tformer's data_gen", .zh = "tformer 的 data_gen"}));
    const TrainTest run = seed004_train_test(model, batches, batch_maker(t));
    const c::Tensor theirs = ref["train.loss"];
    note({.en = "    PyTorch printed: {}", .zh = "    PyTorch 打印的：{}"},
         fmt::format("{:.4f}", fmt::join(theirs.to_vector(), ", ")));
    t.check_allclose(c::tensor(run.losses, {10}, DType::float64), theirs, 1e-5,
                     {.en = "the ten losses match PyTorch's", .zh = "十个损失与 PyTorch 的一致"});
    check_losses_by_hand(t, run);
    t.check_allclose(model.params.at("proj.weight").value(), ref["train.final.proj.weight"], 1e-4,
                     {.en = "and after ten Adam steps the output layer's weights still match",
                      .zh = "走完十步 Adam 之后，输出层的权重仍然一致"});
    c::Generator gz(1212);  // not `gen`: that one initialises step 2's model
    const c::Tensor z = c::randn({3, kVocab}, gz);
    t.check_close(
        c::log_softmax(c::log_softmax(z)), c::log_softmax(z), 1e-6,
        {.en = "the document's loss applies log_softmax twice (generator, then CrossEntropyLoss): harmless, "
               "log_softmax(log_softmax(z)) = log_softmax(z) since the log-probabilities already sum to 1",
         .zh = "文档的损失用了两次 log_softmax（generator 里一次，CrossEntropyLoss 里又一次）：无害，因为对数概率"
               "对应的概率之和已经是 1，log_softmax(log_softmax(z)) = log_softmax(z)"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (data_gen's torch.randint(1, V)): 1000 sequences counted
void symbols_drawn_evenly(Tutorial& t) {
    note({.en = "\nThe decoder is masked with seed 004's subsequent_mask(9) (tutorial 11): label t is predicted "
                "from dec_in[0..t] = src[0..t], so the model must bring src[t + 1] over from the encoder. It "
                "cannot copy its own input; it has to look one position ahead in the source.\n\n"
                "How even is randint? Counting the symbols at positions 1..9 of 1000 sequences (9000 draws, "
                "900 expected per symbol):",
          .zh =
              "\n解码器用种子文档 004 的 subsequent_mask(9) 加了掩码（教程 11）：标签 t 由 dec_in[0..t] = src[0..t] "
              "预测，所以模型必须把 src[t + 1] 从编码器那边搬过来。它不能照抄自己的输入，而必须看源序列里往后一个位置。"
              "\n\nrandint 有多均匀？数一数 1000 个序列在位置 1..9 上的符号（9000 次抽取，每个符号期望 900 次）："});
    c::Generator g_big(5);
    const tasks::Batch big = tasks::copy_batch(1000, kLength, kVocab, g_big);
    std::vector<int64_t> counts(kVocab, 0);
    for (int64_t id : big.label.contiguous().to_vector<int64_t>()) ++counts[id];
    std::string symbols, numbers;
    for (int64_t v = 0; v < kVocab; ++v) {
        symbols += fmt::format("{:>5}", v);
        numbers += fmt::format("{:>5}", counts[v]);
    }
    note({.en = "    symbol {}\n    count  {}", .zh = "    符号   {}\n    次数   {}"}, symbols, numbers);
    t.check(
        counts[0] == 0 && std::all_of(counts.begin() + 1, counts.end(), [](int64_t n) { return n > 800 && n < 1000; }),
        {.en = "no 0s; each of 1..10 between 800 and 1000 times (900 ± 100, 3.5 standard deviations of 28)",
         .zh = "没有 0；1..10 每个出现 800 到 1000 次（900 ± 100，即标准差 28 的 3.5 倍）"});
}

// The batches of `tformer train copy`: tasks::copy_source, the same batch for the same (epoch, i).
void batches_for_training(Tutorial& t, const Lesson& lesson) {
    note({.en = "\nTraining draws fresh batches from tasks::copy_source: batch (epoch, i) comes from a "
                "generator seeded by (seed, epoch, i), so a run can stop and resume and still see the same "
                "data. 30 sequences a batch, 20 batches an epoch, 80 epochs: 48,000 sequences out of the "
                "10^9 possible ones.",
          .zh =
              "\n训练从 tasks::copy_source 取新的批量：批量 (epoch, i) 来自以 (seed, epoch, i) 为种子的随机数生成器，"
              "所以训练可以中断再续上，看到的数据仍然相同。每批 30 个序列，每个迭代周期 20 个批量，80 个周期：从 10^9 "
              "个可能的序列里取了 48,000 个。"});
    const tasks::Batch a = lesson.source.get(0, 0), again = lesson.source.get(0, 0), other = lesson.source.get(0, 1);
    show({.en = "batch (0, 0), rows 0-1", .zh = "批量 (0, 0) 的第 0-1 行"}, a.enc_X.slice(0, 0, 2));
    t.check(a.enc_X.shape() == c::Shape{30, 10} && same_ids(a.enc_X, again.enc_X) && !same_ids(a.enc_X, other.enc_X),
            {.en = "batch (0, 0) is (30, 10), the same every time it is asked for, and differs from batch (0, 1)",
             .zh = "批量 (0, 0) 是 (30, 10)，每次取都相同，并且与批量 (0, 1) 不同"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (data_gen, Batch)
void copy_task_data(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 004 makes its data like this:\n"
                "    data = torch.randint(1, V, size=(batch_size, 10))\n"
                "    data[:, 0] = 1\n"
                "    src = tgt = data\n"
                "and Batch(src, tgt) shifts the target by one:\n"
                "    self.tgt   = tgt[:, :-1]     decoder input (\"右移一位,第一位用 1 填充\")\n"
                "    self.tgt_y = tgt[:, 1:]      labels: what the decoder must predict\n"
                "    self.ntokens = (tgt_y != pad).sum()\n"
                "Symbol 1 is the start symbol (d2l's <bos>); 0 is the padding symbol and never appears. "
                "tasks::copy_batch does the same and hands back d2l's names (enc_X, dec_in, label and the valid "
                "lengths). A batch of 3 from a generator seeded with 4:",
          .zh =
              "种子文档 004 这样生成数据：\n"
              "    data = torch.randint(1, V, size=(batch_size, 10))\n"
              "    data[:, 0] = 1\n"
              "    src = tgt = data\n"
              "Batch(src, tgt) 再把目标序列错开一位：\n"
              "    self.tgt   = tgt[:, :-1]     解码器的输入（“右移一位,第一位用 1 填充”）\n"
              "    self.tgt_y = tgt[:, 1:]      标签：解码器要预测的东西\n"
              "    self.ntokens = (tgt_y != pad).sum()\n"
              "符号 1 是起始符号（d2l 的 <bos>）；0 是填充符号，从不出现。tasks::copy_batch 做同样的事，并用 d2l 的名字"
              "交回结果（enc_X、dec_in、label 和有效长度）。用种子为 4 的随机数生成器取一个大小为 3 的批量："});
    c::Generator g(4);
    const tasks::Batch batch = tasks::copy_batch(3, kLength, kVocab, g);
    show("enc_X (src)", batch.enc_X);
    show("dec_in (tgt[:, :-1])", batch.dec_in);
    show("label (tgt_y = tgt[:, 1:])", batch.label);
    show("enc_valid", batch.enc_valid);
    show("label_valid", batch.label_valid);
    t.check(batch.enc_X.shape() == c::Shape{3, 10} && batch.dec_in.shape() == c::Shape{3, 9} &&
                batch.label.shape() == c::Shape{3, 9},
            {.en = "src (3, 10); decoder input and labels (3, 9)", .zh = "src 为 (3, 10)；解码器输入和标签为 (3, 9)"});
    t.check(c::sum(c::ne(batch.enc_X.slice(1, 0, 1), 1.0).to(DType::float32)).item() == 0,
            {.en = "every sequence starts with the start symbol 1", .zh = "每个序列都以起始符号 1 开头"});
    const std::vector<int64_t> ids = batch.enc_X.to_vector<int64_t>();
    t.check(*std::min_element(ids.begin(), ids.end()) >= 1 && *std::max_element(ids.begin(), ids.end()) <= 10,
            {.en = "symbols are 1..10: randint(1, V) never draws the padding symbol 0",
             .zh = "符号取值 1..10：randint(1, V) 从不抽到填充符号 0"});
    t.check(same_ids(batch.dec_in, batch.enc_X.slice(1, 0, 9)) && same_ids(batch.label, batch.enc_X.slice(1, 1, 10)),
            {.en = "dec_in = src[:, :-1] and label = src[:, 1:] (src = tgt: the task is to copy)",
             .zh = "dec_in = src[:, :-1]，label = src[:, 1:]（src = tgt：任务就是复制）"});
    const c::Tensor bos_shifted = c::concat({c::full({3, 1}, 1.0, DType::int64), batch.label.slice(1, 0, 8)}, 1);
    t.check(same_ids(bos_shifted, batch.dec_in),
            {.en = "dec_in is also d2l's [<bos>, Y[:, :-1]] with <bos> = 1 and Y = label (teacher forcing)",
             .zh = "dec_in 也就是 d2l 的 [<bos>, Y[:, :-1]]，其中 <bos> = 1，Y = label（教师强制）"});
    t.check(c::sum(batch.label_valid.to(DType::float64)).item() == 27,
            {.en = "seed 004's ntokens: 3 × 9 = 27 labels, none padded",
             .zh = "种子文档 004 的 ntokens：3 × 9 = 27 个标签，没有填充"});
    symbols_drawn_evenly(t);
    batches_for_training(t, lesson);
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (criterion = nn.CrossEntropyLoss()), on the untrained model
void untrained_loss(Tutorial& t, const Lesson& lesson) {
    note(
        {.en = "\nOne forward pass with teacher forcing, untrained: enc_X (30, 10) and dec_in (30, 9) give "
               "logits (30, 9, 11). Seed 004's criterion, nn.CrossEntropyLoss(), is the mean over the 270 "
               "labels of -log softmax(logits)[label].",
         .zh =
             "\n未训练时，用教师强制做一次前向：enc_X (30, 10) 和 dec_in (30, 9) 给出 logits (30, 9, 11)。种子文档 004 "
             "的损失函数 nn.CrossEntropyLoss() 是 270 个标签上 -log softmax(logits)[label] 的平均值。"});
    ag::NoGradGuard no_grad;
    const tasks::Batch b = lesson.source.get(0, 0);
    const Variable logits = lesson.model->forward(b.enc_X, b.dec_in, b.enc_valid);
    const double ce = ag::cross_entropy(logits, b.label).item();
    const double spread = std::sqrt(c::var(logits.value(), {0, 1, 2}, false).item());
    note({.en = "    logits {}   standard deviation of the logits {:.3f}   cross-entropy {:.4f}",
          .zh = "    logits {}   logits 的标准差 {:.3f}   交叉熵 {:.4f}"},
         c::shape_str(logits.shape()), spread, ce);
    t.check(logits.shape() == c::Shape{30, 9, 11}, both("logits (B, T, V) = (30, 9, 11)"));
    note(
        {.en = "A model that gave every symbol the same logit would score exactly ln 11 = {:.4f}. Ours scores "
               "more. Its logits vary at random around a common mean and know nothing about the labels; the "
               "loss is log Σ exp(z) - z[label], and log Σ exp is convex, so by Jensen's inequality such "
               "logits lose more than ln 11 on average, the more the larger their spread: the model is "
               "confidently wrong on many labels.",
         .zh = "如果模型给每个符号相同的 logit，损失恰好是 ln 11 = {:.4f}。我们的模型损失更大。它的 logits 围绕一个共同"
               "的均值随机变化，对标签一无所知；损失是 log Σ exp(z) - z[label]，而 log Σ exp 是凸函数，所以由 Jensen "
               "不等式，这样的 logits 平均损失大于 ln 11，分散得越开损失越大：模型在许多标签上错得很自信。"},
        std::log(11.0));
    t.check(ce > std::log(11.0) && ce < 2 * std::log(11.0),
            {.en = "the untrained loss lies between ln 11 (all logits equal) and 2 ln 11",
             .zh = "未训练的损失介于 ln 11（所有 logits 相等）和 2 ln 11 之间"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › transform · 模型结构; seed 000 › 代码实现 › 训练 (d2l's sizes)
void the_model(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 004's train_test builds Transform(d_model=32, d_ff=64, h=8, vocab 11, N=2). tformer "
               "builds seed 000's EncoderDecoder with the same widths (tasks::build_model, as `tformer train "
               "copy` does): D = 32, FFN 64, 2 blocks each side, 4 heads as in seed 000 (seed 004 has 8 heads "
               "of 4 features; the parameter count does not depend on the number of heads), dropout 0 (seed "
               "004 has none either). build_model initialises every Linear with Xavier-uniform as d2l does.",
         .zh =
             "种子文档 004 的 train_test 构造 Transform(d_model=32, d_ff=64, h=8, vocab 11, N=2)。tformer 用同样的宽度"
             "构造种子文档 000 的 EncoderDecoder（tasks::build_model，与 `tformer train copy` 一样）：D = 32，前馈网络 "
             "64，两侧各 2 个块，4 个头，同种子文档 000（种子文档 004 是 8 个 4 维的头；参数个数与头数无关），dropout 0"
             "（种子文档 004 也没有 dropout）。build_model 像 d2l 一样，用 Xavier 均匀分布初始化每个 Linear。"});
    lesson.model = tasks::build_model(lesson.config, lesson.gen);
    const auto named = lesson.model->named_parameters();
    int64_t total = 0, listed = 0;
    line({.en = "\n      parameter                                      shape       count",
          .zh = "\n      参数                                           形状         个数"});
    for (const auto& [name, p] : named) {
        total += p.value().numel();
        if (name.find("block1") != std::string::npos) continue;  // the same as block0
        ++listed;
        line("      {:<46} {:<10} {:>6}", name, c::shape_str(p.shape()), p.value().numel());
    }
    line({.en = "      ... and encoder.blks.block1.*, decoder.blks.block1.*: the same as block0\n",
          .zh = "      …… 还有 encoder.blks.block1.*、decoder.blks.block1.*：与 block0 相同\n"});
    note({.en = "{} parameter tensors, {} numbers.", .zh = "{} 个参数张量，{} 个数。"}, named.size(),
         lesson.model->num_parameters());

    // counted by hand: D = 32, F = 64, V = 11; the attention projections have no bias (use_bias = false)
    const int64_t D = 32, F = 64, V = 11;
    const int64_t attention = 4 * D * D, addnorm = 2 * D, ffn = D * F + F + F * D + D;
    const int64_t enc_block = attention + addnorm + ffn + addnorm;
    const int64_t dec_block = 2 * attention + 3 * addnorm + ffn;
    const int64_t by_hand = V * D + 2 * enc_block + V * D + 2 * dec_block + D * V + V;
    note({.en = "By hand: embeddings 2 × V·D = {}, encoder block 4D² + FFN(2DF + F + D) + 2 LayerNorms(2D) = {}, "
                "decoder block 8D² + FFN + 3 LayerNorms = {}, output layer D·V + V = {}; in all {}.",
          .zh =
              "手算：嵌入层 2 × V·D = {}，编码器块 4D² + 前馈网络(2DF + F + D) + 2 个层归一化(2D) = {}，解码器块 8D² + "
              "前馈网络 + 3 个层归一化 = {}，输出层 D·V + V = {}；一共 {}。"},
         2 * V * D, enc_block, dec_block, D * V + V, by_hand);
    t.check(total == lesson.model->num_parameters() && total == by_hand,
            {.en = "the {} parameters add up to num_parameters() and to the count by hand",
             .zh = "这 {} 个参数与 num_parameters() 以及手算的结果都吻合"},
            total);
    t.check(named.size() == 64, {.en = "64 tensors: 1 + 2 × 12 in the encoder, 1 + 2 × 18 + 2 in the decoder",
                                 .zh = "64 个张量：编码器 1 + 2 × 12 个，解码器 1 + 2 × 18 + 2 个"});

    c::Generator g_bias(kSeed);
    const int64_t with_bias = tasks::build_model(copy_config(true), g_bias)->num_parameters();
    note({.en = "Seed 004's MultiHeadedAttention uses nn.Linear with its default bias on all four projections; "
                "with use_bias = true the same model has {} parameters, 6 attentions × 4 × 32 = 768 more.",
          .zh = "种子文档 004 的 MultiHeadedAttention 在全部四个投影上都用带默认偏置的 nn.Linear；用 use_bias = true，"
                "同一个模型有 {} 个参数，多出 6 个注意力 × 4 × 32 = 768 个。"},
         with_bias);
    t.check(with_bias == by_hand + 6 * 4 * D, {.en = "seed 004's count: 43,819 with the attention biases",
                                               .zh = "种子文档 004 的个数：加上注意力的偏置共 43,819"});
    untrained_loss(t, lesson);
}

// optim::NoamLR against rate() written out, at the steps that show its shape.
void noam_against_rate(Tutorial& t, const optim::NoamLR& noam, double factor) {
    line({.en = "\n      step   rate() written out   optim::NoamLR",
          .zh = "\n      步     手写的 rate()        optim::NoamLR"});
    double worst = 0;
    for (int64_t s : {0, 1, 2, 50, 99, 100, 101, 400, 1600}) {
        const double mine = rate(s, 32, factor, kWarmup), lib = noam.lr_at(s);
        worst = std::max(worst, std::abs(mine - lib) / lib);
        line("      {:>4}   {:>18.6e}   {:>13.6e}", s, mine, lib);
    }
    line();
    t.check(worst < 1e-15,
            {.en = "NoamLR.lr_at(step) == rate(step) at every step shown (largest relative difference {:.1e})",
             .zh = "在列出的每一步，NoamLR.lr_at(step) == rate(step)（最大相对差 {:.1e}）"},
            worst);
    t.check_close(
        noam.lr_at(100), 0.005, 1e-15,
        {.en = "the peak, at step = warmup = 100, is 0.005", .zh = "峰值在 step = warmup = 100 处，为 0.005"});
    t.check(noam.lr_at(0) == noam.lr_at(1) && noam.lr_at(50) == 0.5 * noam.lr_at(100) &&
                std::abs(noam.lr_at(400) - 0.5 * noam.lr_at(100)) < 1e-15,
            {.en = "step 0 counts as 1; half the peak at step 50 (linear) and at step 400 (1/√step)",
             .zh = "第 0 步按第 1 步算；第 50 步（线性上升）和第 400 步（1/√step 下降）都是峰值的一半"});
}

// The figures of the 1600 updates, whether they ran here or were loaded: a row every 100 updates, the
// mean loss of stretches of the training, and its checks.
void training_figures(Tutorial& t, const Lesson& lesson) {
    const std::vector<double>& ce = lesson.step_ce;
    line({.en = "\n      step  epoch   lr        loss (mean of the last 100 steps)",
          .zh = "\n      步    周期    lr        损失（最近 100 步的平均）"});
    for (int64_t step = 0; step < kSteps; ++step)
        if ((step + 1) % 100 == 0 || step == 0) {
            const size_t end = static_cast<size_t>(step + 1), n = std::min<size_t>(100, end);
            line("      {:>4}  {:>5}   {:.2e}  {:.3g}", step + 1, step / kBatchesPerEpoch + 1, lesson.step_lr[step],
                 mean_of(ce, end - n, end));
        }
    const double first = mean_of(ce, 0, 20), last = mean_of(ce, ce.size() - 100, ce.size());
    const double q1 = mean_of(ce, 0, 400), q2 = mean_of(ce, 400, 800), q3 = mean_of(ce, 800, 1200),
                 q4 = mean_of(ce, 1200, 1600);
    line(
        {.en = "\n      updates      mean cross-entropy per token", .zh = "\n      更新         每个词元的平均交叉熵"});
    const std::vector<std::pair<size_t, size_t>> stretches = {{0, 1},      {0, 20},      {0, 400},    {400, 800},
                                                              {800, 1200}, {1200, 1600}, {1500, 1600}};
    for (const auto& [from, to] : stretches)
        line("      {:<12} {:.3g}", to - from == 1 ? fmt::format("{}", to) : fmt::format("{}-{}", from + 1, to),
             mean_of(ce, from, to));
    line();
    note(
        {.en = "Epoch 1 averaged {:.3f} nats per token, the last 100 steps {:.1e}: the model went from guessing "
               "among 10 symbols to being sure.",
         .zh = "第 1 个迭代周期平均每个词元 {:.3f} 奈特，最后 100 步 {:.1e}：模型从在 10 个符号里瞎猜变成了胸有成竹。"},
        first, last);
    t.check(first > 1.5, {.en = "epoch 1: still close to guessing (> 1.5 nats per token)",
                          .zh = "第 1 个迭代周期：仍接近瞎猜（每个词元 > 1.5 奈特）"});
    t.check(last < 0.001,
            {.en = "the last 100 steps: below 0.001 nats per token", .zh = "最后 100 步：每个词元低于 0.001 奈特"});
    t.check(q2 < q1 && q3 < q2 && q4 < q3, {.en = "the loss falls from each quarter of the training to the next",
                                            .zh = "训练的每个四分之一段，损失都比上一段低"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test's loop), with seed 000's train_seq2seq details:
// the 1600 updates of the lesson's model (run_updates), trained here or loaded; fills lesson.step_ce and
// lesson.step_lr, returns d2l's per-step figure.
std::vector<double> train_1600_steps(Tutorial& t, Lesson& lesson, const optim::NoamLR& noam) {
    note({.en = "The loop is tasks::train's, written out (seed 004's train_test, with d2l's train_seq2seq "
                "details from seed 000):\n"
                "    lr = rate(step + 1)                 update k uses rate(k): the paper's step_num counts from 1\n"
                "    logits = model(enc_X, dec_in)       teacher forcing, causal mask inside the decoder\n"
                "    l = masked_softmax_ce_loss(logits, label, label_valid)   d2l's loss, one per sequence\n"
                "    sum(l).backward()                   d2l: l.sum().backward()\n"
                "    clip_grad_norm(parameters, 1)       d2l's grad_clipping(net, 1)\n"
                "    adam.step(); adam.zero_grad()\n"
                "d2l's loss per sequence is (1/T) Σ_t CE(t) and its printed figure Σ l / Σ tokens, which is the "
                "per-token cross-entropy divided by T = 9. Below we print seed 004's figure, the mean "
                "cross-entropy per token. (The Annotated Transformer's LambdaLR gives update k the rate "
                "rate(k - 1), with rate(0) = rate(1): the same curve, one step later.)",
          .zh =
              "训练循环就是 tasks::train 的循环，这里写了出来（种子文档 004 的 train_test，加上种子文档 000 里 d2l 的 "
              "train_seq2seq 的细节）：\n"
              "    lr = rate(step + 1)                 第 k 次更新用 rate(k)：论文的 step_num 从 1 数起\n"
              "    logits = model(enc_X, dec_in)       教师强制，解码器内部有因果掩码\n"
              "    l = masked_softmax_ce_loss(logits, label, label_valid)   d2l 的损失，每个序列一个\n"
              "    sum(l).backward()                   d2l：l.sum().backward()\n"
              "    clip_grad_norm(parameters, 1)       d2l 的 grad_clipping(net, 1)\n"
              "    adam.step(); adam.zero_grad()\n"
              "d2l 每个序列的损失是 (1/T) Σ_t CE(t)，它打印的数是 Σ l / Σ 词元数，也就是每个词元的交叉熵再除以 T = 9。"
              "下面打印的是种子文档 004 的那个数：每个词元的平均交叉熵。（The Annotated Transformer 的 LambdaLR 给第 k "
              "次"
              "更新的学习率是 rate(k - 1)，并且 rate(0) = rate(1)：同一条曲线，晚一步。）"});
    const TrainingRecord record = trained_or_loaded(t, lesson, noam);
    const double tokens = static_cast<double>(kBatch * (kLength - 1));
    std::vector<double> d2l_losses;
    for (size_t i = 0; i < record.loss_sum.size(); ++i) {
        // every label is valid, so each l[b] is the mean over T of the per-token losses
        d2l_losses.push_back(record.loss_sum[i] / tokens);
        lesson.step_ce.push_back(record.loss_sum[i] / kBatch);
        lesson.step_lr.push_back(record.lr[i]);
    }
    training_figures(t, lesson);
    return d2l_losses;
}

// The same loop as tasks::train runs it (and so `tformer train copy`), on a twin of the untrained model.
void same_as_tasks_train(Tutorial& t, const Lesson& lesson, const std::vector<double>& d2l_losses) {
    note({.en = "\nThe same loop is what tasks::train (and so `tformer train copy`) runs. Training a second "
                "copy of the untrained model for 20 steps with tasks::train:",
          .zh =
              "\ntasks::train（因而 `tformer train copy`）运行的就是这同一个循环。用 tasks::train 把未训练模型的另一个"
              "副本训练 20 步："});
    c::Generator g2(kSeed);
    auto twin = tasks::build_model(lesson.config, g2);
    tasks::TrainOptions o;  // out_dir left empty: no checkpoint, no loss.csv
    o.epochs = kEpochs;
    o.batch_size = kBatch;
    o.batches_per_epoch = kBatchesPerEpoch;
    o.lr = kPeakLr;
    o.schedule = "noam";
    o.warmup = kWarmup;
    o.clip = kClip;
    o.stop_after_steps = 20;
    o.quiet = true;
    tasks::CheckpointInfo info;
    info.config = lesson.config;
    const tasks::TrainResult r = tasks::train(*twin, g2, lesson.source, o, info);
    double diff = 0;
    for (size_t i = 0; i < 20; ++i) diff = std::max(diff, std::abs(r.step_loss[i] - d2l_losses[i]));
    note({.en = "    step 1..20 losses (d2l's figure): ours {:.5f} ... {:.5f}, tasks::train {:.5f} ... {:.5f}",
          .zh = "    第 1..20 步的损失（d2l 的算法）：我们的 {:.5f} ... {:.5f}，tasks::train 的 {:.5f} ... {:.5f}"},
         d2l_losses[0], d2l_losses[19], r.step_loss[0], r.step_loss[19]);
    t.check(r.step_loss.size() == 20 && diff == 0,
            {.en = "the same 20 losses, to the last bit", .zh = "同样的 20 个损失，逐位相同"});
}

// The loss per step with its epoch means, and the learning rate of every update, as pictures.
void loss_and_schedule_pictures(Tutorial& t, const Lesson& lesson, double factor) {
    tasks::Series per_step{
        .name = "per step", .y = lesson.step_ce, .color = tasks::Rgb{160, 190, 230}, .line_width = 1.0};
    tasks::Series per_epoch{.name = "epoch mean"};
    for (int64_t e = 0; e < kEpochs; ++e) {
        per_epoch.x.push_back(static_cast<double>((e + 1) * kBatchesPerEpoch));
        per_epoch.y.push_back(mean_of(lesson.step_ce, e * kBatchesPerEpoch, (e + 1) * kBatchesPerEpoch));
    }
    for (size_t i = 0; i < lesson.step_ce.size(); ++i) per_step.x.push_back(static_cast<double>(i + 1));
    const auto loss_png = t.out_path("copy_loss.png");
    tasks::plot_lines(loss_png, {.series = {per_step, per_epoch},
                                 .title = "copy task: cross-entropy per token",
                                 .xlabel = "step",
                                 .ylabel = "loss (nats)",
                                 .log_y = true});
    tasks::Series lr_series{.name = "Noam, warmup 100", .y = lesson.step_lr};
    for (size_t i = 0; i < lesson.step_lr.size(); ++i) lr_series.x.push_back(static_cast<double>(i + 1));
    const auto lr_png = t.out_path("noam_schedule.png");
    tasks::plot_lines(lr_png, {.series = {lr_series}, .title = "learning rate", .xlabel = "step", .ylabel = "lr"});
    note({.en = "Wrote\n    {}\n    {}", .zh = "已写出\n    {}\n    {}"}, loss_png.string(), lr_png.string());
    double lr_worst = 0;
    for (size_t i = 0; i < lr_series.y.size(); ++i)
        lr_worst =
            std::max(lr_worst, std::abs(lr_series.y[i] - rate(static_cast<int64_t>(i) + 1, 32, factor, kWarmup)) /
                                   rate(static_cast<int64_t>(i) + 1, 32, factor, kWarmup));
    t.check(lr_series.y.size() == 1600 && lr_worst < 1e-12,
            {.en = "the schedule picture: the learning rate of all 1600 updates is rate(step + 1) written out above",
             .zh = "学习率的图：全部 1600 次更新的学习率都是上面手写的 rate(step + 1)"});
    bool epochs_ok = per_epoch.y.size() == static_cast<size_t>(kEpochs);
    for (int64_t e = 0; epochs_ok && e < kEpochs; ++e) {
        double total = 0;
        for (int64_t i = e * kBatchesPerEpoch; i < (e + 1) * kBatchesPerEpoch; ++i) total += per_step.y[i];
        epochs_ok = std::abs(per_epoch.y[e] - total / kBatchesPerEpoch) < 1e-12 &&
                    per_epoch.x[e] == double((e + 1) * kBatchesPerEpoch);
    }
    t.check(
        epochs_ok && per_step.y.size() == 1600,
        {.en = "the loss picture: 1600 per-step points, and 80 epoch means each the mean of its 20 steps, drawn at "
               "the epoch's end",
         .zh = "损失的图：1600 个逐步的点，以及 80 个迭代周期的平均值，每个都是该周期 20 步的平均，画在周期结束处"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test); seed 000 › 代码实现 › 训练 (train_seq2seq)
void training_with_noam(Tutorial& t, Lesson& lesson) {
    note({.en = "Seed 004's train_test trains with Adam(lr=1e-3) on data_gen(11, 3, 10): ten batches of three "
                "sequences, one loss printed per batch. That shows the loop but is far too little data to "
                "learn the copy. `tformer train copy` runs the same loop longer: batches of 30, 20 per epoch, "
                "80 epochs = 1600 steps, Adam with the learning-rate schedule of \"Attention Is All You Need\" "
                "§5.3. Seed 004 imports LambdaLR but never uses it; the Annotated Transformer, which it follows, "
                "passes LambdaLR this rate():\n"
                "    rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)\n"
                "It rises linearly for `warmup` steps and then falls as 1/√step. With d_model = 32 and warmup "
                "= 100, the factor is chosen so that the peak, at step 100, is 0.005 (seed 000's lr):\n"
                "    factor = 0.005 / (32^-0.5 · 100^-0.5)",
          .zh =
              "种子文档 004 的 train_test 用 Adam(lr=1e-3) 在 data_gen(11, 3, 10) 上训练：十个批量，每批三个序列，每个"
              "批量打印一个损失。这展示了训练循环，但数据太少，学不会复制。`tformer train copy` 把同一个循环跑得更久："
              "每批 30 个，每个迭代周期 20 批，80 个周期 = 1600 步，Adam 配上“Attention Is All You Need”§5.3 的学习率"
              "调度。种子文档 004 导入了 LambdaLR 却从没用它；它所依据的 The Annotated Transformer 把下面这个 rate() "
              "传给 LambdaLR：\n"
              "    rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)\n"
              "它在前 `warmup` 步线性上升，之后按 1/√step 下降。d_model = 32、warmup = 100 时，选 factor 使第 100 步的"
              "峰值为 0.005（种子文档 000 的学习率）：\n"
              "    factor = 0.005 / (32^-0.5 · 100^-0.5)"});
    const double factor = kPeakLr / (std::pow(32.0, -0.5) * std::pow(static_cast<double>(kWarmup), -0.5));
    const optim::NoamLR noam({.d_model = 32, .warmup = kWarmup, .factor = factor});
    noam_against_rate(t, noam, factor);
    const std::vector<double> d2l_losses = train_1600_steps(t, lesson, noam);
    same_as_tasks_train(t, lesson, d2l_losses);
    loss_and_schedule_pictures(t, lesson, factor);
}

// The cached greedy tokens of src[0] against one teacher-forced pass over the decoded sequence.
void cache_equals_teacher_forcing(Tutorial& t, const Lesson& lesson, const c::Tensor& src, const c::Tensor& lens,
                                  const tasks::Decoded& decoded) {
    note({.en = "\nThe cache gives the same answer as seed 004's way. Feeding the decoded sequence back with "
                "teacher forcing (one masked pass over all 9 positions) picks the same token at every position:",
          .zh = "\n用缓存和种子文档 004 的做法给出同样的答案。把解码出的序列用教师强制再喂回去（对全部 9 "
                "个位置做一次带掩码"
                "的前向），每个位置选出的词元都相同："});
    ag::NoGradGuard no_grad;
    lesson.model->eval();
    std::vector<int64_t> dec = {1};
    dec.insert(dec.end(), decoded.tokens.begin(), decoded.tokens.end() - 1);
    const c::Tensor dec_in = c::from_vector(dec, {1, kLength - 1});
    const c::Tensor logits =
        lesson.model->forward(src.slice(0, 0, 1).contiguous(), dec_in, lens.slice(0, 0, 1)).value();
    const c::Tensor picks = c::argmax(logits, -1);  // (1, 9)
    show({.en = "argmax of the teacher-forced logits", .zh = "教师强制下 logits 的 argmax"}, picks);
    t.check(picks.to_vector<int64_t>() == decoded.tokens,
            {.en = "the same 9 tokens as the cached greedy steps", .zh = "与用缓存的贪心解码各步选出的 9 个词元相同"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型预估 (inference_test's tgt = zeros(1, 1)): src[0] decoded from 0
void decoding_from_zero(Tutorial& t, const Lesson& lesson, const c::Tensor& src, const c::Tensor& lens) {
    note({.en = "\nSeed 004's inference_test starts from tgt = zeros(1, 1): symbol 0, which its own data_gen "
                "never produces (every training sequence starts with 1), so the embedding row of 0 never "
                "received a gradient. Decoding [1, 2, ..., 10] from 0 instead of 1, one step at a time through "
                "the cache, with the two most likely next symbols:",
          .zh =
              "\n种子文档 004 的 inference_test 从 tgt = zeros(1, 1) 开始：符号 0，而它自己的 data_gen 从不产生 0（每个"
              "训练序列都以 1 开头），所以 0 那一行嵌入从没得到过梯度。从 0 而不是 1 开始解码 [1, 2, ..., 10]，借助缓存"
              "一次一步，并列出最可能的两个下一个符号："});
    ag::NoGradGuard no_grad;
    lesson.model->eval();
    const c::Tensor src1 = src.slice(0, 0, 1).contiguous(), len1 = lens.slice(0, 0, 1);
    nn::DecoderState state = lesson.model->decoder->init_state(lesson.model->encoder->forward(src1, len1), len1);
    std::vector<int64_t> out = {0};
    line({.en = "\n      step  fed   first choice   second choice",
          .zh = "\n      步    输入  第一选择       第二选择"});
    for (int64_t step = 0; step < kLength - 1; ++step) {
        const c::Tensor fed = c::from_vector(std::vector<int64_t>{out.back()}, {1, 1});
        const std::vector<double> p =
            c::softmax(lesson.model->decoder->forward_step(fed, state).value()).to(DType::float64).to_vector<double>();
        std::vector<int64_t> order(p.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return p[i] > p[j]; });
        line("      {:>4} {:>4}   {:>3} ({:.3f})    {:>3} ({:.3f})", step, out.back(), order[0], p[order[0]], order[1],
             p[order[1]]);
        out.push_back(order[0]);
    }
    line();
    const std::vector<int64_t> want = row(src, 0);
    note(both("    start 0:  {}"), join(out));
    t.check(!std::equal(out.begin() + 1, out.end(), want.begin() + 1),
            {.en = "started from seed 004's 0, the same model does not copy [1, ..., 10]",
             .zh = "从种子文档 004 的 0 开始，同一个模型就复制不出 [1, ..., 10]"});
    t.check(std::equal(out.end() - 5, out.end(), want.end() - 5),
            {.en = "but it finds its place again: the last five symbols, 6 7 8 9 10, are right",
             .zh = "但它又找回了位置：最后五个符号 6 7 8 9 10 是对的"});
    note(
        {.en = "A wrong start costs more than one step. The decoder does not go by its position alone: its "
               "self-attention also reads the symbols fed back so far, so after one wrong symbol the next "
               "steps can be unsure or wrong too (look at the probabilities above) until the symbols fed "
               "back and the positions agree again. Seed 004's decoding does not match its own data_gen: "
               "decode from the start symbol the model was trained with.",
         .zh =
             "开头错了，代价不止一步。解码器并不只看位置：它的自注意力还读到目前为止喂回去的符号，所以一个符号错了之后"
             "，"
             "接下来几步也可能拿不准或出错（看上面的概率），直到喂回去的符号和位置重新对上为止。种子文档 004 的解码与它"
             "自己的 data_gen 不匹配：应当从模型训练时用的起始符号开始解码。"});
}

// 200 sequences the training never drew, decoded greedily as one batch: exact-sequence accuracy.
void fresh_test_sequences(Tutorial& t, const Lesson& lesson) {
    note({.en = "\nNow 200 fresh sequences from a generator the training never used (seed 12345), decoded as one "
                "batch of 200:",
          .zh = "\n再取 200 个新序列，来自训练从没用过的随机数生成器（种子 12345），作为一个大小为 200 的批量解码："});
    c::Generator g_test(12345);
    const tasks::Batch test = tasks::copy_batch(200, kLength, kVocab, g_test);
    const auto results = tasks::greedy_decode(*lesson.model, test.enc_X, test.enc_valid,
                                              {.bos = 1, .eos = -1, .max_steps = kLength - 1});
    int64_t exact = 0, tokens_right = 0;
    for (int64_t b = 0; b < 200; ++b) {
        const std::vector<int64_t> want = row(test.label, b);
        exact += results[b].tokens == want;
        for (size_t i = 0; i < want.size() && i < results[b].tokens.size(); ++i)
            tokens_right += results[b].tokens[i] == want[i];
    }
    note({.en = "    exact sequences {} / 200, tokens {} / 1800", .zh = "    完全正确的序列 {} / 200，词元 {} / 1800"},
         exact, tokens_right);
    t.check(exact == 200,
            {.en = "exact-sequence accuracy on 200 fresh sequences: 100%", .zh = "200 个新序列上的整序列准确率：100%"});
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型预估 (inference_test); seed 000 › 代码实现 › 预测
void greedy_decoding(Tutorial& t, Lesson& lesson) {
    note(
        {.en = "Seed 004's inference_test encodes [[1, 2, ..., 10]] once, then 9 times runs the decoder over "
               "the whole prefix and appends the argmax of the last position. tasks::greedy_decode does the "
               "same with the decoder's KV cache (tutorial 11): each step feeds only the newest token. We start "
               "from the start symbol 1, as in training (seed 004 starts from 0; see below).",
         .zh =
             "种子文档 004 的 inference_test 把 [[1, 2, ..., 10]] 编码一次，然后 9 次在整个前缀上运行解码器，把最后一个"
             "位置的 argmax 接到后面。tasks::greedy_decode 借助解码器的 KV 缓存做同样的事（教程 11）：每一步只输入最新"
             "的那个词元。我们像训练时一样从起始符号 1 开始（种子文档 004 从 0 开始；见下文）。"});
    const c::Tensor src = c::from_vector(std::vector<int64_t>{1, 2,  3, 4, 5, 6, 7, 8, 9, 10,  //
                                                              1, 10, 9, 8, 7, 6, 5, 4, 3, 2,   //
                                                              1, 7,  7, 7, 7, 7, 7, 7, 7, 7,   //
                                                              1, 3,  1, 4, 1, 5, 9, 2, 6, 5},
                                         {4, kLength});
    const c::Tensor lens = c::full({4}, static_cast<double>(kLength), DType::int64);
    const auto decoded =
        tasks::greedy_decode(*lesson.model, src, lens, {.bos = 1, .eos = -1, .max_steps = kLength - 1});
    bool all_exact = true;
    for (int64_t b = 0; b < 4; ++b) {
        std::vector<int64_t> out = {1};
        out.insert(out.end(), decoded[b].tokens.begin(), decoded[b].tokens.end());
        const bool exact = out == row(src, b);
        all_exact = all_exact && exact;
        note(both("    {:<24} ->  {:<24} {}"), join(row(src, b)), join(out),
             exact ? phrase({.en = "copied", .zh = "复制正确"}) : phrase({.en = "WRONG", .zh = "错误"}));
    }
    t.check(all_exact, {.en = "all four are copied exactly, including [1, 2, ..., 10] of seed 004's inference_test",
                        .zh = "四个全都复制得一字不差，包括种子文档 004 的 inference_test 里的 [1, 2, ..., 10]"});
    cache_equals_teacher_forcing(t, lesson, src, lens, decoded.front());
    decoding_from_zero(t, lesson, src, lens);
    fresh_test_sequences(t, lesson);
}

// The last block's cross-attention on [1, ..., 10]: every head's largest weight one source position ahead.
void cross_attention_one_ahead(Tutorial& t, const std::vector<c::Tensor>& cross_w, int64_t H) {
    note({.en = "The cross-attention of block 2, averaged over its 4 heads, in percent (rows: steps t = 0..8, "
                "fed 1..9; columns: source positions 0..9, holding 1..10):",
          .zh = "块 2 的交叉注意力，对 4 个头取平均，以百分比表示（行：第 t = 0..8 步，输入 1..9；列：源序列位置 0..9，"
                "存放 1..10）："});
    show("cross (%)", percent(c::mean(cross_w[1], {0})));
    bool shifted = true;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t q = 0; q < kLength - 1; ++q)
            shifted =
                shifted && c::argmax(cross_w[1].select(0, h).select(0, q), 0).item() == static_cast<double>(q + 1);
    t.check(shifted, {.en = "in the last block every head puts its largest weight of step t on source position t + 1",
                      .zh = "最后一个块里，每个头在第 t 步的最大权重都落在源序列位置 t + 1 上"});
    note(
        {.en = "A diagonal, one place to the right of the main one. Step t has src[t] in hand and needs "
               "src[t + 1], so it reads the source one position further on: the query of decoder position t "
               "matches the key of encoder position t + 1. The positions come from the positional encoding "
               "(tutorial 08): PE(t + 1) is a fixed rotation of PE(t), the same for every t, so one pair of "
               "W_q, W_k can turn 'my position' into 'the next position' all along the sequence. The value "
               "read there carries the symbol, and the output layer names it.",
         .zh =
             "一条对角线，在主对角线右边一格。第 t 步手里有 src[t]，需要的是 src[t + "
             "1]，所以它读源序列里再往后一个位置："
             "解码器位置 t 的查询与编码器位置 t + 1 的键相匹配。位置信息来自位置编码（教程 08）：PE(t + 1) 是 PE(t) "
             "的一个固定旋转，对每个 t 都一样，所以一对 W_q、W_k 就能在整个序列上把“我的位置”变成“下一个位置”。那里读到"
             "的值带着符号，输出层再说出它是哪个符号。"});
}

// The cross-attention of both blocks over the 200 test sequences, test_cross[block] (200·H, T, S).
void cross_attention_over_test_sequences(Tutorial& t, const std::vector<c::Tensor>& test_cross, int64_t H) {
    note({.en = "\nOver the 200 test sequences of step 4 (1800 decoder steps), per block: how often the "
                "largest weight of each head (and of their mean) falls on t + 1, and the mean weight there.",
          .zh =
              "\n在第 4 步的 200 个测试序列上（1800 个解码步），按块统计：每个头（以及各头的平均）的最大权重落在 t + 1 "
              "上的次数，以及那里的平均权重。"});
    std::vector<int64_t> mean_hits(2);
    std::vector<double> weight_at_next(2);
    line({.en = "\n      block   argmax at t + 1:  head 1  head 2  head 3  head 4   mean of heads   weight at t + 1",
          .zh = "\n      块      argmax 在 t + 1： 头 1    头 2    头 3    头 4     各头平均        t + 1 处的权重"});
    for (int64_t blk = 0; blk < 2; ++blk) {
        const c::Tensor w = test_cross[blk].view({200, H, kLength - 1, kLength});
        std::vector<int64_t> hits(H + 1, 0);
        for (int64_t h = 0; h <= H; ++h) {
            const c::Tensor am = c::argmax(h < H ? w.select(1, h) : c::mean(w, {1}), -1);  // (200, T)
            for (int64_t b = 0; b < 200; ++b)
                for (int64_t q = 0; q < kLength - 1; ++q) hits[h] += am.at({b, q}) == static_cast<double>(q + 1);
        }
        double at_next = 0;
        for (int64_t q = 0; q < kLength - 1; ++q) at_next += c::mean(w.select(2, q).select(2, q + 1)).item();
        mean_hits[blk] = hits[H];
        weight_at_next[blk] = at_next / static_cast<double>(kLength - 1);
        line("      {:>5}                    {:>6}  {:>6}  {:>6}  {:>6}   {:>13}   {:>15.3f}", blk + 1, hits[0],
             hits[1], hits[2], hits[3], hits[4], weight_at_next[blk]);
    }
    line();
    t.check(mean_hits[1] >= 1782,
            {.en = "block 2: the heads' mean points at t + 1 in {} of 1800 steps (at least 99%)",
             .zh = "块 2：各头的平均在 1800 步中有 {} 步指向 t + 1（至少 99%）"},
            mean_hits[1]);
    t.check(mean_hits[0] < mean_hits[1] && weight_at_next[0] < weight_at_next[1],
            {.en = "block 1 is blurrier: fewer hits and less weight on t + 1 than block 2",
             .zh = "块 1 更模糊：比块 2 命中 t + 1 的次数更少，放在 t + 1 上的权重也更少"});
    note({.en = "The first block's heads are broader, some split between t (the symbol just fed) and t + 1; "
                "the second block, which feeds the output layer, is sharp.",
          .zh = "第一个块的头更分散，有的在 t（刚输入的符号）和 t + 1 之间分配；第二个块直接连着输出层，它很尖锐。"});
}

// The encoder's self-attention: block 1 on [1, ..., 10] (enc_w), and both blocks over the test sequences.
void encoder_self_attention(Tutorial& t, const std::vector<c::Tensor>& enc_w, const std::vector<c::Tensor>& test_enc,
                            int64_t H) {
    note({.en = "\nThe encoder's self-attention, block 1, averaged over the heads, in percent (rows: queries, "
                "columns: keys, both source positions 0..9):",
          .zh = "\n编码器的自注意力，块 1，对各头取平均，以百分比表示（行：查询，列：键，都是源序列位置 0..9）："});
    show("self (%)", percent(c::mean(enc_w[0], {0})));
    std::vector<double> on_self(2, 0), on_first(2, 0);
    for (int64_t blk = 0; blk < 2; ++blk) {
        const c::Tensor w = test_enc[blk].view({200, H, kLength, kLength});
        for (int64_t q = 0; q < kLength; ++q) on_self[blk] += c::mean(w.select(2, q).select(2, q)).item() / kLength;
        on_first[blk] = c::mean(w.select(3, 0)).item();
    }
    note({.en = "The encoder shows no diagonal. The mean weight a position gives, over the 200 test sequences:",
          .zh = "编码器没有对角线。在 200 个测试序列上，一个位置平均给出的权重："});
    line({.en = "\n      block   on itself   on position 0 (the start symbol)",
          .zh = "\n      块      给自己      给位置 0（起始符号）"});
    for (int64_t blk = 0; blk < 2; ++blk)
        line("      {:>5}   {:>9.2f}   {:>13.2f}", blk + 1, on_self[blk], on_first[blk]);
    line();
    note({.en = "On itself it is near the uniform 1/10; position 0, which holds the start symbol in every sequence, "
                "gets more. The copy does not need the encoder to move anything: the residual connections (AddNorm) "
                "keep each position's own symbol in its output, and the decoder's cross-attention fetches it from "
                "there.",
          .zh =
              "给自己的接近均匀的 1/10；位置 0 在每个序列里都存放起始符号，分到的更多。复制并不需要编码器搬动任何东西："
              "残差连接（AddNorm）让每个位置的输出里保留它自己的符号，解码器的交叉注意力就从那里把它取走。"});
    t.check(on_self[0] < 0.3 && on_self[1] < 0.3,
            {.en = "encoder: less than 0.3 of a position's attention on itself, in both blocks",
             .zh = "编码器：两个块里，一个位置给自己的注意力都不到 0.3"});
    t.check(on_first[0] > 0.1 && on_first[1] > 0.1,
            {.en = "encoder: more than the uniform 1/10 on position 0 (the start symbol)",
             .zh = "编码器：位置 0（起始符号）分到的多于均匀的 1/10"});
}

// The pictures of [1, ..., 10]'s attention: blocks in rows, heads in columns.
void attention_pictures(Tutorial& t, const std::vector<c::Tensor>& enc_w, const std::vector<c::Tensor>& cross_w,
                        int64_t H) {
    std::vector<std::string> source, fed;
    for (int64_t i = 1; i <= kLength; ++i) source.push_back(std::to_string(i));
    for (int64_t i = 1; i < kLength; ++i) fed.push_back(std::to_string(i));
    const std::vector<std::string> head_titles = tutorial::head_titles(H);
    const auto enc_png = t.out_path("copy_encoder_attention.png");
    const auto cross_png = t.out_path("copy_cross_attention.png");
    const tasks::HeatmapLayout enc_layout =
        tasks::plot_heatmaps(enc_png, {.matrices = tasks::heatmap_grid(c::stack(enc_w, 0)),  // (2, H, S, S)
                                       .xlabel = "keys: source symbols",
                                       .ylabel = "queries: source symbols",
                                       .titles = head_titles,
                                       .title = "encoder self-attention, blocks 1 (top) and 2",
                                       .x_ticks = source,
                                       .y_ticks = source});
    const tasks::HeatmapLayout cross_layout =
        tasks::plot_heatmaps(cross_png, {.matrices = tasks::heatmap_grid(c::stack(cross_w, 0)),  // (2, H, T, S)
                                         .xlabel = "keys: source symbols",
                                         .ylabel = "queries: symbol fed",
                                         .titles = head_titles,
                                         .title = "encoder-decoder attention, blocks 1 (top) and 2",
                                         .x_ticks = source,
                                         .y_ticks = fed});
    note({.en = "Wrote\n    {}\n    {}", .zh = "已写出\n    {}\n    {}"}, enc_png.string(), cross_png.string());
    t.check(enc_layout.rows == 2 && enc_layout.cols == H && cross_layout.rows == 2 && cross_layout.cols == H,
            {.en = "both heatmaps were laid out as 2 blocks × 4 heads", .zh = "两张热力图都排成 2 个块 × 4 个头"});
    const c::Tensor drawn = c::stack(cross_w, 0);  // (2, H, T, S): what heatmap_grid laid out
    t.check(drawn.shape() == c::Shape{2, H, kLength - 1, kLength} &&
                c::max(c::abs(c::sub(c::sum(drawn, {3}), c::ones({2, H, kLength - 1})))).item() < 1e-5,
            {.en = "the cross-attention picture: (2 blocks, 4 heads, 9 steps, 10 source positions), every row a "
                   "distribution",
             .zh = "交叉注意力的图：(2 个块，4 个头，9 步，10 个源序列位置)，每一行都是一个分布"});
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器, 解码器 (the attention weights kept for heatmaps)
void what_the_attention_looks_at(Tutorial& t, Lesson& lesson) {
    note({.en = "Run the trained model once more on [1, 2, ..., 10], teacher-forced with its own output, and "
                "keep the attention weights (seed 000's _attention_weights): the encoder's self-attention, "
                "(H, S, S) = (4, 10, 10) per block, and the decoder's encoder–decoder (cross) attention, "
                "(H, T, S) = (4, 9, 10) per block: row t is decoder position t, which was fed src[t] and must "
                "output src[t + 1].",
          .zh = "把训练好的模型在 [1, 2, ..., 10] 上再运行一次，用它自己的输出做教师强制，并保留注意力权重（种子文档 "
                "000 的 "
                "_attention_weights）：编码器的自注意力，每个块 (H, S, S) = (4, 10, 10)；解码器的编码器-解码器注意力"
                "（交叉注意力），每个块 (H, T, S) = (4, 9, 10)：第 t 行是解码器位置 t，它输入的是 src[t]，必须输出 "
                "src[t + 1]。"});
    ag::NoGradGuard no_grad;
    lesson.model->eval();
    const int64_t H = lesson.config.transformer.num_heads;
    const c::Tensor src = c::arange(1, 11, 1, DType::int64).view({1, kLength});
    const c::Tensor lens = c::full({1}, static_cast<double>(kLength), DType::int64);
    const c::Tensor dec_in = c::arange(1, 10, 1, DType::int64).view({1, kLength - 1});
    nn::DecoderState state = lesson.model->decoder->init_state(lesson.model->encoder->forward(src, lens), lens);
    lesson.model->decoder->forward(dec_in, state);
    const std::vector<c::Tensor> enc_w = lesson.model->encoder->attention_weights();       // [block] (H, S, S)
    const std::vector<c::Tensor> cross_w = lesson.model->decoder->attention_weights()[1];  // [block] (H, T, S)
    cross_attention_one_ahead(t, cross_w, H);

    c::Generator g_test(12345);  // step 4's 200 test sequences
    const tasks::Batch test = tasks::copy_batch(200, kLength, kVocab, g_test);
    nn::DecoderState test_state =
        lesson.model->decoder->init_state(lesson.model->encoder->forward(test.enc_X, test.enc_valid), test.enc_valid);
    lesson.model->decoder->forward(test.dec_in, test_state);
    const std::vector<c::Tensor> test_enc = lesson.model->encoder->attention_weights();       // [block] (B·H, S, S)
    const std::vector<c::Tensor> test_cross = lesson.model->decoder->attention_weights()[1];  // [block] (B·H, T, S)
    cross_attention_over_test_sequences(t, test_cross, H);
    encoder_self_attention(t, enc_w, test_enc, H);
    attention_pictures(t, enc_w, cross_w, H);
}

// ---- the exercise (--exercise): tutorials/12_copy_task/exercise.cpp ------------------------

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (Batch), with padding, written by the reader
void exercise_seed004_batch(Tutorial& t) {
    note({.en = "Write exercise::make_batch. Seed 004's copy task never pads, so its Batch looks simpler than it is; "
                "the checks give it two targets padded with 0 and compare every field with hand-made answers.",
          .zh = "写出 exercise::make_batch。种子文档 004 的复制任务从不填充，所以它的 Batch "
                "看上去比实际简单；检查会给它两个"
                "用 0 填充的目标序列，把每个字段与手算的答案比较。"});
    const c::Tensor tgt = c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 0, 1, 4, 4, 2, 9}, {2, 5});
    const exercise::Batch b = exercise::make_batch(tgt, tgt, 0);
    t.check(b.tgt.defined() && same_ids(b.tgt, c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 1, 4, 4, 2}, {2, 4})),
            both("tgt = tgt[:, :-1] = [[1, 3, 5, 0], [1, 4, 4, 2]]"));
    t.check(
        b.tgt_y.defined() && same_ids(b.tgt_y, c::from_vector(std::vector<int64_t>{3, 5, 0, 0, 4, 4, 2, 9}, {2, 4})),
        both("tgt_y = tgt[:, 1:] = [[3, 5, 0, 0], [4, 4, 2, 9]]"));
    t.check(b.ntokens == 6,
            {.en = "ntokens = 6 labels that are not padding (you say {})",
             .zh = "ntokens = 6 个不是填充的标签（你给出的是 {}）"},
            b.ntokens);
    bool mask_ok = b.tgt_mask.defined() && b.tgt_mask.shape() == c::Shape{2, 4, 4};
    const std::vector<int64_t> input = {1, 3, 5, 0, 1, 4, 4, 2};
    for (int64_t r = 0; mask_ok && r < 2; ++r)
        for (int64_t q = 0; q < 4; ++q)
            for (int64_t k = 0; k < 4; ++k)
                mask_ok = mask_ok && (b.tgt_mask.at({r, q, k}) != 0) == (k <= q && input[r * 4 + k] != 0);
    t.check(mask_ok, {.en = "tgt_mask (2, 4, 4): key k visible to query q when k ≤ q and tgt[k] is not padding",
                      .zh = "tgt_mask (2, 4, 4)：当 k ≤ q 且 tgt[k] 不是填充时，查询 q 能看到键 k"});
}

// ---- faults for the tests (--inject-fault NAME): plausible wrong computations a check must catch ----

namespace faults {

// labels-not-shifted: Batch with tgt_y = tgt[:, :-1], the decoder's own input, as labels: a model trained
// on it learns to repeat what it was fed.
Seed004Batch batch_with_unshifted_labels(const c::Tensor& data) {
    Seed004Batch b = seed004_batch(data);
    b.tgt_y = b.tgt;
    return b;
}

// init-xavier: a Linear initialised the way tasks::build_model does it (Xavier-uniform weight,
// ±√(6/(in + out)), zero bias) instead of PyTorch's default, which seed 004's model gets.
void xavier_linear_init(nn::StateDict& init, const std::string& name, int64_t in, int64_t out, c::Generator& g) {
    const double bound = std::sqrt(6.0 / static_cast<double>(in + out));
    init[name + ".weight"] = c::sub(c::mul(c::rand({out, in}, g), 2 * bound), bound);
    init[name + ".bias"] = c::zeros({out});
}

}  // namespace faults

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 12 · The copy task: train, decode greedily, look at the attention",
                   .zh = "tformer 教程 12 · 复制任务：训练、贪心解码、看注意力"},
         .follows = {.en = "seed 004 模型结构, 编码器, 解码器, 模型训练 (train_test), 模型预估 "
                           "(inference_test), 完整代码 (data_gen, Batch, subsequent_mask); seed 000 训练, 预测",
                     .zh = "种子文档 004 模型结构、编码器、解码器、模型训练（train_test）、模型预估（inference_test）、"
                           "完整代码（data_gen、Batch、subsequent_mask）；种子文档 000 训练、预测"},
         .exercise = {.en = "write seed 004's Batch with padding: the shifted decoder input, the labels, the "
                            "mask and ntokens (tutorials/12_copy_task/exercise.cpp)",
                      .zh = "写出带填充的种子文档 004 的 Batch：右移后的解码器输入、标签、掩码和 ntokens"
                            "（tutorials/12_copy_task/exercise.cpp）"},
         .literal = {.en = "run seed 004's train_test and inference_test exactly as written (d_model 32, "
                           "8 heads, data_gen(11, 3, 10), Adam lr 1e-3), from tformer's own random "
                           "initialisation, and check what they print",
                     .zh = "一字不差地照原文运行种子文档 004 的 train_test 和 inference_test（d_model 32，8 个头，"
                           "data_gen(11, 3, 10)，Adam lr 1e-3），从 tformer 自己的随机初始化出发，并检查它们打印的"
                           "内容"}});
    // The matrices here are tiny (30 × 10 × 32): one thread is fastest, and it
    // keeps the run reproducible (the README has the timings).
    c::set_num_threads(1);
    Lesson lesson;
    if (t.literal()) {
        t.step({.en = "Literal. Seed 004's train_test() and inference_test(), as written",
                .zh = "Literal. 照原文运行种子文档 004 的 train_test() 和 inference_test()"},
               [&] { literal_train_and_inference(t); });
        return t.finish();
    }
    t.step({.en = "0. Seed 004's train_test and inference_test, against PyTorch",
            .zh = "0. 种子文档 004 的 train_test 和 inference_test，与 PyTorch 对照"},
           [&] { seed004_against_pytorch(t); });
    t.step({.en = "1. The data: seed 004's data_gen and Batch", .zh = "1. 数据：种子文档 004 的 data_gen 和 Batch"},
           [&] { copy_task_data(t, lesson); });
    t.step({.en = "2. The model", .zh = "2. 模型"}, [&] { the_model(t, lesson); });
    t.step({.en = "3. Training: Adam with the Noam schedule", .zh = "3. 训练：Adam 配 Noam 学习率调度"},
           [&] { training_with_noam(t, lesson); });
    t.step({.en = "4. Greedy decoding with the KV cache", .zh = "4. 借助 KV 缓存的贪心解码"},
           [&] { greedy_decoding(t, lesson); });
    t.step({.en = "5. What the attention looks at", .zh = "5. 注意力在看什么"},
           [&] { what_the_attention_looks_at(t, lesson); });
    t.exercise({.en = "Exercise. Seed 004's Batch, with padding", .zh = "练习. 带填充的种子文档 004 的 Batch"},
               [&] { exercise_seed004_batch(t); });
    return t.finish();
}
