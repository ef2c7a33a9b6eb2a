// XRC domains shared between processes (ibv_open_xrcd(3): "the same XRC
// domain ... can be shared by all processes opening the same file"; IBA 9.7).
//
// On hardware an XRC domain is a kernel object: every process that opens the
// same file gets the same domain, and any receive (TGT) QP of the domain
// delivers into any XRC SRQ of it, whichever process created the SRQ. Each
// softrnic process is its own NIC, so the domain of an inode is assembled
// from the processes' per-process domains (xrc.cc) by two things here:
//
// - A registry of SRQ numbers. An XRC SRQ of a domain opened by file is
//   published as a symlink in this user's 0700 link directory (the one of
//   the shared-memory transport, docs/shm.md):
//     /dev/shm/softrnic-ep-<euid>/xrc-<netns>-<dev>-<ino>-<srqn> -> /proc/<pid>/fd/<memfd>
//   Creating the link (symlink(2) fails if the name exists) reserves the
//   number in the domain, so two processes never hand out the same SRQ
//   number for one domain. The target is the owner's mailbox. Same host,
//   same network namespace (in the name) and same euid (the directory is
//   the user's own, /proc/<pid>/fd opens only for the same user, and the
//   mailbox header's uid is checked): another user's domain is never
//   reachable, whatever file it opened.
//
// - A mailbox per device (a sealed memfd of kSlots slots) through which a
//   receive QP of another process asks the SRQ's owner to do what the
//   responder would do with a local SRQ: take a receive WQE (or say the SRQ
//   is empty), scatter one packet's payload into it, complete it to the
//   SRQ's CQ. These are the only three operations; the owner checks the SRQ
//   number, that the SRQ's domain is the forwarder's inode, the WQE's
//   capacity and its lkeys (its own MR table, its own PD) exactly as its
//   responder would, and the forwarder never touches the owner's memory.
//
// Why synchronous calls: the receive QP's responder stays what it is for a
// local SRQ, one packet at a time in PSN order, so RC's rules hold without
// a second implementation: the PSN is consumed and the packet acknowledged
// only once the owner has placed the data (and, for the last packet,
// completed the WQE); an empty SRQ is an RNR NAK with the PSN not consumed;
// a refusal (too short, bad lkey, an SRQ gone) is the NAK the local case
// gives. A call runs under the forwarder's engine lock and waits for the
// owner: the owner's server thread (one per device with a mailbox) wakes on
// a futex in the mailbox, takes the owner's engine lock and serves. Two
// processes forwarding to each other at once cannot deadlock: a waiter
// serves its own mailbox while it waits (it holds its own lock). A request
// the owner has not taken in time (kTakeWait for a first packet, kServeWait
// for a later one: the owner is stopped, or busy) is withdrawn (a CAS on
// the slot state, so it is either served or withdrawn, never both); a first
// packet is then answered as an empty SRQ would be: RNR, retried by the
// requester. An owner that took a request and died is an SRQ gone.
//
// Only SENDs and SENDs with immediate are forwarded: an RDMA WRITE, READ or
// atomic naming an SRQ of another process would need the owner's memory for
// the requester's rkey, and a SEND with Invalidate the owner's memory
// windows; they are Invalid Requests (not built; docs/user-guide.md, XRC).
//
// A packet after the first that the owner does not take within kServeWait
// (stopped, or busy) is dropped without consuming its PSN, as if lost: the
// requester resends it. The last packet's data
// and the WQE's completion are one call, so an ACK always means completed.
//
// Thread-safety: every method REQUIRES the engine lock (mu_), except the
// server thread's loop, which takes it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/types.h"

namespace softrnic::engine {

class Engine;
class Qp;
class Xrcd;

class XrcShare {
 public:
  explicit XrcShare(Engine* engine);
  ~XrcShare();
  XrcShare(const XrcShare&) = delete;
  XrcShare& operator=(const XrcShare&) = delete;

  // Reserves srqn in the domain of `xrcd` (an inode domain) and publishes it
  // as this device's. False if another live process holds the number (pick
  // another). True also when no registry can be had (no /dev/shm): the SRQ
  // is then reachable from this process only.
  bool Reserve(const Xrcd& xrcd, uint32_t srqn);
  // Removes the number (the SRQ is destroyed) and drops what a forwarder
  // left of a message into it.
  void Unpublish(const Xrcd& xrcd, uint32_t srqn);

  // Binds an XRC receive QP of an inode domain to the SRQ numbered srqn of
  // another process of the domain, for the message starting now. False if
  // the registry names no live process of this user for it.
  bool BindRemote(const Qp* qp, uint32_t srqn);

  // One packet's payload into the bound remote SRQ's WQE at the message's
  // offset. With `take` (a message's first packet), a receive WQE is taken
  // first, in the same call (kEmpty: none). With `last` (not null) the WQE
  // also completes, with *last's status, flags and immediate, in the same
  // call: the owner does all of it or (kEmpty, kNotTaken, kGone) none.
  enum class DeliverResult { kOk, kEmpty, kNotTaken, kTooShort, kBadBuffer, kGone };
  DeliverResult Deliver(Qp* qp, bool take, const uint8_t* data, uint32_t len,
                        const Completion* last, bool solicited);
  // The WQE completes in error (the receive QP failed mid-message).
  void Complete(Qp* qp, const Completion& c, bool solicited);

  // Serves the requests waiting in this device's mailbox (the server
  // thread, every engine pass, and a forwarder while it waits). Returns
  // whether it served any.
  bool ServeLocked();

  struct Mailbox;  // xrc_share.cc
  struct Slot;
  struct Request;

 private:
  struct Peer {
    dev_t dev = 0;
    ino_t ino = 0;
    pid_t pid = 0;
    Mailbox* box = nullptr;
    size_t bytes = 0;
  };
  // A receive WQE taken from one of this device's SRQs for a forwarder's
  // message in progress.
  struct Held {
    uint32_t srqn = 0;
    uint64_t wr_id = 0;
    uint32_t num_sge = 0;
    std::vector<Sge> sges;
    uint32_t offset = 0;
  };

  bool EnsureMailbox();
  std::string LinkName(const Xrcd& xrcd, uint32_t srqn) const;
  Peer* Attach(int fd, pid_t pid);
  // One call into a peer's mailbox; the result code (xrc_share.cc).
  uint32_t Call(Peer& peer, const Request& req, const uint8_t* payload,
                std::chrono::milliseconds claim_wait);
  uint32_t Serve(const Request& req, const uint8_t* payload);

  Engine* engine_;
  const uint64_t netns_;
  // This device as a forwarder: (pid << 32) | random, never 0. Also the
  // owner word of the peer slots it holds.
  const uint64_t self_id_;
  // This device's mailbox (null until it publishes an SRQ).
  int box_fd_ = -1;
  Mailbox* box_ = nullptr;
  size_t box_bytes_ = 0;
  dev_t box_dev_ = 0;
  ino_t box_ino_ = 0;
  // The mailbox's doorbell count the last scan saw: a pass with no new
  // request costs one load.
  std::atomic<uint32_t> served_doorbell_{0};
  std::thread server_;
  std::atomic<bool> stop_{false};
  std::vector<std::string> published_;
  std::vector<std::unique_ptr<Peer>> peers_;
  // Receive QP number -> the peer its message in progress goes to.
  std::unordered_map<uint32_t, Peer*> bound_;
  // (forwarder, receive QP number) -> WQE taken for it.
  struct HeldKey {
    uint64_t forwarder;
    uint32_t qpn;
    bool operator==(const HeldKey&) const = default;
  };
  struct HeldHash {
    size_t operator()(const HeldKey& k) const { return k.forwarder * 31 + k.qpn; }
  };
  std::unordered_map<HeldKey, Held, HeldHash> held_;
};

}  // namespace softrnic::engine
