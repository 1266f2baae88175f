// tasks/run_plan: the presets of `tformer train` as the base plan plus named
// differences, what the checkpoint keeps of a plan, and what ranks compare.
#include "tasks/bench.hpp"
#include "tasks/run_plan.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;

namespace {
std::map<std::string, std::string> settings_map(const RunPlan& p) {
    std::map<std::string, std::string> m;
    for (const auto& [name, value] : plan_settings(p)) m[name] = value;
    return m;
}
}  // namespace

TEST_CASE("preset_plan: the default translation run, and each preset's differences from it", "[tasks][plan]") {
    const RunPlan d = preset_plan("translate", "default");
    CHECK(d.pipeline == Pipeline::corpus);
    CHECK(d.preset == "default");
    CHECK(d.seed == 0);
    CHECK(d.threads == 0);
    CHECK(d.tokenizer == "sentencepiece");
    CHECK(d.vocab_size == 4000);
    CHECK(d.batch_tokens == 1500);
    CHECK(d.val_sentences == 1500);
    CHECK(d.buckets);
    CHECK(d.model.num_steps == 64);
    const auto& t = d.model.transformer;
    CHECK(t.num_hiddens == 128);
    // every width follows D
    CHECK((t.key_size == 128 && t.query_size == 128 && t.value_size == 128 && t.norm_shape == 128 &&
           t.ffn_num_input == 128));
    CHECK(t.ffn_num_hiddens == 512);
    CHECK(t.num_heads == 4);
    CHECK(t.num_layers == 1);
    CHECK(t.dropout == 0.0);
    CHECK(t.fused);
    CHECK(d.model.tie_embeddings);
    CHECK(d.model.scaled_embedding_init);
    CHECK(d.train.total_steps == 5150);
    CHECK(d.train.lr == 0.0025);
    CHECK(d.train.adam_beta2 == 0.98);
    CHECK(d.train.schedule == "cosine");
    CHECK(d.train.warmup == 200);
    CHECK(d.train.label_smoothing == 0.1);
    CHECK((d.train.token_mean && d.train.fused_loss));
    CHECK(preset_plan("translate", "").preset == "default");  // no name: the task's first preset

    SECTION("long: the same plan but for its depth, vocabulary, batches, length, peak rate and Adam's beta2") {
        std::map<std::string, std::string> base = settings_map(d),
                                           long_run = settings_map(preset_plan("translate", "long"));
        CHECK(long_run["--num-layers"] == "2");
        CHECK(long_run["--vocab-size"] == "8000");
        CHECK(long_run["--batch-tokens"] == "2000");
        CHECK(long_run["--steps"] == "9000");
        CHECK(long_run["--lr"] == "0.002");
        CHECK(long_run["--adam-beta2"] == "0.999");
        CHECK(long_run["--preset"] == "long");
        for (const char* differs :
             {"--num-layers", "--vocab-size", "--batch-tokens", "--steps", "--lr", "--adam-beta2", "--preset"}) {
            base.erase(differs);
            long_run.erase(differs);
        }
        CHECK(base == long_run);
    }
    SECTION("d2l: seed 000's training cell") {
        const RunPlan p = preset_plan("translate", "d2l");
        CHECK(p.pipeline == Pipeline::d2l);
        CHECK(p.seed == 1);
        CHECK(p.threads == 1);
        CHECK(p.num_examples == 600);
        CHECK(p.model.num_steps == 10);
        CHECK(p.model.transformer.num_hiddens == 32);
        CHECK(p.model.transformer.key_size == 32);
        CHECK(p.model.transformer.ffn_num_hiddens == 64);
        CHECK(p.model.transformer.dropout == 0.1);
        CHECK_FALSE((p.model.tie_embeddings || p.model.scaled_embedding_init || p.model.transformer.fused));
        CHECK(p.train.epochs == 200);
        CHECK(p.train.total_steps == 0);
        CHECK(p.train.batch_size == 64);
        CHECK(p.train.lr == 0.005);
        CHECK(p.train.adam_beta2 == 0.999);
        CHECK(p.train.schedule == "constant");
        CHECK(p.train.label_smoothing == 0.0);
        CHECK_FALSE(p.train.token_mean);
    }
    SECTION("copy: seed 004's task on d2l's model without dropout") {
        const RunPlan p = preset_plan("copy", "");
        CHECK(p.preset == "copy");
        CHECK(p.pipeline == Pipeline::copy);
        CHECK(p.model.task == "copy");
        CHECK(p.seed == 0);
        CHECK(p.model.transformer.num_hiddens == 32);
        CHECK(p.model.transformer.dropout == 0.0);
        CHECK(p.train.epochs == 80);
        CHECK(p.train.batch_size == 30);
        CHECK(p.train.batches_per_epoch == 20);
        CHECK(p.train.warmup == 100);
        CHECK(p.train.schedule == "noam");
        CHECK(p.train.adam_beta2 == 0.999);  // torch.optim.Adam's default, as seed 004 uses it
    }
}

TEST_CASE("preset_plan: an unknown preset or task is named with the ones there are", "[tasks][plan]") {
    CHECK_THROWS_WITH(preset_plan("translate", "huge"),
                      "train translate: unknown preset 'huge' (available: default, long, d2l)");
    CHECK_THROWS_WITH(preset_plan("copy", "long"), "train copy: unknown preset 'long' (available: copy)");
    CHECK_THROWS_WITH(preset_plan("sort", ""), "train: unknown task 'sort' (expected copy or translate)");
    CHECK(preset_names("translate") == std::vector<std::string>{"default", "long", "d2l"});
}

TEST_CASE("plan_metadata: what a checkpoint keeps to read the data as the run did, per pipeline", "[tasks][plan]") {
    using Meta = std::map<std::string, std::string>;
    CHECK(plan_metadata(preset_plan("translate", "default")) == Meta{{"preset", "default"},
                                                                     {"seed", "0"},
                                                                     {"pipeline", "corpus"},
                                                                     {"data_seed", "0"},
                                                                     {"val_sentences", "1500"},
                                                                     {"sample_size", "0"},
                                                                     {"batch_tokens", "1500"},
                                                                     {"tokenizer", "sentencepiece"},
                                                                     {"vocab_size", "4000"},
                                                                     {"subword_dropout", "0"}});
    CHECK(plan_metadata(preset_plan("translate", "d2l")) == Meta{{"preset", "d2l"},
                                                                 {"seed", "1"},
                                                                 {"batch_size", "64"},
                                                                 {"pipeline", "d2l"},
                                                                 {"num_examples", "600"},
                                                                 {"sample_size", "0"},
                                                                 {"data_seed", "1"},
                                                                 {"val_fraction", "0"},
                                                                 {"num_steps", "10"}});
    CHECK(plan_metadata(preset_plan("copy", "copy")) ==
          Meta{{"preset", "copy"}, {"seed", "0"}, {"batch_size", "30"}, {"batches_per_epoch", "20"}});
}

TEST_CASE("plan_settings: each setting named by its flag, the pipeline's own flags only", "[tasks][plan]") {
    RunPlan p = preset_plan("translate", "default");
    std::map<std::string, std::string> s = settings_map(p);
    CHECK(s["the command"] == "train translate");
    CHECK(s["--vocab-size"] == "4000");
    CHECK(s["--lr"] == "0.0025");
    CHECK(s["--adam-beta2"] == "0.98");
    CHECK(s["--tie-embeddings"] == "true");
    CHECK(s.count("--batch-size") == 0);  // the corpus batches by tokens
    CHECK(s["--subword-dropout"] == "0");
    p.vocab_size = 300;
    CHECK(settings_map(p)["--vocab-size"] == "300");
    s = settings_map(preset_plan("translate", "d2l"));
    CHECK(s["--num-examples"] == "600");
    CHECK(s.count("--vocab-size") == 0);
    CHECK(s.count("--subword-dropout") == 0);
    // what only one process uses is not compared
    for (const char* own : {"--out", "--threads", "--quiet", "--max-memory", "--plot-format"}) CHECK(s.count(own) == 0);
}

TEST_CASE("bench_preset(translate) is the default training plan's model and batches", "[tasks][plan][bench]") {
    const RunPlan plan = preset_plan("translate", "default");
    const BenchPreset b = bench_preset("translate");
    CHECK(b.config.transformer.num_hiddens == plan.model.transformer.num_hiddens);
    CHECK(b.config.transformer.ffn_num_hiddens == plan.model.transformer.ffn_num_hiddens);
    CHECK(b.config.transformer.num_layers == plan.model.transformer.num_layers);
    CHECK(b.config.tie_embeddings == plan.model.tie_embeddings);
    CHECK(b.num_steps == plan.model.num_steps);
    CHECK(b.vocab_size == plan.vocab_size);
    CHECK(b.batch_tokens == plan.batch_tokens);
    CHECK(b.val_sentences == plan.val_sentences);
    CHECK(b.label_smoothing == plan.train.label_smoothing);
}
