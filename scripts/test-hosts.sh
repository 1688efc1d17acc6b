#!/usr/bin/env bash
# Real test hosts for molecule and the sandbox fleet: podman (with runc and the
# two containers.conf settings this kind of machine needs) and a Debian 12
# image built locally with debootstrap, because no registry can be reached.
# Idempotent: a re-run with the image present takes well under a second.
set -euo pipefail

IMAGE="${GPUFLEET_TEST_IMAGE:-localhost/gpufleet-debian12:latest}"
CACHE="${GPUFLEET_CACHE:-$(cd "$(dirname "$0")/.." && pwd)/.cache}"
ROOTFS_TAR="$CACHE/debian12-rootfs.tar.zst"
# Bump when the package list below changes, so cached images are rebuilt.
IMAGE_REVISION=3
PACKAGES=python3,python3-apt,python3-venv,sudo,systemd,systemd-sysv,dbus,openssh-server,ca-certificates,gnupg,git,xz-utils,zstd,procps,iproute2,binutils

log() { printf 'test-hosts: %s\n' "$*" >&2; }
need_root() { if [ "$(id -u)" -ne 0 ]; then echo sudo; fi; }
SUDO=$(need_root)

install_packages() {
  local missing=()
  for cmd_pkg in podman:podman runc:runc fuse-overlayfs:fuse-overlayfs slirp4netns:slirp4netns \
                 newuidmap:uidmap debootstrap:debootstrap zstd:zstd ssh-keygen:openssh-client \
                 shellcheck:shellcheck chromium:chromium; do
    command -v "${cmd_pkg%%:*}" >/dev/null 2>&1 || missing+=("${cmd_pkg#*:}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

configure_podman() {
  local conf=/etc/containers/containers.conf hard
  hard=$(ulimit -Hn)
  local want
  want=$(printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=32768:32768"]\n\n[engine]\nruntime = "runc"\n' "$hard" "$hard")
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    log "writing $conf (nofile=$hard, runtime runc)"
    $SUDO mkdir -p /etc/containers
    printf '%s\n' "$want" | $SUDO tee "$conf" >/dev/null
  fi
}

mirror() {
  # The machine's own Debian mirror, from deb822 or one-line sources.
  local m
  m=$(grep -hoE '^URIs: *http[^ ]*debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$m" ] || m=$(grep -hoE '^deb +http[^ ]*debian/? +bookworm' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1 | awk '{print $2}')
  echo "${m:-http://deb.debian.org/debian}"
}

build_image() {
  local have
  have=$(podman image inspect --format '{{ index .Labels "gpufleet.revision" }}' "$IMAGE" 2>/dev/null || true)
  if [ "$have" = "$IMAGE_REVISION" ]; then
    return 0
  fi
  mkdir -p "$CACHE"
  local rev_file="$CACHE/debian12-rootfs.revision"
  if [ ! -s "$ROOTFS_TAR" ] || [ "$(cat "$rev_file" 2>/dev/null)" != "$IMAGE_REVISION" ]; then
    local root
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    log "debootstrap bookworm from $(mirror) (about a minute)"
    if ! $SUDO debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1; then
      log "debootstrap failed; last lines of $CACHE/debootstrap.log:"
      tail -n 20 "$CACHE/debootstrap.log" >&2
      $SUDO rm -rf "$root"
      exit 1
    fi
    # A non-root deploy user with passwordless sudo: the roles install the
    # venv as this user and become root only where they must.
    $SUDO chroot "$root" useradd -m -s /bin/bash deploy
    echo 'deploy ALL=(ALL) NOPASSWD:ALL' | $SUDO tee "$root/etc/sudoers.d/deploy" >/dev/null
    $SUDO chmod 0440 "$root/etc/sudoers.d/deploy"
    # Host keys are made per container at sandbox start, not baked in.
    $SUDO rm -f "$root"/etc/ssh/ssh_host_*
    $SUDO rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    $SUDO tar -C "$root" -c . | zstd -q -T0 -o "$ROOTFS_TAR.tmp" -f
    mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
    echo "$IMAGE_REVISION" >"$rev_file"
    $SUDO rm -rf "$root"
  fi
  log "importing $IMAGE"
  zstd -q -d -c "$ROOTFS_TAR" | podman import \
    --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL=SIGRTMIN+3' \
    --change "LABEL gpufleet.revision=$IMAGE_REVISION" - "$IMAGE" >/dev/null
}

install_packages
configure_podman
build_image
log "ready: $IMAGE"
