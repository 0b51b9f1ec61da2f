// Traits per direction: everything that differs between forward, backward-data and backward-filter.
// The search (legacy_search.cpp) is written once against these.
//
// Operand roles, in cuDNN's terms of y = conv(x, w):
//   forward          reads x, w   writes y
//   backward_data    reads w, dy  writes dx   (dy lives in the y buffer, dx in the x buffer)
//   backward_filter  reads x, dy  writes dw
#pragma once

#include <cudnn.h>

#include <array>
#include <stdexcept>
#include <type_traits>

#include "conv_params.h"
#include "descriptors.h"

namespace cudnn_algos {

enum class Direction { Forward = 0, BackwardData = 1, BackwardFilter = 2 };
enum class Operand { X, W, Y };

template <Direction D>
struct DirectionTraits;

template <>
struct DirectionTraits<Direction::Forward> {
  using perf_t = cudnnConvolutionFwdAlgoPerf_t;
  using algo_t = cudnnConvolutionFwdAlgo_t;
  static constexpr const char* name = "forward";
  static constexpr Operand output = Operand::Y;
  // graph API: the operation descriptor and its attributes (alpha, beta, conv, x, w, y)
  static constexpr cudnnBackendDescriptorType_t op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
  static constexpr std::array<cudnnBackendAttributeName_t, 6> op_attrs = {
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
  static constexpr std::array<const char*, 8> algo_names = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
      "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static_assert(algo_names.size() == CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "cuDNN's forward algorithm list changed");

  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
  static cudnnStatus_t find(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnFindConvolutionForwardAlgorithm(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), n, got, out);
  }
  static cudnnStatus_t find_ex(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, int n, int* got,
                               perf_t* out, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, d.x.get(), b.x, d.w.get(), b.w, d.conv.get(), d.y.get(), b.y,
                                                  n, got, out, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), n, got, out);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ProblemDescriptors& d, algo_t a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), a, bytes);
  }
  static cudnnStatus_t execute(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, algo_t a, void* ws,
                               size_t ws_bytes, const void* alpha, const void* beta) {
    return cudnnConvolutionForward(h, alpha, d.x.get(), b.x, d.w.get(), b.w, d.conv.get(), a, ws, ws_bytes, beta,
                                   d.y.get(), b.y);
  }
};

template <>
struct DirectionTraits<Direction::BackwardData> {
  using perf_t = cudnnConvolutionBwdDataAlgoPerf_t;
  using algo_t = cudnnConvolutionBwdDataAlgo_t;
  static constexpr const char* name = "backward_data";
  static constexpr Operand output = Operand::X;
  static constexpr cudnnBackendDescriptorType_t op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
  static constexpr std::array<cudnnBackendAttributeName_t, 6> op_attrs = {
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
  static constexpr std::array<const char*, 6> algo_names = {
      "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static_assert(algo_names.size() == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                "cuDNN's backward-data algorithm list changed");

  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnFindConvolutionBackwardDataAlgorithm(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), n, got, out);
  }
  static cudnnStatus_t find_ex(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, int n, int* got,
                               perf_t* out, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w.get(), b.w, d.y.get(), b.y, d.conv.get(), d.x.get(),
                                                       b.x, n, got, out, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), n, got,
                                                       out);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ProblemDescriptors& d, algo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), a, bytes);
  }
  static cudnnStatus_t execute(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, algo_t a, void* ws,
                               size_t ws_bytes, const void* alpha, const void* beta) {
    return cudnnConvolutionBackwardData(h, alpha, d.w.get(), b.w, d.y.get(), b.y, d.conv.get(), a, ws, ws_bytes,
                                        beta, d.x.get(), b.x);
  }
};

template <>
struct DirectionTraits<Direction::BackwardFilter> {
  using perf_t = cudnnConvolutionBwdFilterAlgoPerf_t;
  using algo_t = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr const char* name = "backward_filter";
  static constexpr Operand output = Operand::W;
  static constexpr cudnnBackendDescriptorType_t op_type =
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
  static constexpr std::array<cudnnBackendAttributeName_t, 6> op_attrs = {
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
  static constexpr std::array<const char*, 7> algo_names = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  static_assert(algo_names.size() == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                "cuDNN's backward-filter algorithm list changed");

  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), n, got,
                                                       out);
  }
  static cudnnStatus_t find_ex(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, int n, int* got,
                               perf_t* out, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x.get(), b.x, d.y.get(), b.y, d.conv.get(), d.w.get(),
                                                         b.w, n, got, out, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const ProblemDescriptors& d, int n, int* got, perf_t* out) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), n, got,
                                                         out);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ProblemDescriptors& d, algo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), a,
                                                          bytes);
  }
  static cudnnStatus_t execute(cudnnHandle_t h, const ProblemDescriptors& d, const Buffers& b, algo_t a, void* ws,
                               size_t ws_bytes, const void* alpha, const void* beta) {
    return cudnnConvolutionBackwardFilter(h, alpha, d.x.get(), b.x, d.y.get(), b.y, d.conv.get(), a, ws, ws_bytes,
                                          beta, d.w.get(), b.w);
  }
};

// Calls f(std::integral_constant<Direction, D>{}) for the run-time direction: the one place where a run-time
// direction becomes a compile-time traits choice (the legacy search and the engine search both use it).
template <typename F>
decltype(auto) with_direction(Direction dir, F&& f) {
  switch (dir) {
    case Direction::Forward: return f(std::integral_constant<Direction, Direction::Forward>{});
    case Direction::BackwardData: return f(std::integral_constant<Direction, Direction::BackwardData>{});
    case Direction::BackwardFilter: return f(std::integral_constant<Direction, Direction::BackwardFilter>{});
  }
  throw std::invalid_argument("unknown direction");
}

// The direction's name ("forward", "backward_data", "backward_filter"): its traits' name.
inline const char* direction_name(Direction dir) {
  return with_direction(dir, [](auto d) { return DirectionTraits<decltype(d)::value>::name; });
}

}  // namespace cudnn_algos
