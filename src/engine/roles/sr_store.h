// What the selective-retransmission reorder store remembers about packets
// it has already run (selective.cc), for the responder's duplicate check
// (responder.cc). Issue 14, M1.
//
// A forged packet kept for PSN q runs as soon as the real q-1 arrives in
// order, before the real q, which then arrives as a duplicate: too late to
// keep the forged bytes out of memory, but not to notice. Each packet run
// from the store leaves a digest of its request bytes; a duplicate of that
// PSN whose digest differs proves one of the two was not the requester's.
#pragma once

#include <cstdint>

#include "engine/qp.h"
#include "wire/packet.h"

namespace softrnic::engine {

// Digest of what a resend repeats exactly: the packet without BTH byte 4
// (FECN/BECN), the AckReq bit and the ICRC.
uint64_t SrRequestDigest(const uint8_t* packet, size_t length);

// The slot of `psn` now belongs to a packet run in order (not from the
// store): forget what an older run left there.
inline void SrForgetRun(Qp* qp, uint32_t psn) {
  if (!qp->sr_store.ran_from_store.empty())
    qp->sr_store.ran_from_store[psn % kSrWindow].valid = false;
}

// True when `pkt`, a duplicate, is for a PSN that ran from the store with
// different bytes.
inline bool SrRunCopyDiffers(const Qp& qp, const wire::Packet& pkt) {
  if (qp.sr_store.ran_from_store.empty()) return false;
  const SrRun& r = qp.sr_store.ran_from_store[pkt.bth.psn() % kSrWindow];
  return r.valid && r.psn == pkt.bth.psn() && r.digest != SrRequestDigest(pkt.data, pkt.length);
}

}  // namespace softrnic::engine
