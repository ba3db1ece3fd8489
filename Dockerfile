# syntax=docker/dockerfile:1
# The images of moco-rs, from one build of the `moco` binary (static: Rust's musl target is
# the default on Alpine):
#
#   docker build -t ghcr.io/moco-rs/moco:0.1.0 .                          # the operator (default target)
#   docker build --target agent -t ghcr.io/moco-rs/moco-agent:0.1.0 .     # the agent and moco-init
#   docker build --target backup -t ghcr.io/moco-rs/moco-backup:0.1.0 .   # MySQL backup Jobs
#
# The operator image is the binary alone on distroless/static. The agent image carries the
# binary twice: as /moco (the sidecar runs `moco agent`) and as /moco-init (the init
# container copies it into the Pod and runs it in the mysqld image, which is why it must be
# static). It is built on MariaDB's image for `mariadb-backup` and `mbstream`, which stream a
# MariaDB copy between agents; they must be of the server's series (MARIADB_VERSION).

ARG MARIADB_VERSION=10.11
# The MySQL backup image is MOCO's (mysqlsh, mysqlbinlog, mysql, tar, zstd) with `moco` as its
# program: the operator's `--backup-image` for MySQL clusters. Left at MOCO's own image, the
# Jobs run MOCO's Go program on the same arguments and write the same format.
ARG MOCO_BACKUP_IMAGE=ghcr.io/cybozu-go/moco-backup:0.36.0

FROM rust:1.89-alpine AS build
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p moco-bin --bin moco \
    && install -D -m 0755 target/release/moco /out/moco

FROM mariadb:${MARIADB_VERSION} AS agent
COPY --from=build /out/moco /moco
COPY --from=build /out/moco /moco-init
# MOCO's Pods run every container as 10000:10000 unless told otherwise.
USER 10000:10000
ENTRYPOINT ["/moco", "agent"]

FROM ${MOCO_BACKUP_IMAGE} AS backup
COPY --from=build /out/moco /moco
USER 10000:10000
ENTRYPOINT ["/moco"]

FROM gcr.io/distroless/static-debian12:nonroot AS operator
COPY --from=build /out/moco /moco
USER 65532:65532
ENTRYPOINT ["/moco"]
