# One image holding both binaries: the operator (`mssql-pg-operator`, the default entrypoint) and
# the worker (`mssql-pg-worker`, which the operator's Jobs run with an explicit command).
# The builder compiles exactly the release binaries the tests and benchmarks use (same
# Cargo.lock, --locked); the runtime is distroless with the nonroot user and no shell.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p mssql-pg-operator -p mssql-pg-worker \
 && cp target/release/mssql-pg-operator target/release/mssql-pg-worker /usr/local/bin/

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="mssql-pg-operator" \
      org.opencontainers.image.description="Kubernetes operator that migrates databases between SQL Server and PostgreSQL" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /usr/local/bin/mssql-pg-operator /usr/local/bin/mssql-pg-worker /usr/local/bin/
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mssql-pg-operator"]
