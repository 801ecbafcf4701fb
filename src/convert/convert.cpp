// convert: HF checkpoint -> model{rank}-mp{P}.safetensors, as the reference's convert.py.
//
// Two passes. The plan pass reads only the input headers: it renames every tensor through the
// name table, decides which ranks get it and which slice, and checks everything that can be
// wrong (unknown names, dims not divisible by P, expert indices, duplicate names) before a
// single output byte is written. The copy pass then creates every output file with its final
// header and copies each slice straight from the mapped input into place: whole tensors and
// dim-0 slices are contiguous and go out without a copy, other slices are gathered a bounded
// chunk at a time. Memory stays at one chunk however big the checkpoint is.
#include "convert/convert.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "core/write_file.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "kernels/group_quant.h"
#include "kernels/linear.h"
#include "model/quantization.h"
#include "model/tensor_names.h"

namespace dsinfer {

namespace fs = std::filesystem;

namespace {

using convert_detail::chunk_bytes;

// Which layers convert drops: the multi-token-prediction module sits at layer
// num_hidden_layers (61 in V3), and inference never loads it.
struct LayerFilter {
  int first_skipped = -1;  // skip layer >= this, when >= 0
  bool only_61 = false;    // the reference's literal rule, when there is no config.json

  bool skips(int layer) const {
    if (layer < 0) return false;
    if (only_61) return layer == 61;
    return layer >= first_skipped;
  }
  std::string describe() const {
    return only_61 ? std::string("layer 61") : cat("layers >= ", first_skipped);
  }
};

LayerFilter layer_filter(const std::string& hf_dir, int n_experts) {
  LayerFilter filter;
  const fs::path path = fs::path(hf_dir) / "config.json";
  if (!fs::exists(path)) {
    filter.only_61 = true;
    log_info("convert: no config.json in ", hf_dir,
             "; skipping layer 61 (the V3 MTP layer) as convert.py does");
    return filter;
  }
  nlohmann::json config;
  try {
    std::ifstream in(path);
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), " is not valid JSON (", e.what(), ")");
  }
  check(config.is_object(), path.string(), " is not a JSON object");
  if (!config.contains("num_hidden_layers")) {
    filter.only_61 = true;
    log_info("convert: ", path.string(),
             " has no num_hidden_layers; skipping layer 61 as convert.py does");
    return filter;
  }
  const nlohmann::json& layers = config["num_hidden_layers"];
  check(layers.is_number_unsigned(), path.string(), ": num_hidden_layers is not a natural number");
  filter.first_skipped = layers.get<int>();
  // A wrong --n-experts gives every rank the wrong experts (convert.py writes such shards without
  // a word; they fail only at load, as "another checkpoint"): refuse it here.
  if (config.contains("n_routed_experts") && config["n_routed_experts"].is_number_integer())
    check(config["n_routed_experts"].get<int64_t>() == n_experts, "--n-experts ", n_experts,
          " but ", path.string(), " says n_routed_experts ",
          config["n_routed_experts"].get<int64_t>());
  return filter;
}

// One output tensor of one or all ranks.
struct Job {
  const TensorView* src = nullptr;
  std::string name;  // converted name
  int rank = -1;     // >= 0: the whole tensor goes to this rank only (a routed expert)
  int dim = -1;      // >= 0: rank i gets slice i of P along this dim; -1: the whole tensor
  bool mtp = false;  // goes to mtp{rank}-mp{P}.safetensors
  // --experts-int4 / --int8: written as `quant` from the source dequantized exactly (fp8: with its
  // block scales `src_scale`, the HF weight_scale_inv, whose own job is dropped), with a new F16
  // tensor scale_name beside it.
  std::optional<QuantFormat> quant;
  const TensorView* src_scale = nullptr;
  std::string scale_name;
};

// The stem of "....w1.weight": "....w1".
std::string weight_stem(const std::string& name) { return name.substr(0, name.size() - 7); }

std::vector<int64_t> sliced_shape(const TensorView& t, int dim, int parts) {
  std::vector<int64_t> shape = t.shape;
  if (dim >= 0) shape[dim] /= parts;
  return shape;
}

// The input tensors of a file in the order their bytes lie, so the mapped file is read front
// to back.
std::vector<const TensorView*> in_data_order(const SafetensorsFile& file) {
  std::vector<const TensorView*> views;
  for (const auto& [name, view] : file.tensors()) views.push_back(&view);
  std::stable_sort(views.begin(), views.end(),
                   [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  return views;
}

// Whether two tensors hold the same dtype, shape and bytes (the MTP's copies of the embedding
// and head); read a chunk at a time and released, like the copies.
bool same_tensor(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.n_bytes != b.n_bytes) return false;
  for (size_t done = 0; done < a.n_bytes;) {
    const size_t n = std::min(chunk_bytes(), a.n_bytes - done);
    const bool equal = std::memcmp(a.data + done, b.data + done, n) == 0;
    convert_detail::release_pages(a.data + done, n);
    convert_detail::release_pages(b.data + done, n);
    if (!equal) return false;
    done += n;
  }
  return true;
}

std::vector<Job> plan(const CheckpointDir& ckpt, const ConvertOptions& options,
                      const LayerFilter& filter, size_t* skipped) {
  const int parts = options.model_parallel;
  const int local_experts = options.n_experts / parts;
  std::vector<Job> jobs;
  std::map<std::string, std::string> origin;  // converted name -> HF name
  int experts_seen = 0;  // 1 + the highest routed expert index among the tensors
  *skipped = 0;
  for (const auto& file : ckpt.files()) {
    for (const TensorView* view : in_data_order(*file)) {
      const std::string& hf_name = view->name;
      const int layer = layer_of(hf_name);
      const bool mtp = options.keep_mtp && layer >= 0 && layer == filter.first_skipped;
      if (filter.skips(layer) && !mtp) {
        ++*skipped;
        continue;
      }
      ConvertedName converted;
      try {
        converted = mtp ? convert_mtp_name(hf_name, layer) : convert_hf_name(hf_name);
      } catch (const Error& e) {
        // e.g. --hf-ckpt-path pointed at an earlier conversion (its names are already converted)
        fail(file->path(), ": ", e.what(),
             "; is --hf-ckpt-path a Hugging Face checkpoint (model.layers.N... tensor names)?");
      }
      if (const std::string main = mtp_copy_of(converted.name); !main.empty()) {
        const TensorView* original = ckpt.find(main);
        if (original && same_tensor(*view, *original)) {
          log_info("convert: ", hf_name, " is bitwise equal to ", main, "; not stored twice");
          continue;
        }
        log_info("convert: ", hf_name, original ? " differs from " : " has no ", main,
                 "; stored as ", converted.name);
      }
      auto [it, inserted] = origin.emplace(converted.name, hf_name);
      check(inserted, "tensors ", it->second, " and ", hf_name, " both convert to ",
            converted.name);
      Job job;
      job.src = view;
      job.name = converted.name;
      job.mtp = mtp;
      if (converted.expert >= 0) {
        check(converted.expert < options.n_experts, "tensor ", hf_name, " (", file->path(),
              ") belongs to routed expert ", converted.expert, ", but --n-experts is ",
              options.n_experts);
        job.rank = converted.expert / local_experts;
        experts_seen = std::max(experts_seen, converted.expert + 1);
      } else if (converted.shard != ShardDim::kNone) {
        job.dim = converted.shard == ShardDim::kRows ? 0 : 1;
        check(static_cast<int>(view->shape.size()) > job.dim, "tensor ", hf_name, " ",
              shape_string(view->shape), " (", file->path(), ") has no dimension ", job.dim,
              " to cut into --model-parallel ", parts, " slices");
        check(view->shape[job.dim] % parts == 0, "tensor ", hf_name, " ", shape_string(view->shape),
              " (", file->path(), "): dimension ", job.dim, " (", view->shape[job.dim],
              ") is not divisible by --model-parallel ", parts);
        if (parts == 1) job.dim = -1;  // one slice is the whole tensor
      }
      jobs.push_back(std::move(job));
    }
  }
  // (without a config.json to say it) too large a --n-experts leaves the last ranks without experts
  check(experts_seen == 0 || experts_seen == options.n_experts, "--n-experts ", options.n_experts,
        " but the checkpoint's tensors hold routed experts 0..", experts_seen - 1, " (",
        experts_seen, " experts)");
  return jobs;
}

// --experts-int4 / --int8: marks the linear weights to quantize and drops their fp8 scale jobs
// (the block scales are read while quantizing instead), checking what can be wrong first.
void plan_quantization(std::vector<Job>& jobs, const Quantization& quantization) {
  if (!quantization.any()) return;
  std::map<std::string, size_t> scale_jobs;  // converted .scale name -> job index
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string& name = jobs[i].name;
    if (name.ends_with(".scale")) scale_jobs[name] = i;
  }
  std::set<size_t> dropped;
  for (Job& job : jobs) {
    if (!is_linear_weight(job.name)) continue;
    const auto format = quantization.format_of(is_routed_expert_weight(job.name));
    if (!format) continue;
    const TensorView& t = *job.src;
    check(t.shape.size() == 2, "convert: tensor ", t.name, " ", shape_string(t.shape), " (", t.file,
          ") is not a matrix; cannot quantize it");
    check(t.dtype == DType::kF8E4M3 || t.dtype == DType::kBF16 || t.dtype == DType::kF32,
          "convert: tensor ", t.name, " (", t.file, ") has dtype ", dtype_name(t.dtype),
          "; only F8_E4M3, BF16 and F32 weights can be quantized");
    check(!(t.dtype == DType::kF8E4M3 && *format == QuantFormat::kInt8), "convert --int8: tensor ",
          t.name, " (", t.file,
          ") is fp8 already, which int8 would not make smaller; --int8 is for bf16 checkpoints "
          "(V2, V2-Lite)",
          " (for fp8 ones, --experts-int4 alone)");
    const std::string stem = weight_stem(job.name);
    job.scale_name = stem + ".scale";
    const auto scale = scale_jobs.find(job.scale_name);
    if (t.dtype == DType::kF8E4M3) {
      check(scale != scale_jobs.end(), "convert: fp8 tensor ", t.name, " (", t.file,
            ") has no weight_scale_inv");
      const TensorView& s = *jobs[scale->second].src;
      const std::vector<int64_t> want{ceil_div(t.shape[0], kFp8Block),
                                      ceil_div(t.shape[1], kFp8Block)};
      check(s.dtype == DType::kF32 && s.shape == want, "convert: ", s.name, " (", s.file, ") is ",
            s.describe(), "; expected F32 ", shape_string(want), " block scales of ", t.name);
      job.src_scale = &s;
      dropped.insert(scale->second);
    } else if (scale != scale_jobs.end()) {
      fail("convert: ", t.name, " is ", dtype_name(t.dtype), " but has a scale tensor (",
           jobs[scale->second].src->name, ")");
    }
    job.quant = format;
  }
  std::vector<Job> kept;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!dropped.count(i)) kept.push_back(std::move(jobs[i]));
  jobs = std::move(kept);
}

// The output shape of a quantized job's weight and scale on one rank.
std::pair<std::vector<int64_t>, std::vector<int64_t>> quantized_shapes(const Job& job, int parts) {
  const std::vector<int64_t> local = sliced_shape(*job.src, job.dim, parts);
  return {{local[0], quant_row_bytes(*job.quant, local[1])}, {local[0], quant_groups(local[1])}};
}

// Writes a quantized job: each rank's rows [r0, r1) x columns [c0, c1) of the source (its slice),
// a chunk of rows at a time: each row dequantized exactly to fp32 by dequantize_row (fp8: code
// value x block scale, the reference's rule), then its slice through quantize_row. A whole tensor
// for every rank is quantized once and written to each.
void write_quantized(const Job& job, const std::vector<std::unique_ptr<SafetensorsWriter>>& writers,
                     Progress& progress) {
  const TensorView& t = *job.src;
  const int parts = static_cast<int>(writers.size());
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t elem = dtype_size(t.dtype);
  // the source as the kernels see it: dequantize_row gives the reference's code x scale exactly
  const WeightMatrix source{
      t.dtype, rows, cols, t.data,
      job.src_scale ? reinterpret_cast<const float*>(job.src_scale->data) : nullptr};
  std::vector<int> ranks;
  if (job.rank >= 0)
    ranks = {job.rank};
  else if (job.dim < 0)
    ranks = {-1};  // all at once
  else
    for (int r = 0; r < parts; ++r) ranks.push_back(r);
  for (const int rank : ranks) {
    int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;
    if (rank >= 0 && job.dim == 0) r0 = rank * (rows / parts), r1 = r0 + rows / parts;
    if (rank >= 0 && job.dim == 1) c0 = rank * (cols / parts), c1 = c0 + cols / parts;
    const int64_t n = c1 - c0, row_bytes = quant_row_bytes(*job.quant, n), groups = quant_groups(n);
    std::vector<SafetensorsWriter*> targets;
    if (rank >= 0)
      targets = {writers[rank].get()};
    else
      for (const auto& w : writers) targets.push_back(w.get());
    const int64_t chunk_rows = std::max<int64_t>(
        1, static_cast<int64_t>(chunk_bytes() / (static_cast<size_t>(cols) * elem)));
    std::vector<float> row(
        static_cast<size_t>(cols));  // one whole source row (a column slice takes its part)
    std::vector<uint8_t> packed;
    std::vector<uint16_t> scales;
    for (int64_t rb = r0; rb < r1; rb += chunk_rows) {
      const int64_t count = std::min(chunk_rows, r1 - rb);
      const uint8_t* block = t.data + static_cast<size_t>(rb * cols) * elem;
      const size_t block_bytes = static_cast<size_t>(count * cols) * elem;
      convert_detail::prefetch_pages(block, block_bytes);
      packed.resize(static_cast<size_t>(count * row_bytes));
      scales.resize(static_cast<size_t>(count * groups));
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = rb + i;
        dequantize_row(source, r, row.data());
        try {
          quantize_row(*job.quant, row.data() + c0, n, packed.data() + i * row_bytes,
                       scales.data() + i * groups);
        } catch (const Error& e) {
          fail("convert: tensor ", t.name, " (", t.file, ") row ", r, ": ", e.what());
        }
      }
      for (SafetensorsWriter* writer : targets) {
        writer->write(job.name, static_cast<size_t>((rb - r0) * row_bytes), packed.data(),
                      packed.size());
        writer->write(job.scale_name, static_cast<size_t>((rb - r0) * groups) * 2, scales.data(),
                      scales.size() * 2);
      }
      // (as copy_range counts: the input bytes once per rank written)
      progress.advance(static_cast<double>(block_bytes) * static_cast<double>(n) /
                       static_cast<double>(cols) * static_cast<double>(targets.size()));
      convert_detail::release_pages(block, block_bytes);
    }
  }
}

// Copies bytes [begin, end) of `t` to byte `at` of tensor `name` in each of `writers`, a chunk
// at a time, each input chunk read once whatever the number of writers and released after.
void copy_range(const std::vector<SafetensorsWriter*>& writers, const std::string& name,
                const TensorView& t, size_t begin, size_t end, size_t at, Progress& progress) {
  for (size_t done = begin; done < end;) {
    const size_t n = std::min(chunk_bytes(), end - done);
    convert_detail::prefetch_pages(t.data + done, n);
    for (SafetensorsWriter* writer : writers) {
      writer->write(name, at + (done - begin), t.data + done, n);
      progress.advance(static_cast<double>(n));
    }
    convert_detail::release_pages(t.data + done, n);
    done += n;
  }
}

// A NaN or infinite weight (fp8: the NaN codes 0x7f, 0xff) makes every product with it NaN, and
// the vector kernels decode fp8's NaN codes as finite numbers, so such a file would answer
// differently per machine: refused here, naming the element (load checks only the small tensors).
void check_source_finite(const TensorView& t) {
  const std::string problem = t.non_finite_element();
  check(problem.empty(), t.file, ": tensor ", t.name, " ", problem, ": the checkpoint is damaged");
}

// Writes one planned tensor to the ranks that get it.
void write_job(const Job& job, const std::vector<std::unique_ptr<SafetensorsWriter>>& writers,
               Progress& progress, std::vector<uint8_t>& buffer) {
  check_source_finite(*job.src);
  if (job.src_scale) check_source_finite(*job.src_scale);
  if (job.quant) return write_quantized(job, writers, progress);
  const TensorView& t = *job.src;
  const int parts = static_cast<int>(writers.size());
  if (job.rank >= 0) {  // a routed expert, whole, to one rank
    copy_range({writers[job.rank].get()}, job.name, t, 0, t.n_bytes, 0, progress);
    return;
  }
  std::vector<SafetensorsWriter*> all;
  for (const auto& writer : writers) all.push_back(writer.get());
  if (job.dim < 0) {  // the whole tensor to every rank
    copy_range(all, job.name, t, 0, t.n_bytes, 0, progress);
    return;
  }
  // Slice i of P along job.dim: the input is `outer` rows of `stride` bytes, of which rank i
  // takes the `piece` bytes at i * piece.
  size_t outer = 1, inner = dtype_size(t.dtype);
  for (int d = 0; d < job.dim; ++d) outer *= static_cast<size_t>(t.shape[d]);
  for (size_t d = job.dim + 1; d < t.shape.size(); ++d) inner *= static_cast<size_t>(t.shape[d]);
  const size_t stride = static_cast<size_t>(t.shape[job.dim]) * inner;
  const size_t piece = stride / parts;
  if (outer == 0 || piece == 0) return;
  if (outer == 1) {  // dim 0: each rank's slice is one contiguous range, straight from the mapping
    for (int rank = 0; rank < parts; ++rank)
      copy_range({all[rank]}, job.name, t, rank * piece, (rank + 1) * piece, 0, progress);
    return;
  }
  // Otherwise gather each rank's pieces of a block of rows into the buffer.
  const size_t rows_per_chunk = std::max<size_t>(1, chunk_bytes() / stride);
  buffer.resize(std::min(outer, rows_per_chunk) * piece);
  for (size_t row = 0; row < outer; row += rows_per_chunk) {
    const size_t rows = std::min(rows_per_chunk, outer - row);
    const uint8_t* block = t.data + row * stride;
    convert_detail::prefetch_pages(block, rows * stride);
    for (int rank = 0; rank < parts; ++rank) {
      for (size_t r = 0; r < rows; ++r)
        std::copy_n(block + r * stride + rank * piece, piece, buffer.data() + r * piece);
      all[rank]->write(job.name, row * piece, buffer.data(), rows * piece);
      progress.advance(static_cast<double>(rows * piece));
    }
    convert_detail::release_pages(block, rows * stride);
  }
}

// The copied config.json of a quantized checkpoint also says what convert did (the shards' metadata
// is what the loader holds them to; this is for people and tools reading the directory).
void write_quantized_config(const std::string& path, const std::string& dir,
                            const Quantization& quantization) {
  nlohmann::json config;
  try {
    std::ifstream in(path);
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, " is not valid JSON (", e.what(), ")");
  }
  nlohmann::json entry = {{"group_size", kQuantGroup},
                          {"scale_dtype", "float16"},
                          {"symmetric", true},
                          {"description", quantization.describe()}};
  if (quantization.experts_int4) entry["routed_experts"] = "int4";
  if (quantization.linear_int8) entry["linear"] = "int8";
  config["dsinfer_quantization"] = entry;
  write_file_atomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

void check_options(const ConvertOptions& options) {
  const int parts = options.model_parallel;
  check(parts >= 1, "--model-parallel must be at least 1 (got ", parts, ")");
  check(options.n_experts >= 0, "--n-experts must not be negative (got ", options.n_experts, ")");
  check(options.n_experts % parts == 0, "--n-experts ", options.n_experts,
        " is not divisible by --model-parallel ", parts,
        " (each rank holds n_experts / model_parallel routed experts)");
  std::error_code ec;
  check(fs::is_directory(options.hf_ckpt_path, ec), "--hf-ckpt-path ", options.hf_ckpt_path,
        " is not a directory");
  check(!options.save_path.empty(), "--save-path is empty");
}

// Every rank's headers, from the plan: the shard's, then (--keep-mtp) the MTP file's.
struct ShardHeaders {
  std::vector<std::vector<SafetensorsWriter::Entry>> model, mtp;  // [parts] each
  double total_bytes = 0;                                         // read from the input
  size_t n_mtp = 0;                                               // jobs of the MTP module
  size_t n_tensors = 0;  // of a model shard (a quantized weight brings its scale)
};

ShardHeaders shard_headers(const std::vector<Job>& jobs, int parts) {
  ShardHeaders h;
  h.model.resize(parts);
  h.mtp.resize(parts);
  for (const Job& job : jobs) {
    h.n_mtp += job.mtp;
    if (!job.mtp) h.n_tensors += job.quant ? 2 : 1;
    for (int rank = 0; rank < parts; ++rank) {
      if (job.rank >= 0 && job.rank != rank) continue;
      h.total_bytes +=
          static_cast<double>(job.dim >= 0 ? job.src->n_bytes / parts : job.src->n_bytes);
      auto& rank_entries = (job.mtp ? h.mtp : h.model)[rank];
      if (job.quant) {
        const auto [weight_shape, scale_shape] = quantized_shapes(job, parts);
        rank_entries.push_back({job.name,
                                *job.quant == QuantFormat::kInt4 ? kInt4Storage : kInt8Storage,
                                weight_shape});
        rank_entries.push_back({job.scale_name, DType::kF16, scale_shape});
      } else {
        rank_entries.push_back({job.name, job.src->dtype, sliced_shape(*job.src, job.dim, parts)});
      }
    }
  }
  return h;
}

// The tokenizer's files and config.json beside the shards (the config rewritten when quantized);
// returns their names.
std::string copy_extras(const ConvertOptions& options, const Quantization& quantization) {
  std::vector<std::string> extras = list_files_containing(options.hf_ckpt_path, "token");
  const fs::path config = fs::path(options.hf_ckpt_path) / "config.json";
  std::error_code ec;
  if (fs::is_regular_file(config, ec) &&
      std::find(extras.begin(), extras.end(), config.string()) == extras.end())
    extras.push_back(config.string());
  std::string copied;
  for (const std::string& path : extras) {
    if (quantization.any() && path == config.string())
      write_quantized_config(path, options.save_path, quantization);
    else
      convert_detail::copy_file_into(path, options.save_path);
    copied += (copied.empty() ? "" : ", ") + fs::path(path).filename().string();
  }
  return copied;
}

}  // namespace

void convert_checkpoint(const ConvertOptions& options) {
  const double start = now_seconds();
  check_options(options);
  const int parts = options.model_parallel;
  const LayerFilter filter = layer_filter(options.hf_ckpt_path, options.n_experts);
  check(!options.keep_mtp || !filter.only_61, "--keep-mtp: ", options.hf_ckpt_path,
        " has no config.json with num_hidden_layers, which says which layer is the MTP module");
  CheckpointDir ckpt(options.hf_ckpt_path);
  convert_detail::warn_unindexed(ckpt);
  size_t skipped = 0;
  std::vector<Job> jobs = plan(ckpt, options, filter, &skipped);
  const Quantization quantization{options.experts_int4, options.int8};
  plan_quantization(jobs, quantization);

  ShardHeaders headers = shard_headers(jobs, parts);
  const size_t n_mtp = headers.n_mtp;
  const double total_bytes = headers.total_bytes;
  check(!options.keep_mtp || n_mtp > 0, "--keep-mtp: ", options.hf_ckpt_path,
        " has no tensors of layer ", filter.first_skipped,
        " (num_hidden_layers), so no multi-token-prediction module to keep");

  convert_detail::make_output_dir(options.save_path, "--save-path");
  convert_detail::StagedOutputs staged;  // outlives the writers
  std::vector<std::unique_ptr<SafetensorsWriter>> writers, mtp_writers;
  for (int rank = 0; rank < parts; ++rank) {
    const std::string path =
        (fs::path(options.save_path) / cat("model", rank, "-mp", parts, ".safetensors")).string();
    writers.push_back(std::make_unique<SafetensorsWriter>(
        staged.stage(path), std::move(headers.model[rank]), quantization.metadata()));
    if (n_mtp == 0) continue;
    const std::string mtp_path =
        (fs::path(options.save_path) / cat("mtp", rank, "-mp", parts, ".safetensors")).string();
    mtp_writers.push_back(std::make_unique<SafetensorsWriter>(
        staged.stage(mtp_path), std::move(headers.mtp[rank]), quantization.metadata()));
  }

  log_info("convert: ", jobs.size(), " tensors from ", ckpt.files().size(), " files -> ", parts,
           parts == 1 ? " rank in " : " ranks in ", options.save_path, " (",
           convert_detail::human_bytes(total_bytes), ")");
  Progress progress("convert", total_bytes);
  std::vector<uint8_t> buffer;
  for (const Job& job : jobs) write_job(job, job.mtp ? mtp_writers : writers, progress, buffer);
  for (auto& writer : writers) writer->finish();
  for (auto& writer : mtp_writers) writer->finish();
  writers.clear();
  mtp_writers.clear();
  staged.commit();
  progress.finish();

  const std::string copied = copy_extras(options, quantization);
  const std::string kept =
      n_mtp == 0
          ? std::string()
          : cat("; kept ", n_mtp, " tensors of layer ", filter.first_skipped,
                " (multi-token prediction) in mtp{0..", parts - 1, "}-mp", parts, ".safetensors");
  log_info("convert: wrote ", parts, " file", parts == 1 ? "" : "s", " model{0..", parts - 1,
           "}-mp", parts, ".safetensors (", headers.n_tensors, " tensors",
           quantization.any() ? "; " + quantization.describe() : std::string(), ", ",
           convert_detail::human_bytes(total_bytes), " read) to ", options.save_path, " in ",
           convert_detail::format_seconds(now_seconds() - start), " s", kept, "; skipped ", skipped,
           " tensors of ", filter.describe(), " (multi-token prediction); copied ",
           copied.empty() ? std::string("no other files") : copied);
}

}  // namespace dsinfer
