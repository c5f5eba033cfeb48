// The Axle IR: a Module holds Functions; a Function is a list of Nodes in a valid execution
// order (every operand is defined earlier) and a list of result Values; a Node applies one op
// (ops.def) to operand Values and produces one or more typed result Values.
//
//   module @mlp {
//     func @main {
//       %x = parameter() {index=0} : f32[4,8]
//       %w = parameter() {index=1} : f32[8,2]
//       %y = dot_general(%x, %w) {lhs_contracting=[1], rhs_contracting=[0]} : f32[4,2]
//       return %y
//     }
//   }
//
// Ownership: a Module owns its Functions, a Function its Nodes, a Node its result Values.
// Values are referenced by pointer; a pointer stays valid until its node is erased.
#pragma once

#include <compare>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/attrs.h"
#include "ir/mesh.h"
#include "ir/op.h"
#include "ir/type.h"

namespace axle::ir {

class Node;
class Function;
class Module;

// Note [The schedule in the IR]
// A backend's schedule is compiler output like fusion, so it is written in the module: the order
// of the entry function's nodes is the order the backend runs them, and a node may carry schedule
// entries (`sched{pair=[0, 1], lhs_view=[0, 2304, 1]}` after its attributes), each a key with
// integers or with one word, as XLA's backend_config rides on an HLO instruction. The IR keeps,
// prints, parses, clones and hashes them and gives them no meaning; the backend named by the
// module's `schedule` attribute (Module::scheduled_for, a target such as "cpu-avx2-2t") reads
// them and checks them (src/backends/cpu/schedule_pass.cc, docs/compiler.md). A pass that
// rewrites nodes drops what it does not copy; the schedule pass runs last.
struct ScheduleEntry {
  std::string key;
  std::vector<int64_t> ints;  // printed as one integer when there is one
  std::string word;           // or an identifier (ints empty)
  bool operator==(const ScheduleEntry&) const = default;
};

class Value {
 public:
  Value(Node* node, int index, TensorType type) : node_(node), index_(index), type_(std::move(type)) {}

  // The node that produces this value and which of its results it is.
  Node* node() const { return node_; }
  int index() const { return index_; }

  const TensorType& type() const { return type_; }
  void set_type(TensorType t) { type_ = std::move(t); }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }

  // Text name without '%' (from the parser or set by the user); empty = printer numbers it.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Sharding annotation (SPMD); nullopt = not annotated.
  const std::optional<Sharding>& sharding() const { return sharding_; }
  void set_sharding(std::optional<Sharding> s) { sharding_ = std::move(s); }

 private:
  Node* node_;
  int index_;
  TensorType type_;
  std::string name_;
  std::optional<Sharding> sharding_;
};

// A node's results as a range of Value* without allocating (a traced training step reads them
// for every node several times); converts to a std::vector<Value*> where one is needed.
class ResultRange {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = Value*;
    using difference_type = std::ptrdiff_t;
    using pointer = Value* const*;
    using reference = Value*;
    iterator() = default;
    explicit iterator(Value* p) : p_(p) {}
    Value* operator*() const { return p_; }
    Value* operator[](difference_type i) const { return p_ + i; }
    iterator& operator++() { ++p_; return *this; }
    iterator operator++(int) { iterator t = *this; ++p_; return t; }
    iterator& operator--() { --p_; return *this; }
    iterator& operator+=(difference_type n) { p_ += n; return *this; }
    iterator operator+(difference_type n) const { return iterator(p_ + n); }
    difference_type operator-(const iterator& o) const { return p_ - o.p_; }
    bool operator==(const iterator& o) const { return p_ == o.p_; }
    auto operator<=>(const iterator& o) const { return p_ <=> o.p_; }

   private:
    Value* p_ = nullptr;
  };
  using value_type = Value*;
  using size_type = size_t;
  using const_iterator = iterator;

  ResultRange(Value* first, size_t n) : first_(first), n_(n) {}
  iterator begin() const { return iterator(first_); }
  iterator end() const { return iterator(first_ + n_); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Value* operator[](size_t i) const { return first_ + i; }
  Value* front() const { return first_; }
  Value* back() const { return first_ + (n_ - 1); }
  operator std::vector<Value*>() const { return std::vector<Value*>(begin(), end()); }

 private:
  Value* first_;
  size_t n_;
};

class Node {
 public:
  Node(Function* parent, OpKind op, std::vector<Value*> operands, Attrs attrs,
       const std::vector<TensorType>& result_types, int64_t id = 0);

  OpKind op() const { return op_; }
  const OpInfo& info() const { return GetOpInfo(op_); }
  std::string_view name() const { return OpName(op_); }
  Function* parent() const { return parent_; }

  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(size_t i) const { return operands_[i]; }
  size_t num_operands() const { return operands_.size(); }
  void set_operand(size_t i, Value* v) { operands_[i] = v; }

  size_t num_results() const { return results_.size(); }
  // A node owns its values; a const node still hands out mutable values (as operands do).
  Value* result(size_t i = 0) const { return const_cast<Value*>(&results_[i]); }
  ResultRange results() const { return ResultRange(const_cast<Value*>(results_.data()), results_.size()); }

  // Unique among the nodes its function ever held, increasing in creation order (not position:
  // InsertNode may place a node before older ones). Dense maps over a function's nodes index by
  // it (Function::id_bound()).
  int64_t id() const { return id_; }

  const Attrs& attrs() const { return attrs_; }
  Attrs& mutable_attrs() { return attrs_; }
  // The attribute struct; throws when the node holds another kind.
  template <typename T>
  const T& attrs_as() const {
    const T* p = std::get_if<T>(&attrs_);
    AXLE_CHECK(p != nullptr, "node {} does not hold the requested attribute struct", name());
    return *p;
  }

  // Where the node came from: the .axir line, or the user's call site. May be unknown.
  const SourceLoc& loc() const { return loc_; }
  void set_loc(SourceLoc loc) { loc_ = std::move(loc); }

  // Note [The schedule in the IR]: the backend's entries on this node, in order; the entry of
  // `key`, or nullptr.
  const std::vector<ScheduleEntry>& schedule() const { return schedule_; }
  void set_schedule(std::vector<ScheduleEntry> entries) { schedule_ = std::move(entries); }
  const ScheduleEntry* FindSchedule(std::string_view key) const;

 private:
  Function* parent_;
  OpKind op_;
  std::vector<Value*> operands_;
  std::vector<Value> results_;  // sized once, never reallocated: values' addresses are stable
  Attrs attrs_;
  SourceLoc loc_;
  std::vector<ScheduleEntry> schedule_;
  int64_t id_ = 0;
};

class Function {
 public:
  explicit Function(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The module that holds this function (set by Module::AddFunction; null for a function made
  // on its own). A fusion node finds the function it calls through it.
  Module* module() const { return module_; }
  void set_module(Module* m) { module_ = m; }

  // Nodes in execution order.
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  // Appends a node. Types are taken as given; the Builder infers them, the verifier checks them.
  Node* AddNode(OpKind op, std::vector<Value*> operands, Attrs attrs,
                const std::vector<TensorType>& result_types);
  // Inserts a node before position `pos` of nodes().
  Node* InsertNode(size_t pos, OpKind op, std::vector<Value*> operands, Attrs attrs,
                   const std::vector<TensorType>& result_types);
  // Removes `node`. The caller guarantees that nothing uses its results.
  void EraseNode(Node* node);
  // Puts the nodes in the order `order`, which must hold each of them once (a permutation of
  // nodes(); the caller keeps operands before their users).
  void Reorder(const std::vector<Node*>& order);
  // Replaces every use of `from` (operands and function results) with `to`; `to` takes `from`'s
  // sharding when it has none (a rewrite keeps the user's layout constraints).
  void ReplaceAllUsesWith(Value* from, Value* to);
  // Position of `node` in nodes(), or -1.
  int64_t IndexOf(const Node* node) const;
  // Greater than the id() of every node this function has held.
  int64_t id_bound() const { return next_id_; }

  // The parameter nodes, ordered by their `index` attribute.
  std::vector<Node*> Parameters() const;

  const std::vector<Value*>& results() const { return results_; }
  void set_results(std::vector<Value*> results) { results_ = std::move(results); }

  // The source location of the `return` (for errors).
  const SourceLoc& loc() const { return loc_; }
  void set_loc(SourceLoc loc) { loc_ = std::move(loc); }

 private:
  std::string name_;
  Module* module_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> results_;
  SourceLoc loc_;
  int64_t next_id_ = 0;
};

class Module {
 public:
  explicit Module(std::string name = "module") : name_(std::move(name)) {}
  // A moved module's functions know their new module (Function::module()).
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Replicas the module runs on (SPMD); collectives' replica groups refer to 0..num_replicas-1.
  int64_t num_replicas() const { return num_replicas_; }
  void set_num_replicas(int64_t n) { num_replicas_ = n; }

  // The device mesh its shardings refer to (SPMD), if any. A module with a mesh runs either as one
  // global program (num_replicas 1: shardings are annotations the partitioner reads) or, once
  // partitioned, on mesh().size() replicas (replica r = device r).
  const std::optional<Mesh>& mesh() const { return mesh_; }
  void set_mesh(std::optional<Mesh> mesh) { mesh_ = std::move(mesh); }

  // Note [The schedule in the IR]: the target whose schedule the entry function's node order and
  // schedule entries are ("" : none; printed as the module attribute schedule="...").
  const std::string& scheduled_for() const { return scheduled_for_; }
  void set_scheduled_for(std::string target) { scheduled_for_ = std::move(target); }

  const std::vector<std::unique_ptr<Function>>& functions() const { return functions_; }
  Function* AddFunction(std::string name);
  // The function named `name`, or nullptr.
  Function* FindFunction(std::string_view name) const;
  // The entry point: the function named "main", else the first one. Throws when empty.
  Function* entry() const;

  // A deep copy (names, locations and shardings included).
  std::unique_ptr<Module> Clone() const;

 private:
  std::string name_;
  int64_t num_replicas_ = 1;
  std::optional<Mesh> mesh_;
  std::string scheduled_for_;
  std::vector<std::unique_ptr<Function>> functions_;
};

}  // namespace axle::ir
