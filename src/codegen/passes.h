// The compiler passes of src/codegen, registered with the pass registry (passes::RegisterPass) so
// that `axle opt --passes=fuse f.axir`, `axle opt --list-passes` and the pipeline's `fuse` stage
// see them.
#pragma once

namespace axle::codegen {

// Registers `fuse` (fuse_pass.cc) once; later calls do nothing (thread-safe). The axle tool and
// the compiled backend call it before they build a pipeline that fuses.
void RegisterPasses();

}  // namespace axle::codegen
