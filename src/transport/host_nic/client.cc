// A softrnic process's side of the host NIC (client.h).
#include "transport/host_nic/client.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "transport/host_nic/protocol.h"
#include "transport/host_nic/steering.h"

extern char** environ;

namespace softrnic::transport::host_nic {
namespace {

constexpr int kReplyTimeoutMs = 3000;
constexpr auto kStartTimeout = std::chrono::seconds(3);

// softrnic-nicd in the folder of the shared object holding this code
// (build/lib, or P/lib/softrnic when installed).
std::string DefaultNicdPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&DefaultNicdPath), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) +
         "/softrnic-nicd";
}

// Starts nicd; it detaches itself (its first process exits once the control
// socket listens), so the child reaped here is short-lived. Only softrnic's
// and the sanitizers' variables go along: the application's LD_PRELOAD and
// the rest are not nicd's business.
bool StartNicd(const std::string& path, uint16_t port, std::string* why) {
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    for (const char* prefix : {"SOFTRNIC_", "ASAN_", "UBSAN_", "LSAN_", "TSAN_"})
      if (v.starts_with(prefix)) env_strings.emplace_back(v);
  }
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string port_text = std::to_string(port);
  char arg0[] = "softrnic-nicd";
  char arg1[] = "--port";
  char* argv[] = {arg0, arg1, port_text.data(), nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, path.c_str(), nullptr, &attr, argv, envp.data());
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    *why = "cannot start " + path + ": " + std::strerror(err);
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;  // ECHILD (SIGCHLD ignored): reaped already
}

}  // namespace

std::optional<ClientLease> AcquireLease(uint16_t port, const std::string& nicd_path,
                                        std::string* why) {
  const uint32_t euid = static_cast<uint32_t>(geteuid());
  std::string name = ControlSocketName(euid, port);
  int fd = ConnectControlSocket(name);
  // Root's nicd serves every user (forwarded leases). A user's own nicd
  // would find the port taken by root's group while it runs.
  bool via_root = false;
  if ((fd == -ECONNREFUSED || fd == -ENOENT) && euid != 0) {
    const std::string root_name = ControlSocketName(0, port);
    const int root_fd = ConnectControlSocket(root_name);
    if (root_fd >= 0 && PeerUid(root_fd) == 0) {
      fd = root_fd;
      name = root_name;
      via_root = true;
    } else if (root_fd >= 0) {
      close(root_fd);  // not root's: an impostor, never trusted
    }
  }
  if (fd == -ECONNREFUSED || fd == -ENOENT) {
    const std::string path = nicd_path.empty() ? DefaultNicdPath() : nicd_path;
    if (path.empty() || access(path.c_str(), X_OK) != 0) {
      *why = "no nicd executable at '" + path + "'";
      return std::nullopt;
    }
    if (!StartNicd(path, port, why)) return std::nullopt;
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    while ((fd = ConnectControlSocket(name)) == -ECONNREFUSED && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (fd < 0) {
    *why = "cannot reach nicd: " + std::string(std::strerror(-fd));
    return std::nullopt;
  }
  auto fail = [&](const std::string& reason) {
    *why = reason;
    close(fd);
    return std::nullopt;
  };
  // Another user can hold the abstract name first (names have no
  // permissions): such a "nicd" is never trusted with our traffic.
  if (PeerUid(fd) != static_cast<int64_t>(via_root ? 0 : euid))
    return fail("the nicd socket '" + name + "' belongs to another user");
  Hello hello;
  hello.port = port;
  if (int err = SendMessage(fd, &hello, sizeof(hello)))
    return fail("nicd: " + std::string(std::strerror(err)));
  Lease lease;
  std::vector<int> fds;
  if (int err = ReceiveMessage(fd, &lease, sizeof(lease), kReplyTimeoutMs, &fds,
                               3 * kMaxLeaseEndpoints))
    return fail("nicd: " + std::string(std::strerror(err)));
  auto close_fds = [&] {
    for (int f : fds) close(f);
  };
  // Forwarded exactly when another user's (root's) nicd serves us: our own
  // nicd hands out members, root's never hands another uid one.
  const bool forwarded = via_root;
  size_t wanted = 0;
  for (uint8_t i = 0; i < lease.count && i < kMaxLeaseEndpoints; ++i) {
    const LeaseEndpoint& le = lease.endpoints[i];
    wanted += forwarded ? 1 : 1 + (le.has_reply ? 1 : 0) + (le.has_sink ? 1 : 0);
  }
  if (lease.magic != kLeaseMagic || lease.count > kMaxLeaseEndpoints || fds.size() != wanted ||
      (lease.error == 0 && lease.forwarded != (forwarded ? 1 : 0)) ||
      (lease.error == 0 && (lease.lane < kFirstLane || lease.lane > kLastLane))) {
    close_fds();
    return fail("nicd sent a malformed lease");
  }
  if (lease.error != 0) {
    close_fds();
    return fail("nicd refused: " + std::string(std::strerror(lease.error)));
  }
  ClientLease out;
  out.control_fd = fd;
  out.lane = lease.lane;
  out.forwarded = forwarded;
  size_t next = 0;
  for (uint8_t i = 0; i < lease.count; ++i) {
    const LeaseEndpoint& le = lease.endpoints[i];
    EndpointSockets e;
    Endpoint ep;
    std::memcpy(ep.gid.raw.data(), le.gid, 16);
    ep.port = le.port;
    if (forwarded) {
      // Sent from a socket of ours at the address (any port: RoCE v2 peers
      // answer at the port they are configured with, and the ICRC is framed
      // with the port the datagram leaves from); received through the
      // channel, as sent to the address at the lease's port.
      std::string error;
      if (OpenSocket(LocalAddress{ep.gid, le.scope_id, ""}, 0, true, false, &e.main, &error) != 0) {
        for (size_t k = next; k < fds.size(); ++k) close(fds[k]);
        for (const EndpointSockets& done : out.endpoints) {
          close(done.main.fd);
          close(done.forwarded.fd);
        }
        return fail("host NIC: " + error);
      }
      e.forwarded.fd = fds[next++];
      e.forwarded.endpoint = ep;
      e.forwarded.scope_id = le.scope_id;
      e.forwarded.forwarded = true;
      out.endpoints.push_back(e);
      continue;
    }
    e.main.fd = fds[next++];
    e.main.endpoint = ep;
    e.main.scope_id = le.scope_id;
    e.main.gro = le.gro != 0;
    if (le.has_reply) {
      e.reply = e.main;
      e.reply.fd = fds[next++];
      e.reply.reply = true;
    }
    if (le.has_sink) e.sink_fd = fds[next++];
    out.endpoints.push_back(e);
  }
  return out;
}

int RequestService(int control_fd, uint16_t port_space, uint16_t port, bool add) {
  Service s;
  s.op = static_cast<uint16_t>(add ? ServiceOp::kAdd : ServiceOp::kRemove);
  s.port_space = port_space;
  s.port = port;
  if (int err = SendMessage(control_fd, &s, sizeof(s))) return err;
  ServiceReply reply;
  if (int err = ReceiveMessage(control_fd, &reply, sizeof(reply), kReplyTimeoutMs)) return err;
  if (reply.magic != kServiceMagic) return EPROTO;
  return reply.error;
}

}  // namespace softrnic::transport::host_nic
