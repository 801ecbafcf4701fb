#include "engine/model_comparison.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/scoring.h"

namespace dsinfer {

namespace {

// What one position contributes.
struct PositionScore {
  double kl = 0, reference_nll = 0, nll = 0;
  bool same_top1 = false;
};

PositionScore score_position(const float* ref, const float* cand, int64_t vocab, int32_t next) {
  const int64_t ref_top = std::max_element(ref, ref + vocab) - ref,
                cand_top = std::max_element(cand, cand + vocab) - cand;
  // With e_v = exp(ref_v - ref_top), p_v = e_v / S and log p_v - log q_v = (ref_v - cand_v) +
  // (cand_lse - ref_lse), so KL(p || q) = sum_v e_v (ref_v - cand_v) / S + cand_lse - ref_lse:
  // two exponentials per entry (exps in float, sums in double).
  double ref_sum = 0, weighted = 0, cand_sum = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double e = std::exp(ref[v] - ref[ref_top]);
    ref_sum += e;
    weighted += e * (static_cast<double>(ref[v]) - cand[v]);
    cand_sum += std::exp(cand[v] - cand[cand_top]);
  }
  const double ref_lse = ref[ref_top] + std::log(ref_sum),
               cand_lse = cand[cand_top] + std::log(cand_sum);
  PositionScore s;
  s.kl = std::max(weighted / ref_sum + cand_lse - ref_lse,
                  0.0);  // (rounding can leave -1e-17 where rows agree)
  s.reference_nll = ref_lse - ref[next];
  s.nll = cand_lse - cand[next];
  s.same_top1 = ref_top == cand_top;
  return s;
}

// Every position's logits of one sequence: [n, vocab].
void logits_of(Transformer& model, const std::vector<int32_t>& sequence, int64_t vocab,
               std::vector<float>& rows) {
  rows.resize(sequence.size() * static_cast<size_t>(vocab));  // every row is written below
  score_sequences(model, {sequence}, [&](int, int64_t position, const float* logits) {
    std::copy_n(logits, vocab, rows.data() + position * vocab);
  });
}

}  // namespace

ModelComparison compare_models(Transformer& reference, Transformer& candidate,
                               const std::vector<std::vector<int32_t>>& sequences) {
  const int64_t vocab = reference.config().vocab_size;
  check(candidate.config().vocab_size == vocab, "compare: the models' vocabularies differ (", vocab,
        " and ", candidate.config().vocab_size, ")");
  ModelComparison c;
  int64_t agree = 0;
  std::vector<float> ref_rows, cand_rows;  // one sequence at a time: [positions, vocab] each
  std::vector<PositionScore> scores;
  for (const std::vector<int32_t>& sequence : sequences) {
    const int64_t n =
        static_cast<int64_t>(sequence.size()) - 1;  // the last position predicts nothing
    logits_of(reference, sequence, vocab, ref_rows);
    logits_of(candidate, sequence, vocab, cand_rows);
    scores.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), {});
    ThreadPool::global().parallel_for(std::max<int64_t>(n, 0), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        scores[static_cast<size_t>(t)] =
            score_position(ref_rows.data() + t * vocab, cand_rows.data() + t * vocab, vocab,
                           sequence[static_cast<size_t>(t + 1)]);
    });
    for (const PositionScore& s :
         scores) {  // summed in order: the same numbers at any thread count
      c.mean_kl += s.kl;
      c.max_kl = std::max(c.max_kl, s.kl);
      c.reference_mean_nll += s.reference_nll;
      c.mean_nll += s.nll;
      agree += s.same_top1;
      ++c.positions;
    }
  }
  check(c.positions > 0, "compare: no position to score (every sequence needs 2 tokens or more)");
  const double n = static_cast<double>(c.positions);
  c.mean_kl /= n;
  c.reference_mean_nll /= n;
  c.mean_nll /= n;
  c.top1_agreement = static_cast<double>(agree) / n;
  return c;
}

}  // namespace dsinfer
