// A Hugging Face checkpoint directory: several safetensors files, tied together by
// model.safetensors.index.json when present (its weight_map must agree with the files).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace dsinfer {

class CheckpointDir {
 public:
  // Opens every shard file; throws Error naming a missing or corrupt file, or an index that
  // points at a tensor its file does not hold.
  explicit CheckpointDir(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // All tensors, by name (a name in two files is an error at open).
  const std::map<std::string, const TensorView*>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  const TensorView& get(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  bool has_index() const { return has_index_; }

 private:
  std::string dir_;
  bool has_index_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> tensors_;
};

// The weight_map of a model.safetensors.index.json (tensor name -> file name), checked: valid
// JSON, string values, each a plain file name inside the directory. `origin` names it in errors.
std::map<std::string, std::string> parse_weight_map(const std::string& text,
                                                    const std::string& origin);

// Sorted paths of the files directly in `dir` whose name matches `suffix` at the end.
std::vector<std::string> list_files(const std::string& dir, const std::string& suffix);
// Sorted paths of the files directly in `dir` whose name contains `part`.
std::vector<std::string> list_files_containing(const std::string& dir, const std::string& part);

}  // namespace dsinfer
