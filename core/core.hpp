/// \file
/// Everything in tformer::core with one include.
#pragma once

#include "core/check.hpp"
#include "core/elementwise.hpp"
#include "core/error.hpp"
#include "core/file.hpp"
#include "core/index.hpp"
#include "core/matmul.hpp"
#include "core/parallel.hpp"
#include "core/print.hpp"
#include "core/random.hpp"
#include "core/reduce.hpp"
#include "core/rowwise.hpp"
#include "core/tensor.hpp"

/// \namespace tformer
/// A tensor library with reverse-mode automatic differentiation and a
/// Transformer framework built on it, one library per namespace: core
/// (tensors and kernels), autograd (Variable and the graph), nn (layers),
/// optim (optimizers and schedules), tasks (data, training, decoding).
/// The errors every library throws (Error and its subclasses) and the
/// argument checks (check, ShapeCheck) live at this level.

/// \namespace tformer::core
/// Tensors and the kernels on them, without gradients: storage, shape and
/// strides, dtypes, elementwise, reduction, matrix and row-wise kernels
/// (BLAS and OpenMP underneath), the random generator, printing and files.
