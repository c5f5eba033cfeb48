// Internals of the lazy tensor runtime (include/axle/tensor.h is the public API).
//
// A TensorImpl is in one of two states:
//   * pending: `value` is a node result in the current trace (an ir::Function under
//     construction); nothing has run yet;
//   * materialized: `data` is a device buffer, possibly still being computed by a launched step
//     (an AsyncBuffer that becomes ready when the step finishes).
// Using a materialized tensor in an op makes its buffer a parameter of the trace. sync() cuts
// the trace: every live pending tensor becomes a result, the reachable part of the trace becomes
// a clean ir::Module (parameters renumbered in order of first use), the module's structural hash
// selects a cached executable or compiles one, and the step is queued on the execution thread.
// The results' AsyncBuffers are handed to the tensors at once; reading one waits.
//
// Donation: a parameter buffer that no tensor references any more when the trace is cut (the
// tensor was rebound by an in-place op, as the optimizer does to parameters) is moved into the
// step, so the executable may reuse its storage for the updated value.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "axle/metrics.h"
#include "autodiff/vjp.h"
#include "axle/tensor.h"
#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/module.h"
#include "runtime/backend.h"

namespace axle::detail {

struct ShardedData;  // sharded_step.h

// A device buffer that may still be computed by a launched step: one buffer, or the shards a
// partitioned step left on its devices.
class AsyncBuffer {
 public:
  AsyncBuffer() = default;
  explicit AsyncBuffer(runtime::BufferPtr ready) : buffer_(std::move(ready)), ready_(true) {}
  explicit AsyncBuffer(std::shared_ptr<ShardedData> ready);
  void Set(runtime::BufferPtr buffer);
  void SetSharded(std::shared_ptr<ShardedData> shards);
  void SetError(std::exception_ptr error);
  // Waits until ready; rethrows the step's error. A sharded value is assembled once (and kept).
  const runtime::BufferPtr& Get();
  // Waits, then takes the buffer out (donation); the AsyncBuffer is empty afterwards.
  runtime::BufferPtr Take();
  // Waits; the shards, or nullptr for a value held whole. TakeSharded also empties the
  // AsyncBuffer when it returns shards (donation).
  std::shared_ptr<ShardedData> GetSharded();
  std::shared_ptr<ShardedData> TakeSharded();
  bool ready();
  // The buffers that hold the ready value (the local shards, nullptr for other processes'
  // devices; or the one buffer), when nothing but this AsyncBuffer refers to them: whoever holds
  // the AsyncBuffer alone may then overwrite the value in place (a checkpoint restore). An
  // assembled copy of a sharded value that nobody else holds is dropped first (it would go
  // stale). Empty when anything else holds a buffer, or the value is not ready or failed.
  std::vector<runtime::BufferPtr> ExclusiveBuffers();

  std::string origin;  // where the data came from, for recompilation reports
  // The layout the value has (or will have, once its step finishes) on the devices, when it is
  // sharded; set before anyone can see the AsyncBuffer. A step that reads the value wants it so.
  std::optional<ir::Sharding> sharding;
  std::optional<ir::Mesh> mesh;

 private:
  // Blocks until the value is ready (the host then competes for no core; AXLE_TRACE shows the wait).
  void WaitReady(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::condition_variable cv_;
  runtime::BufferPtr buffer_;
  std::shared_ptr<ShardedData> sharded_;
  std::exception_ptr error_;
  bool ready_ = false;
};

// The metrics (metrics.cc): f runs on them under their mutex.
void UpdateMetrics(const std::function<void(Metrics&)>& f);
// Counts a global buffer split into shards or assembled from them on the host
// (Metrics::host_reshards and host_reshard_bytes).
void CountHostReshard(int64_t bytes);

struct TensorImpl : std::enable_shared_from_this<TensorImpl> {
  ir::TensorType type;
  std::shared_ptr<AsyncBuffer> data;  // materialized (maybe in flight)
  ir::Value* value = nullptr;         // pending in trace `epoch`
  uint64_t epoch = 0;
  uint64_t id = 0;                    // creation order (results are ordered by it)
  bool requires_grad = false;         // a leaf marked by requires_grad_, or computed from one
  bool is_leaf = true;
  std::shared_ptr<TensorImpl> grad;
  // mark_sharding's annotation (include/axle/spmd.h): it holds for the tensor's value in every
  // trace that uses it, and for the values in-place ops rebind it to.
  std::optional<ir::Sharding> sharding;
  std::optional<ir::Mesh> mesh;
};

// The trace under construction. One per process; tracing is single-threaded.
struct Trace {
  Trace();
  std::unique_ptr<ir::Module> module;
  ir::Function* fn = nullptr;
  ir::Builder builder;
  uint64_t epoch = 0;
  // Materialized buffers used by the trace, in order of first use, and their parameter values.
  std::vector<std::shared_ptr<AsyncBuffer>> inputs;
  std::unordered_map<const AsyncBuffer*, ir::Value*> input_value;
  // The tensor each input was first read through (axle::CompiledFunction replays a step by
  // reading the same tensors again), parallel to `inputs`.
  std::vector<std::weak_ptr<TensorImpl>> input_impls;
  // Values whose gradient is cut (detach(), no_grad()).
  std::unordered_set<const ir::Value*> stop_gradient;
  // axle::remat regions (include/axle/remat.h): backward() recomputes them (Note [Recomputed
  // regions], autodiff/vjp.cc). in_remat: a region is being traced (an inner one joins it).
  std::vector<autodiff::RematRegion> remat_regions;
  bool in_remat = false;
  // Region names (NameScope) of the nodes, for cache-miss reports: scope_names[scope_of[id]]
  // (-1: none); a name is recorded once per scope entered.
  std::vector<std::string> scope_names;
  std::vector<int32_t> scope_of;
  uint64_t scope_version = 0;  // g_scope_version when scope_names.back() was recorded
  // Tensors that hold pending values of this trace.
  std::vector<std::weak_ptr<TensorImpl>> pending;
  // The mesh of the trace's sharding annotations (one per trace), if any.
  std::optional<ir::Mesh> mesh;
  size_t scoped = 0;  // nodes before this index have had their scope recorded
  // "under autocast(bf16)" once an autocast scope cast an input while this trace was built
  // (Note [Precision in recompilation reports], lazy.cc); empty: no cast.
  std::string precision;

  // Note [Operand caches]: the constants and broadcasts that elementwise ops take as operands
  // (x * 0.9, a bias broadcast over the batch), built once per trace and shared by every op
  // that needs the same one: AdamW alone traced a scalar, a broadcast and a literal per
  // multiplication (~8 nodes a parameter). Sharing is what CSE would do in the compiler, so the
  // step computes the same bits; but its trace has fewer nodes to build, key and free. They are
  // only ever operands, never a tensor's value, so no annotation or in-place rebinding reaches
  // them; only autodiff erases nodes from a trace, and only nodes it built itself.
  struct CachedFull {
    DType dtype;
    Shape shape;
    ir::Value* value;
  };
  struct CachedBroadcast {
    Shape shape;
    ir::Value* value;
  };
  // By the value's bits (so -0 and NaN payloads stay distinct).
  std::unordered_map<uint64_t, std::vector<CachedFull>> full_operands;
  std::unordered_map<const ir::Value*, std::vector<CachedBroadcast>> broadcast_operands;
};

Trace& CurrentTrace();
// Which nodes of trace function `fn` (nodes in creation order, so ids follow positions) the
// `results` reach, indexed by node id: the part of the trace sync() cuts.
std::vector<char> NodesReaching(const ir::Function& fn, const std::vector<ir::Value*>& results);
// Starts a new trace without running the current one: its pending tensors keep values of a trace
// that is gone (TakeTrace, inspect.h, turns them into placeholders first).
void DropTrace();
std::string CurrentScope();

// The IR value of `t` in the current trace (a parameter for a materialized tensor).
ir::Value* ValueOf(const Tensor& t);
// A new pending tensor for `v`; requires_grad when any of `inputs` requires it (and grad mode
// is on); otherwise its gradient is cut.
Tensor MakePending(ir::Value* v, std::initializer_list<const Tensor*> inputs);
Tensor MakePending(ir::Value* v, bool requires_grad);
// Rebinds `impl` to pending value `v` (in-place ops).
void Rebind(TensorImpl& impl, ir::Value* v);
// Puts `impl`'s sharding annotation (if any) on `v` and the annotation's mesh on the trace.
void Annotate(const TensorImpl& impl, ir::Value* v);
// Pins every parameter of a step over a mesh that has no layout (no annotation, and data not left
// sharded by an earlier step) as replicated: as in PyTorch/XLA, data nobody sharded is on every
// device, so propagation cannot ask for it split (which would cost a host split every step).
void ReplicateUnannotatedParameters(ir::Function& fn);
// A materialized tensor from a host buffer (a transfer).
Tensor MakeMaterialized(runtime::BufferPtr buffer, std::string origin);
// A materialized tensor of `type` whose buffer a launched step will write (a replay's result).
Tensor MakeMaterializedAsync(std::shared_ptr<AsyncBuffer> data, ir::TensorType type);
// A materialized tensor held as shards on the devices (spmd::from_local_shards); it carries the
// layout as its annotation.
Tensor MakeMaterializedSharded(std::shared_ptr<ShardedData> shards, std::string origin);
// Waits for `t` (syncing first if it is pending) and returns its buffer.
runtime::BufferPtr Materialize(const Tensor& t);
// What one sync() launched, for axle::CompiledFunction (compile.h), which launches the same
// executable again on the same tensors' new buffers without tracing (Note [Replaying a step],
// compiled_function.cc).
struct StepRecord {
  bool launched = false;  // false: the trace had no results, nothing ran
  runtime::Executable* exe = nullptr;  // owned by the executable cache, which never drops one
  ir::ModuleHash trace_key;            // equal keys: equal graphs with equal argument order
  // Per argument of the executable: the tensor it was read through, its type and its origin.
  std::vector<std::weak_ptr<TensorImpl>> inputs;
  std::vector<ir::TensorType> input_types;
  std::vector<std::string> input_origins;
  // The tensors that received results: (tensor, result index).
  std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> assign;
  std::vector<ir::TensorType> result_types;
  int64_t aliased = 0;  // tensors whose pending value was an input (they took its buffer)
  bool sharded = false;  // the step had sharding annotations (a mesh)
  int64_t graph_nodes = 0;
};
// sync(), filling *record (nullptr: plain sync()).
void SyncRecording(StepRecord* record);
// Launches an executable on `args` (in its argument order), donated where `donate` says, writing
// `outs` (from NewResults; the sync's number from CountSync): sync()'s launch, and a compiled
// function's replay of a recorded step.
struct StepLaunch {
  runtime::Executable* exe = nullptr;
  std::vector<std::shared_ptr<AsyncBuffer>> args;
  int64_t graph_nodes = 0;
  bool replayed = false;  // a compiled function's replay (counted as a cache hit and a replay)
};
std::vector<std::shared_ptr<AsyncBuffer>> NewResults(size_t n, runtime::Executable* exe, int64_t sync_number);
int64_t CountSync();
void LaunchStep(StepLaunch launch, std::vector<bool> donate, std::vector<std::shared_ptr<AsyncBuffer>> outs);
// Which of a launch's arguments it holds alone, and so donates (Note [Donation and the worker's
// references], lazy.cc); PublishMutex() is held while the worker publishes a step's results.
std::vector<bool> DonatableArgs(const std::vector<std::shared_ptr<AsyncBuffer>>& args);
std::mutex& PublishMutex();

// Note [Competing threads] (runtime/thread_pool.h): what a wait for a step's result counts as
// for the pool (-1 on the host, 0 on the execution thread, whose waits are its own).
int HostBlocked();
// True when the current trace holds no nodes (nothing is pending).
bool TraceEmpty();
// Syncs performed so far (sync() calls that cut a trace, launched or not); a compiled function
// checks that its body did not sync.
int64_t SyncCalls();

// The builder of the current trace. B(loc) also sets the location recorded on the nodes built
// until the next MakePending (creation functions pass the user's call site).
ir::Builder& B();
ir::Builder& B(const SourceLoc& loc);

}  // namespace axle::detail
