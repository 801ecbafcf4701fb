#include "comm/peer_watch.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <vector>

#include "core/error.h"

namespace dsinfer {

namespace {
constexpr char kGoodbye = 'B';
constexpr int kAbortEveryMs = 5;  // while a peer is dead: how often in-flight sends are aborted
}  // namespace

PeerWatch::PeerWatch(std::map<int, int> lines) : lines_(std::move(lines)) {
  check(pipe(wake_) == 0, "peer watch: pipe failed");
  thread_ = std::thread([this] { run(); });
}

PeerWatch::~PeerWatch() {
  if (std::uncaught_exceptions() == 0 || agreed_failure_)
    for (const auto& [rank, fd] : lines_) send(fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  const char stop = 0;
  (void)!write(wake_[1], &stop, 1);
  thread_.join();
  for (const auto& [rank, fd] : lines_) close(fd);
  close(wake_[0]);
  close(wake_[1]);
}

void PeerWatch::run() {
  std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
  std::vector<int> ranks{-1};
  for (const auto& [rank, fd] : lines_) {
    fds.push_back({fd, POLLIN, 0});
    ranks.push_back(rank);
  }
  for (;;) {
    const int timeout = dead_rank_.load() >= 0 ? kAbortEveryMs : -1;
    const int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents) return;  // the destructor
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char byte = 0;
      const ssize_t k = recv(fds[i].fd, &byte, 1, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (k == 1 && byte != kGoodbye) continue;  // (nothing else is sent on a line)
      if (k != 1) {  // the line ended without a goodbye: the rank died or failed
        int none = -1;
        dead_rank_.compare_exchange_strong(none, ranks[i]);
      }
      fds[i].fd = -1;  // poll ignores it from now on
    }
    if (dead_rank_.load() < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    for (InFlight* f : in_flight_) f->abort_sends_();
  }
}

PeerWatch::InFlight::InFlight(PeerWatch* watch, std::function<void()> abort_sends)
    : watch_(watch), abort_sends_(std::move(abort_sends)) {
  if (!watch_) return;
  std::lock_guard<std::mutex> lock(watch_->mu_);
  at_ = watch_->in_flight_.insert(watch_->in_flight_.end(), this);
}

PeerWatch::InFlight::~InFlight() {
  if (!watch_) return;
  std::lock_guard<std::mutex> lock(watch_->mu_);
  watch_->in_flight_.erase(at_);
}

}  // namespace dsinfer
