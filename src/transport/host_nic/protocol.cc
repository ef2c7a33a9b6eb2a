// The host NIC daemon's control protocol (protocol.h).
#include "transport/host_nic/protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace softrnic::transport::host_nic {

std::string ControlSocketName(uint32_t euid, uint16_t port) {
  return "softrnic-nicd-" + std::to_string(euid) + "-" + std::to_string(port);
}

int ConnectControlSocket(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int SendMessage(int sock, const void* data, size_t len, const std::vector<int>& fds) {
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<uint8_t> control;
  if (!fds.empty()) {
    control.resize(CMSG_SPACE(fds.size() * sizeof(int)));
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len)) return 0;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? errno : EPROTO;
  }
}

int ReceiveMessage(int sock, void* data, size_t len, int timeout_ms, std::vector<int>* fds,
                   size_t max_fds) {
  pollfd p{sock, POLLIN, 0};
  for (;;) {
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) break;
    if (r == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
  iovec iov{data, len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for the fds we take plus one: more than max_fds is an error.
  std::vector<uint8_t> control(CMSG_SPACE((max_fds + 1) * sizeof(int)));
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  std::vector<int> got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      got.push_back(fd);
    }
  }
  auto close_got = [&] {
    for (int fd : got) close(fd);
  };
  if (n == 0) {
    close_got();
    return ECONNRESET;
  }
  if (static_cast<size_t>(n) != len || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      got.size() > max_fds || (fds == nullptr && !got.empty())) {
    close_got();
    return EPROTO;
  }
  if (fds != nullptr) *fds = std::move(got);
  return 0;
}

int64_t PeerUid(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.uid;
}

}  // namespace softrnic::transport::host_nic
