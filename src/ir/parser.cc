#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "ir/lexer.h"

namespace axle::ir {
namespace {

constexpr int kMaxListDepth = 32;
constexpr int64_t kMaxConstantElements = int64_t{1} << 24;
constexpr int64_t kMaxModuleConstantBytes = int64_t{512} << 20;

// An attribute value as written, before it is matched to a field type. See Note [Two-step
// attributes].
//
// Note [Two-step attributes]
// The attribute dict is read into this generic tree first and converted to the op's struct
// fields afterwards, because a constant's literal can only be built once its type is known, and
// that type comes after the dict (`: f32[2]`). It also keeps one syntax for every field type.
struct AttrValue {
  enum class Kind { kNumber, kIdent, kString, kList };
  Kind kind = Kind::kNumber;
  std::string text;              // number or identifier text, or the decoded string
  std::vector<AttrValue> items;  // kList
  SourceLoc loc;
};

struct AttrEntry {
  std::string name;
  SourceLoc loc;
  AttrValue value;
};

struct ParsedType {
  TensorType type;
  std::optional<Sharding> sharding;
};

// A Literal field waiting for the node's result type.
struct PendingLiteral {
  std::string_view field;
  Literal* literal;
  const AttrValue* value;
};

std::string Describe(const AttrValue& v) {
  switch (v.kind) {
    case AttrValue::Kind::kNumber: return v.text;
    case AttrValue::Kind::kIdent: return "'" + v.text + "'";
    case AttrValue::Kind::kString: return "a string";
    case AttrValue::Kind::kList: return "a list";
  }
  return "a value";
}

// The integer spelled by a number token, or nullopt when it is not an integer. Throws when the
// integer does not fit int64, with `context` ("reduce: attribute 'dims': ") before the message.
std::optional<int64_t> ParseInteger(const std::string& text, const SourceLoc& loc,
                                    std::string_view context = "") {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    const char* p = text.data() + (text[0] == '-' ? 1 : 0);
    while (p < end && *p >= '0' && *p <= '9') ++p;
    if (p == end) FailAt(loc, "{}integer {} is out of the int64 range", context, text);
  }
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// Parses float text exactly as `dtype` (f64 as double, the narrower floats as float, so the
// shortest text of any element maps back to its bits). Underflow rounds toward zero; overflow
// is an error.
double ParseFloatText(const std::string& text, DType dtype, const SourceLoc& loc,
                      std::string_view op) {
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  const char* begin = text.data();
  const char* end = begin + text.size();
  std::from_chars_result r;
  double value = 0;
  if (dtype == DType::kF64) {
    r = std::from_chars(begin, end, value);
  } else {
    float f = 0;
    r = std::from_chars(begin, end, f);
    value = f;
  }
  if (r.ec == std::errc() && r.ptr == end) return value;
  long double wide = 0;
  r = std::from_chars(begin, end, wide);
  if (r.ec == std::errc() && r.ptr == end && std::fabs(wide) < 1) {
    return dtype == DType::kF64 ? static_cast<double>(wide) : static_cast<float>(wide);
  }
  FailAt(loc, "{}: element {} is out of range for {}", op, text, DTypeName(dtype));
}

// Range of an integer dtype's values.
std::pair<int64_t, int64_t> IntegerRange(DType t) {
  switch (t) {
    case DType::kI8: return {INT8_MIN, INT8_MAX};
    case DType::kI32: return {INT32_MIN, INT32_MAX};
    case DType::kU8: return {0, UINT8_MAX};
    case DType::kU32: return {0, UINT32_MAX};
    default: return {INT64_MIN, INT64_MAX};
  }
}

// Stores `nan.0xBITS` (a NaN spelled by its storage bits) as element i of float literal `lit`.
void SetNanBits(Literal& lit, int64_t i, const AttrValue& v, std::string_view op) {
  const std::string_view hex = std::string_view(v.text).substr(6);
  uint64_t bits = 0;
  auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), bits, 16);
  const int width = BitWidth(lit.dtype());
  if (hex.empty() || ec != std::errc() || ptr != hex.data() + hex.size() ||
      (width < 64 && bits >> width != 0))
    FailAt(v.loc, "{}: '{}' is not a {}-bit NaN pattern (nan.0x followed by hex digits)", op,
           v.text, width);
  SetElementBits(lit, i, bits);
  if (!std::isnan(lit.GetDouble(i)))
    FailAt(v.loc, "{}: {} is not a NaN bit pattern for {}", op, v.text, DTypeName(lit.dtype()));
}

// Stores the element text `v` as element i of `lit`, with the exact value it spells.
void SetElement(Literal& lit, int64_t i, const AttrValue& v, std::string_view op) {
  const DType t = lit.dtype();
  const std::string_view dtype = DTypeName(t);
  if (t == DType::kBool) {
    if (v.kind != AttrValue::Kind::kIdent || (v.text != "true" && v.text != "false"))
      FailAt(v.loc, "{}: bool element must be true or false, got {}", op, Describe(v));
    lit.SetInt64(i, v.text == "true" ? 1 : 0);
  } else if (IsInteger(t)) {
    std::optional<int64_t> n;
    if (v.kind == AttrValue::Kind::kNumber) n = ParseInteger(v.text, v.loc, fmt::format("{}: ", op));
    if (!n) FailAt(v.loc, "{}: {} element must be an integer, got {}", op, dtype, Describe(v));
    auto [lo, hi] = IntegerRange(t);
    if (*n < lo || *n > hi)
      FailAt(v.loc, "{}: integer {} is out of range for {} ([{}, {}])", op, *n, dtype, lo, hi);
    lit.SetInt64(i, *n);
  } else {
    double d;
    if (v.kind == AttrValue::Kind::kNumber) {
      d = ParseFloatText(v.text, t, v.loc, op);
    } else if (v.kind == AttrValue::Kind::kIdent && v.text.starts_with("nan.0x")) {
      SetNanBits(lit, i, v, op);  // See Note [NaN payloads] in literal.cc.
      return;
    } else if (v.kind == AttrValue::Kind::kIdent && (v.text == "nan" || v.text == "inf")) {
      d = v.text == "nan" ? std::numeric_limits<double>::quiet_NaN()
                          : std::numeric_limits<double>::infinity();
    } else {
      FailAt(v.loc, "{}: {} element must be a number, nan, inf or -inf, got {}", op, dtype,
             Describe(v));
    }
    lit.SetDouble(i, d);
    if (std::isfinite(d) && !std::isfinite(lit.GetDouble(i)))
      FailAt(v.loc, "{}: element {} is out of range for {}", op, v.text, dtype);
  }
}

// Copies element 0 over the whole literal.
void FillFromFirst(Literal& lit) {
  std::span<uint8_t> bytes = lit.mutable_bytes();
  size_t filled = static_cast<size_t>(DTypeSize(lit.dtype()));
  while (filled < bytes.size()) {
    const size_t chunk = std::min(filled, bytes.size() - filled);
    std::memcpy(bytes.data() + filled, bytes.data(), chunk);
    filled += chunk;
  }
}

// The literal of type `type` spelled by `v`: a bare element (splat), or a flat list holding
// exactly one element per array element.
Literal BuildLiteral(const TensorType& type, const AttrValue& v, std::string_view op) {
  const int64_t n = type.NumElements();
  if (v.kind != AttrValue::Kind::kList) {
    Literal scratch(TensorType(type.dtype, Shape{}));
    SetElement(scratch, 0, v, op);
    Literal lit(type);
    if (n > 0) {
      std::memcpy(lit.mutable_bytes().data(), scratch.bytes().data(), scratch.bytes().size());
      FillFromFirst(lit);
    }
    return lit;
  }
  if (static_cast<int64_t>(v.items.size()) != n) {
    FailAt(v.loc, "{}: literal has {} elements but its type {} has {} (write one element per "
           "array element, row-major, or a single element to fill it)",
           op, v.items.size(), type.ToString(), n);
  }
  Literal lit(type);
  for (int64_t i = 0; i < n; ++i) {
    const AttrValue& item = v.items[static_cast<size_t>(i)];
    if (item.kind == AttrValue::Kind::kList)
      FailAt(item.loc, "{}: literal must be a flat list of elements, in row-major order", op);
    SetElement(lit, i, item, op);
  }
  return lit;
}

// Reads one attribute value as the C++ type of its field, failing with the op and field named.
class FieldReader {
 public:
  FieldReader(std::string_view op, const AttrEntry& entry) : op_(op), entry_(entry) {}

  // Fails at `at` (the value, or the list item that is wrong).
  [[noreturn]] void Fail(std::string_view expects, const AttrValue& at) const {
    FailAt(at.loc, "{}: attribute '{}' expects {}, got {}", op_, entry_.name, expects, Describe(at));
  }
  int64_t Integer(const AttrValue& x, std::string_view expects) const {
    std::optional<int64_t> n;
    if (x.kind == AttrValue::Kind::kNumber)
      n = ParseInteger(x.text, x.loc, fmt::format("{}: attribute '{}': ", op_, entry_.name));
    if (!n) Fail(expects, x);
    return *n;
  }
  std::vector<int64_t> Integers(const AttrValue& x, std::string_view expects) const {
    if (x.kind != AttrValue::Kind::kList) Fail(expects, x);
    std::vector<int64_t> out;
    for (const AttrValue& item : x.items) out.push_back(Integer(item, expects));
    return out;
  }
  template <typename E>
  E Enum(std::string_view what) const {
    const AttrValue& v = entry_.value;
    std::optional<E> parsed;
    if (v.kind == AttrValue::Kind::kIdent) parsed = ParseEnum<E>(v.text);
    if (!parsed) {
      std::string names;
      for (std::string_view n : EnumNames<E>::kNames) names += (names.empty() ? "" : ", ") + std::string(n);
      Fail(fmt::format("{} ({})", what, names), v);
    }
    return *parsed;
  }

 private:
  std::string_view op_;
  const AttrEntry& entry_;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view filename) : lexer_(text, filename) { Advance(); }

  std::unique_ptr<Module> Run();

 private:
  // Definitions visible in the function being parsed: name -> (value, where it was defined).
  using Scope = std::unordered_map<std::string, std::pair<Value*, SourceLoc>>;

  void Advance() { tok_ = lexer_.Next(); }
  SourceLoc Loc(const Token& t) const { return lexer_.Loc(t.line, t.col); }
  bool At(TokenKind k) const { return tok_.kind == k; }
  bool AtKeyword(std::string_view kw) const { return At(TokenKind::kIdent) && tok_.text == kw; }
  [[noreturn]] void FailExpected(std::string_view what) const {
    FailAt(Loc(tok_), "expected {}, got {}", what, DescribeToken(tok_));
  }
  Token Expect(TokenKind k, std::string_view what) {
    if (!At(k)) FailExpected(what);
    Token t = std::move(tok_);
    Advance();
    return t;
  }

  void ParseModuleAttrs(Module& m);
  void ParseFunction(Module& m);
  void ParseNode(Function& f, Scope& scope);
  std::vector<ScheduleEntry> ParseSchedule(std::string_view op);
  std::vector<Token> ParseResultNames(const Scope& scope);
  Value* ParseUse(const Scope& scope);
  std::vector<AttrEntry> ParseAttrEntries();
  AttrValue ParseAttrValue(int depth);
  std::vector<PendingLiteral> ApplyAttrs(OpKind op, const std::vector<AttrEntry>& entries,
                                         Attrs& attrs, const SourceLoc& op_loc);
  void SetField(std::string_view op, const AttrEntry& entry, const MutableFieldRef& ref);
  void FillLiterals(std::string_view op, const std::vector<PendingLiteral>& pending,
                    const std::vector<ParsedType>& types);
  std::vector<ParsedType> ParseTypes(std::string_view op, size_t num_results);
  ParsedType ParseType();
  Sharding ParseSharding(int64_t rank);
  std::vector<std::string> ParseAxes();

  Lexer lexer_;
  Token tok_;
  int64_t constant_bytes_ = 0;
};

std::unique_ptr<Module> Parser::Run() {
  if (!AtKeyword("module")) FailExpected("'module'");
  Advance();
  Token name = Expect(TokenKind::kGlobalName, "a module name '@name'");
  auto m = std::make_unique<Module>(name.text);
  Expect(TokenKind::kLBrace, "'{'");
  if (At(TokenKind::kIdent) && tok_.text != "func") {
    ParseModuleAttrs(*m);
    Expect(TokenKind::kLBrace, "'{' after the module attributes");
  }
  while (AtKeyword("func")) ParseFunction(*m);
  Expect(TokenKind::kRBrace, "'func' or '}' closing the module");
  if (!At(TokenKind::kEof)) FailExpected("end of input after the module");
  return m;
}

// `num_replicas=8, mesh_axes=[dp, tp], mesh_shape=[2, 4], mesh_devices=[...]}`: the module
// attributes, after their '{'. The mesh attributes come together (mesh_devices is optional).
void Parser::ParseModuleAttrs(Module& m) {
  std::set<std::string> seen;
  std::optional<std::vector<std::string>> axes;
  std::optional<std::vector<int64_t>> shape, devices;
  SourceLoc mesh_loc;
  auto integers = [&](const AttrEntry& e, std::string_view what) {
    if (e.value.kind != AttrValue::Kind::kList)
      FailAt(e.value.loc, "module: attribute '{}' expects a list of {}", e.name, what);
    std::vector<int64_t> out;
    for (const AttrValue& item : e.value.items) {
      std::optional<int64_t> n;
      if (item.kind == AttrValue::Kind::kNumber)
        n = ParseInteger(item.text, item.loc, fmt::format("module: attribute '{}': ", e.name));
      if (!n) FailAt(item.loc, "module: attribute '{}' expects a list of {}", e.name, what);
      out.push_back(*n);
    }
    return out;
  };
  for (const AttrEntry& e : ParseAttrEntries()) {
    if (!seen.insert(e.name).second) FailAt(e.loc, "module: duplicate attribute '{}'", e.name);
    if (e.name == "num_replicas") {
      std::optional<int64_t> n;
      if (e.value.kind == AttrValue::Kind::kNumber)
        n = ParseInteger(e.value.text, e.value.loc, "module: attribute 'num_replicas': ");
      if (!n) FailAt(e.value.loc, "module: attribute 'num_replicas' expects an integer");
      m.set_num_replicas(*n);
    } else if (e.name == "mesh_axes") {
      mesh_loc = e.loc;
      if (e.value.kind != AttrValue::Kind::kList)
        FailAt(e.value.loc, "module: attribute 'mesh_axes' expects a list of axis names");
      axes.emplace();
      for (const AttrValue& item : e.value.items) {
        if (item.kind != AttrValue::Kind::kIdent && item.kind != AttrValue::Kind::kString)
          FailAt(item.loc, "module: attribute 'mesh_axes' expects a list of axis names");
        axes->push_back(item.text);
      }
    } else if (e.name == "mesh_shape") {
      shape = integers(e, "axis sizes");
    } else if (e.name == "mesh_devices") {
      devices = integers(e, "device ids");
    } else if (e.name == "schedule") {
      if (e.value.kind != AttrValue::Kind::kString && e.value.kind != AttrValue::Kind::kIdent)
        FailAt(e.value.loc, "module: attribute 'schedule' expects a target, as \"cpu-avx2-2t\"");
      m.set_scheduled_for(e.value.text);
    } else {
      FailAt(e.loc, "module: unknown attribute '{}' (expected num_replicas, mesh_axes, mesh_shape, "
             "mesh_devices or schedule)", e.name);
    }
  }
  if (!axes && !shape && !devices) return;
  if (!axes || !shape)
    FailAt(mesh_loc.line ? mesh_loc : Loc(tok_), "module: a mesh needs both mesh_axes and mesh_shape");
  try {
    m.set_mesh(Mesh(*axes, *shape, devices.value_or(std::vector<int64_t>{})));
  } catch (const Error& err) {
    FailAt(mesh_loc, "module: {}", err.message());
  }
}

void Parser::ParseFunction(Module& m) {
  Advance();  // func
  Token name = Expect(TokenKind::kGlobalName, "a function name '@name'");
  if (m.FindFunction(name.text) != nullptr)
    FailAt(Loc(name), "duplicate function name @{}", name.text);
  Function* f = m.AddFunction(name.text);
  Expect(TokenKind::kLBrace, "'{' opening the function body");
  Scope scope;
  while (At(TokenKind::kLocalName) ||
         (At(TokenKind::kIdent) && tok_.text != "return" && tok_.text != "func")) {
    ParseNode(*f, scope);
  }
  if (At(TokenKind::kRBrace) || AtKeyword("func"))
    FailAt(Loc(tok_), "function @{} does not end with 'return'", name.text);
  if (!AtKeyword("return")) FailExpected("a node or 'return'");
  f->set_loc(Loc(tok_));
  Advance();
  std::vector<Value*> results;
  if (At(TokenKind::kLocalName)) {
    results.push_back(ParseUse(scope));
    while (At(TokenKind::kComma)) {
      Advance();
      results.push_back(ParseUse(scope));
    }
  }
  f->set_results(std::move(results));
  Expect(TokenKind::kRBrace, "',' or '}' after the returned values");
}

// `%a, %b =` (or nothing, for a node without results).
std::vector<Token> Parser::ParseResultNames(const Scope& scope) {
  std::vector<Token> names;
  if (!At(TokenKind::kLocalName)) return names;
  while (true) {
    Token t = Expect(TokenKind::kLocalName, "a result name '%name'");
    auto it = scope.find(t.text);
    if (it != scope.end()) {
      FailAt(Loc(t), "redefinition of value %{} (first defined at {}:{})", t.text,
             it->second.second.line, it->second.second.col);
    }
    for (const Token& prev : names)
      if (prev.text == t.text) FailAt(Loc(t), "redefinition of value %{} in the same node", t.text);
    names.push_back(std::move(t));
    if (!At(TokenKind::kComma)) break;
    Advance();
  }
  Expect(TokenKind::kEqual, "',' or '=' after the result names");
  return names;
}

void Parser::ParseNode(Function& f, Scope& scope) {
  const SourceLoc loc = Loc(tok_);
  std::vector<Token> names = ParseResultNames(scope);
  Token op_tok = Expect(TokenKind::kIdent, "an op name");
  std::optional<OpKind> op = ParseOpKind(op_tok.text);
  if (!op) FailAt(Loc(op_tok), "unknown op '{}'", op_tok.text);
  Expect(TokenKind::kLParen, "'(' after the op name");
  std::vector<Value*> operands;
  if (!At(TokenKind::kRParen)) {
    operands.push_back(ParseUse(scope));
    while (At(TokenKind::kComma)) {
      Advance();
      operands.push_back(ParseUse(scope));
    }
  }
  Expect(TokenKind::kRParen, "',' or ')' after an operand");
  std::vector<AttrEntry> entries;
  if (At(TokenKind::kLBrace)) {
    Advance();
    entries = ParseAttrEntries();
  }
  Attrs attrs = DefaultAttrs(*op);
  std::vector<PendingLiteral> pending = ApplyAttrs(*op, entries, attrs, Loc(op_tok));
  std::vector<ScheduleEntry> schedule;
  if (AtKeyword("sched")) schedule = ParseSchedule(op_tok.text);
  std::vector<ParsedType> types = ParseTypes(op_tok.text, names.size());
  FillLiterals(op_tok.text, pending, types);
  std::vector<TensorType> result_types;
  for (const ParsedType& t : types) result_types.push_back(t.type);
  Node* node = f.AddNode(*op, std::move(operands), std::move(attrs), result_types);
  node->set_loc(names.empty() ? Loc(op_tok) : loc);
  node->set_schedule(std::move(schedule));
  for (size_t i = 0; i < names.size(); ++i) {
    Value* v = node->result(i);
    v->set_name(names[i].text);
    v->set_sharding(std::move(types[i].sharding));
    scope.emplace(names[i].text, std::make_pair(v, Loc(names[i])));
  }
}

// `sched{key=value, ...}` after a node's attributes (Note [The schedule in the IR]): each value an
// integer, a list of integers or one word; what the entries mean is the backend's to check.
std::vector<ScheduleEntry> Parser::ParseSchedule(std::string_view op) {
  Advance();
  Expect(TokenKind::kLBrace, "'{' after 'sched'");
  std::vector<ScheduleEntry> out;
  for (const AttrEntry& e : ParseAttrEntries()) {
    for (const ScheduleEntry& seen : out)
      if (seen.key == e.name) FailAt(e.loc, "{}: duplicate schedule entry '{}'", op, e.name);
    ScheduleEntry entry{e.name, {}, {}};
    auto integer = [&](const AttrValue& v) {
      std::optional<int64_t> n;
      if (v.kind == AttrValue::Kind::kNumber)
        n = ParseInteger(v.text, v.loc, fmt::format("{}: schedule entry '{}': ", op, e.name));
      if (!n) FailAt(v.loc, "{}: schedule entry '{}' expects an integer, a list of integers or a word, got {}", op, e.name, Describe(v));
      return *n;
    };
    if (e.value.kind == AttrValue::Kind::kIdent) entry.word = e.value.text;
    else if (e.value.kind == AttrValue::Kind::kList)
      for (const AttrValue& item : e.value.items) entry.ints.push_back(integer(item));
    else entry.ints.push_back(integer(e.value));
    out.push_back(std::move(entry));
  }
  return out;
}

Value* Parser::ParseUse(const Scope& scope) {
  Token t = Expect(TokenKind::kLocalName, "a value '%name'");
  auto it = scope.find(t.text);
  if (it == scope.end()) FailAt(Loc(t), "use of undefined value %{}", t.text);
  return it->second.first;
}

// `name=value, name=value}`: the entries of an attribute dict, after its '{'.
std::vector<AttrEntry> Parser::ParseAttrEntries() {
  std::vector<AttrEntry> entries;
  while (!At(TokenKind::kRBrace)) {
    if (!entries.empty()) Expect(TokenKind::kComma, "',' or '}' in the attribute list");
    Token name = Expect(TokenKind::kIdent, "an attribute name");
    Expect(TokenKind::kEqual, "'=' after the attribute name");
    entries.push_back({name.text, Loc(name), ParseAttrValue(0)});
  }
  Advance();
  return entries;
}

AttrValue Parser::ParseAttrValue(int depth) {
  AttrValue v;
  v.loc = Loc(tok_);
  switch (tok_.kind) {
    case TokenKind::kNumber: v.kind = AttrValue::Kind::kNumber; break;
    case TokenKind::kIdent: v.kind = AttrValue::Kind::kIdent; break;
    case TokenKind::kString: v.kind = AttrValue::Kind::kString; break;
    case TokenKind::kLBracket: {
      if (depth >= kMaxListDepth)
        FailAt(v.loc, "lists nested too deeply (more than {} levels)", kMaxListDepth);
      v.kind = AttrValue::Kind::kList;
      Advance();
      while (!At(TokenKind::kRBracket)) {
        if (!v.items.empty()) Expect(TokenKind::kComma, "',' or ']' in the list");
        v.items.push_back(ParseAttrValue(depth + 1));
      }
      Advance();
      return v;
    }
    default: FailExpected("an attribute value");
  }
  v.text = std::move(tok_.text);
  Advance();
  return v;
}

// Fills `attrs` from the entries. Literal fields are returned, to be built once the result type
// is known; they are required.
std::vector<PendingLiteral> Parser::ApplyAttrs(OpKind op, const std::vector<AttrEntry>& entries,
                                               Attrs& attrs, const SourceLoc& op_loc) {
  const std::string_view op_name = OpName(op);
  std::vector<MutableField> fields = MutableAttrFields(attrs);
  std::vector<bool> seen(fields.size(), false);
  std::vector<PendingLiteral> pending;
  for (const AttrEntry& e : entries) {
    size_t i = 0;
    while (i < fields.size() && fields[i].name != e.name) ++i;
    if (i == fields.size()) {
      std::string known;
      for (const MutableField& f : fields) known += (known.empty() ? "" : ", ") + std::string(f.name);
      FailAt(e.loc, "{}: unknown attribute '{}' ({})", op_name, e.name,
             known.empty() ? "it takes no attributes" : "expected one of: " + known);
    }
    if (seen[i]) FailAt(e.loc, "{}: duplicate attribute '{}'", op_name, e.name);
    seen[i] = true;
    if (Literal** lit = std::get_if<Literal*>(&fields[i].ref)) {
      pending.push_back({fields[i].name, *lit, &e.value});
    } else {
      SetField(op_name, e, fields[i].ref);
    }
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!seen[i] && std::holds_alternative<Literal*>(fields[i].ref))
      FailAt(op_loc, "{}: missing attribute '{}' (the literal value)", op_name, fields[i].name);
  }
  return pending;
}

void Parser::SetField(std::string_view op, const AttrEntry& e, const MutableFieldRef& ref) {
  const AttrValue& v = e.value;
  const FieldReader read(op, e);
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          *p = read.Integer(v, "an integer");
        } else if constexpr (std::is_same_v<T, bool>) {
          if (v.kind != AttrValue::Kind::kIdent || (v.text != "true" && v.text != "false"))
            read.Fail("true or false", v);
          *p = v.text == "true";
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (v.kind != AttrValue::Kind::kString) read.Fail("a string", v);
          *p = v.text;
        } else if constexpr (std::is_same_v<T, DType>) {
          std::optional<DType> t;
          if (v.kind == AttrValue::Kind::kIdent) t = ParseDType(v.text);
          if (!t) read.Fail("a dtype (f32, f64, bf16, f16, i8, i32, i64, u8, u32, bool)", v);
          *p = *t;
        } else if constexpr (std::is_same_v<T, CompareDir>) {
          *p = read.Enum<CompareDir>("a comparison direction");
        } else if constexpr (std::is_same_v<T, ReduceKind>) {
          *p = read.Enum<ReduceKind>("a reduction kind");
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          *p = read.Integers(v, "a list of integers");
        } else if constexpr (std::is_same_v<T, ReplicaGroups>) {
          if (v.kind != AttrValue::Kind::kList) read.Fail("a list of integer lists", v);
          p->clear();
          for (const AttrValue& group : v.items)
            p->push_back(read.Integers(group, "a list of integer lists"));
        } else {
          static_assert(std::is_same_v<T, Literal>, "a field type the parser does not know");
        }
      },
      ref);
}

void Parser::FillLiterals(std::string_view op, const std::vector<PendingLiteral>& pending,
                          const std::vector<ParsedType>& types) {
  for (const PendingLiteral& p : pending) {
    if (types.size() != 1) {
      FailAt(p.value->loc, "{}: attribute '{}' takes its type from the node's one result, but "
             "the node has {}", op, p.field, types.size());
    }
    const TensorType& type = types[0].type;
    const int64_t n = type.NumElements();
    if (n > kMaxConstantElements) {
      FailAt(p.value->loc, "constant too large for the text format; pass it as a parameter ({} "
             "has {} elements, at most {})", type.ToString(), n, kMaxConstantElements);
    }
    constant_bytes_ += n * DTypeSize(type.dtype);
    if (constant_bytes_ > kMaxModuleConstantBytes) {
      FailAt(p.value->loc, "constants of this module exceed {} MiB in total; pass large values "
             "as parameters", kMaxModuleConstantBytes >> 20);
    }
    *p.literal = BuildLiteral(type, *p.value, op);
  }
}

// `: type, type`: exactly one type per result (none, and no ':', for a node without results).
std::vector<ParsedType> Parser::ParseTypes(std::string_view op, size_t num_results) {
  std::vector<ParsedType> types;
  if (num_results == 0) {
    if (At(TokenKind::kColon))
      FailAt(Loc(tok_), "{}: result types given, but the node names no results", op);
    return types;
  }
  const SourceLoc colon = Loc(tok_);
  Expect(TokenKind::kColon, "':' and the result types");
  types.push_back(ParseType());
  while (At(TokenKind::kComma)) {
    Advance();
    types.push_back(ParseType());
  }
  if (types.size() != num_results) {
    FailAt(colon, "{}: {} result{} but {} type{}", op, num_results, num_results == 1 ? "" : "s",
           types.size(), types.size() == 1 ? "" : "s");
  }
  return types;
}

// `f32[4,8]` with an optional sharding `{[x], []}`.
ParsedType Parser::ParseType() {
  Token name = Expect(TokenKind::kIdent, "a type such as f32[4,8]");
  std::optional<DType> dtype = ParseDType(name.text);
  if (!dtype) FailAt(Loc(name), "unknown dtype '{}'", name.text);
  Expect(TokenKind::kLBracket, "'[' after the dtype");
  std::vector<int64_t> dims;
  while (!At(TokenKind::kRBracket)) {
    if (!dims.empty()) Expect(TokenKind::kComma, "',' or ']' in the dimensions");
    Token d = Expect(TokenKind::kNumber, "a dimension size");
    std::optional<int64_t> n = ParseInteger(d.text, Loc(d));
    if (!n || *n < 0) FailAt(Loc(d), "dimension size must be a non-negative integer, got {}", d.text);
    dims.push_back(*n);
  }
  Advance();
  ParsedType t;
  t.type = TensorType(*dtype, Shape(std::move(dims)));
  if (!CheckedNumElements(t.type.shape.dims()))
    FailAt(Loc(name), "type {} has more elements than int64 can count", t.type.ToString());
  if (At(TokenKind::kLBrace)) t.sharding = ParseSharding(t.type.rank());
  return t;
}

// `{[x,y], [], partial=[z]}`: one axis list per dimension, then optional partial axes.
Sharding Parser::ParseSharding(int64_t rank) {
  const SourceLoc loc = Loc(tok_);
  Advance();
  Sharding s;
  while (!At(TokenKind::kRBrace)) {
    if (!s.dims.empty()) Expect(TokenKind::kComma, "',' or '}' in the sharding");
    if (AtKeyword("partial")) {
      Advance();
      Expect(TokenKind::kEqual, "'=' after 'partial'");
      s.partial = ParseAxes();
      if (!At(TokenKind::kRBrace)) FailExpected("'}' after partial=[...], which comes last");
      break;
    }
    if (!At(TokenKind::kLBracket)) FailExpected("'[axes]' for a dimension or 'partial=[axes]'");
    s.dims.push_back(ParseAxes());
  }
  Advance();
  if (static_cast<int64_t>(s.dims.size()) != rank) {
    FailAt(loc, "sharding has {} dimension entr{} but the type has rank {} (write one [axes] per "
           "dimension, [] when replicated)", s.dims.size(), s.dims.size() == 1 ? "y" : "ies", rank);
  }
  return s;
}

// `[x, y]`: mesh axis names (identifiers, or strings for other bytes).
std::vector<std::string> Parser::ParseAxes() {
  Expect(TokenKind::kLBracket, "'['");
  std::vector<std::string> axes;
  while (!At(TokenKind::kRBracket)) {
    if (!axes.empty()) Expect(TokenKind::kComma, "',' or ']' in the axis list");
    if (!At(TokenKind::kIdent) && !At(TokenKind::kString)) FailExpected("a mesh axis name");
    axes.push_back(std::move(tok_.text));
    Advance();
  }
  Advance();
  return axes;
}

}  // namespace

std::unique_ptr<Module> ParseModule(std::string_view text, std::string_view filename) {
  return Parser(text, filename).Run();
}

}  // namespace axle::ir
