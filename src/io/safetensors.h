// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
// The reader maps the file and validates everything before handing out a pointer: the header is
// JSON inside the file, every offset range lies inside the data, dtype size x shape equals the
// byte length, and no two tensors overlap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace dsinfer {

// A view of one tensor inside a mapped file (row-major, contiguous).
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;
  std::string file;  // where it came from, for error messages

  int64_t numel() const;
  int64_t dim(int i) const { return shape.at(i); }
  std::string describe() const;  // "name [a, b] BF16"
  // "" when every element is a finite number (core/dtype.h first_non_finite), else what and
  // where: "holds a NaN code (0x7f or 0xff) at element [r, c]" (fp8), "holds a NaN or an
  // infinity at element i" (vectors).
  std::string non_finite_element() const;
};

std::string shape_string(const std::vector<int64_t>& shape);

// The tensors and metadata of a whole safetensors file held in memory (`bytes`, `size`), validated
// as above; the views point into `bytes`. `path` names it in errors. (The file class maps a file
// and calls this; the fuzzer calls it on raw bytes.)
struct SafetensorsContents {
  std::map<std::string, TensorView> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsContents parse_safetensors(const uint8_t* bytes, uint64_t size, const std::string& path);

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws Error naming the file and the defect.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  // Throws Error naming the file when the tensor is absent.
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file whose tensor list is fixed up front (the header comes first), then
// accepts each tensor's bytes in any order and in pieces, so a converter can stream slices of
// huge inputs without holding a whole tensor. Tensors are laid out as the safetensors library
// does: by dtype, widest first (so every tensor is aligned to its element size), then by name;
// the header is padded with spaces to 8 bytes. Pieces may overlap or repeat; finish() checks
// that their union covers every byte.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::string& path, std::vector<Entry> entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Writes `n` bytes at byte `offset` within tensor `name`.
  void write(const std::string& name, size_t offset, const void* bytes, size_t n);
  void write(const std::string& name, const void* bytes, size_t n) { write(name, 0, bytes, n); }
  // Checks every byte of every tensor was written, then closes the file.
  void finish();
  uint64_t total_bytes() const { return data_start_ + data_size_; }

 private:
  struct Slot {
    uint64_t begin;
    uint64_t size;
    uint64_t written = 0;                  // bytes covered by `covered`
    std::map<uint64_t, uint64_t> covered;  // disjoint, non-touching [begin, end) ranges written
  };
  static void mark_written(Slot& slot, uint64_t begin, uint64_t end);

  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  uint64_t data_size_ = 0;
  std::map<std::string, Slot> slots_;
};

}  // namespace dsinfer
