#include "core/write_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace dsinfer {

namespace {

// An open temporary file beside `target`; removed unless commit() renamed it over the target.
class TempBeside {
 public:
  explicit TempBeside(const std::string& target)
      : target_(target), temp_(target + ".partial-" + std::to_string(::getpid())) {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot write ", target_, ": ", std::strerror(errno));
  }
  ~TempBeside() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  TempBeside(const TempBeside&) = delete;
  TempBeside& operator=(const TempBeside&) = delete;

  void write(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t done = ::write(fd_, p, n);
      if (done < 0 && errno == EINTR) continue;
      // write() reports a full disk as a short write first and ENOSPC on the next call
      if (done < 0) fail("cannot write ", target_, ": ", std::strerror(errno));
      p += done;
      n -= static_cast<size_t>(done);
    }
  }

  void commit() {
    // close() is where NFS and some FUSE file systems report a failed write
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot write ", target_, ": ", std::strerror(errno));
    if (::rename(temp_.c_str(), target_.c_str()) != 0)
      fail("cannot write ", target_, ": ", std::strerror(errno));
    committed_ = true;
  }

 private:
  std::string target_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  TempBeside out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in < 0) fail("cannot read ", from, ": ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{in};
  struct stat st {};
  if (::fstat(in, &st) != 0) fail("cannot read ", from, ": ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("cannot copy ", from, ": not a regular file");
  TempBeside out(to);
  std::vector<char> buffer(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read ", from, ": ", std::strerror(errno));
    if (n == 0) break;
    out.write(buffer.data(), static_cast<size_t>(n));
  }
  out.commit();
}

}  // namespace dsinfer
