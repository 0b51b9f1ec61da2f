// One move-only RAII template for every cuDNN object, and the three descriptors a convolution needs.
// Search logic never calls create/destroy itself, so an exception cannot leak a descriptor.
#pragma once

#include <cudnn.h>

#include <climits>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "check.h"
#include "conv_params.h"

namespace cudnn_algos {

template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() {
    T raw = nullptr;
    CUDNN_CHECK(Create(&raw));
    ptr_.reset(raw);
  }
  T get() const { return ptr_.get(); }

 private:
  struct Deleter {
    void operator()(T p) const { Destroy(p); }
  };
  std::unique_ptr<std::remove_pointer_t<T>, Deleter> ptr_;
};

inline std::vector<int> to_int32(const std::vector<int64_t>& v, const char* what) {
  std::vector<int> out;
  out.reserve(v.size());
  for (int64_t e : v) {
    if (e > INT_MAX || e < INT_MIN)
      throw std::overflow_error(std::string(what) + " does not fit cuDNN's 32-bit tensor descriptor");
    out.push_back(static_cast<int>(e));
  }
  return out;
}

class TensorDescriptor
    : public Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
 public:
  void set(cudnnDataType_t dtype, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
    const auto d = to_int32(dims, "tensor dims");
    const auto s = to_int32(strides, "tensor strides");
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(get(), dtype, static_cast<int>(d.size()), d.data(), s.data()));
  }
};

class FilterDescriptor
    : public Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
 public:
  // dims are always K, C/groups, spatial...; the format says how they lie in memory.
  void set(cudnnDataType_t dtype, Layout layout, const std::vector<int64_t>& dims) {
    const auto d = to_int32(dims, "filter dims");
    const cudnnTensorFormat_t format = layout == Layout::NCHW ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    CUDNN_CHECK(cudnnSetFilterNdDescriptor(get(), dtype, format, static_cast<int>(d.size()), d.data()));
  }
};

class ConvolutionDescriptor : public Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                                cudnnDestroyConvolutionDescriptor> {
 public:
  void set(const ConvProblem& p) {
    CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(get(), p.spatial_dims(), p.padding.data(), p.stride.data(),
                                                p.dilation.data(), CUDNN_CROSS_CORRELATION, p.compute_type()));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(get(), p.groups));
    set_math(p.math);
  }
  // Note [math type before search]: the math type must be on the descriptor before Find/Get, or cuDNN skips the
  // tensor-core variants; and with DEFAULT_MATH cuDNN 8+ may already run TF32 kernels for fp32 data (only
  // FMA_MATH forbids them). The math type each result actually used comes back in its perf struct.
  void set_math(cudnnMathType_t math) { CUDNN_CHECK(cudnnSetConvolutionMathType(get(), math)); }
};

using HandleBase = Descriptor<cudnnHandle_t, cudnnCreate, cudnnDestroy>;

// Everything cuDNN needs to know about one problem. Building it also checks the problem: cuDNN's own output-size
// arithmetic must agree with the y dims Python computed.
struct ProblemDescriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;

  explicit ProblemDescriptors(const ConvProblem& p) {
    p.validate();
    x.set(p.dtype, p.x_dims, p.strides_of(p.x_dims));
    y.set(p.dtype, p.y_dims, p.strides_of(p.y_dims));
    w.set(p.dtype, p.layout, p.w_dims);
    conv.set(p);
    std::vector<int> out(p.x_dims.size());
    CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv.get(), x.get(), w.get(), static_cast<int>(out.size()),
                                                      out.data()));
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != p.y_dims[i])
        throw std::invalid_argument("cuDNN computes output dim " + std::to_string(i) + " = " +
                                    std::to_string(out[i]) + " but the problem says " +
                                    std::to_string(p.y_dims[i]) + ": " + p.describe());
  }
};

// This thread's cuDNN handle for `device`, bound to torch's current stream on that device. One per thread and
// device (handle.cpp); a thread that ends gives its handles back to a pool, and they are never destroyed
// (destroying them during interpreter exit races CUDA's own teardown).
cudnnHandle_t handle_for(int device);

// Handles made over the process, and how many of them no thread holds now (the long-run and thread checks: a
// loop of calls, or threads that come and go, must not make more).
struct HandleCounts {
  long created = 0;
  long pooled = 0;
};
HandleCounts handle_counts();

}  // namespace cudnn_algos
