#!/usr/bin/env bash
# Build wrapper of the gpufleet.inference sgl_kernel role, copied to the builder.
#
#   build-wheel.sh build SRC DIST LOG COUNTER PYTHON UV KEY
#       Builds the wheel of SRC into DIST with PYTHON's torch (no build
#       isolation), the whole output into LOG, its exit status into LOG.rc.
#       Appends one line "KEY HOST DATE" to COUNTER per build that really
#       starts, so that tests can count builds. A DIST that already holds a
#       wheel is reused (no build, no counter line).
#   build-wheel.sh status LOG
#       One JSON line: {"finished": bool, "rc": int|null, "progress": "...",
#       "done": int|null, "total": int|null, "started": int|null, "now": int}:
#       the last ninja step [done/total] of LOG (else its last line), when the
#       build started and the builder's time (epoch seconds).
set -u

cmd=${1:-}
case "$cmd" in
status)
    log=$2
    rc=null
    finished=false
    if [ -f "$log.rc" ]; then
        rc=$(cat "$log.rc")
        finished=true
        # read while the build writes it: not finished yet
        case "$rc" in
        '' | *[!0-9]*) rc=null finished=false ;;
        esac
    fi
    progress=""
    done_steps=null
    total_steps=null
    started=null
    if [ -f "$log" ]; then
        # ninja's "[12/40] Building CUDA object csrc/x.cu.o" lines (four words at most:
        # with -v a step is its whole nvcc command), else the last line
        progress=$(grep -a -o '^ *\[[0-9]*/[0-9]*\] [^ ]*\( [^ ]*\)\{0,3\}' "$log" | tail -n 1)
        if [ -n "$progress" ]; then
            done_steps=$(printf '%s' "$progress" | sed 's|^ *\[\([0-9]*\)/.*|\1|')
            total_steps=$(printf '%s' "$progress" | sed 's|^ *\[[0-9]*/\([0-9]*\)\].*|\1|')
        else
            progress=$(tail -n 1 "$log")
        fi
        # the start of this build: the date of the header the build branch writes (a rebuild
        # truncates the same file, so its birth time can be an older build's), else the
        # file's birth time (0 where the file system does not record it)
        header=$(head -n 1 "$log")
        case "$header" in
        "# gpufleet sgl_kernel build, key "*) started=$(date -u -d "${header##*, }" +%s 2>/dev/null) ;;
        *) started="" ;;
        esac
        case "$started" in
        '' | *[!0-9]*) started=$(stat -c %W "$log" 2>/dev/null) ;;
        esac
        case "$started" in
        '' | 0 | *[!0-9]*) started=null ;;
        esac
    fi
    progress=$(printf '%s' "$progress" | tr -d '\\"' | tr -c '[:print:]' ' ' | cut -c1-160)
    # "now" is the builder's clock, so that the controller's elapsed time does not depend on
    # the two clocks agreeing
    printf '{"finished": %s, "rc": %s, "progress": "%s", "done": %s, "total": %s, "started": %s, "now": %s}\n' \
        "$finished" "$rc" "$progress" "$done_steps" "$total_steps" "$started" "$(date +%s)"
    exit 0
    ;;
build)
    src=$2 dist=$3 log=$4 counter=$5 python=$6 uv=$7 key=$8
    mkdir -p "$dist" "$(dirname "$log")" "$(dirname "$counter")"
    rm -f "$log.rc"
    if ls "$dist"/*.whl >/dev/null 2>&1; then
        echo "wheel already in $dist: not rebuilt" > "$log"
        echo 0 > "$log.rc"
        exit 0
    fi
    echo "$key $(hostname) $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$counter"
    tmp="$dist.tmp"
    rm -rf "$tmp"
    {
        echo "# gpufleet sgl_kernel build, key $key, $(date -u)"
        echo "# MAX_JOBS=${MAX_JOBS:-} CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-} CUDA_HOME=${CUDA_HOME:-}"
        echo "# CMAKE_ARGS=${CMAKE_ARGS:-}"
    } > "$log"
    if [ -n "$uv" ]; then
        "$uv" build --wheel --no-build-isolation --python "$python" --out-dir "$tmp" "$src" >> "$log" 2>&1
    else
        "$python" -m pip wheel --no-build-isolation --no-deps --wheel-dir "$tmp" -v "$src" >> "$log" 2>&1
    fi
    rc=$?
    if [ $rc -eq 0 ]; then
        if ls "$tmp"/*.whl >/dev/null 2>&1; then
            mv "$tmp"/*.whl "$dist"/
        else
            echo "build finished but wrote no wheel into $tmp" >> "$log"
            rc=1
        fi
    fi
    rm -rf "$tmp"
    echo $rc > "$log.rc"
    exit $rc
    ;;
*)
    echo "usage: $0 build SRC DIST LOG COUNTER PYTHON UV KEY | status LOG" >&2
    exit 2
    ;;
esac
