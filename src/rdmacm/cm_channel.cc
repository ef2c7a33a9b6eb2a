// rdma_cm event channels: the queue of events per channel, its eventfd, and
// what happens to queued events when their id goes away (security review
// M6: no event may name a destroyed id, as with the kernel's ucma, which
// frees the unread events of an id in rdma_destroy_id).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/restart_after_signal.h"
#include "rdmacm/cm_internal.h"

namespace softrnic::rdmacm {
namespace {

// One count of the channel's eventfd, with c->mu held and at least one event
// queued: the count is there (Push adds it under the same lock), so read()
// returns at once even on a blocking fd.
void TakeCount(Channel* c) {
  uint64_t v;
  ssize_t r;
  do {
    r = read(c->ch.fd, &v, sizeof v);
  } while (r < 0 && errno == EINTR);
}

}  // namespace

Event* NewEvent(Id* id, rdma_cm_event_type t, int status) {
  auto* e = new Event{};  // ev and pdata zeroed
  e->ev.id = &id->id;
  e->ev.event = t;
  e->ev.status = status;
  return e;
}

void Push(Channel* c, Event* e) {
  std::lock_guard<std::mutex> l(c->mu);
  c->q.push_back(e);
  uint64_t one = 1;
  ssize_t r;
  do {
    r = write(c->ch.fd, &one, sizeof one);
  } while (r < 0 && errno == EINTR);
}

void Deliver(Id* id, Event* e) {
  CM_DBG("event %s status %d id %p", rdma_event_str(e->ev.event), e->ev.status, (void*)id);
  // A connection the exit hook disconnected: the kernel's CM sends that
  // DREQ when the process's rdma_cm fd is closed, once its threads are
  // gone, so its DISCONNECTED (DREP, timeout, crossing DREQ) reaches no
  // one. Delivered here it would wake application threads in the middle of
  // exit(): libiscsi 1.19's CM thread, whose iSER connection (holding the
  // event out-parameter) and context iscsi_destroy_context has freed
  // without stopping it, wrote into both (ASan stopped the initiators).
  if (id->exit_dreq) {
    CM_DBG("not delivered: the exit hook disconnected id %p", (void*)id);
    delete e;
    return;
  }
  // A CONNECT_REQUEST goes to its listener's channel (for a synchronous
  // listener, rdma_get_request picks it up there).
  const bool request = e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && id->request_chan;
  Push(request ? id->request_chan : id->chan, e);
}

void Simple(Id* id, rdma_cm_event_type t, int status) { Deliver(id, NewEvent(id, t, status)); }

void SetConnPdata(Event* e, const uint8_t* p, size_t n) {
  std::memcpy(e->pdata, p, n);
  e->ev.param.conn.private_data = e->pdata;
  e->ev.param.conn.private_data_len = uint8_t(n);
}

Channel* NewChannel() {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* c = new Channel;
  c->ch.fd = fd;
  return c;
}

void FreeChannel(Channel* c) {
  // Not deleted: programs (rping) destroy the channel and exit while their
  // CM thread may still be about to call rdma_get_cm_event on it; with the
  // kernel's librdmacm that thread is normally blocked in read() on the
  // channel fd, which close() does not wake, until the process exits. So a
  // destroyed channel makes rdma_get_cm_event block (destroyed flag) rather
  // than fail (rping exits 255 on that error) or touch freed memory. The
  // small struct stays reachable here (no leak report).
  c->destroyed.store(true);
  {
    std::lock_guard<std::mutex> l(c->mu);
    for (Event* e : c->q) delete e;
    c->q.clear();
  }
  close(c->ch.fd);
  static std::mutex graveyard_mu;
  static auto* graveyard = new std::vector<Channel*>;
  std::lock_guard<std::mutex> l(graveyard_mu);
  graveyard->push_back(c);
}

void PurgeEvents(Channel* c, const Id* id) {
  if (!c || c->destroyed.load()) return;
  std::lock_guard<std::mutex> l(c->mu);
  for (auto it = c->q.begin(); it != c->q.end();) {
    if ((*it)->ev.id == &id->id) {
      delete *it;
      it = c->q.erase(it);
      TakeCount(c);
    } else {
      ++it;
    }
  }
}

int PopEvent(Channel* c, rdma_cm_event** out) {
  for (;;) {
    // rdma_get_cm_event blocks, and a blocking call is a cancellation
    // point (librdmacm's blocks in read(2)): a cancel that came while poll()
    // returned takes effect here, holding no lock, before anything is
    // written through `out`. libiscsi 1.19 cancels its CM thread and frees
    // the memory `out` points into without joining it.
    pthread_testcancel();
    while (c->destroyed.load()) pause();  // see FreeChannel
    {
      // Cm::mu first (lock order): a CONNECT_REQUEST hands its id to the
      // application, which frees a slot of the listener's backlog.
      std::lock_guard<std::mutex> gl(G().mu);
      std::lock_guard<std::mutex> l(c->mu);
      if (!c->destroyed.load() && !c->q.empty()) {
        Event* e = c->q.front();
        c->q.pop_front();
        TakeCount(c);
        if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) ClaimRequest(ToId(e->ev.id));
        e->out = ToId(e->ev.id)->events_out;
        e->out->fetch_add(1, std::memory_order_relaxed);
        CM_DBG("taken %s id %p", rdma_event_str(e->ev.event), (void*)e->ev.id);
        *out = &e->ev;
        return 0;
      }
    }
    const int flags = fcntl(c->ch.fd, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK)) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{c->ch.fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && !(errno == EINTR && RestartAfterSignal())) return -1;
  }
}

}  // namespace softrnic::rdmacm
