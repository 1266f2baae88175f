#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tformer::optim {

namespace {
void check_rate(const char* who, const char* what, double lr) {
    if (!std::isfinite(lr) || lr < 0) fail<ValueError>("{}: {} must be finite and >= 0, got {}", who, what, lr);
}
}  // namespace

// ---- constant ---------------------------------------------------------------------------------

ConstantLR::ConstantLR(double lr) : lr_(lr) { check_rate("ConstantLR", "lr", lr); }

double ConstantLR::lr_at(int64_t) const { return lr_; }

// ---- Noam ---------------------------------------------------------------------------------------

NoamLR::NoamLR(NoamOptions options) : options_(options) {
    if (options.d_model <= 0) fail<ValueError>("NoamLR: d_model must be > 0, got {}", options.d_model);
    if (options.warmup <= 0) fail<ValueError>("NoamLR: warmup must be > 0, got {}", options.warmup);
    check_rate("NoamLR", "factor", options.factor);
}

// lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
// The two terms meet at step = warmup, where lr = factor · (d_model · warmup)^-0.5.
double NoamLR::lr_at(int64_t step) const {
    const double s = static_cast<double>(std::max<int64_t>(step, 1));  // 0^-0.5 would be infinite
    const double d = static_cast<double>(options_.d_model);
    const double w = static_cast<double>(options_.warmup);
    return options_.factor * std::pow(d, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

// ---- cosine -------------------------------------------------------------------------------------

CosineLR::CosineLR(CosineOptions options) : options_(options) {
    check_rate("CosineLR", "base_lr", options.base_lr);
    check_rate("CosineLR", "min_lr", options.min_lr);
    if (options.warmup_steps < 0) fail<ValueError>("CosineLR: warmup_steps must be >= 0, got {}", options.warmup_steps);
    if (options.total_steps < std::max<int64_t>(options.warmup_steps, 1))
        fail<ValueError>("CosineLR: total_steps ({}) must be >= max(warmup_steps, 1) (warmup_steps = {})",
                         options.total_steps, options.warmup_steps);
}

double CosineLR::lr_at(int64_t step) const {
    const int64_t s = std::max<int64_t>(step, 1);
    const CosineOptions& o = options_;
    // warm-up: lr = base_lr · s / warmup
    if (s <= o.warmup_steps) return o.base_lr * static_cast<double>(s) / static_cast<double>(o.warmup_steps);
    if (s >= o.total_steps) return o.min_lr;
    // decay: lr = min_lr + (base_lr - min_lr) · (1 + cos(π·progress)) / 2, progress from 0 to 1
    const double progress =
        static_cast<double>(s - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
    return o.min_lr + (o.base_lr - o.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace tformer::optim
