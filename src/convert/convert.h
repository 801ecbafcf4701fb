// The reference's checkpoint tools: convert.py (HF checkpoint -> tensor-parallel shards) and
// fp8_cast_bf16.py (fp8 HF checkpoint -> bf16 HF checkpoint). Both stream: memory stays
// bounded by a few tensors (inputs are mapped, outputs written slice by slice).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dsinfer {

class CheckpointDir;

struct ConvertOptions {
  std::string hf_ckpt_path;
  std::string save_path;
  int n_experts = 0;
  int model_parallel = 1;
  // Also write the multi-token-prediction layer (HF layer num_hidden_layers) of each rank to
  // mtp{rank}-mp{P}.safetensors beside the shards, which stay what convert.py writes.
  bool keep_mtp = false;
  // Opt-in lossy formats (model/quantization.h): routed experts' w1/w2/w3 as int4, and (bf16
  // checkpoints) every other linear weight as int8, each with one fp16 scale per row per 128
  // columns, rounded to nearest from the exactly dequantized weights. Off: byte-identical shards.
  bool experts_int4 = false;
  bool int8 = false;
};

// Writes save_path/model{i}-mp{P}.safetensors for i < P, tensor for tensor as convert.py does,
// and copies the *token* files and config.json. Throws Error on bad input (see convert.cpp).
//
// Where we differ from convert.py, on purpose:
// - the multi-token-prediction layer is found from config.json (layers >= num_hidden_layers);
//   convert.py skips the literal "model.layers.61" (which is the same thing for V3/R1 671B);
//   without a config.json we skip layer 61 too;
// - bad input is an Error naming the tensor (a dim not divisible by P, an expert index >= N,
//   two HF tensors that become one name) instead of an assert or a silent overwrite;
// - config.json is copied along with the *token* files.
void convert_checkpoint(const ConvertOptions& options);

// Dequantizes every fp8 weight with its weight_scale_inv (round to nearest even to bf16),
// drops the scales, copies the rest, rewrites model.safetensors.index.json. Like the reference,
// it writes only the *.safetensors files and the index (no config.json, no tokenizer) and no
// __metadata__ in the files. Where we differ: the index loses every *_scale_inv entry (the
// reference keeps those of scales whose weight was not fp8, which it drops from the files all
// the same); the output directory may not be the input; without an index we still convert,
// and write none.
void fp8_cast_bf16(const std::string& input_dir, const std::string& output_dir);

// Pieces shared by the two tools (convert.cpp); not part of the public surface.
namespace convert_detail {

// Output files are written under "<final>.partial" and renamed into place only by commit(),
// so an interrupted or failed run never leaves a file that looks complete. Files not
// committed are removed when this object goes away.
class StagedOutputs {
 public:
  StagedOutputs() = default;
  ~StagedOutputs();
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;

  // Registers `final_path` and returns the path to write instead.
  std::string stage(const std::string& final_path);
  // Renames every staged file to its final name.
  void commit();

 private:
  std::vector<std::string> finals_;
  bool committed_ = false;
};

// Creates `dir` (and parents) when missing; throws Error when it cannot, or when it is a file.
void make_output_dir(const std::string& dir, const std::string& what);
// Copies the regular file `path` into directory `dir` under its own name.
void copy_file_into(const std::string& path, const std::string& dir);
// Tells the kernel the mapped input bytes [p, p + n) are done with, so a 700 GB conversion
// does not grow the resident set (the pages stay in the page cache; reading them again is
// safe, the mapping is read-only).
void release_pages(const void* p, size_t n);
// Asks the kernel to start reading the mapped input bytes [p, p + n) now.
void prefetch_pages(const void* p, size_t n);
// Logs a warning for each *.safetensors file of the directory that its index does not name
// (the index is what we read; convert.py globs the directory).
void warn_unindexed(const CheckpointDir& ckpt);
// "1.5 GB", "12.00" (seconds), for log lines.
std::string human_bytes(double bytes);
std::string format_seconds(double seconds);
// Byte size of a tensor chunk handled at once (64 MiB): what passes through a buffer, and the
// piece size of direct copies (the progress meter's step). Tests make it tiny to exercise the
// chunked paths on tiny checkpoints.
size_t chunk_bytes();
void set_chunk_bytes(size_t bytes);

}  // namespace convert_detail

}  // namespace dsinfer
