// Error checking for cuDNN and CUDA calls.
//
// A call that fails where the failure is not data (API misuse, a problem cuDNN rejects as a whole, a dead GPU)
// throws CudnnException / CudaException; bindings.cpp turns these into cudnn_algos.CudnnError / CudaError.
// A per-algorithm failure inside a search is NOT thrown: it is a row with its status (see legacy_search.cpp).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace cudnn_algos {

// "CUDNN_STATUS_NOT_SUPPORTED" -> "NOT_SUPPORTED": the short form used in result rows.
inline std::string short_status_name(cudnnStatus_t status) {
  std::string name = cudnnGetErrorString(status);
  const std::string prefix = "CUDNN_STATUS_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

class CudnnException : public std::runtime_error {
 public:
  CudnnException(cudnnStatus_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  cudnnStatus_t status() const { return status_; }
  std::string status_name() const { return cudnnGetErrorString(status_); }

 private:
  cudnnStatus_t status_;
};

class CudaException : public std::runtime_error {
 public:
  CudaException(cudaError_t error, const std::string& message) : std::runtime_error(message), error_(error) {}
  cudaError_t error() const { return error_; }

 private:
  cudaError_t error_;
};

// cuDNN 9 keeps a per-thread text for the last failure; it often names the offending parameter.
inline std::string last_cudnn_message() {
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return std::string(buf);
}

[[noreturn]] inline void throw_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  std::string msg = std::string(cudnnGetErrorString(status)) + " from " + call + " at " + file + ":" +
                    std::to_string(line);
  const std::string detail = last_cudnn_message();
  if (!detail.empty()) msg += " (" + detail + ")";
  throw CudnnException(status, msg);
}

[[noreturn]] inline void throw_cuda(cudaError_t error, const char* call, const char* file, int line) {
  throw CudaException(error, std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error) + " from " +
                                 call + " at " + file + ":" + std::to_string(line));
}

// After a library call that launches kernels: a launch the driver refused (e.g. no device memory left for a
// kernel's local memory) stays in the runtime's per-thread last-error slot, where the library's status need not
// show it, and the next torch op would raise it as its own. Read and clear it here, so the failure is this call's.
inline void check_launches(const char* call, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda(e, call, file, line);
}

}  // namespace cudnn_algos

#define CUDNN_CHECK(call)                                                      \
  do {                                                                         \
    const cudnnStatus_t cudnn_algos_status_ = (call);                          \
    if (cudnn_algos_status_ != CUDNN_STATUS_SUCCESS)                           \
      ::cudnn_algos::throw_cudnn(cudnn_algos_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUDA_CHECK(call)                                                     \
  do {                                                                       \
    const cudaError_t cudnn_algos_error_ = (call);                           \
    if (cudnn_algos_error_ != cudaSuccess)                                   \
      ::cudnn_algos::throw_cuda(cudnn_algos_error_, #call, __FILE__, __LINE__); \
  } while (0)
