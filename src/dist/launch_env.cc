#include "dist/launch_env.h"

#include <cctype>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "core/flags.h"

namespace axle::dist {
namespace {

std::optional<std::string> Var(const std::string& name) {
  std::optional<std::string> v = flags::LauncherVariable(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

int IntVar(const std::string& name, int fallback) {
  std::optional<std::string> v = Var(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v->c_str(), &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) Fail("{}={}: expected a non-negative integer", name, *v);
  return static_cast<int>(x);
}

// A directory name unique to this launch, for a file store on one host.
std::string JobDir(const std::string& id) {
  std::string safe;
  for (char c : id) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  const std::string tmp = Var("TMPDIR").value_or("/tmp");
  return tmp + "/axle-rendezvous-" + safe;
}

}  // namespace

LaunchEnv DetectLaunchEnv() {
  LaunchEnv e;
  std::string job;  // an id of this launch that every process sees (file store on one host)
  if (Var("WORLD_SIZE") && Var("RANK")) {
    e.launcher = Var("AXLE_LAUNCH_ID") ? "axle launch" : Var("TORCHELASTIC_RUN_ID") ? "torchrun" : "RANK/WORLD_SIZE";
    e.rank = IntVar("RANK", 0);
    e.size = IntVar("WORLD_SIZE", 1);
    e.local_rank = IntVar("LOCAL_RANK", e.rank);
    e.local_size = IntVar("LOCAL_WORLD_SIZE", -1);
    job = Var("AXLE_LAUNCH_ID").value_or(Var("TORCHELASTIC_RUN_ID").value_or(""));
  } else if (Var("OMPI_COMM_WORLD_SIZE")) {
    e.launcher = "mpirun";
    e.rank = IntVar("OMPI_COMM_WORLD_RANK", 0);
    e.size = IntVar("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = IntVar("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_size = IntVar("OMPI_COMM_WORLD_LOCAL_SIZE", -1);
    job = Var("PMIX_NAMESPACE").value_or(Var("OMPI_MCA_orte_jobfam_session_dir").value_or(""));
  } else if (Var("PMI_SIZE") && Var("PMI_RANK")) {
    e.launcher = "mpich";
    e.rank = IntVar("PMI_RANK", 0);
    e.size = IntVar("PMI_SIZE", 1);
    e.local_rank = IntVar("MPI_LOCALRANKID", 0);
    e.local_size = IntVar("MPI_LOCALNRANKS", -1);
    job = Var("PMI_KVSNAME").value_or("");
  } else if (Var("SLURM_STEP_ID") && Var("SLURM_NTASKS") && Var("SLURM_PROCID")) {
    e.launcher = "srun";
    e.rank = IntVar("SLURM_PROCID", 0);
    e.size = IntVar("SLURM_NTASKS", 1);
    e.local_rank = IntVar("SLURM_LOCALID", 0);
    e.local_size = Var("SLURM_NNODES") && IntVar("SLURM_NNODES", 1) == 1 ? e.size : -1;
    job = Var("SLURM_JOB_ID").value_or("") + "." + Var("SLURM_STEP_ID").value_or("");
  }
  if (e.size < 1) Fail("{}: a world of {} processes", e.launcher, e.size);
  if (e.rank >= e.size) Fail("{}: rank {} of a world of {} processes", e.launcher, e.rank, e.size);
  if (e.local_size < 0) e.local_size = 0;  // unknown
  e.master_addr = Var("MASTER_ADDR").value_or("");
  if (e.size == 1) return e;

  if (std::string r = flags::rendezvous(); !r.empty()) {
    if (r.rfind("tcp:", 0) != 0 && r.rfind("file:", 0) != 0)
      Fail("AXLE_RENDEZVOUS={}: expected tcp:HOST:PORT or file:DIR", r);
    e.rendezvous = r;
    if (r.rfind("tcp:", 0) == 0 && e.master_addr.empty()) e.master_addr = r.substr(4, r.rfind(':') - 4);
    return e;
  }
  if (!e.master_addr.empty()) {
    std::optional<std::string> port = Var("MASTER_PORT");
    if (!port) Fail("{}: MASTER_ADDR={} is set but MASTER_PORT is not; set both (rank 0 serves the rendezvous store there)",
                    e.launcher, e.master_addr);
    int p = IntVar("MASTER_PORT", 0);
    // Note [torchrun's store]: torchrun's agent serves its own c10d store on MASTER_PORT (and
    // tells the workers so through TORCHELASTIC_USE_AGENT_STORE); Axle's rank 0 serves its store
    // on the next port.
    if (Var("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") ++p;
    e.rendezvous = "tcp:" + e.master_addr + ":" + std::to_string(p);
    return e;
  }
  if (e.local_size == e.size && !job.empty()) {
    e.rendezvous = "file:" + JobDir(job);
    return e;
  }
  Fail("{} started {} processes, but they have no way to meet: set MASTER_ADDR and MASTER_PORT (the host and a free "
       "port of rank 0; e.g. mpirun -x MASTER_ADDR=host0 -x MASTER_PORT=29500), or AXLE_RENDEZVOUS=file:DIR on a "
       "filesystem every process sees",
       e.launcher, e.size);
}

}  // namespace axle::dist
