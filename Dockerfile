# The alternative to `make image` for users who build with Docker (or Podman/BuildKit): the same
# static binaries, entrypoint and user on distroless static. `make image` needs no Docker daemon
# and is reproducible; this build pulls base images. TestDockerfileMatchesImage keeps the binary
# list, ENTRYPOINT and USER equal to what `make image` builds (internal/imagebuild).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/connector-mcp:TAG .
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /out/manager ./cmd/manager \
 && if [ -d cmd/gateway ]; then GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /out/gateway ./cmd/gateway; fi

FROM gcr.io/distroless/static-debian12:nonroot
ARG REVISION=unknown
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/b10x/connector-mcp" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/manager"]
