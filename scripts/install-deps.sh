#!/usr/bin/env bash
# Install everything softrnic needs to build, test, demo and benchmark on
# Debian 12 (bookworm). Idempotent: when every package is already installed
# it only runs dpkg-query and exits (well under a second).
#
#   scripts/install-deps.sh            # install what is missing (needs root)
#   scripts/install-deps.sh --check    # only report what is missing (exit 1 if any)
#   SOFTRNIC_SKIP_DEPS=1 ...           # skip entirely (used by test.sh/demo.sh)
set -euo pipefail

if [[ "${SOFTRNIC_SKIP_DEPS:-0}" == "1" ]]; then
  echo "install-deps: skipped (SOFTRNIC_SKIP_DEPS=1)"
  exit 0
fi

# Required: without these the build or the test suite cannot run.
REQUIRED=(
  build-essential cmake g++ ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libisal-dev zlib1g-dev
  # HMAC-SHA256 of the device GUIDs (src/engine/device_identity.cc); sealed
  # RC (src/seal: OpenSSL's HKDF and X25519, libgcrypt's AES-256-GCM;
  # libsodium only for bench/sealed/aead_bench's comparison).
  libssl-dev libgcrypt20-dev libsodium-dev
  # Fault-lab scenario files (src/faults/scenario_parse.cc), and the JSON
  # schema check of its traces (tests/integration/faults).
  libtomlplusplus-dev python3-jsonschema
  libibverbs-dev librdmacm-dev ibverbs-providers
  ibverbs-utils perftest rdmacm-utils qperf
  # Debian's RDMA consumers whose every ELF file must load against softrnic's
  # libraries (tests/integration/abi); ibverbs-providers is also read at
  # build time to generate the provider stand-ins (scripts/gen-provider-stubs.py).
  python3-pyverbs libucx0 ucx-utils libfabric1 libfabric-bin
  openmpi-bin libopenmpi3 libopenmpi-dev mpich libmpich12 libmpich-dev
  python3 python3-scapy tshark tcpdump
  # Storage and virtual machines over softrnic (docs/storage.md): tgt's iSER
  # target, libiscsi's initiator tools, QEMU's iscsi driver (qemu-io) and
  # QEMU's RDMA live migration.
  tgt libiscsi-bin qemu-utils qemu-block-extra qemu-system-x86
  # The Prometheus text parser tools_prometheus checks `softrnic stat -P` with.
  python3-prometheus-client
  iproute2 nftables iputils-ping procps psmisc coreutils
  clang libclang-rt-14-dev
)
# Optional: benchmarks and plots (peers to compare against). Failure to
# install these is reported but does not fail the script.
OPTIONAL=(
  python3-matplotlib
  # Stacks of a test's process that hangs (tests/integration/lib/common.sh
  # dump_stacks), printed before it is killed.
  gdb
)

missing_from() {
  local p status
  for p in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || echo "$p"
  done
}

mapfile -t miss_req < <(missing_from "${REQUIRED[@]}")
mapfile -t miss_opt < <(missing_from "${OPTIONAL[@]}")

if [[ "${1:-}" == "--check" ]]; then
  if (( ${#miss_req[@]} + ${#miss_opt[@]} == 0 )); then
    echo "install-deps: all packages present"; exit 0
  fi
  echo "install-deps: missing required: ${miss_req[*]:-none}"
  echo "install-deps: missing optional: ${miss_opt[*]:-none}"
  exit 1
fi

if (( ${#miss_req[@]} + ${#miss_opt[@]} == 0 )); then
  echo "install-deps: all ${#REQUIRED[@]}+${#OPTIONAL[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "install-deps: missing packages (${miss_req[*]} ${miss_opt[*]}) and not root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

echo "install-deps: installing: ${miss_req[*]} ${miss_opt[*]}"
# tshark/wireshark-common must not ask whether non-root users may capture.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
  "${SUDO[@]}" debconf-set-selections

"${SUDO[@]}" apt-get update -q

if (( ${#miss_req[@]} )); then
  # --no-install-recommends keeps the image small; nothing we need comes only
  # as a recommendation (tshark pulls wireshark-common as a hard dependency).
  "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" --no-install-recommends "${miss_req[@]}"
fi
for p in "${miss_opt[@]}"; do
  "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" --no-install-recommends "$p" ||
    echo "install-deps: WARNING: optional package $p could not be installed" >&2
done

mapfile -t still < <(missing_from "${REQUIRED[@]}")
if (( ${#still[@]} )); then
  echo "install-deps: ERROR: still missing: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: done"
