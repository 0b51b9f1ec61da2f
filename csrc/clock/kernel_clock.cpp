// The kernel clock: CUPTI activity records of what eager calls put on the GPU (see Note [the kernel clock] in
// timing.h). libcupti is the one torch itself links (the nvidia-cuda-cupti wheel), so there is one CUPTI state in
// the process; torch.profiler uses the same library, which is why a session here never overlaps one of its.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "timing.h"

namespace cudnn_algos {
namespace {

struct Record {
  uint32_t device;
  uint64_t start, end;
  int name = -1;  // index into Names, kernels only
};

// Kernel names, interned: CUPTI shares one name string per kernel across its records.
struct Names {
  std::unordered_map<const char*, int> by_ptr;
  std::vector<std::string> text;
  int id(const char* mangled) {
    auto it = by_ptr.find(mangled);
    if (it != by_ptr.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    text.emplace_back(status == 0 && d ? d : mangled);
    std::free(d);
    by_ptr.emplace(mangled, static_cast<int>(text.size() - 1));
    return static_cast<int>(text.size() - 1);
  }
};

std::mutex records_mutex;  // the buffer-completed callback may run on a CUPTI thread
std::vector<Record> records;
Names names;
std::mutex session_mutex;  // one session at a time; guards the three flags below
bool active = false;         // a session is recording
bool attached = false;       // CUPTI initialized by a session and not finalized since
bool keep_attached = false;  // sessions end without cuptiFinalize (kernel_clock_keep_attached)
bool lost = false;           // the last session's buffers were not all handed back (Note [kineto's deferred teardown])

constexpr size_t kBufferBytes = 4 << 20;

// Every buffer handed to CUPTI, until CUPTI hands it back completed. A buffer CUPTI still holds when it is
// finalized is never completed: freed here after cuptiFinalize (CUPTI no longer refers to it), and counted.
std::mutex buffers_mutex;
std::unordered_set<uint8_t*> outstanding;
KernelClockStats stats;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
  if (*buffer) {
    std::lock_guard<std::mutex> lock(buffers_mutex);
    outstanding.insert(*buffer);
    ++stats.buffers_requested;
  }
}

void release_buffer(uint8_t* buffer) {
  {
    std::lock_guard<std::mutex> lock(buffers_mutex);
    if (outstanding.erase(buffer) == 0) return;  // not ours, or already freed
    ++stats.buffers_completed;
  }
  std::free(buffer);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
          records.push_back({k->deviceId, k->start, k->end, names.id(k->name)});
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          records.push_back({m->deviceId, m->start, m->end, -1});
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          records.push_back({m->deviceId, m->start, m->end, -1});
          break;
        }
        default: break;
      }
    }
  }
  release_buffer(buffer);
}

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  throw std::runtime_error(std::string("kernel clock: ") + call + " failed: " + (text ? text : "unknown CUPTI error"));
}

// Note [whose timestamps]: CUPTI stamps records (and answers cuptiGetTimestamp) with the last timestamp source a
// client registered, until cuptiFinalize. torch.profiler (kineto) registers one that returns raw TSC ticks, not
// nanoseconds, and converts them itself; left registered after its session (TEARDOWN_CUPTI unset), every duration
// this clock read was scaled by the TSC's rate in GHz (2.1x on the H200's host: the first session after a profiler
// session read a 5.5 us kernel as 11.6 us; the next one, after our cuptiFinalize had dropped kineto's source, read
// right). So each session registers its own nanosecond source before it enables any record kind, as CUPTI asks.
// system_clock is what CUPTI uses by default on Linux (CLOCK_REALTIME). kineto registers its source again at the
// start of each of its sessions, so this costs torch.profiler nothing (benchmarks/clock_after_profiler.py).
//
// Note [kineto's deferred teardown]: with TEARDOWN_CUPTI=1 kineto does not finalize CUPTI when its session ends; it
// subscribes to the runtime and driver API domains and calls cuptiFinalize on the exit of the process's next CUDA
// call. When that call was a launch inside one of our windows, it finalized our session: every record was lost and
// the first session after such a profiler session saw no activity at all (on the H200, the held-session test and
// the benchmark's teardown variant). So a session makes one CUDA call (cudaGetDevice) before it touches CUPTI: a
// pending teardown happens there, and the session starts on a clean CUPTI. That is a race, though: kineto arms its
// teardown from a thread of its own, which may not have armed it yet when a session starts right after torch's
// profiler returned. So a session also notices when it was finalized under it (a buffer CUPTI never handed back,
// or no activity in any window) and says so: kernel_clock_end throws "session lost", and the Python side measures
// again. A finalize part-way through a session keeps the records before it (one window read 1 kernel of 200 on the
// H200), so the Python side also closes every session with a marker kernel whose missing record means the same.
uint64_t CUPTIAPI ns_timestamp() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                                     CUPTI_ACTIVITY_KIND_MEMCPY};

// Detach CUPTI, then free the buffers it never completed (it no longer refers to them). Under session_mutex.
// Frees the buffers CUPTI will never hand back (it was finalized) and counts them. Under buffers_mutex.
void reclaim_outstanding() {
  for (uint8_t* b : outstanding) std::free(b);
  stats.buffers_reclaimed += static_cast<int64_t>(outstanding.size());
  outstanding.clear();
}

void detach() {
  cuptiFinalize();
  attached = false;
  std::lock_guard<std::mutex> lock(buffers_mutex);
  reclaim_outstanding();
  ++stats.finalizes;
}

// Flush what CUPTI holds, stop recording and (unless kept attached) detach it. Errors are ignored: this also runs
// on failure paths. Under session_mutex.
void stop_recording() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  active = false;
  {
    std::lock_guard<std::mutex> lock(buffers_mutex);
    ++stats.sessions;
    // a forced flush hands every buffer CUPTI holds back; one it never returns belongs to a CUPTI that another
    // client finalized during the session, and so do its records. CUPTI no longer refers to such buffers: freed
    // now, or (kept attached, where no detach follows) every later session would count them as lost again
    lost = !outstanding.empty();
    reclaim_outstanding();
  }
  if (!keep_attached) detach();
}

// Length of the union of [start, end) intervals (concurrent activities counted once).
uint64_t union_ns(std::vector<std::pair<uint64_t, uint64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, lo = 0, hi = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (!open || s > hi) {
      if (open) total += hi - lo;
      lo = s, hi = e, open = true;
    } else {
      hi = std::max(hi, e);
    }
  }
  if (open) total += hi - lo;
  return total;
}

}  // namespace

void kernel_clock_begin(bool own_timestamps) {
  std::lock_guard<std::mutex> lock(session_mutex);
  if (active) throw std::runtime_error("kernel clock: a session is already open");
  {
    std::lock_guard<std::mutex> rl(records_mutex);
    records.clear();
    names = Names();  // CUPTI may reuse a name's address after cuptiFinalize: intern per session
  }
  int current = 0;
  (void)cudaGetDevice(&current);  // Note [kineto's deferred teardown]: its pending cuptiFinalize runs here
  try {
    // registered again even when still attached: a torch.profiler session in between registers its own
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    attached = true;
    if (own_timestamps)  // Note [whose timestamps]; false only to show what happens without (a benchmark)
      check(cuptiActivityRegisterTimestampCallback(ns_timestamp), "cuptiActivityRegisterTimestampCallback");
    for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
  } catch (...) {
    stop_recording();
    throw;
  }
  active = true;
}

void kernel_clock_keep_attached(bool on) {
  std::lock_guard<std::mutex> lock(session_mutex);
  keep_attached = on;
  if (!on && attached && !active) detach();
}

uint64_t kernel_clock_now() {
  uint64_t t = 0;
  check(cuptiGetTimestamp(&t), "cuptiGetTimestamp");
  return t;
}

std::vector<WindowActivity> kernel_clock_end(int device, const std::vector<std::pair<uint64_t, uint64_t>>& windows) {
  std::vector<Record> got;
  {
    std::lock_guard<std::mutex> lock(session_mutex);
    if (!active) throw std::runtime_error("kernel clock: no session is open");
    stop_recording();
    std::lock_guard<std::mutex> rl(records_mutex);
    got.swap(records);
    if (lost)
      throw std::runtime_error(
          "kernel clock: session lost: another CUPTI client finalized CUPTI during it (torch.profiler with "
          "TEARDOWN_CUPTI=1 does so on the next CUDA call after its session)");
  }
  // windows are disjoint and in time order: sort the records by start and sweep
  std::sort(got.begin(), got.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  std::vector<WindowActivity> out(windows.size());
  std::vector<size_t> order(windows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return windows[a].first < windows[b].first; });
  size_t r = 0;
  std::lock_guard<std::mutex> rl(records_mutex);  // names
  for (size_t w : order) {
    const auto [lo, hi] = windows[w];
    while (r < got.size() && got[r].start < lo) ++r;
    std::vector<std::pair<uint64_t, uint64_t>> iv;
    std::vector<int> seen;
    for (size_t j = r; j < got.size() && got[j].start <= hi; ++j) {
      if (static_cast<int>(got[j].device) != device) continue;
      iv.emplace_back(got[j].start, got[j].end);
      if (got[j].name >= 0 && std::find(seen.begin(), seen.end(), got[j].name) == seen.end()) {
        seen.push_back(got[j].name);
        out[w].kernels.push_back(names.text[got[j].name]);
      }
    }
    out[w].activities = static_cast<int64_t>(iv.size());
    out[w].busy_ns = union_ns(iv);
  }
  return out;
}

KernelClockStats kernel_clock_stats() {
  std::lock_guard<std::mutex> session(session_mutex);  // then buffers_mutex: the order stop_recording takes them
  std::lock_guard<std::mutex> lock(buffers_mutex);
  KernelClockStats out = stats;
  out.buffers_outstanding = static_cast<int64_t>(outstanding.size());
  out.attached = attached;
  return out;
}

void kernel_clock_abort() {
  std::lock_guard<std::mutex> lock(session_mutex);
  if (active) stop_recording();
  std::lock_guard<std::mutex> rl(records_mutex);
  records.clear();
}

}  // namespace cudnn_algos
