// How far one checkpoint's next-token distributions are from another's on the same sequences:
// what a lossy format (convert --experts-int4 / --int8) costs, measured per position against the
// exact model. Every rank calls it with the same sequences and gets the same numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace dsinfer {

struct ModelComparison {
  int64_t positions = 0;          // scored positions (each sequence's last one predicts nothing)
  double reference_mean_nll = 0;  // of the true next token, natural log
  double mean_nll = 0;            // the candidate's
  double mean_kl = 0;             // KL(reference || candidate) per position, natural log
  double max_kl = 0;
  double top1_agreement = 0;  // share of positions whose argmax is the same token
};

// Both models must have the same vocabulary; sequences as for score_sequences.
ModelComparison compare_models(Transformer& reference, Transformer& candidate,
                               const std::vector<std::vector<int32_t>>& sequences);

}  // namespace dsinfer
