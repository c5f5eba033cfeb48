// The op-sample table's assembly and helpers (see op_samples.h).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "testing/op_samples.h"

namespace axle::ir::samples {

std::string Name(DType t) { return std::string(DTypeName(t)); }

Literal Lit(DType dtype, Shape shape, const std::vector<double>& values) {
  Literal lit = Literal::FromDoubles(dtype, std::move(shape), values);
  for (size_t i = 0; i < values.size(); ++i) {
    const double got = lit.GetDouble(static_cast<int64_t>(i));
    AXLE_CHECK(got == values[i] || (std::isnan(got) && std::isnan(values[i])) ||
                   (dtype == DType::kBool && (got != 0) == (values[i] != 0)),
               "Lit: {} is not exact in {}", values[i], DTypeName(dtype));
  }
  return lit;
}

Literal Ints(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  Literal lit(TensorType(dtype, std::move(shape)));
  AXLE_CHECK(static_cast<int64_t>(values.size()) == lit.NumElements(), "Ints: {} values for {}",
             values.size(), lit.type().ToString());
  for (size_t i = 0; i < values.size(); ++i) {
    lit.SetInt64(static_cast<int64_t>(i), values[i]);
    AXLE_CHECK(lit.GetInt64(static_cast<int64_t>(i)) == values[i], "Ints: {} is out of range of {}",
               values[i], DTypeName(dtype));
  }
  return lit;
}

Literal Bits(DType dtype, Shape shape, const std::vector<uint64_t>& bits) {
  Literal lit(TensorType(dtype, std::move(shape)));
  AXLE_CHECK(static_cast<int64_t>(bits.size()) == lit.NumElements(), "Bits: {} values for {}",
             bits.size(), lit.type().ToString());
  for (size_t i = 0; i < bits.size(); ++i) SetElementBits(lit, static_cast<int64_t>(i), bits[i]);
  return lit;
}

Literal Bools(Shape shape, const std::vector<bool>& values) {
  Literal lit(TensorType(DType::kBool, std::move(shape)));
  AXLE_CHECK(static_cast<int64_t>(values.size()) == lit.NumElements(), "Bools: count");
  for (size_t i = 0; i < values.size(); ++i) lit.mutable_data<uint8_t>()[i] = values[i] ? 1 : 0;
  return lit;
}

Literal Seq(DType dtype, Shape shape, int64_t first) {
  Literal lit(TensorType(dtype, shape));
  std::vector<double> v(static_cast<size_t>(lit.NumElements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = dtype == DType::kBool ? static_cast<double>((i + static_cast<size_t>(first)) % 2)
                                 : static_cast<double>(first + static_cast<int64_t>(i));
  return Lit(dtype, std::move(shape), v);
}

Literal Pick(Shape shape, const std::vector<const Literal*>& sources, const std::vector<From>& from) {
  Literal out(TensorType(sources.at(0)->dtype(), std::move(shape)));
  AXLE_CHECK(static_cast<int64_t>(from.size()) == out.NumElements(), "Pick: {} entries for {}",
             from.size(), out.type().ToString());
  const size_t w = static_cast<size_t>(DTypeSize(out.dtype()));
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i].src < 0) continue;  // zero
    const Literal& s = *sources.at(static_cast<size_t>(from[i].src));
    AXLE_CHECK(s.dtype() == out.dtype() && from[i].index < s.NumElements(), "Pick: bad source");
    std::memcpy(out.mutable_bytes().data() + i * w,
                s.bytes().data() + static_cast<size_t>(from[i].index) * w, w);
  }
  return out;
}

Literal Pick(Shape shape, const Literal& source, const std::vector<int64_t>& indices) {
  std::vector<From> from;
  for (int64_t i : indices) from.push_back({0, i});
  return Pick(std::move(shape), {&source}, from);
}

OpSample Sample(std::string name, OpKind op, Attrs attrs, std::vector<Literal> operands,
                std::vector<Literal> expected, int64_t ulps) {
  OpSample s;
  s.name = std::move(name);
  s.op = op;
  s.attrs = std::move(attrs);
  if (GetOpInfo(op).Has(kDeclaresResult))
    for (const Literal& e : expected) s.declared.push_back(e.type());
  s.operands.push_back(std::move(operands));
  s.expected.push_back(std::move(expected));
  s.ulps = ulps;
  return s;
}

OpSample ReplicaSample(std::string name, OpKind op, Attrs attrs,
                       std::vector<std::vector<Literal>> operands,
                       std::vector<std::vector<Literal>> expected) {
  OpSample s;
  s.name = std::move(name);
  s.op = op;
  s.attrs = std::move(attrs);
  s.operands = std::move(operands);
  s.expected = std::move(expected);
  return s;
}

namespace {

// Distance in representable values between two non-NaN floats of one width.
int64_t UlpDistance(uint64_t a, uint64_t b, int bits) {
  const uint64_t sign = uint64_t{1} << (bits - 1);
  auto ordered = [&](uint64_t x) -> __int128 {
    const __int128 mag = static_cast<__int128>(x & (sign - 1));
    return (x & sign) ? -mag : mag;
  };
  __int128 d = ordered(a) - ordered(b);
  if (d < 0) d = -d;
  return d > INT64_MAX ? INT64_MAX : static_cast<int64_t>(d);
}

}  // namespace

std::string CompareLiterals(const Literal& actual, const Literal& expected, int64_t ulps) {
  if (actual.type() != expected.type())
    return fmt::format("type {} differs from the expected {}", actual.type().ToString(),
                       expected.type().ToString());
  const bool is_float = IsFloat(actual.dtype());
  for (int64_t i = 0; i < actual.NumElements(); ++i) {
    const uint64_t a = ElementBits(actual, i), e = ElementBits(expected, i);
    if (a == e) continue;
    if (is_float) {
      const double av = actual.GetDouble(i), ev = expected.GetDouble(i);
      if (std::isnan(av) && std::isnan(ev)) continue;
      if (ulps > 0 && !std::isnan(av) && !std::isnan(ev) && !std::isinf(av) && !std::isinf(ev) &&
          UlpDistance(a, e, BitWidth(actual.dtype())) <= ulps)
        continue;
    }
    return fmt::format("element {} is {} (bits {:#x}), expected {} (bits {:#x}){}\n  actual:   {}\n"
                       "  expected: {}",
                       i, FormatElement(actual, i), a, FormatElement(expected, i), e,
                       ulps > 0 ? fmt::format(" within {} ulps", ulps) : "",
                       actual.ToString(64), expected.ToString(64));
  }
  return "";
}

std::unique_ptr<Module> BuildSampleModule(const OpSample& sample) {
  auto m = sample.functions.empty()
               ? std::make_unique<Module>("sample")
               : ParseModule(fmt::format("module @sample {{\n{}\n}}\n", sample.functions), "<op sample " + sample.name + ">");
  m->set_num_replicas(sample.num_replicas());
  Builder b(m->AddFunction("main"), ShapeContext{sample.num_replicas()});
  std::vector<Value*> params;
  const std::vector<Literal>& operands = sample.operands.at(0);
  for (size_t i = 0; i < operands.size(); ++i)
    params.push_back(b.Parameter(static_cast<int64_t>(i), operands[i].type(), fmt::format("x{}", i)));
  if (sample.op == OpKind::kParameter) {
    b.Return(params);
  } else {
    b.Return(b.Build(sample.op, params, sample.attrs, sample.declared));
  }
  return m;
}

void RegisterSampleCustomCalls() {
  RegisterCustomCall("sample.scale2", [](const std::vector<Literal>& ops, const CustomCallAttrs&,
                                         const std::vector<TensorType>& types) {
    Literal out(types.at(0));
    for (int64_t i = 0; i < out.NumElements(); ++i)
      out.mutable_data<float>()[i] = ops.at(0).data<float>()[i] * 2.0f;
    return std::vector<Literal>{out};
  });
  RegisterCustomCall("sample.sum_and_count", [](const std::vector<Literal>& ops,
                                                const CustomCallAttrs&,
                                                const std::vector<TensorType>& types) {
    Literal sum(types.at(0)), count(types.at(1));
    float s = 0;
    for (int64_t i = 0; i < ops.at(0).NumElements(); ++i) s += ops.at(0).data<float>()[i];
    sum.mutable_data<float>()[0] = s;
    count.mutable_data<int32_t>()[0] = static_cast<int32_t>(ops.at(0).NumElements());
    return std::vector<Literal>{sum, count};
  });
}

const std::vector<OpSample>& AllOpSamples() {
  static const std::vector<OpSample>* all = [] {
    auto* v = new std::vector<OpSample>;
    AddElementwiseSamples(*v);
    AddConvertSamples(*v);
    AddGoldenSamples(*v);
    AddMovementSamples(*v);
    AddReduceSamples(*v);
    AddMiscSamples(*v);
    return v;
  }();
  return *all;
}

}  // namespace axle::ir::samples
