// Row reductions and row kernels (emit_cpp.h; Note [Row kernels] in row_fusion.cc).
//
// Both loop over rows o of R elements; a row reduction is a row kernel with one reduce and one
// loop. Per row, each loop runs over the row's elements i = o R + r in strips of 256: the
// strip's nodes (independent elements: vectorised), each reduce's operand into a local buffer,
// then each buffer accumulated in order. A reduce's result, and the per-row nodes computed from
// it, are scalars of the row that the next loops read (a broadcast along the row of a per-row
// value is that scalar). A row node is computed in the first loop that needs it and computed
// again in a later one, except that a costly one (exp, tanh, a division, ...) is kept in a row
// buffer instead. Every value is the same operations in the same order as in the separate
// kernels it replaces, so results are bitwise those.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/emit_internal.h"

namespace axle::codegen::internal {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

// A kernel's row buffers together take at most this much stack (more: values are recomputed).
constexpr int64_t kRowBufferBytes = 64 * 1024;

// Ops whose value a later loop of the row reads from a row buffer rather than computing again.
bool Costly(const Node& n) {
  switch (n.op()) {
    case OpKind::kSqrt: case OpKind::kRsqrt: case OpKind::kDiv: case OpKind::kRem:
      return true;
    default:
      return IsTranscendental(n);
  }
}

// The accumulation of one reduce over a row (its acc, lane and buf variables carry `suffix`).
// The interpreter's numerics: in double, in order. Fast math, f32 sums of rows >= 64: 8 double
// lanes (lane k takes the strip's elements k, k + 8, ...; the tail goes to acc), summed in lane
// order at the end. The in-order chain of double adds is latency bound (4 cycles an element);
// the lanes vectorise. Reassociated, so not bitwise the interpreter's, but deterministic (lanes
// follow positions, not threads). Max and min (f32, f64) take W lanes of the element type (up to
// two 512-bit registers' worth), folded pairwise at the end: ax_max / ax_min are associative and
// commutative (+0 beats -0 whatever the order, any NaN wins), so the result is the in-order one
// except for which NaN's payload comes out. The in-order select chain costs ~5 cycles an element:
// GPT-2 small's row max over 512 logits took 0.47 ms for 512 rows. With 8 lanes each row was
// still a chain of R / 8 dependent selects (~20 cycles each): the attention's masked row max
// (2048 rows of 64) took 155-164 us on one core; with 32 lanes (2 links a row) and a vectorised
// fold, 105-118 us (the LM head's logits, 512 rows of 512: 153-161 -> 93-104 us).
struct Accumulator {
  const Node* reduce = nullptr;
  std::string suffix;
  ir::ReduceKind kind = ir::ReduceKind::kSum;
  DType xt = DType::kF32;
  bool sum_lanes = false, minmax_lanes = false;
  int lanes = 8;  // W

  Accumulator(const Node* red, size_t index, int64_t R, const EmitOptions& options)
      : reduce(red), suffix(index == 0 ? "" : std::to_string(index)) {
    kind = red->attrs_as<ir::ReduceAttrs>().kind;
    xt = red->operand(0)->dtype();
    sum_lanes = !options.exact_math && kind == ir::ReduceKind::kSum && red->result()->dtype() == DType::kF32 && R >= 64;
    minmax_lanes = !options.exact_math && kind != ir::ReduceKind::kSum && (xt == DType::kF32 || xt == DType::kF64) &&
                   R >= 16;
    if (minmax_lanes) {
      const int most = xt == DType::kF32 ? 32 : 16;
      while (lanes < most && 4 * lanes <= R) lanes *= 2;  // at least 2 links a row
    }
  }
  std::string acc() const { return "acc" + suffix; }
  std::string lane() const { return "lane" + suffix; }
  std::string buf() const { return "buf" + suffix; }
  const char* fold() const { return kind == ir::ReduceKind::kMax ? "ax_max" : "ax_min"; }

  // Per row, before the loop.
  std::string Begin() const {
    std::string s = fmt::format("    double {} = {};\n", acc(), ReduceInit(kind));
    // A float lane starts at a float infinity (a double one would be a narrowing conversion).
    const std::string init = xt == DType::kF32 && minmax_lanes
                                 ? (kind == ir::ReduceKind::kMax ? "-__builtin_inff()" : "__builtin_inff()")
                                 : std::string(ReduceInit(kind));
    if (sum_lanes)
      s += fmt::format("    ax_v8d {} = ax_lanes_init({});\n", lane(), init);
    else if (minmax_lanes)
      s += fmt::format("    {0} {1}[{2}];\n    for (int k = 0; k < {2}; ++k) {1}[k] = {3};\n", CType(xt), lane(), lanes, init);
    return s;
  }
  // After a strip's loop: the strip's buf[0, m) accumulated.
  std::string Strip() const {
    if (!sum_lanes && !minmax_lanes)
      return fmt::format("      for (int64_t r = 0; r < m; ++r) {}\n", ReduceCombine(kind, acc(), buf() + "[r]"));
    const int W = sum_lanes ? 8 : lanes;
    std::string s = "      {\n        int64_t r = 0;\n";
    s += fmt::format("        for (; r + {0} <= m; r += {0})\n", W);
    if (sum_lanes)
      s += fmt::format("          ax_lanes_add({}, {} + r);\n", lane(), buf());
    else
      s += fmt::format("          for (int k = 0; k < {0}; ++k) {1}[k] = {2}({1}[k], {3}[r + k]);\n", W, lane(), fold(), buf());
    s += fmt::format("        for (; r < m; ++r) {}\n      }}\n", ReduceCombine(kind, acc(), buf() + "[r]"));
    return s;
  }
  // After the loop: the lanes folded into acc.
  std::string End() const {
    if (sum_lanes) return fmt::format("    for (int k = 0; k < 8; ++k) {}\n", ReduceCombine(kind, acc(), lane() + "[k]"));
    if (!minmax_lanes) return "";
    std::string s;
    for (int w = lanes / 2; w >= 8; w /= 2)  // constant trip counts: each step one vector op
      s += fmt::format("    for (int k = 0; k < {0}; ++k) {1}[k] = {2}({1}[k], {1}[k + {0}]);\n", w, lane(), fold());
    // w = 4, 2, 1: vector selects, not branches (ax_fold8_max in fast_math_prelude.h)
    const std::string folded = fmt::format("ax_fold8_{}({})", kind == ir::ReduceKind::kMax ? "max" : "min", lane());
    return s + fmt::format("    {}\n", ReduceCombine(kind, acc(), folded));
  }
};

// A row buffer's element type: the value as the loops hold it (a half as its float, which it
// is exactly), bool as a byte.
const char* BufferType(DType t) { return t == DType::kBool ? "uint8_t" : CType(t); }

}  // namespace

void EmitRowKernel(const Kernel& k, const std::string& name, const EmitOptions& options, std::string& s) {
  const bool row_kernel = IsRowKernel(k);
  const std::vector<const Node*> reduces = row_kernel ? k.reduces : std::vector<const Node*>{k.reduce};
  const int64_t R = k.reduced;
  const std::unordered_set<const Node*> members(k.nodes.begin(), k.nodes.end());
  std::unordered_map<const Node*, size_t> reduce_index;
  for (size_t q = 0; q < reduces.size(); ++q) reduce_index[reduces[q]] = q;
  // A row kernel's nodes of num_elements elements are per row; a row reduction has none.
  auto per_row = [&](const Node* n) {
    return row_kernel && !reduce_index.count(n) && n->result()->shape().NumElements() == k.num_elements;
  };
  // A broadcast along the rows of an outside per-row value is read once per row, before the
  // loops: read in the loop, GCC could not hoist it past the loop's stores (they might alias it)
  // and left the loop scalar (a layer norm backward's row kernel ran 3x slower).
  auto hoisted = [&](const Node* n) {
    return n->op() == OpKind::kBroadcastInDim && !members.count(n->operand(0)->node()) &&
           IsRowBroadcast(*n, k.num_elements, R) &&
           std::find(k.outputs.begin(), k.outputs.end(), n->result()) == k.outputs.end();
  };
  auto is_row = [&](const Node* n) { return !reduce_index.count(n) && !per_row(n) && !hoisted(n); };

  // Levels: a row node is computed in loop `level` or later; a reduce accumulates in the loop of
  // its operand's level, and its result, as a per-row node's, is known from loop `level` on
  // (per-row nodes of level l are computed before loop l; level == loops: after the last).
  std::unordered_map<const Node*, int> level;
  int loops = 0;
  for (const Node* n : k.nodes) {
    int l = 0;
    for (const Value* v : n->operands())
      if (members.count(v->node())) l = std::max(l, level.at(v->node()));
    if (reduce_index.count(n)) loops = std::max(loops, ++l);
    else if (is_row(n)) loops = std::max(loops, l + 1);
    level[n] = l;
  }
  std::unordered_map<const Value*, size_t> out_index;
  for (size_t j = 0; j < k.outputs.size(); ++j) out_index[k.outputs[j]] = j;

  // Which row nodes each loop computes, which it reads from a row buffer, and which get one.
  std::vector<std::vector<const Node*>> roots(static_cast<size_t>(loops));
  for (const Node* red : reduces)
    if (members.count(red->operand(0)->node())) roots[static_cast<size_t>(level[red] - 1)].push_back(red->operand(0)->node());
  for (const Value* v : k.outputs)
    if (is_row(v->node())) roots[static_cast<size_t>(level[v->node()])].push_back(v->node());
  std::vector<std::set<const Node*>> compute(roots.size()), reload(roots.size());
  std::unordered_map<const Node*, int> home;  // the first loop that computes a node
  std::unordered_map<const Node*, size_t> buffer;  // a node's row buffer
  int64_t buffer_bytes = 0;
  for (size_t t = 0; t < roots.size(); ++t) {
    std::vector<const Node*> stack = roots[t];
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (compute[t].count(n) || reload[t].count(n)) continue;
      const DType dt = n->result()->dtype();
      const int64_t bytes = R * (dt == DType::kBF16 || dt == DType::kF16 ? 4 : static_cast<int64_t>(DTypeSize(dt)));
      if (home.count(n) && !buffer.count(n) && Costly(*n) && buffer_bytes + bytes <= kRowBufferBytes) {
        buffer_bytes += bytes;
        const size_t b = buffer.size();
        buffer[n] = b;
      }
      if (home.count(n) && buffer.count(n)) {
        reload[t].insert(n);
        continue;
      }
      compute[t].insert(n);
      home.emplace(n, static_cast<int>(t));
      for (const Value* v : n->operands())
        if (members.count(v->node()) && is_row(v->node())) stack.push_back(v->node());
    }
  }

  if (row_kernel) {
    std::vector<std::string> kinds;
    for (const Node* red : reduces)
      kinds.emplace_back(ir::EnumNames<ir::ReduceKind>::kNames[static_cast<size_t>(red->attrs_as<ir::ReduceAttrs>().kind)]);
    s += fmt::format("\n// row kernel: {} reductions ({}) in {} loops over {} rows of {}; {} nodes, {} inputs, {} outputs\n",
                     reduces.size(), fmt::join(kinds, ", "), loops, k.num_elements, R, k.nodes.size(), k.inputs.size(),
                     k.outputs.size());
  } else {
    s += fmt::format("\n// {} row reduction: {} prologue nodes, {} inputs, {} outputs, {} elements to {}\n",
                     ir::EnumNames<ir::ReduceKind>::kNames[static_cast<size_t>(k.reduce->attrs_as<ir::ReduceAttrs>().kind)],
                     k.nodes.size() - 1, k.inputs.size(), k.outputs.size(), PrologueElements(k), k.num_elements);
  }
  s += fmt::format("extern \"C\" void {}(const void* const* in, void* const* out, int64_t begin, int64_t end) {{\n", name);
  for (size_t j = 0; j < k.inputs.size(); ++j)
    s += fmt::format("  const {0}* in{1} = static_cast<const {0}*>(in[{1}]);\n", SType(k.inputs[j]->dtype()), j);
  for (size_t j = 0; j < k.outputs.size(); ++j)
    s += fmt::format("  {0}* out{1} = static_cast<{0}*>(out[{1}]);\n", SType(k.outputs[j]->dtype()), j);
  BodyContext c(k);
  s += c.ScalarDecls();
  std::vector<const Node*> buffered(buffer.size());  // in buffer order: the source is deterministic
  for (const auto& [n, b] : buffer) buffered[b] = n;
  for (size_t b = 0; b < buffered.size(); ++b)
    s += fmt::format("  {} rb{}[{}];\n", BufferType(buffered[b]->result()->dtype()), b, R);
  std::vector<Accumulator> acc;
  for (size_t q = 0; q < reduces.size(); ++q) {
    acc.emplace_back(reduces[q], q, R, options);
    s += fmt::format("  {} {}[256];\n", CType(acc.back().xt), acc.back().buf());
  }
  s += "  for (int64_t o = begin; o < end; ++o) {\n";

  std::unordered_map<const Value*, std::string> row_var, per_row_var;
  c.member = [&](const Value* v) { return members.count(v->node()) > 0; };
  c.operand = [&](const Value* v) -> std::string {
    if (auto it = row_var.find(v); it != row_var.end()) return it->second;
    if (auto it = per_row_var.find(v); it != per_row_var.end()) return it->second;
    return c.LoadAtIndex(v);
  };
  auto store = [&](const Value* v, const std::string& var, const std::string& index, const std::string& ind) {
    auto it = out_index.find(v);
    if (it == out_index.end()) return std::string();
    return fmt::format("{}out{}[{}] = {};\n", ind, it->second, index, StoreText(v->dtype(), var));
  };
  int counter = 0;
  auto emit_per_row = [&](int l) {
    for (const Node* n : k.nodes) {
      if (!per_row(n) || level[n] != l) continue;
      const std::string v = fmt::format("p{}", counter++);
      s += fmt::format("    const {} {} = {};  // {}\n", CType(n->result()->dtype()), v, NodeExpr(*n, Index{}, c, options), n->name());
      per_row_var[n->result()] = v;
      s += store(n->result(), v, "o", "    ");
    }
  };
  if (row_kernel) s += "    const int64_t i = o;  // per-row values are at the row's index\n";
  for (const Node* n : k.nodes) {
    if (!hoisted(n)) continue;
    const std::string v = fmt::format("p{}", counter++);
    s += fmt::format("    const {} {} = {};  // {}\n", CType(n->result()->dtype()), v, c.Load(n->operand(0), "o"), n->name());
    per_row_var[n->result()] = v;
  }
  const Index ix{R, "o", "(r0 + r)"};
  for (int t = 0; t < loops; ++t) {
    emit_per_row(t);
    std::vector<const Accumulator*> here;
    for (const Accumulator& a : acc)
      if (level[a.reduce] - 1 == t) here.push_back(&a);
    for (const Accumulator* a : here) s += a->Begin();
    s += fmt::format("    for (int64_t r0 = 0; r0 < {0}; r0 += 256) {{\n", R);
    // A row of at most one strip: a constant trip count (no vector epilogue to dispatch).
    s += R <= 256 ? fmt::format("      constexpr int64_t m = {};\n", R)
                  : fmt::format("      const int64_t m = {0} - r0 < 256 ? {0} - r0 : 256;\n", R);
    s += "#pragma GCC ivdep\n";
    s += "      for (int64_t r = 0; r < m; ++r) {\n";
    s += fmt::format("        const int64_t i = o * {} + r0 + r;\n", R);
    row_var.clear();
    const size_t tt = static_cast<size_t>(t);
    for (const Node* n : k.nodes) {
      const bool from_buffer = reload[tt].count(n) > 0;
      if (!from_buffer && !compute[tt].count(n)) continue;
      const std::string v = fmt::format("v{}", counter++);
      const std::string e = from_buffer ? fmt::format("rb{}[(r0 + r)]", buffer.at(n)) : NodeExpr(*n, ix, c, options);
      s += fmt::format("        const {} {} = {};  // {}\n", CType(n->result()->dtype()), v, e, n->name());
      row_var[n->result()] = v;
      if (from_buffer) continue;
      if (buffer.count(n) && home.at(n) == t) s += fmt::format("        rb{}[(r0 + r)] = {};\n", buffer.at(n), v);
      if (level[n] == t) s += store(n->result(), v, "i", "        ");
    }
    for (const Accumulator* a : here) s += fmt::format("        {}[r] = {};\n", a->buf(), c.operand(a->reduce->operand(0)));
    s += "      }\n";
    for (const Accumulator* a : here) s += a->Strip();
    s += "    }\n";
    row_var.clear();
    for (const Accumulator* a : here) {
      s += a->End();
      const std::string v = fmt::format("p{}", counter++);
      s += fmt::format("    const {} {} = {};  // reduce\n", CType(a->reduce->result()->dtype()), v,
                       ReduceFinish(*a->reduce, R, a->acc()));
      per_row_var[a->reduce->result()] = v;
      s += store(a->reduce->result(), v, "o", "    ");
    }
  }
  emit_per_row(loops);
  s += "  }\n}\n";
}

}  // namespace axle::codegen::internal
