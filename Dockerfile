# reminder-relay: multi-stage image. Build: `docker build -t reminder-relay .`
# Roles (docker/entrypoint.sh): serve (default) | migrate | sweep | dispatch | worker.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY app ./app
# The wheel is the product: migrations (app/migrations, a link to alembic/ that the build
# copies in), templates and the admin page's assets ship inside it, so the runtime image
# holds no source tree. EXTRAS: e.g. --build-arg EXTRAS=gcp or EXTRAS=aws,otel.
ARG EXTRAS=""
RUN pip wheel --no-deps --wheel-dir /dist . \
    && python -m venv /opt/venv \
    && wheel=$(ls /dist/*.whl) \
    && /opt/venv/bin/pip install "${wheel}${EXTRAS:+[$EXTRAS]}" \
    && find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} +
ENV PATH=/opt/venv/bin:$PATH

FROM python:3.11-slim AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PORT=8000 \
    WEB_CONCURRENCY=2 \
    FORWARDED_ALLOW_IPS=* \
    PROMETHEUS_MULTIPROC_DIR=/tmp/reminders-metrics \
    REMINDERS_DATABASE_URL=sqlite+aiosqlite:////data/reminders.db \
    REMINDERS_OUTBOX_DIR=/data/outbox
RUN groupadd --system --gid 10001 reminders \
    && useradd --system --uid 10001 --gid reminders --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin reminders \
    && mkdir /data && chown reminders:reminders /data
COPY --from=build /opt/venv /opt/venv
COPY docker/entrypoint.sh /usr/local/bin/entrypoint.sh
WORKDIR /data
# One-container runs keep SQLite and the outbox here; set REMINDERS_DATABASE_URL to
# PostgreSQL (compose.yaml) for anything with more than one process.
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8000
# /healthz does no I/O: it says the process serves HTTP; /readyz is for the load balancer.
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8000') + '/healthz', timeout=2)"]
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
CMD ["serve"]
