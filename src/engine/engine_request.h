// The engine's record of one request (internal to engine.cpp and engine_step.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"

namespace dsinfer {

struct Engine::Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  SamplingParams params;
  RequestEvents events;
  SeqId seq = -1;                  // its cache sequence once admitted
  int64_t capacity = 0;            // positions it may reach
  int64_t cached = 0;              // positions in its cache (prompt prefix, then generated tokens)
  std::vector<int32_t> generated;  // completion tokens so far (the last one not yet in the cache)
  Speculation spec;                // with MTP (engine/speculator.h)
  // Its full blocks in the prefix index: path[i] is block i's node (the first ones mapped from the
  // index when it was admitted; spec.mtp_indexed of them have their MTP blocks recorded).
  std::vector<PrefixNodeId> path;
  // Structured output (params.grammar): the grammar's state after the tokens generated, and the
  // mask of the ids it allows next (masked: this draw has one).
  std::unique_ptr<TokenConstraint> constraint;
  std::vector<uint32_t> allowed;
  bool masked = false;
  bool done = false;
  bool prefilling() const { return cached < static_cast<int64_t>(prompt.size()); }
};

}  // namespace dsinfer
