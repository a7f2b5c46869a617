#!/usr/bin/env bash
# Container entrypoint: one role per container, chosen by the first argument.
#
#   serve     the HTTP API under uvicorn (WEB_CONCURRENCY workers, proxy headers trusted
#             from FORWARDED_ALLOW_IPS); never migrates: run `migrate` first, as its own job
#   migrate   apply Alembic migrations up to head, then exit
#   sweep     one sweep now (what the cron's POST /cron/sweep does), then exit
#   dispatch  the embedded queue's dispatcher, until SIGTERM
#   worker    the Infrai pull worker, until SIGTERM
#   reminders any other `reminders` command, e.g. `reminders dead-letters list`
set -euo pipefail

usage() {
  echo "usage: entrypoint.sh serve|migrate|sweep|dispatch|worker|reminders [ARGS...]" >&2
}

role="${1:-serve}"
if [ "$#" -gt 0 ]; then shift; fi

case "$role" in
  serve)
    if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
      # Counters of a previous container life must not be merged into this one's.
      mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
      rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db
    fi
    exec reminders serve \
      --host "${HOST:-0.0.0.0}" \
      --port "${PORT:-8000}" \
      --workers "${WEB_CONCURRENCY:-2}" \
      --no-migrate "$@"
    ;;
  migrate | sweep | dispatch | worker)
    exec reminders "$role" "$@"
    ;;
  reminders)
    exec reminders "$@"
    ;;
  -h | --help | help)
    usage
    ;;
  *)
    echo "unknown role: $role" >&2
    usage
    exit 64
    ;;
esac
