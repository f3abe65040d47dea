# syntax=docker/dockerfile:1
# graphkeep: multi-stage image. The builder builds graphkeep's wheel and installs it, with the
# exact versions CI tested (constraints.txt), into a virtualenv; the runtime stage copies only
# that virtualenv onto a slim base and runs as an unprivileged user. The wheel (not the source
# tree) is what runs, so the image is what `pip install graphkeep-*.whl` gives anyone.
#
#   docker build -t graphkeep .
#   docker run --rm -p 8123:8123 graphkeep                        # embedded SQLite, dev only
#   docker run --rm -e GRAPHKEEP_DATABASE_URL=postgresql://... graphkeep graphkeep migrate
#
# See docker-compose.yml for PostgreSQL, the migrate step, API and worker services.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/graphkeep
ENV PATH=/opt/graphkeep/bin:$PATH
WORKDIR /src
# Dependencies first, at the tested pins, so their layer is cached until pyproject.toml or
# constraints.txt changes.
COPY pyproject.toml README.md constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -c constraints.txt -r /tmp/requirements.txt
COPY alembic.ini ./
COPY alembic ./alembic
COPY app ./app
# The wheel carries the migrations as app/_alembic; migrating a scratch SQLite file here proves
# the installed package finds them (the image's own smoke test), then the file is removed.
RUN pip wheel --no-deps -w /tmp/dist . \
    && pip install -c constraints.txt /tmp/dist/graphkeep-*.whl \
    && cd /tmp \
    && GRAPHKEEP_DATABASE_URL=sqlite+aiosqlite:////tmp/smoke.db graphkeep migrate \
    && graphkeep --version \
    && rm -rf /tmp/dist /tmp/smoke.db

FROM python:${PYTHON_VERSION}-slim AS runtime
ARG GRAPHKEEP_UID=10001
RUN groupadd --system --gid ${GRAPHKEEP_UID} graphkeep \
    && useradd --system --uid ${GRAPHKEEP_UID} --gid graphkeep \
       --home-dir /var/lib/graphkeep --create-home --shell /usr/sbin/nologin graphkeep
COPY --from=builder /opt/graphkeep /opt/graphkeep
ENV PATH=/opt/graphkeep/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GRAPHKEEP_HOST=0.0.0.0 \
    GRAPHKEEP_PORT=8123 \
    GRAPHKEEP_LOG_FORMAT=json
# The embedded SQLite default (./graphkeep.db) lands in the user's writable home.
WORKDIR /var/lib/graphkeep
USER graphkeep
EXPOSE 8123
# Liveness only (/ok); orchestrators should use /ready for readiness (database + schema).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/ok' % os.environ.get('GRAPHKEEP_PORT', '8123'), timeout=4)" || exit 1
# uvicorn gets SIGTERM directly (exec form, PID 1): in-flight runs drain, then it exits.
STOPSIGNAL SIGTERM
CMD ["graphkeep", "serve", "--host", "0.0.0.0"]
