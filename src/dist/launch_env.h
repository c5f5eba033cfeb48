// Where this process stands in a run, read from its launcher's variables (docs/spmd.md,
// "Launchers"): torchrun and `axle launch` (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), Open MPI's mpirun (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK,
// PMI_SIZE) and Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...).
#pragma once

#include <string>

namespace axle::dist {

struct LaunchEnv {
  std::string launcher;  // "torchrun", "axle launch", "mpirun", "mpich", "srun"; empty when alone
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // on this host
  // How the processes meet: "tcp:HOST:PORT" (rank 0 serves the store) or "file:DIR".
  std::string rendezvous;
  // The address of the rank-0 host, when known (where this process's own address is looked up).
  std::string master_addr;
};

// Reads the variables; a process started alone gets size 1. Throws axle::Error naming the
// variable when they are inconsistent (a rank outside the world, a missing MASTER_PORT) or when
// several hosts have no way to meet.
LaunchEnv DetectLaunchEnv();

}  // namespace axle::dist
