#!/usr/bin/env bash
# Container entrypoint: one role per container, chosen by the first argument.
#
#   serve     the HTTP API under uvicorn (WEB_CONCURRENCY workers, default 2, one on
#             SQLite; proxy headers trusted from FORWARDED_ALLOW_IPS). It migrates first
#             only with REMINDERS_MIGRATE_ON_START=true (one container); with several
#             replicas run `migrate` as its own job instead
#   migrate   apply Alembic migrations up to head, then exit
#   sweep     one sweep now (what the cron's POST /cron/sweep does), then exit
#   dispatch  the embedded queue's dispatcher, until SIGTERM
#   worker    the pull worker (Infrai, SQS, RabbitMQ), until SIGTERM; its own /metrics
#             on REMINDERS_WORKER_METRICS_PORT when no serve shares its metrics directory
#   reminders any other `reminders` command, e.g. `reminders dead-letters list`
set -euo pipefail

usage() {
  echo "usage: entrypoint.sh serve|migrate|sweep|dispatch|worker|reminders [ARGS...]" >&2
}

# REMINDERS_MIGRATE_ON_START: true/1/yes/on migrates before serving; empty/false/0/no/off
# does not; anything else is refused rather than guessed.
migrate_flag() {
  case "$(printf '%s' "${REMINDERS_MIGRATE_ON_START:-}" | tr '[:upper:]' '[:lower:]')" in
    1 | true | yes | on) echo "--migrate" ;;
    "" | 0 | false | no | off) echo "--no-migrate" ;;
    *)
      echo "REMINDERS_MIGRATE_ON_START must be true or false, not '${REMINDERS_MIGRATE_ON_START}'" >&2
      return 1
      ;;
  esac
}

role="${1:-serve}"
if [ "$#" -gt 0 ]; then shift; fi

case "$role" in
  serve)
    flag="$(migrate_flag)" || exit 64
    if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
      # Counters of a previous container life must not be merged into this one's.
      mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
      rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db
    fi
    exec reminders serve \
      --host "${HOST:-0.0.0.0}" \
      --port "${PORT:-8000}" \
      --workers "${WEB_CONCURRENCY:-2}" \
      "$flag" "$@"
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
