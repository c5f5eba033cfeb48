#include "backends/cpu/cpu_flags.h"

namespace axle::flags {

AXLE_DEFINE_FLAGS(AXLE_CPU_FLAGS)

}  // namespace axle::flags
