// Virtual CPU devices: N devices in one process, each with its own execution thread, joined by an
// in-process communicator (collectives.h). A module partitioned for N replicas
// (module.num_replicas() == N, replica r = device r) runs one step on all of them at once:
//
//   flags::set_cpu_devices(4);                                    // or AXLE_CPU_DEVICES=4
//   auto exe = runtime::ReplicatedExecutable::Compile(runtime::GetBackend("cpu"), module);
//   std::vector<std::vector<runtime::BufferPtr>> out = exe->Execute(std::move(args_per_device));
//
// Any backend works ("cpu", "compiled", "interpreter"): the module is compiled once and each
// device runs Executable::ExecuteOnDevice on its thread. Results are bitwise those of
// ir::EvaluateReplicated wherever the backend's single-replica results are the interpreter's
// (collectives themselves are exact). docs/runtime.md, "Devices and collectives".
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ir/module.h"
#include "runtime/backend.h"
#include "runtime/collectives.h"

namespace axle::runtime {

// N devices, one thread each, and their communicator.
class CpuDevices {
 public:
  explicit CpuDevices(int num_devices);
  // This process's `local` devices of a run of several processes: global ids [first, first +
  // local), collectives through `comm` (the world's, not owned).
  CpuDevices(int local, int first, Communicator& comm);
  ~CpuDevices();
  CpuDevices(const CpuDevices&) = delete;
  CpuDevices& operator=(const CpuDevices&) = delete;

  // This process's devices (threads), the global id of the first, and the devices of the run.
  int size() const { return static_cast<int>(threads_.size()); }
  int first() const { return first_; }
  int global_size() const { return comm_->num_devices(); }
  Communicator& comm() { return *comm_; }

  // Runs fn(d) on device d's thread for every device at once and returns when all are done
  // (d: the global id).
  // When fn throws on some device, the communicator is aborted (devices waiting for it in a
  // collective stop waiting) and Run throws one axle::Error "device <d> failed: <what>" naming
  // the first device that failed. One Run at a time: concurrent callers take turns; calling Run
  // from a device's own thread is an error.
  void Run(const std::function<void(int device)>& fn);

  // The process-wide set of `num_devices` devices (created on first use, never destroyed).
  // num_devices must be in [1, flags::cpu_devices()]: the flag is how many devices this process
  // has. In a run of several processes (runtime/world.h) it must be the run's device count, and
  // the set is this process's share of them.
  static CpuDevices& Get(int num_devices);

 private:
  void Start(int local);
  void Loop(int device);

  std::unique_ptr<Communicator> owned_comm_;
  Communicator* comm_ = nullptr;
  int first_ = 0;
  std::vector<std::thread> threads_;
  std::mutex run_mu_;  // one Run at a time
  std::mutex mu_;      // guards the fields below
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// A module partitioned for N replicas, compiled once by a backend, run as one step on N devices.
class ReplicatedExecutable {
 public:
  // Compiles `module` (verified by the caller) with `backend` for CpuDevices::Get(num_replicas).
  // Throws axle::Error when the process has fewer devices than the module has replicas.
  static std::unique_ptr<ReplicatedExecutable> Compile(Backend& backend, const ir::Module& module);
  ReplicatedExecutable(std::unique_ptr<Executable> exe, CpuDevices& devices);

  int num_devices() const { return devices_.size(); }  // this process's
  int first_device() const { return devices_.first(); }
  Executable& executable() { return *exe_; }

  // Runs one step: args_per_device[d] binds this process's device d's parameters (global device
  // first() + d; types as in Executable::Execute; a sole reference donates the buffer). Returns
  // each of its devices' results: out[d][result]. Throws one axle::Error naming the device when a device fails, and on a wrong
  // number of per-device argument lists.
  std::vector<std::vector<BufferPtr>> Execute(std::vector<std::vector<BufferPtr>> args_per_device);

  // Counters of the last Execute, per device.
  const std::vector<ExecuteStats>& last_stats() const { return stats_; }
  const std::vector<CollectiveStats>& last_collective_stats() const { return collective_stats_; }
  // The collective counters of the last Execute summed over devices.
  CollectiveStats total_collective_stats() const;

 private:
  std::unique_ptr<Executable> exe_;
  CpuDevices& devices_;
  std::vector<ExecuteStats> stats_;
  std::vector<CollectiveStats> collective_stats_;
};

}  // namespace axle::runtime
