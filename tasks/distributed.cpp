// Data-parallel training: the one file that talks to MPI (see distributed.hpp).
//
// The first section is every MPI call tformer makes, with a one-process
// version of each for builds without MPI; everything after it is written
// against those few functions and never sees an MPI type.
#include "tasks/distributed.hpp"

#include "core/core.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#if TFORMER_HAS_MPI
#include <mpi.h>
#endif

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <thread>

namespace tformer::tasks::dist {

using autograd::Variable;
using core::DType;
using core::Tensor;

namespace {

struct World {
    bool started = false;  // MPI_Init ran (and MPI_Finalize has not)
    int rank = 0, size = 1, local_size = 1;
    int terminal = -1;  // the original stderr of a rank quieted by quiet_other_ranks()
    bool shared_failure = false;
    double timeout = kDefaultTimeout;  // seconds a collective may wait (set_timeout); 0: no limit
};

World& world() {
    static World w;
    return w;
}

// Says `message` on this rank's terminal and ends every rank (MPI_Abort):
// for a rank that fails alone, which the others would wait for forever.
[[noreturn]] void abort_job(const std::string& message);

// The launchers we know set one of these in every process they start:
// Open MPI's mpirun, MPICH's and Intel MPI's Hydra (PMI), PMIx-based ones
// (Slurm's srun, newer Open MPI), MVAPICH.
bool started_by_launcher() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
        if (std::getenv(name) != nullptr) return true;
    return false;
}

// Collectives take int counts; larger buffers go in pieces of this many elements.
constexpr int64_t kChunk = int64_t{1} << 30;

// ---- every MPI call -------------------------------------------------------------------------------

#if TFORMER_HAS_MPI

void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail<IOError>("MPI: {} failed: {}", what, std::string(text, static_cast<size_t>(length)));
}

MPI_Datatype mpi_type(DType dtype) {
    switch (dtype) {
        case DType::float32: return MPI_FLOAT;
        case DType::float64: return MPI_DOUBLE;
        case DType::int64: return MPI_INT64_T;
        default: fail<ValueError>("dist: no MPI type for dtype {}", core::dtype_name(dtype));
    }
}

void mpi_start(int& argc, char**& argv) {
    World& w = world();
    int provided = 0;
    // FUNNELED: only the main thread calls MPI (the hooks run on it too);
    // OpenMP's threads never do.
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    w.started = true;
    // errors come back as codes, so that check() can name the call
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    check(MPI_Comm_size(local, &w.local_size), "MPI_Comm_size");
    MPI_Comm_free(&local);
}

// A barrier that sleeps between polls: MPI's blocking calls spin, which
// would take a core from a rank that still works (rank 0 evaluating).
void mpi_stop() {
    MPI_Request request;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &request) == MPI_SUCCESS) {
        for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    MPI_Finalize();
    world().started = false;
}

[[noreturn]] void mpi_abort(int status) {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // not reached: MPI_Abort ends the process
}

std::string mpi_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string v(text, static_cast<size_t>(length));
    if (const size_t line = v.find_first_of(",\n"); line != std::string::npos) v.resize(line);
    return v;
}

// Waits for `requests` (collectives started by this rank), polling, as
// MPI's blocking calls do, but for at most world().timeout seconds: a rank
// that never comes (stopped, stuck, or started with other settings) ends
// the job with a message naming the call instead of leaving it hanging.
void wait_for(std::vector<MPI_Request>& requests, const char* what) {
    if (requests.empty()) return;
    const double limit = world().timeout;
    if (limit <= 0) {
        check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), what);
    } else {
        const auto start = std::chrono::steady_clock::now();
        for (int done = 0;;) {
            check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), what);
            if (done) break;
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit)
                abort_job(fmt::format(
                    "{} has waited more than {:g} s for the other ranks (--mpi-timeout {:g}): one of them is stopped, "
                    "stuck or far behind",
                    what, limit, limit));
        }
    }
    requests.clear();
}

void mpi_barrier() {
    std::vector<MPI_Request> requests(1);
    check(MPI_Ibarrier(MPI_COMM_WORLD, requests.data()), "MPI_Ibarrier");
    wait_for(requests, "MPI_Barrier");
}

// Collectives take int counts: `count` elements of `bytes` each go in pieces of at most kChunk.
template <class Start>
void in_pieces(int64_t count, int64_t bytes, void* data, const char* what, Start&& start) {
    std::vector<MPI_Request> requests;
    for (int64_t at = 0; at < count; at += kChunk) {
        requests.emplace_back();
        check(start(static_cast<char*>(data) + at * bytes, static_cast<int>(std::min(kChunk, count - at)),
                    &requests.back()),
              what);
    }
    wait_for(requests, what);
}

void mpi_broadcast(void* data, int64_t count, DType dtype, int root) {
    in_pieces(count, core::dtype_size(dtype), data, "MPI_Bcast", [&](void* piece, int n, MPI_Request* r) {
        return MPI_Ibcast(piece, n, mpi_type(dtype), root, MPI_COMM_WORLD, r);
    });
}

void mpi_broadcast_bytes(void* data, int64_t bytes, int root) {
    in_pieces(bytes, 1, data, "MPI_Bcast", [&](void* piece, int n, MPI_Request* r) {
        return MPI_Ibcast(piece, n, MPI_BYTE, root, MPI_COMM_WORLD, r);
    });
}

void mpi_all_reduce_sum(void* data, int64_t count, DType dtype) {
    in_pieces(count, core::dtype_size(dtype), data, "MPI_Allreduce", [&](void* piece, int n, MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, piece, n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD, r);
    });
}

int mpi_all_reduce_min(int value) {
    in_pieces(1, sizeof value, &value, "MPI_Allreduce", [&](void* piece, int n, MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, piece, n, MPI_INT, MPI_MIN, MPI_COMM_WORLD, r);
    });
    return value;
}

std::vector<uint64_t> mpi_all_gather(uint64_t value) {
    std::vector<uint64_t> all(static_cast<size_t>(world().size));
    std::vector<MPI_Request> requests(1);
    check(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, requests.data()),
          "MPI_Iallgather");
    wait_for(requests, "MPI_Allgather");
    return all;
}

// An all-reduce in flight (one request per piece of at most kChunk elements).
struct Pending {
    std::vector<MPI_Request> requests;
};

void mpi_start_all_reduce(Pending& p, void* data, int64_t count, DType dtype) {
    const int64_t bytes = core::dtype_size(dtype);
    for (int64_t at = 0; at < count; at += kChunk) {
        MPI_Request r;
        check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * bytes,
                             static_cast<int>(std::min(kChunk, count - at)), mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD,
                             &r),
              "MPI_Iallreduce");
        p.requests.push_back(r);
    }
}

// Lets MPI move the all-reduce on (it progresses only inside MPI calls); true when it is done.
bool mpi_test(Pending& p) {
    if (p.requests.empty()) return true;  // nothing started (one rank)
    int done = 0;
    check(MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE),
          "MPI_Testall");
    if (done) p.requests.clear();
    return done != 0;
}

void mpi_wait(Pending& p) { wait_for(p.requests, "MPI_Iallreduce (the gradient all-reduce)"); }

#else  // one process: every collective over one rank hands back its input

void mpi_start(int&, char**&) {}
void mpi_stop() {}
[[noreturn]] void mpi_abort(int status) { std::_Exit(status); }
std::string mpi_version() { return "none"; }
void mpi_barrier() {}
void mpi_broadcast(void*, int64_t, DType, int) {}
void mpi_broadcast_bytes(void*, int64_t, int) {}
void mpi_all_reduce_sum(void*, int64_t, DType) {}
int mpi_all_reduce_min(int value) { return value; }
std::vector<uint64_t> mpi_all_gather(uint64_t value) { return {value}; }
struct Pending {};
void mpi_start_all_reduce(Pending&, void*, int64_t, DType) {}
bool mpi_test(Pending&) { return true; }
void mpi_wait(Pending&) {}

#endif

}  // namespace

// ---- the world ----------------------------------------------------------------------------------

Session::Session(int& argc, char**& argv) {
    if (built_with_mpi() && started_by_launcher() && !world().started) mpi_start(argc, argv);
    // mpirun with a build that has no MPI: every copy would think itself alone and train (and write) the whole run
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
        const char* ranks = std::getenv(name);
        if (!built_with_mpi() && ranks != nullptr && std::atoi(ranks) > 1) {
            std::fprintf(stderr,
                         "tformer: an MPI launcher started %s copies of tformer, but this build has no MPI "
                         "(install libopenmpi-dev and configure again); each would train alone\n",
                         ranks);
            std::exit(1);
        }
    }
}

Session::~Session() {
    if (world().started) mpi_stop();
}

bool built_with_mpi() {
#if TFORMER_HAS_MPI
    return true;
#else
    return false;
#endif
}

int rank() { return world().rank; }
int size() { return world().size; }
int local_size() { return world().local_size; }
std::string library_version() { return built_with_mpi() ? mpi_version() : "none"; }

void quiet_other_ranks() {
    World& w = world();
    if (w.rank == 0 || w.terminal >= 0) return;
    std::fflush(stdout);
    std::fflush(stderr);
    w.terminal = dup(STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null < 0) return;
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    close(null);
}

void note_shared_failure() { world().shared_failure = true; }

int report_error(const std::string& message) {
    const World& w = world();
    if (w.size == 1) {
        fmt::print(stderr, "tformer: error: {}\n", message);
        return 1;
    }
    if (w.shared_failure) {  // every rank is here with the same error: rank 0 says it once
        if (w.rank == 0) fmt::print(stderr, "tformer: error: {}\n", message);
        return 1;
    }
    abort_job(message);
}

namespace {
void abort_job(const std::string& message) {
    const World& w = world();
    const std::string text =
        fmt::format("tformer: error on rank {} of {}: {}\ntformer: stopping every rank\n", w.rank, w.size, message);
    std::fflush(stderr);
    const int fd = w.terminal >= 0 ? w.terminal : STDERR_FILENO;
    if (write(fd, text.data(), text.size()) < 0) {
        // nowhere left to say it; the exit status still tells
    }
    mpi_abort(1);
}
}  // namespace

void set_timeout(double seconds) {
    if (!(seconds >= 0) || !std::isfinite(seconds))
        fail<ValueError>("dist::set_timeout: seconds must be a finite number >= 0 (0: no limit), got {}", seconds);
    world().timeout = seconds;
}

// ---- collectives ----------------------------------------------------------------------------------

void barrier() {
    if (size() > 1) mpi_barrier();
}

void broadcast(const Tensor& t, int root) {
    if (size() == 1) return;
    if (!t.is_contiguous()) fail<ValueError>("dist::broadcast: the tensor must be contiguous");
    mpi_broadcast(t.raw_data(), t.numel(), t.dtype(), root);
}

void broadcast(std::string& text, int root) {
    if (size() == 1) return;
    uint64_t length = text.size();
    mpi_broadcast(&length, 1, DType::int64, root);
    text.resize(length);
    mpi_broadcast_bytes(text.data(), static_cast<int64_t>(length), root);
}

void broadcast(std::span<uint64_t> values, int root) {
    if (size() == 1 || values.empty()) return;
    mpi_broadcast(values.data(), static_cast<int64_t>(values.size()), DType::int64, root);
}

void all_reduce_sum(std::span<double> values) {
    if (size() == 1 || values.empty()) return;
    mpi_all_reduce_sum(values.data(), static_cast<int64_t>(values.size()), DType::float64);
}

void all_reduce_sum(const Tensor& t) {
    if (size() == 1) return;
    if (!t.is_contiguous()) fail<ValueError>("dist::all_reduce_sum: the tensor must be contiguous");
    mpi_all_reduce_sum(t.raw_data(), t.numel(), t.dtype());
}

void together(const std::function<void()>& work) {
    std::exception_ptr error;
    std::string message;
    try {
        work();
    } catch (const std::exception& e) {
        error = std::current_exception();
        message = e.what();
    } catch (...) {
        error = std::current_exception();
        message = "an unknown error";
    }
    if (size() == 1) {
        if (error) std::rethrow_exception(error);
        return;
    }
    // the lowest rank that failed tells the others what happened
    const int first = mpi_all_reduce_min(error ? rank() : size());
    if (first == size()) return;
    broadcast(message, first);
    note_shared_failure();
    if (error) std::rethrow_exception(error);
    fail<Error>("rank {}: {}", first, message);
}

void check_same(uint64_t value, const std::string& what) {
    if (size() == 1) return;
    const std::vector<uint64_t> all = mpi_all_gather(value);
    for (int r = 1; r < size(); ++r) {
        if (all[r] == all[0]) continue;
        note_shared_failure();
        fail<Error>(
            "{} differs between ranks (rank {} has fingerprint {:016x}, rank 0 {:016x}): every rank must be "
            "started with the same arguments and the same data",
            what, r, all[r], all[0]);
    }
}

void check_same_settings(const std::vector<std::pair<std::string, std::string>>& settings) {
    if (size() == 1) return;
    // rank 0's settings, as one string of length-prefixed names and values
    std::string text;
    for (const auto& [name, value] : settings)
        text += fmt::format("{}:{}{}:{}", name.size(), name, value.size(), value);
    broadcast(text);
    together([&] {
        if (is_root()) return;
        std::map<std::string, std::string> root;
        for (size_t at = 0; at < text.size();) {
            std::string pair[2];
            for (std::string& part : pair) {
                const size_t colon = text.find(':', at);
                const size_t n = std::stoull(text.substr(at, colon - at));
                part = text.substr(colon + 1, n);
                at = colon + 1 + n;
            }
            root[pair[0]] = pair[1];
        }
        std::vector<std::string> differences;
        auto compare = [&](const std::string& name, const std::string& mine, const std::string& theirs) {
            if (mine != theirs)
                differences.push_back(fmt::format("{} is {} on rank {} but {} on rank 0", name, mine, rank(), theirs));
        };
        std::map<std::string, std::string> mine;
        for (const auto& [name, value] : settings) {
            mine[name] = value;
            const auto it = root.find(name);
            compare(name, value, it == root.end() ? "(not given)" : it->second);
        }
        for (const auto& [name, value] : root)
            if (!mine.count(name)) compare(name, "(not given)", value);
        if (!differences.empty())
            fail<Error>(
                "the ranks were started with different settings: {}; start every rank with the same flags and the "
                "same data",
                fmt::join(differences, "; "));
    });
}

uint64_t fingerprint(const void* data, size_t bytes, uint64_t seed) {
    uint64_t h = seed;
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;  // FNV-1a
    return h;
}

uint64_t fingerprint(const Tensor& t, uint64_t seed) {
    const Tensor c = t.contiguous();
    const int64_t dims[2] = {static_cast<int64_t>(c.dtype()), c.dim()};
    uint64_t h = fingerprint(dims, sizeof dims, seed);
    for (int d = 0; d < c.dim(); ++d) {
        const int64_t n = c.size(d);
        h = fingerprint(&n, sizeof n, h);
    }
    return fingerprint(c.raw_data(), static_cast<size_t>(c.numel() * core::dtype_size(c.dtype())), h);
}

namespace {
// Root's values of `tensors` on every rank: packed into one buffer per
// dtype, broadcast once, unpacked. The tensors keep their storage (views of
// parameters stay views).
void broadcast_tensors(const std::vector<Tensor>& tensors) {
    if (size() == 1) return;
    for (DType dtype : {DType::float32, DType::float64, DType::int64}) {
        int64_t total = 0;
        for (const Tensor& t : tensors) total += t.dtype() == dtype ? t.numel() : 0;
        if (total == 0) continue;
        const Tensor packed = Tensor::empty({total}, dtype);
        int64_t at = 0;
        for (const Tensor& t : tensors) {
            if (t.dtype() != dtype) continue;
            if (is_root()) core::copy_(packed.slice(0, at, at + t.numel()).view(t.shape()), t);
            at += t.numel();
        }
        broadcast(packed);
        if (is_root()) continue;
        at = 0;
        for (const Tensor& t : tensors) {
            if (t.dtype() != dtype) continue;
            core::copy_(t, packed.slice(0, at, at + t.numel()).view(t.shape()));
            at += t.numel();
        }
    }
}
}  // namespace

void broadcast_parameters(const std::vector<Variable>& params) {
    if (size() == 1) return;
    std::vector<Tensor> values;
    uint64_t shapes = 0xcbf29ce484222325ULL;
    for (const Variable& p : params) {
        values.push_back(p.value());
        for (int d = 0; d < p.dim(); ++d) {
            const int64_t n = p.size(d);
            shapes = fingerprint(&n, sizeof n, shapes);
        }
    }
    check_same(shapes, "the model (its parameters' shapes)");
    broadcast_tensors(values);
}

void broadcast_optimizer(optim::Optimizer& optimizer) {
    if (size() == 1) return;
    nn::StateDict state = optimizer.state_dict();  // every key, zeros for slots not yet allocated
    std::vector<Tensor> values;
    uint64_t keys = 0xcbf29ce484222325ULL;
    for (auto& [key, t] : state) {
        keys = fingerprint(key.data(), key.size(), keys);
        t = t.contiguous();
        values.push_back(t);
    }
    check_same(keys, "the optimizer's state");
    broadcast_tensors(values);
    if (!is_root()) optimizer.load_state_dict(state);
}

void broadcast(core::Generator::State& state) { broadcast(std::span<uint64_t>(state.data(), state.size())); }

// ---- splitting a batch -------------------------------------------------------------------------------

RowRange shard_rows(int64_t rows, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size || rows < 0)
        fail<ValueError>("dist::shard_rows: need rows >= 0 and 0 <= rank < size, got rows {}, rank {}, size {}", rows,
                         rank, size);
    return {.begin = rows * rank / size, .end = rows * (rank + 1) / size};
}

// ---- the gradient all-reduce ---------------------------------------------------------------------------

ReducerOptions ReducerOptions::from_environment() {
    ReducerOptions o;
    auto read = [](const char* name, int64_t lo, int64_t hi) -> std::optional<int64_t> {
        const char* text = std::getenv(name);
        if (text == nullptr || *text == '\0') return std::nullopt;
        char* end = nullptr;
        const long long v = std::strtoll(text, &end, 10);
        if (*end != '\0' || v < lo || v > hi)
            fail<ValueError>("{} must be a whole number from {} to {}, got '{}'", name, lo, hi, text);
        return v;
    };
    if (const auto kb = read("TFORMER_BUCKET_KB", 1, int64_t{1} << 30)) o.bucket_bytes = *kb * 1024;
    if (const auto on = read("TFORMER_OVERLAP", 0, 1)) o.overlap = *on == 1;
    return o;
}

// Each bucket's buffer holds its parameters' gradients one after the other
// and then one number per parameter, 1 when this rank has its gradient and
// 0 when not: after the sum, that number is how many ranks had one, so the
// "nobody computed this gradient" case travels with the data, at no extra cost.
struct GradientReducer::State {
    ReducerOptions options;
    std::vector<Variable> params;
    DType dtype = DType::float32;
    struct Slot {
        int64_t bucket = 0, offset = 0, flag = 0;  // where the gradient and its flag sit in the bucket
    };
    std::vector<Slot> slots;  // per parameter
    struct Bucket {
        int64_t numel = 0;  // gradients + flags
        std::vector<size_t> params;
    };
    std::vector<Bucket> buckets;  // in the order they are reduced: the last parameters first

    // this step
    bool in_step = false;
    std::vector<Tensor> buffers;   // per bucket, (numel)
    std::vector<uint8_t> ready;    // per parameter: its gradient (or its zeros) is in the buffer
    std::vector<int64_t> missing;  // per bucket: parameters not ready yet
    std::vector<Pending> pending;  // per bucket
    std::vector<uint8_t> done;     // per bucket: its all-reduce has finished
    size_t launched = 0;           // buckets [0, launched) have been started, always in this order on every rank
    ReducerStats stats;

    void begin_step() {
        buffers.clear();
        for (const Bucket& b : buckets) buffers.push_back(Tensor::empty({b.numel}, dtype));
        std::fill(ready.begin(), ready.end(), 0);
        for (size_t b = 0; b < buckets.size(); ++b) missing[b] = static_cast<int64_t>(buckets[b].params.size());
        std::fill(done.begin(), done.end(), 0);
        launched = 0;
        in_step = true;
    }

    // Puts parameter i's gradient (undefined: zeros, and flag 0) into its bucket.
    void place(size_t i, const Tensor& grad) {
        const Slot& s = slots[i];
        Tensor buffer = buffers[s.bucket];  // a handle: set() writes into the shared storage
        const Tensor& value = params[i].value();
        const Tensor into = buffer.slice(0, s.offset, s.offset + value.numel()).view(value.shape());
        if (grad.defined()) {
            core::copy_(into, grad);
            buffer.set({s.flag}, 1.0);
        } else {
            core::fill_(into, 0.0);
            buffer.set({s.flag}, 0.0);
        }
        ready[i] = 1;
        --missing[s.bucket];
    }

    // Starts the complete buckets, in bucket order (every rank must start its
    // collectives in the same order), and lets the started ones progress.
    void launch_ready() {
        while (launched < buckets.size() && missing[launched] == 0) {
            const Tensor& buffer = buffers[launched];
            if (size() > 1) mpi_start_all_reduce(pending[launched], buffer.raw_data(), buffer.numel(), dtype);
            ++launched;
        }
        for (size_t b = 0; b < launched; ++b)
            if (!done[b]) done[b] = mpi_test(pending[b]);
    }

    // The hook: backward has finished parameter i's gradient for this pass.
    void on_gradient(size_t i, const Tensor& grad) {
        const auto start = std::chrono::steady_clock::now();
        if (!in_step) begin_step();
        if (ready[i])
            fail<ValueError>(
                "GradientReducer: the gradient of parameter {} arrived twice before finish(); call "
                "finish() after every backward",
                i);
        place(i, grad);
        launch_ready();
        stats.hook_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    void finish() {
        const auto start = std::chrono::steady_clock::now();
        if (!in_step) begin_step();
        stats.early_buckets += static_cast<int64_t>(launched);
        for (size_t i = 0; i < params.size(); ++i)
            if (!ready[i]) place(i, params[i].grad());  // no hook (overlap off), or no gradient on this rank
        launch_ready();
        for (size_t b = 0; b < buckets.size(); ++b)
            if (!done[b]) mpi_wait(pending[b]);
        const int ranks = size();
        if (options.average && ranks > 1)
            for (size_t b = 0; b < buckets.size(); ++b) {
                // the gradients only (the flags after them stay counts)
                const int64_t grads = buckets[b].numel - static_cast<int64_t>(buckets[b].params.size());
                const Tensor g = buffers[b].slice(0, 0, grads);
                core::copy_(g, core::mul(g, 1.0 / ranks));
            }
        for (size_t i = 0; i < params.size(); ++i) {
            const Slot& s = slots[i];
            const Tensor& buffer = buffers[s.bucket];
            if (buffer.at({s.flag}) > 0) {
                const Tensor& value = params[i].value();
                params[i].set_grad(buffer.slice(0, s.offset, s.offset + value.numel()).view(value.shape()));
            } else {
                params[i].zero_grad();  // no rank has a gradient: the optimizer skips it, as in one process
            }
        }
        buffers.clear();  // the gradients keep their buckets alive; the next step gets new ones
        in_step = false;
        ++stats.steps;
        stats.finish_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
};

GradientReducer::GradientReducer(std::vector<Variable> params, ReducerOptions options)
    : state_(std::make_shared<State>()) {
    State& s = *state_;
    if (params.empty()) fail<ValueError>("GradientReducer: no parameters");
    if (options.bucket_bytes < 1)
        fail<ValueError>("GradientReducer: bucket_bytes must be positive, got {}", options.bucket_bytes);
    s.options = options;
    s.params = std::move(params);
    s.dtype = s.params.front().dtype();
    if (s.dtype != DType::float32 && s.dtype != DType::float64)
        fail<ValueError>("GradientReducer: parameters must be float32 or float64, got {}", core::dtype_name(s.dtype));
    for (size_t i = 0; i < s.params.size(); ++i) {
        if (!s.params[i].defined() || !s.params[i].requires_grad())
            fail<ValueError>("GradientReducer: parameter {} is undefined or does not require a gradient", i);
        if (s.params[i].dtype() != s.dtype)
            fail<ValueError>(
                "GradientReducer: every parameter must have one dtype; parameter 0 is {}, parameter {} is {}",
                core::dtype_name(s.dtype), i, core::dtype_name(s.params[i].dtype()));
    }

    // buckets, last parameter first: backward finishes the last layers' gradients first
    const int64_t element = core::dtype_size(s.dtype);
    s.slots.resize(s.params.size());
    std::vector<size_t> current;
    int64_t current_numel = 0;
    auto close = [&] {
        if (current.empty()) return;
        State::Bucket bucket;
        int64_t at = 0;
        for (size_t i : current) {
            s.slots[i].bucket = static_cast<int64_t>(s.buckets.size());
            s.slots[i].offset = at;
            at += s.params[i].numel();
        }
        for (size_t i : current) s.slots[i].flag = at++;
        bucket.numel = at;
        bucket.params = current;
        s.buckets.push_back(std::move(bucket));
        current.clear();
        current_numel = 0;
    };
    for (size_t k = s.params.size(); k-- > 0;) {
        const int64_t n = s.params[k].numel();
        if (!current.empty() && (current_numel + n) * element > options.bucket_bytes) close();
        current.push_back(k);
        current_numel += n;
    }
    close();
    s.ready.assign(s.params.size(), 0);
    s.missing.assign(s.buckets.size(), 0);
    s.pending.resize(s.buckets.size());
    s.done.assign(s.buckets.size(), 0);
    s.stats.buckets = static_cast<int64_t>(s.buckets.size());
    for (const Variable& p : s.params) s.stats.bytes += p.numel() * element;

    if (options.overlap) {
        // Variable has no remove_hook: the hooks hold the state weakly and do nothing once the reducer is gone
        const std::weak_ptr<State> weak = state_;
        for (size_t i = 0; i < s.params.size(); ++i)
            s.params[i].register_hook([weak, i](const Tensor& grad) {
                if (const auto state = weak.lock()) state->on_gradient(i, grad);
            });
    }
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::finish() { state_->finish(); }
int64_t GradientReducer::num_buckets() const { return static_cast<int64_t>(state_->buckets.size()); }
const ReducerStats& GradientReducer::stats() const { return state_->stats; }

}  // namespace tformer::tasks::dist
