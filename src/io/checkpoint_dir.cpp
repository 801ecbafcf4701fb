#include "io/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/read_file.h"
#include "io/json_file.h"

namespace dsinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
std::vector<std::string> list_matching(const std::string& dir,
                                       const std::function<bool(const std::string&)>& keep) {
  std::error_code ec;
  check(fs::is_directory(dir, ec), "checkpoint directory ", dir, " does not exist");
  std::vector<std::string> out;
  fs::directory_iterator it(dir, ec);
  check(!ec, "cannot list ", dir, ": ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    check(!ec, "cannot list ", dir, ": ", ec.message());
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    std::string name = it->path().filename().string();
    if (keep(name)) out.push_back(it->path().string());
  }
  check(!ec, "cannot list ", dir, ": ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<std::string> list_files(const std::string& dir, const std::string& suffix) {
  return list_matching(dir, [&](const std::string& name) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  });
}

std::vector<std::string> list_files_containing(const std::string& dir, const std::string& part) {
  return list_matching(
      dir, [&](const std::string& name) { return name.find(part) != std::string::npos; });
}

std::map<std::string, std::string> parse_weight_map(const std::string& text,
                                                    const std::string& origin) {
  const json index = parse_json(text, origin);
  check(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
        origin, " has no weight_map object");
  std::map<std::string, std::string> weight_map;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    check(it.value().is_string(), origin, ": weight_map entry ", json_excerpt(json(it.key())),
          " is not a file name");
    const std::string& file = it.value().get_ref<const std::string&>();
    // a name like "../x" or "/x" would read a file outside the checkpoint
    check(!file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos &&
              file.find('\0') == std::string::npos,
          origin, ": weight_map entry ", json_excerpt(json(it.key())), " names ",
          json_excerpt(it.value(), 400), ", not a file of the checkpoint directory");
    weight_map[it.key()] = file;
  }
  return weight_map;
}

CheckpointDir::CheckpointDir(const std::string& dir) : dir_(dir) {
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> paths;
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    has_index_ = true;
    weight_map = parse_weight_map(read_input_file(index_path.string(), "index", 256 << 20),
                                  index_path.string());
    std::set<std::string> names;
    for (const auto& [tensor, file] : weight_map) names.insert(file);
    for (const std::string& name : names) {
      fs::path p = fs::path(dir) / name;
      check(fs::exists(p), index_path.string(), " names ", name, ", which is missing from ", dir);
      paths.push_back(p.string());
    }
  } else {
    paths = list_files(dir, ".safetensors");
  }
  check(!paths.empty(), "no .safetensors files in ", dir);
  for (const std::string& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (const auto& [name, view] : files_.back()->tensors()) {
      auto [it, inserted] = tensors_.emplace(name, &view);
      check(inserted, "tensor ", name, " appears in both ", it->second->file, " and ", p);
    }
  }
  for (const auto& [name, file] : weight_map) {
    auto it = tensors_.find(name);
    check(it != tensors_.end(), index_path.string(), " maps ", name, " to ", file,
          ", but no file holds it");
    check(fs::path(it->second->file).filename() == file, index_path.string(), " maps ", name,
          " to ", file, ", but it is in ", it->second->file);
  }
}

const TensorView* CheckpointDir::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& CheckpointDir::get(const std::string& name) const {
  const TensorView* view = find(name);
  if (!view) fail("checkpoint ", dir_, " has no tensor ", name);
  return *view;
}

}  // namespace dsinfer
