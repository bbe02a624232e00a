"""``ax.mon.Monitor``: MXNet's monitor helper over ``Executor.set_monitor_callback``.

Every ``interval`` batches (between ``tic()`` and ``toc()``) it records a statistic
of each node output (and input, with ``monitor_all``) whose name matches
``pattern``; ``toc()`` returns ``[(step, name, stat_string)]``.
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np


def _norm_stat(x) -> float:
    a = x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)
    return float(np.linalg.norm(a) / np.sqrt(a.size)) if a.size else 0.0


class Monitor:
    def __init__(self, interval: int, stat_func: Callable | None = None, pattern: str = ".*",
                 sort: bool = False, monitor_all: bool = False):
        self.interval = interval
        self.stat_func = stat_func or _norm_stat
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all
        self.step = 0
        self.activated = False
        self.queue: list[tuple[int, str, object]] = []
        self.exes: list = []

    def stat_helper(self, name: str, array) -> None:
        if self.activated and self.re_prog.match(name):
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe) -> None:
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        if not self.activated:
            return []
        self.activated = False
        res = []
        for exe in self.exes:   # parameters too, as MXNet's toc reports arg arrays
            for name, arr in zip(exe._arg_names, exe.arg_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        for n, k, v in self.queue:
            vals = v if isinstance(v, (list, tuple)) else [v]
            res.append((n, k, "\t".join(str(float(np.asarray(x).ravel()[0]) if np.size(x) else x) for x in vals)))
        self.queue = []
        return res

    def toc_print(self) -> None:
        for n, k, v in self.toc():
            print(f"Batch: {n:7d} {k:30s} {v}")
