// Small models for tests: the options of a Transformer of width d (every
// size that follows d set to it), and the small copy model (d = 16, 2 heads,
// 2 blocks, no dropout) that the data-parallel tests train on one process
// and on several ranks.
#pragma once

#include "core/core.hpp"
#include "tasks/seq2seq.hpp"

#include <memory>

namespace tformer::testing {

/// A Transformer of width d: key, query and value sizes, the norm and the
/// FFN's input follow d; an FFN of 2d, 2 heads, 1 block, no dropout (set a
/// field to change it).
inline nn::TransformerOptions transformer_of_width(int64_t d) {
    return {.key_size = d,
            .query_size = d,
            .value_size = d,
            .num_hiddens = d,
            .norm_shape = d,
            .ffn_num_input = d,
            .ffn_num_hiddens = 2 * d,
            .num_heads = 2,
            .num_layers = 1,
            .dropout = 0.0};
}

inline std::shared_ptr<nn::EncoderDecoder> small_copy_model(uint64_t seed) {
    tasks::ModelConfig config;
    config.task = "copy";
    config.src_vocab_size = config.tgt_vocab_size = 11;
    config.num_steps = 8;
    config.transformer = transformer_of_width(16);
    config.transformer.num_layers = 2;
    core::Generator gen(seed);
    return tasks::build_model(config, gen);
}

}  // namespace tformer::testing
