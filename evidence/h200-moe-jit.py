"""Builds flashinfer's JIT modules the model checks need, and packs them.

    build STATE          compile (timed per module), write STATE/done.json
    pack STATE ARCHIVE   the built <name>/<name>.so files + manifest.json
                         into a zstd tar: the JIT cache artifact
"""
import hashlib
import io
import json
import os
import sys
import tarfile
import time


def build(state):
    import torch
    import flashinfer
    from flashinfer.jit.fused_moe import gen_cutlass_fused_moe_sm90_module

    record = {'flashinfer': flashinfer.__version__, 'torch': torch.__version__, 'cuda': torch.version.cuda,
              'arch': '%d.%d' % torch.cuda.get_device_capability(0), 'nproc': os.cpu_count(),
              'max_jobs': os.environ.get('MAX_JOBS'), 'modules': {}}
    started = time.time()
    spec = gen_cutlass_fused_moe_sm90_module()
    record['moe_generate_seconds'] = round(time.time() - started, 1)
    started = time.time()
    try:
        spec.build()
        record['modules'][spec.name] = {'seconds': round(time.time() - started, 1), 'ok': True}
    except Exception as exc:  # the record says what failed
        record['modules'][spec.name] = {'seconds': round(time.time() - started, 1), 'ok': False,
                                        'error': '%s: %s' % (type(exc).__name__, str(exc)[-2000:])}
    # The small modules of the kernel checks: JIT-built by their first call.
    dev = torch.device('cuda', 0)
    x = torch.randn(4, 2048, device=dev, dtype=torch.bfloat16)
    w = torch.randn(2048, device=dev, dtype=torch.bfloat16)
    for name, call in (('rmsnorm', lambda: flashinfer.norm.rmsnorm(x, w)),
                       ('silu_and_mul', lambda: flashinfer.activation.silu_and_mul(x)),
                       ('top_k_sampling', lambda: flashinfer.sampling.top_k_sampling_from_probs(
                           torch.softmax(x.float(), -1), 1))):
        t0 = time.time()
        try:
            call()
            torch.cuda.synchronize()
            record['modules']['call:' + name] = {'seconds': round(time.time() - t0, 1), 'ok': True}
        except Exception as exc:
            record['modules']['call:' + name] = {'seconds': round(time.time() - t0, 1), 'ok': False,
                                                 'error': '%s: %s' % (type(exc).__name__, str(exc)[-500:])}
    record['total_seconds'] = round(time.time() - started, 1)
    with open(os.path.join(state, 'done.json'), 'w') as handle:
        json.dump(record, handle, indent=1)


def pack(state, archive):
    import zstandard
    from flashinfer.jit import env as jit_env

    with open(os.path.join(state, 'done.json')) as handle:
        record = json.load(handle)
    jit_dir = str(jit_env.FLASHINFER_JIT_DIR)
    modules = {}
    for name in sorted(os.listdir(jit_dir)):
        path = os.path.join(jit_dir, name, name + '.so')
        if os.path.isfile(path):
            with open(path, 'rb') as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            modules[name] = {'sha256': digest, 'bytes': os.path.getsize(path)}
    manifest = {'key': {k: record[k] for k in ('flashinfer', 'torch', 'cuda', 'arch')}, 'modules': modules}
    started = time.time()
    with open(archive, 'wb') as raw:
        with zstandard.ZstdCompressor(level=12, threads=-1).stream_writer(raw) as out:
            with tarfile.open(fileobj=out, mode='w|') as tar:
                data = json.dumps(manifest, indent=1).encode()
                info = tarfile.TarInfo('manifest.json')
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                for name in modules:
                    tar.add(os.path.join(jit_dir, name, name + '.so'), arcname='%s/%s.so' % (name, name))
    print(json.dumps(manifest, indent=1))
    print('packed %d modules, %d bytes -> %d bytes in %.1f s' % (
        len(modules), sum(m['bytes'] for m in modules.values()), os.path.getsize(archive), time.time() - started))


if __name__ == '__main__':
    if sys.argv[1] == 'build':
        build(sys.argv[2])
    else:
        pack(sys.argv[2], sys.argv[3])
