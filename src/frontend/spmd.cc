// The user-facing SPMD API (include/axle/spmd.h): meshes, mark_sharding, sharding_of and
// visualize_sharding over the lazy trace (lazy.h).
#include "axle/spmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/flags.h"
#include "frontend/lazy.h"
#include "frontend/sharded_step.h"
#include "runtime/world.h"
#include "spmd/shard_util.h"
#include "spmd/propagation.h"

namespace axle::spmd {
namespace {

std::optional<Mesh>& GlobalMesh() {
  static std::optional<Mesh> mesh;
  return mesh;
}

std::optional<std::pair<Mesh, AutoShardingOptions>>& AutoMesh() {
  static std::optional<std::pair<Mesh, AutoShardingOptions>> mesh;
  return mesh;
}

void CheckDevices(const Mesh& mesh, std::string_view what) {
  const int64_t devices = runtime::GlobalDevices();
  if (const runtime::World* w = runtime::GetWorld(); w != nullptr && w->size() > 1 && mesh.size() != devices)
    Fail("{}: mesh {} has {} devices, but this run has {} ({} processes x {} devices each): a mesh spans every "
         "device of the run",
         what, mesh.ToString(), mesh.size(), devices, w->size(), w->local_devices());
  if (mesh.size() != devices)
    Fail("{}: mesh {} has {} devices, but this process has {} (set AXLE_CPU_DEVICES={} or "
         "flags::set_cpu_devices({}) before building the mesh's tensors, or use a mesh of {} devices)",
         what, mesh.ToString(), mesh.size(), devices, mesh.size(), mesh.size(), devices);
}

// "tensor f32[4,8]" (with its IR value's name when it has one).
std::string TensorName(const Tensor& t) {
  std::string name = fmt::format("tensor {}", t.type_string());
  const detail::TensorImpl& impl = *t.impl();
  if (impl.value != nullptr && impl.epoch == detail::CurrentTrace().epoch && !impl.value->name().empty())
    name += fmt::format(" (%{})", impl.value->name());
  return name;
}

// `spec` for a value of `rank` dims on `mesh` as a Sharding; `what` names the call in errors.
ir::Sharding SpecToSharding(const PartitionSpec& spec, int64_t rank, const Mesh& mesh, const std::string& what) {
  if (static_cast<int64_t>(spec.size()) > rank)
    Fail("{}: the spec has {} entries but the tensor has {} dimension{}; give one entry per dimension "
         "(None / {{}} for a replicated one)", what, spec.size(), rank, rank == 1 ? "" : "s");
  CheckDevices(mesh, what);
  ir::Sharding s;
  s.dims.resize(static_cast<size_t>(rank));
  std::set<std::string> used;
  for (size_t d = 0; d < spec.size(); ++d) {
    for (const std::string& axis : spec[d].names) {
      if (!mesh.ir_mesh().HasAxis(axis))
        Fail("{}: dimension {} names axis '{}', which the mesh does not have (its axes: {})", what, d, axis,
             fmt::join(mesh.axis_names(), ", "));
      if (!used.insert(axis).second)
        Fail("{}: axis '{}' is used twice; a mesh axis splits at most one dimension", what, axis);
      s.dims[d].push_back(axis);
    }
  }
  return s;
}

ir::Sharding ToSharding(const Tensor& t, const Mesh& mesh, const PartitionSpec& spec) {
  return SpecToSharding(spec, t.dim(), mesh,
                        fmt::format("mark_sharding({}, mesh {}, spec {})", TensorName(t), mesh.ToString(),
                                    SpecString(spec)));
}

// The block [begin, end) of dimension `size` split over `axes` that `device` holds (padded
// blocks of ceil(size / n), as the partitioner lays them out).
std::pair<int64_t, int64_t> Block(const ir::Mesh& mesh, int64_t device, const std::vector<std::string>& axes,
                                  int64_t size) {
  const int64_t n = mesh.AxesSize(axes);
  const int64_t block = (size + n - 1) / n;
  const int64_t i = mesh.ShardIndex(device, axes);
  return {std::min(size, i * block), std::min(size, (i + 1) * block)};
}

// Copies the box [0, extent) of `src` into the same positions of `dst` (row-major, both of at
// least that extent): crops a padded shard, or pads a piece into its block.
void CopyBox(const ir::Literal& src, ir::Literal& dst, const Shape& extent) {
  const int64_t es = DTypeSize(src.dtype());
  const std::vector<int64_t>& ext = extent.dims();
  const int64_t rank = extent.rank();
  for (int64_t e : ext)
    if (e == 0) return;
  if (rank == 0) {
    std::memcpy(dst.mutable_bytes().data(), src.bytes().data(), static_cast<size_t>(es));
    return;
  }
  auto strides = [&](const Shape& shape) {
    std::vector<int64_t> st(static_cast<size_t>(rank), 1);
    for (int64_t d = rank - 2; d >= 0; --d) st[d] = st[d + 1] * shape.dim(d + 1);
    return st;
  };
  const std::vector<int64_t> ss = strides(src.shape()), ds = strides(dst.shape());
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  const size_t row = static_cast<size_t>(ext[rank - 1] * es);
  for (;;) {
    int64_t so = 0, dof = 0;
    for (int64_t d = 0; d < rank - 1; ++d) {
      so += idx[d] * ss[d];
      dof += idx[d] * ds[d];
    }
    std::memcpy(dst.mutable_bytes().data() + dof * es, src.bytes().data() + so * es, row);
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < ext[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// The unpadded extent of device `device`'s block of `global` under `s` (normalized).
Shape PieceShape(const Shape& global, const ir::Sharding& s, const ir::Mesh& mesh, int64_t device) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < global.rank(); ++k) {
    const auto [begin, end] = Block(mesh, device, s.dims[static_cast<size_t>(k)], global.dim(k));
    out.push_back(end - begin);
  }
  return Shape(std::move(out));
}

std::string Range(const char* what, std::pair<int64_t, int64_t> r) {
  if (r.second - r.first <= 1) return fmt::format("{} {}", what, r.first);
  return fmt::format("{} {}-{}", what, r.first, r.second - 1);
}

}  // namespace

std::string SpecString(const PartitionSpec& spec) {
  std::vector<std::string> parts;
  for (const Axes& a : spec) {
    if (a.names.empty()) {
      parts.emplace_back("None");
    } else if (a.names.size() == 1) {
      parts.push_back(fmt::format("'{}'", a.names[0]));
    } else {
      std::vector<std::string> q;
      for (const auto& n : a.names) q.push_back(fmt::format("'{}'", n));
      parts.push_back(fmt::format("({})", fmt::join(q, ", ")));
    }
  }
  return fmt::format("({}{})", fmt::join(parts, ", "), parts.size() == 1 ? "," : "");
}

Mesh::Mesh(std::vector<int64_t> device_ids, std::vector<int64_t> mesh_shape, std::vector<std::string> axis_names)
    : mesh_(std::move(axis_names), std::move(mesh_shape), std::move(device_ids)) {}

Mesh::Mesh(std::vector<int64_t> mesh_shape, std::vector<std::string> axis_names)
    : mesh_(std::move(axis_names), std::move(mesh_shape)) {}

void set_global_mesh(const Mesh& mesh) {
  CheckDevices(mesh, "set_global_mesh");
  GlobalMesh() = mesh;
}

const Mesh* get_global_mesh() { return GlobalMesh() ? &*GlobalMesh() : nullptr; }

void clear_global_mesh() { GlobalMesh().reset(); }

void auto_shard(const Mesh& mesh, const AutoShardingOptions& options) {
  CheckDevices(mesh, fmt::format("auto_shard(mesh {})", mesh.ToString()));
  if (options.memory_bound_bytes < 0 || !(options.time_limit_s > 0))
    Fail("auto_shard: memory_bound_bytes {} and time_limit_s {} must be >= 0 and > 0", options.memory_bound_bytes,
         options.time_limit_s);
  AutoMesh() = std::make_pair(mesh, options);
}
void clear_auto_shard() { AutoMesh().reset(); }
const Mesh* get_auto_shard_mesh() { return AutoMesh() ? &AutoMesh()->first : nullptr; }
const AutoShardingOptions* get_auto_shard_options() { return AutoMesh() ? &AutoMesh()->second : nullptr; }

const Tensor& mark_sharding(const Tensor& t, const Mesh& mesh, const PartitionSpec& spec) {
  AXLE_CHECK(t.defined(), "mark_sharding of an undefined tensor");
  ir::Sharding s = ToSharding(t, mesh, spec);
  detail::TensorImpl& impl = *t.impl();
  detail::Trace& trace = detail::CurrentTrace();
  if (trace.mesh && !(*trace.mesh == mesh.ir_mesh()))
    Fail("mark_sharding({}, mesh {}, spec {}): this step already uses mesh {}; one step uses one mesh",
         TensorName(t), mesh.ToString(), SpecString(spec), trace.mesh->ToString());
  impl.sharding = std::move(s);
  impl.mesh = mesh.ir_mesh();
  detail::Annotate(impl, detail::ValueOf(t));
  return t;
}

const Tensor& mark_sharding_like(const Tensor& t, const Tensor& like) {
  AXLE_CHECK(t.defined() && like.defined(), "mark_sharding_like of an undefined tensor");
  const detail::TensorImpl& from = *like.impl();
  if (!from.sharding || !from.mesh) return t;
  if (t.sizes() != like.sizes())
    Fail("mark_sharding_like({}, like {}): the shapes differ ({} and {}); a layout is copied between tensors of one "
         "shape",
         TensorName(t), TensorName(like), t.type_string(), like.type_string());
  detail::TensorImpl& impl = *t.impl();
  detail::Trace& trace = detail::CurrentTrace();
  if (trace.mesh && !(*trace.mesh == *from.mesh))
    Fail("mark_sharding_like({}, like {}): this step already uses mesh {}, {} is on mesh {}; one step uses one mesh",
         TensorName(t), TensorName(like), trace.mesh->ToString(), TensorName(like), from.mesh->ToString());
  impl.sharding = from.sharding;
  impl.mesh = from.mesh;
  detail::Annotate(impl, detail::ValueOf(t));
  return t;
}

const Tensor& mark_sharding(const Tensor& t, const PartitionSpec& spec) {
  const Mesh* mesh = get_global_mesh();
  if (mesh == nullptr)
    Fail("mark_sharding({}, spec {}) without a mesh: call set_global_mesh(mesh) first, or pass the mesh",
         t.defined() ? TensorName(t) : "an undefined tensor", SpecString(spec));
  return mark_sharding(t, *mesh, spec);
}

ir::Sharding sharding_of(const Tensor& t) {
  AXLE_CHECK(t.defined(), "sharding_of an undefined tensor");
  const detail::TensorImpl& impl = *t.impl();
  detail::Trace& trace = detail::CurrentTrace();
  ir::Sharding replicated;
  replicated.dims.resize(static_cast<size_t>(t.dim()));
  const bool pending = impl.value != nullptr && impl.epoch == trace.epoch;
  if (!pending) {
    if (impl.sharding) return *impl.sharding;
    if (impl.data && impl.data->sharding) return *impl.data->sharding;  // a partitioned step's result
    return replicated;
  }
  if (impl.value->sharding()) return *impl.value->sharding();
  if (!trace.mesh) return replicated;
  // Propagate over a copy of the pending graph: the trace itself keeps only the user's
  // annotations (sync() hands those to the compiler, which propagates again).
  const auto& nodes = trace.fn->nodes();
  size_t node_index = 0, result_index = 0;
  for (; node_index < nodes.size(); ++node_index) {
    const auto& rs = nodes[node_index]->results();
    auto it = std::find(rs.begin(), rs.end(), impl.value);
    if (it != rs.end()) {
      result_index = static_cast<size_t>(it - rs.begin());
      break;
    }
  }
  AXLE_CHECK(node_index < nodes.size(), "sharding_of: the tensor's value is not in the current trace");
  std::unique_ptr<ir::Module> copy = trace.module->Clone();
  copy->set_mesh(trace.mesh);
  ir::Function* fn = copy->FindFunction(trace.fn->name());
  ir::Value* v = fn->nodes()[node_index]->result(result_index);
  fn->set_results({v});
  detail::ReplicateUnannotatedParameters(*fn);  // as sync() does
  PropagateShardings(*copy);
  return v->sharding().value_or(replicated);
}

std::string visualize_sharding(const Tensor& t) {
  const ir::Sharding s = sharding_of(t);
  const detail::TensorImpl& impl = *t.impl();
  const detail::Trace& trace = detail::CurrentTrace();
  std::optional<ir::Mesh> mesh = impl.mesh ? impl.mesh : trace.mesh;
  if (!mesh && impl.data && impl.data->mesh) mesh = impl.data->mesh;
  if (!mesh && get_global_mesh()) mesh = get_global_mesh()->ir_mesh();
  std::string out = fmt::format("{} {}", t.type_string(), s.ToString());
  if (!mesh) return out + " (no mesh: one device holds it all)\n";
  out += fmt::format(" on mesh {}\n", mesh->ToString());
  const Dims& shape = t.sizes();
  // Blocks by the devices that hold them (a replicated dimension gives every device the same).
  std::map<std::vector<std::pair<int64_t, int64_t>>, std::vector<int64_t>> holders;
  for (int64_t d = 0; d < mesh->size(); ++d) {
    std::vector<std::pair<int64_t, int64_t>> block;
    for (size_t k = 0; k < shape.size(); ++k) block.push_back(Block(*mesh, d, s.dims[k], shape[k]));
    holders[block].push_back(d);
  }
  auto devices = [](const std::vector<int64_t>& ds) {
    return fmt::format("{} {}", ds.size() == 1 ? "device" : "devices", fmt::join(ds, ","));
  };
  if (!s.partial.empty()) out += fmt::format("partial sums over [{}]\n", fmt::join(s.partial, ","));
  if (shape.size() == 2) {
    std::vector<std::pair<int64_t, int64_t>> rows, cols;
    for (const auto& [block, ds] : holders) {
      if (std::find(rows.begin(), rows.end(), block[0]) == rows.end()) rows.push_back(block[0]);
      if (std::find(cols.begin(), cols.end(), block[1]) == cols.end()) cols.push_back(block[1]);
    }
    std::sort(rows.begin(), rows.end());
    std::sort(cols.begin(), cols.end());
    std::vector<std::vector<std::string>> cells(rows.size() + 1, std::vector<std::string>(cols.size() + 1));
    for (size_t c = 0; c < cols.size(); ++c) cells[0][c + 1] = Range("cols", cols[c]);
    for (size_t r = 0; r < rows.size(); ++r) {
      cells[r + 1][0] = Range("rows", rows[r]);
      for (size_t c = 0; c < cols.size(); ++c) {
        auto it = holders.find({rows[r], cols[c]});
        cells[r + 1][c + 1] = it == holders.end() ? "-" : devices(it->second);
      }
    }
    std::vector<size_t> width(cols.size() + 1, 0);
    for (const auto& row : cells)
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (const auto& row : cells) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) line += fmt::format("{:<{}}  ", row[c], width[c]);
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }
  for (const auto& [block, ds] : holders) {
    std::vector<std::string> ranges;
    for (const auto& r : block) ranges.push_back(r.second - r.first == 0 ? "[]" : fmt::format("{}:{}", r.first, r.second));
    out += fmt::format("  [{}]  {}\n", fmt::join(ranges, ", "), devices(ds));
  }
  return out;
}

std::vector<Tensor> local_shards(const Tensor& t) {
  AXLE_CHECK(t.defined(), "local_shards of an undefined tensor");
  detail::TensorImpl& impl = *t.impl();
  if (impl.data == nullptr) sync();  // runs the tensor's step (reading its shards does not assemble them)
  AXLE_CHECK(impl.data != nullptr, "local_shards: tensor {} was not computed by sync()", TensorName(t));
  std::shared_ptr<detail::ShardedData> data = impl.data->GetSharded();
  if (data == nullptr) {
    if (!impl.sharding) return {t};  // one device holds it all
    data = detail::SplitIntoShards(impl.data->Get(), *impl.sharding, *impl.mesh);  // marked, not yet run
  }
  std::vector<Tensor> out;
  for (int64_t d = 0; d < data->mesh.size(); ++d) {
    if (!runtime::IsLocalDevice(d)) continue;  // another process's
    const ir::Literal& shard = *data->shards[static_cast<size_t>(d)];
    ir::Literal piece(ir::TensorType(shard.dtype(), PieceShape(data->global.shape, data->sharding, data->mesh, d)));
    CopyBox(shard, piece, piece.shape());
    out.push_back(detail::MakeMaterialized(std::make_shared<ir::Literal>(std::move(piece)),
                                           fmt::format("local shard {} of {}", d, TensorName(t))));
  }
  return out;
}

Tensor from_local_shards(const std::vector<Tensor>& shards, const Dims& shape, const Mesh& mesh,
                         const PartitionSpec& spec) {
  if (shards.empty()) Fail("from_local_shards: no shards; give one tensor per device of mesh {}", mesh.ToString());
  AXLE_CHECK(shards[0].defined(), "from_local_shards: shard 0 is an undefined tensor");
  const DType dtype = shards[0].dtype();
  const std::string global_type = ir::TensorType(dtype, Shape(shape)).ToString();
  const std::string what =
      fmt::format("from_local_shards({} shards, global {}, mesh {}, spec {})", shards.size(), global_type,
                  mesh.ToString(), SpecString(spec));
  // One shard per device of the mesh, or (several processes) per device of this process.
  const int64_t first = runtime::FirstLocalDevice();
  const bool only_local = runtime::GetWorld() != nullptr && mesh.size() == runtime::GlobalDevices() &&
                          static_cast<int64_t>(shards.size()) == runtime::GetWorld()->local_devices() &&
                          shards.size() != static_cast<size_t>(mesh.size());
  if (static_cast<int64_t>(shards.size()) != mesh.size() && !only_local)
    Fail("{}: the mesh has {} devices; give exactly one shard per device, in device order (with several "
         "processes: one per device of this process, or of the whole mesh)",
         what, mesh.size());
  for (int64_t e : shape)
    if (e < 0) Fail("{}: the global shape has a negative dimension", what);
  // The layout, checked as mark_sharding checks it.
  const ir::Sharding s = SpecToSharding(spec, static_cast<int64_t>(shape.size()), mesh, what);
  auto data = std::make_shared<detail::ShardedData>();
  data->mesh = mesh.ir_mesh();
  data->global = ir::TensorType(dtype, Shape(shape));
  data->sharding = NormalizeSharding(s, static_cast<int64_t>(shape.size()), mesh.ir_mesh());
  const Shape block = LocalShape(data->global.shape, data->sharding, data->mesh);
  for (int64_t d = 0; d < mesh.size(); ++d) {
    if (!runtime::IsLocalDevice(d)) {  // another process's
      data->shards.push_back(nullptr);
      continue;
    }
    const Tensor& piece = shards[static_cast<size_t>(only_local ? d - first : d)];
    AXLE_CHECK(piece.defined(), "{}: shard {} is an undefined tensor", what, d);
    const Shape want = PieceShape(data->global.shape, data->sharding, data->mesh, d);
    if (piece.dtype() != dtype || Shape(piece.sizes()) != want)
      Fail("{}: device {}'s shard is {}, but its block of the global tensor is {}", what, d, piece.type_string(),
           ir::TensorType(dtype, want).ToString());
    runtime::BufferPtr b = detail::Materialize(piece);
    if (want == block) {
      data->shards.push_back(std::move(b));
      continue;
    }
    auto padded = std::make_shared<ir::Literal>(ir::TensorType(dtype, block));  // zero padding
    CopyBox(*b, *padded, want);
    data->shards.push_back(std::move(padded));
  }
  if (data->sharding.IsReplicated()) data->shards.assign(data->shards.size(), data->shards[static_cast<size_t>(first)]);
  return detail::MakeMaterializedSharded(std::move(data), fmt::format("from_local_shards ({} {})", global_type,
                                                                      SpecString(spec)));
}

}  // namespace axle::spmd
