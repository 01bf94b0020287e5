#!/usr/bin/env bash
# TLS benchmark: wakegate (tls.mode files) against nginx and Caddy serving
# the same certificate, in the same run, each server pinned to one core
# (SERVER_CPU) and the load generator to another (LOAD_CPU). It measures
# full TLS handshakes per second, resumed handshakes per second (session
# tickets), HTTPS warm-path requests per second over keep-alive HTTP/1.1
# (a 1 KiB answer from the same backend, the demo home, behind each proxy)
# and server CPU per request, and prints the ratios to nginx and Caddy.
#
#   scripts/tls-bench.sh                 # DURATION=5 CONNS=16 ROUNDS=1
#
# Then, once per target, the idle wss:// phase: WS_CONNS (2,000) WebSockets
# opened through the server to the backend's echo and held idle, with the
# server's resident memory per connection (the shared bench's wsload and
# backend, ../shared/bench; not for Caddy, which wants a server name). MODES picks the phases ("full resumed https
# wss"); WAKEGATE_BIN runs a given wakegate binary instead of building one,
# so two builds can be compared against the same peers. KEY_EXCHANGE
# (hybrid, the default, or classical) is wakegate's tls.key_exchange:
# classical is X25519, what an nginx on OpenSSL 3.0 settles on, so the
# handshake rates then compare the same key exchange.
#
# Needs nginx, caddy, openssl and taskset (Debian: apt-get install nginx
# caddy openssl util-linux). Everything it writes goes to a temp dir.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${DURATION:-5}
CONNS=${CONNS:-16}
ROUNDS=${ROUNDS:-1}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BACKEND_PORT=${BACKEND_PORT:-19080}
declare -A PORT=([wakegate]=19443 [nginx]=19444 [caddy]=19445)
TARGETS=${TARGETS:-"wakegate nginx caddy"}
MODES=${MODES:-"full resumed https wss"}
WS_CONNS=${WS_CONNS:-2000}
# The key exchanges the load generator offers. With KEY_EXCHANGE=classical
# every server settles on X25519, so the client offers only that: a Go
# client's default offer adds an ML-KEM key share it would make and throw
# away in every handshake, work that keeps the load generator's CPU, not
# the server's, the limit of the handshake rate on a two-CPU machine.
if [[ ${KEY_EXCHANGE:-hybrid} == classical ]]; then CLIENT_CURVES=${CLIENT_CURVES-x25519}; else CLIENT_CURVES=${CLIENT_CURVES-}; fi
WS_PATH=/node/echo/ws
WS_BACKEND_PORT=${WS_BACKEND_PORT:-19081}
BENCH_SRC=${BENCH_SRC:-../shared/bench}
NAME=bench.test
REQ_PATH=/node/demo/bytes/1024

for tool in nginx caddy openssl taskset; do
  command -v "$tool" >/dev/null || { echo "tls-bench: $tool is not installed" >&2; exit 1; }
done
dir=$(mktemp -d /tmp/tls-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

log "building into $dir"
if [[ -n ${WAKEGATE_BIN:-} ]]; then cp "$WAKEGATE_BIN" "$dir/wakegate"; else go build -o "$dir/wakegate" .; fi
go build -o "$dir/tlsbench" ./scripts/tlsbench
if [[ " $MODES " == *" wss "* ]]; then
  (cd "$BENCH_SRC/wsload" && go build -o "$dir/wsload" .)
  (cd "$BENCH_SRC/backend" && go build -o "$dir/wsbackend" .)
fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=$NAME" -addext "subjectAltName=DNS:$NAME" \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
chmod 644 "$dir/key.pem"

# The backend: the demo home, served directly on BACKEND_PORT.
taskset -c "$SERVER_CPU" "$dir/wakegate" demo-home --addr "127.0.0.1:$BACKEND_PORT" --target demo >"$dir/backend.log" 2>&1 &
pids+=($!)
# The wss phase's backend: the shared bench's, whose /node/{app}/ws echoes
# every message (the demo home greets first, which wsload would not expect).
if [[ " $MODES " == *" wss "* ]]; then
  taskset -c "$SERVER_CPU" "$dir/wsbackend" -addr "127.0.0.1:$WS_BACKEND_PORT" >"$dir/wsbackend.log" 2>&1 &
  pids+=($!)
fi

cat >"$dir/wakegate.yaml" <<YAML
listen: "127.0.0.1:${PORT[wakegate]}"
data_dir: "$dir/wg-data"
log: {level: error, access: false}
admin: {listen: ""}
wake: {idle_timeout: 0s}
server: {max_conns_per_client: 10000} # the wss phase holds WS_CONNS from 127.0.0.1
tls:
  mode: files
  cert_file: "$dir/cert.pem"
  key_file: "$dir/key.pem"
  http_listen: ""
  key_exchange: ${KEY_EXCHANGE:-hybrid}
homes:
  - id: demo
    provider: static
    endpoint: "http://127.0.0.1:$BACKEND_PORT"
    probe: tcp
  - id: echo
    provider: static
    endpoint: "http://127.0.0.1:$WS_BACKEND_PORT"
    probe: tcp
YAML
cat >"$dir/nginx.conf" <<NGINX
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server {
    listen 127.0.0.1:${PORT[nginx]} ssl;
    server_name $NAME;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on;
    ssl_session_cache shared:SSL:10m;
    location $WS_PATH {
      proxy_pass http://127.0.0.1:$WS_BACKEND_PORT;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host \$host;
      proxy_read_timeout 1h;
    }
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
    }
  }
}
NGINX
cat >"$dir/Caddyfile" <<CADDY
{
  admin off
  auto_https off
  storage file_system $dir/caddy-data
}
https://$NAME:${PORT[caddy]} {
  bind 127.0.0.1
  tls $dir/cert.pem $dir/key.pem
  reverse_proxy $WS_PATH 127.0.0.1:$WS_BACKEND_PORT
  reverse_proxy 127.0.0.1:$BACKEND_PORT
}
CADDY

declare -A PID
start() {
  case $1 in
    wakegate) GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$dir/wakegate" serve --config "$dir/wakegate.yaml" >"$dir/wakegate.log" 2>&1 & ;;
    nginx) taskset -c "$SERVER_CPU" nginx -c "$dir/nginx.conf" -p "$dir" -g 'daemon off;' >"$dir/nginx.log" 2>&1 & ;;
    caddy) GOMAXPROCS=1 XDG_DATA_HOME=$dir/xdg XDG_CONFIG_HOME=$dir/xdg taskset -c "$SERVER_CPU" \
             caddy run --config "$dir/Caddyfile" --adapter caddyfile >"$dir/caddy.log" 2>&1 & ;;
  esac
  PID[$1]=$!
  pids+=($!)
}
# cpu_ticks sums user+system clock ticks of a process and its children.
cpu_ticks() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    read -r -a f <"/proc/$p/stat" || continue
    total=$((total + f[13] + f[14]))
  done
  echo $total
}
bench() { # target mode -> "ops/s cpu_ms_per_op errors [resumed]"
  local t=$1 mode=$2 before after out
  before=$(cpu_ticks "${PID[$t]}")
  out=$(taskset -c "$LOAD_CPU" "$dir/tlsbench" -addr "127.0.0.1:${PORT[$t]}" -name $NAME -ca "$dir/cert.pem" \
    -mode "$mode" -d "${DURATION}s" -c "$CONNS" -path "$REQ_PATH" -curves "$CLIENT_CURVES")
  after=$(cpu_ticks "${PID[$t]}")
  read -r _ ops _ rate errs resumed <<<"$out"
  local hz; hz=$(getconf CLK_TCK)
  awk -v r="$rate" -v o="$ops" -v d="$((after - before))" -v hz="$hz" -v e="$errs" -v res="${resumed:-}" \
    'BEGIN { printf "%.0f %.4f %d %s\n", r, (o > 0 ? d * 1000 / hz / o : 0), e, res }'
}

for t in $TARGETS; do start "$t"; done
for t in $TARGETS; do
  for _ in $(seq 100); do
    if "$dir/tlsbench" -addr "127.0.0.1:${PORT[$t]}" -name $NAME -ca "$dir/cert.pem" -mode https -d 200ms -c 1 \
        -path "$REQ_PATH" 2>/dev/null | awk '{exit !($2 > 0 && $5 == 0)}'; then continue 2; fi
    sleep 0.1
  done
  log "$t did not serve https://$NAME$REQ_PATH; logs in $dir"; exit 1
done

declare -A RES
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    [[ $mode == wss ]] && continue
    for t in $TARGETS; do
      log "round $round: $t $mode"
      RES[$t.$mode.$round]=$(bench "$t" "$mode")
    done
  done
done

declare -A WSRES
if [[ " $MODES " == *" wss "* ]]; then
  for t in $TARGETS; do
    # wsload dials 127.0.0.1 and sends no server name, which Caddy's
    # certificate selection refuses.
    [[ $t == caddy ]] && continue
    log "$t: $WS_CONNS idle wss:// connections"
    out=$(taskset -c "$LOAD_CPU" "$dir/wsload" -url "wss://127.0.0.1:${PORT[$t]}$WS_PATH" -n "$WS_CONNS" \
      -samples 200 -pid "${PID[$t]}" 2>&1) || log "wsload for $t reported errors: $(tail -n 2 <<<"$out")"
    WSRES[$t]=$(grep '^RESULT ' <<<"$out" | head -n 1 || true)
  done
fi

printf '\n| target | mode | ops/s | server CPU ms/op | errors | resumed |\n| --- | --- | --- | --- | --- | --- |\n'
declare -A BEST
for t in $TARGETS; do
  for mode in $MODES; do
    [[ $mode == wss ]] && continue
    best=0 line=""
    for round in $(seq "$ROUNDS"); do
      read -r rate cpu errs res <<<"${RES[$t.$mode.$round]}"
      if ((rate > best)); then best=$rate line="$rate $cpu $errs ${res:--}"; fi
    done
    BEST[$t.$mode]=$best
    read -r rate cpu errs res <<<"$line"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$t" "$mode" "$rate" "$cpu" "$errs" "$res"
  done
done
printf '\nratios (wakegate / peer, best round; above 1 is faster):\n'
for peer in nginx caddy; do
  [[ " $TARGETS " == *" $peer "* && " $TARGETS " == *" wakegate "* ]] || continue
  for mode in $MODES; do
    [[ $mode == wss ]] && continue
    awk -v a="${BEST[wakegate.$mode]}" -v b="${BEST[$peer.$mode]}" -v p="$peer" -v m="$mode" \
      'BEGIN { if (b > 0) printf "  %-6s %-8s %.2f\n", p, m, a / b }'
  done
done
if [[ " $MODES " == *" wss "* ]]; then
  printf '\n| target | idle wss:// open / failed | RTT p50 µs | RTT p99 µs | server KiB per connection (RSS) |\n| --- | --- | --- | --- | --- |\n'
  for t in $TARGETS; do
    [[ $t == caddy ]] && continue
    awk -v t="$t" -v line="${WSRES[$t]:-}" 'BEGIN {
      n = split(line, kv, " "); for (i = 2; i <= n; i++) { split(kv[i], p, "="); R[p[1]] = p[2] }
      printf "| %s | %s / %s | %s | %s | %s |\n", t, R["ok"], R["failed"], R["rtt_p50_us"], R["rtt_p99_us"], R["kib_per_conn"] }'
  done
fi
