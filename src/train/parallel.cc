#include "train/parallel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace axle::train {
std::optional<spmd::Mesh> ParseMesh(const std::string& mesh_text, int64_t devices) {
  if (devices < 1) Fail("--devices {}: must be at least 1", devices);
  if (mesh_text.empty()) {
    if (devices == 1) return std::nullopt;
    return spmd::Mesh({devices}, {"dp"});
  }
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  const std::set<std::string> known = {"dp", "fsdp", "tp"};
  size_t start = 0;
  while (start <= mesh_text.size()) {
    const size_t comma = mesh_text.find(',', start);
    const std::string item = mesh_text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      Fail("--mesh {}: '{}' is not AXIS=SIZE (e.g. --mesh fsdp=4,tp=2)", mesh_text, item);
    const std::string axis = item.substr(0, eq);
    if (!known.count(axis)) Fail("--mesh {}: unknown axis '{}' (the axes are dp, fsdp and tp)", mesh_text, axis);
    if (std::find(names.begin(), names.end(), axis) != names.end())
      Fail("--mesh {}: axis '{}' is given twice", mesh_text, axis);
    int64_t size = 0;
    try {
      size_t used = 0;
      size = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) size = 0;
    } catch (const std::exception&) {
      size = 0;
    }
    if (size < 1) Fail("--mesh {}: the size of axis '{}' must be a positive integer", mesh_text, axis);
    names.push_back(axis);
    sizes.push_back(size);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  int64_t product = 1;
  for (int64_t s : sizes) product *= s;
  if (product != devices)
    Fail("--mesh {} has {} devices but the run has {} (--devices, times the processes of a run of several): the "
         "axis sizes must multiply to the device count",
         mesh_text, product, devices);
  return spmd::Mesh(sizes, names);
}

std::vector<int64_t> ParseMeshShape(const std::string& text, const std::string& flag) {
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (true) {
    const size_t x = text.find('x', start);
    const std::string item = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(item, &used);
      if (used != item.size()) v = 0;
    } catch (const std::exception&) {
      v = 0;
    }
    if (v < 1) Fail("{} {}: '{}' is not a positive integer (e.g. {} 2x4)", flag, text, item, flag);
    sizes.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (sizes.size() > 2) Fail("{} {}: at most two axes (e.g. 2x4)", flag, text);
  return sizes;
}

spmd::Mesh AutoMesh(const std::string& shape_text, int64_t devices) {
  const std::vector<int64_t> shape =
      shape_text.empty() ? std::vector<int64_t>{devices} : ParseMeshShape(shape_text, "--mesh-shape");
  int64_t product = 1;
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (int64_t s : shape) {
    product *= s;
    if (s > 1) {
      sizes.push_back(s);
      names.push_back(names.empty() ? "x" : "y");
    }
  }
  if (product != devices)
    Fail("--mesh-shape {} has {} devices but the run has {}: the sizes must multiply to the device count", shape_text,
         product, devices);
  if (sizes.empty()) {
    sizes.push_back(1);
    names.push_back("x");
  }
  return spmd::Mesh(sizes, names);
}

fsdp::Layout MeshLayout(const spmd::Mesh& mesh) {
  const auto& axes = mesh.axis_names();
  auto has = [&](const char* a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); };
  return {.fsdp_axis = has("fsdp") ? "fsdp" : "", .tp_axis = has("tp") ? "tp" : ""};
}

spmd::PartitionSpec BatchSpec(const spmd::Mesh& mesh) {
  spmd::Axes batch;
  for (const auto& a : mesh.axis_names())
    if (a == "dp" || a == "fsdp") batch.names.push_back(a);
  return {batch};
}

int64_t BytesPerDevice(const std::vector<Tensor>& tensors, const spmd::Mesh* mesh) {
  int64_t bytes = 0;
  for (const Tensor& t : tensors) {
    const int64_t item = DTypeSize(t.dtype());
    if (mesh == nullptr) {
      bytes += t.numel() * item;
      continue;
    }
    const ir::Sharding s = spmd::NormalizeSharding(spmd::sharding_of(t), t.dim(), mesh->ir_mesh());
    bytes += spmd::LocalShape(Shape(t.sizes()), s, mesh->ir_mesh()).NumElements() * item;
  }
  return bytes;
}

}  // namespace axle::train
