// The binding's pinned part: winners in, counts out, the unseen-problem handler, the bound call (pinned/pinned.h);
// the operator itself is torch.ops.cudnn_algos.conv.
#include "glue.h"

#include <memory>

#include "../common/dtypes.h"
#include "../pinned/pinned.h"

namespace cudnn_algos::bind {

void bind_pinned(py::module_& m) {
  // pinned execution (pinned.h): winners in, counts out; the operator itself is torch.ops.cudnn_algos.conv
  m.def("problem_key",
        [](Direction dir, const ConvProblem& p, bool deterministic, bool allow_tf32) {
          return problem_key(dir, p, deterministic, allow_tf32);
        },
        py::arg("direction"), py::arg("problem"), py::arg("deterministic"), py::arg("allow_tf32"));
  m.def("operator_key",
        [](Direction dir, const at::Tensor& x, const at::Tensor& w, std::vector<int64_t> stride,
           std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups, bool deterministic,
           bool allow_tf32, bool transposed, std::vector<int64_t> output_padding) {
          return operator_key(dir, x, w, stride, padding, dilation, groups, deterministic,
                              allow_tf32, transposed, output_padding);
        },
        py::arg("direction"), py::arg("x"), py::arg("w"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        py::arg("groups"), py::arg("deterministic"), py::arg("allow_tf32"), py::arg("transposed") = false,
        py::arg("output_padding") = std::vector<int64_t>{});
  m.def("pinned_set", &pinned_set, py::arg("key"), py::arg("engine_id"), py::arg("knobs"),
        py::arg("origin") = "stored");
  m.def("pinned_clear", &pinned_clear);
  m.def("pinned_ask_again", &pinned_ask_again, py::arg("key"), py::arg("forget_origin") = "");
  py::class_<PinnedCount>(m, "PinnedCount")
      .def_readonly("key", &PinnedCount::key)
      .def_readonly("pinned", &PinnedCount::pinned)
      .def_readonly("torch", &PinnedCount::torch)
      .def_readonly("fallback", &PinnedCount::fallback)
      .def_readonly("reason", &PinnedCount::reason)
      .def_readonly("origin", &PinnedCount::origin)
      .def_readonly("engine_id", &PinnedCount::engine_id)
      .def_readonly("knobs", &PinnedCount::knobs)
      .def_readonly("execute_ns", &PinnedCount::execute_ns)
      .def_readonly("timed_calls", &PinnedCount::timed_calls);
  m.def("pinned_counts", &pinned_counts);
  // Note [unseen problems] (pinned.h): what the handler is asked, what it answers, and the handler itself (a Python
  // callable query -> MissAnswer, or None)
  py::class_<MissAnswer>(m, "MissAnswer")
      .def(py::init([](std::vector<std::pair<int64_t, Knobs>> configs, std::string origin, std::string why,
                       std::vector<std::shared_ptr<EnginePlan>> built) {
             return MissAnswer{std::move(configs), std::move(origin), std::move(why), std::move(built)};
           }),
           py::arg("configs"), py::arg("origin"), py::arg("why"), py::arg("built"))
      .def_readonly("configs", &MissAnswer::configs)
      .def_readonly("origin", &MissAnswer::origin)
      .def_readonly("why", &MissAnswer::why)
      .def_readonly("built", &MissAnswer::built);
  py::class_<MissQuery>(m, "MissQuery")
      .def_readonly("key", &MissQuery::key)
      .def_property_readonly("direction", [](const MissQuery& q) { return std::string(direction_name(q.dir)); })
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
        a = (*obj)(q).cast<MissAnswer>();  // backend.pinned_set_miss_handler makes one from the handler's answer
      } catch (py::error_already_set& e) {
        a = MissAnswer{};
        a.why = std::string("the unseen-problem handler raised ") + e.what();
      } catch (const py::cast_error& e) {
        a = MissAnswer{};
        a.why = std::string("the unseen-problem handler answered something else than a MissAnswer: ") + e.what();
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
  py::class_<StageTimes>(m, "StageTimes")
      .def_readonly("forward_calls", &StageTimes::forward_calls)
      .def_readonly("backward_calls", &StageTimes::backward_calls)
      .def_readonly("ns", &StageTimes::ns);  // (stage, ns) pairs in the operator's order
  m.def("pinned_stage_times", &pinned_stage_times);
}

}  // namespace cudnn_algos::bind
