#!/usr/bin/env bash
# Start a throwaway PostgreSQL server (trust auth, 127.0.0.1 only) for the distributed-tuning test and
# print its URL:  export RLBENCH_TEST_POSTGRES=$(scripts/start_postgres.sh)
# Needs the server binaries (Debian/Ubuntu: apt-get install postgresql). Stop it with
#   pg_ctl -D /tmp/rlbench-pg stop   (as the user printed on stderr)
set -euo pipefail
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] || PGBIN=$(dirname "$(command -v pg_ctl)")
DATA=${1:-/tmp/rlbench-pg}
PORT=${PGPORT:-54329}
RUN=()
if [ "$(id -u)" -eq 0 ]; then  # the server refuses to run as root
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    RUN=(runuser -u postgres --)
fi
[ -f "$DATA/postmaster.pid" ] && "${RUN[@]}" "$PGBIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true
rm -rf "$DATA" && mkdir -p "$DATA"
[ "$(id -u)" -eq 0 ] && chown postgres "$DATA"
"${RUN[@]}" "$PGBIN/initdb" -D "$DATA" -U rlbench --auth=trust >/dev/null
"${RUN[@]}" "$PGBIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-p $PORT -k $DATA -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
"${RUN[@]}" "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U rlbench optuna
echo "server as ${RUN[*]:-$(id -un)}: $PGBIN/pg_ctl -D $DATA stop" >&2
echo "postgresql://rlbench@127.0.0.1:$PORT/optuna"
