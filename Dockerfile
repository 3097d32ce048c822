# One image holding both binaries: the operator (`mssql-pg-operator`, the default entrypoint) and
# the worker (`mssql-pg-worker`, which the operator's Jobs run with an explicit command).
# The builder compiles exactly the release binaries the tests and benchmarks use (same
# Cargo.lock, --locked); the runtime is distroless with the nonroot user and no shell.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The release profile keeps debug info (profiling, bench); the image ships the binaries stripped of it (the size
# is in the README); their debug info goes to separate files, laid out as gdb looks for them (/usr/lib/debug plus
# the binary's path, named by its .gnu_debuglink): docker build --target debug-info --output type=local,dest=dbg .
RUN cargo build --release --locked -p mssql-pg-operator -p mssql-pg-worker \
 && mkdir -p /usr/lib/debug/usr/local/bin \
 && for bin in mssql-pg-operator mssql-pg-worker; do \
      objcopy --only-keep-debug "target/release/$bin" "/usr/lib/debug/usr/local/bin/$bin.debug" \
      && objcopy --strip-debug --add-gnu-debuglink="/usr/lib/debug/usr/local/bin/$bin.debug" \
           "target/release/$bin" "/usr/local/bin/$bin" || exit 1; \
    done

FROM scratch AS debug-info
COPY --from=build /usr/lib/debug/ /

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="mssql-pg-operator" \
      org.opencontainers.image.description="Kubernetes operator that migrates databases between SQL Server and PostgreSQL" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /usr/local/bin/mssql-pg-operator /usr/local/bin/mssql-pg-worker /usr/local/bin/
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mssql-pg-operator"]
