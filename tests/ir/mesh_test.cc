// ir::Mesh: coordinates, shard indices, replica groups, the module's mesh attributes in text, and
// the verifier's checks of shardings against the mesh.
#include "ir/mesh.h"

#include <gtest/gtest.h>

#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace axle::ir {
namespace {

void ExpectError(auto&& fn, std::string_view part) {
  try {
    fn();
    FAIL() << "expected an error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(MeshTest, CoordinatesAreRowMajor) {
  Mesh m({"dp", "tp"}, {2, 4});
  EXPECT_EQ(m.size(), 8);
  EXPECT_EQ(m.Coords(5), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m.DeviceAt({1, 3}), 7);
  EXPECT_EQ(m.AxisSize("tp"), 4);
  EXPECT_EQ(m.AxesSize({"dp", "tp"}), 8);
  EXPECT_EQ(m.ShardIndex(6, {"tp"}), 2);
  EXPECT_EQ(m.ShardIndex(6, {"dp", "tp"}), 6);
  EXPECT_EQ(m.ShardIndex(6, {"tp", "dp"}), 5);  // tp major: 2 * 2 + 1
  EXPECT_EQ(m.ToString(), "[dp=2, tp=4]");
}

TEST(MeshTest, GroupsOverAxes) {
  Mesh m({"dp", "tp"}, {2, 4});
  EXPECT_EQ(m.GroupsOver({"tp"}), (ReplicaGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.GroupsOver({"dp"}), (ReplicaGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.GroupsOver({"tp", "dp"}), (ReplicaGroups{{0, 4, 1, 5, 2, 6, 3, 7}}));
  EXPECT_EQ(m.GroupsOver({}).size(), 8u);
}

TEST(MeshTest, DeviceOrder) {
  Mesh m({"x"}, {4}, {3, 2, 1, 0});
  EXPECT_EQ(m.Coords(0), (std::vector<int64_t>{3}));
  EXPECT_EQ(m.GroupsOver({"x"}), (ReplicaGroups{{3, 2, 1, 0}}));
  EXPECT_EQ(m.ToString(), "[x=4] devices=[3,2,1,0]");
}

TEST(MeshTest, BadMeshesAreClearErrors) {
  ExpectError([] { Mesh({"x", "x"}, {2, 2}); }, "axis 'x' is named twice");
  ExpectError([] { Mesh({"x"}, {0}); }, "axis 'x' has size 0");
  ExpectError([] { Mesh({"x"}, {2, 2}); }, "1 axis names but 2 sizes");
  ExpectError([] { Mesh({"x"}, {3}, {0, 1, 1}); }, "not a permutation");
  ExpectError([] { Mesh({}, {}); }, "at least one axis");
  ExpectError([] { Mesh({"x"}, {2}).AxisSize("y"); }, "has no axis 'y'");
}

constexpr const char* kMeshModule = R"(module @m {mesh_axes=[dp,tp], mesh_shape=[2,2], mesh_devices=[0,2,1,3]} {
  func @main {
    %x = parameter() {index=0} : f32[4,8]{[dp], [tp]}
    return %x
  }
}
)";

TEST(MeshTest, ModuleMeshRoundTripsAndHashes) {
  std::unique_ptr<Module> m = ParseModule(kMeshModule);
  ASSERT_TRUE(m->mesh());
  EXPECT_EQ(m->mesh()->device_ids(), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(PrintModule(*m), kMeshModule);
  EXPECT_NO_THROW(Verify(*m));
  std::unique_ptr<Module> copy = m->Clone();
  EXPECT_EQ(PrintModule(*copy), kMeshModule);
  const ModuleHash h = HashModule(*m);
  copy->set_mesh(Mesh({"dp", "tp"}, {2, 2}));
  EXPECT_NE(HashModule(*copy).ToHex(), h.ToHex());
}

TEST(MeshTest, ShardingsMustNameMeshAxes) {
  std::string text = kMeshModule;
  text.replace(text.find("[tp]}"), 4, "[mp]");
  std::unique_ptr<Module> m = ParseModule(text);
  ExpectError([&] { Verify(*m); }, "names axis 'mp', which the module's mesh [dp=2, tp=2] devices=[0,2,1,3] does not have");
}

TEST(MeshTest, ReplicasMatchTheMesh) {
  std::string text = kMeshModule;
  text.replace(text.find("{mesh_axes"), 1, "{num_replicas=3, ");
  std::unique_ptr<Module> m = ParseModule(text);
  ExpectError([&] { Verify(*m); }, "num_replicas 3 must be 1 (the global program) or the mesh's 4 devices");
}

TEST(MeshTest, BadMeshTextIsAParseError) {
  ExpectError([] { ParseModule("module @m {mesh_axes=[x]} {\n}\n"); }, "a mesh needs both mesh_axes and mesh_shape");
  ExpectError([] { ParseModule("module @m {mesh_axes=[x], mesh_shape=[0]} {\n}\n"); }, "axis 'x' has size 0");
  ExpectError([] { ParseModule("module @m {mesh_axes=[x], mesh_shape=[x]} {\n}\n"); }, "expects a list of axis sizes");
  ExpectError([] { ParseModule("module @m {mesh=[x]} {\n}\n"); }, "unknown attribute 'mesh'");
}

}  // namespace
}  // namespace axle::ir
