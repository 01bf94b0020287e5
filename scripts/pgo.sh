#!/usr/bin/env bash
# Regenerates default.pgo, the CPU profile `go build` uses for a
# profile-guided build of wakegate (Go uses default.pgo in the main
# package's directory on its own; -pgo=off builds without it).
#
# The workload is the warm path of the shared proxy benchmark: keep-alive
# GETs of 1 KiB and 256 KiB bodies through an app route, and 1 KiB through
# a home route (session counting, relay token), driven by wrk against a
# gateway whose upstream is the built-in demo home, access log off.
#
#   scripts/pgo.sh                 # about 40 s; writes default.pgo
#   DURATION=20 scripts/pgo.sh     # seconds per phase (default 10)
#
# Needs wrk (apt-get install wrk). wakegate is built without a profile:
# measured on the direct path, one gave no gain (docs/performance.md).
# Keep a default.pgo only with a measured gain.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "pgo.sh: wrk is needed (apt-get install wrk)" >&2; exit 1; }
DURATION=${DURATION:-10}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {
  for _ in $(seq 100); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "pgo.sh: $1 did not answer" >&2; exit 1
}

go build -pgo=off -o "$work/wakegate" .
home_port=$(free_port)
gw_port=$(free_port)
"$work/wakegate" demo-home --addr "127.0.0.1:$home_port" --target demo 2>"$work/home.log" &
pids+=($!)
wait_http "http://127.0.0.1:$home_port/healthz"
cat >"$work/config.yaml" <<YAML
listen: "127.0.0.1:$gw_port"
data_dir: "$work/data"
log: {level: warn, access: false}
proxy: {max_idle_conns_per_host: 256}
wake: {idle_timeout: 0}
homes:
  - id: demo
    provider: static
    endpoint: "http://127.0.0.1:$home_port"
    probe: tcp
apps:
  - slug: demo
    upstream: "http://127.0.0.1:$home_port"
    health: {type: tcp, interval: 1s}
YAML
WAKEGATE_CPU_PROFILE="$work/cpu.pprof" "$work/wakegate" serve --config "$work/config.yaml" 2>"$work/gateway.log" &
gw=$!
pids+=($gw)
wait_http "http://127.0.0.1:$gw_port/apps/demo/bytes/1024"
base="http://127.0.0.1:$gw_port"
wrk -t1 -c64 -d"${DURATION}s" "$base/apps/demo/bytes/1024" >/dev/null
wrk -t1 -c64 -d"$((DURATION / 2 + 1))s" "$base/apps/demo/bytes/262144" >/dev/null
wrk -t1 -c64 -d"$((DURATION / 2 + 1))s" "$base/node/demo/bytes/1024" >/dev/null
kill -TERM "$gw"
wait "$gw" || true
test -s "$work/cpu.pprof" || { echo "pgo.sh: no profile written (see $work/gateway.log)" >&2; cat "$work/gateway.log" >&2; exit 1; }
cp "$work/cpu.pprof" default.pgo
echo "pgo.sh: wrote default.pgo ($(wc -c <default.pgo) bytes)"
