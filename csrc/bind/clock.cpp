// The binding's clock part: the kernel clock (clock/timing.h).
#include "glue.h"

#include "../clock/timing.h"

namespace cudnn_algos::bind {

void bind_clock(py::module_& m) {
  // the kernel clock (timing.h): one CUPTI activity session; windows are (t0, t1) pairs of kernel_clock_now()
  py::class_<WindowActivity>(m, "WindowActivity")
      .def_readonly("busy_ns", &WindowActivity::busy_ns)
      .def_readonly("activities", &WindowActivity::activities)
      .def_readonly("kernels", &WindowActivity::kernels);
  m.def("kernel_clock_begin", &kernel_clock_begin, py::arg("own_timestamps") = true);
  m.def("kernel_clock_now", &kernel_clock_now);
  m.def(
      "kernel_clock_end",
      [](int device, const std::vector<std::pair<uint64_t, uint64_t>>& windows) {
        py::gil_scoped_release nogil;
        return kernel_clock_end(device, windows);
      },
      py::arg("device"), py::arg("windows"));
  m.def("kernel_clock_abort", &kernel_clock_abort);
  m.def("kernel_clock_keep_attached", &kernel_clock_keep_attached, py::arg("on"));
  py::class_<KernelClockStats>(m, "KernelClockStats")
      .def_readonly("sessions", &KernelClockStats::sessions)
      .def_readonly("finalizes", &KernelClockStats::finalizes)
      .def_readonly("attached", &KernelClockStats::attached)
      .def_readonly("buffers_requested", &KernelClockStats::buffers_requested)
      .def_readonly("buffers_completed", &KernelClockStats::buffers_completed)
      .def_readonly("buffers_reclaimed", &KernelClockStats::buffers_reclaimed)
      .def_readonly("buffers_outstanding", &KernelClockStats::buffers_outstanding);
  m.def("kernel_clock_stats", &kernel_clock_stats);
}

}  // namespace cudnn_algos::bind
