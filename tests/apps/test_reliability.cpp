// The tformer command against hostile files and careless use (docs/reliability.md):
// metadata nested deep enough to overflow a recursive reader, files that are
// not files, weights that load but are wrong, two runs into one --out, and
// stdin lines with NUL bytes or old Mac line ends.
#include "apps/shell.hpp"
#include "core/core.hpp"
#include "nn/safetensors.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/small_model.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {
namespace fs = std::filesystem;
using tformer::testing::corpus_head;
using tformer::testing::run_args;
using tformer::testing::SplitRun;

std::string temp_dir(const std::string& name) {
    const auto dir = fs::temp_directory_path() / ("tformer-reliability-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

// The flags of a tiny d2l-preset run on the first 300 lines of the corpus (a second or two).
std::vector<std::string> tiny_d2l(const std::string& data, const std::string& out) {
    return {"train",
            "translate",
            "--preset",
            "d2l",
            "--data",
            data,
            "--sample-size",
            "50",
            "--epochs",
            "1",
            "--num-hiddens",
            "8",
            "--ffn-num-hiddens",
            "16",
            "--num-heads",
            "2",
            "--num-layers",
            "1",
            "--threads",
            "1",
            "--quiet",
            "--out",
            out};
}

// A translation model with tied embeddings over a word vocabulary of eight,
// saved as a checkpoint (no training needed to test what loading checks).
std::string tied_checkpoint(const std::string& dir) {
    using namespace tformer::tasks;
    ModelConfig c;
    c.task = "translate";
    c.src_vocab_size = c.tgt_vocab_size = 8;
    c.num_steps = 6;
    c.tie_embeddings = true;
    c.transformer = tformer::testing::transformer_of_width(8);  // FFN 16, 2 heads, 1 block
    tformer::core::Generator gen(5);
    auto model = build_model(c, gen);
    const Vocab vocab = Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "go", ".", "va", "!"});
    CheckpointInfo info{.config = c, .src_vocab = vocab, .tgt_vocab = vocab, .losses = {}};
    const std::string path = dir + "/tied.safetensors";
    save_checkpoint(path, *model, nullptr, info);
    return path;
}

// `checkpoint` with the tensors `change` returns written to `path`.
template <class Change>
void rewrite(const std::string& checkpoint, const std::string& path, Change&& change) {
    tformer::nn::SafeTensors st = tformer::nn::load_safetensors(checkpoint);
    change(st);
    tformer::nn::save_safetensors(path, st);
}
}  // namespace

TEST_CASE("tformer translate, eval and train --resume: metadata nested 100,000 or 1,000,000 levels deep is refused",
          "[apps][reliability]") {
    // a reader that walked such a document recursively would overflow the stack (SIGSEGV, no message)
    const std::string dir = temp_dir("deep");
    const std::string data = corpus_head(dir, 300);
    const std::vector<std::string> train = tiny_d2l(data, dir + "/run");
    SplitRun r = run_args(train);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string good = dir + "/run/checkpoint.safetensors";
    const tformer::nn::SafeTensors saved = tformer::nn::load_safetensors(good);
    for (const size_t levels : {100'000, 1'000'000}) {
        // the nesting goes under "extra" of a real checkpoint's metadata (about 2 bytes per level)
        rewrite(good, good, [&](tformer::nn::SafeTensors& st) {
            st = saved;
            std::string& meta = st.metadata.at("tformer");
            const size_t extra = meta.find("\"extra\":{");
            REQUIRE(extra != std::string::npos);
            meta.insert(extra + 9, "\"deep\":" + std::string(levels, '[') + std::string(levels, ']') + ",");
        });
        const std::string message =
            "checkpoint '" + good + "': metadata 'tformer' is nested more than 8 levels deep, more than any valid one";
        const std::vector<std::vector<std::string>> commands = {
            {"translate", "--checkpoint", good, "go ."},
            {"eval", "--checkpoint", good, "--data", data, "--threads", "1"},
        };
        for (const auto& args : commands) {
            r = run_args(args);
            INFO(levels << " levels, " << args[0] << "\n" << r.err);
            CHECK(r.status == 1);
            CHECK_THAT(r.err, Catch::Contains("tformer: error: " + message));
        }
        std::vector<std::string> resume = train;
        *(std::find(resume.begin(), resume.end(), "--epochs") + 1) = "2";
        resume.push_back("--resume");
        r = run_args(resume);
        INFO(levels << " levels, train --resume\n" << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.err, Catch::Contains("tformer: error: " + message));
    }
}

TEST_CASE("tformer: a FIFO, a socket or a device as --checkpoint or --data is refused at once", "[apps][reliability]") {
    // opened the usual way, a FIFO would make the reader wait forever for a writer
    const std::string dir = temp_dir("not-files");
    const std::string fifo = dir + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const std::string socket_path = dir + "/socket";
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(sock >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::copy(socket_path.begin(), socket_path.end(), address.sun_path);
    REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    const std::vector<std::pair<std::string, std::string>> paths = {
        {fifo, "a FIFO (named pipe)"}, {socket_path, "a socket"}, {"/dev/zero", "a character device"}};
    for (const auto& [path, kind] : paths) {
        const std::vector<std::vector<std::string>> commands = {
            {"translate", "--checkpoint", path, "go ."},
            {"eval", "--checkpoint", path},
            {"train", "translate", "--data", path, "--threads", "1", "--out", dir + "/out"},
            {"train", "translate", "--preset", "d2l", "--data", path, "--threads", "1", "--out", dir + "/out"},
        };
        for (const auto& args : commands) {
            const SplitRun r = run_args(args, "", 60);  // a wait for a writer would be killed after 60 s: -1
            INFO(path << ": " << args[0] << " " << args[1] << "\n" << r.err);
            CHECK(r.status == 1);
            CHECK_THAT(r.err, Catch::Contains("'" + path + "' is " + kind + ", not a regular file; give the path of"));
        }
    }
    ::close(sock);
    // nothing was written for the refused runs
    CHECK_FALSE(fs::exists(dir + "/out"));
}

TEST_CASE("tformer translate and eval: weights that load but are wrong are named", "[apps][reliability]") {
    const std::string dir = temp_dir("weights");
    const std::string tied = tied_checkpoint(dir);
    const std::string bad = dir + "/bad.safetensors";
    const std::vector<std::string> copies = {"model.encoder.embedding.weight", "model.decoder.embedding.weight",
                                             "model.decoder.dense.weight"};
    auto set_all = [&](tformer::nn::SafeTensors& st, int64_t row, int64_t col, double value) {
        for (const std::string& name : copies) {
            tformer::core::Tensor t = st.tensors.at(name).clone();
            t.set({row, col}, value);
            st.tensors[name] = t;
        }
    };
    SplitRun r = run_args({"translate", "--checkpoint", tied, "--beam", "1", "go ."});
    INFO(r.err);
    REQUIRE(r.status == 0);

    // finite but far beyond what training makes: it runs, with a warning naming each tensor
    rewrite(tied, bad, [&](tformer::nn::SafeTensors& st) {
        for (const std::string& name : copies)
            st.tensors[name] = tformer::core::full(st.tensors.at(name).shape(), 3e38);
    });
    r = run_args({"translate", "--checkpoint", bad, "--beam", "1", "go ."});
    INFO(r.err);
    CHECK(r.status == 0);
    for (const std::string& name : copies)
        CHECK_THAT(r.err, Catch::Contains("load_checkpoint: warning: '" + bad + "': tensor '" + name +
                                          "' holds values up to 3e+38 in magnitude, beyond what training produces "
                                          "(|w| > 1e+06); the model's output will be garbage"));

    // NaN in all three tied copies: not finite, each copy named with its count (not "wrong shape" or "values differ")
    rewrite(tied, bad, [&](tformer::nn::SafeTensors& st) {
        set_all(st, 4, 1, std::nan(""));
        set_all(st, 5, 2, std::nan(""));
    });
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"translate", "--checkpoint", bad, "go ."},
          std::vector<std::string>{"eval", "--checkpoint", bad, "--threads", "1"}}) {
        r = run_args(args);
        INFO(args[0] << "\n" << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.err, Catch::Contains("checkpoint '" + bad +
                                          "': 3 tensor(s) hold values that are not finite (NaN or infinity): "
                                          "'model.decoder.dense.weight' (2 of 64), 'model.decoder.embedding.weight' "
                                          "(2 of 64), 'model.encoder.embedding.weight' (2 of 64)"));
        CHECK(r.err.find("wrong shape") == std::string::npos);
    }

    // one tied copy that differs: "values differ", naming the copy and the one it should equal
    rewrite(tied, bad, [&](tformer::nn::SafeTensors& st) {
        tformer::core::Tensor t = st.tensors.at("model.decoder.dense.weight").clone();
        t.set({3, 3}, 0.5);
        st.tensors["model.decoder.dense.weight"] = t;
    });
    r = run_args({"translate", "--checkpoint", bad, "go ."});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("values differ: decoder.dense.weight differs from encoder.embedding.weight, "
                                      "the same tied parameter, in 1 of 64 values"));
    CHECK(r.err.find("wrong shape") == std::string::npos);
}

TEST_CASE(
    "tformer train: a second run into the same --out is refused naming the first one's PID, a killed run's "
    "lock is taken over",
    "[apps][reliability]") {
    // without the lock, both runs would exit 0, one silently overwriting the other's checkpoint
    const std::string dir = temp_dir("lock"), lock = dir + "/out/.tformer.lock";
    const std::string exe = std::string(TFORMER_BINARY_DIR) + "/apps/tformer";
    const pid_t first = tformer::testing::spawn_logged(
        {exe, "train", "copy", "--epochs", "100000", "--threads", "1", "--quiet", "--out", dir + "/out"},
        dir + "/first.log");
    // the lock is taken before the model is built
    for (int i = 0; i < 600 && tformer::testing::file_bytes(lock).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(tformer::testing::file_bytes(lock) == std::to_string(first) + "\n");
    const std::string refused = "train: --out '" + dir + "/out' is in use by another run (PID " +
                                std::to_string(first) + ", which holds '" + lock +
                                "'); wait until it ends, or choose another --out";
    for (const char* how : {"--overwrite", "--resume"}) {
        const SplitRun r =
            run_args({"train", "copy", "--epochs", "1", "--threads", "1", "--quiet", how, "--out", dir + "/out"});
        INFO(how << "\n" << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.err, Catch::Contains(refused));
    }
    // killed: the kernel releases its lock; the file is left, with its PID, and the next run takes it over
    kill(first, SIGKILL);
    REQUIRE(waitpid(first, nullptr, 0) == first);
    REQUIRE(fs::exists(lock));
    const SplitRun next = run_args({"train", "copy", "--epochs", "1", "--batches-per-epoch", "2", "--threads", "1",
                                    "--quiet", "--overwrite", "--out", dir + "/out"});
    INFO(next.err);
    CHECK(next.status == 0);
    CHECK_THAT(next.err, Catch::Contains("train: the run that locked --out '" + dir + "/out' (PID " +
                                         std::to_string(first) + ") ended without unlocking it; taking it over"));
    // a run that ends removes its lock file
    CHECK_FALSE(fs::exists(lock));
    CHECK(fs::exists(dir + "/out/checkpoint.safetensors"));
}

TEST_CASE("tformer train: argument errors create nothing on disk, a dangling --out link is explained",
          "[apps][reliability]") {
    const std::string dir = temp_dir("nothing-made");
    const std::string out = dir + "/new/run";  // neither folder exists
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"train", "translate", "--num-hiddens", "30", "--num-heads", "4"}, "is not divisible by num_heads 4"},
        {{"train", "copy", "--epochs", "2", "--steps", "5"}, "give --epochs or --steps, not both"},
        {{"train", "translate", "--preset", "d2l", "--schedule", "constant", "--warmup", "100"},
         "--warmup applies to --schedule noam or cosine"},
        // found once the run is set up: the directories it made go again
        {{"train", "copy", "--schedule", "cosine", "--warmup", "5000", "--steps", "10", "--threads", "1"},
         "the warm-up (--warmup 5000) is longer than the whole run"},
        {{"train", "copy", "--resume", "--threads", "1"}, "--resume needs a checkpoint at"},
        {{"train", "translate", "--data", dir + "/missing.txt", "--threads", "1"}, "cannot open"},
    };
    for (auto [args, message] : refused) {
        args.insert(args.end(), {"--out", out});
        const SplitRun r = run_args(args);
        INFO(args[2] << " ...\n" << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.err, Catch::Contains(message));
        CHECK_FALSE(fs::exists(dir + "/new"));
    }
    // a symbolic link to nowhere: the system says only "File exists"; tformer says what it is
    fs::create_symlink(dir + "/nowhere", dir + "/link");
    const SplitRun r = run_args({"train", "copy", "--epochs", "1", "--threads", "1", "--out", dir + "/link"});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("train: cannot use --out '" + dir +
                                      "/link' as the output directory: it is a "
                                      "symbolic link to '" +
                                      dir +
                                      "/nowhere', which does not exist; create that directory or remove the "
                                      "link"));
    CHECK_FALSE(fs::exists(dir + "/nowhere"));
}

TEST_CASE("tformer translate on stdin: a NUL byte is an error for its line, CR-only line ends are line ends",
          "[apps][reliability]") {
    using namespace std::string_literals;
    const std::string dir = temp_dir("stdin");
    const std::string checkpoint = tied_checkpoint(dir);
    const SplitRun one = run_args({"translate", "--checkpoint", checkpoint, "--beam", "1"}, "go .\n");
    REQUIRE(one.status == 0);
    const std::string translation = one.out;  // ". . . . . .\n" from this untrained model: not a blank line
    REQUIRE(translation.size() > 1);
    // old Mac line ends ("\r"), Windows ones ("\r\n") and Unix ones, mixed; a blank line; a NUL inside line 4
    const SplitRun r =
        run_args({"translate", "--checkpoint", checkpoint, "--beam", "1"}, "go .\rgo .\r\rgo\0 .\r\ngo ."s);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.out == translation + translation + "\n" + "\n" + translation);  // five lines in, five out
    CHECK(r.err == "translate: line 4: translate: the sentence holds a NUL byte (byte 3), which text does not\n");
    // a file of CR-only line ends alone
    const SplitRun mac = run_args({"translate", "--checkpoint", checkpoint, "--beam", "1"}, "go .\rgo .\r");
    CHECK(mac.status == 0);
    CHECK(mac.out == translation + translation);
}
