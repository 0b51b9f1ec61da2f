// The module cudnn_algos._C: glue only. Its parts are bound in csrc/bind/ (problem, search, clock, pinned; what they
// share in glue.h), each its own translation unit so that they compile side by side; here the module is made and
// cuDNN's and CUDA's failures are translated, once, at the binding edge. No search logic lives here.
// cudnn_algos/backend.py is its only Python caller.
#include "bind/glue.h"

#include <cuda_runtime_api.h>
#include <c10/util/Exception.h>

#include "common/check.h"

namespace py = pybind11;
using namespace cudnn_algos;

namespace {

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
  bind::bind_enums(m);  // first: the parts' signatures name them
  bind::bind_problem(m);
  bind::bind_search(m);
  bind::bind_clock(m);
  bind::bind_pinned(m);
  register_errors();
}
