#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <mutex>
#include <vector>

#include "descriptors.h"

namespace cudnn_algos {

cudnnHandle_t handle_for(int device) {
  static std::mutex mutex;
  static auto* handles = new std::vector<HandleBase*>();  // never destroyed: see descriptors.h
  cudnnHandle_t h;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (device < 0) throw std::invalid_argument("negative CUDA device index");
    if (static_cast<size_t>(device) >= handles->size()) handles->resize(device + 1, nullptr);
    if ((*handles)[device] == nullptr) (*handles)[device] = new HandleBase();  // caller holds a device guard
    h = (*handles)[device]->get();
  }
  CUDNN_CHECK(cudnnSetStream(h, c10::cuda::getCurrentCUDAStream(device).stream()));
  return h;
}

}  // namespace cudnn_algos
