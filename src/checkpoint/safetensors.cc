#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

namespace axle::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host: data is copied as is");

using OrderedJson = nlohmann::ordered_json;

// Note [Safetensors layout]
// The writer reproduces the reference implementation (safetensors/src/tensor.rs, `prepare`):
//   * tensors are sorted by dtype, largest alignment first (the order of the reference's `Dtype`
//     enum, reversed), then by name (bytewise), and laid out contiguously in that order;
//   * the header is compact JSON (serde_json): "__metadata__" first when there is metadata, then
//     one {"dtype":..,"shape":[..],"data_offsets":[b,e]} entry per tensor in layout order;
//   * the header is padded with spaces to a multiple of 8 bytes, so the buffer starts 8-aligned
//     and every tensor is aligned to its element size.
// The reference writes "__metadata__" keys in Rust HashMap order (random per process); Axle sorts
// them, so byte-exact agreement holds for files with at most one metadata key.
//
// The reader mirrors the reference's validation (`Metadata::validate`): entries sorted by
// (begin, end) must tile [0, buffer size) exactly, each holding shape * dtype size bytes. It adds
// what serde's HashMap silently allows: a duplicate tensor name is an error, not "last one wins".

constexpr size_t kSizePrefixBytes = 8;             // the u64 header size N
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr int kMaxJsonDepth = 64;                  // a real header nests 3 deep
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int rank;  // position in the reference's `Dtype` enum (increasing alignment)
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 0}, {DType::kU8, "U8", 4},      {DType::kI8, "I8", 5},
    {DType::kF16, "F16", 11},  {DType::kBF16, "BF16", 12}, {DType::kI32, "I32", 13},
    {DType::kU32, "U32", 14},  {DType::kF32, "F32", 15},   {DType::kF64, "F64", 17},
    {DType::kI64, "I64", 18},
};
// Dtypes the format defines that Axle has no element type for.
constexpr std::string_view kUnsupportedDTypes[] = {
    "F4", "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16", "C64", "U64",
};

const DTypeInfo& InfoOf(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  AXLE_CHECK(false, "no safetensors dtype for {}", DTypeName(dtype));
}

// "F32, F64, BF16, ...", in Axle's dtype order.
std::string SupportedDTypeList() {
  std::string out;
  for (int i = 0; i < kNumDTypes; ++i) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", InfoOf(static_cast<DType>(i)).name);
  }
  return out;
}

// `s` in single quotes, with quotes, backslashes and control bytes escaped; cut after `max`
// bytes. For names in error messages.
std::string Quote(std::string_view s, size_t max = 200) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);  // printable ASCII and UTF-8 sequences as they are
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out + (s.size() > max ? "'..." : "'");
}

std::string DimsText(const std::vector<int64_t>& dims) { return Shape(dims).ToString(); }

// --- Header parsing -------------------------------------------------------------------------

// One tensor entry of the header.
struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t byte_size = 0;  // elements * dtype size
};

struct Header {
  std::vector<Entry> entries;  // in data order after ValidateLayout
  SafetensorsMetadata metadata;
};

// The deepest nesting of [ and { in `text` (outside strings). Checked before parsing so that a
// header of a million '[' costs no memory.
int MaxNesting(std::string_view text) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Parses the header JSON, rejecting duplicate keys in any object (nlohmann keeps the last).
OrderedJson ParseJson(std::string_view text, std::string_view file) {
  // nlohmann reads a NUL byte as the end of the input; in JSON it is an error anywhere.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    Fail("{}: invalid safetensors header: not valid UTF-8 JSON: a NUL byte at header offset {}",
         file, nul);
  }
  if (MaxNesting(text) > kMaxJsonDepth) {
    Fail("{}: invalid safetensors header: JSON nested more than {} levels deep", file,
         kMaxJsonDepth);
  }
  std::vector<std::set<std::string>> keys;                // the keys seen in each open object
  std::optional<std::pair<std::string, bool>> duplicate;  // (key, at the top level)
  OrderedJson::parser_callback_t check = [&](int, nlohmann::json::parse_event_t event,
                                             OrderedJson& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && !duplicate && parsed.is_string() &&
        !keys.back().insert(parsed.get<std::string>()).second) {
      duplicate.emplace(parsed.get<std::string>(), keys.size() == 1);
    }
    return true;
  };
  OrderedJson json;
  try {
    json = OrderedJson::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    const size_t tag_end = what.find("] ");  // drop "[json.exception.parse_error.101] "
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    Fail("{}: invalid safetensors header: not valid UTF-8 JSON: {}", file, what);
  }
  if (duplicate && duplicate->second) {
    Fail("{}: invalid safetensors header: duplicate tensor name {}", file, Quote(duplicate->first));
  }
  if (duplicate) {
    Fail("{}: invalid safetensors header: duplicate field {} in an entry", file,
         Quote(duplicate->first));
  }
  return json;
}

DType ResolveDType(const std::string& name, const std::string& tensor, std::string_view file) {
  if (std::optional<DType> dtype = ParseSafetensorsDType(name)) return *dtype;
  const bool known = std::find(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes),
                               name) != std::end(kUnsupportedDTypes);
  Fail("{}: tensor {} has {} dtype {}; Axle reads {}{}", file, Quote(tensor),
       known ? "unsupported" : "unknown", Quote(name), SupportedDTypeList(),
       known ? " (convert the checkpoint, e.g. with torch: t.to(torch.float32))" : "");
}

// A non-negative JSON integer that fits in `max`, or an error naming `what`.
uint64_t GetUnsigned(const OrderedJson& value, uint64_t max, std::string_view what,
                     const std::string& tensor, std::string_view file) {
  if (!value.is_number_unsigned() || value.get<uint64_t>() > max) {
    Fail("{}: tensor {}: {} must be a non-negative integer{}, not {}", file, Quote(tensor), what,
         max < UINT64_MAX ? " below 2^63" : "", value.dump());
  }
  return value.get<uint64_t>();
}

// The field `key` of entry `object`, which must have JSON type `type`.
const OrderedJson& Field(const OrderedJson& object, const char* key, OrderedJson::value_t type,
                         const std::string& tensor, std::string_view file) {
  const auto it = object.find(key);
  if (it == object.end()) Fail("{}: tensor {} lacks the field \"{}\"", file, Quote(tensor), key);
  if (it->type() != type) {
    Fail("{}: tensor {}: \"{}\" must be {}, not {}", file, Quote(tensor), key,
         OrderedJson(type).type_name(), it->type_name());
  }
  return *it;
}

Entry ParseEntry(const std::string& name, const OrderedJson& value, std::string_view file) {
  using Type = OrderedJson::value_t;
  if (!value.is_object()) {
    Fail(
        "{}: tensor {}: the header entry must be an object with \"dtype\", \"shape\" and "
        "\"data_offsets\", not {}",
        file, Quote(name), value.type_name());
  }
  Entry entry;
  entry.name = name;
  entry.dtype =
      ResolveDType(Field(value, "dtype", Type::string, name, file).get<std::string>(), name, file);
  for (const OrderedJson& dim : Field(value, "shape", Type::array, name, file)) {
    entry.dims.push_back(static_cast<int64_t>(
        GetUnsigned(dim, INT64_MAX, "every dimension of \"shape\"", name, file)));
  }
  const OrderedJson& offsets = Field(value, "data_offsets", Type::array, name, file);
  if (offsets.size() != 2) {
    Fail("{}: tensor {}: \"data_offsets\" must be [begin, end], not {}", file, Quote(name),
         offsets.dump());
  }
  entry.begin = GetUnsigned(offsets[0], UINT64_MAX, "\"data_offsets\"", name, file);
  entry.end = GetUnsigned(offsets[1], UINT64_MAX, "\"data_offsets\"", name, file);
  const std::optional<int64_t> count = CheckedNumElements(entry.dims);
  const int64_t item = DTypeSize(entry.dtype);
  if (!count || *count > INT64_MAX / item) {
    Fail("{}: tensor {}: shape {} of {} has more bytes than fit in 64 bits", file, Quote(name),
         DimsText(entry.dims), InfoOf(entry.dtype).name);
  }
  entry.byte_size = static_cast<uint64_t>(*count * item);
  return entry;
}

SafetensorsMetadata ParseMetadata(const OrderedJson& value, std::string_view file) {
  SafetensorsMetadata metadata;
  if (value.is_null()) return metadata;  // serde reads null as "no metadata"
  if (!value.is_object()) {
    Fail("{}: invalid safetensors header: \"__metadata__\" must be an object of strings, not {}",
         file, value.type_name());
  }
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      Fail("{}: invalid safetensors header: \"__metadata__\" value {} must be a string, not {}",
           file, Quote(key), text.type_name());
    }
    metadata[key] = text.get<std::string>();
  }
  return metadata;
}

Header ParseHeader(std::string_view text, std::string_view file) {
  const OrderedJson json = ParseJson(text, file);
  if (!json.is_object()) {
    Fail("{}: invalid safetensors header: the header must be a JSON object, not {}", file,
         json.type_name());
  }
  Header header;
  for (const auto& [key, value] : json.items()) {
    if (key == kMetadataKey) {
      header.metadata = ParseMetadata(value, file);
    } else {
      header.entries.push_back(ParseEntry(key, value, file));
    }
  }
  return header;
}

// Checks that the entries tile a buffer of `buffer_size` bytes exactly and sorts them into data
// order (by (begin, end), ties in header order, as the reference's stable sort).
void ValidateLayout(std::vector<Entry>* entries, uint64_t buffer_size, std::string_view file) {
  for (const Entry& e : *entries) {
    const std::string offsets = fmt::format("data_offsets [{}, {}]", e.begin, e.end);
    if (e.end < e.begin)
      Fail("{}: tensor {}: {} end before they begin", file, Quote(e.name), offsets);
    if (e.end > buffer_size) {
      Fail(
          "{}: tensor {}: {} run past the end of the data buffer, which has {} bytes (the file is "
          "truncated or its header is wrong)",
          file, Quote(e.name), offsets, buffer_size);
    }
    if (e.end - e.begin != e.byte_size) {
      Fail("{}: tensor {}: {} {} needs {} bytes but {} hold {}", file, Quote(e.name),
           InfoOf(e.dtype).name, DimsText(e.dims), e.byte_size, offsets, e.end - e.begin);
    }
  }
  std::stable_sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t start = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : *entries) {
    if (e.begin > start) {
      Fail(
          "{}: tensor {}: data_offsets [{}, {}] leave a hole of {} unused bytes at {} (safetensors "
          "tensors must cover the data buffer exactly)",
          file, Quote(e.name), e.begin, e.end, e.begin - start, start);
    }
    if (e.begin < start) {
      Fail("{}: tensor {}: data_offsets [{}, {}] overlap tensor {} at [{}, {}]", file,
           Quote(e.name), e.begin, e.end, Quote(previous->name), previous->begin, previous->end);
    }
    start = e.end;
    previous = &e;
  }
  if (start != buffer_size) {
    Fail(
        "{}: {} unexpected bytes after the last tensor (the tensors cover {} of the {} data "
        "bytes)",
        file, buffer_size - start, start, buffer_size);
  }
}

// Checks the 8-byte size prefix of a file of `file_size` bytes; returns the header size N.
uint64_t CheckHeaderSize(std::span<const uint8_t> prefix, uint64_t file_size,
                         std::string_view file) {
  if (file_size < kSizePrefixBytes) {
    Fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header size", file,
         file_size);
  }
  uint64_t n = 0;
  for (size_t i = kSizePrefixBytes; i-- > 0;) n = (n << 8) | prefix[i];
  if (n > kMaxHeaderBytes) {
    Fail("{}: not a safetensors file: header size {} is over the 100 MB limit", file, n);
  }
  if (n > file_size - kSizePrefixBytes) {
    Fail(
        "{}: truncated safetensors file: the header is {} bytes but only {} bytes follow the "
        "header size",
        file, n, file_size - kSizePrefixBytes);
  }
  return n;
}

// A zero literal for `entry` (its bytes to be filled by the caller).
ir::Literal EmptyLiteral(const Entry& entry) {
  return ir::Literal(ir::TensorType(entry.dtype, Shape(entry.dims)));
}

// NumPy and torch read any nonzero byte as true; Axle's bool literals hold 0 or 1.
void NormalizeBool(ir::Literal* lit) {
  if (lit->dtype() != DType::kBool) return;
  for (uint8_t& b : lit->mutable_bytes()) b = b != 0;
}

// --- Writing --------------------------------------------------------------------------------

// Whether `s` is valid UTF-8 (as Rust's str: no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80)
      len = 1, cp = c;
    else if ((c & 0xe0) == 0xc0)
      len = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
      len = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
      len = 4, cp = c & 0x07;
    else
      return false;
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// `s` as a JSON string, escaped as serde_json does: '"', '\\' and control characters only.
void AppendJsonString(std::string* out, std::string_view s) {
  *out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20)
          *out += fmt::format("\\u{:04x}", c);
        else
          *out += ch;
    }
  }
  *out += '"';
}

// The file's first part (size prefix and padded header) and the tensors in layout order.
struct Prepared {
  std::vector<uint8_t> head;
  std::vector<const std::pair<std::string, ir::Literal>*> order;
};

void CheckWritable(const std::vector<std::pair<std::string, ir::TensorType>>& tensors,
                   const SafetensorsMetadata& metadata) {
  std::set<std::string_view> names;
  for (const auto& [name, type] : tensors) {
    if (name == kMetadataKey) Fail("cannot write safetensors: \"__metadata__\" is a reserved name");
    if (!IsValidUtf8(name))
      Fail("cannot write safetensors: tensor name {} is not valid UTF-8", Quote(name));
    if (!names.insert(name).second)
      Fail("cannot write safetensors: duplicate tensor name {}", Quote(name));
  }
  for (const auto& [key, value] : metadata) {
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      Fail("cannot write safetensors: metadata entry {} is not valid UTF-8", Quote(key));
    }
  }
}

}  // namespace

SafetensorsHead PrepareSafetensorsHead(const std::vector<std::pair<std::string, ir::TensorType>>& tensors,
                                       const SafetensorsMetadata& metadata) {
  CheckWritable(tensors, metadata);
  SafetensorsHead p;
  for (size_t i = 0; i < tensors.size(); ++i) p.order.push_back(i);
  std::sort(p.order.begin(), p.order.end(), [&](size_t a, size_t b) {
    const int ra = InfoOf(tensors[a].second.dtype).rank, rb = InfoOf(tensors[b].second.dtype).rank;
    return ra != rb ? ra > rb : tensors[a].first < tensors[b].first;
  });
  p.data_offsets.resize(tensors.size());
  std::string json = "{";
  if (!metadata.empty()) {
    AppendJsonString(&json, kMetadataKey);
    json += ":{";
    for (const auto& [key, value] : metadata) {
      if (json.back() != '{') json += ',';
      AppendJsonString(&json, key);
      json += ':';
      AppendJsonString(&json, value);
    }
    json += '}';
  }
  uint64_t offset = 0;
  for (size_t i : p.order) {
    const auto& [name, type] = tensors[i];
    if (json.size() > 1) json += ',';
    AppendJsonString(&json, name);
    const uint64_t size = static_cast<uint64_t>(type.ByteSize());
    json += fmt::format(R"(:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", InfoOf(type.dtype).name,
                        fmt::join(type.shape.dims(), ","), offset, offset + size);
    p.data_offsets[i] = {offset, offset + size};
    offset += size;
  }
  json += '}';
  json.append((kSizePrefixBytes - json.size() % kSizePrefixBytes) % kSizePrefixBytes, ' ');
  if (json.size() > kMaxHeaderBytes) {
    Fail("cannot write safetensors: the header would be {} bytes, over the 100 MB limit",
         json.size());
  }
  for (size_t i = 0; i < kSizePrefixBytes; ++i)
    p.bytes.push_back(static_cast<uint8_t>(json.size() >> (8 * i)));
  p.bytes.insert(p.bytes.end(), json.begin(), json.end());
  return p;
}

namespace {

Prepared Prepare(const TensorMap& tensors, const SafetensorsMetadata& metadata) {
  std::vector<std::pair<std::string, ir::TensorType>> types;
  for (const auto& [name, lit] : tensors) types.emplace_back(name, lit.type());
  SafetensorsHead head = PrepareSafetensorsHead(types, metadata);
  Prepared p{std::move(head.bytes), {}};
  for (size_t i : head.order) p.order.push_back(&tensors[i]);
  return p;
}

// --- File I/O -------------------------------------------------------------------------------

std::string ErrnoText(int err) { return std::system_category().message(err); }

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly out.size() bytes at `offset`; a short read means the file shrank.
void ReadAt(int fd, uint64_t offset, std::span<uint8_t> out, const std::string& path) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot read safetensors file '{}': {}", path, ErrnoText(errno));
    if (n == 0) Fail("{}: truncated safetensors file: it shrank while being read", path);
    done += static_cast<size_t>(n);
  }
}

// Writes all of `data` to `fd`; returns 0 or the errno of the failure.
int WriteAll(int fd, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

[[noreturn]] void FailWrite(const std::string& path, const std::string& tmp, std::string_view step,
                            int err) {
  ::unlink(tmp.c_str());
  Fail("cannot write safetensors file '{}': {} '{}' failed: {}", path, step, tmp, ErrnoText(err));
}

}  // namespace

std::string_view SafetensorsDTypeName(DType dtype) { return InfoOf(dtype).name; }

std::optional<DType> ParseSafetensorsDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

TensorMap ParseSafetensors(std::span<const uint8_t> bytes, std::string_view name_for_errors,
                           SafetensorsMetadata* metadata) {
  const std::string_view file = name_for_errors;
  const uint64_t n = CheckHeaderSize(bytes, bytes.size(), file);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + kSizePrefixBytes, n);
  Header header = ParseHeader(text, file);
  const std::span<const uint8_t> buffer = bytes.subspan(kSizePrefixBytes + n);
  ValidateLayout(&header.entries, buffer.size(), file);
  TensorMap tensors;
  tensors.reserve(header.entries.size());
  for (const Entry& e : header.entries) {
    ir::Literal lit = EmptyLiteral(e);
    if (e.byte_size > 0)
      std::memcpy(lit.mutable_bytes().data(), buffer.data() + e.begin, e.byte_size);
    NormalizeBool(&lit);
    tensors.emplace_back(e.name, std::move(lit));
  }
  if (metadata != nullptr) *metadata = std::move(header.metadata);
  return tensors;
}

TensorMap LoadSafetensors(const std::string& path, SafetensorsMetadata* metadata) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) Fail("cannot open safetensors file '{}': {}", path, ErrnoText(errno));
  struct stat st;
  if (::fstat(file.fd, &st) != 0)
    Fail("cannot stat safetensors file '{}': {}", path, ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) Fail("'{}' is not a regular file", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  uint8_t prefix[kSizePrefixBytes] = {};
  if (file_size >= kSizePrefixBytes) ReadAt(file.fd, 0, prefix, path);
  const uint64_t n = CheckHeaderSize(prefix, file_size, path);
  std::string text(n, '\0');
  ReadAt(file.fd, kSizePrefixBytes, {reinterpret_cast<uint8_t*>(text.data()), text.size()}, path);
  Header header = ParseHeader(text, path);
  const uint64_t data_start = kSizePrefixBytes + n;
  ValidateLayout(&header.entries, file_size - data_start, path);
  TensorMap tensors;
  tensors.reserve(header.entries.size());
  for (const Entry& e : header.entries) {
    ir::Literal lit = EmptyLiteral(e);
    ReadAt(file.fd, data_start + e.begin, lit.mutable_bytes(), path);
    NormalizeBool(&lit);
    tensors.emplace_back(e.name, std::move(lit));
  }
  if (metadata != nullptr) *metadata = std::move(header.metadata);
  return tensors;
}

std::vector<uint8_t> SerializeSafetensors(const TensorMap& tensors,
                                          const SafetensorsMetadata& metadata) {
  Prepared p = Prepare(tensors, metadata);
  std::vector<uint8_t> out = std::move(p.head);
  for (const auto* t : p.order)
    out.insert(out.end(), t->second.bytes().begin(), t->second.bytes().end());
  return out;
}

void SaveSafetensors(const std::string& path, const TensorMap& tensors,
                     const SafetensorsMetadata& metadata) {
  const Prepared p = Prepare(tensors, metadata);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) FailWrite(path, tmp, "creating", errno);
  int err = WriteAll(fd, p.head);
  for (size_t i = 0; i < p.order.size() && err == 0; ++i)
    err = WriteAll(fd, p.order[i]->second.bytes());
  if (err != 0) {
    ::close(fd);
    FailWrite(path, tmp, "writing", err);
  }
  if (::fsync(fd) != 0) {
    err = errno;
    ::close(fd);
    FailWrite(path, tmp, "syncing", err);
  }
  if (::close(fd) != 0) FailWrite(path, tmp, "closing", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) FailWrite(path, tmp, "renaming", errno);
}

}  // namespace axle::checkpoint
