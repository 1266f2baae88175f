#include "apps/studio.hpp"

#include "core/core.hpp"
#include "tasks/inspect.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace tformer::apps {

namespace fs = std::filesystem;
using core::Tensor;
using json = nlohmann::json;

namespace {

// ---- errors a client sees ------------------------------------------------------------------------

// An answer other than 200, with the message the client reads (docs/serve.md lists them).
struct ApiError : std::exception {
    int status;
    std::string message;
    int retry_after = 0;
    ApiError(int s, std::string m, int retry = 0) : status(s), message(std::move(m)), retry_after(retry) {}
    const char* what() const noexcept override { return message.c_str(); }
};

// A byte that is not UTF-8 (a message quoting the request, a piece cut
// inside a character) becomes U+FFFD instead of making dump() throw.
ApiResponse json_response(const json& body, int status = 200) {
    return {.status = status, .body = body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

ApiResponse error_response(int status, const std::string& message, int retry_after = 0) {
    ApiResponse r = json_response({{"error", {{"status", status}, {"message", message}}}}, status);
    r.retry_after = retry_after;
    return r;
}

// ---- request bodies ------------------------------------------------------------------------------

// A JSON object body, read field by field: a malformed body, a field this
// endpoint does not know or a value of the wrong type or range is a 400
// naming the field and what it expects.
class Body {
public:
    Body(const std::string& text, std::initializer_list<const char*> known) {
        if (text.find_first_not_of(" \t\r\n") == std::string::npos)
            throw ApiError(400, "the request has no body; send a JSON object (docs/serve.md shows one per endpoint)");
        try {
            doc_ = json::parse(text);
        } catch (const json::exception& e) {  // a syntax error, or a number beyond a double (1e309)
            throw ApiError(400, fmt::format("the body is not valid JSON: {}", e.what()));
        }
        if (!doc_.is_object())
            throw ApiError(400, fmt::format("the body must be a JSON object, got {}", doc_.type_name()));
        for (const auto& item : doc_.items()) {
            const std::string& key = item.key();  // a structured binding cannot be captured (clang 14)
            if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
                throw ApiError(400, fmt::format("unknown field '{}' (this endpoint takes: {})", key,
                                                fmt::join(known.begin(), known.end(), ", ")));
        }
    }
    bool has(const char* key) const { return doc_.contains(key); }
    std::string text(const char* key) const {
        const json& v = get(key);
        if (!v.is_string()) throw ApiError(400, fmt::format("'{}' must be a string, got {}", key, v.type_name()));
        return v.get<std::string>();
    }
    std::vector<std::string> texts(const char* key) const {
        const json& v = get(key);
        if (!v.is_array())
            throw ApiError(400, fmt::format("'{}' must be an array of strings, got {}", key, v.type_name()));
        std::vector<std::string> out;
        for (const json& s : v) {
            if (!s.is_string())
                throw ApiError(400, fmt::format("'{}' must be an array of strings; item {} is {}", key, out.size() + 1,
                                                s.type_name()));
            out.push_back(s.get<std::string>());
        }
        return out;
    }
    int64_t integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
        if (!has(key)) return fallback;
        const json& v = get(key);
        if (v.is_number_integer() || v.is_number_unsigned()) {
            const bool negative = v.is_number_integer() && v.get<int64_t>() < 0;
            if (!negative && v.get<uint64_t>() <= static_cast<uint64_t>(hi) && v.get<int64_t>() >= lo)
                return v.get<int64_t>();
            if (negative && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi) return v.get<int64_t>();
        }
        throw ApiError(400, fmt::format("'{}' must be a whole number from {} to {}, got {}", key, lo, hi, v.dump()));
    }
    double number(const char* key, double fallback, double lo, double hi) const {
        if (!has(key)) return fallback;
        const json& v = get(key);
        if (v.is_number() && v.get<double>() >= lo && v.get<double>() <= hi) return v.get<double>();
        throw ApiError(400, fmt::format("'{}' must be a number from {} to {}, got {}", key, lo, hi, v.dump()));
    }
    bool flag(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const json& v = get(key);
        if (!v.is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false, got {}", key, v.dump()));
        return v.get<bool>();
    }

private:
    // a required field that is missing is the client's mistake: a 400 naming it
    const json& get(const char* key) const {
        const auto it = doc_.find(key);
        if (it == doc_.end()) throw ApiError(400, fmt::format("the body has no '{}' field", key));
        return *it;
    }
    json doc_;
};

// A decimal number from a query parameter or a path, or nothing.
std::optional<uint64_t> parse_index(std::string_view s) {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

// ---- numbers for the page -----------------------------------------------------------------------

// 4 decimals: what a heatmap or a table can show, and a quarter of the bytes
double rounded(double x) { return std::isfinite(x) ? std::round(x * 1e4) / 1e4 : x; }

// rows [r0, r1) × columns [c0, c1) of a 2-D tensor
json matrix(const Tensor& t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const Tensor m = t.slice(0, r0, r1).slice(1, c0, c1).contiguous();
    const std::vector<double> v = m.to_vector();
    const int64_t cols = c1 - c0;
    json rows = json::array();
    for (int64_t r = 0; r < r1 - r0; ++r) {
        json row = json::array();
        for (int64_t c = 0; c < cols; ++c) row.push_back(rounded(v[static_cast<size_t>(r * cols + c)]));
        rows.push_back(std::move(row));
    }
    return rows;
}

// every head of (H, R, C) weights, rows and columns [0, rows) × [0, cols)
json heads(const Tensor& w, int64_t rows, int64_t cols) {
    json out = json::array();
    for (int64_t h = 0; h < w.size(0); ++h) out.push_back(matrix(w.select(0, h), 0, rows, 0, cols));
    return out;
}

json pieces_json(const std::vector<int64_t>& ids, const std::vector<std::string>& pieces) {
    json out = json::array();
    for (size_t i = 0; i < ids.size(); ++i) out.push_back({{"piece", pieces[i]}, {"id", ids[i]}});
    return out;
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// figures.json's per-decoding numbers ({"beam 4": 48.1, ...}), only the well-formed entries.
json per_decoding_numbers(const json& given) {
    json out = json::object();
    if (!given.is_object()) return out;
    for (const auto& [decoding, value] : given.items())
        if (value.is_number()) out[decoding] = value;
    return out;
}

// figures.json's BLEU by source length per decoding, only the well-formed buckets.
json per_decoding_buckets(const json& given) {
    json out = json::object();
    if (!given.is_object()) return out;
    for (const auto& [decoding, buckets] : given.items()) {
        if (!buckets.is_array()) continue;
        json kept = json::array();
        for (const json& b : buckets)
            if (b.is_object() && b.contains("source_words") && b["source_words"].is_string() && b.contains("bleu") &&
                b["bleu"].is_number() && b.contains("sentences") && b["sentences"].is_number_integer())
                kept.push_back(
                    {{"source_words", b["source_words"]}, {"bleu", b["bleu"]}, {"sentences", b["sentences"]}});
        out[decoding] = std::move(kept);
    }
    return out;
}

// The figures a training run wrote last (figures.json beside the checkpoint, as `tformer train` writes it
// with summary.txt), when they are this checkpoint's: validation BLEU per decoding ("beam 4", "greedy"), with
// chrF2 and BLEU by source length, and the loss on validation and training pairs; or the copy task's accuracy.
// Entries of the wrong type are left out; a file that is not a figures file gives none, and a line on stderr.
json training_figures(const std::string& checkpoint) {
    json figures = json::object();
    const fs::path path = fs::path(checkpoint).parent_path() / "figures.json";
    std::error_code ec;
    if (!fs::exists(path, ec) || fs::last_write_time(path, ec) < fs::last_write_time(checkpoint, ec))
        return figures;  // none, or older than the checkpoint (a later run wrote it since)
    std::ifstream in(path);
    const json given = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!given.is_object() || given.value("format", json()) != "tformer-figures" || given.value("version", 0) != 1) {
        fmt::print(stderr, "studio: {} is not a figures file of version 1; its figures are left out\n", path.string());
        return figures;
    }
    if (given.contains("validation_bleu")) figures["validation_bleu"] = per_decoding_numbers(given["validation_bleu"]);
    if (given.contains("validation_chrf2"))
        figures["validation_chrf2"] = per_decoding_numbers(given["validation_chrf2"]);
    if (given.contains("validation_bleu_by_length"))
        figures["validation_bleu_by_length"] = per_decoding_buckets(given["validation_bleu_by_length"]);
    for (const char* key : {"exact_sequence_accuracy_percent", "validation_loss", "training_sample_loss"})
        if (given.contains(key) && given[key].is_number()) figures[key] = given[key];
    return figures;
}

}  // namespace

// ---- the checkpoints ------------------------------------------------------------------------------

// A checkpoint loaded to serve: a translator (SentencePiece or word
// vocabularies) or a copy-task model (sequences of the symbols 1-10).
struct Studio::Model {
    size_t id = 0;
    std::string name;  ///< its folder and file name, as the page shows it
    std::string path;
    tasks::CheckpointInfo info;
    core::Generator gen{0};  ///< the model's dropout layers point at it: it lives as long as the model
    std::shared_ptr<nn::EncoderDecoder> model;
    tasks::TokenizerPair tok;  ///< translators
    bool copy = false;         ///< the copy task of seed 004
    bool d2l = false;          ///< d2l's pipeline: sources padded to num_steps, as predict_seq2seq does
    json figures;              ///< validation BLEU or copy accuracy, when its figures.json was found

    int64_t max_len() const { return info.config.num_steps; }  ///< source tokens at most, <eos> included
    int64_t bos() const { return copy ? 1 : tasks::Tokenizer::kBos; }
    int64_t eos() const { return copy ? -1 : tasks::Tokenizer::kEos; }  ///< the copy task never ends early
    int64_t pad() const { return copy ? 0 : tasks::Tokenizer::kPad; }
    std::string piece(int64_t id) const { return copy ? std::to_string(id) : tok.tgt->piece(id); }
    std::string source_piece(int64_t id) const { return copy ? std::to_string(id) : tok.src->piece(id); }
};

namespace {

std::unique_ptr<Studio::Model> load_model(const std::string& path, size_t id) {
    auto m = std::make_unique<Studio::Model>();
    m->id = id;
    m->path = path;
    const fs::path p(path);
    m->name = p.parent_path().filename().empty() ? p.filename().string()
                                                 : (p.parent_path().filename() / p.filename()).string();
    const nn::SafeTensors file = nn::load_safetensors(path);
    m->info = tasks::read_checkpoint_info(file, path);
    m->copy = m->info.config.task == "copy";
    const auto pipeline = m->info.extra.find("pipeline");
    m->d2l = !m->copy && (pipeline == m->info.extra.end() || pipeline->second == "d2l");
    // the layers it was trained with: a whole-corpus model the fused ones, the others the composed ones
    m->info.config.transformer.fused = pipeline != m->info.extra.end() && pipeline->second == "corpus";
    m->model = tasks::build_model(m->info.config, m->gen);
    tasks::load_checkpoint(file, path, *m->model, nullptr);
    m->model->eval();
    if (!m->copy) m->tok = tasks::tokenizers_of(m->info);
    m->figures = training_figures(path);
    return m;
}

// A sentence as the encoder reads it.
struct Source {
    std::vector<int64_t> ids;  ///< with <eos> (translators) or the start symbol 1 first (copy)
    std::vector<std::string> pieces;
};

// The copy task's input: symbols 1-10 separated by spaces or commas, the start symbol 1 first
// (added when missing), as seed 004's data_gen makes them.
std::vector<int64_t> copy_symbols(std::string text, size_t number) {
    std::replace(text.begin(), text.end(), ',', ' ');
    std::vector<int64_t> ids;
    std::istringstream in(text);
    for (std::string symbol; in >> symbol;) {
        const auto v = parse_index(symbol);
        if (!v || *v < 1 || *v > 10)
            throw ApiError(422, fmt::format("sequence {}: '{}' is not a symbol of the copy task (whole numbers from 1 "
                                            "to 10, separated by spaces)",
                                            number, symbol));
        ids.push_back(static_cast<int64_t>(*v));
    }
    if (ids.empty() || ids.front() != 1) ids.insert(ids.begin(), 1);
    return ids;
}

// `text` as model m's encoder reads it; 422 when it is longer than the model allows.
Source encode_source(const Studio::Model& m, const std::string& text, size_t number) {
    Source s;
    if (m.copy) {
        s.ids = copy_symbols(text, number);
        if (s.ids.size() < 2)
            throw ApiError(422, fmt::format("sequence {} has no symbol after the start symbol 1", number));
    } else {
        try {
            s.ids = m.tok.src->encode(text);
        } catch (const ValueError& e) {
            throw ApiError(400, fmt::format("sentence {}: {}", number, e.what()));
        }
        if (s.ids.empty()) throw ApiError(422, fmt::format("sentence {} has no words", number));
        s.ids.push_back(tasks::Tokenizer::kEos);
    }
    if (static_cast<int64_t>(s.ids.size()) > m.max_len())
        throw ApiError(422, fmt::format("{} {} is {} tokens long{}; this model reads at most {} (its num_steps)",
                                        m.copy ? "sequence" : "sentence", number, s.ids.size(),
                                        m.copy ? "" : " with <eos>", m.max_len()));
    for (int64_t id : s.ids) s.pieces.push_back(m.source_piece(id));
    return s;
}

// The sentences of a request: "sentences" (an array) or "text" (one per line, blank lines skipped).
constexpr size_t kMaxSentences = 16;
std::vector<std::string> sentences_of(const Body& body) {
    if (body.has("sentences") == body.has("text"))
        throw ApiError(400, "give 'text' (one sentence per line) or 'sentences' (an array of strings), not both");
    std::vector<std::string> out;
    if (body.has("sentences")) {
        out = body.texts("sentences");
        for (size_t i = 0; i < out.size(); ++i)
            if (out[i].find_first_not_of(" \t\r\n") == std::string::npos)
                throw ApiError(400, fmt::format("sentence {} is empty", i + 1));
    } else {
        std::istringstream in(body.text("text"));
        for (std::string line; std::getline(in, line);)
            if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(line);
    }
    if (out.empty()) throw ApiError(400, "there is nothing to translate: the text is empty");
    if (out.size() > kMaxSentences)
        throw ApiError(400, fmt::format("{} sentences in one request; at most {}", out.size(), kMaxSentences));
    return out;
}

// ---- decoding: the one call into the search -----------------------------------------------------

// One batch of sources (ids each, unpadded) decoded by model m with one search.
std::vector<tasks::Decoded> decode_sources(Studio::Model& m, const SearchKey& key,
                                           const std::vector<std::vector<int64_t>>& sources) {
    const auto B = static_cast<int64_t>(sources.size());
    int64_t S = m.d2l ? m.max_len() : 0;  // d2l pads every source to num_steps, as predict_seq2seq
    for (const auto& s : sources) S = std::max(S, static_cast<int64_t>(s.size()));
    std::vector<int64_t> ids(static_cast<size_t>(B * S), m.pad()), lens;
    for (int64_t b = 0; b < B; ++b) {
        std::copy(sources[b].begin(), sources[b].end(), ids.begin() + b * S);
        lens.push_back(static_cast<int64_t>(sources[b].size()));
    }
    const Tensor src = core::from_vector(ids, {B, S}), valid = core::from_vector(lens, {B});
    const tasks::DecodeOptions o{.bos = m.bos(),
                                 .eos = m.eos(),
                                 .max_steps = key.max_steps,
                                 .beam = key.beam,
                                 .length_penalty = key.length_penalty,
                                 .n_best = key.beam > 1 ? key.n_best : 1};
    return key.beam > 1 ? tasks::beam_decode_batch(*m.model, src, valid, o)
                        : tasks::greedy_decode(*m.model, src, valid, o);
}

// The hypotheses the search kept for one sentence, best first: the n-best
// list when the search kept one, else the answer alone.
using Scored = tasks::Hypothesis;
std::vector<Scored> hypotheses(const tasks::Decoded& d) {
    if (!d.n_best.empty()) return d.n_best;
    return {{d.tokens, d.score}};
}

// ---- translate's steps ------------------------------------------------------------------------------

using Model = Studio::Model;

// What a translate request asks of the search.
struct SearchRequest {
    std::string kind;  ///< beam | greedy
    int64_t beam = 4, n_best = 1;
    double length_penalty = 1.0;
    bool attention = false;  ///< every head's weights for each sentence
};

SearchRequest search_request(const Body& body) {
    SearchRequest q;
    q.kind = body.has("search") ? body.text("search") : "beam";
    if (q.kind != "beam" && q.kind != "greedy")
        throw ApiError(400, fmt::format("'search' must be \"beam\" or \"greedy\", got \"{}\"", q.kind));
    q.beam = q.kind == "greedy" ? 1 : body.integer("beam", 4, 1, 16);
    if (q.kind == "greedy" && body.has("beam")) throw ApiError(400, "'beam' applies to \"search\": \"beam\"");
    q.n_best = body.integer("n_best", 1, 1, q.beam);
    q.length_penalty = body.number("length_penalty", 1.0, 0.0, 5.0);
    q.attention = body.flag("attention", false);
    return q;
}

// Every sentence decoded by the model worker, together with the other
// requests' sentences. A copy-task sequence is copied to its own length:
// sequences of one length share a batch.
std::vector<tasks::Decoded> decode_sources(ModelWorker& worker, const Model& m, const SearchKey& key,
                                           const std::vector<Source>& sources) {
    std::vector<tasks::Decoded> decoded;
    if (m.copy) {
        std::vector<std::future<std::vector<tasks::Decoded>>> copies;
        for (const Source& s : sources) {
            SearchKey k = key;
            k.max_steps = static_cast<int64_t>(s.ids.size()) - 1;
            copies.push_back(worker.decode(k, {s.ids}));
        }
        for (auto& c : copies) decoded.push_back(c.get().front());
        return decoded;
    }
    std::vector<std::vector<int64_t>> ids;
    for (const Source& s : sources) ids.push_back(s.ids);
    return worker.decode(key, ids).get();
}

// What the decoder wrote for one sentence: the generated tokens and <eos>,
// or, when the search ran out of steps, the tokens without an <eos>.
std::vector<int64_t> decoder_output(const Model& m, const tasks::Decoded& d, int64_t max_steps) {
    std::vector<int64_t> out = d.tokens;
    if (m.eos() >= 0 && static_cast<int64_t>(d.tokens.size()) < max_steps) out.push_back(m.eos());
    return out;
}

// What the decoder read to write it: <bos>, then all it wrote but the last.
std::vector<int64_t> decoder_input(const Model& m, const tasks::Decoded& d, int64_t max_steps) {
    std::vector<int64_t> in = decoder_output(m, d, max_steps);
    in.insert(in.begin(), m.bos());
    in.pop_back();
    return in;
}

// Every head's attention for each sentence as it was translated, computed by the model worker.
std::vector<tasks::AttentionMaps> attention_of(ModelWorker& worker, const Model& m, const std::vector<Source>& sources,
                                               const std::vector<tasks::Decoded>& decoded, int64_t max_steps) {
    std::vector<tasks::AttentionMaps> maps(sources.size());
    worker
        .run([&] {
            for (size_t i = 0; i < sources.size(); ++i) {
                std::vector<int64_t> src = sources[i].ids;
                const auto valid = static_cast<int64_t>(src.size());
                if (m.d2l) src.resize(static_cast<size_t>(m.max_len()), m.pad());
                maps[i] = tasks::attention_maps(*m.model, src, valid, decoder_input(m, decoded[i], max_steps));
            }
        })
        .get();
    return maps;
}

// The hypotheses kept for one sentence, best first: text, score and pieces.
json translations_json(const Model& m, const tasks::Decoded& d) {
    json translations = json::array();
    for (const Scored& h : hypotheses(d)) {
        std::vector<std::string> pieces;
        for (int64_t id : h.tokens) pieces.push_back(m.piece(id));
        std::string text;
        if (m.copy) {
            text = "1";
            for (const auto& p : pieces) text += " " + p;
        } else {
            text = m.tok.tgt->decode(h.tokens);
        }
        translations.push_back({{"text", text}, {"score", h.score}, {"pieces", pieces_json(h.tokens, pieces)}});
    }
    return translations;
}

// Every head of every layer for one sentence, with the pieces along the maps' axes.
json attention_json(const Model& m, const Source& source, const tasks::AttentionMaps& maps, const tasks::Decoded& d,
                    int64_t max_steps) {
    const std::vector<int64_t> in = decoder_input(m, d, max_steps);
    std::vector<std::string> target_in, target_out;
    for (int64_t id : in) target_in.push_back(m.piece(id));
    for (int64_t id : decoder_output(m, d, max_steps)) target_out.push_back(m.piece(id));
    const auto S = static_cast<int64_t>(source.ids.size()), T = static_cast<int64_t>(in.size());
    json layers = {{"encoder", json::array()}, {"decoder_self", json::array()}, {"decoder_cross", json::array()}};
    for (const Tensor& w : maps.encoder) layers["encoder"].push_back(heads(w, S, S));
    for (const Tensor& w : maps.decoder_self) layers["decoder_self"].push_back(heads(w, T, T));
    for (const Tensor& w : maps.decoder_cross) layers["decoder_cross"].push_back(heads(w, T, S));
    layers["source"] = source.pieces;
    layers["target_in"] = target_in;
    layers["target_out"] = target_out;
    return layers;
}

}  // namespace

// ---- the runs -------------------------------------------------------------------------------------

// A training output folder: progress.csv, appended to at every step while
// `tformer train` runs; loss-steps.csv and loss.csv, written at its end.
struct Studio::Run {
    std::string dir, name;
};

namespace {

struct History {
    std::vector<std::pair<int64_t, double>> steps;  ///< (step, loss), by step
    std::vector<double> epochs;                     ///< epoch means, when the run has finished one
    uint64_t offset = 0;                            ///< bytes of progress.csv read
    bool live = false;                              ///< progress.csv was written in the last minute
};

// "step,loss[,...]" lines after a header; a later line for a step replaces an earlier one (a resumed run)
void read_steps(std::istream& in, std::map<int64_t, double>& steps) {
    for (std::string line; std::getline(in, line);) {
        const size_t comma = line.find(',');
        const auto step = parse_index(std::string_view(line).substr(0, comma));
        if (!step || comma == std::string::npos) continue;  // the header, or a line cut short
        const size_t end = line.find(',', comma + 1);
        try {
            steps[static_cast<int64_t>(*step)] = std::stod(line.substr(comma + 1, end - comma - 1));
        } catch (const std::exception&) {
        }
    }
}

History read_history(const std::string& dir) {
    History h;
    std::map<int64_t, double> steps;
    const fs::path progress = fs::path(dir) / "progress.csv";
    if (std::ifstream in(progress, std::ios::binary); in) {
        std::string text((std::istreambuf_iterator<char>(in)), {});
        text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);  // whole lines only
        h.offset = text.size();
        std::istringstream lines(text);
        read_steps(lines, steps);
        std::error_code ec;
        const auto age = fs::file_time_type::clock::now() - fs::last_write_time(progress, ec);
        h.live = !ec && age < std::chrono::minutes(1);
    } else if (std::ifstream csv(fs::path(dir) / "loss-steps.csv"); csv) {
        read_steps(csv, steps);
    }
    h.steps.assign(steps.begin(), steps.end());
    std::map<int64_t, double> epochs;
    if (std::ifstream csv(fs::path(dir) / "loss.csv"); csv) read_steps(csv, epochs);
    for (const auto& [e, loss] : epochs) h.epochs.push_back(loss);
    return h;
}

}  // namespace

// ---- the studio -----------------------------------------------------------------------------------

Studio::Studio(const StudioOptions& options) : options_(options), admission_(options.max_concurrent) {
    if (options.checkpoints.empty()) fail<ValueError>("serve: give at least one --checkpoint");
    for (const std::string& path : options.checkpoints) models_.push_back(load_model(path, models_.size()));
    std::set<std::string> names;  // two checkpoints of the same name: the later ones get a number
    for (auto& m : models_)
        if (!names.insert(m->name).second) m->name += fmt::format(" ({})", m->id + 1);
    for (const std::string& dir : options.runs) {
        const std::string name = fs::path(dir).lexically_normal().filename().string();
        runs_.push_back(std::make_unique<Run>(Run{.dir = dir, .name = name.empty() ? dir : name}));
    }
    worker_ = std::make_unique<ModelWorker>(
        [](const SearchKey& key, const std::vector<std::vector<int64_t>>& sources) {
            return decode_sources(*static_cast<Model*>(const_cast<void*>(key.model)), key, sources);
        },
        ModelWorker::Options{.window = options.batch_window, .max_batch = options.max_batch});
}

Studio::~Studio() = default;

Admission& Studio::admission() { return admission_; }
ModelWorker::Stats Studio::batching() const { return worker_->stats(); }
size_t Studio::num_runs() const { return runs_.size(); }

ApiResponse Studio::handle(const ApiRequest& request) {
    try {
        if (request.body.size() > kMaxRequestBytes)
            throw ApiError(413, fmt::format("the request body is {} bytes; at most {} are accepted",
                                            request.body.size(), kMaxRequestBytes));
        return dispatch(request);
    } catch (const ApiError& e) {
        return error_response(e.status, e.message, e.retry_after);
    } catch (const std::exception& e) {  // a bug: said as it is, and the server goes on
        return error_response(500, fmt::format("internal error: {}", e.what()));
    }
}

ApiResponse Studio::dispatch(const ApiRequest& r) {
    struct Route {
        const char* path;
        const char* method;
        ApiResponse (Studio::*handler)(const ApiRequest&);
    };
    static constexpr Route routes[] = {
        {"/api/v1/models", "GET", &Studio::models},      {"/api/v1/model", "GET", &Studio::model_info},
        {"/api/v1/tokenize", "POST", &Studio::tokenize}, {"/api/v1/translate", "POST", &Studio::translate},
        {"/api/v1/inside", "POST", &Studio::inside},     {"/api/v1/runs", "GET", &Studio::runs},
        {"/api/v1/runs/", "GET", &Studio::run_history}};  // + the run's number
    for (const Route& route : routes) {
        const std::string_view path = route.path;
        if (!(path.ends_with('/') ? r.path.starts_with(path) : r.path == path)) continue;
        if (r.method == route.method) return (this->*route.handler)(r);
        ApiResponse refused =
            error_response(405, fmt::format("{} takes {} requests, not {}", r.path, route.method, r.method));
        refused.allow = route.method;
        return refused;
    }
    throw ApiError(404, fmt::format("no endpoint {} (the API is under /api/v1/: models, model, tokenize, translate, "
                                    "inside, runs)",
                                    r.path));
}

namespace {
// The model a request names, by its index: "model": N in a body, ?model=N in a GET; the first by default.
Studio::Model& pick_model(const std::vector<std::unique_ptr<Studio::Model>>& models,
                          const std::optional<std::string>& index) {
    if (!index) return *models.front();
    const auto i = parse_index(*index);
    if (!i || *i >= models.size())
        throw ApiError(
            404, fmt::format("no model {}: {} checkpoint(s) are served, numbered from 0 (GET /api/v1/models)", *index,
                             models.size()));
    return *models[*i];
}
Studio::Model& pick_model(const std::vector<std::unique_ptr<Studio::Model>>& models, const Body& body) {
    if (!body.has("model")) return *models.front();
    return pick_model(models, std::to_string(body.integer("model", 0, 0, std::numeric_limits<int32_t>::max())));
}
}  // namespace

ApiResponse Studio::models(const ApiRequest&) {
    json list = json::array();
    for (const auto& m : models_)
        list.push_back({{"id", m->id},
                        {"name", m->name},
                        {"kind", m->copy ? "copy" : "translate"},
                        {"tokenizer", m->copy ? "symbols" : std::string(m->tok.src->kind())},
                        {"max_tokens", m->max_len()}});
    return json_response({{"models", list}});
}

ApiResponse Studio::model_info(const ApiRequest& r) {
    const auto it = r.params.find("model");
    const Model& m = pick_model(models_, it == r.params.end() ? std::nullopt : std::optional(it->second));
    // parameters per module: encoder.embedding, encoder.blks.block0.attention, ..., decoder.dense
    json modules = json::array();
    std::vector<std::pair<std::string, int64_t>> counts;
    for (const auto& [name, p] : m.model->named_parameters()) {
        std::vector<std::string> parts;
        std::istringstream in(name);
        for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
        const size_t depth = parts.size() > 4 && parts[1] == "blks" ? 4 : std::min<size_t>(2, parts.size() - 1);
        std::string group = parts[0];
        for (size_t i = 1; i < depth; ++i) group += "." + parts[i];
        if (counts.empty() || counts.back().first != group) counts.emplace_back(group, 0);
        counts.back().second += p.value().numel();
    }
    for (const auto& [group, n] : counts) modules.push_back({{"module", group}, {"parameters", n}});
    json training = {{"steps", m.info.step}, {"epochs", m.info.epoch}};
    training["epoch_losses"] = m.info.losses.epochs;
    training["final_loss"] = m.info.losses.epochs.empty() ? json(nullptr) : json(m.info.losses.epochs.back());
    for (const auto& [key, value] : m.figures.items()) training[key] = value;
    if (auto preset = m.info.extra.find("preset"); preset != m.info.extra.end()) training["preset"] = preset->second;
    json vocabulary = {{"source", m.info.config.src_vocab_size}, {"target", m.info.config.tgt_vocab_size}};
    vocabulary["joint"] = !m.copy && m.tok.joint();
    return json_response({{"id", m.id},
                          {"name", m.name},
                          {"kind", m.copy ? "copy" : "translate"},
                          {"tokenizer", m.copy ? "symbols" : std::string(m.tok.src->kind())},
                          {"pipeline", m.copy  ? "copy"
                                       : m.d2l ? "d2l"
                                               : "corpus"},
                          {"config", json::parse(tasks::config_to_json(m.info.config))},
                          {"parameters", {{"total", m.model->num_parameters()}, {"modules", modules}}},
                          {"vocabulary", vocabulary},
                          {"max_tokens", m.max_len()},
                          {"training", training}});
}

ApiResponse Studio::tokenize(const ApiRequest& r) {
    const Body body(r.body, {"model", "text"});
    const Model& m = pick_model(models_, body);
    const std::string text = body.text("text");
    std::vector<int64_t> ids;
    std::vector<std::string> pieces;
    if (m.copy) {
        ids = copy_symbols(text, 1);
    } else {
        try {
            ids = m.tok.src->encode(text);
        } catch (const ValueError& e) {
            throw ApiError(400, e.what());
        }
    }
    for (int64_t id : ids) pieces.push_back(m.source_piece(id));
    const auto with_eos = static_cast<int64_t>(ids.size()) + (m.copy ? 0 : 1);
    return json_response({{"model", m.id},
                          {"tokenizer", m.copy ? "symbols" : std::string(m.tok.src->kind())},
                          {"pieces", pieces_json(ids, pieces)},
                          {"tokens", with_eos},
                          {"max_tokens", m.max_len()},
                          {"fits", with_eos <= m.max_len()}});
}

ApiResponse Studio::translate(const ApiRequest& r) {
    const Body body(r.body, {"model", "text", "sentences", "search", "beam", "n_best", "length_penalty", "attention"});
    Model& m = pick_model(models_, body);
    const std::vector<std::string> texts = sentences_of(body);
    const SearchRequest q = search_request(body);
    std::vector<Source> sources;
    int64_t longest = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        sources.push_back(encode_source(m, texts[i], i + 1));
        longest = std::max(longest, static_cast<int64_t>(sources.back().ids.size()));
    }

    const auto start = std::chrono::steady_clock::now();
    const auto pass = admission_.enter(options_.queue_timeout);
    if (!pass)
        throw ApiError(503,
                       fmt::format("the server is busy: {} requests are using the model and none finished within {} "
                                   "ms; try again in a moment",
                                   admission_.slots(), options_.queue_timeout.count()),
                       1);
    // a translation may be as long as the model's limit; the copy task copies what follows the start symbol
    const SearchKey key{.model = &m,
                        .beam = q.beam,
                        .length_penalty = q.length_penalty,
                        .n_best = q.n_best,
                        .max_steps = m.copy ? longest - 1 : m.max_len()};
    const std::vector<tasks::Decoded> decoded = decode_sources(*worker_, m, key, sources);
    std::vector<tasks::AttentionMaps> maps;
    if (q.attention) maps = attention_of(*worker_, m, sources, decoded, key.max_steps);
    const double ms = elapsed_ms(start);

    json out = json::array();
    for (size_t i = 0; i < sources.size(); ++i) {
        json sentence = {{"text", texts[i]},
                         {"source", {{"pieces", pieces_json(sources[i].ids, sources[i].pieces)}}},
                         {"translations", translations_json(m, decoded[i])}};
        if (q.attention) sentence["attention"] = attention_json(m, sources[i], maps[i], decoded[i], key.max_steps);
        out.push_back(sentence);
    }
    return json_response({{"model", m.id},
                          {"search",
                           {{"kind", q.kind},
                            {"beam", q.beam},
                            {"n_best", q.n_best},
                            {"length_penalty", q.length_penalty},
                            {"score", q.beam > 1 ? "log p / length^length_penalty" : "log p"}}},
                          {"milliseconds", rounded(ms)},
                          {"sentences", out}});
}

ApiResponse Studio::inside(const ApiRequest& r) {
    const Body body(r.body, {"model", "text", "layer"});
    Model& m = pick_model(models_, body);
    const int64_t layers = m.info.config.transformer.num_layers;
    const int64_t layer = body.integer("layer", 0, 0, layers - 1);
    const Source source = encode_source(m, body.text("text"), 1);
    const auto pass = admission_.enter(options_.queue_timeout);
    if (!pass) throw ApiError(503, "the server is busy; try again in a moment", 1);
    std::vector<int64_t> src = source.ids;
    const auto valid = static_cast<int64_t>(src.size());
    if (m.d2l) src.resize(static_cast<size_t>(m.max_len()), m.pad());  // the padding the model sees, masked
    std::vector<tasks::BlockStep> steps;
    worker_->run([&] { steps = tasks::encoder_block_steps(*m.model, src, valid, layer); }).get();

    // small enough to draw: at most 32 positions, 64 features and 8 heads
    constexpr int64_t kRows = 32, kCols = 64, kHeads = 8;
    std::vector<std::string> tokens = source.pieces;
    tokens.resize(src.size(), "<pad>");
    json out = json::array();
    for (const tasks::BlockStep& s : steps) {
        const core::Shape shape = s.value.shape();
        const bool per_head = shape.size() == 3;
        const Tensor v = per_head ? s.value.slice(0, 0, std::min(kHeads, shape[0])) : s.value.unsqueeze(0);
        const int64_t rows = std::min(kRows, v.size(1)), cols = std::min(kCols, v.size(2));
        std::vector<std::string> cut;
        if (per_head && shape[0] > kHeads) cut.push_back(fmt::format("the first {} of {} heads", kHeads, shape[0]));
        if (v.size(1) > kRows) cut.push_back(fmt::format("the first {} of {} positions", kRows, v.size(1)));
        if (v.size(2) > kCols) cut.push_back(fmt::format("the first {} of {} columns", kCols, v.size(2)));
        json values = heads(v, rows, cols);
        out.push_back({{"name", s.name},
                       {"title", s.title},
                       {"formula", s.formula},
                       {"section", s.section},
                       {"shape", shape.to_vector()},
                       {"per_head", per_head},
                       {"values", per_head ? values : values[0]},
                       {"shown", cut.empty() ? "all of it" : "showing " + fmt::format("{}", fmt::join(cut, ", "))}});
    }
    return json_response({{"model", m.id},
                          {"layer", layer},
                          {"layers", layers},
                          {"heads", m.info.config.transformer.num_heads},
                          {"tokens", tokens},
                          {"valid", valid},
                          {"steps", out}});
}

ApiResponse Studio::runs(const ApiRequest&) {
    json list = json::array();
    for (size_t i = 0; i < runs_.size(); ++i) {
        const History h = read_history(runs_[i]->dir);
        list.push_back({{"id", i},
                        {"name", runs_[i]->name},
                        {"steps", h.steps.size()},
                        {"last_loss", h.steps.empty() ? json(nullptr) : json(h.steps.back().second)},
                        {"live", h.live}});
    }
    return json_response({{"runs", list}});
}

ApiResponse Studio::run_history(const ApiRequest& r) {
    const std::string number = r.path.substr(std::string_view("/api/v1/runs/").size());
    const auto found = parse_index(number);
    if (!found || *found >= runs_.size())
        throw ApiError(404, fmt::format("no run '{}': {} run(s) are served, numbered from 0 (GET /api/v1/runs)", number,
                                        runs_.size()));
    const size_t run = *found;
    const History h = read_history(runs_[run]->dir);
    json steps = json::array();
    for (const auto& [step, loss] : h.steps) steps.push_back({step, loss});
    return json_response({{"id", run},
                          {"name", runs_[run]->name},
                          {"steps", steps},
                          {"epochs", h.epochs},
                          {"live", h.live},
                          {"offset", h.offset}});
}

std::optional<Studio::Events> Studio::run_events(size_t run, uint64_t offset) const {
    if (run >= runs_.size()) return std::nullopt;
    Events e{.text = "", .offset = offset};
    std::ifstream in(fs::path(runs_[run]->dir) / "progress.csv", std::ios::binary);
    if (!in) return e;
    in.seekg(0, std::ios::end);
    const auto size = static_cast<uint64_t>(in.tellg());
    if (size < offset) {  // a new run started over in this folder
        e.text = "event: reset\ndata: {}\n\n";
        e.offset = 0;
        return e;
    }
    in.seekg(static_cast<std::streamoff>(offset));
    std::string tail(static_cast<size_t>(size - offset), '\0');
    in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
    tail.resize(tail.rfind('\n') == std::string::npos ? 0 : tail.rfind('\n') + 1);  // whole lines only
    e.offset = offset + tail.size();
    std::map<int64_t, double> steps;
    std::istringstream lines(tail);
    read_steps(lines, steps);
    for (const auto& [step, loss] : steps)
        e.text += fmt::format("id: {}\ndata: {}\n\n", e.offset, json({{"step", step}, {"loss", loss}}).dump());
    return e;
}

}  // namespace tformer::apps
