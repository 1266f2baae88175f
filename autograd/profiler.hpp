/// \file
/// A per-op profiler for training steps, like torch.profiler's table: how
/// many times each op ran, the time its forward and its backward took, and
/// each op's share of the whole.
///
/// How it measures, cheaply: an op computes its value and then records
/// itself (autograd::record), so the time since the previous op recorded is
/// the forward of this one (plus a little glue); profile_mark() restarts that
/// clock where other work happened in between (loading a batch). Backward
/// functions are timed one by one in Variable::backward. Ops that run under
/// NoGradGuard (decoding, the optimizer's update) record nothing and are not
/// counted. Off by default; when off, recording costs one test of a flag.
///
/// ```
///   autograd::ProfileGuard profile;   // or set_profiling(true)
///   ... training steps ...
///   std::cout << autograd::profile_table();
/// ```
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::autograd {

/// One op's totals since the last profile_reset().
struct OpProfile {
    std::string name;            ///< the op's name, as recorded ("matmul"), or a phase in brackets
    int64_t calls = 0;           ///< forward calls recorded
    double forward_s = 0;        ///< seconds in its forwards
    int64_t backward_calls = 0;  ///< backward functions run
    double backward_s = 0;       ///< seconds in its backward functions
    /// Seconds in forward and backward together.
    double total() const { return forward_s + backward_s; }
};

namespace detail {
extern bool g_profiling;
void profile_forward(const char* name);
void profile_backward(const char* name, double seconds);
}  // namespace detail

/// Turns profiling on or off (and restarts the forward clock).
void set_profiling(bool on);
/// True while profiling is on.
inline bool profiling() { return detail::g_profiling; }
/// Restarts the forward clock: the time since the last op is not charged to the next one.
void profile_mark();
/// Charges `seconds` of work that records no op (a batch, the optimizer's
/// update) to an entry of its own, shown in brackets, and restarts the clock.
void profile_phase(const char* name, double seconds);
/// Forgets every total.
void profile_reset();
/// Every op seen, the most expensive first.
std::vector<OpProfile> profile_results();
/// A table of profile_results(): calls, forward, backward, total and share,
/// with the sum of everything at the bottom; `steps` > 0 also gives time per step.
std::string profile_table(int64_t steps = 0);

/// Profiling on for its lifetime.
class ProfileGuard {
public:
    /// Turns profiling on, remembering whether it was on.
    ProfileGuard();
    /// Restores the previous state.
    ~ProfileGuard();
    ProfileGuard(const ProfileGuard&) = delete;
    ProfileGuard& operator=(const ProfileGuard&) = delete;

private:
    bool previous_;
};

}  // namespace tformer::autograd
