/// \file
/// Attention pooling by kernel regression (seed 003, 注意力汇聚：查询和键的
/// 相互作用): regress y from x by weighting the training outputs y_i (values)
/// by how close the query x is to each training input x_i (keys).
///
/// ```
///   average_pooling   平均汇聚:        f(x) = 1/n Σ_i y_i
///   nadaraya_watson   非参数注意力汇聚: f(x) = Σ_i softmax(-(x - x_i)² / 2) y_i
///   NWKernelRegression 带参数注意力汇聚: f(x) = Σ_i softmax(-((x - x_i) w)² / 2) y_i, w learned
/// ```
///
/// The seed gives the formulas; the data and the training run are those of
/// the d2l section it follows (attention pooling: Nadaraya–Watson kernel
/// regression): 50 sorted training inputs uniform in [0, 5), targets
/// y = 2 sin(x) + x^0.8 + ε with ε ~ N(0, 0.5²), test inputs 0, 0.1, ..., 4.9,
/// and 5 epochs of SGD with lr 0.5 on the summed squared error, each training
/// input using the other 49 as its keys and values (make_pooling_data,
/// leave_one_out).
///
/// Letters: n queries, m key-value pairs per query.
#pragma once

#include "nn/module.hpp"

#include "core/random.hpp"

namespace tformer::nn {

/// f(x) = 1/m Σ_i y_i for every query: queries (n), values (m) -> (n).
/// The queries only set how many outputs there are.
Variable average_pooling(const Variable& queries, const Variable& values);

/// What a Nadaraya–Watson pooling returns.
struct PoolingOutput {
    Variable output;                 ///< (n): f(x) for each query
    core::Tensor attention_weights;  ///< (n, m): α(x, x_i), each row sums to 1
};

/// Non-parametric Nadaraya–Watson regression with a Gaussian kernel:
///   α(x, x_i) = softmax_i(-(x - x_i)² / 2),  f(x) = Σ_i α(x, x_i) y_i.
/// queries (n); keys and values of the same shape, (m) shared by every query
/// or (n, m) one row per query -> output (n).
PoolingOutput nadaraya_watson(const Variable& queries, const Variable& keys, const Variable& values);

/// Parametric Nadaraya–Watson regression (d2l's NWKernelRegression): the
/// distance is scaled by a learned w, α(x, x_i) = softmax_i(-((x - x_i) w)² / 2),
/// so training can make the kernel narrower (w larger) or wider.
class NWKernelRegression : public Module {
public:
    /// w ~ U(0, 1), like torch.rand((1,)); registered as parameter "w".
    explicit NWKernelRegression(core::Generator& gen = core::default_generator());

    /// queries (n), keys (n, m) (or (m) shared), values of keys' shape -> (n).
    Variable forward(const Variable& queries, const Variable& keys, const Variable& values);
    /// Calls forward(queries, keys, values).
    Variable operator()(const Variable& queries, const Variable& keys, const Variable& values) {
        return forward(queries, keys, values);
    }

    Variable w;  ///< (1)
    /// (n, m): the weights of the last forward, without a graph (for heatmaps).
    core::Tensor attention_weights;
};

/// The regression data of the d2l attention-pooling section, in float32.
struct PoolingData {
    core::Tensor x_train;  ///< (n_train) sorted, uniform in [0, 5)
    core::Tensor y_train;  ///< (n_train) f(x_train) + N(0, 0.5²) noise
    core::Tensor x_test;   ///< (50) 0, 0.1, ..., 4.9
    core::Tensor y_truth;  ///< (50) f(x_test), without noise
};

/// The true function, f(x) = 2 sin(x) + x^0.8.
double pooling_target(double x);

/// Draws the data from `gen` (the training inputs first, then the noise).
PoolingData make_pooling_data(int64_t n_train = 50, core::Generator& gen = core::default_generator());

/// x (n) -> (n, n-1) whose row i is x without element i: d2l's
/// X_tile[(1 - torch.eye(n)).bool()].reshape(n, -1), so a training input is
/// never its own key (it would get all the weight once w grows).
core::Tensor leave_one_out(const core::Tensor& x);

}  // namespace tformer::nn
