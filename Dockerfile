# The airlock command, for every role of the fleet (worker, demo, request, …).
# Build: docker build -t airlock .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p airlock --bin airlock

FROM debian:bookworm-slim
# /keys and /var/log/airlock belong to the role's user, so that named volumes mounted there
# (docker-compose.yml: the keys, the decision log) start out writable by it.
RUN useradd --system --uid 10001 airlock \
    && mkdir -p /keys /var/log/airlock && chown airlock /keys /var/log/airlock
COPY --from=build /src/target/release/airlock /usr/local/bin/airlock
USER airlock
ENTRYPOINT ["airlock"]
CMD ["--help"]
