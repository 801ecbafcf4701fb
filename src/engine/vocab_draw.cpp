#include "engine/vocab_draw.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/token_constraint.h"

namespace dsinfer {

namespace {
// A candidate on the wire as three floats' bits: the race value's 8 bytes and the id's 4 (moved,
// never computed on, so any bit pattern survives).
constexpr int64_t kWireFloats = 3;
void put(const RaceCandidate& c, float* wire) {
  const int32_t id = static_cast<int32_t>(c.index);
  std::memcpy(wire, &c.value, sizeof c.value);
  std::memcpy(wire + 2, &id, sizeof id);
}
RaceCandidate get(const float* wire) {
  RaceCandidate c{};
  int32_t id = 0;
  std::memcpy(&c.value, wire, sizeof c.value);
  std::memcpy(&id, wire + 2, sizeof id);
  c.index = id;
  return c;
}
// Whether a row can be drawn from: no NaN and no +infinity (what overflowing weights or configs
// give). -infinity is a masked id, not an error.
bool drawable(const float* row, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= !std::isnan(row[i]) && row[i] != kInf;
  return ok;
}

// The row to draw from: the model's, or its adjusted copy in `adjusted`.
const float* draw_row(const StepOutput& out, const RowDraw& d, std::vector<float>& adjusted) {
  const int64_t columns = out.logit_columns;
  const float* row = out.logits.data() + d.row * columns;
  const bool adjusts = adjusts_logits(*d.params);
  if (!adjusts && !d.allowed) return row;
  adjusted.assign(row, row + columns);
  if (adjusts) adjust_logits(adjusted.data(), columns, out.vocab_offset, *d.params, d.history);
  if (d.allowed) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < columns; ++i)
      if (!allowed_bit(d.allowed, out.vocab_offset + i)) adjusted[i] = kMasked;
  }
  return adjusted.data();
}

}  // namespace

std::vector<int32_t> draw_tokens(const StepOutput& out, int64_t vocab,
                                 const std::vector<RowDraw>& draws, Comm& ranks, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(draws.size()), columns = out.logit_columns;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  const bool whole = out.vocab_offset == 0 && columns == vocab;
  for (const RowDraw& d : draws) {
    check(d.row >= 0 && (d.row + 1) * columns <= static_cast<int64_t>(out.logits.size()),
          "engine: draw from logits row ", d.row, " past the step's output");
    check(whole || race_splits_over_vocab(*d.params),
          "engine: a top_k / top_p draw needs the whole row of logits");
  }
  // Each row's draw is its own (its buffers per chunk of rows): on `pool`'s threads when given,
  // the same bits as one after another.
  auto for_each_row = [&](auto&& draw_one) {
    auto rows = [&](int64_t begin, int64_t end) {
      std::vector<float> adjusted, scratch;
      for (int64_t i = begin; i < end; ++i) draw_one(i, adjusted, scratch);
    };
    if (pool != nullptr && n > 1)
      pool->parallel_for(n, rows);
    else
      rows(0, n);
  };
  if (whole) {
    for_each_row([&](int64_t i, std::vector<float>& adjusted, std::vector<float>& scratch) {
      const float* row = draw_row(out, draws[i], adjusted);
      tokens[i] = drawable(row, vocab)
                      ? static_cast<int32_t>(
                            sample_keyed(row, vocab, *draws[i].params, draws[i].position, scratch))
                      : kNoTokenFromNonFiniteLogits;
    });
    return tokens;
  }
  if (n == 0) return tokens;
  static_assert(sizeof(double) == 2 * sizeof(float), "a race value travels as two floats");
  std::vector<float> mine(static_cast<size_t>(n * kWireFloats));  // [n, 3]
  for_each_row([&](int64_t i, std::vector<float>& adjusted, std::vector<float>&) {
    const RowDraw& d = draws[i];
    const float* row = draw_row(out, d, adjusted);
    RaceCandidate c{};
    c.index = kNoTokenFromNonFiniteLogits;  // every rank learns that a slice was not drawable
    if (drawable(row, columns))
      c = race_candidate(row, columns, out.vocab_offset, *d.params, d.position);
    put(c, mine.data() + i * kWireFloats);
  });
  const int world = ranks.world_size();
  std::vector<float> all(static_cast<size_t>(world * n * kWireFloats));  // [world, n, 3]
  ranks.all_gather(mine.data(), n * kWireFloats, all.data());
  for (int64_t i = 0; i < n; ++i) {
    // ranks hold the vocabulary in id order: rank order keeps the lowest id on ties
    RaceCandidate best = get(all.data() + i * kWireFloats);
    bool ok = best.index >= 0;
    for (int r = 1; r < world; ++r) {
      const RaceCandidate theirs =
          get(all.data() + (static_cast<int64_t>(r) * n + i) * kWireFloats);
      ok &= theirs.index >= 0;
      keep_better(best, theirs);
    }
    tokens[i] = ok ? static_cast<int32_t>(best.index) : kNoTokenFromNonFiniteLogits;
  }
  return tokens;
}

}  // namespace dsinfer
