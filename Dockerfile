# ft-gateway's image: the locked dependencies and the package, in a virtual environment
# on a Python base; non-root (uid and gid 10001, as deploy/kubernetes runs it), no sources.
# Build and smoke-test with scripts/image; docs/kubernetes.md says how to tag and push.
# BASE: any Debian-like image with python3 >= 3.11 and its venv module (scripts/image
# makes one with debootstrap where no registry can be reached).
ARG BASE=python:3.12-slim

FROM ${BASE} AS deps
# PIP_CERT: a CA bundle for a network that re-signs TLS (scripts/image mounts the host's).
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# The locked dependencies first, into a virtual environment without pip of its own
# (pip runs from /opt/build): a change to the code reuses this stage and its layer.
# xds-protos (ft-gateway extproc's Envoy protos) goes into a directory of its own
# (scripts/xds-protos says why).
COPY deploy/image/requirements.lock deploy/image/build.lock deploy/image/xds-protos.lock \
     scripts/xds-protos /tmp/lock/
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r /tmp/lock/build.lock \
 && python3 -m venv --without-pip /opt/ft-gateway \
 && /opt/build/bin/pip --python /opt/ft-gateway/bin/python install --require-hashes \
      --only-binary=:all: -r /tmp/lock/requirements.lock \
 && site=$(/opt/ft-gateway/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
 && echo /opt/ft-gateway/app > "$site/ft-gateway-app.pth" \
 && LOCK=/tmp/lock/xds-protos.lock PIP="/opt/build/bin/pip --python /opt/ft-gateway/bin/python" \
      bash /tmp/lock/xds-protos /opt/ft-gateway/bin/python

FROM deps AS builder
# Then the package, as a wheel, into /opt/ft-gateway/app (on the environment's path
# through the .pth above): its own small layer in the final image.
COPY pyproject.toml README.md /src/
COPY gateway /src/gateway
COPY sampler /src/sampler
COPY refengine /src/refengine
# The shipped policy, package data through the link gateway/policies/ft-serve.yaml.
COPY policies/ft-serve.yaml /src/policies/ft-serve.yaml
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/wheel /src \
 && /opt/build/bin/pip --python /opt/ft-gateway/bin/python install --no-deps \
      --target /opt/ft-gateway/app /tmp/wheel/*.whl \
 && /opt/build/bin/pip --python /opt/ft-gateway/bin/python check

FROM ${BASE}
RUN groupadd --system --gid 10001 ft-gateway \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin ft-gateway \
 && mkdir /var/lib/ft-gateway && chown 10001:10001 /var/lib/ft-gateway
COPY --from=deps /opt/ft-gateway /opt/ft-gateway
COPY --from=builder /opt/ft-gateway/app /opt/ft-gateway/app
# The config and policy where deploy/kubernetes mounts its ConfigMaps over them.
COPY deploy/image/config.yaml /etc/ft-gateway/config/config.yaml
COPY policies/ft-serve.yaml /etc/ft-gateway/policy/ft-serve.yaml
ENV PATH=/opt/ft-gateway/app/bin:/opt/ft-gateway/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    FT_GATEWAY_CONFIG=/etc/ft-gateway/config/config.yaml \
    FT_GATEWAY_HOST=0.0.0.0 \
    FT_GATEWAY_PORT=8080
# An empty working directory: nothing there for `import` to find before the package.
WORKDIR /var/lib/ft-gateway
USER 10001:10001
# 8080: the API, /healthz, /readyz; 9090: /metrics (listen.metrics_port in the config);
# 9002: ft-gateway extproc's gRPC (extproc.port).
EXPOSE 8080 9090 9002
# On SIGTERM the gateway drains for server.drain_timeout (30 s): stop it with a longer
# time-out (`podman stop -t 40`, `docker stop -t 40`); a runtime's default 10 s kills it.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["python3", "-c", "import os, sys, urllib.request; port = os.environ.get('FT_GATEWAY_PORT', '8080'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status != 200)"]
CMD ["ft-gateway", "serve"]
