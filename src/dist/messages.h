// Point-to-point rounds of messages between the ranks of a Gloo context: how every collective of
// a run of several processes travels (Note [Collectives as messages], gloo_communicator.cc), and
// the processes' own host exchanges (gloo_world.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace axle::dist {

struct Outgoing {
  int peer;
  const void* data;
  size_t bytes;
};
struct Incoming {
  int peer;
  void* data;
  size_t bytes;
};

// Abortable waits: buffers a thread is waiting on, so that Abort can wake it.
class Waits {
 public:
  // Throws axle::Error with the abort's reason once aborted.
  void Add(gloo::transport::UnboundBuffer* b);
  void Remove(gloo::transport::UnboundBuffer* b);
  // Wakes every wait now and makes later Adds throw; the first reason stays.
  void Abort(const std::string& reason);
  std::string reason() const;

 private:
  mutable std::mutex mu_;
  std::vector<gloo::transport::UnboundBuffer*> live_;
  bool aborted_ = false;
  std::string reason_;
};

// Names a Gloo rank of a context in messages ("process 2 (device 5)"); -1: this one.
using PeerName = std::function<std::string(int peer)>;
// Turns a failure seen by this process into the run's (Note [Who failed], gloo_world.cc); `hung` is
// the process that did not answer within the timeout, -1 when the failure was not a timeout.
using FailureRecord = std::function<std::string(const std::string& mine, int hung)>;

// One round of messages on `ctx`: sends every Outgoing and receives every Incoming, each with a
// fixed-size header that carries `what` (peers that disagree fail with both descriptions) and,
// when it fits, the payload. `slot` must be unique to this round among the messages between any
// two ranks of the context (the round uses slot and slot + 1). `ranks_per_process`: the context's
// ranks of one process (peer / it = the peer's process). Throws axle::Error through `record` when
// a peer fails or does not answer within `timeout`, and with `waits`' reason when aborted.
void Round(gloo::Context& ctx, uint64_t slot, const std::string& what, std::span<const Outgoing> out,
           std::span<const Incoming> in, std::chrono::milliseconds timeout, Waits& waits, const PeerName& name,
           const FailureRecord& record, int ranks_per_process);

}  // namespace axle::dist
