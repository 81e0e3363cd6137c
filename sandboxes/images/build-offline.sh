#!/usr/bin/env bash
# Build the sandbox image without any container registry: debootstrap a Debian 12 root file system
# with the packages in packages.txt, `docker import` it as the base, then `docker build` the
# Dockerfile on top of it (its install step finds everything installed and needs no network).
#
# Usage: build-offline.sh [IMAGE]   (default proctor-sandbox:2)
# Env:   DEBIAN_MIRROR (default http://deb.debian.org/debian), KEEP_ROOTFS=1 to keep the work dir.
# Needs: root, debootstrap, a running Docker engine, and Debian's package mirror.
set -euo pipefail

image="${1:-proctor-sandbox:2}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base="proctor-sandbox-base:bookworm"

work="$(mktemp -d /var/tmp/proctor-rootfs.XXXXXX)"
cleanup() { [[ "${KEEP_ROOTFS:-0}" == 1 ]] || rm -rf "$work"; }
trap cleanup EXIT

pkgs="$(grep -v '^#' "$here/packages.txt" | paste -sd, -)"
# Packages the host already downloaded (tests/run installs the same toolchains for `local`) are
# offered to debootstrap, which reuses those whose checksums match the mirror's: none twice.
mkdir -p "$work/rootfs/var/cache/apt/archives"
find /var/cache/apt/archives -maxdepth 1 -name '*.deb' -exec cp -t "$work/rootfs/var/cache/apt/archives" {} + 2>/dev/null || true
echo "build-offline: debootstrap bookworm with $pkgs" >&2
debootstrap --variant=minbase --include="$pkgs" bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 40 "$work/debootstrap.log" >&2; exit 1; }
# Trim what a container never uses.
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
    "$work/rootfs/usr/share/doc" "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/info"

echo "build-offline: docker import -> $base" >&2
tar -C "$work/rootfs" --numeric-owner -c . | docker import - "$base" >/dev/null

echo "build-offline: docker build -> $image" >&2
docker build --quiet --network none --build-arg "BASE=$base" -t "$image" "$here" >/dev/null
docker run --rm --network none "$image" python3 -c "import numpy, sortedcontainers, sys; print(sys.version)"
docker run --rm --network none "$image" sh -c 'javac -version && node --version && go version && rustc --version'
echo "build-offline: built $image" >&2
