// UdpConfig from the environment: SOFTRNIC_BIND, SOFTRNIC_PORT, SOFTRNIC_FAULTS
// (and SOFTRNIC_FAULTS_FILE),
// SOFTRNIC_GSO, SOFTRNIC_REPLY_SOCKET (read through config::Environment).
#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "config/environment.h"
#include "faults/scenario_parse.h"
#include "transport/udp_transport.h"
#include "log/log.h"

namespace softrnic::transport {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool ParseUdpConfig(const char* bind, const char* port, const char* faults, UdpConfig* out,
                    std::string* error) {
  bool ok = true;
  auto fail = [&](std::string message) {
    if (ok && error != nullptr) *error = std::move(message);
    ok = false;
  };

  if (bind != nullptr && !Trim(bind).empty()) {
    std::vector<std::string> addresses;
    std::string_view rest = bind;
    bool bind_ok = true;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string item(Trim(rest.substr(0, comma)));
      // Syntax only here: IPv4, or IPv6 with an optional %interface
      // (OpenEndpoints resolves the interface and rejects what cannot be
      // bound, ParseBindAddress).
      in_addr a{};
      in6_addr a6{};
      const std::string ip6 = item.substr(0, item.find('%'));
      if (item.empty() || (inet_pton(AF_INET, item.c_str(), &a) != 1 &&
                           inet_pton(AF_INET6, ip6.c_str(), &a6) != 1)) {
        fail("SOFTRNIC_BIND: '" + item +
             "' is not an IPv4 or IPv6 address (expected e.g. 10.0.0.1,fd77::1,fe80::1%eth0)");
        bind_ok = false;
        break;
      }
      addresses.push_back(item);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    if (bind_ok) out->bind_addresses = std::move(addresses);
  }

  if (port != nullptr && !Trim(port).empty()) {
    const std::string text(Trim(port));
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || end != text.c_str() + text.size() || v < 0 || v > 65535 || text[0] == '+' ||
        text[0] == '-') {
      fail("SOFTRNIC_PORT: '" + text + "' is not a UDP port (0..65535)");
    } else {
      out->port = static_cast<uint16_t>(v);
    }
  }

  if (faults != nullptr && !Trim(faults).empty()) {
    faults::ParseResult parsed = faults::ParseOneLine(faults);
    if (!parsed.ok) {
      out->faults_error = "SOFTRNIC_FAULTS: " + parsed.error;
      fail(out->faults_error);
    } else {
      out->faults = std::move(parsed.scenario);
    }
  }
  return ok;
}

UdpConfig UdpConfigFromEnvironment(const config::Environment& env) {
  UdpConfig config;
  std::string error;
  if (!ParseUdpConfig(env.Raw("SOFTRNIC_BIND"), env.Raw("SOFTRNIC_PORT"), nullptr, &config,
                      &error)) {
    // No error channel in this signature: say so loudly and keep the defaults
    // for the bad variable rather than run with a half-understood setting.
    SOFTRNIC_LOG(kWarn, "ignoring bad environment setting: %s", error.c_str());
  }
  // The fault scenario (SOFTRNIC_FAULTS or SOFTRNIC_FAULTS_FILE): a bad one
  // is not ignored but kept, and CreateTransport fails with it: a fault
  // test run without its faults would pass for the wrong reason.
  faults::ParseResult scenario = faults::ScenarioFromEnvironment(env);
  if (scenario.ok) {
    config.faults = std::move(scenario.scenario);
  } else {
    config.faults_error = scenario.error;
    SOFTRNIC_LOG(kError, "fault scenario: %s", scenario.error.c_str());
  }
  config.segmentation = env.Flag("SOFTRNIC_GSO");
  config.reply_sockets = env.Flag("SOFTRNIC_REPLY_SOCKET");
  config.host_nic = env.Flag("SOFTRNIC_HOST_NIC");
  config.nicd_path = env.Raw("SOFTRNIC_NICD") ? env.Text("SOFTRNIC_NICD") : "";
  return config;
}

}  // namespace softrnic::transport
