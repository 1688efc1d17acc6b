#!/usr/bin/env python
"""The verification's input rendering per host, with verify_host's Jinja
stand-in and with the templar alone, side by side in one run; no hosts, no
containers.

    bench/verify_inputs.py [--hosts 64]

verify_host renders some of the verify role's variables without the templar
(_value: a "{{ name | default(literal) }}" default, the computed defaults
verify_torch_pin and verify_expect, a dict of "{{ name }}"), so that a
host's worker compiles fewer templates. This times what that saves: the
action's run (the checks of the verify role's and the fleet role's inputs,
the writable directories, torch_verify's options, any_set; the module runs
answered at once) on the task variables that ansible-playbook gives
verify.yml's verification task for a host of the sandbox inventory
(inventories/sandbox, its group_vars, one host as scripts/sandbox.py writes
it), once with the action as it is and once with _value templating every
variable, each in a fork of this process per host and action, as each
host's task is a fork of ansible-playbook's (a template one worker compiles,
the next compiles again). This process, like ansible-playbook's, has
imported the action and made its Jinja environment before it forks, and
templated nothing of the roles'. Printed: the median CPU a host of each
path, the ratio and the difference in ms.
"""
import argparse
import os
import pickle
import statistics
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify.yml")
TASK = "gpufleet.inference.verify_host"
TORCH_VERIFY = {"changed": False, "probed": True, "msg": "verified",
                "link": {"link_path": "/home/deploy/ml-env", "target": "/home/deploy/ml-env-0", "history": []},
                "ansible_facts": {"gpufleet_gpu": {"present": False}, "gpufleet_torch": {}}}


def templar_only(module):
    """The module's action with every variable templated (no stand-in)."""

    class ActionModule(module.ActionModule):
        def _value(self, name, task_vars):
            if self._values is None:
                self._values = {}
            if name not in self._values:
                self._values[name] = self._templar.template(task_vars[name])
            return self._values[name]

    return types.SimpleNamespace(ActionModule=ActionModule)


# one host as scripts/sandbox.py writes the sandbox's hosts.yml (beside its group_vars)
HOSTS = """all:
  children:
    sandbox:
      hosts:
        sbx1:
          ansible_host: 127.0.0.1
          ansible_port: 2201
          gpufleet_sandbox_container: gpufleet-sbx-1
      vars:
        ansible_user: deploy
        ansible_python_interpreter: /usr/bin/python3
        ansible_paramiko_host_key_checking: false
        ansible_ssh_private_key_file: .cache/sandbox/id_ed25519
        ansible_ssh_common_args: -o StrictHostKeyChecking=yes
"""


def verification_task(workdir):
    """(task, task_vars, loader) of verify.yml's verification for one sandbox host."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import Playbook
    from ansible.vars.manager import VariableManager

    with open(os.path.join(workdir, "hosts.yml"), "w") as f:
        f.write(HOSTS)
    os.symlink(os.path.join(INV, "group_vars"), os.path.join(workdir, "group_vars"))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[os.path.join(workdir, "hosts.yml")])
    host = inventory.get_host("sbx1")
    variables = VariableManager(loader=loader, inventory=inventory)
    playbook = Playbook.load(PLAYBOOK, variable_manager=variables, loader=loader)
    for play in playbook.get_plays():
        for block in play.compile():
            for task in block.get_tasks():
                if task.action == TASK:
                    task_vars = variables.get_vars(play=play, host=host, task=task,
                                                   _hosts=["sbx1"], _hosts_all=["sbx1"])
                    if "torch_nightly_versions" not in task_vars:
                        raise SystemExit("the sandbox's group_vars were not read")
                    return task, task_vars, loader
    raise SystemExit("no %s task in %s" % (TASK, PLAYBOOK))


def one_host(module, task, task_vars, loader):
    """The action's run for one host, in this (forked) process: CPU seconds
    and the options torch_verify would get."""
    from unittest.mock import MagicMock

    from ansible.playbook.play_context import PlayContext
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=loader, variables=task_vars)
    # what the worker does before the action runs, not timed: the task's own
    # templating (its Jinja environment made, a template compiled)
    templar.template(task.args)
    templar.template(trust_as_template("{{ inventory_hostname }}"))
    act = module.ActionModule(task, MagicMock(), PlayContext(), loader, templar, None)

    options = []

    def execute(module_name, module_args, task_vars):
        if module_name == "ansible.builtin.stat":
            return {"stat": {"exists": True, "isdir": True, "writeable": True}}
        options.append(module_args)
        return dict(TORCH_VERIFY)

    act._execute_module = execute
    start = time.process_time()
    result = act.run(task_vars=task_vars)
    spent = time.process_time() - start
    if result.get("failed"):
        raise SystemExit("the verification's task failed: %s" % result.get("msg"))
    return spent, repr(options)


def forked(fn, *args):
    """fn(*args) in a child of this process; its answer."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            answer = ("ok", fn(*args))
        except BaseException as exc:  # the parent says what went wrong
            answer = ("error", repr(exc))
        with os.fdopen(write, "wb") as out:
            pickle.dump(answer, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as inp:
        status, answer = pickle.load(inp)
    os.waitpid(pid, 0)
    if status != "ok":
        raise SystemExit("a host's run failed: %s" % answer)
    return answer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=64)
    args = parser.parse_args()
    os.chdir(ROOT)
    os.environ.setdefault("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg"))
    # the collection loader first, as ansible-playbook installs it: then the
    # collection's filters resolve, and its modules import through it
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()
    from ansible_collections.gpufleet.inference.plugins.action import verify_host

    actions = (("stand-in", verify_host), ("templar only", templar_only(verify_host)))
    with tempfile.TemporaryDirectory() as workdir:
        task, task_vars, loader = verification_task(workdir)
    # ansible-playbook's own process has templated before it forks (the play's
    # name and serial, conditions): the Jinja environment and builtin filters
    from ansible.template import Templar, trust_as_template
    Templar(loader=loader, variables={}).template(trust_as_template("{{ nothing | default('100%') }}"))
    spent = dict((label, []) for label, _module in actions)
    options = {}
    for host in range(args.hosts):
        # alternated, so that neither always runs first
        for label, module in (actions if host % 2 == 0 else actions[::-1]):
            seconds, options[label] = forked(one_host, module, task, task_vars, loader)
            spent[label].append(seconds)
    if len(set(options.values())) != 1:
        raise SystemExit("the two paths gave torch_verify different options:\n%s" % "\n".join(options.values()))
    medians = dict((label, statistics.median(times)) for label, times in spent.items())
    for label, times in spent.items():
        print("%-24s median %6.2f ms a host (min %.2f, max %.2f, %d hosts)"
              % (label, 1000 * medians[label], 1000 * min(times), 1000 * max(times), len(times)))
    stand_in, templar = (medians[label] for label, _module in actions)
    print("templar only / stand-in: %.2f; the stand-in saves %.2f ms a host"
          % (templar / stand_in, 1000 * (templar - stand_in)))


if __name__ == "__main__":
    main()
