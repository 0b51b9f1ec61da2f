// The operation graph of one problem: tensors, the convolution, its operation, an optional pointwise epilogue
// (Note [fused graphs] in graph.h), finalized into the graph the engine search enumerates.
#include "graph.h"

#include <stdexcept>
#include <string>

#include "../common/check.h"

namespace cudnn_algos {

const EpilogueOpInfo& epilogue_info(EpilogueOp op) {
  for (const auto& e : kEpilogueOps)
    if (e.op == op) return e;
  throw std::invalid_argument("epilogue op " + std::to_string(static_cast<int>(op)) + " is not in kEpilogueOps");
}

namespace {

constexpr int64_t kUidConvOut = 1000;   // the convolution's virtual output in a fused graph
constexpr int64_t kUidStep = 1001;      // + i: epilogue op i's virtual output (all but the last)
constexpr int64_t kUidOperand = 2000;   // + i: epilogue op i's operand

// A tensor of `dims` in the problem's layout: `dtype`, virtual (an intermediate no buffer holds) or not.
BackendDesc tensor(const ConvProblem& p, const std::vector<int64_t>& dims, int64_t uid, cudnnDataType_t dtype,
                   bool is_virtual = false) {
  BackendDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  set_attr(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dtype);
  set_int64s(t, CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  set_int64s(t, CUDNN_ATTR_TENSOR_STRIDES, p.strides_of(dims));
  set_attr(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
  set_attr(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  if (is_virtual) {
    const bool v = true;
    set_attr(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &v);
  }
  CUDNN_CHECK(cudnnBackendFinalize(t.get()));
  return t;
}

BackendDesc convolution(const ConvProblem& p) {
  BackendDesc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = p.compute_type();
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t nsp = p.spatial_dims();
  const std::vector<int64_t> pad(p.padding.begin(), p.padding.end()), str(p.stride.begin(), p.stride.end()),
      dil(p.dilation.begin(), p.dilation.end());
  set_attr(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp);
  set_attr(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode);
  set_attr(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &nsp);
  set_int64s(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, dil);
  set_int64s(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, str);
  set_int64s(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, pad);
  set_int64s(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, pad);
  CUDNN_CHECK(cudnnBackendFinalize(conv.get()));
  return conv;
}

// One scalar attribute in the pointwise descriptor's math precision (cuDNN takes float or double, matching it).
void set_scalar(const BackendDesc& d, cudnnBackendAttributeName_t a, cudnnDataType_t prec, double v) {
  if (prec == CUDNN_DATA_DOUBLE) {
    set_attr(d, a, CUDNN_TYPE_DOUBLE, &v);
  } else {
    const float f = static_cast<float>(v);
    set_attr(d, a, CUDNN_TYPE_FLOAT, &f);
  }
}

BackendDesc pointwise(EpilogueOp op, cudnnDataType_t prec) {
  const EpilogueOpInfo& info = epilogue_info(op);
  BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  set_attr(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &info.mode);
  set_attr(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
  if (op == EpilogueOp::Relu6) {
    set_scalar(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, prec, 0.0);
    set_scalar(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, prec, 6.0);
  } else if (op == EpilogueOp::Silu) {
    set_scalar(pw, CUDNN_ATTR_POINTWISE_SWISH_BETA, prec, 1.0);
  }
  CUDNN_CHECK(cudnnBackendFinalize(pw.get()));
  return pw;
}

// The direction's output operand (the tensor the convolution writes) and its dims.
const std::vector<int64_t>& output_dims(Direction dir, const ConvProblem& p) {
  switch (dir) {
    case Direction::Forward: return p.y_dims;
    case Direction::BackwardData: return p.x_dims;
    case Direction::BackwardFilter: return p.w_dims;
  }
  throw std::invalid_argument("unknown direction");
}

// The epilogue after the convolution's (virtual) output `conv_out`: its ops appended to `g->epilogue`, the last
// writing `out` (the direction's output operand); returns the ops in graph order.
std::vector<cudnnBackendDescriptor_t> epilogue_ops(EngineGraph& g, const std::vector<EpilogueOp>& epilogue,
                                                   const BackendDesc& conv_out, const BackendDesc& out) {
  const ConvProblem& p = g.problem;
  const cudnnDataType_t comp = p.compute_type();
  const std::vector<int64_t>& dims = output_dims(g.direction, p);
  std::vector<int64_t> per_channel(dims.size(), 1);
  per_channel[1] = dims[1];
  std::vector<cudnnBackendDescriptor_t> ops;
  const BackendDesc* in = &conv_out;
  const BackendDesc* kept = nullptr;  // Note [kept values]
  for (size_t i = 0; i < epilogue.size(); ++i) {
    const EpilogueOpInfo& info = epilogue_info(epilogue[i]);
    const bool last = i + 1 == epilogue.size();
    if (epilogue[i] == EpilogueOp::Keep) {
      if (last)
        throw std::invalid_argument("epilogue op 'keep' cannot be the last op (nothing would write the output)");
      kept = in;
      continue;
    }
    const BackendDesc* operand = nullptr;
    if (info.operand == EpilogueOperand::Kept) {
      if (kept == nullptr) throw std::invalid_argument("epilogue op 'mul_kept' needs a 'keep' before it");
      operand = kept;
    } else if (info.operand != EpilogueOperand::None) {
      const auto& odims = info.operand == EpilogueOperand::Full ? dims : per_channel;
      const int64_t uid = kUidOperand + static_cast<int64_t>(i);
      g.epilogue.push_back(tensor(p, odims, uid, p.dtype));
      operand = &g.epilogue.back();
      g.uids.push_back(uid);
      g.operand_dims.push_back(odims);
    }
    const BackendDesc* result = &out;
    if (!last) {
      g.epilogue.push_back(tensor(p, dims, kUidStep + static_cast<int64_t>(i), comp, true));
      result = &g.epilogue.back();
    }
    g.epilogue.push_back(pointwise(epilogue[i], comp));
    const BackendDesc& pw = g.epilogue.back();
    BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *in);
    if (operand) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *operand);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *result);
    CUDNN_CHECK(cudnnBackendFinalize(op.get()));
    g.epilogue.push_back(std::move(op));
    ops.push_back(g.epilogue.back().get());
    in = result;
  }
  return ops;
}

template <Direction D>
std::shared_ptr<EngineGraph> build(const ConvProblem& p, const std::vector<EpilogueOp>& epilogue,
                                   cudnnHandle_t handle) {
  using T = DirectionTraits<D>;
  p.validate();
  if (!epilogue.empty() && D == Direction::BackwardFilter)
    throw std::invalid_argument("an epilogue follows a forward or backward-data convolution, not a weight gradient");
  auto g = std::make_shared<EngineGraph>();
  g->problem = p;
  g->direction = D;
  g->handle = handle;
  g->x = tensor(p, p.x_dims, kUidX, p.dtype);
  g->w = tensor(p, p.w_dims, kUidW, p.dtype);
  g->y = tensor(p, p.y_dims, kUidY, p.dtype);
  // with an epilogue the convolution writes a virtual tensor of its output's dims in the compute type
  BackendDesc conv_out;
  if (!epilogue.empty()) conv_out = tensor(p, output_dims(D, p), kUidConvOut, p.compute_type(), true);
  const auto role = [&](Operand o) -> const BackendDesc& {
    if (!epilogue.empty() && o == T::output) return conv_out;
    return o == Operand::X ? g->x : o == Operand::W ? g->w : g->y;
  };

  g->conv = convolution(p);
  g->op = BackendDesc(T::op_type);
  const auto& a = T::op_attrs;  // alpha, beta, conv, x-role, w-role, y-role
  if (p.dtype == CUDNN_DATA_DOUBLE) {
    const double one = 1.0, zero = 0.0;
    set_attr(g->op, a[0], CUDNN_TYPE_DOUBLE, &one);
    set_attr(g->op, a[1], CUDNN_TYPE_DOUBLE, &zero);
  } else {
    const float one = 1.0f, zero = 0.0f;
    set_attr(g->op, a[0], CUDNN_TYPE_FLOAT, &one);
    set_attr(g->op, a[1], CUDNN_TYPE_FLOAT, &zero);
  }
  set_desc(g->op, a[2], g->conv);
  set_desc(g->op, a[3], role(Operand::X));
  set_desc(g->op, a[4], role(Operand::W));
  set_desc(g->op, a[5], role(Operand::Y));
  CUDNN_CHECK(cudnnBackendFinalize(g->op.get()));

  std::vector<cudnnBackendDescriptor_t> ops{g->op.get()};
  if (!epilogue.empty()) {
    g->epilogue.reserve(4 * epilogue.size() + 1);  // pointers into it are held while it grows: no reallocation
    const BackendDesc& out = T::output == Operand::X ? g->x : g->y;
    for (auto op : epilogue_ops(*g, epilogue, conv_out, out)) ops.push_back(op);
    g->epilogue.push_back(std::move(conv_out));
  }

  g->graph = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_attr(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(),
           static_cast<int64_t>(ops.size()));
  set_attr(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  const cudnnStatus_t s = cudnnBackendFinalize(g->graph.get());
  if (s != CUDNN_STATUS_SUCCESS && epilogue.empty()) CUDNN_CHECK(s);
  g->graph_status = s;
  return g;
}

}  // namespace

std::shared_ptr<EngineGraph> build_graph(Direction dir, const ConvProblem& p, const std::vector<EpilogueOp>& epilogue,
                                         cudnnHandle_t handle) {
  return with_direction(dir, [&](auto d) { return build<decltype(d)::value>(p, epilogue, handle); });
}

}  // namespace cudnn_algos
