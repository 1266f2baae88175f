// Looking inside a trained encoder–decoder: the attention weights of every
// layer and head while it reads one sentence and writes one translation, and
// the tensors of one encoder block computed step by step in the documents'
// order. `tformer serve` draws both (apps/studio.cpp); the tutorials print
// the same steps on toy tensors (tutorial 10 walks an encoder block).
//
// Letters: S source steps, T target steps, D hidden, H heads, d = D / H, F FFN hidden.
#pragma once

#include "core/tensor.hpp"
#include "nn/transformer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tasks {

/// The attention weights of one sentence pair, every layer and head.
struct AttentionMaps {
    std::vector<core::Tensor> encoder;        ///< [layer] (H, S, S): source position attends to source position
    std::vector<core::Tensor> decoder_self;   ///< [layer] (H, T, T): masked, row t sees columns 0..t
    std::vector<core::Tensor> decoder_cross;  ///< [layer] (H, T, S): target position attends to source position
};

/// Teacher forcing of one pair: the encoder reads `src` (S ids, the first
/// `src_valid` of them real, the rest padding as d2l pads them) and the
/// decoder reads `dec_input` (T ids: `<bos>` and the tokens generated but the
/// last), as training does; the weights each attention kept are returned.
/// Row t of the decoder's maps is the step that predicted generated token t.
/// Eval mode, no graph.
AttentionMaps attention_maps(nn::EncoderDecoder& model, const std::vector<int64_t>& src, int64_t src_valid,
                             const std::vector<int64_t>& dec_input);

/// One step of an encoder block's computation.
struct BlockStep {
    std::string name;     ///< a short key: embedding, queries, keys, values, scores, weights, ...
    std::string title;    ///< what it is, in words
    std::string formula;  ///< how it is computed from the steps before
    std::string section;  ///< the heading of the document it follows (docs/documents.md)
    core::Tensor value;   ///< (S, D), (S, F), or per head (H, S, d) and (H, S, S)
};

/// Encoder block `layer` reading one sentence (`src`, S ids with the first
/// `src_valid` real), written out as its forward computes it: the block's
/// input (for block 0, embedding × √D + positional encoding), then queries,
/// keys and values per head, the scaled scores, the masked softmax, the
/// heads' outputs joined and projected by W_o, the first Add & Norm, the
/// FFN's hidden layer and output, and the second Add & Norm, which is the
/// block's output. Composed from the block's own layers, so the last step
/// equals what the encoder computes there. ValueError for a layer out of range.
std::vector<BlockStep> encoder_block_steps(nn::EncoderDecoder& model, const std::vector<int64_t>& src,
                                           int64_t src_valid, int64_t layer);

}  // namespace tformer::tasks
