// Tutorial 16 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

namespace exercise {

// Each layer reaches kernel / 2 positions further to each side.
int64_t receptive_field(int64_t layers, int64_t kernel) { return 1 + layers * (kernel - 1); }

// Output n - 1 sees back to position n - 1 - layers · (kernel / 2); it must reach 0.
int64_t layers_to_connect(int64_t n, int64_t kernel) {
    const int64_t reach = kernel / 2;
    return (n - 1 + reach - 1) / reach;  // ceil((n - 1) / reach)
}

}  // namespace exercise
