// A run of several processes over Gloo (docs/spmd.md, "Several processes"): the runtime::World
// that axle::distributed::Init installs.
//
// Every device of the run is a Gloo rank: device g's thread owns a Gloo context of all the run's
// devices (pairs over TCP, loopback between the devices of one host), and the processes share
// one more context for host-side exchanges. Collectives are point-to-point messages between the
// members of a group, each member combining what it receives in member order exactly as the
// in-process communicator does, so results are bitwise the reference interpreter's whatever the
// process layout (Note [Collectives as messages], gloo_communicator.cc).
#pragma once

#include <chrono>
#include <memory>

namespace gloo {
class Context;
}

#include "dist/launch_env.h"
#include "runtime/world.h"

namespace axle::dist {

// Joins the processes of `env` (rendezvous, then a full mesh of Gloo pairs between all devices),
// with `local_devices` devices in this process. Throws axle::Error when the rendezvous fails
// within `timeout`, naming the store and what is missing.
std::unique_ptr<runtime::World> JoinGlooWorld(const LaunchEnv& env, int local_devices,
                                              std::chrono::milliseconds timeout);

// The processes' own Gloo context of a world JoinGlooWorld made (rank = process), for Gloo's
// algorithms beside Axle's (bench/collectives.cc). Throws when `world` is not one.
std::shared_ptr<gloo::Context> HostGlooContext(runtime::World& world);

}  // namespace axle::dist
