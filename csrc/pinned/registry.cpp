// The pinned operator's registry: winners in (pinned_set), plans built once per (device, key) at a problem's
// first call (resolve), counts and host-stage times out. See registry.h and pinned.h.
#include "registry.h"

#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>

#include "../common/dtypes.h"
#include "pinned.h"

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

namespace pinned_detail {
namespace {

struct Winner {
  int64_t engine_id = -1;
  Knobs knobs;
  std::string origin = "stored";
};

// Note [signatures]: the per-call lookup does not build the key string. A call's problem, flags and device pack into
// a fixed-size signature (hashed bytes); the first call of a signature builds the key, finds the winner and builds
// its plan, and later calls of that signature find the resolved entry in one hash lookup.
struct Signature {
  int64_t x[5] = {}, w[5] = {};
  int32_t dir = 0, dtype = 0, layout = 0, nd = 0, groups = 0, flags = 0, device = 0;
  int32_t pad[3] = {}, stride[3] = {}, dil[3] = {};
  bool operator==(const Signature& o) const { return std::memcmp(this, &o, sizeof(Signature)) == 0; }
};
static_assert(std::has_unique_object_representations_v<Signature>, "Signature is compared and hashed as bytes");

struct SignatureHash {
  size_t operator()(const Signature& s) const noexcept {
    const auto* b = reinterpret_cast<const unsigned char*>(&s);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(Signature); ++i) h = (h ^ b[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

Signature signature(Direction dir, const ConvProblem& p, bool det, bool tf32, int device) {
  Signature s;
  s.dir = static_cast<int32_t>(dir);
  s.dtype = static_cast<int32_t>(p.dtype);
  s.layout = static_cast<int32_t>(p.layout);
  s.nd = static_cast<int32_t>(p.x_dims.size());
  s.groups = p.groups;
  s.flags = (det ? 1 : 0) | (tf32 ? 2 : 0);
  s.device = device;
  for (size_t i = 0; i < p.x_dims.size() && i < 5; ++i) s.x[i] = p.x_dims[i], s.w[i] = p.w_dims[i];
  for (size_t i = 0; i < p.padding.size() && i < 3; ++i)
    s.pad[i] = p.padding[i], s.stride[i] = p.stride[i], s.dil[i] = p.dilation[i];
  return s;
}

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, Winner> winners;
  // built plans by (device, key); a null plan: building failed (the reason is in counts), not tried again
  std::map<std::pair<int, std::string>, std::shared_ptr<EnginePlan>> plans;
  std::map<std::string, std::shared_ptr<CountCell>> counts;
  std::unordered_map<Signature, std::shared_ptr<const Entry>, SignatureHash> resolved;  // Note [signatures]
  std::shared_ptr<const MissHandler> miss;  // Note [unseen problems] (pinned.h)
  // Note [asked again]: a resolve that saw its key's count move (a winner set, an answer readied) or the epoch move
  // (the handler replaced, the registry cleared) while it asked the handler remembers no fallback
  std::unordered_map<std::string, uint64_t> key_changes;
  uint64_t epoch = 0;
  int64_t built = 0;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: plans must not be freed after cuDNN unloads at exit
  return *r;
}

// Note [asked again]: a problem the handler is still choosing for (in the background) runs torch's op, and that
// fallback is remembered like any other: its later calls take the one-lookup path, never the handler (a Python call
// taking the GIL per convolution, while background threads hold it to rank). When its answer is ready the handler
// calls pinned_ask_again(key), which forgets that key's entries and counts a change for the key. A resolve that
// asked the handler while its own key changed (the answer readied before the fallback was stored) stores nothing,
// so the next call asks again; changes to other keys leave it alone (a global count did not: with the background
// readying other problems all the time, every pending problem asked the handler at every call).
uint64_t key_change(const Registry& r, const std::string& key) {  // r.mutex held
  auto it = r.key_changes.find(key);
  return it == r.key_changes.end() ? 0 : it->second;
}

std::shared_ptr<CountCell> cell_for(Registry& r, const std::string& key) {  // r.mutex held
  auto& c = r.counts[key];
  if (!c) c = std::make_shared<CountCell>();
  return c;
}

}  // namespace

void count_fallback(CountCell& c, const std::string& reason) {
  ++c.fallback;
  std::lock_guard<std::mutex> lock(c.reason_mutex);
  c.reason = reason;
}

constexpr const char* kStageNames[kStageCount] = {"operands", "resolve",       "alloc",         "handle",
                                                  "workspace", "variant_pack", "cudnn_execute", "count",
                                                  "torch_op",  "bias"};
std::atomic<bool> g_stage_timing{false};
std::array<std::atomic<int64_t>, kStageCount> g_stage_ns{};
std::array<std::atomic<int64_t>, 2> g_stage_calls{};  // forward kernel calls, backward kernel calls


// Note [plans the handler built]: a built plan of this device whose engine is the configuration's and whose knobs
// include every knob it names with the same value (a plan built from a list's configuration may
// name more knobs than a stored name does)
std::shared_ptr<EnginePlan> built_for(const std::pair<int64_t, Knobs>& config, int device,
                                      const std::vector<std::shared_ptr<EnginePlan>>& built) {
  for (const auto& pl : built) {
    if (!pl || !pl->ok() || pl->device != device || pl->engine_id != config.first) continue;
    bool all = true;
    for (const auto& k : config.second)
      all = all && std::find(pl->knobs.begin(), pl->knobs.end(), k) != pl->knobs.end();
    if (all) return pl;
  }
  return nullptr;
}

// The first configuration of `configs` that builds for the problem (null if none; `why` says what the last try
// said); one with a plan in `built` is taken as built.
std::shared_ptr<EnginePlan> build_first(Direction dir, const ConvProblem& p, int device,
                                        const std::vector<std::pair<int64_t, Knobs>>& configs, std::string& why,
                                        size_t* which = nullptr,
                                        const std::vector<std::shared_ptr<EnginePlan>>& built = {}) {
  for (size_t i = 0; i < configs.size(); ++i) {
    if (auto pl = built_for(configs[i], device, built)) {
      if (which) *which = i;
      return pl;
    }
    EngineSearchOptions opt;
    opt.heuristics = {};
    opt.exact = {configs[i]};
    try {
      EngineSearchOutput out = engine_search(dir, p, opt, device);
      for (auto& pl : out.plans)
        if (pl->ok()) {
          if (which) *which = i;
          return pl;
        }
      why = "did not build: " + (out.plans.empty() ? std::string("no plan") : out.plans[0]->status);
    } catch (const std::exception& ex) {
      why = std::string("building failed: ") + ex.what();
    }
  }
  return nullptr;
}

bool capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// Note [unseen problems]: asks the handler (no lock held) and builds its first configuration that builds.
std::shared_ptr<EnginePlan> ask_handler(const MissHandler& h, Direction dir, const ConvProblem& p, bool det,
                                        bool tf32, int device, const std::string& key, Winner& won,
                                        std::string& why) {
  MissAnswer a;
  try {
    a = h(MissQuery{key, dir, p, det, tf32, device});
  } catch (const std::exception& ex) {
    why = std::string("no stored winner; the unseen-problem handler failed: ") + ex.what();
    return nullptr;
  }
  if (a.configs.empty()) {
    why = "no stored winner; " + (a.why.empty() ? std::string("the unseen-problem handler chose nothing") : a.why);
    return nullptr;
  }
  std::string last;
  size_t i = 0;
  auto plan = build_first(dir, p, device, a.configs, last, &i, a.built);
  if (!plan) {
    why = "no stored winner; none of the " + std::to_string(a.configs.size()) + " configurations " +
          (a.origin.empty() ? "chosen" : a.origin) + " built (last: " + last + ")";
    return nullptr;
  }
  won = Winner{a.configs[i].first, a.configs[i].second, a.origin.empty() ? "unseen" : a.origin};
  return plan;
}

std::shared_ptr<const Entry> resolve(Direction dir, const ConvProblem& p, bool det, bool tf32, int device) {
  Registry& r = registry();
  const Signature sig = signature(dir, p, det, tf32, device);
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.resolved.find(sig);
    if (it != r.resolved.end()) return it->second;
  }
  auto e = std::make_shared<Entry>();
  e->key = problem_key(dir, p, det, tf32);
  Winner win;
  bool have = false, cached = false;
  std::shared_ptr<const MissHandler> miss;
  uint64_t changes = 0, epoch = 0;  // Note [asked again]
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    changes = key_change(r, e->key), epoch = r.epoch;
    e->cell = cell_for(r, e->key);
    auto w = r.winners.find(e->key);
    if (w == r.winners.end()) {
      e->why = "no stored winner";
      miss = r.miss;
    } else if (w->second.engine_id < 0) {
      e->torch_winner = true;
    } else {
      win = w->second;
      have = true;
      auto pl = r.plans.find({device, e->key});
      if (pl != r.plans.end()) {
        cached = true;
        e->plan = pl->second;
        if (!e->plan) e->why = "the stored configuration did not build";
      }
    }
  }
  if ((have && !cached) || miss) {
    if (capturing()) {
      e->why = "first met during CUDA-graph capture (not built)";
      return e;  // not remembered: built at the first call outside a capture
    }
  }
  if (have && !cached) {
    std::string why;
    e->plan = build_first(dir, p, device, {{win.engine_id, win.knobs}}, why);
    if (!e->plan) e->why = "the stored configuration " + why;
  }
  Winner chosen;
  if (miss) {
    e->plan = ask_handler(*miss, dir, p, det, tf32, device, e->key, chosen, e->why);
    if (e->plan) e->why.clear();
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  // a winner set or an answer readied while the handler was asked (another thread's): this call falls back, the
  // next resolves again (remembering the fallback would keep the problem on torch's op for good)
  if (!e->plan && miss && (key_change(r, e->key) != changes || r.epoch != epoch)) return e;
  if (e->plan && miss) {
    auto [w, fresh] = r.winners.emplace(e->key, chosen);
    if (fresh) {
      have = true, cached = false;
    } else {  // another thread's answer (its plan added with it), or a winner pinned_set meanwhile
      auto pl = r.plans.find({device, e->key});
      if (pl == r.plans.end() || !pl->second) {
        e->plan = nullptr;
        e->why = "a winner for this problem arrived while choosing one (this call only)";
        return e;  // not remembered: the next call resolves it again
      }
      e->plan = pl->second;
    }
  }
  if (have && !cached) {
    auto [pl, inserted] = r.plans.emplace(std::make_pair(device, e->key), e->plan);
    if (inserted && e->plan) ++r.built;
    if (!inserted) e->plan = pl->second;  // another thread built it first: one plan per (device, key)
  }
  return r.resolved.emplace(sig, e).first->second;
}

}  // namespace pinned_detail

using namespace pinned_detail;

namespace {
// r.mutex held: the key's built plans (every device) are dropped; its next call builds again
void forget_plans(Registry& r, const std::string& key) {
  for (auto it = r.plans.begin(); it != r.plans.end();)
    it = it->first.second == key ? r.plans.erase(it) : std::next(it);
}

// r.mutex held: the key's calls resolve again, and a resolve asking the handler meanwhile sees its key changed
// (Note [asked again]); every other call keeps its one-lookup path
void key_changed(Registry& r, const std::string& key) {
  for (auto it = r.resolved.begin(); it != r.resolved.end();)
    it = it->second->key == key ? r.resolved.erase(it) : std::next(it);
  ++r.key_changes[key];
}
}  // namespace

void pinned_set(const std::string& key, int64_t engine_id, const Knobs& knobs, const std::string& origin) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.winners[key] = Winner{engine_id, knobs, origin};
  forget_plans(r, key);  // a changed winner is rebuilt at its next call
  key_changed(r, key);
}

bool pinned_ask_again(const std::string& key, const std::string& forget_origin) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto w = r.winners.find(key);
  const bool forget = !forget_origin.empty() && w != r.winners.end() && w->second.origin == forget_origin;
  if (forget) {
    r.winners.erase(w);
    forget_plans(r, key);
  }
  key_changed(r, key);
  return forget;
}

void pinned_clear() {
  Registry& r = registry();
  std::shared_ptr<const MissHandler> old;  // released after the lock (a Python handler's release takes the GIL)
  std::lock_guard<std::mutex> lock(r.mutex);
  r.winners.clear();
  r.plans.clear();
  r.resolved.clear();
  old = std::move(r.miss);
  ++r.epoch;
}

void pinned_set_miss_handler(std::shared_ptr<const MissHandler> handler) {
  Registry& r = registry();
  std::shared_ptr<const MissHandler> old = std::move(handler);  // the one replaced is released after the lock
  std::lock_guard<std::mutex> lock(r.mutex);
  std::swap(r.miss, old);
  ++r.epoch;
  // entries resolved while no handler (or another) was set are asked again; their winners so far stay
  for (auto it = r.resolved.begin(); it != r.resolved.end();)
    it = it->second->plan || it->second->torch_winner ? std::next(it) : r.resolved.erase(it);
}

std::vector<PinnedCount> pinned_counts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<PinnedCount> out;
  for (const auto& [k, c] : r.counts) {
    PinnedCount pc;
    pc.key = k;
    pc.pinned = c->pinned.load();
    pc.torch = c->torch.load();
    pc.fallback = c->fallback.load();
    pc.execute_ns = c->execute_ns.load();
    pc.timed_calls = c->timed_calls.load();
    auto w = r.winners.find(k);
    if (w != r.winners.end()) pc.origin = w->second.origin, pc.engine_id = w->second.engine_id, pc.knobs = w->second.knobs;
    std::lock_guard<std::mutex> rl(c->reason_mutex);
    pc.reason = c->reason;
    if (pc.pinned || pc.torch || pc.fallback) out.push_back(std::move(pc));
  }
  return out;
}

void pinned_reset_counts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.counts.clear();
  r.resolved.clear();  // entries hold their count cells: resolved again, they take fresh ones
}

int64_t pinned_plans_built() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.built;
}

void pinned_stage_timing(bool on) {
  if (on) {  // starting zeroes every sum; stopping keeps them for reading
    for (auto& a : g_stage_ns) a.store(0);
    for (auto& a : g_stage_calls) a.store(0);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& [k, c] : r.counts) c->execute_ns.store(0), c->timed_calls.store(0);
  }
  g_stage_timing.store(on);
}

StageTimes pinned_stage_times() {
  StageTimes t;
  t.forward_calls = g_stage_calls[0].load();
  t.backward_calls = g_stage_calls[1].load();
  for (int i = 0; i < kStageCount; ++i) t.ns.emplace_back(kStageNames[i], g_stage_ns[i].load());
  return t;
}

}  // namespace cudnn_algos
