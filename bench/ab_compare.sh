#!/usr/bin/env bash
# ab_compare.sh - two softrnic builds side by side, alternated (A B A B ...),
# with Debian's unmodified perftest over each build's libibverbs.so.1.
#
#   bench/ab_compare.sh [--record LABEL] A_LIB_DIR B_LIB_DIR [ROUNDS]   (default 5 rounds)
#
#   --record LABEL appends the table, under LABEL with the date and the
#   command, to bench/ab_results.md and refreshes that section of
#   docs/benchmarks.md (bench/report.py includes the file when it
#   regenerates the report, so recorded comparisons survive a full run).
#
#   e.g. git worktree add --detach /tmp/base <commit> &&
#        (cd /tmp/base && scripts/build.sh RelWithDebInfo build --target softrnic_verbs_libs)
#        bench/ab_compare.sh /tmp/base/build/lib build/lib 5
#
# Why alternated: these 2-vCPU VMs drift by 10-20% over minutes (other
# tenants, frequency), so A's runs and B's runs are interleaved round by
# round and compared by median; a difference smaller than the spread
# (min-max of either side) is noise.
#
# Placement: server and client on this host, one pair at a time; unpinned
# by default (as users run perftest); AB_PIN=1 pins the server to CPU 0 and
# the client to CPU 1 (their progress threads inherit the pin), which
# narrows the spread the scheduler adds. Each figure is perftest's own:
# t_typical (median) for latency in us, BW average for bandwidth in MB/s;
# each latency run also gives its average and its 99.9th percentile (the
# *_avg_us and *_p999_us rows: the tail next to the median).
#   AB_ONLY=REGEX      only the figures whose name matches (e.g. 'shm_.*lat')
#   AB_LAT_ITERS=N     iterations per latency run (default 20000; a p99.9
#                      from 20,000 is its 20 slowest, 200,000 steadies it)
# Prints one TSV row per run on stderr and a markdown table on stdout.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CMDLINE="bench/ab_compare.sh $*"
RECORD=""
if [[ ${1:-} == --record ]]; then RECORD=${2:?--record LABEL}; shift 2; fi
A=${1:?A_LIB_DIR}; B=${2:?B_LIB_DIR}; ROUNDS=${3:-5}
for d in "$A" "$B"; do
  [[ -e "$d/libibverbs.so.1" ]] || { echo "ab_compare: no libibverbs.so.1 in $d" >&2; exit 2; }
done
for t in ib_write_lat ib_send_lat ib_write_bw; do
  command -v "$t" >/dev/null || { echo "ab_compare: $t missing (apt-get install perftest)" >&2; exit 2; }
done
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
port=$((20000 + RANDOM % 20000))

# run LIB TRANSPORT TOOL SIZE ITERS: prints the figure, or NA
run() {
  local lib=$1 tr=$2 tool=$3 size=$4 n=$5
  port=$((port + 1))
  local env=(env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT="$tr" SOFTRNIC_MTU=4096)
  local pin_srv=() pin_cli=()
  if [[ ${AB_PIN:-0} == 1 ]]; then pin_srv=(taskset -c 0); pin_cli=(taskset -c 1); fi
  timeout 90 "${pin_srv[@]}" "${env[@]}" "$tool" -F -p "$port" -s "$size" -n "$n" >"$TMP/srv" 2>&1 &
  local srv=$!
  local i
  for i in $(seq 50); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
  timeout 90 "${pin_cli[@]}" "${env[@]}" "$tool" -F -p "$port" -s "$size" -n "$n" 127.0.0.1 >"$TMP/cli" 2>&1
  wait "$srv"
  # perftest rows: lat "bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9",
  # bw "bytes iters peak avg msgrate": latency prints "typical avg p99.9"
  if [[ $tool == *bw ]]; then
    awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { print $4; f = 1 } END { if (!f) print "NA" }' "$TMP/cli"
  else
    awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ && NF >= 9 { print $5, $6, $9; f = 1 } END { if (!f) print "NA NA NA" }' "$TMP/cli"
  fi
}

LN=${AB_LAT_ITERS:-20000}
FIGS=(
  "shm_write_lat_8B_us shm ib_write_lat 8 $LN"
  "shm_send_lat_8B_us shm ib_send_lat 8 $LN"
  "shm_write_bw_64KiB_MBps shm ib_write_bw 65536 20000"
  "udp_write_lat_8B_us udp ib_write_lat 8 $LN"
  "udp_send_lat_8B_us udp ib_send_lat 8 $LN"
  "udp_write_bw_64KiB_MBps udp ib_write_bw 65536 5000"
)
: >"$TMP/rows"
LOAD0=$(cut -d" " -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
  for side in A B; do
    lib=$A; [[ $side == B ]] && lib=$B
    for f in "${FIGS[@]}"; do
      read -r name tr tool size n <<<"$f"
      [[ -n ${AB_ONLY:-} && ! $name =~ $AB_ONLY ]] && continue
      v=$(run "$lib" "$tr" "$tool" "$size" "$n")
      if [[ $tool == *lat ]]; then
        read -r typ avg p999 <<<"$v"
        printf '%s\t%s\t%s\t%s\n' "$r" "$side" "$name" "$typ" "$r" "$side" "${name%_us}_avg_us" "$avg" \
          "$r" "$side" "${name%_us}_p999_us" "$p999" | tee -a "$TMP/rows" >&2
      else
        printf '%s\t%s\t%s\t%s\n' "$r" "$side" "$name" "$v" | tee -a "$TMP/rows" >&2
      fi
    done
  done
done

python3 - "$TMP/rows" "$A" "$B" "$ROUNDS" "${AB_PIN:-0}" "$LN" >"$TMP/table" <<'EOF'
import statistics, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().splitlines()]
vals = {}
for _, side, name, v in rows:
    if v != 'NA':
        vals.setdefault((name, side), []).append(float(v))
pin = "pinned (server CPU 0, client CPU 1)" if sys.argv[5] == "1" else "unpinned"
print(f"A = {sys.argv[2]}, B = {sys.argv[3]}, {sys.argv[4]} alternated rounds, {pin}, "
      f"{sys.argv[6]} iterations per latency run\n")
print("| figure | A median (min-max) | B median (min-max) | B/A |")
print("| --- | --- | --- | --- |")
names = list(dict.fromkeys(r[2] for r in rows))
for n in names:
    a, b = vals.get((n, 'A'), []), vals.get((n, 'B'), [])
    def cell(x):
        return f"{statistics.median(x):.2f} ({min(x):.2f}-{max(x):.2f}) n={len(x)}" if x else "NA"
    ratio = f"{statistics.median(b) / statistics.median(a):.3f}" if a and b else "NA"
    print(f"| {n} | {cell(a)} | {cell(b)} | {ratio} |")
EOF
cat "$TMP/table"
[[ -n $RECORD ]] || exit 0

# ------------------------------------------------------------------ record
AB_MD=$HERE/ab_results.md
if [[ ! -s $AB_MD ]]; then
  cat >"$AB_MD" <<'HDR'
## A/B comparisons between builds (`bench/ab_compare.sh --record`)

Two builds' libraries under Debian's unmodified perftest, alternated round by
round on this machine (server and client on one host); medians with min-max.
A difference inside either side's spread is noise.
HDR
fi
{
  printf '\n### %s\n\n' "$RECORD"
  printf 'Recorded %s (load average before: %s). Command: `%s%s`\n\n' \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$LOAD0" "$([[ ${AB_PIN:-0} == 1 ]] && echo 'AB_PIN=1 ')" "$CMDLINE"
  cat "$TMP/table"
} >>"$AB_MD"
python3 - "$HERE/../docs/benchmarks.md" "$AB_MD" <<'EOF'
import sys
md, ab = sys.argv[1], sys.argv[2]
begin, end = "<!-- ab_results.md begin -->", "<!-- ab_results.md end -->"
text = open(md).read()
section = f"{begin}\n{open(ab).read().rstrip()}\n{end}\n"
if begin in text and end in text:
    head, rest = text.split(begin, 1)
    text = head + section + "\n" + rest.split(end, 1)[1].lstrip("\n")
else:
    anchor = "## Failed or timed-out runs"
    text = text.replace(anchor, section + "\n" + anchor, 1) if anchor in text else text + "\n" + section
open(md, "w").write(text)
EOF
echo "ab_compare: recorded in $AB_MD and docs/benchmarks.md" >&2
