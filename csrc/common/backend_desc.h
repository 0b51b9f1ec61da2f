// Graph-API (backend) descriptors: the RAII owner of one, and the attribute helpers the searches describe a
// problem with. An attribute call that fails is a bug in how a problem is described: the helpers throw (CUDNN_CHECK),
// except get_enums, whose attribute an engine may not have (an empty list then).
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "check.h"

namespace cudnn_algos {

// A graph-API descriptor whose type is chosen at run time (the Descriptor template in descriptors.h covers the
// objects created by a no-argument create call; backend descriptors take their type as an argument).
class BackendDesc {
 public:
  BackendDesc() = default;
  explicit BackendDesc(cudnnBackendDescriptorType_t type) { CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~BackendDesc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  BackendDesc(BackendDesc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  BackendDesc& operator=(BackendDesc&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// ---- attribute helpers
template <typename T>
inline void set_attr(const BackendDesc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, const T* v,
                     int64_t n = 1) {
  CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), a, t, n, v));
}

inline void set_desc(const BackendDesc& d, cudnnBackendAttributeName_t a, const BackendDesc& v) {
  cudnnBackendDescriptor_t raw = v.get();
  set_attr(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
}

inline void set_int64s(const BackendDesc& d, cudnnBackendAttributeName_t a, const std::vector<int64_t>& v) {
  set_attr(d, a, CUDNN_TYPE_INT64, v.data(), static_cast<int64_t>(v.size()));
}

inline int64_t get_int64(const BackendDesc& d, cudnnBackendAttributeName_t a) {
  int64_t v = 0, n = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(d.get(), a, CUDNN_TYPE_INT64, 1, &n, &v));
  return v;
}

template <typename E>
inline std::vector<int> get_enums(const BackendDesc& d, cudnnBackendAttributeName_t a,
                                  cudnnBackendAttributeType_t t) {
  std::vector<E> v(64);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(d.get(), a, t, static_cast<int64_t>(v.size()), &n, v.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  return std::vector<int>(v.begin(), v.begin() + std::min<int64_t>(n, v.size()));
}

// A list of descriptors held by an attribute (heuristic results, knob infos, knob choices): pre-created, then filled.
inline std::vector<BackendDesc> get_descs(const BackendDesc& d, cudnnBackendAttributeName_t a,
                                          cudnnBackendDescriptorType_t type, int64_t max_n) {
  std::vector<BackendDesc> out;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < max_n; ++i) {
    out.emplace_back(type);
    raw.push_back(out.back().get());
  }
  int64_t n = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(d.get(), a, CUDNN_TYPE_BACKEND_DESCRIPTOR, max_n, &n, raw.data()));
  out.resize(static_cast<size_t>(std::min(n, max_n)));
  return out;
}

}  // namespace cudnn_algos
