// The processes of a run (docs/spmd.md, "Several processes").
//
// One process drives flags::cpu_devices() devices; a run of several processes (started by
// torchrun, mpirun, srun or `axle launch`) has world size x that many devices, numbered globally:
// process r drives devices [r * local, (r + 1) * local). Every process traces and compiles the
// same step for all of them and runs its own devices' shards; their collectives go through the
// world's device communicator. A process started alone has no World (GetWorld() == nullptr) and
// everything below answers for one process.
//
// The World is installed once, by axle::distributed::Init (src/dist/), before any device is used.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/collectives.h"

namespace axle::runtime {

class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Devices of each process (flags::cpu_devices() when the world was joined).
  virtual int local_devices() const = 0;

  // Host-side exchanges among the processes (not their devices), for what every process must
  // agree on or see: every process calls them in the same order. `what` names the exchange in
  // errors ("the step's module hash"). Throws axle::Error naming the process that did not take
  // part within flags::collective_timeout().
  virtual std::vector<std::vector<uint8_t>> AllGatherBytes(std::span<const uint8_t> mine, std::string_view what) = 0;
  virtual void Barrier(std::string_view what) = 0;
  // An all-gather that any thread may start at any time, unordered with the exchanges above and
  // with other keyed ones: every process calls it once with the same `key` (unique in the run).
  // It goes through the rendezvous store, so it suits a few kilobytes now and then (a background
  // checkpoint save's metadata), not a step's traffic. Throws axle::Error naming the process that
  // did not take part within flags::collective_timeout(), or the process that was lost.
  virtual std::vector<std::vector<uint8_t>> ExchangeByKey(std::string_view key, std::span<const uint8_t> mine,
                                                          std::string_view what) = 0;

  // The communicator of every process's devices (global device ids; this process calls it for
  // its own devices only).
  virtual Communicator& device_communicator() = 0;

  // "rank 1 of 4 (2 devices each; rendezvous tcp:10.0.0.1:29500; launched by torchrun)"
  virtual std::string Describe() const = 0;
};

// Installs the world of this process (once; axle::distributed::Init).
void SetWorld(std::unique_ptr<World> world);
// The world, or nullptr when this process runs alone.
World* GetWorld();

// The devices of the whole run (processes x devices each), and the first of this process's.
int64_t GlobalDevices();
int64_t FirstLocalDevice();
// Whether global device `device` is one of this process's.
bool IsLocalDevice(int64_t device);
// This process's rank, 0 without a world; the number of processes, 1 without one.
int ProcessRank();
int ProcessCount();
// The process that drives global device `device`.
int ProcessOfDevice(int64_t device);

}  // namespace axle::runtime
