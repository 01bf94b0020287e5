#!/usr/bin/env bash
# Warm-path yardstick: proxy CPU per 1 KiB request for nginx, wakegate and
# loopbench (internal/loopbench: a forwarder on one epoll loop of its own,
# outside the Go runtime's poller), in alternating runs on the same
# machine. Each proxy and the shared bench's backend share one CPU
# (SERVER_CPU); wrk runs on another (LOAD_CPU) with CONNS keep-alive
# connections for SECS seconds after a 2 s warm-up. It prints each run's
# user, system and total CPU per request from /proc/PID/stat, its rate and
# p99, then the medians and each median's ratio to nginx's.
#
#   scripts/loop-bench.sh                       # RUNS=5 SECS=6 CONNS=64
#   CLOSE=1 scripts/loop-bench.sh               # a new connection per request
#
# WAKEGATE_BIN runs a given wakegate binary instead of building one. Needs
# nginx, wrk and taskset (Debian: apt-get install nginx wrk util-linux) and
# the shared bench's backend (BENCH_SRC, ../shared/bench). Everything it
# writes goes to a temp dir.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${RUNS:-5}
SECS=${SECS:-6}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BENCH_SRC=${BENCH_SRC:-../shared/bench}
BACKEND_PORT=${BACKEND_PORT:-18180}
TARGETS=${TARGETS:-"nginx loopbench wakegate"}
declare -A PORT=([nginx]=18181 [loopbench]=18182 [wakegate]=18183)
HEADER=()
[[ ${CLOSE:-0} == 1 ]] && HEADER=(-H "Connection: close")

for tool in nginx wrk taskset; do
  command -v "$tool" >/dev/null || { echo "loop-bench: $tool is not installed" >&2; exit 1; }
done
[[ -d $BENCH_SRC/backend ]] || { echo "loop-bench: no shared bench backend at $BENCH_SRC/backend (set BENCH_SRC)" >&2; exit 1; }
dir=$(mktemp -d /tmp/loop-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

log "building into $dir"
if [[ -n ${WAKEGATE_BIN:-} ]]; then cp "$WAKEGATE_BIN" "$dir/wakegate"; else go build -o "$dir/wakegate" .; fi
go build -o "$dir/loopbench" ./internal/loopbench
(cd "$BENCH_SRC/backend" && go build -o "$dir/backend" .)
mkdir -p "$dir/nginx/tmp"

cat >"$dir/wakegate.yaml" <<YAML
listen: "127.0.0.1:${PORT[wakegate]}"
data_dir: "$dir/wg-data"
log: {level: warn, access: false}
admin: {listen: ""}
server: {max_conns_per_client: 10000}
proxy: {max_idle_conns_per_host: 256}
wake: {idle_timeout: 0}
apps:
  - slug: demo
    upstream: "http://127.0.0.1:$BACKEND_PORT"
    health: {type: tcp, path: /small, interval: 1s}
YAML
# The shared bench's nginx configuration, with this script's ports.
sed -e "s/127.0.0.1:18080/127.0.0.1:$BACKEND_PORT/" -e "s/127.0.0.1:18081/127.0.0.1:${PORT[nginx]}/" \
  "$BENCH_SRC/conf/nginx.conf" >"$dir/nginx.conf"

taskset -c "$SERVER_CPU" "$dir/backend" -addr "127.0.0.1:$BACKEND_PORT" >"$dir/backend.log" 2>&1 &
backend=$!
pids+=("$backend")

# start NAME: runs the proxy on SERVER_CPU; sets SERVER to the pid that
# does the proxying.
start() {
  case $1 in
    nginx)
      taskset -c "$SERVER_CPU" nginx -p "$dir/nginx/" -e "$dir/nginx/error.log" -c "$dir/nginx.conf" \
        -g 'daemon off; worker_processes 1;' &
      local master=$!
      pids+=("$master")
      for _ in $(seq 50); do SERVER=$(pgrep -P "$master" nginx || true); [[ -n $SERVER ]] && break; sleep 0.1; done
      STOP=$master ;;
    loopbench)
      taskset -c "$SERVER_CPU" "$dir/loopbench" -listen "127.0.0.1:${PORT[loopbench]}" \
        -backend "127.0.0.1:$BACKEND_PORT" 2>"$dir/loopbench.log" &
      SERVER=$!; STOP=$SERVER; pids+=("$SERVER") ;;
    wakegate)
      taskset -c "$SERVER_CPU" "$dir/wakegate" serve --config "$dir/wakegate.yaml" >"$dir/wakegate.log" 2>&1 &
      SERVER=$!; STOP=$SERVER; pids+=("$SERVER") ;;
  esac
}

ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

declare -A TOTAL USER SYS P99
for run in $(seq "$RUNS"); do
  for t in $TARGETS; do
    start "$t"
    url="http://127.0.0.1:${PORT[$t]}/apps/demo/small"
    for _ in $(seq 100); do curl -fs -o /dev/null "$url" && break; sleep 0.1; done
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d2s "${HEADER[@]}" "$url" >/dev/null
    read -r u0 s0 <<<"$(ticks "$SERVER")"
    out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "${HEADER[@]}" "$url")
    read -r u1 s1 <<<"$(ticks "$SERVER")"
    kill "$STOP"; wait "$STOP" 2>/dev/null || true
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
      echo "loop-bench: $t answered with errors:" >&2
      grep -E 'Non-2xx|Socket errors' <<<"$out" >&2
    fi
    n=$(awk '/requests in/{print $1}' <<<"$out")
    p99=$(awk '/ 99%/{print $2}' <<<"$out")
    line=$(awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v n="$n" -v hz="$(getconf CLK_TCK)" \
      'BEGIN{printf "%.1f %.1f %.1f", u/hz*1e6/n, s/hz*1e6/n, (u+s)/hz*1e6/n}')
    read -r us ss ts <<<"$line"
    USER[$t]+="$us "; SYS[$t]+="$ss "; TOTAL[$t]+="$ts "; P99[$t]+="$p99 "
    printf 'run %d %-9s user %5s sys %5s total %5s us/req  %6.0f req/s  p99 %s\n' \
      "$run" "$t" "$us" "$ss" "$ts" "$(awk -v n="$n" -v s="$SECS" 'BEGIN{print n/s}')" "$p99"
  done
done

# median of a list of numbers; p99s carry a unit (us, ms, s) that sort -h ranks.
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
median_h() { tr ' ' '\n' | grep . | sort -h | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo
printf '%-9s %8s %8s %8s %9s %9s\n' medians user sys total "/nginx" p99
base=$(median <<<"${TOTAL[nginx]:-}")
for t in $TARGETS; do
  tot=$(median <<<"${TOTAL[$t]}")
  ratio=$([[ -n $base ]] && awk -v a="$tot" -v b="$base" 'BEGIN{printf "%.2fx", a/b}' || echo -)
  printf '%-9s %8s %8s %8s %9s %9s\n' "$t" "$(median <<<"${USER[$t]}")" "$(median <<<"${SYS[$t]}")" "$tot" "$ratio" "$(median_h <<<"${P99[$t]}")"
done
