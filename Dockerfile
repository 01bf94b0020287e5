# syntax=docker/dockerfile:1
# Build a static wakegate binary, then run it as a non-root user with the
# default config embedded in the binary (override with --config).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/wakegate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/wakegate /usr/local/bin/wakegate
COPY config.yaml /etc/wakegate/config.yaml
WORKDIR /home/nonroot
ENV WAKEGATE_DATA_DIR=/home/nonroot/data
USER nonroot:nonroot
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/wakegate"]
CMD ["serve", "--config", "/etc/wakegate/config.yaml"]
