// The one registry of Axle's runtime flags.
//
// Every flag is declared once in AXLE_FLAGS below with its type, default and help, and is read
// from the environment variable AXLE_<NAME> (upper case) on first use. Nothing else in Axle calls
// getenv. `axle flags` prints the table. A malformed value is an axle::Error naming the variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace axle::flags {

// The default of AXLE_CACHE_DIR: $XDG_CACHE_HOME/axle, else $HOME/.cache/axle, else the passwd
// entry's home directory + /.cache/axle, else /tmp/axle-cache.
std::string DefaultCacheDir();

// X(type, name, default, help)
#define AXLE_FLAGS(X)                                                                        \
  X(bool, debug, false,                                                                      \
    "Explain decisions: why a graph was recompiled, why a sharding was chosen.")            \
  X(std::string, backend, std::string("compiled"),                                            \
    "Backend that runs lazy tensor steps: compiled (fused generated C++), cpu (per-op executor) or interpreter.") \
  X(int64_t, interpreter_max_bytes, int64_t{8} << 30,                                        \
    "Largest total tensor memory the reference interpreter will allocate before refusing.")   \
  X(std::string, dump_dir, std::string(),                                                    \
    "When set, RunPasses writes the module before the first pass and after each pass to DIR/NNN-<pass>.axir.")  \
  X(bool, replay, true,                                                                      \
    "A CompiledFunction (axle/compile.h) replays its recorded step without tracing once two calls traced the same graph (0 = trace every call).") \
  X(bool, chains, true,                                                                      \
    "The CPU executor runs a batched product and the kernels that read it slice by slice, each thread its slices of all of them (Note [Batch-sliced chains]); 0 = kernel by kernel.") \
  X(bool, groups, true,                                                                      \
    "The CPU executor runs consecutive independent loop kernels as one pool call, their elements claimed as one loop (Note [Independent kernels as one loop]); 0 = one call each.") \
  X(bool, views, true,                                                                       \
    "The CPU executor lets products read slices of a buffer and write into a transpose's or concatenation's result in place of those copies (Note [Products into views]); 0 = copy.") \
  X(bool, transpose_b, true,                                                                 \
    "A product item whose B is stored transposed copies it to [K, N] first where oneDNN's AVX-512 sgemm is faster so: long and narrow, or small (Note [B transposed for oneDNN]); 0 = leave B as it is.") \
  X(bool, cache, true,                                                                       \
    "Use the on-disk cache of compiled artifacts (0 = neither read nor write it).")          \
  X(std::string, cache_dir, DefaultCacheDir(),                                               \
    "Directory of the on-disk cache ($XDG_CACHE_HOME/axle, else ~/.cache/axle).")            \
  X(int64_t, cache_max_bytes, int64_t{2} << 30,                                              \
    "Size cap of the on-disk cache; least recently used entries are evicted past it.")      \
  X(bool, fast_math, true,                                                                   \
    "Generated kernels use vectorisable exp/log/tanh/erf (accuracy in docs/compiler.md); 0 = the C library's, bitwise equal to the interpreter.") \
  X(bool, profile, false,                                                                    \
    "Time every kernel the cpu and compiled backends run; print the top kernels at exit.")   \
  X(std::string, trace, std::string(),                                                       \
    "When set, write a timeline of the run to this file at exit (Chrome trace JSON: open it in Perfetto or chrome://tracing): every kernel, pool chunk, executable run and sync() as a span on its thread.") \
  X(std::string, blas, std::string("auto"),                                                   \
    "BLAS for dot_general's large products: auto (MKL on Intel CPUs when it loads, else onednn when oneDNN loads, else OpenBLAS), mkl, onednn (oneDNN's sgemm for small and medium f32 products, OpenBLAS for the rest) or openblas.") \
  X(std::string, mkl_library, std::string(),                                                 \
    "Path of MKL's libmkl_rt.so.N; empty: the one CMake found at build time, else libmkl_rt on the loader's path.") \
  X(std::string, dnnl_library, std::string(),                                                \
    "Path of oneDNN's libdnnl.so.N; empty: libdnnl.so.3 or libdnnl.so.2 on the loader's path.") \
  X(int64_t, cpu_devices, int64_t{1},                                                        \
    "Virtual CPU devices in this process, each with its own thread; a module partitioned for N replicas runs on N of them (replica r = device r). With several processes, the devices of each (the run has processes x this many).") \
  X(int64_t, collective_timeout, int64_t{300},                                               \
    "Seconds a process waits for another in a collective or at rendezvous before it gives up and names the process it waited for (several processes only).") \
  X(std::string, rendezvous, std::string(),                                                   \
    "How the processes of a run find each other: tcp:HOST:PORT (rank 0 serves the store), file:DIR (a directory every process sees); empty: from the launcher's variables (MASTER_ADDR/MASTER_PORT, else a file store for one host).")

#define AXLE_FLAG_DECLARE(type, name, def, help) \
  type name();                                   \
  void set_##name(type value);
AXLE_FLAGS(AXLE_FLAG_DECLARE)
#undef AXLE_FLAG_DECLARE

struct FlagInfo {
  std::string name;       // "debug"
  std::string env;        // "AXLE_DEBUG"
  std::string type;       // "bool", "int64", "double", "string"
  std::string default_value;
  std::string help;
};

// All flags, in declaration order.
std::vector<FlagInfo> AllFlags();

// A variable of the launcher that started this process (RANK, WORLD_SIZE, MASTER_ADDR,
// OMPI_COMM_WORLD_RANK, SLURM_PROCID, ...: not Axle's flags, read here so that the environment
// has one reader); nullopt when unset.
std::optional<std::string> LauncherVariable(const std::string& name);

// Forgets values read from the environment or set, so the next access reads AXLE_<NAME> again.
void ResetForTesting();

}  // namespace axle::flags
