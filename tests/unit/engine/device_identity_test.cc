// The device's identity (device_identity.h): the vendor id, and node GUIDs
// that stay the same from one process to the next on one host and network
// namespace (issue 15) but differ between hosts, namespaces and devices.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "engine/device_identity.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// The GUID's bytes in wire order.
std::string Hex(uint64_t guid_network_order) {
  unsigned char b[8];
  std::memcpy(b, &guid_network_order, 8);
  std::string s;
  char part[3];
  for (unsigned char c : b) {
    std::snprintf(part, sizeof(part), "%02x", c);
    s += part;
  }
  return s;
}

HostIdentity Example() {
  HostIdentity h;
  h.machine_id = "0123456789abcdef0123456789abcdef";
  h.netns_dev = 4;
  h.netns_ino = 4026531840u;
  return h;
}

// Known answers computed independently with Python's hmac module:
//   msg = b"softrnic node GUID v1" + pack(">Q", len(name)) + name
//         + pack(">Q", dev) + pack(">Q", ino)
//   g = hmac.new(machine_id, msg, sha256).digest()[:8]; g[0] = g[0] | 2 & ~1
TEST(DeviceIdentityTest, NodeGuidIsTheKeyedHashOfHostNamespaceAndName) {
  EXPECT_EQ(Hex(NodeGuid(Example(), "softrnic0")), "da4ff4649532690e");
  HostIdentity no_key = Example();
  no_key.machine_id.clear();
  EXPECT_EQ(Hex(NodeGuid(no_key, "softrnic0")), "7660d95a3982214a");
}

TEST(DeviceIdentityTest, EveryInputChangesTheGuidAndTheShapeIsEui64Local) {
  std::set<uint64_t> seen;
  for (int variant = 0; variant < 64; ++variant) {
    HostIdentity h = Example();
    h.machine_id[0] = static_cast<char>('a' + (variant & 3));
    h.netns_ino += (variant >> 2) & 3;
    h.netns_dev += (variant >> 4) & 1;
    const std::string name = (variant >> 5) ? "softrnic1" : "softrnic0";
    const uint64_t guid = NodeGuid(h, name);
    unsigned char first;
    std::memcpy(&first, &guid, 1);  // the first byte on the wire
    EXPECT_EQ(first & 0x02, 0x02) << "locally administered, variant " << variant;
    EXPECT_EQ(first & 0x01, 0x00) << "not a group address, variant " << variant;
    seen.insert(guid);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(DeviceIdentityTest, CurrentHostIdentityIsTheMachineAndTheNetworkNamespace) {
  const HostIdentity a = CurrentHostIdentity();
  const HostIdentity b = CurrentHostIdentity();
  EXPECT_EQ(a.machine_id, b.machine_id);
  struct stat st {};
  ASSERT_EQ(stat("/proc/self/ns/net", &st), 0);
  EXPECT_EQ(a.netns_ino, uint64_t(st.st_ino));
  EXPECT_EQ(a.netns_dev, uint64_t(st.st_dev));
  std::ifstream machine_id("/etc/machine-id");
  std::string line;
  if (machine_id && std::getline(machine_id, line) && !line.empty()) {
    EXPECT_EQ(a.machine_id, line);
  } else {
    std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
    ASSERT_TRUE(std::getline(boot_id, line));
    EXPECT_EQ(a.machine_id, line);
  }
}

// Two devices of one process on different addresses (the old GUID came from
// the last GID, so they differed) report one GUID, softrnic's vendor id.
TEST(DeviceIdentityTest, DevicesReportTheHostGuidAndTheVendorId) {
  auto a = MakeDevice(0);
  auto b = MakeDevice(1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t expected = NodeGuid(CurrentHostIdentity(), kDeviceName);
  EXPECT_EQ(a->attr().node_guid, expected);
  EXPECT_EQ(b->attr().node_guid, expected);
  EXPECT_EQ(a->attr().sys_image_guid, expected);
  EXPECT_EQ(a->attr().vendor_id, 0x025352u);
  EXPECT_NE(a->attr().vendor_part_id, 0u);
}

// Another process (a forked child opening its own device, on its own
// address) reports the same GUID.
TEST(DeviceIdentityTest, AnotherProcessReportsTheSameGuid) {
  const std::string child_addr = TestAddress(3);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    EngineConfig config = TestConfig(3);
    config.udp.bind_addresses = {child_addr};
    std::string error;
    auto dev = Device::Create(config, &error);
    const uint64_t guid = dev ? dev->attr().node_guid : 0;
    const bool ok = dev && write(fds[1], &guid, sizeof(guid)) == ssize_t(sizeof(guid));
    dev.reset();  // its files and sockets go before the exit
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  uint64_t child_guid = 0;
  const ssize_t n = read(fds[0], &child_guid, sizeof(child_guid));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(n, ssize_t(sizeof(child_guid)));
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(child_guid, dev->attr().node_guid);
  EXPECT_NE(child_guid, 0u);
}

}  // namespace
}  // namespace softrnic::engine::testing
