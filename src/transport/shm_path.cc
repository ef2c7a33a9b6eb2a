#include "transport/shm_path.h"

namespace softrnic::transport {

const char* ShmPathStepName(ShmPathStep step) {
  switch (step) {
    case ShmPathStep::kShared: return "shared";
    case ShmPathStep::kNotIpv4: return "not_ipv4";
    case ShmPathStep::kNoLinkDirectory: return "no_link_directory";
    case ShmPathStep::kNotPublished: return "not_published";
    case ShmPathStep::kBadLink: return "bad_link";
    case ShmPathStep::kOwnerGone: return "owner_gone";
    case ShmPathStep::kOpenRefused: return "open_refused";
    case ShmPathStep::kSegmentRejected: return "segment_rejected";
    case ShmPathStep::kOwnDevice: return "own_device";
    case ShmPathStep::kEndpointNotListed: return "endpoint_not_listed";
    case ShmPathStep::kNoFreeRing: return "no_free_ring";
  }
  return "unknown";
}

const char* ShmPathStepText(ShmPathStep step) {
  switch (step) {
    case ShmPathStep::kShared:
      return "a softrnic device of this user in this network namespace publishes this endpoint, "
             "its control segment validates and it has a free ring";
    case ShmPathStep::kNotIpv4:
      return "an IPv6 GID: same-host peers publish IPv4 endpoints only";
    case ShmPathStep::kNoLinkDirectory:
      return "this user's endpoint-link directory is missing or refused (see `softrnic doctor`)";
    case ShmPathStep::kNotPublished:
      return "no softrnic device of this user in this network namespace publishes this endpoint";
    case ShmPathStep::kBadLink:
      return "the endpoint link does not point at a process's descriptor";
    case ShmPathStep::kOwnerGone:
      return "the endpoint link's process (or its descriptor) no longer exists: a stale link";
    case ShmPathStep::kOpenRefused:
      return "the kernel refused opening the owner's memory (another user, a process that is "
             "not dumpable, or one in a user namespace other than ours or a child of ours, as "
             "a process inside `softrnic run` sees one outside it: start both with `softrnic run`, "
             "whose runs share one)";
    case ShmPathStep::kSegmentRejected:
      return "the owner's control segment failed validation";
    case ShmPathStep::kOwnDevice:
      return "the endpoint is this very device's own";
    case ShmPathStep::kEndpointNotListed:
      return "the endpoint link was replaced while it was opened";
    case ShmPathStep::kNoFreeRing:
      return "the peer's rings are all taken by other live senders";
  }
  return "unknown";
}

}  // namespace softrnic::transport
