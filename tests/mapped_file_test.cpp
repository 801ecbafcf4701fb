// io/mapped_file.h: a file truncated underneath a live map ends the process with a message that
// names it (it was a bare SIGBUS, "Bus error", at the next prompt).
#include "io/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer {
namespace {

using test::scratch_dir;
using test::write_file;


TEST(MappedFile, MapsAWholeFile) {
  const std::string path = scratch_dir("mapped") + "/f.bin";
  write_file(path, "0123456789");
  MappedFile map(path);
  ASSERT_EQ(map.size(), 10u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map.data()), 10), "0123456789");
}

TEST(MappedFileDeathTest, ATruncatedFileIsNamedNotABusError) {
  SKIP_UNDER_ASAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = scratch_dir("mapped-truncated") + "/shard.safetensors";
  write_file(path, std::string(1 << 16, 'w'));
  EXPECT_EXIT(
      {
        MappedFile map(path);
        ::truncate(path.c_str(), 0);  // as `cp new shard` or a failed download does
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < map.size(); i += 4096) sum = static_cast<uint8_t>(sum + map.data()[i]);
        std::_Exit(sum == 255 ? 3 : 2);  // not reached: the read past the new end faults
      },
      ::testing::ExitedWithCode(1), "error: " + path + " changed while dsinfer had it mapped");
}

// A SIGBUS that is not about one of our maps keeps its default action (the handler must not
// swallow it or call it a changed file).
TEST(MappedFileDeathTest, OtherBusErrorsKeepTheirDefault) {
  SKIP_UNDER_ASAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = scratch_dir("mapped-other") + "/f.bin";
  write_file(path, "x");
  EXPECT_EXIT(
      {
        MappedFile map(path);  // installs the handler
        std::raise(SIGBUS);
        std::_Exit(2);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace dsinfer
