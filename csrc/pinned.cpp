// Pinned execution (pinned.h): the operator `cudnn_algos::conv` and its backward, running stored winners.
//
// Note [the per-call path]: everything a call does after the module's forward is here, in C++: the problem key from
// the tensors, one lookup in the winners, one in the plans built so far, cudnnBackendExecute on the current stream
// with workspace from torch's caching allocator (graph-capture aware), and the bias added as torch's cuDNN path adds
// it. A plan is built the first time its problem is met (host work, like torch's own first call); a problem first
// met while a CUDA graph is being captured runs torch's op instead (building could synchronise), so warm up before
// capturing, as torch's own benchmark mode also needs.
//
// Note [what falls back]: a problem with no stored winner, a dtype cuDNN does not take, a tensor on another device
// kind, a plan that fails to build or to run, and everything on the CPU run torch's own convolution (at::convolution
// / at::convolution_backward): same results as without apply(), counted per problem key with the reason.
#include "pinned.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "dtypes.h"
#include "engine_search.h"

namespace cudnn_algos {

std::string problem_key(Direction dir, const ConvProblem& p, bool deterministic, bool allow_tf32) {
  static const char* dirs[] = {"forward", "backward_data", "backward_filter"};
  const auto info = dtype_info(p.dtype);
  const std::string dt = info ? info->name : "dtype" + std::to_string(static_cast<int>(p.dtype));
  std::string k = std::string(dirs[static_cast<int>(dir)]) + " " + dt + " " + p.describe();
  k += deterministic ? " deterministic=1" : " deterministic=0";
  if (p.dtype == CUDNN_DATA_FLOAT) k += allow_tf32 ? " tf32=1" : " tf32=0";
  return k;
}

namespace {

struct Winner {
  int64_t engine_id = -1;
  Knobs knobs;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, Winner> winners;
  // built plans by (device, key); a null plan: building failed (the reason is in counts), not tried again
  std::map<std::pair<int, std::string>, std::shared_ptr<EnginePlan>> plans;
  std::map<std::string, PinnedCount> counts;
  int64_t built = 0;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: plans must not be freed after cuDNN unloads at exit
  return *r;
}

void count(const std::string& key, int64_t PinnedCount::*field, const std::string& reason = "") {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  PinnedCount& c = r.counts[key];
  c.key = key;
  ++(c.*field);
  if (!reason.empty()) c.reason = reason;
}

// A convolution's operands as cuDNN takes them: a 1-d problem lifted to 2-d (H = 1), the layout torch would pick
// (channels-last when the input or the weight suggests it), x and w made dense in it.
struct Operands {
  at::Tensor x, w;
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

// The layout torch's cuDNN convolution runs (and returns) for input x and weight w: channels-last when either
// suggests it (cudnn_conv_suggest_memory_format); a 1-d convolution is contiguous.
at::MemoryFormat conv_format(const at::Tensor& x, const at::Tensor& w) {
  if (x.dim() != 4 && x.dim() != 5) return at::MemoryFormat::Contiguous;
  const at::MemoryFormat cl = x.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  return x.suggest_memory_format() == cl || w.suggest_memory_format() == cl ? cl : at::MemoryFormat::Contiguous;
}

// nullopt (with `why`) where cuDNN's path does not apply and torch's op must run
std::optional<Operands> operands(const at::Tensor& x_in, const at::Tensor& w_in, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::string* why,
                                 bool need_cuda = true) {
  Operands o;
  if (need_cuda && (!x_in.is_cuda() || !w_in.is_cuda())) return *why = "not a CUDA tensor", std::nullopt;
  const auto info = dtype_info(x_in.scalar_type());
  if (x_in.scalar_type() != w_in.scalar_type() || !info) return *why = "dtype not handled", std::nullopt;
  o.problem.dtype = info->cudnn;
  const int64_t nd = x_in.dim();
  if (nd < 3 || nd > 5 || w_in.dim() != nd) return *why = "rank not handled", std::nullopt;
  const size_t ns = static_cast<size_t>(nd - 2);
  if (stride.size() != ns || padding.size() != ns || dilation.size() != ns) return *why = "arguments", std::nullopt;
  std::vector<int> pad(padding.begin(), padding.end()), str(stride.begin(), stride.end()),
      dil(dilation.begin(), dilation.end());
  o.x = x_in;
  o.w = w_in;
  if (nd == 3) {  // Conv1d: lift to 2-d with H = 1, as the searches do
    o.x = x_in.unsqueeze(2);
    o.w = w_in.unsqueeze(2);
    pad.insert(pad.begin(), 0);
    str.insert(str.begin(), 1);
    dil.insert(dil.begin(), 1);
    o.lifted = true;
  }
  o.format = conv_format(x_in, w_in);
  o.x = o.x.contiguous(o.format);
  o.w = o.w.contiguous(o.format);
  ConvProblem& p = o.problem;
  p.layout = o.format == at::MemoryFormat::Contiguous ? Layout::NCHW : Layout::NHWC;
  p.x_dims = o.x.sizes().vec();
  p.w_dims = o.w.sizes().vec();
  p.padding = pad;
  p.stride = str;
  p.dilation = dil;
  p.groups = static_cast<int>(groups);
  p.y_dims = output_dims(o.x.sizes(), o.w.sizes(), pad, str, dil);
  for (int64_t d : p.y_dims)
    if (d <= 0) return *why = "empty output", std::nullopt;
  return o;
}

bool flags_deterministic() { return at::globalContext().deterministicCuDNN(); }
bool flags_tf32() { return at::globalContext().allowTF32CuDNN(); }

// The built plan of the stored winner for `key` on `device`; null where torch's op must run (`*torch_winner` says
// whether that is the stored choice, else `why` the reason).
std::shared_ptr<EnginePlan> plan_for(Direction dir, const ConvProblem& p, const std::string& key, int device,
                                     bool* torch_winner, std::string* why) {
  Registry& r = registry();
  Winner win;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.winners.find(key);
    if (it == r.winners.end()) return *why = "no stored winner", nullptr;
    win = it->second;
    auto pl = r.plans.find({device, key});
    if (pl != r.plans.end()) {
      if (!pl->second) *why = "the stored configuration did not build";
      return pl->second;
    }
  }
  if (win.engine_id < 0) return *torch_winner = true, nullptr;
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return *why = "first met during CUDA-graph capture (not built)", nullptr;
  EngineSearchOptions opt;
  opt.heuristics = {};
  opt.exact = {{win.engine_id, win.knobs}};
  std::shared_ptr<EnginePlan> built;
  try {
    EngineSearchOutput out = engine_search(dir, p, opt, device);
    for (auto& pl : out.plans)
      if (pl->ok()) built = pl;
    if (!built) *why = "the stored configuration did not build: " + (out.plans.empty() ? "no plan" : out.plans[0]->status);
  } catch (const std::exception& e) {
    *why = std::string("building the stored configuration failed: ") + e.what();
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  r.plans[{device, key}] = built;
  if (built) ++r.built;
  return built;
}

// Runs direction `dir` with the stored winner into `out` (allocated by the caller); false: run torch's op instead.
bool run_pinned(Direction dir, const Operands& o, const Buffers& b, const std::string& key) {
  const int device = o.x.get_device();
  bool torch_winner = false;
  std::string why;
  std::shared_ptr<EnginePlan> plan = plan_for(dir, o.problem, key, device, &torch_winner, &why);
  if (!plan) {
    if (torch_winner) count(key, &PinnedCount::torch);
    else count(key, &PinnedCount::fallback, why);
    return false;
  }
  try {
    plan->execute(b);
  } catch (const std::exception& e) {
    count(key, &PinnedCount::fallback, std::string("the stored configuration failed to run: ") + e.what());
    return false;
  }
  count(key, &PinnedCount::pinned);
  return true;
}

// Runs `dir`'s stored winner into a fresh tensor shaped as that direction's output operand (y for forward, x for
// backward-data, w for backward-filter), the other operands from `o` and `y` (grad_output; unused for forward);
// undefined where torch's op must run instead.
at::Tensor run_into_new(Direction dir, const Operands& o, void* y, const std::string& key) {
  const bool data = dir == Direction::BackwardData, filter = dir == Direction::BackwardFilter;
  const auto& dims = data ? o.problem.x_dims : filter ? o.problem.w_dims : o.problem.y_dims;
  at::Tensor out = at::empty(dims, o.x.options().memory_format(o.format));
  Buffers b{o.x.data_ptr(), o.w.data_ptr(), y};
  (data ? b.x : filter ? b.w : b.y) = out.data_ptr();
  if (!run_pinned(dir, o, b, key)) return at::Tensor();
  return o.lifted ? out.squeeze(2) : out;
}

std::vector<int64_t> zeros_like_dims(size_t n) { return std::vector<int64_t>(n, 0); }

at::Tensor add_bias(at::Tensor y, const std::optional<at::Tensor>& bias) {
  if (!bias || !bias->defined()) return y;
  std::vector<int64_t> shape(y.dim(), 1);
  shape[1] = bias->numel();
  return y.add_(bias->reshape(shape));
}

// ---------------------------------------------------------------------------------------------- kernels
at::Tensor conv_torch(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return at::convolution(x, w, bias, stride, padding, dilation, false, zeros_like_dims(stride.size()), groups);
}

at::Tensor conv_cuda(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  std::string why;
  auto o = operands(x, w, stride, padding, dilation, groups, &why);
  if (!o) return conv_torch(x, w, bias, stride, padding, dilation, groups);
  const std::string key = problem_key(Direction::Forward, o->problem, flags_deterministic(), flags_tf32());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = run_into_new(Direction::Forward, *o, nullptr, key);
  return y.defined() ? add_bias(y, bias) : conv_torch(x, w, bias, stride, padding, dilation, groups);
}

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Grads conv_backward_torch(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask) {
  return at::convolution_backward(gy, x, w, at::OptionalIntArrayRef({w.size(0)}), stride, padding, dilation, false,
                                  zeros_like_dims(stride.size()), groups, mask);
}

Grads conv_backward_cuda(const at::Tensor& gy_in, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask) {
  std::string why;
  auto o = operands(x, w, stride, padding, dilation, groups, &why);
  if (!o || gy_in.scalar_type() != x.scalar_type())
    return conv_backward_torch(gy_in, x, w, stride, padding, dilation, groups, mask);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gy = (o->lifted ? gy_in.unsqueeze(2) : gy_in).contiguous(o->format);
  const bool det = flags_deterministic(), tf32 = flags_tf32();
  at::Tensor gx, gw, gb;
  if (mask[0])
    gx = run_into_new(Direction::BackwardData, *o, gy.data_ptr(),
                      problem_key(Direction::BackwardData, o->problem, det, tf32));
  if (mask[1])
    gw = run_into_new(Direction::BackwardFilter, *o, gy.data_ptr(),
                      problem_key(Direction::BackwardFilter, o->problem, det, tf32));
  const std::array<bool, 3> rest{mask[0] && !gx.defined(), mask[1] && !gw.defined(), false};
  if (rest[0] || rest[1]) {
    Grads t = conv_backward_torch(gy_in, x, w, stride, padding, dilation, groups, {rest[0], rest[1], false});
    if (rest[0]) gx = std::get<0>(t);
    if (rest[1]) gw = std::get<1>(t);
  }
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < gy_in.dim(); ++d) dims.push_back(d);
    gb = gy_in.sum(dims, false, at::kFloat).to(gy_in.scalar_type());
  }
  return {gx, gw, gb};
}

// Meta (torch.compile's fake tensors): shapes, dtypes and the layout the CUDA kernel returns
at::Tensor conv_meta(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  std::vector<int> pad(padding.begin(), padding.end()), str(stride.begin(), stride.end()),
      dil(dilation.begin(), dilation.end());
  TORCH_CHECK(x.dim() >= 3 && x.dim() <= 5 && w.dim() == x.dim() && stride.size() + 2 == size_t(x.dim()),
              "cudnn_algos::conv: x and w need 3 to 5 dims and one stride, padding and dilation per spatial dim");
  std::vector<int64_t> y = output_dims(x.sizes(), w.sizes(), pad, str, dil);
  return at::empty(y, x.options().memory_format(conv_format(x, w)));
}

Grads conv_backward_meta(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask) {
  return {mask[0] ? at::empty_like(x) : at::Tensor(), mask[1] ? at::empty_like(w) : at::Tensor(),
          mask[2] ? at::empty({w.size(0)}, w.options()) : at::Tensor()};
}

// ---------------------------------------------------------------------------------------------- autograd
at::Tensor call_conv(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("cudnn_algos::conv", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                         at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t)>();
  return op.call(x, w, bias, stride, padding, dilation, groups);
}

Grads call_conv_backward(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("cudnn_algos::conv_backward", "")
                       .typed<Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef,
                                    at::IntArrayRef, at::IntArrayRef, int64_t, std::array<bool, 3>)>();
  return op.call(gy, x, w, stride, padding, dilation, groups, mask);
}

// Autograd: backward-data and backward-filter each run their own stored winner (conv_backward); the bias's gradient
// is the sum of grad_y over all but the channel dim, as torch computes it. Two Functions: autograd's apply() takes
// only defined tensors, so a convolution without bias has its own.
struct SavedArgs {
  static void save(torch::autograd::AutogradContext* ctx, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t groups) {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
  }
  static Grads grads(torch::autograd::AutogradContext* ctx, const at::Tensor& gy, bool bias) {
    const auto saved = ctx->get_saved_variables();
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1), bias && ctx->needs_input_grad(2)};
    if (!gy.defined() || !(mask[0] || mask[1] || mask[2])) return {};
    return call_conv_backward(gy, saved[0], saved[1], ctx->saved_data["stride"].toIntVector(),
                              ctx->saved_data["padding"].toIntVector(), ctx->saved_data["dilation"].toIntVector(),
                              ctx->saved_data["groups"].toInt(), mask);
  }
};

class PinnedConvBias : public torch::autograd::Function<PinnedConvBias> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& bias, std::vector<int64_t> stride, std::vector<int64_t> padding,
                            std::vector<int64_t> dilation, int64_t groups) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->save_for_backward({x, w});
    SavedArgs::save(ctx, stride, padding, dilation, groups);
    return call_conv(x, w, bias, stride, padding, dilation, groups);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto [gx, gw, gb] = SavedArgs::grads(ctx, grads[0], true);
    return {gx, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class PinnedConvNoBias : public torch::autograd::Function<PinnedConvNoBias> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                            int64_t groups) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->save_for_backward({x, w});
    SavedArgs::save(ctx, stride, padding, dilation, groups);
    return call_conv(x, w, std::nullopt, stride, padding, dilation, groups);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto [gx, gw, gb] = SavedArgs::grads(ctx, grads[0], false);
    return {gx, gw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor conv_autograd(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  if (bias && bias->defined())
    return PinnedConvBias::apply(x, w, *bias, stride.vec(), padding.vec(), dilation.vec(), groups);
  return PinnedConvNoBias::apply(x, w, stride.vec(), padding.vec(), dilation.vec(), groups);
}

// torch.autocast: cast as torch's convolution is cast (it is on autocast's lower-precision list)
at::Tensor conv_autocast(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const at::ScalarType t = at::autocast::get_autocast_dtype(at::kCUDA);
  return call_conv(at::autocast::cached_cast(t, x, c10::DeviceType::CUDA),
                   at::autocast::cached_cast(t, w, c10::DeviceType::CUDA),
                   at::autocast::cached_cast(t, bias, c10::DeviceType::CUDA), stride, padding, dilation, groups);
}

}  // namespace

std::string operator_key(Direction dir, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool deterministic,
                         bool allow_tf32) {
  std::string why;
  auto o = operands(x, w, stride, padding, dilation, groups, &why, /*need_cuda=*/false);
  if (!o) throw std::invalid_argument("the operator would run torch's op here: " + why);
  return problem_key(dir, o->problem, deterministic, allow_tf32);
}

void pinned_set(const std::string& key, int64_t engine_id, const Knobs& knobs) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.winners[key] = Winner{engine_id, knobs};
  for (auto it = r.plans.begin(); it != r.plans.end();)  // a changed winner is rebuilt at its next call
    it = it->first.second == key ? r.plans.erase(it) : std::next(it);
}

void pinned_clear() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.winners.clear();
  r.plans.clear();
}

std::vector<PinnedCount> pinned_counts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<PinnedCount> out;
  for (const auto& [k, c] : r.counts) out.push_back(c);
  return out;
}

void pinned_reset_counts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.counts.clear();
}

int64_t pinned_plans_built() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.built;
}

}  // namespace cudnn_algos

TORCH_LIBRARY(cudnn_algos, m) {
  m.def("conv(Tensor x, Tensor w, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def("conv_backward(Tensor grad_y, Tensor x, Tensor w, int[] stride, int[] padding, int[] dilation, int groups, "
        "bool[3] mask) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(cudnn_algos, CUDA, m) {
  m.impl("conv", &cudnn_algos::conv_cuda);
  m.impl("conv_backward", &cudnn_algos::conv_backward_cuda);
}

TORCH_LIBRARY_IMPL(cudnn_algos, CPU, m) {
  m.impl("conv", &cudnn_algos::conv_torch);
  m.impl("conv_backward", &cudnn_algos::conv_backward_torch);
}

TORCH_LIBRARY_IMPL(cudnn_algos, Meta, m) {
  m.impl("conv", &cudnn_algos::conv_meta);
  m.impl("conv_backward", &cudnn_algos::conv_backward_meta);
}

TORCH_LIBRARY_IMPL(cudnn_algos, Autograd, m) { m.impl("conv", &cudnn_algos::conv_autograd); }

TORCH_LIBRARY_IMPL(cudnn_algos, AutocastCUDA, m) { m.impl("conv", &cudnn_algos::conv_autocast); }
