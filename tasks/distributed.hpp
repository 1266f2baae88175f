/// \file
/// Data-parallel training across processes and machines, over MPI.
///
/// Every process (a "rank") holds the whole model. Each global batch is cut
/// by rows into one share per rank; every rank computes the gradient of its
/// share, an all-reduce adds the shares up on every rank, and every rank then
/// applies the same optimizer step to the same gradient, so the models stay
/// identical (the scheme of Horovod, llm.c and PyTorch's
/// DistributedDataParallel).
///
/// ```
///   mpirun -np 2 build/release/apps/tformer train translate --threads 1
/// ```
///
/// All MPI calls live in distributed.cpp, as all BLAS calls live in
/// core/blas.cpp. In a build without MPI (TFORMER_MPI=OFF), or in a process
/// that mpirun did not start, the world is one rank: every collective hands
/// back its input, and training runs exactly as it does without this file.
///
/// Collectives (everything below marked so) must be called by every rank,
/// in the same order; a rank that skips one leaves the others waiting.
/// docs/distributed.md explains how to run on several machines.
#pragma once

#include "autograd/variable.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "optim/optimizer.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

/// Data-parallel training over MPI: the world, collectives, sharding, the gradient all-reduce.
namespace tformer::tasks::dist {

// ---- the world ----------------------------------------------------------------------------------

/// MPI for the lifetime of main(). It starts MPI only when an MPI launcher
/// (mpirun, mpiexec, srun) started this process, so a plain
/// `tformer train ...` never touches MPI. The destructor waits until every
/// rank got there (sleeping, not spinning, so ranks that are done leave the
/// cores to rank 0's evaluation) and ends MPI. One per process. A build
/// without MPI started as several ranks says so and exits with status 1.
class Session {
public:
    /// Starts MPI when a launcher started the process, with main()'s arguments.
    Session(int& argc, char**& argv);
    /// Waits for every rank, then ends MPI.
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
};

/// True when this build has MPI (TFORMER_MPI).
bool built_with_mpi();
/// This process's rank, 0 .. size() - 1 (0 without MPI).
int rank();
/// Ranks in the job (1 without MPI).
int size();
/// rank() == 0: the rank that prints, and writes checkpoints, pictures and the summary.
inline bool is_root() { return rank() == 0; }
/// Ranks on this machine (1 without MPI); they share its cores.
int local_size();
/// The MPI library's name and version, or "none".
std::string library_version();

/// How long a collective waits for the other ranks by default, in seconds.
/// Rank 0 works alone for a few seconds at most while the others wait
/// (the SentencePiece model, a checkpoint save): five minutes is far more.
inline constexpr double kDefaultTimeout = 300;

/// Every collective below waits at most `seconds` (0: without a limit) for
/// the other ranks; a rank that waits longer (another rank stopped, stuck,
/// or started with other settings) ends the job with a message naming the
/// collective, instead of leaving it hanging (`tformer train --mpi-timeout`).
/// The wait in ~Session for the ranks to finish is not limited: rank 0
/// evaluates alone for minutes at the end of a run.
void set_timeout(double seconds);

/// Sends this rank's stdout and stderr to /dev/null unless it is rank 0, so
/// that one rank speaks for the job; report_error() still reaches the terminal.
void quiet_other_ranks();

/// For main()'s catch: reports a failure and says how to end the process.
/// Alone (one rank) it prints "tformer: error: <message>" and returns 1.
/// When every rank is failing together (together(), check_same() and the
/// training loop's agreed checks), rank 0 prints it, every rank returns 1
/// and the job ends cleanly. A rank failing on its own prints the message
/// with its rank and stops every rank (MPI_Abort): waiting for the others
/// would hang, as they wait in a collective for this one.
int report_error(const std::string& message);

/// Marks the error about to be thrown as thrown on every rank at once (the
/// ranks decided it from the same reduced values), so report_error() ends
/// the job cleanly instead of aborting it.
void note_shared_failure();

// ---- collectives ----------------------------------------------------------------------------------

/// Collective: waits until every rank got here.
void barrier();
/// Collective: root's tensor, copied into every rank's `t` (same shape and
/// dtype on every rank; `t` must be contiguous).
void broadcast(const core::Tensor& t, int root = 0);
/// Collective: root's string on every rank (any length).
void broadcast(std::string& text, int root = 0);
/// Collective: root's numbers on every rank (the same count everywhere).
void broadcast(std::span<uint64_t> values, int root = 0);
/// Collective: every rank's `values` replaced by their element-wise sum over the ranks.
void all_reduce_sum(std::span<double> values);
/// Collective: the same for a contiguous float32, float64 or int64 tensor, in place.
void all_reduce_sum(const core::Tensor& t);

/// Collective: runs `work` on every rank; when it throws on one or more
/// ranks, it throws on every rank, so that none is left waiting in the
/// next collective: a rank that failed rethrows its own error, the others
/// an Error "rank k: <k's message>" naming the first rank that failed.
/// Put each stretch of per-rank work that may fail (reading data, checking
/// a config) in one call; `work` itself must not call collectives.
void together(const std::function<void()>& work);

/// Collective: throws Error on every rank unless every rank passed the same
/// `value` (a fingerprint of its data, its configuration, ...):
/// "<what> differs between ranks (rank k: ..., rank 0: ...)".
void check_same(uint64_t value, const std::string& what);

/// Collective: throws Error on every rank unless every rank has rank 0's
/// `settings` (name, value pairs: the flags a run was started with, the
/// data file's size and checksum), naming each one that differs and the two
/// values; a name one rank lacks counts as "(not given)":
///   "rank 1: the ranks were started with different settings: --vocab-size
///   is 200 on rank 1 but 300 on rank 0; ..."
/// Call it before the first collective that the settings change, so that
/// ranks that would call different collectives stop instead of hanging.
void check_same_settings(const std::vector<std::pair<std::string, std::string>>& settings);

/// A 64-bit FNV-1a fingerprint of bytes, to feed check_same(); chain calls
/// through `seed` to fingerprint several pieces.
uint64_t fingerprint(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ULL);
/// The fingerprint of a tensor's values (contiguous copy), shape and dtype.
uint64_t fingerprint(const core::Tensor& t, uint64_t seed = 0xcbf29ce484222325ULL);

/// Collective: rank 0's parameter values, copied into every rank's
/// parameters (packed into one buffer per dtype: one broadcast, not one per tensor).
void broadcast_parameters(const std::vector<autograd::Variable>& params);
/// Collective: rank 0's optimizer state (learning rate, step counts, every
/// slot such as Adam's moments) on every rank.
void broadcast_optimizer(optim::Optimizer& optimizer);
/// Collective: rank 0's generator state on every rank.
void broadcast(core::Generator::State& state);

// ---- splitting a batch -------------------------------------------------------------------------------

/// The rows [begin, end) of a global batch of `rows` rows that `rank` of
/// `size` trains on: contiguous blocks whose sizes differ by at most one,
/// in rank order, so that the shares put back together are the global
/// batch. A rank may get no row when the batch has fewer rows than there
/// are ranks.
struct RowRange {
    /// The first row of this rank's share.
    int64_t begin = 0, end = 0;  ///< One past its last row.
    /// Rows in the share (0 when the rank gets none).
    int64_t size() const { return end - begin; }
};
/// The share of `rank` of `size` ranks in a batch of `rows` rows (see RowRange).
RowRange shard_rows(int64_t rows, int rank, int size);

// ---- the gradient all-reduce ---------------------------------------------------------------------------

/// How GradientReducer groups and reduces the gradients.
struct ReducerOptions {
    /// Parameters are packed, last one first (the order backward finishes
    /// them in), into buckets of about this many bytes; each bucket is one
    /// all-reduce. A parameter larger than that gets a bucket of its own.
    int64_t bucket_bytes = 1 << 20;
    /// Start a bucket's all-reduce as soon as backward has finished all its
    /// gradients (a hook per parameter), while backward goes on with the
    /// earlier layers. false: everything is reduced after backward.
    bool overlap = true;
    /// false: each gradient becomes the sum over the ranks (right when every
    /// rank's loss is already divided by the global batch's size, as
    /// training does); true: the mean over the ranks.
    bool average = false;
    /// The defaults, changed by TFORMER_BUCKET_KB (bucket size in KiB) and
    /// TFORMER_OVERLAP (0 or 1) when set: knobs for measuring, not for users.
    static ReducerOptions from_environment();
};

/// What the reducer did, for benchmarks and the profile.
struct ReducerStats {
    int64_t steps = 0;          ///< finish() calls
    int64_t buckets = 0;        ///< buckets per step
    int64_t bytes = 0;          ///< gradient bytes reduced per step
    int64_t early_buckets = 0;  ///< buckets whose all-reduce started during backward, summed over the steps
    /// Time spent inside finish(): reducing what was not reduced during backward, and waiting.
    double finish_seconds = 0;
    double hook_seconds = 0;  ///< time spent in the hooks during backward (copies, starting and driving all-reduces)
};

/// The gradient all-reduce on one flat buffer per bucket. Build it once
/// before training, call finish() after every backward (before clipping and
/// the optimizer step):
///
/// ```
///   dist::GradientReducer reducer(optimizer.parameters());
///   loss.backward();            // with overlap, buckets are reduced as their gradients appear
///   reducer.finish();           // every grad() is now the sum over the ranks
///   optim::clip_grad_norm(...); optimizer.step();
/// ```
///
/// Collective: finish() on every rank the same number of times. Every
/// parameter must have the same dtype (float32 or float64). Gradients must
/// start each step empty (zero_grad()), as in training, and backward must
/// run at most once between two finish() calls. With one rank it copies the
/// gradients and changes nothing else.
class GradientReducer {
public:
    /// A reducer for `params` (every rank passes the same parameters in the same order).
    explicit GradientReducer(std::vector<autograd::Variable> params, ReducerOptions options = {});
    /// Ends the reducer; the hooks it left on the parameters then do nothing.
    ~GradientReducer();
    GradientReducer(const GradientReducer&) = delete;
    GradientReducer& operator=(const GradientReducer&) = delete;

    /// Reduces whatever was not reduced during backward, waits for every
    /// bucket, and sets every parameter's gradient to the sum over the ranks
    /// (or the mean). A parameter for which no rank has a gradient keeps
    /// none, so the optimizer skips it as it would in one process; a rank
    /// without a gradient for a parameter others have (it had no rows in
    /// this batch) adds zeros.
    void finish();

    /// Number of buckets the parameters were packed into.
    int64_t num_buckets() const;
    /// What it has done so far (see ReducerStats).
    const ReducerStats& stats() const;

private:
    struct State;
    std::shared_ptr<State> state_;  // the hooks hold it weakly: once the reducer is gone they do nothing
};

}  // namespace tformer::tasks::dist
