#include "transport/endpoint_claim.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace softrnic::transport {
namespace {

// The abstract unix address of `name` in *un: a leading NUL, scoped to the
// network namespace. Returns the address length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* un) {
  *un = sockaddr_un{};
  un->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(un->sun_path) - 1);
  std::memcpy(un->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// Binds the abstract unix name `name` as a listening stream socket: the
// socket, or -1 with errno.
int BindClaimName(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un un;
  const socklen_t len = AbstractAddress(name, &un);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&un), len) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// The uid of the process listening on the abstract name, or -1 if that
// cannot be told (not listening, backlog full).
long ClaimHolderUid(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un un;
  const socklen_t len = AbstractAddress(name, &un);
  long uid = -1;
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  // SO_PEERCRED of a connected stream socket: the listener's credentials,
  // recorded by the kernel at listen() (unix(7)); nobody can forge them.
  if (connect(fd, reinterpret_cast<const sockaddr*>(&un), len) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0)
    uid = long(cred.uid);
  close(fd);
  return uid;
}

}  // namespace

int ClaimEndpoint(const Endpoint& endpoint) {
  // IPv4 as a.b.c.d (the names earlier versions used), IPv6 in brackets.
  const std::string ip = endpoint.gid.IsV4Mapped() ? endpoint.gid.ToString().substr(7)
                                                   : "[" + endpoint.gid.ToString() + "]";
  const std::string base = "softrnic-udp-" + ip + ":" + std::to_string(endpoint.port);
  constexpr int kClaimNames = 8;
  for (int k = 0; k < kClaimNames; ++k) {
    const std::string name = k == 0 ? base : base + "#" + std::to_string(k);
    const int fd = BindClaimName(name);
    if (fd >= 0) return fd;
    if (errno != EADDRINUSE) return -1;
    long holder = -1;
    // A process of ours between its bind() and listen(): look again.
    for (int look = 0; look < 5 && holder < 0; ++look) {
      holder = ClaimHolderUid(name);
      if (holder < 0) usleep(1000);
    }
    if (holder < 0 || uid_t(holder) == geteuid()) {
      errno = EADDRINUSE;  // ours, or cannot tell: the old rule (someone owns it)
      return -1;
    }
  }
  errno = ENOENT;  // every name squatted by other users: go unclaimed
  return -1;
}

}  // namespace softrnic::transport
