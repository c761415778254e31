#!/usr/bin/env bash
# A Debian 12 (bookworm) base image made from Debian's own packages, for a Docker that reaches no image
# registry (with one, `debian:bookworm-slim` does the same job and this script is not needed).
#
#   deploy/base_image.sh [NAME]     # default glass-base:bookworm; root, debootstrap and a Docker daemon
#
# Then build with it: GLASS_BASE_IMAGE=glass-base:bookworm (compose.yaml) or --build-arg BASE=... .
set -euo pipefail
name=${1:-glass-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d /tmp/glass-rootfs.XXXXXX)
cleanup() {
  for m in proc sys dev/pts dev; do mountpoint -q "$root/$m" && umount -l "$root/$m"; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
# as Debian's own images: no service starts while a package installs, no documentation or caches
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d" && chmod +x "$root/usr/sbin/policy-rc.d"
cat > "$root/etc/dpkg/dpkg.cfg.d/docker-minimal" <<DPKG
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
DPKG
echo 'APT::Install-Recommends "false";' > "$root/etc/apt/apt.conf.d/docker-no-recommends"
cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
# no package lists, caches, manuals or translations (the licences stay)
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'CMD ["bash"]' - "$name" >/dev/null
echo "$name: $(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1 / 1e6}')"
