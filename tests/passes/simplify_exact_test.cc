// simplify's rules on the values where floating point and integer wrap bite: for every dtype,
// each arithmetic rule's pattern (with the constant on either side, as a scalar broadcast or a
// splat) and every convert chain A -> B -> A is evaluated on special values (-0, +0, ±inf, NaN,
// subnormals, extremes) before and after simplify; results must agree bitwise (NaN as NaN).
// Patterns whose rule does not apply must stay unchanged by construction, and those that do are
// counted, so the test fails if the rules stop firing altogether.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "testing/random_module.h"

namespace axle {
namespace {

std::vector<double> Specials(DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  if (IsFloat(t))
    return {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, inf, -inf, std::nan(""), 1e-40, -1e-45, 65504.0,
            3.0e38, 1e300, 16777217.0, 0.1};
  if (t == DType::kBool) return {0, 1};
  return {0, 1, -1, 2, 127, -128, 255, 256, 65535, 2147483647.0, -2147483648.0, 4294967295.0,
          9007199254740993.0, -9.2e18};
}

bool SameBits(const ir::Literal& a, const ir::Literal& b) {
  if (a.type() != b.type()) return false;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    if (ir::ElementBits(a, i) == ir::ElementBits(b, i)) continue;
    if (IsFloat(a.dtype()) && std::isnan(a.GetDouble(i)) && std::isnan(b.GetDouble(i))) continue;
    return false;
  }
  return true;
}

// Parses `text`, evaluates it on `arg`, simplifies, evaluates again; returns whether simplify
// changed the module. Fails the test on a difference.
bool CheckSimplify(const std::string& text, const ir::Literal& arg) {
  std::unique_ptr<ir::Module> m = ir::ParseModule(text);
  const std::vector<ir::Literal> before = ir::Evaluate(*m->entry(), {arg});
  const std::string original = ir::PrintModule(*m);
  passes::RunPasses(*m, {"simplify", "dce"});
  const std::string simplified = ir::PrintModule(*m);
  const std::vector<ir::Literal> after = ir::Evaluate(*m->entry(), {arg});
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(SameBits(before[i], after[i]))
        << original << "--- simplified:\n" << simplified << "--- on " << arg.ToString(32)
        << ":\nbefore " << before[i].ToString(32) << "\nafter  " << after[i].ToString(32);
  return simplified != original;
}

TEST(SimplifyExact, ArithmeticRulesOnSpecialValues) {
  int fired = 0;
  for (DType t : testing::AllDTypes()) {
    if (!IsNumeric(t)) continue;
    const std::vector<double> xs = Specials(t);
    const ir::Literal arg = ir::Literal::FromDoubles(t, Shape({static_cast<int64_t>(xs.size())}), xs);
    const std::string ty = fmt::format("{}[{}]", DTypeName(t), xs.size());
    for (const char* op : {"add", "sub", "mul", "div"})
      for (const char* c : {"0", "-0", "1", "-1"})
        for (bool lhs : {false, true})
          for (bool broadcast : {false, true}) {
            if (!IsFloat(t) && std::string(c) == "-0") continue;
            if (!IsSigned(t) && std::string(c) == "-1") continue;
            const std::string konst =
                broadcast ? fmt::format("%k = constant() {{value={}}} : {}[]\n    "
                                        "%c = broadcast_in_dim(%k) {{dims=[]}} : {}",
                                        c, DTypeName(t), ty)
                          : fmt::format("%c = constant() {{value={}}} : {}", c, ty);
            const std::string text = fmt::format(
                "module @m {{\n  func @main {{\n    %x = parameter() {{index=0}} : {ty}\n    {k}\n"
                "    %r = {op}({a}, {b}) : {ty}\n    return %r\n  }}\n}}\n",
                fmt::arg("ty", ty), fmt::arg("k", konst), fmt::arg("op", op),
                fmt::arg("a", lhs ? "%c" : "%x"), fmt::arg("b", lhs ? "%x" : "%c"));
            fired += CheckSimplify(text, arg);
          }
    // neg(neg(x)) -> x
    fired += CheckSimplify(
        fmt::format("module @m {{\n  func @main {{\n    %x = parameter() {{index=0}} : {0}\n"
                    "    %n = neg(%x) : {0}\n    %r = neg(%n) : {0}\n    return %r\n  }}\n}}\n",
                    ty),
        arg);
  }
  EXPECT_GE(fired, 60);
}

TEST(SimplifyExact, ConvertChainsOnSpecialValues) {
  int fired = 0;
  for (DType a : testing::AllDTypes())
    for (DType b : testing::AllDTypes()) {
      const std::vector<double> xs = Specials(a);
      const ir::Literal arg =
          ir::Literal::FromDoubles(a, Shape({static_cast<int64_t>(xs.size())}), xs);
      const std::string ta = fmt::format("{}[{}]", DTypeName(a), xs.size());
      const std::string tb = fmt::format("{}[{}]", DTypeName(b), xs.size());
      fired += CheckSimplify(
          fmt::format("module @m {{\n  func @main {{\n    %x = parameter() {{index=0}} : {0}\n"
                      "    %y = convert(%x) : {1}\n    %r = convert(%y) : {0}\n    return %r\n"
                      "  }}\n}}\n",
                      ta, tb),
          arg);
    }
  EXPECT_GE(fired, 20);
}

TEST(SimplifyExact, ConvertTriplesOnSpecialValues) {
  int fired = 0;
  for (DType a : testing::AllDTypes())
    for (DType b : testing::AllDTypes())
      for (DType c : testing::AllDTypes()) {
        const std::vector<double> xs = Specials(a);
        const ir::Literal arg =
            ir::Literal::FromDoubles(a, Shape({static_cast<int64_t>(xs.size())}), xs);
        const auto ty = [&](DType t) { return fmt::format("{}[{}]", DTypeName(t), xs.size()); };
        fired += CheckSimplify(
            fmt::format("module @m {{\n  func @main {{\n    %x = parameter() {{index=0}} : {0}\n"
                        "    %y = convert(%x) : {1}\n    %r = convert(%y) : {2}\n    return %r\n"
                        "  }}\n}}\n",
                        ty(a), ty(b), ty(c)),
            arg);
      }
  EXPECT_GE(fired, 200);
}

}  // namespace
}  // namespace axle
