// Attaching a packet capture to a running process (`softrnic capture -p PID`
// or `-a`; docs/capture.md). The tool cannot reach into another process, so
// it leaves a request beside the process's stats file, which the process's
// stats publisher thread (stats_publisher.h) looks for every period:
//
//   <stats dir>/softrnic-<pid>.capture     "<path template> <max bytes> <files>\n"
//
// present: the process opens a capture of its own (capture.h; "%p" in the
// template is its pid) and hands it to its engine; gone: it takes the
// capture back from the engine, writes its tail, closes it and creates
// "<its capture file>.done", so the tool knows the file is complete.
// A capture set by SOFTRNIC_CAPTURE when the device was created is left
// alone (a request then does nothing).
//
// Trust: the request names a file the process will create and write, so
// only a request file owned by the process's own effective uid, a regular
// file (not a symlink: O_NOFOLLOW), of at most 4 KiB, is obeyed. Root
// capturing another user's process gives the request (and the directory
// the capture goes to) to that user.
//
// Thread-safety: Poll is called by one thread (the publisher's); it takes
// the engine lock only to swap the engine's capture.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "engine/observe/capture.h"

namespace softrnic::engine {

class Engine;

// The request file's name for process `pid`.
std::string CaptureRequestPath(const std::string& stats_dir, int pid);
// The request's text, and back. Parse is total: false for anything but one
// line of an absolute path, a size in [1 MiB, 1 TiB] and a file count in
// [1, 1000].
std::string FormatCaptureRequest(const CaptureSettings& settings);
bool ParseCaptureRequest(std::string_view text, CaptureSettings* out);

class CaptureControl {
 public:
  CaptureControl(Engine& engine, std::string stats_dir);
  ~CaptureControl();  // detaches a capture it attached
  CaptureControl(const CaptureControl&) = delete;
  CaptureControl& operator=(const CaptureControl&) = delete;

  // Starts or stops the capture as the request file says.
  void Poll();
  bool attached() const { return attached_ != nullptr; }

 private:
  // Reads the request if one this process may obey is there.
  bool ReadRequest(CaptureSettings* out) const;
  void Detach();

  Engine& engine_;
  const std::string request_path_;
  // The capture this control handed the engine (owned by the engine while
  // attached; kept here only to recognise it and to name its file).
  PacketCapture* attached_ = nullptr;
  std::string attached_path_;
};

}  // namespace softrnic::engine
