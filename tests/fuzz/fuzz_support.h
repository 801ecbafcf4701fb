// Shared by the fuzz targets (libFuzzer, tests/fuzz/README.md). A target feeds its bytes to one
// parser; a dsinfer::Error (or the server's ApiError) is the expected answer to bad input, and
// anything else escaping (a nlohmann::json exception with its bare text, std::out_of_range, a
// crash, a sanitizer report, a hang past -timeout) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#ifndef DSINFER_TEST_DATA
#error "fuzz targets are built with DSINFER_TEST_DATA (tests/data)"
#endif

namespace dsinfer::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits at the first NUL byte: (before, after); no NUL gives (all, "").
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view text) {
  const size_t at = text.find('\0');
  if (at == std::string_view::npos) return {text, {}};
  return {text.substr(0, at), text.substr(at + 1)};
}

std::string read_data_file(const std::string& relative);  // tests/data/<relative>, whole

// Stops the process with a message (libFuzzer reports it as a crash with the input).
[[noreturn]] void finding(const std::string& what);

}  // namespace dsinfer::fuzz
