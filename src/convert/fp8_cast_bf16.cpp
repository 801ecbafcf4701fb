// fp8-cast-bf16: an fp8 HF checkpoint -> the same checkpoint in bf16, as the reference's
// fp8_cast_bf16.py with kernel.py's weight_dequant.
//
// For every *.safetensors file (sorted), a file of the same name: a 1-byte weight W with a
// tensor "W_scale_inv" (found through the index, so possibly in another file) becomes
// bf16(fp8(W) * scale) per 128x128 block, the product taken in fp32 and rounded to nearest even
// (weight_dequant computes in fp32 and stores into a bf16 tensor); the scales are dropped; a
// 1-byte weight without a scale is copied unchanged with a warning; anything else is copied.
// Then model.safetensors.index.json is rewritten as {"metadata": {}, "weight_map": ...} without
// the scales (json.dump(indent=2) layout, entry order kept). Like the reference, config.json and
// the tokenizer files are not copied.
//
// Streaming: the plan reads headers only; weights are dequantized a bounded chunk of rows at a
// time (rows in parallel) and written in place, other tensors go straight from the mapping.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/convert.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "core/write_file.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"

namespace dsinfer {

namespace fs = std::filesystem;

namespace {

using convert_detail::chunk_bytes;

constexpr std::string_view kScaleSuffix = "_scale_inv";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Job {
  const TensorView* src = nullptr;
  const TensorView* scale = nullptr;  // set: dequantize with it; null: copy the bytes
};

// The scale tensor as floats (it is small: one value per 128x128 block).
std::vector<float> read_scales(const TensorView& s) {
  std::vector<float> out(static_cast<size_t>(s.numel()));
  const uint8_t* p = s.data;
  for (size_t i = 0; i < out.size(); ++i) {
    switch (s.dtype) {
      case DType::kF32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case DType::kBF16: {
        uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
        break;
      }
      case DType::kF16: {
        uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = f16_to_f32(bits);
        break;
      }
      default:
        fail("tensor ", s.name, " (", s.file, "): scale dtype ", dtype_name(s.dtype),
             " is not a float type");
    }
  }
  return out;
}

// Checks that `scale` fits weight `w` as weight_dequant reads it; throws naming both.
void check_dequant(const TensorView& w, const TensorView& scale) {
  check(w.dtype == DType::kF8E4M3, "tensor ", w.name, " (", w.file, ") has a ", scale.name,
        " but dtype ", dtype_name(w.dtype), "; only F8_E4M3 weights can be dequantized");
  check(w.shape.size() == 2, "fp8 weight ", w.describe(), " (", w.file,
        ") is not a matrix; weight_dequant needs 2 dimensions");
  const std::vector<int64_t> want = {ceil_div(w.shape[0], kFp8Block),
                                     ceil_div(w.shape[1], kFp8Block)};
  check(scale.shape == want, "scale ", scale.describe(), " (", scale.file, ") does not fit weight ",
        w.describe(), ": expected shape ", shape_string(want), " (one per ", kFp8Block, "x",
        kFp8Block, " block)");
  check(scale.dtype == DType::kF32 || scale.dtype == DType::kBF16 || scale.dtype == DType::kF16,
        "scale ", scale.describe(), " (", scale.file, ") is not a float tensor");
}

void copy_tensor(SafetensorsWriter& writer, const TensorView& t, Progress& progress) {
  for (size_t done = 0; done < t.n_bytes;) {
    const size_t n = std::min(chunk_bytes(), t.n_bytes - done);
    convert_detail::prefetch_pages(t.data + done, n);
    writer.write(t.name, done, t.data + done, n);
    convert_detail::release_pages(t.data + done, n);
    done += n;
    progress.advance(static_cast<double>(n));
  }
}

void dequantize_tensor(SafetensorsWriter& writer, const TensorView& w, const TensorView& scale,
                       Progress& progress, std::vector<uint16_t>& buffer) {
  const std::vector<float> scales = read_scales(scale);
  const int64_t rows = w.shape[0], cols = w.shape[1];
  if (rows == 0 || cols == 0) return;
  const int64_t scale_cols = ceil_div(cols, kFp8Block);
  const float* table = fp8_e4m3_table();
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes() / (2 * static_cast<size_t>(cols))));
  buffer.resize(static_cast<size_t>(std::min(rows, rows_per_chunk) * cols));
  for (int64_t row0 = 0; row0 < rows; row0 += rows_per_chunk) {
    const int64_t n_rows = std::min(rows_per_chunk, rows - row0);
    convert_detail::prefetch_pages(w.data + row0 * cols, static_cast<size_t>(n_rows * cols));
    ThreadPool::global().parallel_for(
        n_rows,
        [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const int64_t row = row0 + r;
            const uint8_t* in = w.data + row * cols;
            uint16_t* out = buffer.data() + r * cols;
            const float* block_scales = scales.data() + (row / kFp8Block) * scale_cols;
            for (int64_t c0 = 0; c0 < cols; c0 += kFp8Block) {
              const float s = block_scales[c0 / kFp8Block];
              const int64_t c1 = std::min<int64_t>(cols, c0 + kFp8Block);
              for (int64_t c = c0; c < c1; ++c) out[c] = f32_to_bf16(table[in[c]] * s);
            }
          }
        },
        8);
    const size_t bytes = static_cast<size_t>(n_rows * cols) * 2;
    writer.write(w.name, static_cast<size_t>(row0 * cols) * 2, buffer.data(), bytes);
    progress.advance(static_cast<double>(bytes));
    convert_detail::release_pages(w.data + row0 * cols, static_cast<size_t>(n_rows * cols));
  }
}

// The index as read (entry order kept, as Python's json keeps it).
nlohmann::ordered_json read_index(const fs::path& path) {
  std::ifstream in(path);
  check(in.good(), "cannot read ", path.string());
  try {
    return nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), " is not valid JSON (", e.what(), ")");
  }
}

}  // namespace

void fp8_cast_bf16(const std::string& input_dir, const std::string& output_dir) {
  const double start = now_seconds();
  std::error_code ec;
  check(fs::is_directory(input_dir, ec), "--input-fp8-hf-path ", input_dir, " is not a directory");
  check(!output_dir.empty(), "--output-bf16-hf-path is empty");
  check(!(fs::exists(output_dir, ec) && fs::equivalent(input_dir, output_dir, ec)),
        "--output-bf16-hf-path ", output_dir,
        " is the input directory; write the bf16 copy elsewhere");

  CheckpointDir ckpt(input_dir);  // validates every file and the index against them
  convert_detail::warn_unindexed(ckpt);
  const fs::path index_path = fs::path(input_dir) / "model.safetensors.index.json";
  if (!ckpt.has_index())
    log_info("fp8-cast-bf16: warning: no model.safetensors.index.json in ", input_dir,
             "; scales are looked up across all files and no index is written");

  // Plan: every output file's header, and what to do with each tensor.
  std::vector<std::vector<SafetensorsWriter::Entry>> entries(ckpt.files().size());
  std::vector<std::vector<Job>> jobs(ckpt.files().size());
  double total_bytes = 0;
  size_t n_dequantized = 0, n_dropped = 0, n_unscaled = 0;
  for (size_t f = 0; f < ckpt.files().size(); ++f) {
    std::vector<const TensorView*> views;
    for (const auto& [name, view] : ckpt.files()[f]->tensors()) views.push_back(&view);
    std::stable_sort(views.begin(), views.end(),
                     [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
    for (const TensorView* view : views) {
      if (ends_with(view->name, kScaleSuffix)) {
        ++n_dropped;
        continue;
      }
      Job job{view, nullptr};
      DType out_dtype = view->dtype;
      if (dtype_size(view->dtype) == 1) {
        job.scale = ckpt.find(view->name + std::string(kScaleSuffix));
        if (job.scale) {
          check_dequant(*view, *job.scale);
          out_dtype = DType::kBF16;
          ++n_dequantized;
        } else {
          log_info("Warning: Missing scale_inv tensor for ", view->name, ", skipping conversion");
          ++n_unscaled;
        }
      }
      entries[f].push_back({view->name, out_dtype, view->shape});
      total_bytes +=
          static_cast<double>(view->numel()) * static_cast<double>(dtype_size(out_dtype));
      jobs[f].push_back(job);
    }
  }

  convert_detail::make_output_dir(output_dir, "--output-bf16-hf-path");
  convert_detail::StagedOutputs staged;
  log_info("fp8-cast-bf16: ", ckpt.files().size(), " files from ", input_dir, " -> ", output_dir,
           " (", convert_detail::human_bytes(total_bytes), ")");
  Progress progress("fp8-cast-bf16", total_bytes);
  std::vector<uint16_t> buffer;
  for (size_t f = 0; f < ckpt.files().size(); ++f) {
    const std::string name = fs::path(ckpt.files()[f]->path()).filename().string();
    SafetensorsWriter writer(staged.stage((fs::path(output_dir) / name).string()),
                             std::move(entries[f]));
    for (const Job& job : jobs[f]) {
      if (job.scale)
        dequantize_tensor(writer, *job.src, *job.scale, progress, buffer);
      else
        copy_tensor(writer, *job.src, progress);
    }
    writer.finish();
  }

  if (ckpt.has_index()) {
    const nlohmann::ordered_json index = read_index(index_path);
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it)
      if (!ends_with(it.key(), kScaleSuffix)) weight_map[it.key()] = it.value();
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["metadata"] = nlohmann::ordered_json::object();
    out["weight_map"] = std::move(weight_map);
    const std::string path =
        staged.stage((fs::path(output_dir) / "model.safetensors.index.json").string());
    write_file_atomically(path,
                          out.dump(2, ' ', true));  // json.dump(indent=2): ASCII, no final newline
  }
  staged.commit();
  progress.finish();
  log_info("fp8-cast-bf16: dequantized ", n_dequantized, " fp8 weights to bf16, dropped ",
           n_dropped, " scale tensors",
           n_unscaled ? cat(", copied ", n_unscaled, " fp8 weights without a scale unchanged") : "",
           "; wrote ", ckpt.files().size(), " files", ckpt.has_index() ? " and the index" : "",
           " to ", output_dir, " in ", convert_detail::format_seconds(now_seconds() - start), " s");
  log_info(
      "fp8-cast-bf16: note: like the reference, config.json and the tokenizer files are not "
      "copied; "
      "copy them yourself and delete \"quantization_config\" from config.json so loaders read "
      "bf16");
}

}  // namespace dsinfer
