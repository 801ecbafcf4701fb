// When MTP drafts pay (--mtp auto; docs/MTP.md section 5): on a CPU a verify step reads the union
// of the experts its rows route to, so a draft costs almost a decode step at batch 1 and more at
// larger batches, and pays only while enough drafts are accepted. The policy times pure decode
// steps with and without drafts per number of decoding sequences (exponential averages), follows
// the tokens the drafts gain (the acceptance, at one draft a step), and drafts when
// (1 + gain) / t_drafting > 1 / t_plain. Every 64th decision
// goes the other way, so that both timings follow the load and a drop in acceptance is noticed
// (and a rise). Which steps draft never changes a token, only the speed.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer {

class DraftPolicy {
 public:
  // Whether a step with `decoding` sequences should carry drafts.
  bool should_draft(int64_t decoding);
  // A pure decode step (no prefill) of `decoding` sequences took `seconds`, with or without drafts.
  void record_step(int64_t decoding, bool drafted, double seconds);
  // One sequence's verified drafts of a step: how many the model agreed with (its extra tokens).
  void record_cycle(int accepted);
  // Extra tokens per drafting sequence and step (the acceptance, with one draft a step).
  double gain() const { return gain_; }

 private:
  struct Timing {
    double plain = 0, drafting = 0;  // mean seconds; 0: not measured yet
  };
  Timing& timing(int64_t decoding);
  std::vector<Timing> timing_;  // by number of decoding sequences (capped)
  double gain_ = 0.5;           // exponential average
  int64_t decisions_ = 0;
};

}  // namespace dsinfer
