#!/bin/bash
# The README's status section quotes the last benchmark run: its speed block
# is what scripts/readme_status.py generates from docs/benchmarks.md (issue
# 42). bench/run_bench.sh rewrites both; this fails when one was edited
# without the other.
set -u
exec python3 "$SOFTRNIC_SOURCE_DIR/scripts/readme_status.py" --check --root "$SOFTRNIC_SOURCE_DIR"
