// Basic layers: Linear, Embedding, Dropout, ReLU, LayerNorm, BatchNorm1d,
// PositionalEncoding, Sequential and ModuleList. Names, constructor
// arguments and forward signatures follow the documents (seed 000 first,
// the PyTorch layers it uses); arguments come as an options struct whose
// fields carry the documents' argument names:
//   Linear dense({.in_features = 32, .out_features = 64});
//   Variable y = dense(x);   // (..., 32) -> (..., 64)
#pragma once

#include "nn/module.hpp"

#include "core/random.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tformer::nn {

/// A module with one input and one output (what Sequential chains).
class UnaryModule : public Module {
public:
    using Module::Module;
    virtual Variable forward(const Variable& x) = 0;
    Variable operator()(const Variable& x) { return forward(x); }
};

/// y = x Wᵀ + b (seed 000's nn.Linear; weight stored (out_features, in_features) as in PyTorch).
/// Initialised like PyTorch: W, b ~ U(-1/√in, 1/√in).
class Linear : public UnaryModule {
public:
    struct Options {
        int64_t in_features = 0;
        int64_t out_features = 0;
        bool bias = true;
    };
    explicit Linear(Options options, core::Generator& gen = core::default_generator());
    /// x (..., in_features) -> (..., out_features)
    Variable forward(const Variable& x) override;

    Options options;
    Variable weight;  ///< (out_features, in_features)
    Variable bias;    ///< (out_features), undefined without bias
};

/// Token ids -> vectors (seed 000's nn.Embedding; seed 002 adds padding_idx,
/// whose row starts at zero and never receives a gradient). Initialised N(0, 1).
class Embedding : public Module {
public:
    struct Options {
        int64_t num_embeddings = 0;
        int64_t embedding_dim = 0;
        int64_t padding_idx = -1;  ///< -1: none
    };
    explicit Embedding(Options options, core::Generator& gen = core::default_generator());
    /// ids int64 (...) -> (..., embedding_dim)
    Variable forward(const core::Tensor& ids);
    Variable operator()(const core::Tensor& ids) { return forward(ids); }

    Options options;
    Variable weight;  ///< (num_embeddings, embedding_dim)
};

/// Inverted dropout, active only in training mode.
class Dropout : public UnaryModule {
public:
    struct Options {
        double p = 0.5;
    };
    explicit Dropout(Options options, core::Generator& gen = core::default_generator());
    Variable forward(const Variable& x) override;

    Options options;

private:
    core::Generator* gen_;
};

/// y = max(x, 0).
class ReLU : public UnaryModule {
public:
    ReLU() : UnaryModule("ReLU") {}
    Variable forward(const Variable& x) override;
};

/// Layer normalisation over the last dimension.
///   standard (seed 000, PyTorch):  (x - mean) / √(var + eps) · weight + bias, biased var
///   seed 002 uses the same formula with eps = 1e-12
///   seed 004 (Annotated Transformer): weight · (x - mean) / (std + eps) + bias with the
///   UNBIASED std and eps = 1e-6 — a different formula, selected by unbiased_std.
class LayerNorm : public UnaryModule {
public:
    struct Options {
        int64_t normalized_shape = 0;  ///< D, the size of the last dimension
        double eps = 1e-5;
        bool elementwise_affine = true;
        bool unbiased_std = false;  ///< seed 004's variant
    };
    explicit LayerNorm(Options options);
    /// x (..., D) -> (..., D)
    Variable forward(const Variable& x) override;

    Options options;
    Variable weight;  ///< (D) ones
    Variable bias;    ///< (D) zeros
};

/// Batch normalisation over the batch (and length) dimension, for seed 000's
/// LayerNorm-versus-BatchNorm comparison. Training mode normalises with the
/// batch statistics (biased variance) and updates running_mean/running_var
/// (with the unbiased variance, as PyTorch); eval mode uses the running ones.
class BatchNorm1d : public UnaryModule {
public:
    struct Options {
        int64_t num_features = 0;
        double eps = 1e-5;
        double momentum = 0.1;
        bool affine = true;
    };
    explicit BatchNorm1d(Options options);
    /// x (N, C) or (N, C, L) -> same shape
    Variable forward(const Variable& x) override;

    Options options;
    Variable weight;  ///< (C)
    Variable bias;    ///< (C)
};

/// Sinusoidal positional encoding (seed 000 / d2l, seed 002, seed 004):
///   P[pos, 2i] = sin(pos / 10000^(2i/d)),  P[pos, 2i+1] = cos(pos / 10000^(2i/d))
/// forward adds P to X and applies dropout. The table is a plain member (not in
/// the state dict), as in d2l where P is an attribute, not a buffer.
class PositionalEncoding : public Module {
public:
    struct Options {
        int64_t num_hiddens = 0;
        double dropout = 0.0;
        int64_t max_len = 1000;
    };
    explicit PositionalEncoding(Options options, core::Generator& gen = core::default_generator());
    /// X (B, T, D) -> dropout(X + P[start : start + T]); `start` is the position of
    /// X's first step (non-zero when decoding one token at a time).
    Variable forward(const Variable& X, int64_t start = 0);
    Variable operator()(const Variable& X, int64_t start = 0) { return forward(X, start); }

    Options options;
    core::Tensor P;  ///< (1, max_len, num_hiddens)

private:
    Dropout dropout_;
};

/// Unary modules applied in order; children are named "0", "1", ... unless named.
class Sequential : public UnaryModule {
public:
    Sequential() : UnaryModule("Sequential") {}
    void push_back(std::shared_ptr<UnaryModule> module);
    void push_back(const std::string& name, std::shared_ptr<UnaryModule> module);
    Variable forward(const Variable& x) override;
    size_t size() const { return modules_.size(); }

private:
    std::vector<std::shared_ptr<UnaryModule>> modules_;
};

/// An indexable list of child modules of one type (seed 000's `blks`, whose
/// children d2l names "block0", "block1", ...).
template <class M>
class ModuleList : public Module {
public:
    ModuleList() : Module("ModuleList") {}
    void push_back(const std::string& name, std::shared_ptr<M> module) {
        items_.push_back(register_module(name, std::move(module)));
    }
    M& operator[](size_t i) { return *items_.at(i); }
    const M& operator[](size_t i) const { return *items_.at(i); }
    size_t size() const { return items_.size(); }
    auto begin() { return items_.begin(); }
    auto end() { return items_.end(); }

private:
    std::vector<std::shared_ptr<M>> items_;
};

}  // namespace tformer::nn
