# syntax=docker/dockerfile:1
# Builds the `moco` binary statically (Rust's musl target is the default on Alpine) and ships
# it alone on distroless/static, running as a non-root user.

FROM rust:1.89-alpine AS build
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p moco-bin \
    && install -D -m 0755 target/release/moco /out/moco

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/moco /moco
USER 65532:65532
ENTRYPOINT ["/moco"]
