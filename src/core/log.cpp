#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace dsinfer {

namespace {
LogLevel g_level = LogLevel::kInfo;
}

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

void log_line(LogLevel level, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Progress::Progress(std::string what, double total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO)), start_(now_seconds()) {}

void Progress::advance(double amount) {
  done_ += amount;
  if (log_level() < LogLevel::kInfo) return;
  double fraction = total_ > 0 ? done_ / total_ : 1.0;
  if (tty_) {
    double t = now_seconds();
    if (t - last_draw_ < 0.1 && done_ < total_) return;
    last_draw_ = t;
    std::fprintf(stderr, "\r%s: %5.1f%% (%.1f s)", what_.c_str(), 100.0 * fraction, t - start_);
    std::fflush(stderr);
  } else {
    int tenth = static_cast<int>(fraction * 10);
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(stderr, "%s: %d%%\n", what_.c_str(), tenth * 10);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (log_level() < LogLevel::kInfo) return;
  if (tty_) std::fprintf(stderr, "\r");
  std::fprintf(stderr, "%s: done in %.1f s\n", what_.c_str(), now_seconds() - start_);
}

}  // namespace dsinfer
