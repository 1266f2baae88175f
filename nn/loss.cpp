#include "nn/loss.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

namespace tformer::nn {

core::Tensor sequence_mask(const core::Tensor& valid_len, int64_t T, core::DType dtype) {
    ShapeCheck("sequence_mask").arg("valid_len", valid_len, "B");
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
    const ShapeCheck dims = ShapeCheck("MaskedSoftmaxCELoss")
                                .arg("pred", pred, "B T V")
                                .arg("label", label, "B T")
                                .arg("valid_len", valid_len, "B");
    const int64_t T = dims["T"];
    // per-token cross-entropy (B, T), then zero beyond each valid length
    Variable unweighted = autograd::cross_entropy(
        pred, label, {.label_smoothing = label_smoothing, .reduction = autograd::Reduction::none});
    Variable weighted = autograd::mul(unweighted, Variable(sequence_mask(valid_len, T, pred.dtype())));
    return autograd::mean(weighted, {1});  // (B): averaged over all T steps, as d2l
}

}  // namespace tformer::nn
