// The small copy model (d = 16, 2 heads, 2 blocks, no dropout) that the
// data-parallel tests train on one process and on several ranks.
#pragma once

#include "core/core.hpp"
#include "tasks/seq2seq.hpp"

#include <memory>

namespace tformer::testing {

inline std::shared_ptr<nn::EncoderDecoder> small_copy_model(uint64_t seed) {
    tasks::ModelConfig config;
    config.task = "copy";
    config.src_vocab_size = config.tgt_vocab_size = 11;
    config.num_steps = 8;
    config.transformer = {.key_size = 16,
                          .query_size = 16,
                          .value_size = 16,
                          .num_hiddens = 16,
                          .norm_shape = 16,
                          .ffn_num_input = 16,
                          .ffn_num_hiddens = 32,
                          .num_heads = 2,
                          .num_layers = 2,
                          .dropout = 0.0};
    core::Generator gen(seed);
    return tasks::build_model(config, gen);
}

}  // namespace tformer::testing
