// Pinned execution (pinned.h): the operators `cudnn_algos::conv` and `cudnn_algos::conv_transpose` and their
// backward operators, running stored winners.
//
// Note [the per-call path]: everything a call does after the module's forward is here, in C++: the call's
// signature from the tensors, one hash lookup of what was resolved for it (Note [signatures]), cudnnBackendExecute on
// the current stream with workspace from torch's caching allocator (graph-capture aware), and the bias added as
// torch's cuDNN path adds it. A plan is built the first time its problem is met (host work, like torch's own first
// call); a problem first met while a CUDA graph is being captured runs torch's op instead (building could
// synchronise), so warm up before capturing, as torch's own benchmark mode also needs.
//
// Note [what falls back]: a problem with no stored winner, a dtype cuDNN does not take, a tensor on another device
// kind, a transposed layer whose output_padding the mirrored convolution cannot express, a plan that fails to build
// or to run, and everything on the CPU run torch's own convolution (at::convolution / at::convolution_backward):
// same results as without apply(), counted per problem key with the reason where the call got as far as a key.
#include "pinned.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "../common/dtypes.h"
#include "../search/engine_search.h"

#include "registry.h"

namespace cudnn_algos {

namespace {

using namespace pinned_detail;

// A call's arguments beyond the tensors (views of the operator's own): a transposed layer also has output_padding.
struct ConvArgs {
  at::IntArrayRef stride, padding, output_padding, dilation;  // output_padding: transposed only
  int64_t groups = 1;
  bool transposed = false;
};

// A convolution's operands in cuDNN's roles (y = conv(x, w)): a 1-d problem lifted to 2-d (H = 1), the layout torch
// would pick (channels-last when the layer's input or the weight suggests it), each operand made dense in it. For a
// layer, x is its input; for a transposed layer (the mirrored convolution's backward-data), y is its input and x its
// output or that output's gradient (x undefined where it is what the call computes).
struct Operands {
  at::Tensor x, w, y;
  ConvProblem problem;
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  bool lifted = false;
};

std::vector<int64_t> output_dims(at::IntArrayRef x, at::IntArrayRef w, const std::vector<int>& pad,
                                 const std::vector<int>& stride, const std::vector<int>& dil) {
  std::vector<int64_t> y{x[0], w[0]};
  for (size_t i = 2; i < x.size(); ++i) {
    const size_t s = i - 2;
    y.push_back((x[i] + 2 * pad[s] - dil[s] * (w[i] - 1) - 1) / stride[s] + 1);
  }
  return y;
}

// A transposed layer's output dims for input dims `in` (torch's rule): channels w[1] * groups, and per spatial dim
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
std::vector<int64_t> transposed_output_dims(at::IntArrayRef in, at::IntArrayRef w, const ConvArgs& a) {
  std::vector<int64_t> out{in[0], w[1] * a.groups};
  for (size_t i = 2; i < in.size(); ++i) {
    const size_t s = i - 2;
    out.push_back((in[i] - 1) * a.stride[s] - 2 * a.padding[s] + a.dilation[s] * (w[i] - 1) + a.output_padding[s] +
                  1);
  }
  return out;
}

// The layout torch's cuDNN convolution runs (and returns) for input x and weight w: channels-last when either
// suggests it (cudnn_conv_suggest_memory_format); a 1-d convolution is contiguous.
at::MemoryFormat conv_format(const at::Tensor& x, const at::Tensor& w) {
  if (x.dim() != 4 && x.dim() != 5) return at::MemoryFormat::Contiguous;
  const at::MemoryFormat cl = x.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  return x.suggest_memory_format() == cl || w.suggest_memory_format() == cl ? cl : at::MemoryFormat::Contiguous;
}

// Note [16-byte operands]: the engine search declares every tensor 16-byte aligned (CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
// engine_search.cpp), and kernels chosen under that promise may use 16-byte loads; the plan key does not carry
// alignment. A dense operand can still start anywhere: a view at a storage offset (x[1:], a slice of a larger
// buffer, a narrow() along the batch) is contiguous and is not copied by .contiguous(). Such an operand is copied
// into a fresh tensor from torch's caching allocator (which aligns every block far beyond 16 bytes) before the plan
// runs, so the stored winner runs on what it was built for; outputs are always fresh tensors.
at::Tensor aligned(const at::Tensor& t, at::MemoryFormat format) {
  if (!t.defined() || !t.is_cuda() || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) return t;
  at::Tensor copy = at::empty(t.sizes(), t.options().memory_format(format));
  return copy.copy_(t);
}

// The operands of a call with layer input `in`, weight `w_in` and, for a transposed layer's backward, `grad_out`
// (the layer output's gradient: cuDNN's x); nullopt (with `why`) where cuDNN's path does not apply and torch's op
// must run.
std::optional<Operands> operands(const at::Tensor& in, const at::Tensor& w_in, const ConvArgs& a,
                                 const at::Tensor& grad_out, std::string* why, bool need_cuda = true) {
  Operands o;
  if (need_cuda && (!in.is_cuda() || !w_in.is_cuda())) return *why = "not a CUDA tensor", std::nullopt;
  const auto info = dtype_info(in.scalar_type());
  if (in.scalar_type() != w_in.scalar_type() || !info) return *why = "dtype not handled", std::nullopt;
  o.problem.dtype = info->cudnn;
  const int64_t nd = in.dim();
  if (nd < 3 || nd > 5 || w_in.dim() != nd) return *why = "rank not handled", std::nullopt;
  const size_t ns = static_cast<size_t>(nd - 2);
  if (a.stride.size() != ns || a.padding.size() != ns || a.dilation.size() != ns ||
      (a.transposed && a.output_padding.size() != ns))
    return *why = "arguments", std::nullopt;
  std::vector<int> pad(a.padding.begin(), a.padding.end()), str(a.stride.begin(), a.stride.end()),
      dil(a.dilation.begin(), a.dilation.end());
  std::vector<int64_t> out_dims;  // a transposed layer's output
  if (a.transposed) out_dims = transposed_output_dims(in.sizes(), w_in.sizes(), a);
  auto lift = [&](const at::Tensor& t) { return nd == 3 ? t.unsqueeze(2) : t; };
  if (nd == 3) {  // Conv1d: lift to 2-d with H = 1, as the searches do
    pad.insert(pad.begin(), 0);
    str.insert(str.begin(), 1);
    dil.insert(dil.begin(), 1);
    if (a.transposed) out_dims.insert(out_dims.begin() + 2, 1);
    o.lifted = true;
  }
  o.format = conv_format(in, w_in);
  o.w = aligned(lift(w_in).contiguous(o.format), o.format);
  ConvProblem& p = o.problem;
  p.layout = o.format == at::MemoryFormat::Contiguous ? Layout::NCHW : Layout::NHWC;
  p.w_dims = o.w.sizes().vec();
  p.padding = pad;
  p.stride = str;
  p.dilation = dil;
  p.groups = static_cast<int>(a.groups);
  if (!a.transposed) {
    o.x = aligned(lift(in).contiguous(o.format), o.format);
    p.x_dims = o.x.sizes().vec();
    p.y_dims = output_dims(o.x.sizes(), o.w.sizes(), pad, str, dil);
  } else {
    o.y = aligned(lift(in).contiguous(o.format), o.format);
    p.y_dims = o.y.sizes().vec();
    p.x_dims = out_dims;
    if (grad_out.defined()) {
      if (grad_out.scalar_type() != in.scalar_type()) return *why = "dtype not handled", std::nullopt;
      o.x = aligned(lift(grad_out).contiguous(o.format), o.format);
      if (o.x.sizes().vec() != p.x_dims) return *why = "arguments", std::nullopt;
    }
    // the mirrored convolution must give back the layer's input dims (not so where output_padding >= stride)
    if (output_dims(p.x_dims, p.w_dims, pad, str, dil) != p.y_dims)
      return *why = "output_padding not smaller than stride (cuDNN cannot express it)", std::nullopt;
  }
  for (int64_t d : p.y_dims)
    if (d <= 0) return *why = "empty output", std::nullopt;
  for (int64_t d : p.x_dims)
    if (d <= 0) return *why = "empty output", std::nullopt;
  return o;
}

bool flags_deterministic() { return at::globalContext().deterministicCuDNN(); }
bool flags_tf32() { return at::globalContext().allowTF32CuDNN(); }

// Runs `dir`'s stored winner into a fresh tensor shaped as that direction's output operand (y for forward, x for
// backward-data, w for backward-filter), the other operands from `o` and `y` (cuDNN's y where it is an input:
// grad_output, or a transposed layer's input; unused for forward); undefined where torch's op must run instead
// (counted).
at::Tensor run_into_new(Direction dir, const Operands& o, void* y, bool det, bool tf32, Laps& laps) {
  const std::shared_ptr<const Entry> e = resolve(dir, o.problem, det, tf32, o.w.get_device());
  laps.lap(kResolve);
  if (!e->plan) {
    if (e->torch_winner) ++e->cell->torch;
    else count_fallback(*e->cell, e->why);
    laps.lap(kCount);
    return at::Tensor();
  }
  const bool data = dir == Direction::BackwardData, filter = dir == Direction::BackwardFilter;
  const auto& dims = data ? o.problem.x_dims : filter ? o.problem.w_dims : o.problem.y_dims;
  at::Tensor out = at::empty(dims, o.w.options().memory_format(o.format));
  Buffers b{o.x.defined() ? o.x.data_ptr() : nullptr, o.w.data_ptr(), y};
  (data ? b.x : filter ? b.w : b.y) = out.data_ptr();
  laps.lap(kAlloc);
  try {
    e->plan->execute(b, laps.split());
  } catch (const std::exception& ex) {
    laps.add_split();
    count_fallback(*e->cell, std::string("the stored configuration failed to run: ") + ex.what());
    return at::Tensor();
  }
  laps.add_split();
  laps.add_execute_to(*e->cell);
  ++e->cell->pinned;
  laps.lap(kCount);
  return o.lifted ? out.squeeze(2) : out;
}

at::Tensor add_bias(at::Tensor y, const std::optional<at::Tensor>& bias) {
  if (!bias || !bias->defined()) return y;
  std::vector<int64_t> shape(y.dim(), 1);
  shape[1] = bias->numel();
  return y.add_(bias->reshape(shape));
}

// ---------------------------------------------------------------------------------------------- kernels
using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

std::vector<int64_t> output_padding_of(const ConvArgs& a) {
  return a.transposed ? a.output_padding.vec() : std::vector<int64_t>(a.stride.size(), 0);
}

// torch's own convolution: the CPU kernels, and every call the stored winners do not cover
at::Tensor torch_conv(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                      const ConvArgs& a) {
  return at::convolution(x, w, bias, a.stride, a.padding, a.dilation, a.transposed, output_padding_of(a), a.groups);
}

Grads torch_conv_backward(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, const ConvArgs& a,
                          std::array<bool, 3> mask) {
  const int64_t channels = a.transposed ? w.size(1) * a.groups : w.size(0);
  return at::convolution_backward(gy, x, w, at::OptionalIntArrayRef({channels}), a.stride, a.padding, a.dilation,
                                  a.transposed, output_padding_of(a), a.groups, mask);
}

// A layer's forward: cuDNN's forward, or for a transposed layer cuDNN's backward-data of the mirrored convolution
at::Tensor conv_cuda_any(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                         const ConvArgs& a) {
  Laps laps(0);
  std::string why;
  auto o = operands(x, w, a, at::Tensor(), &why);
  laps.lap(kOperands);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y;
  if (o) {
    const bool det = flags_deterministic(), tf32 = flags_tf32();
    y = a.transposed ? run_into_new(Direction::BackwardData, *o, o->y.data_ptr(), det, tf32, laps)
                     : run_into_new(Direction::Forward, *o, nullptr, det, tf32, laps);
  }
  if (!y.defined()) {
    y = torch_conv(x, w, bias, a);
    laps.lap(kTorchOp);
    return y;
  }
  y = add_bias(y, bias);
  laps.lap(kBias);
  return y;
}

// A layer's backward: for a convolution cuDNN's backward-data and backward-filter; for a transposed layer the input's
// gradient is cuDNN's forward of the output's gradient, the weight's cuDNN's backward-filter (x: the output's
// gradient, y: the layer's input). Each runs its own stored winner; what has none runs torch's.
Grads conv_backward_cuda_any(const at::Tensor& gy_in, const at::Tensor& x, const at::Tensor& w, const ConvArgs& a,
                             std::array<bool, 3> mask) {
  Laps laps(1);
  std::string why;
  auto o = gy_in.scalar_type() == x.scalar_type()
               ? operands(x, w, a, a.transposed ? gy_in : at::Tensor(), &why)
               : std::nullopt;
  if (!o) {
    Grads t = torch_conv_backward(gy_in, x, w, a, mask);
    laps.lap(kTorchOp);
    return t;
  }
  c10::cuda::CUDAGuard guard(x.device());
  const bool det = flags_deterministic(), tf32 = flags_tf32();
  at::Tensor gx, gw, gb;
  if (a.transposed) {
    laps.lap(kOperands);
    if (mask[0]) gx = run_into_new(Direction::Forward, *o, nullptr, det, tf32, laps);
    if (mask[1]) gw = run_into_new(Direction::BackwardFilter, *o, o->y.data_ptr(), det, tf32, laps);
  } else {
    at::Tensor gy = aligned((o->lifted ? gy_in.unsqueeze(2) : gy_in).contiguous(o->format), o->format);
    laps.lap(kOperands);
    if (mask[0]) gx = run_into_new(Direction::BackwardData, *o, gy.data_ptr(), det, tf32, laps);
    if (mask[1]) gw = run_into_new(Direction::BackwardFilter, *o, gy.data_ptr(), det, tf32, laps);
  }
  const std::array<bool, 3> rest{mask[0] && !gx.defined(), mask[1] && !gw.defined(), false};
  if (rest[0] || rest[1]) {
    Grads t = torch_conv_backward(gy_in, x, w, a, rest);
    if (rest[0]) gx = std::get<0>(t);
    if (rest[1]) gw = std::get<1>(t);
    laps.lap(kTorchOp);
  }
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < gy_in.dim(); ++d) dims.push_back(d);
    gb = gy_in.sum(dims, false, at::kFloat).to(gy_in.scalar_type());
    laps.lap(kBias);
  }
  return {gx, gw, gb};
}

// Meta (torch.compile's fake tensors): shapes, dtypes and the layout the CUDA kernel returns
at::Tensor conv_meta_any(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& /*bias*/,
                         const ConvArgs& a) {
  TORCH_CHECK(x.dim() >= 3 && x.dim() <= 5 && w.dim() == x.dim() && a.stride.size() + 2 == size_t(x.dim()) &&
                  a.padding.size() == a.stride.size() && a.dilation.size() == a.stride.size() &&
                  (!a.transposed || a.output_padding.size() == a.stride.size()),
              "cudnn_algos::conv: x and w need 3 to 5 dims and one stride, padding, dilation (and output_padding) "
              "per spatial dim");
  std::vector<int> pad(a.padding.begin(), a.padding.end()), str(a.stride.begin(), a.stride.end()),
      dil(a.dilation.begin(), a.dilation.end());
  const std::vector<int64_t> y = a.transposed ? transposed_output_dims(x.sizes(), w.sizes(), a)
                                              : output_dims(x.sizes(), w.sizes(), pad, str, dil);
  return at::empty(y, x.options().memory_format(conv_format(x, w)));
}

Grads conv_backward_meta_any(const at::Tensor& /*gy*/, const at::Tensor& x, const at::Tensor& w, const ConvArgs& a,
                             std::array<bool, 3> mask) {
  const int64_t channels = a.transposed ? w.size(1) * a.groups : w.size(0);
  return {mask[0] ? at::empty_like(x) : at::Tensor(), mask[1] ? at::empty_like(w) : at::Tensor(),
          mask[2] ? at::empty({channels}, w.options()) : at::Tensor()};
}

ConvArgs plain(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return ConvArgs{stride, padding, {}, dilation, groups, false};
}
ConvArgs transposed(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                    at::IntArrayRef dilation, int64_t groups) {
  return ConvArgs{stride, padding, output_padding, dilation, groups, true};
}

// The registered kernels: each kernel above (written once over ConvArgs) adapted to the schemas of `conv` and
// `conv_transpose` (the forward), `conv_backward` and `conv_transpose_backward` (the backward).
using Forward = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                               const ConvArgs&);
using Backward = Grads (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&, const ConvArgs&,
                           std::array<bool, 3>);

template <Forward F>
at::Tensor conv_kernel(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return F(x, w, bias, plain(stride, padding, dilation, groups));
}

template <Forward F>
at::Tensor conv_transpose_kernel(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                                 at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                                 at::IntArrayRef dilation, int64_t groups) {
  return F(x, w, bias, transposed(stride, padding, output_padding, dilation, groups));
}

template <Backward F>
Grads conv_backward_kernel(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                           std::array<bool, 3> mask) {
  return F(gy, x, w, plain(stride, padding, dilation, groups), mask);
}

template <Backward F>
Grads conv_transpose_backward_kernel(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w,
                                     at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                                     at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask) {
  return F(gy, x, w, transposed(stride, padding, output_padding, dilation, groups), mask);
}

// ---------------------------------------------------------------------------------------------- autograd
// The operators called through the dispatcher (below autograd: the CUDA, CPU or Meta kernel of the tensors' device)
at::Tensor call_forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                        const ConvArgs& a) {
  using Fwd = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, at::IntArrayRef,
                         at::IntArrayRef, at::IntArrayRef, int64_t);
  using FwdT = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, at::IntArrayRef,
                          at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t);
  static auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("cudnn_algos::conv", "").typed<Fwd>();
  static auto conv_t =
      c10::Dispatcher::singleton().findSchemaOrThrow("cudnn_algos::conv_transpose", "").typed<FwdT>();
  return a.transposed ? conv_t.call(x, w, bias, a.stride, a.padding, a.output_padding, a.dilation, a.groups)
                      : conv.call(x, w, bias, a.stride, a.padding, a.dilation, a.groups);
}

Grads call_backward(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, const ConvArgs& a,
                    std::array<bool, 3> mask) {
  using Bwd = Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                    at::IntArrayRef, int64_t, std::array<bool, 3>);
  using BwdT = Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                     at::IntArrayRef, at::IntArrayRef, int64_t, std::array<bool, 3>);
  static auto bwd = c10::Dispatcher::singleton().findSchemaOrThrow("cudnn_algos::conv_backward", "").typed<Bwd>();
  static auto bwd_t =
      c10::Dispatcher::singleton().findSchemaOrThrow("cudnn_algos::conv_transpose_backward", "").typed<BwdT>();
  return a.transposed ? bwd_t.call(gy, x, w, a.stride, a.padding, a.output_padding, a.dilation, a.groups, mask)
                      : bwd.call(gy, x, w, a.stride, a.padding, a.dilation, a.groups, mask);
}

// Note [the autograd node]: the forward operators' Autograd kernel records one ConvBackward node per call, written
// as torch's generated nodes are (the inputs saved as SavedVariables, the arguments as plain members, next edges and
// history set directly) rather than through torch::autograd::Function, whose per-call context (a string-keyed map of
// IValues for the arguments, the checks of each output) cost more host time than the convolution's own bookkeeping.
// Its backward runs the backward operator: backward-data and backward-filter, each its own stored winner; the bias's
// gradient is the sum of grad_y over all but the channel dim, as torch computes it.
struct SavedArgs {
  std::vector<int64_t> stride, padding, output_padding, dilation;
  int64_t groups = 1;
  bool transposed = false;

  static SavedArgs of(const ConvArgs& a) {
    return {a.stride.vec(), a.padding.vec(), a.output_padding.vec(), a.dilation.vec(), a.groups, a.transposed};
  }
  ConvArgs view() const { return ConvArgs{stride, padding, output_padding, dilation, groups, transposed}; }
};

struct ConvBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable x, w;
  SavedArgs args;
  bool has_bias = false;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    torch::autograd::variable_list out(has_bias ? 3 : 2);
    const std::array<bool, 3> mask{task_should_compute_output(0), task_should_compute_output(1),
                                   has_bias && task_should_compute_output(2)};
    if (!grads[0].defined() || !(mask[0] || mask[1] || mask[2])) return out;
    // the backward operator has no autograd kernel: below autograd unless a graph of the backward is being built
    // (create_graph), where torch's fallback for such operators notices the gradients are not differentiable
    std::optional<at::AutoDispatchBelowADInplaceOrView> below;
    if (!at::GradMode::is_enabled()) below.emplace();
    auto [gx, gw, gb] = call_backward(grads[0], x.unpack(), w.unpack(), args.view(), mask);
    out[0] = std::move(gx);
    out[1] = std::move(gw);
    if (has_bias) out[2] = std::move(gb);
    return out;
  }
  std::string name() const override { return "cudnn_algos::ConvBackward"; }
  void release_variables() override {
    x.reset_data();
    w.reset_data();
  }
};

// A new node, held the way this torch's autograd edges hold nodes (an intrusive pointer in newer releases, a
// shared_ptr in older ones)
template <class N>
auto make_node() {
  using Ptr = decltype(torch::autograd::Edge::function);
  if constexpr (std::is_same_v<Ptr, std::shared_ptr<torch::autograd::Node>>) return std::make_shared<N>();
  else return c10::make_intrusive<N>();
}

at::Tensor autograd_any(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                        const ConvArgs& a) {
  const bool has_bias = bias && bias->defined();
  at::Tensor y;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    y = call_forward(x, w, bias, a);
  }
  if (!(has_bias ? torch::autograd::compute_requires_grad(x, w, *bias)
                 : torch::autograd::compute_requires_grad(x, w)))
    return y;
  auto node = make_node<ConvBackward>();
  node->set_next_edges(has_bias ? torch::autograd::collect_next_edges(x, w, *bias)
                                : torch::autograd::collect_next_edges(x, w));
  node->x = torch::autograd::SavedVariable(x, false);
  node->w = torch::autograd::SavedVariable(w, false);
  node->args = SavedArgs::of(a);
  node->has_bias = has_bias;
  torch::autograd::set_history(y, node);
  return y;
}

// torch.autocast: cast as torch's convolutions are cast (they are on autocast's lower-precision list)
at::Tensor autocast_any(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                        const ConvArgs& a) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const at::ScalarType t = at::autocast::get_autocast_dtype(at::kCUDA);
  return call_forward(at::autocast::cached_cast(t, x, c10::DeviceType::CUDA),
                      at::autocast::cached_cast(t, w, c10::DeviceType::CUDA),
                      at::autocast::cached_cast(t, bias, c10::DeviceType::CUDA), a);
}

}  // namespace

at::Tensor BoundConv::operator()(const at::Tensor& x, const at::Tensor& w,
                                 const std::optional<at::Tensor>& bias) const {
  return call_forward(x, w, bias, ConvArgs{stride, padding, output_padding, dilation, groups, transposed});
}

std::string operator_key(Direction dir, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool deterministic,
                         bool allow_tf32, bool is_transposed, at::IntArrayRef output_padding) {
  std::string why;
  const ConvArgs a = is_transposed ? transposed(stride, padding, output_padding, dilation, groups)
                                   : plain(stride, padding, dilation, groups);
  auto o = operands(x, w, a, at::Tensor(), &why, /*need_cuda=*/false);
  if (!o) throw std::invalid_argument("the operator would run torch's op here: " + why);
  return problem_key(dir, o->problem, deterministic, allow_tf32);
}

}  // namespace cudnn_algos

TORCH_LIBRARY(cudnn_algos, m) {
  m.def("conv(Tensor x, Tensor w, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def("conv_backward(Tensor grad_y, Tensor x, Tensor w, int[] stride, int[] padding, int[] dilation, int groups, "
        "bool[3] mask) -> (Tensor, Tensor, Tensor)");
  m.def("conv_transpose(Tensor x, Tensor w, Tensor? bias, int[] stride, int[] padding, int[] output_padding, "
        "int[] dilation, int groups) -> Tensor");
  m.def("conv_transpose_backward(Tensor grad_y, Tensor x, Tensor w, int[] stride, int[] padding, "
        "int[] output_padding, int[] dilation, int groups, bool[3] mask) -> (Tensor, Tensor, Tensor)");
}

namespace cudnn_algos {
namespace {
// One dispatch key's kernels of the four operators (forward F, backward B), each adapted to its schema once
template <Forward F, Backward B>
void impl_all(torch::Library& m) {
  m.impl("conv", &conv_kernel<F>);
  m.impl("conv_backward", &conv_backward_kernel<B>);
  m.impl("conv_transpose", &conv_transpose_kernel<F>);
  m.impl("conv_transpose_backward", &conv_transpose_backward_kernel<B>);
}

// Keys that wrap only the forwards (autograd, autocast): the backward operators are reached below them
template <Forward F>
void impl_forwards(torch::Library& m) {
  m.impl("conv", &conv_kernel<F>);
  m.impl("conv_transpose", &conv_transpose_kernel<F>);
}
}  // namespace
}  // namespace cudnn_algos

TORCH_LIBRARY_IMPL(cudnn_algos, CUDA, m) {
  cudnn_algos::impl_all<cudnn_algos::conv_cuda_any, cudnn_algos::conv_backward_cuda_any>(m);
}
TORCH_LIBRARY_IMPL(cudnn_algos, CPU, m) {
  cudnn_algos::impl_all<cudnn_algos::torch_conv, cudnn_algos::torch_conv_backward>(m);
}
TORCH_LIBRARY_IMPL(cudnn_algos, Meta, m) {
  cudnn_algos::impl_all<cudnn_algos::conv_meta_any, cudnn_algos::conv_backward_meta_any>(m);
}
TORCH_LIBRARY_IMPL(cudnn_algos, Autograd, m) { cudnn_algos::impl_forwards<cudnn_algos::autograd_any>(m); }
TORCH_LIBRARY_IMPL(cudnn_algos, AutocastCUDA, m) { cudnn_algos::impl_forwards<cudnn_algos::autocast_any>(m); }
