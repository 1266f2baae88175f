// A tformer checkpoint loads into d2l's PyTorch Transformer (seed 000's
// modules, under the same names) and translates there exactly as tformer
// does: scripts/torch_translate.py, and docs/training.md's snippet that loads a
// checkpoint, against `tformer translate --beam 1`.
// Needs /usr/bin/python3 with torch and sentencepiece (Debian's python3-torch,
// python3-sentencepiece); without them the test says so and passes (Catch2
// v2 has no SKIP), as torch is never required at test time.
#include "apps/shell.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {
using Output = tformer::testing::ShellResult;
const auto run = tformer::testing::run_shell;

bool torch_available() { return run("/usr/bin/python3 -c 'import torch, sentencepiece' 2>/dev/null").status == 0; }

// docs/training.md's Python snippet (the block under "A checkpoint in
// PyTorch"), reading `checkpoint` instead of runs/translate's, as a file to run.
std::string readme_snippet(const std::filesystem::path& dir, const std::string& checkpoint) {
    std::ifstream in(std::string(TFORMER_SOURCE_DIR) + "/docs/training.md");
    const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t section = readme.find("## A checkpoint in PyTorch");
    REQUIRE(section != std::string::npos);
    const size_t begin = readme.find("```python\n", section);
    REQUIRE(begin != std::string::npos);
    const size_t end = readme.find("```", begin + 10);
    std::string code = readme.substr(begin + 10, end - begin - 10);
    const std::string default_path = "runs/translate/checkpoint.safetensors";
    const size_t at = code.find(default_path);
    REQUIRE(at != std::string::npos);
    code.replace(at, default_path.size(), checkpoint);
    const std::filesystem::path file = dir / "readme_snippet.py";
    std::ofstream(file) << code;
    return file.string();
}
}  // namespace

TEST_CASE("scripts/torch_translate.py: d2l's PyTorch model with tformer's weights translates as tformer does",
          "[apps][torch][slow]") {
    if (!torch_available()) {
        WARN(
            "skipped: /usr/bin/python3 cannot import torch and sentencepiece (apt-get install python3-torch "
            "python3-sentencepiece)");
        return;
    }
    const std::string exe = std::string(TFORMER_BINARY_DIR) + "/apps/tformer";
    const std::string script = std::string(TFORMER_SOURCE_DIR) + "/scripts/torch_translate.py";
    const auto dir = std::filesystem::temp_directory_path() / ("tformer-torch-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    const std::string sentences =
        "\"I'm home.\" \"He's calm.\" \"We are friends.\" \"I lost.\" "
        "\"If you want to learn a language well, you have to speak it every day.\"";
    // a subword model of the whole-corpus pipeline and a word model of seed 000's
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"subword",
         "train translate --sample-size 3000 --steps 60 --num-hiddens 32 --ffn-num-hiddens 64 --num-layers 2 "
         "--vocab-size 300 --val-sentences 20 --warmup 5 --threads 1 --quiet"},
        {"d2l", "train translate --preset d2l --epochs 20 --threads 1 --quiet"}};
    for (const auto& [name, args] : runs) {
        const std::string out = (dir / name).string();
        const Output trained = run("'" + exe + "' " + args + " --out '" + out + "' 2>&1");
        INFO(trained.output);
        REQUIRE(trained.status == 0);
        const std::string ckpt = "'" + out + "/checkpoint.safetensors'";
        // stdout only: tformer warns on stderr that the last sentence is longer than the d2l model's 10 tokens
        const Output torch = run("/usr/bin/python3 '" + script + "' " + ckpt + " " + sentences);
        const Output ours = run("'" + exe + "' translate --checkpoint " + ckpt + " --beam 1 --threads 1 " + sentences);
        INFO(name << "\nPyTorch:\n" << torch.output << "tformer:\n" << ours.output);
        CHECK(torch.status == 0);
        CHECK(ours.status == 0);
        CHECK(torch.output == ours.output);
        CHECK(std::count(ours.output.begin(), ours.output.end(), '\n') == 5);
        // docs/training.md's snippet translates its two sentences as tformer does
        const std::string snippet = readme_snippet(dir, out + "/checkpoint.safetensors");
        const Output readme = run("cd '" + std::string(TFORMER_SOURCE_DIR) + "' && /usr/bin/python3 '" + snippet + "'");
        const Output ours2 = run("'" + exe + "' translate --checkpoint " + ckpt +
                                 " --beam 1 --threads 1 \"I'm home.\" "
                                 "\"He's calm.\"");
        INFO("docs/training.md snippet:\n" << readme.output << "tformer:\n" << ours2.output);
        CHECK(readme.status == 0);
        CHECK(readme.output == ours2.output);
        CHECK(std::count(readme.output.begin(), readme.output.end(), '\n') == 2);
    }
    std::filesystem::remove_all(dir);
}
