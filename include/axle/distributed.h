// Runs of several processes (docs/spmd.md, "Several processes").
//
// A program started by torchrun, mpirun, srun or `axle launch` calls Init() once, before it makes
// a mesh: the processes meet, and each drives its own devices of a mesh that spans them all
// (flags::cpu_devices() devices per process, global device ids rank * devices + local index).
// Every process runs the same program: traces the same steps, compiles the same partitioned
// module and runs its devices' shards; values read whole (item(), to_vector) are the same on
// every process.
//
//   int main() {
//     axle::distributed::Init();   // a no-op in a process started alone
//     spmd::Mesh mesh({"dp"}, {axle::distributed::world_devices()});
//     ...
//   }
#pragma once

#include <string>

namespace axle::distributed {

// Joins the processes this one was launched with (the launcher's variables: RANK/WORLD_SIZE/
// MASTER_ADDR/MASTER_PORT, OMPI_COMM_WORLD_*, PMI_*, SLURM_*; AXLE_RENDEZVOUS overrides how they
// meet). Returns false and does nothing when the process was started alone (a world of one);
// calling it again returns what the first call did. Throws axle::Error when the processes cannot
// meet within flags::collective_timeout() seconds, naming what is missing.
bool Init();

// This process's rank and the number of processes (0 and 1 without Init or alone).
int rank();
int world_size();
// Devices of the whole run: world_size() x flags::cpu_devices().
int world_devices();
// Blocks until every process got here (a no-op alone).
void barrier(const std::string& what = "barrier");
// "process 1 of 4 (2 devices each; rendezvous tcp:127.0.0.1:29500; launched by axle launch)",
// or "one process" when alone.
std::string describe();

}  // namespace axle::distributed
