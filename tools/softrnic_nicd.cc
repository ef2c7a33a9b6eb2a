// softrnic-nicd: the host NIC daemon (docs/host-nic.md). Started by the
// first softrnic process of a user that wants the host's addresses
// (src/transport/host_nic/client.cc), never by hand in normal use:
//
//   softrnic-nicd --port 4791 [--foreground] [--stay]
//
// --stay: never leave for want of processes (root's nicd run as a service,
// so that it owns the port before any user's: docs/host-nic.md, "Users").
//
// It binds its control socket, then detaches (setsid; the first process
// exits, so the starting process reaps it at once) and serves until no
// process has used it for a while (transport/host_nic/daemon.h). A second
// nicd for the same user, namespace and port finds the name taken and
// exits 0: the first one serves.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/host_nic/daemon.h"
#include "transport/host_nic/protocol.h"

namespace {

softrnic::transport::host_nic::NicDaemon* g_daemon = nullptr;

void OnTerminate(int) {
  if (g_daemon != nullptr) g_daemon->Stop();
}

int Usage() {
  std::fprintf(stderr, "usage: softrnic-nicd --port N [--foreground] [--stay]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long port = -1;
  bool foreground = false;
  bool stay = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      char* end = nullptr;
      port = std::strtol(argv[++i], &end, 10);
      if (*end != '\0') return Usage();
    } else if (a == "--foreground") {
      foreground = true;
    } else if (a == "--stay") {
      stay = true;
    } else {
      return Usage();
    }
  }
  if (port <= 0 || port > 65535) return Usage();
  // Nothing of the starting application's: its descriptors stay with it.
  close_range(3, ~0U, 0);

  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1;
  const std::string name = softrnic::transport::host_nic::ControlSocketName(
      static_cast<uint32_t>(geteuid()), static_cast<uint16_t>(port));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0)
    return errno == EADDRINUSE ? 0 : 1;  // another nicd serves
  if (!foreground) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) _exit(0);  // the starter reaps this one; the daemon lives on
    setsid();
    if (chdir("/") != 0) return 1;
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (null > 2) close(null);
    }
  }
  // Listening only now, in the process that serves: a connection's
  // SO_PEERCRED names the listener, so clients and `softrnic setup --remove`
  // see the daemon's pid (a starter that connects in between is refused
  // and retries: client.cc).
  if (listen(fd, 128) != 0) return 1;
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  softrnic::transport::host_nic::NicDaemon daemon(fd, static_cast<uint16_t>(port));
  g_daemon = &daemon;
  std::signal(SIGTERM, OnTerminate);
  std::signal(SIGINT, OnTerminate);
  const int rc = stay ? daemon.Run(softrnic::transport::host_nic::kNeverIdleExit) : daemon.Run();
  g_daemon = nullptr;
  return rc == 0 ? 0 : 1;
}
