#include "common/models.hpp"

#include <fmt/format.h>

namespace tformer::tutorial {

nn::TransformerOptions block_options(const BlockSize& size) {
    const int64_t D = size.num_hiddens;
    return {.key_size = D,
            .query_size = D,
            .value_size = D,
            .num_hiddens = D,
            .norm_shape = D,
            .ffn_num_input = D,
            .ffn_num_hiddens = size.ffn_num_hiddens,
            .num_heads = size.num_heads,
            .num_layers = size.num_layers,
            .dropout = size.dropout,
            .use_bias = size.use_bias};
}

std::vector<std::string> head_titles(int64_t num_heads) {
    std::vector<std::string> titles;
    for (int64_t h = 1; h <= num_heads; ++h) titles.push_back(fmt::format("head {}", h));
    return titles;
}

}  // namespace tformer::tutorial
