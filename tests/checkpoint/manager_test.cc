// checkpoint::Manager: round trips, retention, the commit protocol, corruption, and restoring
// onto other meshes (include/axle/checkpoint.h, docs/checkpoint.md "Training checkpoints").
#include "axle/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "axle/compile.h"
#include "axle/spmd.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_io.h"
#include "core/error.h"
#include "core/flags.h"

namespace axle::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) /
            ("axle_ckpt_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    flags::set_cpu_devices(1);
  }
  std::string dir_;
};

std::vector<float> Iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + 0.25f * static_cast<float>(i);
  return v;
}

// Three tensors of different dtypes and ranks (a scalar among them), on one device.
State SmallState(float start) {
  State s;
  s.tensors.emplace_back("w", from_vector<float>(Iota(15, start), {3, 5}, DType::kF32));
  s.tensors.emplace_back("ids", from_vector<int32_t>({1, -2, 3, int32_t(start)}, {4}, DType::kI32));
  s.tensors.emplace_back("scale", from_vector<float>({start}, {}, DType::kF32));
  s.extra["step"] = 7;
  s.extra["note"] = "hello";
  return s;
}

void ExpectSameBits(const State& a, const State& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_TRUE(a.tensors[i].second.to_literal() == b.tensors[i].second.to_literal()) << a.tensors[i].first;
}

TEST_F(ManagerTest, SavesAndRestoresBitForBit) {
  Manager m(dir_);
  EXPECT_EQ(m.latest(), std::nullopt);
  const State saved = SmallState(1.5f);
  EXPECT_TRUE(m.save(20, saved));
  EXPECT_THAT(m.all_steps(), ElementsAre(20));
  EXPECT_EQ(m.latest(), 20);
  State target = SmallState(-9.0f);
  target.extra = nlohmann::json::object();
  m.restore(20, target);
  ExpectSameBits(saved, target);
  EXPECT_EQ(target.extra["note"], "hello");
  EXPECT_EQ(m.read_extra(20)["step"], 7);
  // Every file of the step is a safetensors file any reader opens.
  const TensorMap file = LoadSafetensors(m.StepDir(20) + "/device_00000.safetensors");
  EXPECT_EQ(file.size(), 3u);
  // A committed step is never overwritten.
  try {
    m.save(20, saved);
    FAIL() << "saved step 20 twice";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
}

TEST_F(ManagerTest, AsyncSavesIntervalAndRetention) {
  Manager m(dir_, {.save_interval = 2, .max_to_keep = 2, .keep_every = 4, .max_pending = 2});
  State s = SmallState(0.0f);
  for (int64_t step = 1; step <= 10; ++step) {
    s.tensors[0].second.copy_(s.tensors[0].second + 1.0);  // each save sees the value of its step
    const bool saved = m.save_async(step, s);
    EXPECT_EQ(saved, step % 2 == 0) << step;
  }
  EXPECT_TRUE(m.save_async(11, s, /*force=*/true));
  EXPECT_THROW(m.save_async(11, s, /*force=*/true), Error);  // pending or committed: never twice
  m.wait();
  // The newest two, and the multiples of 4 that max_to_keep passed over.
  EXPECT_THAT(m.all_steps(), ElementsAre(4, 8, 10, 11));
  State back = SmallState(0.0f);
  m.restore(8, back);
  EXPECT_EQ(back.tensors[0].second.to_vector<float>()[0], 8.0f);
}

// Note [Checkpoint commit protocol]: what a crash leaves behind is never taken for a checkpoint.
TEST_F(ManagerTest, UncommittedStepsAreCleanedUpAndThePreviousOneRestores) {
  const State saved = SmallState(2.0f);
  {
    Manager m(dir_);
    m.save(10, saved);
  }
  // A save of step 20 that crashed after writing part of a shard, and a deletion that crashed.
  fs::create_directories(dir_ + "/.step_00000020.tmp");
  std::ofstream(dir_ + "/.step_00000020.tmp/device_00000.safetensors") << "partial";
  fs::create_directories(dir_ + "/.step_00000005.deleting");
  // A directory with a step's name but no metadata is not a committed step.
  fs::create_directories(dir_ + "/step_00000030");
  Manager m(dir_);
  EXPECT_FALSE(fs::exists(dir_ + "/.step_00000020.tmp"));
  EXPECT_FALSE(fs::exists(dir_ + "/.step_00000005.deleting"));
  EXPECT_EQ(m.latest(), 10);
  State back = SmallState(0.0f);
  m.restore(*m.latest(), back);
  ExpectSameBits(saved, back);
  try {
    m.restore(30, back);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a committed"));
  }
}

TEST_F(ManagerTest, LargeStatesAreSplitIntoFilesOfBoundedSize) {
  Manager m(dir_, {.max_file_bytes = 64});  // w (60 bytes) and ids + scale (20) in two files
  const State saved = SmallState(3.0f);
  m.save(1, saved);
  EXPECT_TRUE(fs::exists(m.StepDir(1) + "/device_00000.safetensors"));
  EXPECT_TRUE(fs::exists(m.StepDir(1) + "/device_00000_001.safetensors"));
  State back = SmallState(0.0f);
  m.restore(1, back);
  ExpectSameBits(saved, back);
}

TEST_F(ManagerTest, OneManagerPerDirectory) {
  Manager m(dir_);
  try {
    Manager second(dir_);
    FAIL() << "two Managers on one directory";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("in use"));
  }
}

TEST_F(ManagerTest, BackgroundErrorsSurfaceAtTheNextCall) {
  Manager m(dir_);
  fs::remove_all(dir_);
  std::ofstream(dir_) << "not a directory";  // the background write cannot create its directory
  EXPECT_TRUE(m.save_async(1, SmallState(0.0f)));
  try {
    m.wait();
    FAIL() << "the failed background save was not reported";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("step_00000001"));
  }
  m.wait();  // reported once
  fs::remove(dir_);
}

// ---- Corruption: a clear error naming the tensor and the file, and the state unchanged ----------

class CorruptionTest : public ManagerTest {
 protected:
  // Saves SmallState(1) as step 1 and returns the shard file.
  std::string SaveOne() {
    Manager m(dir_);
    m.save(1, SmallState(1.0f));
    return m.StepDir(1) + "/device_00000.safetensors";
  }
  // Restores step 1 into SmallState(5); expects an error containing each of `parts`, and the
  // state untouched.
  void ExpectRestoreFails(std::vector<std::string> parts) {
    Manager m(dir_);
    State s = SmallState(5.0f);
    try {
      m.restore(1, s);
      FAIL() << "restored a damaged checkpoint";
    } catch (const Error& e) {
      for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
    }
    ExpectSameBits(s, SmallState(5.0f));
  }
  // The byte range of tensor `name` in the step's metadata.
  std::pair<int64_t, int64_t> Range(const std::string& name) {
    std::ifstream in(dir_ + "/step_00000001/checkpoint.json");
    const auto meta = nlohmann::json::parse(in);
    const auto r = meta["tensors"][name]["shards"][0]["byte_range"];
    return {r[0].get<int64_t>(), r[1].get<int64_t>()};
  }
};

TEST_F(CorruptionTest, AFlippedByteFailsItsChecksum) {
  const std::string file = SaveOne();
  const auto [begin, end] = Range("w");
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(begin + 5);
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(begin + 5);
  f.write(&c, 1);
  f.close();
  ExpectRestoreFails({"'w'", file, "checksum", "corrupted"});
}

TEST_F(CorruptionTest, ATruncatedShardIsReported) {
  const std::string file = SaveOne();
  fs::resize_file(file, fs::file_size(file) - 3);
  ExpectRestoreFails({file, "truncated", "tensor '"});
}

TEST_F(CorruptionTest, AMissingFileIsReported) {
  const std::string file = SaveOne();
  fs::remove(file);
  ExpectRestoreFails({file, "missing", "tensor '"});
}

TEST_F(CorruptionTest, MetadataOfAnotherModelIsReported) {
  SaveOne();
  {
    Manager m(dir_ + "/other");
    State other;
    other.tensors.emplace_back("w", from_vector<float>(Iota(12, 0.0f), {4, 3}, DType::kF32));
    other.tensors.emplace_back("bias", from_vector<float>(Iota(3, 0.0f), {3}, DType::kF32));
    m.save(1, other);
  }
  // The metadata of another model's step, copied over as a whole (with its checksum).
  for (const char* f : {"checkpoint.json", "commit.json"})
    fs::copy_file(dir_ + "/other/step_00000001/" + std::string(f), dir_ + "/step_00000001/" + std::string(f),
                  fs::copy_options::overwrite_existing);
  ExpectRestoreFails({"checkpoint.json", "another model", "tensor 'w' is f32[3,5] here but F32[4,3]",
                      "tensor 'ids' (i32[4]) is not in the checkpoint"});
}

TEST_F(CorruptionTest, MetadataThatIsNotJsonIsReported) {
  SaveOne();
  const std::string text = "{\"format\": \"axle-chec";
  std::ofstream(dir_ + "/step_00000001/checkpoint.json") << text;
  // Even with a matching checksum, the JSON itself is checked.
  std::ofstream(dir_ + "/step_00000001/commit.json")
      << nlohmann::json{{"bytes", text.size()},
                        {"xxh3_64", Checksum(std::span<const uint8_t>(
                                        reinterpret_cast<const uint8_t*>(text.data()), text.size()))}}
             .dump();
  ExpectRestoreFails({"checkpoint.json", "not valid JSON"});
}

// A flipped digit in the metadata that leaves valid JSON (here the saved step count in `extra`)
// fails the metadata's own checksum.
TEST_F(CorruptionTest, AFlippedDigitInTheMetadataFailsItsChecksum) {
  SaveOne();
  const std::string path = dir_ + "/step_00000001/checkpoint.json";
  std::ifstream in(path);
  std::string text{std::istreambuf_iterator<char>(in), {}};
  in.close();
  const size_t at = text.find("\"step\": 7");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 8] = '8';
  std::ofstream(path) << text;
  ExpectRestoreFails({path, "fails its checksum", "corrupted"});
  Manager m(dir_);
  EXPECT_THROW(m.read_extra(1), Error);
}

// Note [Restoring in chunks]: a flipped byte names the chunk (its offset and bytes) it lies in.
TEST_F(CorruptionTest, AFlippedByteIsFoundInItsChunk) {
  {
    Manager m(dir_, {.chunk_bytes = 20});  // w is [3, 5] f32: one row (20 bytes) per chunk
    m.save(1, SmallState(1.0f));
  }
  std::ifstream in(dir_ + "/step_00000001/checkpoint.json");
  const auto shard = nlohmann::json::parse(in)["tensors"]["w"]["shards"][0];
  EXPECT_EQ(shard["chunks"]["rows"], 1);
  ASSERT_EQ(shard["chunks"]["xxh3_64"].size(), 3u);
  const int64_t begin = shard["byte_range"][0].get<int64_t>();
  const std::string file = dir_ + "/step_00000001/device_00000.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(begin + 2 * 20 + 7);  // in row 2
  f.put('\x7f');
  f.close();
  ExpectRestoreFails({"'w'", file, "offset [2,0]", fmt::format("bytes [{}, {})", begin + 40, begin + 60), "checksum"});
}

// Checkpoints of version 1 (one checksum per block) still restore.
TEST_F(ManagerTest, RestoresVersionOneCheckpoints) {
  const State saved = SmallState(4.0f);
  {
    Manager m(dir_);
    m.save(3, saved);
  }
  const std::string step = dir_ + "/step_00000003";
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(step + "/checkpoint.json"));
  meta["version"] = 1;
  for (auto& [name, t] : meta["tensors"].items())
    for (auto& shard : t["shards"]) {
      std::ifstream file(step + "/" + shard["file"].get<std::string>(), std::ios::binary);
      const int64_t b = shard["byte_range"][0].get<int64_t>(), e = shard["byte_range"][1].get<int64_t>();
      std::vector<uint8_t> bytes(static_cast<size_t>(e - b));
      file.seekg(b);
      file.read(reinterpret_cast<char*>(bytes.data()), e - b);
      shard.erase("chunks");
      shard["xxh3_64"] = Checksum(bytes);
    }
  const std::string text = meta.dump(1) + "\n";
  std::ofstream(step + "/checkpoint.json") << text;
  std::ofstream(step + "/commit.json") << nlohmann::json{{"bytes", text.size()},
                                                         {"xxh3_64", Checksum(std::span<const uint8_t>(
                                                                         reinterpret_cast<const uint8_t*>(text.data()),
                                                                         text.size()))}}
                                              .dump();
  Manager m(dir_);
  State back = SmallState(0.0f);
  m.restore(3, back);
  ExpectSameBits(saved, back);
}

// ---- Restoring onto another mesh -----------------------------------------------------------------

// A layout: devices, mesh and the spec of each test tensor ([7, 6] f32 and [5] bf16-sized i16
// stand-in i32, plus a scalar); devices == 1 with no axes is one device without a mesh.
struct Layout {
  const char* name;
  int64_t devices;
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
  spmd::PartitionSpec matrix, vector;
  size_t matrix_blocks;  // distinct non-empty blocks of the [7, 6] matrix: the shards written
};

std::vector<Layout> Layouts() {
  return {
      {"1", 1, {}, {}, {}, {}, 1},
      {"dp=2", 2, {2}, {"dp"}, {}, {}, 1},
      {"fsdp=2", 2, {2}, {"fsdp"}, {"fsdp"}, {"fsdp"}, 2},
      {"tp=2", 2, {2}, {"tp"}, {nullptr, "tp"}, {"tp"}, 2},
      {"fsdp=4", 4, {4}, {"fsdp"}, {"fsdp"}, {"fsdp"}, 4},
      {"fsdp=2,tp=2", 4, {2, 2}, {"fsdp", "tp"}, {"tp", "fsdp"}, {{"tp", "fsdp"}}, 4},
      {"dp=2,tp=2", 4, {2, 2}, {"dp", "tp"}, {nullptr, "tp"}, {}, 2},
      {"fsdp=8", 8, {8}, {"fsdp"}, {"fsdp"}, {"fsdp"}, 7},  // 7 rows: device 7's block is empty
      {"fsdp=4,tp=2", 8, {4, 2}, {"fsdp", "tp"}, {"fsdp", "tp"}, {"tp"}, 8},
  };
}

// `global` laid out as `spec` on `layout` with its shards resident on the devices (as a sharded
// step leaves a parameter), or whole on one device.
Tensor Place(const ir::Literal& global, const Layout& layout, const spmd::PartitionSpec& spec) {
  Tensor whole = from_literal(global);
  if (layout.axes.empty()) return whole;
  const spmd::Mesh mesh(layout.shape, layout.axes);
  spmd::mark_sharding(whole, mesh, spec);
  Tensor placed = spmd::from_local_shards(spmd::local_shards(whole), global.shape().dims(), mesh, spec);
  sync();  // ends the trace the annotation opened (one trace, one mesh)
  return placed;
}

// A tensor of zeros annotated with `spec` on `layout`: where a restore must land.
Tensor Target(const ir::TensorType& type, const Layout& layout, const spmd::PartitionSpec& spec) {
  Tensor t = from_literal(ir::Literal(type));
  if (!layout.axes.empty()) spmd::mark_sharding(t, spmd::Mesh(layout.shape, layout.axes), spec);
  sync();
  return t;
}

TEST_F(ManagerTest, RestoresOntoEveryOtherMeshBitForBit) {
  std::vector<float> mv(42), vv(5);
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = std::sin(static_cast<float>(i) * 1.7f) * 100.0f;
  for (size_t i = 0; i < vv.size(); ++i) vv[i] = -static_cast<float>(i) / 3.0f;
  const ir::Literal matrix = ir::Literal::FromVector<float>(DType::kF32, Shape{7, 6}, mv);
  const ir::Literal vector = ir::Literal::FromVector<float>(DType::kF32, Shape{5}, vv);
  const ir::Literal scalar = ir::Literal::FromVector<int32_t>(DType::kI32, Shape{}, {42});
  const std::vector<Layout> layouts = Layouts();
  for (size_t from = 0; from < layouts.size(); ++from) {
    const Layout& src = layouts[from];
    flags::set_cpu_devices(src.devices);
    Manager m(dir_ + "/" + src.name, {.chunk_bytes = 48});  // two rows of the matrix per chunk
    State s;
    s.tensors.emplace_back("matrix", Place(matrix, src, src.matrix));
    s.tensors.emplace_back("vector", Place(vector, src, src.vector));
    s.tensors.emplace_back("scalar", Place(scalar, src, {}));
    m.save(1, s);
    // Replicated blocks are written once: one owner each.
    std::ifstream in(m.StepDir(1) + "/checkpoint.json");
    const auto meta = nlohmann::json::parse(in);
    int64_t elements = 0;
    for (const auto& sh : meta["tensors"]["matrix"]["shards"])
      elements += sh["shape"][0].get<int64_t>() * sh["shape"][1].get<int64_t>();
    EXPECT_EQ(elements, 42) << src.name;
    EXPECT_EQ(meta["tensors"]["matrix"]["shards"].size(), src.matrix_blocks) << src.name;
    for (size_t to = 0; to < layouts.size(); ++to) {
      const Layout& dst = layouts[to];
      flags::set_cpu_devices(dst.devices);
      State t;
      t.tensors.emplace_back("matrix", Target(matrix.type(), dst, dst.matrix));
      t.tensors.emplace_back("vector", Target(vector.type(), dst, dst.vector));
      t.tensors.emplace_back("scalar", Target(scalar.type(), dst, {}));
      m.restore(1, t);
      // One process holds every device: it reads every chunk once per pass, through a buffer of at
      // most one chunk (two rows of 24 bytes), and holds one tensor's new blocks besides.
      const RestoreStats& stats = m.last_restore();
      EXPECT_EQ(stats.bytes_checked, 42 * 4 + 5 * 4 + 4) << src.name << " -> " << dst.name;
      EXPECT_EQ(stats.bytes_read, stats.bytes_checked) << src.name << " -> " << dst.name;
      EXPECT_LE(stats.staging_bytes, 48) << src.name << " -> " << dst.name;
      EXPECT_LE(stats.new_block_bytes, 2 * 42 * 4) << src.name << " -> " << dst.name;  // dp/tp pad or replicate
      EXPECT_TRUE(t.tensors[0].second.to_literal() == matrix) << src.name << " -> " << dst.name;
      EXPECT_TRUE(t.tensors[1].second.to_literal() == vector) << src.name << " -> " << dst.name;
      EXPECT_TRUE(t.tensors[2].second.to_literal() == scalar) << src.name << " -> " << dst.name;
      if (!dst.axes.empty()) {
        // The restored value is resident in the target layout: its shards are that layout's blocks.
        const std::vector<Tensor> got = spmd::local_shards(t.tensors[0].second);
        const std::vector<Tensor> want = spmd::local_shards(Place(matrix, dst, dst.matrix));
        ASSERT_EQ(got.size(), want.size());
        for (size_t d = 0; d < got.size(); ++d)
          EXPECT_TRUE(got[d].to_literal() == want[d].to_literal()) << src.name << " -> " << dst.name << " device " << d;
      }
    }
  }
}

// Note [Restoring in place]: a tensor in the layout it restores into, whose buffers nothing else
// holds, takes the values in its own buffers (no new blocks); one that shares its value with
// another tensor is rebound to new blocks, and the other keeps the old value.
TEST_F(ManagerTest, RestoresInPlaceOnlyWhatNothingElseHolds) {
  const Layout fsdp = Layouts()[4];  // fsdp=4 over 4 devices
  flags::set_cpu_devices(fsdp.devices);
  std::vector<float> values(42);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const ir::Literal matrix = ir::Literal::FromVector<float>(DType::kF32, Shape{7, 6}, values);
  const ir::Literal zeros(matrix.type());
  Manager m(dir_);
  State s;
  s.tensors.emplace_back("w", Place(matrix, fsdp, fsdp.matrix));
  s.tensors.emplace_back("whole", from_literal(matrix));
  m.save(1, s);

  State t;
  t.tensors.emplace_back("w", Place(zeros, fsdp, fsdp.matrix));
  t.tensors.emplace_back("whole", from_literal(zeros));
  m.restore(1, t);
  EXPECT_EQ(m.last_restore().tensors_in_place, 2);
  EXPECT_EQ(m.last_restore().new_block_bytes, 0);
  EXPECT_TRUE(t.tensors[0].second.to_literal() == matrix);
  EXPECT_TRUE(t.tensors[1].second.to_literal() == matrix);

  // Annotated but still whole (no step has split it yet): in place too, whole, in one process.
  State v;
  v.tensors.emplace_back("w", Target(matrix.type(), fsdp, fsdp.matrix));
  m.restore(1, v);
  EXPECT_EQ(m.last_restore().tensors_in_place, 1);
  EXPECT_EQ(m.last_restore().new_block_bytes, 0);
  EXPECT_TRUE(v.tensors[0].second.to_literal() == matrix);
  const std::vector<Tensor> shards = spmd::local_shards(v.tensors[0].second);
  const std::vector<Tensor> want = spmd::local_shards(Place(matrix, fsdp, fsdp.matrix));
  ASSERT_EQ(shards.size(), want.size());
  for (size_t d = 0; d < shards.size(); ++d) EXPECT_TRUE(shards[d].to_literal() == want[d].to_literal()) << d;

  State u;
  u.tensors.emplace_back("w", Place(zeros, fsdp, fsdp.matrix));
  u.tensors.emplace_back("whole", from_literal(zeros));
  Tensor alias = from_literal(zeros);
  set_data(alias, u.tensors[1].second);  // shares the value of "whole"
  m.restore(1, u);
  EXPECT_EQ(m.last_restore().tensors_in_place, 1);
  EXPECT_EQ(m.last_restore().new_block_bytes, 42 * 4);
  EXPECT_TRUE(u.tensors[1].second.to_literal() == matrix);
  EXPECT_TRUE(alias.to_literal() == zeros);
}

// Note [Snapshots without copies]: save_async references the buffers; steps that update the
// state right after it (in place, on one device and sharded) must not change what is written.
TEST_F(ManagerTest, AsyncSaveWritesTheValueOfItsCallWhileStepsRunOn) {
  std::vector<float> values(42);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 20.5f;
  const ir::Literal original = ir::Literal::FromVector<float>(DType::kF32, Shape{7, 6}, values);
  const Layout one = Layouts()[0], fsdp = Layouts()[4];  // 1 device; fsdp=4
  const std::string default_backend = backend();
  for (const Layout& layout : {one, fsdp}) {
    for (const char* backend : {"compiled", "cpu"}) {
      set_backend(backend);
      flags::set_cpu_devices(layout.devices);
      const std::string dir = dir_ + "/" + layout.name + "_" + backend;
      Manager m(dir, {.max_pending = 2});
      State s;
      s.tensors.emplace_back("w", Place(original, layout, layout.matrix));
      ASSERT_TRUE(m.save_async(1, s));
      for (int step = 0; step < 4; ++step) {
        s.tensors[0].second.copy_(s.tensors[0].second * 2.0 + 1.0);  // rebinds: the old buffer is donated
        sync();
      }
      ASSERT_TRUE(m.save_async(2, s));
      const ir::Literal later = s.tensors[0].second.to_literal();
      m.wait();
      State back;
      back.tensors.emplace_back("w", Target(original.type(), layout, layout.matrix));
      m.restore(1, back);
      EXPECT_TRUE(back.tensors[0].second.to_literal() == original) << layout.name << " " << backend;
      m.restore(2, back);
      EXPECT_TRUE(back.tensors[0].second.to_literal() == later) << layout.name << " " << backend;
    }
  }
  set_backend(default_backend);
}

}  // namespace
}  // namespace axle::checkpoint
