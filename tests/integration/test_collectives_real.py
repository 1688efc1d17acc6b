"""The all-reduce check with a real torch (the 2.13.0 CPU wheel) and the gloo
backend: several rank processes on the controller, started by the probe the
way they are on a GPU host (one interpreter per rank, the module's source on
its command line). Through torch_verify on localhost (the module's options,
its judging, its facts) and through the probe directly for the planted
faults, which the module does not offer as options."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT, run_playbook

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (  # noqa: E402
    check_collectives,
    parse_probe_output,
    probe_argv,
)

PLAYBOOK = textwrap.dedent("""\
    - name: torch_verify with the all-reduce check on CPU ranks
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Verify
          gpufleet.inference.torch_verify:
            python: "{{ venv }}/bin/python"
            collectives: true
            collectives_backend: "{{ backend }}"
            collectives_world_size: 3
            collectives_sizes_mib: [1, 4]
            collectives_iterations: 3
            expect: "{{ expect }}"
          register: verified
          ignore_errors: true

        - name: Keep the result on the controller
          ansible.builtin.copy:
            content: "{{ verified | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          changed_when: false  # the test's own scratch file
    """)


def _verify(torch_cpu_venv, tmp_path, backend="gloo", expect=None):
    playbook = tmp_path / "collectives.yml"
    playbook.write_text(PLAYBOOK)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    out = tmp_path / "verified.json"
    result = run_playbook(playbook, inventory, extra_vars={
        "venv": torch_cpu_venv, "out": str(out), "backend": backend, "expect": expect or {}})
    assert result.rc == 0, result.out
    return json.loads(out.read_text())


def test_three_gloo_ranks_agree_and_are_timed(torch_cpu_venv, tmp_path):
    verified = _verify(torch_cpu_venv, tmp_path, expect={"min_allreduce_busbw_gbps": 0.001, "allreduce_size_mib": 4})
    assert verified.get("failed") is not True, verified.get("msg")
    assert verified["mismatches"] == []
    result = verified["ansible_facts"]["gpufleet_torch"]["collectives"]
    assert result["status"] == "ok" and result["correct"] is True and result["wrong_elements"] == 0
    assert result["backend"] == "gloo" and result["world_size"] == 3
    assert [r["stage"] for r in result["ranks"]] == ["done"] * 3
    assert [r["size_mib"] for r in result["results"]] == [1, 4]
    for entry in result["results"]:
        # 3 ranks: busbw = algbw * 2 * 2 / 3
        assert entry["busbw_gbps"] > 0
        assert abs(entry["busbw_gbps"] - entry["algbw_gbps"] * 4 / 3) < 0.01


def test_a_bandwidth_below_the_expectation_fails_with_the_diff(torch_cpu_venv, tmp_path):
    verified = _verify(torch_cpu_venv, tmp_path, expect={"min_allreduce_busbw_gbps": 100000})
    assert verified["failed"] is True
    busbw = verified["ansible_facts"]["gpufleet_torch"]["collectives"]["results"][-1]["busbw_gbps"]
    assert verified["mismatches"] == [
        "min_allreduce_busbw_gbps: expected >= 100000.0 GB/s bus bandwidth at 4 MiB, found %s GB/s over 3 ranks" % busbw]


def test_nccl_on_a_host_without_gpu_is_skipped_and_an_expectation_fails(torch_cpu_venv, tmp_path):
    plain = _verify(torch_cpu_venv, tmp_path, backend="nccl")
    assert plain.get("failed") is not True and plain["mismatches"] == []
    assert plain["ansible_facts"]["gpufleet_torch"]["collectives"]["status"] == "skipped"
    assert plain["ansible_facts"]["gpufleet_torch"]["collectives"]["reason"] == "no GPU"
    expected = _verify(torch_cpu_venv, tmp_path, backend="nccl", expect={"min_allreduce_busbw_gbps": 20})
    assert expected["mismatches"] == [
        "min_allreduce_busbw_gbps: expected >= 20.0 GB/s bus bandwidth at 4 MiB, found not measured (skipped: no GPU)"]


def _probe(torch_cpu_venv, plant, timeout=120):
    params = {"imports": [], "smoke": False, "kernels": False, "consistent": False, "timeout": 300,
              "packages": False, "markers": [], "collectives": True, "collectives_backend": "gloo",
              "collectives_world_size": 3, "collectives_sizes_mib": [1], "collectives_iterations": 2,
              "collectives_timeout": timeout, "collectives_plant": plant}
    proc = subprocess.run(probe_argv(os.path.join(torch_cpu_venv, "bin", "python"), params),
                          capture_output=True, text=True, timeout=400, check=False)
    return parse_probe_output(proc.returncode, proc.stdout, params["timeout"])


def test_a_planted_wrong_rank_fails_the_host_whatever_the_speed(torch_cpu_venv):
    facts = _probe(torch_cpu_venv, {"wrong_rank": 1})
    result = facts["collectives"]
    assert result["status"] == "failed" and result["correct"] is False and result["wrong_elements"] == 1
    assert result["results"] and result["results"][0]["busbw_gbps"] > 0
    assert check_collectives(facts) == [
        "collectives: expected the exact sum on every rank, found ranks 0, 1, 2: 1 of 1048576 elements wrong "
        "(first at element 12345: %s, exact %s)" % (
            float(sum((12345 * 7 + r * 13) % 61 + 1 for r in range(3)) + 1),
            float(sum((12345 * 7 + r * 13) % 61 + 1 for r in range(3))))]


def test_a_hung_rank_is_ended_by_the_timeout_with_a_clear_message(torch_cpu_venv):
    facts = _probe(torch_cpu_venv, {"hang_rank": 2}, timeout=20)
    result = facts["collectives"]
    assert result["status"] == "failed" and result["seconds"] < 60
    assert check_collectives(facts) == [
        "collectives: expected every rank to finish within 20 s, found rank 0 waiting for the other ranks to join; "
        "rank 1 waiting for the other ranks to join; rank 2 not yet joining the group (torch imported)"]
