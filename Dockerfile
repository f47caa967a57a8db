# Production image: `herald api` against external PostgreSQL and Redis.
#   docker build -t herald .
#   docker run -e HERALD_DATABASE_URL=... -e HERALD_REDIS_URL=... -p 8000:8000 herald
# Run `herald migrate` once per release (same image, command `herald migrate`).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY workers ./workers
COPY migrations ./migrations
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
RUN useradd --system --uid 10001 herald
COPY --from=build /install /usr/local
USER herald
ENV HERALD_HOST=0.0.0.0 \
    HERALD_PORT=8000 \
    PYTHONUNBUFFERED=1
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)" || exit 1
CMD ["herald", "api"]
