#include "autograd/profiler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace tformer::autograd {

namespace detail {
bool g_profiling = false;
}

namespace {
using Clock = std::chrono::steady_clock;
Clock::time_point g_last = Clock::now();
// keyed by the name's text: op names are string literals, but the same
// literal may live at several addresses
std::map<std::string, OpProfile, std::less<>>& totals() {
    static std::map<std::string, OpProfile, std::less<>> t;
    return t;
}
OpProfile& entry(const char* name) {
    auto& t = totals();
    auto it = t.find(std::string_view(name));
    if (it == t.end()) it = t.emplace(name, OpProfile{.name = name}).first;
    return it->second;
}
}  // namespace

void detail::profile_forward(const char* name) {
    const Clock::time_point now = Clock::now();
    OpProfile& op = entry(name);
    ++op.calls;
    op.forward_s += std::chrono::duration<double>(now - g_last).count();
    g_last = Clock::now();  // the bookkeeping above is not charged to the next op
}

void detail::profile_backward(const char* name, double seconds) {
    OpProfile& op = entry(name);
    ++op.backward_calls;
    op.backward_s += seconds;
}

void set_profiling(bool on) {
    detail::g_profiling = on;
    profile_mark();
}

void profile_mark() { g_last = Clock::now(); }

void profile_phase(const char* name, double seconds) {
    OpProfile& op = entry(name);
    ++op.calls;
    op.forward_s += seconds;
    profile_mark();
}

void profile_reset() {
    totals().clear();
    profile_mark();
}

std::vector<OpProfile> profile_results() {
    std::vector<OpProfile> out;
    for (const auto& [_, op] : totals()) out.push_back(op);
    std::sort(out.begin(), out.end(), [](const OpProfile& a, const OpProfile& b) { return a.total() > b.total(); });
    return out;
}

std::string profile_table(int64_t steps) {
    const std::vector<OpProfile> ops = profile_results();
    double all = 0;
    for (const OpProfile& op : ops) all += op.total();
    std::string out = fmt::format("{:<28} {:>8} {:>11} {:>11} {:>11} {:>7}\n", "op", "calls", "forward ms",
                                  "backward ms", "total ms", "share");
    for (const OpProfile& op : ops)
        out +=
            fmt::format("{:<28} {:>8} {:>11.1f} {:>11.1f} {:>11.1f} {:>6.1f}%\n", op.name, op.calls, 1e3 * op.forward_s,
                        1e3 * op.backward_s, 1e3 * op.total(), all > 0 ? 100 * op.total() / all : 0.0);
    out += fmt::format("{:<28} {:>8} {:>11} {:>11} {:>11.1f} {:>6.1f}%\n", "all ops", "", "", "", 1e3 * all, 100.0);
    if (steps > 0)
        out += fmt::format("per step: {:.2f} ms in {} steps\n", 1e3 * all / static_cast<double>(steps), steps);
    return out;
}

ProfileGuard::ProfileGuard() : previous_(profiling()) { set_profiling(true); }
ProfileGuard::~ProfileGuard() { set_profiling(previous_); }

}  // namespace tformer::autograd
