// The dtypes cuDNN convolves here, once: the name Python uses, cuDNN's data type and torch's scalar type.
#pragma once

#include <c10/core/ScalarType.h>
#include <cudnn.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>

namespace cudnn_algos {

struct DtypeInfo {
  const char* name;
  cudnnDataType_t cudnn;
  c10::ScalarType scalar;
};

inline constexpr std::array<DtypeInfo, 4> kDtypes{{{"float32", CUDNN_DATA_FLOAT, c10::ScalarType::Float},
                                                   {"float16", CUDNN_DATA_HALF, c10::ScalarType::Half},
                                                   {"bfloat16", CUDNN_DATA_BFLOAT16, c10::ScalarType::BFloat16},
                                                   {"float64", CUDNN_DATA_DOUBLE, c10::ScalarType::Double}}};

// The entry for a cuDNN data type (nullopt: not one convolved here).
inline std::optional<DtypeInfo> dtype_info(cudnnDataType_t d) {
  for (const auto& e : kDtypes)
    if (e.cudnn == d) return e;
  return std::nullopt;
}

// The entry for a torch scalar type (nullopt: not one cuDNN convolves here).
inline std::optional<DtypeInfo> dtype_info(c10::ScalarType t) {
  for (const auto& e : kDtypes)
    if (e.scalar == t) return e;
  return std::nullopt;
}

// The entry for a dtype name; std::invalid_argument naming the valid ones otherwise.
inline DtypeInfo dtype_info(const std::string& name) {
  std::string valid;
  for (const auto& e : kDtypes) {
    if (name == e.name) return e;
    valid += (valid.empty() ? "" : ", ") + std::string(e.name);
  }
  throw std::invalid_argument("dtype='" + name + "' is not one of: " + valid);
}

}  // namespace cudnn_algos
