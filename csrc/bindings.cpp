// Glue only: argument conversion, exception registration, versions; the module is bound in parts (problem,
// search, clock, pinned). No search logic lives here. cudnn_algos/backend.py is its only Python caller.
#include <torch/extension.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <c10/cuda/CUDAGuard.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "common/check.h"
#include "common/dtypes.h"
#include "search/engine_search.h"
#include "search/legacy_search.h"
#include "pinned/pinned.h"
#include "clock/timing.h"

namespace py = pybind11;
using namespace cudnn_algos;

#define CUDNN_ALGOS_STR2(x) #x
#define CUDNN_ALGOS_STR(x) CUDNN_ALGOS_STR2(x)
#ifdef CUDNN_ALGOS_BUILD_TORCH_VERSION_RAW
#define CUDNN_ALGOS_BUILD_TORCH_VERSION CUDNN_ALGOS_STR(CUDNN_ALGOS_BUILD_TORCH_VERSION_RAW)
#else
#define CUDNN_ALGOS_BUILD_TORCH_VERSION "unknown"
#endif

namespace {

template <typename E, size_t N>
E parse(const std::string& value, const char* arg, const std::array<std::pair<const char*, E>, N>& table) {
  std::string valid;
  for (const auto& [name, e] : table) {
    if (value == name) return e;
    valid += (valid.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument(std::string(arg) + "='" + value + "' is not one of: " + valid);
}

Direction parse_direction(const std::string& s) {
  static const std::array<std::pair<const char*, Direction>, 3> t{{{"forward", Direction::Forward},
                                                                  {"backward_data", Direction::BackwardData},
                                                                  {"backward_filter", Direction::BackwardFilter}}};
  return parse(s, "direction", t);
}

Mode parse_mode(const std::string& s) {
  static const std::array<std::pair<const char*, Mode>, 3> t{
      {{"find", Mode::Find}, {"find_ex", Mode::FindEx}, {"heuristic", Mode::Heuristic}}};
  return parse(s, "mode", t);
}

// The name of `value` in `table` (the inverse of parse).
template <typename E, size_t N>
const char* name_of(E value, const std::array<std::pair<const char*, E>, N>& table) {
  for (const auto& [name, e] : table)
    if (e == value) return name;
  throw std::invalid_argument("a value with no name in its table");
}

constexpr std::array<std::pair<const char*, cudnnMathType_t>, 4> kMaths{
    {{"default", CUDNN_DEFAULT_MATH},
     {"tensor_op", CUDNN_TENSOR_OP_MATH},
     {"tensor_op_allow_conversion", CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION},
     {"fma", CUDNN_FMA_MATH}}};
constexpr std::array<std::pair<const char*, Layout>, 2> kLayouts{{{"nchw", Layout::NCHW}, {"nhwc", Layout::NHWC}}};

cudnnMathType_t parse_math(const std::string& s) {
  return parse(s, "math", kMaths);
}

ConvProblem make_problem(const std::string& dtype, const std::string& layout, std::vector<int64_t> x,
                         std::vector<int64_t> w, std::vector<int64_t> y, std::vector<int> padding,
                         std::vector<int> stride, std::vector<int> dilation, int groups, const std::string& math) {
  ConvProblem p;
  p.dtype = dtype_info(dtype).cudnn;
  p.layout = parse(layout, "layout", kLayouts);
  p.x_dims = std::move(x);
  p.w_dims = std::move(w);
  p.y_dims = std::move(y);
  p.padding = std::move(padding);
  p.stride = std::move(stride);
  p.dilation = std::move(dilation);
  p.groups = groups;
  p.math = parse_math(math);
  p.validate();
  return p;
}

// The tensors must be exactly what the problem describes: CUDA, one device, the dtype, the dims, and packed in the
// problem's layout (strides of size-1 dims are not compared: they never address memory).
void check_operand(const ConvProblem& p, const at::Tensor& t, const std::vector<int64_t>& dims, const char* name,
                   int device) {
  if (!t.defined() || !t.is_cuda())
    throw std::invalid_argument(std::string(name) + " must be a CUDA tensor");
  if (t.get_device() != device)
    throw std::invalid_argument(std::string(name) + " is on cuda:" + std::to_string(t.get_device()) +
                                ", the other operands on cuda:" + std::to_string(device));
  const c10::ScalarType dtype = dtype_info(p.dtype)->scalar;  // p.dtype came from dtype_info(name)
  if (t.scalar_type() != dtype)
    throw std::invalid_argument(std::string(name) + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                                ", the problem needs " + std::string(c10::toString(dtype)));
  if (t.sizes().vec() != dims)
    throw std::invalid_argument(std::string(name) + " has shape " + join(t.sizes().vec()) + ", the problem needs " +
                                join(dims));
  const auto want = p.strides_of(dims);
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1 && t.stride(i) != want[i])
      throw std::invalid_argument(std::string(name) + " has strides " + join(t.strides().vec()) + ", the " +
                                  (p.layout == Layout::NCHW ? "contiguous" : "channels-last") + " layout needs " +
                                  join(want));
}

Buffers buffers_of(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y, int* device) {
  if (!x.defined() || !x.is_cuda()) throw std::invalid_argument("x must be a CUDA tensor");
  *device = x.get_device();
  check_operand(p, x, p.x_dims, "x", *device);
  check_operand(p, w, p.w_dims, "w", *device);
  check_operand(p, y, p.y_dims, "y", *device);
  return Buffers{x.data_ptr(), w.data_ptr(), y.data_ptr()};
}

py::dict row_to_dict(const AlgoRow& r) {
  py::dict d;
  d["algo_id"] = r.algo_id;
  d["algo"] = r.algo;
  d["status"] = r.status;
  d["status_code"] = r.status_code;
  d["time_ms"] = r.time_ms < 0 ? py::object(py::none()) : py::object(py::float_(r.time_ms));
  d["workspace_bytes"] = r.workspace_bytes < 0 ? py::object(py::none()) : py::object(py::int_(r.workspace_bytes));
  d["deterministic"] = r.deterministic < 0 ? py::object(py::none()) : py::object(py::bool_(r.deterministic == 1));
  d["math_type"] = r.math_type.empty() ? py::object(py::none()) : py::object(py::str(r.math_type));
  d["rank"] = r.rank < 0 ? py::object(py::none()) : py::object(py::int_(r.rank));
  d["note"] = r.note;
  return d;
}

py::dict search(const std::string& direction, const ConvProblem& p, const std::string& mode,
                std::optional<at::Tensor> x, std::optional<at::Tensor> w, std::optional<at::Tensor> y,
                int64_t workspace_limit, int device) {
  const Direction dir = parse_direction(direction);
  const Mode m = parse_mode(mode);
  Buffers b;
  const Buffers* bp = nullptr;
  if (m == Mode::FindEx) {
    if (!x || !w || !y) throw std::invalid_argument("mode='find_ex' needs the x, w and y tensors");
    b = buffers_of(p, *x, *w, *y, &device);
    bp = &b;
  }
  SearchOutput out;
  {
    py::gil_scoped_release nogil;
    out = legacy_search(dir, p, m, bp, workspace_limit, device);
  }
  py::list rows;
  for (const auto& r : out.rows) rows.append(row_to_dict(r));
  py::dict d;
  d["rows"] = rows;
  d["workspace_given"] = out.workspace_given < 0 ? py::object(py::none()) : py::object(py::int_(out.workspace_given));
  d["search_ms"] = out.search_ms;
  d["returned"] = out.returned;
  return d;
}

void execute(const std::string& direction, const ConvProblem& p, int algo_id, const std::string& math,
             const at::Tensor& x, const at::Tensor& w, const at::Tensor& y, int64_t workspace_limit) {
  const Direction dir = parse_direction(direction);
  const cudnnMathType_t mt = parse_math(math);
  int device = 0;
  const Buffers b = buffers_of(p, x, w, y, &device);
  py::gil_scoped_release nogil;
  legacy_execute(dir, p, algo_id, mt, b, workspace_limit, device);
}

std::vector<Buffers> buffer_sets(const ConvProblem& p, const std::vector<at::Tensor>& xs,
                                 const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& ys, int* device) {
  if (xs.empty() || xs.size() != ws.size() || xs.size() != ys.size())
    throw std::invalid_argument("xs, ws, ys must be non-empty lists of one length");
  std::vector<Buffers> sets;
  for (size_t i = 0; i < xs.size(); ++i) {
    int dev_i = 0;
    sets.push_back(buffers_of(p, xs[i], ws[i], ys[i], &dev_i));
    if (i == 0) *device = dev_i;
    else if (dev_i != *device) throw std::invalid_argument("all buffer sets must be on one device");
  }
  return sets;
}

py::dict time_calls(const std::string& direction, const ConvProblem& p, int algo_id, const std::string& math,
                    const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ws,
                    const std::vector<at::Tensor>& ys, int iters, int64_t workspace_limit) {
  const Direction dir = parse_direction(direction);
  const cudnnMathType_t mt = parse_math(math);
  int device = 0;
  const std::vector<Buffers> sets = buffer_sets(p, xs, ws, ys, &device);
  CallTiming t;
  {
    py::gil_scoped_release nogil;
    t = legacy_time_calls(dir, p, algo_id, mt, sets, iters, workspace_limit, device);
  }
  py::dict d;
  d["host_ms"] = t.host_ms;
  d["gpu_ms"] = t.gpu_ms;
  return d;
}

py::dict engine_search_py(const std::string& direction, const ConvProblem& p, std::vector<std::string> heuristics,
                          bool exhaustive, int64_t max_configs, bool runtime_compiled, int device,
                          std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> seeds,
                          std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> exact,
                          bool build, int build_threads) {
  EngineSearchOptions opt;
  opt.build = build;
  opt.build_threads = build_threads;
  opt.seeds = std::move(seeds);
  opt.exact = std::move(exact);
  opt.heuristics = std::move(heuristics);
  opt.exhaustive = exhaustive;
  opt.max_configs = max_configs;
  opt.runtime_compiled = runtime_compiled;
  const Direction dir = parse_direction(direction);
  EngineSearchOutput out;
  {
    py::gil_scoped_release nogil;
    out = engine_search(dir, p, opt, device);
  }
  py::dict d;
  d["plans"] = out.plans;
  d["engine_count"] = out.engine_count;
  d["search_ms"] = out.search_ms;
  d["heuristic_query_ms"] = out.heuristic_query_ms;
  return d;
}

py::dict versions() {
  py::dict d;
  d["cudnn_runtime"] = static_cast<int64_t>(cudnnGetVersion());
  d["cudnn_build"] = static_cast<int64_t>(CUDNN_VERSION);
  d["cudnn_cudart"] = static_cast<int64_t>(cudnnGetCudartVersion());
  int v = -1;
  d["cuda_runtime"] = cudaRuntimeGetVersion(&v) == cudaSuccess ? v : -1;
  v = -1;
  // 0 with no driver installed; -1 if the call itself failed.
  d["cuda_driver"] = cudaDriverGetVersion(&v) == cudaSuccess ? v : -1;
  d["cuda_build"] = static_cast<int64_t>(CUDART_VERSION);
  d["torch_build"] = std::string(CUDNN_ALGOS_BUILD_TORCH_VERSION);
  return d;
}

// A cuDNN handle needs a GPU; on a machine without one cudnnCreate answers with a status, not a crash.
std::string probe_handle(int device) {
  try {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    handle_for(device);
    return "SUCCESS";
  } catch (const CudnnException& e) {
    return e.status_name();
  }
}

// The problem description and what the extension sees of its environment (versions, handles).
void bind_problem(py::module_& m) {
  py::class_<ConvProblem>(m, "ConvProblem")
      .def(py::init(&make_problem), py::arg("dtype"), py::arg("layout"), py::arg("x"), py::arg("w"), py::arg("y"),
           py::arg("padding"), py::arg("stride"), py::arg("dilation"), py::arg("groups"), py::arg("math"))
      .def("describe", &ConvProblem::describe)
      .def("__repr__", [](const ConvProblem& p) { return "<ConvProblem " + p.describe() + ">"; })
      // pickled as its constructor's arguments (a problem sent to another process: tuning/lists_process.py)
      .def(py::pickle(
          [](const ConvProblem& p) {
            return py::make_tuple(dtype_info(p.dtype).value().name, name_of(p.layout, kLayouts), p.x_dims, p.w_dims,
                                  p.y_dims, p.padding, p.stride, p.dilation, p.groups, name_of(p.math, kMaths));
          },
          [](const py::tuple& t) {
            if (t.size() != 10) throw std::invalid_argument("a pickled ConvProblem has 10 fields");
            return make_problem(t[0].cast<std::string>(), t[1].cast<std::string>(),
                                t[2].cast<std::vector<int64_t>>(), t[3].cast<std::vector<int64_t>>(),
                                t[4].cast<std::vector<int64_t>>(), t[5].cast<std::vector<int>>(),
                                t[6].cast<std::vector<int>>(), t[7].cast<std::vector<int>>(), t[8].cast<int>(),
                                t[9].cast<std::string>());
          }));

  m.def("algo_names", [](const std::string& direction) { return algo_names(parse_direction(direction)); });
  m.def("versions", &versions);
  m.def("probe_handle", &probe_handle, py::arg("device") = 0);
  m.def("cudnn_handles", []() {
    const HandleCounts c = handle_counts();
    py::dict d;
    d["created"] = c.created;
    d["pooled"] = c.pooled;
    return d;
  });
  // for the CPU tests of the translation below: raises what a failed cuDNN call with this status raises
  m.def("_raise_cudnn_status", [](int code) {
    throw_cudnn(static_cast<cudnnStatus_t>(code), "_raise_cudnn_status", __FILE__, __LINE__);
  });
}

// The legacy API's search, execution and timed loop; the graph API's engine search and its plans.
void bind_search(py::module_& m) {
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
      .def_readonly("plan_json", &EnginePlan::plan_json)
      .def("execute",
           [](EnginePlan& pl, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y) {
             int device = 0;
             const Buffers b = buffers_of(pl.problem(), x, w, y, &device);
             if (device != pl.device) throw std::invalid_argument("tensors are not on the plan's device");
             py::gil_scoped_release nogil;
             pl.execute(b);
           })
      .def("time_calls",
           [](EnginePlan& pl, const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ws,
              const std::vector<at::Tensor>& ys, int iters) {
             int device = 0;
             const std::vector<Buffers> sets = buffer_sets(pl.problem(), xs, ws, ys, &device);
             if (device != pl.device) throw std::invalid_argument("tensors are not on the plan's device");
             CallTiming t;
             {
               py::gil_scoped_release nogil;
               t = pl.time_calls(sets, iters);
             }
             py::dict d;
             d["host_ms"] = t.host_ms;
             d["gpu_ms"] = t.gpu_ms;
             return d;
           });
  m.def("engine_search", &engine_search_py, py::arg("direction"), py::arg("problem"),
        py::arg("heuristics") = std::vector<std::string>{"instant", "a", "b", "fallback"}, py::arg("exhaustive") = false,
        py::arg("max_configs") = 64, py::arg("runtime_compiled") = true, py::arg("device") = 0,
        py::arg("seeds") = std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>>{},
        py::arg("exact") = std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>>{},
        py::arg("build") = true, py::arg("build_threads") = 1);
}

void bind_clock(py::module_& m) {
  // the kernel clock (timing.h): one CUPTI activity session; windows are (t0, t1) pairs of kernel_clock_now()
  m.def("kernel_clock_begin", &kernel_clock_begin, py::arg("own_timestamps") = true);
  m.def("kernel_clock_now", &kernel_clock_now);
  m.def(
      "kernel_clock_end",
      [](int device, const std::vector<std::pair<uint64_t, uint64_t>>& windows) {
        std::vector<WindowActivity> got;
        {
          py::gil_scoped_release nogil;
          got = kernel_clock_end(device, windows);
        }
        py::list out;
        for (const auto& w : got) out.append(py::make_tuple(w.busy_ns, w.activities, w.kernels));
        return out;
      },
      py::arg("device"), py::arg("windows"));
  m.def("kernel_clock_abort", &kernel_clock_abort);
  m.def("kernel_clock_keep_attached", &kernel_clock_keep_attached, py::arg("on"));
  m.def("kernel_clock_stats", []() {
    const KernelClockStats k = kernel_clock_stats();
    py::dict d;
    d["sessions"] = k.sessions;
    d["finalizes"] = k.finalizes;
    d["attached"] = k.attached;
    d["buffers_requested"] = k.buffers_requested;
    d["buffers_completed"] = k.buffers_completed;
    d["buffers_reclaimed"] = k.buffers_reclaimed;
    d["buffers_outstanding"] = k.buffers_outstanding;
    return d;
  });
}

void bind_pinned(py::module_& m) {
  // pinned execution (pinned.h): winners in, counts out; the operator itself is torch.ops.cudnn_algos.conv
  m.def("problem_key",
        [](const std::string& direction, const ConvProblem& p, bool deterministic, bool allow_tf32) {
          return problem_key(parse_direction(direction), p, deterministic, allow_tf32);
        },
        py::arg("direction"), py::arg("problem"), py::arg("deterministic"), py::arg("allow_tf32"));
  m.def("operator_key",
        [](const std::string& direction, const at::Tensor& x, const at::Tensor& w, std::vector<int64_t> stride,
           std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups, bool deterministic,
           bool allow_tf32, bool transposed, std::vector<int64_t> output_padding) {
          return operator_key(parse_direction(direction), x, w, stride, padding, dilation, groups, deterministic,
                              allow_tf32, transposed, output_padding);
        },
        py::arg("direction"), py::arg("x"), py::arg("w"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        py::arg("groups"), py::arg("deterministic"), py::arg("allow_tf32"), py::arg("transposed") = false,
        py::arg("output_padding") = std::vector<int64_t>{});
  m.def("pinned_set", &pinned_set, py::arg("key"), py::arg("engine_id"), py::arg("knobs"), py::arg("origin") = "stored");
  m.def("pinned_clear", &pinned_clear);
  m.def("pinned_ask_again", &pinned_ask_again, py::arg("key"), py::arg("forget_origin") = "");
  m.def("pinned_counts", []() {
    py::list out;
    for (const auto& c : pinned_counts())
      out.append(py::make_tuple(c.key, c.pinned, c.torch, c.fallback, c.reason, c.execute_ns, c.timed_calls,
                                c.origin, c.engine_id, c.knobs));
    return out;
  });
  // Note [unseen problems] (pinned.h): what the handler is asked, and the handler itself (a Python callable
  // query -> (configs, origin, why), or None)
  py::class_<MissQuery>(m, "MissQuery")
      .def_readonly("key", &MissQuery::key)
      .def_property_readonly("direction", [](const MissQuery& q) {
        static const char* names[] = {"forward", "backward_data", "backward_filter"};
        return std::string(names[static_cast<int>(q.dir)]);
      })
      .def_readonly("problem", &MissQuery::problem)
      .def_readonly("deterministic", &MissQuery::deterministic)
      .def_readonly("allow_tf32", &MissQuery::allow_tf32)
      .def_readonly("device", &MissQuery::device)
      .def_property_readonly("x", [](const MissQuery& q) { return q.problem.x_dims; })
      .def_property_readonly("w", [](const MissQuery& q) { return q.problem.w_dims; })
      .def_property_readonly("padding", [](const MissQuery& q) { return q.problem.padding; })
      .def_property_readonly("stride", [](const MissQuery& q) { return q.problem.stride; })
      .def_property_readonly("dilation", [](const MissQuery& q) { return q.problem.dilation; })
      .def_property_readonly("groups", [](const MissQuery& q) { return q.problem.groups; })
      .def_property_readonly("dtype", [](const MissQuery& q) {
        const auto info = dtype_info(q.problem.dtype);
        return std::string(info ? info->name : "unknown");
      })
      .def_property_readonly("channels_last", [](const MissQuery& q) { return q.problem.layout == Layout::NHWC; });
  m.def("pinned_set_miss_handler", [](py::object fn) {
    if (fn.is_none()) return pinned_set_miss_handler(nullptr);
    // the callable is released with the GIL held, whichever thread drops the last reference
    std::shared_ptr<py::object> obj(new py::object(std::move(fn)), [](py::object* o) {
      if (Py_IsInitialized()) {
        py::gil_scoped_acquire gil;
        delete o;
      } else {
        o->release();
        delete o;
      }
    });
    pinned_set_miss_handler(std::make_shared<const MissHandler>([obj](const MissQuery& q) {
      py::gil_scoped_acquire gil;
      MissAnswer a;
      try {
        // (configs, origin, why) or (configs, origin, why, built plans): Note [plans the handler built]
        auto t = (*obj)(q).cast<py::tuple>();
        if (t.size() != 3 && t.size() != 4) throw py::cast_error("a tuple of " + std::to_string(t.size()));
        a.configs = t[0].cast<std::vector<std::pair<int64_t, Knobs>>>();
        a.origin = t[1].cast<std::string>();
        a.why = t[2].cast<std::string>();
        if (t.size() == 4) a.built = t[3].cast<std::vector<std::shared_ptr<EnginePlan>>>();
      } catch (py::error_already_set& e) {
        a.why = std::string("the unseen-problem handler raised ") + e.what();
        a.configs.clear();
      } catch (const py::cast_error& e) {
        a.why = std::string("the unseen-problem handler answered something else than (configs, origin, why[, "
                            "built plans]): ") +
                e.what();
        a.configs.clear();
      }
      return a;
    }));
  }, py::arg("handler"));
  py::class_<BoundConv>(m, "BoundConv")  // Note [the Python call] (pinned.h)
      .def(py::init([](std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> output_padding,
                       std::vector<int64_t> dilation, int64_t groups, bool transposed) {
             return BoundConv{std::move(stride), std::move(padding), std::move(output_padding), std::move(dilation),
                              groups, transposed};
           }),
           py::arg("stride"), py::arg("padding"), py::arg("output_padding"), py::arg("dilation"), py::arg("groups"),
           py::arg("transposed"))
      // torch's own wrapper: the GIL released, and errors and warnings become the Python exceptions and warnings
      // torch.ops would raise (torch.OutOfMemoryError, ValueError, AcceleratorError, ...), not pybind's RuntimeError
      .def("__call__",
           torch::wrap_pybind_function_no_gil([](const BoundConv& self, const at::Tensor& x, const at::Tensor& w,
                                                 const std::optional<at::Tensor>& bias) { return self(x, w, bias); }),
           py::arg("x"), py::arg("w"), py::arg("bias"));
  m.def("pinned_reset_counts", &pinned_reset_counts);
  m.def("pinned_plans_built", &pinned_plans_built);
  m.def("pinned_stage_timing", &pinned_stage_timing, py::arg("on"));
  m.def("pinned_stage_times", []() {
    const StageTimes t = pinned_stage_times();
    py::dict d;
    d["forward_calls"] = t.forward_calls;
    d["backward_calls"] = t.backward_calls;
    py::dict ns;
    for (const auto& [name, v] : t.ns) ns[py::str(name)] = v;
    d["ns"] = ns;
    return d;
  });
}

void register_errors() {
  // cuDNN / CUDA failures become the package's own exception types (cudnn_algos/errors.py), carrying the status.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CudnnException& e) {
      // CudnnError, or CudnnOutOfMemoryError (also a torch.OutOfMemoryError) for a device allocation failure
      py::object exc = py::module_::import("cudnn_algos.errors")
                           .attr("cudnn_error")(e.what(), e.status_name(), static_cast<int>(e.status()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    } catch (const CudaException& e) {
      py::object cls = py::module_::import("cudnn_algos.errors").attr("CudaError");
      py::object exc = cls(e.what(), std::string(cudaGetErrorName(e.error())));
      PyErr_SetObject(cls.ptr(), exc.ptr());
    } catch (const c10::OutOfMemoryError& e) {
      py::object cls = py::module_::import("torch").attr("OutOfMemoryError");
      PyErr_SetString(cls.ptr(), e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cudnn_algos._C: cuDNN's legacy and graph-API convolution searches and the kernel clock (internal; use "
            "cudnn_algos.backend)";
  bind_problem(m);
  bind_search(m);
  bind_clock(m);
  bind_pinned(m);
  register_errors();
}
