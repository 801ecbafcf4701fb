// Loading a model at any world size (docs/ENGINE.md: ranks). Before anything is mapped the ranks
// compare what they are about to load (config fields, shard headers and norm weights), then
// whether loading worked, so that a rank with another checkpoint, another config or a missing
// shard makes every rank stop with the same message instead of failing alone and leaving the
// others waiting in a collective.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/transformer.h"
#include "parallel/comm.h"

namespace dsinfer {

// This rank's shard model{rank}-mp{world_size} of `ckpt_path`, bound to `config` (read from
// `config_path`, named in messages); a shard set that does not match the world size is reported
// as such on every rank before anything else is checked. `with_mtp`: also the multi-token-
// prediction module, mtp{rank}-mp{world_size} (its absence on any rank is every rank's Error).
std::unique_ptr<Transformer> load_model_on_ranks(const ModelConfig& config,
                                                 const std::string& ckpt_path,
                                                 const std::string& config_path, Comm& comm,
                                                 const KernelConfig& kernels,
                                                 bool with_mtp = false);

}  // namespace dsinfer
