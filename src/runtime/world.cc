#include "runtime/world.h"

#include "core/error.h"
#include "core/flags.h"

namespace axle::runtime {
namespace {
World* g_world = nullptr;  // never destroyed: device threads may use it until exit
}

void SetWorld(std::unique_ptr<World> world) {
  if (g_world != nullptr) Fail("the process already joined its world ({}); axle::distributed::Init runs once",
                               g_world->Describe());
  g_world = world.release();
}

World* GetWorld() { return g_world; }

int64_t GlobalDevices() {
  return g_world ? int64_t{g_world->size()} * g_world->local_devices() : flags::cpu_devices();
}

int64_t FirstLocalDevice() { return g_world ? int64_t{g_world->rank()} * g_world->local_devices() : 0; }

bool IsLocalDevice(int64_t device) {
  const int64_t first = FirstLocalDevice();
  const int64_t local = g_world ? g_world->local_devices() : flags::cpu_devices();
  return device >= first && device < first + local;
}

int ProcessRank() { return g_world ? g_world->rank() : 0; }

int ProcessCount() { return g_world ? g_world->size() : 1; }

int ProcessOfDevice(int64_t device) { return g_world ? static_cast<int>(device / g_world->local_devices()) : 0; }

}  // namespace axle::runtime
