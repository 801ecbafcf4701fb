#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dsinfer {

std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes,
                            bool allow_streams) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(what, " ", path, ": cannot open it (", std::strerror(errno), ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(what, " ", path, ": cannot stat it (", std::strerror(errno), ")");
  const bool stream = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  if (S_ISDIR(st.st_mode)) fail(what, " ", path, " is a directory, not a file");
  // /dev/null is an empty input (a rank's stdin under `dsinfer run`), not an endless device
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return {};
  if (!S_ISREG(st.st_mode) && !(allow_streams && stream))
    fail(what, " ", path, " is not a regular file", allow_streams ? " or a pipe" : "",
         S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? " (a device)"
         : stream                                   ? " (a pipe)"
                                                    : "");
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes)
    fail(what, " ", path, " is ", st.st_size, " bytes, more than the ", max_bytes, " this reads");
  if (stream) {  // now wait for data like an ordinary blocking read
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(what, " ", path, ": read error (", std::strerror(errno), ")");
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes)
      fail(what, " ", path, " holds more than the ", max_bytes, " bytes this reads");
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

std::string empty_input_hint(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) return "";
  return " (a named pipe that gave no data: nothing was writing to it)";
}

}  // namespace dsinfer
