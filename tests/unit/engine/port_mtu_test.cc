// The port's active MTU from the smallest link MTU (port_mtu.h): the
// largest IB MTU whose packets, with the most header bytes softrnic puts
// around a payload, fit.
#include "engine/port_mtu.h"

#include <gtest/gtest.h>

namespace softrnic::engine {
namespace {

TEST(PortMtu, LargestIbMtuWhosePacketsFitTheLink) {
  EXPECT_EQ(kMaxRoceHeaderBytes, 88u);
  EXPECT_EQ(ActiveMtuForLink(65536), Mtu::k4096);  // loopback
  EXPECT_EQ(ActiveMtuForLink(9000), Mtu::k4096);   // jumbo frames
  EXPECT_EQ(ActiveMtuForLink(4096 + 88), Mtu::k4096);
  EXPECT_EQ(ActiveMtuForLink(4096 + 87), Mtu::k2048);
  EXPECT_EQ(ActiveMtuForLink(2048 + 88), Mtu::k2048);
  EXPECT_EQ(ActiveMtuForLink(2048 + 87), Mtu::k1024);
  EXPECT_EQ(ActiveMtuForLink(1500), Mtu::k1024);   // Ethernet
  EXPECT_EQ(ActiveMtuForLink(1024 + 88), Mtu::k1024);
  EXPECT_EQ(ActiveMtuForLink(1024 + 87), Mtu::k512);
  EXPECT_EQ(ActiveMtuForLink(512 + 88), Mtu::k512);
  EXPECT_EQ(ActiveMtuForLink(512 + 87), Mtu::k256);
  EXPECT_EQ(ActiveMtuForLink(68), Mtu::k256);  // IPv4's smallest: IBA has none below 256
}

TEST(PortMtu, UnknownLinkGivesTheEthernetSafeDefault) {
  EXPECT_EQ(ActiveMtuForLink(0), Mtu::k1024);
}

}  // namespace
}  // namespace softrnic::engine
