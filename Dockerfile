# syntax=docker/dockerfile:1
# nodewright-worker (the entrypoint), the nodewright CLI and nodewright-node-agent (the node agent's
# DaemonSet runs it as its command: deploy/node-agent.yaml) in one image.
#
#   docker build -t nodewright .
#   docker run --rm nodewright --help                              # the worker
#   docker run --rm --entrypoint nodewright nodewright --help      # the CLI
#
# The worker is configured by the NODEWRIGHT_* / TEMPORAL_* / KUBECONFIG environment variables
# or a file given with --config (README, Configuration). docker-compose.yml runs it with Temporal.

# The two bases can be replaced with --build-arg (dev/images does, where no registry is reachable).
# Pinned by exact tag, not by digest: no registry answers where this was written, and a digest
# nobody has read from the registry would be made up. The builder is the exact toolchain release;
# distroless publishes no versioned tags (only :nonroot, which moves with Debian's security
# updates). For an immutable build pass the digests, e.g.
#   --build-arg RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:<digest>
# (crane digest gcr.io/distroless/cc-debian12:nonroot, or skopeo inspect).
ARG RUST_VERSION=1.95.0
ARG BUILDER_IMAGE=docker.io/library/rust:${RUST_VERSION}-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILDER_IMAGE} AS builder
# aws-lc-sys (rustls' crypto) may fall back to CMake; protos are compiled in Rust (protox).
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The registry and target directory are cache mounts: a rebuild after a source change recompiles
# only nodewright's crates. Cache mounts are not part of the image, so the binaries are copied out.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p nodewright-worker -p nodewright-starter -p nodewright-node-agent --bins \
    && mkdir -p /out \
    && cp target/release/nodewright-worker target/release/nodewright target/release/nodewright-node-agent /out/

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="nodewright" \
      org.opencontainers.image.description="The nodewright worker (Temporal workflows managing Azure worker machines of Kubernetes clusters) and the nodewright CLI" \
      org.opencontainers.image.source="https://github.com/nodewright/nodewright" \
      org.opencontainers.image.url="https://github.com/nodewright/nodewright" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=builder /out/nodewright-worker /out/nodewright /usr/local/bin/
COPY --from=builder /out/nodewright-node-agent /usr/local/bin/
# glibc's malloc keeps up to 8 arenas a core, and the worker's many short tasks leave them
# fragmented: two arenas kept a 200-machine rollout's worker at 87 MiB instead of 108 MiB, for
# the same CPU (README, Performance).
ENV MALLOC_ARENA_MAX=2
# The worker's defaults: worker.health_address 0.0.0.0:8080 (/healthz, /readyz) and
# worker.metrics_address 0.0.0.0:9464 (/metrics).
EXPOSE 8080 9464
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nodewright-worker"]
