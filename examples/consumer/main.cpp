// Uses tformer from its installed CMake package: d2l's MultiHeadAttention
// (seed 000) on a random batch, a backward pass, and one gradient printed.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "core/version.hpp"
#include "nn/attention.hpp"

#include <iostream>

using namespace tformer;

int main() {
    std::cout << "tformer " << kVersion << "\n";
    core::Generator gen(0);
    nn::MultiHeadAttention attention(
        {.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2}, gen);
    const autograd::Variable X(core::randn({2, 4, 8}, gen));  // (B, T, D): self-attention over 4 steps
    const core::Tensor valid_lens = core::from_vector(std::vector<int64_t>{4, 2}, {2});  // (B)
    const autograd::Variable Y = attention(X, X, X, valid_lens);                         // (B, T, D)
    autograd::sum(autograd::mul(Y, Y)).backward();                                       // loss = Σ Y²
    for (const auto& [name, p] : attention.named_parameters())
        if (name == "W_o.weight") std::cout << "d loss / d " << name << " =\n" << p.grad() << "\n";
    return 0;
}
