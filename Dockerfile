# The Proctor service image. Untrusted code never runs in this container: with the docker sandbox
# backend (docker-compose.yml) it runs in sibling sandbox containers of the image built from
# sandboxes/images/; with the local backend it needs bubblewrap and user namespaces here.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap g++ python3 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/proctor
COPY pyproject.toml README.md ./
COPY service ./service
COPY reward_specs ./reward_specs
COPY sandboxes ./sandboxes
RUN pip install --no-cache-dir ".[docker]"

ENV PROCTOR_HOST=0.0.0.0 \
    PROCTOR_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["proctor", "serve"]
