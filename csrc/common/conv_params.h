// The convolution a search is about, in cuDNN's terms: x (input), w (filter), y (output) of
// y = conv(x, w). Python (cudnn_algos/spec.py) builds it; a Conv1d arrives already lifted to 2-d (H = 1) and a
// transposed convolution already mirrored, so everything here is a plain cross-correlation.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cudnn_algos {

enum class Layout { NCHW, NHWC };  // NHWC also stands for NDHWC: channels last

// cuDNN's math types and the layouts by the names the package gives them: the binding's MathType and Layout enums
// are made from these, and a legacy row's math type is named from the first.
inline constexpr std::pair<const char*, cudnnMathType_t> kMathTypes[] = {
    {"default", CUDNN_DEFAULT_MATH},
    {"tensor_op", CUDNN_TENSOR_OP_MATH},
    {"tensor_op_allow_conversion", CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION},
    {"fma", CUDNN_FMA_MATH}};
inline constexpr std::pair<const char*, Layout> kLayouts[] = {{"nchw", Layout::NCHW}, {"nhwc", Layout::NHWC}};

// "(2,64,56,56)"
template <typename T>
std::string join(const std::vector<T>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + ")";
}

struct ConvProblem {
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  Layout layout = Layout::NCHW;
  std::vector<int64_t> x_dims;  // N, C, spatial...   (4 or 5 entries)
  std::vector<int64_t> w_dims;  // K, C/groups, spatial...
  std::vector<int64_t> y_dims;  // N, K, spatial...
  std::vector<int> padding, stride, dilation;  // one per spatial dim
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;

  int spatial_dims() const { return static_cast<int>(x_dims.size()) - 2; }

  // Accumulation type: cuDNN computes half and bfloat16 convolutions in float, as torch does.
  cudnnDataType_t compute_type() const { return dtype == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

  // Strides of a packed tensor with these dims in this problem's layout.
  std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) const {
    const size_t n = dims.size();
    std::vector<int64_t> s(n);
    if (layout == Layout::NCHW) {
      int64_t acc = 1;
      for (size_t i = n; i-- > 0;) { s[i] = acc; acc *= dims[i]; }
    } else {  // N, then spatial dims outermost-first, then C innermost
      int64_t acc = 1;
      s[1] = acc; acc *= dims[1];
      for (size_t i = n; i-- > 2;) { s[i] = acc; acc *= dims[i]; }
      s[0] = acc;
    }
    return s;
  }

  void validate() const {
    const size_t n = x_dims.size();
    if (n < 4 || n > 5 || w_dims.size() != n || y_dims.size() != n)
      throw std::invalid_argument("ConvProblem: x, w, y need 4 or 5 dims each (Conv1d is lifted to 2-d)");
    const size_t s = n - 2;
    if (padding.size() != s || stride.size() != s || dilation.size() != s)
      throw std::invalid_argument("ConvProblem: padding, stride, dilation need one entry per spatial dim");
    if (groups < 1) throw std::invalid_argument("ConvProblem: groups must be >= 1");
  }

  // Plain string building: no iostreams (an ostringstream here crashed on the GPU machine's image, inside
  // libstdc++'s operator<<, when called from a pytest process; std::to_string has no such dependency).
  std::string describe() const {
    std::string s;
    s += "x=" + join(x_dims) + " w=" + join(w_dims) + " y=" + join(y_dims);
    s += " pad=" + join(padding) + " stride=" + join(stride) + " dilation=" + join(dilation);
    s += " groups=" + std::to_string(groups) + " layout=" + (layout == Layout::NCHW ? "NCHW" : "NHWC");
    return s;
  }
};

// Device pointers of the three operands; which one is written depends on the direction.
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
};

}  // namespace cudnn_algos
