// The names of cuDNN's knob types and engine notes, checked against the cuDNN headers this is built with.
//
// Each table is append-only: entry i names the enum value i, spelled with cuDNN's own enumerator, and a
// static_assert checks that the values run 0, 1, 2, ... So a cuDNN whose header renumbers or drops one fails the
// build here instead of a row printing another knob's name. Values newer than the oldest supported cuDNN are
// appended under the version that introduced them. The Python side (cudnn_algos/configs.py: KNOBS,
// NUMERICAL_NOTES, BEHAVIOR_NOTES) must start with the same names; tests/test_configs_cpu.py checks it through
// the extension's knob_names(), numerical_note_names() and behavior_note_names().
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

namespace cudnn_algos {

struct EnumName {
  int value;
  const char* name;
};

template <size_t N>
constexpr bool dense(const EnumName (&table)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (table[i].value != static_cast<int>(i)) return false;
  return true;
}

// some knob types are deprecated in cuDNN's header; they are still reported by engines, so they are still named
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

#define CUDNN_ALGOS_NAME(prefix, x) EnumName{static_cast<int>(prefix##x), #x}

inline constexpr EnumName kKnobNames[] = {
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_K),         CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SWIZZLE),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_SIZE),       CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, USE_TEX),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, EDGE),            CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, KBLOCK),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, LDGA),            CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, LDGB),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, CHUNK_K),         CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_H),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, WINO_TILE),       CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, MULTIPLY),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_K_BUF),     CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILEK),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, STAGES),          CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, REDUCTION_MODE),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, CTA_SPLIT_K_MODE), CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_K_SLC),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, IDX_MODE),        CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SLICED),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_RS),        CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SINGLEBUFFER),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, LDGC),            CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPECFILT),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, KERNEL_CFG),      CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, WORKSPACE),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_CGA),        CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_CGA_M),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_CGA_N),      CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, BLOCK_SIZE),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, OCCUPANCY),       CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, ARRAY_SIZE_PER_THREAD),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, NUM_C_PER_BLOCK), CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_COLS),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_ROWS),       CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_COLS),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, LOAD_SIZE),       CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, CTA_COUNT),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, STREAM_K),        CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SPLIT_P_SLC),
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_M),
#if CUDNN_VERSION >= 90700
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, TILE_N),          CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, WARP_SPEC_CFG),
#endif
#if CUDNN_VERSION >= 91800
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, SWAP_AB),
#endif
#if CUDNN_VERSION >= 92200
    CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, INPUT_TMA_ENABLE), CUDNN_ALGOS_NAME(CUDNN_KNOB_TYPE_, OUTPUT_TMA_ENABLE),
#endif
};

inline constexpr EnumName kNumericalNoteNames[] = {
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, TENSOR_CORE),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, DOWN_CONVERT_INPUTS),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, REDUCED_PRECISION_REDUCTION),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, FFT),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, NONDETERMINISTIC),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, WINOGRAD),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, WINOGRAD_TILE_4x4),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, WINOGRAD_TILE_6x6),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, WINOGRAD_TILE_13x13),
    CUDNN_ALGOS_NAME(CUDNN_NUMERICAL_NOTE_, STRICT_NAN_PROP),
};

inline constexpr EnumName kBehaviorNoteNames[] = {
    CUDNN_ALGOS_NAME(CUDNN_BEHAVIOR_NOTE_, RUNTIME_COMPILATION),
    CUDNN_ALGOS_NAME(CUDNN_BEHAVIOR_NOTE_, REQUIRES_FILTER_INT8x32_REORDER),
    CUDNN_ALGOS_NAME(CUDNN_BEHAVIOR_NOTE_, REQUIRES_BIAS_INT8x32_REORDER),
    CUDNN_ALGOS_NAME(CUDNN_BEHAVIOR_NOTE_, SUPPORTS_CUDA_GRAPH_NATIVE_API),
    CUDNN_ALGOS_NAME(CUDNN_BEHAVIOR_NOTE_, CUBLASLT_DEPENDENCY),
};

#undef CUDNN_ALGOS_NAME

template <size_t N>
std::vector<std::string> names_of(const EnumName (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& e : table) out.emplace_back(e.name);
  return out;
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static_assert(dense(kKnobNames), "cuDNN's knob types are not numbered as kKnobNames lists them");
static_assert(dense(kNumericalNoteNames), "cuDNN's numerical notes are not numbered as kNumericalNoteNames lists them");
static_assert(dense(kBehaviorNoteNames), "cuDNN's behaviour notes are not numbered as kBehaviorNoteNames lists them");
// a value newer than the tables (a later cuDNN) is not named: it prints as KNOB_<n> (NUMERICAL_<n>, BEHAVIOR_<n>)
// until it is appended; a table longer than the header's count names a value this cuDNN does not have
static_assert(std::size(kKnobNames) <= CUDNN_KNOB_TYPE_COUNTS, "kKnobNames names a knob type this cuDNN lacks");
static_assert(std::size(kNumericalNoteNames) <= CUDNN_NUMERICAL_NOTE_TYPE_COUNT, "a numerical note this cuDNN lacks");
static_assert(std::size(kBehaviorNoteNames) <= CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, "a behaviour note this cuDNN lacks");

}  // namespace cudnn_algos
