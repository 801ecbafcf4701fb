// Writing a whole output file so that a failure (a full disk, a quota, a read-only directory) is
// one Error naming the file and the system's reason, and leaves no half-written file behind: the
// bytes go to a temporary name beside the target, which is renamed over it only once all of
// them are written.
#pragma once

#include <string>
#include <string_view>

namespace dsinfer {

// Writes `bytes` to `path` (replacing it), atomically as above.
void write_file_atomically(const std::string& path, std::string_view bytes);

// Copies the regular file `from` to `to` (replacing it), atomically as above; a read error of
// `from` names `from`, a write error names `to`.
void copy_file_atomically(const std::string& from, const std::string& to);

}  // namespace dsinfer
