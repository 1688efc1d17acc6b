#!/usr/bin/env bash
# Prepares .device/ (ignored by git) for the H200 evidence scripts: the test
# machine has no network and takes at most 64 MiB per call, so the real
# flashinfer-python wheel (62 MB, 427 MB unpacked) travels as its unpacked
# tree in a zstd tar, unpacked there by .device/unpack.sh with the zstandard
# wheel; its import-time dependencies travel as wheels. Run from the
# repository root on a machine that reaches PyPI.
set -euo pipefail
DEV=.device
mkdir -p "$DEV/whl" "$DEV/tmp"
dl() { python3 -m pip download -q --no-deps --isolated --index-url https://pypi.org/simple \
  --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$1" "${@:2}"; }
dl "$DEV/tmp" flashinfer-python==0.7.2.post1
dl "$DEV/whl" apache-tvm-ffi==0.1.15.post2 zstandard==0.25.0 click==8.5.1 einops==0.8.2 tabulate==0.10.0 \
  tqdm==4.70.1 nvidia-ml-py==13.615.71 ninja==1.13.2 packaging==26.4 requests==2.34.2 urllib3==2.8.0 \
  idna==3.20 certifi==2026.10.19.post1 charset_normalizer==3.5.3 cuda-python==13.4.4 cuda-bindings==13.5.0 \
  cuda-pathfinder==1.9.1 nvidia-cudnn-frontend==1.32.0
# ansible-core and its dependencies for h200-flashinfer-aot-role.sh (the role through Ansible there)
mkdir -p "$DEV/ans"
dl "$DEV/ans" ansible-core==2.19.14 cffi==2.1.1 cryptography==50.0.2 Jinja2==3.1.6 MarkupSafe==3.0.4 \
  packaging==26.4 pycparser==3.12 PyYAML==6.0.4 resolvelib==1.2.1
sha256sum "$DEV"/tmp/flashinfer_python-0.7.2.post1-py3-none-any.whl
rm -rf "$DEV/tmp/tree" && mkdir -p "$DEV/tmp/tree"
python3 -m zipfile -e "$DEV"/tmp/flashinfer_python-0.7.2.post1-py3-none-any.whl "$DEV/tmp/tree"
python3 -m pip install -q --target "$DEV/tmp/zs" "$DEV"/whl/zstandard-0.25.0-*.whl 2>/dev/null \
  || python3 -m pip install -q --target "$DEV/tmp/zs" zstandard
PYTHONPATH="$DEV/tmp/zs" python3 - "$DEV/tmp/tree" "$DEV/flashinfer-0.7.2.post1.tar.zst" <<'PY'
import io, sys, tarfile, zstandard
tree, dest = sys.argv[1:]
with open(dest, 'wb') as raw:
    with zstandard.ZstdCompressor(level=19, threads=-1).stream_writer(raw) as out:
        with tarfile.open(fileobj=out, mode='w|') as tar:
            tar.add(tree, arcname='.')
PY
cat > "$DEV/unpack.sh" <<'SH'
#!/usr/bin/env bash
# flashinfer's tree into /tmp/site, its dependencies beside it (no network).
set -euo pipefail
D=$(dirname "$0")
rm -rf /tmp/site /tmp/zs && mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/zs "$D"/whl/zstandard-*.whl
PYTHONPATH=/tmp/zs python3 - "$D/flashinfer-0.7.2.post1.tar.zst" <<'PY'
import sys, tarfile, zstandard
with open(sys.argv[1], 'rb') as raw:
    with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        with tarfile.open(fileobj=stream, mode='r|') as tar:
            tar.extractall('/tmp/site')
PY
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$D"/whl/*.whl
SH
chmod +x "$DEV/unpack.sh"
rm -rf "$DEV/tmp"
du -sh "$DEV"
