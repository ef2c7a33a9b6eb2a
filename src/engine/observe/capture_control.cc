#include "engine/observe/capture_control.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/engine.h"
#include "log/log.h"

namespace softrnic::engine {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

}  // namespace

std::string CaptureRequestPath(const std::string& stats_dir, int pid) {
  return stats_dir + "/softrnic-" + std::to_string(pid) + ".capture";
}

std::string FormatCaptureRequest(const CaptureSettings& s) {
  return s.path + " " + std::to_string(s.max_file_bytes) + " " + std::to_string(s.files) + "\n";
}

bool ParseCaptureRequest(std::string_view text, CaptureSettings* out) {
  if (text.empty() || text.back() != '\n') return false;
  text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos || text.find('\0') != std::string_view::npos)
    return false;
  // The path may hold spaces: the two numbers are the last two fields.
  const size_t b = text.rfind(' ');
  if (b == std::string_view::npos || b == 0) return false;
  const size_t a = text.rfind(' ', b - 1);
  if (a == std::string_view::npos || a == 0) return false;
  auto number = [](std::string_view s, uint64_t lo, uint64_t hi, uint64_t* v) {
    if (s.empty() || s.size() > 20) return false;
    uint64_t n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      if (n > (UINT64_MAX - 9) / 10) return false;
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    *v = n;
    return n >= lo && n <= hi;
  };
  uint64_t bytes, files;
  if (!number(text.substr(a + 1, b - a - 1), 1ull << 20, 1ull << 40, &bytes) ||
      !number(text.substr(b + 1), 1, 1000, &files))
    return false;
  const std::string_view path = text.substr(0, a);
  if (path.empty() || path[0] != '/') return false;
  out->path = std::string(path);
  out->max_file_bytes = bytes;
  out->files = static_cast<unsigned>(files);
  return true;
}

CaptureControl::CaptureControl(Engine& engine, std::string stats_dir)
    : engine_(engine), request_path_(CaptureRequestPath(stats_dir, getpid())) {}

CaptureControl::~CaptureControl() { Detach(); }

bool CaptureControl::ReadRequest(CaptureSettings* out) const {
  const int fd = open(request_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  char buf[kMaxRequestBytes];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      static_cast<size_t>(st.st_size) <= sizeof(buf))
    n = read(fd, buf, sizeof(buf));
  close(fd);
  return n > 0 && ParseCaptureRequest(std::string_view(buf, static_cast<size_t>(n)), out);
}

void CaptureControl::Poll() {
  CaptureSettings settings;
  const bool requested = ReadRequest(&settings);
  if (requested == attached()) return;
  if (!requested) {
    Detach();
    return;
  }
  {
    // A capture of the device's own setting (SOFTRNIC_CAPTURE) stays.
    SpinLock lock(engine_.mu_);
    if (engine_.capture_ != nullptr) return;
  }
  std::string error;
  std::unique_ptr<PacketCapture> capture =
      PacketCapture::Open(settings, kDeviceName, engine_.CaptureDescription(), &error);
  if (capture == nullptr) {
    SOFTRNIC_LOG(kWarn, "capture requested by `softrnic capture`: %s", error.c_str());
    return;
  }
  attached_ = capture.get();
  attached_path_ = capture->path();
  SpinLock lock(engine_.mu_);
  engine_.capture_ = std::move(capture);
  engine_.tx_.set_capture(attached_);
  SOFTRNIC_LOG(kInfo, "capturing to %s (requested by softrnic capture)", attached_path_.c_str());
}

void CaptureControl::Detach() {
  if (!attached()) return;
  std::unique_ptr<PacketCapture> capture;
  {
    SpinLock lock(engine_.mu_);
    if (engine_.capture_.get() == attached_) {
      capture = std::move(engine_.capture_);
      engine_.tx_.set_capture(nullptr);
    }
  }
  capture.reset();  // writes the tail and closes the file, outside the engine lock
  attached_ = nullptr;
  // The tool waits for this before it reads the file.
  const int fd = open((attached_path_ + ".done").c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

}  // namespace softrnic::engine
