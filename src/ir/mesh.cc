#include "ir/mesh.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "core/error.h"

namespace axle::ir {

Mesh::Mesh(std::vector<std::string> axis_names, std::vector<int64_t> shape, std::vector<int64_t> device_ids)
    : axis_names_(std::move(axis_names)), shape_(std::move(shape)), device_ids_(std::move(device_ids)) {
  const std::string what = fmt::format("mesh axes [{}] shape [{}]", fmt::join(axis_names_, ", "),
                                       fmt::join(shape_, ", "));
  if (axis_names_.empty()) Fail("{}: a mesh needs at least one axis", what);
  if (axis_names_.size() != shape_.size())
    Fail("{}: {} axis names but {} sizes", what, axis_names_.size(), shape_.size());
  std::set<std::string> seen;
  int64_t n = 1;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (axis_names_[i].empty()) Fail("{}: axis {} has an empty name", what, i);
    if (!seen.insert(axis_names_[i]).second) Fail("{}: axis '{}' is named twice", what, axis_names_[i]);
    if (shape_[i] < 1) Fail("{}: axis '{}' has size {} (must be >= 1)", what, axis_names_[i], shape_[i]);
    if (n > (int64_t{1} << 40) / shape_[i]) Fail("{}: too many devices", what);
    n *= shape_[i];
  }
  if (device_ids_.empty()) {
    for (int64_t d = 0; d < n; ++d) device_ids_.push_back(d);
  }
  if (static_cast<int64_t>(device_ids_.size()) != n)
    Fail("{}: {} device ids for a mesh of {} devices", what, device_ids_.size(), n);
  position_of_.assign(static_cast<size_t>(n), -1);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t d = device_ids_[static_cast<size_t>(p)];
    if (d < 0 || d >= n || position_of_[static_cast<size_t>(d)] >= 0)
      Fail("{}: device ids [{}] are not a permutation of 0..{}", what, fmt::join(device_ids_, ", "), n - 1);
    position_of_[static_cast<size_t>(d)] = p;
  }
}

bool Mesh::identity_order() const {
  for (size_t p = 0; p < device_ids_.size(); ++p)
    if (device_ids_[p] != static_cast<int64_t>(p)) return false;
  return true;
}

int64_t Mesh::size() const { return static_cast<int64_t>(device_ids_.size()); }

int64_t Mesh::AxisIndex(const std::string& axis) const {
  auto it = std::find(axis_names_.begin(), axis_names_.end(), axis);
  return it == axis_names_.end() ? -1 : static_cast<int64_t>(it - axis_names_.begin());
}

int64_t Mesh::AxisSize(const std::string& axis) const {
  const int64_t i = AxisIndex(axis);
  if (i < 0) Fail("mesh {} has no axis '{}' (its axes: {})", ToString(), axis, fmt::join(axis_names_, ", "));
  return shape_[static_cast<size_t>(i)];
}

int64_t Mesh::AxesSize(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (const auto& a : axes) n *= AxisSize(a);
  return n;
}

std::vector<int64_t> Mesh::Coords(int64_t device) const {
  if (device < 0 || device >= size()) Fail("mesh {}: device {} is out of range", ToString(), device);
  int64_t p = position_of_[static_cast<size_t>(device)];
  std::vector<int64_t> c(shape_.size());
  for (size_t i = shape_.size(); i-- > 0;) {
    c[i] = p % shape_[i];
    p /= shape_[i];
  }
  return c;
}

int64_t Mesh::DeviceAt(const std::vector<int64_t>& coords) const {
  if (coords.size() != shape_.size()) Fail("mesh {}: {} coordinates for {} axes", ToString(), coords.size(), shape_.size());
  int64_t p = 0;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= shape_[i])
      Fail("mesh {}: coordinate {} of axis '{}' is out of range", ToString(), coords[i], axis_names_[i]);
    p = p * shape_[i] + coords[i];
  }
  return device_ids_[static_cast<size_t>(p)];
}

int64_t Mesh::ShardIndex(int64_t device, const std::vector<std::string>& axes) const {
  const std::vector<int64_t> c = Coords(device);
  int64_t index = 0;
  for (const auto& a : axes) {
    const int64_t i = AxisIndex(a);
    if (i < 0) AxisSize(a);  // throws with the message
    index = index * shape_[static_cast<size_t>(i)] + c[static_cast<size_t>(i)];
  }
  return index;
}

ReplicaGroups Mesh::GroupsOver(const std::vector<std::string>& axes) const {
  std::vector<bool> in_axes(shape_.size(), false);
  for (const auto& a : axes) {
    const int64_t i = AxisIndex(a);
    if (i < 0) AxisSize(a);
    in_axes[static_cast<size_t>(i)] = true;
  }
  const int64_t group_size = AxesSize(axes);
  ReplicaGroups groups;
  std::vector<bool> done(static_cast<size_t>(size()), false);
  for (int64_t p = 0; p < size(); ++p) {
    const int64_t first = device_ids_[static_cast<size_t>(p)];
    if (done[static_cast<size_t>(first)]) continue;
    std::vector<int64_t> base = Coords(first);
    std::vector<int64_t> group(static_cast<size_t>(group_size));
    for (int64_t k = 0; k < group_size; ++k) {
      // The k-th member: the axes' coordinates spell k, major to minor.
      std::vector<int64_t> c = base;
      int64_t rest = k;
      for (size_t j = axes.size(); j-- > 0;) {
        const auto i = static_cast<size_t>(AxisIndex(axes[j]));
        c[i] = rest % shape_[i];
        rest /= shape_[i];
      }
      const int64_t d = DeviceAt(c);
      group[static_cast<size_t>(k)] = d;
      done[static_cast<size_t>(d)] = true;
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string Mesh::ToString() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < shape_.size(); ++i) parts.push_back(fmt::format("{}={}", axis_names_[i], shape_[i]));
  std::string s = fmt::format("[{}]", fmt::join(parts, ", "));
  if (!identity_order()) s += fmt::format(" devices=[{}]", fmt::join(device_ids_, ","));
  return s;
}

}  // namespace axle::ir
