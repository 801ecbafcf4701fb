#include "test_support.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dsinfer::test {

namespace fs = std::filesystem;

std::string data_path(const std::string& relative) {
  return std::string(DSINFER_TEST_DATA) + "/" + relative;
}

std::string scratch_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  fs::path dir = fs::path(DSINFER_TEST_TMP) / test / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

CommandResult run_dsinfer(const std::string& args, const std::string& input) {
  std::string dir = scratch_dir("cmd");
  std::string in = dir + "/stdin", out = dir + "/stdout", err = dir + "/stderr";
  write_file(in, input);
  std::string cmd = std::string(DSINFER_BIN) + " " + args + " <" + in + " >" + out + " 2>" + err;
  int status = std::system(cmd.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, digest, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[digest[i] >> 4];
    s += hex[digest[i] & 15];
  }
  return s;
}

}  // namespace dsinfer::test
