// The per-user rdma_cm host registry (src/rdmacm/host_registry.h) against
// what another local user can plant: FIFOs, symlinks, foreign directories
// and entries (security review H3), and its parser against junk bytes.
// The end-to-end attacks with a second uid and rping are in
// tests/integration/security/test_cm_registry.sh.
#include "rdmacm/host_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "common/secure_random.h"

namespace softrnic::rdmacm {
namespace {

constexpr uid_t kOtherUid = 65534;  // nobody
constexpr const char* kNetns = "4026531840";
constexpr int kPsTcp = 0x106;
const uint32_t kIp = 0x7f0a0b0c;  // 127.10.11.12

class HostRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-hostreg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/registry";
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  std::string EntryPath(uint16_t port) const {
    return dir_ + "/" + kNetns + "-106-" + std::to_string(port);
  }
  static void WriteFile(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string base_;
  std::string dir_;
};

TEST(ParseRegistryEntryTest, AcceptsWhatAddWrites) {
  const auto e = ParseRegistryEntry(FormatRegistryEntry({4242, kIp}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pid, 4242);
  EXPECT_EQ(e->ip, kIp);
}

TEST(ParseRegistryEntryTest, RejectsTruncatedOversizedAndJunk) {
  for (const char* bad : {"", "4242", "4242 ", " 127.0.0.1", "4242 127.0.0", "0 127.0.0.1",
                          "-5 127.0.0.1", "42x 127.0.0.1", "4242 127.0.0.1 extra",
                          "4242  127.0.0.1", "99999999999999999999999 127.0.0.1",
                          "4242 127.0.0.1\n\n", "4242 ::1"}) {
    EXPECT_FALSE(ParseRegistryEntry(bad).has_value()) << "accepted \"" << bad << "\"";
  }
  EXPECT_FALSE(ParseRegistryEntry(std::string(4096, '1')).has_value());
  EXPECT_FALSE(ParseRegistryEntry(std::string("4242 127.0.0.1\0junk", 19)).has_value());
}

// Fuzz-style: random bytes, and random cuts and flips of a valid entry,
// never crash (ASan/UBSan in CI) and only well-formed input is accepted.
TEST(ParseRegistryEntryTest, SurvivesRandomBytes) {
  const std::string valid = FormatRegistryEntry({31337, kIp});
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    if (i % 2 == 0) {
      s.resize(SecureRandomBelow(200));
      SecureRandomFill(s.data(), s.size());
    } else {
      s = valid.substr(0, SecureRandomBelow(uint32_t(valid.size()) + 1));
      if (!s.empty()) s[SecureRandomBelow(uint32_t(s.size()))] = char(SecureRandom32());
    }
    const auto e = ParseRegistryEntry(s);
    if (e) {
      EXPECT_GT(e->pid, 0);
      EXPECT_LE(s.size(), 64u);
    }
  }
}

TEST_F(HostRegistryTest, AddLookupRemove) {
  HostRegistry reg(dir_);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value());  // no directory yet
  ASSERT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0);
  struct stat st;
  ASSERT_EQ(lstat(dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "other users must not read or write the registry";
  ASSERT_EQ(lstat(EntryPath(7471).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const auto e = reg.Lookup(kNetns, kPsTcp, 7471);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pid, long(getpid()));
  EXPECT_EQ(e->ip, kIp);
  // Nothing but the entry is left behind (no temporaries).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
  reg.Remove(kNetns, kPsTcp, 7471);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value());
}

TEST_F(HostRegistryTest, SecondLiveListenerGetsAddrInUseAndDeadOneIsReplaced) {
  HostRegistry reg(dir_);
  ASSERT_EQ(reg.Add(kNetns, kPsTcp, 1, kIp), 0);
  // A live process of ours (the parent of this test, or init for root).
  WriteFile(EntryPath(7471), FormatRegistryEntry({long(getppid()), kIp + 1}));
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), EADDRINUSE);
  // A dead pid: a child that has exited and been reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  WriteFile(EntryPath(7472), FormatRegistryEntry({long(child), kIp + 1}));
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7472, kIp), 0);
  EXPECT_EQ(reg.Lookup(kNetns, kPsTcp, 7472)->pid, long(getpid()));
}

// A FIFO (or anything not a regular file) in the registry never blocks:
// every operation returns within the deadline and the FIFO is removed.
TEST_F(HostRegistryTest, FifoDoesNotHang) {
  HostRegistry reg(dir_);
  ASSERT_EQ(reg.Add(kNetns, kPsTcp, 1, kIp), 0);
  ASSERT_EQ(mkfifo((dir_ + "/junk").c_str(), 0666), 0);
  ASSERT_EQ(mkfifo(EntryPath(7471).c_str(), 0666), 0);
  auto done = std::async(std::launch::async, [&] {
    const bool found = reg.Lookup(kNetns, kPsTcp, 7471).has_value();
    return std::make_pair(found, reg.Add(kNetns, kPsTcp, 7473, kIp));
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "a FIFO in the registry blocked Lookup/Add";
  const auto [found, rc] = done.get();
  EXPECT_FALSE(found);
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir_ + "/junk")));
}

// A symlink at an entry name is neither followed for reading nor written
// through: the target keeps its bytes.
TEST_F(HostRegistryTest, SymlinkEntryIsNotFollowed) {
  HostRegistry reg(dir_);
  ASSERT_EQ(reg.Add(kNetns, kPsTcp, 1, kIp), 0);
  const std::string canary = base_ + "/canary";
  WriteFile(canary, FormatRegistryEntry({long(getppid()), kIp + 1}));
  ASSERT_EQ(symlink(canary.c_str(), EntryPath(7471).c_str()), 0);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value()) << "read through a symlink";
  ASSERT_EQ(symlink(canary.c_str(), EntryPath(7471).c_str()), 0);
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0);
  EXPECT_EQ(ReadFile(canary), FormatRegistryEntry({long(getppid()), kIp + 1}));
  EXPECT_EQ(reg.Lookup(kNetns, kPsTcp, 7471)->pid, long(getpid()));
}

// The registry path being a symlink to a directory (even our own) is refused.
TEST_F(HostRegistryTest, SymlinkedDirectoryIsRefused) {
  const std::string real = base_ + "/elsewhere";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), dir_.c_str()), 0);
  HostRegistry reg(dir_);
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0);
  EXPECT_TRUE(std::filesystem::is_empty(real)) << "published through a symlinked directory";
  // Root moved the link aside and made a real directory; others publish nothing.
  EXPECT_EQ(reg.Lookup(kNetns, kPsTcp, 7471).has_value(), geteuid() == 0);
  EXPECT_FALSE(std::filesystem::is_symlink(dir_) && geteuid() == 0);
}

TEST_F(HostRegistryTest, GroupOrWorldAccessibleDirectoryIsRefused) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);  // as the old code made it
  WriteFile(EntryPath(7471), FormatRegistryEntry({long(getppid()), kIp + 1}));
  HostRegistry reg(dir_);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value());
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0) << "a squatted port in a shared directory blocked listen";
}

// Another user pre-created the directory (and filled it): it is not used,
// rdma_listen's Add still succeeds, and its entries redirect nothing. Root
// moves it aside and publishes in a directory of its own.
TEST_F(HostRegistryTest, DirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create files as another uid";
  ASSERT_EQ(mkdir(dir_.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  WriteFile(EntryPath(7471), FormatRegistryEntry({1, 0x7f000063}));
  ASSERT_EQ(chown(EntryPath(7471).c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(chown(dir_.c_str(), kOtherUid, kOtherUid), 0);
  HostRegistry reg(dir_);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value()) << "followed another user's entry";
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0);
  struct stat st;
  ASSERT_EQ(lstat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "published in another user's directory";
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto e = reg.Lookup(kNetns, kPsTcp, 7471);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pid, long(getpid()));
  // The attacker's directory still exists, moved aside, with its entry.
  int aside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(base_))
    if (entry.path().filename().string().starts_with("registry.refused.")) ++aside;
  EXPECT_EQ(aside, 1);
}

// A non-root user cannot move another user's directory out of sticky
// /dev/shm: it uses its fallback (its /run/user/<uid>/softrnic-cm in the
// product) and its listeners are still found.
TEST_F(HostRegistryTest, NonRootUserFallsBackPastAForeignDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as two other uids";
  constexpr uid_t kVictimUid = 65533;
  ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir_.c_str(), 0777), 0);
  ASSERT_EQ(chown(dir_.c_str(), kOtherUid, kOtherUid), 0);
  const std::string runtime = base_ + "/run-user";
  ASSERT_EQ(mkdir(runtime.c_str(), 0700), 0);
  ASSERT_EQ(chown(runtime.c_str(), kVictimUid, kVictimUid), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kVictimUid, kVictimUid, kVictimUid) != 0 ||
        setresuid(kVictimUid, kVictimUid, kVictimUid) != 0)
      _exit(100);
    HostRegistry reg(dir_, runtime + "/softrnic-cm");
    if (reg.Add(kNetns, kPsTcp, 7471, kIp) != 0) _exit(1);
    const auto e = reg.Lookup(kNetns, kPsTcp, 7471);
    if (!e || e->pid != long(getpid())) _exit(2);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: Add failed, 2: own listener not found";
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "published in the other user's directory";
}

// An entry owned by another uid (only possible if it was hard-linked or the
// directory was shared) is not trusted.
TEST_F(HostRegistryTest, EntryOfAnotherUserIsIgnored) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create files as another uid";
  HostRegistry reg(dir_);
  ASSERT_EQ(reg.Add(kNetns, kPsTcp, 1, kIp), 0);
  WriteFile(EntryPath(7471), FormatRegistryEntry({1, 0x7f000063}));
  ASSERT_EQ(chown(EntryPath(7471).c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_FALSE(reg.Lookup(kNetns, kPsTcp, 7471).has_value());
  EXPECT_EQ(reg.Add(kNetns, kPsTcp, 7471, kIp), 0);
}

}  // namespace
}  // namespace softrnic::rdmacm
