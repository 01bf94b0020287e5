#!/usr/bin/env bash
# Runs every wakegate test on a fresh Debian machine: installs what the tests
# need when it is missing, then checks gofmt, go vet and golangci-lint and
# runs the race-enabled test suite. Usage: scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo /root/go)/bin"

need=()
command -v go >/dev/null || { echo "test.sh: Go is not installed (need Go 1.26+)" >&2; exit 1; }
# System packages the tests need: a C compiler and libc headers for
# `go test -race` (cgo); CA certificates to fetch modules (goleak, the
# linters) from the Go module proxy; chromium drives the admin dashboard test
# (gateway/dashboard_test.go; it skips without it unless CI=true).
command -v gcc >/dev/null || need+=(gcc libc6-dev)
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || need+=(ca-certificates)
command -v chromium >/dev/null || need+=(chromium)
if ((${#need[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "test.sh: missing ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
    command -v gcc >/dev/null || { echo "test.sh: go test -race needs gcc" >&2; exit 1; }
  fi
fi

# The TLS tests (gateway/tls_*_test.go) run a real ACME server on loopback:
# Pebble and its DNS server pebble-challtestsrv (internal/pebbletest).
gobin="$(go env GOPATH)/bin"
for tool in pebble pebble-challtestsrv; do
  if ! command -v "$tool" >/dev/null && [[ ! -x $gobin/$tool ]]; then
    echo "test.sh: installing $tool"
    go install "github.com/letsencrypt/pebble/v2/cmd/$tool@v2.10.3"
  fi
done
# h2spec checks the HTTPS listener's HTTP/2 against a plain Go server's
# (gateway/tls_h2spec_test.go).
if ! command -v h2spec >/dev/null && [[ ! -x $gobin/h2spec ]]; then
  echo "test.sh: installing h2spec"
  go install "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"
fi
# The fleet tests (registry/redis/redis_test.go, faultinject/fleet*_test.go) run
# real redis-server processes on loopback ports (the Sentinel test runs its
# sentinels as redis-server --sentinel); they skip without it unless
# CI=true.
if ! command -v redis-server >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing redis-server"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  else
    echo "test.sh: redis-server is missing; the fleet tests skip (as root: apt-get install redis-server)" >&2
  fi
fi

# The docker provider's tests (provider/docker) run a real Podman service on
# a socket in a temp folder, as root, with the project's containers.conf
# (runc: crun fails on these machines; aardvark-dns: a group's members find
# each other by name); they skip without podman unless CI=true.
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! [[ -x /usr/lib/podman/aardvark-dns ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing podman, runc and aardvark-dns"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc netavark aardvark-dns iptables >/dev/null
  else
    echo "test.sh: podman is missing; the docker provider's tests skip (as root: apt-get install podman runc)" >&2
  fi
fi

# The http provider's reference control plane (docs/http-provider.md) is
# Python; provider/httpprov/reference_test.go runs it as printed and skips
# without python3 unless CI=true.
if ! command -v python3 >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing python3"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null
  else
    echo "test.sh: python3 is missing; the http provider's reference test skips (as root: apt-get install python3)" >&2
  fi
fi

# The real-app tests (gateway/realapps_*_test.go, -run TestRealApp) run
# third-party apps behind sleeping homes in Chromium: Debian's Jupyter
# Notebook, and from npm, pinned, a Vite dev server and socket.io. The npm
# packages go into a cache outside the checkout ($WAKEGATE_TEST_NPM), kept
# for later runs; the tests skip without them unless CI=true.
if ! command -v jupyter-notebook >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "test.sh: installing jupyter-notebook"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends jupyter-notebook >/dev/null
  else
    echo "test.sh: jupyter-notebook is missing; its real-app test skips (as root: apt-get install jupyter-notebook)" >&2
  fi
fi
if ! command -v npm >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "test.sh: installing nodejs and npm"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [[ -z ${WAKEGATE_TEST_NPM:-} ]]; then
  if [[ $(id -u) -eq 0 ]]; then WAKEGATE_TEST_NPM=/var/cache/wakegate-test/npm
  else WAKEGATE_TEST_NPM="${XDG_CACHE_HOME:-$HOME/.cache}/wakegate-test/npm"; fi
fi
export WAKEGATE_TEST_NPM
npm_pkgs='{"name":"wakegate-test-apps","private":true,"dependencies":{"vite":"8.4.1","socket.io":"4.8.4","socket.io-client":"4.8.4"}}'
if command -v npm >/dev/null; then
  mkdir -p "$WAKEGATE_TEST_NPM"
  if [[ $(cat "$WAKEGATE_TEST_NPM/package.json" 2>/dev/null) != "$npm_pkgs" || ! -d $WAKEGATE_TEST_NPM/node_modules/vite ]]; then
    echo "test.sh: installing the real-app tests' npm packages into $WAKEGATE_TEST_NPM"
    printf '%s\n' "$npm_pkgs" >"$WAKEGATE_TEST_NPM/package.json"
    (cd "$WAKEGATE_TEST_NPM" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  fi
else
  echo "test.sh: npm is missing; the Vite and socket.io real-app tests skip" >&2
fi

# The kubernetes tests (internal/kubetest, provider/kubernetes) run a real
# control plane (etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler in one program), which scripts/kube/build.sh builds from
# its Go modules once per machine into ~/.cache/wakegate: cold, about 20
# CPU-minutes; a link with a warm Go build cache; nothing once built. It
# builds in the background, at the lowest CPU priority so that it takes only
# what the other tests leave idle, and the kubernetes tests run last.
kube_build_log=$(mktemp)
nice -n 19 bash scripts/kube/build.sh >"$kube_build_log" 2>&1 &
kube_build=$!

step() { echo "== $* (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }

step gofmt
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step go vet
go vet ./...

step golangci-lint
lint=$(command -v golangci-lint || true)
if [[ -z $lint ]]; then
  lint="$(go env GOPATH)/bin/golangci-lint"
  [[ -x $lint ]] || go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
fi
# Another run on the same machine (an editor, a second checkout) waits
# for its turn instead of failing this one.
"$lint" run --allow-serial-runners ./...

step go mod download
go mod download

step go test -race
# The container provider's tests run last, on their own: while its Podman
# tears a container down, the engine's host-port rules for 127.0.0.1 may
# still catch loopback connections to that port, which another package's
# test may have just been given (provider/docker's TestMain removes the
# rules its run left behind).
kube_pkgs='/internal/kubetest$|/provider/kubernetes(/|$)'
go test -race -count=1 -timeout 20m "$@" $(go list ./... | grep -vE "/provider/docker\$|$kube_pkgs")
go test -race -count=1 -timeout 20m "$@" ./provider/docker

# Under -race the data plane's socket reads and writes go through package
# syscall, which tells the detector about them (internal/sockio); here the
# packages that make them run once more without it, on the raw calls that
# the gateway ships with: the loop's and the forwarder's tests against
# net/http, the slow-reader floor, and the hostile soak for 15 s a server.
step "go test (the raw socket calls)"
go test -count=1 -timeout 10m "$@" ./internal/sockio ./h1serve ./proxy
WAKEGATE_SOAK=15s go test -count=1 -timeout 10m -run 'TestSlowReadersLeaveTheHomeFree|TestAdversarialSoak' "$@" ./gateway

# The real third-party apps (Jupyter, a Vite dev server, socket.io) behind
# sleeping homes, driven in Chromium: a step of their own, without the race
# detector, so that what they time is the gateway and not the machine's
# load (gateway/realapps_*_test.go skip under -race).
step "go test (real apps in Chromium)"
go test -count=1 -timeout 10m -run 'TestRealApp|TestDefaultLimitsServeAModulePage' "$@" ./gateway

# Every fuzz target runs for a few seconds, one at a time, on top of its
# seed corpus (which go test above already ran): a change that breaks what
# a target checks (net/http agreement, framing, decoders) fails the build
# here even when no example test covers it. A count of inputs rather than
# a duration: a duration's deadline can end a worker in the middle of an
# input and fail the run with "context deadline exceeded" though nothing
# failed. About 2-8 s plus a build each.
step "go test -fuzz (${FUZZTIME:=50000x} each)"
while IFS=: read -r file name; do
  pkg="$(dirname "$file")"
  echo "-- $name ($pkg)"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
done < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sed -E 's/:func /:/' | sort)

# The kubernetes tests, once the control plane is built.
step "go test -race (kubernetes, against a real control plane)"
if ! wait "$kube_build"; then
  cat "$kube_build_log" >&2
  echo "test.sh: scripts/kube/build.sh failed; the kubernetes tests need its control plane" >&2
  exit 1
fi
cat "$kube_build_log"
go test -race -count=1 -timeout 10m "$@" $(go list ./... | grep -E "$kube_pkgs")
step done
