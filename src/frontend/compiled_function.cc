// axle::CompiledFunction: a traced step replayed without tracing (include/axle/compile.h).
#include <fmt/format.h>

#include <iostream>

#include "axle/compile.h"
#include "core/error.h"
#include "core/flags.h"
#include "frontend/lazy.h"
#include "runtime/profile.h"

namespace axle {
using detail::AsyncBuffer;
using detail::StepRecord;
using detail::TensorImpl;

// Note [Replaying a step]
// A lazy training loop traces the same step every iteration: GPT-2 small's host spent ~1 ms a
// step building its ~1,300 nodes and their gradients, while the previous step ran on the same two
// cores (its first kernels ran on one thread meanwhile; the step took 11.2 ms, 9.9 ms with the
// host idle). The trace only serves to find the executable, which the cache already holds, and
// the buffers to give it. So a CompiledFunction traces two calls, each with its own sync(), and
// compares their records (detail::StepRecord):
//   * the same trace key: the same graph, with its arguments in the same order;
//   * each argument read through one of the call's arguments, or through the same tensor object
//     on both calls (a parameter, optimizer state, an uploaded scalar the optimizer refreshes in
//     place): both can be read again. A tensor made anew on each call (a scalar uploaded inside
//     the function) cannot: its value comes from host code the replay does not run;
//   * each result written to the same tensor on both calls (in-place updates) or to one of the
//     returned tensors; a new tensor still alive after the call (a gradient) has no owner a
//     replay could find.
// If all hold, the plan says where each argument comes from and where each result goes, and later
// calls run the recorded host effects (record_host_effect), take the tensors' current buffers,
// launch the executable and rebind the tensors, as sync() would have after tracing: the same
// executable on the same values, so the same bits. The old buffers of rebound tensors are donated
// when nothing else holds them, as in a traced step. A call whose arguments have other types, or
// whose tensors are gone or no longer materialized, is traced, and the next two calls make a new
// plan.
//
// Note [Replaying a sharded step]
// A step over a mesh replays the same way: its executable is the partitioned step
// (sharded_step.h), which takes each argument's shards as they are when they have the layout it
// was compiled for. What a replay must also guard is the layout each input is read in, because it
// is part of the graph the trace would build: a tensor's mark_sharding annotation, or else the
// layout a sharded step left its data in. The plan records each input's layout as the next call
// will find it, and a call that finds another one is traced. GPT-2 small over fsdp=2,tp=2: the
// training step is traced twice and replayed from then on, as on one device.
namespace {

thread_local std::vector<std::function<void()>>* tls_effects = nullptr;

struct InputSource {
  int arg = -1;                         // an argument of the call, or
  std::weak_ptr<TensorImpl> tensor;     // a tensor read on every call
  std::string layout;                   // its layout when the plan was made (LayoutOf)
};

// What decides how a traced step reads a tensor over a mesh: its mark_sharding annotation, else
// the layout its data was left in by a sharded step (Note [Replaying a sharded step]). "" for a
// tensor that is neither.
std::string LayoutOf(const TensorImpl& t) {
  if (t.sharding) return fmt::format("marked {} on {}", t.sharding->ToString(), t.mesh->ToString());
  if (t.data != nullptr && t.data->sharding)
    return fmt::format("held as {} on {}", t.data->sharding->ToString(), t.data->mesh->ToString());
  return "";
}

struct ResultTarget {
  size_t result = 0;
  int returned = -1;                    // the returned tensor #returned, or
  std::weak_ptr<TensorImpl> tensor;     // a tensor rebound on every call
};

struct Plan {
  runtime::Executable* exe = nullptr;
  std::vector<ir::TensorType> arg_types;
  std::vector<bool> arg_requires_grad;
  bool grad_enabled = true;
  std::vector<InputSource> inputs;
  std::vector<ir::TensorType> input_types;
  std::vector<ResultTarget> targets;
  std::vector<ir::TensorType> result_types;
  std::vector<int> returned_result;  // per returned tensor: its result index
  std::vector<std::function<void()>> effects;
  int64_t graph_nodes = 0;
};

// What a traced call left for the next one to compare with.
struct Recorded {
  bool ok = false;
  ir::ModuleHash trace_key;
  std::vector<std::weak_ptr<TensorImpl>> inputs;
  std::vector<std::pair<std::weak_ptr<TensorImpl>, size_t>> assign;
  size_t effects = 0;
};

}  // namespace

struct CompiledFunction::State {
  Fn fn;
  std::string name;
  int64_t traced = 0, replayed = 0;
  std::string why;
  std::unique_ptr<Plan> plan;
  Recorded previous;
};

namespace {

std::vector<ir::TensorType> TypesOf(const std::vector<Tensor>& ts) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : ts) types.push_back(t.impl()->type);
  return types;
}

// The plan from two traced calls' records (the second's in full), or the reason there is none.
std::unique_ptr<Plan> MakePlan(const Recorded& first, const StepRecord& second, const std::vector<Tensor>& args,
                               const std::vector<Tensor>& returned, std::vector<std::function<void()>> effects,
                               std::string* why) {
  if (!second.launched) {
    *why = "the function computed nothing (its trace had no results)";
    return nullptr;
  }
  if (second.aliased > 0) {
    *why = fmt::format("{} tensor(s) were set to one of the step's inputs (copy_ of a materialized tensor), which "
                       "a replay cannot redo",
                       second.aliased);
    return nullptr;
  }
  if (!first.ok || !(first.trace_key == second.trace_key)) {
    *why = "its first two calls traced different graphs (a host value that changes between calls is baked into "
           "the graph; AXLE_DEBUG=1 shows how the graphs differ)";
    return nullptr;
  }
  if (first.effects != effects.size()) {
    *why = "its first two calls recorded different host effects";
    return nullptr;
  }
  auto plan = std::make_unique<Plan>();
  plan->exe = second.exe;
  plan->arg_types = TypesOf(args);
  for (const Tensor& a : args) plan->arg_requires_grad.push_back(a.requires_grad());
  plan->grad_enabled = grad_enabled();
  plan->graph_nodes = second.graph_nodes;
  plan->effects = std::move(effects);
  plan->input_types = second.input_types;
  plan->result_types = second.result_types;
  for (size_t i = 0; i < second.inputs.size(); ++i) {
    std::shared_ptr<TensorImpl> impl = second.inputs[i].lock();
    InputSource src;
    for (size_t j = 0; impl && j < args.size(); ++j)
      if (args[j].impl() == impl) src.arg = static_cast<int>(j);
    if (src.arg < 0) {
      if (impl == nullptr || first.inputs[i].lock() != impl) {
        *why = fmt::format("the step reads a {} tensor the function makes anew on each call ({}); its value comes "
                           "from host code a replay does not run: pass it as an argument, or keep one tensor and "
                           "refresh it with set_data and record_host_effect",
                           second.input_types[i].ToString(), second.input_origins[i]);
        return nullptr;
      }
      src.tensor = impl;
    }
    // As the next call will find it (after this call's step rebound it).
    src.layout = LayoutOf(src.arg >= 0 ? *args[static_cast<size_t>(src.arg)].impl() : *impl);
    plan->inputs.push_back(std::move(src));
  }
  plan->returned_result.assign(returned.size(), -1);
  for (const auto& [impl, result] : second.assign) {
    ResultTarget target;
    target.result = result;
    for (size_t r = 0; r < returned.size(); ++r)
      if (returned[r].impl() == impl) {
        target.returned = static_cast<int>(r);
        plan->returned_result[r] = static_cast<int>(result);  // a tensor returned twice is both
      }
    bool persistent = false;
    for (const auto& [w, index] : first.assign)
      if (index == result && w.lock() == impl) persistent = true;
    if (target.returned >= 0 && persistent) {
      *why = "it returns a tensor that it also updates in place; return a copy (t * 1) or a detached value";
      return nullptr;
    }
    if (persistent) {
      target.tensor = impl;
    } else if (target.returned < 0) {
      *why = fmt::format("a {} tensor it computes outlives the call without being returned (a gradient left in "
                         ".grad, or a value kept elsewhere): return it, or drop it before returning "
                         "(optimizer.zero_grad() for gradients)",
                         impl->type.ToString());
      return nullptr;
    }
    plan->targets.push_back(std::move(target));
  }
  for (size_t r = 0; r < returned.size(); ++r)
    if (plan->returned_result[r] < 0) {
      *why = fmt::format("its result #{} is not computed by its step (an argument, or a tensor computed before the "
                         "call): return values the function computes",
                         r);
      return nullptr;
    }
  return plan;
}

// Why the plan cannot be replayed for these arguments now ("" when it can).
std::string CheckGuards(const Plan& plan, const std::vector<Tensor>& args) {
  if (args.size() != plan.arg_types.size())
    return fmt::format("it was called with {} arguments, not {}", args.size(), plan.arg_types.size());
  for (size_t j = 0; j < args.size(); ++j) {
    if (!args[j].defined()) return fmt::format("argument {} is undefined", j);
    if (!(args[j].impl()->type == plan.arg_types[j]))
      return fmt::format("argument {} is {}, not {}", j, args[j].impl()->type.ToString(), plan.arg_types[j].ToString());
    if (args[j].requires_grad() != plan.arg_requires_grad[j])
      return fmt::format("argument {} {} gradients now", j, args[j].requires_grad() ? "requires" : "does not require");
  }
  for (const InputSource& in : plan.inputs)
    if (in.arg >= 0 && LayoutOf(*args[static_cast<size_t>(in.arg)].impl()) != in.layout)
      return fmt::format("argument {} is laid out differently ({}; the plan's: {})", in.arg,
                         LayoutOf(*args[static_cast<size_t>(in.arg)].impl()), in.layout.empty() ? "whole" : in.layout);
  if (grad_enabled() != plan.grad_enabled)
    return fmt::format("gradient mode is {} now", grad_enabled() ? "on" : "off");
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i].arg >= 0) continue;
    std::shared_ptr<TensorImpl> impl = plan.inputs[i].tensor.lock();
    if (impl == nullptr) return fmt::format("a {} tensor it reads is gone", plan.input_types[i].ToString());
    if (impl->data == nullptr || impl->value != nullptr)
      return fmt::format("a {} tensor it reads has no materialized value", plan.input_types[i].ToString());
    if (LayoutOf(*impl) != plan.inputs[i].layout)
      return fmt::format("a {} tensor it reads is laid out differently now ({}; the plan's: {})",
                         plan.input_types[i].ToString(), LayoutOf(*impl),
                         plan.inputs[i].layout.empty() ? "whole" : plan.inputs[i].layout);
  }
  for (const ResultTarget& t : plan.targets)
    if (t.returned < 0 && t.tensor.expired()) return "a tensor it updates is gone";
  return "";
}

std::vector<Tensor> Replay(const Plan& plan, const std::vector<Tensor>& args) {
  runtime::profile::TraceScope span("replay");
  for (const auto& effect : plan.effects) effect();
  detail::StepLaunch launch;
  launch.exe = plan.exe;
  launch.graph_nodes = plan.graph_nodes;
  launch.replayed = true;
  for (const InputSource& src : plan.inputs)
    launch.args.push_back(src.arg >= 0 ? args[static_cast<size_t>(src.arg)].impl()->data : src.tensor.lock()->data);
  const int64_t sync_number = detail::CountSync();
  std::vector<std::shared_ptr<AsyncBuffer>> outs = detail::NewResults(plan.result_types.size(), plan.exe, sync_number);
  std::vector<Tensor> returned(plan.returned_result.size());
  for (size_t r = 0; r < returned.size(); ++r) {
    const size_t result = static_cast<size_t>(plan.returned_result[r]);
    returned[r] = detail::MakeMaterializedAsync(outs[result], plan.result_types[result]);
  }
  for (const ResultTarget& t : plan.targets) {
    if (t.returned >= 0) continue;
    std::shared_ptr<TensorImpl> impl = t.tensor.lock();
    impl->data = outs[t.result];
    impl->value = nullptr;
  }
  // Donation as in sync(): an argument buffer only this launch holds (a rebound tensor's old one).
  std::vector<bool> donate = detail::DonatableArgs(launch.args);
  detail::LaunchStep(std::move(launch), std::move(donate), std::move(outs));
  return returned;
}

}  // namespace

CompiledFunction::CompiledFunction(Fn fn, std::string name) : state_(std::make_unique<State>()) {
  state_->fn = std::move(fn);
  state_->name = std::move(name);
}
CompiledFunction::~CompiledFunction() = default;
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;
CompiledFunction& CompiledFunction::operator=(CompiledFunction&&) noexcept = default;

int64_t CompiledFunction::traced_calls() const { return state_->traced; }
int64_t CompiledFunction::replayed_calls() const { return state_->replayed; }
std::string CompiledFunction::why_traced() const { return state_->why; }

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& args) {
  State& s = *state_;
  for (size_t j = 0; j < args.size(); ++j)
    if (!args[j].defined()) Fail("{}: argument {} is an undefined tensor", s.name, j);
  // Work traced before the call is its own step, so the function's trace is its alone.
  if (!detail::TraceEmpty()) sync();
  if (s.plan != nullptr && flags::replay()) {
    const std::string guard = CheckGuards(*s.plan, args);
    if (guard.empty()) {
      ++s.replayed;
      return Replay(*s.plan, args);
    }
    if (flags::debug())
      std::cerr << fmt::format("axle: {} is traced again: {}\n", s.name, guard);
    s.plan = nullptr;
    s.previous = Recorded{};
  }

  // A traced call: the function, then its own sync(), recorded.
  ++s.traced;
  std::vector<std::function<void()>> effects;
  std::vector<Tensor> returned;
  const int64_t syncs_before = detail::SyncCalls();
  {
    struct Recording {  // record_host_effect appends to `effects` while the function runs
      std::vector<std::function<void()>>* outer = tls_effects;
      ~Recording() { tls_effects = outer; }
    } recording;
    tls_effects = &effects;
    returned = s.fn(args);
  }
  const bool synced_inside = detail::SyncCalls() != syncs_before;
  for (Tensor& r : returned) {
    if (!r.defined()) Fail("{}: the function returned an undefined tensor", s.name);
    if (r.requires_grad()) r = r.detach();
  }
  StepRecord record;
  detail::SyncRecording(&record);

  std::string why;
  std::unique_ptr<Plan> plan;
  if (synced_inside) {
    why = "the function syncs inside (sync(), item(), or reading a value); a replay launches one step per call";
  } else if (s.traced >= 2) {
    plan = MakePlan(s.previous, record, args, returned, effects, &why);
  }
  Recorded now;
  now.ok = record.launched && !synced_inside;
  now.trace_key = record.trace_key;
  now.inputs = record.inputs;
  for (const auto& [impl, result] : record.assign) now.assign.emplace_back(impl, result);
  now.effects = effects.size();
  s.previous = std::move(now);
  if (plan != nullptr) {
    s.plan = std::move(plan);
    s.why.clear();
  } else if (!why.empty() && why != s.why) {
    s.why = why;
    if (flags::debug()) std::cerr << fmt::format("axle: {} is traced on every call: {}\n", s.name, why);
  }
  return returned;
}

void record_host_effect(std::function<void()> effect) {
  if (tls_effects != nullptr) tls_effects->push_back(std::move(effect));
}

void set_data(Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined()) Fail("set_data: both tensors must be defined");
  TensorImpl& d = *dst.impl();
  const TensorImpl& from = *src.impl();
  if (!(d.type == from.type))
    Fail("set_data: a {} tensor cannot take the value of a {} tensor", d.type.ToString(), from.type.ToString());
  if (from.data != nullptr && from.value == nullptr) {
    d.data = from.data;
    d.value = nullptr;
    return;
  }
  detail::Rebind(d, detail::ValueOf(src));
}

}  // namespace axle
