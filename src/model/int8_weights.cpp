#include "model/int8_weights.h"

#include "core/log.h"
#include "kernels/int8_matrix.h"

namespace dsinfer {

namespace {

struct Repacker {
  Int8Forms& forms;
  ThreadPool& pool;
  int64_t bytes = 0;

  void matrix(WeightMatrix& w) {
    if (w.int8 != nullptr || !int8_repackable(w)) return;
    forms.push_back(std::make_unique<Int8Matrix>(repack_int8(w, pool)));
    w.int8 = forms.back().get();
    bytes += w.int8->bytes();
  }
  void mlp(MlpWeights& m) {
    matrix(m.w1);
    matrix(m.w2);
    matrix(m.w3);
  }
  void layer(LayerWeights& l) {
    AttentionWeights& a = l.attn;
    for (WeightMatrix* w : {&a.wq, &a.wq_a, &a.wq_b, &a.wkv_a, &a.wo}) matrix(*w);
    if (!l.is_moe) return mlp(l.mlp);
    mlp(l.moe.shared);
    for (MlpWeights& e : l.moe.experts) mlp(e);
  }
  // A head in int8 already (convert --int8) takes int8 mode; a bf16 one stays bf16, as peers
  // keep it, at twice the bytes.
  void head(WeightMatrix& w) {
    if (w.dtype == kInt8Storage) matrix(w);
  }
};

void report(const char* what, const Repacker& r, double start) {
  if (r.bytes == 0) return;
  log_info("int8 mode: ", what, "'s linear weights repacked (", r.forms.size(), " matrices, ",
           static_cast<double>(r.bytes) / 1e9, " GB) in ", now_seconds() - start, " s");
}

}  // namespace

void make_int8_forms(ModelWeights& weights, ThreadPool& pool) {
  const double start = now_seconds();
  Repacker r{weights.int8_forms, pool};
  for (LayerWeights& l : weights.layers) r.layer(l);
  r.head(weights.head);
  report("the model", r, start);
}

void make_int8_forms(MtpWeights& weights, ThreadPool& pool) {
  const double start = now_seconds();
  Repacker r{weights.int8_forms, pool};
  r.matrix(weights.eh_proj);
  r.layer(weights.block);
  r.head(weights.head);
  report("the MTP module", r, start);
}

}  // namespace dsinfer
