// Engine x knob search through cuDNN's backend (graph) API, written once and specialised per direction through
// DirectionTraits (operation type and attribute names).
//
// Note [statuses in the engine search]: an engine that does not support the graph, a knob choice that fails to
// finalize, or a plan that fails to build is data (a plan row whose `status` and `stage` say so); only a failure
// to describe the problem itself (tensors, convolution, operation graph) is an exception.
#include "engine_search.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "../common/backend_desc.h"
#include "../common/check.h"
#include "../common/descriptors.h"
#include "../common/workspace.h"

namespace cudnn_algos {

namespace {

// the entry of kHeuristicLists (engine_search.h) for a mode
const HeuristicList& heuristic_list(cudnnBackendHeurMode_t mode) {
  for (const auto& l : kHeuristicLists)
    if (l.mode == mode) return l;
  throw std::invalid_argument("heuristic mode " + std::to_string(static_cast<int>(mode)) +
                              " is not one of the package's lists");
}

// The plan of a config whose notes are read: finalized with `handle` (the building thread's own); a failure is
// recorded on the row.
void build_plan(EnginePlan& pl, cudnnHandle_t h) {
  pl.plan = BackendDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnBackendDescriptor_t cfg = pl.config.get();
  set_attr(pl.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h);
  set_attr(pl.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const cudnnStatus_t s = cudnnBackendFinalize(pl.plan.get());
  pl.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s != CUDNN_STATUS_SUCCESS) {
    pl.status = short_status_name(s);
    pl.stage = "plan";
    pl.plan = BackendDesc();
    return;
  }
  pl.workspace_bytes = get_int64(pl.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
  std::vector<char> json(1 << 14, 0);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                               static_cast<int64_t>(json.size()), &n, json.data()) == CUDNN_STATUS_SUCCESS)
    pl.plan_json.assign(json.data(), static_cast<size_t>(std::min<int64_t>(n, json.size())));
}

// Builds `plans` on `threads` threads, this one and threads - 1 more, each with its own handle (a cuDNN handle is one
// thread's at a time); where no more threads can be started, those started and this one build them all. The first
// exception any of them threw is rethrown here once all have ended.
void build_plans(const std::vector<std::shared_ptr<EnginePlan>>& plans, int threads, int device) {
  std::atomic<size_t> next{0};
  std::exception_ptr first;
  std::mutex first_mutex;
  auto work = [&] {
    try {
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
      cudnnHandle_t h = handle_for(device);
      for (size_t i = next++; i < plans.size(); i = next++) build_plan(*plans[i], h);
    } catch (...) {
      std::lock_guard<std::mutex> lock(first_mutex);
      if (!first) first = std::current_exception();
      next = plans.size();  // the others stop at their next plan
    }
  };
  std::vector<std::thread> pool;
  const size_t n = std::min(plans.size(), static_cast<size_t>(std::max(threads, 1)));
  try {
    for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {  // no thread to be had (a joinable one destroyed here would terminate)
  }
  work();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

// Notes and knob choices of one finalized engine config, and its plan: built at once, or (defer) left for
// build_plans (the row's `graph` handle is not used then). Returns whether the plan is still to be built.
bool finish_plan(EnginePlan& pl, const BackendDesc& engine, bool runtime_compiled, bool build, bool defer) {
  pl.engine_id = get_int64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  pl.numerical_notes = get_enums<cudnnBackendNumericalNote_t>(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                               CUDNN_TYPE_NUMERICAL_NOTE);
  pl.behavior_notes = get_enums<cudnnBackendBehaviorNote_t>(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                                            CUDNN_TYPE_BEHAVIOR_NOTE);
  const bool rtc = std::find(pl.behavior_notes.begin(), pl.behavior_notes.end(),
                             static_cast<int>(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) != pl.behavior_notes.end();
  if (rtc && !runtime_compiled) {
    pl.status = "SKIPPED_RUNTIME_COMPILATION";
    pl.stage = "plan";
    return false;
  }
  if (!build) {
    pl.status = "NOT_BUILT";
    pl.stage = "plan";
    return false;
  }
  if (defer) return true;
  build_plan(pl, pl.graph->handle);
  return false;
}

// Knob choices of a config, as (type, value) pairs.
std::vector<std::pair<int64_t, int64_t>> knobs_of(const BackendDesc& cfg) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto choices = get_descs(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                           CUDNN_KNOB_TYPE_COUNTS);
  for (auto& c : choices) {
    cudnnBackendKnobType_t type{};
    int64_t n = 0, value = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(c.get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n,
                                         &type));
    CUDNN_CHECK(cudnnBackendGetAttribute(c.get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n,
                                         &value));
    out.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct KnobRange {
  int64_t type, lo, hi, stride;
};

std::vector<KnobRange> knob_ranges(const BackendDesc& engine) {
  std::vector<KnobRange> out;
  auto infos = get_descs(engine, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR,
                         CUDNN_KNOB_TYPE_COUNTS);
  for (auto& k : infos) {
    cudnnBackendKnobType_t type{};
    int64_t n = 0, lo = 0, hi = 0, st = 1;
    CUDNN_CHECK(cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type));
    CUDNN_CHECK(cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &lo));
    CUDNN_CHECK(cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &hi));
    CUDNN_CHECK(cudnnBackendGetAttribute(k.get(), CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &n, &st));
    out.push_back({static_cast<int64_t>(type), lo, hi, std::max<int64_t>(st, 1)});
  }
  return out;
}

// One value per knob range: the given (type, value) where there is one, else the range's minimum.
std::vector<int64_t> knob_values(const std::vector<KnobRange>& ranges,
                                 const std::vector<std::pair<int64_t, int64_t>>& given) {
  std::vector<int64_t> out;
  for (const auto& r : ranges) {
    int64_t v = r.lo;
    for (const auto& [t, val] : given)
      if (t == r.type) v = val;
    out.push_back(v);
  }
  return out;
}

using KnobValues = std::vector<std::pair<int64_t, int64_t>>;

// One search of one problem and direction: the configurations of each phase asked for (heuristic lists, exact
// configurations, exhaustive enumeration, refine around seeds), each built once however many phases name it. The
// phases share what was found (`seen_`, `out_`); each is one method. The operation graph is built by the caller,
// the only direction-specific step.
class EngineSearch {
 public:
  EngineSearch(std::shared_ptr<EngineGraph> graph, const EngineSearchOptions& opt, int device)
      : graph_(std::move(graph)), opt_(opt), device_(device) {
    if (graph_->graph_status == CUDNN_STATUS_SUCCESS)
      out_.engine_count = get_int64(graph_->graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT);
  }

  EngineSearchOutput run() {
    if (graph_->graph_status != CUDNN_STATUS_SUCCESS) {  // an epilogue graph cuDNN would not finalize
      unsupported(short_status_name(graph_->graph_status));
      return std::move(out_);
    }
    heuristic_lists();
    exact_configs();
    if (opt_.exhaustive) exhaustive();
    if (!opt_.seeds.empty()) refine();
    if (!pending_.empty()) build_plans(pending_, opt_.build_threads, device_);
    // a fused graph no list (nor enumeration) offered a configuration for is a row; a convolution's search keeps
    // its rows as the lists gave them (none where a list declines the graph, e.g. B on 3-d)
    if (out_.plans.empty() && !opt_.epilogue.empty()) unsupported("NOT_SUPPORTED");
    return std::move(out_);
  }

 private:
  // 1. heuristics: their ranked engine configs, as cuDNN (and torch) would pick them
  void heuristic_lists() {
    for (const cudnnBackendHeurMode_t mode : opt_.heuristics) {
      const HeuristicList& list = heuristic_list(mode);
      const std::string source = list.source;
      const auto t0 = std::chrono::steady_clock::now();
      auto cfgs = heuristic_configs(list.mode);
      out_.heuristic_query_ms.emplace_back(
          list.name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      for (size_t r = 0; r < cfgs.size(); ++r) {
        auto pl = new_plan();
        pl->config = std::move(cfgs[r]);
        auto engines = get_descs(pl->config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR, 1);
        if (engines.empty()) continue;
        pl->knobs = knobs_of(pl->config);
        pl->engine_id = get_int64(engines[0], CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
        // the same config from another list only records where else it ranked: built once
        if (!seen_.count(std::make_pair(pl->engine_id, pl->knobs))) finish(pl, engines[0], opt_.build);
        add(pl, source, static_cast<int>(r));
      }
    }
  }

  // The ranked configurations of one heuristic mode; none where the mode declines the graph (e.g. B on 3-d).
  std::vector<BackendDesc> heuristic_configs(cudnnBackendHeurMode_t mode) {
    BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendDescriptor_t g = graph_->graph.get();
    set_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &g);
    set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) return {};
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS)
      return {};
    return get_descs(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count);
  }

  // 1b. exact: these configurations as named
  void exact_configs() {
    for (const auto& [id, knobs] : opt_.exact) {
      cudnnStatus_t s{};
      BackendDesc engine = engine_of(id, s);
      if (s != CUDNN_STATUS_SUCCESS) {
        rejected(id, s, "exact");
        continue;
      }
      // only the knobs the name gives: a row's name lists the knobs its configuration set, and a configuration
      // that set none (a fallback list's) is another key than one with every knob at its minimum
      std::vector<KnobRange> named;
      std::vector<int64_t> values;
      for (const auto& r : knob_ranges(engine))
        for (const auto& [t, v] : knobs)
          if (t == r.type) {
            named.push_back(r);
            values.push_back(v);
            break;
          }
      try_config(id, engine, named, values, "exact");
    }
  }

  // 2. exhaustive: every engine, every knob combination, in rounds (one more combination of every engine per
  // round, so a cap still covers every engine) until max_configs configurations exist in all. An engine that
  // does not support the graph is one row (stage "engine") and does not count towards the cap.
  void exhaustive() {
    struct Odometer {
      int64_t id;
      BackendDesc engine;
      std::vector<KnobRange> ranges;
      std::vector<int64_t> value;
      bool done = false;
    };
    std::vector<Odometer> engines;
    for (int64_t e = 0; e < out_.engine_count; ++e) {
      cudnnStatus_t s{};
      BackendDesc engine = engine_of(e, s);
      if (s != CUDNN_STATUS_SUCCESS) {
        rejected(e, s, "exhaustive");
        continue;
      }
      auto ranges = knob_ranges(engine);
      Odometer od{e, std::move(engine), std::move(ranges), {}};
      for (const auto& k : od.ranges) od.value.push_back(k.lo);
      engines.push_back(std::move(od));
    }
    bool more = !engines.empty();
    while (more && configs() < opt_.max_configs) {
      more = false;
      for (auto& od : engines) {
        if (od.done) continue;
        if (configs() >= opt_.max_configs) break;
        try_config(od.id, od.engine, od.ranges, od.value, "exhaustive");
        size_t i = 0;  // this engine's next knob combination (an odometer over the knob ranges)
        for (; i < od.ranges.size(); ++i) {
          od.value[i] += od.ranges[i].stride;
          if (od.value[i] <= od.ranges[i].hi) break;
          od.value[i] = od.ranges[i].lo;
        }
        od.done = i == od.ranges.size();  // all combinations done (or the engine has no knobs)
        more = more || !od.done;
      }
    }
  }

  // 3. refine: around each seed configuration, other values of one knob at a time (the others kept), nearest
  // values first and interleaved over seeds and knobs (distance 1 of every knob of every seed, then distance 2,
  // ...), so that a small cap still explores every knob; until max_configs configurations exist in all.
  void refine() {
    struct Seed {
      int64_t id;
      BackendDesc engine;
      std::vector<KnobRange> ranges;
      std::vector<int64_t> base;
    };
    std::vector<Seed> seeds;
    for (const auto& [id, seed_knobs] : opt_.seeds) {
      cudnnStatus_t s{};
      BackendDesc engine = engine_of(id, s);
      if (s != CUDNN_STATUS_SUCCESS) continue;  // a seed comes from a built plan: its engine supports the graph
      Seed sd{id, std::move(engine), {}, {}};
      sd.ranges = knob_ranges(sd.engine);
      sd.base = knob_values(sd.ranges, seed_knobs);
      seeds.push_back(std::move(sd));
    }
    bool more = true;
    for (int64_t dist = 1; more && configs() < opt_.max_configs; ++dist) {
      more = false;
      for (auto& sd : seeds) {
        for (size_t i = 0; i < sd.ranges.size(); ++i) {
          const auto& r = sd.ranges[i];
          for (const int64_t sign : {-1, 1}) {
            const int64_t v = sd.base[i] + sign * dist * r.stride;
            if (v < r.lo || v > r.hi) continue;
            more = true;
            if (configs() >= opt_.max_configs) break;
            auto values = sd.base;
            values[i] = v;
            try_config(sd.id, sd.engine, sd.ranges, values, "refine");
          }
        }
      }
    }
  }

  // ---- what the phases share
  // A new configuration's notes; its plan built now (one build thread) or queued for the threads at the end.
  void finish(const std::shared_ptr<EnginePlan>& pl, const BackendDesc& engine, bool build) {
    if (finish_plan(*pl, engine, opt_.runtime_compiled, build, opt_.build_threads > 1)) pending_.push_back(pl);
  }

  std::shared_ptr<EnginePlan> new_plan() const {
    auto pl = std::make_shared<EnginePlan>();
    pl->graph = graph_;
    pl->device = device_;
    pl->dbl = graph_->problem.dtype == CUDNN_DATA_DOUBLE;
    return pl;
  }

  // A row: a new configuration, or one more source (and rank) of a configuration already listed.
  void add(std::shared_ptr<EnginePlan> pl, const std::string& source, int rank) {
    auto key = std::make_pair(pl->engine_id, pl->knobs);
    auto it = seen_.find(key);
    if (it != seen_.end() && pl->engine_id >= 0) {
      it->second->sources.push_back(source);
      if (rank >= 0) it->second->heuristic_ranks.emplace_back(source, rank);
      return;
    }
    pl->sources.push_back(source);
    if (rank >= 0) pl->heuristic_ranks.emplace_back(source, rank);
    seen_.emplace(key, pl);
    out_.plans.push_back(std::move(pl));
  }

  // An engine of this graph, finalized (`status` says whether the engine accepts the graph).
  BackendDesc engine_of(int64_t e, cudnnStatus_t& status) const {
    BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t g = graph_->graph.get();
    set_attr(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &g);
    set_attr(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &e);
    status = cudnnBackendFinalize(engine.get());
    return engine;
  }

  // One configuration of `engine` with these knob values (one per range): a row, built unless already seen.
  void try_config(int64_t id, const BackendDesc& engine, const std::vector<KnobRange>& ranges,
                  const std::vector<int64_t>& values, const std::string& source) {
    auto pl = new_plan();
    pl->engine_id = id;
    std::vector<BackendDesc> choices;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (size_t i = 0; i < ranges.size(); ++i) {
      choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      const auto type = static_cast<cudnnBackendKnobType_t>(ranges[i].type);
      set_attr(choices.back(), CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &type);
      set_attr(choices.back(), CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &values[i]);
      CUDNN_CHECK(cudnnBackendFinalize(choices.back().get()));
      raw.push_back(choices.back().get());
      pl->knobs.emplace_back(ranges[i].type, values[i]);
    }
    std::sort(pl->knobs.begin(), pl->knobs.end());
    if (!seen_.count(std::make_pair(id, pl->knobs))) {
      pl->config = BackendDesc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      cudnnBackendDescriptor_t eng = engine.get();
      set_attr(pl->config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, &eng);
      if (!raw.empty())
        set_attr(pl->config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                 static_cast<int64_t>(raw.size()));
      const cudnnStatus_t cs = cudnnBackendFinalize(pl->config.get());
      if (cs != CUDNN_STATUS_SUCCESS) {
        pl->status = short_status_name(cs);
        pl->stage = "config";
      } else {
        finish(pl, engine, true);
      }
    }
    add(pl, source, -1);
  }

  // A graph no engine runs is one row (stage "graph", no engine): a status, never an empty result.
  void unsupported(const std::string& status) {
    auto pl = new_plan();
    pl->status = status;
    pl->stage = "graph";
    add(pl, "graph", -1);
  }

  // An engine that rejects the graph is one row (stage "engine"); it does not count towards the caps.
  void rejected(int64_t id, cudnnStatus_t s, const std::string& source) {
    auto pl = new_plan();
    pl->engine_id = id;
    pl->status = short_status_name(s);
    pl->stage = "engine";
    add(pl, source, -1);
  }

  // Configurations listed so far, engines that rejected the graph not counted (what max_configs caps).
  int64_t configs() const {
    return std::count_if(out_.plans.begin(), out_.plans.end(), [](const auto& pl) { return pl->stage != "engine"; });
  }

  std::shared_ptr<EngineGraph> graph_;
  const EngineSearchOptions& opt_;
  int device_;
  std::map<std::pair<int64_t, KnobValues>, std::shared_ptr<EnginePlan>> seen_;
  EngineSearchOutput out_;
  std::vector<std::shared_ptr<EnginePlan>> pending_;  // plans for build_plans (build_threads > 1)
};

}  // namespace

const ConvProblem& EnginePlan::problem() const { return graph->problem; }

void EnginePlan::execute(const Buffers& b, const std::vector<void*>& operands, int64_t* split_ns) {
  if (!ok()) throw std::invalid_argument("this engine configuration has no plan: " + status + " at " + stage);
  if (operands.size() + 3 != graph->uids.size())
    throw std::invalid_argument("this plan's graph takes " + std::to_string(graph->uids.size() - 3) +
                                " epilogue operands, not " + std::to_string(operands.size()));
  using clock = std::chrono::steady_clock;
  clock::time_point t = split_ns ? clock::now() : clock::time_point();
  auto lap = [&](int i) {  // host time of step i (Note [host stages] in pinned/registry.h), only when asked for
    if (!split_ns) return;
    const clock::time_point now = clock::now();
    split_ns[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count();
    t = now;
  };
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudnnHandle_t h = handle_for(device);
  lap(0);
  c10::DataPtr ws = allocate_workspace(static_cast<size_t>(workspace_bytes));
  lap(1);
  BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  void* fixed[3] = {b.x, b.w, b.y};
  std::vector<void*> many;  // an epilogue's operands after the three fixed ones (Note [fused graphs])
  void** ptrs = fixed;
  if (!operands.empty()) {
    many.assign(fixed, fixed + 3);
    many.insert(many.end(), operands.begin(), operands.end());
    ptrs = many.data();
  }
  const int64_t n = static_cast<int64_t>(graph->uids.size());
  void* wsp = ws.get();
  set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs, n);
  set_attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, graph->uids.data(), n);
  set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &wsp);
  CUDNN_CHECK(cudnnBackendFinalize(pack.get()));
  lap(2);
  CUDNN_CHECK(cudnnBackendExecute(h, plan.get(), pack.get()));
  check_launches("a kernel launch inside cudnnBackendExecute", __FILE__, __LINE__);
  lap(3);
}

CallTiming EnginePlan::time_calls(const std::vector<Buffers>& sets, int iters,
                                  const std::vector<std::vector<void*>>& operands) {
  if (sets.empty() || iters < 1) throw std::invalid_argument("time_calls needs >= 1 buffer set and iters >= 1");
  if (!operands.empty() && operands.size() != sets.size())
    throw std::invalid_argument("time_calls needs one list of epilogue operands per buffer set");
  static const std::vector<void*> none;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  return time_loop(c10::cuda::getCurrentCUDAStream(device).stream(), iters, [&](int i) {
    const size_t k = i % sets.size();
    execute(sets[k], operands.empty() ? none : operands[k]);
  });
}

EngineSearchOutput engine_search(Direction dir, const ConvProblem& problem, const EngineSearchOptions& opt,
                                 int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const auto t0 = std::chrono::steady_clock::now();
  auto graph = build_graph(dir, problem, opt.epilogue, handle_for(device));
  EngineSearchOutput out = EngineSearch(std::move(graph), opt, device).run();
  out.search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string serialize_plan(const EnginePlan& pl) {
  if (!pl.ok() || !pl.plan.get()) return "";
  int64_t n = 0;
  if (cudnnBackendGetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n,
                               nullptr) != CUDNN_STATUS_SUCCESS || n <= 0)
    return "";
  std::vector<char> json(static_cast<size_t>(n) + 1, 0);
  int64_t got = 0;
  if (cudnnBackendGetAttribute(pl.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &got,
                               json.data()) != CUDNN_STATUS_SUCCESS)
    return "";
  return std::string(json.data());  // up to its terminator
}

std::shared_ptr<EnginePlan> plan_from_json(Direction dir, const ConvProblem& problem,
                                           const std::vector<EpilogueOp>& epilogue, const std::string& json,
                                           int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudnnHandle_t h = handle_for(device);
  auto pl = std::make_shared<EnginePlan>();
  pl->graph = build_graph(dir, problem, epilogue, h);
  pl->device = device;
  pl->dbl = problem.dtype == CUDNN_DATA_DOUBLE;
  pl->sources.push_back("serialized");
  pl->plan = BackendDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set_attr(pl->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h);
  const auto t0 = std::chrono::steady_clock::now();
  cudnnStatus_t s = cudnnBackendSetAttribute(pl->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                             CUDNN_TYPE_CHAR, static_cast<int64_t>(json.size()) + 1, json.c_str());
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pl->plan.get());
  pl->build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s != CUDNN_STATUS_SUCCESS) {
    pl->status = short_status_name(s);
    pl->stage = "plan";
    pl->plan = BackendDesc();
    return pl;
  }
  pl->workspace_bytes = get_int64(pl->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
  return pl;
}

std::vector<std::pair<std::string, std::string>> heuristic_lists() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& l : kHeuristicLists) out.emplace_back(l.name, l.source);
  return out;
}

double build_listed(const std::vector<std::shared_ptr<EnginePlan>>& plans, int threads, int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<EnginePlan>> todo;
  for (const auto& pl : plans) {
    if (!pl || pl->status != "NOT_BUILT" || !pl->config.get()) continue;
    pl->status = "SUCCESS";  // build_plan records a failure
    pl->stage.clear();
    todo.push_back(pl);
  }
  if (!todo.empty()) build_plans(todo, threads, device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace cudnn_algos
