// Acknowledgement of async events (ibv_get_async_event(3)): destroying a QP,
// CQ or SRQ waits until the application has acknowledged every async event of
// it that it was handed, so an event in the application's hands never names
// freed memory (M6, docs/security.md). libibverbs does the same with the count
// the kernel's uverbs returns from destroy; here the engine's Destroy* returns
// it (engine/queues/async_queue.h). The counters are the ones rdma-core's structs
// carry: ibv_qp/ibv_srq::events_completed, ibv_cq::async_events_completed.
#pragma once

#include <pthread.h>

#include <cstdint>

#include "verbs/internal.h"

namespace softrnic::verbs {

// ibv_ack_async_event: one more event of `object` acknowledged.
template <class Object>
void CountAsyncAck(Object* object, uint32_t* completed) {
  pthread_mutex_lock(&object->mutex);
  ++*completed;
  pthread_cond_signal(&object->cond);
  pthread_mutex_unlock(&object->mutex);
}

// ibv_destroy_*: waits until `reported` events of `object` are acknowledged.
template <class Object>
void WaitForAsyncAcks(Object* object, const uint32_t* completed, uint32_t reported) {
  pthread_mutex_lock(&object->mutex);
  while (*completed < reported) pthread_cond_wait(&object->cond, &object->mutex);
  pthread_mutex_unlock(&object->mutex);
}

// The shape of ibv_destroy_qp / _cq / _srq: `destroy(&reported)` asks the
// engine to destroy the object (0 or an errno) and says how many async events
// of it were handed out; on success this waits for their acknowledgements,
// destroys the object's mutex and condition variable and frees the wrapper
// `w`. On failure the object stays usable and the errno is returned.
template <class W, class Object, class Destroy>
int DestroyAfterAsyncAcks(W* w, Object* object, const uint32_t* completed, Destroy&& destroy) {
  return DestroyThenFree(w, [&] {
    uint32_t reported = 0;
    const int rc = destroy(&reported);
    if (rc == 0) {
      WaitForAsyncAcks(object, completed, reported);
      pthread_mutex_destroy(&object->mutex);
      pthread_cond_destroy(&object->cond);
    }
    return rc;
  });
}

}  // namespace softrnic::verbs
