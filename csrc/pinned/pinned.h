// Pinned execution: a tuning run's winners, by problem key, and the operators `cudnn_algos::conv` and
// `cudnn_algos::conv_transpose` (each with its backward operator) that run them.
//
// The Python side (cudnn_algos/tuning/patching.py, apply) loads the winners of the current GPU and versions from the tuning
// database into this registry; `torch.ops.cudnn_algos.conv` (registered in ops.cpp with CUDA, CPU, Meta,
// Autograd and AutocastCUDA kernels) then builds, per problem, the winner's plan once per process and runs it on the
// current stream with workspace from torch's caching allocator. A problem without a winner, or whose winner is
// torch's own op, runs torch's convolution: the counts say which happened how often.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "../common/conv_params.h"
#include "../common/directions.h"

namespace cudnn_algos {

// The key a winner is stored and looked up under: direction, dtype, layout, x/w/y dims, padding, stride, dilation,
// groups, and the torch flags that change which configurations are allowed (cudnn.deterministic; allow_tf32 for
// float32 only). Python computes it from its Problem through the binding, the operator from the tensors it gets:
// one function, so the two cannot drift apart.
std::string problem_key(Direction dir, const ConvProblem& p, bool deterministic, bool allow_tf32);

// The key the operator computes for tensors x and w (any device, meta included: only their sizes, dtype and layout
// are read) and these arguments, exactly as it does on the GPU: for checking that tune() and the operator agree.
// dir is cuDNN's direction (a transposed layer's forward is cuDNN's backward-data); x is the layer's input.
std::string operator_key(Direction dir, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool deterministic,
                         bool allow_tf32, bool is_transposed = false, at::IntArrayRef output_padding = {});

using Knobs = std::vector<std::pair<int64_t, int64_t>>;
class EnginePlan;  // search/engine_search.h

// Note [the Python call]: a module under apply() calls the operator through one of these, its arguments bound once
// when apply() replaced the forward: a call converts three tensors and goes straight to the dispatcher (the
// operator's autograd, autocast and device kernels, exactly as torch.ops.cudnn_algos.conv would run them), instead
// of torch.ops' per-call parsing of seven arguments against the schema (about 8 us more per call on the CI
// machine's CPU). Errors and warnings cross the binding as torch's own (bindings.cpp wraps the call with torch's
// handler). torch.compile and __torch_function__ overrides take torch.ops' path (tuning/patching.py decides).
struct BoundConv {
  std::vector<int64_t> stride, padding, output_padding, dilation;  // output_padding: a transposed layer's only
  int64_t groups = 1;
  bool transposed = false;
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias) const;
};

// engine_id >= 0: run that engine configuration; engine_id < 0: the winner is torch's own op.
void pinned_set(const std::string& key, int64_t engine_id, const Knobs& knobs,
                const std::string& origin = "stored");  // origin: how it was chosen (pinned_counts)
void pinned_clear();  // forgets winners, built plans and the unseen-problem handler
// The next call of `key`'s problem resolves it again: without a winner, it asks the unseen-problem handler again
// (Note [choosing in the background], cudnn_algos/choose/unseen.py: its answer is ready). forget_origin non-empty:
// a winner of that origin (the handler's own answer) and its plans are forgotten first, so that the handler is asked
// again (Note [runtime-compiled candidates later], unseen.py: more candidates are built); a winner of another
// origin stays. Returns whether a winner was forgotten.
bool pinned_ask_again(const std::string& key, const std::string& forget_origin = "");

// Note [unseen problems]: a problem with no stored winner runs torch's op, unless a handler is set. Then its first
// call (outside a CUDA-graph capture) asks the handler once, with no lock held: the handler answers configurations
// in order of preference (e.g. a selector's ranking, or the fastest of a few it timed), and the first that builds
// becomes the problem's winner for this process (`origin` says how it was chosen), its plan cached like a stored
// one's. No configuration, none that builds, or a handler that fails: torch's op, counted as a fallback with the
// reason. The Python side (cudnn_algos/choose/unseen.py) sets a handler that takes the GIL.
struct MissQuery {
  std::string key;
  Direction dir = Direction::Forward;  // cuDNN's direction
  ConvProblem problem;
  bool deterministic = false, allow_tf32 = false;
  int device = 0;
};
struct MissAnswer {
  std::vector<std::pair<int64_t, Knobs>> configs;  // (engine id, knobs), most preferred first
  std::string origin;                              // e.g. "predicted", "measured_top_k"
  std::string why;                                 // when `configs` is empty: why
  // Note [plans the handler built]: plans of some of `configs` the handler already built for this problem and
  // device (measure_top_k timed them); such a configuration is taken as built, not built again (a runtime-compiled
  // engine's build is NVRTC and a module load: up to seconds)
  std::vector<std::shared_ptr<EnginePlan>> built;
};
using MissHandler = std::function<MissAnswer(const MissQuery&)>;
void pinned_set_miss_handler(std::shared_ptr<const MissHandler> handler);  // null: torch's op for unseen problems

struct PinnedCount {
  std::string key;
  int64_t pinned = 0;    // calls that ran the stored configuration
  int64_t torch = 0;     // calls whose stored winner is torch's own op
  int64_t fallback = 0;  // calls that fell back to torch's op: no winner, or it could not run (reason)
  std::string reason;    // the last fallback's reason
  std::string origin;    // how its winner was chosen: "stored" (pinned_set) or the unseen handler's origin; "" none
  int64_t engine_id = -1;  // the winner's configuration (engine_id < 0: none, or torch's op)
  Knobs knobs;
  int64_t execute_ns = 0;   // while host stages are timed: cudnnBackendExecute's host time over this key's calls
  int64_t timed_calls = 0;  // ... and the pinned calls it was summed over
};
std::vector<PinnedCount> pinned_counts();
void pinned_reset_counts();
int64_t pinned_plans_built();

// Note [host stages] (registry.h): host time of each step of the operator's CUDA kernels, summed over calls made
// while timing is on. pinned_stage_timing(true) zeroes the sums and starts timing; (false) stops it, keeping them.
struct StageTimes {
  int64_t forward_calls = 0, backward_calls = 0;
  std::vector<std::pair<std::string, int64_t>> ns;  // (stage, total nanoseconds)
};
void pinned_stage_timing(bool on);
StageTimes pinned_stage_times();

}  // namespace cudnn_algos
