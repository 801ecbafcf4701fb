#include "engine/speculator.h"

#include "core/error.h"
#include "engine/vocab_draw.h"

namespace dsinfer {

Speculator::Speculator(Transformer& model, const KVCache& main_cache, int draft_tokens)
    : model_(model),
      cache_(model.make_mtp_cache(main_cache.budget_positions(), main_cache.dtype())),
      draft_tokens_(draft_tokens) {
  check(model_.has_mtp(),
        "engine: --mtp needs the multi-token-prediction module (convert --keep-mtp, then load it)");
  check(draft_tokens_ >= 1, "engine: draft_tokens must be >= 1");
}

void Speculator::draft(Step& catch_up, const std::vector<float>& hidden_in,
                       std::vector<DraftTarget>& targets, bool draft) {
  const int64_t vocab = model_.config().vocab_size, dim = model_.config().dim;
  StepOutput out;
  // the catch-up: every settled position; its last row drafts the token after the last generated
  catch_up.want_logits = draft;
  catch_up.want_hidden = draft && draft_tokens_ > 1;
  catch_up.gather_logits = false;  // greedy drafts: each rank's best candidate is enough
  model_.forward_mtp(catch_up, hidden_in.data(), cache_, out);
  // greedy drafts: the verification samples each position from its own stream, so a draft
  // only decides how many tokens a step may take, never which
  static const SamplingParams kGreedy;
  std::vector<RowDraw> draws;
  std::vector<DraftTarget*> chain;
  std::vector<size_t> hidden_of;  // chain[c]'s row of the last output
  for (size_t i = 0; i < targets.size(); ++i) {
    DraftTarget& t = targets[i];
    t.spec->mtp_cached = t.cached;
    t.spec->drafts.clear();
    if (t.prefilling || !draft) continue;
    draws.push_back({static_cast<int64_t>(i), &kGreedy, 0});
    chain.push_back(&t);
    hidden_of.push_back(i);
  }
  const std::vector<int32_t> first = draw_tokens(out, vocab, draws, model_.collectives());
  for (size_t c = 0; c < chain.size(); ++c) chain[c]->spec->drafts.push_back(first[c]);
  // further drafts by the same module, each fed its own last draft and, for the main model's
  // hidden state it does not have there yet, its own normed output (as SGLang and TRT-LLM do)
  std::vector<float> hidden(out.hidden.begin(), out.hidden.end());  // [targets' rows, dim]
  for (int k = 1; k < draft_tokens_ && !chain.empty(); ++k) {
    Step next;
    next.want_hidden = k + 1 < draft_tokens_;
    next.gather_logits = false;
    std::vector<float> next_hidden;
    std::vector<DraftTarget*> going;
    for (size_t c = 0; c < chain.size(); ++c) {
      DraftTarget& t = *chain[c];
      if (static_cast<int64_t>(t.spec->drafts.size()) >= t.max_drafts) continue;
      next.add(t.spec->mtp_seq, t.cached + k - 1, &t.spec->drafts.back(), 1);
      next_hidden.insert(next_hidden.end(),
                         hidden.begin() + static_cast<int64_t>(hidden_of[c]) * dim,
                         hidden.begin() + static_cast<int64_t>(hidden_of[c] + 1) * dim);
      going.push_back(&t);
    }
    if (going.empty()) break;
    model_.forward_mtp(next, next_hidden.data(), cache_, out);
    draws.clear();
    for (size_t c = 0; c < going.size(); ++c)
      draws.push_back({static_cast<int64_t>(c), &kGreedy, 0});
    const std::vector<int32_t> drafted = draw_tokens(out, vocab, draws, model_.collectives());
    for (size_t c = 0; c < going.size(); ++c) going[c]->spec->drafts.push_back(drafted[c]);
    chain = going;
    hidden.assign(out.hidden.begin(), out.hidden.end());
    hidden_of.resize(chain.size());
    for (size_t c = 0; c < chain.size(); ++c) hidden_of[c] = c;
  }
}

}  // namespace dsinfer
