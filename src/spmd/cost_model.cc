#include "spmd/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace axle::spmd {

std::string_view CollectiveName(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kCollectivePermute: return "collective_permute";
  }
  return "?";
}

namespace {

constexpr Collective kAllKinds[] = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                    Collective::kAllToAll, Collective::kCollectivePermute};

std::optional<Collective> KindNamed(std::string_view name) {
  for (Collective k : kAllKinds)
    if (CollectiveName(k) == name) return k;
  return std::nullopt;
}

}  // namespace

std::pair<double, double> CollectiveTerms(Collective kind, int64_t group_size) {
  const double g = static_cast<double>(std::max<int64_t>(group_size, 1));
  switch (kind) {
    case Collective::kAllReduce: return {2 * (g - 1), 2 * (g - 1) / g};
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return {g - 1, (g - 1) / g};
    case Collective::kCollectivePermute: return {1, 1};
  }
  return {0, 0};
}

double CostModel::CollectiveSeconds(Collective kind, int64_t group_size, int64_t bytes) const {
  if (group_size <= 1) return 0;
  AlphaBeta ab{20e-6, 1e-9};
  // The fit of this kind at the nearest measured group size (the smaller one on a tie).
  int64_t best_distance = -1;
  for (const auto& [key, fit] : fits) {
    if (key.first != kind) continue;
    const int64_t d = std::llabs(key.second - group_size);
    if (best_distance < 0 || d < best_distance) {
      best_distance = d;
      ab = fit;
    }
  }
  const auto [a, b] = CollectiveTerms(kind, group_size);
  return a * ab.alpha_s + b * static_cast<double>(bytes) * ab.beta_s_per_byte;
}

CostModel CostModel::Default() {
  // Round figures, not a machine's: what a plan is priced with when nothing is measured
  // (`axle shard-plan --no-calibrate`, and the tests, which must not depend on the host). Their
  // ratios (a message costs what 40 KB of bandwidth does) decide between plans.
  CostModel m;
  m.source = "default (not measured)";
  m.product_flops_per_s = 25e9;
  m.memory_bytes_per_s = 5e9;
  for (Collective k : kAllKinds) m.fits[{k, 2}] = AlphaBeta{20e-6, 1.0 / 2e9};
  return m;
}

nlohmann::json CostModel::ToJson() const {
  nlohmann::json j;
  j["source"] = source;
  j["product_flops_per_s"] = product_flops_per_s;
  j["memory_bytes_per_s"] = memory_bytes_per_s;
  nlohmann::json fl = nlohmann::json::array();
  for (const auto& [key, ab] : fits)
    fl.push_back({{"kind", std::string(CollectiveName(key.first))},
                  {"group_size", key.second},
                  {"alpha_s", ab.alpha_s},
                  {"beta_s_per_byte", ab.beta_s_per_byte}});
  j["fits"] = std::move(fl);
  return j;
}

CostModel CostModel::FromJson(const nlohmann::json& j) {
  auto number = [](const nlohmann::json& o, const char* field) {
    if (!o.is_object() || !o.contains(field) || !o[field].is_number())
      Fail("cost model: field \"{}\" is missing or not a number", field);
    const double v = o[field].get<double>();
    if (!std::isfinite(v) || v < 0) Fail("cost model: field \"{}\" is {}, not a finite number >= 0", field, v);
    return v;
  };
  CostModel m;
  if (!j.is_object() || !j.contains("source") || !j["source"].is_string())
    Fail("cost model: field \"source\" is missing or not a string");
  m.source = j["source"].get<std::string>();
  m.product_flops_per_s = number(j, "product_flops_per_s");
  m.memory_bytes_per_s = number(j, "memory_bytes_per_s");
  if (m.product_flops_per_s <= 0 || m.memory_bytes_per_s <= 0) Fail("cost model: a throughput of 0");
  if (!j.contains("fits") || !j["fits"].is_array()) Fail("cost model: field \"fits\" is missing or not an array");
  for (const nlohmann::json& f : j["fits"]) {
    if (!f.is_object() || !f.contains("kind") || !f["kind"].is_string())
      Fail("cost model: a fit without a \"kind\" string");
    const std::string name = f["kind"].get<std::string>();
    const std::optional<Collective> kind = KindNamed(name);
    if (!kind) Fail("cost model: unknown collective \"{}\"", name);
    const double g = number(f, "group_size");
    if (g < 2 || g != std::floor(g)) Fail("cost model: group_size {} of {} is not an integer >= 2", g, name);
    m.fits[{*kind, static_cast<int64_t>(g)}] = AlphaBeta{number(f, "alpha_s"), number(f, "beta_s_per_byte")};
  }
  return m;
}

std::string CostModel::Describe() const {
  std::string s = fmt::format("cost model: {}; products {:.1f} GFLOP/s and other ops {:.1f} GB/s per device\n", source,
                              product_flops_per_s / 1e9, memory_bytes_per_s / 1e9);
  for (const auto& [key, ab] : fits)
    s += fmt::format("  {:<18} over {:>3}: alpha {:8.1f} us, beta {:8.3f} GB/s\n", CollectiveName(key.first),
                     key.second, ab.alpha_s * 1e6,
                     ab.beta_s_per_byte > 0 ? 1e-9 / ab.beta_s_per_byte : std::numeric_limits<double>::infinity());
  return s;
}

}  // namespace axle::spmd
