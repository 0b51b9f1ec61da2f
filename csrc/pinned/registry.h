// The pinned operator's registry (internal to csrc/pinned; pinned.h is the public face): stored winners by problem
// key, plans built per (device, key), call counts per key, entries resolved per call signature (Note [signatures]
// in registry.cpp), and the host-stage counters (Note [host stages]). ops.cpp reads it through resolve(), the
// count cells and Laps.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "../common/conv_params.h"
#include "../common/directions.h"
#include "../search/engine_search.h"

namespace cudnn_algos::pinned_detail {

// One problem key's call counts (atomics: the per-call path increments them without the registry's lock).
struct CountCell {
  std::atomic<int64_t> pinned{0}, torch{0}, fallback{0};
  // while host stages are timed (Note [host stages]): this key's cudnnBackendExecute host time and calls
  std::atomic<int64_t> execute_ns{0}, timed_calls{0};
  std::mutex reason_mutex;
  std::string reason;  // the last fallback's reason
};

// What the operator does for one signature (below): resolved once, then read without building anything.
struct Entry {
  std::string key;
  std::shared_ptr<EnginePlan> plan;  // null: torch's op runs (torch_winner, or `why`)
  bool torch_winner = false;
  std::string why;
  std::shared_ptr<CountCell> cell;
};

// The resolved entry for a call (Note [signatures]): its key, and the built plan of the stored winner, or null where
// torch's op must run (`torch_winner`: the stored choice; else `why`). Builds the plan at a signature's first call.
std::shared_ptr<const Entry> resolve(Direction dir, const ConvProblem& p, bool det, bool tf32, int device);

// One more call of this key that ran torch's op in place of a stored winner, and why.
void count_fallback(CountCell& c, const std::string& reason);

// Note [host stages]: pinned_stage_timing(true) makes every call of the CUDA kernels add the host time of each of its
// steps to these counters (steady_clock laps), so that a user can see where the operator's own host time goes; off
// (the default), a call reads one relaxed atomic.
enum Stage : int {
  kOperands, kResolve, kAlloc, kHandle, kWorkspace, kVariantPack, kExecute, kCount, kTorchOp, kBias, kStageCount
};
extern std::atomic<bool> g_stage_timing;
extern std::array<std::atomic<int64_t>, kStageCount> g_stage_ns;
extern std::array<std::atomic<int64_t>, 2> g_stage_calls;  // forward kernel calls, backward kernel calls

// One kernel call's host-stage laps (Note [host stages]); nothing but one relaxed load while timing is off.
class Laps {
 public:
  explicit Laps(int kernel) : on_(g_stage_timing.load(std::memory_order_relaxed)) {
    if (!on_) return;
    g_stage_calls[kernel].fetch_add(1, std::memory_order_relaxed);
    last_ = now();
  }
  void lap(Stage s) {
    if (!on_) return;
    const int64_t t = now();
    g_stage_ns[s].fetch_add(t - last_, std::memory_order_relaxed);
    last_ = t;
  }
  // EnginePlan::execute's own split (handle, workspace, variant pack, cudnnBackendExecute): null when timing is off
  int64_t* split() { return on_ ? (std::fill(split_, split_ + 4, 0), split_) : nullptr; }
  void add_split() {
    if (!on_) return;
    for (int i = 0; i < 4; ++i) g_stage_ns[kHandle + i].fetch_add(split_[i], std::memory_order_relaxed);
    last_ = now();
  }
  // the last split's cudnnBackendExecute time added to one problem's own sums (which engines cost host time)
  void add_execute_to(CountCell& c) const {
    if (!on_) return;
    c.execute_ns.fetch_add(split_[3], std::memory_order_relaxed);
    c.timed_calls.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  bool on_;
  int64_t last_ = 0;
  int64_t split_[4] = {};
};

}  // namespace cudnn_algos::pinned_detail
