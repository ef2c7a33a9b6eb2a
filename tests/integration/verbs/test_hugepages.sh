#!/bin/bash
# Registered memory in 2 MiB huge pages (issue 15): perftest's
# --use_hugepages (its buffers from shmget(SHM_HUGETLB)) for WRITE, READ and
# SEND between two processes on one host, over the shared-memory path and
# over UDP. The test allocates the huge pages itself (vm.nr_hugepages, put
# back at exit), checks that the server's buffer really is in huge pages
# (its smaps), and that every run completes with its bandwidth line.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ib_write_bw ib_read_bw ib_send_bw
softrnic_require_lib
softrnic_env

before=$(cat /proc/sys/vm/nr_hugepages)
softrnic_on_exit "echo $before > /proc/sys/vm/nr_hugepages"
want=$(( before + 16 ))
echo $want > /proc/sys/vm/nr_hugepages
free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
(( free >= 8 )) || skip "could not allocate 2 MiB huge pages (HugePages_Free $free)"
log "huge pages: $before -> $(cat /proc/sys/vm/nr_hugepages), free $free"

# server_huge_kb NAME: huge_kb = KiB of huge pages mapped by the tool that
# start_bg NAME runs. start_bg's pid is timeout's; its child is the tool
# (env execs it). (Not pgrep: under the sanitizer preload it can hang.)
server_huge_kb() {
  local pid
  pid=$(children_of "$(bg_pid "$1")" | head -1)
  [[ -n $pid ]] || return 0
  huge_kb=$(awk '/^(Private|Shared)_Hugetlb:/ {s += $2} END {print s + 0}' \
              "/proc/$pid/smaps" 2>/dev/null)
  huge_kb=${huge_kb:-0}
}

fail=0
port=18631
for transport in shm udp; do
  for tool in ib_write_bw ib_read_bw ib_send_bw; do
    port=$((port + 1))
    args=(--use_hugepages -d softrnic0 -s 65536 -D 2 -p $port)
    start_bg srv 60 env SOFTRNIC_TRANSPORT=$transport $tool "${args[@]}"
    wait_for_port $port 10 || { fail=$((fail + 1)); log "FAIL $tool $transport: no server"; continue; }
    start_bg cli 60 env SOFTRNIC_TRANSPORT=$transport $tool "${args[@]}" 127.0.0.1
    # Mid-run: the server's registered buffer is a SysV huge-page segment.
    # Sampled until it shows (the first run of a loaded machine can take
    # more than a second to map it) or the run is over.
    huge_kb=0
    for _ in $(seq 50); do
      server_huge_kb srv
      (( huge_kb >= 2048 )) && break
      sleep 0.2
    done
    if wait_bg cli 30 && wait_bg srv 30 &&
       line=$(bg_log cli | grep -E '^ *65536 +[0-9]+ ') && (( ${huge_kb:-0} >= 2048 )); then
      log "PASS $tool $transport: ${huge_kb} KiB of the server in huge pages; $line"
    else
      fail=$((fail + 1))
      log "FAIL $tool $transport (server huge-page KiB: ${huge_kb:-none})"
      bg_log cli | tail -5 >&2
      bg_log srv | tail -5 >&2
      kill_bg cli; kill_bg srv
    fi
  done
done
(( fail == 0 )) || die "$fail run(s) failed"
log "PASS: WRITE, READ and SEND from huge-page buffers over shared memory and UDP"
