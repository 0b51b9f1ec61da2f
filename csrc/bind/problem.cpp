// The binding's problem part: the problem description and what the extension sees of its environment (versions,
// handles).
#include "glue.h"

#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAGuard.h>

#include "../common/check.h"
#include "../common/dtypes.h"

#define CUDNN_ALGOS_STR2(x) #x
#define CUDNN_ALGOS_STR(x) CUDNN_ALGOS_STR2(x)
#ifdef CUDNN_ALGOS_BUILD_TORCH_VERSION_RAW
#define CUDNN_ALGOS_BUILD_TORCH_VERSION CUDNN_ALGOS_STR(CUDNN_ALGOS_BUILD_TORCH_VERSION_RAW)
#else
#define CUDNN_ALGOS_BUILD_TORCH_VERSION "unknown"
#endif

namespace cudnn_algos::bind {

namespace {

// What the extension sees of the versions around it (backend.Versions reads these names).
struct Versions {
  int64_t cudnn_runtime = static_cast<int64_t>(cudnnGetVersion());
  int64_t cudnn_build = static_cast<int64_t>(CUDNN_VERSION);
  int64_t cudnn_cudart = static_cast<int64_t>(cudnnGetCudartVersion());
  int64_t cuda_runtime = runtime_version();
  int64_t cuda_driver = driver_version();  // 0 with no driver installed; -1 if the call itself failed
  int64_t cuda_build = static_cast<int64_t>(CUDART_VERSION);
  std::string torch_build = CUDNN_ALGOS_BUILD_TORCH_VERSION;

  static int64_t runtime_version() {
    int v = -1;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : -1;
  }
  static int64_t driver_version() {
    int v = -1;
    return cudaDriverGetVersion(&v) == cudaSuccess ? v : -1;
  }
};

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

}  // namespace

// The problem description and what the extension sees of its environment (versions, handles).
void bind_problem(py::module_& m) {
  py::class_<ConvProblem>(m, "ConvProblem")
      .def(py::init(&make_problem), py::arg("dtype"), py::arg("layout"), py::arg("x"), py::arg("w"), py::arg("y"),
           py::arg("padding"), py::arg("stride"), py::arg("dilation"), py::arg("groups"), py::arg("math"))
      .def("describe", &ConvProblem::describe)
      .def("__repr__", [](const ConvProblem& p) { return "<ConvProblem " + p.describe() + ">"; })
      // pickled as its constructor's arguments (a problem sent to another process: choose/lists_process.py)
      .def(py::pickle(
          [](const ConvProblem& p) {
            return py::make_tuple(dtype_info(p.dtype).value().name, p.layout, p.x_dims, p.w_dims, p.y_dims,
                                  p.padding, p.stride, p.dilation, p.groups, p.math);
          },
          [](const py::tuple& t) {
            if (t.size() != 10) throw std::invalid_argument("a pickled ConvProblem has 10 fields");
            return make_problem(t[0].cast<std::string>(), t[1].cast<Layout>(),
                                t[2].cast<std::vector<int64_t>>(), t[3].cast<std::vector<int64_t>>(),
                                t[4].cast<std::vector<int64_t>>(), t[5].cast<std::vector<int>>(),
                                t[6].cast<std::vector<int>>(), t[7].cast<std::vector<int>>(), t[8].cast<int>(),
                                t[9].cast<cudnnMathType_t>());
          }));

  m.def("algo_names", [](Direction dir) { return algo_names(dir); });
  py::class_<Versions>(m, "Versions")
      .def_readonly("cudnn_runtime", &Versions::cudnn_runtime)
      .def_readonly("cudnn_build", &Versions::cudnn_build)
      .def_readonly("cudnn_cudart", &Versions::cudnn_cudart)
      .def_readonly("cuda_runtime", &Versions::cuda_runtime)
      .def_readonly("cuda_driver", &Versions::cuda_driver)
      .def_readonly("cuda_build", &Versions::cuda_build)
      .def_readonly("torch_build", &Versions::torch_build);
  m.def("versions", [] { return Versions{}; });
  m.def("probe_handle", &probe_handle, py::arg("device") = 0);
  py::class_<HandleCounts>(m, "HandleCounts")
      .def_readonly("created", &HandleCounts::created)
      .def_readonly("pooled", &HandleCounts::pooled);
  m.def("cudnn_handles", &handle_counts);
  // for the CPU tests of the translation below: raises what a failed cuDNN call with this status raises
  m.def("_raise_cudnn_status", [](int code) {
    throw_cudnn(static_cast<cudnnStatus_t>(code), "_raise_cudnn_status", __FILE__, __LINE__);
  });
}

}  // namespace cudnn_algos::bind
