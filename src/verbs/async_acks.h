// Acknowledgement of async events (ibv_get_async_event(3)): destroying a QP,
// CQ or SRQ waits until the application has acknowledged every async event of
// it that it was handed, so an event in the application's hands never names
// freed memory (M6, docs/security.md). libibverbs does the same with the count
// the kernel's uverbs returns from destroy; here the engine's Destroy* returns
// it (engine/async_queue.h). The counters are the ones rdma-core's structs
// carry: ibv_qp/ibv_srq::events_completed, ibv_cq::async_events_completed.
#pragma once

#include <pthread.h>

#include <cstdint>

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

}  // namespace softrnic::verbs
