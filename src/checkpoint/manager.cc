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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "axle/compile.h"
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

constexpr const char* kMetadataFile = "checkpoint.json";
constexpr const char* kCommitFile = "commit.json";  // the metadata's size and checksum
constexpr const char* kFormat = "axle-checkpoint";
constexpr int kVersion = 1;

// One distinct block of one tensor. save_async only takes a reference to the device buffer
// that holds it (Note [Snapshots without copies]); the writer copies the block out of it.
struct BlockCopy {
  size_t tensor = 0;  // index into Snapshot::tensors
  Box box;            // global coordinates
  int64_t owner = 0;  // the device that writes it (the first device holding it)
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

Box WholeBox(const Shape& shape) {
  Box b;
  for (int64_t d : shape.dims()) b.emplace_back(0, d);
  return b;
}

std::vector<int64_t> Extents(const Box& b) {
  std::vector<int64_t> e;
  for (const auto& [lo, hi] : b) e.push_back(hi - lo);
  return e;
}

std::vector<int64_t> Offsets(const Box& b) {
  std::vector<int64_t> o;
  for (const auto& [lo, hi] : b) o.push_back(lo);
  return o;
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

// Takes `tensor`'s distinct blocks (one owner each) into `snap`, by reference.
void SnapshotTensor(const std::string& name, const Tensor& t, Manager::Snapshot& snap) {
  detail::TensorImpl& impl = *t.impl();
  TensorInfo info{name, impl.type, std::vector<std::vector<std::string>>(static_cast<size_t>(t.dim()))};
  const size_t index = snap.tensors.size();
  std::shared_ptr<detail::ShardedData> sharded = impl.data->GetSharded();
  if (sharded == nullptr) {
    const Box whole = WholeBox(impl.type.shape);
    snap.blocks.push_back(BlockCopy{index, whole, 0, impl.data->Get(), whole});
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
  std::set<Box> seen;
  for (int64_t d = 0; d < sharded->mesh.size(); ++d) {
    const Box block = DeviceBlock(shape, info.sharding, sharded->mesh, d);
    if (BoxElements(block) == 0) continue;  // an empty tail block of an uneven split
    if (!seen.insert(block).second) continue;                   // a replica: its first holder owns it
    Box shard_box;  // the device's padded shard, in global coordinates
    for (size_t k = 0; k < block.size(); ++k) shard_box.emplace_back(block[k].first, block[k].first + local.dim(k));
    snap.blocks.push_back(BlockCopy{index, block, d, sharded->shards[static_cast<size_t>(d)], shard_box});
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

// The metadata file of a committed step, parsed and checked for the fields restore reads.
json ReadMetadata(const std::string& step_dir) {
  const std::string path = step_dir + "/" + kMetadataFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("checkpoint '{}' has no {} (it is not a committed Axle checkpoint step)", step_dir, kMetadataFile);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // The metadata's own checksum: a flipped digit in a valid JSON file (a step count, a shape)
  // would otherwise load in silence.
  const std::string commit_path = step_dir + "/" + kCommitFile;
  std::ifstream commit_in(commit_path, std::ios::binary);
  json commit;
  try {
    commit = json::parse(commit_in);
  } catch (const json::exception&) {
    Fail("{}: missing or not valid JSON; the checkpoint step is damaged: restore another step", commit_path);
  }
  const std::string sum = Checksum(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (!commit.is_object() || commit.value("xxh3_64", "") != sum ||
      commit.value("bytes", int64_t{-1}) != static_cast<int64_t>(text.size()))
    Fail("{}: fails its checksum ({} bytes, xxh3_64 {}; {} says {} bytes, xxh3_64 {}): the metadata is corrupted or "
         "comes from another checkpoint; restore another step",
         path, text.size(), sum, commit_path, commit.value("bytes", json(nullptr)).dump(),
         commit.value("xxh3_64", json(nullptr)).dump());
  json meta;
  try {
    meta = json::parse(text);
  } catch (const json::exception& e) {
    Fail("{}: not valid JSON ({}); the file is corrupted: restore another step", path, e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != kFormat || !meta.contains("tensors") ||
      !meta["tensors"].is_object())
    Fail("{}: not an Axle checkpoint metadata file (expected \"format\": \"{}\" and a \"tensors\" object)", path,
         kFormat);
  if (meta.value("version", 0) != kVersion)
    Fail("{}: checkpoint format version {} is not the version this Axle reads ({})", path, meta.value("version", 0),
         kVersion);
  return meta;
}

// A saved block as the metadata describes it, validated against its tensor's type.
struct SavedBlock {
  Box box;
  std::string file;
  int64_t begin = 0, end = 0;
  std::string checksum;
};

std::vector<SavedBlock> ParseBlocks(const json& entry, const std::string& name, const ir::TensorType& type,
                                    const std::string& meta_path) {
  std::vector<SavedBlock> out;
  const int64_t rank = type.shape.rank();
  const int64_t elem = DTypeSize(type.dtype);
  int64_t covered = 0;
  try {
    for (const json& s : entry.at("shards")) {
      SavedBlock b;
      const std::vector<int64_t> offset = s.at("offset").get<std::vector<int64_t>>();
      const std::vector<int64_t> shape = s.at("shape").get<std::vector<int64_t>>();
      if (static_cast<int64_t>(offset.size()) != rank || static_cast<int64_t>(shape.size()) != rank)
        Fail("rank");
      for (int64_t k = 0; k < rank; ++k) {
        if (offset[k] < 0 || shape[k] < 0 || offset[k] + shape[k] > type.shape.dim(k)) Fail("box");
        b.box.emplace_back(offset[k], offset[k] + shape[k]);
      }
      b.file = s.at("file").get<std::string>();
      if (b.file.empty() || b.file.find('/') != std::string::npos || b.file[0] == '.') Fail("file name");
      const auto range = s.at("byte_range").get<std::vector<int64_t>>();
      if (range.size() != 2 || range[0] < 0 || range[1] - range[0] != BoxElements(b.box) * elem) Fail("range");
      b.begin = range[0];
      b.end = range[1];
      b.checksum = s.at("xxh3_64").get<std::string>();
      covered += BoxElements(b.box);
      out.push_back(std::move(b));
    }
  } catch (const Error&) {
    Fail("{}: tensor '{}': a shard entry is malformed (offset/shape outside {}, a byte range that does not hold its "
         "elements, or a file name outside the step directory); the metadata is corrupted",
         meta_path, name, type.ToString());
  } catch (const json::exception& e) {
    Fail("{}: tensor '{}': a shard entry is malformed ({}); the metadata is corrupted", meta_path, name, e.what());
  }
  if (covered != type.NumElements())
    Fail("{}: tensor '{}': its shards hold {} of its {} elements; the metadata is corrupted", meta_path, name,
         covered, type.NumElements());
  return out;
}

// The layout a tensor restores into: its annotation, else the layout its data has, else whole.
struct Target {
  std::optional<ir::Mesh> mesh;
  ir::Sharding sharding;
};

Target TargetLayout(const Tensor& t) {
  const detail::TensorImpl& impl = *t.impl();
  Target out;
  if (impl.sharding && impl.mesh) {
    out.mesh = impl.mesh;
    out.sharding = spmd::NormalizeSharding(impl.sharding, t.dim(), *impl.mesh);
  } else if (impl.data && impl.data->sharding && impl.data->mesh) {
    out.mesh = impl.data->mesh;
    out.sharding = spmd::NormalizeSharding(impl.data->sharding, t.dim(), *impl.data->mesh);
  }
  if (out.mesh && out.mesh->size() == 1) out.mesh.reset();
  return out;
}

// A restored tensor being assembled: one padded buffer per distinct device block.
struct Assembly {
  Target target;
  std::vector<Box> boxes;                      // per distinct block, its valid region
  std::vector<Box> buffer_boxes;               // per distinct block, the padded buffer's region
  std::vector<runtime::BufferPtr> buffers;     // per distinct block
  std::vector<size_t> block_of_device;         // device -> distinct block
};

Assembly PlanAssembly(const Tensor& t) {
  Assembly a;
  a.target = TargetLayout(t);
  const ir::TensorType& type = t.impl()->type;
  if (!a.target.mesh) {
    a.boxes.push_back(WholeBox(type.shape));
    a.buffer_boxes.push_back(a.boxes.back());
    a.buffers.push_back(std::make_shared<ir::Literal>(type));
    a.block_of_device.push_back(0);
    return a;
  }
  const ir::Mesh& mesh = *a.target.mesh;
  std::vector<std::vector<std::string>> dims(static_cast<size_t>(t.dim()));
  for (size_t k = 0; k < dims.size() && k < a.target.sharding.dims.size(); ++k) dims[k] = a.target.sharding.dims[k];
  const Shape local = spmd::LocalShape(type.shape, a.target.sharding, mesh);
  std::map<Box, size_t> index;
  for (int64_t d = 0; d < mesh.size(); ++d) {
    Box block = DeviceBlock(type.shape.dims(), dims, mesh, d);
    Box padded;
    for (size_t k = 0; k < block.size(); ++k)
      padded.emplace_back(block[k].first, block[k].first + local.dim(k));
    auto [it, fresh] = index.emplace(padded, a.boxes.size());
    if (fresh) {
      a.boxes.push_back(block);
      a.buffer_boxes.push_back(padded);
      a.buffers.push_back(std::make_shared<ir::Literal>(ir::TensorType(type.dtype, local)));  // zero padding
    }
    a.block_of_device.push_back(it->second);
  }
  return a;
}

Tensor Finish(Assembly& a, const Tensor& t, const std::string& origin) {
  if (!a.target.mesh) return detail::MakeMaterialized(a.buffers[0], origin);
  auto data = std::make_shared<detail::ShardedData>();
  data->mesh = *a.target.mesh;
  data->sharding = a.target.sharding;
  data->global = t.impl()->type;
  for (size_t b : a.block_of_device) data->shards.push_back(a.buffers[b]);
  return detail::MakeMaterializedSharded(std::move(data), origin);
}

// Open files of one step directory, by name.
class Files {
 public:
  explicit Files(std::string dir) : dir_(std::move(dir)) {}
  ~Files() {
    for (auto& [name, fd] : fds_) ::close(fd);
  }
  int Open(const std::string& name, const std::string& tensor) {
    auto it = fds_.find(name);
    if (it != fds_.end()) return it->second;
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      Fail("checkpoint file '{}' (holding tensor '{}') is missing or unreadable: {}; the checkpoint is damaged: "
           "restore another step",
           path, tensor, std::strerror(errno));
    return fds_[name] = fd;
  }

 private:
  std::string dir_;
  std::map<std::string, int> fds_;
};

}  // namespace

// ---- Manager ----------------------------------------------------------------------------------

Manager::Manager(std::string dir, ManagerOptions options) : dir_(std::move(dir)), options_(options) {
  if (dir_.empty()) Fail("checkpoint::Manager: the checkpoint directory is empty");
  if (options_.save_interval < 0) Fail("checkpoint::Manager: save_interval {} is negative", options_.save_interval);
  if (options_.max_to_keep < 0) Fail("checkpoint::Manager: max_to_keep {} is negative", options_.max_to_keep);
  if (options_.keep_every < 0) Fail("checkpoint::Manager: keep_every {} is negative", options_.keep_every);
  if (options_.max_pending < 1) Fail("checkpoint::Manager: max_pending {} must be at least 1", options_.max_pending);
  if (options_.max_file_bytes < 1)
    Fail("checkpoint::Manager: max_file_bytes {} must be at least 1", options_.max_file_bytes);
  std::error_code ec;
  if (options_.read_only) {
    if (!fs::is_directory(dir_)) Fail("checkpoint directory '{}' does not exist", dir_);
    worker_ = std::thread([this] { Worker(); });
    return;
  }
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    Fail("checkpoint directory '{}' cannot be created or is not a directory{}", dir_,
         ec ? ": " + ec.message() : "");
  // One writer per directory: a second Manager would take the first one's saves in progress for
  // a crash's leftovers. The lock goes with the process (flock), so a killed writer leaves none.
  const std::string lock = dir_ + "/.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) Fail("cannot open '{}': {}", lock, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
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
  worker_ = std::thread([this] { Worker(); });
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

namespace {
// A run of several processes holds only its own devices' shards: saving and restoring need each
// process to write and read its own blocks, behind a barrier and one committer (not yet).
void CheckOneProcess(const char* what, int64_t step) {
  if (const runtime::World* w = runtime::GetWorld(); w != nullptr && w->size() > 1)
    Fail("checkpoint {} of step {}: this process is one of {} (docs/spmd.md, \"Several processes\"); checkpoints of "
         "a run of several processes are not supported yet: save from a run of one process",
         what, step, w->size());
}
}  // namespace

bool Manager::save(int64_t step, const State& state, bool force) {
  if (!save_async(step, state, force)) return false;
  wait();
  return true;
}

bool Manager::save_async(int64_t step, const State& state, bool force) {
  RethrowError();
  CheckOneProcess("save", step);
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
      Prune();
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

// The worker owns `snap`; it lets go of each block's buffer once the block is copied out.
void Manager::Write(Snapshot& snap) {
  const std::string final_dir = StepDir(snap.step);
  const std::string tmp = dir_ + "/." + StepName(snap.step) + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec))
    Fail("cannot create checkpoint directory '{}': {}", tmp, ec ? ec.message() : "it exists");
  json tensors = json::object();
  for (const TensorInfo& t : snap.tensors) {
    tensors[t.name] = {{"dtype", SafetensorsDTypeName(t.type.dtype)},
                       {"shape", t.type.shape.dims()},
                       {"sharding", t.sharding},
                       {"shards", json::array()}};
  }
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
      tensors[t.name]["shards"].push_back({{"offset", Offsets(b.box)},
                                           {"shape", Extents(b.box)},
                                           {"file", file},
                                           {"byte_range", {begin, begin + static_cast<int64_t>(data.size())}},
                                           {"xxh3_64", Checksum(data)}});
      out.Write(data);
      copy.reset();
      b.source.reset();  // the step that holds the live value may reuse this buffer again
    }
    out.Finish();
  }
  json meta = {{"format", kFormat}, {"version", kVersion}, {"step", snap.step},
               {"mesh", snap.mesh ? MeshJson(*snap.mesh) : json(nullptr)},
               {"tensors", std::move(tensors)}, {"extra", snap.extra}};
  const std::string text = meta.dump(1) + "\n";
  const std::span<const uint8_t> text_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  WriteFileDurably(tmp + "/" + kMetadataFile, text_bytes);
  const std::string commit =
      json{{"bytes", static_cast<int64_t>(text.size())}, {"xxh3_64", Checksum(text_bytes)}}.dump() + "\n";
  WriteFileDurably(tmp + "/" + kCommitFile,
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(commit.data()), commit.size()));
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

json Manager::read_extra(int64_t step) const {
  const json meta = ReadMetadata(StepDir(step));
  return meta.value("extra", json::object());
}

void Manager::restore(int64_t step, State& state) {
  RethrowError();
  CheckOneProcess("restore", step);
  const std::string step_dir = StepDir(step);
  if (!fs::is_directory(step_dir)) {
    const std::vector<int64_t> steps = all_steps();
    Fail("checkpoint step {} is not in '{}' (committed steps: {})", step, dir_,
         steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", ")));
  }
  const json meta = ReadMetadata(step_dir);
  const std::string meta_path = step_dir + "/" + kMetadataFile;
  const json& saved = meta["tensors"];
  // Every problem of names and types first, in one message.
  std::vector<std::string> problems;
  for (const auto& [name, t] : state.tensors) {
    if (!t.defined()) Fail("checkpoint restore: tensor '{}' of the state is undefined", name);
    auto it = saved.find(name);
    if (it == saved.end()) {
      problems.push_back(fmt::format("tensor '{}' ({}) is not in the checkpoint", name, t.type_string()));
      continue;
    }
    const std::optional<DType> dtype = ParseSafetensorsDType(it->value("dtype", ""));
    std::vector<int64_t> shape;
    if (it->contains("shape") && (*it)["shape"].is_array()) shape = (*it)["shape"].get<std::vector<int64_t>>();
    if (!dtype || *dtype != t.dtype() || shape != Dims(t.sizes()))
      problems.push_back(fmt::format("tensor '{}' is {} here but {}{} in the checkpoint", name, t.type_string(),
                                     it->value("dtype", "?"), json(shape).dump()));
  }
  if (!problems.empty()) {
    std::string list;
    for (size_t i = 0; i < problems.size() && i < 20; ++i) list += "\n  " + problems[i];
    if (problems.size() > 20) list += fmt::format("\n  ... and {} more", problems.size() - 20);
    Fail("{}: the checkpoint does not match the state being restored (a checkpoint of another model or "
         "configuration?):{}",
         meta_path, list);
  }
  // Note [Restoring in two passes]: the first pass reads every saved block once into one reused
  // buffer and checks its checksum, so a damaged checkpoint fails before any tensor changes; the
  // second assembles one tensor at a time and rebinds it at once, so its old buffers go before the
  // next tensor is read: the restore needs the new blocks of one tensor and one saved block beside
  // the state, not a second copy of the state. (The second pass checks the checksums again; a file
  // that changes between the passes is reported, with the tensors before it already restored.)
  Files files(step_dir);
  std::vector<uint8_t> buffer;
  std::vector<std::vector<SavedBlock>> blocks;
  auto read = [&](const SavedBlock& b, const std::string& name, std::span<uint8_t> dst, bool second_pass) {
    const std::string path = step_dir + "/" + b.file;
    if (!ReadRange(files.Open(b.file, name), path, b.begin, dst))
      Fail("checkpoint file '{}' is truncated: tensor '{}' needs bytes [{}, {}) of it, which end past the end "
           "of the file; restore another step",
           path, name, b.begin, b.end);
    const std::string sum = Checksum(dst);
    if (sum != b.checksum)
      Fail("checkpoint file '{}': tensor '{}' (the block at offset {}, bytes [{}, {})) fails its checksum "
           "(xxh3_64 {}, the metadata says {}): {}",
           path, name, json(Offsets(b.box)).dump(), b.begin, b.end, sum, b.checksum,
           second_pass ? "the file changed while it was being restored (the tensors before this one are restored)"
                       : "the file is corrupted; restore another step");
  };
  for (const auto& [name, t] : state.tensors) {
    blocks.push_back(ParseBlocks(saved[name], name, t.impl()->type, meta_path));
    for (const SavedBlock& b : blocks.back()) {
      buffer.resize(static_cast<size_t>(b.end - b.begin));
      read(b, name, buffer, false);
    }
  }
  // The check's buffer goes before the first new block is allocated: on the same layout every
  // saved block is read straight into its new block and none is needed again (GPT-2 124M, one
  // device: the peak falls by wte's 154 MB); otherwise it grows back to the largest saved block
  // that is not a new block.
  std::vector<uint8_t>().swap(buffer);
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const auto& [name, t] = state.tensors[i];
    const int64_t elem = DTypeSize(t.impl()->type.dtype);
    Assembly a = PlanAssembly(t);
    for (const SavedBlock& b : blocks[i]) {
      // A saved block that is exactly one new block (the same layout) is read straight into it.
      const auto direct = std::find(a.buffer_boxes.begin(), a.buffer_boxes.end(), b.box);
      const size_t direct_k = static_cast<size_t>(direct - a.buffer_boxes.begin());
      std::span<uint8_t> src;
      if (direct != a.buffer_boxes.end() && a.boxes[direct_k] == b.box) {
        src = a.buffers[direct_k]->mutable_bytes();
      } else {
        buffer.resize(static_cast<size_t>(b.end - b.begin));
        src = buffer;
      }
      read(b, name, src, true);
      for (size_t k = 0; k < a.boxes.size(); ++k) {
        const Box region = Intersect(a.boxes[k], b.box);
        if (BoxElements(region) == 0 || a.buffers[k]->mutable_bytes().data() == src.data()) continue;
        CopyRegion(src, b.box, a.buffers[k]->mutable_bytes(), a.buffer_boxes[k], region, elem);
      }
    }
    Tensor value = Finish(a, t, fmt::format("checkpoint {} tensor {}", step_dir, name));
    set_data(state.tensors[i].second, value);
  }
  std::vector<uint8_t>().swap(buffer);
  state.extra = meta.value("extra", json::object());
}

}  // namespace axle::checkpoint
