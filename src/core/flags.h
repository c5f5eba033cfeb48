// The one registry of Axle's runtime flags.
//
// Every flag is declared once with its type, default and help, and is read from the environment
// variable AXLE_<NAME> (upper case) on first use. Nothing else in Axle calls getenv. `axle flags`
// prints the table. A malformed value is an axle::Error naming the variable. The flags every layer
// may read are AXLE_FLAGS below; a backend declares its own in a table of the same form
// (AXLE_DECLARE_FLAGS / AXLE_DEFINE_FLAGS: the CPU backend's in backends/cpu/cpu_flags.h), so
// that this file names no library or strategy of one backend. They share the registry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace axle::flags {

// The default of AXLE_CACHE_DIR: $XDG_CACHE_HOME/axle, else $HOME/.cache/axle, else the passwd
// entry's home directory + /.cache/axle, else /tmp/axle-cache.
std::string DefaultCacheDir();

// "2GiB", "1.5 GB", "800MiB", "4096" (bytes): the size in bytes; anything else (or a size that is
// not positive) is an error naming `what` and the accepted forms.
int64_t ParseByteSize(std::string_view text, std::string_view what);

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
  X(bool, cache, true,                                                                       \
    "Use the on-disk cache of compiled artifacts (0 = neither read nor write it).")          \
  X(std::string, cache_dir, DefaultCacheDir(),                                               \
    "Directory of the on-disk cache ($XDG_CACHE_HOME/axle, else ~/.cache/axle).")            \
  X(int64_t, cache_max_bytes, int64_t{2} << 30,                                              \
    "Size cap of the on-disk cache; least recently used entries are evicted past it.")      \
  X(int64_t, memory_budget, int64_t{0},                                                      \
    "Bytes of arena the compiled backend's remat pass fits each step's plan into, recomputing activations (0 = no budget; docs/memory.md).") \
  X(bool, fast_math, true,                                                                   \
    "Generated kernels use vectorisable exp/log/tanh/erf (accuracy in docs/compiler.md); 0 = the C library's, bitwise equal to the interpreter.") \
  X(bool, profile, false,                                                                    \
    "Time every kernel the cpu and compiled backends run; print the top kernels at exit.")   \
  X(std::string, trace, std::string(),                                                       \
    "When set, write a timeline of the run to this file at exit (Chrome trace JSON: open it in Perfetto or chrome://tracing): every kernel, pool chunk, executable run and sync() as a span on its thread.") \
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

// All flags: AXLE_FLAGS in declaration order, then the linked backends' tables.
std::vector<FlagInfo> AllFlags();

// A variable of the launcher that started this process (RANK, WORLD_SIZE, MASTER_ADDR,
// OMPI_COMM_WORLD_RANK, SLURM_PROCID, ...: not Axle's flags, read here so that the environment
// has one reader); nullopt when unset.
std::optional<std::string> LauncherVariable(const std::string& name);

// Forgets values read from the environment or set, so the next access reads AXLE_<NAME> again.
void ResetForTesting();

// The machinery AXLE_DEFINE_FLAGS expands to.
namespace detail {
std::string EnvName(std::string_view name);
const char* ReadEnv(std::string_view name);  // the one getenv of AXLE_* variables
bool ParseValue(std::string_view env, const std::string& s, bool*);
int64_t ParseValue(std::string_view env, const std::string& s, int64_t*);
double ParseValue(std::string_view env, const std::string& s, double*);
std::string ParseValue(std::string_view env, const std::string& s, std::string*);
std::string TypeString(bool);
std::string TypeString(int64_t);
std::string TypeString(double);
std::string TypeString(const std::string&);
std::string ValueString(bool v);
std::string ValueString(int64_t v);
std::string ValueString(double v);
std::string ValueString(const std::string& v);

// A flag's state: unset until first read.
template <typename T>
struct Slot {
  std::optional<T> value;
  T Get(std::string_view name, const T& def) {
    if (!value) {
      const char* raw = ReadEnv(name);
      value = raw ? ParseValue(EnvName(name), raw, static_cast<T*>(nullptr)) : def;
    }
    return *value;
  }
};

// Adds a flag of another table to AllFlags and ResetForTesting (at static initialization).
bool Register(FlagInfo info, void (*reset)());
}  // namespace detail

// In a header, inside namespace axle::flags: the accessors of TABLE's flags.
#define AXLE_DECLARE_FLAGS(TABLE) TABLE(AXLE_FLAG_DECLARE_ONE)
// In one .cc file, inside namespace axle::flags: their definitions, registered with AllFlags.
#define AXLE_DEFINE_FLAGS(TABLE) TABLE(AXLE_FLAG_DEFINE_ONE)

#define AXLE_FLAG_DECLARE_ONE(type, name, def, help) \
  type name();                                       \
  void set_##name(type value);
#define AXLE_FLAG_DEFINE_ONE(type, name, def, help)                                                          \
  namespace {                                                                                                \
  detail::Slot<type> slot_##name;                                                                            \
  [[maybe_unused]] const bool registered_##name = detail::Register(                                          \
      {#name, detail::EnvName(#name), detail::TypeString(type{}), detail::ValueString(type(def)), help},      \
      [] { slot_##name.value.reset(); });                                                                    \
  }                                                                                                          \
  type name() { return slot_##name.Get(#name, def); }                                                        \
  void set_##name(type value) { slot_##name.value = std::move(value); }

}  // namespace axle::flags
