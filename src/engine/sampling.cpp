#include "engine/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "kernels/ops.h"

namespace dsinfer {

namespace {
// splitmix64's finaliser: a bijective mix, good enough to key independent uniform streams.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// A uniform double in [0, 1) from 53 bits.
double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
}  // namespace

void check_sampling(const SamplingParams& p) {
  check(std::isfinite(p.temperature) && p.temperature >= 0,
        "temperature must be a finite number >= 0, got ", p.temperature);
  check(std::isfinite(p.top_p) && p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1], got ",
        p.top_p);
  check(p.top_k >= 0, "top_k must be >= 0, got ", p.top_k);
  check(p.max_new_tokens >= 0, "max_new_tokens must be >= 0, got ", p.max_new_tokens);
  check(p.choice >= 0, "choice must be >= 0");
  check(std::isfinite(p.min_p) && p.min_p >= 0 && p.min_p <= 1, "min_p must be in [0, 1], got ",
        p.min_p);
  check(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0,
        "repetition_penalty must be a finite number > 0, got ", p.repetition_penalty);
  check(std::isfinite(p.frequency_penalty) && std::isfinite(p.presence_penalty),
        "frequency_penalty and presence_penalty must be finite numbers");
  check(p.min_tokens >= 0, "min_tokens must be >= 0, got ", p.min_tokens);
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    check(p.logit_bias[i].first >= 0 && std::isfinite(p.logit_bias[i].second),
          "logit_bias needs ids >= 0 and finite biases");
    check(i == 0 || p.logit_bias[i - 1].first < p.logit_bias[i].first,
          "logit_bias ids must be in increasing order");
  }
}

bool adjusts_logits(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
         p.presence_penalty != 0.0f || !p.logit_bias.empty() ||
         (p.min_tokens > 0 && !p.stop_ids.empty());
}

void adjust_logits(float* logits, int64_t n, int64_t first, const SamplingParams& p,
                   const TokenHistory& h) {
  auto local = [&](int32_t id) -> float* {  // the id's logit, or null outside [first, first + n)
    return id >= first && id < first + n ? logits + (id - first) : nullptr;
  };
  if (p.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen;
    for (const auto* part : {&h.prompt, &h.generated, &h.pending})
      for (int32_t id : *part) {
        float* x = local(id);
        if (x == nullptr || !seen.insert(id).second) continue;
        *x = *x > 0 ? *x / p.repetition_penalty : *x * p.repetition_penalty;
      }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int64_t> count;
    for (const auto* part : {&h.generated, &h.pending})
      for (int32_t id : *part)
        if (local(id) != nullptr) ++count[id];
    for (const auto& [id, c] : count)
      *local(id) -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
  }
  for (const auto& [id, bias] : p.logit_bias)
    if (float* x = local(id)) *x += bias;
  if (h.completion_tokens() < p.min_tokens)
    for (int32_t id : p.stop_ids)
      if (float* x = local(id)) *x = -std::numeric_limits<float>::infinity();
}

namespace {
uint64_t stream_key(const SamplingParams& p, int64_t position) {
  return mix(mix(mix(p.seed) ^ static_cast<uint64_t>(position)) ^ static_cast<uint64_t>(p.choice));
}

// The race over the ids first .. first + n - 1 that keep(i) (local index i) admits. With `prune`,
// an id whose value provably stays below the best so far skips its two logarithms: E_i =
// -log1p(-u_i) >= u_i, and u_i >= 2^(b - 53) for b the top set bit of its 53 random bits, so
// its value x_i - log(E_i) is at most x_i + (53 - b) ln 2. Most ids lose by far more than that
// (the best of 129k draws lies ~12 above the typical scaled logit): the draw is the same bit for
// bit (a skipped id could not have won, nor tied), at a fraction of the cost (two libm calls
// per id were ~2% of a decode step on the bench slice).
template <class Keep>
RaceCandidate race(const float* logits, int64_t n, int64_t first, const SamplingParams& p,
                   int64_t position, Keep&& keep, bool prune = true) {
  RaceCandidate best{std::nan(""), first};
  if (p.temperature <= 0) {
    // keep_better's rule on the logits themselves, as a plain scan (NaN compares false)
    int64_t at = 0;
    while (at < n && (std::isnan(logits[at]) || !keep(at))) ++at;
    if (at == n) return best;
    float value = logits[at];
    for (int64_t i = at + 1; i < n; ++i)
      if (logits[i] > value && keep(i)) {
        value = logits[i];
        at = i;
      }
    return {static_cast<double>(value), first + at};
  }
  const float t = std::max(p.temperature, 1e-5f);
  const uint64_t key = stream_key(p, position);
  constexpr double kLn2 = 0.69314718055994531;
  for (int64_t i = 0; i < n; ++i) {
    if (!keep(i)) continue;
    const float x = logits[i] / t;  // as the softmax's input
    // a masked id (-infinity: a grammar's mask, min_tokens) can never win: its race value is
    // -infinity or NaN. Skipped before the libm calls, which a row masked but for a few ids
    // would otherwise make for every id below the first allowed one.
    if (x == -std::numeric_limits<float>::infinity()) continue;
    const uint64_t bits = mix(key ^ static_cast<uint64_t>(first + i));
    if (prune && (bits >> 11) != 0) {
      const double bound =
          static_cast<double>(x) + (53 - (63 - std::countl_zero(bits >> 11))) * kLn2;
      // (the margin covers the libm calls' and the subtraction's rounding many times over; a
      // NaN x or best compares false and takes the full computation)
      if (bound + 1e-6 + 1e-12 * std::fabs(bound) < best.value) continue;
    }
    const double e = -std::log1p(-unit(bits));  // ~ Exponential(1)
    keep_better(best,
                {static_cast<double>(x) - std::log(e), first + i});  // e = 0 (u = 0): +inf wins
  }
  return best;
}
}  // namespace

bool race_splits_over_vocab(const SamplingParams& p) {
  return p.temperature <= 0 || (p.top_k == 0 && p.top_p >= 1 && p.min_p <= 0);
}

RaceCandidate race_candidate(const float* logits, int64_t n, int64_t first, const SamplingParams& p,
                             int64_t position) {
  return race(logits, n, first, p, position, [](int64_t) { return true; });
}

RaceCandidate race_candidate_exhaustive(const float* logits, int64_t n, int64_t first,
                                        const SamplingParams& p, int64_t position) {
  return race(
      logits, n, first, p, position, [](int64_t) { return true; }, /*prune=*/false);
}

int64_t sample_keyed(const float* logits, int64_t n, const SamplingParams& p, int64_t position,
                     std::vector<float>& probs) {
  if (race_splits_over_vocab(p) || (p.top_k >= n && p.top_p >= 1 && p.min_p <= 0))
    return race_candidate(logits, n, 0, p, position).index;
  const float t = std::max(p.temperature, 1e-5f);
  probs.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) probs[i] = logits[i] / t;
  softmax(probs.data(), n);
  if (p.top_k == 0 && p.top_p >= 1) {  // min_p alone: a threshold, no ranking needed
    const float floor = p.min_p * *std::max_element(probs.begin(), probs.end());
    for (float& v : probs)
      if (v < floor) v = 0.0f;
    return race(logits, n, 0, p, position, [&](int64_t i) { return probs[i] > 0.0f; }).index;
  }
  // keep the top_k most likely (ties to the lower id), then the nucleus of those
  thread_local std::vector<int64_t> order;
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = p.top_k > 0 ? std::min<int64_t>(p.top_k, n) : n;
  auto more_likely = [&](int64_t a, int64_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
  int64_t keep = k;
  if (p.top_p < 1) {
    double total = 0, cumulative = 0;
    for (int64_t j = 0; j < k; ++j) total += probs[order[j]];
    for (keep = 0; keep < k;) {
      cumulative += probs[order[keep++]];
      if (cumulative >= p.top_p * total) break;
    }
  }
  // min_p: of the kept ids, those at least min_p times as likely as the likeliest (order[0])
  if (p.min_p > 0) {
    const float floor = p.min_p * probs[order[0]];
    while (keep > 1 && probs[order[keep - 1]] < floor) --keep;
  }
  for (int64_t j = keep; j < n; ++j) probs[order[j]] = 0.0f;  // cut: out of the race
  return race(logits, n, 0, p, position, [&](int64_t i) { return probs[i] > 0.0f; }).index;
}

}  // namespace dsinfer
