/// \file
/// Basic layers: Linear, Embedding, Dropout, ReLU, LayerNorm, BatchNorm1d,
/// PositionalEncoding, Sequential and ModuleList. Names, constructor
/// arguments and forward signatures follow the documents (seed 000 first,
/// the PyTorch layers it uses); arguments come as an options struct whose
/// fields carry the documents' argument names:
/// ```
///   Linear dense({.in_features = 32, .out_features = 64});
///   Variable y = dense(x);   // (..., 32) -> (..., 64)
/// ```
///
/// Dimension letters in this file: B batch, T steps, D hidden, V vocabulary,
/// N and L BatchNorm's batch and length, C its channels.
///
/// One source file per layer: linear.cpp, embedding.cpp, dropout.cpp,
/// activation.cpp, normalization.cpp (LayerNorm, BatchNorm1d),
/// positional_encoding.cpp, containers.cpp.
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
    /// The constructor of Module: the type name.
    using Module::Module;
    /// y = f(x): the layer's computation.
    virtual Variable forward(const Variable& x) = 0;
    /// Calls forward(x), so a layer reads like a function: y = dense(x).
    Variable operator()(const Variable& x) { return forward(x); }
};

/// y = x Wᵀ + b: PyTorch's nn.Linear, as used in seed 000 (代码实现 → 多头注意力:
/// W_q, W_k, W_v, W_o; 代码实现 → 前馈网络: dense1, dense2) and seed 004 (编码器:
/// the FFN's nn.Linear(d_model, d_ff)). The weight is stored (out_features,
/// in_features) as in PyTorch, so state dicts map one to one.
/// Initialised like PyTorch: W, b ~ U(-1/√in_features, 1/√in_features).
class Linear : public UnaryModule {
public:
    /// The arguments of PyTorch's nn.Linear(in_features, out_features, bias).
    struct Options {
        int64_t in_features = 0;   ///< the size of x's last dimension
        int64_t out_features = 0;  ///< the size of y's last dimension
        bool bias = true;          ///< false: y = x Wᵀ, no bias
    };
    /// A layer with weights drawn from `gen` (see the class comment).
    explicit Linear(Options options, core::Generator& gen = core::default_generator());
    /// x (..., in_features) -> (..., out_features); any number of leading dims.
    Variable forward(const Variable& x) override;

    Options options;  ///< the arguments it was built with
    Variable weight;  ///< (out_features, in_features)
    Variable bias;    ///< (out_features), undefined without bias
};

/// Token ids -> vectors: PyTorch's nn.Embedding, as in seed 000 (代码实现 →
/// 编码器块, TransformerEncoder: nn.Embedding(vocab_size, num_hiddens)) and seed 002 (§1.2.1 单词
/// Embedding; §1.2.3 TokenEmbedding passes padding_idx=1). The padding_idx row
/// starts at zero and never receives a gradient, so it stays zero through
/// training. Other rows are initialised N(0, 1), as PyTorch.
class Embedding : public Module {
public:
    /// The arguments of nn.Embedding(num_embeddings, embedding_dim, padding_idx).
    struct Options {
        int64_t num_embeddings = 0;  ///< V
        int64_t embedding_dim = 0;   ///< D
        int64_t padding_idx = -1;    ///< -1: none
    };
    /// A table drawn from `gen` (N(0, 1), the padding_idx row zero).
    explicit Embedding(Options options, core::Generator& gen = core::default_generator());
    /// ids int64 (...) -> (..., embedding_dim); every id must lie in [0, V).
    Variable forward(const core::Tensor& ids);
    /// Calls forward(ids).
    Variable operator()(const core::Tensor& ids) { return forward(ids); }

    Options options;  ///< the arguments it was built with
    Variable weight;  ///< (num_embeddings, embedding_dim)
};

/// Inverted dropout (PyTorch's nn.Dropout; seed 000 代码实现 → 残差规范化 uses it
/// in AddNorm, seed 002 §1.2.3 after the embeddings): in training mode each
/// element is zeroed with probability p and the survivors are scaled by
/// 1/(1-p); in eval mode it is the identity. Masks come from `gen`, which
/// the layer keeps a pointer to: `gen` must outlive it (and every model that
/// contains it). Build models on a generator that lives as long as the model,
/// such as core::default_generator() or a member next to the model.
class Dropout : public UnaryModule {
public:
    /// The argument of nn.Dropout(p).
    struct Options {
        double p = 0.5;  ///< in [0, 1)
    };
    /// A dropout layer drawing its masks from `gen`, which must outlive it.
    explicit Dropout(Options options, core::Generator& gen = core::default_generator());
    /// x ⊙ mask / (1 - p) in training mode, x in eval mode; any shape.
    Variable forward(const Variable& x) override;
    /// The mask forward() would multiply a tensor of this shape by, with its
    /// 1/(1-p) scale, drawn from the same stream; undefined in eval mode or
    /// when p is 0. For fused kernels that apply the dropout themselves.
    core::Tensor keep_mask(const core::Shape& shape, core::DType dtype);

    Options options;  ///< the arguments it was built with

private:
    core::Generator* gen_;
};

/// y = max(x, 0): PyTorch's nn.ReLU, between the two dense layers of seed 000's
/// PositionWiseFFN (代码实现 → 前馈网络) and seed 004's FFN (编码器).
class ReLU : public UnaryModule {
public:
    /// The layer (no parameters).
    ReLU() : UnaryModule("ReLU") {}
    /// y = max(x, 0), any shape.
    Variable forward(const Variable& x) override;
};

/// Layer normalisation over the last dimension (seed 000 代码实现 → 层归一化 and
/// 残差规范化; seed 002 §3.1 Add & Norm; seed 004 编码器/完整代码, class LayerNorm).
/// Two formulas:
///   standard (PyTorch's nn.LayerNorm, seed 000):
///       y = (x - mean) / √(var + eps) · weight + bias     biased var (÷D), eps 1e-5
///     Seed 002 writes this by hand with eps = 1e-12, but with torch's x.var(),
///     which is UNBIASED (÷(D-1)); its outputs are then smaller by √((D-1)/D),
///     which the note's loose allclose(rtol=0.1, atol=0.01) hides. The library
///     follows nn.LayerNorm, the layer the note checks itself against.
///   unbiased_std (seed 004, the Annotated Transformer):
///       y = weight · (x - mean) / (std + eps) + bias      std = √(Σ(x-mean)²/(D-1)), eps 1e-6
///     eps is added to the standard deviation, not to the variance: a
///     different function, not a rounding of the first.
/// The standard one runs the fused autograd::layer_norm (one node); the
/// unbiased_std one is composed from primitive ops (mean, var, sqrt, add,
/// div, mul) exactly as seed 004 writes it.
class LayerNorm : public UnaryModule {
public:
    /// The arguments of nn.LayerNorm(normalized_shape, eps, elementwise_affine), and seed 004's variant.
    struct Options {
        int64_t normalized_shape = 0;    ///< D, the size of the last dimension
        double eps = 1e-5;               ///< added to the variance (to the standard deviation with unbiased_std)
        bool elementwise_affine = true;  ///< false: no weight and bias (y is the normalised x)
        bool unbiased_std = false;       ///< seed 004's variant (needs D >= 2)
    };
    /// A layer with weight 1 and bias 0 (none without elementwise_affine).
    explicit LayerNorm(Options options);
    /// x (..., D) -> (..., D)
    Variable forward(const Variable& x) override;

    Options options;  ///< the arguments it was built with
    Variable weight;  ///< (D) ones; seed 002 calls it gamma, seed 004 a_2
    Variable bias;    ///< (D) zeros; seed 002 calls it beta, seed 004 b_2
};

/// Batch normalisation over the batch (and length) dimension: PyTorch's
/// nn.BatchNorm1d, for seed 000's LayerNorm-versus-BatchNorm comparison
/// (代码实现 → 层归一化: "batch_norm对于整个特征归一化"). For each channel c:
///   training:  y = (x - mean_c) / √(var_c + eps) · weight_c + bias_c, with the
///              batch's mean and biased variance over N (and L); then
///              running_mean ← (1 - momentum) · running_mean + momentum · mean_c
///              running_var  ← (1 - momentum) · running_var  + momentum · var_c · n/(n-1)
///              (the unbiased variance, as PyTorch), num_batches_tracked += 1
///   eval:      the same normalisation with running_mean and running_var.
/// The running statistics are buffers named as in PyTorch (running_mean,
/// running_var, num_batches_tracked — an int64 0-d tensor), so they are in
/// the state dict.
class BatchNorm1d : public UnaryModule {
public:
    /// The arguments of nn.BatchNorm1d(num_features, eps, momentum, affine).
    struct Options {
        int64_t num_features = 0;  ///< C
        double eps = 1e-5;         ///< added to the variance
        double momentum = 0.1;     ///< weight of the new batch in the running statistics
        bool affine = true;        ///< false: no weight and bias
    };
    /// A layer with weight 1, bias 0, running_mean 0 and running_var 1.
    explicit BatchNorm1d(Options options);
    /// x (N, C) or (N, C, L) -> same shape
    Variable forward(const Variable& x) override;

    Options options;  ///< the arguments it was built with
    Variable weight;  ///< (C) ones, undefined without affine
    Variable bias;    ///< (C) zeros, undefined without affine
};

/// Sinusoidal positional encoding (seed 000 代码实现 → 编码器块 uses d2l's
/// PositionalEncoding; seed 002 §1.2.2 位置 Embedding gives the formula, §1.2.3
/// the table; seed 004 builds the same table as `pe`):
///   P[0, pos, 2i] = sin(pos / 10000^(2i/d)),  P[0, pos, 2i+1] = cos(pos / 10000^(2i/d))
/// forward adds P to X (a constant: no gradient reaches P) and applies
/// dropout. The table is a plain member, not in the state dict, as in d2l
/// where P is an attribute, not a buffer. An odd d gets its last column from
/// sin only (d2l's code would fail there).
class PositionalEncoding : public Module {
public:
    /// The arguments of d2l's PositionalEncoding(num_hiddens, dropout, max_len).
    struct Options {
        int64_t num_hiddens = 0;  ///< d
        double dropout = 0.0;     ///< dropout probability after the addition
        int64_t max_len = 1000;   ///< the longest sequence the table covers
    };
    /// Builds the table P; the dropout draws from `gen`, which must outlive the layer.
    explicit PositionalEncoding(Options options, core::Generator& gen = core::default_generator());
    /// X (B, T, D) -> dropout(X + P[:, start : start + T, :]); `start` is the position
    /// of X's first step (non-zero when decoding one token at a time).
    Variable forward(const Variable& X, int64_t start = 0);
    /// Calls forward(X, start).
    Variable operator()(const Variable& X, int64_t start = 0) { return forward(X, start); }
    /// forward(embedding(ids) · scale, start) as one op
    /// (autograd::embedding_positional): the same numbers, bit for bit, the
    /// same dropout draws, one graph node instead of four. ids (B, T) -> (B, T, D).
    Variable forward_embedded(const Embedding& embedding, const core::Tensor& ids, double scale, int64_t start = 0);

    Options options;  ///< the arguments it was built with
    core::Tensor P;   ///< (1, max_len, num_hiddens), float32 (converted to X's dtype on use)

private:
    std::shared_ptr<Dropout> dropout_;  ///< registered as the child "dropout", as in d2l
};

/// Unary modules applied in order (PyTorch's nn.Sequential: seed 004 编码器 builds its
/// FFN as Sequential(Linear, ReLU, Linear); seed 000's `blks`). Children are named
/// "0", "1", ... by position unless given a name. An empty Sequential is the identity.
class Sequential : public UnaryModule {
public:
    /// An empty Sequential (the identity).
    Sequential() : UnaryModule("Sequential") {}
    /// Appends `module` under the name of its position ("0", "1", ...).
    void push_back(std::shared_ptr<UnaryModule> module);
    /// Appends `module` under `name` (d2l's add_module("block0", ...)).
    void push_back(const std::string& name, std::shared_ptr<UnaryModule> module);
    /// Each module's forward in turn: y = m_n(... m_1(m_0(x))).
    Variable forward(const Variable& x) override;
    /// Number of modules.
    size_t size() const { return modules_.size(); }
    /// The i-th module; IndexError when i >= size().
    UnaryModule& operator[](size_t i);

private:
    std::vector<std::shared_ptr<UnaryModule>> modules_;
};

/// An indexable list of child modules of one type (PyTorch's nn.ModuleList:
/// seed 002 §3.3 `layers`, seed 004's encoders, decoders and layer_norm lists;
/// seed 000's `blks`, whose children d2l names "block0", "block1", ...).
template <class M>
class ModuleList : public Module {
public:
    /// An empty list.
    ModuleList() : Module("ModuleList") {}
    /// Appends `module` under the name of its position ("0", "1", ...), as PyTorch.
    void push_back(std::shared_ptr<M> module) { push_back(std::to_string(items_.size()), std::move(module)); }
    /// Appends `module` under `name`.
    void push_back(const std::string& name, std::shared_ptr<M> module) {
        items_.push_back(register_module(name, std::move(module)));
    }
    /// The i-th module; IndexError when i >= size().
    M& operator[](size_t i) { return *item(i); }
    /// The i-th module; IndexError when i >= size().
    const M& operator[](size_t i) const { return *item(i); }
    /// Number of modules.
    size_t size() const { return items_.size(); }
    /// Iterator over the modules (shared pointers), in order.
    auto begin() { return items_.begin(); }
    /// Iterator past the last module.
    auto end() { return items_.end(); }

private:
    const std::shared_ptr<M>& item(size_t i) const {
        if (i >= items_.size()) fail<IndexError>("ModuleList: index {} out of range for {} modules", i, items_.size());
        return items_[i];
    }

    std::vector<std::shared_ptr<M>> items_;
};

}  // namespace tformer::nn
