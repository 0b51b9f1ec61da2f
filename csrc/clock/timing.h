// The clocks, in C++: CUDA events and the host timing loop (throughput and host clocks), and the kernel clock
// (CUPTI activity records of the kernels, memsets and copies that eager calls put on the GPU).
//
// Note [the kernel clock]: a candidate's kernel time is what Nsight Systems would show for the same eager call:
// CUPTI's activity records (CONCURRENT_KERNEL, MEMSET, MEMCPY), the union of their [start, end) intervals inside
// a window of back-to-back calls, divided by the calls. An earlier clock replayed captured calls from a CUDA graph:
// it read small kernels up to ~16% high (the gaps between kernels) and some multi-kernel candidates 2-5x low (what
// a graph replays is not what an eager call runs), so it is gone.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/check.h"

namespace cudnn_algos {

// A CUDA event (timing enabled), destroyed with its scope.
class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

struct CallTiming {
  double host_ms = 0;  // host wall time of the whole loop of launches
  double gpu_ms = 0;   // device-event time around the whole loop
};

// `iters` back-to-back calls of call(i) on `stream`: host wall time of the loop (the CPU cost of the launches) and
// device-event time around it (what a training loop sees), both in ms for the whole loop. Returns after the GPU
// finished the loop (the stop event is synchronised).
template <typename F>
CallTiming time_loop(cudaStream_t stream, int iters, F&& call) {
  Event start, stop;
  CUDA_CHECK(cudaEventRecord(start.get(), stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) call(i);
  const auto t1 = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return CallTiming{std::chrono::duration<double, std::milli>(t1 - t0).count(), static_cast<double>(ms)};
}

// ---- the kernel clock (kernel_clock.cpp)

// What the GPU did inside one window [t0, t1] of CUPTI time (ns): the union of the activities' intervals, how many
// activities, and the distinct kernel names (demangled) in order of first appearance.
struct WindowActivity {
  uint64_t busy_ns = 0;
  int64_t activities = 0;
  std::vector<std::string> kernels;
};

// One CUPTI activity session for the whole process. begin() registers the buffer callbacks and enables kernel,
// memset and memcpy records; now() is CUPTI's timestamp (the clock the records use); end() flushes, disables,
// detaches CUPTI (cuptiFinalize: its instrumentation left attached slows later kernels) and attributes every record
// of `device` to the window its start falls in. Not re-entrant: one session at a time (a mutex enforces it), and
// never inside another CUPTI client's session (torch.profiler's): the Python side checks that. own_timestamps: register
// the session's nanosecond timestamp source (Note [whose timestamps] in kernel_clock.cpp); false leaves whatever
// source another client registered (benchmarks/clock_after_profiler.py shows what that does).
void kernel_clock_begin(bool own_timestamps = true);
uint64_t kernel_clock_now();
std::vector<WindowActivity> kernel_clock_end(int device, const std::vector<std::pair<uint64_t, uint64_t>>& windows);
// Abandons a session (after an exception): flush, disable, detach, drop the records.
void kernel_clock_abort();
// Off by default: each session ends with cuptiFinalize, so no CUPTI instrumentation is left on the user's later
// kernels. On: sessions end with recording disabled but CUPTI attached, finalized when this is turned off again
// (on the H200 with CUDA 13.0 every attach/finalize cycle kept ~70 KB of host memory inside libcupti).
void kernel_clock_keep_attached(bool on);
// Counters over the process: sessions closed, cuptiFinalize calls, activity buffers handed to CUPTI, handed back
// completed, and freed by us after cuptiFinalize because CUPTI never completed them (the long-run check reads these).
struct KernelClockStats {
  int64_t sessions = 0, finalizes = 0, buffers_requested = 0, buffers_completed = 0, buffers_reclaimed = 0,
          buffers_outstanding = 0;
  bool attached = false;
};
KernelClockStats kernel_clock_stats();

}  // namespace cudnn_algos
