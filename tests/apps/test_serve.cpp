// tformer serve: the JSON API over HTTP on an ephemeral loopback port, for
// each kind of checkpoint the program writes (a SentencePiece translator, a
// d2l word-vocabulary translator, the copy task), every error a client can
// cause, the static files, the limit on concurrent requests, batching, the
// training-run stream, and the command itself (its signals).
#include "apps/serve.hpp"
#include "apps/shell.hpp"
#include "core/core.hpp"
#include "tasks/seq2seq.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace tformer;
using apps::HttpServer;
using apps::Studio;
using apps::StudioOptions;

const std::string kTformer = std::string(TFORMER_BINARY_DIR) + "/apps/tformer";
const std::string kWeb = std::string(TFORMER_SOURCE_DIR) + "/web";

std::string temp_dir(const std::string& name) {
    const auto dir = fs::temp_directory_path() / ("tformer-serve-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

void train(const std::string& args) {
    const auto r = testing::run_shell("'" + kTformer + "' train " + args + " --threads 1 --quiet 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
}

// Small models of each kind, trained once per test process by `tformer train` itself.
struct Checkpoints {
    std::string pieces, words, copy;  ///< SentencePiece translator, d2l word vocabularies, copy task
};
const Checkpoints& checkpoints() {
    static const Checkpoints c = [] {
        const std::string dir = temp_dir("models");
        train(
            "translate --sample-size 2000 --steps 30 --warmup 5 --num-hiddens 16 --ffn-num-hiddens 32 "
            "--num-heads 2 --num-layers 2 --vocab-size 200 --val-sentences 10 --out " +
            dir + "/pieces");
        train("translate --preset d2l --epochs 3 --out " + dir + "/words");
        train("copy --epochs 20 --out " + dir + "/copy");  // enough to copy (tformer train copy reports 100%)
        return Checkpoints{dir + "/pieces/checkpoint.safetensors", dir + "/words/checkpoint.safetensors",
                           dir + "/copy/checkpoint.safetensors"};
    }();
    return c;
}

// A Studio and its HTTP server on a free loopback port, in a thread of this process.
struct Served {
    Studio studio;
    HttpServer http;
    int port = 0;
    std::thread thread;

    explicit Served(const StudioOptions& options, const std::string& web = kWeb)
        : studio(options), http(studio, web, 48) {
        port = http.bind("127.0.0.1", 0);
        thread = std::thread([this] { http.run(); });
        REQUIRE(client().Get("/api/v1/models"));  // it answers: run() is serving
    }
    ~Served() {
        http.stop();
        thread.join();
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(60);
        return c;
    }
    json get(const std::string& path, int status = 200) const {
        auto r = client().Get(path);
        REQUIRE(r);
        INFO(path << " -> " << r->body);
        CHECK(r->status == status);
        return json::parse(r->body);
    }
    json post(const std::string& path, const json& body, int status = 200) const {
        auto r = client().Post(path, body.dump(), "application/json");
        REQUIRE(r);
        INFO(path << " " << body.dump() << " -> " << r->body);
        CHECK(r->status == status);
        return json::parse(r->body);
    }
};

StudioOptions all_kinds() {
    const Checkpoints& c = checkpoints();
    return {.checkpoints = {c.pieces, c.words, c.copy}};
}

// The status line and headers of a request sent byte for byte (no client library normalising the path).
std::string raw_request(int port, const std::string& request) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    std::string answer;
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, static_cast<size_t>(n));
    close(fd);
    return answer;
}
int raw_status(int port, const std::string& path) {
    const std::string answer =
        raw_request(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    REQUIRE(answer.size() > 12);
    return std::stoi(answer.substr(9, 3));
}

// A loaded model as `tformer translate` loads it, to compare the server's answers with.
struct Reference {
    tasks::CheckpointInfo info;
    core::Generator gen{0};
    std::shared_ptr<nn::EncoderDecoder> model;
    tasks::TokenizerPair tok;
    explicit Reference(const std::string& path) {
        info = tasks::read_checkpoint_info(path);
        // the composed layers, whose greedy decoding keeps its attention weights per step (the fused
        // cached attention does not); the same numbers as the fused ones up to rounding
        info.config.transformer.fused = false;
        model = tasks::build_model(info.config, gen);
        tasks::load_checkpoint(path, *model, nullptr);
        if (info.config.task == "translate") tok = tasks::tokenizers_of(info);
    }
    tasks::TranslateOptions options(int64_t beam, bool attention = false) const {
        const bool d2l = !info.extra.count("pipeline") || info.extra.at("pipeline") == "d2l";
        return {.max_len = info.config.num_steps,
                .pad_to = d2l ? info.config.num_steps : 0,
                .decode = {.beam = beam, .keep_attention = attention}};
    }
};

std::vector<std::string> pieces_of(const json& list) {
    std::vector<std::string> out;
    for (const json& p : list) out.push_back(p["piece"]);
    return out;
}
}  // namespace

// A run's figures.json (the Model tab's figures): what `tformer train` wrote agrees with summary.txt, and a
// file of any kind of wrong gives only its well-formed entries. Run inside the test case above, which has
// trained the models already (each test case is a process of its own).
void check_figures_files() {
    // what `tformer train` wrote: the same BLEU as the text beside it
    const fs::path run = fs::path(checkpoints().pieces).parent_path();
    std::ifstream figures_in(run / "figures.json");
    const json written = json::parse(figures_in);
    CHECK(written["format"] == "tformer-figures");
    CHECK(written["version"] == 1);
    std::ifstream summary_in(run / "summary.txt");
    const std::string summary((std::istreambuf_iterator<char>(summary_in)), std::istreambuf_iterator<char>());
    CHECK_THAT(summary, Catch::Contains(fmt::format("validation {:.4f} (", written["validation_loss"].get<double>())));
    CHECK_THAT(summary,
               Catch::Contains(fmt::format("training pairs {:.4f} (", written["training_sample_loss"].get<double>())));
    for (const char* decoding : {"beam 4", "greedy"})
        CHECK_THAT(summary, Catch::Contains(fmt::format("validation corpus BLEU-4, {}: {:.2f} on", decoding,
                                                        written["validation_bleu"][decoding].get<double>())));

    // a copy of the copy-task checkpoint with figures.json files of every kind of wrong beside it
    const std::string dir = temp_dir("figures");
    const std::string checkpoint = dir + "/checkpoint.safetensors";
    fs::copy_file(checkpoints().copy, checkpoint);
    const auto training_with = [&](const std::string& figures) {
        std::ofstream(dir + "/figures.json") << figures;
        Served s({.checkpoints = {checkpoint}});
        return s.get("/api/v1/model?model=0")["training"];
    };
    // not JSON, or not a figures file: no figures, the model still served
    for (const std::string bad : {"{\"validation_bleu\": {\"greedy\": 1", "[1, 2]", "{\"validation_bleu\": {}}",
                                  R"({"format": "tformer-figures", "version": 2, "validation_bleu": {"greedy": 1}})"}) {
        INFO(bad);
        const json t = training_with(bad);
        CHECK(!t.contains("validation_bleu"));
        CHECK(t["steps"].get<int64_t>() > 0);
    }
    // entries of the wrong type are left out, the others kept
    const json t = training_with(R"({"format": "tformer-figures", "version": 1,
        "validation_bleu": {"beam 4": 40.5, "greedy": "high"}, "validation_chrf2": [1, 2],
        "validation_bleu_by_length": {"beam 4": [{"source_words": "1-5 words", "bleu": 1.5, "sentences": 3},
                                                 {"source_words": "6-10 words", "bleu": "x", "sentences": 2}, 7]},
        "exact_sequence_accuracy_percent": "100", "validation_loss": 1.25, "training_sample_loss": "low"})");
    CHECK(t["validation_bleu"] == json({{"beam 4", 40.5}}));
    CHECK(t["validation_loss"] == 1.25);
    CHECK(!t.contains("training_sample_loss"));
    CHECK(t["validation_chrf2"] == json::object());
    CHECK(t["validation_bleu_by_length"]["beam 4"] ==
          json::parse(R"([{"source_words": "1-5 words", "bleu": 1.5, "sentences": 3}])"));
    CHECK(!t.contains("exact_sequence_accuracy_percent"));
    // older than the checkpoint (a later run wrote the checkpoint): not this checkpoint's figures
    const std::string valid = R"({"format": "tformer-figures", "version": 1, "exact_sequence_accuracy_percent": 99.5})";
    CHECK(training_with(valid)["exact_sequence_accuracy_percent"] == 99.5);
    std::ofstream(dir + "/figures.json") << valid;
    fs::last_write_time(dir + "/figures.json", fs::last_write_time(checkpoint) - std::chrono::hours(1));
    Served s({.checkpoints = {checkpoint}});
    CHECK(!s.get("/api/v1/model?model=0")["training"].contains("exact_sequence_accuracy_percent"));
}

TEST_CASE("serve: models, model (with the run's figures.json), tokenize, translate and inside for each checkpoint kind",
          "[apps][serve][slow]") {
    Served s(all_kinds());
    const json models = s.get("/api/v1/models")["models"];
    REQUIRE(models.size() == 3);
    CHECK(models[0]["tokenizer"] == "sentencepiece");
    CHECK(models[1]["tokenizer"] == "word");
    CHECK(models[2]["kind"] == "copy");

    const std::vector<std::string> paths = {checkpoints().pieces, checkpoints().words};
    for (int id = 0; id < 2; ++id) {
        INFO("model " << id);
        const Reference ref(paths[static_cast<size_t>(id)]);
        // model: the config, the parameters per module adding up to the total, the training
        const json info = s.get(fmt::format("/api/v1/model?model={}", id));
        CHECK(info["config"]["num_hiddens"] == ref.info.config.transformer.num_hiddens);
        CHECK(info["parameters"]["total"] == ref.model->num_parameters());
        int64_t sum = 0;
        for (const json& m : info["parameters"]["modules"]) sum += m["parameters"].get<int64_t>();
        CHECK(sum == ref.model->num_parameters());
        CHECK(info["training"]["steps"] == ref.info.step);
        CHECK(info["max_tokens"] == ref.info.config.num_steps);
        CHECK(info["training"].contains("validation_bleu") == (id == 0));  // the d2l run had no validation split
        if (id == 0) {  // the run's figures.json: BLEU, chrF2 and BLEU by source length per decoding, the loss
            const json& t = info["training"];
            CHECK(t["validation_loss"].get<double>() > 0);
            CHECK(t["training_sample_loss"].get<double>() > 0);
            for (const char* decoding : {"beam 4", "greedy"}) {
                INFO(decoding << ": " << t.dump());
                CHECK(t["validation_bleu"][decoding].is_number());
                const double chrf = t["validation_chrf2"][decoding].get<double>();
                CHECK((chrf >= 0 && chrf <= 100));
                const json& buckets = t["validation_bleu_by_length"][decoding];
                REQUIRE(!buckets.empty());  // the buckets with a sentence in them, shortest first
                const std::vector<std::string> names = {"1-5 words", "6-10 words", "11-20 words", "21+ words"};
                int64_t sentences = 0;
                size_t next = 0;
                for (const json& b : buckets) {
                    const auto at = std::find(names.begin() + static_cast<std::ptrdiff_t>(next), names.end(),
                                              b["source_words"].get<std::string>());
                    CHECK(at != names.end());
                    next = static_cast<size_t>(at - names.begin()) + 1;
                    CHECK(b["bleu"].is_number());
                    sentences += b["sentences"].get<int64_t>();
                }
                CHECK(sentences == 10);  // --val-sentences 10
            }
        }

        // tokenize: the tokenizer's own ids
        const std::string sentence = id == 0 ? "I'm home." : "i'm home .";
        const json tok = s.post("/api/v1/tokenize", {{"model", id}, {"text", sentence}});
        std::vector<int64_t> ids;
        for (const json& p : tok["pieces"]) ids.push_back(p["id"]);
        CHECK(ids == ref.tok.src->encode(sentence));
        CHECK(tok["tokens"] == ids.size() + 1);

        // translate: what tasks::translate gives, greedy and with beam 4, batched with another sentence
        for (const int64_t beam : {1, 4}) {
            json body = {{"model", id}, {"sentences", {sentence, id == 0 ? "He's calm." : "he's calm ."}}};
            if (beam == 1) body["search"] = "greedy";
            body["attention"] = beam == 1;
            const json r = s.post("/api/v1/translate", body);
            REQUIRE(r["sentences"].size() == 2);
            CHECK(r["milliseconds"].get<double>() > 0);
            const tasks::Translation t = tasks::translate(*ref.model, ref.tok, sentence, ref.options(beam, beam == 1));
            const json& first = r["sentences"][0];
            CHECK(first["translations"][0]["text"] == t.text);
            CHECK(pieces_of(first["source"]["pieces"]) == t.src_tokens);
            CHECK(pieces_of(first["translations"][0]["pieces"]) == t.tokens);
            CHECK(first["translations"][0]["score"].get<double>() == Approx(t.decoded.score).margin(1e-4));
            if (beam > 1) continue;
            // the attention of the best hypothesis, every layer and head; the last block's encoder–decoder
            // attention is what greedy decoding kept at each step
            const json& a = first["attention"];
            const auto L = static_cast<size_t>(ref.info.config.transformer.num_layers);
            const auto H = static_cast<size_t>(ref.info.config.transformer.num_heads);
            // one row per step decoded: the tokens and the <eos> that ended them, or no <eos> when the search
            // ran out of steps (the briefly trained SentencePiece model may)
            const bool ended = static_cast<int64_t>(t.tokens.size()) < ref.info.config.num_steps;
            const size_t S = t.src_tokens.size(), T = t.tokens.size() + (ended ? 1 : 0);
            REQUIRE(t.decoded.cross_attention.size() == T);
            CHECK(a["source"].size() == S);
            CHECK(a["target_out"].size() == T);
            CHECK((a["target_out"].back() == "<eos>") == ended);
            CHECK(a["target_in"][0] == "<bos>");
            for (const char* kind : {"encoder", "decoder_self", "decoder_cross"}) {
                REQUIRE(a[kind].size() == L);
                REQUIRE(a[kind][0].size() == H);
            }
            CHECK(a["encoder"][0][0].size() == S);
            CHECK(a["decoder_self"][1][1].size() == T);
            CHECK(a["decoder_self"][1][1][0].size() == T);
            CHECK(a["decoder_self"][0][0][0][1] == 0.0);  // masked: the first step sees itself only
            CHECK(a["decoder_cross"][0][0][0].size() == S);
            for (size_t step = 0; step < T; ++step)
                for (size_t h = 0; h < H; ++h)
                    for (size_t k = 0; k < S; ++k)
                        CHECK(a["decoder_cross"][L - 1][h][step][k].get<double>() ==
                              Approx(t.decoded.cross_attention[step].at(
                                         {static_cast<int64_t>(h), static_cast<int64_t>(k)}))
                                  .margin(2e-4));
        }

        // inside: the eleven steps of an encoder block, the last one being what the encoder computes there
        for (int64_t layer = 0; layer < 2; ++layer) {
            const json w = s.post("/api/v1/inside", {{"model", id}, {"text", sentence}, {"layer", layer}});
            const std::vector<std::string> names = {"input",      "queries", "keys",      "values",
                                                    "scores",     "weights", "attention", "addnorm1",
                                                    "ffn_hidden", "ffn",     "addnorm2"};
            REQUIRE(w["steps"].size() == names.size());
            for (size_t i = 0; i < names.size(); ++i) CHECK(w["steps"][i]["name"] == names[i]);
            for (const json& step : w["steps"]) CHECK_FALSE(step["section"].get<std::string>().empty());
            const tasks::TranslateOptions o = ref.options(1);
            std::vector<int64_t> src = ref.tok.src->encode(sentence);
            src.push_back(tasks::Tokenizer::kEos);
            const auto valid = static_cast<int64_t>(src.size());
            src.resize(static_cast<size_t>(std::max(valid, o.pad_to)), tasks::Tokenizer::kPad);
            const core::Tensor ids_t = core::from_vector(src, {1, static_cast<int64_t>(src.size())});
            const core::Tensor lens = core::from_vector(std::vector<int64_t>{valid}, {1});
            autograd::NoGradGuard no_grad;
            ref.model->eval();
            autograd::Variable x = ref.model->encoder->pos_encoding->forward_embedded(
                *ref.model->encoder->embedding, ids_t,
                std::sqrt(static_cast<double>(ref.info.config.transformer.num_hiddens)));
            for (int64_t i = 0; i <= layer; ++i)
                x = (*ref.model->encoder->blks)[static_cast<size_t>(i)].forward(x, lens);
            const json& out = w["steps"].back()["values"];
            REQUIRE(out.size() == src.size());
            for (size_t p = 0; p < src.size(); ++p)
                for (size_t f = 0; f < out[p].size(); ++f)
                    CHECK(out[p][f].get<double>() ==
                          Approx(x.value().at({0, static_cast<int64_t>(p), static_cast<int64_t>(f)})).margin(2e-4));
            // the masked softmax gives padding keys exactly 0
            const json& weights = w["steps"][5]["values"];
            for (const json& head : weights)
                for (const json& row : head)
                    for (size_t k = static_cast<size_t>(valid); k < row.size(); ++k) CHECK(row[k] == 0.0);
        }
    }

    // the copy task: sequences of symbols in, the same sequence out (beam search and greedy, batched)
    for (const char* search : {"beam", "greedy"}) {
        const json r = s.post("/api/v1/translate", {{"model", 2},
                                                    {"search", search},
                                                    {"text", "1 2 3 4 5 6 7 8 9 10\n1 7 7 3 9 2 4 4 8 1"},
                                                    {"attention", true}});
        CHECK(r["sentences"][0]["translations"][0]["text"] == "1 2 3 4 5 6 7 8 9 10");
        CHECK(r["sentences"][1]["translations"][0]["text"] == "1 7 7 3 9 2 4 4 8 1");
        CHECK(r["sentences"][0]["attention"]["target_out"].size() == 9);  // no <eos>: it copies 9 symbols
    }
    const json shorter = s.post("/api/v1/translate", {{"model", 2}, {"text", "3 5 7"}});  // the start symbol added
    CHECK(shorter["sentences"][0]["source"]["pieces"].size() == 4);
    CHECK(shorter["sentences"][0]["translations"][0]["pieces"].size() == 3);
    const json walk = s.post("/api/v1/inside", {{"model", 2}, {"text", "1 2 3"}});
    CHECK(walk["steps"].size() == 11);
    CHECK(s.post("/api/v1/tokenize", {{"model", 2}, {"text", "1, 2, 3"}})["tokens"] == 3);

    check_figures_files();
}

TEST_CASE("serve: every client error is a status with a message in words", "[apps][serve][slow]") {
    Served s(all_kinds());
    auto message = [](const json& r) { return r["error"]["message"].get<std::string>(); };
    SECTION("400: malformed JSON names the parse error; wrong fields and values are named") {
        auto r = s.client().Post("/api/v1/translate", "{\"text\": ", "application/json");
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK_THAT(r->body, Catch::Contains("not valid JSON") && Catch::Contains("parse error at line 1"));
        CHECK_THAT(message(s.post("/api/v1/translate", json::array({1, 2}), 400)),
                   Catch::Contains("must be a JSON object"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"txt", "Go."}}, 400)), Catch::Contains("unknown field 'txt'"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "Go."}, {"beam", 0}}, 400)),
                   Catch::Contains("'beam' must be a whole number from 1 to 16, got 0"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "Go."}, {"beam", "4"}}, 400)),
                   Catch::Contains("'beam' must be a whole number"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "Go."}, {"beam", 2}, {"n_best", 3}}, 400)),
                   Catch::Contains("'n_best' must be a whole number from 1 to 2"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", " \n "}}, 400)), Catch::Contains("the text is empty"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "a"}, {"sentences", {"b"}}}, 400)),
                   Catch::Contains("not both"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"sentences", std::vector<std::string>(17, "Go.")}}, 400)),
                   Catch::Contains("17 sentences in one request; at most 16"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "Go."}, {"search", "sample"}}, 400)),
                   Catch::Contains("'search' must be \"beam\" or \"greedy\""));
        CHECK_THAT(message(s.post("/api/v1/inside", {{"text", "Go."}, {"layer", 2}}, 400)),
                   Catch::Contains("'layer' must be a whole number from 0 to 1"));
        CHECK_THAT(message(s.post("/api/v1/tokenize", json::object(), 400)), Catch::Contains("no 'text' field"));
        CHECK_THAT(message(s.post("/api/v1/inside", {{"layer", 0}}, 400)), Catch::Contains("no 'text' field"));
        r = s.client().Post("/api/v1/tokenize", "", "application/json");
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK_THAT(r->body, Catch::Contains("no body"));
    }
    SECTION("422: a sentence longer than the model reads names the limit") {
        std::string long_text;
        for (int i = 0; i < 40; ++i) long_text += "the cat sat on the mat ";
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", long_text}}, 422)),
                   Catch::Contains("this model reads at most 64 (its num_steps)"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"model", 1}, {"text", "go . go . go . go . go ."}}, 422)),
                   Catch::Contains("sentence 1 is 11 tokens long with <eos>; this model reads at most 10"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"model", 2}, {"text", "1 2 3 4 5 6 7 8 9 10 1"}}, 422)),
                   Catch::Contains("sequence 1 is 11 tokens long; this model reads at most 10"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"model", 2}, {"text", "1 2 eleven"}}, 422)),
                   Catch::Contains("'eleven' is not a symbol of the copy task"));
        CHECK_THAT(message(s.post("/api/v1/inside", {{"text", long_text}}, 422)), Catch::Contains("reads at most 64"));
    }
    SECTION("413: a body above 16 KB, refused before it is read") {
        const std::string big = json({{"text", std::string(17 * 1024, 'a')}}).dump();
        auto r = s.client().Post("/api/v1/translate", big, "application/json");
        REQUIRE(r);
        CHECK(r->status == 413);
        CHECK_THAT(r->body, Catch::Contains("larger than 16384 bytes"));
        // the API refuses it too when something else hands it over
        const apps::ApiResponse direct =
            s.studio.handle({.method = "POST", .path = "/api/v1/translate", .params = {}, .body = big});
        CHECK(direct.status == 413);
    }
    SECTION("404: an unknown endpoint, model or run; 405: a wrong method") {
        CHECK_THAT(message(s.get("/api/v1/nope", 404)), Catch::Contains("no endpoint /api/v1/nope"));
        CHECK_THAT(message(s.get("/api/v2/models", 404)), Catch::Contains("no endpoint"));
        CHECK_THAT(message(s.get("/api/v1/model?model=3", 404)), Catch::Contains("no model 3: 3 checkpoint(s)"));
        CHECK_THAT(message(s.get("/api/v1/model?model=x", 404)), Catch::Contains("no model x"));
        CHECK_THAT(message(s.post("/api/v1/translate", {{"text", "Go."}, {"model", 9}}, 404)),
                   Catch::Contains("no model 9"));
        CHECK_THAT(message(s.get("/api/v1/runs/0", 404)), Catch::Contains("no run '0': 0 run(s)"));
        CHECK(s.client().Get("/api/v1/runs/0/events")->status == 404);
        auto r = s.client().Get("/api/v1/translate");
        REQUIRE(r);
        CHECK(r->status == 405);
        CHECK(r->get_header_value("Allow") == "POST");
        r = s.client().Delete("/api/v1/models");
        REQUIRE(r);
        CHECK(r->status == 405);
    }
}

TEST_CASE("serve: --max-concurrent: a request finding every slot taken waits, then gets 503 with Retry-After",
          "[apps][serve][slow]") {
    StudioOptions o{.checkpoints = {checkpoints().copy}};
    o.max_concurrent = 2;
    o.queue_timeout = std::chrono::milliseconds(300);
    Served s(o);
    {
        auto a = s.studio.admission().enter(std::chrono::milliseconds(0));
        auto b = s.studio.admission().enter(std::chrono::milliseconds(0));
        REQUIRE((a && b));
        const auto start = std::chrono::steady_clock::now();
        auto r = s.client().Post("/api/v1/translate", R"({"text": "1 2 3"})", "application/json");
        REQUIRE(r);
        CHECK(r->status == 503);
        CHECK(r->get_header_value("Retry-After") == "1");
        CHECK_THAT(r->body, Catch::Contains("the server is busy"));
        CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300));  // it waited first
        // a slot that comes free while it waits lets it in
        auto later = std::async(std::launch::async, [&] {
            return s.client().Post("/api/v1/translate", R"({"text": "1 2 3"})", "application/json");
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        a.reset();
        auto admitted = later.get();
        REQUIRE(admitted);
        CHECK(admitted->status == 200);
    }
    CHECK(s.post("/api/v1/translate", {{"text", "1 2 3"}})["sentences"].size() == 1);
}

TEST_CASE("serve: concurrent translate requests are decoded together, each getting its own answer",
          "[apps][serve][slow]") {
    StudioOptions o = all_kinds();
    o.batch_window = std::chrono::milliseconds(50);  // wide, so that the 8 requests below surely meet
    Served s(o);
    const std::vector<std::string> texts = {"Go.",          "I lost.",    "He's calm.", "I'm home.",
                                            "We are here.", "Stay calm.", "I see.",     "Wait!"};
    std::vector<std::string> alone;
    for (const auto& t : texts)
        alone.push_back(s.post("/api/v1/translate", {{"text", t}})["sentences"][0]["translations"][0]["text"]);
    const auto before = s.studio.batching();
    std::vector<std::future<std::string>> together;
    for (const auto& t : texts)
        together.push_back(std::async(std::launch::async, [&s, t] {
            auto r = s.client().Post("/api/v1/translate", json({{"text", t}}).dump(), "application/json");
            return r && r->status == 200
                       ? json::parse(r->body)["sentences"][0]["translations"][0]["text"].get<std::string>()
                       : std::string("(failed)");
        }));
    for (size_t i = 0; i < texts.size(); ++i) CHECK(together[i].get() == alone[i]);
    const auto after = s.studio.batching();
    CHECK(after.sentences - before.sentences == 8);
    CHECK(after.batches - before.batches < 8);  // fewer decoder calls than requests
    CHECK(after.largest >= 2);
}

TEST_CASE("serve: static files come from web/ only, and every response carries the security headers",
          "[apps][serve][slow]") {
    // a copy of the page with a link out of it and one inside it
    const std::string dir = temp_dir("web");
    const std::string web = dir + "/web";
    fs::copy(kWeb, web, fs::copy_options::recursive);
    std::ofstream(dir + "/secret.html") << "not for the page";
    fs::create_symlink(dir + "/secret.html", web + "/out.html");
    fs::create_symlink(web + "/studio.css", web + "/alias.css");
    std::ofstream(web + "/notes.txt") << "a kind of file the page is not made of";
    Served s({.checkpoints = {checkpoints().copy}}, web);

    CHECK(raw_status(s.port, "/") == 200);
    CHECK(raw_status(s.port, "/index.html") == 200);
    CHECK(raw_status(s.port, "/js/studio.js") == 200);
    CHECK(raw_status(s.port, "/alias.css") == 200);  // a link that stays inside
    for (const std::string path : {"/../secret.html", "/js/../../secret.html", "/%2e%2e/secret.html",
                                   "/%2E%2E%2Fsecret.html", "/..%2fsecret.html", "//etc/passwd", "/%2Fetc%2Fpasswd",
                                   "/out.html", "/notes.txt", "/nothing.html", "/js", "/web/index.html"}) {
        INFO(path);
        CHECK(raw_status(s.port, path) == 404);
    }
    const std::string page = raw_request(s.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK_THAT(page, Catch::Contains("Content-Type: text/html"));
    for (const std::string& answer :
         {page, raw_request(s.port, "GET /api/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
          raw_request(s.port, "GET /../x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
          raw_request(s.port,
                      "POST /api/v1/translate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
                      "20000\r\n\r\n")}) {
        INFO(answer.substr(0, 200));
        CHECK_THAT(answer, Catch::Contains("Content-Security-Policy: default-src 'self'; script-src 'self'"));
        CHECK_THAT(answer, Catch::Contains("X-Content-Type-Options: nosniff"));
    }
}

TEST_CASE("serve: a run's loss history, and its new steps as server-sent events while it trains",
          "[apps][serve][slow]") {
    const std::string dir = temp_dir("run");
    Served s({.checkpoints = {checkpoints().copy}, .runs = {dir}});
    CHECK(s.get("/api/v1/runs")["runs"][0]["steps"] == 0);  // nothing written yet

    // a run that trains long enough to be watched
    const pid_t trainer = testing::spawn_logged(
        {kTformer, "train", "copy", "--epochs", "40", "--threads", "1", "--quiet", "--out", dir}, dir + "/train.log");
    std::vector<json> events;
    std::string buffer;
    s.client().Get("/api/v1/runs/0/events", [&](const char* data, size_t n) {
        buffer.append(data, n);
        for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
            const std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            const size_t at = event.find("data: ");
            if (at != std::string::npos && event.find("event:") == std::string::npos)
                events.push_back(json::parse(event.substr(at + 6)));
        }
        return events.size() < 30;  // enough: stop listening
    });
    int status = 0;
    waitpid(trainer, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    REQUIRE(events.size() >= 30);
    for (size_t i = 1; i < events.size(); ++i) CHECK(events[i]["step"] > events[i - 1]["step"]);
    CHECK(events.front()["step"] == 1);

    const json run = s.get("/api/v1/runs/0");
    CHECK(run["steps"].size() == 40 * 20);  // 40 epochs of 20 batches, every step
    CHECK(run["epochs"].size() == 40);
    CHECK(run["steps"][0][0] == 1);
    CHECK(run["steps"][0][1] == Approx(events[0]["loss"].get<double>()).margin(1e-6));
    // from the end of what the history read, the stream has nothing more
    const auto later = s.studio.run_events(0, run["offset"].get<uint64_t>());
    REQUIRE(later);
    CHECK(later->text.empty());
}

TEST_CASE(
    "tformer serve: the command prints its address, warns off loopback, and stops on SIGTERM after the "
    "requests in flight",
    "[apps][serve][slow]") {
    const std::string dir = temp_dir("command");
    // the port it found, read from what it prints
    auto start = [&](const std::vector<std::string>& extra, const std::string& log) {
        std::vector<std::string> args = {kTformer, "serve", "--checkpoint", checkpoints().copy, "--port", "0"};
        args.insert(args.end(), extra.begin(), extra.end());
        const pid_t pid = testing::spawn_logged(args, log);
        const std::regex address(R"(the page: http://[^:]+:([0-9]+)/)");
        for (int i = 0; i < 600; ++i) {
            std::ifstream in(log);
            const std::string text((std::istreambuf_iterator<char>(in)), {});
            std::smatch m;
            if (std::regex_search(text, m, address)) return std::pair(pid, std::stoi(m[1].str()));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        kill(pid, SIGKILL);
        FAIL("tformer serve did not print its address");
        return std::pair(pid, 0);
    };
    auto read = [](const std::string& path) {
        std::ifstream in(path);
        return std::string((std::istreambuf_iterator<char>(in)), {});
    };
    auto wait = [](pid_t pid) {
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };

    // a translation held a second in the batch window is answered though SIGTERM comes meanwhile
    const auto [pid, port] = start({"--batch-window", "1000"}, dir + "/serve.log");
    auto request = std::async(std::launch::async, [port = port] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30);
        return c.Post("/api/v1/translate", R"({"text": "1 2 3 4"})", "application/json");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // read by now, even under the sanitizers
    kill(pid, SIGTERM);
    auto answer = request.get();
    REQUIRE(answer);
    CHECK(answer->status == 200);
    CHECK(wait(pid) == 0);
    CHECK_THAT(read(dir + "/serve.log"), Catch::Contains("stopped by SIGTERM"));

    // another address than loopback: a warning that the page has no authentication; SIGINT stops it too
    const auto [open_pid, open_port] = start({"--host", "0.0.0.0"}, dir + "/open.log");
    CHECK(open_port > 0);
    kill(open_pid, SIGINT);
    CHECK(wait(open_pid) == 0);
    CHECK_THAT(read(dir + "/open.log"), Catch::Contains("warning: listening on 0.0.0.0") &&
                                            Catch::Contains("no authentication") &&
                                            Catch::Contains("stopped by SIGINT"));

    // refusals of the command line: a missing checkpoint, a port taken
    auto r = testing::run_shell("'" + kTformer + "' serve --checkpoint " + dir + "/none.safetensors 2>&1");
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("none.safetensors"));
    const auto [busy_pid, busy_port] = start({}, dir + "/busy.log");
    r = testing::run_shell(
        fmt::format("'{}' serve --checkpoint {} --port {} 2>&1", kTformer, checkpoints().copy, busy_port));
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("cannot listen on 127.0.0.1"));
    kill(busy_pid, SIGTERM);
    CHECK(wait(busy_pid) == 0);
}
