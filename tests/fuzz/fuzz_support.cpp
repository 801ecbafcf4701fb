#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dsinfer::fuzz {

std::string read_data_file(const std::string& relative) {
  const std::string path = std::string(DSINFER_TEST_DATA) + "/" + relative;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::abort();
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace dsinfer::fuzz
