#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::safetensors_test {
namespace {

using test::read_file;
using test::scratch_dir;
using test::write_file;

// Runs `body`, which must throw dsinfer::Error; returns its message (any other exception
// escapes and fails the test).
using test::error_of;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A raw safetensors file: length prefix, header text, data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

struct RawCase {
  const char* what;
  std::string contents;
  const char* message;  // must appear in the error, beside the path
};

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : v) b = static_cast<uint8_t>(byte(rng));
  return v;
}

TEST(Safetensors, RoundTripSeveralDtypesShapesAndMetadata) {
  const std::string dir = scratch_dir("rt");
  const std::string path = dir + "/t.safetensors";
  std::mt19937 rng(7);
  const std::vector<SafetensorsWriter::Entry> entries = {
      {"w.f32", DType::kF32, {3, 5}},       {"b.bf16", DType::kBF16, {7}},
      {"a.fp8", DType::kF8E4M3, {2, 3, 5}}, {"i64", DType::kI64, {4}},
      {"scalar", DType::kF32, {}},          {"empty", DType::kBF16, {0, 4}},
      {"empty2", DType::kF32, {3, 0}},      {"z.u8", DType::kU8, {9}},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "x \"y\""}};
  std::map<std::string, std::vector<uint8_t>> contents;
  {
    SafetensorsWriter writer(path, entries, metadata);
    for (const auto& e : entries) {
      size_t n = dtype_size(e.dtype);
      for (int64_t d : e.shape) n *= static_cast<size_t>(d);
      contents[e.name] = random_bytes(rng, n);
    }
    // Tensors in reverse order, each in pieces written back to front.
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      const auto& bytes = contents[it->name];
      const size_t piece = 3;
      for (size_t end = bytes.size(); end > 0;) {
        size_t begin = end >= piece ? end - piece : 0;
        writer.write(it->name, begin, bytes.data() + begin, end - begin);
        end = begin;
      }
      if (bytes.empty()) writer.write(it->name, bytes.data(), 0);
    }
    writer.finish();
    EXPECT_EQ(writer.total_bytes(), std::filesystem::file_size(path));
  }

  SafetensorsFile file(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), entries.size());
  for (const auto& e : entries) {
    ASSERT_TRUE(file.contains(e.name)) << e.name;
    const TensorView& v = file.get(e.name);
    EXPECT_EQ(v.name, e.name);
    EXPECT_EQ(v.dtype, e.dtype) << e.name;
    EXPECT_EQ(v.shape, e.shape) << e.name;
    EXPECT_EQ(v.file, path);
    const auto& want = contents[e.name];
    ASSERT_EQ(v.n_bytes, want.size()) << e.name;
    EXPECT_EQ(v.numel() * static_cast<int64_t>(dtype_size(e.dtype)),
              static_cast<int64_t>(want.size()));
    if (!want.empty()) {
      EXPECT_EQ(std::memcmp(v.data, want.data(), want.size()), 0) << e.name;
    }
    // Every tensor is aligned to its element size, whatever the mix of dtypes.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(e.dtype), 0u) << e.name;
  }
  EXPECT_EQ(file.get("scalar").numel(), 1);
  EXPECT_EQ(file.get("empty").numel(), 0);
  EXPECT_EQ(file.get("a.fp8").describe(), "a.fp8 [2, 3, 5] F8_E4M3");
  EXPECT_EQ(file.get("scalar").describe(), "scalar [] F32");
  EXPECT_FALSE(file.contains("nope"));
  std::string msg = error_of([&] { file.get("nope"); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "nope");
}

TEST(Safetensors, HeaderIsPaddedToEightBytesWithSpaces) {
  const std::string dir = scratch_dir("pad");
  // Names of several lengths so that the unpadded header length takes many values mod 8.
  for (int len = 1; len <= 9; ++len) {
    const std::string path = dir + "/p" + std::to_string(len) + ".safetensors";
    const std::string name(static_cast<size_t>(len), 'n');
    SafetensorsWriter writer(path, {{name, DType::kF32, {1}}});
    float one = 1.0f;
    writer.write(name, &one, 4);
    writer.finish();
    const std::string bytes = read_file(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
    EXPECT_EQ(header_len % 8, 0u) << name;
    ASSERT_EQ(bytes.size(), 8 + header_len + 4);
    const std::string header = bytes.substr(8, header_len);
    EXPECT_EQ(header.front(), '{');
    const size_t close = header.rfind('}');
    ASSERT_NE(close, std::string::npos);
    EXPECT_LT(header.size() - close - 1, 8u);
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding is spaces";
    SafetensorsFile file(path);
    float got;
    std::memcpy(&got, file.get(name).data, 4);
    EXPECT_EQ(got, 1.0f);
  }
}

TEST(Safetensors, TensorsAreAlignedWhateverTheirNames) {
  // Name order alone would put the 3-byte fp8 tensor before the floats and misalign them.
  const std::string path = scratch_dir("align") + "/a.safetensors";
  const std::vector<SafetensorsWriter::Entry> entries = {
      {"a", DType::kF8E4M3, {3}}, {"b", DType::kBF16, {1}}, {"c", DType::kF32, {3}},
      {"d", DType::kI64, {2}},    {"e", DType::kBF16, {3}}, {"f", DType::kF64, {1}}};
  SafetensorsWriter writer(path, entries);
  std::mt19937 rng(3);
  for (const auto& e : entries) {
    size_t n = dtype_size(e.dtype) * static_cast<size_t>(e.shape[0]);
    auto bytes = random_bytes(rng, n);
    writer.write(e.name, bytes.data(), n);
  }
  writer.finish();
  SafetensorsFile file(path);
  for (const auto& e : entries)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(file.get(e.name).data) % dtype_size(e.dtype), 0u)
        << e.name;
}

TEST(Safetensors, FinishFailsWhenATensorIsNotFullyWritten) {
  const std::string path = scratch_dir("partial") + "/p.safetensors";
  SafetensorsWriter writer(path, {{"done", DType::kF32, {2}}, {"half", DType::kBF16, {4}}});
  const uint8_t zeros[8] = {};
  writer.write("done", zeros, 8);
  writer.write("half", 0, zeros, 4);
  std::string msg = error_of([&] { writer.finish(); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "half");
  EXPECT_CONTAINS(msg, "4 of 8");
}

TEST(Safetensors, WritingThePieceTwiceDoesNotCountAsFull) {
  const std::string path = scratch_dir("twice") + "/p.safetensors";
  SafetensorsWriter writer(path, {{"t", DType::kF32, {4}}});
  const uint8_t zeros[8] = {};
  writer.write("t", 0, zeros, 8);
  writer.write("t", 0, zeros, 8);  // the first half again: bytes 8..16 are still missing
  std::string msg = error_of([&] { writer.finish(); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "8 of 16");
  writer.write("t", 4, zeros, 8);  // overlaps, completes 4..12
  writer.write("t", 12, zeros, 4);
  writer.finish();
  EXPECT_EQ(SafetensorsFile(path).get("t").n_bytes, 16u);
}

TEST(Safetensors, WriterRejectsBadWrites) {
  const std::string path = scratch_dir("bad") + "/p.safetensors";
  SafetensorsWriter writer(path, {{"t", DType::kF32, {2}}});
  const uint8_t zeros[16] = {};
  std::string msg = error_of([&] { writer.write("other", zeros, 4); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "other");
  msg = error_of([&] { writer.write("t", 4, zeros, 8); });
  EXPECT_CONTAINS(msg, "past the end of tensor t");
  msg = error_of([&] { writer.write("t", SIZE_MAX - 2, zeros, 4); });  // offset + n wraps around
  EXPECT_CONTAINS(msg, "past the end of tensor t");
  writer.write("t", zeros, 8);
  writer.finish();
  msg = error_of([&] { writer.write("t", zeros, 8); });
  EXPECT_CONTAINS(msg, path);
}

TEST(Safetensors, WriterRejectsBadEntries) {
  const std::string dir = scratch_dir("entries");
  std::string msg = error_of([&] {
    SafetensorsWriter w(dir + "/dup.safetensors",
                        {{"t", DType::kF32, {2}}, {"t", DType::kF32, {2}}});
  });
  EXPECT_CONTAINS(msg, "listed twice");
  msg = error_of([&] {
    SafetensorsWriter w(dir + "/neg.safetensors", {{"t", DType::kF32, {2, -1}}});
  });
  EXPECT_CONTAINS(msg, "neg.safetensors");
  EXPECT_CONTAINS(msg, "tensor t has a negative dimension in shape [2, -1]");
  msg = error_of([&] {
    SafetensorsWriter w(dir + "/big.safetensors",
                        {{"t", DType::kF64, {int64_t{1} << 40, int64_t{1} << 40}}});
  });
  EXPECT_CONTAINS(msg, "overflows");
  msg = error_of([&] {
    SafetensorsWriter w(dir + "/meta.safetensors", {{"__metadata__", DType::kF32, {1}}});
  });
  EXPECT_CONTAINS(msg, "__metadata__");
  msg = error_of([&] {
    SafetensorsWriter w(dir + "/no/such/dir.safetensors", {{"t", DType::kF32, {1}}});
  });
  EXPECT_CONTAINS(msg, "no/such/dir.safetensors");
}

TEST(Safetensors, EmptyFileWithNoTensors) {
  const std::string path = scratch_dir("none") + "/e.safetensors";
  SafetensorsWriter writer(path, {});
  writer.finish();
  SafetensorsFile file(path);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, ReaderAcceptsHandWrittenFile) {
  // The header the Python library writes, metadata first, tensors in any key order.
  const std::string path = scratch_dir("hand") + "/h.safetensors";
  std::string data(12, '\0');
  const float v[3] = {1.5f, -2.0f, 3.25f};
  std::memcpy(data.data(), v, 12);
  write_file(
      path,
      raw_file(
          R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}    )",
          data));
  SafetensorsFile file(path);
  const TensorView& x = file.get("x");
  EXPECT_EQ(x.shape, std::vector<int64_t>{3});
  float got[3];
  std::memcpy(got, x.data, sizeof got);  // this hand-made header leaves the data unaligned
  EXPECT_EQ(got[2], 3.25f);
  EXPECT_EQ(file.metadata().at("format"), "pt");
}

TEST(Safetensors, EveryHeaderDefectIsAnErrorNamingFileAndProblem) {
  const std::string dir = scratch_dir("defects");
  auto entry = [](const std::string& body) { return "{\"t\":" + body + "}"; };
  const std::string data8(8, '\x11');
  const std::vector<RawCase> cases = {
      {"empty file", "", "shorter than"},
      {"shorter than 8 bytes", std::string("\x05\0\0", 3), "shorter than"},
      {"header length past the end", le64(100) + "{}", "does not fit"},
      {"header length one past the end", le64(3) + "{}", "does not fit"},
      {"huge header length", le64(~0ull) + "{}", "header length"},
      {"header length just over 100 MB", le64((100ull << 20) + 1) + "{}", "header length"},
      {"header not JSON", raw_file("{\"t\": nope}", ""), "not valid JSON"},
      {"header empty", raw_file("", ""), "not valid JSON"},
      {"header not an object", raw_file("[1, 2]", ""), "not a JSON object"},
      {"header a string", raw_file("\"t\"", ""), "not a JSON object"},
      {"entry not an object", raw_file(entry("3"), ""), "lacks dtype, shape or data_offsets"},
      {"missing dtype", raw_file(entry(R"({"shape":[2],"data_offsets":[0,8]})"), data8),
       "lacks dtype, shape or data_offsets"},
      {"missing shape", raw_file(entry(R"({"dtype":"F32","data_offsets":[0,8]})"), data8),
       "lacks dtype, shape or data_offsets"},
      {"missing data_offsets", raw_file(entry(R"({"dtype":"F32","shape":[2]})"), data8),
       "lacks dtype, shape or data_offsets"},
      {"dtype not a string",
       raw_file(entry(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"), data8),
       "dtype is not a string"},
      {"unknown dtype",
       raw_file(entry(R"({"dtype":"F9","shape":[2],"data_offsets":[0,8]})"), data8),
       "unsupported tensor dtype \"F9\""},
      {"shape not an array",
       raw_file(entry(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), data8),
       "shape is not an array"},
      {"negative dim",
       raw_file(entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), data8),
       "non-natural dimension"},
      {"fractional dim",
       raw_file(entry(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), data8),
       "non-natural dimension"},
      {"float-valued dim",
       raw_file(entry(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), data8),
       "non-natural dimension"},
      {"string dim",
       raw_file(entry(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), data8),
       "non-natural dimension"},
      {"shape overflows",
       raw_file(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})"),
                ""),
       "overflows"},
      // numel 2^62 fits, but x 8 bytes wraps a 64-bit byte count to 0.
      {"byte count overflows",
       raw_file(entry(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]})"), ""),
       "overflows"},
      {"offsets a single number",
       raw_file(entry(R"({"dtype":"F32","shape":[2],"data_offsets":8})"), data8),
       "data_offsets is not a pair"},
      {"offsets one element",
       raw_file(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[8]})"), data8),
       "data_offsets is not a pair"},
      {"offsets three elements",
       raw_file(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,8]})"), data8),
       "data_offsets is not a pair"},
      {"negative offset",
       raw_file(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), data8),
       "data_offsets is not a pair"},
      {"fractional offset",
       raw_file(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.5]})"), data8),
       "data_offsets is not a pair"},
      {"reversed offsets",
       raw_file(entry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), data8), "reversed"},
      {"offsets past the end",
       raw_file(entry(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), data8),
       "past the end of the data (8 bytes"},
      {"offsets far past the end",
       raw_file(
           entry(
               R"({"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]})"),
           data8),
       "past the end"},
      {"byte length too short",
       raw_file(entry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), data8),
       "8 bytes but dtype F32 x shape [3] needs 12"},
      {"byte length too long",
       raw_file(entry(R"({"dtype":"BF16","shape":[2],"data_offsets":[0,8]})"), data8), "needs 4"},
      {"scalar with wrong length",
       raw_file(entry(R"({"dtype":"F32","shape":[],"data_offsets":[0,8]})"), data8), "needs 4"},
      {"two tensors overlap",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           data8),
       "overlap"},
      {"two tensors identical range",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
           data8),
       "overlap"},
      {"metadata value not a string", raw_file(R"({"__metadata__":{"format":1}})", ""),
       "__metadata__ value of format is not a string"},
      {"metadata value null", raw_file(R"({"__metadata__":{"k":null}})", ""),
       "__metadata__ value of k"},
      {"metadata not an object", raw_file(R"({"__metadata__":"pt"})", ""),
       "__metadata__ is not an object"},
  };
  int index = 0;
  for (const RawCase& c : cases) {
    const std::string path = dir + "/case" + std::to_string(index++) + ".safetensors";
    write_file(path, c.contents);
    SCOPED_TRACE(c.what);
    std::string msg = error_of([&] { SafetensorsFile file(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, c.message);
  }
}

TEST(Safetensors, TensorNamedInTheErrorOfItsEntry) {
  const std::string path = scratch_dir("named") + "/n.safetensors";
  write_file(path, raw_file(R"({"good":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                            R"("layers.7.bad":{"dtype":"F32","shape":[1],"data_offsets":[1,2]}})",
                            std::string(8, '\0')));
  std::string msg = error_of([&] { SafetensorsFile file(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "tensor layers.7.bad");
}

TEST(Safetensors, MissingFileIsAnErrorNamingIt) {
  const std::string path = scratch_dir("missing") + "/absent.safetensors";
  std::string msg = error_of([&] { SafetensorsFile file(path); });
  EXPECT_CONTAINS(msg, path);
  const std::string dir = scratch_dir("isdir");
  msg = error_of([&] { SafetensorsFile file(dir); });
  EXPECT_CONTAINS(msg, dir);
}

TEST(Safetensors, TruncatedValidFileIsAnError) {
  const std::string dir = scratch_dir("trunc");
  const std::string path = dir + "/full.safetensors";
  {
    SafetensorsWriter writer(path, {{"a", DType::kF32, {16}}, {"b", DType::kBF16, {8}}});
    std::vector<uint8_t> bytes(64, 0x3c);
    writer.write("a", bytes.data(), 64);
    writer.write("b", bytes.data(), 16);
    writer.finish();
  }
  const std::string full = read_file(path);
  ASSERT_NO_THROW(SafetensorsFile{path});
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(full[i]);
  // Cut inside the data, at the data start, inside the header, inside the length prefix.
  const std::pair<size_t, const char*> cuts[] = {
      {full.size() - 1, "past the end of the data"},
      {full.size() - 40, "past the end of the data"},
      {8 + header_len, "past the end of the data (0 bytes"},
      {8 + header_len - 1, "does not fit"},
      {9, "does not fit"},
      {8, "does not fit"},
      {7, "shorter than"},
  };
  for (const auto& [size, message] : cuts) {
    const std::string cut = dir + "/cut" + std::to_string(size) + ".safetensors";
    write_file(cut, full.substr(0, size));
    SCOPED_TRACE(size);
    std::string msg = error_of([&] { SafetensorsFile file(cut); });
    EXPECT_CONTAINS(msg, cut);
    EXPECT_CONTAINS(msg, message);
  }
  // The error names the tensor that runs off the end.
  std::filesystem::resize_file(path, full.size() - 1);
  std::string msg = error_of([&] { SafetensorsFile file(path); });
  EXPECT_CONTAINS(msg, "file truncated?");
}

TEST(Safetensors, ZeroSizeTensorsMayShareAnOffset) {
  const std::string path = scratch_dir("zero") + "/z.safetensors";
  write_file(path, raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("c":{"dtype":"BF16","shape":[2,0,3],"data_offsets":[4,4]}})",
                            std::string(4, '\0')));
  SafetensorsFile file(path);
  EXPECT_EQ(file.get("a").n_bytes, 0u);
  EXPECT_EQ(file.get("c").shape, (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(file.get("c").numel(), 0);
}

TEST(Safetensors, ShapeString) {
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(shape_string({7}), "[7]");
  EXPECT_EQ(shape_string({2, 0, 3}), "[2, 0, 3]");
}

}  // namespace
}  // namespace dsinfer::safetensors_test
