// The binding's shared helpers (glue.h): the bound enums, problems made and checked, operands checked.
#include "glue.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <stdexcept>
#include <utility>

#include "../common/check.h"
#include "../common/dtypes.h"

namespace cudnn_algos::bind {

namespace {

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

}  // namespace

// Note [enums across the boundary]: a direction, a legacy search mode, a math type, a layout and a heuristic list
// reach the extension as members of these bound enums (backend.py turns the package's names into them, by name), so
// no function here parses a string; each enum's names are written once, in the tables the bindings read (the math
// type's and the layout's also name them in results).
void bind_enums(py::module_& m) {
  py::enum_<Direction> dir(m, "Direction");
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
    dir.value(direction_name(d), d);
  py::enum_<Mode>(m, "SearchMode")
      .value("find", Mode::Find)
      .value("find_ex", Mode::FindEx)
      .value("heuristic", Mode::Heuristic);
  py::enum_<cudnnMathType_t> math(m, "MathType");
  for (const auto& [name, e] : kMathTypes) math.value(name, e);
  py::enum_<Layout> layout(m, "Layout");
  for (const auto& [name, e] : kLayouts) layout.value(name, e);
  py::enum_<cudnnBackendHeurMode_t> lists(m, "HeuristicList");
  for (const auto& l : kHeuristicLists) lists.value(l.name, l.mode);
  py::enum_<EpilogueOp> epilogue(m, "Epilogue");
  for (const auto& e : kEpilogueOps) epilogue.value(e.name, e.op);
}

ConvProblem make_problem(const std::string& dtype, Layout layout, std::vector<int64_t> x, std::vector<int64_t> w,
                         std::vector<int64_t> y, std::vector<int> padding, std::vector<int> stride,
                         std::vector<int> dilation, int groups, cudnnMathType_t math) {
  ConvProblem p;
  p.dtype = dtype_info(dtype).cudnn;
  p.layout = layout;
  p.x_dims = std::move(x);
  p.w_dims = std::move(w);
  p.y_dims = std::move(y);
  p.padding = std::move(padding);
  p.stride = std::move(stride);
  p.dilation = std::move(dilation);
  p.groups = groups;
  p.math = math;
  p.validate();
  return p;
}

Buffers buffers_of(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y, int* device) {
  if (!x.defined() || !x.is_cuda()) throw std::invalid_argument("x must be a CUDA tensor");
  *device = x.get_device();
  check_operand(p, x, p.x_dims, "x", *device);
  check_operand(p, w, p.w_dims, "w", *device);
  check_operand(p, y, p.y_dims, "y", *device);
  return Buffers{x.data_ptr(), w.data_ptr(), y.data_ptr()};
}

std::vector<void*> operand_ptrs(const EnginePlan& pl, const std::vector<at::Tensor>& operands, int device) {
  const auto& dims = pl.graph->operand_dims;
  if (operands.size() != dims.size())
    throw std::invalid_argument("operands: this plan's epilogue takes " + std::to_string(dims.size()) +
                                " tensors, got " + std::to_string(operands.size()));
  std::vector<void*> out;
  for (size_t i = 0; i < operands.size(); ++i) {
    const std::string name = "operands[" + std::to_string(i) + "]";
    check_operand(pl.problem(), operands[i], dims[i], name.c_str(), device);
    out.push_back(operands[i].data_ptr());
  }
  return out;
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

}  // namespace cudnn_algos::bind
