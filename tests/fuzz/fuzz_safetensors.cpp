// The safetensors reader on raw file bytes: a header that parses must describe tensors that lie
// inside the bytes, with the byte length dtype x shape requires, none overlapping.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace dsinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsContents contents;
  try {
    contents = parse_safetensors(data, size, "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const auto& [name, view] : contents.tensors) {
    if (view.data < data || view.data + view.n_bytes > data + size)
      fuzz::finding("tensor " + name + " outside the file");
    if (static_cast<uint64_t>(view.numel()) * dtype_size(view.dtype) != view.n_bytes)
      fuzz::finding("tensor " + name + ": bytes differ from dtype x shape");
    if (view.n_bytes > 0) ranges.emplace_back(view.data, view.data + view.n_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fuzz::finding("two tensors overlap");
  return 0;
}
