#include "engine/load_model.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/quantization.h"
#include "model/weights.h"

namespace dsinfer {

namespace {

using json = nlohmann::json;

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t h) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[static_cast<size_t>(i)] = digits[h & 15];
  return s;
}

// What every rank of one shard set has in common: the tensor names (routed experts' indices
// blanked, since each rank holds its own block of them), dtypes and shapes, read from the header;
// and the bytes of the norm weights, which convert copies whole into every shard, so that two
// checkpoints of identical shape (V3 and R1) still differ. No other data is read.
std::string shard_fingerprint(const SafetensorsFile& file) {
  std::vector<std::string> lines;
  uint64_t norms = fnv1a("", 0);
  for (const auto& [name, t] : file.tensors()) {
    std::string key = name;
    if (const size_t at = key.find(".experts."); at != std::string::npos) {
      const size_t begin = at + 9, end = key.find('.', begin);
      key.replace(begin, end - begin, "*");
    }
    lines.push_back(t.describe().replace(0, name.size(), key));
    if (name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0)
      norms = fnv1a(t.data, t.n_bytes, norms);
  }
  std::sort(lines.begin(), lines.end());
  uint64_t h = fnv1a("", 0);
  for (const std::string& line : lines)
    h = fnv1a(line.data(), line.size() + 1, h);  // with the '\0'
  return hex(h) + hex(norms);
}

ModelConfig::Fields fields_of(const json& j) {
  ModelConfig::Fields f;
  for (const json& pair : j) f.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  return f;
}

// Exchanges every rank's report ({"error"} or what it loads: {"shard", "config", "host", "args",
// "tensors"}; or {} when there is nothing to compare) and throws the same Error on every rank: the
// first rank that failed on its own (its message), else the first whose config or shard set
// differs from rank 0's.
void check_ranks_agree(Comm& comm, const json& mine) {
  std::vector<json> all;
  for (const std::string& bytes : comm.all_gather_bytes(mine.dump()))
    all.push_back(json::parse(bytes));
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r].contains("error")) {
      comm.expect_agreed_failure();
      fail("rank ", r, " of ", all.size(),
           " failed to load the model: ", all[r]["error"].get<std::string>());
    }
  const json& zero = all[0];
  if (!zero.contains("args")) return;  // only errors were exchanged
  auto where = [&](size_t r) {
    const json& a = all[r];
    std::string s = cat("rank ", r, ": ", a["shard"].get<std::string>(), " with config ",
                        a["config"].get<std::string>());
    if (a["host"] != zero["host"] || r == 0) s += " on " + a["host"].get<std::string>();
    return s;
  };
  for (size_t r = 1; r < all.size(); ++r) {
    const json& a = all[r];
    std::string what;
    if (a["args"] != zero["args"])
      what =
          cat("the configs differ: ",
              config_differences(fields_of(zero["args"]), fields_of(a["args"]))[0], " on rank ", r);
    else if (a["quantization"] != zero["quantization"])
      what = cat("rank 0's shard holds ", zero["quantization"].get<std::string>(), ", rank ", r,
                 "'s ", a["quantization"].get<std::string>(), " (shards of different converts)");
    else if (a["tensors"] != zero["tensors"])
      what = "the shards' tensors (names, dtypes, shapes or norm weights) differ";
    else
      continue;
    comm.expect_agreed_failure();
    fail("rank ", r, " loaded a different checkpoint or config than rank 0 (", where(0), "; ",
         where(r), "): ", what);
  }
}

}  // namespace

std::unique_ptr<Transformer> load_model_on_ranks(const ModelConfig& config,
                                                 const std::string& ckpt_path,
                                                 const std::string& config_path, Comm& comm,
                                                 const KernelConfig& kernels, bool with_mtp) {
  if (comm.world_size() == 1) {
    shard_path(ckpt_path, 0, 1);  // throws naming the missing shard
    auto model = Transformer::load(config, ckpt_path, comm, ThreadPool::global(), kernels);
    if (with_mtp) model->load_mtp(ckpt_path);
    return model;
  }
  // Ranks compare what they are about to load before loading it, then whether loading worked, so
  // that a rank with another checkpoint, another config or a missing shard makes every rank stop
  // with the same message instead of failing alone and leaving the others waiting.
  json mine;
  try {
    const std::string shard =
        shard_path(ckpt_path, comm.rank(), comm.world_size());  // names a missing shard
    const SafetensorsFile file(shard);
    mine = {{"shard", std::filesystem::absolute(shard).string()},
            {"config", std::filesystem::absolute(config_path).string()},
            {"host", host_name()},
            {"args", config.fields()},
            {"quantization", quantization_of(file.metadata(), shard).describe()},
            {"tensors", shard_fingerprint(file)}};
  } catch (const CommError&) {
    throw;
  } catch (const Error& e) {
    mine = {{"error", e.what()}};
  }
  check_ranks_agree(comm, mine);
  std::unique_ptr<Transformer> model;
  json loaded = json::object();
  try {
    model = Transformer::load(config, ckpt_path, comm, ThreadPool::global(), kernels);
    if (with_mtp) model->load_mtp(ckpt_path);
  } catch (const CommError&) {
    throw;
  } catch (const Error& e) {
    loaded = {{"error", e.what()}};
  }
  check_ranks_agree(comm, loaded);
  return model;
}

}  // namespace dsinfer
