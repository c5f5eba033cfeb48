#include "checkpoint/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

namespace axle::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxListedProblems = 20;
constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// The JSON object in the file at `path` (config.json, an index). `what` describes it in errors.
nlohmann::json ReadJsonObject(const fs::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open {} '{}'", what, path.string());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) Fail("cannot read {} '{}'", what, path.string());
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail("{}: invalid {}: {}", path.string(), what, e.what());
  }
  if (!json.is_object())
    Fail("{}: invalid {}: expected a JSON object, not {}", path.string(), what, json.type_name());
  return json;
}

// The index's weight_map as shard file -> tensor names, with every shard path checked to stay
// inside the directory.
std::map<std::string, std::set<std::string>> ReadWeightMap(const fs::path& index_path) {
  const nlohmann::json index = ReadJsonObject(index_path, "safetensors index");
  const auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object()) {
    Fail(
        "{}: invalid safetensors index: expected a \"weight_map\" object of tensor name -> "
        "shard file",
        index_path.string());
  }
  std::map<std::string, std::set<std::string>> shards;
  for (const auto& [name, file] : it->items()) {
    if (!file.is_string()) {
      Fail("{}: invalid safetensors index: the shard of tensor '{}' must be a file name, not {}",
           index_path.string(), name, file.dump());
    }
    const fs::path shard(file.get<std::string>());
    const bool escapes = shard.empty() || shard.is_absolute() ||
                         std::find(shard.begin(), shard.end(), "..") != shard.end();
    if (escapes) {
      Fail(
          "{}: invalid safetensors index: shard '{}' of tensor '{}' is not a file inside the "
          "model directory",
          index_path.string(), shard.string(), name);
    }
    shards[shard.string()].insert(name);
  }
  return shards;
}

// Loads the shards listed in `index_path` and checks them against the index.
TensorMap LoadShards(const fs::path& dir, const fs::path& index_path) {
  const std::map<std::string, std::set<std::string>> shards = ReadWeightMap(index_path);
  std::map<std::string, std::string> shard_of;  // tensor -> shard it was found in
  TensorMap tensors;
  for (const auto& [shard, names] : shards) {
    const std::string path = (dir / shard).string();
    for (auto& [name, lit] : LoadSafetensors(path)) {
      if (!names.count(name)) {
        Fail("{}: tensor '{}' is not listed for this shard in '{}'{}", path, name,
             index_path.string(),
             shard_of.count(name) ? fmt::format(" (and is also in '{}')", shard_of[name]) : "");
      }
      shard_of[name] = shard;
      tensors.emplace_back(name, std::move(lit));
    }
    for (const std::string& name : names) {
      if (!shard_of.count(name)) {
        Fail("{}: tensor '{}' is missing, but '{}' lists it in this shard", path, name,
             index_path.string());
      }
    }
  }
  return tensors;
}

[[noreturn]] void FailNoWeights(const fs::path& dir) {
  std::string hint;
  if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json")) {
    hint =
        "; it has PyTorch .bin weights, which Axle does not read: convert them with "
        "safetensors.torch.save_file (or transformers' save_pretrained(safe_serialization=True))";
  }
  Fail("'{}': no model weights: neither {} nor {} is in the directory{}", dir.string(), kSingleFile,
       kIndexFile, hint);
}

}  // namespace

ModelDir LoadModelDir(const std::string& dir_or_file) {
  const fs::path path(dir_or_file);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) Fail("model path '{}' does not exist", dir_or_file);
  ModelDir model{.config = nlohmann::json::object(), .tensors = {}};
  if (!fs::is_directory(status)) {
    SafetensorsMetadata metadata;
    model.tensors = LoadSafetensors(dir_or_file, &metadata);
    // A file Axle wrote carries its model's config (Note [Saved files know their model]).
    if (auto it = metadata.find(kConfigMetadataKey); it != metadata.end()) {
      try {
        model.config = nlohmann::json::parse(it->second);
      } catch (const nlohmann::json::exception& e) {
        Fail("{}: the \"{}\" entry of its __metadata__ is not valid JSON ({})", dir_or_file, kConfigMetadataKey,
             e.what());
      }
      if (!model.config.is_object())
        Fail("{}: the \"{}\" entry of its __metadata__ is not a JSON object", dir_or_file, kConfigMetadataKey);
    }
    return model;
  }
  if (fs::exists(path / kConfigFile))
    model.config = ReadJsonObject(path / kConfigFile, "config.json");
  if (fs::exists(path / kIndexFile)) {
    model.tensors = LoadShards(path, path / kIndexFile);
  } else if (fs::exists(path / kSingleFile)) {
    model.tensors = LoadSafetensors((path / kSingleFile).string());
  } else {
    FailNoWeights(path);
  }
  return model;
}

void CheckTensors(const TensorMap& tensors,
                  const std::vector<std::pair<std::string, ir::TensorType>>& expected,
                  std::string_view source) {
  std::map<std::string_view, const ir::Literal*> found;
  std::vector<std::string> problems;
  for (const auto& [name, lit] : tensors) {
    if (!found.emplace(name, &lit).second)
      problems.push_back(fmt::format("duplicate tensor '{}'", name));
  }
  std::set<std::string_view> wanted;
  size_t missing = 0;
  for (const auto& [name, type] : expected) {
    wanted.insert(name);
    const auto it = found.find(name);
    if (it == found.end()) {
      ++missing;
      problems.push_back(fmt::format("missing tensor '{}' (expected {})", name, type.ToString()));
    } else if (it->second->type() != type) {
      problems.push_back(fmt::format("tensor '{}' is {}, expected {}", name,
                                     it->second->type().ToString(), type.ToString()));
    }
  }
  size_t extra = 0;
  for (const auto& [name, lit] : tensors) {
    if (wanted.count(name)) continue;
    ++extra;
    problems.push_back(fmt::format("unexpected tensor '{}' ({})", name, lit.type().ToString()));
  }
  if (problems.empty()) return;
  std::string message = fmt::format(
      "{}: the checkpoint's tensors do not match the model ({} expected, {} found): {} problem{}",
      source, expected.size(), tensors.size(), problems.size(), problems.size() == 1 ? "" : "s");
  if (missing > 0 && missing == expected.size() && extra == tensors.size()) {
    message +=
        " (no name matches: is it another model's checkpoint, or are its names prefixed "
        "differently?)";
  }
  for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i)
    message += "\n  " + problems[i];
  if (problems.size() > kMaxListedProblems) {
    message += fmt::format("\n  ... and {} more", problems.size() - kMaxListedProblems);
  }
  throw Error(message);
}

}  // namespace axle::checkpoint
