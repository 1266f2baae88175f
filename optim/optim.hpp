/// \file
/// Everything in tformer::optim with one include.
#pragma once

#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"

/// \namespace tformer::optim
/// Optimizers and what drives them, as torch.optim: SGD, Adam, AdamW,
/// gradient clipping and learning-rate schedules (constant, Noam, cosine).
