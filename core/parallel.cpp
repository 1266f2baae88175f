#include "core/parallel.hpp"

#include "core/error.hpp"

#include <cblas.h>

namespace tformer::core {

namespace {
int& thread_setting() {
    static int threads = omp_get_max_threads();
    return threads;
}
}  // namespace

void set_num_threads(int n) {
    if (n < 1) fail<ValueError>("set_num_threads: need at least 1 thread, got {}", n);
    if (n > 1024)
        fail<ValueError>("set_num_threads: {} threads is more than any machine runs usefully (at most 1024)", n);
    thread_setting() = n;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int get_num_threads() { return thread_setting(); }

}  // namespace tformer::core
