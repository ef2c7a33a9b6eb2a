// nicd, the host NIC daemon (docs/host-nic.md): one per user, network
// namespace and UDP port, started by the first softrnic process that wants
// the host's addresses (client.h) and gone a while after the last one.
//
// It owns the SO_REUSEPORT group of every host address at the port: it
// opens each member socket itself, keeps a copy of every one, and hands a
// main and a reply socket per address to each process it serves, with a
// lane (the top byte of that process's QPNs). Because it holds a copy of
// every member, a member leaves the group only when nicd closes it, so
// nicd knows the kernel's socket array exactly (bind appends; close moves
// the last member into the hole) and keeps the steering program
// (steering.h) in step with it.
//
// A served process that ends (its control connection reaches EOF: exit,
// crash, kill -9) loses its lane: the program stops steering the lane at
// once, its sockets leave the groups, and the lane is not handed out again
// for kLaneQuarantine, so late packets for the dead QPNs reach no QP of a
// new process.
//
// Root's nicd also serves other users, without handing them a member
// (protocol.h, "forwarded"): it keeps their lanes' members and passes what
// they receive to the process through a unix datagram channel. That costs
// those users a hop through nicd per datagram (and nicd's wake-up); it is
// the price of never letting another uid hold a socket that can re-program
// the group.
//
// Thread-safety: one thread (Run).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "transport/address.h"
#include "transport/host_nic/protocol.h"
#include "transport/host_nic/steering.h"
#include "transport/local_address.h"

namespace softrnic::transport::host_nic {

inline constexpr std::chrono::seconds kLaneQuarantine{10};
// How long nicd stays with no process to serve (a server started right
// after its predecessor exited finds it still there).
inline constexpr std::chrono::seconds kIdleExit{2};
// Run's idle_exit for a nicd that never leaves by itself (--stay).
inline constexpr std::chrono::milliseconds kNeverIdleExit{std::chrono::hours(24 * 365 * 100)};

struct DaemonCounters {
  uint64_t leases = 0, leases_refused = 0, leases_ended = 0;
  uint64_t program_attaches = 0, program_attach_errors = 0;
  uint64_t forwarded_leases = 0;
  uint64_t forwarded_datagrams = 0, forward_drops = 0;
  uint64_t stray_datagrams = 0;  // for no live lane: read by the sink, dropped
};

class NicDaemon {
 public:
  // `listen_fd`: the bound, listening control socket (ownership taken).
  NicDaemon(int listen_fd, uint16_t port);
  ~NicDaemon();
  NicDaemon(const NicDaemon&) = delete;
  NicDaemon& operator=(const NicDaemon&) = delete;

  // Serves until idle for `idle_exit` with no lane in quarantine, or until
  // Stop(). Returns 0, or an errno when the control socket fails.
  int Run(std::chrono::milliseconds idle_exit = kIdleExit);
  // Makes Run return (from a signal handler or another thread).
  void Stop();

  const DaemonCounters& counters() const { return counters_; }

 private:
  struct Member {
    int fd = -1;
    int client = -1;  // the serving connection's fd; -1 for the sink
    bool reply = false;
    int channel = -1;  // a forwarded lease's channel (nicd's end), or -1
  };
  // One host address's group, in the kernel's array order.
  // Its first member is nicd's sink: the program sends it every packet no
  // lane claims (a dead or quarantined lane, an unknown QPN, a datagram too
  // short to steer), which nicd reads and drops. It is made with the group
  // and closed when no process is served there any more, so it stays at
  // index 0 meanwhile.
  struct Group {
    LocalAddress address;
    std::vector<Member> members;
    int claim_fd = -1;  // endpoint_claim.h: keeps per-process binders out
    bool gro = false;
  };
  struct Client {
    uint8_t lane = 0;
    bool forwarded = false;  // another uid: served through channels
    std::set<std::pair<uint16_t, uint16_t>> services;  // (port space, port)
  };

  void Accept();
  void Serve(int conn);  // one message from a served process
  void Lease(int conn, const Hello& hello);
  // Passes what the member `fd` received to its channel.
  void Forward(int fd);
  // Reads and drops what the sink `fd` received.
  void DrainSink(int fd);
  // Makes the group's sink and claims its address (the group is empty).
  bool OpenGroup(Group& g);
  // Ends a group whose only member left is its sink.
  void CloseIfIdle(Group& g);
  void End(int conn);
  // Opens the groups of host addresses that appeared since the last lease.
  void RefreshGroups();
  int FreeLane();
  void Reprogram(Group& g, int without_client = -1);
  void RemoveMember(Group& g, size_t index);

  int listen_fd_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  uint16_t port_;
  std::vector<Group> groups_;
  std::map<int, Client> clients_;  // by connection fd
  std::map<int, int> forwards_;    // a forwarded member's fd -> its channel (nicd's end)
  std::set<int> sinks_;            // the groups' sinks
  // Root's nicd serves every uid (other uids forwarded); any other nicd only
  // its own.
  const bool serves_other_users_;
  std::unique_ptr<uint8_t[]> forward_buf_;  // Forward's receive slots, made at first use
  std::map<uint8_t, std::chrono::steady_clock::time_point> quarantine_;  // lane -> until
  DaemonCounters counters_;
};

}  // namespace softrnic::transport::host_nic
