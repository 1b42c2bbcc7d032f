# mock-node as a static musl binary in an empty image, used by
# deploy/kubernetes/mock-orchestrator.yaml and deploy/nomad/mock-orchestrator.nomad.hcl.
# Build from the repository root:
#   docker build -f deploy/mock-node.Dockerfile -t ghcr.io/your-org/mock-node:latest .
# Alpine's Rust targets musl; +crt-static links it statically, so the binary runs in
# `scratch` (no libc, no shell). The protos compile with protox: no protoc needed.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
ENV RUSTFLAGS="-C target-feature=+crt-static"
RUN cargo build --release --locked -p mock-node \
    && cp target/release/mock-node /mock-node

FROM scratch
COPY --from=build /mock-node /usr/local/bin/mock-node
# nobody: mock-node needs no privileges (ports 5008 and 9100 are unprivileged).
USER 65534:65534
EXPOSE 5008 9100
ENTRYPOINT ["/usr/local/bin/mock-node"]
