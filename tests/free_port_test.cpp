// pick_free_port: below the kernel's ephemeral range, bindable, and for count > 1 a run of
// bindable ports.
#include "parallel/free_port.h"

#include <gtest/gtest.h>

#include <fstream>

namespace dsinfer::free_port_test {
namespace {

TEST(FreePort, BelowTheEphemeralRangeAndBindable) {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  for (int count : {1, 2, 3}) {
    const int port = pick_free_port(count);
    EXPECT_GE(port, 1024);
    EXPECT_LT(port + count - 1, ephemeral_low) << "count " << count;
    for (int i = 0; i < count; ++i) EXPECT_TRUE(can_bind(port + i)) << port + i;
  }
}

}  // namespace
}  // namespace dsinfer::free_port_test
