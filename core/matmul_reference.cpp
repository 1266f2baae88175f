// The plain triple loop that the tests hold core::matmul to. It shares no
// code with the fast path: operands are broadcast with expand(), copied
// contiguous in float64 and multiplied entry by entry, so a mistake in the
// stride or transpose handling of matmul.cpp cannot hide in both.
#include "core/matmul.hpp"

#include <vector>

namespace tformer::core::reference {

// out[..., i, j] = Σ_p a[..., i, p] · b[..., p, j], accumulated in double
Tensor matmul(const Tensor& a, const Tensor& b) {
    if (!a.defined() || !b.defined()) fail<ValueError>("reference::matmul: undefined operand");
    if (a.dtype() != b.dtype() || !is_floating(a.dtype()))
        fail<ValueError>("reference::matmul: dtypes {} and {} not supported", dtype_name(a.dtype()),
                         dtype_name(b.dtype()));
    if (a.dim() == 0 || b.dim() == 0)
        fail<ShapeError>("reference::matmul: 0-d operand, shapes {} and {}", shape_str(a.shape()),
                         shape_str(b.shape()));

    const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;  // (..., n, k)
    const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;  // (..., k, m)
    const int64_t n = a2.size(-2), k = a2.size(-1), m = b2.size(-1);
    if (b2.size(-2) != k)
        fail<ShapeError>("reference::matmul: shapes {} and {} cannot be multiplied", shape_str(a.shape()),
                         shape_str(b.shape()));

    Shape batch_a, batch_b;
    for (int d = 0; d + 2 < a2.dim(); ++d) batch_a.push_back(a2.shape()[d]);
    for (int d = 0; d + 2 < b2.dim(); ++d) batch_b.push_back(b2.shape()[d]);
    const Shape batch = broadcast_shapes(batch_a, batch_b, "reference::matmul");
    const int64_t batches = shape_numel(batch);

    Shape full_a = batch, full_b = batch;
    full_a.push_back(n);
    full_a.push_back(k);
    full_b.push_back(k);
    full_b.push_back(m);
    // materialised row-major float64 copies: (batch..., n, k) and (batch..., k, m)
    const std::vector<double> va = a2.expand(full_a).to_vector<double>();
    const std::vector<double> vb = b2.expand(full_b).to_vector<double>();

    std::vector<double> vout(static_cast<size_t>(batches * n * m), 0.0);  // (batch..., n, m)
    for (int64_t t = 0; t < batches; ++t)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < m; ++j) {
                double sum = 0.0;
                for (int64_t p = 0; p < k; ++p) sum += va[(t * n + i) * k + p] * vb[(t * k + p) * m + j];
                vout[(t * n + i) * m + j] = sum;
            }

    // drop the dimension a vector operand contributed
    Shape out_shape = batch;
    if (a.dim() > 1) out_shape.push_back(n);
    if (b.dim() > 1) out_shape.push_back(m);
    return from_vector(vout, out_shape).to(a.dtype());
}

}  // namespace tformer::core::reference
