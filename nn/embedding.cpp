// Embedding: row lookup (PyTorch's nn.Embedding; seed 002 §1.2.1 and §1.2.3).
#include "core/check.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"

#include "autograd/functional.hpp"

namespace tformer::nn {

Embedding::Embedding(Options opts, core::Generator& gen) : Module("Embedding"), options(opts) {
    const int64_t V = options.num_embeddings;
    if (V < 0 || options.embedding_dim < 0)
        fail<ValueError>("Embedding: num_embeddings and embedding_dim must be non-negative, got {} and {}", V,
                         options.embedding_dim);
    if (options.padding_idx != -1 && (options.padding_idx < 0 || options.padding_idx >= V))
        fail<ValueError>("Embedding: padding_idx {} out of range for vocabulary of {} (use -1 for none)",
                         options.padding_idx, V);
    weight = register_parameter("weight", core::Tensor::empty({V, options.embedding_dim}));
    init::normal_(weight, 0.0, 1.0, gen);
    // The padding row starts at zero; the lookup's backward never updates it,
    // so a <pad> token adds nothing to whatever the embedding feeds.
    if (options.padding_idx >= 0) core::fill_(weight.value().select(0, options.padding_idx), 0.0);
}

// y[..., :] = weight[ids[...], :]     ids (...) -> y (..., D)
Variable Embedding::forward(const core::Tensor& ids) {
    check(ids.defined(), "Embedding: the token ids are undefined");
    check(ids.dtype() == core::DType::int64, "Embedding: token ids must be int64, got {} (shape {})",
          core::dtype_name(ids.dtype()), ids.shape());
    // Check every id here, so the error names this layer and its vocabulary.
    const core::Tensor flat = ids.contiguous();
    const int64_t* id = flat.data<int64_t>();
    for (int64_t i = 0; i < flat.numel(); ++i)
        if (id[i] < 0 || id[i] >= options.num_embeddings)
            fail<IndexError>("Embedding: token id {} out of range for vocabulary of {}", id[i], options.num_embeddings);
    return autograd::embedding(weight, flat, options.padding_idx);
}

}  // namespace tformer::nn
