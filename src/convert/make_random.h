// make-random: a Hugging Face-layout checkpoint of any config of the family (V2-Lite, V2, V3)
// filled with deterministic random weights, for benchmarks and tests at sizes no bundled
// checkpoint has. The tensor names, dtypes and shapes are those of the real checkpoints (the ones
// `convert` reads): fp8 e4m3 linears with float32 128x128 block scales when the config has an fp8
// quantization_config, bf16 otherwise; bf16 norms, embedding, head and router; a float32
// e_score_correction_bias under noaux_tc routing; the multi-token-prediction layers when
// num_nextn_predict_layers > 0.
//
// Values depend only on the seed, the tensor name and the element index (a counter-based
// generator), never on the order of generation or the shard split. They are scaled so that the
// forward pass stays tame through any number of layers: linears have std 1/sqrt(fan_in)
// (fp8 codes of a normal distribution times a block scale around 1/(code std x sqrt(fan_in))),
// norms are 1.0, embeddings std 1, the router bias small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dsinfer {

struct MakeRandomOptions {
  std::string config_path;  // an HF config.json
  std::string out_dir;
  uint64_t seed = 0;
  double shard_gb = 4.0;       // start a new shard file before one would pass this (1e9 bytes)
  std::string tokenizer_from;  // copy this directory's *token* files beside the weights
};

// How one tensor's values are drawn.
enum class RandomInit {
  kNormal,      // normal(0, std) in the tensor's dtype (fp8: codes of normal(0, kFp8CodeStd))
  kOnes,        // 1.0 (norm weights)
  kBlockScale,  // fp8 weight_scale_inv: std_of_weight / kFp8CodeStd x a jitter in [0.75, 1.25)
  kCount
};

struct RandomTensor {
  std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_a_proj.weight"
  DType dtype;
  std::vector<int64_t> shape;
  RandomInit init;
  float std;  // kNormal: the std of the values; kBlockScale: the std of the weight it scales
  std::string stream;  // the name whose random stream it takes when not its own (a bitwise copy)

  uint64_t n_bytes() const;
};

// The std of the fp8 codes written for a normal weight; the block scale brings the product to
// the weight's std. ~ what real V3 checkpoints hold (codes spread over most of +-448).
constexpr float kFp8CodeStd = 64.0f;

// Every tensor of the checkpoint the HF config (JSON text) describes, in file order (embedding,
// layers in order, final norm, head). Throws Error naming `origin` for a config this family
// cannot have (missing sizes, moe_layer_freq != 1, a block size other than 128x128, ...).
std::vector<RandomTensor> random_checkpoint_tensors(const std::string& config_text,
                                                    const std::string& origin);

// Fills `out` with bytes [begin, begin + n) of the tensor's data for `seed`: the same bytes
// whatever the pieces asked for.
void random_tensor_bytes(const RandomTensor& tensor, uint64_t seed, uint64_t begin, uint64_t n,
                         uint8_t* out);

// Writes out_dir/config.json (the input, byte for byte), model-0000i-of-0000n.safetensors and
// model.safetensors.index.json, each under "<name>.partial" until all are complete. Memory stays
// at one chunk of a few MB whatever the size. Throws Error for a bad config, an output path that
// cannot be created or written, or too little free disk space.
void make_random_checkpoint(const MakeRandomOptions& options);

}  // namespace dsinfer
