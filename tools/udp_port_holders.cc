#include "udp_port_holders.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace softrnic::tools {
namespace {

// The kernel prints an address as the 32-bit words of its in-memory bytes
// in hex (net/ipv4/udp.c, net/ipv6/datagram.c): reading each word back in
// this host's byte order gives the bytes.
bool ParseAddress(const std::string& hex, bool ipv6, std::string* text, bool* wildcard, bool* loopback) {
  const size_t words = ipv6 ? 4 : 1;
  if (hex.size() != words * 8) return false;
  unsigned char bytes[16] = {};
  for (size_t w = 0; w < words; ++w) {
    char* end = nullptr;
    const std::string part = hex.substr(w * 8, 8);
    const uint32_t v = uint32_t(std::strtoul(part.c_str(), &end, 16));
    if (end != part.c_str() + 8) return false;
    std::memcpy(bytes + w * 4, &v, 4);
  }
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes, buf, sizeof buf);
  *text = buf;
  static const unsigned char kZero[16] = {};
  *wildcard = std::memcmp(bytes, kZero, words * 4) == 0;
  static const unsigned char kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  *loopback = ipv6 ? std::memcmp(bytes, kLoop6, 16) == 0 : bytes[0] == 127;
  return true;
}

void ReadTable(const char* path, bool ipv6, uint16_t port, std::vector<UdpHolder>* out) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    if (!(fields >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode))
      continue;
    const size_t colon = local.find(':');
    if (colon == std::string::npos) continue;
    if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) != port) continue;
    UdpHolder h;
    h.ipv6 = ipv6;
    if (!ParseAddress(local.substr(0, colon), ipv6, &h.address, &h.wildcard, &h.loopback)) continue;
    h.uid = uid_t(std::strtoul(uid.c_str(), nullptr, 10));
    h.inode = std::strtoull(inode.c_str(), nullptr, 10);
    out->push_back(h);
  }
}

// Abstract unix socket names ("@name" in /proc/net/unix) in this netns.
std::set<std::string> AbstractNames() {
  std::set<std::string> names;
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const size_t at = line.find(" @");
    if (at != std::string::npos) names.insert(line.substr(at + 2));
  }
  return names;
}

// socket inode -> pid, for the processes whose fds we may read (our own;
// root: all).
std::map<uint64_t, int> SocketOwners(const std::set<uint64_t>& inodes) {
  std::map<uint64_t, int> owners;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return owners;
  while (const dirent* p = readdir(proc)) {
    const int pid = std::atoi(p->d_name);
    if (pid <= 0) continue;
    const std::string fd_dir = std::string("/proc/") + p->d_name + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (const dirent* f = readdir(fds)) {
      char target[64];
      const ssize_t n = readlinkat(dirfd(fds), f->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      unsigned long long inode = 0;
      if (std::sscanf(target, "socket:[%llu]", &inode) == 1 && inodes.count(inode)) owners[inode] = pid;
    }
    closedir(fds);
  }
  closedir(proc);
  return owners;
}

}  // namespace

std::vector<UdpHolder> UdpPortHolders(uint16_t port) {
  std::vector<UdpHolder> holders;
  ReadTable("/proc/net/udp", false, port, &holders);
  ReadTable("/proc/net/udp6", true, port, &holders);
  if (holders.empty()) return holders;
  const std::set<std::string> names = AbstractNames();
  std::set<uint64_t> inodes;
  for (UdpHolder& h : holders) {
    inodes.insert(h.inode);
    if (h.ipv6) continue;
    const std::string base = "softrnic-udp-" + h.address + ":" + std::to_string(port);
    const auto it = names.lower_bound(base);
    h.softrnic_claim = it != names.end() && (*it == base || it->rfind(base + "#", 0) == 0);
  }
  const std::map<uint64_t, int> owners = SocketOwners(inodes);
  for (UdpHolder& h : holders) {
    const auto it = owners.find(h.inode);
    if (it == owners.end()) continue;
    h.pid = it->second;
    std::ifstream comm("/proc/" + std::to_string(h.pid) + "/comm");
    std::getline(comm, h.comm);
  }
  return holders;
}

std::string DescribeUid(uid_t uid) {
  std::string s = "uid " + std::to_string(uid);
  if (const passwd* pw = getpwuid(uid)) s += std::string(" (") + pw->pw_name + ")";
  return s;
}

}  // namespace softrnic::tools
