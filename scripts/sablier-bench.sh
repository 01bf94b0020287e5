#!/usr/bin/env bash
# Cold wakes of container homes, wakegate against Sablier, on one Podman
# engine with one image: wakegate's demo home (a small static HTTP server)
# booting in 0 ms and in 200 ms. For each tool and each boot it measures
#
#   - one client: a cold wake to the first 200, ROUNDS times (median);
#   - CLIENTS concurrent clients on the same cold home, CROUNDS times:
#     the p99 of their times to a 200 (median over the rounds);
#   - the container starts each wake cost (the engine's start events);
#   - the first requests that failed (a client whose first request to the
#     app did not get a 200 counts once, then retries every 10 ms).
#
# wakegate: the docker provider creates and starts the container; clients
# send GET /node/{target}/ to the gateway and are held until its probe
# passed. Sablier: the container is created by this script, clients ask
# Sablier's blocking API (GET /api/strategies/blocking?names=...) and then
# send their request to the container's published port, which is what
# Sablier's reverse-proxy plugins do. Both reach the container on
# 127.0.0.1 through a port published from Podman's default bridge network.
# Sablier runs with its default blocking poll (5 s) and with
# --strategy.blocking.default-refresh-frequency=100ms. Podman 4.3 reports
# an empty health status for a container without a HEALTHCHECK, which
# Sablier's docker provider reads as "starting": stock Sablier is tried
# once (it never says ready), and the measured Sablier is built with a
# one-line change that reads an empty status as no check, as Docker's
# missing one is.
#
#   SABLIER_SRC=/path/to/sablier scripts/sablier-bench.sh
#
# SABLIER_SRC is a source tree or a (bare) git directory of
# github.com/sablierapp/sablier; it is built with the Go module proxy.
# Without it the run measures wakegate alone (to compare two revisions of
# the gateway, run this script in each checkout, one after the other).
# ROUNDS (default 5), CLIENTS (100) and CROUNDS (3) size the run. It needs
# root, podman and runc (as the docker provider's tests do), starts its
# own engine on its own storage, and removes everything it made. On a
# shared machine, run it under the engine lock
# (flock /tmp/podman.lock scripts/sablier-bench.sh) and compare the
# medians and ratios of one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
SABLIER_SRC=${SABLIER_SRC:-}
ROUNDS=${ROUNDS:-5}
CLIENTS=${CLIENTS:-100}
CROUNDS=${CROUNDS:-3}
if [[ $(id -u) != 0 ]]; then
	echo "sablier-bench: run as root (the engine runs as root, as in the docker provider's tests)" >&2
	exit 1
fi

dir=$(mktemp -d /tmp/sablier-bench.XXXXXX)
sock=$dir/podman.sock
pm=(podman --root "$dir/root" --runroot "$dir/run" --tmpdir "$dir/tmp")
export CONTAINERS_CONF=$repo/provider/docker/testdata/containers.conf
chains() { iptables -w -t nat -S 2>/dev/null | sed -n 's/^-N \(NETAVARK-DN-.*\)/\1/p' | sort; }
chains_before=$(chains)
pids=()

# cleanup stops what the run started, removes the engine's storage and
# the host-port chains its containers left in the nat table.
cleanup() {
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	"${pm[@]}" system reset --force >/dev/null 2>&1
	for c in $(comm -13 <(echo "$chains_before") <(chains)); do
		while n=$(iptables -w -t nat -S NETAVARK-HOSTPORT-DNAT | grep -n -- "-j $c\$" | head -1 | cut -d: -f1) && [[ -n $n ]]; do
			iptables -w -t nat -D NETAVARK-HOSTPORT-DNAT $((n - 1))
		done
		iptables -w -t nat -F "$c"
		iptables -w -t nat -X "$c"
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
# waitfor CMD...: run CMD every 50 ms until it succeeds (30 s at most).
waitfor() {
	for _ in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
	echo "sablier-bench: gave up waiting for: $*" >&2
	return 1
}

# --- build -----------------------------------------------------------------
echo "building wakegate, the client and Sablier..." >&2
CGO_ENABLED=0 go build -o "$dir/wakegate" .
mkdir -p "$dir/client" "$dir/sablier-src"
cat >"$dir/client/go.mod" <<'EOF'
module benchclient

go 1.22
EOF
cat >"$dir/client/main.go" <<'EOF'
// Command benchclient sends -clients concurrent clients to one cold app
// and prints the times to their first 200 (p50, p99, max in ms), how many
// first requests failed and how many clients never got a 200.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "the app's URL")
	via := flag.String("sablier", "", "Sablier's blocking API URL, asked first (empty: none)")
	n := flag.Int("clients", 1, "concurrent clients")
	flag.Parse()
	c := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *n}}
	get := func(u string) bool {
		res, err := c.Get(u)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	lat := make([]float64, *n)
	var firstErrs, never atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range lat {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			if *via != "" && !get(*via) {
				never.Add(1)
				lat[i] = -1
				return
			}
			for first := true; !get(*url); first = false {
				if first {
					firstErrs.Add(1)
				}
				if time.Since(t0) > 60*time.Second {
					never.Add(1)
					lat[i] = -1
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			lat[i] = float64(time.Since(t0).Microseconds()) / 1000
		}()
	}
	close(start)
	wg.Wait()
	sort.Float64s(lat)
	at := func(q float64) float64 { return lat[int(q*float64(len(lat)-1)+0.5)] }
	fmt.Printf("%.0f %.0f %.0f %d %d\n", at(0.5), at(0.99), lat[len(lat)-1], firstErrs.Load(), never.Load())
}
EOF
(cd "$dir/client" && GOFLAGS= go build -o "$dir/benchclient" .)
if [[ -n $SABLIER_SRC ]]; then
	if git --git-dir "$SABLIER_SRC" rev-parse --verify -q HEAD >/dev/null 2>&1 && [[ ! -f $SABLIER_SRC/go.mod ]]; then
		git --git-dir "$SABLIER_SRC" archive HEAD | tar -x -C "$dir/sablier-src"
		sablier_version=$(git --git-dir "$SABLIER_SRC" describe --tags --always)
	else
		cp -r "$SABLIER_SRC"/. "$dir/sablier-src"
		sablier_version=$(git -C "$SABLIER_SRC" describe --tags --always 2>/dev/null || echo unknown)
	fi
	(cd "$dir/sablier-src" && go build -o "$dir/sablier-stock" ./cmd/sablier)
	inspect=$dir/sablier-src/pkg/provider/docker/container_inspect.go
	grep -q 'if spec.Container.State.Health != nil {' "$inspect"
	sed -i 's/if spec.Container.State.Health != nil {/if spec.Container.State.Health != nil \&\& spec.Container.State.Health.Status != "" \&\& spec.Container.State.Health.Status != "none" {/' "$inspect"
	(cd "$dir/sablier-src" && go build -o "$dir/sablier" ./cmd/sablier)
fi

# --- engine and image --------------------------------------------------------
mkdir -p "$dir/rootfs/tmp"
chmod 1777 "$dir/rootfs/tmp"
cp "$dir/wakegate" "$dir/rootfs/wakegate"
tar -C "$dir/rootfs" -cf "$dir/rootfs.tar" .
"${pm[@]}" system service --time=0 "unix://$sock" >"$dir/engine.log" 2>&1 &
pids+=($!)
waitfor curl -sf --unix-socket "$sock" http://engine/_ping
"${pm[@]}" import --change 'ENTRYPOINT ["/wakegate"]' "$dir/rootfs.tar" localhost/bench-home:1 >/dev/null
image=localhost/bench-home:1
home_cmd() { echo "\"demo-home\", \"--addr\", \"0.0.0.0:8080\", \"--target\", \"$1\", \"--boot-delay\", \"$2\""; }

# starts NAME SINCE: the engine's start events of container NAME since SINCE.
starts() { "${pm[@]}" events --stream=false --since "$2" --filter event=start --filter "container=$1" --format '{{.ID}}' | wc -l; }

# --- wakegate ------------------------------------------------------------------
gw_port=$(freeport)
adm_port=$(freeport)
token=sablier-bench-admin-token-0123456789
mkdir -p "$dir/wg"
cat >"$dir/wg/config.yaml" <<EOF
listen: "127.0.0.1:$gw_port"
data_dir: "$dir/wg/data"
log:
  access: false
wake:
  ready_timeout: 60s
admin:
  listen: "127.0.0.1:$adm_port"
  tokens: ["$token"]
providers:
  docker:
    host: "unix://$sock"
    name: wgbench
    image: "localhost/bench-home:{version}"
    pull: never
    network: bridge
    stop_timeout: 2s
homes:
  - {id: b0, provider: docker, version: "1", idle_timeout: 0s, command: [$(home_cmd b0 0s)]}
  - {id: b200, provider: docker, version: "1", idle_timeout: 0s, command: [$(home_cmd b200 200ms)]}
EOF
(cd "$dir/wg" && exec "$dir/wakegate" serve --config "$dir/wg/config.yaml" >"$dir/wg/log" 2>&1) &
pids+=($!)
gw_pid=$!
waitfor curl -sf "http://127.0.0.1:$gw_port/readyz"

# wg_cold HOME: suspend the home and wait until its container exited.
wg_cold() {
	curl -sf -X POST -H "Authorization: Bearer $token" "http://127.0.0.1:$adm_port/admin/homes/$1/suspend" >/dev/null || true
	waitfor test "$("${pm[@]}" inspect --format '{{.State.Status}}' "wgbench-$1")" = exited
}

# Results: one line per measurement, "tool boot clients p50 p99 max errors never starts".
results=$dir/results
: >"$results"

# measure TOOL BOOT CLIENTS ROUNDS COLD CTR URL [SABLIER_URL]: ROUNDS cold
# wakes (COLD makes the home cold), each recorded with the starts of CTR.
measure() {
	local tool=$1 boot=$2 n=$3 rounds=$4 cold=$5 ctr=$6 url=$7 via=${8:-}
	for _ in $(seq "$rounds"); do
		$cold
		local t0
		t0=$(now)
		local out
		out=$("$dir/benchclient" -clients "$n" -url "$url" -sablier "$via")
		sleep 0.5 # the start event is written after the start returned
		echo "$tool $boot $n $out $(starts "$ctr" "$t0")" >>"$results"
	done
}

echo "wakegate..." >&2
for b in 0 200; do
	curl -sf "http://127.0.0.1:$gw_port/node/b$b/" >/dev/null # creates the container
	measure wakegate "$b" 1 "$ROUNDS" "wg_cold b$b" "wgbench-b$b" "http://127.0.0.1:$gw_port/node/b$b/"
	measure wakegate "$b" "$CLIENTS" "$CROUNDS" "wg_cold b$b" "wgbench-b$b" "http://127.0.0.1:$gw_port/node/b$b/"
done
wakegate_version=$("$dir/wakegate" version 2>/dev/null | head -1 || true)
kill "$gw_pid"
wait "$gw_pid" 2>/dev/null || true

# --- Sablier -----------------------------------------------------------------
if [[ -n $SABLIER_SRC ]]; then
	sab_port=$(freeport)
	declare -A sab_app_port
	for b in 0 200; do
		# A fixed host port: the clients know it while the container is
		# stopped (a port the engine picks at each start is not known then).
		sab_app_port[$b]=$(freeport)
		"${pm[@]}" create --name "sab-b$b" --network bridge -p "127.0.0.1:${sab_app_port[$b]}:8080" "$image" \
			demo-home --addr 0.0.0.0:8080 --target "b$b" --boot-delay "${b}ms" >/dev/null
	done
	# app_url NAME: the container's published address on 127.0.0.1.
	app_url() { echo "http://127.0.0.1:${sab_app_port[${1#sab-b}]}/node/${1#sab-}/"; }

	sab_pid=
	# sab_start BINARY POLL: (re)start Sablier with an empty session store.
	sab_start() {
		if [[ -n $sab_pid ]]; then kill "$sab_pid"; wait "$sab_pid" 2>/dev/null || true; fi
		DOCKER_HOST="unix://$sock" "$1" start --provider.name=docker --server.port="$sab_port" \
			--provider.auto-stop-on-startup=false --strategy.blocking.default-refresh-frequency="$2" \
			--logging.level=warn >>"$dir/sablier.log" 2>&1 &
		sab_pid=$!
		pids+=("$sab_pid")
		waitfor curl -sf "http://127.0.0.1:$sab_port/health"
	}
	# down NAME: the container is not running (exited, or created and never
	# started).
	down() { [[ $("${pm[@]}" inspect --format '{{.State.Status}}' "$1") =~ ^(exited|created)$ ]]; }
	# sab_cold NAME: stop the container, and forget the session Sablier holds
	# for it (a fresh Sablier with the same poll).
	sab_cold() {
		"${pm[@]}" stop --time 2 "$1" >/dev/null
		waitfor down "$1"
		sab_start "$sab_bin" "$sab_poll"
	}
	blocking() { echo "http://127.0.0.1:$sab_port/api/strategies/blocking?names=$1&session_duration=10m&timeout=$2"; }

	echo "stock Sablier (one wake, 15 s timeout)..." >&2
	sab_bin=$dir/sablier-stock sab_poll=100ms
	sab_cold sab-b0
	stock=$("$dir/benchclient" -clients 1 -url "$(app_url sab-b0)" -sablier "$(blocking sab-b0 15s)")
	for poll in 100ms 5s; do
		echo "Sablier, poll $poll..." >&2
		sab_bin=$dir/sablier sab_poll=$poll
		for b in 0 200; do
			url=$(app_url "sab-b$b")
			measure "sablier-$poll" "$b" 1 "$ROUNDS" "sab_cold sab-b$b" "sab-b$b" "$url" "$(blocking "sab-b$b" 60s)"
			measure "sablier-$poll" "$b" "$CLIENTS" "$CROUNDS" "sab_cold sab-b$b" "sab-b$b" "$url" "$(blocking "sab-b$b" 60s)"
		done
	done
fi

# --- report --------------------------------------------------------------------
echo
echo "wakegate $(git describe --always --dirty) ($wakegate_version), Sablier ${sablier_version:-not run}, $("${pm[@]}" --version)"
echo "$(nproc) cores, $(uname -r); ROUNDS=$ROUNDS CLIENTS=$CLIENTS CROUNDS=$CROUNDS"
if [[ -n $SABLIER_SRC ]]; then
	echo "stock Sablier on this engine: p50 ms, p99, max, first errors, never ready: $stock"
fi
echo
awk -v clients="$CLIENTS" '
function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	k = $1 SUBSEP $2; tools[$1] = 1; boots[$2] = 1
	if ($3 == 1) { one[k] = one[k] " " $4 } else { p99[k] = p99[k] " " $5 }
	wakes[k]++; starts[k] += $9; errs[k] += $7; never[k] += $8; calls[k] += $3
}
END {
	printf "%-16s %5s %12s %14s %13s %16s %12s\n", "tool", "boot", "1 client p50", "p99 " clients " cl.", "starts/wake", "first errors", "never ready"
	n = split("wakegate sablier-100ms sablier-5s", order, " ")
	for (i = 1; i <= n; i++) for (b = 0; b <= 200; b += 200) {
		k = order[i] SUBSEP b
		if (!(k in wakes)) continue
		m1[k] = median(one[k]); m99[k] = median(p99[k])
		printf "%-16s %3sms %10.0fms %12.0fms %13.2f %9d / %-6d %12d\n", order[i], b, m1[k], m99[k], starts[k] / wakes[k], errs[k], calls[k], never[k]
	}
	print ""
	print "ratios, Sablier / wakegate (medians of this run):"
	for (i = 2; i <= n; i++) for (b = 0; b <= 200; b += 200) {
		k = order[i] SUBSEP b; w = "wakegate" SUBSEP b
		if ((k in m1) && m1[w] > 0 && m99[w] > 0)
			printf "  %-14s %3sms: 1 client %.2fx, p99 %.2fx\n", order[i], b, m1[k] / m1[w], m99[k] / m99[w]
	}
}' "$results"
