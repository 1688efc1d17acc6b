#!/usr/bin/env python
"""Build time of an extension for exactly the fleet's target against the
target list its CMakeLists hard-codes, measured side by side in one run.

A: a source tree built with the role's rules for one target (GPUFLEET_GENCODE_FLAGS).
B: the same source without the gencode rule, with upstream's default options
   (ENABLE_BELOW_SM90=ON): the hard-coded list.
Builds alternate A B A B ... (fresh build folder each), after no warm-up (a
build has no cache to warm); each side's wheel is listed with cuobjdump so the
figures say how many targets each compiled. Prints min / median / max and the
pairwise ratio A/B; with device code only, the ratio would approach
1 / (number of B's targets); host-side compilation of the C++ sources (the same
on both sides) keeps it above that.

    bench/sgl_kernel_arch_build.py --python python3 --cuda-home /usr/local/cuda-13.0 \
        --src-a TREE_WITH_RULES --define-a GPUFLEET_GENCODE_FLAGS=... --define-a ENABLE_BELOW_SM90=OFF \
        --src-b TREE_WITHOUT --define-b ENABLE_BELOW_SM90=ON [--pairs 1] [--jobs 16] [--json out.json]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile


def build(python, src, defines, env):
    out = tempfile.mkdtemp(prefix='arch-bench-')
    argv = [python, '-m', 'pip', 'wheel', '-q', '--no-build-isolation', '--no-deps', '-w', out, src]
    argv += ['-Ccmake.define.%s' % d for d in defines]
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit('build of %s failed:\n%s' % (src, proc.stdout[-3000:] + proc.stderr[-3000:]))
    return seconds, glob.glob(os.path.join(out, '*.whl'))[0], out


def targets(cuobjdump, wheel):
    """SASS targets of every shared object of the wheel."""
    found = set()
    work = tempfile.mkdtemp(prefix='arch-bench-x-')
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(work)
        for so in glob.glob(os.path.join(work, '**', '*.so'), recursive=True):
            proc = subprocess.run([cuobjdump, '--list-elf', so], capture_output=True, text=True, check=False)
            found.update(line.rsplit('.', 2)[-2] for line in proc.stdout.splitlines() if line.endswith('.cubin'))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sorted(found)


def summary(values):
    return {'min': round(min(values), 2), 'median': round(statistics.median(values), 2), 'max': round(max(values), 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--python', default=sys.executable)
    parser.add_argument('--cuda-home', default='/usr/local/cuda-13.0')
    parser.add_argument('--src-a', required=True)
    parser.add_argument('--define-a', action='append', default=[])
    parser.add_argument('--src-b', required=True)
    parser.add_argument('--define-b', action='append', default=[])
    parser.add_argument('--arch-list', default='9.0a', help='TORCH_CUDA_ARCH_LIST for both (torch flags are cleared)')
    parser.add_argument('--pairs', type=int, default=1)
    parser.add_argument('--jobs', type=int, default=os.cpu_count())
    parser.add_argument('--json')
    args = parser.parse_args()
    env = dict(os.environ, CUDA_HOME=args.cuda_home, CUDACXX=os.path.join(args.cuda_home, 'bin', 'nvcc'),
               TORCH_CUDA_ARCH_LIST=args.arch_list, CMAKE_BUILD_PARALLEL_LEVEL=str(args.jobs), MAX_JOBS=str(args.jobs),
               PATH=os.path.join(args.cuda_home, 'bin') + os.pathsep + os.environ.get('PATH', ''))
    cuobjdump = os.path.join(args.cuda_home, 'bin', 'cuobjdump')
    a_s, b_s, ratios, a_t, b_t = [], [], [], [], []
    for dummy in range(args.pairs):
        a, wheel_a, out_a = build(args.python, args.src_a, args.define_a, env)
        b, wheel_b, out_b = build(args.python, args.src_b, args.define_b, env)
        a_t, b_t = targets(cuobjdump, wheel_a), targets(cuobjdump, wheel_b)
        shutil.rmtree(out_a, ignore_errors=True)
        shutil.rmtree(out_b, ignore_errors=True)
        a_s.append(a)
        b_s.append(b)
        ratios.append(a / b)
        print('pair: A %.1f s (%s), B %.1f s (%s)' % (a, ', '.join(a_t), b, ', '.join(b_t)), flush=True)
    report = {'a_seconds': summary(a_s), 'b_seconds': summary(b_s), 'ratio': summary(ratios), 'pairs': args.pairs,
              'a_targets': a_t, 'b_targets': b_t, 'jobs': args.jobs,
              'device_code_only_bound': round(float(len(a_t)) / len(b_t), 3) if b_t else None}
    print('%-30s %8s %8s %8s' % ('', 'min', 'median', 'max'))
    for label, key in (('A: rules, %d target(s) s' % len(a_t), 'a_seconds'), ('B: hard-coded, %d target(s) s' % len(b_t), 'b_seconds'),
                       ('ratio A/B (pairwise)', 'ratio')):
        row = report[key]
        print('%-30s %8.2f %8.2f %8.2f' % (label, row['min'], row['median'], row['max']))
    print('median ratio %.3f; 1 / (number of B targets) = %s' % (report['ratio']['median'], report['device_code_only_bound']))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(report, handle, indent=2, sort_keys=True)


if __name__ == '__main__':
    main()
