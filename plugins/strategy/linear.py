# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Strategy plugin gpufleet.inference.linear: ansible-core's linear strategy,
waiting for a free worker instead of looking for one every 0.1 ms.

When a task has more hosts than forks, ansible-core's strategy hands a host
to a worker only when one is free, and until then it walks the list of
workers, asks each whether it is alive (a waitpid each) and sleeps 0.1 ms,
for as long as the busiest workers take. A fleet verification's workers each
wait seconds for their host's ``import torch``: at 64 hosts and 50 forks that
spin was 85 % of the main process's CPU, half of the whole run's
(bench/fleet_profile.py). Here the strategy blocks on the workers' process
sentinels (readable when a worker ends) until one of them is free, then
queues as before. Everything else is the linear strategy's own.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: linear
short_description: The linear strategy, without busy-waiting for a free worker
description:
  - Runs each task on every host before the next task, as ansible-core's
    C(linear) strategy does (it is that strategy, subclassed).
  - When every worker (C(forks)) is busy, it waits for one to end by blocking
    on the workers' process sentinels, instead of looking for a free one every
    0.1 ms. With more hosts than forks, that wait was most of the controller's
    CPU in a fleet run.
  - Opt-in, for a run with more hosts than forks - C(strategy = gpufleet.inference.linear)
    in ansible.cfg or E(ANSIBLE_STRATEGY). The collection's playbooks do not
    set it - ansible-core 2.19 warns on every run that strategy plugins outside
    ansible.builtin are deprecated.
author:
  - gpufleet.inference maintainers (@gpufleet)
version_added: "0.1.0"
"""

from multiprocessing.connection import wait

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

# the longest one wait blocks before it looks again (a worker that ended
# before its sentinel was in the list is seen then at the latest)
WAIT_S = 1.0


def free_slot(workers):
    """True when a worker slot is empty or its worker has ended."""
    return any(w is None or not w.is_alive() for w in workers)


class StrategyModule(LinearStrategyModule):
    def _queue_task(self, host, task, task_vars, play_context):
        # A throttled task looks only at the first slots: its own loop then.
        if not task.throttle:
            while not free_slot(self._workers):
                ended = wait([w.sentinel for w in self._workers], timeout=WAIT_S)
                # A worker's sentinel is ready once its files are closed, a
                # moment before the kernel lets it be reaped (is_alive() says
                # so only then): join it, with a bound, instead of looking
                # again and again in that moment (hundreds of looks on a
                # loaded machine).
                for w in self._workers:
                    if w.sentinel in ended:
                        w.join(WAIT_S)
        return super()._queue_task(host, task, task_vars, play_context)
