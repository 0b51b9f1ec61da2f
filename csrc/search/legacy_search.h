// The legacy (cuDNN 7-style) algorithm search: cudnnFind*, cudnnFind*Ex, cudnnGet*_v7, and executing one algorithm.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/check.h"
#include "../common/conv_params.h"
#include "../common/directions.h"
#include "../clock/timing.h"

namespace cudnn_algos {

enum class Mode { Find, FindEx, Heuristic };

// One algorithm (under one math type) of one search. Statuses are data: a failed algorithm is a row.
struct AlgoRow {
  int algo_id = -1;
  std::string algo;
  std::string status;        // short cuDNN status name ("SUCCESS", "NOT_SUPPORTED", ...) or one of ours:
                             // "NOT_RETURNED" (absent from cuDNN's list), "WORKSPACE_LIMIT_EXCEEDED"
  int status_code = -1;      // cuDNN's numeric status; -1 for our own statuses
  double time_ms = -1;       // as cuDNN reported it; < 0 when there is none (failure, heuristic mode)
  int64_t workspace_bytes = -1;  // < 0 when unknown
  int deterministic = -1;    // 1 / 0, -1 when unknown
  std::string math_type;     // "default", "tensor_op", "tensor_op_allow_conversion", "fma", "" when unknown
  int rank = -1;             // position in cuDNN's returned list (0 = cuDNN's first choice), -1 if absent
  std::string note;
};

struct SearchOutput {
  std::vector<AlgoRow> rows;
  int64_t workspace_given = -1;  // find_ex: the workspace handed to cuDNN, bytes
  double search_ms = 0;          // host wall time of the cuDNN search call itself
  int returned = 0;              // how many perf results cuDNN returned
};

SearchOutput legacy_search(Direction dir, const ConvProblem& problem, Mode mode, const Buffers* buffers,
                           int64_t workspace_limit, int device);

void legacy_execute(Direction dir, const ConvProblem& problem, int algo_id, cudnnMathType_t math,
                    const Buffers& buffers, int64_t workspace_limit, int device);

CallTiming legacy_time_calls(Direction dir, const ConvProblem& problem, int algo_id, cudnnMathType_t math,
                             const std::vector<Buffers>& sets, int iters, int64_t workspace_limit, int device);

std::vector<std::string> algo_names(Direction dir);

const char* math_type_name(cudnnMathType_t m);

}  // namespace cudnn_algos
