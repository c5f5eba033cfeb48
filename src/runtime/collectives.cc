// The collectives' arithmetic (bitwise the interpreter's, ir/interpreter_misc.cc) and the
// in-process communicator.
//
// In-process protocol. The k-th collective call of every device in a step is call #k; its entry
// holds each device's operand and output pointers and a stage per device (1 arrived, 2 computed
// its share, 3 done reading its peers). A device waits (Note [Collectives spin first]) only for
// the devices it reads from or that read from it: its group, or for collective_permute its source
// and its targets. It computes its own result outside the lock, straight from its peers'
// operands, and returns once every peer that reads its operand or output is done with them, so
// the caller may free or overwrite both. all_reduce splits the combination: member k combines chunk k of the
// elements into its own output, then copies the other chunks from its peers' outputs.
#include "runtime/collectives.h"
#include "runtime/collectives_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "ir/shape_inference.h"
#include "runtime/thread_pool.h"

namespace axle::runtime {

std::string_view CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kCollectivePermute: return "collective_permute";
  }
  return "?";
}

CollectiveStats& CollectiveStats::operator+=(const CollectiveStats& o) {
  collectives += o.collectives;
  all_reduce_bytes += o.all_reduce_bytes;
  all_gather_bytes += o.all_gather_bytes;
  reduce_scatter_bytes += o.reduce_scatter_bytes;
  all_to_all_bytes += o.all_to_all_bytes;
  collective_permute_bytes += o.collective_permute_bytes;
  seconds += o.seconds;
  return *this;
}

namespace collective {
namespace {

using ir::Literal;
using ir::ReduceKind;

// Note [Accumulation] (ir/interpreter_reduce.cc): floats combine in double from -0 (sum), 1
// (prod), -inf (max), +inf (min); NaN wins max/min and +0 beats -0; integers wrap on the int64
// two's complement bits and truncate once.
double SemMax(double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
double SemMin(double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <ReduceKind K>
double CombineF(double acc, double x) {
  if constexpr (K == ReduceKind::kSum) return acc + x;
  else if constexpr (K == ReduceKind::kProd) return acc * x;
  else if constexpr (K == ReduceKind::kMax) return SemMax(acc, x);
  else return SemMin(acc, x);
}
template <ReduceKind K>
double InitF() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if constexpr (K == ReduceKind::kSum) return -0.0;
  else if constexpr (K == ReduceKind::kProd) return 1.0;
  else if constexpr (K == ReduceKind::kMax) return -kInf;
  else return kInf;
}

// out[dst + i] = combination over members of in_m[src + i], i < count. Load(p, i) widens
// element i to double exactly; Store narrows once.
template <ReduceKind K, typename Load, typename Store>
void CombineFloatRun(std::span<const Literal* const> group, int64_t src, int64_t count, Load load, Store store) {
  for (int64_t i = 0; i < count; ++i) {
    double acc = InitF<K>();
    for (const Literal* m : group) acc = CombineF<K>(acc, load(*m, src + i));
    store(i, acc);
  }
}

template <typename Load, typename Store>
void CombineFloat(std::span<const Literal* const> group, ReduceKind kind, int64_t src, int64_t count, Load load,
                  Store store) {
  switch (kind) {
    case ReduceKind::kSum: return CombineFloatRun<ReduceKind::kSum>(group, src, count, load, store);
    case ReduceKind::kProd: return CombineFloatRun<ReduceKind::kProd>(group, src, count, load, store);
    case ReduceKind::kMax: return CombineFloatRun<ReduceKind::kMax>(group, src, count, load, store);
    case ReduceKind::kMin: return CombineFloatRun<ReduceKind::kMin>(group, src, count, load, store);
    default: Fail("{} combination of {} values; and/or need integers or bool", ir::EnumName(kind),
                  DTypeName(group[0]->dtype()));
  }
}

template <typename T>
void CombineInt(std::span<const Literal* const> group, ReduceKind kind, int64_t src, int64_t count, T* out) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t acc = static_cast<int64_t>(group[0]->data<T>()[src + i]);
    for (size_t m = 1; m < group.size(); ++m) {
      const int64_t x = static_cast<int64_t>(group[m]->data<T>()[src + i]);
      const uint64_t a = static_cast<uint64_t>(acc), b = static_cast<uint64_t>(x);
      switch (kind) {
        case ReduceKind::kSum: acc = static_cast<int64_t>(a + b); break;
        case ReduceKind::kProd: acc = static_cast<int64_t>(a * b); break;
        case ReduceKind::kMax: acc = std::max(acc, x); break;
        case ReduceKind::kMin: acc = std::min(acc, x); break;
        case ReduceKind::kAnd: acc = static_cast<int64_t>(a & b); break;
        case ReduceKind::kOr: acc = static_cast<int64_t>(a | b); break;
      }
    }
    out[i] = static_cast<T>(acc);  // two's complement truncation
  }
}

// Sum or product of f32/f64 members, blockwise: each block's accumulators (double) take the
// members one after another, so every element still combines in member order from the same
// initial value, bit for bit as CombineFloatRun, but the inner loops run over contiguous elements
// and vectorize (all_reduce of gradients: ~4x CombineFloatRun's scalar loop here).
template <ReduceKind K, typename T>
void CombineSumProd(std::span<const void* const> members, int64_t count, T* out) {
  constexpr int64_t kBlock = 512;
  double acc[kBlock];
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t n = std::min(kBlock, count - b);
    for (int64_t j = 0; j < n; ++j) acc[j] = K == ReduceKind::kSum ? -0.0 : 1.0;
    for (const void* m : members) {
      const T* x = static_cast<const T*>(m) + b;
      if constexpr (K == ReduceKind::kSum)
        for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(x[j]);
      else
        for (int64_t j = 0; j < n; ++j) acc[j] *= static_cast<double>(x[j]);
    }
    for (int64_t j = 0; j < n; ++j) out[b + j] = static_cast<T>(acc[j]);
  }
}

template <typename T>
bool SumProd(ReduceKind kind, std::span<const void* const> members, int64_t count, T* out) {
  if (kind == ReduceKind::kSum) return CombineSumProd<ReduceKind::kSum>(members, count, out), true;
  if (kind == ReduceKind::kProd) return CombineSumProd<ReduceKind::kProd>(members, count, out), true;
  return false;
}

template <typename T>
bool SumProd(std::span<const Literal* const> group, ReduceKind kind, int64_t src, int64_t count, T* out) {
  if (kind != ReduceKind::kSum && kind != ReduceKind::kProd) return false;
  std::vector<const void*> members;
  for (const Literal* m : group) members.push_back(m->data<T>() + src);
  return SumProd(kind, members, count, out);
}

// Combines elements [src, src + count) of the members into elements [dst, dst + count) of out.
// (Integers start from the first member's value: the identity combined with x is x, bit for bit.)
void CombineRange(std::span<const Literal* const> group, ReduceKind kind, int64_t src, Literal& out, int64_t dst,
                  int64_t count) {
  if (count <= 0) return;
  const DType t = out.dtype();
  switch (t) {
    case DType::kF32: {
      float* o = out.mutable_data<float>() + dst;
      if (SumProd(group, kind, src, count, o)) return;
      return CombineFloat(
          group, kind, src, count, [](const Literal& l, int64_t i) { return static_cast<double>(l.data<float>()[i]); },
          [o](int64_t i, double v) { o[i] = static_cast<float>(v); });
    }
    case DType::kF64: {
      double* o = out.mutable_data<double>() + dst;
      if (SumProd(group, kind, src, count, o)) return;
      return CombineFloat(
          group, kind, src, count, [](const Literal& l, int64_t i) { return l.data<double>()[i]; },
          [o](int64_t i, double v) { o[i] = v; });
    }
    case DType::kBF16:
      return CombineFloat(
          group, kind, src, count,
          [](const Literal& l, int64_t i) { return static_cast<double>(BF16ToFloat(l.data<uint16_t>()[i])); },
          [&out, dst](int64_t i, double v) { out.SetDouble(dst + i, v); });  // rounds once, as the interpreter
    case DType::kF16:
      return CombineFloat(
          group, kind, src, count,
          [](const Literal& l, int64_t i) { return static_cast<double>(F16ToFloat(l.data<uint16_t>()[i])); },
          [&out, dst](int64_t i, double v) { out.SetDouble(dst + i, v); });
    case DType::kI8: return CombineInt(group, kind, src, count, out.mutable_data<int8_t>() + dst);
    case DType::kI32: return CombineInt(group, kind, src, count, out.mutable_data<int32_t>() + dst);
    case DType::kI64: return CombineInt(group, kind, src, count, out.mutable_data<int64_t>() + dst);
    case DType::kU8: return CombineInt(group, kind, src, count, out.mutable_data<uint8_t>() + dst);
    case DType::kU32: return CombineInt(group, kind, src, count, out.mutable_data<uint32_t>() + dst);
    case DType::kBool:
      if (kind != ReduceKind::kAnd && kind != ReduceKind::kOr)
        Fail("{} combination of bool values; bool takes and/or", ir::EnumName(kind));
      return CombineInt(group, kind, src, count, out.mutable_data<uint8_t>() + dst);
  }
}

// A shape viewed as [outer, dims[dim], inner] (inner in elements).
struct Along {
  int64_t outer = 1, size = 0, inner = 1;
};
Along ViewAlong(const Shape& s, int64_t dim) {
  Along v;
  for (int64_t d = 0; d < dim; ++d) v.outer *= s.dim(d);
  v.size = s.dim(dim);
  for (int64_t d = dim + 1; d < s.rank(); ++d) v.inner *= s.dim(d);
  return v;
}

void Copy(uint8_t* dst, const uint8_t* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void CheckGroup(std::span<const Literal* const> group, const char* what) {
  AXLE_CHECK(!group.empty(), "{}: empty group", what);
  for (const Literal* m : group)
    AXLE_CHECK(m->type() == group[0]->type(), "{}: operands {} and {}", what, m->type().ToString(),
               group[0]->type().ToString());
}

}  // namespace

bool CombineContiguous(DType dtype, ReduceKind kind, std::span<const void* const> members, void* out, int64_t count) {
  if (dtype == DType::kF32) return SumProd(kind, members, count, static_cast<float*>(out));
  if (dtype == DType::kF64) return SumProd(kind, members, count, static_cast<double*>(out));
  return false;
}

void Combine(std::span<const Literal* const> group, ReduceKind kind, Literal& out, int64_t begin, int64_t end) {
  CheckGroup(group, "all_reduce");
  AXLE_CHECK(out.type() == group[0]->type(), "all_reduce: out {}", out.type().ToString());
  CombineRange(group, kind, begin, out, begin, end - begin);
}

void AllGather(std::span<const Literal* const> group, int64_t dim, Literal& out) {
  CheckGroup(group, "all_gather");
  const Along in = ViewAlong(group[0]->shape(), dim);
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t w = DTypeSize(out.dtype());
  AXLE_CHECK(out.NumElements() == n * group[0]->NumElements(), "all_gather: out {}", out.type().ToString());
  const int64_t run = in.size * in.inner * w;
  uint8_t* o = out.mutable_bytes().data();
  for (int64_t b = 0; b < in.outer; ++b)
    for (int64_t m = 0; m < n; ++m) Copy(o + (b * n + m) * run, group[static_cast<size_t>(m)]->bytes().data() + b * run, run);
}

void ReduceScatter(std::span<const Literal* const> group, ReduceKind kind, int64_t dim, size_t position, Literal& out) {
  CheckGroup(group, "reduce_scatter");
  const Along in = ViewAlong(group[0]->shape(), dim);
  const int64_t chunk = in.size / static_cast<int64_t>(group.size());
  AXLE_CHECK(out.NumElements() * static_cast<int64_t>(group.size()) == group[0]->NumElements(),
             "reduce_scatter: out {}", out.type().ToString());
  const int64_t run = chunk * in.inner;
  for (int64_t b = 0; b < in.outer; ++b)
    CombineRange(group, kind, b * in.size * in.inner + static_cast<int64_t>(position) * run, out, b * run, run);
}

Literal Chunk(const Literal& x, int64_t dim, int64_t k, int64_t n) {
  const Along v = ViewAlong(x.shape(), dim);
  AXLE_CHECK(n > 0 && v.size % n == 0 && k >= 0 && k < n, "chunk {} of {} along dim {} of {}", k, n, dim,
             x.type().ToString());
  std::vector<int64_t> dims = x.shape().dims();
  const int64_t chunk = v.size / n;
  dims[static_cast<size_t>(dim)] = chunk;
  Literal out = Literal::Uninitialized(ir::TensorType(x.dtype(), Shape(dims)));
  const int64_t w = DTypeSize(x.dtype()), run = chunk * v.inner * w;
  for (int64_t b = 0; b < v.outer; ++b)
    Copy(out.mutable_bytes().data() + b * run, x.bytes().data() + (b * v.size + k * chunk) * v.inner * w, run);
  return out;
}

void AllToAll(std::span<const Literal* const> group, int64_t split_dim, int64_t concat_dim, size_t position,
              Literal& out) {
  CheckGroup(group, "all_to_all");
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t w = DTypeSize(out.dtype());
  const Along split = ViewAlong(group[0]->shape(), split_dim);
  const int64_t chunk = split.size / n;
  // What member `position` receives from each sender: chunk `position` along split_dim.
  std::vector<int64_t> part_dims = group[0]->shape().dims();
  part_dims[static_cast<size_t>(split_dim)] = chunk;
  const Shape part_shape(part_dims);
  const Along cat = ViewAlong(part_shape, concat_dim);
  AXLE_CHECK(out.NumElements() == n * part_shape.NumElements(), "all_to_all: out {}", out.type().ToString());
  std::vector<uint8_t> part(static_cast<size_t>(part_shape.NumElements() * w));
  const int64_t split_run = chunk * split.inner * w, cat_run = cat.size * cat.inner * w;
  uint8_t* o = out.mutable_bytes().data();
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* x = group[static_cast<size_t>(j)]->bytes().data();
    for (int64_t b = 0; b < split.outer; ++b)
      Copy(part.data() + b * split_run, x + (b * split.size + static_cast<int64_t>(position) * chunk) * split.inner * w,
           split_run);
    for (int64_t b = 0; b < cat.outer; ++b) Copy(o + (b * n + j) * cat_run, part.data() + b * cat_run, cat_run);
  }
}

}  // namespace collective

std::string GroupsText(const ir::ReplicaGroups& groups) {
  std::vector<std::string> parts;
  for (const auto& g : groups) parts.push_back(fmt::format("[{}]", fmt::join(g, ", ")));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string CollectiveRequest::ToString() const {
  std::string attrs;
  switch (kind) {
    case CollectiveKind::kAllReduce: attrs = fmt::format("kind={}, ", ir::EnumName(reduce)); break;
    case CollectiveKind::kAllGather: attrs = fmt::format("dim={}, ", dim0); break;
    case CollectiveKind::kReduceScatter: attrs = fmt::format("kind={}, dim={}, ", ir::EnumName(reduce), dim0); break;
    case CollectiveKind::kAllToAll: attrs = fmt::format("split_dim={}, concat_dim={}, ", dim0, dim1); break;
    case CollectiveKind::kCollectivePermute: break;
  }
  return fmt::format("{}({}{}={}) on {}", CollectiveName(kind), attrs,
                     kind == CollectiveKind::kCollectivePermute ? "pairs" : "groups", GroupsText(groups),
                     type.ToString());
}

void CheckReduceKind(ir::ReduceKind kind, const ir::TensorType& t, const char* op) {
  const bool logical = kind == ir::ReduceKind::kAnd || kind == ir::ReduceKind::kOr;
  if (logical ? IsFloat(t.dtype) : t.dtype == DType::kBool)
    Fail("{}: a {} reduction of {} is not defined ({})", op, ir::EnumName(kind), t.ToString(),
         logical ? "and/or take integers or bool" : "sum/prod/max/min take numbers");
}

void CheckDim(int64_t dim, const ir::TensorType& t, const char* op, const char* what) {
  if (dim < 0 || dim >= t.rank()) Fail("{}: {} {} is out of range for operand {}", op, what, dim, t.ToString());
}

void CheckOut(const CollectiveRequest& r, const ir::Literal& out, const ir::TensorType& want) {
  if (out.type() != want)
    Fail("{}: the output has type {}, expected {}", r.ToString(), out.type().ToString(), want.ToString());
}

void CheckDevice(int device, int num_devices) {
  if (device < 0 || device >= num_devices)
    Fail("collective called by device {}; the communicator has {} devices", device, num_devices);
}

ir::TensorType CollectiveResultType(const CollectiveRequest& r, int64_t n) {
  const ir::TensorType& in = r.type;
  std::vector<int64_t> dims = in.shape.dims();
  auto dim = [&](int64_t d) -> int64_t& { return dims[static_cast<size_t>(d)]; };
  switch (r.kind) {
    case CollectiveKind::kAllReduce:
      CheckReduceKind(r.reduce, in, "all_reduce");
      return in;
    case CollectiveKind::kCollectivePermute: return in;
    case CollectiveKind::kAllGather:
      CheckDim(r.dim0, in, "all_gather", "dim");
      dim(r.dim0) *= n;
      break;
    case CollectiveKind::kReduceScatter:
      CheckReduceKind(r.reduce, in, "reduce_scatter");
      CheckDim(r.dim0, in, "reduce_scatter", "dim");
      if (dim(r.dim0) % n != 0)
        Fail("reduce_scatter: dim {} of {} is not divisible by the group size {}", r.dim0, in.ToString(), n);
      dim(r.dim0) /= n;
      break;
    case CollectiveKind::kAllToAll:
      CheckDim(r.dim0, in, "all_to_all", "split_dim");
      CheckDim(r.dim1, in, "all_to_all", "concat_dim");
      if (dim(r.dim0) % n != 0)
        Fail("all_to_all: split_dim {} of {} is not divisible by the group size {}", r.dim0, in.ToString(), n);
      dim(r.dim0) /= n;
      dim(r.dim1) *= n;
      break;
  }
  return ir::TensorType(in.dtype, Shape(dims));
}

std::pair<std::vector<int>, size_t> GroupOf(int device, const CollectiveRequest& r, int num_devices) {
  CheckDevice(device, num_devices);
  try {
    ir::ReplicaGroupSize(r.groups, num_devices);
  } catch (const Error& e) {
    Fail("{}: {}", r.ToString(), e.message());
  }
  if (r.groups.empty()) {
    std::vector<int> all(static_cast<size_t>(num_devices));
    for (int d = 0; d < num_devices; ++d) all[static_cast<size_t>(d)] = d;
    return {all, static_cast<size_t>(device)};
  }
  for (const auto& g : r.groups) {
    auto it = std::find(g.begin(), g.end(), device);
    if (it == g.end()) continue;
    std::vector<int> members(g.begin(), g.end());
    return {members, static_cast<size_t>(it - g.begin())};
  }
  Fail("{}: device {} is in no group", r.ToString(), device);  // unreachable: the groups cover all
}

PermuteRoute RouteOf(int device, const ir::ReplicaGroups& pairs, int num_devices) {
  CheckDevice(device, num_devices);
  PermuteRoute route;
  std::set<int64_t> sources, targets;
  for (const auto& p : pairs) {
    if (p.size() != 2) Fail("collective_permute: pairs {}: each entry must be [source, target]", GroupsText(pairs));
    for (int64_t id : p)
      if (id < 0 || id >= num_devices)
        Fail("collective_permute: pairs {}: replica {} is out of range for {} devices", GroupsText(pairs), id,
             num_devices);
    if (!sources.insert(p[0]).second) Fail("collective_permute: replica {} is a source twice", p[0]);
    if (!targets.insert(p[1]).second) Fail("collective_permute: replica {} is a target twice", p[1]);
    if (p[1] == device) route.source = static_cast<int>(p[0]);
    if (p[0] == device) route.targets.push_back(static_cast<int>(p[1]));
  }
  return route;
}

namespace {

using ir::Literal;
using ir::ReplicaGroups;
using Request = CollectiveRequest;

class InProcessCommunicator final : public Communicator {
 public:
  explicit InProcessCommunicator(int n)
      : spin_micros_(n <= static_cast<int>(std::thread::hardware_concurrency()) ? kSpinMicros : 0), n_(n) {
    if (n < 1) Fail("NewInProcessCommunicator: {} devices; expected at least 1", n);
    Reset();
  }

  int num_devices() const override { return n_; }

  void AllReduce(int device, const Literal& in, Literal& out, ir::ReduceKind kind,
                 const ReplicaGroups& groups) override {
    Request r{CollectiveKind::kAllReduce, kind, 0, 0, groups, in.type()};
    const auto [members, position] = GroupOf(device, r);
    CheckOut(r, out, CollectiveResultType(r, static_cast<int64_t>(members.size())));
    std::unique_lock<std::mutex> lock(mu_);
    auto [index, call] = Arrive(lock, device, std::move(r), in, out);
    WaitFor(lock, index, *call, device, members, 1);
    const std::vector<const Literal*> ops = Inputs(*call, members);
    const int64_t n = static_cast<int64_t>(members.size()), e = out.NumElements();
    auto chunk = [&](int64_t k, int64_t& b, int64_t& end) {
      b = e * k / n;
      end = e * (k + 1) / n;
    };
    lock.unlock();
    int64_t b, end;
    chunk(static_cast<int64_t>(position), b, end);
    collective::Combine(ops, kind, out, b, end);
    lock.lock();
    Advance(*call, device, 2);
    WaitFor(lock, index, *call, device, members, 2);
    lock.unlock();
    const int64_t w = DTypeSize(out.dtype());
    for (size_t k = 0; k < members.size(); ++k) {
      if (k == position) continue;
      chunk(static_cast<int64_t>(k), b, end);
      if (end > b)
        std::memcpy(out.mutable_bytes().data() + b * w,
                    call->out[static_cast<size_t>(members[k])]->bytes().data() + b * w,
                    static_cast<size_t>((end - b) * w));
    }
    lock.lock();
    Finish(lock, index, *call, device, members);
  }

  void AllGather(int device, const Literal& in, Literal& out, int64_t dim, const ReplicaGroups& groups) override {
    Request r{CollectiveKind::kAllGather, ir::ReduceKind::kSum, dim, 0, groups, in.type()};
    const auto [members, position] = GroupOf(device, r);
    CheckOut(r, out, CollectiveResultType(r, static_cast<int64_t>(members.size())));
    Exchange(device, std::move(r), in, out, members,
             [&](const std::vector<const Literal*>& ops) { collective::AllGather(ops, dim, out); });
  }

  void ReduceScatter(int device, const Literal& in, Literal& out, ir::ReduceKind kind, int64_t dim,
                     const ReplicaGroups& groups) override {
    Request r{CollectiveKind::kReduceScatter, kind, dim, 0, groups, in.type()};
    const auto [members, position] = GroupOf(device, r);
    CheckOut(r, out, CollectiveResultType(r, static_cast<int64_t>(members.size())));
    const size_t pos = position;
    Exchange(device, std::move(r), in, out, members,
             [&](const std::vector<const Literal*>& ops) { collective::ReduceScatter(ops, kind, dim, pos, out); });
  }

  void AllToAll(int device, const Literal& in, Literal& out, int64_t split_dim, int64_t concat_dim,
                const ReplicaGroups& groups) override {
    Request r{CollectiveKind::kAllToAll, ir::ReduceKind::kSum, split_dim, concat_dim, groups, in.type()};
    const auto [members, position] = GroupOf(device, r);
    CheckOut(r, out, CollectiveResultType(r, static_cast<int64_t>(members.size())));
    const size_t pos = position;
    Exchange(device, std::move(r), in, out, members, [&](const std::vector<const Literal*>& ops) {
      collective::AllToAll(ops, split_dim, concat_dim, pos, out);
    });
  }

  void CollectivePermute(int device, const Literal& in, Literal& out, const ReplicaGroups& pairs) override {
    CheckDevice(device);
    Request r{CollectiveKind::kCollectivePermute, ir::ReduceKind::kSum, 0, 0, pairs, in.type()};
    const PermuteRoute route = RouteOf(device, pairs, n_);
    const int source = route.source;
    const std::vector<int>& readers = route.targets;  // the devices that read this device's operand
    CheckOut(r, out, in.type());
    std::unique_lock<std::mutex> lock(mu_);
    auto [index, call] = Arrive(lock, device, std::move(r), in, out);
    if (!readers.empty()) stats_[static_cast<size_t>(device)].collective_permute_bytes += in.type().ByteSize();
    const Literal* src = nullptr;
    if (source >= 0) {
      const int wait_for[] = {source};
      WaitFor(lock, index, *call, device, wait_for, 1);
      src = call->in[static_cast<size_t>(source)];
    }
    lock.unlock();
    const int64_t bytes = out.type().ByteSize();
    if (bytes > 0) {
      if (src)
        std::memcpy(out.mutable_bytes().data(), src->bytes().data(), static_cast<size_t>(bytes));
      else
        std::memset(out.mutable_bytes().data(), 0, static_cast<size_t>(bytes));
    }
    lock.lock();
    Finish(lock, index, *call, device, readers);
  }

  void Abort(int device, const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_.empty()) abort_ = fmt::format("device {} failed: {}", device, reason);
      progress_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
  }

  void EndStep(int device) override {
    CheckDevice(device);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ended_[static_cast<size_t>(device)] = true;
      progress_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
  }

  std::string abort_message() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_;
  }

  void Reset() override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
    next_call_.assign(static_cast<size_t>(n_), 0);
    ended_.assign(static_cast<size_t>(n_), false);
    stats_.assign(static_cast<size_t>(n_), CollectiveStats{});
    abort_.clear();
  }

  CollectiveStats stats(int device) const override {
    CheckDevice(device);
    std::lock_guard<std::mutex> lock(mu_);
    return stats_[static_cast<size_t>(device)];
  }

  void AddSeconds(int device, double seconds) override {
    CheckDevice(device);
    std::lock_guard<std::mutex> lock(mu_);
    stats_[static_cast<size_t>(device)].seconds += seconds;
  }

 private:
  struct Call {
    Request request;
    int first = 0;  // the device that arrived first (mismatch messages)
    std::vector<const Literal*> in;
    std::vector<Literal*> out;
    std::vector<int> stage;  // 0 not arrived, 1 arrived, 2 computed its share, 3 done
    int left = 0;            // devices that returned
  };

  void CheckDevice(int device) const { runtime::CheckDevice(device, n_); }
  std::pair<std::vector<int>, size_t> GroupOf(int device, const Request& r) const {
    return runtime::GroupOf(device, r, n_);
  }

  std::pair<int64_t, Call*> Arrive(std::unique_lock<std::mutex>&, int device, Request r, const Literal& in,
                                   Literal& out) {
    if (!abort_.empty()) throw Error(abort_);
    const int64_t index = next_call_[static_cast<size_t>(device)]++;
    CollectiveStats& s = stats_[static_cast<size_t>(device)];
    ++s.collectives;
    const int64_t bytes = in.type().ByteSize();
    switch (r.kind) {
      case CollectiveKind::kAllReduce: s.all_reduce_bytes += bytes; break;
      case CollectiveKind::kAllGather: s.all_gather_bytes += bytes; break;
      case CollectiveKind::kReduceScatter: s.reduce_scatter_bytes += bytes; break;
      case CollectiveKind::kAllToAll: s.all_to_all_bytes += bytes; break;
      case CollectiveKind::kCollectivePermute: break;  // counted by the caller: only senders
    }
    auto [it, fresh] = calls_.try_emplace(index);
    Call& c = it->second;
    if (fresh) {
      c.request = std::move(r);
      c.first = device;
      c.in.assign(static_cast<size_t>(n_), nullptr);
      c.out.assign(static_cast<size_t>(n_), nullptr);
      c.stage.assign(static_cast<size_t>(n_), 0);
    } else if (!(c.request == r)) {
      Fail("devices disagree on collective #{} of the step: device {} calls {}, but device {} calls {} (every "
           "device must run the same program)",
           index, device, r.ToString(), c.first, c.request.ToString());
    }
    c.in[static_cast<size_t>(device)] = &in;
    c.out[static_cast<size_t>(device)] = &out;
    Advance(c, device, 1);
    return {index, &c};
  }

  void Advance(Call& c, int device, int stage) {
    c.stage[static_cast<size_t>(device)] = stage;
    progress_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  // Sleeps until every device of `peers` reached `stage` of call `index`; throws on abort, or
  // when a peer ended its step without getting there.
  void WaitFor(std::unique_lock<std::mutex>& lock, int64_t index, const Call& c, int device,
               std::span<const int> peers, int stage) {
    auto ready = [&] {
      if (!abort_.empty()) return true;
      for (int p : peers)
        if (c.stage[static_cast<size_t>(p)] < stage && !ended_[static_cast<size_t>(p)]) return false;
      return true;
    };
    // Note [Collectives spin first]
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros_);
    while (!ready()) {
      const uint64_t seen = progress_.load(std::memory_order_acquire);
      lock.unlock();
      const bool moved = SpinUntil([&] { return progress_.load(std::memory_order_acquire) != seen; }, deadline);
      lock.lock();
      if (!moved) break;  // past the deadline: sleep below
    }
    cv_.wait(lock, ready);
    if (!abort_.empty()) throw Error(abort_);
    for (int p : peers)
      if (c.stage[static_cast<size_t>(p)] < stage)
        Fail("device {} waits in collective #{} of the step ({}), but device {} finished its step without "
             "completing it (every device must run the same program)",
             device, index, c.request.ToString(), p);
  }

  static std::vector<const Literal*> Inputs(const Call& c, const std::vector<int>& members) {
    std::vector<const Literal*> ops;
    for (int m : members) ops.push_back(c.in[static_cast<size_t>(m)]);
    for (const Literal* op : ops)
      if (op->type() != ops[0]->type())
        Fail("{}: group members' operands differ: {} and {}", c.request.ToString(), ops[0]->type().ToString(),
             op->type().ToString());
    return ops;
  }

  // Marks `device` done and returns once `readers` are done with its operand and output.
  void Finish(std::unique_lock<std::mutex>& lock, int64_t index, Call& c, int device, std::span<const int> readers) {
    Advance(c, device, 3);
    WaitFor(lock, index, c, device, readers, 3);
    if (++c.left == n_) calls_.erase(index);
  }

  // The shape of all_gather, reduce_scatter and all_to_all: wait for the group, compute this
  // device's result from the members' operands, wait until the members are done reading.
  template <typename F>
  void Exchange(int device, Request r, const Literal& in, Literal& out, const std::vector<int>& members,
                const F& compute) {
    std::unique_lock<std::mutex> lock(mu_);
    auto [index, call] = Arrive(lock, device, std::move(r), in, out);
    WaitFor(lock, index, *call, device, members, 1);
    const std::vector<const Literal*> ops = Inputs(*call, members);
    lock.unlock();
    compute(ops);
    lock.lock();
    Finish(lock, index, *call, device, members);
  }

  // Note [Collectives spin first]: a device that must wait for its peers in a collective spins
  // (yielding between rounds) for up to kSpinMicros on progress_, bumped under mu_ by every change
  // a waiter may wait for, before it sleeps on cv_. Each collective waits two or three times for
  // the other devices, and a data-parallel GPT-2 small step has ~35 of them (an all_reduce per
  // gradient, the loss, the clipping norm): a condition-variable wake-up took 0.1-2.5 ms on this
  // VM (Note [Pool spinning], thread_pool.h). `axle train --config small --devices 2` on 2 cores,
  // means of 4 alternated runs: 40.3K -> 54.7K tokens/s (one device: ~60-65K). Only while every
  // device has a core of its own: more devices than cores (tests run eight on two) sleep at once,
  // leaving the cores to the devices that have work.
  static constexpr int64_t kSpinMicros = 2000;
  const int64_t spin_micros_;
  std::atomic<uint64_t> progress_{0};
  const int n_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Call> calls_;  // open calls of this step, by index
  std::vector<int64_t> next_call_;
  std::vector<bool> ended_;
  std::vector<CollectiveStats> stats_;
  std::string abort_;
};

}  // namespace

std::unique_ptr<Communicator> NewInProcessCommunicator(int num_devices) {
  return std::make_unique<InProcessCommunicator>(num_devices);
}

void RunCollectiveNode(const ir::Node& n, const DeviceContext& device, const ir::Literal& in, ir::Literal& out) {
  Communicator& comm = *device.comm;
  const int d = device.device;
  const auto start = std::chrono::steady_clock::now();
  struct Timed {  // also when the call throws
    Communicator& comm;
    int d;
    std::chrono::steady_clock::time_point start;
    ~Timed() { comm.AddSeconds(d, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()); }
  } timed{comm, d, start};
  switch (n.op()) {
    case ir::OpKind::kAllReduce: {
      const auto& a = n.attrs_as<ir::AllReduceAttrs>();
      return comm.AllReduce(d, in, out, a.kind, a.groups);
    }
    case ir::OpKind::kAllGather: {
      const auto& a = n.attrs_as<ir::AllGatherAttrs>();
      return comm.AllGather(d, in, out, a.dim, a.groups);
    }
    case ir::OpKind::kReduceScatter: {
      const auto& a = n.attrs_as<ir::ReduceScatterAttrs>();
      return comm.ReduceScatter(d, in, out, a.kind, a.dim, a.groups);
    }
    case ir::OpKind::kAllToAll: {
      const auto& a = n.attrs_as<ir::AllToAllAttrs>();
      return comm.AllToAll(d, in, out, a.split_dim, a.concat_dim, a.groups);
    }
    case ir::OpKind::kCollectivePermute:
      return comm.CollectivePermute(d, in, out, n.attrs_as<ir::CollectivePermuteAttrs>().pairs);
    default: Fail("internal error: {} is not a collective", n.name());
  }
}

}  // namespace axle::runtime
