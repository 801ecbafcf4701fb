// What rank 0 tells the other ranks before each engine step (docs/ENGINE.md: ranks): the requests
// submitted and cancelled since the last step, or that the engine pauses (the front end goes
// back to its own input), stops, or that rank 0 failed. Every rank then takes the same
// scheduling decisions and samples the same tokens from the same gathered logits, so nothing
// else needs to cross. Encoded as bytes for Comm::broadcast (the ranks share one byte order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling.h"

namespace dsinfer {

using RequestId = int64_t;

struct Submission {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

struct StepOrders {
  enum class Kind : uint8_t { kStep = 'S', kPause = 'P', kStop = 'X', kAbort = 'A' };
  Kind kind = Kind::kStep;
  std::vector<Submission> submissions;  // kStep: in submission order
  std::vector<RequestId> cancels;       // kStep
  bool draft = true;   // kStep: the step's MTP drafts for the next (--mtp auto decides on rank 0)
  std::string reason;  // kAbort: rank 0's error
};

std::string encode_orders(const StepOrders& orders);
// An Error for bytes that are not a whole, well-formed message.
StepOrders decode_orders(const std::string& bytes);

}  // namespace dsinfer
