// The state softrnic's librdmacm shares between its parts: the process's
// CM (G()), the tunables, the IPv4 <-> GID helpers, the host registry of
// same-host listeners, the device an id is bound to, and the id objects
// themselves. See cm_internal.h for the file map and the locking rules.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "config/environment.h"
#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"
#include "rdmacm/host_registry.h"

namespace softrnic::rdmacm {

// ---------------------------------------------------------------- tunables
// Retransmission of REQ / REP / DREQ / SIDR_REQ: every kRetryMs, kRetries
// times, then the timeout event. SOFTRNIC_CM_TIMEOUT_MS overrides the
// interval, SOFTRNIC_CM_RETRIES the count.
// Read once per process through the table (docs/configuration.md).
const config::Environment& Env() {
  static const config::Environment* env = new config::Environment(config::Environment::FromProcess());
  return *env;
}
int RetryMs() {
  static const int v = static_cast<int>(Env().Integer("SOFTRNIC_CM_TIMEOUT_MS"));
  return v;
}
int Retries() {
  static const int v = static_cast<int>(Env().Integer("SOFTRNIC_CM_RETRIES"));
  return v;
}
int TimeWaitMs() {
  static const int v = static_cast<int>(Env().Integer("SOFTRNIC_CM_TIMEWAIT_MS"));
  return v;
}
bool Debug() {
  static const bool v = Env().Flag("SOFTRNIC_CM_DEBUG");
  return v;
}

long long DebugUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// Never destroyed: the CM thread may outlive static destructors. A forked
// child starts over with a fresh CM (its own device, QP1 and thread, as the
// verbs shim gives it its own device); ids inherited from the parent are not
// usable in the child.
Cm* g_cm = new Cm;
Cm& G() { return *g_cm; }
void AtForkChild() { g_cm = new Cm; }
void ResetCmForTest() {
  Cm* old_cm = g_cm;
  g_cm = new Cm;
  delete old_cm;
}

// ---------------------------------------------------------------- helpers
void SetGidFromIp(ibv_gid* g, uint32_t ip_host) {
  std::memset(g, 0, sizeof(*g));
  g->raw[10] = 0xff;
  g->raw[11] = 0xff;
  uint32_t n = htonl(ip_host);
  std::memcpy(&g->raw[12], &n, 4);
}
uint32_t IpFromGid(const uint8_t* raw) {
  uint32_t n;
  std::memcpy(&n, raw + 12, 4);
  return ntohl(n);
}
std::string IpStr(uint32_t ip_host) {
  in_addr a{htonl(ip_host)};
  char b[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, b, sizeof b);
  return b;
}

int GidIndexForIp(uint32_t ip) {
  Cm& g = G();
  for (size_t i = 0; i < g.gid_ip.size(); ++i)
    if (g.gid_ip[i] == ip && ip) return int(i);
  return -1;
}

uint16_t SinPort(const sockaddr_in& s) { return ntohs(s.sin_port); }

bool GidIsIpv4(const ibv_gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, 12) == 0;
}

int GidIndexForGid(const ibv_gid& gid) {
  if (GidIsIpv4(gid)) return GidIndexForIp(IpFromGid(gid.raw));
  static constexpr uint8_t kZero[16] = {};
  if (std::memcmp(gid.raw, kZero, 16) == 0) return -1;
  Cm& g = G();
  for (size_t i = 0; i < g.gid6.size(); ++i)
    if (std::memcmp(g.gid6[i].raw, gid.raw, 16) == 0) return int(i);
  return -1;
}

ibv_gid LocalGid(int index) {
  Cm& g = G();
  ibv_gid out{};
  if (index < 0) return out;
  static constexpr uint8_t kZero[16] = {};
  if (size_t(index) < g.gid6.size() && std::memcmp(g.gid6[size_t(index)].raw, kZero, 16) != 0)
    return g.gid6[size_t(index)];
  if (size_t(index) < g.gid_ip.size()) SetGidFromIp(&out, g.gid_ip[size_t(index)]);
  return out;
}

std::string GidStr(const ibv_gid& g) {
  if (GidIsIpv4(g)) return IpStr(IpFromGid(g.raw));
  char b[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, b, sizeof b);
  return b;
}

bool GidFromSockaddr(const sockaddr* a, ibv_gid* out) {
  if (a->sa_family == AF_INET) {
    sockaddr_in s;
    std::memcpy(&s, a, sizeof s);
    SetGidFromIp(out, ntohl(s.sin_addr.s_addr));
    return true;
  }
  if (a->sa_family == AF_INET6) {
    sockaddr_in6 s;
    std::memcpy(&s, a, sizeof s);
    std::memcpy(out->raw, &s.sin6_addr, 16);
    return true;
  }
  return false;
}

uint16_t SockPort(const sockaddr* a) {
  // sin_port and sin6_port are at the same offset.
  sockaddr_in s;
  std::memcpy(&s, a, sizeof s);
  return ntohs(s.sin_port);
}

// ---------------------------------------------------------------- host registry
// Same-host listeners are found through the per-user registry
// (rdmacm/host_registry.h: /dev/shm/softrnic-cm-<euid>, security review H3).
// Called with G().mu held.
HostRegistry& Registry() {
  static HostRegistry* registry = new HostRegistry(HostRegistry::DefaultDirectory(),  // outlives exit
                                                     HostRegistry::FallbackDirectory());
  return *registry;
}

bool RegRead(int ps, uint16_t port, long* pid, uint32_t* ip) {
  const std::optional<RegistryEntry> e = Registry().Lookup(G().netns, ps, port);
  if (!e) return false;
  *pid = e->pid;
  *ip = e->ip;
  return true;
}

// A listener is also claimed at the host NIC (docs/host-nic.md), so that
// REQs arriving at the host's shared addresses reach this process.
int RegAdd(int ps, uint16_t port) {
  Cm& g = G();
  if (g.ctx != nullptr && g.lane >= 0) {
    const int rc = softrnic_claim_cm_service(g.ctx, static_cast<uint16_t>(ps), port, 1);
    if (rc == EADDRINUSE) return rc;
  }
  if (g.loop_idx < 0) return 0;  // nothing to publish (explicit SOFTRNIC_BIND)
  const int rc = Registry().Add(g.netns, ps, port, g.gid_ip[g.loop_idx]);
  if (rc != 0 && g.ctx != nullptr && g.lane >= 0)
    (void)softrnic_claim_cm_service(g.ctx, static_cast<uint16_t>(ps), port, 0);
  return rc;
}

void RegRemove(int ps, uint16_t port) {
  Cm& g = G();
  if (g.ctx != nullptr && g.lane >= 0)
    (void)softrnic_claim_cm_service(g.ctx, static_cast<uint16_t>(ps), port, 0);
  Registry().Remove(g.netns, ps, port);
}

// ---------------------------------------------------------------- devices
ibv_pd* DefaultPd(ibv_context* ctx) {
  Cm& g = G();
  if (!ctx) return nullptr;  // a CM with no device (unit tests)
  auto it = g.default_pd.find(ctx);
  if (it != g.default_pd.end()) return it->second;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd) g.default_pd[ctx] = pd;
  return pd;
}

// Binds the id to the process's device, as librdmacm's ucma_get_device
// does: verbs context, port and the device's shared PD (rdma_cm_id.pd is
// set as soon as the id has a device; applications and pyverbs read it
// before they create a QP).
void AttachDevice(Id* id) {
  Cm& g = G();
  id->id.verbs = g.ctx;
  id->id.port_num = 1;
  if (!id->id.pd) id->id.pd = DefaultPd(g.ctx);
}

Id* NewIdLocked(Channel* c, void* ctx, rdma_port_space ps, ibv_qp_type qpt) {
  auto* id = new Id;
  std::memset(&id->id, 0, sizeof id->id);
  id->chan = c;
  id->id.channel = &c->ch;
  id->id.context = ctx;
  id->id.ps = ps;
  id->id.qp_type = qpt;
  G().ids.insert(id);
  return id;
}

uint8_t ClampRd(uint8_t v) { return v > kMaxRdAtomic ? kMaxRdAtomic : v; }

uint8_t PortActiveMtu(ibv_context* ctx) {
  ibv_port_attr pa{};
  if (!ctx || ibv_query_port(ctx, 1, &pa) != 0) return IBV_MTU_1024;
  return static_cast<uint8_t>(pa.active_mtu);
}

}  // namespace softrnic::rdmacm

using namespace softrnic::rdmacm;

CMA_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}
