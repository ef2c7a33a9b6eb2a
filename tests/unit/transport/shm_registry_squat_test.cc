// Security review L4: another local user pre-creates the name of a victim's
// shared-memory endpoint link (/dev/shm is sticky: the victim cannot
// replace or remove it). The victim must still publish and find its own
// endpoints. Root only (the squatter's files are made as uid 65534).
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/secure_random.h"
#include "transport/shm_registry.h"

namespace softrnic::transport {
namespace {

constexpr uid_t kOtherUid = 65534;

// The names an attacker can compute for an endpoint: the old flat name and
// (after the fix) whatever ShmEndpointPath says.
std::string FlatName(uint64_t netns, uint32_t ip, uint16_t port) {
  char name[128];
  std::snprintf(name, sizeof(name), "/dev/shm/softrnic-ep-%llu-%08x-%u",
                static_cast<unsigned long long>(netns), ip, unsigned{port});
  return name;
}

void PlantAsOtherUser(const std::string& path) {
  std::ofstream(path) << "squatted\n";
  ASSERT_EQ(chown(path.c_str(), kOtherUid, kOtherUid), 0) << path;
}

// Runs `body` in a child as uid/gid `uid` (a non-root victim: root ignores
// the sticky bit, the attack needs an ordinary user); the child's exit status.
template <typename Body>
int RunAsUid(uid_t uid, Body body) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)
      _exit(100);
    prctl(PR_SET_DUMPABLE, 1);  // its own /proc/<pid>/fd stays openable
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ShmRegistrySquat, ForeignFileAtTheNameDoesNotBlockPublishOrLookup) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as two other uids";
  constexpr uid_t kVictimUid = 65533;
  const uint64_t netns = SecureRandom64() | 1;  // names no real process uses
  const uint32_t ip = 0x7f000000u | (SecureRandom32() & 0xffffff);
  const uint16_t port = 4791;
  // The attacker (nobody) holds the flat name the victim used to publish at.
  const std::string flat = FlatName(netns, ip, port);
  PlantAsOtherUser(flat);
  const int rc = RunAsUid(kVictimUid, [&] {
    const int fd = memfd_create("softrnic-test", MFD_CLOEXEC);
    if (fd < 0) return 101;
    const std::string path = ShmPublish(netns, ip, port, fd);
    if (path.empty()) return 1;  // publishing blocked
    uint32_t owner = 0;
    const int found = ShmLookup(netns, ip, port, &owner);
    if (found < 0) return 2;  // own endpoint not found
    struct stat a, b;
    if (fstat(found, &a) != 0 || fstat(fd, &b) != 0 || a.st_ino != b.st_ino || owner != uint32_t(getpid()))
      return 3;  // found something else
    ShmUnpublish(path, fd);
    return 0;
  });
  unlink(flat.c_str());
  std::filesystem::remove_all("/dev/shm/softrnic-ep-" + std::to_string(kVictimUid));
  EXPECT_NE(rc, 1) << "a file of another user at the link name blocked publishing";
  EXPECT_NE(rc, 2) << "the victim's own endpoint was not found";
  EXPECT_NE(rc, 3) << "lookup opened something else than the victim's memfd";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace softrnic::transport
