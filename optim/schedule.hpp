/// \file
/// Learning-rate schedules: the rate as a function of the step.
///
/// A schedule is a pure function lr_at(step) of a 1-based step number (0 is
/// treated as 1); apply() writes it into an optimizer. tasks::train gives its
/// k-th update lr_at(k), the paper's step_num:
/// ```
///   schedule.apply(opt, opt.steps() + 1);
///   opt.step();
/// ```
/// Calling apply(opt, opt.steps()) instead reproduces the Annotated
/// Transformer's LambdaLR exactly: its first update uses rate(0), which
/// rate() treats as step 1, so its first two updates share one rate and the
/// whole curve runs one step behind.
#pragma once

#include "optim/optimizer.hpp"

#include <cstdint>

namespace tformer::optim {

/// A learning-rate schedule: lr_at(step), and apply() to set it on an optimizer.
class LRSchedule {
public:
    /// Virtual: schedules are used through a pointer to LRSchedule.
    virtual ~LRSchedule() = default;
    /// The learning rate for the update that follows `step` finished updates.
    virtual double lr_at(int64_t step) const = 0;
    /// opt.set_lr(lr_at(step)).
    void apply(Optimizer& opt, int64_t step) const { opt.set_lr(lr_at(step)); }
};

/// The same rate at every step.
class ConstantLR : public LRSchedule {
public:
    /// Throws ValueError unless lr is finite and >= 0.
    explicit ConstantLR(double lr);
    /// lr at every step.
    double lr_at(int64_t step) const override;

private:
    double lr_;
};

/// Options of NoamLR (the Annotated Transformer's rate(step, model_size, factor, warmup)).
struct NoamOptions {
    int64_t d_model = 512;  ///< the model width; the peak rate scales as d_model^-0.5
    int64_t warmup = 4000;  ///< steps of linear warm-up; the rate peaks at step = warmup
    double factor = 1.0;    ///< overall multiplier
};

/// "Attention Is All You Need" §5.3, as the Annotated Transformer writes it:
///   lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
/// rising linearly for `warmup` steps, then falling as 1/√step; step 0 counts as 1.
class NoamLR : public LRSchedule {
public:
    /// Throws ValueError unless d_model > 0, warmup > 0 and factor is finite and >= 0.
    explicit NoamLR(NoamOptions options);
    /// factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), step 0 counted as 1.
    double lr_at(int64_t step) const override;
    /// The options it was built with.
    const NoamOptions& options() const { return options_; }

private:
    NoamOptions options_;
};

/// Options of CosineLR.
struct CosineOptions {
    double base_lr = 1e-3;       ///< the peak rate, reached at step = warmup_steps
    int64_t warmup_steps = 0;    ///< steps of linear warm-up from base_lr/warmup_steps
    int64_t total_steps = 1000;  ///< the rate reaches min_lr here and stays there
    double min_lr = 0;           ///< the floor of the cosine
};

/// Linear warm-up, then half a cosine from base_lr down to min_lr:
///   s ≤ warmup:          lr = base_lr · s / warmup
///   warmup < s < total:  lr = min_lr + (base_lr - min_lr) · (1 + cos(π (s - warmup)/(total - warmup))) / 2
///   s ≥ total:           lr = min_lr
/// with s = max(step, 1), as in NoamLR, so the first update never has rate 0.
class CosineLR : public LRSchedule {
public:
    /// Throws ValueError unless the rates are finite and >= 0, warmup_steps >= 0
    /// and total_steps >= max(warmup_steps, 1).
    explicit CosineLR(CosineOptions options);
    /// The rate of the formula in the class comment, at max(step, 1).
    double lr_at(int64_t step) const override;
    /// The options it was built with.
    const CosineOptions& options() const { return options_; }

private:
    CosineOptions options_;
};

}  // namespace tformer::optim
