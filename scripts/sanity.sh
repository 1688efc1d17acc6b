#!/usr/bin/env bash
# ansible-test sanity needs the collection under ansible_collections/NS/NAME:
# copy the tracked and new (not ignored) files there and run it with no ignores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/sanity/ansible_collections/gpufleet/inference"
rm -rf "$dest"; mkdir -p "$dest"
cd "$root"
git ls-files -co --exclude-standard -z | grep -zv '^\.collections/' \
  | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$dest"
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1
pip_version=$(python3 -c 'import re, ansible_test._internal.python_requirements as r; print(re.search(r"pip=.([0-9.]+)", open(r.__file__).read()).group(1))')
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
[ -s "$cache" ] || install -D -m 0644 "$root/scripts/ansible_test_get_pip.py" "$cache"
exec ansible-test sanity --python "$(python3 -c 'import sys;print("%d.%d"%sys.version_info[:2])')" --requirements "$@"
