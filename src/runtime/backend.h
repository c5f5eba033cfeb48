// The backend interface: what the frontend needs from a device to run a compiled step.
//
//   runtime::Backend& cpu = runtime::GetBackend("cpu");
//   std::unique_ptr<runtime::Executable> exe = cpu.Compile(module);   // once per graph
//   std::vector<ir::Literal> out = exe->Execute(std::move(args));      // every step
//
// A backend only executes (ARCHITECTURE.md, invariant 6): it receives a verified ir::Module whose
// entry function's parameters are the step's inputs and whose results are its outputs, and it
// must compute exactly what the reference interpreter (ir/interpreter.h) computes, up to the
// floating-point reassociation its kernels document.
//
// Buffers. On the CPU a device buffer is a host ir::Literal held by a shared_ptr. An argument
// whose shared_ptr is the only reference (use_count() == 1) is *donated*: the executable may
// write a result of the same size over it (a parameter updated in place by the optimizer costs
// no copy). Arguments shared with anyone else are read only.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "ir/literal.h"
#include "ir/module.h"
#include "passes/target.h"

namespace axle::runtime {

using BufferPtr = std::shared_ptr<ir::Literal>;

class Communicator;  // collectives.h

// Where an executable runs when it is one device of a replicated step (devices.h): device r runs
// replica r of a module with num_replicas() == comm->num_devices().
struct DeviceContext {
  int device = 0;                // what replica_id returns
  Communicator* comm = nullptr;  // the step's collectives
};

struct ExecuteStats {
  int64_t kernels_run = 0;      // kernel launches (one per non-trivial node on the CPU executor)
  int64_t donated_reused = 0;   // results written into a donated argument's storage
  int64_t peak_bytes = 0;       // peak bytes of live values (arguments, intermediates, results)
  int64_t fallback_kernels = 0; // of kernels_run, those run by the reference interpreter's kernel
  int64_t new_buffers = 0;      // allocations by this run (results, and an arena not kept from the last)
  // A backend's own counters are its own: the CPU schedule's are runtime::CpuScheduleStats
  // (backends/cpu/executor.h).
};

// How an executable came to be (the frontend's metrics count compiles and disk hits apart).
struct CompileInfo {
  bool disk_hit = false;        // its native code was loaded from the on-disk cache
  double native_compile_s = 0;  // seconds in the native compiler (0 on a disk hit)
  bool pipeline_cached = false; // the optimized module came from the disk cache: no pass ran
};

class Executable {
 public:
  virtual ~Executable() = default;
  const CompileInfo& compile_info() const { return compile_info_; }
  void set_compile_info(CompileInfo info) { compile_info_ = info; }
  // Runs the step. args[i] binds the parameter with index i and must have its exact type (a
  // mismatch throws axle::Error naming the parameter and both types). Returns one buffer per
  // result of the entry function, in order. Thread-compatible: one Execute at a time per
  // executable; different executables may run concurrently.
  virtual std::vector<BufferPtr> Execute(std::vector<BufferPtr> args) = 0;
  // Counters of the last Execute.
  virtual ExecuteStats last_stats() const { return {}; }
  // The plan the executable runs, as text (`axle compile --emit=schedule`); empty for a backend
  // that has none.
  virtual std::string DescribeSchedule() const { return {}; }
  // Where its values live (`axle compile --emit=buffers`: Note [Buffer assignment]); empty for a
  // backend that plans none.
  virtual std::string DescribeBuffers() const { return {}; }
  // Runs the step as device `device.device` of a replicated step: collectives go through
  // `device.comm`, replica_id returns the device id. Unlike Execute, it may run concurrently on
  // several threads (one per device) of one executable; its counters go to `*stats` (when not
  // null), not to last_stats(). Throws axle::Error when the backend cannot run devices.
  virtual std::vector<BufferPtr> ExecuteOnDevice(std::vector<BufferPtr> args, const DeviceContext& device,
                                                 ExecuteStats* stats) {
    (void)args, (void)stats;
    Fail("this executable cannot run as device {} of a replicated step: its backend has no device support",
         device.device);
  }

 private:
  CompileInfo compile_info_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "interpreter", "cpu", ...
  virtual std::string_view name() const = 0;
  // What the backend compiles for (thread count, ISA, ...): the host unless made for another.
  virtual const passes::Target& target() const { return passes::Target::Host(); }
  // Prepares `module` (verified by the caller; the backend may keep a copy) for execution.
  // Throws axle::Error when the module uses something the backend cannot run, naming the node.
  virtual std::unique_ptr<Executable> Compile(const ir::Module& module) = 0;
  // One line on what the backend runs with, for a program's log (the CPU backends: which library
  // runs products); empty when there is nothing to say. Throws axle::Error when what it needs
  // cannot be loaded (a library the backend's flags ask for that is not installed).
  virtual std::string Describe() const { return ""; }
};

// The reference interpreter as a backend (interpreter_backend.cc): the oracle every other backend
// is tested against. The registry of all backends by name is src/backends/registry.h.
Backend& InterpreterBackend();

}  // namespace axle::runtime
