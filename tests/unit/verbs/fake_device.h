// A fake of the layer below the verbs library: engine::Device's methods
// implemented over plain records (fake_device.cc), linked into
// softrnic_verbs_tests in place of softrnic_engine (a link seam: the verbs
// sources are compiled unchanged, tests/CMakeLists.txt).
//
// The fake does no RDMA and enforces none of the engine's rules (access
// rights, QP state machine, queue depths): it records every call, keeps what
// the verbs layer handed over (deep copies of WRs, SGEs and inline bytes, as
// the engine reads them during the call), hands back what a test queued
// (completions, CQ events, async events) and fails the calls a test scripts.
// Every test therefore checks what the verbs layer itself does: argument
// checks made before the engine is called, translation of the rdma-core ABI,
// and what it does with the engine's answers.
//
// Fake objects are found by the handle the verbs layer gave the engine (its
// own ibv_* struct), so tests need not know the verbs library's wrappers.
//
// Thread-safety: the record is guarded by one mutex; tests read it while no
// verbs call is running on another thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/device/device.h"

namespace softrnic::verbs_test {

namespace eng = softrnic::engine;

// One SendWr as the engine received it; `wr.sges` is cleared (it pointed at
// the caller's stack) and its contents are in `sges`.
struct PostedSend {
  eng::SendWr wr;
  std::vector<eng::Sge> sges;
  std::vector<uint8_t> inline_bytes;  // the bytes the SGEs named, if IBV_SEND_INLINE
};

struct PostedRecv {
  uint64_t wr_id = 0;
  std::vector<eng::Sge> sges;
};

}  // namespace softrnic::verbs_test

// The engine's object types, as the fake defines them (the real ones are in
// src/engine, which this binary does not link).
namespace softrnic::engine {

class Pd {
 public:
  void* handle = nullptr;
  uint32_t id = 0;  // the handle ibv_import_pd takes
};

class Mr {
 public:
  void* handle = nullptr;
  Pd* pd = nullptr;
  void* addr = nullptr;
  size_t length = 0;
  uint64_t iova = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class CompletionChannel {
 public:
  int fd = -1;
  std::deque<void*> events;  // CQ handles GetCqEvent returns, in order
};

class Cq {
 public:
  void* handle = nullptr;
  uint32_t requested = 0;  // cqe asked for
  uint32_t capacity = 0;   // what CqCapacity reports
  CompletionChannel* channel = nullptr;
  std::deque<Completion> completions;  // what PollCq hands out, in order
  int arm_calls = 0;
  bool solicited_only = false;
  unsigned acked_events = 0;
  std::pmr::memory_resource* queue_memory = nullptr;  // as CreateCq was given it
};

class Srq {
 public:
  void* handle = nullptr;
  Pd* pd = nullptr;
  SrqAttr attr;
  uint32_t last_modify_mask = 0;
  std::vector<verbs_test::PostedRecv> recvs;
  std::pmr::memory_resource* queue_memory = nullptr;  // as CreateSrq was given it
};

class Ah {
 public:
  void* handle = nullptr;
  Pd* pd = nullptr;
  AddressVector av;
};

class Qp {
 public:
  void* handle = nullptr;
  Pd* pd = nullptr;
  QpType type = QpType::kRc;
  bool gsi = false;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  QpCaps caps;  // as requested
  std::pmr::memory_resource* queue_memory = nullptr;  // as CreateQp was given it
  bool sq_sig_all = false;
  uint32_t qpn = 0;
  QpAttr attr;                  // what ModifyQp last stored / QueryQp reports
  uint32_t last_modify_mask = 0;
  std::vector<verbs_test::PostedSend> sends;
  std::vector<verbs_test::PostedRecv> recvs;
};

}  // namespace softrnic::engine

namespace softrnic::verbs_test {

// The fake's state: one per process, cleared by Reset() (each test's SetUp).
class Fake {
 public:
  // A scripted failure: throw std::bad_alloc instead of returning an errno.
  static constexpr int kThrowBadAlloc = -1;

  static Fake& Get();

  // Forgets everything (objects, calls, scripts, queued events) and restores
  // the defaults below. Objects the verbs layer still holds dangle after it.
  void Reset();

  // The call of `method` (a Device method name, e.g. "PostSend") after `skip`
  // more calls of it fails with `err` (a positive errno or kThrowBadAlloc).
  // Calls that fail change nothing in the fake.
  void FailCall(std::string_view method, int err, int skip = 0);

  // Every Device method called since Reset, in order, by name.
  std::vector<std::string> Calls() const;
  int CallCount(std::string_view method) const;

  // Objects by the verbs layer's handle (its ibv_* struct); null if there is
  // no live object with that handle.
  eng::Pd* PdOf(const void* handle) const;
  eng::Mr* MrOf(const void* handle) const;
  eng::Cq* CqOf(const void* handle) const;
  eng::Srq* SrqOf(const void* handle) const;
  eng::Ah* AhOf(const void* handle) const;
  eng::Qp* QpOf(const void* handle) const;
  eng::CompletionChannel* ChannelOfFd(int fd) const;
  // Live objects of every kind (what the verbs layer has not destroyed).
  size_t LiveObjects() const;

  // Queues an event for GetAsyncEvent on `queue` (0 = the device's own).
  void PushAsyncEvent(int queue, const eng::AsyncEvent& event);
  // The router the verbs layer installed (SetAsyncRouter), or null.
  eng::Device::AsyncRouter router() const;
  // Async queues opened and not closed.
  std::vector<int> OpenQueues() const;
  // The fd the fake reports for queue q.
  static int AsyncFdOf(int queue) { return 500 + queue; }

  // What the device reports; tests may change them before opening a context.
  eng::DeviceAttr attr;
  std::vector<eng::Gid> gids;
  // Device::Get fails (null, "scripted") while set.
  bool get_fails = false;
  // CqCapacity reports the requested size plus this (the engine rounds up).
  uint32_t cq_extra = 0;
  // CreateQp/CreateSrq round every capacity up by this.
  uint32_t cap_extra = 0;
  // QPNs are handed out from here (CreateGsiQp always gives 1).
  uint32_t next_qpn = 0x100;
  // The last AdviseMr's arguments.
  eng::MrAdvice last_advice = eng::MrAdvice::kPrefetch;
  std::vector<eng::Sge> last_advice_sges;
  // Whether a Device object exists (Device::Get keeps one while used).
  bool device_alive() const;

 private:
  friend class eng::Device;
  Fake() { Reset(); }
  // Records the call; returns the scripted errno (0 if none), or throws.
  int Enter(std::string_view method);

  template <class T>
  T* Find(const std::vector<std::unique_ptr<T>>& list, const void* handle) const;
  template <class T>
  void Erase(std::vector<std::unique_ptr<T>>* list, const T* object);

  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  struct Script {
    std::string method;
    int skip;
    int err;
  };
  std::vector<Script> scripts_;
  std::vector<std::unique_ptr<eng::Pd>> pds_;
  std::vector<std::unique_ptr<eng::Mr>> mrs_;
  std::vector<std::unique_ptr<eng::Mw>> mws_;
  std::vector<std::unique_ptr<eng::Cq>> cqs_;
  std::vector<std::unique_ptr<eng::CompletionChannel>> channels_;
  std::vector<std::unique_ptr<eng::Srq>> srqs_;
  std::vector<std::unique_ptr<eng::Ah>> ahs_;
  std::vector<std::unique_ptr<eng::Qp>> qps_;
  int next_channel_fd_ = 1000;
  uint32_t next_key_ = 0x1000;
  std::map<int, std::deque<eng::AsyncEvent>> async_;  // open queues
  int next_queue_ = 1;
  std::map<const void*, uint32_t> reported_;  // events handed out per handle
  eng::Device::AsyncRouter router_ = nullptr;
  std::weak_ptr<eng::Device> device_;
};

}  // namespace softrnic::verbs_test
