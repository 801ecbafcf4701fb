// JSON inputs (configs, case files) with errors that name where they came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dsinfer {

// Parses `text`; an Error "<origin> is not valid JSON (...)" when it is not.
nlohmann::json parse_json(const std::string& text, const std::string& origin);

// Reads (core/read_file.h: a regular file of at most 1 GiB) and parses the file at `path`; an
// Error naming <what> and the path when it cannot be read, else as parse_json.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace dsinfer
