#!/usr/bin/env bash
# The Python packages of the app image, downloaded once into deploy/wheels/; the Dockerfile installs from
# there only, with no index, so a build needs no package index and never meets the multi-GB CUDA torch.
#
#   deploy/wheelhouse.sh      # needs a Docker daemon and the base image (GLASS_BASE_IMAGE, as compose.yaml)
#
# 1. torch, as the exact CPU build `2.13.0+cpu` (that or nothing), by this machine's pip: where pip does
#    not already find it (machines with a local CPU wheel do), set TORCH_INDEX=https://download.pytorch.org/whl/cpu.
# 2. everything else in requirements.txt, resolved by Debian 12's own Python in a throwaway container of
#    the base image, so that dependencies which depend on the exact interpreter (redis needs async-timeout
#    below Python 3.11.3; Debian has 3.11.2) are the image's. pip there trusts this machine's CA bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
out=deploy/wheels
base=${GLASS_BASE_IMAGE:-debian:bookworm-slim}
torch=$(grep -E '^torch==' requirements.txt | sed -E 's/[[:space:]#].*//')
mkdir -p "$out"
python3 -m pip download --quiet --no-deps "${torch}+cpu" -d "$out" --only-binary=:all: --python-version 3.11 \
  --implementation cp --abi cp311 --platform manylinux_2_28_x86_64 ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}

ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
ca_mount=()
if [ -f "$ca" ]; then ca_mount=(-v "$(readlink -f "$ca"):/host-ca.crt:ro" -e PIP_CERT=/host-ca.crt); fi
docker run --rm "${ca_mount[@]}" -v "$PWD/requirements.txt:/requirements.txt:ro" -v "$PWD/$out:/wheels" \
  "$base" sh -ec '
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    # the CPU torch in /wheels ranks above the index'"'"'s plain 2.13.0
    python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: -r /requirements.txt \
      -d /wheels --find-links /wheels
    chown -R '"$(id -u):$(id -g)"' /wheels'
ls "$out"/torch-*+cpu-*.whl >/dev/null
if ls "$out"/nvidia_* >/dev/null 2>&1; then echo "$out holds CUDA packages: remove them, check TORCH_INDEX" >&2; exit 1; fi
echo "$out: $(ls "$out"/*.whl | wc -l) wheels, $(du -sh "$out" | cut -f1)"
