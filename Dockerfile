# syntax=docker/dockerfile:1
# wakegate: a static binary on distroless, run as a non-root user. The
# default config (config.yaml) runs with nothing else; on Fly, fly.toml runs
# deploy/fly.yaml. No shell in the image: the health check is the binary's
# own `wakegate healthcheck`.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/wakegate . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/wakegate /usr/local/bin/wakegate
COPY config.yaml /etc/wakegate/config.yaml
COPY deploy/fly.yaml /etc/wakegate/fly.yaml
# The data directory, owned by the user that runs the gateway; on Fly the
# volume is mounted here (fly.toml [mounts]).
COPY --from=build --chown=65532:65532 /out/data /data
ENV WAKEGATE_DATA_DIR=/data \
    WAKEGATE_LISTEN=:8080
USER 65532:65532
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/wakegate", "healthcheck", "--path", "/healthz"]
ENTRYPOINT ["/usr/local/bin/wakegate"]
CMD ["serve", "--config", "/etc/wakegate/config.yaml"]
