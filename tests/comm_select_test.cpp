// The local backend's collectives and make_comm()'s choice of backend from --comm, DSINFER_COMM
// and the launcher's environment (the MPI backend itself is exercised by golden_mp_*).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "comm/backends.h"
#include "core/error.h"

namespace dsinfer::comm_select_test {
namespace {

// Clears every variable make_comm() reads, and the forced backend, around each test.
class CommSelect : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    set_comm_backend("");
    for (const char* v : {"DSINFER_COMM", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"}) unsetenv(v);
  }
};

TEST_F(CommSelect, LocalCollectivesAreTheIdentity) {
  auto comm = make_local_comm();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  std::vector<float> x = {1, 2, 3}, y(3);
  comm->all_reduce_sum(x.data(), 3);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
  comm->all_gather(x.data(), 3, y.data());
  EXPECT_EQ(y, x);
  std::string bytes("a\0b", 3);
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes, std::string("a\0b", 3));
  comm->barrier();
}

TEST_F(CommSelect, NothingSetMeansOneProcess) {
  EXPECT_STREQ(make_comm()->name(), "local");
  setenv("WORLD_SIZE", "1", 1);
  EXPECT_STREQ(make_comm()->name(), "local");
}

TEST_F(CommSelect, TorchrunWorldChoosesGloo) {
  setenv("WORLD_SIZE", "2", 1);
  try {
    make_comm();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gloo"), std::string::npos) << e.what();
  }
  setenv("WORLD_SIZE", "two", 1);
  EXPECT_THROW(make_comm(), Error);
}

TEST_F(CommSelect, FlagAndVariableForceABackend) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("DSINFER_COMM", "local", 1);
  EXPECT_STREQ(make_comm()->name(), "local");
  setenv("DSINFER_COMM", "nccl", 1);
  try {
    make_comm();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown communication backend 'nccl'"), std::string::npos)
        << e.what();
  }
  set_comm_backend("local");  // the flag wins over the variable
  EXPECT_STREQ(make_comm()->name(), "local");
}

}  // namespace
}  // namespace dsinfer::comm_select_test
