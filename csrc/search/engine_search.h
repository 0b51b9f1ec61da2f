// The cuDNN 9 graph API's view of one convolution: engines x knob choices, each finalized into an execution plan.
// What torch's own cuDNN convolution runs is one of these plans; the legacy algorithms are a thin view over them.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/backend_desc.h"
#include "../common/check.h"
#include "../common/conv_params.h"
#include "../common/directions.h"
#include "../clock/timing.h"
#include "graph.h"

namespace cudnn_algos {

// cuDNN's heuristic lists by the names the package gives them: its mode and the source its rows carry. The one C++
// place that names them (the binding's HeuristicList enum is made from it); cudnn_algos/configs.py's LISTS is the one
// Python place (tests/test_configs_cpu.py checks that the two agree).
struct HeuristicList {
  const char* name;
  cudnnBackendHeurMode_t mode;
  const char* source;
};
inline constexpr HeuristicList kHeuristicLists[] = {{"instant", CUDNN_HEUR_MODE_INSTANT, "heuristic_instant"},
                                                    {"a", CUDNN_HEUR_MODE_A, "heuristic_a"},
                                                    {"b", CUDNN_HEUR_MODE_B, "heuristic_b"},
                                                    {"fallback", CUDNN_HEUR_MODE_FALLBACK, "fallback"}};

// One engine configuration (engine + knob choices) and, when it finalized, its execution plan.
class EnginePlan {
 public:
  int64_t engine_id = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // (cudnnBackendKnobType_t, value)
  std::vector<int> numerical_notes;                // cudnnBackendNumericalNote_t values
  std::vector<int> behavior_notes;                 // cudnnBackendBehaviorNote_t values
  std::vector<std::string> sources;                // "heuristic_instant", "heuristic_a", ..., "exhaustive", "refine"
  std::vector<std::pair<std::string, int>> heuristic_ranks;  // (source, position in that list)
  std::string status = "SUCCESS";                  // short cuDNN status of the first step that failed
  std::string stage;                               // "engine", "config" or "plan": where it failed
  int64_t workspace_bytes = -1;
  double build_ms = -1;                            // host ms its plan took to finalize (runtime compilation in it)
  std::string plan_json;                           // cuDNN's own description of the plan, when it gives one

  bool ok() const { return status == "SUCCESS"; }
  // operands: the epilogue's, in the graph's order (Note [fused graphs]); none for a convolution alone.
  // split_ns (optional, 4 entries): adds the host time of its steps: device guard and handle, workspace, variant
  // pack, cudnnBackendExecute (the operator's Note [host stages])
  void execute(const Buffers& b, const std::vector<void*>& operands, int64_t* split_ns = nullptr);
  void execute(const Buffers& b, int64_t* split_ns = nullptr) { execute(b, {}, split_ns); }
  // `iters` back-to-back executions rotating through the buffer sets (see time_loop in timing.h); operands: none,
  // or one list per set
  CallTiming time_calls(const std::vector<Buffers>& sets, int iters,
                        const std::vector<std::vector<void*>>& operands = {});

  const ConvProblem& problem() const;

  std::shared_ptr<EngineGraph> graph;
  BackendDesc config;
  BackendDesc plan;
  int device = 0;
  bool dbl = false;
};

struct EngineSearchOptions {
  std::vector<cudnnBackendHeurMode_t> heuristics{CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                                 CUDNN_HEUR_MODE_FALLBACK};
  bool exhaustive = false;
  int64_t max_configs = 64;   // with exhaustive: at most this many configurations in all (heuristic ones first;
                              // engines that reject the graph are rows that do not count)
  bool runtime_compiled = true;  // finalize plans of engines that compile at run time (NVRTC: slow to build)
  // refine: configurations (engine id, (knob type, value) pairs) whose neighbours to build: each knob's other
  // values, one knob at a time; counted against max_configs like the exhaustive ones
  std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> seeds;
  // exact: build exactly these configurations (source "exact"; only the knobs named are set: one not named is the
  // engine's own default, as in a list's configuration that sets none, and one the engine lacks is dropped), e.g.
  // to time one row again or run a stored winner; built after the heuristic lists, counted like them by exhaustive
  std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> exact;
  // false: the heuristic lists' configurations only (engine, knobs, notes: status "NOT_BUILT"), no plan finalized:
  // what choosing among them without building costs (the pinned operator's unseen-problem handler)
  bool build = true;
  // threads that finalize the plans (each with its own cuDNN handle; finalizing is host work, and a search's
  // plans are independent); 1: one after another on the calling thread. The rows, their order and their plans
  // are the same either way: only the search's host time differs.
  int build_threads = 1;
  // the pointwise ops after the convolution (Note [fused graphs]); empty: the convolution alone. A graph no engine
  // runs is one row with stage "graph" and its status.
  std::vector<EpilogueOp> epilogue;
};

struct EngineSearchOutput {
  std::vector<std::shared_ptr<EnginePlan>> plans;
  int64_t engine_count = 0;  // engines cuDNN has for this operation graph
  double search_ms = 0;      // host time to enumerate and finalize
  // per heuristic list asked for: host ms of its query (the heuristic descriptor finalized and its ranked
  // configurations read: what choosing without timing costs), in the order asked
  std::vector<std::pair<std::string, double>> heuristic_query_ms;
};

EngineSearchOutput engine_search(Direction dir, const ConvProblem& problem, const EngineSearchOptions& opt,
                                 int device);

// The plans of an unbuilt search's rows (build=False: status "NOT_BUILT"), built from the very configurations its
// lists gave, on `threads` threads (this one and threads - 1 more, each with its own handle): no list is asked, so
// this may run on another thread than the one that listed them (engines Note [building ahead]). A row that fails
// keeps its status. Returns the host ms it took.
double build_listed(const std::vector<std::shared_ptr<EnginePlan>>& plans, int threads, int device);

// Note [serialized plans]: a built plan's JSON representation (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, read
// whole: its length asked first) is what cuDNN lets a later process keep; set on a new plan descriptor with this
// process's handle and finalized, it is the same plan without building it again (for a runtime-compiled engine, no
// second compilation, where cuDNN's serialization holds the kernel). serialize_plan: "" where cuDNN gives none.
// plan_from_json: the plan for the same direction, problem and epilogue (the graph is built for its operands' uids
// and checks, no engine is asked); a JSON cuDNN refuses gives a row whose status says so, stage "plan".
std::string serialize_plan(const EnginePlan& plan);
std::shared_ptr<EnginePlan> plan_from_json(Direction dir, const ConvProblem& problem,
                                           const std::vector<EpilogueOp>& epilogue, const std::string& json,
                                           int device);

// The heuristic lists engine_search asks by name, as (name, the source its rows carry), in their table's order.
std::vector<std::pair<std::string, std::string>> heuristic_lists();

}  // namespace cudnn_algos
