// The "interpreter" backend: the reference interpreter (ir::Evaluate) behind the Backend
// interface, the oracle every other backend is tested against.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "ir/interpreter.h"
#include "runtime/collectives.h"

namespace axle::runtime {
namespace {

using ir::Literal;
using ir::Node;
using ir::OpKind;
using ir::Value;

// The oracle: runs ir::Evaluate on copies of the arguments.
class InterpreterExecutable final : public Executable {
 public:
  explicit InterpreterExecutable(const ir::Module& module) : module_(module.Clone()) {
    if (module_->entry() == nullptr) Fail("interpreter backend: module @{} has no entry function", module_->name());
  }
  std::vector<BufferPtr> Execute(std::vector<BufferPtr> args) override {
    if (module_->num_replicas() != 1)
      Fail("@{}: module @{} is partitioned for {} replicas: run it on {} devices with runtime::ReplicatedExecutable "
           "(devices.h), not with Execute",
           module_->entry()->name(), module_->name(), module_->num_replicas(), module_->num_replicas());
    std::vector<Literal> in;
    in.reserve(args.size());
    for (size_t k = 0; k < args.size(); ++k) {
      if (!args[k]) Fail("@{}: argument {} is null", module_->entry()->name(), k);
      in.push_back(*args[k]);
    }
    args.clear();
    std::vector<Literal> res = ir::Evaluate(*module_->entry(), in);
    std::vector<BufferPtr> out;
    for (Literal& l : res) out.push_back(std::make_shared<Literal>(std::move(l)));
    stats_.kernels_run = 0;
    for (const auto& n : module_->entry()->nodes())
      if (n->op() != OpKind::kParameter && n->op() != OpKind::kConstant) ++stats_.kernels_run;
    return out;
  }
  ExecuteStats last_stats() const override { return stats_; }

  // One device of a replicated step: the interpreter's kernel of each node (ir::EvaluateNode, with
  // the device as replica), collectives through the communicator.
  std::vector<BufferPtr> ExecuteOnDevice(std::vector<BufferPtr> args, const DeviceContext& device,
                                         ExecuteStats* stats) override {
    const ir::Function& f = *module_->entry();
    if (device.comm == nullptr) Fail("@{}: ExecuteOnDevice without a communicator", f.name());
    if (device.comm->num_devices() != module_->num_replicas())
      Fail("@{}: module @{} is partitioned for {} replicas but runs on {} devices", f.name(), module_->name(),
           module_->num_replicas(), device.comm->num_devices());
    const std::vector<Node*> params = f.Parameters();
    if (args.size() != params.size()) Fail("@{}: expected {} arguments, got {}", f.name(), params.size(), args.size());
    std::unordered_map<const Value*, size_t> last_use;
    for (size_t pos = 0; pos < f.nodes().size(); ++pos)
      for (const Value* v : f.nodes()[pos]->operands()) last_use[v] = pos;
    std::unordered_map<const Value*, BufferPtr> values;
    ExecuteStats st;
    std::vector<const Literal*> ops;
    for (size_t pos = 0; pos < f.nodes().size(); ++pos) {
      const Node& n = *f.nodes()[pos];
      ops.clear();
      for (const Value* v : n.operands()) ops.push_back(values.at(v).get());
      std::vector<BufferPtr> res;
      try {
        switch (n.op()) {
          case OpKind::kParameter: {
            const size_t k = static_cast<size_t>(n.attrs_as<ir::ParameterAttrs>().index);
            if (k >= args.size() || !args[k] || args[k]->type() != n.result()->type())
              Fail("argument {} has type {}, but the parameter expects {}", k,
                   k < args.size() && args[k] ? args[k]->type().ToString() : "null", n.result()->type().ToString());
            res.push_back(args[k]);
            break;
          }
          case OpKind::kConstant:
            res.push_back(std::make_shared<Literal>(n.attrs_as<ir::ConstantAttrs>().value));
            break;
          case OpKind::kOptimizationBarrier:
            for (const Value* v : n.operands()) res.push_back(values.at(v));
            break;
          case OpKind::kAllReduce:
          case OpKind::kAllGather:
          case OpKind::kReduceScatter:
          case OpKind::kAllToAll:
          case OpKind::kCollectivePermute: {
            ++st.kernels_run;
            auto out = std::make_shared<Literal>(Literal::Uninitialized(n.result()->type()));
            RunCollectiveNode(n, device, *ops[0], *out);
            res.push_back(std::move(out));
            break;
          }
          default:
            ++st.kernels_run;
            for (Literal& l : ir::EvaluateNode(n, ops, device.device)) res.push_back(std::make_shared<Literal>(std::move(l)));
            break;
        }
      } catch (const Error& e) {
        throw Error(n.loc(), fmt::format("@{}: node #{} ({}): {}", f.name(), pos, n.name(), e.message()));
      }
      for (size_t j = 0; j < res.size(); ++j) values[n.results()[j]] = std::move(res[j]);
      for (const Value* v : n.operands())
        if (last_use.at(v) == pos && std::find(f.results().begin(), f.results().end(), v) == f.results().end())
          values.erase(v);
    }
    args.clear();
    std::vector<BufferPtr> out;
    for (const Value* v : f.results()) {
      const BufferPtr& b = values.at(v);
      out.push_back(b.use_count() == 1 ? b : std::make_shared<Literal>(*b));  // results are the caller's
    }
    if (stats) *stats = st;
    return out;
  }

 private:
  std::unique_ptr<ir::Module> module_;
  ExecuteStats stats_;
};

class InterpreterBackendImpl final : public Backend {
 public:
  std::string_view name() const override { return "interpreter"; }
  std::unique_ptr<Executable> Compile(const ir::Module& module) override {
    return std::make_unique<InterpreterExecutable>(module);
  }
};

}  // namespace

Backend& InterpreterBackend() {
  static InterpreterBackendImpl* b = new InterpreterBackendImpl;
  return *b;
}

}  // namespace axle::runtime
