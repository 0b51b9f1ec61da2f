// The legacy search, written once and specialised per direction through DirectionTraits.
#include "legacy_search.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "../common/check.h"
#include "../common/descriptors.h"
#include "../common/workspace.h"

namespace cudnn_algos {

const char* math_type_name(cudnnMathType_t m) {
  for (const auto& [name, e] : kMathTypes)
    if (e == m) return name;
  return "";
}

namespace {

template <Direction D>
struct LegacySearch {
  using T = DirectionTraits<D>;
  using perf_t = typename T::perf_t;
  using algo_t = typename T::algo_t;
  static constexpr int kAlgos = static_cast<int>(T::algo_names.size());

  // Workspace each algorithm needs under the descriptor's current math type; -1 where cuDNN declines to say.
  static std::vector<int64_t> workspace_sizes(cudnnHandle_t h, const ProblemDescriptors& d) {
    std::vector<int64_t> sizes(kAlgos, -1);
    for (int a = 0; a < kAlgos; ++a) {
      size_t bytes = 0;
      if (T::workspace(h, d, static_cast<algo_t>(a), &bytes) == CUDNN_STATUS_SUCCESS)
        sizes[a] = static_cast<int64_t>(bytes);
    }
    return sizes;
  }

  static AlgoRow row_from(const perf_t& p, int rank, Mode mode) {
    AlgoRow r;
    r.algo_id = static_cast<int>(p.algo);
    r.algo = (r.algo_id >= 0 && r.algo_id < kAlgos) ? T::algo_names[r.algo_id] : "UNKNOWN_" + std::to_string(r.algo_id);
    r.status = short_status_name(p.status);
    r.status_code = static_cast<int>(p.status);
    r.rank = rank;
    r.math_type = math_type_name(p.mathType);
    if (p.status == CUDNN_STATUS_SUCCESS) {
      r.time_ms = (mode == Mode::Heuristic || !std::isfinite(p.time)) ? -1.0 : static_cast<double>(p.time);
      r.workspace_bytes = static_cast<int64_t>(p.memory);
      r.deterministic = p.determinism == CUDNN_DETERMINISTIC ? 1 : 0;
    }
    return r;
  }

  static SearchOutput run(const ConvProblem& problem, Mode mode, const Buffers* buffers, int64_t limit, int device) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    cudnnHandle_t h = handle_for(device);
    ProblemDescriptors d(problem);

    int max_count = 0;
    CUDNN_CHECK(T::max_count(h, &max_count));
    max_count = std::max(max_count, kAlgos);
    std::vector<perf_t> perf(max_count);
    const std::vector<int64_t> ws_need = workspace_sizes(h, d);

    SearchOutput out;
    c10::DataPtr ws;
    size_t ws_bytes = 0;
    if (mode == Mode::FindEx) {
      if (buffers == nullptr) throw std::invalid_argument("find_ex needs the operand tensors");
      // Largest workspace any algorithm asks for, within the limit; step down through smaller needs on OOM so
      // the algorithms that fit are still timed (those that don't are rows saying so).
      std::vector<size_t> candidates{0};
      for (int64_t n : ws_need)
        if (n > 0 && (limit < 0 || n <= limit)) candidates.push_back(static_cast<size_t>(n));
      std::sort(candidates.rbegin(), candidates.rend());
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      for (size_t want : candidates) {
        try {
          ws = allocate_workspace(want);
          ws_bytes = want;
          break;
        } catch (const c10::OutOfMemoryError&) {
          continue;
        }
      }
      out.workspace_given = static_cast<int64_t>(ws_bytes);
    }

    int returned = 0;
    const auto t0 = std::chrono::steady_clock::now();
    switch (mode) {
      case Mode::Find: CUDNN_CHECK(T::find(h, d, max_count, &returned, perf.data())); break;
      case Mode::FindEx:
        CUDNN_CHECK(T::find_ex(h, d, *buffers, max_count, &returned, perf.data(), ws.get(), ws_bytes));
        break;
      case Mode::Heuristic: CUDNN_CHECK(T::heuristic(h, d, max_count, &returned, perf.data())); break;
    }
    out.search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.returned = returned;

    std::vector<bool> seen(kAlgos, false);
    for (int i = 0; i < returned; ++i) {
      AlgoRow r = row_from(perf[i], i, mode);
      if (r.algo_id >= 0 && r.algo_id < kAlgos) {
        seen[r.algo_id] = true;
        const int64_t need = ws_need[r.algo_id];
        if (r.status == "SUCCESS" && limit >= 0 && r.workspace_bytes > limit) {
          r.note = "needs " + std::to_string(r.workspace_bytes) + " B of workspace, over the limit of " +
                   std::to_string(limit) + " B";
          r.status = "WORKSPACE_LIMIT_EXCEEDED";
          r.status_code = -1;
        } else if (r.status != "SUCCESS" && need >= 0) {
          if (limit >= 0 && need > limit) {
            r.note = "needs " + std::to_string(need) + " B of workspace, over the limit of " + std::to_string(limit) +
                     " B (cuDNN said " + r.status + ")";
            r.status = "WORKSPACE_LIMIT_EXCEEDED";
            r.status_code = -1;
          } else if (mode == Mode::FindEx && need > static_cast<int64_t>(ws_bytes)) {
            r.note = "needs " + std::to_string(need) + " B of workspace; only " + std::to_string(ws_bytes) +
                     " B could be allocated";
          }
          if (r.workspace_bytes < 0) r.workspace_bytes = need;
        }
      }
      out.rows.push_back(std::move(r));
    }
    for (int a = 0; a < kAlgos; ++a) {
      if (seen[a]) continue;
      AlgoRow r;
      r.algo_id = a;
      r.algo = T::algo_names[a];
      r.status = "NOT_RETURNED";
      r.workspace_bytes = ws_need[a];
      r.note = "absent from cuDNN's result list";
      out.rows.push_back(std::move(r));
    }
    return out;
  }

  // One algorithm, ready to run repeatedly: descriptors, math type and workspace are set up once, so a loop of
  // call()s costs what cuDNN itself costs per call (on cuDNN 9 the legacy API rebuilds its plan inside each call).
  class Executor {
   public:
    Executor(const ConvProblem& problem, int algo_id, cudnnMathType_t math, int64_t limit, int device)
        : guard_(static_cast<c10::DeviceIndex>(device)), d_(problem) {
      if (algo_id < 0 || algo_id >= kAlgos)
        throw std::invalid_argument(std::string(T::name) + " algorithm id " + std::to_string(algo_id) +
                                    " is out of range 0.." + std::to_string(kAlgos - 1));
      handle_ = handle_for(device);
      d_.conv.set_math(math);
      algo_ = static_cast<algo_t>(algo_id);
      CUDNN_CHECK(T::workspace(handle_, d_, algo_, &ws_bytes_));
      if (limit >= 0 && static_cast<int64_t>(ws_bytes_) > limit)
        throw std::invalid_argument(std::string(T::algo_names[algo_id]) + " needs " + std::to_string(ws_bytes_) +
                                    " B of workspace, over workspace_limit=" + std::to_string(limit));
      ws_ = allocate_workspace(ws_bytes_);
      dbl_ = problem.dtype == CUDNN_DATA_DOUBLE;
    }
    void call(const Buffers& b) {
      const double one_d = 1.0, zero_d = 0.0;
      const float one_f = 1.0f, zero_f = 0.0f;
      const void* alpha = dbl_ ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
      const void* beta = dbl_ ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
      CUDNN_CHECK(T::execute(handle_, d_, b, algo_, ws_.get(), ws_bytes_, alpha, beta));
      check_launches("a kernel launch inside the legacy cudnnConvolution* call", __FILE__, __LINE__);
    }
   private:
    c10::cuda::CUDAGuard guard_;
    ProblemDescriptors d_;
    cudnnHandle_t handle_ = nullptr;
    algo_t algo_{};
    size_t ws_bytes_ = 0;
    c10::DataPtr ws_;
    bool dbl_ = false;
  };

  static void execute(const ConvProblem& problem, int algo_id, cudnnMathType_t math, const Buffers& b, int64_t limit,
                      int device) {
    Executor(problem, algo_id, math, limit, device).call(b);
  }

  // `iters` back-to-back calls, rotating through the buffer sets (see time_loop in timing.h).
  static CallTiming time_calls(const ConvProblem& problem, int algo_id, cudnnMathType_t math,
                               const std::vector<Buffers>& sets, int iters, int64_t limit, int device) {
    if (sets.empty() || iters < 1) throw std::invalid_argument("time_calls needs >= 1 buffer set and iters >= 1");
    Executor ex(problem, algo_id, math, limit, device);
    return time_loop(c10::cuda::getCurrentCUDAStream(device).stream(), iters,
                     [&](int i) { ex.call(sets[i % sets.size()]); });
  }
};

}  // namespace

SearchOutput legacy_search(Direction dir, const ConvProblem& problem, Mode mode, const Buffers* buffers,
                           int64_t workspace_limit, int device) {
  return with_direction(dir, [&](auto d) {
    return LegacySearch<decltype(d)::value>::run(problem, mode, buffers, workspace_limit, device);
  });
}

void legacy_execute(Direction dir, const ConvProblem& problem, int algo_id, cudnnMathType_t math,
                    const Buffers& buffers, int64_t workspace_limit, int device) {
  with_direction(dir, [&](auto d) {
    LegacySearch<decltype(d)::value>::execute(problem, algo_id, math, buffers, workspace_limit, device);
  });
}

CallTiming legacy_time_calls(Direction dir, const ConvProblem& problem, int algo_id, cudnnMathType_t math,
                             const std::vector<Buffers>& sets, int iters, int64_t workspace_limit, int device) {
  return with_direction(dir, [&](auto d) {
    return LegacySearch<decltype(d)::value>::time_calls(problem, algo_id, math, sets, iters, workspace_limit, device);
  });
}

std::vector<std::string> algo_names(Direction dir) {
  return with_direction(dir, [](auto d) {
    const auto& names = DirectionTraits<decltype(d)::value>::algo_names;
    return std::vector<std::string>(names.begin(), names.end());
  });
}

}  // namespace cudnn_algos
