// The binding's search part: the legacy API's search, execution and timed loop; the graph API's engine search and
// its plans.
#include "glue.h"

#include "../common/knobs.h"

#include <optional>

namespace cudnn_algos::bind {

namespace {

// a field cuDNN left unset (its sentinel: < 0, or empty) reads as None in Python
template <typename T>
py::object unless_negative(T v) {
  return v < 0 ? py::object(py::none()) : py::cast(v);
}

SearchOutput search(Direction dir, const ConvProblem& p, Mode m, std::optional<at::Tensor> x,
                    std::optional<at::Tensor> w, std::optional<at::Tensor> y, int64_t workspace_limit, int device) {
  Buffers b;
  const Buffers* bp = nullptr;
  if (m == Mode::FindEx) {
    if (!x || !w || !y) throw std::invalid_argument("mode='find_ex' needs the x, w and y tensors");
    b = buffers_of(p, *x, *w, *y, &device);
    bp = &b;
  }
  py::gil_scoped_release nogil;
  return legacy_search(dir, p, m, bp, workspace_limit, device);
}

void execute(Direction dir, const ConvProblem& p, int algo_id, cudnnMathType_t mt, const at::Tensor& x,
             const at::Tensor& w, const at::Tensor& y, int64_t workspace_limit) {
  int device = 0;
  const Buffers b = buffers_of(p, x, w, y, &device);
  py::gil_scoped_release nogil;
  legacy_execute(dir, p, algo_id, mt, b, workspace_limit, device);
}

CallTiming time_calls(Direction dir, const ConvProblem& p, int algo_id, cudnnMathType_t mt,
                      const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ws,
                      const std::vector<at::Tensor>& ys, int iters, int64_t workspace_limit) {
  int device = 0;
  const std::vector<Buffers> sets = buffer_sets(p, xs, ws, ys, &device);
  py::gil_scoped_release nogil;
  return legacy_time_calls(dir, p, algo_id, mt, sets, iters, workspace_limit, device);
}

EngineSearchOutput engine_search_py(Direction dir, const ConvProblem& p, std::vector<cudnnBackendHeurMode_t> heuristics,
                                    bool exhaustive, int64_t max_configs, bool runtime_compiled, int device,
                                    std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> seeds,
                                    std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> exact,
                                    bool build, int build_threads, std::vector<EpilogueOp> epilogue) {
  EngineSearchOptions opt;
  opt.epilogue = std::move(epilogue);
  opt.build = build;
  opt.build_threads = build_threads;
  opt.seeds = std::move(seeds);
  opt.exact = std::move(exact);
  opt.heuristics = std::move(heuristics);
  opt.exhaustive = exhaustive;
  opt.max_configs = max_configs;
  opt.runtime_compiled = runtime_compiled;
  py::gil_scoped_release nogil;
  return engine_search(dir, p, opt, device);
}

}  // namespace

// The legacy API's search, execution and timed loop; the graph API's engine search and its plans.
void bind_search(py::module_& m) {
  // the results, as structs with named fields (backend.py reads them by the names of its dataclasses)
  py::class_<AlgoRow>(m, "AlgoRow")
      .def_readonly("algo_id", &AlgoRow::algo_id)
      .def_readonly("algo", &AlgoRow::algo)
      .def_readonly("status", &AlgoRow::status)
      .def_readonly("status_code", &AlgoRow::status_code)
      .def_property_readonly("time_ms", [](const AlgoRow& r) { return unless_negative(r.time_ms); })
      .def_property_readonly("workspace_bytes", [](const AlgoRow& r) { return unless_negative(r.workspace_bytes); })
      .def_property_readonly("deterministic",
                             [](const AlgoRow& r) {
                               return r.deterministic < 0 ? py::object(py::none()) : py::cast(r.deterministic == 1);
                             })
      .def_property_readonly("math_type",
                             [](const AlgoRow& r) {
                               return r.math_type.empty() ? py::object(py::none()) : py::cast(r.math_type);
                             })
      .def_property_readonly("rank", [](const AlgoRow& r) { return unless_negative(r.rank); })
      .def_readonly("note", &AlgoRow::note);
  py::class_<SearchOutput>(m, "SearchOutput")
      .def_readonly("rows", &SearchOutput::rows)
      .def_property_readonly("workspace_given",
                             [](const SearchOutput& o) { return unless_negative(o.workspace_given); })
      .def_readonly("search_ms", &SearchOutput::search_ms)
      .def_readonly("returned", &SearchOutput::returned);
  py::class_<CallTiming>(m, "CallTiming")
      .def_readonly("host_ms", &CallTiming::host_ms)
      .def_readonly("gpu_ms", &CallTiming::gpu_ms);
  py::class_<EngineSearchOutput>(m, "EngineSearchOutput")
      .def_readonly("plans", &EngineSearchOutput::plans)
      .def_readonly("engine_count", &EngineSearchOutput::engine_count)
      .def_readonly("search_ms", &EngineSearchOutput::search_ms)
      .def_readonly("heuristic_query_ms", &EngineSearchOutput::heuristic_query_ms);
  m.def("search", &search, py::arg("direction"), py::arg("problem"), py::arg("mode"), py::arg("x") = py::none(),
        py::arg("w") = py::none(), py::arg("y") = py::none(), py::arg("workspace_limit") = -1,
        py::arg("device") = 0);
  m.def("execute", &execute, py::arg("direction"), py::arg("problem"), py::arg("algo_id"), py::arg("math"),
        py::arg("x"), py::arg("w"), py::arg("y"), py::arg("workspace_limit") = -1);
  m.def("time_calls", &time_calls, py::arg("direction"), py::arg("problem"), py::arg("algo_id"), py::arg("math"),
        py::arg("xs"), py::arg("ws"), py::arg("ys"), py::arg("iters"), py::arg("workspace_limit") = -1);
  py::class_<EnginePlan, std::shared_ptr<EnginePlan>>(m, "EnginePlan")
      .def_readonly("engine_id", &EnginePlan::engine_id)
      .def_readonly("knobs", &EnginePlan::knobs)
      .def_readonly("numerical_notes", &EnginePlan::numerical_notes)
      .def_readonly("behavior_notes", &EnginePlan::behavior_notes)
      .def_readonly("sources", &EnginePlan::sources)
      .def_readonly("heuristic_ranks", &EnginePlan::heuristic_ranks)
      .def_readonly("status", &EnginePlan::status)
      .def_readonly("stage", &EnginePlan::stage)
      .def_readonly("workspace_bytes", &EnginePlan::workspace_bytes)
      .def_property_readonly("build_ms", [](const EnginePlan& pl) { return unless_negative(pl.build_ms); })
      .def_readonly("plan_json", &EnginePlan::plan_json)
      .def_property_readonly("operand_dims", [](const EnginePlan& pl) { return pl.graph->operand_dims; })
      .def(
          "execute",
          [](EnginePlan& pl, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y,
             const std::vector<at::Tensor>& operands) {
            int device = 0;
            const Buffers b = buffers_of(pl.problem(), x, w, y, &device);
            if (device != pl.device) throw std::invalid_argument("tensors are not on the plan's device");
            const std::vector<void*> more = operand_ptrs(pl, operands, device);
            py::gil_scoped_release nogil;
            pl.execute(b, more);
          },
          py::arg("x"), py::arg("w"), py::arg("y"), py::arg("operands") = std::vector<at::Tensor>{})
      .def(
          "time_calls",
          [](EnginePlan& pl, const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ws,
             const std::vector<at::Tensor>& ys, int iters, const std::vector<std::vector<at::Tensor>>& operands) {
            int device = 0;
            const std::vector<Buffers> sets = buffer_sets(pl.problem(), xs, ws, ys, &device);
            if (device != pl.device) throw std::invalid_argument("tensors are not on the plan's device");
            if (!operands.empty() && operands.size() != sets.size())
              throw std::invalid_argument("operands: one list per buffer set");
            std::vector<std::vector<void*>> more;
            for (const auto& o : operands) more.push_back(operand_ptrs(pl, o, device));
            py::gil_scoped_release nogil;
            return pl.time_calls(sets, iters, more);
          },
          py::arg("xs"), py::arg("ws"), py::arg("ys"), py::arg("iters"),
          py::arg("operands") = std::vector<std::vector<at::Tensor>>{});
  m.def("heuristic_lists", &heuristic_lists);
  // Note [serialized plans] (csrc/search/engine_search.h)
  m.def("serialize_plan", [](const EnginePlan& pl) { return py::bytes(serialize_plan(pl)); }, py::arg("plan"));
  m.def(
      "plan_from_json",
      [](Direction dir, const ConvProblem& p, std::vector<EpilogueOp> epilogue, const std::string& json, int device) {
        py::gil_scoped_release nogil;
        return plan_from_json(dir, p, epilogue, json, device);
      },
      py::arg("direction"), py::arg("problem"), py::arg("epilogue"), py::arg("json"), py::arg("device") = 0);
  // the build's names of cuDNN's enum values, by value (csrc/common/knobs.h)
  m.def("knob_names", [] { return names_of(kKnobNames); });
  m.def("numerical_note_names", [] { return names_of(kNumericalNoteNames); });
  m.def("behavior_note_names", [] { return names_of(kBehaviorNoteNames); });
  m.def(
      "build_listed",
      [](const std::vector<std::shared_ptr<EnginePlan>>& plans, int threads, int device) {
        py::gil_scoped_release nogil;
        return build_listed(plans, threads, device);
      },
      py::arg("plans"), py::arg("threads") = 1, py::arg("device") = 0);
  m.def("engine_search", &engine_search_py, py::arg("direction"), py::arg("problem"),
        py::arg("heuristics") = EngineSearchOptions{}.heuristics, py::arg("exhaustive") = false,
        py::arg("max_configs") = 64, py::arg("runtime_compiled") = true, py::arg("device") = 0,
        py::arg("seeds") = std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>>{},
        py::arg("exact") = std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>>{},
        py::arg("build") = true, py::arg("build_threads") = 1, py::arg("epilogue") = std::vector<EpilogueOp>{});
}

}  // namespace cudnn_algos::bind
