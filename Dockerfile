# The Proctor service image: the API (`proctor serve`), the workers (`proctor worker`) and, in
# docker-compose.yml, Redis. Untrusted code never runs in it: workers with the docker sandbox
# backend start sibling sandbox containers of the image built from sandboxes/images/.
#
# Build it with `bash service/image/build-offline.sh` (no registry needed): that script makes the
# Debian 12 base (python3, redis-server) and puts wheels of Proctor and every dependency in
# wheels/ of the build context, so this file installs with no network at all.
ARG BASE=proctor-service-base:bookworm
FROM ${BASE}

COPY wheels /tmp/wheels
RUN set -eu; \
    set -- /tmp/wheels/pip-*.whl; \
    python3 "$1/pip" install --no-index --find-links /tmp/wheels --no-cache-dir \
        --break-system-packages --root-user-action=ignore --disable-pip-version-check \
        "proctor[docker]"; \
    rm -rf /tmp/wheels; \
    proctor --help >/dev/null

RUN useradd --uid 10001 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin proctor \
    && install -d -o 10001 -g 10001 -m 0700 /var/lib/proctor-redis
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /tmp
# Nothing in the image needs root: the API, workers and Redis all run as this user.
USER 10001:10001
EXPOSE 8000
CMD ["proctor", "serve", "--host", "0.0.0.0", "--port", "8000"]
