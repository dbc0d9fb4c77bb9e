# ft-gateway: slim image, non-root, health-checked.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY sampler ./sampler
COPY refengine ./refengine
# Before the install: gateway/policies/ft-serve.yaml (package data) links to it.
COPY policies ./policies
RUN pip install . && useradd --system --uid 10001 --no-create-home gateway
COPY config.yaml ./config.yaml

USER 10001
EXPOSE 8080
# Listen on all interfaces inside the container; the engine is found through
# FT_GATEWAY_UPSTREAM (e.g. http://engine:8000).
ENV FT_GATEWAY_HOST=0.0.0.0 FT_GATEWAY_PORT=8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
CMD ["ft-gateway", "serve", "--config", "/app/config.yaml"]
