// The tformer command: error paths a user hits first, and a short copy run.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
struct Run {
    int status;
    std::string output;  // stdout and stderr together
};

Run tformer(const std::string& args, const std::string& stdin_text = "") {
    const std::string exe = std::string(TFORMER_BINARY_DIR) + "/apps/tformer";
    std::string cmd = "'" + exe + "' " + args + " 2>&1";
    if (!stdin_text.empty()) cmd = "printf '%s' '" + stdin_text + "' | " + cmd;
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string temp_dir(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / ("tformer-cli-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}
}  // namespace

TEST_CASE("tformer: errors are clear messages and a non-zero exit, never a crash", "[apps][cli]") {
    const std::string dir = temp_dir("errors");
    SECTION("unknown preset") {
        const Run r = tformer("train translate --preset huge --out " + dir);
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("unknown preset 'huge' (available: default, d2l)"));
    }
    SECTION("missing checkpoint") {
        const Run r = tformer("translate --checkpoint " + dir + "/nope.safetensors \"go .\"");
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("nope.safetensors"));
    }
    SECTION("corrupt checkpoint") {
        std::ofstream(dir + "/bad.safetensors") << "definitely not safetensors";
        const Run r = tformer("eval --checkpoint " + dir + "/bad.safetensors");
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("tformer: error:"));
    }
    SECTION("no subcommand") {
        const Run r = tformer("");
        CHECK(r.status != 0);
    }
}

TEST_CASE("tformer train copy: a short run, then eval, translate refuses it, resume continues", "[apps][cli][slow]") {
    const std::string dir = temp_dir("copy");
    Run r = tformer("train copy --epochs 2 --batches-per-epoch 5 --threads 1 --quiet --out " + dir);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("exact-sequence accuracy on 1000 fresh sequences"));
    CHECK(std::filesystem::exists(dir + "/checkpoint.safetensors"));
    CHECK(std::filesystem::exists(dir + "/loss.csv"));
    CHECK(std::filesystem::exists(dir + "/loss.png"));
    CHECK(std::filesystem::exists(dir + "/attention-encoder.png"));

    r = tformer("eval --checkpoint " + dir + "/checkpoint.safetensors --threads 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("copy task: exact-sequence accuracy"));

    // a copy checkpoint is not a translation model
    r = tformer("translate --checkpoint " + dir + "/checkpoint.safetensors \"go .\"");
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("is a copy checkpoint, not a translation model"));

    // resume: 2 more epochs on top of the saved 10 steps
    r = tformer("train copy --epochs 4 --batches-per-epoch 5 --threads 1 --quiet --resume --out " + dir);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("trained 20 steps"));
}
