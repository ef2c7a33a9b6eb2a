// Why packets to one destination do, or do not, go through shared memory:
// the steps the shared-memory transport takes before it uses a peer
// (shm_transport.cc, ShmTransport::OpenPeer), each with the reason it stops
// at. The transport decides with them, and `softrnic devinfo --peer`
// reports them (ShmTransport::ExplainPath), so what the tool says is what
// the transport does.
//
// Thread-safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <string>

namespace softrnic::transport {

// In the order the transport checks them; every step but kShared means UDP.
enum class ShmPathStep : uint8_t {
  kShared,            // a same-host peer device of this user: its ring is used
  kNotIpv4,           // an IPv6 GID: peers publish IPv4 endpoints only
  kNoLinkDirectory,   // this user's endpoint-link directory is missing or refused
  kNotPublished,      // no link for (this network namespace, address, port)
  kBadLink,           // a link whose target is no /proc/<pid>/fd/<n>
  kOwnerGone,         // the link's process or descriptor no longer exists
  kOpenRefused,       // the kernel refused opening the owner's memfd
  kSegmentRejected,   // the owner's control segment failed validation
  kOwnDevice,         // the destination is this very device
  kEndpointNotListed, // the link was replaced while it was opened
  kNoFreeRing,        // the peer's 16 rings all have a live sender
};

// A short identifier ("shared", "not_published", ...) for JSON and tests.
const char* ShmPathStepName(ShmPathStep step);
// One sentence: why this step means shared memory or UDP.
const char* ShmPathStepText(ShmPathStep step);

// What the transport found for one destination.
struct ShmPathVerdict {
  ShmPathStep step = ShmPathStep::kNotPublished;
  uint32_t pid = 0;         // the link's owner, once a link was read
  std::string link;         // the link's path, once looked up
  std::string detail;       // the system's words (errno text, validation failure)
  // Read from the peer's segment once it validated (for kShared): what it
  // exports for direct one-sided operations (engine/same_host/shm_direct.h).
  uint32_t exported_qps = 0;
  uint32_t exported_mrs = 0;
};

}  // namespace softrnic::transport
