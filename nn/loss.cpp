#include "nn/loss.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

namespace tformer::nn {

core::Tensor sequence_mask(const core::Tensor& valid_len, int64_t T, core::DType dtype) {
    if (valid_len.dim() != 1)
        fail<ShapeError>("sequence_mask: valid_len of shape {} must be 1-D (batch)", core::shape_str(valid_len.shape()));
    const std::vector<int64_t> lens = valid_len.to_vector<int64_t>();
    const int64_t B = static_cast<int64_t>(lens.size());
    core::Tensor mask = core::zeros({B, T}, dtype);
    for (int64_t b = 0; b < B; ++b) {
        if (lens[b] < 0 || lens[b] > T)
            fail<ValueError>("sequence_mask: valid length {} of row {} not in [0, {}]", lens[b], b, T);
        for (int64_t t = 0; t < lens[b]; ++t) mask.set({b, t}, 1.0);
    }
    return mask;
}

Variable masked_softmax_ce_loss(const Variable& pred, const core::Tensor& label, const core::Tensor& valid_len,
                                double label_smoothing) {
    if (pred.dim() != 3 || label.dim() != 2 || pred.size(0) != label.size(0) || pred.size(1) != label.size(1))
        fail<ShapeError>("MaskedSoftmaxCELoss: pred of shape {} and label of shape {} must be (B, T, V) and (B, T)",
                         core::shape_str(pred.shape()), core::shape_str(label.shape()));
    if (valid_len.dim() != 1 || valid_len.size(0) != pred.size(0))
        fail<ShapeError>("MaskedSoftmaxCELoss: valid_len of shape {} must be (B) = ({})",
                         core::shape_str(valid_len.shape()), pred.size(0));
    const int64_t T = pred.size(1);
    // per-token cross-entropy (B, T), then zero beyond each valid length
    Variable unweighted = autograd::cross_entropy(
        pred, label, {.label_smoothing = label_smoothing, .reduction = autograd::Reduction::none});
    Variable weighted = autograd::mul(unweighted, Variable(sequence_mask(valid_len, T, pred.dtype())));
    return autograd::mean(weighted, {1});  // (B): averaged over all T steps, as d2l
}

}  // namespace tformer::nn
