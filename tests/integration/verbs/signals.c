/*
 * Signals an application directs at its own process reach the application,
 * never softrnic's threads (src/common/background_thread.h).
 *
 * tgt's tgtd is the model: its threads block SIGUSR2 and the main loop takes
 * it from a signalfd; a disk thread does kill(getpid(), SIGUSR2). The kernel
 * gives a process-directed signal to any thread that does not block it, so a
 * softrnic thread that blocked nothing took it and its default action killed
 * tgtd at the first SCSI READ (issue 44).
 *
 * Here softrnic's threads start first (a loopback RC pair moving data and an
 * rdma_cm listener), then the application blocks SIGUSR1, SIGUSR2, SIGALRM
 * and SIGCHLD in its main thread and reads the last three from a signalfd;
 * one application thread unblocks SIGUSR1 and has a handler for it. Then,
 * ROUNDS times, with an RDMA WRITE between: kill(getpid(), SIGUSR2),
 * kill(getpid(), SIGALRM), a forked child that exits (SIGCHLD), and
 * kill(getpid(), SIGUSR1). Every one must arrive where the application asked
 * (signalfd, or the handler on the one thread that unblocked it) and the
 * process must live. The softrnic threads' masks (SigBlk in
 * /proc/self/task/N/status) are checked too, and at least the engine's and
 * the CM's threads must exist, so that the test cannot pass vacuously.
 *
 * Built against the system rdma-core headers and libraries, run over
 * softrnic's (LD_LIBRARY_PATH).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "verbs_test_util.h"

#define ROUNDS 20

static atomic_int g_usr1_count;
static atomic_int g_usr1_tid;  /* the thread the last SIGUSR1 ran on */
static atomic_int g_worker_tid;
static atomic_int g_stop;

static void on_usr1(int sig) {
  (void)sig;
  atomic_store(&g_usr1_tid, (int)syscall(SYS_gettid));
  atomic_fetch_add(&g_usr1_count, 1);
}

/* The one application thread that takes SIGUSR1 (by handler). */
static void *worker(void *arg) {
  (void)arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &s, NULL);
  atomic_store(&g_worker_tid, (int)syscall(SYS_gettid));
  while (!atomic_load(&g_stop)) usleep(1000);
  return NULL;
}

/* The SigBlk mask of thread tid, or 0 if it cannot be read. */
static unsigned long long blocked_of(const char *tid) {
  char path[300], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned long long mask = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "SigBlk: %llx", &mask) == 1) break;
  fclose(f);
  return mask;
}

/* Checks every softrnic thread's mask; returns how many there are and sets
 * *engine / *cm when those are among them. */
static int check_softrnic_threads(int *engine, int *cm) {
  const unsigned long long want = (1ull << (SIGUSR1 - 1)) | (1ull << (SIGUSR2 - 1)) |
                                  (1ull << (SIGALRM - 1)) | (1ull << (SIGCHLD - 1)) |
                                  (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
  const unsigned long long faults = (1ull << (SIGSEGV - 1)) | (1ull << (SIGBUS - 1));
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    if (strncmp(comm, "softrnic-", 9) != 0) continue;
    ++n;
    if (strcmp(comm, "softrnic-engine") == 0) *engine = 1;
    if (strcmp(comm, "softrnic-cm") == 0) *cm = 1;
    const unsigned long long mask = blocked_of(e->d_name);
    CHECK((mask & want) == want, "thread %s (%s) blocks 0x%llx, missing 0x%llx", e->d_name, comm,
          mask, want & ~mask);
    CHECK((mask & faults) == 0, "thread %s (%s) blocks fault signals: 0x%llx", e->d_name, comm,
          mask & faults);
  }
  closedir(d);
  return n;
}

/* Waits up to 2 s for one signal on the signalfd; its number, or 0. */
static int take(int sfd) {
  struct pollfd p = {.fd = sfd, .events = POLLIN};
  if (poll(&p, 1, 2000) != 1) return 0;
  struct signalfd_siginfo si;
  if (read(sfd, &si, sizeof si) != sizeof si) return 0;
  return (int)si.ssi_signo;
}

int main(void) {
  struct loopback l;
  REQUIRE(loopback_open(&l, 4096) == 0, "loopback pair");
  REQUIRE(loopback_write(&l, 1, 1) == 0, "first WRITE");

  /* The CM's thread: a listener on the loopback address. */
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id = NULL;
  REQUIRE(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&sa) == 0 && rdma_listen(id, 4) == 0,
          "rdma_listen");

  /* Only now does the application arrange its signals, as tgtd does. */
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = on_usr1;
  act.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &act, NULL);
  sigset_t app;
  sigemptyset(&app);
  sigaddset(&app, SIGUSR1);
  sigaddset(&app, SIGUSR2);
  sigaddset(&app, SIGALRM);
  sigaddset(&app, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &app, NULL);
  sigset_t via_fd = app;
  sigdelset(&via_fd, SIGUSR1);
  const int sfd = signalfd(-1, &via_fd, SFD_CLOEXEC);
  REQUIRE(sfd >= 0, "signalfd");
  pthread_t w;
  REQUIRE(pthread_create(&w, NULL, worker, NULL) == 0, "pthread_create");
  while (atomic_load(&g_worker_tid) == 0) usleep(1000);

  int engine = 0, cm = 0;
  const int threads = check_softrnic_threads(&engine, &cm);
  CHECK(engine && cm, "softrnic threads: %d, engine %d, cm %d", threads, engine, cm);

  int wrong_thread = 0;
  for (int r = 0; r < ROUNDS; ++r) {
    CHECK(loopback_write(&l, (uint8_t)(r + 2), 1) == 0, "WRITE of round %d", r);
    kill(getpid(), SIGUSR2);
    CHECK(take(sfd) == SIGUSR2, "round %d: SIGUSR2 not on the signalfd", r);
    kill(getpid(), SIGALRM);
    CHECK(take(sfd) == SIGALRM, "round %d: SIGALRM not on the signalfd", r);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    CHECK(take(sfd) == SIGCHLD, "round %d: SIGCHLD not on the signalfd", r);
    waitpid(child, NULL, 0);
    const int before = atomic_load(&g_usr1_count);
    kill(getpid(), SIGUSR1);
    const double deadline = now_s() + 2.0;
    while (atomic_load(&g_usr1_count) == before && now_s() < deadline) usleep(100);
    CHECK(atomic_load(&g_usr1_count) == before + 1, "round %d: SIGUSR1 handler did not run", r);
    if (atomic_load(&g_usr1_tid) != atomic_load(&g_worker_tid)) ++wrong_thread;
  }
  CHECK(wrong_thread == 0, "SIGUSR1 ran on a thread other than the one that takes it, %d times in %d", wrong_thread,
        ROUNDS);

  atomic_store(&g_stop, 1);
  pthread_join(w, NULL);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  loopback_close(&l);
  printf("%d softrnic threads; %d checks, %d failures\n", threads, g_checks, g_failures);
  return g_failures ? 1 : 0;
}
