#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_excerpt.h"

namespace dsinfer {

using json = nlohmann::json;

namespace {
// safetensors caps the header at 100 MB; a larger length means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// The order of the safetensors library's Dtype enum (BOOL < U8 < I8 < F8_E5M2 < F8_E4M3 < I16
// < U16 < F16 < BF16 < I32 < U32 < F32 < F64 < I64 < U64); its writer lays tensors out by this
// rank, highest first, so that each one starts aligned to its element size.
int safetensors_dtype_rank(DType dtype) {
  // Indexed by DType: F32, F16, BF16, F8_E4M3, F64, I64, I32, I16, I8, U8, BOOL.
  constexpr int kRank[] = {11, 7, 8, 4, 12, 13, 9, 5, 2, 1, 0};
  static_assert(std::size(kRank) == static_cast<size_t>(DType::kCount));
  return kRank[static_cast<int>(dtype)];
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TensorView::non_finite_element() const {
  const int64_t i = first_non_finite(dtype, data, numel());
  if (i < 0) return "";
  std::string where = std::to_string(i);
  if (shape.size() == 2) where = cat("[", i / shape[1], ", ", i % shape[1], "]");
  return cat("holds a ", dtype == DType::kF8E4M3 ? "NaN code (0x7f or 0xff)" : "NaN or an infinity",
             " at element ", where);
}

std::string TensorView::describe() const {
  return cat(name, " ", shape_string(shape), " ", dtype_name(dtype));
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)) {
  SafetensorsContents contents = parse_safetensors(file_->data(), file_->size(), path);
  tensors_ = std::move(contents.tensors);
  metadata_ = std::move(contents.metadata);
}

SafetensorsContents parse_safetensors(const uint8_t* base, uint64_t size, const std::string& path) {
  SafetensorsContents contents;
  check(size >= 8, path, ": not a safetensors file (", size,
        " bytes, shorter than the header length)");
  const uint64_t header_len = read_u64_le(base);
  check(header_len <= kMaxHeaderBytes, path, ": corrupt safetensors header length ", header_len);
  check(8 + header_len <= size, path, ": truncated: header of ", header_len,
        " bytes does not fit in the file of ", size, " bytes");
  json header;
  try {
    header = json::parse(base + 8, base + 8 + header_len);
  } catch (const json::exception& e) {
    fail(path, ": safetensors header is not valid JSON (", e.what(), ")");
  }
  check(header.is_object(), path, ": safetensors header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& entry = it.value();
    if (name == "__metadata__") {
      check(entry.is_object(), path, ": __metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        check(m.value().is_string(), path, ": __metadata__ value of ", m.key(), " is not a string");
        contents.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto where = [&] { return cat(path, ": tensor ", name); };
    check(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
              entry.contains("data_offsets"),
          where(), " lacks dtype, shape or data_offsets");
    check(entry["dtype"].is_string(), where(), ": dtype is not a string");
    TensorView view;
    view.name = name;
    view.file = path;
    try {
      view.dtype = parse_dtype(entry["dtype"].get<std::string>());
    } catch (const Error& e) {
      fail(where(), ": ", e.what());
    }
    const json& shape = entry["shape"];
    check(shape.is_array(), where(), ": shape is not an array");
    // The byte count (not just the element count) must stay below 2^62, or numel x dtype size
    // could wrap around and match a short (even empty) data range.
    const uint64_t max_numel = (1ull << 62) / dtype_size(view.dtype);
    uint64_t numel = 1;
    for (const json& d : shape) {
      check(d.is_number_unsigned(), where(), ": shape ", json_excerpt(shape),
            " has a non-natural dimension");
      const uint64_t dim = d.get<uint64_t>();
      check(dim == 0 || numel <= max_numel / dim, where(), ": shape ", json_excerpt(shape),
            " overflows");
      numel *= dim;
      view.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& offsets = entry["data_offsets"];
    check(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
              offsets[1].is_number_unsigned(),
          where(), ": data_offsets is not a pair of natural numbers");
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    check(begin <= end, where(), ": data_offsets [", begin, ", ", end, "] are reversed");
    check(end <= data_size, where(), ": data_offsets [", begin, ", ", end,
          "] run past the end of the data (", data_size, " bytes; file truncated?)");
    const uint64_t expected = numel * dtype_size(view.dtype);
    check(end - begin == expected, where(), ": ", end - begin, " bytes but dtype ",
          dtype_name(view.dtype), " x shape ", shape_string(view.shape), " needs ", expected);
    view.data = base + data_start + begin;
    view.n_bytes = end - begin;
    if (begin < end) ranges.emplace_back(begin, end);
    contents.tensors.emplace(name, std::move(view));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    check(ranges[i].first >= ranges[i - 1].second, path, ": two tensors overlap at data offset ",
          ranges[i].first);
  return contents;
}

const TensorView& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path(), ": no tensor named ", name);
  return it->second;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Entry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    const int ra = safetensors_dtype_rank(a.dtype), rb = safetensors_dtype_rank(b.dtype);
    return ra != rb ? ra > rb : a.name < b.name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    check(e.name != "__metadata__", path, ": a tensor cannot be named __metadata__");
    check(!slots_.count(e.name), path, ": tensor ", e.name, " listed twice");
    uint64_t bytes = dtype_size(e.dtype);
    for (int64_t d : e.shape) {
      check(d >= 0, path, ": tensor ", e.name, " has a negative dimension in shape ",
            shape_string(e.shape));
      check(d == 0 || bytes <= (1ull << 62) / static_cast<uint64_t>(d), path, ": tensor ", e.name,
            " shape ", shape_string(e.shape), " overflows");
      bytes *= static_cast<uint64_t>(d);
    }
    header[e.name] = {{"dtype", dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    Slot& slot = slots_[e.name];
    slot.begin = offset;
    slot.size = bytes;
    offset += bytes;
  }
  data_size_ = offset;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  data_start_ = 8 + text.size();

  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create ", path, ": ", std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  std::string prefix(reinterpret_cast<char*>(len), 8);
  prefix += text;
  size_t done = 0;
  while (done < prefix.size()) {
    ssize_t n = ::pwrite(fd_, prefix.data() + done, prefix.size() - done, static_cast<off_t>(done));
    if (n <= 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      fail("cannot write ", path, ": ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd_, static_cast<off_t>(data_start_ + data_size_)) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail("cannot size ", path, ": ", std::strerror(err));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsWriter::write(const std::string& name, size_t offset, const void* bytes, size_t n) {
  check(fd_ >= 0, path_, ": write to tensor ", name, " after finish()");
  auto it = slots_.find(name);
  check(it != slots_.end(), path_, ": writing unknown tensor ", name);
  Slot& slot = it->second;
  check(offset <= slot.size && n <= slot.size - offset, path_, ": write past the end of tensor ",
        name, " (", n, " bytes at ", offset, " of ", slot.size, ")");
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  uint64_t at = data_start_ + slot.begin + offset;
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(at + done));
    if (w <= 0) fail("cannot write ", path_, ": ", std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  if (n > 0) mark_written(slot, offset, offset + n);
}

// Adds [begin, end) to the slot's written ranges, merging it with any it overlaps or touches,
// so that `written` counts each byte once however often it was written.
void SafetensorsWriter::mark_written(Slot& slot, uint64_t begin, uint64_t end) {
  auto it = slot.covered.upper_bound(begin);
  if (it != slot.covered.begin() && std::prev(it)->second >= begin) --it;
  while (it != slot.covered.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    slot.written -= it->second - it->first;
    it = slot.covered.erase(it);
  }
  slot.covered.emplace(begin, end);
  slot.written += end - begin;
}

void SafetensorsWriter::finish() {
  check(fd_ >= 0, path_, ": finish() called twice");
  for (const auto& [name, slot] : slots_)
    check(slot.written == slot.size, path_, ": tensor ", name, " got ", slot.written, " of ",
          slot.size, " bytes");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("cannot close ", path_, ": ", std::strerror(errno));
  }
  fd_ = -1;
}

}  // namespace dsinfer
