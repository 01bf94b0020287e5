# syntax=docker/dockerfile:1
# wakegate: a static binary on distroless. It starts as root only to give
# the data directory to its own user (a volume is mounted owned by root),
# then becomes that user (WAKEGATE_USER) before it opens anything else. The
# default config (config.yaml) runs with nothing else; on Fly, fly.toml runs
# deploy/fly.yaml. No shell in the image: the health check is the binary's
# own `wakegate healthcheck`.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# GOAMD64=v3 (x86-64 CPUs from about 2015 on: AVX2, BMI2) makes TLS
# handshakes a few percent cheaper (docs/performance.md, "TLS"); the
# default v1 runs on every x86-64 CPU. Ignored on arm64.
ARG GOAMD64=v1
RUN CGO_ENABLED=0 GOAMD64=${GOAMD64} go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/wakegate . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/wakegate /usr/local/bin/wakegate
COPY config.yaml /etc/wakegate/config.yaml
COPY deploy/fly.yaml /etc/wakegate/fly.yaml
# The data directory, owned by the user the gateway becomes; on Fly the
# volume is mounted here (fly.toml [mounts]), and given to that user at
# the first start.
COPY --from=build --chown=65532:65532 /out/data /data
ENV WAKEGATE_DATA_DIR=/data \
    WAKEGATE_LISTEN=:8080 \
    WAKEGATE_USER=65532:65532
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/wakegate", "healthcheck", "--path", "/healthz"]
ENTRYPOINT ["/usr/local/bin/wakegate"]
CMD ["serve", "--config", "/etc/wakegate/config.yaml"]
