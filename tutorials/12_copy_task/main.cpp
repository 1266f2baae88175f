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
// own random initialisation instead.
//
// tutorial-literal-test: timeout=120
// Read it with tutorials/12_copy_task/README.md.
// A minute alone; more on a busy machine:
// tutorial-test: timeout=300
#include "common/models.hpp"
#include "common/prelude.hpp"
#include "common/reference.hpp"
#include "exercise.hpp"
#include "nn/loss.hpp"
#include "nn/transformer.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
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

// train_test's loop: for each batch, zero_grad, forward, CrossEntropyLoss on
// the log-probabilities (the document applies log_softmax twice: harmless,
// log_softmax(log_softmax(z)) = log_softmax(z)), backward, Adam step. Returns
// the ten losses it prints.
std::vector<double> seed004_train_test(Seed004Transform& model, const std::vector<c::Tensor>& batches) {
    optim::Adam optimizer(model.named_parameters(), {.lr = 1e-3});
    std::vector<double> losses;
    for (const c::Tensor& data : batches) {
        const Seed004Batch batch = seed004_batch(data);
        optimizer.zero_grad();
        const Variable outputs = model.forward(batch.src, batch.tgt, batch.tgt_mask);  // (B, T, V) log-probabilities
        const Variable loss = ag::cross_entropy(ag::reshape(outputs, {-1, kVocab}), batch.tgt_y.reshape({-1}));
        losses.push_back(loss.item());
        line("    loss:  tensor({:.4f}, grad_fn=<NllLossBackward0>)", loss.item());
        loss.backward();
        optimizer.step();
    }
    return losses;
}

// The stored weights of seed 004's Transform as PyTorch's default initialisation draws them (Linear:
// U(±1/√in) for weight and bias, Embedding: N(0, 1), LayerNorm: ones and zeros), from `g`: encoders.0,
// decoders.0 with one attention (the deepcopies are Seed004Transform's), the embeddings and proj.
nn::StateDict seed004_default_init(c::Generator& g) {
    nn::StateDict init;
    auto linear_init = [&](const std::string& name, int64_t in, int64_t out) {
        nn::Linear l({.in_features = in, .out_features = out}, g);
        init[name + ".weight"] = l.weight.value();
        init[name + ".bias"] = l.bias.value();
    };
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
std::vector<c::Tensor> seed004_data_gen(c::Generator& g) {
    std::vector<c::Tensor> batches;
    for (int i = 0; i < 10; ++i) {
        c::Tensor data = c::zeros({3, 10}, DType::int64);
        for (int64_t b = 0; b < 3; ++b)
            for (int64_t j = 0; j < 10; ++j)
                data.set({b, j}, j == 0 ? 1.0 : static_cast<double>(1 + g.randint(kVocab - 1)));
        batches.push_back(data);
    }
    return batches;
}

// inference_test's loop: encode [[1..10]], then 9 times decode the whole
// prefix with subsequent_mask and append the argmax of the last position.
std::vector<int64_t> seed004_inference_test(const Seed004Transform& model, c::Tensor* memory_out = nullptr) {
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
        const c::Tensor prob = model.generator(ag::select(out, 1, T - 1)).value();  // (1, V)
        tgt.push_back(static_cast<int64_t>(c::argmax(prob, 1).item()));
    }
    line("    Example Untrained Model Prediction: tensor([[{}]])", fmt::join(tgt, ", "));
    return tgt;
}

// What the steps share: the model of `tformer train copy`, its generator and its batches, and the
// per-step figures of its training (step 3) for the pictures.
struct Lesson {
    const tasks::ModelConfig config = copy_config();
    c::Generator gen{kSeed};                    // the model's initialisation (and its dropout, here 0)
    std::shared_ptr<nn::EncoderDecoder> model;  // built in step 2, trained in step 3
    const tasks::BatchSource source = tasks::copy_source(kBatch, kLength, kVocab, kBatchesPerEpoch, kSeed);
    std::vector<double> step_ce, step_lr;  // step 3: mean cross-entropy per token and learning rate, per update
};

// ---- the steps --------------------------------------------------------------------------

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test), 模型预估 (inference_test), exactly as written
void literal_train_and_inference(Tutorial& t) {
    note(
        "Seed 004 ends with train_test() and inference_test(). Both build Transform(Encoder(32, 64, "
        "MultiHeadedAttention(8, 32)), Decoder(...), Embeddings(32, 11) × 2, 32, 11, N=2) with PyTorch's "
        "default initialisation; here the same model is initialised the same way (Linear: U(±1/√in), "
        "Embedding: N(0, 1), LayerNorm: ones and zeros) from tformer's generator, and the document's "
        "deepcopies are kept: both encoder layers, both decoder layers, and the two attentions of a "
        "decoder layer start from the same weights. train_test draws data_gen(11, 3, 10): ten batches of "
        "three sequences of 10 symbols in 1..10 starting with 1, and prints the loss of each:");
    c::Generator g(2004);
    Seed004Transform model(seed004_default_init(g));
    t.check(
        static_cast<int64_t>(model.params.size()) == 2 * 16 + 2 * 26 + 4 &&
            [&] {
                int64_t n = 0;
                for (const auto& [name, p] : model.params) n += p.numel();
                return n == 43'819;
            }(),
        "88 weight tensors, 43,819 numbers: seed 004's model with its biases (tutorial step 2)");
    note("\ninference_test() first, on the untrained weights (the document builds a fresh model for it):");
    const std::vector<int64_t> prediction = seed004_inference_test(model);
    t.check(prediction.size() == 10 && prediction.front() == 0 &&
                std::all_of(prediction.begin(), prediction.end(), [](int64_t id) { return id >= 0 && id < kVocab; }),
            "it prints memory (1, 10, 32), out (1, t, 32) for t = 1..9, and 10 symbols starting with the 0 it "
            "was given");
    note("\ntrain_test():");
    const std::vector<double> losses = seed004_train_test(model, seed004_data_gen(g));
    bool finite = losses.size() == 10;
    for (double l : losses) finite = finite && std::isfinite(l);
    t.check(finite, "ten losses, one per batch, all finite");
    t.check(losses.front() > std::log(11.0) - 0.3 && losses.front() < 3.5,
            fmt::format("the first is near ln 11 = {:.3f}, the loss of a uniform guess", std::log(11.0)));
    t.check(*std::min_element(losses.begin(), losses.end()) < losses.front(), "and some later batch scores lower");
    note(
        "Ten Adam steps on thirty sequences barely move the model: the losses wander around ln 11 (step 0 "
        "runs the same from PyTorch's own weights and batches and matches its printout). Steps 3-5 of this "
        "tutorial train the copy task for real.");
}

// seed 004 (004_a3b87e182ede5d90.txt) › transform · 模型结构, 模型训练, 模型预估, run by torch (tests/fixtures/)
void seed004_against_pytorch(Tutorial& t) {
    note(
        "Seed 004's own code, run by torch: tests/fixtures/seed004_copy.safetensors holds the initial weights "
        "of its Transform (d_model 32, 8 heads, FFN 64, N = 2, biases everywhere, seed 004's LayerNorm), the "
        "ten batches its data_gen(11, 3, 10) drew, the ten losses train_test printed and inference_test's "
        "prediction on the untrained weights. The model is written out in this file (class Seed004Transform) "
        "with autograd ops; it starts from the same weights and sees the same batches:");
    note(
        "Seed 004's structure description swaps two words: it calls the left side (a stack of encoders that "
        "reads src and outputs the memory) '解码部分' and the right side (the decoders) '编码部分'. The code "
        "below follows the code: encoders on the source, decoders on the target and the memory.");
    const tutorial::Reference ref("seed004_copy");
    nn::StateDict init;
    for (const auto& [name, value] : ref.with_prefix("init")) init[name] = value;
    Seed004Transform model(init);
    t.check(init.size() == 38 && model.params.size() == 88,
            "the deepcopies: 38 stored weights (encoders.0, decoders.0 with one attention) become the model's 88");

    note("\ninference_test() on the untrained weights:");
    c::Tensor memory;
    const std::vector<int64_t> prediction = seed004_inference_test(model, &memory);
    t.check_allclose(memory, ref["inference.memory"], 1e-5, "memory (1, 10, 32) matches PyTorch's");
    t.check(prediction == ref["inference.prediction"].reshape({-1}).to_vector<int64_t>(),
            fmt::format("the prediction equals PyTorch's [{}] (every step's top two log-probabilities differ by at "
                        "least {:.3f}, so rounding cannot swap them)",
                        fmt::join(ref["inference.prediction"].reshape({-1}).to_vector<int64_t>(), ", "),
                        c::min(ref["inference.margin"]).item()));
    note("\ntrain_test() on the same ten batches:");
    std::vector<c::Tensor> batches;
    for (int i = 0; i < 10; ++i) batches.push_back(ref[fmt::format("train.batch{}", i)]);
    const std::vector<double> losses = seed004_train_test(model, batches);
    const c::Tensor theirs = ref["train.loss"];
    note("    PyTorch printed: {:.4f}", fmt::join(theirs.to_vector(), ", "));
    t.check_allclose(c::tensor(losses, {10}, DType::float64), theirs, 1e-5, "the ten losses match PyTorch's");
    t.check_allclose(model.params.at("proj.weight").value(), ref["train.final.proj.weight"], 1e-4,
                     "and after ten Adam steps the output layer's weights still match");
    c::Generator gz(1212);  // not `gen`: that one initialises step 2's model
    const c::Tensor z = c::randn({3, kVocab}, gz);
    t.check_close(c::log_softmax(c::log_softmax(z)), c::log_softmax(z), 1e-6,
                  "the document's loss applies log_softmax twice (generator, then CrossEntropyLoss): harmless, "
                  "log_softmax(log_softmax(z)) = log_softmax(z) since the log-probabilities already sum to 1");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (data_gen's torch.randint(1, V)): 1000 sequences counted
void symbols_drawn_evenly(Tutorial& t) {
    note(
        "\nThe decoder is masked with seed 004's subsequent_mask(9) (tutorial 11): label t is predicted "
        "from dec_in[0..t] = src[0..t], so the model must bring src[t + 1] over from the encoder. It "
        "cannot copy its own input; it has to look one position ahead in the source.\n\n"
        "How even is randint? Counting the symbols at positions 1..9 of 1000 sequences (9000 draws, "
        "900 expected per symbol):");
    c::Generator g_big(5);
    const tasks::Batch big = tasks::copy_batch(1000, kLength, kVocab, g_big);
    std::vector<int64_t> counts(kVocab, 0);
    for (int64_t id : big.label.contiguous().to_vector<int64_t>()) ++counts[id];
    std::string symbols, numbers;
    for (int64_t v = 0; v < kVocab; ++v) {
        symbols += fmt::format("{:>5}", v);
        numbers += fmt::format("{:>5}", counts[v]);
    }
    note("    symbol {}\n    count  {}", symbols, numbers);
    t.check(
        counts[0] == 0 && std::all_of(counts.begin() + 1, counts.end(), [](int64_t n) { return n > 800 && n < 1000; }),
        "no 0s; each of 1..10 between 800 and 1000 times (900 ± 100, 3.5 standard deviations of 28)");
}

// The batches of `tformer train copy`: tasks::copy_source, the same batch for the same (epoch, i).
void batches_for_training(Tutorial& t, const Lesson& lesson) {
    note(
        "\nTraining draws fresh batches from tasks::copy_source: batch (epoch, i) comes from a "
        "generator seeded by (seed, epoch, i), so a run can stop and resume and still see the same "
        "data. 30 sequences a batch, 20 batches an epoch, 80 epochs: 48,000 sequences out of the "
        "10^9 possible ones.");
    const tasks::Batch a = lesson.source.get(0, 0), again = lesson.source.get(0, 0), other = lesson.source.get(0, 1);
    show("batch (0, 0), rows 0-1", a.enc_X.slice(0, 0, 2));
    t.check(a.enc_X.shape() == c::Shape{30, 10} && same_ids(a.enc_X, again.enc_X) && !same_ids(a.enc_X, other.enc_X),
            "batch (0, 0) is (30, 10), the same every time it is asked for, and differs from batch (0, 1)");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 完整代码 (data_gen, Batch)
void copy_task_data(Tutorial& t, const Lesson& lesson) {
    note(
        "Seed 004 makes its data like this:\n"
        "    data = torch.randint(1, V, size=(batch_size, 10))\n"
        "    data[:, 0] = 1\n"
        "    src = tgt = data\n"
        "and Batch(src, tgt) shifts the target by one:\n"
        "    self.tgt   = tgt[:, :-1]     decoder input (\"右移一位,第一位用 1 填充\")\n"
        "    self.tgt_y = tgt[:, 1:]      labels: what the decoder must predict\n"
        "    self.ntokens = (tgt_y != pad).sum()\n"
        "Symbol 1 is the start symbol (d2l's <bos>); 0 is the padding symbol and never appears. "
        "tasks::copy_batch does the same and hands back d2l's names (enc_X, dec_in, label and the valid "
        "lengths). A batch of 3 from a generator seeded with 4:");
    c::Generator g(4);
    const tasks::Batch batch = tasks::copy_batch(3, kLength, kVocab, g);
    show("enc_X (src)", batch.enc_X);
    show("dec_in (tgt[:, :-1])", batch.dec_in);
    show("label (tgt_y = tgt[:, 1:])", batch.label);
    show("enc_valid", batch.enc_valid);
    show("label_valid", batch.label_valid);
    t.check(batch.enc_X.shape() == c::Shape{3, 10} && batch.dec_in.shape() == c::Shape{3, 9} &&
                batch.label.shape() == c::Shape{3, 9},
            "src (3, 10); decoder input and labels (3, 9)");
    t.check(c::sum(c::ne(batch.enc_X.slice(1, 0, 1), 1.0).to(DType::float32)).item() == 0,
            "every sequence starts with the start symbol 1");
    const std::vector<int64_t> ids = batch.enc_X.to_vector<int64_t>();
    t.check(*std::min_element(ids.begin(), ids.end()) >= 1 && *std::max_element(ids.begin(), ids.end()) <= 10,
            "symbols are 1..10: randint(1, V) never draws the padding symbol 0");
    t.check(same_ids(batch.dec_in, batch.enc_X.slice(1, 0, 9)) && same_ids(batch.label, batch.enc_X.slice(1, 1, 10)),
            "dec_in = src[:, :-1] and label = src[:, 1:] (src = tgt: the task is to copy)");
    const c::Tensor bos_shifted = c::concat({c::full({3, 1}, 1.0, DType::int64), batch.label.slice(1, 0, 8)}, 1);
    t.check(same_ids(bos_shifted, batch.dec_in),
            "dec_in is also d2l's [<bos>, Y[:, :-1]] with <bos> = 1 and Y = label (teacher forcing)");
    t.check(c::sum(batch.label_valid.to(DType::float64)).item() == 27,
            "seed 004's ntokens: 3 × 9 = 27 labels, none padded");
    symbols_drawn_evenly(t);
    batches_for_training(t, lesson);
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (criterion = nn.CrossEntropyLoss()), on the untrained model
void untrained_loss(Tutorial& t, const Lesson& lesson) {
    note(
        "\nOne forward pass with teacher forcing, untrained: enc_X (30, 10) and dec_in (30, 9) give "
        "logits (30, 9, 11). Seed 004's criterion, nn.CrossEntropyLoss(), is the mean over the 270 "
        "labels of -log softmax(logits)[label].");
    ag::NoGradGuard no_grad;
    const tasks::Batch b = lesson.source.get(0, 0);
    const Variable logits = lesson.model->forward(b.enc_X, b.dec_in, b.enc_valid);
    const double ce = ag::cross_entropy(logits, b.label).item();
    const double spread = std::sqrt(c::var(logits.value(), {0, 1, 2}, false).item());
    note("    logits {}   standard deviation of the logits {:.3f}   cross-entropy {:.4f}", c::shape_str(logits.shape()),
         spread, ce);
    t.check(logits.shape() == c::Shape{30, 9, 11}, "logits (B, T, V) = (30, 9, 11)");
    note(
        "A model that gave every symbol the same logit would score exactly ln 11 = {:.4f}. Ours scores "
        "more. Its logits vary at random around a common mean and know nothing about the labels; the "
        "loss is log Σ exp(z) - z[label], and log Σ exp is convex, so by Jensen's inequality such "
        "logits lose more than ln 11 on average, the more the larger their spread: the model is "
        "confidently wrong on many labels.",
        std::log(11.0));
    t.check(ce > std::log(11.0) && ce < 2 * std::log(11.0),
            "the untrained loss lies between ln 11 (all logits equal) and 2 ln 11");
}

// seed 004 (004_a3b87e182ede5d90.txt) › transform · 模型结构; seed 000 › 代码实现 › 训练 (d2l's sizes)
void the_model(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 004's train_test builds Transform(d_model=32, d_ff=64, h=8, vocab 11, N=2). tformer "
        "builds seed 000's EncoderDecoder with the same widths (tasks::build_model, as `tformer train "
        "copy` does): D = 32, FFN 64, 2 blocks each side, 4 heads as in seed 000 (seed 004 has 8 heads "
        "of 4 features; the parameter count does not depend on the number of heads), dropout 0 (seed "
        "004 has none either). build_model initialises every Linear with Xavier-uniform as d2l does.");
    lesson.model = tasks::build_model(lesson.config, lesson.gen);
    const auto named = lesson.model->named_parameters();
    int64_t total = 0, listed = 0;
    line("\n      {:<46} {:<10} {:>6}", "parameter", "shape", "count");
    for (const auto& [name, p] : named) {
        total += p.value().numel();
        if (name.find("block1") != std::string::npos) continue;  // the same as block0
        ++listed;
        line("      {:<46} {:<10} {:>6}", name, c::shape_str(p.shape()), p.value().numel());
    }
    line("      ... and encoder.blks.block1.*, decoder.blks.block1.*: the same as block0\n");
    note("{} parameter tensors, {} numbers.", named.size(), lesson.model->num_parameters());

    // counted by hand: D = 32, F = 64, V = 11; the attention projections have no bias (use_bias = false)
    const int64_t D = 32, F = 64, V = 11;
    const int64_t attention = 4 * D * D, addnorm = 2 * D, ffn = D * F + F + F * D + D;
    const int64_t enc_block = attention + addnorm + ffn + addnorm;
    const int64_t dec_block = 2 * attention + 3 * addnorm + ffn;
    const int64_t by_hand = V * D + 2 * enc_block + V * D + 2 * dec_block + D * V + V;
    note(
        "By hand: embeddings 2 × V·D = {}, encoder block 4D² + FFN(2DF + F + D) + 2 LayerNorms(2D) = {}, "
        "decoder block 8D² + FFN + 3 LayerNorms = {}, output layer D·V + V = {}; in all {}.",
        2 * V * D, enc_block, dec_block, D * V + V, by_hand);
    t.check(total == lesson.model->num_parameters() && total == by_hand,
            fmt::format("the {} parameters add up to num_parameters() and to the count by hand", total));
    t.check(named.size() == 64, "64 tensors: 1 + 2 × 12 in the encoder, 1 + 2 × 18 + 2 in the decoder");

    c::Generator g_bias(kSeed);
    const int64_t with_bias = tasks::build_model(copy_config(true), g_bias)->num_parameters();
    note(
        "Seed 004's MultiHeadedAttention uses nn.Linear with its default bias on all four projections; "
        "with use_bias = true the same model has {} parameters, 6 attentions × 4 × 32 = 768 more.",
        with_bias);
    t.check(with_bias == by_hand + 6 * 4 * D, "seed 004's count: 43,819 with the attention biases");
    untrained_loss(t, lesson);
}

// optim::NoamLR against rate() written out, at the steps that show its shape.
void noam_against_rate(Tutorial& t, const optim::NoamLR& noam, double factor) {
    line("\n      step   rate() written out   optim::NoamLR");
    double worst = 0;
    for (int64_t s : {0, 1, 2, 50, 99, 100, 101, 400, 1600}) {
        const double mine = rate(s, 32, factor, kWarmup), lib = noam.lr_at(s);
        worst = std::max(worst, std::abs(mine - lib) / lib);
        line("      {:>4}   {:>18.6e}   {:>13.6e}", s, mine, lib);
    }
    line();
    t.check(worst < 1e-15, fmt::format("NoamLR.lr_at(step) == rate(step) at every step shown (largest "
                                       "relative difference {:.1e})",
                                       worst));
    t.check_close(noam.lr_at(100), 0.005, 1e-15, "the peak, at step = warmup = 100, is 0.005");
    t.check(noam.lr_at(0) == noam.lr_at(1) && noam.lr_at(50) == 0.5 * noam.lr_at(100) &&
                std::abs(noam.lr_at(400) - 0.5 * noam.lr_at(100)) < 1e-15,
            "step 0 counts as 1; half the peak at step 50 (linear) and at step 400 (1/√step)");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test's loop), with seed 000's train_seq2seq details:
// 1600 updates of the lesson's model; fills lesson.step_ce and lesson.step_lr, returns d2l's per-step figure.
std::vector<double> train_1600_steps(Tutorial& t, Lesson& lesson, const optim::NoamLR& noam) {
    note(
        "The loop is tasks::train's, written out (seed 004's train_test, with d2l's train_seq2seq "
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
        "rate(k - 1), with rate(0) = rate(1): the same curve, one step later.)");
    optim::Adam adam(lesson.model->named_parameters(), {.lr = kPeakLr});
    lesson.model->train();
    const int64_t total_steps = kEpochs * kBatchesPerEpoch;
    std::vector<double> d2l_losses;
    const auto start = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    line("\n      step  epoch   lr        loss (mean of the last 100 steps)   seconds");
    for (int64_t step = 0; step < total_steps; ++step) {
        const tasks::Batch batch = lesson.source.get(step / kBatchesPerEpoch, step % kBatchesPerEpoch);
        adam.set_lr(noam.lr_at(step + 1));
        const Variable logits = lesson.model->forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
        const Variable l = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid);      // (B)
        const Variable sum = ag::sum(l);
        sum.backward();
        optim::clip_grad_norm(adam.parameters(), kClip);
        adam.step();
        adam.zero_grad();
        // every label is valid, so each l[b] is the mean over T of the per-token losses
        const double tokens = static_cast<double>(kBatch * (kLength - 1));
        d2l_losses.push_back(sum.item() / tokens);
        lesson.step_ce.push_back(sum.item() / kBatch);
        lesson.step_lr.push_back(adam.lr());
        if ((step + 1) % 100 == 0 || step == 0) {
            const size_t n = std::min<size_t>(100, lesson.step_ce.size());
            const double recent = std::accumulate(lesson.step_ce.end() - n, lesson.step_ce.end(), 0.0) / n;
            line("      {:>4}  {:>5}   {:.2e}  {:<35.3g} {:.1f}", step + 1, step / kBatchesPerEpoch + 1, adam.lr(),
                 recent, seconds());
        }
    }
    line();
    const double train_seconds = seconds();

    const double first = mean_of(lesson.step_ce, 0, 20),
                 last = mean_of(lesson.step_ce, lesson.step_ce.size() - 100, lesson.step_ce.size());
    note(
        "Epoch 1 averaged {:.3f} nats per token, the last 100 steps {:.1e}: the model went from "
        "guessing among 10 symbols to being sure. 1600 steps took {:.1f} s.",
        first, last, train_seconds);
    t.check(first > 1.5, "epoch 1: still close to guessing (> 1.5 nats per token)");
    t.check(last < 0.001, "the last 100 steps: below 0.001 nats per token");
    const double q1 = mean_of(lesson.step_ce, 0, 400), q2 = mean_of(lesson.step_ce, 400, 800),
                 q3 = mean_of(lesson.step_ce, 800, 1200), q4 = mean_of(lesson.step_ce, 1200, 1600);
    note("Mean loss of steps 1-400, 401-800, 801-1200, 1201-1600: {:.3g}, {:.3g}, {:.3g}, {:.3g}.", q1, q2, q3, q4);
    t.check(q2 < q1 && q3 < q2 && q4 < q3, "the loss falls from each quarter of the training to the next");
    return d2l_losses;
}

// The same loop as tasks::train runs it (and so `tformer train copy`), on a twin of the untrained model.
void same_as_tasks_train(Tutorial& t, const Lesson& lesson, const std::vector<double>& d2l_losses) {
    note(
        "\nThe same loop is what tasks::train (and so `tformer train copy`) runs. Training a second "
        "copy of the untrained model for 20 steps with tasks::train:");
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
    note("    step 1..20 losses (d2l's figure): ours {:.5f} ... {:.5f}, tasks::train {:.5f} ... {:.5f}", d2l_losses[0],
         d2l_losses[19], r.step_loss[0], r.step_loss[19]);
    t.check(r.step_loss.size() == 20 && diff == 0, "the same 20 losses, to the last bit");
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
    note("Wrote\n    {}\n    {}", loss_png.string(), lr_png.string());
    double lr_worst = 0;
    for (size_t i = 0; i < lr_series.y.size(); ++i)
        lr_worst =
            std::max(lr_worst, std::abs(lr_series.y[i] - rate(static_cast<int64_t>(i) + 1, 32, factor, kWarmup)) /
                                   rate(static_cast<int64_t>(i) + 1, 32, factor, kWarmup));
    t.check(lr_series.y.size() == 1600 && lr_worst < 1e-12,
            "the schedule picture: the learning rate of all 1600 updates is rate(step + 1) written out above");
    bool epochs_ok = per_epoch.y.size() == static_cast<size_t>(kEpochs);
    for (int64_t e = 0; epochs_ok && e < kEpochs; ++e) {
        double total = 0;
        for (int64_t i = e * kBatchesPerEpoch; i < (e + 1) * kBatchesPerEpoch; ++i) total += per_step.y[i];
        epochs_ok = std::abs(per_epoch.y[e] - total / kBatchesPerEpoch) < 1e-12 &&
                    per_epoch.x[e] == double((e + 1) * kBatchesPerEpoch);
    }
    t.check(epochs_ok && per_step.y.size() == 1600,
            "the loss picture: 1600 per-step points, and 80 epoch means each the mean of its 20 steps, drawn at "
            "the epoch's end");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型训练 (train_test); seed 000 › 代码实现 › 训练 (train_seq2seq)
void training_with_noam(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 004's train_test trains with Adam(lr=1e-3) on data_gen(11, 3, 10): ten batches of three "
        "sequences, one loss printed per batch. That shows the loop but is far too little data to "
        "learn the copy. `tformer train copy` runs the same loop longer: batches of 30, 20 per epoch, "
        "80 epochs = 1600 steps, Adam with the learning-rate schedule of \"Attention Is All You Need\" "
        "§5.3. Seed 004 imports LambdaLR but never uses it; the Annotated Transformer, which it follows, "
        "passes LambdaLR this rate():\n"
        "    rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)\n"
        "It rises linearly for `warmup` steps and then falls as 1/√step. With d_model = 32 and warmup "
        "= 100, the factor is chosen so that the peak, at step 100, is 0.005 (seed 000's lr):\n"
        "    factor = 0.005 / (32^-0.5 · 100^-0.5)");
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
    note(
        "\nThe cache gives the same answer as seed 004's way. Feeding the decoded sequence back with "
        "teacher forcing (one masked pass over all 9 positions) picks the same token at every position:");
    ag::NoGradGuard no_grad;
    lesson.model->eval();
    std::vector<int64_t> dec = {1};
    dec.insert(dec.end(), decoded.tokens.begin(), decoded.tokens.end() - 1);
    const c::Tensor dec_in = c::from_vector(dec, {1, kLength - 1});
    const c::Tensor logits =
        lesson.model->forward(src.slice(0, 0, 1).contiguous(), dec_in, lens.slice(0, 0, 1)).value();
    const c::Tensor picks = c::argmax(logits, -1);  // (1, 9)
    show("argmax of the teacher-forced logits", picks);
    t.check(picks.to_vector<int64_t>() == decoded.tokens, "the same 9 tokens as the cached greedy steps");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型预估 (inference_test's tgt = zeros(1, 1)): src[0] decoded from 0
void decoding_from_zero(Tutorial& t, const Lesson& lesson, const c::Tensor& src, const c::Tensor& lens) {
    note(
        "\nSeed 004's inference_test starts from tgt = zeros(1, 1): symbol 0, which its own data_gen "
        "never produces (every training sequence starts with 1), so the embedding row of 0 never "
        "received a gradient. Decoding [1, 2, ..., 10] from 0 instead of 1, one step at a time through "
        "the cache, with the two most likely next symbols:");
    ag::NoGradGuard no_grad;
    lesson.model->eval();
    const c::Tensor src1 = src.slice(0, 0, 1).contiguous(), len1 = lens.slice(0, 0, 1);
    nn::DecoderState state = lesson.model->decoder->init_state(lesson.model->encoder->forward(src1, len1), len1);
    std::vector<int64_t> out = {0};
    line("\n      step  fed   first choice   second choice");
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
    note("    start 0:  {}", join(out));
    t.check(!std::equal(out.begin() + 1, out.end(), want.begin() + 1),
            "started from seed 004's 0, the same model does not copy [1, ..., 10]");
    t.check(std::equal(out.end() - 5, out.end(), want.end() - 5),
            "but it finds its place again: the last five symbols, 6 7 8 9 10, are right");
    note(
        "A wrong start costs more than one step. The decoder does not go by its position alone: its "
        "self-attention also reads the symbols fed back so far, so after one wrong symbol the next "
        "steps can be unsure or wrong too (look at the probabilities above) until the symbols fed "
        "back and the positions agree again. Seed 004's decoding does not match its own data_gen: "
        "decode from the start symbol the model was trained with.");
}

// 200 sequences the training never drew, decoded greedily as one batch: exact-sequence accuracy.
void fresh_test_sequences(Tutorial& t, const Lesson& lesson) {
    note(
        "\nNow 200 fresh sequences from a generator the training never used (seed 12345), decoded as one "
        "batch of 200:");
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
    note("    exact sequences {} / 200, tokens {} / 1800", exact, tokens_right);
    t.check(exact == 200, "exact-sequence accuracy on 200 fresh sequences: 100%");
}

// seed 004 (004_a3b87e182ede5d90.txt) › 模型预估 (inference_test); seed 000 › 代码实现 › 预测
void greedy_decoding(Tutorial& t, Lesson& lesson) {
    note(
        "Seed 004's inference_test encodes [[1, 2, ..., 10]] once, then 9 times runs the decoder over "
        "the whole prefix and appends the argmax of the last position. tasks::greedy_decode does the "
        "same with the decoder's KV cache (tutorial 11): each step feeds only the newest token. We start "
        "from the start symbol 1, as in training (seed 004 starts from 0; see below).");
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
        note("    {:<24} ->  {:<24} {}", join(row(src, b)), join(out), exact ? "copied" : "WRONG");
    }
    t.check(all_exact, "all four are copied exactly, including [1, 2, ..., 10] of seed 004's inference_test");
    cache_equals_teacher_forcing(t, lesson, src, lens, decoded.front());
    decoding_from_zero(t, lesson, src, lens);
    fresh_test_sequences(t, lesson);
}

// The last block's cross-attention on [1, ..., 10]: every head's largest weight one source position ahead.
void cross_attention_one_ahead(Tutorial& t, const std::vector<c::Tensor>& cross_w, int64_t H) {
    note(
        "The cross-attention of block 2, averaged over its 4 heads, in percent (rows: steps t = 0..8, "
        "fed 1..9; columns: source positions 0..9, holding 1..10):");
    show("cross (%)", percent(c::mean(cross_w[1], {0})));
    bool shifted = true;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t q = 0; q < kLength - 1; ++q)
            shifted =
                shifted && c::argmax(cross_w[1].select(0, h).select(0, q), 0).item() == static_cast<double>(q + 1);
    t.check(shifted, "in the last block every head puts its largest weight of step t on source position t + 1");
    note(
        "A diagonal, one place to the right of the main one. Step t has src[t] in hand and needs "
        "src[t + 1], so it reads the source one position further on: the query of decoder position t "
        "matches the key of encoder position t + 1. The positions come from the positional encoding "
        "(tutorial 08): PE(t + 1) is a fixed rotation of PE(t), the same for every t, so one pair of "
        "W_q, W_k can turn 'my position' into 'the next position' all along the sequence. The value "
        "read there carries the symbol, and the output layer names it.");
}

// The cross-attention of both blocks over the 200 test sequences, test_cross[block] (200·H, T, S).
void cross_attention_over_test_sequences(Tutorial& t, const std::vector<c::Tensor>& test_cross, int64_t H) {
    note(
        "\nOver the 200 test sequences of step 4 (1800 decoder steps), per block: how often the "
        "largest weight of each head (and of their mean) falls on t + 1, and the mean weight there.");
    std::vector<int64_t> mean_hits(2);
    std::vector<double> weight_at_next(2);
    line("\n      block   argmax at t + 1:  head 1  head 2  head 3  head 4   mean of heads   weight at t + 1");
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
    t.check(mean_hits[1] >= 1782, fmt::format("block 2: the heads' mean points at t + 1 in {} of 1800 steps (at "
                                              "least 99%)",
                                              mean_hits[1]));
    t.check(mean_hits[0] < mean_hits[1] && weight_at_next[0] < weight_at_next[1],
            "block 1 is blurrier: fewer hits and less weight on t + 1 than block 2");
    note(
        "The first block's heads are broader, some split between t (the symbol just fed) and t + 1; "
        "the second block, which feeds the output layer, is sharp.");
}

// The encoder's self-attention: block 1 on [1, ..., 10] (enc_w), and both blocks over the test sequences.
void encoder_self_attention(Tutorial& t, const std::vector<c::Tensor>& enc_w, const std::vector<c::Tensor>& test_enc,
                            int64_t H) {
    note(
        "\nThe encoder's self-attention, block 1, averaged over the heads, in percent (rows: queries, "
        "columns: keys, both source positions 0..9):");
    show("self (%)", percent(c::mean(enc_w[0], {0})));
    std::vector<double> on_self(2, 0), on_first(2, 0);
    for (int64_t blk = 0; blk < 2; ++blk) {
        const c::Tensor w = test_enc[blk].view({200, H, kLength, kLength});
        for (int64_t q = 0; q < kLength; ++q) on_self[blk] += c::mean(w.select(2, q).select(2, q)).item() / kLength;
        on_first[blk] = c::mean(w.select(3, 0)).item();
    }
    note(
        "The encoder shows no diagonal. Over the 200 test sequences a position gives itself {:.2f} (block "
        "1) and {:.2f} (block 2) of its attention, near the uniform 1/10, and position 0, which holds "
        "the start symbol in every sequence, gets {:.2f} and {:.2f}. The copy does not need the encoder "
        "to move anything: the residual connections (AddNorm) keep each position's own symbol in its "
        "output, and the decoder's cross-attention fetches it from there.",
        on_self[0], on_self[1], on_first[0], on_first[1]);
    t.check(on_self[0] < 0.3 && on_self[1] < 0.3,
            "encoder: less than 0.3 of a position's attention on itself, in both blocks");
    t.check(on_first[0] > 0.1 && on_first[1] > 0.1,
            "encoder: more than the uniform 1/10 on position 0 (the start symbol)");
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
    note("Wrote\n    {}\n    {}", enc_png.string(), cross_png.string());
    t.check(enc_layout.rows == 2 && enc_layout.cols == H && cross_layout.rows == 2 && cross_layout.cols == H,
            "both heatmaps were laid out as 2 blocks × 4 heads");
    const c::Tensor drawn = c::stack(cross_w, 0);  // (2, H, T, S): what heatmap_grid laid out
    t.check(drawn.shape() == c::Shape{2, H, kLength - 1, kLength} &&
                c::max(c::abs(c::sub(c::sum(drawn, {3}), c::ones({2, H, kLength - 1})))).item() < 1e-5,
            "the cross-attention picture: (2 blocks, 4 heads, 9 steps, 10 source positions), every row a distribution");
}

// seed 000 (000_7dfff3ea5ac0d0a3.txt) › 代码实现 › 编码器, 解码器 (the attention weights kept for heatmaps)
void what_the_attention_looks_at(Tutorial& t, Lesson& lesson) {
    note(
        "Run the trained model once more on [1, 2, ..., 10], teacher-forced with its own output, and "
        "keep the attention weights (seed 000's _attention_weights): the encoder's self-attention, "
        "(H, S, S) = (4, 10, 10) per block, and the decoder's encoder–decoder (cross) attention, "
        "(H, T, S) = (4, 9, 10) per block: row t is decoder position t, which was fed src[t] and must "
        "output src[t + 1].");
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
    note(
        "Write exercise::make_batch. Seed 004's copy task never pads, so its Batch looks simpler than it is; "
        "the checks give it two targets padded with 0 and compare every field with hand-made answers.");
    const c::Tensor tgt = c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 0, 1, 4, 4, 2, 9}, {2, 5});
    const exercise::Batch b = exercise::make_batch(tgt, tgt, 0);
    t.check(b.tgt.defined() && same_ids(b.tgt, c::from_vector(std::vector<int64_t>{1, 3, 5, 0, 1, 4, 4, 2}, {2, 4})),
            "tgt = tgt[:, :-1] = [[1, 3, 5, 0], [1, 4, 4, 2]]");
    t.check(
        b.tgt_y.defined() && same_ids(b.tgt_y, c::from_vector(std::vector<int64_t>{3, 5, 0, 0, 4, 4, 2, 9}, {2, 4})),
        "tgt_y = tgt[:, 1:] = [[3, 5, 0, 0], [4, 4, 2, 9]]");
    t.check(b.ntokens == 6, fmt::format("ntokens = 6 labels that are not padding (you say {})", b.ntokens));
    bool mask_ok = b.tgt_mask.defined() && b.tgt_mask.shape() == c::Shape{2, 4, 4};
    const std::vector<int64_t> input = {1, 3, 5, 0, 1, 4, 4, 2};
    for (int64_t r = 0; mask_ok && r < 2; ++r)
        for (int64_t q = 0; q < 4; ++q)
            for (int64_t k = 0; k < 4; ++k)
                mask_ok = mask_ok && (b.tgt_mask.at({r, q, k}) != 0) == (k <= q && input[r * 4 + k] != 0);
    t.check(mask_ok, "tgt_mask (2, 4, 4): key k visible to query q when k ≤ q and tgt[k] is not padding");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 12 · The copy task: train, decode greedily, look at the attention",
                .follows = "seed 004 模型结构, 编码器, 解码器, 模型训练 (train_test), 模型预估 "
                           "(inference_test), 完整代码 (data_gen, Batch, subsequent_mask); seed 000 训练, 预测",
                .exercise = "write seed 004's Batch with padding: the shifted decoder input, the labels, the "
                            "mask and ntokens (tutorials/12_copy_task/exercise.cpp)",
                .literal = "run seed 004's train_test and inference_test exactly as written (d_model 32, "
                           "8 heads, data_gen(11, 3, 10), Adam lr 1e-3), from tformer's own random "
                           "initialisation, and check what they print"});
    // The matrices here are tiny (30 × 10 × 32): one thread is fastest, and it
    // keeps the run reproducible (the README has the timings).
    c::set_num_threads(1);
    Lesson lesson;
    if (t.literal()) {
        t.step("Literal: seed 004's train_test() and inference_test(), as written",
               [&] { literal_train_and_inference(t); });
        return t.finish();
    }
    t.step("0. Seed 004's train_test and inference_test, against PyTorch", [&] { seed004_against_pytorch(t); });
    t.step("1. The data: seed 004's data_gen and Batch", [&] { copy_task_data(t, lesson); });
    t.step("2. The model", [&] { the_model(t, lesson); });
    t.step("3. Training: Adam with the Noam schedule", [&] { training_with_noam(t, lesson); });
    t.step("4. Greedy decoding with the KV cache", [&] { greedy_decoding(t, lesson); });
    t.step("5. What the attention looks at", [&] { what_the_attention_looks_at(t, lesson); });
    t.exercise("Exercise. Seed 004's Batch, with padding", [&] { exercise_seed004_batch(t); });
    return t.finish();
}
