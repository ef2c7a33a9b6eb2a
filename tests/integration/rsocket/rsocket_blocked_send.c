/* A blocking rsend whose peer stops reading sleeps instead of spinning
 * (src/rdmacm/rsocket.cc, WaitSendSlot), and delivers every byte once the
 * peer reads again.
 *
 *   it_rsocket_blocked_send
 *
 * A forked child is an rsocket server on an ephemeral port of 127.0.0.1:
 * it accepts, stays away for HOLD_MS without reading, then reads the whole
 * stream and checks every byte against the pattern. The parent connects and
 * sends SEND_BYTES in one blocking rsend: the call fills the child's receive
 * slots and its own send slots within microseconds, then waits for the
 * child. Over that call the parent thread's CPU time (CLOCK_THREAD_CPUTIME_ID:
 * the engine's progress thread, which retries the RNR-NAKed SENDs, is not
 * counted) may exceed that of the same send to a second child that reads at
 * once by at most a tenth of HOLD_MS; a send that yields in a loop while it
 * waits keeps its thread on a CPU for most of it. (An absolute bound failed
 * on a loaded CI machine: the copying alone took 80 ms of CPU there, 20-33
 * ms on a quiet one.)
 *
 * Built against the system rdma-core headers and libraries, run with
 * LD_LIBRARY_PATH at softrnic's (as it_rsocket_hostile_peer is).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rsocket_listen.h"

#define SEND_BYTES (8u << 20)
#define HOLD_MS 800

static uint8_t pattern(size_t i) { return (uint8_t)(i * 131u + (i >> 12)); }

static double now_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The child: 0 when every byte arrived intact, else a code it prints why. */
static int server(int port_pipe, int hold_ms) {
  uint16_t port;
  int l = listen_loopback("server", &port);
  if (l < 0) return 3;
  if (write(port_pipe, &port, sizeof port) != sizeof port) return 3;
  int s = raccept(l, NULL, NULL);
  if (s < 0) {
    perror("server: raccept");
    return 3;
  }
  if (hold_ms > 0) usleep((useconds_t)hold_ms * 1000);
  uint8_t* buf = malloc(SEND_BYTES);
  size_t got = 0;
  while (got < SEND_BYTES) {
    ssize_t n = rrecv(s, buf + got, SEND_BYTES - got, 0);
    if (n <= 0) {
      fprintf(stderr, "server: rrecv %zd (%s) after %zu bytes\n", n, n ? strerror(errno) : "EOF",
              got);
      return 4;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < SEND_BYTES; ++i) {
    if (buf[i] != pattern(i)) {
      fprintf(stderr, "server: byte %zu is 0x%02x, sent 0x%02x\n", i, buf[i], pattern(i));
      return 5;
    }
  }
  rclose(s);
  rclose(l);
  free(buf);
  return 0;
}

/* Forks a server that holds for hold_ms; returns its pid, or -1. */
static pid_t start_server(int hold_ms, uint16_t* port) {
  int port_pipe[2];
  if (pipe(port_pipe) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(port_pipe[0]);
    _exit(server(port_pipe[1], hold_ms));
  }
  close(port_pipe[1]);
  if (read(port_pipe[0], port, sizeof *port) != sizeof *port) {
    fprintf(stderr, "server did not start\n");
    return -1;
  }
  close(port_pipe[0]);
  return pid;
}

/* One blocking send of the whole pattern to the server at port; the
 * sending thread's wall and CPU time over the rsend calls. 0 on success. */
static int send_all(uint16_t port, pid_t server_pid, double* wall, double* cpu) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || rconnect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("client: rconnect");
    return 2;
  }
  uint8_t* buf = malloc(SEND_BYTES);
  for (size_t i = 0; i < SEND_BYTES; ++i) buf[i] = pattern(i);
  const double wall0 = now_ms(CLOCK_MONOTONIC), cpu0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
  size_t sent = 0;
  while (sent < SEND_BYTES) {
    ssize_t n = rsend(s, buf + sent, SEND_BYTES - sent, 0);
    if (n <= 0) {
      fprintf(stderr, "FAIL: rsend %zd (%s) after %zu bytes\n", n, strerror(errno), sent);
      return 1;
    }
    sent += (size_t)n;
  }
  *wall = now_ms(CLOCK_MONOTONIC) - wall0;
  *cpu = now_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  int status = 0;
  waitpid(server_pid, &status, 0);
  rclose(s);
  free(buf);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAIL: the server did not receive the stream intact (status 0x%x)\n", status);
    return 1;
  }
  return 0;
}

int main(void) {
  /* Both servers are forked before this process touches rsockets (no
   * verbs use across fork). */
  uint16_t eager_port, held_port;
  const pid_t eager = start_server(0, &eager_port);
  const pid_t held = start_server(HOLD_MS, &held_port);
  if (eager < 0 || held < 0) return 2;
  /* The eager reader first: what the copying itself costs the sending thread
   * on this machine, now (a loaded CI machine inflates it several times). */
  double base_wall, base_cpu, wall, cpu;
  if (send_all(eager_port, eager, &base_wall, &base_cpu) != 0) return 1;
  if (send_all(held_port, held, &wall, &cpu) != 0) return 1;
  fprintf(stderr,
          "rsend of %u bytes: to an eager reader %.0f ms, %.1f ms of the sending thread's CPU; "
          "to a reader away for %d ms %.0f ms, %.1f ms of CPU\n",
          SEND_BYTES, base_wall, base_cpu, HOLD_MS, wall, cpu);
  int bad = 0;
  if (wall < HOLD_MS / 2) {
    fprintf(stderr, "FAIL: rsend returned after %.0f ms: it never waited for the reader\n", wall);
    bad = 1;
  }
  /* Waiting may cost a tenth of the wait on top of the copying. */
  if (cpu - base_cpu > HOLD_MS / 10) {
    fprintf(stderr, "FAIL: the blocked rsend used %.0f ms more CPU than an unblocked one\n",
            cpu - base_cpu);
    bad = 1;
  }
  if (!bad) fprintf(stderr, "PASS\n");
  return bad;
}
