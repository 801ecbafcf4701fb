// Input files a careless or hostile user gives: a FIFO nobody writes (which used to block in
// open), a device that never ends (/dev/zero), a directory, a file over the size cap, a pipe
// that goes on too long. Each is one Error naming the path, at once, with bounded memory; for the
// shards, the config and the tokenizer files as well as the generic reader.
#include "core/read_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::read_file_test {
namespace {

std::string error_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
  } catch (const Error& e) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ReadInputFile, RefusesWhatIsNotAFileItCanRead) {
  const std::string dir = test::scratch_dir("inputs");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_CONTAINS(error_of([&] { read_input_file(fifo, "config", 1 << 20); }),
                  "config " + fifo + " is not a regular file (a pipe)");
  EXPECT_CONTAINS(error_of([&] { read_input_file("/dev/zero", "--input-file", 1 << 20, true); }),
                  "--input-file /dev/zero is not a regular file or a pipe (a device)");
  EXPECT_CONTAINS(error_of([&] { read_input_file(dir, "config", 1 << 20); }), "is a directory");
  EXPECT_CONTAINS(error_of([&] { read_input_file(dir + "/missing", "config", 1 << 20); }),
                  "cannot open it");
  const std::string big = dir + "/big";
  test::write_file(big, std::string(5000, 'x'));
  EXPECT_CONTAINS(error_of([&] { read_input_file(big, "config", 4096); }),
                  "is 5000 bytes, more than the 4096");
  EXPECT_EQ(read_input_file(big, "config", 5000).size(), 5000u);
}

// /dev/null is an empty input (what `dsinfer run` gives ranks other than 0 as stdin), not a device
TEST(ReadInputFile, DevNullIsEmpty) {
  EXPECT_EQ(read_input_file("/dev/null", "--input-file", 1 << 20, true), "");
  EXPECT_EQ(read_input_file("/dev/null", "config", 1 << 20), "");
}

TEST(ReadInputFile, ReadsAPipeToItsEndWithinTheCap) {
  signal(SIGPIPE, SIG_IGN);
  const std::string fifo = test::scratch_dir("pipe") + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto writer = [&](size_t bytes) {
    return std::thread([&, bytes] {
      FILE* f = std::fopen(fifo.c_str(), "w");  // waits for the reader
      if (!f) return;
      const std::string chunk(1000, 'y');
      for (size_t done = 0; done < bytes; done += chunk.size())
        std::fwrite(chunk.data(), 1, chunk.size(), f);
      std::fclose(f);
    });
  };
  // the reader opens first (non-blocking), so the writer may start after it
  std::thread w = writer(3000);
  std::string got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    got = read_input_file(fifo, "--input-file", 1 << 20, true);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  w.join();
  EXPECT_EQ(got.size(), 3000u);
  std::thread endless = writer(20000);
  std::string message;
  for (int i = 0; i < 100 && message.empty(); ++i) {
    try {
      if (read_input_file(fifo, "--input-file", 8000, true).empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_CONTAINS(message, "holds more than the 8000 bytes");
  endless.join();  // its writes past our close fail with EPIPE (SIGPIPE is ignored here)
}

TEST(ReadInputFile, AFifoAsShardConfigOrTokenizerFailsAtOnce) {
  const std::string dir = test::scratch_dir("fifos");
  for (const char* name : {"model0-mp1.safetensors", "config.json", "tokenizer.json"})
    ASSERT_EQ(mkfifo((dir + "/" + name).c_str(), 0600), 0) << name;
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(dir + "/model0-mp1.safetensors"); }),
                  "is not a regular file");
  EXPECT_CONTAINS(error_of([&] { load_config(dir + "/config.json"); }),
                  "config " + dir + "/config.json is not a regular file");
  EXPECT_CONTAINS(error_of([&] { Tokenizer::load(dir); }), "tokenizer.json is not a regular file");
}

TEST(ReadInputFile, AnUnreadableTokenizerConfigIsAnErrorNotAMissingTemplate) {
  const std::string dir = test::scratch_dir("tok");
  test::write_file(dir + "/tokenizer.json",
                   test::read_file(test::data_path("tokenizer/deepseek-v3/tokenizer.json")));
  ASSERT_EQ(mkdir((dir + "/tokenizer_config.json").c_str(), 0700), 0);  // there, but not a file
  EXPECT_CONTAINS(error_of([&] { Tokenizer::load(dir); }), "tokenizer_config.json is a directory");
}

}  // namespace
}  // namespace dsinfer::read_file_test
