#include "ir/hash.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace axle::ir {

// Note [Structural hash]
// ~~~~~~~~~~~~~~~~~~~~~~
// HashModule keys the compile cache, so it must say "same computation" exactly when two modules
// are the same up to things that cannot change what is computed or how: value names, source
// locations, the module's name, the order in which independent nodes were created, and the order
// of functions. It must also be the same in every process and on every machine.
//
// It is a Merkle hash over the dataflow graph:
//
//   node(n)     = H('N', op name, attribute fields, [schedule entries], operand value hashes in operand order,
//                   result types and shardings in result order)
//   value(n, i) = H('V', node(n), i)
//   function(f) = H('F', name, value hashes of the results in order,
//                   the node hashes of all nodes, sorted)
//   module(m)   = H(version, 'M', num_replicas, [mesh], [schedule target], entry function name,
//                   function hashes sorted by function name)
//
// A value's hash covers everything that flows into it, so the node order does not matter; the
// sorted multiset of node hashes makes dead nodes (and duplicated nodes) count without making
// their position count. Function order is free except that a module without a "main" runs its
// first function: the entry function's name is therefore hashed on its own.
//
// Each H is XXH3-128 over a byte stream that is defined independently of the host: numbers are
// written little-endian at fixed widths (int64 as 8 bytes, counts as 8 bytes, bool as one byte),
// strings and lists are prefixed by their lengths, every attribute field by its name and a type
// tag, dtypes and enums by their text names (so reordering ops.def or an enum changes nothing),
// literals by dtype, shape and their elements' bytes in little-endian order (so floats hash by bit
// pattern: -0 differs from 0, and NaN payloads differ). Nothing hashes pointers, std::hash or
// padding. Any change to this encoding must bump kHashVersion and the pinned hashes of
// tests/ir/property_test.cc, since it invalidates every cache on disk.

namespace {

constexpr std::string_view kHashVersion = "axle.structural_hash.v1";

struct Hash128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  auto operator<=>(const Hash128&) const = default;
};

// A byte stream in the canonical encoding described in the Note.
class ByteWriter {
 public:
  void Clear() { bytes_.clear(); }
  void U8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void U64(uint64_t v) {  // little-endian
    if constexpr (std::endian::native == std::endian::little) {
      char b[8];
      std::memcpy(b, &v, 8);
      bytes_.append(b, 8);
    } else {
      for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Count(size_t n) { U64(static_cast<uint64_t>(n)); }
  void Str(std::string_view s) {
    Count(s.size());
    bytes_.append(s);
  }
  void Hash(const Hash128& h) {
    U64(h.hi);
    U64(h.lo);
  }
  // Appends elements of `width` bytes each, given in host order, as little-endian bytes (a
  // trailing partial element, which a well-formed literal never has, is copied as is).
  void Elements(const uint8_t* data, size_t size, size_t width) {
    if constexpr (std::endian::native == std::endian::little) {
      bytes_.append(reinterpret_cast<const char*>(data), size);
    } else {
      size_t i = 0;
      for (; i + width <= size; i += width)
        for (size_t j = width; j-- > 0;) U8(data[i + j]);
      for (; i < size; ++i) U8(data[i]);
    }
  }
  Hash128 Digest() const {
    XXH128_hash_t h = XXH3_128bits(bytes_.data(), bytes_.size());
    return {h.high64, h.low64};
  }

 private:
  std::string bytes_;
};

void WriteType(ByteWriter& w, const TensorType& t) {
  w.Str(DTypeName(t.dtype));
  w.Count(t.shape.dims().size());
  for (int64_t d : t.shape.dims()) w.I64(d);
}

void WriteSharding(ByteWriter& w, const std::optional<Sharding>& s) {
  w.U8(s.has_value() ? 1 : 0);
  if (!s) return;
  w.Count(s->dims.size());
  for (const auto& axes : s->dims) {
    w.Count(axes.size());
    for (const std::string& a : axes) w.Str(a);
  }
  w.Count(s->partial.size());
  for (const std::string& a : s->partial) w.Str(a);
}

void WriteLiteral(ByteWriter& w, const Literal& lit) {
  WriteType(w, lit.type());
  // The byte count is hashed too, so that a literal whose bytes disagree with its type cannot
  // collide with a well-formed one.
  std::span<const uint8_t> bytes = lit.bytes();
  w.Count(bytes.size());
  w.Elements(bytes.data(), bytes.size(), static_cast<size_t>(DTypeSize(lit.dtype())));
}

// One attribute field: a type tag, then the value. The overloads cover every FieldRef type; a new
// field type fails to compile here rather than hash as nothing.
void WriteField(ByteWriter& w, const int64_t* v) {
  w.U8('i');
  w.I64(*v);
}
void WriteField(ByteWriter& w, const bool* v) {
  w.U8('b');
  w.U8(*v ? 1 : 0);
}
void WriteField(ByteWriter& w, const std::string* v) {
  w.U8('s');
  w.Str(*v);
}
void WriteField(ByteWriter& w, const DType* v) {
  w.U8('t');
  w.Str(DTypeName(*v));
}
void WriteField(ByteWriter& w, const CompareDir* v) {
  w.U8('c');
  w.Str(EnumName(*v));
}
void WriteField(ByteWriter& w, const ReduceKind* v) {
  w.U8('r');
  w.Str(EnumName(*v));
}
void WriteField(ByteWriter& w, const std::vector<int64_t>* v) {
  w.U8('v');
  w.Count(v->size());
  for (int64_t x : *v) w.I64(x);
}
void WriteField(ByteWriter& w, const ReplicaGroups* v) {
  w.U8('g');
  w.Count(v->size());
  for (const auto& group : *v) {
    w.Count(group.size());
    for (int64_t x : group) w.I64(x);
  }
}
void WriteField(ByteWriter& w, const Literal* v) {
  w.U8('l');
  WriteLiteral(w, *v);
}

void WriteAttrs(ByteWriter& w, const Attrs& attrs) {
  // The fields in place (AttrFields' order) rather than through AttrFields' vector: the trace
  // key writes every node's attributes every step.
  std::visit(
      [&](const auto& s) {
        size_t count = 0;
        s.VisitFields([&](std::string_view, const auto&) { ++count; });
        w.Count(count);
        s.VisitFields([&](std::string_view name, const auto& field) {
          w.Str(name);
          WriteField(w, &field);
        });
      },
      attrs);
}

// Hashes of the nodes of one function and of the values they define.
struct FunctionHasher {
  ByteWriter w;
  std::unordered_map<const Value*, Hash128> value_hashes;

  const Hash128& ValueHash(const Value* v, const Function& f) {
    auto it = value_hashes.find(v);
    if (it == value_hashes.end())
      Fail("HashModule: function @{} uses a value that no earlier node of the function defines",
           f.name());
    return it->second;
  }

  Hash128 NodeHash(const Node& n, const Function& f) {
    w.Clear();
    w.U8('N');
    w.Str(n.name());
    WriteAttrs(w, n.attrs());
    if (!n.schedule().empty()) {  // only when scheduled: the hashes of other nodes stay as they were
      w.U8('S');
      w.Count(n.schedule().size());
      for (const ScheduleEntry& e : n.schedule()) {
        w.Str(e.key);
        w.Count(e.ints.size());
        for (int64_t i : e.ints) w.I64(i);
        w.Str(e.word);
      }
    }
    w.Count(n.num_operands());
    for (const Value* v : n.operands()) w.Hash(ValueHash(v, f));
    w.Count(n.num_results());
    for (size_t i = 0; i < n.num_results(); ++i) {
      WriteType(w, n.result(i)->type());
      WriteSharding(w, n.result(i)->sharding());
    }
    const Hash128 node_hash = w.Digest();
    for (size_t i = 0; i < n.num_results(); ++i) {
      w.Clear();
      w.U8('V');
      w.Hash(node_hash);
      w.Count(i);
      value_hashes[n.result(i)] = w.Digest();
    }
    return node_hash;
  }

  Hash128 Run(const Function& f) {
    std::vector<Hash128> node_hashes;
    node_hashes.reserve(f.nodes().size());
    for (const auto& n : f.nodes()) node_hashes.push_back(NodeHash(*n, f));
    std::sort(node_hashes.begin(), node_hashes.end());
    std::vector<Hash128> result_hashes;
    for (const Value* v : f.results()) result_hashes.push_back(ValueHash(v, f));
    w.Clear();
    w.U8('F');
    w.Str(f.name());
    w.Count(result_hashes.size());
    for (const Hash128& h : result_hashes) w.Hash(h);
    w.Count(node_hashes.size());
    for (const Hash128& h : node_hashes) w.Hash(h);
    return w.Digest();
  }
};

}  // namespace

std::string ModuleHash::ToHex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

ModuleHash HashModule(const Module& m) {
  // (name, hash) per function, sorted: function order is not part of the structure.
  std::vector<std::pair<std::string_view, Hash128>> functions;
  for (const auto& f : m.functions()) functions.emplace_back(f->name(), FunctionHasher().Run(*f));
  std::sort(functions.begin(), functions.end());

  ByteWriter w;
  w.Str(kHashVersion);
  w.U8('M');
  w.I64(m.num_replicas());
  if (const auto& mesh = m.mesh()) {
    // Only with a mesh (hashes of mesh-less modules stay what they were): 'H' differs from the
    // 0 / 1 that follows num_replicas without one.
    w.U8('H');
    w.Count(mesh->axis_names().size());
    for (size_t i = 0; i < mesh->axis_names().size(); ++i) {
      w.Str(mesh->axis_names()[i]);
      w.I64(mesh->shape()[i]);
    }
    for (int64_t d : mesh->device_ids()) w.I64(d);
  }
  if (!m.scheduled_for().empty()) {  // Note [The schedule in the IR]; only when scheduled, as above
    w.U8('S');
    w.Str(m.scheduled_for());
  }
  w.U8(m.functions().empty() ? 0 : 1);
  if (!m.functions().empty()) w.Str(m.entry()->name());
  w.Count(functions.size());
  for (const auto& [name, h] : functions) w.Hash(h);
  const Hash128 h = w.Digest();
  return ModuleHash{h.hi, h.lo};
}

struct NodeSequenceKey::Impl {
  ByteWriter w;
};

NodeSequenceKey::NodeSequenceKey() : impl_(std::make_unique<Impl>()) { impl_->w.Str(kHashVersion); }
NodeSequenceKey::~NodeSequenceKey() = default;

void NodeSequenceKey::AddNode(const Node& n, const Attrs& attrs, const std::vector<int64_t>& operand_ids) {
  ByteWriter& w = impl_->w;
  w.U8('N');
  w.Str(n.name());
  WriteAttrs(w, attrs);
  w.Count(operand_ids.size());
  for (int64_t id : operand_ids) w.I64(id);
  w.Count(n.num_results());
  for (size_t i = 0; i < n.num_results(); ++i) {
    WriteType(w, n.result(i)->type());
    WriteSharding(w, n.result(i)->sharding());
  }
}

void NodeSequenceKey::AddResults(const std::vector<int64_t>& ids) {
  ByteWriter& w = impl_->w;
  w.U8('R');
  w.Count(ids.size());
  for (int64_t id : ids) w.I64(id);
}

void NodeSequenceKey::AddMesh(const std::optional<Mesh>& mesh) {
  ByteWriter& w = impl_->w;
  w.U8(mesh ? 'H' : 'h');
  if (!mesh) return;
  w.Count(mesh->axis_names().size());
  for (size_t i = 0; i < mesh->axis_names().size(); ++i) {
    w.Str(mesh->axis_names()[i]);
    w.I64(mesh->shape()[i]);
  }
  w.Count(mesh->device_ids().size());
  for (int64_t d : mesh->device_ids()) w.I64(d);
}

ModuleHash NodeSequenceKey::Digest() const {
  const Hash128 h = impl_->w.Digest();
  return ModuleHash{h.hi, h.lo};
}

}  // namespace axle::ir
