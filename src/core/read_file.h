// Reading a whole input file (configs, tokenizer files, prompt files) without the ways a careless
// or hostile path goes wrong: a FIFO or device that never ends or never opens (/dev/zero, a named
// pipe nobody writes), a directory, a file larger than any sane input. Each is one Error naming
// the path.
#pragma once

#include <cstdint>
#include <string>

namespace dsinfer {

// The bytes of `path`. `what` names the file's role in messages ("config", "--input-file").
// Regular files only, unless allow_streams (pipes and FIFOs, e.g. <(cmd) as --input-file): those
// are read to their end, at most max_bytes. Larger, or not a file we read, is an Error.
std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes,
                            bool allow_streams = false);

// For the message about an input that gave nothing: " (a named pipe that gave no data: nothing was
// writing to it)" when `path` is a FIFO (read_input_file does not wait for a writer), else "".
std::string empty_input_hint(const std::string& path);

}  // namespace dsinfer
