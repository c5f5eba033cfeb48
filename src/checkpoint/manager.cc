// checkpoint::Manager (include/axle/checkpoint.h): sharded asynchronous checkpoints with an atomic
// commit, restorable onto any layout. The format is in docs/checkpoint.md, "Training checkpoints".
//
// Note [Checkpoint commit protocol]
// A save writes DIR/.step_00000020.tmp/: one safetensors file per owning device and, last,
// checkpoint.json; every file is fsynced, then the directory, then it is renamed to
// DIR/step_00000020 and DIR is fsynced. The rename is the commit: a step directory without the
// leading dot was complete and durable before it got its name, so a crash at any moment leaves
// either the previous committed steps alone (plus a dot-directory, removed by the next Manager)
// or the new step too. Deleting an old step (max_to_keep) renames it back to a dot-name first,
// so a half-deleted step is never mistaken for a committed one.
#include "axle/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "axle/compile.h"
#include "checkpoint/manager_internal.h"
#include "checkpoint/restore_plan.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_io.h"
#include "core/error.h"
#include "frontend/lazy.h"
#include "frontend/sharded_step.h"
#include "runtime/world.h"
#include "spmd/shard_util.h"

namespace axle::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace internal;


// One distinct block of one tensor. save_async only takes a reference to the device buffer
// that holds it (Note [Snapshots without copies]); the writer copies the block out of it.
struct BlockCopy {
  size_t tensor = 0;  // index into Snapshot::tensors
  Box box;            // global coordinates
  int64_t owner = 0;  // the device that writes it (Note [Who writes a block])
  runtime::BufferPtr source;  // the buffer holding it: a whole tensor, or a device's padded shard
  Box source_box;             // the region `source` holds, in global coordinates
};

struct TensorInfo {
  std::string name;
  ir::TensorType type;
  std::vector<std::vector<std::string>> sharding;  // per dimension; all empty for a whole tensor
};

struct Manager::Snapshot {
  int64_t step = 0;
  std::string key;  // names the save in the keyed exchanges of several processes
  std::vector<int64_t> process_bytes;  // bytes each process writes (Note [Who writes a block])
  std::optional<ir::Mesh> mesh;
  std::vector<TensorInfo> tensors;
  std::vector<BlockCopy> blocks;
  json extra;
};

namespace {

std::string StepName(int64_t step) { return fmt::format("step_{:08}", step); }

// The step of a committed directory name "step_<digits>", or nullopt.
std::optional<int64_t> ParseStepName(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return std::nullopt;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
  return std::stoll(name.substr(5));
}

std::vector<int64_t> Extents(const Box& b) {
  std::vector<int64_t> e;
  for (const auto& [lo, hi] : b) e.push_back(hi - lo);
  return e;
}

json MeshJson(const ir::Mesh& m) {
  return {{"axes", m.axis_names()}, {"shape", m.shape()}, {"device_ids", m.device_ids()}};
}

// Note [Snapshots without copies]
// A step never writes into a buffer that anyone else references: the executors reuse an argument
// buffer for a result only when the step holds the sole reference (use_count() == 1, "donation";
// runtime/cpu_executor.cc), and a sharded step the same per shard (sharded_step.cc). So holding a
// reference to a tensor's current buffers freezes the value: the next steps write new buffers
// instead of reusing those, and the background writer copies the blocks out at its pace, then
// lets go. save_async blocks only for the state's values to be computed and for these
// references to be taken. The cost moves, it does not vanish: until the write is done, the state
// exists twice in memory (the frozen buffers and the live ones), as with a copy.

// Note [Who writes a block]
// Each distinct block is written once, by one of the devices that hold it: the process with the
// fewest bytes to write so far among the holders' processes (ties: the lowest), from its first
// holding device. Every process computes the same plan from the same global facts (shapes,
// shardings, the mesh), without talking. With one process that is always the first holder; with
// several, replicated blocks (data parallelism, tensors held whole) spread over the processes
// instead of all landing on process 0.
int LeastLoaded(const std::vector<int64_t>& process_bytes, const std::vector<int64_t>& holders, int64_t* owner) {
  *owner = -1;
  for (int64_t d : holders)
    if (*owner < 0 || process_bytes[static_cast<size_t>(runtime::ProcessOfDevice(d))] <
                          process_bytes[static_cast<size_t>(runtime::ProcessOfDevice(*owner))])
      *owner = d;
  return runtime::ProcessOfDevice(*owner);
}

// Takes the distinct blocks of `tensor` that this process writes into `snap`, by reference.
void SnapshotTensor(const std::string& name, const Tensor& t, Manager::Snapshot& snap) {
  detail::TensorImpl& impl = *t.impl();
  TensorInfo info{name, impl.type, std::vector<std::vector<std::string>>(static_cast<size_t>(t.dim()))};
  const size_t index = snap.tensors.size();
  const int64_t elem = DTypeSize(impl.type.dtype);
  std::shared_ptr<detail::ShardedData> sharded = impl.data->GetSharded();
  if (sharded == nullptr) {
    // Every process holds it whole: any may write it (a holder per process, its first device).
    const Box whole = WholeBox(impl.type.shape);
    std::vector<int64_t> holders;
    const int64_t per_process = runtime::GlobalDevices() / runtime::ProcessCount();
    for (int p = 0; p < runtime::ProcessCount(); ++p) holders.push_back(p * per_process);
    int64_t owner;
    const int p = LeastLoaded(snap.process_bytes, holders, &owner);
    snap.process_bytes[static_cast<size_t>(p)] += BoxElements(whole) * elem;
    if (p == runtime::ProcessRank()) snap.blocks.push_back(BlockCopy{index, whole, owner, impl.data->Get(), whole});
    snap.tensors.push_back(std::move(info));
    return;
  }
  if (snap.mesh && !(*snap.mesh == sharded->mesh))
    Fail("checkpoint save: tensor '{}' lives on mesh {}, another tensor of the state on mesh {}; one checkpoint "
         "holds tensors of one mesh",
         name, sharded->mesh.ToString(), snap.mesh->ToString());
  snap.mesh = sharded->mesh;
  for (size_t k = 0; k < info.sharding.size() && k < sharded->sharding.dims.size(); ++k)
    info.sharding[k] = sharded->sharding.dims[k];
  const std::vector<int64_t> shape = impl.type.shape.dims();
  const Shape local = spmd::LocalShape(impl.type.shape, sharded->sharding, sharded->mesh);
  // The distinct blocks in order of their first holder, with all their holders.
  std::vector<std::pair<Box, std::vector<int64_t>>> distinct;
  std::map<Box, size_t> seen;
  for (int64_t d = 0; d < sharded->mesh.size(); ++d) {
    Box block = DeviceBlock(shape, info.sharding, sharded->mesh, d);
    if (BoxElements(block) == 0) continue;  // an empty tail block of an uneven split
    auto [it, fresh] = seen.emplace(block, distinct.size());
    if (fresh) distinct.emplace_back(std::move(block), std::vector<int64_t>{});
    distinct[it->second].second.push_back(d);
  }
  for (const auto& [block, holders] : distinct) {
    int64_t owner;
    const int p = LeastLoaded(snap.process_bytes, holders, &owner);
    snap.process_bytes[static_cast<size_t>(p)] += BoxElements(block) * elem;
    if (!runtime::IsLocalDevice(owner)) continue;  // another process writes it
    Box shard_box;  // the device's padded shard, in global coordinates
    for (size_t k = 0; k < block.size(); ++k) shard_box.emplace_back(block[k].first, block[k].first + local.dim(k));
    snap.blocks.push_back(BlockCopy{index, block, owner, sharded->shards[static_cast<size_t>(owner)], shard_box});
  }
  snap.tensors.push_back(std::move(info));
}

// The bytes of block `b` (a tensor of `dtype`), copied out of its buffer.
ir::Literal CopyBlock(const BlockCopy& b, DType dtype) {
  if (b.box == b.source_box) return *b.source;
  ir::Literal piece(ir::TensorType(dtype, Shape(Extents(b.box))));
  CopyRegion(b.source->bytes(), b.source_box, piece.mutable_bytes(), b.box, b.box, DTypeSize(dtype));
  return piece;
}

}  // namespace

// ---- Manager ----------------------------------------------------------------------------------

namespace {

// Writers made by this process so far: every process of a run makes the same ones in the same
// order, so the count names a Manager in their exchanges.
std::atomic<int64_t> g_writers{0};

}  // namespace

Manager::Manager(std::string dir, ManagerOptions options) : dir_(std::move(dir)), options_(options) {
  if (dir_.empty()) Fail("checkpoint::Manager: the checkpoint directory is empty");
  if (options_.save_interval < 0) Fail("checkpoint::Manager: save_interval {} is negative", options_.save_interval);
  if (options_.max_to_keep < 0) Fail("checkpoint::Manager: max_to_keep {} is negative", options_.max_to_keep);
  if (options_.keep_every < 0) Fail("checkpoint::Manager: keep_every {} is negative", options_.keep_every);
  if (options_.max_pending < 1) Fail("checkpoint::Manager: max_pending {} must be at least 1", options_.max_pending);
  if (options_.max_file_bytes < 1)
    Fail("checkpoint::Manager: max_file_bytes {} must be at least 1", options_.max_file_bytes);
  if (options_.chunk_bytes < 1) Fail("checkpoint::Manager: chunk_bytes {} must be at least 1", options_.chunk_bytes);
  if (options_.read_only) {
    if (!fs::is_directory(dir_)) Fail("checkpoint directory '{}' does not exist", dir_);
    worker_ = std::thread([this] { Worker(); });
    return;
  }
  serial_ = ++g_writers;
  // With several processes, process 0 opens the directory (locks it, cleans up) and tells the
  // others how it went; they wait, so that no save of theirs starts in a directory being cleaned.
  runtime::World* world = SeveralProcesses();
  std::string error;
  if (world == nullptr || world->rank() == 0) {
    try {
      Open();
    } catch (const std::exception& e) {
      if (world == nullptr) throw;
      error = e.what();
    }
  }
  if (world != nullptr) {
    const std::string mine = json{{"dir", dir_}, {"error", error}}.dump();  // as given: hosts mount differently
    const auto all = world->AllGatherBytes(Bytes(mine), fmt::format("opening checkpoint directory {}", dir_));
    const json first = json::parse(Text(all[0]));
    if (!first["error"].get<std::string>().empty()) {
      if (lock_fd_ >= 0) ::close(lock_fd_);
      Fail("{}", first["error"].get<std::string>());
    }
    for (size_t r = 1; r < all.size(); ++r)
      if (const json other = json::parse(Text(all[r])); other["dir"] != first["dir"]) {
        if (lock_fd_ >= 0) ::close(lock_fd_);
        Fail("process {} saves checkpoints in '{}', process 0 in '{}': every process of a run gives the same "
             "--checkpoint-dir (a directory they all share)",
             r, other["dir"].get<std::string>(), first["dir"].get<std::string>());
      }
  }
  worker_ = std::thread([this] { Worker(); });
}

void Manager::Open() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    Fail("checkpoint directory '{}' cannot be created or is not a directory{}", dir_,
         ec ? ": " + ec.message() : "");
  // One writer per directory: a second Manager would take the first one's saves in progress for
  // a crash's leftovers. The lock goes with the process (flock), so a killed writer leaves none.
  // (With several processes, process 0 holds it for the run.)
  const std::string lock = dir_ + "/.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) Fail("cannot open '{}': {}", lock, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    Fail("checkpoint directory '{}' is in use by another checkpoint::Manager (another `axle train` saving "
         "there?); give each run its own directory",
         dir_);
  }
  // Leftovers of saves or deletions that a crash interrupted (Note [Checkpoint commit protocol]).
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".step_", 0) != 0) continue;
    std::cerr << fmt::format("note: removing '{}', an uncommitted or half-deleted checkpoint step\n",
                             e.path().string());
    fs::remove_all(e.path(), ec);
  }
}

Manager::~Manager() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && writing_ == 0; });
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      std::cerr << "error: a background checkpoint save failed: " << e.what() << "\n";
    }
  }
}

std::string Manager::StepDir(int64_t step) const { return dir_ + "/" + StepName(step); }

bool Manager::should_save(int64_t step) const {
  return options_.save_interval <= 1 || step % options_.save_interval == 0;
}

void Manager::RethrowError() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mu_);
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

bool Manager::save(int64_t step, const State& state, bool force) {
  if (!save_async(step, state, force)) return false;
  wait();
  return true;
}

bool Manager::save_async(int64_t step, const State& state, bool force) {
  RethrowError();
  if (options_.read_only) Fail("checkpoint save of step {}: the Manager of '{}' is read-only", step, dir_);
  if (!force && !should_save(step)) return false;
  if (step < 0) Fail("checkpoint save: step {} is negative", step);
  if (fs::exists(StepDir(step)))
    Fail("checkpoint step {} already exists in '{}'; a committed step is never overwritten", step, StepDir(step));
  {
    std::unique_lock lock(mu_);
    if (pending_steps_.count(step)) Fail("checkpoint step {} is already being saved", step);
    cv_.wait(lock, [&] { return static_cast<int64_t>(queue_.size()) + writing_ < options_.max_pending; });
    pending_steps_.insert(step);
  }
  auto snap = std::make_shared<Snapshot>();
  snap->step = step;
  snap->key = fmt::format("checkpoint/{}/{}/step{}", serial_, ++saves_, step);
  snap->process_bytes.assign(static_cast<size_t>(runtime::ProcessCount()), 0);
  snap->extra = state.extra;
  std::set<std::string> names;
  bool pending = false;
  for (const auto& [name, t] : state.tensors) {
    if (name.empty() || name == "__metadata__") Fail("checkpoint save: a tensor has the reserved name '{}'", name);
    if (!names.insert(name).second) Fail("checkpoint save: two tensors are named '{}'", name);
    if (!t.defined()) Fail("checkpoint save: tensor '{}' is undefined", name);
    const detail::TensorImpl& impl = *t.impl();
    if (impl.data == nullptr || (impl.value != nullptr && impl.epoch == detail::CurrentTrace().epoch)) pending = true;
  }
  try {
    if (pending) sync();  // the state's values are computed before they are referenced
    for (const auto& [name, t] : state.tensors) SnapshotTensor(name, t, *snap);
  } catch (...) {
    std::lock_guard lock(mu_);
    pending_steps_.erase(step);
    throw;
  }
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(snap));
  }
  cv_.notify_all();
  return true;
}

void Manager::wait() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && writing_ == 0; });
  }
  RethrowError();
}

void Manager::Worker() {
  for (;;) {
    std::shared_ptr<Snapshot> snap;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      snap = std::move(queue_.front());
      queue_.pop_front();
      ++writing_;
    }
    std::exception_ptr error;
    try {
      Write(*snap);
    } catch (...) {
      error = std::current_exception();
    }
    const int64_t step = snap->step;
    snap.reset();  // lets go of the buffers before a waiting save_async takes the next
    {
      std::lock_guard lock(mu_);
      pending_steps_.erase(step);
      --writing_;
      if (error && !error_) error_ = error;
    }
    cv_.notify_all();
  }
}

// Note [Saving from several processes]
// Every process writes the blocks it owns (Note [Who writes a block]) into the same temporary
// step directory, fsyncs them, and publishes what it wrote (its shard entries and file sizes) in
// a keyed exchange (runtime::World::ExchangeByKey: the background writers of the processes run at
// their own pace, unordered with the training loop's exchanges). That exchange is the barrier
// before the commit: process 0, the one committer, merges the entries into checkpoint.json, checks
// that it sees every file the others wrote (the directory must be shared), and commits as one
// process would; a second exchange tells the others whether it did, so save() and wait() return
// on every process only once the step is committed, and a failure anywhere fails the save
// everywhere (process 0 then removes the temporary directory).
void Manager::Write(Snapshot& snap) {
  runtime::World* world = SeveralProcesses();
  const std::string tmp = dir_ + "/." + StepName(snap.step) + ".tmp";
  const std::string what = fmt::format("checkpoint save of step {} in {}", snap.step, dir_);
  json part;
  std::string error;
  try {
    std::error_code ec;
    if (world == nullptr) {
      fs::remove_all(tmp, ec);
      if (!fs::create_directory(tmp, ec))
        Fail("cannot create checkpoint directory '{}': {}", tmp, ec ? ec.message() : "it exists");
    } else if (!fs::create_directories(tmp, ec) && !fs::is_directory(tmp)) {  // one of the processes makes it
      Fail("cannot create checkpoint directory '{}': {}", tmp, ec ? ec.message() : "not a directory");
    }
    part = WriteBlocks(snap, tmp);
  } catch (const std::exception& e) {
    if (world == nullptr) throw;
    error = e.what();
  }
  std::vector<json> parts;
  if (world == nullptr) {
    parts.push_back(std::move(part));
  } else {
    const std::string mine = error.empty() ? part.dump() : json{{"error", error}}.dump();
    const auto all = world->ExchangeByKey(snap.key + "/written", Bytes(mine), what);
    std::vector<std::string> failed;
    for (size_t r = 0; r < all.size(); ++r) {
      parts.push_back(json::parse(Text(all[r])));
      if (parts.back().contains("error"))
        failed.push_back(fmt::format("process {}: {}", r, parts.back()["error"].get<std::string>()));
    }
    if (!failed.empty()) {
      if (world->rank() == 0) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
      }
      Fail("{} failed: {}", what, fmt::join(failed, "; "));
    }
  }
  std::string commit_error;
  if (world == nullptr || world->rank() == 0) {
    try {
      Commit(snap, parts, tmp);
      Prune();
    } catch (const std::exception& e) {
      if (world == nullptr) throw;
      commit_error = e.what();
      std::error_code ec;
      if (!fs::exists(StepDir(snap.step))) fs::remove_all(tmp, ec);
    }
  }
  if (world != nullptr) {
    const auto all = world->ExchangeByKey(snap.key + "/committed", Bytes(commit_error), what);
    if (!all[0].empty()) Fail("{}: process 0 could not commit it: {}", what, Text(all[0]));
  }
}

// Writes this process's blocks of `snap` into `tmp`; returns {"tensors": {name: [shard entries]},
// "files": {file: bytes}}. The worker owns `snap`; it lets go of each block's buffer once the block
// is written.
json Manager::WriteBlocks(Snapshot& snap, const std::string& tmp) {
  json tensors = json::object(), sizes = json::object();
  // Files: per owning device, parts of at most max_file_bytes (device_00003.safetensors, then
  // device_00003_001.safetensors, ...).
  std::map<int64_t, std::vector<std::vector<size_t>>> parts;
  for (size_t i = 0; i < snap.blocks.size(); ++i) {
    std::vector<std::vector<size_t>>& p = parts[snap.blocks[i].owner];
    auto size = [&](size_t j) {
      return BoxElements(snap.blocks[j].box) * DTypeSize(snap.tensors[snap.blocks[j].tensor].type.dtype);
    };
    const int64_t bytes = size(i);
    int64_t last = 0;
    if (!p.empty())
      for (size_t j : p.back()) last += size(j);
    if (p.empty() || (!p.back().empty() && last + bytes > options_.max_file_bytes)) p.emplace_back();
    p.back().push_back(i);
  }
  std::vector<std::pair<std::string, std::vector<size_t>>> files;
  for (auto& [owner, ps] : parts)
    for (size_t k = 0; k < ps.size(); ++k)
      files.emplace_back(k == 0 ? fmt::format("device_{:05}.safetensors", owner)
                                : fmt::format("device_{:05}_{:03}.safetensors", owner, k),
                         std::move(ps[k]));
  for (const auto& [file, blocks] : files) {
    // Streamed: the safetensors head, then each block straight from its buffer when the buffer
    // holds just the block (a whole tensor, a shard without padding), else from a copy of it.
    std::vector<std::pair<std::string, ir::TensorType>> types;
    for (size_t i : blocks) {
      const TensorInfo& t = snap.tensors[snap.blocks[i].tensor];
      types.emplace_back(t.name, ir::TensorType(t.type.dtype, Shape(Extents(snap.blocks[i].box))));
    }
    const SafetensorsHead head = PrepareSafetensorsHead(types, {{"format", "pt"}});
    const int64_t base = static_cast<int64_t>(head.bytes.size());
    DurableFile out(tmp + "/" + file);
    out.Write(head.bytes);
    int64_t written = base;
    for (size_t k : head.order) {
      BlockCopy& b = snap.blocks[blocks[k]];
      const TensorInfo& t = snap.tensors[b.tensor];
      std::optional<ir::Literal> copy;
      std::span<const uint8_t> data;
      if (b.box == b.source_box) {
        data = b.source->bytes();
      } else {
        copy = CopyBlock(b, t.type.dtype);
        data = copy->bytes();
      }
      const int64_t begin = base + static_cast<int64_t>(head.data_offsets[k].first);
      AXLE_CHECK(static_cast<int64_t>(data.size()) == static_cast<int64_t>(head.data_offsets[k].second -
                                                                          head.data_offsets[k].first),
                 "block size of tensor {}", t.name);
      // Checksums per chunk of whole rows (Note [Restoring in chunks]).
      const int64_t elem = DTypeSize(t.type.dtype);
      const int64_t rows = BlockRows(b.box), chunk_rows = ChunkRows(b.box, elem, options_.chunk_bytes);
      const int64_t row_bytes = rows > 0 ? static_cast<int64_t>(data.size()) / rows : 0;
      json sums = json::array();
      for (int64_t r = 0; r < rows && !data.empty(); r += chunk_rows)
        sums.push_back(Checksum(data.subspan(static_cast<size_t>(r * row_bytes),
                                             static_cast<size_t>(std::min(chunk_rows, rows - r) * row_bytes))));
      tensors[t.name].push_back({{"offset", Offsets(b.box)},
                                 {"shape", Extents(b.box)},
                                 {"file", file},
                                 {"byte_range", {begin, begin + static_cast<int64_t>(data.size())}},
                                 {"chunks", {{"rows", chunk_rows}, {"xxh3_64", std::move(sums)}}}});
      out.Write(data);
      written += static_cast<int64_t>(data.size());
      copy.reset();
      b.source.reset();  // the step that holds the live value may reuse this buffer again
    }
    out.Finish();
    sizes[file] = written;
  }
  return json{{"tensors", std::move(tensors)}, {"files", std::move(sizes)}};
}

// Process 0 (or the only one): the metadata of every process's blocks, then the commit (Note
// [Checkpoint commit protocol]).
void Manager::Commit(const Snapshot& snap, const std::vector<json>& parts, const std::string& tmp) {
  const std::string final_dir = StepDir(snap.step);
  json tensors = json::object();
  for (const TensorInfo& t : snap.tensors) {
    tensors[t.name] = {{"dtype", SafetensorsDTypeName(t.type.dtype)},
                       {"shape", t.type.shape.dims()},
                       {"sharding", t.sharding},
                       {"shards", json::array()}};
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    for (const auto& [name, shards] : parts[r].at("tensors").items())
      for (const json& s : shards) tensors.at(name)["shards"].push_back(s);
    for (const auto& [file, bytes] : parts[r].at("files").items()) {
      std::error_code ec;
      const auto size = fs::file_size(tmp + "/" + file, ec);
      if (ec || static_cast<int64_t>(size) != bytes.get<int64_t>())
        Fail("process {} wrote {} ({} bytes) into {}, but process 0 {}: the checkpoint directory must be one that "
             "every process of the run shares (a network or cluster filesystem)",
             r, file, bytes.get<int64_t>(), tmp,
             ec ? "does not see it" : fmt::format("sees {} bytes", static_cast<int64_t>(size)));
    }
  }
  json meta = {{"format", kFormat}, {"version", kVersion}, {"step", snap.step},
               {"processes", parts.size()},
               {"mesh", snap.mesh ? MeshJson(*snap.mesh) : json(nullptr)},
               {"tensors", std::move(tensors)}, {"extra", snap.extra}};
  const std::string text = meta.dump(1) + "\n";
  WriteFileDurably(tmp + "/" + kMetadataFile, Bytes(text));
  const std::string commit =
      json{{"bytes", static_cast<int64_t>(text.size())}, {"xxh3_64", Checksum(Bytes(text))}}.dump() + "\n";
  WriteFileDurably(tmp + "/" + kCommitFile, Bytes(commit));
  SyncDirectory(tmp);
  if (fs::exists(final_dir)) Fail("checkpoint step directory '{}' appeared while it was being saved", final_dir);
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
    Fail("cannot commit checkpoint '{}': renaming '{}' failed: {}", final_dir, tmp, std::strerror(errno));
  SyncDirectory(dir_);
}

void Manager::Prune() {
  if (options_.max_to_keep <= 0) return;
  std::vector<int64_t> steps = all_steps();
  if (static_cast<int64_t>(steps.size()) <= options_.max_to_keep) return;
  steps.resize(steps.size() - static_cast<size_t>(options_.max_to_keep));  // the older ones
  for (int64_t s : steps) {
    if (options_.keep_every > 0 && s % options_.keep_every == 0) continue;
    const std::string doomed = dir_ + "/." + StepName(s) + ".deleting";
    if (::rename(StepDir(s).c_str(), doomed.c_str()) != 0) continue;  // gone already
    std::error_code ec;
    fs::remove_all(doomed, ec);
  }
  SyncDirectory(dir_);
}

std::vector<int64_t> Manager::all_steps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::optional<int64_t> s = ParseStepName(e.path().filename().string());
    if (s && fs::exists(e.path() / kMetadataFile)) steps.push_back(*s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<int64_t> Manager::latest() const {
  const std::vector<int64_t> steps = all_steps();
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

}  // namespace axle::checkpoint
