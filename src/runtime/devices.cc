// Virtual CPU devices (devices.h). Each device thread sleeps on a condition variable between
// steps; Run hands every device the same function, and a device that throws aborts the
// communicator so that its peers blocked in a collective throw too instead of waiting forever.
#include "runtime/devices.h"

#include <pthread.h>

#include <fmt/format.h>

#include <map>
#include <string>

#include "core/error.h"
#include "core/flags.h"
#include "runtime/thread_pool.h"
#include "runtime/world.h"

namespace axle::runtime {
namespace {
thread_local const CpuDevices* tls_device_of = nullptr;  // the devices whose thread this is
}

CpuDevices::CpuDevices(int num_devices) {
  if (num_devices < 1) Fail("CpuDevices: {} devices; expected at least 1", num_devices);
  owned_comm_ = NewInProcessCommunicator(num_devices);
  comm_ = owned_comm_.get();
  Start(num_devices);
}

CpuDevices::CpuDevices(int local, int first, Communicator& comm) : comm_(&comm), first_(first) {
  if (local < 1 || first < 0 || first + local > comm.num_devices())
    Fail("CpuDevices: devices [{}, {}) of a run of {}", first, first + local, comm.num_devices());
  Start(local);
}

void CpuDevices::Start(int num_devices) {
  threads_.reserve(static_cast<size_t>(num_devices));
  for (int d = first_; d < first_ + num_devices; ++d)
    threads_.emplace_back([this, d, num_devices] {
      pthread_setname_np(pthread_self(), ("axle-device-" + std::to_string(d)).substr(0, 15).c_str());
      // Note [A core per device]: with as many devices as the pool has threads (the cores), each
      // device thread is a core's worth of work already, and its large loops run inline. Split
      // over the one shared pool they queued behind the other device's calls (the pool runs one
      // call at a time) and kept the pool's worker spinning for a core the devices needed; with
      // it, the devices' spinning in collectives (Note [Collectives spin first]) pays off.
      // `axle train --config small --devices 2` on 2 cores, means of 3-4 alternated runs: before
      // either 41.2K tokens/s against 45.4K with both; this note alone 40.3K and 41.4K against
      // 54.7K and 51.3K with both (two later sets).
      ThreadPool::SetThreadInline(num_devices >= ThreadPool::Global().num_threads());
      Loop(d);
    });
}

CpuDevices::~CpuDevices() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void CpuDevices::Loop(int device) {
  tls_device_of = this;
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
    }
    try {
      (*fn)(device);
    } catch (const std::exception& e) {
      comm_->Abort(device, e.what());
    } catch (...) {
      comm_->Abort(device, "an exception that is not a std::exception");
    }
    comm_->EndStep(device);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void CpuDevices::Run(const std::function<void(int device)>& fn) {
  if (tls_device_of == this) Fail("CpuDevices::Run called from one of its own device threads (a nested step)");
  std::lock_guard<std::mutex> run_lock(run_mu_);
  comm_->Reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    pending_ = size();
    ++generation_;
  }
  work_cv_.notify_all();
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }
  if (std::string message = comm_->abort_message(); !message.empty()) throw Error(std::move(message));
}

CpuDevices& CpuDevices::Get(int num_devices) {
  if (World* world = GetWorld(); world != nullptr && world->size() > 1) {
    if (num_devices != GlobalDevices())
      Fail("{} devices requested, but this run has {} ({} processes x {} devices each): a step must span all of "
           "them (a mesh of {} devices)",
           num_devices, GlobalDevices(), world->size(), world->local_devices(), GlobalDevices());
    static CpuDevices* mine = new CpuDevices(world->local_devices(), static_cast<int>(FirstLocalDevice()),
                                             world->device_communicator());  // never destroyed
    return *mine;
  }
  const int64_t have = flags::cpu_devices();
  if (num_devices < 1 || num_devices > have)
    Fail("{} virtual CPU devices requested, but this process has {} (AXLE_CPU_DEVICES={}); set AXLE_CPU_DEVICES={} "
         "or more",
         num_devices, have, have, num_devices);
  static std::mutex mu;
  static auto* sets = new std::map<int, std::unique_ptr<CpuDevices>>;  // never destroyed, as ThreadPool::Global
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<CpuDevices>& d = (*sets)[num_devices];
  if (!d) d = std::make_unique<CpuDevices>(num_devices);
  return *d;
}

std::unique_ptr<ReplicatedExecutable> ReplicatedExecutable::Compile(Backend& backend, const ir::Module& module) {
  const int64_t n = module.num_replicas();
  if (GetWorld() != nullptr && GetWorld()->size() > 1) {
    CpuDevices& devices = CpuDevices::Get(static_cast<int>(n));  // checks n against the run's devices
    return std::make_unique<ReplicatedExecutable>(backend.Compile(module), devices);
  }
  if (n < 1 || n > flags::cpu_devices())
    Fail("module @{} is partitioned for {} replicas, but this process has {} virtual CPU devices "
         "(AXLE_CPU_DEVICES={}); set AXLE_CPU_DEVICES={}",
         module.name(), n, flags::cpu_devices(), flags::cpu_devices(), n);
  CpuDevices& devices = CpuDevices::Get(static_cast<int>(n));
  return std::make_unique<ReplicatedExecutable>(backend.Compile(module), devices);
}

ReplicatedExecutable::ReplicatedExecutable(std::unique_ptr<Executable> exe, CpuDevices& devices)
    : exe_(std::move(exe)), devices_(devices) {}

std::vector<std::vector<BufferPtr>> ReplicatedExecutable::Execute(std::vector<std::vector<BufferPtr>> args_per_device) {
  const int n = num_devices(), first = first_device();
  if (static_cast<int64_t>(args_per_device.size()) != n)
    Fail("ReplicatedExecutable: got arguments for {} devices; the module runs on {} devices of this process (one "
         "argument list per device, device d = replica first + d)",
         args_per_device.size(), n);
  std::vector<std::vector<BufferPtr>> out(static_cast<size_t>(n));
  stats_.assign(static_cast<size_t>(n), ExecuteStats{});
  collective_stats_.assign(static_cast<size_t>(n), CollectiveStats{});
  Communicator& comm = devices_.comm();
  auto step = [&](int d) {
    const size_t k = static_cast<size_t>(d - first);
    try {
      out[k] = exe_->ExecuteOnDevice(std::move(args_per_device[k]), DeviceContext{d, &comm}, &stats_[k]);
    } catch (...) {
      collective_stats_[k] = comm.stats(d);  // read within the step: the next Run resets them
      throw;
    }
    collective_stats_[k] = comm.stats(d);
  };
  devices_.Run(step);
  return out;
}

CollectiveStats ReplicatedExecutable::total_collective_stats() const {
  CollectiveStats total;
  for (const CollectiveStats& s : collective_stats_) total += s;
  return total;
}

}  // namespace axle::runtime
