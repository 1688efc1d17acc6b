#!/usr/bin/env bash
# Builds the execution environment image (execution-environment/) with
# ansible-builder and podman: packs this checkout's collection, downloads the
# image's Python wheels (CPython 3.11, x86_64, at requirements/controller.lock's
# versions) and checks them against execution-environment/wheels.sha256, and
# the ssh client's Debian package against execution-environment/debs.sha256, then
# builds localhost/gpufleet-ee:<version> on the project's own Debian 12 image
# (make test-hosts). Idempotent: an image whose label names the same
# collection files, definition and pins is kept.
#
#   scripts/ee.sh            build (or keep) the image; prints its name
#   scripts/ee.sh --pin      rewrite wheels.sha256 from a fresh download (after a lock change)
#   GPUFLEET_EE_TAG=registry.example.com/gpufleet-ee:0.1.0 scripts/ee.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv_bin="$root/.venv/bin"
export PATH="$venv_bin:$PATH"
version=$(awk '/^version:/ {print $2}' galaxy.yml)
tag="${GPUFLEET_EE_TAG:-localhost/gpufleet-ee:$version}"
base=$(awk '/^ *name: localhost\// {print $2; exit}' execution-environment/execution-environment.yml)
log() { printf 'ee: %s\n' "$*" >&2; }

command -v ansible-builder >/dev/null || { log "ansible-builder is not installed (make bootstrap-dev)"; exit 2; }
podman image exists "$base" || { log "the base image $base is missing (make test-hosts builds it)"; exit 2; }

ee="$root/execution-environment"
wheels="$ee/wheels"
rm -rf "$wheels"; mkdir -p "$wheels"
# What the image's pip installs: the collection's controller requirements, what
# ansible-builder's own build stage installs (bindep, pyyaml, packaging), the
# container init of the final stage (dumb-init, at the version ansible-builder asks for) and
# pbr's setuptools. Wheels only, for the image's Python, whatever the controller runs.
python3 -m pip download -q --disable-pip-version-check -d "$wheels" -c requirements/controller.lock \
  -r requirements/controller.txt bindep pyyaml packaging setuptools==84.2.1 dumb-init==1.2.5 \
  --only-binary=:all: --implementation cp --python-version 3.11 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
  --platform linux_x86_64 >&2
if [ "${1:-}" = "--pin" ]; then
  (cd "$wheels" && sha256sum -- *.whl) >"$ee/wheels.sha256"
  log "wrote $ee/wheels.sha256 ($(wc -l <"$ee/wheels.sha256") wheels)"
fi
# every wheel pinned, and no other
got=$(find "$wheels" -maxdepth 1 -name '*.whl' -printf '%f\n' | sort)
want=$(awk '{print $2}' "$ee/wheels.sha256" | sort)
if [ "$got" != "$want" ] || ! (cd "$wheels" && sha256sum --quiet --strict -c "$ee/wheels.sha256" >&2); then
  log "the downloaded wheels differ from execution-environment/wheels.sha256 (a changed lock or index: check, then scripts/ee.sh --pin)"
  diff <(echo "$want") <(echo "$got") >&2 || true
  exit 2
fi

# The ssh client: OpenSSH 10.0 from Debian 12's backports (the base image's
# 9.2 comes first, from bindep.txt, and this replaces it). Its default key
# exchange, mlkem768x25519-sha256, is post-quantum and costs the client about
# a fifth of OpenSSH 9's default (sntrup761x25519) with hosts on OpenSSH 9.9
# or later; with older hosts both agree on sntrup761x25519 as before. Pinned
# by file name (the version) and sha256 in execution-environment/debs.sha256;
# GPUFLEET_DEBIAN_MIRROR names another mirror, e.g. a snapshot.debian.org
# archive once backports has moved past this version.
mirror="${GPUFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
debs="$ee/debs"
rm -rf "$debs.part"; mkdir -p "$debs" "$debs.part"
while read -r sum path; do
  [ -n "$path" ] || continue
  name=${path##*/}
  if [ -s "$debs/$name" ] && [ "$(sha256sum "$debs/$name" | cut -d' ' -f1)" = "$sum" ]; then
    mv "$debs/$name" "$debs.part/$name"
  elif ! python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=300).read())' \
      "$mirror/$path" "$debs.part/$name"; then
    log "could not download $path from $mirror (a backport that moved on: pin its successor in execution-environment/debs.sha256, or set GPUFLEET_DEBIAN_MIRROR to a snapshot.debian.org archive)"
    exit 2
  fi
done <"$ee/debs.sha256"
# only the pinned packages, each checked
rm -rf "$debs"; mv "$debs.part" "$debs"
if ! (cd "$debs" && awk '{n = $2; sub(".*/", "", n); print $1 "  " n}' "$ee/debs.sha256" | sha256sum --quiet --strict -c - >&2); then
  log "a package in $debs differs from execution-environment/debs.sha256 (removed; run again to download it anew)"
  rm -rf "$debs"
  exit 2
fi

out="$ee/collections"
rm -rf "$out"; mkdir -p "$out"
ansible-galaxy collection build --force --output-path "$out" . >/dev/null
tarball="$out/gpufleet-inference-$version.tar.gz"
[ -s "$tarball" ] || { log "ansible-galaxy did not write $tarball"; exit 2; }

# What the image is made of: the collection's files (their sha256, not the
# tarball's, which carries build times), the definition and the pins.
key=$( (tar -xzOf "$tarball" FILES.json; cat "$ee"/*.yml "$ee/wheels.sha256" "$ee/debs.sha256" requirements/controller.lock) | sha256sum | cut -c1-16)
if [ "$(podman image inspect --format '{{ index .Labels "gpufleet.ee" }}' "$tag" 2>/dev/null || true)" = "$key" ]; then
  log "kept $tag ($key)"
  echo "$tag"
  exit 0
fi
log "building $tag ($key) on $base"
start=$(date +%s)
ansible-builder build --file execution-environment/execution-environment.yml \
  --context execution-environment/context --container-runtime podman --tag "$tag" \
  --build-arg "EE_BASE_IMAGE=$base" --extra-build-cli-args "--label gpufleet.ee=$key" -v 2 >&2
log "built $tag in $(( $(date +%s) - start )) s"
echo "$tag"
