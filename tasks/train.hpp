/// \file
/// Training a sequence-to-sequence Transformer: the copy task of seed 004 and
/// the English→French translation of seed 000, with one loop for both:
/// forward, d2l's masked softmax cross-entropy, backward, gradient clipping,
/// Adam, a learning-rate schedule, a progress line, loss.csv, checkpoints
/// every N steps and an exact resume.
#pragma once

#include "core/random.hpp"
#include "core/tensor.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/plot.hpp"
#include "tasks/seq2seq.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tformer::tasks {

/// One training batch in d2l's framing (train_seq2seq):
///   enc_X (B, S) source ids, enc_valid (B)
///   dec_in (B, T) decoder input (the target shifted right behind `<bos>`)
///   label (B, T) what the decoder must predict, label_valid (B)
struct Batch {
    /// The tensors above: enc_X (B, S) and dec_in, label (B, T) int64 ids; enc_valid, label_valid (B) lengths.
    /// @{
    core::Tensor enc_X, enc_valid, dec_in, label, label_valid;
    /// @}
};

/// The decoder's output layer and cross-entropy in one op
/// (autograd::linear_cross_entropy, the (B T, V) logits never kept):
/// Σ over real target positions of row_weight · CE(dense(H_bt), label_bt).
/// row_weight 1/tokens is the token mean; 1/T is d2l's masked loss summed
/// over the batch.
autograd::Variable fused_output_loss(nn::EncoderDecoder& model, const Batch& batch, double row_weight,
                                     double label_smoothing);

/// Seed 004's data_gen for the copy task: `batch` random sequences of length
/// `length` over symbols 1..vocab-1 whose first symbol is 1 (the start
/// symbol); the source is the sequence, the decoder sees it without its last
/// symbol and must predict it without its first (the Annotated Transformer's
/// Batch with shifted targets).
Batch copy_batch(int64_t batch, int64_t length, int64_t vocab, core::Generator& gen);

/// d2l's batches of a translation split: rows `rows` of the split, with the
/// decoder input [`<bos>`, Y[:, :-1]].
Batch translation_batch(const NmtSplit& split, const std::vector<int64_t>& rows, int64_t bos);

/// Data-parallel training (tasks/distributed.hpp): the rows of a global
/// batch that `rank` of `size` trains on (dist::shard_rows: contiguous, in
/// rank order), padding kept as the global batch has it. The same cut for
/// every batch source: length buckets, d2l's fixed batches, the copy task.
Batch shard_batch(const Batch& global, int rank, int size);

/// The settings of a training run (the tformer train options).
struct TrainOptions {
    /// Passes over the data (copy task: batches_per_epoch fresh batches each).
    int64_t epochs = 10;
    int64_t total_steps = 0;  ///< > 0: train this many steps (the schedule's length) instead of epochs × batches
    /// Sequences per batch, for the sources that batch by count (the copy task, d2l's fixed batches).
    int64_t batch_size = 64;
    int64_t batches_per_epoch = 0;  ///< copy task: fresh batches per epoch (translation: the data decides)
    /// The learning rate (the peak rate with a schedule).
    double lr = 0.005;
    /// Adam's β2, the decay rate of its average of squared gradients (β1 stays 0.9).
    double adam_beta2 = 0.999;
    std::string schedule = "constant";  ///< constant | noam | cosine
    int64_t warmup = 0;                 ///< warm-up steps (noam, cosine)
    double clip = 1.0;                  ///< gradient-norm clip (d2l: 1); 0 turns it off
    /// ε of the cross-entropy's label smoothing (0: none).
    double label_smoothing = 0.0;
    /// The objective of a step: false, d2l's Σ_b mean_t (the sum over the
    /// batch of each sequence's loss averaged over all T steps, padding
    /// included); true, the mean over the batch's real tokens, which does
    /// not depend on how much padding or how many sentences a batch has
    /// (length-bucketed batches vary in both). The reported loss follows:
    /// d2l's Σ loss / Σ tokens, or the cross-entropy per token.
    bool token_mean = false;
    /// With token_mean: compute decoder.dense and the loss in one fused op
    /// (autograd::linear_cross_entropy), never storing the (B, T, V) logits.
    /// The same loss and gradients up to rounding.
    bool fused_loss = false;
    /// The run's seed; in data-parallel runs each rank's dropout masks at each step are drawn from it.
    uint64_t seed = 0;
    std::string out_dir;           ///< where the checkpoint, loss.csv and pictures go
    int64_t checkpoint_every = 0;  ///< also save every N steps (0: only at the end)
    bool resume = false;           ///< continue from out_dir/checkpoint.safetensors
    int64_t stop_after_steps = 0;  ///< stop early after this many steps in total (tests)
    /// > 1: the final weights are the mean of this many snapshots, taken
    /// every 5% of the steps at the end of training (the last one being the
    /// final weights): checkpoint averaging (Vaswani et al. §6.1; Marian's
    /// and fairseq's average-checkpoints). The optimizer state stays the last step's.
    int64_t average = 0;
    bool quiet = false;  ///< no progress output
    /// Print a per-op table of where the time went (autograd/profiler.hpp)
    /// and write it to `<out_dir>/profile.txt`; also on with TFORMER_PROFILE=1.
    bool profile = false;
    /// Anomaly mode for the whole run: the first op whose forward output or
    /// backward gradient holds NaN (Inf for gradients) is named in the error.
    bool detect_anomaly = false;
    PictureFormat plot_format = PictureFormat::png;  ///< loss.png or loss.svg
    std::map<std::string, std::string> extra = {};   ///< written into the checkpoint metadata
};

/// What training reports back.
struct TrainResult {
    /// d2l's figure per epoch: Σ loss / Σ valid tokens; a resumed run's
    /// epochs before the resume come from its checkpoint
    std::vector<double> epoch_loss;
    /// the same per step, from step 1 (a resumed run's earlier steps from
    /// its checkpoint; with ranks, rank 0's)
    std::vector<double> step_loss;
    double final_loss = 0;  ///< the last epoch's loss (the part trained, if the run ended inside it)
    /// Wall-clock seconds of the run.
    double seconds = 0;
    /// Target tokens trained per second (by this process, since it started).
    double tokens_per_second = 0;
    /// Optimizer steps done in all (a resumed run counts the steps before it).
    int64_t steps = 0;
    int64_t averaged = 0;    ///< snapshots averaged into the final weights (0: none)
    int interrupted = 0;     ///< SIGINT or SIGTERM ended the run early (the checkpoint is saved), else 0
    std::string checkpoint;  ///< path of the final checkpoint
};

/// Where batches come from: a function of (epoch, batch index) -> batch,
/// and how many batches an epoch has. Deterministic in (epoch, index), so a
/// resumed run sees exactly the batches an uninterrupted one would.
struct BatchSource {
    /// Batches in one epoch.
    int64_t batches_per_epoch = 0;
    /// The batch at (epoch, index), the same every time it is asked for.
    std::function<Batch(int64_t epoch, int64_t index)> get;
};

/// A BatchSource over a translation split: each epoch a fresh seeded shuffle.
BatchSource translation_source(const NmtSplit& split, int64_t batch_size, int64_t bos, uint64_t seed);
/// A BatchSource of fresh copy-task batches, seeded by (seed, epoch, index).
BatchSource copy_source(int64_t batch_size, int64_t length, int64_t vocab, int64_t batches_per_epoch, uint64_t seed);

/// Where a run writes its checkpoint: `out_dir`/checkpoint.safetensors.
std::string checkpoint_path(const std::string& out_dir);

/// A --resume against its checkpoint before the data is read and the
/// vocabulary trained: the model (all but its vocabularies' sizes, which the
/// data decides), the data settings (vocabulary size, batches, sample, seed,
/// ...) and the update settings, so that a resume train() would refuse is
/// refused at once. `total_steps` 0: not known yet (train() compares the
/// run's length). Nothing to compare without a checkpoint: train() says so.
void check_resume_settings(const TrainOptions& options, const ModelConfig& planned, int64_t total_steps);

/// The training loop. `gen` is the generator the model's dropout layers draw
/// from (the one build_model was given); its state is saved in checkpoints.
/// `info` carries the config and vocabularies written into checkpoints.
TrainResult train(nn::EncoderDecoder& model, core::Generator& gen, const BatchSource& source,
                  const TrainOptions& options, CheckpointInfo info);

/// The loss curve, against epochs: the per-epoch means of loss.csv as a line
/// with points and, when given, the loss of every step (step_loss[i] is step
/// first_step + i + 1 of steps_per_epoch per epoch) as a thin light line
/// behind them, with a running mean over them when there are fewer than five
/// epochs; a logarithmic y axis when the loss falls over more than a factor 20.
LinePlot loss_plot(const std::vector<double>& epoch_loss, const std::string& title,
                   const std::vector<double>& step_loss = {}, int64_t first_step = 0, int64_t steps_per_epoch = 1,
                   const std::string& ylabel = "loss (d2l: sum of losses / tokens)");

/// Writes loss_plot(...) at `path` (.png or .svg).
void plot_loss(const std::string& path, const std::vector<double>& epoch_loss, const std::string& title,
               const std::vector<double>& step_loss = {}, int64_t first_step = 0, int64_t steps_per_epoch = 1,
               const std::string& ylabel = "loss (d2l: sum of losses / tokens)");

/// One picture of attention weights and the name it is written under.
struct AttentionPicture {
    std::string name;  ///< encoder, decoder-self or decoder-cross
    Heatmaps maps;     ///< the attention weights, one heatmap per block and head
};

/// d2l's show_heatmaps for one translated (or copied) sentence, the data of
/// each picture: encoder self-attention per block and head ("encoder"), and
/// when the decoding kept its attention, the decoder's self-attention and
/// encoder–decoder attention of the last block per head ("decoder-self",
/// "decoder-cross"), one row per generated token.
std::vector<AttentionPicture> attention_heatmaps(nn::EncoderDecoder& model, const Translation& t);

/// Writes attention_heatmaps(model, t) as `<dir>/<prefix>-<name>.png` (or
/// .svg) and returns the paths.
std::vector<std::string> plot_attention(const std::string& dir, const std::string& prefix, nn::EncoderDecoder& model,
                                        const Translation& t, PictureFormat format = PictureFormat::png);

}  // namespace tformer::tasks
