// engine::Device for softrnic_verbs_tests: every method the verbs library
// calls, over the records of fake_device.h. See there for what it does and
// does not do.
#include "fake_device.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace softrnic::engine {

// The real Engine (engine.h) is not linked; Device only holds a pointer.
class Engine {};

}  // namespace softrnic::engine

namespace softrnic::verbs_test {

Fake& Fake::Get() {
  static Fake* fake = new Fake();  // never destroyed: no exit-order questions
  return *fake;
}

void Fake::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
  scripts_.clear();
  pds_.clear();
  mrs_.clear();
  mws_.clear();
  cqs_.clear();
  channels_.clear();
  srqs_.clear();
  ahs_.clear();
  qps_.clear();
  next_channel_fd_ = 1000;
  next_key_ = 0x1000;
  last_advice_sges.clear();
  async_.clear();
  async_[eng::Device::kDeviceAsyncQueue];
  next_queue_ = 1;
  reported_.clear();
  router_ = nullptr;
  attr = eng::DeviceAttr{};
  gids = {eng::Gid::FromIpv4(0x0100007f), eng::Gid::FromIpv4(0x0200000a)};  // 127.0.0.1, 10.0.0.2
  get_fails = false;
  cq_extra = 0;
  cap_extra = 0;
  next_qpn = 0x100;
}

void Fake::FailCall(std::string_view method, int err, int skip) {
  std::lock_guard<std::mutex> lock(mu_);
  scripts_.push_back({std::string(method), skip, err});
}

std::vector<std::string> Fake::Calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

int Fake::CallCount(std::string_view method) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count(calls_.begin(), calls_.end(), method));
}

int Fake::Enter(std::string_view method) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.emplace_back(method);
  for (auto it = scripts_.begin(); it != scripts_.end(); ++it) {
    if (it->method != method) continue;
    if (it->skip > 0) {
      --it->skip;
      return 0;
    }
    const int err = it->err;
    scripts_.erase(it);
    if (err == kThrowBadAlloc) throw std::bad_alloc();
    return err;
  }
  return 0;
}

template <class T>
T* Fake::Find(const std::vector<std::unique_ptr<T>>& list, const void* handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& o : list)
    if (o->handle == handle) return o.get();
  return nullptr;
}

template <class T>
void Fake::Erase(std::vector<std::unique_ptr<T>>* list, const T* object) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(*list, [&](const auto& o) { return o.get() == object; });
}

eng::Pd* Fake::PdOf(const void* h) const { return Find(pds_, h); }
eng::Mr* Fake::MrOf(const void* h) const { return Find(mrs_, h); }
eng::Cq* Fake::CqOf(const void* h) const { return Find(cqs_, h); }
eng::Srq* Fake::SrqOf(const void* h) const { return Find(srqs_, h); }
eng::Ah* Fake::AhOf(const void* h) const { return Find(ahs_, h); }
eng::Qp* Fake::QpOf(const void* h) const { return Find(qps_, h); }

eng::CompletionChannel* Fake::ChannelOfFd(int fd) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : channels_)
    if (c->fd == fd) return c.get();
  return nullptr;
}

size_t Fake::LiveObjects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pds_.size() + mrs_.size() + mws_.size() + cqs_.size() + channels_.size() + srqs_.size() +
         ahs_.size() + qps_.size();
}

void Fake::PushAsyncEvent(int queue, const eng::AsyncEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  async_[queue].push_back(event);
}

eng::Device::AsyncRouter Fake::router() const {
  std::lock_guard<std::mutex> lock(mu_);
  return router_;
}

std::vector<int> Fake::OpenQueues() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (const auto& [q, events] : async_) out.push_back(q);
  return out;
}

bool Fake::device_alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !device_.expired();
}

}  // namespace softrnic::verbs_test

namespace softrnic::engine {

using verbs_test::Fake;
using verbs_test::PostedRecv;
using verbs_test::PostedSend;

namespace {

Fake& F() { return Fake::Get(); }

std::vector<Sge> CopyOf(std::span<const Sge> sges) { return {sges.begin(), sges.end()}; }

}  // namespace

// As the real Device::Get: one device per process while anyone holds it.
std::shared_ptr<Device> Device::Get(std::string* error) {
  Fake& f = F();
  f.Enter("Get");
  if (f.get_fails) {
    if (error) *error = "scripted failure";
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(f.mu_);
  if (auto dev = f.device_.lock()) return dev;
  std::shared_ptr<Device> dev(new Device(std::make_unique<Engine>()));
  f.device_ = dev;
  return dev;
}

Device::Device(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
Device::~Device() = default;

const DeviceAttr& Device::attr() const { return F().attr; }
std::span<const Gid> Device::gids() const { return F().gids; }
// No host NIC in the fake: no lane, nothing to claim.
int Device::host_nic_lane() const { return -1; }
int Device::ClaimCmService(uint16_t, uint16_t, bool) { return 0; }
int Device::seal_mode() const { return 0; }
int Device::SealQpByCm(Qp*, std::span<const uint8_t>, std::span<const uint8_t>) { return EINVAL; }

int Device::AllocPd(void* handle, Pd** out) {
  Fake& f = F();
  if (int rc = f.Enter("AllocPd")) return rc;
  auto pd = std::make_unique<Pd>();
  pd->handle = handle;
  *out = pd.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  pd->id = f.next_key_++;
  f.pds_.push_back(std::move(pd));
  return 0;
}

int Device::DeallocPd(Pd* pd) {
  Fake& f = F();
  if (int rc = f.Enter("DeallocPd")) return rc;
  f.Erase(&f.pds_, pd);
  return 0;
}

int Device::RegMr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access, void* handle,
                  Mr** out) {
  Fake& f = F();
  if (int rc = f.Enter("RegMr")) return rc;
  auto mr = std::make_unique<Mr>();
  mr->handle = handle;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->iova = iova;
  mr->access = access;
  std::lock_guard<std::mutex> lock(f.mu_);
  mr->lkey = f.next_key_++;
  mr->rkey = f.next_key_++;
  *out = mr.get();
  f.mrs_.push_back(std::move(mr));
  return 0;
}

int Device::ReregMr(Mr* mr, uint32_t what, Pd* pd, void* addr, size_t length, uint32_t access) {
  Fake& f = F();
  if (int rc = f.Enter("ReregMr")) return rc;
  std::lock_guard<std::mutex> lock(f.mu_);
  if (what & kReregPd) mr->pd = pd;
  if (what & kReregTranslation) {
    mr->addr = addr;
    mr->length = length;
    mr->iova = reinterpret_cast<uintptr_t>(addr);
  }
  if (what & kReregAccess) mr->access = access;
  return 0;
}

Pd* Device::FindPd(uint32_t id) const {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu_);
  for (const auto& pd : f.pds_)
    if (pd->id == id) return pd.get();
  return nullptr;
}

uint32_t Device::PdId(const Pd* pd) const { return pd->id; }

Mr* Device::FindMr(const Pd* pd, uint32_t lkey) const {
  Fake& f = F();
  std::lock_guard<std::mutex> lock(f.mu_);
  for (const auto& mr : f.mrs_)
    if (mr->lkey == lkey && mr->pd == pd) return mr.get();
  return nullptr;
}

void Device::MrRange(const Mr* mr, void** addr, size_t* length) const {
  *addr = mr->addr;
  *length = mr->length;
}

int Device::AllocMw(Pd* pd, MwType type, void* handle, Mw** out) {
  Fake& f = F();
  if (int rc = f.Enter("AllocMw")) return rc;
  auto mw = std::make_unique<Mw>();
  mw->pd = pd;
  mw->type = type;
  mw->handle = handle;
  std::lock_guard<std::mutex> lock(f.mu_);
  mw->rkey = f.next_key_++ << 8;
  *out = mw.get();
  f.mws_.push_back(std::move(mw));
  return 0;
}

int Device::DeallocMw(Mw* mw) {
  Fake& f = F();
  if (int rc = f.Enter("DeallocMw")) return rc;
  f.Erase(&f.mws_, mw);
  return 0;
}

uint32_t Device::MwRkey(const Mw* mw) const { return mw->rkey; }

int Device::AdviseMr(const Pd*, MrAdvice advice, const Sge* sges, uint32_t num_sge) {
  Fake& f = F();
  if (int rc = f.Enter("AdviseMr")) return rc;
  std::lock_guard<std::mutex> lock(f.mu_);
  f.last_advice = advice;
  f.last_advice_sges.assign(sges, sges + num_sge);
  return 0;
}

int Device::DeregMr(Mr* mr) {
  Fake& f = F();
  if (int rc = f.Enter("DeregMr")) return rc;
  f.Erase(&f.mrs_, mr);
  return 0;
}

uint32_t Device::MrLkey(const Mr* mr) const { return mr->lkey; }
uint32_t Device::MrRkey(const Mr* mr) const { return mr->rkey; }

int Device::CreateCompletionChannel(CompletionChannel** out) {
  Fake& f = F();
  if (int rc = f.Enter("CreateCompletionChannel")) return rc;
  auto ch = std::make_unique<CompletionChannel>();
  std::lock_guard<std::mutex> lock(f.mu_);
  ch->fd = f.next_channel_fd_++;
  *out = ch.get();
  f.channels_.push_back(std::move(ch));
  return 0;
}

int Device::DestroyCompletionChannel(CompletionChannel* channel) {
  Fake& f = F();
  if (int rc = f.Enter("DestroyCompletionChannel")) return rc;
  f.Erase(&f.channels_, channel);
  return 0;
}

int Device::CompletionChannelFd(const CompletionChannel* channel) const { return channel->fd; }

int Device::GetCqEvent(CompletionChannel* channel, void** cq_handle) {
  if (int rc = F().Enter("GetCqEvent")) return rc;
  if (channel->events.empty()) return EAGAIN;
  *cq_handle = channel->events.front();
  channel->events.pop_front();
  return 0;
}

int Device::CreateCq(uint32_t cqe, CompletionChannel* channel, void* handle, Cq** out,
                     std::pmr::memory_resource* queue_memory) {
  Fake& f = F();
  if (int rc = f.Enter("CreateCq")) return rc;
  auto cq = std::make_unique<Cq>();
  cq->queue_memory = queue_memory;
  cq->handle = handle;
  cq->requested = cqe;
  cq->capacity = cqe + f.cq_extra;
  cq->channel = channel;
  *out = cq.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.cqs_.push_back(std::move(cq));
  return 0;
}

uint32_t Device::CqCapacity(const Cq* cq) const { return cq->capacity; }

int Device::ResizeCq(Cq* cq, uint32_t cqe) {
  Fake& f = F();
  if (int rc = f.Enter("ResizeCq")) return rc;
  cq->requested = cqe;
  cq->capacity = cqe + f.cq_extra;
  return 0;
}

int Device::DestroyCq(Cq* cq, uint32_t* async_events_reported) {
  Fake& f = F();
  if (int rc = f.Enter("DestroyCq")) return rc;
  {
    std::lock_guard<std::mutex> lock(f.mu_);
    if (async_events_reported) *async_events_reported = f.reported_[cq->handle];
    f.reported_.erase(cq->handle);
  }
  f.Erase(&f.cqs_, cq);
  return 0;
}

int Device::PollCq(Cq* cq, int n, Completion* out) {
  if (int rc = F().Enter("PollCq")) return -rc;
  int got = 0;
  while (got < n && !cq->completions.empty()) {
    out[got++] = cq->completions.front();
    cq->completions.pop_front();
  }
  return got;
}

int Device::ArmCq(Cq* cq, bool solicited_only) {
  if (int rc = F().Enter("ArmCq")) return rc;
  ++cq->arm_calls;
  cq->solicited_only = solicited_only;
  return 0;
}

void Device::AckCqEvents(Cq* cq, unsigned n) {
  F().Enter("AckCqEvents");
  cq->acked_events += n;
}

int Device::CreateSrq(Pd* pd, const SrqAttr& attr, void* handle, Srq** out,
                      std::pmr::memory_resource* queue_memory) {
  Fake& f = F();
  if (int rc = f.Enter("CreateSrq")) return rc;
  auto srq = std::make_unique<Srq>();
  srq->queue_memory = queue_memory;
  srq->handle = handle;
  srq->pd = pd;
  srq->attr = attr;
  srq->attr.max_wr += f.cap_extra;
  srq->attr.max_sge += f.cap_extra;
  *out = srq.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.srqs_.push_back(std::move(srq));
  return 0;
}

int Device::ModifySrq(Srq* srq, const SrqAttr& attr, uint32_t mask) {
  if (int rc = F().Enter("ModifySrq")) return rc;
  srq->last_modify_mask = mask;
  if (mask & 1) srq->attr.max_wr = attr.max_wr;
  if (mask & 2) srq->attr.srq_limit = attr.srq_limit;
  return 0;
}

int Device::QuerySrq(Srq* srq, SrqAttr* out) {
  if (int rc = F().Enter("QuerySrq")) return rc;
  *out = srq->attr;
  return 0;
}

int Device::DestroySrq(Srq* srq, uint32_t* async_events_reported) {
  Fake& f = F();
  if (int rc = f.Enter("DestroySrq")) return rc;
  {
    std::lock_guard<std::mutex> lock(f.mu_);
    if (async_events_reported) *async_events_reported = f.reported_[srq->handle];
    f.reported_.erase(srq->handle);
  }
  f.Erase(&f.srqs_, srq);
  return 0;
}

int Device::PostSrqRecv(Srq* srq, const RecvWr& wr) {
  if (int rc = F().Enter("PostSrqRecv")) return rc;
  srq->recvs.push_back(PostedRecv{wr.wr_id, CopyOf(wr.sges)});
  return 0;
}

int Device::CreateAh(Pd* pd, const AddressVector& av, void* handle, Ah** out) {
  Fake& f = F();
  if (int rc = f.Enter("CreateAh")) return rc;
  auto ah = std::make_unique<Ah>();
  ah->handle = handle;
  ah->pd = pd;
  ah->av = av;
  *out = ah.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.ahs_.push_back(std::move(ah));
  return 0;
}

int Device::DestroyAh(Ah* ah) {
  Fake& f = F();
  if (int rc = f.Enter("DestroyAh")) return rc;
  f.Erase(&f.ahs_, ah);
  return 0;
}

namespace {

std::unique_ptr<Qp> NewQp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCaps* caps,
                          bool sq_sig_all, void* handle, uint32_t qpn) {
  auto qp = std::make_unique<Qp>();
  qp->handle = handle;
  qp->pd = pd;
  qp->type = type;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->srq = srq;
  qp->caps = *caps;
  qp->sq_sig_all = sq_sig_all;
  qp->qpn = qpn;
  const uint32_t extra = F().cap_extra;
  caps->max_send_wr += extra;
  caps->max_recv_wr += extra;
  caps->max_send_sge += extra;
  caps->max_recv_sge += extra;
  caps->max_inline_data += extra;
  return qp;
}

}  // namespace

int Device::CreateQp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCaps* caps,
                     bool sq_sig_all, void* handle, Qp** out,
                     std::pmr::memory_resource* queue_memory) {
  Fake& f = F();
  if (int rc = f.Enter("CreateQp")) return rc;
  auto qp = NewQp(pd, type, send_cq, recv_cq, srq, caps, sq_sig_all, handle, f.next_qpn++);
  qp->queue_memory = queue_memory;
  *out = qp.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.qps_.push_back(std::move(qp));
  return 0;
}

int Device::CreateGsiQp(Pd* pd, Cq* send_cq, Cq* recv_cq, QpCaps* caps, void* handle, Qp** out) {
  Fake& f = F();
  if (int rc = f.Enter("CreateGsiQp")) return rc;
  auto qp = NewQp(pd, QpType::kUd, send_cq, recv_cq, nullptr, caps, true, handle, 1);
  qp->gsi = true;
  *out = qp.get();
  std::lock_guard<std::mutex> lock(f.mu_);
  f.qps_.push_back(std::move(qp));
  return 0;
}

uint32_t Device::QpNum(const Qp* qp) const { return qp->qpn; }

int Device::ModifyQp(Qp* qp, const QpAttr& attr, uint32_t mask) {
  if (int rc = F().Enter("ModifyQp")) return rc;
  qp->attr = attr;
  qp->last_modify_mask = mask;
  return 0;
}

int Device::QueryQp(Qp* qp, QpAttr* out) {
  if (int rc = F().Enter("QueryQp")) return rc;
  *out = qp->attr;
  return 0;
}

// XRC is not modelled by the fake: the verbs layer's XRC paths are tested
// against the real engine (tests/unit/engine/xrc_test.cc, integration).
int Device::OpenXrcd(const XrcdInode*, bool, bool, Xrcd**) { return EOPNOTSUPP; }
int Device::CloseXrcd(Xrcd*) { return EINVAL; }
int Device::CreateXrcSrq(Pd*, Xrcd*, Cq*, const SrqAttr&, void*, Srq**) { return EOPNOTSUPP; }
uint32_t Device::SrqNum(const Srq*) const { return 0; }
int Device::CreateXrcRecvQp(Xrcd*, void*, Qp**) { return EOPNOTSUPP; }
int Device::OpenXrcRecvQp(Xrcd*, uint32_t, void*, Qp**) { return EOPNOTSUPP; }

// Multicast is not modelled by the fake either: tested against the real
// engine (tests/unit/engine/multicast_test.cc, tests/integration/multicast).
int Device::AttachMulticast(Qp*, const Gid&) { return EOPNOTSUPP; }
int Device::DetachMulticast(Qp*, const Gid&) { return EINVAL; }
void Device::BlockSelfMulticastLoopback(Qp*) {}

int Device::DestroyQp(Qp* qp, uint32_t* async_events_reported, void*) {
  Fake& f = F();
  if (int rc = f.Enter("DestroyQp")) return rc;
  {
    std::lock_guard<std::mutex> lock(f.mu_);
    if (async_events_reported) *async_events_reported = f.reported_[qp->handle];
    f.reported_.erase(qp->handle);
  }
  f.Erase(&f.qps_, qp);
  return 0;
}

// Copies what the engine reads during the call: the SGE list and, for an
// inline WR, the bytes it names (the caller may reuse both at once).
int Device::PostSend(Qp* qp, const SendWr& wr) {
  if (int rc = F().Enter("PostSend")) return rc;
  PostedSend p;
  p.wr = wr;
  p.wr.sges = {};
  p.sges = CopyOf(wr.sges);
  if (wr.send_flags & kInline) {
    for (const Sge& s : wr.sges) {
      const auto* b = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(s.addr));
      p.inline_bytes.insert(p.inline_bytes.end(), b, b + s.length);
    }
  }
  qp->sends.push_back(std::move(p));
  return 0;
}

int Device::PostRecv(Qp* qp, const RecvWr& wr) {
  if (int rc = F().Enter("PostRecv")) return rc;
  qp->recvs.push_back(PostedRecv{wr.wr_id, CopyOf(wr.sges)});
  return 0;
}

int Device::async_fd(int queue) const { return Fake::AsyncFdOf(queue); }

// As the engine: an event handed out is counted for its object's destroy.
int Device::GetAsyncEvent(AsyncEvent* out, int queue) {
  Fake& f = F();
  if (int rc = f.Enter("GetAsyncEvent")) return rc;
  std::lock_guard<std::mutex> lock(f.mu_);
  auto it = f.async_.find(queue);
  if (it == f.async_.end()) return EINVAL;
  if (it->second.empty()) return EAGAIN;
  *out = it->second.front();
  it->second.pop_front();
  if (out->handle) ++f.reported_[out->handle];
  return 0;
}

int Device::OpenAsyncQueue() {
  Fake& f = F();
  if (int rc = f.Enter("OpenAsyncQueue")) return -rc;
  std::lock_guard<std::mutex> lock(f.mu_);
  const int q = f.next_queue_++;
  f.async_[q];
  return q;
}

void Device::CloseAsyncQueue(int queue) {
  Fake& f = F();
  f.Enter("CloseAsyncQueue");
  std::lock_guard<std::mutex> lock(f.mu_);
  f.async_.erase(queue);
}

void Device::SetAsyncRouter(AsyncRouter router) {
  Fake& f = F();
  f.Enter("SetAsyncRouter");
  std::lock_guard<std::mutex> lock(f.mu_);
  f.router_ = router;
}

}  // namespace softrnic::engine
