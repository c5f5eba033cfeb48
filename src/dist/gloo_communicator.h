// The runtime::Communicator of a run of several processes: every device a Gloo rank, each
// collective a round or two of messages (Note [Collectives as messages], gloo_communicator.cc).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/messages.h"
#include "runtime/collectives.h"

namespace axle::dist {

class GlooCommunicator : public runtime::Communicator {
 public:
  // Every device of this process stops waiting and fails with `message` (the run lost a process).
  virtual void AbortAll(const std::string& message) = 0;
};

// The devices [first, first + local) of a run of `global`, contexts[d] local device d's Gloo
// context (rank = its global id). `record` reports a failure (Note [Who failed], gloo_world.cc);
// `on_abort` runs when a local device fails (the process breaks its pairs).
std::unique_ptr<GlooCommunicator> NewGlooCommunicator(int global, int first, int local,
                                                      std::vector<std::shared_ptr<gloo::Context>> contexts,
                                                      std::chrono::milliseconds timeout, FailureRecord record,
                                                      std::function<void()> on_abort);

}  // namespace axle::dist
