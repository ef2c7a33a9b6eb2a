// The engine's side of the trace (SOFTRNIC_TRACE, trace_recorder.h): the
// recorder is made with the engine when the setting names a path, hears
// the transport's faults, and is fed by the hooks in the engine's files,
// each `if (trace_ != nullptr) Trace...(...)`: with the trace off a hook is
// one predictable branch on a null pointer, and the work (clock read,
// names, the record) is out of line here.
//
// The files are written when the engine is destroyed (a device closed) and,
// for engines still alive then, at process exit: the process's device
// (Device::Get) is never destroyed, so its trace is written by the exit
// handler registered below, which runs after Device::Get's own (the
// deferred ACKs and the lingering QPs' wait, device.cc) since it was
// registered before them.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "engine/observe/capture.h"
#include "engine/engine.h"
#include "engine/trace/trace_recorder.h"
#include "log/log.h"

namespace softrnic::engine {
namespace {

// Engines whose trace is not written yet, for the exit handler. A
// std::mutex (not annotated in libstdc++): taken by the exit handler and by
// engines opening and closing their trace; then the engine lock (the exit
// handler takes it inside this one, never the other way round).
std::mutex g_traced_mu;
std::vector<Engine*>* g_traced = nullptr;  // leaked: the exit handler uses it
// The path settings this process's traces were opened with, once per
// device: a second device with the same setting gets "-2" before the
// extension (ExpandCapturePath), so two devices of one process (the engine
// tests' pairs) do not write over each other.
pid_t g_traced_pid = 0;
std::vector<std::string>* g_trace_templates = nullptr;  // leaked with g_traced

const char* QpTypeName(const Qp& qp) {
  if (qp.xrc == XrcRole::kSend) return "XRC_SEND";
  if (qp.xrc == XrcRole::kRecv) return "XRC_RECV";
  switch (qp.type) {
    case QpType::kRc: return "RC";
    case QpType::kUc: return "UC";
    case QpType::kUd: return "UD";
    case QpType::kXrcSend: return "XRC_SEND";
    case QpType::kXrcRecv: return "XRC_RECV";
  }
  return "?";
}

// Writes `path` whole or not at all: a temporary file beside it, renamed
// over it, so a reader (softrnic chaos, a test) never sees half a trace.
template <typename Fill>
bool WriteAtomically(const std::string& path, Fill fill) {
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    SOFTRNIC_LOG(kWarn, "trace: cannot create %s: %s (SOFTRNIC_TRACE)", tmp.c_str(),
                 std::strerror(errno));
    return false;
  }
  bool ok = true;
  const auto write_all = [&](std::string_view data) {
    while (ok && !data.empty()) {
      const ssize_t n = write(fd, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  };
  fill(write_all);
  const int saved = errno;
  if (close(fd) != 0) ok = false;
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) ok = false;
  if (!ok) {
    SOFTRNIC_LOG(kWarn, "trace: writing %s failed: %s", path.c_str(),
                 std::strerror(errno != 0 ? errno : saved));
    unlink(tmp.c_str());
  }
  return ok;
}

}  // namespace

void Engine::OpenTrace() {
  if (config_.trace.path.empty()) return;
  int nth;
  {
    std::lock_guard<std::mutex> lock(g_traced_mu);
    if (g_trace_templates == nullptr) g_trace_templates = new std::vector<std::string>();
    if (g_traced_pid != getpid()) {  // a forked child counts afresh
      g_traced_pid = getpid();
      g_trace_templates->clear();
    }
    nth = static_cast<int>(std::count(g_trace_templates->begin(), g_trace_templates->end(),
                                      config_.trace.path));
    g_trace_templates->push_back(config_.trace.path);
  }
  trace_pid_ = getpid();
  trace_path_ = ExpandCapturePath(config_.trace.path, trace_pid_, nth);
  trace_ = std::make_unique<trace::TraceRecorder>(name_, trace_pid_, config_.trace.max_events);
  transport_->SetFaultEventSink(trace_.get());
  SOFTRNIC_LOG(kInfo, "device %s: tracing QP events and faults to %s (SOFTRNIC_TRACE)",
               name_.c_str(), trace_path_.c_str());
  std::lock_guard<std::mutex> lock(g_traced_mu);
  if (g_traced == nullptr) {
    g_traced = new std::vector<Engine*>();
    std::atexit(WriteTracesAtExit);
  }
  g_traced->push_back(this);
}

// Called by ~Engine once the progress thread has stopped: nobody else
// touches the engine any more.
void Engine::CloseTrace() {
  if (trace_ == nullptr) return;
  {
    // Out of the list first: the exit handler may run on another thread.
    std::lock_guard<std::mutex> lock(g_traced_mu);
    if (g_traced != nullptr) std::erase(*g_traced, this);
  }
  transport_->SetFaultEventSink(nullptr);
  WriteTraceLocked();
  trace_.reset();
}

void Engine::WriteTracesAtExit() {
  std::lock_guard<std::mutex> lock(g_traced_mu);
  if (g_traced == nullptr) return;
  for (Engine* e : *g_traced) {
    // A forked child's copies of its parent's engines: not its files, and
    // their lock may be held by a thread the child does not have.
    if (e->trace_pid_ != getpid()) continue;
    SpinLock engine_lock(e->mu_);
    e->WriteTraceLocked();
  }
}

void Engine::WriteTraceLocked() {
  // A forked child holds a copy of its parent's engines: the files are
  // the parent's to write.
  if (trace_ == nullptr || getpid() != trace_pid_) return;
  for (const auto& [qpn, qp] : qps_) trace_->QpCounterSnapshot(qpn, qp->counters);
  const int64_t now = trace::MonotonicNs();
  const trace::TraceRecorder& t = *trace_;
  WriteAtomically(trace_path_, [&](auto& write) { t.WriteJson(now, write); });
  WriteAtomically(trace_path_ + ".txt", [&](auto& write) { write(t.Summary()); });
}

void Engine::TraceQpCreated(const Qp* qp) {
  trace_->QpCreated(trace::MonotonicNs(), qp->qpn, QpTypeName(*qp));
}

void Engine::TraceQpDestroyed(const Qp* qp) {
  trace_->QpDestroyed(trace::MonotonicNs(), qp->qpn, qp->counters);
}

void Engine::TraceState(const Qp* qp, QpState from, QpState to, const char* reason) {
  // The peer is known from RTR on (connected types; a UD QP has none).
  if (qp->type != QpType::kUd && to != QpState::kReset && to != QpState::kInit)
    trace_->QpPath(qp->qpn, qp->attr.ah_attr.dgid, qp->attr.dest_qp_num);
  trace_->QpState(trace::MonotonicNs(), qp->qpn, QpStateName(from), QpStateName(to), reason);
}

void Engine::TraceEvent(const Qp* qp, trace::EventKind kind, const std::array<uint64_t, 6>& v) {
  trace_->Record(trace::MonotonicNs(), qp->qpn, kind, v);
}

void Engine::TraceRequesterError(const Qp* qp, WcStatus status) {
  if (status == WcStatus::kRetryExcErr)
    TraceEvent(qp, trace::EventKind::kRetryExceeded, {qp->comp.comp_psn, qp->attr.retry_cnt});
  else if (status == WcStatus::kRnrRetryExcErr)
    TraceEvent(qp, trace::EventKind::kRnrRetryExceeded, {qp->comp.comp_psn, qp->attr.rnr_retry});
}

void Engine::TraceCompletion(const Qp* qp, WcStatus status, uint64_t wr_id, WcOpcode opcode,
                             bool send) {
  TraceEvent(qp, trace::EventKind::kCompletionError,
             {trace::Str(WcStatusName(status)), wr_id, trace::Str(WcOpcodeName(opcode)),
              trace::Str(send ? "send" : "recv")});
}

const char* WcStatusName(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return "IBV_WC_SUCCESS";
    case WcStatus::kLocLenErr: return "IBV_WC_LOC_LEN_ERR";
    case WcStatus::kLocQpOpErr: return "IBV_WC_LOC_QP_OP_ERR";
    case WcStatus::kLocEecOpErr: return "IBV_WC_LOC_EEC_OP_ERR";
    case WcStatus::kLocProtErr: return "IBV_WC_LOC_PROT_ERR";
    case WcStatus::kWrFlushErr: return "IBV_WC_WR_FLUSH_ERR";
    case WcStatus::kMwBindErr: return "IBV_WC_MW_BIND_ERR";
    case WcStatus::kBadRespErr: return "IBV_WC_BAD_RESP_ERR";
    case WcStatus::kLocAccessErr: return "IBV_WC_LOC_ACCESS_ERR";
    case WcStatus::kRemInvReqErr: return "IBV_WC_REM_INV_REQ_ERR";
    case WcStatus::kRemAccessErr: return "IBV_WC_REM_ACCESS_ERR";
    case WcStatus::kRemOpErr: return "IBV_WC_REM_OP_ERR";
    case WcStatus::kRetryExcErr: return "IBV_WC_RETRY_EXC_ERR";
    case WcStatus::kRnrRetryExcErr: return "IBV_WC_RNR_RETRY_EXC_ERR";
    case WcStatus::kLocRddViolErr: return "IBV_WC_LOC_RDD_VIOL_ERR";
    case WcStatus::kRemInvRdReqErr: return "IBV_WC_REM_INV_RD_REQ_ERR";
    case WcStatus::kRemAbortErr: return "IBV_WC_REM_ABORT_ERR";
    case WcStatus::kInvEecnErr: return "IBV_WC_INV_EECN_ERR";
    case WcStatus::kInvEecStateErr: return "IBV_WC_INV_EEC_STATE_ERR";
    case WcStatus::kFatalErr: return "IBV_WC_FATAL_ERR";
    case WcStatus::kRespTimeoutErr: return "IBV_WC_RESP_TIMEOUT_ERR";
    case WcStatus::kGeneralErr: return "IBV_WC_GENERAL_ERR";
  }
  return "?";
}

const char* WcOpcodeName(WcOpcode o) {
  switch (o) {
    case WcOpcode::kSend: return "IBV_WC_SEND";
    case WcOpcode::kRdmaWrite: return "IBV_WC_RDMA_WRITE";
    case WcOpcode::kRdmaRead: return "IBV_WC_RDMA_READ";
    case WcOpcode::kCompSwap: return "IBV_WC_COMP_SWAP";
    case WcOpcode::kFetchAdd: return "IBV_WC_FETCH_ADD";
    case WcOpcode::kBindMw: return "IBV_WC_BIND_MW";
    case WcOpcode::kLocalInv: return "IBV_WC_LOCAL_INV";
    case WcOpcode::kAtomicWrite: return "IBV_WC_ATOMIC_WRITE";
    case WcOpcode::kRecv: return "IBV_WC_RECV";
    case WcOpcode::kRecvRdmaWithImm: return "IBV_WC_RECV_RDMA_WITH_IMM";
  }
  return "?";
}

}  // namespace softrnic::engine
