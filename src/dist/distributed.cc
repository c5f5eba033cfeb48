#include "axle/distributed.h"

#include <chrono>
#include <mutex>

#include "core/flags.h"
#include "dist/gloo_world.h"
#include "dist/launch_env.h"
#include "runtime/world.h"

namespace axle::distributed {

bool Init() {
  static std::once_flag once;
  static bool joined = false;
  std::call_once(once, [] {
    const dist::LaunchEnv env = dist::DetectLaunchEnv();
    if (env.size <= 1) return;
    const auto timeout = std::chrono::milliseconds(flags::collective_timeout() * 1000);
    runtime::SetWorld(dist::JoinGlooWorld(env, static_cast<int>(flags::cpu_devices()), timeout));
    joined = true;
  });
  return joined;
}

int rank() { return runtime::ProcessRank(); }
int world_size() { return runtime::GetWorld() ? runtime::GetWorld()->size() : 1; }
int world_devices() { return static_cast<int>(runtime::GlobalDevices()); }

void barrier(const std::string& what) {
  if (runtime::World* w = runtime::GetWorld()) w->Barrier(what);
}

std::string describe() { return runtime::GetWorld() ? runtime::GetWorld()->Describe() : "one process"; }

}  // namespace axle::distributed
