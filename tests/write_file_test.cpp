// core/write_file.h: whole outputs written atomically, a failure named with the system's reason
// and no half-written file left behind.
#include "core/write_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "test_support.h"

namespace dsinfer::write_file_test {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::read_file;
using test::scratch_dir;

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(WriteFile, ReplacesTheTargetWhole) {
  const std::string dir = scratch_dir("write-file");
  const std::string path = dir + "/out.json";
  write_file_atomically(path, "first, longer text\n");
  write_file_atomically(path, "second\n");
  EXPECT_EQ(read_file(path), "second\n");
  EXPECT_EQ(files_in(dir), 1u);  // no temporary left beside it
  copy_file_atomically(path, dir + "/copy.json");
  EXPECT_EQ(read_file(dir + "/copy.json"), "second\n");
  EXPECT_EQ(files_in(dir), 2u);
}

TEST(WriteFile, FailuresNameTheFileAndTheReason) {
  const std::string dir = scratch_dir("write-file-errors");
  std::string msg = error_of([&] { write_file_atomically(dir + "/no/such/dir/out.json", "x"); });
  EXPECT_CONTAINS(msg, "cannot write " + dir + "/no/such/dir/out.json: No such file or directory");
  msg = error_of([&] { copy_file_atomically(dir + "/missing", dir + "/copy"); });
  EXPECT_CONTAINS(msg, "cannot read " + dir + "/missing: No such file or directory");
  msg = error_of([&] { copy_file_atomically(dir, dir + "/copy"); });
  EXPECT_CONTAINS(msg, "not a regular file");
  EXPECT_EQ(files_in(dir), 0u);
}

// A write that fails halfway (here a file-size limit; a full disk is the same path) leaves the old
// file as it was and no partial file: in a child, so the limit stays there.
TEST(WriteFile, AFailedWriteLeavesNoPartialFile) {
  const std::string dir = scratch_dir("write-file-limit");
  const std::string path = dir + "/big.bin";
  write_file_atomically(path, "old");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 16, 1 << 16};
    setrlimit(RLIMIT_FSIZE, &limit);
    const std::string msg =
        error_of([&] { write_file_atomically(path, std::string(1 << 20, 'x')); });
    _exit(msg.find("cannot write " + path + ": File too large") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw another message";
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(files_in(dir), 1u);
}

}  // namespace
}  // namespace dsinfer::write_file_test
