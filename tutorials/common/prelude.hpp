// The short names a tutorial's main.cpp is written with, so that its code
// reads close to the documents' PyTorch: c:: for core tensors, ag:: for the
// differentiable ops, nn:: and tasks:: for layers and plots, and the
// framework's note / show / describe / line / quote for printing, and Text
// ({.en = "...", .zh = "..."}) for every sentence they print.
//
//   #include "common/prelude.hpp"
//   void additive_attention(Tutorial& t, Lesson& lesson) { ... c::randn(...) ... note(...) ... }
//
// Only the tutorial programs include it (the library spells names out).
#pragma once

#include "autograd/autograd.hpp"
#include "common/tutorial.hpp"
#include "core/core.hpp"

using namespace tformer;  // nn::, tasks::, optim::, tutorial::, ShapeError and the other errors
namespace ag = tformer::autograd;
namespace c = tformer::core;
using ag::Variable;
using c::DType;
using tutorial::both;
using tutorial::describe;
using tutorial::line;
using tutorial::note;
using tutorial::phrase;
using tutorial::Phrase;
using tutorial::quote;
using tutorial::show;
using tutorial::Text;
using tutorial::Tutorial;
