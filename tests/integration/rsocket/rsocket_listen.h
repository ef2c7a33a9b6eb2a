/* What the rsocket test programs share: a listening rsocket on an
 * ephemeral port of 127.0.0.1. */
#pragma once

#include <arpa/inet.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <stdio.h>

/* A listening rsocket (backlog 1) and its port in *port; -1 (with a
 * message naming `who`) on failure. */
static int listen_loopback(const char* who, uint16_t* port) {
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (l < 0 || rbind(l, (struct sockaddr*)&a, sizeof a) != 0 || rlisten(l, 1) != 0 ||
      rgetsockname(l, (struct sockaddr*)&a, &alen) != 0) {
    fprintf(stderr, "%s: listen: ", who);
    perror(NULL);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return l;
}
