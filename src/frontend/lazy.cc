// The lazy runtime: the trace, sync() (graph cut, executable cache, launch), the execution
// thread and recompilation reports (the metrics are in metrics.cc, AsyncBuffer in
// async_buffer.cc). See lazy.h for the model.
#include "frontend/lazy.h"
#include "axle/spmd.h"
#include "frontend/ops_internal.h"
#include "frontend/sharded_step.h"

#include <pthread.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <thread>

#include "axle/metrics.h"
#include "backends/registry.h"
#include "core/flags.h"
#include "ir/hash.h"
#include "ir/verifier.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::detail {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// ---- The execution thread ------------------------------------------------------------------------

// Note [Competing threads] (runtime/thread_pool.h): while a step runs the host counts as competing
// for the pool's cores, except while it blocks on a result (HostBlocked: -1 for the host, 0 for
// the execution thread's own waits).
thread_local bool tls_exec_thread = false;

struct Job {
  runtime::Executable* exe = nullptr;
  std::vector<std::shared_ptr<AsyncBuffer>> args;
  std::vector<bool> donate;
  // Weak: a result nobody holds any more is dropped (and does not block donation later).
  std::vector<std::weak_ptr<AsyncBuffer>> outputs;
};

class Executor {
 public:
  ~Executor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Launch(Job job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable())
      thread_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "axle-exec");  // as perf, top and gdb show it
        tls_exec_thread = true;
        Loop();
      });
    queue_.push_back(std::move(job));
    ++launched_;
    cv_.notify_all();
  }

  void WaitAll() {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_ == launched_) return;
    runtime::CompetingScope blocked(HostBlocked());
    done_cv_.wait(lock, [&] { return finished_ == launched_; });
  }

 private:
  void Loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      {
        runtime::CompetingScope host(+1);  // the host, unless it blocks
        Run(job);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
      }
      done_cv_.notify_all();
    }
  }

  static void Run(Job& job) {
    try {
      if (auto* step = dynamic_cast<ShardedStep*>(job.exe)) return RunSharded(*step, job);
      std::vector<runtime::BufferPtr> args;
      args.reserve(job.args.size());
      for (size_t i = 0; i < job.args.size(); ++i)
        args.push_back(job.donate[i] ? job.args[i]->Take() : job.args[i]->Get());
      job.args.clear();  // donated AsyncBuffers are empty now; drop them
      const auto start = std::chrono::steady_clock::now();
      std::vector<runtime::BufferPtr> out = job.exe->Execute(std::move(args));
      const double secs = Seconds(start);
      UpdateMetrics([&](Metrics& m) { m.execute_s += secs; });
      std::lock_guard<std::mutex> publishing(PublishMutex());  // Note [Donation and the worker's references]
      for (size_t i = 0; i < out.size(); ++i)
        if (auto o = job.outputs[i].lock()) o->Set(std::move(out[i]));
    } catch (...) {
      std::lock_guard<std::mutex> publishing(PublishMutex());
      for (auto& w : job.outputs)
        if (auto o = w.lock()) o->SetError(std::current_exception());
    }
  }

  // A partitioned step: arguments and results stay as their devices' shards.
  static void RunSharded(ShardedStep& step, Job& job) {
    std::vector<ShardedStep::Arg> args(job.args.size());
    for (size_t i = 0; i < job.args.size(); ++i) {
      AsyncBuffer& b = *job.args[i];
      args[i].sharded = job.donate[i] ? b.TakeSharded() : b.GetSharded();
      if (args[i].sharded == nullptr) args[i].global = job.donate[i] ? b.Take() : b.Get();
    }
    job.args.clear();
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<ShardedData>> out = step.ExecuteSharded(std::move(args));
    const double secs = Seconds(start);
    UpdateMetrics([&](Metrics& m) { m.execute_s += secs; });
    std::lock_guard<std::mutex> publishing(PublishMutex());
    for (size_t i = 0; i < out.size(); ++i)
      if (auto o = job.outputs[i].lock()) o->SetSharded(std::move(out[i]));
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Job> queue_;
  std::thread thread_;
  bool stop_ = false;
  int64_t launched_ = 0, finished_ = 0;
};

Executor& GetExecutor() {
  static Executor* executor = new Executor();  // leaked on purpose: outlives static tensors
  return *executor;
}

// ---- The executable cache --------------------------------------------------------------------
// What a recompilation report compares: the graph's inputs and nodes in trace order.
struct Signature {
  struct Input {
    std::string type, origin;
  };
  struct NodeSig {
    std::string op, type, where;
  };
  std::vector<Input> inputs;
  std::vector<NodeSig> nodes;
  std::string precision;  // Trace::precision
};

struct CacheEntry {
  std::unique_ptr<runtime::Executable> exe;
  Signature signature;
  int64_t number = 0;  // 1 for the first graph compiled, ...
  int64_t sync = 0;    // the sync() that compiled it
};

// Note [Trace keys]
// A training loop traces the same step every iteration. Building the cut as a module and hashing
// it canonically (HashModule) cost two thirds of sync()'s host time (GPT-2 small: ~6 ms of a
// ~35 ms step, on the cores the step's kernels need). So sync() first computes the cut's trace
// key (ir::NodeSequenceKey: one pass, exact but dependent on the order of the trace), and a key
// seen before maps to the canonical hash it had; only a new key builds the module. Equal keys
// mean equal modules, so this changes which work is skipped, never which executable runs.
struct Cache {
  // (backend and its options, hash) -> entry
  std::map<std::pair<std::string, std::string>, CacheEntry> entries;
  std::map<ir::ModuleHash, std::string> trace_keys;                     // trace key -> hash
};

Cache& GetCache() {
  static Cache* cache = new Cache();
  return *cache;
}

std::string g_backend;  // empty: flags::backend() (AXLE_BACKEND), read at the first sync
bool g_grad_enabled = true;
std::vector<std::string> g_scopes;
uint64_t g_scope_version = 1;  // changes whenever g_scopes does
uint64_t g_next_id = 1;
uint64_t g_next_epoch = 1;
int64_t g_sync_calls = 0;  // sync() calls (SyncCalls)

std::unique_ptr<Trace>& TracePtr() {
  static std::unique_ptr<Trace> trace = std::make_unique<Trace>();
  return trace;
}

std::string Where(const ir::Node& n, const Trace& t) {
  std::string s;
  const size_t id = static_cast<size_t>(n.id());
  if (id < t.scope_of.size() && t.scope_of[id] >= 0 && !t.scope_names[static_cast<size_t>(t.scope_of[id])].empty())
    s = "in " + t.scope_names[static_cast<size_t>(t.scope_of[id])];
  if (n.loc().known()) s += (s.empty() ? "at " : ", at ") + n.loc().ToString();
  return s;
}

// Explains, in one paragraph, how `sig` differs from the closest cached graph.
std::string ExplainMiss(const Signature& sig, int64_t number, const std::string& hash) {
  const CacheEntry* best = nullptr;
  size_t best_prefix = 0;
  int64_t best_input_diffs = 0;
  // Closest: fewest inputs of another type, then the longest common prefix of node ops.
  for (const auto& [key, e] : GetCache().entries) {
    if (key.first != g_backend) continue;
    const Signature& o = e.signature;
    size_t prefix = 0;
    while (prefix < sig.nodes.size() && prefix < o.nodes.size() &&
           sig.nodes[prefix].op == o.nodes[prefix].op)
      ++prefix;
    int64_t input_diffs = std::abs(static_cast<int64_t>(sig.inputs.size()) -
                                   static_cast<int64_t>(o.inputs.size()));
    for (size_t i = 0; i < std::min(sig.inputs.size(), o.inputs.size()); ++i)
      input_diffs += sig.inputs[i].type != o.inputs[i].type;
    if (best == nullptr || input_diffs < best_input_diffs ||
        (input_diffs == best_input_diffs && prefix > best_prefix)) {
      best = &e;
      best_prefix = prefix;
      best_input_diffs = input_diffs;
    }
  }
  // The first non-parameter node whose op or type differs (parameters are reported as inputs).
  if (best != nullptr) {
    const Signature& o = best->signature;
    best_prefix = 0;
    while (best_prefix < sig.nodes.size() && best_prefix < o.nodes.size() &&
           sig.nodes[best_prefix].op == o.nodes[best_prefix].op &&
           (sig.nodes[best_prefix].type == o.nodes[best_prefix].type ||
            sig.nodes[best_prefix].op == "parameter"))
      ++best_prefix;
  }
  std::string s = fmt::format(
      "axle: compiling graph #{} ({} nodes, {} inputs, hash {}) on a cache miss", number,
      sig.nodes.size(), sig.inputs.size(), hash.substr(0, 12));
  if (best == nullptr) return s + ": no cached graph to compare with.";
  const Signature& o = best->signature;
  s += fmt::format("; the closest cached graph is #{} (compiled at sync {}).", best->number,
                   best->sync);
  // Note [Precision in recompilation reports]: a step traced under autocast and the same step
  // in f32 differ in every product's dtype; the first differing node alone would read as a
  // mystery, so a precision change is said first, in the user's terms.
  if (sig.precision != o.precision)
    s += fmt::format(" The precision changed: this graph was traced {}, that one {}.",
                     sig.precision.empty() ? "in full precision (no autocast cast)" : sig.precision,
                     o.precision.empty() ? "in full precision (no autocast cast)" : o.precision);
  // Inputs first: a changed batch size or dtype shows up there.
  int64_t shown = 0;
  for (size_t i = 0; i < std::min(sig.inputs.size(), o.inputs.size()); ++i) {
    if (sig.inputs[i].type == o.inputs[i].type) continue;
    if (shown++ == 0)
      s += fmt::format(" Input {} is {} here but was {} there ({}).", i, sig.inputs[i].type,
                       o.inputs[i].type, sig.inputs[i].origin);
  }
  if (shown == 2) s += " 1 more input differs in shape or dtype.";
  if (shown > 2) s += fmt::format(" {} more inputs differ in shape or dtype.", shown - 1);
  if (sig.inputs.size() != o.inputs.size())
    s += fmt::format(" This graph has {} inputs, that one {}.", sig.inputs.size(),
                     o.inputs.size());
  // Then the first node that differs, with the user code that built it.
  if (best_prefix < sig.nodes.size() || best_prefix < o.nodes.size()) {
    auto describe = [](const Signature& g, size_t i) {
      if (i >= g.nodes.size()) return std::string("the end of the graph");
      const auto& n = g.nodes[i];
      return fmt::format("{} : {}{}", n.op, n.type, n.where.empty() ? "" : " (" + n.where + ")");
    };
    s += fmt::format(" The graphs first differ at node {}: here {}; there {}.", best_prefix,
                     describe(sig, best_prefix), describe(o, best_prefix));
  } else if (shown == 0) {
    s += " Node ops and types agree; the difference is in attributes or constants (a C++ scalar "
         "that changes between steps is baked into the graph: pass it as a tensor).";
  }
  return s;
}

}  // namespace

int HostBlocked() { return tls_exec_thread ? 0 : -1; }

// ---- The trace -------------------------------------------------------------------------------
Trace::Trace()
    : module(std::make_unique<ir::Module>("step")),
      fn(module->AddFunction("main")),
      builder(fn),
      epoch(g_next_epoch++) {}

Trace& CurrentTrace() { return *TracePtr(); }

void DropTrace() { TracePtr() = std::make_unique<Trace>(); }

std::vector<char> NodesReaching(const ir::Function& fn, const std::vector<ir::Value*>& results) {
  std::vector<char> needed(static_cast<size_t>(fn.id_bound()), 0);
  for (ir::Value* r : results) needed[static_cast<size_t>(r->node()->id())] = 1;
  const auto& nodes = fn.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (needed[static_cast<size_t>((*it)->id())])
      for (ir::Value* v : (*it)->operands()) needed[static_cast<size_t>(v->node()->id())] = 1;
  return needed;
}

std::string CurrentScope() {
  std::string s;
  for (const auto& p : g_scopes) s += (s.empty() ? "" : ".") + p;
  return s;
}

ir::Builder& B() { return CurrentTrace().builder; }

ir::Builder& B(const SourceLoc& loc) {
  Trace& t = CurrentTrace();
  t.builder.set_loc(loc);
  return t.builder;
}

namespace {
// Gives the nodes built since the last call the current NameScope.
void RecordScopes(Trace& t) {
  const size_t n = t.fn->nodes().size();
  if (!g_scopes.empty() && t.scoped < n) {
    if (t.scope_version != g_scope_version) {  // one name per scope entered, not per node
      t.scope_names.push_back(CurrentScope());
      t.scope_version = g_scope_version;
    }
    t.scope_of.resize(static_cast<size_t>(t.fn->id_bound()), -1);
    const int32_t index = static_cast<int32_t>(t.scope_names.size() - 1);
    for (size_t i = t.scoped; i < n; ++i) t.scope_of[static_cast<size_t>(t.fn->nodes()[i]->id())] = index;
  }
  t.scoped = n;
}

std::shared_ptr<TensorImpl> NewImpl(ir::TensorType type) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = std::move(type);
  impl->id = g_next_id++;
  return impl;
}
}  // namespace

ir::Value* ValueOf(const Tensor& tensor) {
  AXLE_CHECK(tensor.defined(), "an undefined tensor (default-constructed Tensor) was used in an op");
  TensorImpl& impl = *tensor.impl();
  Trace& t = CurrentTrace();
  if (impl.value != nullptr && impl.epoch == t.epoch) return impl.value;
  AXLE_CHECK(impl.data != nullptr, "tensor {} has neither data nor a pending value",
             impl.type.ToString());
  auto it = t.input_value.find(impl.data.get());
  if (it != t.input_value.end()) return it->second;
  ir::Value* v = t.builder.Parameter(static_cast<int64_t>(t.inputs.size()), impl.type);
  t.inputs.push_back(impl.data);
  t.input_impls.push_back(impl.weak_from_this());
  t.input_value.emplace(impl.data.get(), v);
  if (impl.sharding) {
    Annotate(impl, v);
  } else if (impl.data->sharding && (!t.mesh || *t.mesh == *impl.data->mesh)) {
    // Data a partitioned step left sharded: read in that layout, so it stays on the devices.
    t.mesh = impl.data->mesh;
    v->set_sharding(impl.data->sharding);
  }
  return v;
}

void Annotate(const TensorImpl& impl, ir::Value* v) {
  if (!impl.sharding) return;
  Trace& t = CurrentTrace();
  if (t.mesh && !(*t.mesh == *impl.mesh))
    Fail("tensor {} is sharded over mesh {}, but this step's other shardings use mesh {}; one step "
         "uses one mesh (re-mark the tensor with mark_sharding on the step's mesh)",
         impl.type.ToString(), impl.mesh->ToString(), t.mesh->ToString());
  t.mesh = impl.mesh;
  v->set_sharding(impl.sharding);
}

Tensor MakePending(ir::Value* v, bool requires_grad) {
  Trace& t = CurrentTrace();
  auto impl = NewImpl(v->type());
  impl->value = v;
  impl->epoch = t.epoch;
  impl->requires_grad = requires_grad && g_grad_enabled;
  impl->is_leaf = !impl->requires_grad;
  if (!g_grad_enabled) t.stop_gradient.insert(v);
  t.pending.push_back(impl);
  RecordScopes(t);
  t.builder.set_loc(SourceLoc{});  // a location set by a creation function ends with its op
  return Tensor(std::move(impl));
}

Tensor MakePending(ir::Value* v, std::initializer_list<const Tensor*> inputs) {
  bool rg = false;
  for (const Tensor* in : inputs) rg = rg || (in->defined() && in->requires_grad());
  return MakePending(v, rg);
}

void Rebind(TensorImpl& impl, ir::Value* v) {
  Trace& t = CurrentTrace();
  AXLE_CHECK(v->type() == impl.type, "in-place update of a {} tensor with a {} value",
             impl.type.ToString(), v->type().ToString());
  const bool was_pending = impl.value != nullptr && impl.epoch == t.epoch;
  impl.value = v;
  impl.epoch = t.epoch;
  impl.data = nullptr;  // the old buffer is donated to the step if nothing else holds it
  if (!g_grad_enabled) t.stop_gradient.insert(v);
  if (!v->sharding()) Annotate(impl, v);  // an updated parameter keeps its layout
  RecordScopes(t);
  if (!was_pending) t.pending.push_back(impl.weak_from_this());
}

Tensor MakeMaterialized(runtime::BufferPtr buffer, std::string origin) {
  auto impl = NewImpl(buffer->type());
  impl->data = std::make_shared<AsyncBuffer>(std::move(buffer));
  impl->data->origin = std::move(origin);
  return Tensor(std::move(impl));
}

Tensor MakeMaterializedAsync(std::shared_ptr<AsyncBuffer> data, ir::TensorType type) {
  auto impl = NewImpl(std::move(type));
  impl->data = std::move(data);
  return Tensor(std::move(impl));
}

void ReplicateUnannotatedParameters(ir::Function& fn) {
  for (ir::Node* p : fn.Parameters())
    if (!p->result()->sharding()) {
      ir::Sharding replicated;
      replicated.dims.resize(static_cast<size_t>(p->result()->type().rank()));
      p->result()->set_sharding(replicated);
    }
}

Tensor MakeMaterializedSharded(std::shared_ptr<ShardedData> shards, std::string origin) {
  auto impl = NewImpl(shards->global);
  impl->sharding = shards->sharding;
  impl->mesh = shards->mesh;
  impl->data = std::make_shared<AsyncBuffer>(std::move(shards));
  impl->data->origin = std::move(origin);
  return Tensor(std::move(impl));
}

runtime::BufferPtr Materialize(const Tensor& tensor) {
  AXLE_CHECK(tensor.defined(), "reading an undefined tensor");
  TensorImpl& impl = *tensor.impl();
  if (impl.data == nullptr) sync();
  AXLE_CHECK(impl.data != nullptr, "tensor {} was not computed by sync()", impl.type.ToString());
  runtime::BufferPtr b = impl.data->Get();
  UpdateMetrics([&](Metrics& m) {
    ++m.to_host;
    m.to_host_bytes += static_cast<int64_t>(b->bytes().size());
  });
  return b;
}

}  // namespace axle::detail

namespace axle {
using detail::AsyncBuffer;
using detail::CurrentTrace;
using detail::Trace;
using detail::TensorImpl;

namespace {
void SyncImpl(detail::StepRecord* record) {
  runtime::profile::TraceScope span("sync");
  const auto cut_start = std::chrono::steady_clock::now();
  ++detail::g_sync_calls;
  std::unique_ptr<Trace>& trace_ptr = detail::TracePtr();
  Trace& t = *trace_ptr;

  // 1. The results: live tensors with pending values of this trace, in creation order.
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& w : t.pending)
    if (auto p = w.lock(); p && p->value != nullptr && p->epoch == t.epoch) live.push_back(p);
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  live.erase(std::unique(live.begin(), live.end()), live.end());

  std::unordered_map<const ir::Value*, size_t> input_index;
  for (size_t i = 0; i < t.inputs.size(); ++i) input_index[t.input_value[t.inputs[i].get()]] = i;
  // Auto-sharding (spmd::auto_shard): a step without a mesh of its own runs on the auto mesh, its
  // layouts chosen when it is compiled.
  const spmd::Mesh* auto_mesh = spmd::get_auto_shard_mesh();
  if (auto_mesh && !t.mesh) t.mesh = auto_mesh->ir_mesh();
  const bool auto_sharded = auto_mesh && *t.mesh == auto_mesh->ir_mesh();

  // A tensor whose pending value is an input (an in-place copy of a materialized tensor) takes
  // that buffer directly; the others become results, each distinct value once.
  std::vector<ir::Value*> results;
  std::unordered_map<const ir::Value*, size_t> result_index;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> assign;
  for (auto& p : live) {
    if (auto it = input_index.find(p->value); it != input_index.end()) {
      p->data = t.inputs[it->second];
      p->value = nullptr;
      if (record) ++record->aliased;
      continue;
    }
    auto [it, fresh] = result_index.emplace(p->value, results.size());
    if (fresh) results.push_back(p->value);
    assign.emplace_back(p, it->second);
  }
  if (results.empty()) {
    trace_ptr = std::make_unique<Trace>();
    return;
  }

  // 2. The cut: the trace's nodes the results reach, in trace order, and its inputs renumbered by
  // first use; its trace key (Note [Trace keys]).
  // Dense by node id (the trace's nodes are in creation order, so ids follow positions).
  const auto& nodes = t.fn->nodes();
  const std::vector<char> needed = detail::NodesReaching(*t.fn, results);
  std::vector<const ir::Node*> cut;
  std::vector<ir::Attrs> parameter_attrs;  // the cut's parameters, renumbered
  std::vector<std::shared_ptr<AsyncBuffer>> args;
  std::unordered_map<size_t, int64_t> parameter_of_input;  // t.inputs index -> the cut's parameter
  ir::NodeSequenceKey key_builder;
  // A value's position among the cut's values: its node's first result's, plus its index.
  std::vector<int64_t> first_position(static_cast<size_t>(t.fn->id_bound()), -1);
  auto position_of = [&](const ir::Value* v) {
    const int64_t p = first_position[static_cast<size_t>(v->node()->id())];
    AXLE_CHECK(p >= 0, "sync: a traced node uses a value no earlier node of the trace defines");
    return p + v->index();
  };
  {
    int64_t next_position = 0;
    std::vector<int64_t> ids;
    for (const auto& n : nodes) {
      if (!needed[static_cast<size_t>(n->id())]) continue;
      ids.clear();
      for (ir::Value* v : n->operands()) ids.push_back(position_of(v));
      if (n->op() == ir::OpKind::kParameter) {
        ir::Attrs attrs = n->attrs();
        std::get<ir::ParameterAttrs>(attrs).index = static_cast<int64_t>(args.size());
        const size_t input = input_index.at(n->result());
        parameter_of_input[input] = static_cast<int64_t>(args.size());
        args.push_back(t.inputs[input]);
        if (record) {
          record->inputs.push_back(t.input_impls[input]);
          record->input_types.push_back(n->result()->type());
          record->input_origins.push_back(t.inputs[input]->origin);
        }
        key_builder.AddNode(*n, attrs, ids);
        parameter_attrs.push_back(std::move(attrs));
      } else {
        key_builder.AddNode(*n, n->attrs(), ids);
      }
      first_position[static_cast<size_t>(n->id())] = next_position;
      next_position += static_cast<int64_t>(n->num_results());
      cut.push_back(n.get());
    }
    ids.clear();
    for (ir::Value* r : results) ids.push_back(position_of(r));
    key_builder.AddResults(ids);
    key_builder.AddMesh(t.mesh);
  }
  const ir::ModuleHash trace_key = key_builder.Digest();

  // 3. A trace key seen before whose executable is cached needs no module; otherwise the cut
  // becomes a clean module (and the signature that explains a recompilation) while the trace is
  // still alive, and is hashed canonically.
  detail::Cache& cache = detail::GetCache();
  if (detail::g_backend.empty()) set_backend(flags::backend());
  // The backend and the compile options that change its executable: a memory budget (the remat
  // pass, Note [Rematerialization under a budget]) makes another one of the same module.
  std::string compiler = flags::memory_budget() > 0
                             ? fmt::format("{} (memory budget {})", detail::g_backend, flags::memory_budget())
                             : detail::g_backend;
  if (auto_sharded) {  // the options choose other layouts: another executable
    const spmd::AutoShardingOptions& ao = *spmd::get_auto_shard_options();
    compiler += fmt::format(" (auto-sharded, bound {} bytes, {} s limit, {}, timing within {})", ao.memory_bound_bytes,
                            ao.time_limit_s, ao.use_ilp ? "ilp" : "greedy", ao.time_candidates_within);
  }
  auto it = cache.entries.end();
  if (auto k = cache.trace_keys.find(trace_key); k != cache.trace_keys.end())
    it = cache.entries.find(std::make_pair(compiler, k->second));
  std::unique_ptr<ir::Module> module;
  detail::Signature sig;
  sig.precision = t.precision;
  std::string hash;
  if (it == cache.entries.end()) {
    module = std::make_unique<ir::Module>("step");
    ir::Function* fn = module->AddFunction("main");
    std::unordered_map<const ir::Value*, ir::Value*> map;
    size_t next_parameter = 0;
    for (const ir::Node* n : cut) {
      std::vector<ir::Value*> operands;
      for (ir::Value* v : n->operands()) operands.push_back(map.at(v));
      std::vector<ir::TensorType> types;
      for (ir::Value* r : n->results()) types.push_back(r->type());
      ir::Attrs attrs = n->op() == ir::OpKind::kParameter ? parameter_attrs[next_parameter] : n->attrs();
      if (n->op() == ir::OpKind::kParameter)
        sig.inputs.push_back({types[0].ToString(), args[next_parameter++]->origin});
      ir::Node* copy = fn->AddNode(n->op(), std::move(operands), std::move(attrs), types);
      copy->set_loc(n->loc());
      for (size_t i = 0; i < n->num_results(); ++i) {
        map[n->result(i)] = copy->result(i);
        copy->result(i)->set_sharding(n->result(i)->sharding());
      }
      sig.nodes.push_back({std::string(n->name()), types.size() == 1 ? types[0].ToString() : "(...)",
                           detail::Where(*n, t)});
    }
    std::vector<ir::Value*> mapped;
    for (ir::Value* r : results) mapped.push_back(map.at(r));
    fn->set_results(std::move(mapped));
    // The annotations' mesh: with more than one device the step is partitioned (sharded_step.h).
    module->set_mesh(t.mesh);
    if (t.mesh && !auto_sharded) detail::ReplicateUnannotatedParameters(*fn);
    hash = ir::HashModule(*module).ToHex();
    cache.trace_keys[trace_key] = hash;
    it = cache.entries.find(std::make_pair(compiler, hash));
  }
  const int64_t graph_nodes = static_cast<int64_t>(cut.size());
  cut.clear();  // points into the trace
  if (record) {
    for (ir::Value* r : results) record->result_types.push_back(r->type());
    record->sharded = t.mesh.has_value();
    record->trace_key = trace_key;
    record->graph_nodes = graph_nodes;
  }

  // Auto-sharding keeps each updated tensor (a parameter, optimizer state) in its input's layout.
  std::vector<std::pair<int64_t, int64_t>> tied;
  if (auto_sharded && it == cache.entries.end())
    for (const auto& [impl, index] : assign)
      for (size_t i = 0; i < t.input_impls.size(); ++i)
        if (auto p = parameter_of_input.find(i); p != parameter_of_input.end() && t.input_impls[i].lock() == impl)
          tied.emplace_back(static_cast<int64_t>(index), p->second);

  // 4. Donation: inputs that only this trace holds. Then the trace is done.
  trace_ptr = std::make_unique<Trace>();  // drops the old trace's references
  std::vector<bool> donate = detail::DonatableArgs(args);
  const double cut_s = detail::Seconds(cut_start);

  // 5. The executable: cached, or compiled now.
  const int64_t sync_number = detail::CountSync();
  if (it == cache.entries.end()) {
    const int64_t number = static_cast<int64_t>(cache.entries.size()) + 1;
    if (flags::debug() && number > 1)
      std::cerr << detail::ExplainMiss(sig, number, hash) << "\n";
    const auto start = std::chrono::steady_clock::now();
    ir::Verify(*module);
    detail::CacheEntry e;
    runtime::Backend& backend = runtime::GetBackend(detail::g_backend);
    e.exe = detail::CompileShardedStep(backend, *module, auto_sharded, tied);  // a mesh of several devices
    if (e.exe == nullptr) e.exe = backend.Compile(*module);
    const double secs = detail::Seconds(start);
    e.signature = std::move(sig);
    e.number = number;
    e.sync = sync_number;
    it = cache.entries.emplace(std::make_pair(compiler, hash), std::move(e)).first;
    const bool disk_hit = it->second.exe->compile_info().disk_hit;
    detail::UpdateMetrics([&](Metrics& m) {
      ++(disk_hit ? m.disk_hits : m.compiles);
      m.compile_s += secs;
    });
  } else {
    detail::UpdateMetrics([&](Metrics& m) { ++m.cache_hits; });
  }

  // 6. Launch; the tensors get their (future) buffers now.
  runtime::Executable* exe = it->second.exe.get();
  std::vector<std::shared_ptr<AsyncBuffer>> outs = detail::NewResults(results.size(), exe, sync_number);
  for (auto& [impl, index] : assign) {
    impl->data = outs[index];
    impl->value = nullptr;
  }
  if (record) {
    record->launched = true;
    record->exe = exe;
    record->assign = std::move(assign);
  }
  detail::UpdateMetrics([&](Metrics& m) { m.trace_cut_s += cut_s; });
  detail::LaunchStep(detail::StepLaunch{exe, std::move(args), graph_nodes}, std::move(donate), std::move(outs));
}
}  // namespace

void sync() { SyncImpl(nullptr); }

namespace detail {
void SyncRecording(StepRecord* record) { SyncImpl(record); }

// Note [Donation and the worker's references]
// An argument is donated when the launch holds its AsyncBuffer alone (use_count() == 1). The
// worker that finishes the previous step holds each of its results for a moment (a weak_ptr
// locked to publish the value), so a trace that checked then saw 2 and copied instead of
// donating (a flaky count in CI under AddressSanitizer). The worker publishes under
// PublishMutex() and the check reads the counts under it too, so it never sees those moments.
std::mutex& PublishMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<bool> DonatableArgs(const std::vector<std::shared_ptr<AsyncBuffer>>& args) {
  std::lock_guard<std::mutex> lock(PublishMutex());
  std::vector<bool> donate(args.size());
  for (size_t i = 0; i < args.size(); ++i) donate[i] = args[i].use_count() == 1;
  return donate;
}

std::vector<std::shared_ptr<AsyncBuffer>> NewResults(size_t n, runtime::Executable* exe, int64_t sync_number) {
  std::vector<std::shared_ptr<AsyncBuffer>> outs(n);
  auto* sharded_step = dynamic_cast<ShardedStep*>(exe);
  for (size_t j = 0; j < n; ++j) {
    auto& o = outs[j];
    o = std::make_shared<AsyncBuffer>();
    o->origin = fmt::format("a result of sync {}", sync_number);
    if (sharded_step && !sharded_step->result_sharding(j).IsReplicated()) {
      o->sharding = sharded_step->result_sharding(j);
      o->mesh = sharded_step->mesh();
    }
  }
  return outs;
}

void LaunchStep(StepLaunch launch, std::vector<bool> donate, std::vector<std::shared_ptr<AsyncBuffer>> outs) {
  Job job;
  job.exe = launch.exe;
  job.args = std::move(launch.args);
  job.donate = std::move(donate);
  for (const auto& o : outs) job.outputs.push_back(o);
  const int64_t n_donated = std::count(job.donate.begin(), job.donate.end(), true);
  UpdateMetrics([&](Metrics& m) {
    if (launch.replayed) {
      ++m.cache_hits;
      ++m.replays;
    }
    m.donated += n_donated;
    m.last_graph_nodes = launch.graph_nodes;
    m.max_graph_nodes = std::max(m.max_graph_nodes, m.last_graph_nodes);
    m.last_graph_inputs = static_cast<int64_t>(job.args.size());
    m.last_graph_outputs = static_cast<int64_t>(job.outputs.size());
  });
  GetExecutor().Launch(std::move(job));
}

bool TraceEmpty() { return CurrentTrace().fn->nodes().empty(); }
int64_t SyncCalls() { return g_sync_calls; }
}  // namespace detail

void wait() { detail::GetExecutor().WaitAll(); }

void set_backend(const std::string& name) {
  runtime::GetBackend(name);  // throws on an unknown name
  detail::g_backend = name;
}
std::string backend() { return detail::g_backend.empty() ? flags::backend() : detail::g_backend; }

NoGradGuard::NoGradGuard() : prev_(detail::g_grad_enabled) { detail::g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { detail::g_grad_enabled = prev_; }
bool grad_enabled() { return detail::g_grad_enabled; }

NameScope::NameScope(const std::string& name) {
  detail::g_scopes.push_back(name);
  ++detail::g_scope_version;
}
NameScope::~NameScope() {
  detail::g_scopes.pop_back();
  ++detail::g_scope_version;
}

}  // namespace axle
