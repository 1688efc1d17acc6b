#!/usr/bin/env bash
# Prepares .cache/sglang-stack/ (ignored by git) for h100-triton-moe.sh: the
# test machine has no network and takes at most 64 MiB per call, so the
# sglang 0.5.23 stack travels as one tar of wheels cut in 58 MiB parts
# (parts/p00, p01, ...), each carried by one call into /tmp/stage there. The
# wheels are the ones h100-triton-moe.wheels.sha256 pins; sglang-kernel
# 0.4.10 is cut down to all but flash_ops.abi3.so (FlashAttention 3, 1.1 GB
# unpacked, which neither the MoE runner nor the server's imports load), so
# its hash is that of the cut wheel, made the same way each time. Run from the
# repository root on a machine that reaches PyPI; prints the tar's sha256
# (TAR_SHA256 in h100-triton-moe.sh).
set -euo pipefail
STACK=.cache/sglang-stack
LIST=evidence/h100-triton-moe.wheels.sha256
mkdir -p "$STACK/wheels" "$STACK/tmp"
pins=$(awk '{print $2}' "$LIST" | grep -v '^sglang_kernel-' | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/')
# $pins is one requirement per word, split on purpose
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --isolated --index-url https://pypi.org/simple --python-version 3.12 \
  --implementation cp --only-binary=:all: --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$STACK/wheels" $pins sglang-kernel==0.4.10 2>/dev/null
# the published sglang-kernel (sha256 043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724), cut down
kernel=$STACK/wheels/sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl
if ! grep -q "$(sha256sum "$kernel" | cut -d' ' -f1)" "$LIST"; then
  rm -rf "$STACK/tmp/kernel" && mkdir -p "$STACK/tmp/kernel"
  python3 -m zipfile -e "$kernel" "$STACK/tmp/kernel"
  rm "$STACK/tmp/kernel/sgl_kernel/flash_ops.abi3.so"
  sed -i '/^sgl_kernel\/flash_ops.abi3.so,/d' "$STACK/tmp/kernel/sglang_kernel-0.4.10.dist-info/RECORD"
  rm "$kernel" && (cd "$STACK/tmp/kernel" && find . -exec touch -d 2026-10-15T23:04:00Z {} + && \
    find . -type f | LC_ALL=C sort | zip -q -X -6 -@ "$OLDPWD/$kernel")
fi
(cd "$STACK/wheels" && sha256sum -c --quiet "$OLDPWD/$LIST")
rm -rf "$STACK/parts" && mkdir -p "$STACK/parts"
mapfile -t wheels < <(awk '{print $2}' "$LIST")
tar --sort=name --mtime=2026-12-01T00:00:00Z --owner=0 --group=0 --numeric-owner -cf - -C "$STACK/wheels" \
  "${wheels[@]}" | split -b 58M -d -a 2 - "$STACK/parts/p"
cat "$STACK"/parts/p* | sha256sum
