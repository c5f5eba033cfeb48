// The C++ emitter (see emit_cpp.h).
#include "backends/cpu/emit_cpp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/emit_internal.h"
#include "backends/cpu/fast_math_prelude.h"
#include "backends/cpu/scalar_functions_text.h"  // generated (CMakeLists.txt)
#include "core/error.h"

namespace axle::codegen::internal {

using ir::Node;
using ir::OpKind;
using ir::Value;


// Note [Halves in generated kernels]
// A bf16 or f16 value is a float in the kernel: loaded by widening (exact), and every op whose
// result is a half computes in float and rounds to the half at once (ax_round_bf16 / f16, the
// interpreter's FloatToBF16 / FloatToF16 from core/half_functions.inc), so each value in the loop
// is exactly the half the interpreter holds, and a store only narrows the bits. Ops that cannot
// change a half's value (broadcast, reshape, slice, transpose, select) are not rounded. An f64
// becomes a half through round-to-odd f32 (Note [Single rounding]); reductions of halves
// accumulate in double as the others and round once. In fast math, the transcendental functions
// of a half are the f32 polynomials' (emit_cpp.h: FastMathUlpBound f32 ulps, then one rounding to
// the half: at most one half ulp from the interpreter's, equal unless the f32 result sits next to
// a rounding boundary of the half).
bool IsHalf(DType t) { return t == DType::kBF16 || t == DType::kF16; }

const char* CType(DType t) {
  switch (t) {
    case DType::kBF16:
    case DType::kF16:
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBool: return "bool";
    case DType::kI8: return "int8_t";
    case DType::kI32: return "int32_t";
    case DType::kI64: return "int64_t";
    case DType::kU8: return "uint8_t";
    case DType::kU32: return "uint32_t";
    default: Fail("internal error: codegen of dtype {}", DTypeName(t));
  }
}
// Storage type (bool is one byte 0/1, a half its 16 bits).
const char* SType(DType t) {
  if (IsHalf(t)) return "uint16_t";
  return t == DType::kBool ? "uint8_t" : CType(t);
}

std::string StoreText(DType t, const std::string& v) {
  if (t == DType::kBool) return fmt::format("static_cast<uint8_t>({})", v);
  if (t == DType::kBF16) return fmt::format("ax_f32_to_bf16({})", v);
  if (t == DType::kF16) return fmt::format("ax_f32_to_f16({})", v);
  return v;
}

std::string LoadText(DType t, const std::string& stored) {
  if (t == DType::kBool) return fmt::format("({} != 0)", stored);
  if (t == DType::kBF16) return fmt::format("ax_bf16_to_f32({})", stored);
  if (t == DType::kF16) return fmt::format("ax_f16_to_f32({})", stored);
  return stored;
}

namespace {
// `e`, a float expression, rounded to half dtype t (Note [Halves in generated kernels]).
std::string RoundTo(DType t, const std::string& e) {
  if (t == DType::kBF16) return fmt::format("ax_round_bf16({})", e);
  if (t == DType::kF16) return fmt::format("ax_round_f16({})", e);
  return e;
}
}  // namespace

std::string CompareOp(ir::CompareDir d) {
  switch (d) {
    case ir::CompareDir::kEq: return "==";
    case ir::CompareDir::kNe: return "!=";
    case ir::CompareDir::kLt: return "<";
    case ir::CompareDir::kLe: return "<=";
    case ir::CompareDir::kGt: return ">";
    case ir::CompareDir::kGe: return ">=";
  }
  return "==";
}

// Integer (and integer <-> float) expressions, as the interpreter computes them.
std::string IntExpr(const Node& n, const std::vector<std::string>& a) {
  const DType r = n.result()->dtype();
  const std::string T = CType(r);
  auto f = [&](const char* fn) { return fmt::format("{}<{}>({})", fn, T, fmt::join(a, ", ")); };
  switch (n.op()) {
    case OpKind::kNeg: return fmt::format("ax_isub<{}>(0, {})", T, a[0]);
    case OpKind::kAbs: return f("ax_iabs");
    case OpKind::kSign: return f("ax_isign");
    case OpKind::kAdd: return f("ax_iadd");
    case OpKind::kSub: return f("ax_isub");
    case OpKind::kMul: return f("ax_imul");
    case OpKind::kDiv: return f("ax_idiv");
    case OpKind::kRem: return f("ax_irem");
    case OpKind::kMax: return f("ax_imaxf");
    case OpKind::kMin: return f("ax_iminf");
    case OpKind::kClamp:
      return fmt::format("ax_iminf<{0}>(ax_imaxf<{0}>({1}, {2}), {3})", T, a[1], a[0], a[2]);
    case OpKind::kNot: return fmt::format("static_cast<{}>(~{})", T, a[0]);
    case OpKind::kAnd: return fmt::format("static_cast<{}>({} & {})", T, a[0], a[1]);
    case OpKind::kOr: return fmt::format("static_cast<{}>({} | {})", T, a[0], a[1]);
    case OpKind::kXor: return fmt::format("static_cast<{}>({} ^ {})", T, a[0], a[1]);
    case OpKind::kConvert: {
      const DType from = n.operand(0)->dtype();
      if (from == r) return a[0];
      if (r == DType::kBool) return a[0] + " != 0";
      if (from == DType::kBool) return fmt::format("{0} ? {1}(1) : {1}(0)", a[0], T);
      if (IsFloat(from)) return fmt::format("ax_f2i<{}>(static_cast<double>({}))", T, a[0]);
      // integer -> integer modulo 2^N; integer -> f32/f64 one rounding of the exact value.
      return fmt::format("static_cast<{}>({})", T, a[0]);
    }
    default: Fail("internal error: no integer codegen for op {}", n.name());
  }
}

namespace {
std::string FloatExpr(const Node& n, const std::vector<std::string>& a, const EmitOptions& options);
}  // namespace

std::string Expr(const Node& n, const std::vector<std::string>& a, const EmitOptions& options) {
  const DType r = n.result()->dtype();
  const bool int_op = IsInteger(r) || (n.op() == OpKind::kConvert && IsInteger(n.operand(0)->dtype()) &&
                                       r != DType::kBool);
  if (int_op && n.op() != OpKind::kSelect) return IntExpr(n, a);
  // Note [Halves in generated kernels]: a half result is rounded, unless the op only moves or
  // picks values of its own dtype.
  const bool exact = n.op() == OpKind::kSelect || (n.op() == OpKind::kConvert && n.operand(0)->dtype() == r);
  return exact ? FloatExpr(n, a, options) : RoundTo(r, FloatExpr(n, a, options));
}

namespace {
std::string FloatExpr(const Node& n, const std::vector<std::string>& a, const EmitOptions& options) {
  const DType r = n.result()->dtype();
  const std::string T = CType(r);
  auto call = [&](const char* fn) { return fmt::format("{}({})", fn, a[0]); };
  // The fast f32 functions, for f32 and (rounded after) for halves; sin and cos only for f32
  // (Note [Checked sin and cos] checks f32 kernels alone).
  if (!options.exact_math && (r == DType::kF32 || IsHalf(r))) {
    switch (n.op()) {
      case OpKind::kExp: return call("ax_fexp");
      case OpKind::kLog: return call("ax_flog");
      case OpKind::kLog1p: return call("ax_flog1p");
      case OpKind::kTanh: return call("ax_ftanh");
      case OpKind::kLogistic: return call("ax_flogistic");
      case OpKind::kErf: return call("ax_ferf");
      case OpKind::kSin: if (options.fast_trig && r == DType::kF32) return call("ax_fsin"); break;
      case OpKind::kCos: if (options.fast_trig && r == DType::kF32) return call("ax_fcos"); break;
      default: break;
    }
  }
  switch (n.op()) {
    case OpKind::kNeg: return "-" + a[0];
    case OpKind::kAbs: return call("std::fabs");
    case OpKind::kExp: return call("std::exp");
    case OpKind::kLog: return call("std::log");
    case OpKind::kLog1p: return call("std::log1p");
    case OpKind::kTanh: return call("std::tanh");
    case OpKind::kLogistic: return fmt::format("{0}(1) / ({0}(1) + std::exp(-{1}))", T, a[0]);
    case OpKind::kSqrt: return call("std::sqrt");
    case OpKind::kRsqrt: return fmt::format("{}(1) / std::sqrt({})", T, a[0]);
    case OpKind::kSin: return call("std::sin");
    case OpKind::kCos: return call("std::cos");
    case OpKind::kErf: return call("std::erf");
    case OpKind::kFloor: return call("std::floor");
    case OpKind::kCeil: return call("std::ceil");
    case OpKind::kSign: return call("ax_sign");
    case OpKind::kIsFinite: return call("std::isfinite");
    case OpKind::kNot: return "!" + a[0];
    case OpKind::kAdd: return a[0] + " + " + a[1];
    case OpKind::kSub: return a[0] + " - " + a[1];
    case OpKind::kMul: return a[0] + " * " + a[1];
    case OpKind::kDiv: return a[0] + " / " + a[1];
    case OpKind::kRem: return fmt::format("std::fmod({}, {})", a[0], a[1]);
    case OpKind::kPow: return fmt::format("std::pow({}, {})", a[0], a[1]);
    case OpKind::kMax: return fmt::format("ax_max({}, {})", a[0], a[1]);
    case OpKind::kMin: return fmt::format("ax_min({}, {})", a[0], a[1]);
    case OpKind::kAtan2: return fmt::format("std::atan2({}, {})", a[0], a[1]);
    case OpKind::kAnd: return a[0] + " && " + a[1];
    case OpKind::kOr: return a[0] + " || " + a[1];
    case OpKind::kXor: return a[0] + " != " + a[1];
    case OpKind::kCompare:
      return fmt::format("{} {} {}", a[0], CompareOp(n.attrs_as<ir::CompareAttrs>().dir), a[1]);
    case OpKind::kSelect: return fmt::format("{} ? {} : {}", a[0], a[1], a[2]);
    case OpKind::kClamp: return fmt::format("ax_min(ax_max({}, {}), {})", a[1], a[0], a[2]);
    case OpKind::kConvert: {
      const DType from = n.operand(0)->dtype();
      if (from == r) return a[0];
      if (r == DType::kBool) return a[0] + " != 0";
      if (from == DType::kBool) return fmt::format("{0} ? {1}(1) : {1}(0)", a[0], T);
      // Float to float: halves and f32 are floats here; a half from f64 rounds through odd f32.
      if (r == DType::kF64) return fmt::format("static_cast<double>({})", a[0]);
      if (from != DType::kF64) return a[0];
      return r == DType::kF32 ? call("ax_narrow") : call("ax_f64_to_f32_odd");
    }
    default: Fail("internal error: no codegen for op {}", n.name());
  }
}
}  // namespace

std::string Index::Coord(int64_t stride, int64_t extent, bool mod) const {
  const int64_t L = row;
  if (L > 0 && L % (stride * extent) == 0) {  // within a row: a function of j alone
    std::string c = stride == 1 ? j : fmt::format("({} / {})", j, stride);
    return mod && stride * extent != L ? fmt::format("({} % {})", c, extent) : c;
  }
  if (L > 0 && stride % L == 0) {  // whole rows: a function of r alone
    std::string c = stride == L ? r : fmt::format("({} / {})", r, stride / L);
    return mod ? fmt::format("({} % {})", c, extent) : c;
  }
  std::string c = stride == 1 ? "i" : fmt::format("(i / {})", stride);
  return mod ? fmt::format("({} % {})", c, extent) : c;
}

// Flat index into broadcast_in_dim's operand for flat output index `i`.
std::string BroadcastIndex(const Node& n, const Index& ix) {
  const std::vector<int64_t>& out = n.result()->shape().dims();
  const std::vector<int64_t>& in = n.operand(0)->shape().dims();
  const std::vector<int64_t>& dims = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
  std::vector<int64_t> out_stride(out.size(), 1), in_stride(in.size(), 1);
  for (size_t d = out.size(); d-- > 1;) out_stride[d - 1] = out_stride[d] * out[d];
  for (size_t d = in.size(); d-- > 1;) in_stride[d - 1] = in_stride[d] * in[d];
  std::string e;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == 1) continue;
    const size_t od = static_cast<size_t>(dims[k]);
    std::string coord = ix.Coord(out_stride[od], out[od], od != 0);
    std::string term = in_stride[k] == 1 ? coord : fmt::format("{} * {}", coord, in_stride[k]);
    e += e.empty() ? term : " + " + term;
  }
  return e.empty() ? "0" : e;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) st[d - 1] = st[d] * dims[d];
  return st;
}

// Coordinate d of the flat index i of a row-major array of `dims`.
std::string Coord(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, size_t d, const Index& ix) {
  return ix.Coord(strides[d], dims[d], d != 0);
}

// Flat index into a slice's or transpose's operand for flat output index `i`. Output dims of size
// 1 are dropped and adjacent dims that stay contiguous in the operand are merged first, so a
// slice along the leading dim is `i + offset` (no division, vectorises).
std::string MappedIndex(const Node& n, const Index& ix) {
  const std::vector<int64_t>& out = n.result()->shape().dims();
  const std::vector<int64_t>& in = n.operand(0)->shape().dims();
  const std::vector<int64_t> is = RowMajorStrides(in);
  std::vector<int64_t> size, step;  // per merged output dim: extent, operand elements per unit
  int64_t offset = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t st = 0;
    if (n.op() == OpKind::kSlice) {
      const auto& a = n.attrs_as<ir::SliceAttrs>();
      offset += a.start[d] * is[d];
      st = a.strides[d] * is[d];
    } else {
      st = is[static_cast<size_t>(n.attrs_as<ir::TransposeAttrs>().perm[d])];
    }
    if (out[d] == 1) continue;
    if (!size.empty() && step.back() == st * out[d]) {
      size.back() *= out[d];
      step.back() = st;
    } else {
      size.push_back(out[d]);
      step.push_back(st);
    }
  }
  const std::vector<int64_t> os = RowMajorStrides(size);
  std::vector<std::string> terms;
  for (size_t d = 0; d < size.size(); ++d) {
    const std::string c = Coord(size, os, d, ix);
    terms.push_back(step[d] == 1 ? c : fmt::format("{} * {}", c, step[d]));
  }
  if (offset != 0 || terms.empty()) terms.push_back(fmt::format("{}", offset));
  return fmt::format("{}", fmt::join(terms, " + "));
}

// iota's value at flat index i: its coordinate along `dim`, converted as `convert` would.
std::string IotaExpr(const Node& n, const Index& ix) {
  const std::vector<int64_t>& out = n.result()->shape().dims();
  const size_t d = static_cast<size_t>(n.attrs_as<ir::IotaAttrs>().dim);
  const std::string c = fmt::format("static_cast<int64_t>({})", Coord(out, RowMajorStrides(out), d, ix));
  const DType r = n.result()->dtype();
  if (r == DType::kBool) return c + " != 0";
  return fmt::format("static_cast<{}>({})", CType(r), c);
}

// An integer scalar constant is inlined into the source (so division by it can become a shift).
bool InlinedConstant(const Value* v) {
  return IsInteger(v->dtype()) && v->shape().NumElements() == 1 && v->node()->op() == OpKind::kConstant;
}
std::string ConstantText(const Value* v) {
  const ir::Literal& lit = v->node()->attrs_as<ir::ConstantAttrs>().value;
  const int64_t x = lit.GetInt64(0);
  if (v->dtype() == DType::kI64 && x == INT64_MIN) return "static_cast<int64_t>(INT64_MIN)";
  if (v->dtype() == DType::kI64) return fmt::format("static_cast<int64_t>({}LL)", x);
  if (v->dtype() == DType::kU32) return fmt::format("static_cast<uint32_t>({}U)", static_cast<uint32_t>(x));
  return fmt::format("static_cast<{}>({})", CType(v->dtype()), x);
}

// True when input v of kernel k is read as a scalar at element 0 (not at the loop index).
bool ScalarRead(const Value* v, const Kernel& k) {
  return v->shape().NumElements() == 1 && PrologueElements(k) != 1;
}

BodyContext::BodyContext(const Kernel& k) : kernel(&k) {
  for (size_t j = 0; j < k.inputs.size(); ++j) input_index[k.inputs[j]] = static_cast<int>(j);
}

std::string BodyContext::Load(const Value* v, const std::string& index) const {
  if (InlinedConstant(v)) return ConstantText(v);
  const int j = input_index.at(v);
  if (index == "0" && v->shape().NumElements() == 1) return fmt::format("s{}", j);  // ScalarDecls
  return LoadText(v->dtype(), fmt::format("in{}[{}]", j, index));
}

std::string BodyContext::ScalarDecls() const {
  std::string s;
  for (size_t j = 0; j < kernel->inputs.size(); ++j) {
    const Value* v = kernel->inputs[j];
    if (v->shape().NumElements() != 1 || InlinedConstant(v)) continue;
    s += fmt::format("  const {} s{} = {};\n", CType(v->dtype()), j, LoadText(v->dtype(), fmt::format("in{}[0]", j)));
  }
  return s;
}

std::string BodyContext::LoadAtIndex(const Value* v) const { return Load(v, ScalarRead(v, *kernel) ? "0" : "i"); }

std::string NodeExpr(const Node& n, const Index& ix, const BodyContext& c, const EmitOptions& options) {
  if (n.op() == OpKind::kBroadcastInDim) {
    const Value* x = n.operand(0);
    return c.member(x) ? c.operand(x) : c.Load(x, BroadcastIndex(n, ix));
  }
  if (IsIndexMap(n)) return c.Load(n.operand(0), MappedIndex(n, ix));  // never of a member (fusion.h)
  if (n.op() == OpKind::kIota) return IotaExpr(n, ix);
  if (n.op() == OpKind::kReshape) return c.operand(n.operand(0));
  std::vector<std::string> a;
  for (const Value* v : n.operands()) a.push_back(c.operand(v));
  return Expr(n, a, options);
}

const char* ReduceInit(ir::ReduceKind kind) {
  return kind == ir::ReduceKind::kSum ? "-0.0" : kind == ir::ReduceKind::kMax ? "-__builtin_inf()" : "__builtin_inf()";
}

std::string ReduceCombine(ir::ReduceKind kind, const std::string& acc, const std::string& v) {
  const std::string x = fmt::format("static_cast<double>({})", v);
  if (kind == ir::ReduceKind::kSum) return fmt::format("{0} = {0} + {1};", acc, x);
  return fmt::format("{0} = {1}({0}, {2});", acc, kind == ir::ReduceKind::kMax ? "ax_max" : "ax_min", x);
}

std::string ReduceFinish(const Node& reduce, int64_t reduced, const std::string& acc) {
  const DType t = reduce.result()->dtype();
  const std::string T = CType(t);
  if (reduce.attrs_as<ir::ReduceAttrs>().kind == ir::ReduceKind::kSum && reduced == 0) return T + "(0)";
  if (IsHalf(t)) return RoundTo(t, fmt::format("ax_f64_to_f32_odd({})", acc));  // Note [Single rounding]
  return fmt::format("static_cast<{}>({})", T, acc);
}

namespace {

// An f32 sin or cos: fast in fast mode only with a check of its argument (Note [Checked sin and
// cos]).
bool IsF32Trig(const Node& n) {
  return (n.op() == OpKind::kSin || n.op() == OpKind::kCos) && n.result()->dtype() == DType::kF32;
}
bool HasF32Trig(const Kernel& k) {
  return std::any_of(k.nodes.begin(), k.nodes.end(), [](const Node* n) { return IsF32Trig(*n); });
}

// A loop kernel or a column reduction (row reductions and row kernels: emit_rows.cc).
void EmitKernel(const Kernel& k, const std::string& name, const EmitOptions& options, std::string& s) {
  std::unordered_set<const Node*> members(k.nodes.begin(), k.nodes.end());
  if (k.reduce == nullptr)
    s += fmt::format("\n// {} nodes, {} inputs, {} outputs, {} elements\n", k.nodes.size(), k.inputs.size(),
                     k.outputs.size(), k.num_elements);
  else
    s += fmt::format("\n// {} column reduction: {} prologue nodes, {} inputs, {} outputs, {} elements to {}\n",
                     ir::EnumNames<ir::ReduceKind>::kNames[static_cast<size_t>(
                         k.reduce->attrs_as<ir::ReduceAttrs>().kind)],
                     k.nodes.size() - 1, k.inputs.size(), k.outputs.size(), PrologueElements(k), k.num_elements);
  s += fmt::format("extern \"C\" void {}(const void* const* in, void* const* out, int64_t begin, int64_t end) {{\n", name);
  for (size_t j = 0; j < k.inputs.size(); ++j) {
    const char* st = SType(k.inputs[j]->dtype());
    s += fmt::format("  const {0}* in{1} = static_cast<const {0}*>(in[{1}]);\n", st, j);
  }
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const char* st = SType(k.outputs[j]->dtype());
    s += fmt::format("  {0}* out{1} = static_cast<{0}*>(out[{1}]);\n", st, j);
  }
  BodyContext c(k);
  s += c.ScalarDecls();
  // The loop body at flat (prologue) index i, indented by `ind`. A loop kernel with broadcasts,
  // slices, transposes or iota runs over rows of its last dimension where that removes index
  // arithmetic; a column reduction over rows of its kept extent.
  Index ix;
  if (k.reduce == nullptr) {
    for (const Node* n : k.nodes)
      if (n->op() == OpKind::kBroadcastInDim || IsIndexMap(*n) || n->op() == OpKind::kIota) {
        const Shape& shape = n->result()->shape();
        ix.row = shape.rank() > 0 ? shape.dim(shape.rank() - 1) : 0;
        break;
      }
    if (ix.row < 8 || ix.row >= k.num_elements) ix.row = 0;  // short rows: the flat loop is faster
  } else {
    ix = Index{k.num_elements, "r", "(b0 + j)"};
  }
  std::string body;
  const std::string ind = k.reduce == nullptr && ix.row == 0 ? "    " : k.reduce == nullptr ? "      " : "        ";
  std::unordered_map<const Value*, std::string> var;
  c.member = [&](const Value* v) { return members.count(v->node()) > 0; };
  c.operand = [&](const Value* v) -> std::string {
    auto it = var.find(v);
    return it != var.end() ? it->second : c.LoadAtIndex(v);
  };
  // Note [Checked sin and cos]: in fast mode a loop kernel's f32 sin and cos are ax_fsin / ax_fcos
  // (vectorised; 0.5 ulp, but only for |x| <= ~2.1e8), and each iteration ORs into ax_far whether
  // an argument was beyond 2e8 or NaN. A range with such an argument runs a second loop that
  // recomputes exactly those elements with the C library's sin and cos, so every element is
  // right and depends only on its own arguments (not on chunking or threads). The second loop
  // reads the inputs again: InputsReadAtIndex gives such kernels no in-place outputs. Reductions
  // keep the library's sin and cos. (GPT-2 124M's init, Box-Muller over 124M parameters, ran
  // its cos scalar: the warm step 0 took 5.4-5.7 s, now 3.1-3.3.)
  const bool checked_trig = !options.exact_math && !options.fast_trig && k.reduce == nullptr && HasF32Trig(k);
  // mode 0: as options say; 1: fast sin/cos, flagging far arguments; 2: the library's sin/cos,
  // storing only the elements with a far argument.
  auto build = [&](int mode) {
    EmitOptions o = options;
    if (mode == 1) o.fast_trig = true;
    var.clear();
    body.clear();
    if (mode == 2) body += ind + "bool ax_far_i = false;\n";
    int counter = 0;
    for (const Node* n : k.nodes) {
      if (n == k.reduce) continue;
      const Value* r = n->result();
      const std::string e = NodeExpr(*n, ix, c, o);
      if (mode != 0 && IsF32Trig(*n))
        body += fmt::format("{}{} |= !(std::fabs({}) <= 2.0e8f);\n", ind, mode == 1 ? "ax_far" : "ax_far_i",
                            c.operand(n->operand(0)));
      const std::string v = fmt::format("v{}", counter++);
      body += fmt::format("{}const {} {} = {};  // {}\n", ind, CType(r->dtype()), v, e, n->name());
      var[r] = v;
    }
    // Outputs written at i (a reduction kernel's outputs[0], its reduce, is written per output).
    const std::string store_ind = mode == 2 ? ind + "  " : ind;
    if (mode == 2) body += ind + "if (ax_far_i) {\n";
    for (size_t j = k.reduce ? 1 : 0; j < k.outputs.size(); ++j)
      body += fmt::format("{}out{}[i] = {};\n", store_ind, j, StoreText(k.outputs[j]->dtype(), var.at(k.outputs[j])));
    if (mode == 2) body += ind + "}\n";
  };
  build(checked_trig ? 1 : 0);
  if (k.reduce == nullptr) {
    // No __restrict: an output may alias an input read only at index i (emit_cpp.h). Every
    // iteration reads all its inputs before it stores, and iterations are independent, so ivdep
    // (no loop-carried dependence) lets GCC vectorise without runtime alias checks.
    auto loop = [&] {
      if (ix.row == 0) {
        s += "#pragma GCC ivdep\n";
        s += "  for (int64_t i = begin; i < end; ++i) {\n" + body + "  }\n";
        return;
      }
      const int64_t L = ix.row;
      s += fmt::format("  for (int64_t r = begin / {0}, j0 = begin % {0}; r * {0} < end; ++r, j0 = 0) {{\n", L);
      s += fmt::format("    const int64_t j1 = end - r * {0} < {0} ? end - r * {0} : {0};\n", L);
      s += "#pragma GCC ivdep\n";
      s += "    for (int64_t j = j0; j < j1; ++j) {\n";
      s += fmt::format("      const int64_t i = r * {} + j;\n", L);
      s += body + "    }\n  }\n";
    };
    if (checked_trig) s += "  int ax_far = 0;\n";
    loop();
    if (checked_trig) {
      build(2);
      s += "  if (!ax_far) return;\n";  // Note [Checked sin and cos]
      loop();
    }
    s += "}\n";
    return;
  }
  // Column reduction [R, B]: blocks of outputs, rows in order, vectorised across the block; each
  // output accumulates in double over its inputs in row order, as the interpreter's reduce.
  const auto kind = k.reduce->attrs_as<ir::ReduceAttrs>().kind;
  const std::string xv = c.operand(k.reduce->operand(0));  // a member value, or the input itself
  const int64_t R = k.reduced, B = k.num_elements;
  s += "  double acc[512];\n";
  // Blocks of 512 outputs b0 in [b_begin, b_end), each accumulated over rows [r_begin, r_end)
  // and then stored per output j by `store`.
  auto column_blocks = [&](const std::string& b_begin, const std::string& b_end, const std::string& r_begin,
                           const std::string& r_end, const std::string& store) {
    s += fmt::format("  for (int64_t b0 = {}; b0 < {}; b0 += 512) {{\n", b_begin, b_end);
    s += fmt::format("    const int64_t n = {0} - b0 < 512 ? {0} - b0 : 512;\n", b_end);
    s += fmt::format("    for (int64_t j = 0; j < n; ++j) acc[j] = {};\n", ReduceInit(kind));
    s += fmt::format("    for (int64_t r = {}; r < {}; ++r) {{\n", r_begin, r_end);
    s += "#pragma GCC ivdep\n";
    s += "      for (int64_t j = 0; j < n; ++j) {\n";
    s += fmt::format("        const int64_t i = r * {} + b0 + j;\n", B);
    s += body;
    s += "        " + ReduceCombine(kind, "acc[j]", xv) + "\n      }\n    }\n";
    s += "    for (int64_t j = 0; j < n; ++j) " + store + ";\n  }\n";
  };
  const int64_t P = ColumnRowBlocks(k, options);
  if (P == 1) {
    column_blocks("begin", "end", "0", std::to_string(R), "out0[b0 + j] = " + StoreText(k.reduce->result()->dtype(), ReduceFinish(*k.reduce, R, "acc[j]")));
    s += "}\n";
    return;
  }
  // Note [Column sums by blocks of rows]: [begin, end) are blocks of rows, each summed into its
  // own row of partial sums (out[outputs], P x B doubles); begin < 0 adds the P partials in order
  // and writes the result.
  s += fmt::format("  double* part = static_cast<double*>(out[{}]);\n", k.outputs.size());
  s += "  if (begin < 0) {\n";
  s += fmt::format("    for (int64_t j = 0; j < {}; ++j) {{\n", B);
  s += fmt::format("      double a = {};\n", ReduceInit(kind));
  s += fmt::format("      for (int64_t p = 0; p < {}; ++p) a = a + part[p * {} + j];\n", P, B);
  s += "      out0[j] = " + StoreText(k.reduce->result()->dtype(), ReduceFinish(*k.reduce, R, "a")) + ";\n    }\n    return;\n  }\n";
  s += "  for (int64_t p = begin; p < end; ++p) {\n";
  s += fmt::format("  const int64_t r0 = {0} * p / {1}, r1 = {0} * (p + 1) / {1};\n", R, P);
  column_blocks("0", std::to_string(B), "r0", "r1", fmt::format("part[p * {} + b0 + j] = acc[j]", B));
  s += "  }\n}\n";
}

}  // namespace
}  // namespace axle::codegen::internal

namespace axle::codegen {

using namespace internal;  // NOLINT: this file's own helpers

int64_t ColumnRowBlocks(const Kernel& k, const EmitOptions& options) {
  if (options.exact_math || !k.fused || k.reduce == nullptr || !k.column) return 1;
  if (k.reduce->attrs_as<ir::ReduceAttrs>().kind != ir::ReduceKind::kSum) return 1;
  if (k.reduce->result()->dtype() != DType::kF32) return 1;
  return std::clamp<int64_t>(k.reduced / kRowsPerBlock, 1, kMaxRowBlocks);
}

std::vector<bool> InputsReadAtIndex(const Kernel& k) {
  // A loop kernel reads an input it reads in order (InputsReadInOrder) at i, before it stores
  // element i. Not so a reduction kernel (it reads at the operand index), a kernel with f32 sin or
  // cos (it may read its inputs again after storing, Note [Checked sin and cos]) or a row kernel
  // (it reads its rows in several loops).
  if (!k.fused || k.reduce != nullptr || IsRowKernel(k) || HasF32Trig(k)) return std::vector<bool>(k.inputs.size(), false);
  return InputsReadInOrder(k);
}

std::vector<bool> InputsReadInOrder(const Kernel& k) {
  // Note [Batch-sliced chains] (backends/cpu/chains.cc). A loop kernel evaluates its members at
  // element i, a row kernel at element o * reduced + r of row o or per row at o; so an input
  // that no broadcast_in_dim, slice or transpose maps and that is not read as a scalar is read at
  // its own flat index when its size is the domain's (or, in a row kernel, the row count). A
  // reduction kernel reads its operand by output, not in order.
  const bool ok = k.fused && k.reduce == nullptr;
  std::vector<bool> in_order(k.inputs.size(), ok);
  if (!ok) return in_order;
  const int64_t domain = PrologueElements(k);
  std::unordered_map<const Value*, size_t> input_index;
  for (size_t j = 0; j < k.inputs.size(); ++j) {
    input_index[k.inputs[j]] = j;
    const int64_t n = k.inputs[j]->type().NumElements();
    if (n != domain && !(IsRowKernel(k) && n == k.num_elements)) in_order[j] = false;
  }
  // Mirrors the emitters' loads: operands of member nodes that are inputs are read at the loop's
  // index unless they are scalars; an outside value under broadcast_in_dim, slice or transpose is
  // read at a computed index (counted as not in order even where that index happens to equal it).
  std::unordered_set<const Node*> members(k.nodes.begin(), k.nodes.end());
  auto mark = [&](const Value* v) {
    auto it = input_index.find(v);
    if (it != input_index.end()) in_order[it->second] = false;
  };
  for (const Node* n : k.nodes) {
    if (n->op() == OpKind::kBroadcastInDim || IsIndexMap(*n)) {
      if (!members.count(n->operand(0)->node())) mark(n->operand(0));
    } else {
      for (const Value* v : n->operands())
        if (ScalarRead(v, k)) mark(v);
    }
  }
  return in_order;
}

EmittedModule EmitCpp(const std::vector<Kernel>& kernels, const EmitOptions& options) {
  EmittedModule m;
  m.source = kPrelude;
  m.source += kScalarFunctionsText;
  m.source += kPreludeEnd;
  if (!options.exact_math) m.source += kFastMathPrelude;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!kernels[i].fused) {
      m.symbols.emplace_back();
      m.inputs_read_at_index.emplace_back(kernels[i].inputs.size(), false);
      m.row_blocks.push_back(1);
      continue;
    }
    const std::string name = fmt::format("k{}", i);
    const Kernel& k = kernels[i];
    if (IsRowKernel(k) || (k.reduce != nullptr && !k.column))
      EmitRowKernel(k, name, options, m.source);
    else
      EmitKernel(k, name, options, m.source);
    m.symbols.push_back(name);
    m.inputs_read_at_index.push_back(InputsReadAtIndex(kernels[i]));
    m.row_blocks.push_back(ColumnRowBlocks(k, options));
  }
  return m;
}

double FastMathUlpBound(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kExp:
    case ir::OpKind::kLog:
    case ir::OpKind::kSin:
    case ir::OpKind::kCos: return 1.0;
    case ir::OpKind::kLog1p: return 1.5;
    case ir::OpKind::kLogistic: return 2.5;
    case ir::OpKind::kTanh: return 5.0;
    case ir::OpKind::kErf: return 8.0;
    default: return 0.0;
  }
}

}  // namespace axle::codegen
