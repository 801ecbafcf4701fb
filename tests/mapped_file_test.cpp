// io/mapped_file.h: a file truncated underneath a live map ends the process with a message that
// names it (it was a bare SIGBUS, "Bus error", at the next prompt); the huge-page copy and the
// default's rule for when to make it.
#include "io/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::mapped_file_test {
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

// --huge-pages: the file read into anonymous memory, byte for byte, at sizes around the 64 MB read
// chunk and the 2 MB page (and an empty file); read-only afterwards like the map.
TEST(MappedFile, HugePagesCopyIsTheFileByteForByte) {
  set_read_into_huge_pages(HugePages::kOn);
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{2} << 20, (size_t{2} << 20) + 3, (size_t{64} << 20) + 4097}) {
    SCOPED_TRACE(size);
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
    const std::string path = scratch_dir("mapped-huge") + "/f" + std::to_string(size) + ".bin";
    write_file(path, bytes);
    MappedFile map(path);
    ASSERT_EQ(map.size(), size);
    EXPECT_TRUE(size == 0 || std::memcmp(map.data(), bytes.data(), size) == 0);
  }
  set_read_into_huge_pages(HugePages::kAuto);
}

// The default (HugePages::kAuto): shards are copied when they fit in this rank's share of the
// available memory with 1 GB to spare; small files, a machine without THP or a tight memory map.
TEST(MappedFile, AutoCopiesShardsThatFitAndMapsTheRest) {
  const size_t gb = size_t{1} << 30, shard = 6 * gb;
  std::string why;
  EXPECT_TRUE(auto_reads_into_huge_pages(shard, 20 * gb, 1, true));
  EXPECT_TRUE(auto_reads_into_huge_pages(shard, 7 * gb, 1, true));  // exactly the spare left
  EXPECT_FALSE(auto_reads_into_huge_pages(shard, 7 * gb - 1, 1, true, &why));
  EXPECT_NE(why.find("available memory"), std::string::npos) << why;
  EXPECT_TRUE(auto_reads_into_huge_pages(shard, 28 * gb, 4, true));  // 7 GB each
  EXPECT_FALSE(auto_reads_into_huge_pages(shard, 27 * gb, 4, true, &why));
  EXPECT_NE(why.find("4 ranks on this host"), std::string::npos) << why;
  EXPECT_FALSE(auto_reads_into_huge_pages(shard, 20 * gb, 1, false, &why));
  EXPECT_NE(why.find("transparent huge pages are off"), std::string::npos) << why;
  EXPECT_FALSE(auto_reads_into_huge_pages(255 << 20, 20 * gb, 1, true, &why));
  EXPECT_NE(why.find("smaller than 256 MB"), std::string::npos) << why;
  EXPECT_TRUE(auto_reads_into_huge_pages(256 << 20, 20 * gb, 1, true));
  EXPECT_FALSE(auto_reads_into_huge_pages(shard, 0, 1, true));  // MemAvailable unreadable: map
}

TEST(MappedFileDeathTest, AWriteToTheHugePagesCopyFaults) {
  SKIP_UNDER_ASAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = scratch_dir("mapped-huge-ro") + "/f.bin";
  write_file(path, "abc");
  EXPECT_EXIT(
      {
        set_read_into_huge_pages(HugePages::kOn);
        MappedFile map(path);
        const_cast<uint8_t*>(map.data())[0] = 'x';
        std::_Exit(2);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
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
        for (size_t i = 0; i < map.size(); i += 4096)
          sum = static_cast<uint8_t>(sum + map.data()[i]);
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
}  // namespace dsinfer::mapped_file_test
