// The rsockets API librdmacm exports (rdma/rsocket.h).
//
// Not implemented over softrnic yet: every call fails cleanly with
// errno = ENOSYS (riomap returns (off_t)-1, riowrite 0 with errno set), so
// programs that probe rsockets (rstream, rcopy, riostream, udpong) report an
// error and exit instead of crashing. rdma_cm itself is fully implemented in
// cma.cc. See docs/rdmacm.md.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#define RS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
template <class T>
T NoSys(T v) {
  errno = ENOSYS;
  return v;
}
}  // namespace

RS_EXPORT int rsocket(int, int, int) { return NoSys(-1); }
RS_EXPORT int rbind(int, const struct sockaddr*, socklen_t) { return NoSys(-1); }
RS_EXPORT int rlisten(int, int) { return NoSys(-1); }
RS_EXPORT int raccept(int, struct sockaddr*, socklen_t*) { return NoSys(-1); }
RS_EXPORT int rconnect(int, const struct sockaddr*, socklen_t) { return NoSys(-1); }
RS_EXPORT int rshutdown(int, int) { return NoSys(-1); }
RS_EXPORT int rclose(int) { return NoSys(-1); }
RS_EXPORT ssize_t rrecv(int, void*, size_t, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, struct sockaddr*, socklen_t*) {
  return NoSys<ssize_t>(-1);
}
RS_EXPORT ssize_t rrecvmsg(int, struct msghdr*, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rsend(int, const void*, size_t, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rsendto(int, const void*, size_t, int, const struct sockaddr*, socklen_t) {
  return NoSys<ssize_t>(-1);
}
RS_EXPORT ssize_t rsendmsg(int, const struct msghdr*, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rread(int, void*, size_t) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rreadv(int, const struct iovec*, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rwrite(int, const void*, size_t) { return NoSys<ssize_t>(-1); }
RS_EXPORT ssize_t rwritev(int, const struct iovec*, int) { return NoSys<ssize_t>(-1); }
RS_EXPORT int rpoll(struct pollfd*, nfds_t, int) { return NoSys(-1); }
RS_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, struct timeval*) { return NoSys(-1); }
RS_EXPORT int rgetpeername(int, struct sockaddr*, socklen_t*) { return NoSys(-1); }
RS_EXPORT int rgetsockname(int, struct sockaddr*, socklen_t*) { return NoSys(-1); }
RS_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return NoSys(-1); }
RS_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return NoSys(-1); }
RS_EXPORT int rfcntl(int, int, ...) { return NoSys(-1); }
RS_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return NoSys<off_t>(-1); }
RS_EXPORT int riounmap(int, void*, size_t) { return NoSys(-1); }
RS_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) { return NoSys<size_t>(0); }
