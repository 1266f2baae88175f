#include "tasks/seq2seq.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/safetensors.hpp"
#include "tasks/json_field.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;
using nlohmann::json;

// ---- configuration ------------------------------------------------------------------------

std::string config_to_json(const ModelConfig& c) {
    const nn::TransformerOptions& t = c.transformer;
    json j = {{"task", c.task},
              {"src_vocab_size", c.src_vocab_size},
              {"tgt_vocab_size", c.tgt_vocab_size},
              {"num_steps", c.num_steps},
              {"key_size", t.key_size},
              {"query_size", t.query_size},
              {"value_size", t.value_size},
              {"num_hiddens", t.num_hiddens},
              {"norm_shape", t.norm_shape},
              {"ffn_num_input", t.ffn_num_input},
              {"ffn_num_hiddens", t.ffn_num_hiddens},
              {"num_heads", t.num_heads},
              {"num_layers", t.num_layers},
              {"dropout", t.dropout},
              {"use_bias", t.use_bias},
              {"tie_embeddings", c.tie_embeddings},
              {"scaled_embedding_init", c.scaled_embedding_init}};
    return j.dump();
}

namespace {
// A size of the model: a whole number above 0 (JsonField refuses 1e300 and
// 2^64 - 1, whose conversion to int64 would be undefined behaviour).
int64_t positive(const JsonField& config, const char* name) {
    const JsonField field = config[name];
    const int64_t v = field.get<int64_t>();
    if (v <= 0) field.fail(fmt::format("should be a positive whole number, got {}", v));
    return v;
}

// The config object of a checkpoint, every field checked; `config` names the
// file and the path in errors.
ModelConfig config_from(const JsonField& config) {
    ModelConfig c;
    const JsonField task = config["task"];
    c.task = task.get<std::string>();
    if (c.task != "translate" && c.task != "copy")
        task.fail(fmt::format("should be \"translate\" or \"copy\", got unknown task '{}'", c.task));
    c.src_vocab_size = positive(config, "src_vocab_size");
    c.tgt_vocab_size = positive(config, "tgt_vocab_size");
    c.num_steps = positive(config, "num_steps");
    nn::TransformerOptions& t = c.transformer;
    t.key_size = positive(config, "key_size");
    t.query_size = positive(config, "query_size");
    t.value_size = positive(config, "value_size");
    t.num_hiddens = positive(config, "num_hiddens");
    t.norm_shape = positive(config, "norm_shape");
    t.ffn_num_input = positive(config, "ffn_num_input");
    t.ffn_num_hiddens = positive(config, "ffn_num_hiddens");
    t.num_heads = positive(config, "num_heads");
    t.num_layers = positive(config, "num_layers");
    t.dropout = config["dropout"].get<double>();
    t.use_bias = config["use_bias"].get<bool>();
    // absent means false
    c.tie_embeddings = config.has("tie_embeddings") && config["tie_embeddings"].get<bool>();
    c.scaled_embedding_init = config.has("scaled_embedding_init") && config["scaled_embedding_init"].get<bool>();
    try {
        check_config(c, "check_config");
    } catch (const ValueError& e) {
        config.fail(fmt::format("describes a model that cannot work ({})", e.what()));
    }
    return c;
}
}  // namespace

ModelConfig config_from_json(const std::string& text) {
    const json j = parse_json(text, "checkpoint config");
    return config_from(JsonField(j, "checkpoint", "config"));
}

double state_dict_size(const ModelConfig& c) {
    const nn::TransformerOptions& t = c.transformer;
    const double D = static_cast<double>(t.num_hiddens), F = static_cast<double>(t.ffn_num_hiddens);
    // MultiHeadAttention: W_q, W_k, W_v (query/key/value size -> D) and W_o (D -> D)
    // (each size converted on its own: their int64 sum can overflow for a hostile config)
    const double qkv =
        static_cast<double>(t.query_size) + static_cast<double>(t.key_size) + static_cast<double>(t.value_size);
    const double mha = (qkv + D) * D + (t.use_bias ? 4 * D : 0);
    const double addnorm = 2.0 * static_cast<double>(t.norm_shape);               // LayerNorm weight and bias
    const double ffn = static_cast<double>(t.ffn_num_input) * F + F + F * D + D;  // dense1, dense2
    const double L = static_cast<double>(t.num_layers);
    const double Vs = static_cast<double>(c.src_vocab_size), Vt = static_cast<double>(c.tgt_vocab_size);
    return Vs * D + L * (mha + 2 * addnorm + ffn)                       // encoder
           + Vt * D + L * (2 * mha + 3 * addnorm + ffn) + D * Vt + Vt;  // decoder and its output layer
}

MemoryEstimate estimate_training_memory(const ModelConfig& c, double rows, double src_len, double tgt_len) {
    const nn::TransformerOptions& t = c.transformer;
    const double D = static_cast<double>(t.num_hiddens), F = static_cast<double>(t.ffn_num_hiddens);
    const double H = static_cast<double>(t.num_heads), L = static_cast<double>(t.num_layers);
    const double Vt = static_cast<double>(c.tgt_vocab_size);
    const double params = state_dict_size(c) - (c.tie_embeddings ? 2 * Vt * D : 0);
    // floats kept per token: Q, K, V, the heads' output and W_o's (5D) and the
    // attention weights with their dropout mask (3·H·length) per attention;
    // three values of D per AddNorm; the FFN's hidden layer before and after ReLU
    const double enc = L * (5 * D + 3 * H * src_len + 6 * D + 2 * F + D) + 2 * D;
    const double dec = L * (10 * D + 3 * H * (src_len + tgt_len) + 9 * D + 2 * F + D) + 2 * D;
    const double logits = 3 * Vt;  // logits, softmax, their gradient
    const double forward = rows * (src_len * enc + tgt_len * (dec + logits));
    return {.parameters = 4 * params, .optimizer = 12 * params, .activations = 4 * 2 * forward};
}

void check_config(const ModelConfig& c, const char* op) {
    const nn::TransformerOptions& t = c.transformer;
    const std::pair<const char*, int64_t> sizes[] = {
        {"src_vocab_size", c.src_vocab_size}, {"tgt_vocab_size", c.tgt_vocab_size},
        {"num_steps", c.num_steps},           {"key_size", t.key_size},
        {"query_size", t.query_size},         {"value_size", t.value_size},
        {"num_hiddens", t.num_hiddens},       {"norm_shape", t.norm_shape},
        {"ffn_num_input", t.ffn_num_input},   {"ffn_num_hiddens", t.ffn_num_hiddens},
        {"num_heads", t.num_heads},           {"num_layers", t.num_layers}};
    for (const auto& [name, v] : sizes)
        if (v < 1) fail<ValueError>("{}: {} must be at least 1, got {}", op, name, v);
    // translate() and the decoders need room for a token and the end of the sequence
    if (c.num_steps < 2) fail<ValueError>("{}: num_steps must be at least 2, got {}", op, c.num_steps);
    // ... and the positional encoding has a row for each of the num_steps positions
    if (const int64_t positions = nn::PositionalEncoding::Options{}.max_len; c.num_steps > positions)
        fail<ValueError>("{}: num_steps {} exceeds the {} positions of the positional encoding", op, c.num_steps,
                         positions);
    if (!(t.dropout >= 0 && t.dropout < 1)) fail<ValueError>("{}: dropout must be in [0, 1), got {}", op, t.dropout);
    if (t.num_hiddens % t.num_heads != 0)
        fail<ValueError>("{}: num_hiddens {} is not divisible by num_heads {}", op, t.num_hiddens, t.num_heads);
    if (c.tie_embeddings && c.src_vocab_size != c.tgt_vocab_size)
        fail<ValueError>("{}: tie_embeddings needs one vocabulary, got sizes {} and {}", op, c.src_vocab_size,
                         c.tgt_vocab_size);
    if (state_dict_size(c) > 1e11)
        fail<ValueError>("{}: the config describes {:.3g} parameters, more than any machine holds", op,
                         state_dict_size(c));
}

std::shared_ptr<nn::EncoderDecoder> build_model(const ModelConfig& config, core::Generator& gen) {
    check_config(config, "build_model");
    auto encoder = std::make_shared<nn::TransformerEncoder>(config.src_vocab_size, config.transformer, gen);
    auto decoder = std::make_shared<nn::TransformerDecoder>(config.tgt_vocab_size, config.transformer, gen);
    auto model = std::make_shared<nn::EncoderDecoder>(encoder, decoder);
    // Translation follows d2l's xavier_init_weights: every nn.Linear weight,
    // nothing else. The copy task follows seed 004 (the Annotated Transformer's
    // make_model): Xavier on every parameter with more than one dimension,
    // embeddings included. That matters here: an N(0, 1) embedding scaled by
    // √d drowns the positional encoding (values in [-1, 1]), and the copy task
    // is all about positions.
    const bool all_matrices = config.task == "copy";
    for (auto& [name, p] : model->named_parameters()) {
        const bool is_embedding = name.find("embedding") != std::string::npos;
        if (p.dim() == 2 && (all_matrices || !is_embedding)) nn::init::xavier_uniform_(p, gen);
    }
    const double scaled_std = 1.0 / std::sqrt(static_cast<double>(config.transformer.num_hiddens));
    if (config.scaled_embedding_init && !config.tie_embeddings)
        for (auto& [name, p] : model->named_parameters())
            if (name.find("embedding") != std::string::npos) nn::init::normal_(p, 0.0, scaled_std, gen);
    if (config.tie_embeddings) {                             // check_config made sure the vocabularies are one
        const Variable shared = encoder->embedding->weight;  // (V, D)
        nn::init::normal_(shared, 0.0, scaled_std, gen);
        decoder->embedding->weight = decoder->embedding->share_parameter("weight", shared);
        decoder->dense->weight = decoder->dense->share_parameter("weight", shared);
    }
    return model;
}

// ---- checkpoints -----------------------------------------------------------------------------

// Format 2: the safetensors metadata holds one key, "tformer", whose value is
// one JSON document (Python reads it with json.loads):
//   {"format": "tformer-checkpoint-2", "config": {...}, "step": 600, "epoch": 60,
//    "rng": [4 unsigned 64-bit words], "src_vocab": ["<unk>", "<pad>", ...], "tgt_vocab": [...],
//    "tokenizer": {"type": "sentencepiece", "model": "<base64>"},
//    "loss": {"epochs": [...], "epoch_loss_sum": 0, "epoch_tokens": 0, "steps": [...]}, "extra": {"preset": "d2l", ...}}
// (a translation checkpoint holds either the vocabularies or the tokenizer).
// Format 1, still read: one metadata key per field, "format" = "tformer-checkpoint-1", "config" as JSON,
// "step", "epoch" and "rng" as decimal text, the vocabularies in Vocab::deserialize's text, "tokenizer"
// as above, and "x.<key>" for each extra, the loss history as "x.epoch_losses" and "x.epoch_partial"
// (space-separated numbers).
namespace {
constexpr const char* kFormat = "tformer-checkpoint-2";
constexpr const char* kFormat1 = "tformer-checkpoint-1";

[[noreturn]] void bad_checkpoint(const std::string& path, const std::string& what) {
    fail<IOError>("checkpoint '{}': {}", path, what);
}

json tokenizer_json(const SentencePieceTokenizer& sp) {
    return {{"type", "sentencepiece"}, {"model", base64_encode(sp.serialized())}};
}

// {"type": "sentencepiece", "model": "<base64 of the model>"}, in either format
std::shared_ptr<const SentencePieceTokenizer> tokenizer_from(const JsonField& tokenizer) {
    const JsonField type = tokenizer["type"];
    if (const std::string name = type.get<std::string>(); name != "sentencepiece")
        type.fail(fmt::format("should be \"sentencepiece\", got '{}'", name));
    const JsonField model = tokenizer["model"];
    const std::string text = model.get<std::string>();
    std::string bytes;
    try {
        bytes = base64_decode(text);
    } catch (const IOError& e) {
        model.fail(fmt::format("is not base64 ({})", e.what()));
    }
    try {
        return SentencePieceTokenizer::from_serialized(bytes);
    } catch (const IOError& e) {
        model.fail(fmt::format("does not hold a usable SentencePiece model ({})", e.what()));
    }
}

json metadata_json(const CheckpointInfo& info) {
    json j = {{"format", kFormat},
              {"config", json::parse(config_to_json(info.config))},
              {"step", info.step},
              {"epoch", info.epoch},
              {"rng", info.rng},
              {"loss",
               {{"epochs", info.losses.epochs},
                {"epoch_loss_sum", info.losses.epoch_loss_sum},
                {"epoch_tokens", info.losses.epoch_tokens},
                {"steps", info.losses.steps}}},
              {"extra", info.extra}};
    if (info.src_vocab) j["src_vocab"] = info.src_vocab->tokens();
    if (info.tgt_vocab) j["tgt_vocab"] = info.tgt_vocab->tokens();
    if (info.sentencepiece) j["tokenizer"] = tokenizer_json(*info.sentencepiece);
    return j;
}

// A count of steps or epochs: from 0 to 2^63 - 1.
int64_t count_from(const JsonField& field) {
    const int64_t v = field.get<int64_t>();
    if (v < 0) field.fail(fmt::format("should be a count from 0 to 2^63-1, got {}", v));
    return v;
}

// Format 2: every field from the one JSON document, each read through
// JsonField, which names the file, the field and the type it should have.
CheckpointInfo info_from_json(const std::string& text, const std::string& path) {
    const std::string source = fmt::format("checkpoint '{}': metadata", path);
    const json j = parse_json(text, source + " 'tformer'");
    const JsonField doc(j, source);
    if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
        bad_checkpoint(path,
                       fmt::format("metadata 'tformer' should be a JSON object with \"format\": \"{}\"", kFormat));
    CheckpointInfo info;
    info.config = config_from(doc["config"]);
    if (doc.has("step")) info.step = count_from(doc["step"]);
    if (doc.has("epoch")) info.epoch = count_from(doc["epoch"]);
    if (doc.has("rng")) {
        const JsonField rng = doc["rng"];
        const auto words = rng.get<std::vector<uint64_t>>();
        if (words.size() != info.rng.size())
            rng.fail(
                fmt::format("should hold {} numbers (the generator's state), got {}", info.rng.size(), words.size()));
        std::copy(words.begin(), words.end(), info.rng.begin());
    }
    if (doc.has("extra")) info.extra = doc["extra"].get<std::map<std::string, std::string>>();
    if (doc.has("loss")) {
        const JsonField loss = doc["loss"];
        info.losses = {.epochs = loss["epochs"].get<std::vector<double>>(),
                       .epoch_loss_sum = loss["epoch_loss_sum"].get<double>(),
                       .epoch_tokens = loss["epoch_tokens"].get<double>(),
                       // every step's loss: absent in checkpoints written before it was kept
                       .steps = loss.has("steps") ? loss["steps"].get<std::vector<double>>() : std::vector<double>{}};
    }
    for (const char* key : {"src_vocab", "tgt_vocab"}) {
        if (!doc.has(key)) continue;
        const JsonField tokens = doc[key];
        try {
            (std::string(key) == "src_vocab" ? info.src_vocab : info.tgt_vocab) =
                Vocab::from_tokens(tokens.get<std::vector<std::string>>());
        } catch (const ValueError& e) {
            tokens.fail(fmt::format("is not a vocabulary ({})", e.what()));
        }
    }
    if (doc.has("tokenizer")) info.sentencepiece = tokenizer_from(doc["tokenizer"]);
    return info;
}

// ---- format 1 (read only) ----

int64_t int_meta(const std::map<std::string, std::string>& meta, const std::string& key) {
    auto it = meta.find(key);
    if (it == meta.end()) fail<IOError>("checkpoint: metadata '{}' is missing", key);
    try {
        size_t used = 0;
        const int64_t v = std::stoll(it->second, &used);
        if (used != it->second.size()) throw std::invalid_argument("trailing");
        return v;
    } catch (const std::exception&) {
        fail<IOError>("checkpoint: metadata '{}' is not an integer: '{}'", key, it->second);
    }
}

// "a b c" -> {a, b, c}: the generator state and the loss history
template <class T>
std::vector<T> numbers_v1(const std::string& text, const char* key, const std::string& path) {
    std::vector<T> out;
    std::istringstream in(text);
    T x;
    while (in >> x) out.push_back(x);
    if (!in.eof())
        bad_checkpoint(path, fmt::format("metadata '{}' is not a list of numbers: '{}'", key, text.substr(0, 80)));
    return out;
}

CheckpointInfo info_from_v1(const std::map<std::string, std::string>& meta, const std::string& path) {
    CheckpointInfo info;
    const std::string source = fmt::format("checkpoint '{}': metadata", path);
    auto config = meta.find("config");
    if (config == meta.end()) bad_checkpoint(path, "metadata 'config' is missing");
    const json config_doc = parse_json(config->second, source + " 'config'");
    info.config = config_from(JsonField(config_doc, source, "config"));
    info.step = int_meta(meta, "step");
    info.epoch = int_meta(meta, "epoch");
    if (auto it = meta.find("rng"); it != meta.end()) {
        const auto words = numbers_v1<uint64_t>(it->second, "rng", path);
        if (words.size() != info.rng.size()) bad_checkpoint(path, fmt::format("bad generator state '{}'", it->second));
        std::copy(words.begin(), words.end(), info.rng.begin());
    }
    if (auto it = meta.find("src_vocab"); it != meta.end()) info.src_vocab = Vocab::deserialize(it->second);
    if (auto it = meta.find("tgt_vocab"); it != meta.end()) info.tgt_vocab = Vocab::deserialize(it->second);
    if (auto it = meta.find("tokenizer"); it != meta.end()) {
        const json tokenizer = parse_json(it->second, source + " 'tokenizer'");
        info.sentencepiece = tokenizer_from(JsonField(tokenizer, source, "tokenizer"));
    }
    for (const auto& [k, v] : meta)
        if (k.starts_with("x.")) info.extra[k.substr(2)] = v;
    // format 1 keeps the loss history among the extras
    if (auto it = info.extra.find("epoch_losses"); it != info.extra.end()) {
        info.losses.epochs = numbers_v1<double>(it->second, "x.epoch_losses", path);
        info.extra.erase(it);
    }
    if (auto it = info.extra.find("epoch_partial"); it != info.extra.end()) {
        const auto partial = numbers_v1<double>(it->second, "x.epoch_partial", path);
        if (partial.size() == 2) info.losses.epoch_loss_sum = partial[0], info.losses.epoch_tokens = partial[1];
        info.extra.erase(it);
    }
    return info;
}

// What both formats must satisfy before a model is built from them.
void check_info(const CheckpointInfo& info, const nn::SafeTensors& st, const std::string& path) {
    if (info.config.task == "translate") {
        const bool words = info.src_vocab && info.tgt_vocab;
        if (words == (info.sentencepiece != nullptr))
            bad_checkpoint(path,
                           "a translation checkpoint must hold either both vocabularies or a SentencePiece tokenizer");
        const int64_t src_size = words ? info.src_vocab->size() : info.sentencepiece->size();
        const int64_t tgt_size = words ? info.tgt_vocab->size() : info.sentencepiece->size();
        if (src_size != info.config.src_vocab_size || tgt_size != info.config.tgt_vocab_size)
            bad_checkpoint(path, fmt::format("vocabulary sizes {}/{} do not match the config's {}/{}", src_size,
                                             tgt_size, info.config.src_vocab_size, info.config.tgt_vocab_size));
    }
    // A model is only built once its config agrees with the tensors stored, so
    // a crafted config (num_hiddens 20000, no tensors) cannot make us allocate gigabytes.
    double stored = 0;
    for (const auto& [name, t] : st.tensors)
        if (name.starts_with("model.")) stored += static_cast<double>(t.numel());
    if (stored != state_dict_size(info.config))
        bad_checkpoint(path, fmt::format("its config describes a model of {:.0f} values, but it stores {:.0f} under "
                                         "'model.'",
                                         state_dict_size(info.config), stored));
}

CheckpointInfo info_from(const nn::SafeTensors& st, const std::string& path) {
    CheckpointInfo info;
    if (auto doc = st.metadata.find("tformer"); doc != st.metadata.end()) {
        info = info_from_json(doc->second, path);
    } else if (auto format = st.metadata.find("format"); format != st.metadata.end() && format->second == kFormat1) {
        info = info_from_v1(st.metadata, path);
    } else {
        bad_checkpoint(path, fmt::format("not a tformer checkpoint (no metadata 'tformer' holding \"format\": \"{}\", "
                                         "nor the older 'format' = '{}')",
                                         kFormat, kFormat1));
    }
    check_info(info, st, path);
    return info;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info) {
    nn::SafeTensors st;
    for (auto& [name, t] : model.state_dict()) st.tensors["model." + name] = t;
    if (optimizer)
        for (auto& [name, t] : optimizer->state_dict()) st.tensors["optim." + name] = t;
    st.metadata["tformer"] = metadata_json(info).dump();
    nn::save_safetensors(path, st);
}

TokenizerPair tokenizers_of(const CheckpointInfo& info) {
    if (info.sentencepiece) return {info.sentencepiece, info.sentencepiece};
    if (info.src_vocab && info.tgt_vocab)
        return {std::make_shared<WordTokenizer>(*info.src_vocab), std::make_shared<WordTokenizer>(*info.tgt_vocab)};
    fail<ValueError>("tokenizers_of: a {} checkpoint has no tokenizer", info.config.task);
}

CheckpointInfo read_checkpoint_info(const std::string& path) { return info_from(nn::load_safetensors(path), path); }

CheckpointInfo read_checkpoint_info(const nn::SafeTensors& st, const std::string& path) { return info_from(st, path); }

CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
    return load_checkpoint(nn::load_safetensors(path), path, model, optimizer);
}

namespace {
// Weights that load but cannot be right. Training never saves a value that
// is not finite, but a file from elsewhere (or a damaged one) may hold NaN
// or infinity, which turns every output into NaN: an error naming each such
// tensor and how many values it holds (Adam's state too, when resuming
// reads it). A finite weight beyond anything float32 training produces
// (|w| > 1e6; trained weights stay within a few units) saturates every
// softmax and makes the translations garbage: a warning naming the tensor.
void check_weights(const nn::SafeTensors& st, const std::string& path, bool with_optimizer) {
    constexpr double kLargest = 1e6;
    std::vector<std::string> not_finite;
    for (const auto& [name, t] : st.tensors) {
        const bool weight = name.starts_with("model.");
        if (!core::is_floating(t.dtype()) || !(weight || (with_optimizer && name.starts_with("optim.")))) continue;
        int64_t bad = 0;
        double largest = 0;
        const int64_t n = t.numel();  // a structured binding cannot be captured (clang 14)
        auto scan = [&](const auto* x) {
            for (int64_t i = 0; i < n; ++i) {
                const double v = x[i];
                if (!std::isfinite(v))
                    ++bad;
                else
                    largest = std::max(largest, std::abs(v));
            }
        };
        const Tensor c = t.contiguous();
        if (c.dtype() == core::DType::float32)
            scan(c.data<float>());
        else
            scan(c.data<double>());
        if (bad > 0) not_finite.push_back(fmt::format("'{}' ({} of {})", name, bad, t.numel()));
        if (weight && largest > kLargest)
            fmt::print(stderr,
                       "load_checkpoint: warning: '{}': tensor '{}' holds values up to {:.3g} in magnitude, beyond "
                       "what training produces (|w| > {:.0g}); the model's output will be garbage\n",
                       path, name, largest, kLargest);
    }
    if (!not_finite.empty())
        fail<IOError>(
            "checkpoint '{}': {} tensor(s) hold values that are not finite (NaN or infinity): {}; nothing can be "
            "computed from them (a damaged file, or one saved by a run that diverged?)",
            path, not_finite.size(), fmt::join(not_finite, ", "));
}
}  // namespace

CheckpointInfo load_checkpoint(const nn::SafeTensors& st, const std::string& path, nn::Module& model,
                               optim::Optimizer* optimizer) {
    CheckpointInfo info = info_from(st, path);
    check_weights(st, path, optimizer != nullptr);
    nn::StateDict weights, optim_state;
    for (const auto& [name, t] : st.tensors) {
        if (name.starts_with("model."))
            weights[name.substr(6)] = t;
        else if (name.starts_with("optim."))
            optim_state[name.substr(6)] = t;
        else
            fail<IOError>("checkpoint '{}': unexpected tensor '{}'", path, name);
    }
    model.load_state_dict(weights);
    if (optimizer) {
        if (optim_state.empty()) fail<IOError>("checkpoint '{}': holds no optimizer state to resume from", path);
        optimizer->load_state_dict(optim_state);
    }
    return info;
}

std::unique_ptr<LoadedTranslator> load_translator(const nn::SafeTensors& checkpoint, const std::string& path,
                                                  const char* op) {
    auto t = std::make_unique<LoadedTranslator>();
    t->info = read_checkpoint_info(checkpoint, path);
    if (t->info.config.task != "translate")
        fail<ValueError>("{}: '{}' is a {} checkpoint, not a translation model", op, path, t->info.config.task);
    const auto pipeline = t->info.extra.find("pipeline");
    t->info.config.transformer.fused = pipeline != t->info.extra.end() && pipeline->second == "corpus";
    t->model = build_model(t->info.config, t->gen);
    load_checkpoint(checkpoint, path, *t->model, nullptr);
    t->tok = tokenizers_of(t->info);
    return t;
}

// ---- translating one sentence ------------------------------------------------------------------

PreparedSource prepare_source(const Tokenizer& src, const std::string& sentence, int64_t max_len) {
    if (max_len < 2) fail<ValueError>("translate: max_len must be at least 2, got {}", max_len);
    // a NUL is not text (the tokenizer would stop at it and drop the rest of the line without a word)
    if (const size_t nul = sentence.find('\0'); nul != std::string::npos)
        fail<ValueError>("translate: the sentence holds a NUL byte (byte {}), which text does not", nul + 1);
    PreparedSource p{.ids = src.encode(sentence)};
    if (p.ids.empty()) fail<ValueError>("translate: the sentence '{}' has no words", sentence);
    p.ids.push_back(Tokenizer::kEos);
    if (static_cast<int64_t>(p.ids.size()) > max_len) {  // d2l's truncate_pad keeps the first num_steps ids
        p.ids.resize(static_cast<size_t>(max_len));
        p.truncated = true;
    }
    return p;
}

DecodeOptions search_options(const TranslateOptions& options) {
    DecodeOptions o = options.decode;
    o.bos = Tokenizer::kBos;
    o.eos = Tokenizer::kEos;
    if (o.max_steps <= 0) o.max_steps = options.max_len;
    return o;
}

Translation translation_of(const TokenizerPair& tok, const PreparedSource& source, Decoded decoded) {
    Translation t;
    t.truncated = source.truncated;
    for (int64_t id : source.ids) t.src_tokens.push_back(tok.src->piece(id));
    t.decoded = std::move(decoded);
    for (int64_t id : t.decoded.tokens) t.tokens.push_back(tok.tgt->piece(id));
    t.text = tok.tgt->decode(t.decoded.tokens);
    return t;
}

Translation translate(nn::EncoderDecoder& model, const TokenizerPair& tok, const std::string& sentence,
                      const TranslateOptions& options) {
    const PreparedSource source = prepare_source(*tok.src, sentence, options.max_len);
    const auto valid = static_cast<int64_t>(source.ids.size());
    std::vector<int64_t> ids = source.ids;
    ids.resize(static_cast<size_t>(std::max(valid, options.pad_to)), Tokenizer::kPad);
    const Tensor src = core::from_vector(ids, {1, static_cast<int64_t>(ids.size())});  // (1, S)
    const Tensor lens = core::from_vector(std::vector<int64_t>{valid}, {1});
    return translation_of(tok, source, decode_batch(model, src, lens, search_options(options)).front());
}

Translation translate(nn::EncoderDecoder& model, const Vocab& src_vocab, const Vocab& tgt_vocab,
                      const std::string& sentence, int64_t num_steps, const DecodeOptions& options) {
    const TokenizerPair tok{std::make_shared<WordTokenizer>(src_vocab), std::make_shared<WordTokenizer>(tgt_vocab)};
    return translate(model, tok, sentence, {.max_len = num_steps, .pad_to = num_steps, .decode = options});
}

}  // namespace tformer::tasks
