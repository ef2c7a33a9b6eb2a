// Shared-memory transports of this test process, each on a loopback
// address and port of its own (shm_path_test.cc, shm_delivery_test.cc,
// shm_registry_test.cc).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "transport/shm_transport.h"
#include "transport/udp_transport.h"

namespace softrnic::transport {

// Addresses of this test process's own: 127.(200 + which).<pid>, each test
// file with `which` values of its own (shm_path_test.cc 0-11,
// shm_delivery_test.cc 30, 31, 37, shm_stall_alarm_test.cc 32, 33,
// shm_registry_test.cc 40-46).
inline std::string TestIp(int which) {
  const pid_t pid = getpid();
  return "127." + std::to_string(200 + which) + "." + std::to_string((pid >> 8) & 0xff) + "." +
         std::to_string(pid & 0xff);
}
inline uint16_t TestPort() { return static_cast<uint16_t>(22000 + (getpid() % 20000)); }

// A shared-memory transport on test address `which`, at TestPort() + port_offset.
inline std::unique_ptr<ShmTransport> MakeShm(int which, uint16_t port_offset = 0) {
  UdpConfig c;
  c.bind_addresses = {TestIp(which)};
  c.port = static_cast<uint16_t>(TestPort() + port_offset);
  std::string error;
  auto udp = CreateUdpTransport(c, &error);
  EXPECT_NE(udp, nullptr) << error;
  if (!udp) return nullptr;
  auto shm = ShmTransport::Create(std::move(udp), false, &error);
  EXPECT_NE(shm, nullptr) << error;
  return shm;
}

}  // namespace softrnic::transport
