// The model sizes and picture labels that tutorials 10-16 set up again and
// again, written once.
//
//   const nn::TransformerOptions o =
//       tutorial::block_options({.num_hiddens = 8, .ffn_num_hiddens = 16, .num_heads = 2});
//   nn::EncoderBlock blk(o, gen);  // D = 8 everywhere: keys, queries, values, norm_shape, FFN input
#pragma once

#include "nn/transformer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tutorial {

/// The sizes of a Transformer whose every width is D, with d2l's names.
struct BlockSize {
    int64_t num_hiddens;      ///< D: also key_size, query_size, value_size, norm_shape, ffn_num_input
    int64_t ffn_num_hiddens;  ///< the FFN's inner width
    int64_t num_heads;
    int64_t num_layers = 1;
    double dropout = 0.0;
    bool use_bias = false;  ///< biases in the attention projections
};

/// nn::TransformerOptions with key_size = query_size = value_size =
/// num_hiddens = norm_shape = ffn_num_input = size.num_hiddens and the other
/// fields from `size` (scale_embedding and fused at their defaults).
nn::TransformerOptions block_options(const BlockSize& size);

/// "head 1", ..., "head H": the column titles of a heatmap grid of H heads.
std::vector<std::string> head_titles(int64_t num_heads);

}  // namespace tformer::tutorial
