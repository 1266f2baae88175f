/// \file
/// Parameter initialisation, in place, on the seeded generator.
///
/// Each function overwrites the storage of the Variable's value (every handle
/// to the parameter, and any optimizer holding it, sees the new numbers; no
/// graph is recorded). Random numbers are drawn in the parameter's dtype from
/// `gen`, so the same seed gives the same weights.
///
/// Fans follow PyTorch: for a weight of shape (out, in, k...) fan_in = in·Πk
/// and fan_out = out·Πk; a weight with fewer than 2 dimensions has no fans
/// (ValueError), as in torch.nn.init.
#pragma once

#include "autograd/variable.hpp"
#include "core/random.hpp"

/// Parameter initialisers, in place, as torch.nn.init (see the file comment).
namespace tformer::nn::init {

/// U(-a, a) with a = gain · √(6 / (fan_in + fan_out)) (Glorot & Bengio), the
/// init d2l's train_seq2seq applies to every Linear weight.
void xavier_uniform_(const autograd::Variable& w, core::Generator& gen = core::default_generator(), double gain = 1.0);
/// U(low, high).
void uniform_(const autograd::Variable& w, double low, double high, core::Generator& gen = core::default_generator());
/// N(mean, std²).
void normal_(const autograd::Variable& w, double mean, double std, core::Generator& gen = core::default_generator());
/// All zeros.
void zeros_(const autograd::Variable& w);
/// All ones.
void ones_(const autograd::Variable& w);
/// All `value`.
void constant_(const autograd::Variable& w, double value);
/// PyTorch's default nn.Linear init: U(-1/√fan_in, 1/√fan_in) (kaiming_uniform
/// with a = √5 gives exactly this bound); used for the weight and the bias.
/// fan_in 0 gives the bound 0, as PyTorch.
void linear_default_(const autograd::Variable& w, int64_t fan_in, core::Generator& gen = core::default_generator());

}  // namespace tformer::nn::init
