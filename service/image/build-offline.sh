#!/usr/bin/env bash
# Build the service image (the root Dockerfile) without any container registry: debootstrap a
# Debian 12 root file system with the packages in packages.txt and `docker import` it as the base
# (once; kept as proctor-service-base:bookworm), build wheels of Proctor and all its dependencies
# on this host, then `docker build --network none` the Dockerfile with them as its context.
#
# Usage: build-offline.sh [IMAGE [SOURCE]]   (default proctor:latest, this checkout)
# Env:   DEBIAN_MIRROR (default http://deb.debian.org/debian); PIP_* settings reach `pip wheel`.
# Needs: root, debootstrap, a running Docker engine, Debian's mirror and a package index (PyPI).
set -euo pipefail

image="${1:-proctor:latest}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${2:-$here/../..}" && pwd)"
base="proctor-service-base:bookworm"

work="$(mktemp -d /var/tmp/proctor-service-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT

if ! docker image inspect "$base" >/dev/null 2>&1; then
    pkgs="$(grep -v '^#' "$here/packages.txt" | paste -sd, -)"
    echo "build-offline: debootstrap bookworm with $pkgs" >&2
    debootstrap --variant=minbase --include="$pkgs" bookworm "$work/rootfs" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || { tail -n 40 "$work/debootstrap.log" >&2; exit 1; }
    rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
        "$work/rootfs/usr/share/doc" "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/info"
    echo "build-offline: docker import -> $base" >&2
    tar -C "$work/rootfs" --numeric-owner -c . | docker import - "$base" >/dev/null
    rm -rf "$work/rootfs"
fi

echo "build-offline: wheels of proctor[docker] and its dependencies" >&2
mkdir -p "$work/context/wheels"
python3 -m pip wheel --quiet --disable-pip-version-check -w "$work/context/wheels" "$root[docker]"
# what the image's own Python needs beyond this host's (markers on older patch releases)
target="$(docker run --rm --network none "$base" python3 -c 'import platform; print(platform.python_version())')"
python3 "$here/target_wheels.py" "$work/context/wheels" "$target"
# pip itself, run from its wheel inside the image (Debian's minimal python3 has no pip)
python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$work/context/wheels" pip
cp "$here/../../Dockerfile" "$work/context/Dockerfile"

echo "build-offline: docker build -> $image" >&2
docker build --quiet --network none --build-arg "BASE=$base" -t "$image" "$work/context" >/dev/null
docker run --rm --network none "$image" proctor --help >/dev/null
echo "build-offline: built $image" >&2
