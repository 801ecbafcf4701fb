#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/log.h"

namespace dsinfer {

namespace {

// The live maps, for the SIGBUS handler: touching a page of a mapped file that has since been
// truncated (or rewritten in place through a new, shorter file at the same inode) raises
// SIGBUS, which would kill the process with no word. The handler names the file instead. Slots
// are fixed and lock-free to read, as a signal handler needs; registering takes the mutex.
constexpr int kSlots = 1024;
constexpr size_t kPathBytes = 512;
struct MapSlot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  char path[kPathBytes] = {};
};
MapSlot g_maps[kSlots];
std::mutex g_maps_mutex;
struct sigaction g_previous_sigbus {};

void write_stderr(const char* text) {
  size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t done = ::write(STDERR_FILENO, text, n);
    if (done <= 0) return;
    text += done;
    n -= static_cast<size_t>(done);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  // si_code > 0: raised by the kernel for an access (si_addr is meaningful); kill/raise are not
  for (const MapSlot& slot : g_maps) {
    if (info->si_code <= 0) break;
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= slot.end.load(std::memory_order_acquire))
      continue;
    write_stderr("error: ");
    write_stderr(slot.path);
    write_stderr(
        " changed while dsinfer had it mapped (truncated or rewritten in place by another "
        "program); "
        "its data can no longer be read: restart once the file is complete\n");
    ::_exit(1);
  }
  // Not one of ours: what would have happened without this handler.
  if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);  // blocked until this handler returns, then the default action
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

int register_map(const uint8_t* data, size_t size, const std::string& path) {
  install_sigbus_handler();
  std::lock_guard<std::mutex> lock(g_maps_mutex);
  for (int i = 0; i < kSlots; ++i) {
    MapSlot& slot = g_maps[i];
    if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(slot.path, path.c_str(), kPathBytes - 1);
    slot.path[kPathBytes - 1] = '\0';
    slot.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
    slot.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;  // more maps than slots: this one faults unnamed, as before
}

void unregister_map(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_maps_mutex);
  g_maps[slot].begin.store(0, std::memory_order_release);
}

std::atomic<HugePages> g_huge_pages{HugePages::kAuto};
std::atomic<int> g_local_processes{1};
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kReadChunk = size_t{64} << 20;
constexpr size_t kAutoMinBytes = size_t{256} << 20;
constexpr size_t kAutoSpareBytes = size_t{1} << 30;

// MemAvailable from /proc/meminfo in bytes (0 when it cannot be read: auto then maps).
size_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (in >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// Transparent huge pages for anonymous memory: "always" or "madvise" (this path advises).
bool thp_enabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  return std::getline(in, mode) && mode.find("[never]") == std::string::npos;
}

std::string gb(size_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1e9 << " GB";
  return s.str();
}

}  // namespace

void set_read_into_huge_pages(HugePages mode, int local_processes) {
  g_huge_pages = mode;
  g_local_processes = std::max(1, local_processes);
}

bool auto_reads_into_huge_pages(size_t file_bytes, size_t mem_available, int local_processes,
                                bool thp_on, std::string* why_not) {
  auto no = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return false;
  };
  if (file_bytes < kAutoMinBytes) return no("smaller than 256 MB");
  if (!thp_on)
    return no("transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled)");
  const size_t share = mem_available / static_cast<size_t>(std::max(1, local_processes));
  if (file_bytes + kAutoSpareBytes > share)
    return no("it needs " + gb(file_bytes) +
              " and this process's share of the available memory is " + gb(share) +
              (local_processes > 1 ? " (" + std::to_string(local_processes) + " ranks on this host)"
                                   : ""));
  return true;
}

// The --huge-pages path: anonymous memory rounded up to whole 2 MB pages, advised for THP before
// it is touched, filled with pread in 64 MB chunks, then made read-only like the map it replaces.
// The file's pages stay in the page cache (clean, so the kernel drops them first when memory is
// short; kept, the next run loads without the disk).
void MappedFile::read_into_anonymous(int fd) {
  mapped_bytes_ = (size_ + kHugePage - 1) / kHugePage * kHugePage;
  void* addr =
      ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED)
    fail("cannot allocate ", mapped_bytes_, " bytes for ", path_, ": ", std::strerror(errno));
  auto* bytes = static_cast<uint8_t*>(addr);
  ::madvise(addr, mapped_bytes_, MADV_HUGEPAGE);  // best effort: THP "never" leaves 4 KB pages
  for (size_t done = 0; done < size_;) {
    const size_t want = std::min(kReadChunk, size_ - done);
    const ssize_t got = ::pread(fd, bytes + done, want, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = got < 0 ? errno : 0;
      ::munmap(addr, mapped_bytes_);
      fail("cannot read ", path_, " at byte ", done, " of ", size_, ": ",
           err ? std::strerror(err) : "the file ended early (truncated while loading?)");
    }
    done += static_cast<size_t>(got);
  }
  ::mprotect(addr, mapped_bytes_, PROT_READ);
  data_ = bytes;
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO given as a shard fails the regular-file check below instead of blocking
  // in open until someone writes to it (it does not change reading or mapping a regular file)
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot stat ", path, ": ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, " is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  bool copy = false;
  switch (g_huge_pages.load()) {
    case HugePages::kOff:
      break;
    case HugePages::kOn:
      copy = size_ > 0;
      break;
    case HugePages::kAuto: {
      std::string why_not;
      copy = auto_reads_into_huge_pages(size_, mem_available_bytes(), g_local_processes.load(),
                                        thp_enabled(), &why_not);
      if (copy)
        log_info("huge pages: reading ", path_, " (", gb(size_),
                 ") into 2 MB pages (--no-huge-pages maps it instead)");
      else if (size_ >= kAutoMinBytes)
        log_info("huge pages: mapping ", path_,
                 " in the page cache's 4 KB pages (decode is slower), not reading it "
                 "into 2 MB pages: ",
                 why_not);
      break;
    }
  }
  if (copy) {
    try {
      read_into_anonymous(fd);
    } catch (...) {
      ::close(fd);
      throw;
    }
  } else if (size_ > 0) {
    mapped_bytes_ = size_;
    void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail("cannot map ", path, ": ", std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(addr);
    slot_ = register_map(data_, size_, path_);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  unregister_map(slot_);
  if (data_) ::munmap(const_cast<uint8_t*>(data_), mapped_bytes_);
}

}  // namespace dsinfer
