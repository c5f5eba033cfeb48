// axle::checkpoint::Manager: sharded, asynchronous training checkpoints that are never torn and
// restore onto any mesh (docs/checkpoint.md, "Training checkpoints"). Orbax's CheckpointManager
// and PyTorch/XLA's CheckpointManager, in C++.
//
//   axle::checkpoint::Manager ckpt("runs/a", {.save_interval = 100, .max_to_keep = 3});
//   axle::checkpoint::State state;
//   for (const auto& [name, p] : model.named_parameters()) state.tensors.emplace_back(name, p);
//   if (auto last = ckpt.latest()) ckpt.restore(*last, state);   // the tensors take the saved values
//   for (int64_t step = ...; ...; ++step) {
//     ... train one step ...
//     state.extra["step"] = step + 1;
//     ckpt.save_async(step + 1, state);   // no-op unless step + 1 is a multiple of save_interval
//   }
//   ckpt.wait();
//
// One directory per step, DIR/step_00000020/: each distinct block of each tensor (one owner for
// each replicated block) in a safetensors file per owning device, and checkpoint.json with every
// tensor's global shape, dtype, sharding and blocks (global offsets, file, byte range, XXH3-64
// checksums of its chunks), the mesh, the step and `extra`. A step is written under a temporary
// name, fsynced and published with one rename; a crash at any point leaves the previous steps
// intact, and the leftover is removed when the next Manager opens the directory.
//
// In a run of several processes (docs/spmd.md, "Several processes") every process constructs the
// Manager and calls save, save_async and restore at the same points, with the same directory (one
// that they all share): each writes the blocks its devices own, process 0 commits once all have
// written, and a restore reads only what this process's devices hold.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "axle/tensor.h"

namespace axle::checkpoint {

struct ManagerOptions {
  // save() and save_async() write step s only when s is a multiple of save_interval (or when
  // forced); 0 or 1: every step given.
  int64_t save_interval = 1;
  // After each commit, committed steps beyond the newest max_to_keep are deleted (0: keep all)...
  int64_t max_to_keep = 0;
  // ... except the multiples of keep_every (0: none are exempt).
  int64_t keep_every = 0;
  // save_async waits while this many saves are still being written (at least 1).
  int64_t max_pending = 1;
  // A device's blocks go into safetensors files of at most this many bytes (a larger block gets
  // a file of its own): the background writer holds one file's bytes beside the host copy.
  int64_t max_file_bytes = int64_t{256} << 20;
  // Each saved block is checksummed in chunks of whole rows of its first dimension, about this
  // many bytes each (one row when a row is larger): a restore reads and checks only the chunks
  // that overlap its new blocks, through a buffer of one chunk (Note [Restoring in chunks]).
  int64_t chunk_bytes = int64_t{4} << 20;
  // Only list, read and restore (axle export beside a running job): no lock, no cleanup of
  // uncommitted steps (they may be a writer's saves in progress), and save is an error.
  bool read_only = false;
};

// What a checkpoint holds: named tensors (any sharding, any mesh) and free-form JSON (the
// training state: step counts, schedule position, flags). restore() rebinds each tensor (every
// copy of its handle, like Tensor::copy_) to the saved value, laid out as the tensor is now.
struct State {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json extra = nlohmann::json::object();
};

// What the last restore() of this process read and held (bytes; Manager::last_restore()).
struct RestoreStats {
  int64_t bytes_checked = 0;      // read and checked before any tensor changed (the first pass)
  int64_t bytes_read = 0;         // read again to assemble the new blocks (the second pass)
  int64_t chunks_read = 0;        // over both passes
  int64_t staging_bytes = 0;      // the largest read buffer held beside the new blocks
  int64_t new_block_bytes = 0;    // the largest set of one tensor's new blocks alive beside the state
                                  // (0 when every tensor is restored in place)
  int64_t largest_block_bytes = 0;  // the largest new block (one device's shard) of this process
  int64_t tensors_in_place = 0;   // tensors written into their own buffers (no new blocks)
};

class Manager {
 public:
  // Opens (creating it if needed) checkpoint directory `dir` and locks it (DIR/.lock, flock:
  // one Manager per directory, in any process). Temporary directories of saves that never
  // committed (a crash) are removed, with a note on stderr. Throws axle::Error for an unusable
  // or locked directory, or invalid options.
  Manager(std::string dir, ManagerOptions options = {});
  // Waits for pending saves; an error of theirs is printed to stderr (call wait() to get it).
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Whether `step` is a multiple of save_interval.
  bool should_save(int64_t step) const;
  // Saves `state` as step `step` and returns when it is committed; false (nothing done) when
  // the step is not due (should_save) and not forced. Throws axle::Error when the step is
  // already committed or cannot be written, and rethrows an earlier save_async's error.
  bool save(int64_t step, const State& state, bool force = false);
  // As save, but returns once the state's values are computed and their buffers referenced (this
  // process's blocks, one per distinct block; no copy: Note [Snapshots without copies] in
  // manager.cc); a background thread copies, writes and commits. Blocks first while max_pending
  // saves are pending. An error of a background save is rethrown by the next call
  // of save, save_async, wait or restore.
  bool save_async(int64_t step, const State& state, bool force = false);
  // Waits until every pending save is committed; rethrows a background save's error.
  void wait();

  // The committed steps, ascending (saves still pending are not listed).
  std::vector<int64_t> all_steps() const;
  // The newest committed step, or nullopt.
  std::optional<int64_t> latest() const;
  // The `extra` JSON saved with step `step` (reads only the metadata).
  nlohmann::json read_extra(int64_t step) const;
  // Restores step `step` into `state`: every tensor of state.tensors takes its saved value in
  // its current layout (its sharding annotation and mesh, or whole), reading the saved chunks it
  // needs and checking their checksums; state.extra becomes the saved extra. Throws axle::Error
  // naming the tensor and the file for: a step that is not committed, a tensor the checkpoint
  // lacks, another dtype or shape (a checkpoint of another model), a missing or truncated file,
  // and a checksum mismatch (a corrupted file). On error no tensor has changed: every block is
  // checked before the first tensor is rebound (Note [Restoring in two passes] in manager.cc);
  // then each tensor is rebound as soon as it is assembled, so the restore holds one tensor's new
  // blocks and one chunk beside the state, not a second copy of it. Each process reads only the
  // chunks that overlap its own devices' blocks (Note [Restoring in chunks]).
  void restore(int64_t step, State& state);
  const RestoreStats& last_restore() const { return last_restore_; }

  const std::string& dir() const { return dir_; }
  // DIR/step_00000020.
  std::string StepDir(int64_t step) const;

  struct Snapshot;  // a save copied to host memory (manager.cc)

 private:
  void Open();
  void RethrowError();
  void Worker();
  void Write(Snapshot& snapshot);
  nlohmann::json WriteBlocks(Snapshot& snapshot, const std::string& tmp);
  void Commit(const Snapshot& snapshot, const std::vector<nlohmann::json>& parts, const std::string& tmp);
  void Prune();

  std::string dir_;
  ManagerOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Snapshot>> queue_;
  std::set<int64_t> pending_steps_;  // queued or being written
  int64_t writing_ = 0;  // snapshots taken off the queue and not yet committed
  std::exception_ptr error_;
  bool stop_ = false;
  int lock_fd_ = -1;
  int64_t serial_ = 0;  // this Manager's number among the process's writers (keys of saves of several processes)
  int64_t saves_ = 0;   // save_async calls that took a snapshot
  RestoreStats last_restore_;
  std::thread worker_;
};

}  // namespace axle::checkpoint
