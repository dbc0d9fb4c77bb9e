# ft-gateway's image: the locked dependencies and the package, in a virtual environment
# on a Python base; non-root (uid and gid 10001, as deploy/kubernetes runs it), no sources.
# Build and smoke-test with scripts/image; docs/kubernetes.md says how to tag and push.
# BASE: any Debian-like image with python3 >= 3.11 and its venv module (scripts/image
# makes one with debootstrap where no registry can be reached).
ARG BASE=python:3.12-slim

FROM ${BASE} AS builder
# PIP_CERT: a CA bundle for a network that re-signs TLS (scripts/image mounts the host's).
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# The locked dependencies first: a change to the code reuses this layer.
COPY deploy/image/requirements.lock deploy/image/build.lock /tmp/lock/
RUN python3 -m venv /opt/ft-gateway \
 && /opt/ft-gateway/bin/pip install --require-hashes --only-binary=:all: \
      -r /tmp/lock/requirements.lock \
 && python3 -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r /tmp/lock/build.lock
# Then the package, as a wheel (--no-index: a dependency missing from the lock fails here).
COPY pyproject.toml README.md /src/
COPY gateway /src/gateway
COPY sampler /src/sampler
COPY refengine /src/refengine
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/wheel /src \
 && /opt/ft-gateway/bin/pip install --no-index /tmp/wheel/*.whl \
 && /opt/ft-gateway/bin/pip check \
 && /opt/ft-gateway/bin/pip uninstall --yes pip setuptools

FROM ${BASE}
RUN groupadd --system --gid 10001 ft-gateway \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin ft-gateway \
 && mkdir /var/lib/ft-gateway && chown 10001:10001 /var/lib/ft-gateway
COPY --from=builder /opt/ft-gateway /opt/ft-gateway
# The config and policy where deploy/kubernetes mounts its ConfigMaps over them.
COPY deploy/image/config.yaml /etc/ft-gateway/config/config.yaml
COPY policies/ft-serve.yaml /etc/ft-gateway/policy/ft-serve.yaml
ENV PATH=/opt/ft-gateway/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    FT_GATEWAY_CONFIG=/etc/ft-gateway/config/config.yaml \
    FT_GATEWAY_HOST=0.0.0.0 \
    FT_GATEWAY_PORT=8080
# An empty working directory: nothing there for `import` to find before the package.
WORKDIR /var/lib/ft-gateway
USER 10001:10001
# 8080: the API, /healthz, /readyz; 9090: /metrics (listen.metrics_port in the config).
EXPOSE 8080 9090
# On SIGTERM the gateway drains for server.drain_timeout (30 s): stop it with a longer
# time-out (`podman stop -t 40`, `docker stop -t 40`); a runtime's default 10 s kills it.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["python3", "-c", "import os, sys, urllib.request; port = os.environ.get('FT_GATEWAY_PORT', '8080'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status != 200)"]
CMD ["ft-gateway", "serve"]
