// NaN bit patterns survive print -> parse (see Note [NaN payloads] in literal.cc).
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/hash.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace axle::ir {
namespace {

TEST(NanPayloads, RoundTripBitExactly) {
  Module m("m");
  Builder b(m.AddFunction("main"));
  Literal f32(TensorType(DType::kF32, Shape{3}));
  SetElementBits(f32, 0, 0xffc00000);  // the NaN 0*inf gives on x86
  SetElementBits(f32, 1, 0x7fc00001);  // a payload
  SetElementBits(f32, 2, 0x7fc00000);  // the default quiet NaN
  Literal bf16(TensorType(DType::kBF16, Shape{2}));
  SetElementBits(bf16, 0, 0xffc1);
  SetElementBits(bf16, 1, 0xffc1);
  Literal f64(TensorType(DType::kF64, Shape{}));
  SetElementBits(f64, 0, 0x7ff0000000000001);  // a signalling NaN
  b.Return({b.Constant(f32), b.Constant(bf16), b.Constant(f64)});
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("value=[nan.0xffc00000, nan.0x7fc00001, nan]"), std::string::npos) << text;
  EXPECT_NE(text.find("{value=nan.0xffc1} : bf16[2]"), std::string::npos) << text;  // a splat
  EXPECT_NE(text.find("value=nan.0x7ff0000000000001"), std::string::npos) << text;
  std::unique_ptr<Module> parsed = ParseModule(text);
  EXPECT_EQ(PrintModule(*parsed), text);
  EXPECT_EQ(HashModule(*parsed), HashModule(m));
  const Function& f = *parsed->entry();
  EXPECT_EQ(f.nodes()[0]->attrs_as<ConstantAttrs>().value, f32);
  EXPECT_EQ(f.nodes()[1]->attrs_as<ConstantAttrs>().value, bf16);
  EXPECT_EQ(f.nodes()[2]->attrs_as<ConstantAttrs>().value, f64);
}

TEST(NanPayloads, RejectsBitsThatAreNotNaN) {
  auto parse = [](const std::string& elem) {
    ParseModule("module @m {\n  func @main {\n    %c = constant() {value=" + elem +
                "} : f32[]\n    return %c\n  }\n}\n");
  };
  EXPECT_NO_THROW(parse("nan.0x7fc00002"));
  for (const char* bad : {"nan.0x3f800000", "nan.0x", "nan.0xzz", "nan.0x1ffc00000"}) {
    try {
      parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("<string>:3:"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace axle::ir
