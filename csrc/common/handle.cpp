// cuDNN handles: one per thread and device, as torch keeps them (a handle is bound to one stream at a time, so two
// threads sharing one would race on cudnnSetStream: one thread's work could land on the other's stream).
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "descriptors.h"

namespace cudnn_algos {

namespace {

// Handles no thread holds now, per device. Never destroyed (destroying handles during interpreter exit races
// CUDA's own teardown): a thread that ends gives its handles back here for the next thread.
struct Pool {
  std::mutex mutex;
  std::vector<std::vector<HandleBase*>> free;
};

Pool& pool() {
  static auto* p = new Pool();
  return *p;
}

std::atomic<long> created{0};  // handles made over the process (handle_counts)

struct ThreadHandles {
  std::vector<HandleBase*> held;  // per device
  ~ThreadHandles() {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (size_t d = 0; d < held.size(); ++d) {
      if (held[d] == nullptr) continue;
      if (p.free.size() <= d) p.free.resize(d + 1);
      p.free[d].push_back(held[d]);
    }
  }
};

}  // namespace

cudnnHandle_t handle_for(int device) {
  if (device < 0) throw std::invalid_argument("negative CUDA device index");
  thread_local ThreadHandles mine;
  const size_t d = static_cast<size_t>(device);
  if (mine.held.size() <= d) mine.held.resize(d + 1, nullptr);
  if (mine.held[d] == nullptr) {
    HandleBase* h = nullptr;
    {
      Pool& p = pool();
      std::lock_guard<std::mutex> lock(p.mutex);
      if (p.free.size() > d && !p.free[d].empty()) {
        h = p.free[d].back();
        p.free[d].pop_back();
      }
    }
    if (h == nullptr) {
      h = new HandleBase();  // caller holds a device guard
      ++created;
    }
    mine.held[d] = h;
  }
  cudnnHandle_t h = mine.held[d]->get();
  CUDNN_CHECK(cudnnSetStream(h, c10::cuda::getCurrentCUDAStream(device).stream()));
  return h;
}

HandleCounts handle_counts() {
  HandleCounts out;
  out.created = created.load();
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (const auto& per_device : p.free) out.pooled += static_cast<long>(per_device.size());
  return out;
}

}  // namespace cudnn_algos
