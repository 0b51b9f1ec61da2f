// What the binding's parts share (csrc/bind/*.cpp; the module itself is csrc/bindings.cpp): pybind11 with torch's
// tensor casters (not <torch/extension.h>, whose C++ frontend a binding does not use: each part compiles in a
// fraction of the time, and the parts compile side by side), the bound enums, problems and operand checks.
#pragma once

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <cudnn.h>

#include <string>
#include <vector>

#include "../common/conv_params.h"
#include "../common/directions.h"
#include "../search/engine_search.h"
#include "../search/legacy_search.h"

namespace cudnn_algos::bind {

namespace py = pybind11;

// Direction, SearchMode, MathType, Layout, HeuristicList and Epilogue as bound enums (Note [enums across the boundary])
void bind_enums(py::module_& m);

ConvProblem make_problem(const std::string& dtype, Layout layout, std::vector<int64_t> x, std::vector<int64_t> w,
                         std::vector<int64_t> y, std::vector<int> padding, std::vector<int> stride,
                         std::vector<int> dilation, int groups, cudnnMathType_t math);

// The operands' buffers after checking each is exactly what the problem describes (device set from x).
Buffers buffers_of(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y, int* device);
// The epilogue operands' buffers of a fused plan (Note [fused graphs]), each checked like an operand.
std::vector<void*> operand_ptrs(const EnginePlan& pl, const std::vector<at::Tensor>& operands, int device);
std::vector<Buffers> buffer_sets(const ConvProblem& p, const std::vector<at::Tensor>& xs,
                                 const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& ys, int* device);

void bind_problem(py::module_& m);  // problem.cpp
void bind_search(py::module_& m);   // search.cpp
void bind_clock(py::module_& m);    // clock.cpp
void bind_pinned(py::module_& m);   // pinned.cpp

}  // namespace cudnn_algos::bind
