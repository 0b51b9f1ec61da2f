// The binding's clock part: the kernel clock (clock/timing.h).
#include "glue.h"

#include "../clock/timing.h"

namespace cudnn_algos::bind {

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

}  // namespace cudnn_algos::bind
