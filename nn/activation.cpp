// Activations (seed 000 代码实现 → 前馈网络: nn.ReLU between the dense layers).
#include "nn/layers.hpp"

#include "autograd/elementwise.hpp"

namespace tformer::nn {

// y = max(x, 0)
Variable ReLU::forward(const Variable& x) { return autograd::relu(x); }

}  // namespace tformer::nn
