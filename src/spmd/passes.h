// The SPMD passes, registered with the pass registry (passes::RegisterPass) so that
// `axle opt --passes=sharding-propagation f.axir` and `axle opt --list-passes` see them.
#pragma once

namespace axle::spmd {

// Registers every SPMD pass once (later calls do nothing; thread-safe). The axle tool calls it at
// the start of main(); tests and programs that build pipelines by name call it before.
void RegisterPasses();

}  // namespace axle::spmd
