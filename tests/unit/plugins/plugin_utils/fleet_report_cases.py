# -*- coding: utf-8 -*-
"""Host results as the playbooks record them, for the fleet report's tests
(plugin_utils report: store, textfile; the fleet_report action)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

NOW = datetime.datetime(2026, 3, 8, 12, 0, 0, tzinfo=datetime.timezone.utc)


def ok_entry(torch="2.12.0.dev20260307+cu130", packages=None, gpus=8):
    return {
        "status": "ok",
        "venv": "/home/deploy/ml-env-abc",
        "active_venv": "/home/deploy/ml-env-abc",
        "gpu": {"present": True, "driver_version": "590.48.01", "cuda_driver_version": "13.1",
                "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                          "compute_capability": "12.0", "uuid": "GPU-5e1f0c2a-77b3-4c1e-9d0a-0000000000%02d" % i,
                          "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * i)} for i in range(gpus)]},
        "torch": {"torch_version": torch, "torch_cuda_version": "13.0",
                  "imports": {"flashinfer": {"ok": True, "version": "0.6.4"}},
                  "smoke": [{"device": 0, "dtype": "bfloat16", "tflops": 301.5},
                            {"device": 0, "dtype": "float16", "tflops": 310.25}]},
        "packages": packages if packages is not None else {"torch": torch, "Flashinfer_Python": "0.6.4"},
        "sgl_kernel_abi_key": "0123456789abcdef0123",
    }


def run(mode, **hosts):
    names = sorted(hosts)
    return {"mode": mode, "hosts": names, "results": [hosts[n] for n in names]}


HEALTHY = {"persistence_mode": True, "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16,
           "pcie_width_max": 16, "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "retired_pages_pending": None,
           "remapped_rows_pending": False, "remapped_rows_failure": False, "clocks_event_reasons_active": 1,
           "clocks_event_reasons": ["gpu_idle"], "temperature_c": 35, "power_draw_w": 41.5, "power_limit_w": 600.0,
           "clocks_sm_mhz": 180, "clocks_max_sm_mhz": 2617, "pcie_read_under_load": True}


def health_entry(gpus=8, tflops=300.0, slow=None, health=None):
    """A verified host whose GPUs report health and a bf16 smoke figure; slow={index: tflops}, health={index: {...}}."""
    entry = ok_entry(gpus=gpus)
    for g in entry["gpu"]["gpus"]:
        g["health"] = dict(HEALTHY, **(health or {}).get(g["index"], {}))
    entry["torch"]["smoke"] = [{"device": i, "dtype": "bfloat16", "tflops": (slow or {}).get(i, tflops)} for i in range(gpus)]
    return entry


def metric_samples(text):
    """Prometheus text read back with the official parser: name -> [(labels, value)]."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out
