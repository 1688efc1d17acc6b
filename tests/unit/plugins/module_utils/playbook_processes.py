# -*- coding: utf-8 -*-
"""Real stand-ins for an ansible-playbook run on this machine, for the host lock tests.

A tree is a process whose command line is ``python <dir>/ansible-playbook N``
(what the host lock recognises as ansible-playbook) and N forks of it, with
the same command line, as ansible-playbook's workers are. They live until the
test ends the tree or kills its main process (a run stopped by SIGKILL).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

SCRIPT = r'''
import os
import sys

workers = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        sys.stdin.read()
        os._exit(0)
    workers.append(pid)
sys.stdout.write(" ".join(str(p) for p in [os.getpid()] + workers) + "\n")
sys.stdout.flush()
sys.stdin.read()
for pid in workers:
    os.waitpid(pid, 0)
'''


class Tree:
    """One stand-in run: ``pid`` (the main process) and ``workers`` (its forks)."""

    def __init__(self, directory, name, workers):
        os.makedirs(directory)
        script = os.path.join(directory, name)
        with open(script, 'w') as handle:
            handle.write(SCRIPT)
        self.proc = subprocess.Popen([sys.executable, script, str(workers)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, universal_newlines=True)
        pids = [int(p) for p in self.proc.stdout.readline().split()]
        self.pid, self.workers = pids[0], pids[1:]

    def kill(self):
        """SIGKILL the main process (its workers end as their input closes)."""
        self.proc.kill()
        self.proc.wait()
        self.end()

    def end(self):
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.stdout.close()
        self.proc.wait(timeout=30)


class Trees:
    """Starts trees under ``directory``; ends them all on exit."""

    def __init__(self, directory):
        self.directory = directory
        self.trees = []

    def start(self, name='ansible-playbook', workers=2):
        tree = Tree(os.path.join(self.directory, 'run%d' % len(self.trees)), name, workers)
        self.trees.append(tree)
        return tree

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for tree in self.trees:
            tree.end()
