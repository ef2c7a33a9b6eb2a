/* rgetsockname / rgetpeername as rdma-core's librspreload calls them: a
 * NULL address with a length of 0 asks for the size only and succeeds
 * (librspreload makes exactly that call when rconnect fails, before it falls
 * back to a kernel socket; softrnic answered EINVAL, so a preloaded program
 * got "connect: Invalid argument" instead of its TCP fallback). A NULL
 * address with room for one, and a NULL length, are EFAULT, as getsockname(2)
 * says for a bad address.
 *
 * Built against the system rdma-core headers and libraries, run over
 * softrnic's (LD_LIBRARY_PATH).
 */
#include <errno.h>
#include <netinet/in.h>
#include <rdma/rsocket.h>
#include <stdio.h>

static int failures;

static void expect(int cond, const char *what) {
  if (!cond) {
    ++failures;
    fprintf(stderr, "FAIL: %s (errno %d)\n", what, errno);
  }
}

int main(void) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) {
    perror("rsocket");
    return 2;
  }
  int (*const calls[2])(int, struct sockaddr *, socklen_t *) = {rgetsockname, rgetpeername};
  const char *names[2] = {"rgetsockname", "rgetpeername"};
  for (int i = 0; i < 2; ++i) {
    char what[96];
    socklen_t len = 0;
    snprintf(what, sizeof what, "%s(NULL, &0) succeeds and gives the size", names[i]);
    expect(calls[i](s, NULL, &len) == 0 && len == sizeof(struct sockaddr_in), what);
    len = sizeof(struct sockaddr_in);
    errno = 0;
    snprintf(what, sizeof what, "%s(NULL, &16) is EFAULT", names[i]);
    expect(calls[i](s, NULL, &len) == -1 && errno == EFAULT, what);
    struct sockaddr_in a;
    errno = 0;
    snprintf(what, sizeof what, "%s(&a, NULL) is EFAULT", names[i]);
    expect(calls[i](s, (struct sockaddr *)&a, NULL) == -1 && errno == EFAULT, what);
    len = sizeof a;
    snprintf(what, sizeof what, "%s(&a, &16) succeeds", names[i]);
    expect(calls[i](s, (struct sockaddr *)&a, &len) == 0 && len == sizeof a, what);
  }
  errno = 0;
  socklen_t len = 0;
  expect(rgetsockname(12345, NULL, &len) == -1 && errno == EBADF, "an unknown socket is EBADF");
  rclose(s);
  if (!failures) printf("PASS\n");
  return failures ? 1 : 0;
}
