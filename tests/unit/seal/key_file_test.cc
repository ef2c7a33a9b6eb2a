// The pre-shared key file (seal/key_file.h): only a private, regular file
// of a sane size is taken; every refusal says why.
#include "seal/key_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace softrnic::seal {
namespace {

class KeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-keyfile-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, size_t bytes, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    std::string data(bytes, 'k');
    EXPECT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    close(fd);
    chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(KeyFileTest, APrivateFileIsTakenWhole) {
  std::string error;
  auto key = LoadKeyFile(Write("key", 48, 0600), &error);
  ASSERT_NE(key, nullptr) << error;
  EXPECT_EQ(key->bytes().size(), 48u);
  EXPECT_EQ(key->bytes()[47], 'k');
}

TEST_F(KeyFileTest, RefusalsSayWhy) {
  std::string error;
  EXPECT_EQ(LoadKeyFile(Write("open", 32, 0644), &error), nullptr);
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
  EXPECT_EQ(LoadKeyFile(Write("short", 31, 0600), &error), nullptr);
  EXPECT_NE(error.find("shorter than 32"), std::string::npos) << error;
  EXPECT_EQ(LoadKeyFile(Write("long", 1025, 0600), &error), nullptr);
  EXPECT_NE(error.find("longer than 1024"), std::string::npos) << error;
  EXPECT_EQ(LoadKeyFile(dir_, &error), nullptr);
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  EXPECT_EQ(LoadKeyFile(dir_ + "/absent", &error), nullptr);
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  // A FIFO would block a reader forever: refused without waiting.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(LoadKeyFile(fifo, &error), nullptr);
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST_F(KeyFileTest, AnotherUsersFileIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  // Root may use root's files; a file of another user is not root's key.
  // (Run as root, the check is "owned by root or the effective user".)
  const std::string path = Write("theirs", 32, 0600);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  std::string error;
  EXPECT_EQ(LoadKeyFile(path, &error), nullptr);
  EXPECT_NE(error.find("owned by uid 65534"), std::string::npos) << error;
}

}  // namespace
}  // namespace softrnic::seal
