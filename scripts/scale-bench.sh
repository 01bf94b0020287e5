#!/usr/bin/env bash
# Scale benchmark: what wakegate costs as homes grow, and what a stampede on
# cold homes costs. It builds the binary and runs internal/scalebench,
# which starts real gateways, real HTTP backends and real demo homes on
# loopback and prints a table:
#
#   - memory per awake home and per home registered through the admin API
#     (Go heap of the gateway, and its RSS);
#   - the gateway's CPU with no traffic (the idle loop), per round and as a
#     share of one core, with 10 homes and with 100,000;
#   - warm-path CPU per request with 10 homes registered against 100,000
#     (the same 10 homes in use, then 1,000), in alternating rounds,
#     medians and the ratio to the 10-home gateway;
#   - admin list latency (pages by cursor, filters);
#   - start time with every home stored (exec to /readyz);
#   - 1,000 concurrent requests on one cold home (200 ms boot): wakes,
#     p50/p99, against the same on a home whose wake costs nothing (no
#     proxy, and nginx); then spread over 100 cold homes with each wake
#     cap;
#   - a storm of 1,000 different cold homes (socket-activated demo homes,
#     200 ms boot), one request each, all at once: failures by kind,
#     p50/p99/max, a single cold wake's time in the same run and the
#     ratio, the gateway's CPU per wake, peak home processes and
#     descriptors, on one gateway with the default wake cap (16) and with
#     a cap of 1,000, then on three gateways sharing one redis-server
#     (wakes per gateway, starts per home); the floor is the same 1,000
#     homes started at once without a gateway.
#
#   scripts/scale-bench.sh                       # the full run (about 20 min)
#   scripts/scale-bench.sh -homes 10000 -awake 200 -only scale   # quicker
#   scripts/scale-bench.sh -only storm           # the storm (about 5 min)
#   scripts/scale-bench.sh -only storm -storm 50 # a small storm
#
# Arguments are passed to the program (go run ./internal/scalebench -h
# lists them). The gateways' state lives under /dev/shm when it exists
# (fsync there is free: the run measures CPU and memory, not the disk).
# The machine may be shared: compare the ratios and medians of one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=$(mktemp -d /tmp/scale-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/wakegate" .
go build -o "$dir/scalebench" ./internal/scalebench
"$dir/scalebench" -bin "$dir/wakegate" "$@"
