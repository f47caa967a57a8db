# One image for every role: `herald api` (the default), `herald worker`, `herald migrate` (once
# per release, before the new API and workers), `herald reconcile --every 60s` (the cron).
#   make image            (docker build -t herald:<version> .; IMAGE=... names it for a registry)
#   docker run -e HERALD_DATABASE_URL=... -e HERALD_REDIS_URL=... -p 8000:8000 herald:<version>
# It builds Herald from this checkout (pip, at the lockfile's versions), so `docker build .`
# needs nothing built first.
# deploy/ has compose and Kubernetes manifests built on it.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE alembic.ini requirements.lock ./
COPY app ./app
COPY workers ./workers
COPY migrations ./migrations
# Herald's runtime dependencies only, at the lockfile's versions (-c: the lock constrains, it
# does not add): no embedded PostgreSQL or Redis, no test or lint tooling.
RUN pip install --no-cache-dir --prefix=/install -c requirements.lock .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="Herald" \
      org.opencontainers.image.description="Webhook delivery: the API, workers, migrations and the reconcile cron" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin herald
COPY --from=build /install /usr/local
USER 10001
ENV HERALD_HOST=0.0.0.0 \
    HERALD_PORT=8000 \
    HERALD_WORKER_HEARTBEAT_FILE=/tmp/herald-worker.heartbeat \
    PYTHONUNBUFFERED=1
EXPOSE 8000
# Fitted to the role the container runs (HERALD_ROLE, else its command): the API answers
# /healthz, a worker's event loop has beaten within 15 s, migrate and the cron pass.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s CMD ["herald", "health"]
CMD ["herald", "api"]
