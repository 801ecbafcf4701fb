// The files and pages of a conversion (convert.h's convert_detail): outputs staged as .partial
// until every one is written, output directories, the chunk size, pages released and prefetched
// around each chunk, and the sizes and times its log prints.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "convert/convert.h"
#include "core/error.h"
#include "core/log.h"
#include "core/write_file.h"
#include "io/checkpoint_dir.h"

namespace dsinfer {

namespace fs = std::filesystem;

namespace convert_detail {

StagedOutputs::~StagedOutputs() {
  if (committed_) return;
  for (const std::string& path : finals_) {
    std::error_code ec;
    fs::remove(path + ".partial", ec);
  }
}

std::string StagedOutputs::stage(const std::string& final_path) {
  finals_.push_back(final_path);
  return final_path + ".partial";
}

void StagedOutputs::commit() {
  for (const std::string& path : finals_) {
    std::error_code ec;
    fs::rename(path + ".partial", path, ec);
    check(!ec, "cannot rename ", path, ".partial to ", path, ": ", ec.message());
  }
  committed_ = true;
}

void make_output_dir(const std::string& dir, const std::string& what) {
  check(!dir.empty(), what, " is empty");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    check(fs::is_directory(dir, ec), what, " ", dir, " exists and is not a directory");
    return;
  }
  fs::create_directories(dir, ec);
  check(!ec, "cannot create ", what, " ", dir, ": ", ec.message());
}

void copy_file_into(const std::string& path, const std::string& dir) {
  const fs::path target = fs::path(dir) / fs::path(path).filename();
  std::error_code ec;
  if (fs::exists(target, ec) && fs::equivalent(path, target, ec)) return;  // same directory
  copy_file_atomically(path, target.string());
}

namespace {
size_t g_chunk_bytes = size_t{64} << 20;
}
size_t chunk_bytes() { return g_chunk_bytes; }
void set_chunk_bytes(size_t bytes) { g_chunk_bytes = bytes > 0 ? bytes : 1; }

namespace {
uintptr_t page_size() {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return page;
}
}  // namespace

void release_pages(const void* p, size_t n) {
  const uintptr_t page = page_size();
  uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  uintptr_t end = begin + n;
  begin = (begin + page - 1) / page * page;  // whole pages inside the range only: a page
  end = end / page * page;                   // shared with the next tensor stays mapped
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void prefetch_pages(const void* p, size_t n) {
  const uintptr_t page = page_size();
  uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

void warn_unindexed(const CheckpointDir& ckpt) {
  if (!ckpt.has_index()) return;
  std::set<std::string> opened;
  for (const auto& file : ckpt.files()) opened.insert(fs::path(file->path()).filename().string());
  for (const std::string& path : list_files(ckpt.dir(), ".safetensors"))
    if (!opened.count(fs::path(path).filename().string()))
      log_info("warning: ", path, " is not in model.safetensors.index.json; ignored");
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return text;
}

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", s);
  return text;
}

}  // namespace convert_detail

}  // namespace dsinfer
