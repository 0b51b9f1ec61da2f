// Workspace for cuDNN calls, from torch's caching allocator: searches and plans share memory with the user's model,
// CUDA graph capture sees an ordinary allocation, and running out of memory raises what any torch allocation does.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstddef>

namespace cudnn_algos {

// An empty DataPtr for 0 bytes (cuDNN takes a null workspace then).
inline c10::DataPtr allocate_workspace(size_t bytes) {
  if (bytes == 0) return c10::DataPtr();
  return c10::cuda::CUDACachingAllocator::get()->allocate(bytes);
}

}  // namespace cudnn_algos
