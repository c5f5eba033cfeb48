#include "core/flags.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <optional>

#include "core/error.h"

namespace axle::flags {
namespace detail {

std::string EnvName(std::string_view name) {
  std::string env = "AXLE_";
  for (char c : name) env += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return env;
}

const char* ReadEnv(std::string_view name) {
  return std::getenv(EnvName(name).c_str());  // The one getenv in Axle.
}

bool ParseValue(std::string_view env, const std::string& s, bool*) {
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no" || s.empty()) return false;
  Fail("{}={}: expected a boolean (1/0, true/false, on/off, yes/no)", env, s);
}
int64_t ParseValue(std::string_view env, const std::string& s, int64_t*) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE) Fail("{}={}: expected an integer", env, s);
  return v;
}
double ParseValue(std::string_view env, const std::string& s, double*) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') Fail("{}={}: expected a number", env, s);
  return v;
}
std::string ParseValue(std::string_view, const std::string& s, std::string*) { return s; }

std::string TypeString(bool) { return "bool"; }
std::string TypeString(int64_t) { return "int64"; }
std::string TypeString(double) { return "double"; }
std::string TypeString(const std::string&) { return "string"; }
std::string ValueString(bool v) { return v ? "true" : "false"; }
std::string ValueString(int64_t v) { return fmt::format("{}", v); }
std::string ValueString(double v) { return fmt::format("{}", v); }
std::string ValueString(const std::string& v) { return v; }

namespace {
struct Registered {
  FlagInfo info;
  void (*reset)();
};
std::vector<Registered>& Others() {
  static std::vector<Registered> flags;
  return flags;
}
}  // namespace

bool Register(FlagInfo info, void (*reset)()) {
  Others().push_back({std::move(info), reset});
  return true;
}

}  // namespace detail

namespace {

using detail::Slot;

#define AXLE_FLAG_SLOT(type, name, def, help) Slot<type> slot_##name;
AXLE_FLAGS(AXLE_FLAG_SLOT)
#undef AXLE_FLAG_SLOT

}  // namespace

std::optional<std::string> LauncherVariable(const std::string& name) {
  if (const char* v = std::getenv(name.c_str())) return std::string(v);
  return std::nullopt;
}

int64_t ParseByteSize(std::string_view text, std::string_view what) {
  std::string t(text);
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  size_t end = 0;
  double number = 0;
  try {
    number = std::stod(t, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = t.substr(end);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},       {"B", 1},         {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},   {"TB", 1e12},
      {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits)
    if (end > 0 && unit == name && number * scale >= 1 && number * scale < 9.2e18)
      return static_cast<int64_t>(number * scale);
  Fail("{} '{}': expected a positive size such as 2GiB, 1.5GB, 800MiB or 4096 (bytes)", what, text);
}

std::string DefaultCacheDir() {
  // Not AXLE_* variables, but this file stays the one place that reads the environment.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/')
    return std::string(xdg) + "/axle";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/axle";
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir)
    return std::string(pw->pw_dir) + "/.cache/axle";
  return "/tmp/axle-cache";
}

#define AXLE_FLAG_DEFINE(type, name, def, help)             \
  type name() { return slot_##name.Get(#name, def); }       \
  void set_##name(type value) { slot_##name.value = value; }
AXLE_FLAGS(AXLE_FLAG_DEFINE)
#undef AXLE_FLAG_DEFINE

std::vector<FlagInfo> AllFlags() {
  std::vector<FlagInfo> out;
#define AXLE_FLAG_INFO(type, name, def, help) \
  out.push_back({#name, detail::EnvName(#name), detail::TypeString(type{}), detail::ValueString(type(def)), help});
  AXLE_FLAGS(AXLE_FLAG_INFO)
#undef AXLE_FLAG_INFO
  for (const detail::Registered& r : detail::Others()) out.push_back(r.info);
  return out;
}

void ResetForTesting() {
#define AXLE_FLAG_RESET(type, name, def, help) slot_##name.value.reset();
  AXLE_FLAGS(AXLE_FLAG_RESET)
#undef AXLE_FLAG_RESET
  for (const detail::Registered& r : detail::Others()) r.reset();
}

}  // namespace axle::flags
