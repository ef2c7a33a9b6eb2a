// `softrnic stat`'s reader (engine/observe/stats_publisher.h: ParseStatsFile,
// ReadStatsDir) against files another local user can plant in the shared
// stats directory (security review L2), and the parser against junk bytes.
// End to end with a second uid: tests/integration/security/test_stats_files.sh.
#include <fcntl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "common/secure_random.h"
#include "engine/observe/stats_publisher.h"

namespace softrnic::engine {
namespace {

std::string ValidFile(int pid, const std::string& comm) {
  return "softrnic-stats 1\npid " + std::to_string(pid) + "\ncomm " + comm +
         "\ndevice softrnic0\ngid 0 ::ffff:127.1.2.3\ntime_ns 1\nseq 2\nrx_packets 7\n";
}

std::string OwnComm() {
  std::ifstream in("/proc/self/comm");
  std::string c;
  std::getline(in, c);
  return c;
}

TEST(StatsFileParseTest, ValidFile) {
  StatsFile f;
  ASSERT_TRUE(ParseStatsFile(ValidFile(42, "app"), &f));
  EXPECT_EQ(f.pid, 42);
  EXPECT_EQ(f.comm, "app");
  EXPECT_EQ(f.Get("rx_packets"), 7u);
  ASSERT_EQ(f.gids.size(), 1u);
}

TEST(StatsFileParseTest, TruncatedOversizedAndJunk) {
  StatsFile f;
  EXPECT_FALSE(ParseStatsFile("", &f));
  EXPECT_FALSE(ParseStatsFile("softrnic-stats", &f));
  EXPECT_FALSE(ParseStatsFile("softrnic-stats 1\npid", &f));
  StatsFile g;
  EXPECT_FALSE(ParseStatsFile("softrnic-stats 1\npid 99999999999999999999\n", &g)) << g.pid;
  StatsFile h;
  EXPECT_FALSE(ParseStatsFile("softrnic-stats 1\npid -3\n", &h));
  StatsFile k;
  ASSERT_TRUE(ParseStatsFile("softrnic-stats 1\npid 5\nx 18446744073709551616\ny 12abc\n", &k));
  EXPECT_EQ(k.Get("x"), 0u) << "overflowing counter";
  EXPECT_EQ(k.Get("y"), 0u);
  // Embedded NULs and escape bytes are kept as bytes, not cut or crashed on.
  StatsFile e;
  static const char kBytes[] = "softrnic-stats 1\npid 5\ncomm a\0\x1b[31m\n";
  ASSERT_TRUE(ParseStatsFile(std::string(kBytes, sizeof kBytes - 1), &e));
  EXPECT_EQ(e.comm.size(), 7u);
}

// Version 2: the "qps" line and one "qp" line per QP listed.
TEST(StatsFileParseTest, QpLines) {
  StatsFile f;
  ASSERT_TRUE(ParseStatsFile("softrnic-stats 2\npid 9\nrx_packets 7\nqps 3\n"
                             "qp 17 rc RTS ::ffff:127.0.0.2 18 tx_packets=5 tx_bytes=100 new_one=2\n"
                             "qp 19 ud RTS - - rx_packets=1\n",
                             &f));
  EXPECT_TRUE(f.has_qps);
  EXPECT_EQ(f.live_qps, 3u);
  EXPECT_EQ(f.Get("rx_packets"), 7u);
  EXPECT_EQ(f.Get("qp"), 0u) << "qp lines are not device counters";
  EXPECT_EQ(f.counters.size(), 1u);
  ASSERT_EQ(f.qps.size(), 2u);
  EXPECT_EQ(f.qps[0].qpn, 17u);
  EXPECT_EQ(f.qps[0].type, "rc");
  EXPECT_EQ(f.qps[0].state, "RTS");
  EXPECT_EQ(f.qps[0].peer_gid, "::ffff:127.0.0.2");
  EXPECT_EQ(f.qps[0].peer_qpn, "18");
  EXPECT_EQ(f.qps[0].Get("tx_bytes"), 100u);
  EXPECT_EQ(f.qps[0].Get("new_one"), 2u) << "a counter this reader does not know is kept";
  EXPECT_EQ(f.qps[1].peer_gid, "-");
  EXPECT_EQ(f.qps[1].Get("rx_packets"), 1u);
}

TEST(StatsFileParseTest, BadQpLinesAreSkipped) {
  StatsFile f;
  ASSERT_TRUE(ParseStatsFile("softrnic-stats 2\npid 9\n"
                             "qp\nqp x rc RTS - - a=1\nqp 16777216 rc RTS - - a=1\n"
                             "qp 5 rc RTS -\nqp 6 rc RTS - - =3 b c=x d=4\n",
                             &f));
  ASSERT_EQ(f.qps.size(), 1u);
  EXPECT_EQ(f.qps[0].qpn, 6u);
  ASSERT_EQ(f.qps[0].counters.size(), 2u);
  EXPECT_EQ(f.qps[0].Get("c"), 0u) << "a value that does not parse counts as 0";
  EXPECT_EQ(f.qps[0].Get("d"), 4u);
  StatsFile v1;
  ASSERT_TRUE(ParseStatsFile(ValidFile(42, "app"), &v1));
  EXPECT_FALSE(v1.has_qps);
  EXPECT_TRUE(v1.qps.empty());
}

// Fuzz-style: random bytes and random corruptions of a valid file never
// crash (ASan/UBSan in CI) and never yield a pid <= 0.
TEST(StatsFileParseTest, SurvivesRandomBytes) {
  const std::string valid = ValidFile(1234, "ib_write_bw");
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    if (i % 3 == 0) {
      s.resize(SecureRandomBelow(512));
      SecureRandomFill(s.data(), s.size());
    } else {
      s = valid.substr(0, SecureRandomBelow(uint32_t(valid.size()) + 1));
      for (int flips = 0; flips < 3 && !s.empty(); ++flips) s[SecureRandomBelow(uint32_t(s.size()))] = char(SecureRandom32());
    }
    StatsFile f;
    if (ParseStatsFile(s, &f)) {
      EXPECT_GT(f.pid, 0);
    }
  }
}

class StatsDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-statsdir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// A FIFO, a symlink to a valid file and a sparse 4 GiB file are skipped,
// promptly; the genuine file next to them is read.
TEST_F(StatsDirTest, SkipsFifoSymlinkAndHugeFile) {
  std::ofstream(dir_ + "/softrnic-1.stats") << ValidFile(getpid(), OwnComm());
  ASSERT_EQ(mkfifo((dir_ + "/softrnic-fifo.stats").c_str(), 0666), 0);
  ASSERT_EQ(symlink((dir_ + "/softrnic-1.stats").c_str(), (dir_ + "/softrnic-link.stats").c_str()), 0);
  const int fd = open((dir_ + "/softrnic-huge.stats").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string head = ValidFile(getpid(), OwnComm());
  ASSERT_EQ(write(fd, head.data(), head.size()), ssize_t(head.size()));
  ASSERT_EQ(ftruncate(fd, off_t(4) << 30), 0);
  close(fd);
  auto result = std::async(std::launch::async, [&] { return ReadStatsDir(dir_); });
  ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "a FIFO or a huge file blocked ReadStatsDir";
  const std::vector<StatsFile> files = result.get();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, dir_ + "/softrnic-1.stats");
  EXPECT_EQ(files[0].owner, geteuid());
}

// A file naming our (live) pid but owned by another uid is a forgery.
TEST_F(StatsDirTest, FileNotOwnedByThePidsUserIsIgnored) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create files as another uid";
  const std::string path = dir_ + "/softrnic-forged.stats";
  std::ofstream(path) << ValidFile(getpid(), OwnComm());
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  EXPECT_TRUE(ReadStatsDir(dir_).empty());
}

// A pid that no process has now: a child that has exited and been reaped
// (the kernel hands pids out in increasing order, so it is not reused
// within this test unless pid_max wraps; checked with kill()).
int DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return int(child);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// SweepStaleStatsFiles removes our own files of dead pids (plain, numbered,
// renamed and half-written temporaries), keeps files of live pids, files
// whose name has no pid, symlinks, and (as root) another user's file.
TEST_F(StatsDirTest, SweepRemovesOurFilesOfDeadPidsOnly) {
  const int dead = DeadPid();
  ASSERT_NE(kill(dead, 0), 0);
  const std::string d = std::to_string(dead), live = std::to_string(getpid());
  const std::vector<std::string> stale = {
      "softrnic-" + d + ".stats", "softrnic-" + d + "-2.stats",
      "softrnic-" + d + "-0123456789abcdef.stats",
      "softrnic-" + d + ".stats.tmp.fedcba9876543210"};
  const std::vector<std::string> kept = {
      "softrnic-" + live + ".stats", "softrnic-" + live + ".stats.tmp.0011223344556677",
      "softrnic-x" + d + ".stats", "softrnic-" + d + ".statsx", "other-" + d + ".stats",
      "softrnic-0.stats"};
  for (const auto& n : stale) std::ofstream(dir_ + "/" + n) << ValidFile(dead, "x");
  for (const auto& n : kept) std::ofstream(dir_ + "/" + n) << ValidFile(dead, "x");
  // A symlink with a dead pid's name is not a file of ours: left alone.
  const std::string link = "softrnic-" + d + "-1.stats";
  ASSERT_EQ(symlink("/nonexistent", (dir_ + "/" + link).c_str()), 0);
  std::string foreign;
  if (geteuid() == 0) {
    foreign = "softrnic-" + d + "-3.stats";
    std::ofstream(dir_ + "/" + foreign) << ValidFile(dead, "x");
    ASSERT_EQ(chown((dir_ + "/" + foreign).c_str(), 65534, 65534), 0);
  }
  EXPECT_EQ(SweepStaleStatsFiles(dir_), int(stale.size()));
  for (const auto& n : stale) EXPECT_FALSE(Exists(dir_ + "/" + n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(Exists(dir_ + "/" + n)) << n;
  EXPECT_TRUE(Exists(dir_ + "/" + link));
  if (!foreign.empty()) {
    EXPECT_TRUE(Exists(dir_ + "/" + foreign)) << "another user's file removed";
  }
  EXPECT_EQ(SweepStaleStatsFiles(dir_), 0);
  EXPECT_EQ(SweepStaleStatsFiles(dir_ + "/missing"), 0);
}

}  // namespace
}  // namespace softrnic::engine
