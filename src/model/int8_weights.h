// int8 mode's weights (`--act-dtype int8`, kernels/int8_matrix.h): at load, every linear weight
// of the blocks (attention's projections but wkv_b, which attention reads row by row, the dense,
// shared and routed experts' MLPs, the MTP block and its eh_proj) and an int8 head gets an int8
// form beside it, which int8 mode's products read. fp8 and bf16 weights are quantized from their
// exact values as convert --int8 would (the same q and scales); int8 and int4 shards are only
// interleaved (int4 stays 4 bits). bf16 heads and the router keep their formats (fast mode's
// kernels).
#pragma once

#include "core/thread_pool.h"
#include "model/weights.h"

namespace dsinfer {

// Makes the int8 forms (once; a second call finds them made) and logs what it cost.
void make_int8_forms(ModelWeights& weights, ThreadPool& pool);
void make_int8_forms(MtpWeights& weights, ThreadPool& pool);

}  // namespace dsinfer
