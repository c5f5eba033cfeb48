#include "ir/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <system_error>

#include "core/file.h"
#include "core/half.h"

namespace axle::ir {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy I/O assumes a little-endian host: '<' data is copied as is");

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kAlign = 64;                // NumPy's ARRAY_ALIGN: data starts at a multiple
constexpr size_t kGrowthAxisMaxDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS (see SerializeNpy)
constexpr size_t kMaxShownHeader = 160;      // header characters quoted in an error message

struct NpyDType {
  DType dtype;
  std::string_view descr;  // as np.save writes it
};
constexpr NpyDType kNpyDTypes[] = {
    {DType::kF32, "<f4"}, {DType::kF64, "<f8"}, {DType::kF16, "<f2"},
    {DType::kI8, "|i1"},  {DType::kI32, "<i4"}, {DType::kI64, "<i8"},
    {DType::kU8, "|u1"},  {DType::kU32, "<u4"}, {DType::kBool, "|b1"},
};

std::string SupportedDTypes() {
  std::string out;
  for (const NpyDType& t : kNpyDTypes) {
    if (!out.empty()) out += ", ";
    out += fmt::format("'{}' ({})", t.descr, DTypeName(t.dtype));
  }
  return out;
}

// `s` as a quoted, printable string (non-printable bytes as \xNN), cut after `max` characters.
std::string Printable(std::string_view s, size_t max) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out + (s.size() > max ? "\"..." : "\"");
}

// "(2, 3)", "(3,)" and "()": Python's repr of a shape tuple.
std::string ShapeRepr(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

// The parsed header dict.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header dict: the subset of Python literal syntax np.save writes (a dict of quoted
// keys to a quoted string, True/False, or a tuple of non-negative ints). Every failure throws
// axle::Error naming the file, the problem, the column and the header text.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  NpyHeader Parse();

 private:
  [[noreturn]] void Malformed(std::string_view what) const {
    Fail("{}: malformed .npy header: {} at column {} of {}", file_, what, pos_ + 1,
         Printable(text_, kMaxShownHeader));
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool AtEnd() const { return pos_ >= text_.size(); }
  void SkipSpace() {
    while (!AtEnd() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }
  bool Consume(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void ParseEntry(NpyHeader* header, std::set<std::string>* seen);
  std::string ParseString();
  bool ParseBool();
  std::vector<int64_t> ParseShape();
  int64_t ParseDim();

  std::string_view text_;
  std::string_view file_;
  size_t pos_ = 0;
};

NpyHeader HeaderParser::Parse() {
  NpyHeader header;
  std::set<std::string> seen;
  SkipSpace();
  if (!Consume('{')) Malformed("expected '{' starting the header dict");
  while (true) {
    SkipSpace();
    if (Consume('}')) break;
    ParseEntry(&header, &seen);
    SkipSpace();
    if (Consume(',')) continue;
    if (Consume('}')) break;
    Malformed("expected ',' or '}' after a dict entry");
  }
  SkipSpace();
  if (!AtEnd()) Malformed("unexpected text after the header dict");
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!seen.count(key)) Malformed(fmt::format("missing key '{}'", key));
  }
  return header;
}

void HeaderParser::ParseEntry(NpyHeader* header, std::set<std::string>* seen) {
  if (Peek() != '\'' && Peek() != '"') Malformed("expected a quoted key");
  const size_t key_pos = pos_;
  std::string key = ParseString();
  SkipSpace();
  if (!Consume(':')) Malformed("expected ':' after a key");
  SkipSpace();
  if (key == "descr") {
    if (Peek() == '[') {
      Fail(
          "{}: unsupported dtype: structured (record) dtypes are not supported; supported "
          "dtypes are {}",
          file_, SupportedDTypes());
    }
    if (Peek() != '\'' && Peek() != '"') Malformed("'descr' must be a quoted string");
    header->descr = ParseString();
  } else if (key == "fortran_order") {
    header->fortran_order = ParseBool();
  } else if (key == "shape") {
    header->shape = ParseShape();
  } else {
    pos_ = key_pos;
    Malformed(fmt::format("unexpected key '{}' (the keys are 'descr', 'fortran_order' and 'shape')",
                          key));
  }
  if (!seen->insert(key).second) {
    pos_ = key_pos;
    Malformed(fmt::format("duplicate key '{}'", key));
  }
}

std::string HeaderParser::ParseString() {
  const char quote = text_[pos_++];
  std::string out;
  while (!AtEnd() && text_[pos_] != quote) {
    if (text_[pos_] == '\\') Malformed("escape sequences in strings are not supported");
    out += text_[pos_++];
  }
  if (!Consume(quote)) Malformed("unterminated string");
  return out;
}

bool HeaderParser::ParseBool() {
  for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
    std::string_view w(word);
    if (text_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return value;
    }
  }
  Malformed("'fortran_order' must be True or False");
}

std::vector<int64_t> HeaderParser::ParseShape() {
  if (!Consume('(')) Malformed("'shape' must be a tuple like (2, 3)");
  std::vector<int64_t> dims;
  bool trailing_comma = false;
  SkipSpace();
  while (!Consume(')')) {
    dims.push_back(ParseDim());
    SkipSpace();
    trailing_comma = Consume(',');
    SkipSpace();
    if (!trailing_comma && Peek() != ')') Malformed("expected ',' or ')' in 'shape'");
  }
  // In Python "(3)" is the int 3, not a tuple; np.load rejects it too.
  if (dims.size() == 1 && !trailing_comma) Malformed("'shape' (n) is not a tuple; write (n,)");
  return dims;
}

int64_t HeaderParser::ParseDim() {
  if (Peek() == '-') Malformed("negative dimension in 'shape'");
  if (!std::isdigit(static_cast<unsigned char>(Peek())))
    Malformed("expected an integer in 'shape'");
  int64_t value = 0;
  while (std::isdigit(static_cast<unsigned char>(Peek()))) {
    const int digit = text_[pos_] - '0';
    if (value > (INT64_MAX - digit) / 10) Malformed("dimension in 'shape' does not fit in int64");
    value = value * 10 + digit;
    ++pos_;
  }
  if (Peek() == 'L' || Peek() == 'l') ++pos_;  // Python 2 longs, as old NumPy wrote them
  return value;
}

// The Axle dtype for a descr such as '<f4'.
DType ResolveDescr(std::string_view descr, std::string_view file) {
  std::string_view code = descr;
  char order = '=';
  if (!code.empty() && std::strchr("<>|=", code[0]) != nullptr) {
    order = code[0];
    code.remove_prefix(1);
  }
  for (const NpyDType& t : kNpyDTypes) {
    if (t.descr.substr(1) != code) continue;
    // A one-byte type has no byte order, so '>i1' is as good as '|i1'.
    if (order == '>' && DTypeSize(t.dtype) > 1) {
      Fail(
          "{}: big-endian dtype '{}' is not supported; save the array little-endian, e.g. "
          "np.save(path, arr.astype('{}'))",
          file, descr, t.descr);
    }
    return t.dtype;
  }
  const std::string hint = code == "V2" ? " (ml_dtypes' bfloat16 is saved as the 2-byte void "
                                          "dtype '<V2'; save it as float32 instead)"
                                        : "";
  Fail("{}: unsupported dtype '{}'{}; supported dtypes are {}", file, descr, hint,
       SupportedDTypes());
}

uint64_t ReadLittleEndian(std::span<const uint8_t> bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

// Copies the data section into a literal of `dtype` and `dims` after checking its size.
Literal ReadData(std::span<const uint8_t> data, DType dtype, std::vector<int64_t> dims,
                 std::string_view descr, std::string_view file) {
  const std::optional<int64_t> count = CheckedNumElements(dims);
  const int64_t item = DTypeSize(dtype);
  if (!count || *count > INT64_MAX / item) {
    Fail("{}: shape {} has too many elements", file, ShapeRepr(dims));
  }
  const uint64_t need = static_cast<uint64_t>(*count * item);
  if (need > data.size()) {
    Fail(
        "{}: truncated .npy file: shape {} of '{}' needs {} data bytes but only {} follow the "
        "header",
        file, ShapeRepr(dims), descr, need, data.size());
  }
  if (need < data.size()) {
    Fail("{}: {} unexpected bytes after the {} data bytes of shape {} of '{}'", file,
         data.size() - need, need, ShapeRepr(dims), descr);
  }
  Literal lit(TensorType(dtype, Shape(std::move(dims))));
  if (need > 0) std::memcpy(lit.mutable_bytes().data(), data.data(), need);
  if (dtype == DType::kBool) {
    for (uint8_t& b : lit.mutable_bytes()) b = b != 0;  // NumPy reads any nonzero byte as True
  }
  return lit;
}

// The header dict text np.save writes for `descr` and `dims`, before the alignment padding.
std::string HeaderDict(std::string_view descr, const std::vector<int64_t>& dims) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr,
                                 ShapeRepr(dims));
  // NumPy leaves room to grow the first axis in place: 21 minus the digits of dims[0].
  if (!dims.empty()) dict.append(kGrowthAxisMaxDigits - fmt::formatted_size("{}", dims[0]), ' ');
  return dict;
}

// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string ErrnoText(int err) { return std::system_category().message(err); }

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  FdCloser file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) Fail("cannot open .npy file '{}': {}", path, ErrnoText(errno));
  struct stat st;
  if (::fstat(file.fd, &st) != 0) Fail("cannot stat .npy file '{}': {}", path, ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) Fail("'{}' is not a regular file", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("cannot read .npy file '{}': {}", path, ErrnoText(errno));
    if (n == 0) break;  // the file shrank while we read it; parsing reports it as truncated
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

Literal ParseNpy(std::span<const uint8_t> bytes, std::string_view name_for_errors) {
  const std::string_view file = name_for_errors;
  if (bytes.empty()) Fail("{}: empty file, not a .npy file", file);
  const std::string_view head(reinterpret_cast<const char*>(bytes.data()),
                              std::min(bytes.size(), kMagic.size()));
  if (head != kMagic) {
    Fail(
        "{}: not a .npy file: it does not start with the magic \"\\x93NUMPY\" (it starts "
        "with {})",
        file, Printable(head, kMagic.size()));
  }
  if (bytes.size() < 10) Fail("{}: truncated .npy file: {} bytes, no header", file, bytes.size());
  const int major = bytes[6];
  const int minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    Fail("{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", file, major,
         minor);
  }
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + len_width;
  if (bytes.size() < prefix)
    Fail("{}: truncated .npy file: {} bytes, no header", file, bytes.size());
  const uint64_t header_len = ReadLittleEndian(bytes.subspan(8, len_width));
  if (header_len > bytes.size() - prefix) {
    Fail("{}: truncated .npy file: the header is {} bytes long but only {} bytes follow", file,
         header_len, bytes.size() - prefix);
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + prefix, header_len);
  NpyHeader header = HeaderParser(text, file).Parse();
  if (header.fortran_order) {
    Fail(
        "{}: fortran_order is True (column-major data), and Axle reads only C order: transpose "
        "it with np.ascontiguousarray(arr) before np.save",
        file);
  }
  const DType dtype = ResolveDescr(header.descr, file);
  return ReadData(bytes.subspan(prefix + header_len), dtype, std::move(header.shape), header.descr,
                  file);
}

std::vector<uint8_t> SerializeNpy(const Literal& lit) {
  // NumPy has no bfloat16; bf16 is written widened to '<f4', which is exact.
  const bool widen = lit.dtype() == DType::kBF16;
  const DType file_dtype = widen ? DType::kF32 : lit.dtype();
  std::string_view descr;
  for (const NpyDType& t : kNpyDTypes) {
    if (t.dtype == file_dtype) descr = t.descr;
  }
  const std::string dict = HeaderDict(descr, lit.shape().dims());
  // As numpy.lib.format._wrap_header: version 1.0 unless the header needs a 4-byte length, and
  // 1 to 64 spaces plus '\n' so that the data starts at a multiple of 64.
  const size_t text_len = dict.size() + 1;
  size_t len_width = 2;
  size_t pad = kAlign - (kMagic.size() + 2 + len_width + text_len) % kAlign;
  if (text_len + pad > 0xffff) {
    len_width = 4;
    pad = kAlign - (kMagic.size() + 2 + len_width + text_len) % kAlign;
  }
  std::string header(kMagic);
  header += static_cast<char>(len_width == 2 ? 1 : 2);  // version major; minor 0
  header += '\0';
  for (size_t i = 0; i < len_width; ++i) header += static_cast<char>((text_len + pad) >> (8 * i));
  header += dict;
  header.append(pad, ' ');
  header += '\n';
  const size_t data_len = static_cast<size_t>(lit.NumElements() * DTypeSize(file_dtype));
  std::vector<uint8_t> out(header.size() + data_len);
  std::memcpy(out.data(), header.data(), header.size());
  uint8_t* data = out.data() + header.size();
  if (!widen) {
    if (data_len > 0) std::memcpy(data, lit.bytes().data(), data_len);
    return out;
  }
  for (int64_t i = 0; i < lit.NumElements(); ++i) {
    const float f = BF16ToFloat(lit.data<uint16_t>()[i]);
    std::memcpy(data + 4 * i, &f, 4);
  }
  return out;
}

Literal ReadNpy(const std::string& path) {
  const std::vector<uint8_t> bytes = ReadFileBytes(path);
  return ParseNpy(bytes, path);
}

void WriteNpy(const std::string& path, const Literal& lit) {
  const std::vector<uint8_t> bytes = SerializeNpy(lit);
  WriteFileAtomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), ".npy file");
}

}  // namespace axle::ir
