# syntax=docker/dockerfile:1
# Builds the `moco` binary statically (musl) and ships it alone on distroless/static, as a
# non-root user.

FROM rust:1.89-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY moco-core moco-core
COPY moco-adapters moco-adapters
COPY moco-api moco-api
COPY moco-bin moco-bin
COPY tests tests
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p moco-bin \
    && install -D -m 0755 target/release/moco /out/moco

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/moco /moco
USER 65532:65532
ENTRYPOINT ["/moco"]
