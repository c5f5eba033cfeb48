// simplify: algebraic simplification by a table of named rewrite rules (kRules below). Each rule
// looks at one node (whose operands are already simplified) and either returns the value that
// replaces it (an existing value, or a new node inserted just before it) or declines.
//
// Exactness: every rule gives bit-identical results under the IR's semantics (docs/ir.md), the
// reference interpreter being the oracle; NaN payloads aside (a NaN stays a NaN). Floating point
// forbids some textbook identities, and the rules state why they are restricted:
//   - x + (+0) is not x: (-0) + (+0) = +0. x + (-0) is x for every x, including -0 and NaN.
//   - x - (+0) = x + (-0) = x exactly; x - (-0) = x + (+0) is not x for x = -0.
//   - x * 0 is not 0 for floats (NaN * 0 = NaN, inf * 0 = NaN, -1 * 0 = -0); integers only.
//   - x * 1 = x and x / 1 = x exactly in IEEE arithmetic (and for integers).
//   - convert chains cancel only when the first conversion is exact for every value (widening).
// "0" and "1" mean a splat constant, possibly seen through a broadcast_in_dim of a constant
// (GetSplat). A rule never drops or changes a sharding annotation (Rewrite::CanReplace).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string_view>

#include "ir/attrs.h"
#include "ir/shape_inference.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/pass_util.h"

namespace axle::passes {
namespace {

using ir::Node;
using ir::OpKind;
using ir::Value;

// Inserts new nodes just before the node being simplified.
class Emitter {
 public:
  Emitter(ir::Function& f, size_t pos, const Node& at) : f_(f), pos_(pos), at_(at) {}
  Value* Emit(OpKind op, std::vector<Value*> operands, ir::Attrs attrs, ir::TensorType type) {
    Node* n = f_.InsertNode(pos_++, op, std::move(operands), std::move(attrs), {type});
    n->set_loc(at_.loc());
    n->result()->set_name(at_.result()->name());
    n->result()->set_sharding(at_.result()->sharding());
    ++inserted_;
    return n->result();
  }
  size_t inserted() const { return inserted_; }

 private:
  ir::Function& f_;
  size_t pos_;
  const Node& at_;
  size_t inserted_ = 0;
};

struct Rule {
  std::string_view name;
  OpKind op;
  std::function<Value*(const Node&, Emitter&)> apply;  // nullptr = does not apply
};

bool IsFloatZero(const Splat& s, bool negative) {
  return s.value == 0 && std::signbit(s.value) == negative;
}
// A splat equal to zero with the given sign for floats; any zero for integers.
bool IsZero(const Value* v, bool negative_float_zero) {
  auto s = GetSplat(v);
  if (!s || !IsNumeric(s->dtype)) return false;
  if (IsFloat(s->dtype)) return IsFloatZero(*s, negative_float_zero);
  return s->bits == 0;
}
bool IsOne(const Value* v) {
  auto s = GetSplat(v);
  return s && IsNumeric(s->dtype) && s->value == 1;
}

// Whether every value of `from` converts to `to` exactly, so converting back restores it.
bool ExactConversion(DType from, DType to) {
  if (from == to) return true;
  if (from == DType::kBool) return true;  // 0/1 (or false/true) everywhere; back: x != 0
  auto rank_float = [](DType t) {
    switch (t) {
      case DType::kF16: return 1;   // 11-bit significand, exponent to 2^15
      case DType::kBF16: return 1;  // 8-bit significand, f32's exponent range
      case DType::kF32: return 2;
      case DType::kF64: return 3;
      default: return 0;
    }
  };
  if (IsFloat(from) && IsFloat(to)) return rank_float(to) > rank_float(from);
  // Integers that fit the target's significand exactly (i8/u8: 8 bits <= every float's).
  if (IsInteger(from) && IsFloat(to)) {
    if (from == DType::kI8 || from == DType::kU8) return true;
    if (from == DType::kI32 || from == DType::kU32) return to == DType::kF64;
    return false;
  }
  if (IsInteger(from) && IsInteger(to)) {
    if (from == DType::kI8) return to == DType::kI32 || to == DType::kI64;
    if (from == DType::kU8) return to == DType::kI32 || to == DType::kI64 || to == DType::kU32;
    if (from == DType::kI32) return to == DType::kI64;
    if (from == DType::kU32) return to == DType::kI64;
    return false;
  }
  return false;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Value* SelfIdempotent(const Node& n, Emitter&) {
  return n.operand(0) == n.operand(1) ? n.operand(0) : nullptr;
}

// add(pad(a, z), pad(b, z)) -> pad(concatenate(a, b, dim d), z) for z = -0.0 (floats) or 0
// (integers), when both pads are plain (no interior, no cropping), agree on every dim but d, and
// a's and b's blocks along d are adjacent (a first, or b first). Exact: inside a's block the sum
// is a + z = a (x + -0 is x for every x), inside b's b, elsewhere z + z = z. This is the gradient
// of slices that split a tensor (autodiff pads a slice's gradient with -0 for this reason).
Value* AddAdjacentPads(const Node& n, Emitter& e) {
  const Node* pa = n.operand(0)->node();
  const Node* pb = n.operand(1)->node();
  if (pa->op() != OpKind::kPad || pb->op() != OpKind::kPad) return nullptr;
  if (!IsZero(pa->operand(1), /*negative=*/true) || !IsZero(pb->operand(1), /*negative=*/true)) return nullptr;
  const auto& A = pa->attrs_as<ir::PadAttrs>();
  const auto& B = pb->attrs_as<ir::PadAttrs>();
  int64_t dim = -1;
  for (size_t i = 0; i < A.low.size(); ++i) {
    if (A.interior[i] != 0 || B.interior[i] != 0 || A.low[i] < 0 || A.high[i] < 0 || B.low[i] < 0 || B.high[i] < 0)
      return nullptr;
    if (A.low[i] == B.low[i] && A.high[i] == B.high[i]) continue;
    if (dim >= 0) return nullptr;
    dim = static_cast<int64_t>(i);
  }
  if (dim < 0) return nullptr;
  const auto d = static_cast<size_t>(dim);
  const Node* first = pa;
  const Node* second = pb;
  if (A.low[d] + pa->operand(0)->shape().dim(dim) != B.low[d]) std::swap(first, second);
  const auto& F = first->attrs_as<ir::PadAttrs>();
  const auto& S = second->attrs_as<ir::PadAttrs>();
  if (F.low[d] + first->operand(0)->shape().dim(dim) != S.low[d]) return nullptr;
  std::vector<int64_t> dims = first->operand(0)->shape().dims();
  dims[d] += second->operand(0)->shape().dim(dim);
  // Blocks already concatenated along d (a sum of three or more) join the one concatenate.
  std::vector<Value*> parts;
  for (Value* v : {first->operand(0), second->operand(0)}) {
    const Node* c = v->node();
    if (c->op() == OpKind::kConcatenate && c->attrs_as<ir::ConcatenateAttrs>().dim == dim && !v->sharding())
      parts.insert(parts.end(), c->operands().begin(), c->operands().end());
    else
      parts.push_back(v);
  }
  ir::PadAttrs p = F;
  p.high[d] = S.high[d];
  const bool whole = std::all_of(p.low.begin(), p.low.end(), [](int64_t x) { return x == 0; }) &&
                     std::all_of(p.high.begin(), p.high.end(), [](int64_t x) { return x == 0; });
  if (whole) return e.Emit(OpKind::kConcatenate, std::move(parts), ir::ConcatenateAttrs{dim}, n.result()->type());
  Value* cat = e.Emit(OpKind::kConcatenate, std::move(parts), ir::ConcatenateAttrs{dim},
                      ir::TensorType(n.result()->dtype(), Shape(dims)));
  return e.Emit(OpKind::kPad, {cat, first->operand(1)}, std::move(p), n.result()->type());
}

// The rule table. Operand order matters for the non-commutative ops; the commutative ones try
// both sides.
const std::vector<Rule>& Rules() {
  static const std::vector<Rule> rules = {
      // add(x, -0.0) -> x, add(-0.0, x) -> x  (floats: x + -0 == x for all x, -0 and NaN too)
      // add(x, 0) -> x, add(0, x) -> x        (integers)
      {"add-zero", OpKind::kAdd,
       [](const Node& n, Emitter&) -> Value* {
         if (IsZero(n.operand(1), /*negative=*/true)) return n.operand(0);
         if (IsZero(n.operand(0), /*negative=*/true)) return n.operand(1);
         return nullptr;
       }},
      // sub(x, +0.0) -> x  (floats: x - +0 == x + -0 == x);  sub(x, 0) -> x  (integers)
      {"sub-zero", OpKind::kSub,
       [](const Node& n, Emitter&) -> Value* {
         return IsZero(n.operand(1), /*negative=*/false) ? n.operand(0) : nullptr;
       }},
      // mul(x, 1) -> x, mul(1, x) -> x  (exact in IEEE arithmetic and for integers)
      {"mul-one", OpKind::kMul,
       [](const Node& n, Emitter&) -> Value* {
         if (IsOne(n.operand(1))) return n.operand(0);
         if (IsOne(n.operand(0))) return n.operand(1);
         return nullptr;
       }},
      // mul(x, 0) -> 0, mul(0, x) -> 0  (integers only: floats have NaN * 0 = NaN, -1 * 0 = -0)
      {"mul-zero-int", OpKind::kMul,
       [](const Node& n, Emitter&) -> Value* {
         if (!IsInteger(n.result()->dtype())) return nullptr;
         if (IsZero(n.operand(1), false)) return n.operand(1);
         if (IsZero(n.operand(0), false)) return n.operand(0);
         return nullptr;
       }},
      // div(x, 1) -> x  (exact in IEEE arithmetic; integer division by 1)
      {"div-one", OpKind::kDiv,
       [](const Node& n, Emitter&) -> Value* { return IsOne(n.operand(1)) ? n.operand(0) : nullptr; }},
      // neg(neg(x)) -> x  (floats flip the sign bit twice; integers wrap: -(-INT_MIN) = INT_MIN)
      {"neg-neg", OpKind::kNeg,
       [](const Node& n, Emitter&) -> Value* {
         const Node* inner = n.operand(0)->node();
         return inner->op() == OpKind::kNeg ? inner->operand(0) : nullptr;
       }},
      // transpose(x, identity) -> x
      // transpose(transpose(x, p), q) -> transpose(x, r) with r[i] = p[q[i]]  (x if r = identity)
      {"transpose-transpose", OpKind::kTranspose,
       [](const Node& n, Emitter& e) -> Value* {
         const auto& q = n.attrs_as<ir::TransposeAttrs>().perm;
         if (IsIdentityPerm(q)) return n.operand(0);
         const Node* inner = n.operand(0)->node();
         if (inner->op() != OpKind::kTranspose) return nullptr;
         const auto& p = inner->attrs_as<ir::TransposeAttrs>().perm;
         std::vector<int64_t> r(q.size());
         for (size_t i = 0; i < q.size(); ++i) r[i] = p[static_cast<size_t>(q[i])];
         if (IsIdentityPerm(r)) return inner->operand(0);
         return e.Emit(OpKind::kTranspose, {inner->operand(0)}, ir::TransposeAttrs{r},
                       n.result()->type());
       }},
      // transpose(dot_general(a, b), q) -> dot_general(b, a) when q keeps the batch dims and
      // swaps the two groups of free dims: the result of dot(a, b) is [batch, a's free, b's
      // free], that of dot(b, a) [batch, b's free, a's free]. Each element is the same sum over
      // the same contracting pairs in the same order, of b*a = a*b: bitwise equal. (Weight
      // gradients come out of autodiff this way; without the transpose their consumers read
      // them contiguously and nothing is materialized transposed.)
      {"transpose-dot", OpKind::kTranspose,
       [](const Node& n, Emitter& e) -> Value* {
         const Node* dot = n.operand(0)->node();
         if (dot->op() != OpKind::kDotGeneral) return nullptr;
         const auto& d = dot->attrs_as<ir::DotGeneralAttrs>();
         const auto& q = n.attrs_as<ir::TransposeAttrs>().perm;
         const auto nb = static_cast<int64_t>(d.lhs_batch.size());
         const auto f1 = static_cast<int64_t>(
             ir::DotFreeDims(dot->operand(0)->type().rank(), d.lhs_batch, d.lhs_contracting).size());
         const auto f2 = static_cast<int64_t>(q.size()) - nb - f1;
         if (f1 == 0 || f2 == 0) return nullptr;
         for (int64_t i = 0; i < static_cast<int64_t>(q.size()); ++i) {
           const int64_t want = i < nb ? i : i < nb + f2 ? i + f1 : i - f2;
           if (q[static_cast<size_t>(i)] != want) return nullptr;
         }
         ir::DotGeneralAttrs swapped{d.rhs_batch, d.lhs_batch, d.rhs_contracting, d.lhs_contracting};
         return e.Emit(OpKind::kDotGeneral, {dot->operand(1), dot->operand(0)}, swapped, n.result()->type());
       }},
      // transpose(convert(dot_general(a, b))) -> convert(transpose(dot_general(a, b))), for the
      // transpose to meet the product (transpose-dot then swaps its operands): the same
      // conversion of the same elements. Under bf16 autocast the tied LM head's weight gradient
      // comes out of autodiff as an f32 convert of a bf16 product, transposed: GPT-2 124M
      // transposed 154 MB of f32 a step for it (31 ms of 0.76 s).
      {"transpose-convert-dot", OpKind::kTranspose,
       [](const Node& n, Emitter& e) -> Value* {
         const Node* convert = n.operand(0)->node();
         if (convert->op() != OpKind::kConvert || convert->operand(0)->node()->op() != OpKind::kDotGeneral)
           return nullptr;
         Value* x = convert->operand(0);
         Value* t = e.Emit(OpKind::kTranspose, {x}, n.attrs(), ir::TensorType(x->dtype(), n.result()->shape()));
         return e.Emit(OpKind::kConvert, {t}, ir::NoAttrs{}, n.result()->type());
       }},
      // reshape(x) to x's own shape -> x;  reshape(reshape(x)) -> reshape(x)  (row-major order
      // is kept by both, so only the final shape matters)
      {"reshape-reshape", OpKind::kReshape,
       [](const Node& n, Emitter& e) -> Value* {
         Value* x = n.operand(0);
         if (x->type() == n.result()->type()) return x;
         if (x->node()->op() != OpKind::kReshape) return nullptr;
         Value* y = x->node()->operand(0);
         if (y->type() == n.result()->type()) return y;
         return e.Emit(OpKind::kReshape, {y}, ir::NoAttrs{}, n.result()->type());
       }},
      // broadcast_in_dim(x, dims = 0..r-1) to x's own shape -> x
      // broadcast_in_dim(broadcast_in_dim(x, d1), d2) -> broadcast_in_dim(x, d2∘d1): operand dim
      // k lands at d2[d1[k]]; a dim of x that is not 1 has the same size all the way, so the
      // size-1 broadcasting rule gives the same element.
      {"broadcast-broadcast", OpKind::kBroadcastInDim,
       [](const Node& n, Emitter& e) -> Value* {
         Value* x = n.operand(0);
         const auto& d2 = n.attrs_as<ir::BroadcastInDimAttrs>().dims;
         if (x->type() == n.result()->type() && IsIdentityPerm(d2)) return x;
         if (x->node()->op() != OpKind::kBroadcastInDim) return nullptr;
         const auto& d1 = x->node()->attrs_as<ir::BroadcastInDimAttrs>().dims;
         std::vector<int64_t> d(d1.size());
         for (size_t k = 0; k < d1.size(); ++k) d[k] = d2[static_cast<size_t>(d1[k])];
         return e.Emit(OpKind::kBroadcastInDim, {x->node()->operand(0)},
                       ir::BroadcastInDimAttrs{d}, n.result()->type());
       }},
      // convert(x) to x's own dtype -> x
      // convert(convert(x: A) -> B) -> A  ==> x, when A -> B is exact for every value of A
      // (f32 -> f64 -> f32 is x; f64 -> f32 -> f64 is not: the first step rounds)
      // convert(convert(x: A) -> B) -> C  ==> convert(x) -> C, when A -> B is exact and A, B
      // are of one kind (both floats, both integers) or A is bool: B then holds x's value and
      // B -> C converts it as A -> C does. Not across kinds: i8 -1 -> f32 -> u8 saturates to 0,
      // but i8 -1 -> u8 wraps to 255.
      {"convert-convert", OpKind::kConvert,
       [](const Node& n, Emitter& e) -> Value* {
         Value* x = n.operand(0);
         if (x->dtype() == n.result()->dtype()) return x;
         if (x->node()->op() != OpKind::kConvert) return nullptr;
         Value* y = x->node()->operand(0);
         if (!ExactConversion(y->dtype(), x->dtype())) return nullptr;
         if (y->dtype() == n.result()->dtype()) return y;
         if (y->dtype() != DType::kBool && IsFloat(y->dtype()) != IsFloat(x->dtype())) return nullptr;
         return e.Emit(OpKind::kConvert, {y}, ir::NoAttrs{}, n.result()->type());
       }},
      // select(true, a, b) -> a;  select(false, a, b) -> b  (a splat constant predicate)
      {"select-constant", OpKind::kSelect,
       [](const Node& n, Emitter&) -> Value* {
         auto s = GetSplat(n.operand(0));
         if (!s) return nullptr;
         return s->bits != 0 ? n.operand(1) : n.operand(2);
       }},
      // slice(x, start = 0, limit = dims, strides = 1) -> x
      {"slice-whole", OpKind::kSlice,
       [](const Node& n, Emitter&) -> Value* {
         const auto& a = n.attrs_as<ir::SliceAttrs>();
         const Shape& s = n.operand(0)->shape();
         for (int64_t i = 0; i < s.rank(); ++i) {
           const size_t k = static_cast<size_t>(i);
           if (a.start[k] != 0 || a.limit[k] != s.dim(i) || a.strides[k] != 1) return nullptr;
         }
         return n.operand(0);
       }},
      // select(p, a, a) -> a
      {"select-same", OpKind::kSelect,
       [](const Node& n, Emitter&) -> Value* {
         return n.operand(1) == n.operand(2) ? n.operand(1) : nullptr;
       }},
      // max(x, x) -> x, min(x, x) -> x  (the max/min rule picks x; NaN in, the same NaN out)
      // and(x, x) -> x, or(x, x) -> x    (bitwise and logical)
      {"idempotent-self", OpKind::kMax, SelfIdempotent},
      {"idempotent-self", OpKind::kMin, SelfIdempotent},
      {"idempotent-self", OpKind::kAnd, SelfIdempotent},
      {"idempotent-self", OpKind::kOr, SelfIdempotent},
      // not(not(x)) -> x  (logical on bool, bitwise on integers: an involution)
      {"not-not", OpKind::kNot,
       [](const Node& n, Emitter&) -> Value* {
         const Node* inner = n.operand(0)->node();
         return inner->op() == OpKind::kNot ? inner->operand(0) : nullptr;
       }},
      // reverse(reverse(x, d), d) -> x  (same dims: each reversed twice)
      {"reverse-reverse", OpKind::kReverse,
       [](const Node& n, Emitter&) -> Value* {
         const auto& d = n.attrs_as<ir::ReverseAttrs>().dims;
         if (d.empty()) return n.operand(0);  // reverse of no dims is the operand
         const Node* inner = n.operand(0)->node();
         if (inner->op() != OpKind::kReverse) return nullptr;
         std::vector<int64_t> a = d, b = inner->attrs_as<ir::ReverseAttrs>().dims;
         std::sort(a.begin(), a.end());
         std::sort(b.begin(), b.end());
         return a == b ? inner->operand(0) : nullptr;
       }},
      // concatenate(x) -> x  (one operand)
      {"add-adjacent-pads", OpKind::kAdd, AddAdjacentPads},
      // concatenate(..., concatenate(x, y, dim=d), ..., dim=d) -> concatenate(..., x, y, ...):
      // the same elements in the same order.
      {"concatenate-concatenate", OpKind::kConcatenate,
       [](const Node& n, Emitter& e) -> Value* {
         const int64_t dim = n.attrs_as<ir::ConcatenateAttrs>().dim;
         std::vector<Value*> flat;
         bool nested = false;
         for (Value* v : n.operands()) {
           const Node* c = v->node();
           if (c->op() == OpKind::kConcatenate && c->attrs_as<ir::ConcatenateAttrs>().dim == dim &&
               !v->sharding()) {
             nested = true;
             for (Value* x : c->operands()) flat.push_back(x);
           } else {
             flat.push_back(v);
           }
         }
         if (!nested) return nullptr;
         return e.Emit(OpKind::kConcatenate, std::move(flat), ir::ConcatenateAttrs{dim}, n.result()->type());
       }},
      {"concatenate-single", OpKind::kConcatenate,
       [](const Node& n, Emitter&) -> Value* { return n.num_operands() == 1 ? n.operand(0) : nullptr; }},
      // reduce(x, dims=[]) -> x  (docs/ir.md: "dims = [] copies")
      {"reduce-no-dims", OpKind::kReduce,
       [](const Node& n, Emitter&) -> Value* {
         return n.attrs_as<ir::ReduceAttrs>().dims.empty() ? n.operand(0) : nullptr;
       }},
      // pad(x, v, low=0, high=0, interior=0) -> x
      {"pad-nothing", OpKind::kPad,
       [](const Node& n, Emitter&) -> Value* {
         const auto& a = n.attrs_as<ir::PadAttrs>();
         auto zero = [](const std::vector<int64_t>& v) {
           return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
         };
         return zero(a.low) && zero(a.high) && zero(a.interior) ? n.operand(0) : nullptr;
       }},
      // dynamic_slice(x, s...) with sizes = x's dims -> x  (every start clamps to 0)
      {"dynamic-slice-whole", OpKind::kDynamicSlice,
       [](const Node& n, Emitter&) -> Value* {
         return n.attrs_as<ir::DynamicSliceAttrs>().sizes == n.operand(0)->shape().dims()
                    ? n.operand(0)
                    : nullptr;
       }},
      // dynamic_update_slice(x, u, s...) with u of x's shape -> u  (every start clamps to 0)
      {"dynamic-update-slice-whole", OpKind::kDynamicUpdateSlice,
       [](const Node& n, Emitter&) -> Value* {
         return n.operand(1)->shape() == n.operand(0)->shape() ? n.operand(1) : nullptr;
       }},
  };
  return rules;
}

bool SimplifyFunction(ir::Function& f) {
  Rewrite rw(f);
  for (size_t i = 0; i < f.nodes().size(); ++i) {
    Node* n = f.nodes()[i].get();
    rw.Apply(*n);
    if (n->num_results() != 1) continue;
    for (const Rule& rule : Rules()) {
      if (rule.op != n->op()) continue;
      Emitter e(f, i, *n);
      Value* to = rule.apply(*n, e);
      i += e.inserted();  // n moved down past the new nodes
      if (to == nullptr) continue;
      if (!Rewrite::CanReplace(n->result(), to)) continue;  // a new node, if any, is left dead
      rw.Replace(n, {to});
      break;
    }
  }
  const bool changed = rw.changed();
  rw.Finish();
  return changed;
}

class SimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }
  std::string_view summary() const override {
    return "Algebraic simplification by exact, named rewrite rules (x*1, neg(neg x), transposes, ...).";
  }
  bool Run(ir::Module& module) override {
    bool changed = false;
    for (ir::Function* f : RewritableFunctions(module)) changed |= SimplifyFunction(*f);
    return changed;
  }
};

}  // namespace

// The rule names, for docs and tests.
std::vector<std::string_view> SimplifyRuleNames() {
  std::vector<std::string_view> names;
  for (const Rule& r : Rules()) names.push_back(r.name);
  return names;
}

std::unique_ptr<Pass> MakeSimplifyPass() { return std::make_unique<SimplifyPass>(); }

}  // namespace axle::passes
