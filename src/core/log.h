// Logging goes to stderr so that stdout carries only results.
#pragma once

#include <string>

#include "core/error.h"

namespace dsinfer {

enum class LogLevel { kQuiet, kInfo, kDebug, kCount };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log_info(Args&&... args) {
  if (log_level() >= LogLevel::kInfo) log_line(LogLevel::kInfo, cat(std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_level() >= LogLevel::kDebug) log_line(LogLevel::kDebug, cat(std::forward<Args>(args)...));
}

// A one-line progress meter on stderr for long work (convert, load). Redraws in place on a
// terminal and prints at most every 10% otherwise, so logs stay short.
class Progress {
 public:
  Progress(std::string what, double total);
  void advance(double amount);
  void finish();

 private:
  std::string what_;
  double total_;
  double done_ = 0;
  int last_tenth_ = -1;
  double last_draw_ = 0;
  bool tty_;
  bool finished_ = false;
  double start_;
};

double now_seconds();

}  // namespace dsinfer
