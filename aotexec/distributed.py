"""Data-parallel collectives over MPI (mpi4py): bucketed allreduce and broadcast with a deadline.

Run a script under ``mpirun -np N python train.py``; every rank binds the same graph or artifact
on its shard of the batch and calls ``allreduce`` on its gradients after ``backward``.
Gradients are summed in flat buckets (one nonblocking ``Iallreduce`` each, all in flight at
once) so that a net with hundreds of small parameters costs a few collectives, not hundreds,
and the caller's ``on_ready`` (the optimizer update) runs on a bucket while later ones are
still on the wire.

A rank that dies or stalls must not hang the others: every collective is nonblocking and
polled against a deadline (``Options.dist_timeout``, ``AOTEXEC_DIST_TIMEOUT``, 60 s), past
which it raises a one-line ``AotexecError``; and ``world()`` installs an excepthook that,
after printing an uncaught exception, aborts the whole MPI job (as ``python -m mpi4py``
does) instead of leaving the other ranks waiting in a collective.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from .base import AotexecError
from .options import Options

BUCKET_BYTES = 4 << 20     # ~ PyTorch DDP's 25 MB / 6: a few buckets for LeNet-to-ResNet sizes
_WORLD: "Communicator | None" = None


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise AotexecError(f"distributed training needs mpi4py (pip install 'aotexec[distributed]'): {e}") from None
    return MPI


class Communicator:
    """MPI_COMM_WORLD with deadlines: ``rank``, ``size``, ``allreduce``, ``broadcast``, ``barrier``."""

    def __init__(self, comm: Any, timeout: float):
        self.comm, self.timeout = comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def _wait(self, requests: list, what: str, on_done: Callable[[int], None] | None = None) -> None:
        """Poll ``requests`` until all complete, calling ``on_done(i)`` as request i finishes, in
        order; past the deadline raise instead of blocking forever in MPI_Wait."""
        deadline = time.monotonic() + self.timeout
        done, pause = 0, 0.0
        while done < len(requests):
            if requests[done].Test():
                if on_done:
                    on_done(done)
                done, pause = done + 1, 0.0
                continue
            if time.monotonic() > deadline:
                raise AotexecError(f"rank {self.rank} of {self.size}: {what} did not complete within "
                                   f"{self.timeout:g} s (step {done + 1} of {len(requests)}); "
                                   f"another rank failed or stalled")
            time.sleep(pause)   # back off to 1 ms: MPI progresses only inside Test, but the cores are shared
            pause = min(pause * 2 or 1e-5, 1e-3)

    def allreduce(self, arrays: Sequence[np.ndarray], average: bool = False, bucket_bytes: int = BUCKET_BYTES,
                  on_ready: Callable[[list[int]], None] | None = None) -> None:
        """Sum (or average) each array across ranks, in place. Arrays are packed in order into
        flat buckets of about ``bucket_bytes`` per dtype; ``on_ready(indices)`` runs as each
        bucket's sum lands."""
        buckets = _buckets(arrays, bucket_bytes)
        if self.size == 1:
            for idx in buckets:
                if on_ready:
                    on_ready(idx)
            return
        MPI = _mpi()
        flats, requests = [], []
        for idx in buckets:
            flat = np.concatenate([np.ascontiguousarray(arrays[i]).ravel() for i in idx])
            flats.append(flat)
            requests.append(self.comm.Iallreduce(MPI.IN_PLACE, flat, op=MPI.SUM))

        def unpack(b: int) -> None:
            flat, off = flats[b], 0
            if average:
                flat /= self.size
            for i in buckets[b]:
                a = arrays[i]
                a[...] = flat[off:off + a.size].reshape(a.shape)
                off += a.size
            if on_ready:
                on_ready(buckets[b])

        self._wait(requests, f"allreduce of {len(buckets)} bucket(s), {sum(f.nbytes for f in flats)} bytes", unpack)

    def broadcast(self, arrays: Sequence[np.ndarray], root: int = 0) -> None:
        """Every rank's arrays become ``root``'s, in place."""
        if self.size == 1:
            return
        reqs = [self.comm.Ibcast(a, root=root) for a in arrays]
        self._wait(reqs, f"broadcast of {len(arrays)} array(s) from rank {root}")

    def barrier(self) -> None:
        if self.size > 1:
            self._wait([self.comm.Ibarrier()], "barrier")

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)


def _buckets(arrays: Sequence[np.ndarray], bucket_bytes: int) -> list[list[int]]:
    """Consecutive runs of array indices, one dtype per run, each under ``bucket_bytes``
    unless a single array is larger."""
    out: list[list[int]] = []
    size, dtype = 0, None
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray) or not a.flags.writeable:
            raise AotexecError(f"allreduce: array {i} must be a writable numpy array, got {type(a).__name__}")
        if out and a.dtype == dtype and size + a.nbytes <= bucket_bytes:
            out[-1].append(i)
            size += a.nbytes
        else:
            out.append([i])
            size, dtype = a.nbytes, a.dtype
    return out


def world(timeout: float | None = None) -> Communicator:
    """The communicator of all ranks (a one-rank world outside mpirun)."""
    global _WORLD
    if _WORLD is None:
        MPI = _mpi()
        _WORLD = Communicator(MPI.COMM_WORLD, Options.from_env().dist_timeout)
        if _WORLD.size > 1:
            _install_abort_hook(_WORLD)
    if timeout is not None:
        _WORLD.timeout = timeout
    return _WORLD


def rank() -> int:
    return world().rank


def num_workers() -> int:
    return world().size


def _install_abort_hook(comm: Communicator) -> None:
    """An uncaught exception on one rank ends every rank (MPI_Abort) rather than leaving them in
    a collective until their deadline, and Python's exit does not block in MPI_Finalize."""
    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        comm.abort(1)

    sys.excepthook = hook


def allreduce_grads(executor: Any, names: Sequence[str] | None = None, average: bool = False,
                    on_ready: Callable[[list[str]], None] | None = None) -> dict[str, np.ndarray]:
    """Sum ``executor``'s gradients across ranks (in reverse argument order, the order backward
    produces them, as MXNet's priorities do); returns them as numpy arrays by name and writes
    the sums back into ``grad_dict``. ``on_ready(names)`` runs per finished bucket."""
    names = [n for n in (names or executor.grad_dict) if executor.grad_dict.get(n) is not None][::-1]
    grads = [executor.grad_dict[n].asnumpy() for n in names]

    def ready(idx: list[int]) -> None:
        for i in idx:
            executor.grad_dict[names[i]][:] = grads[i]
        if on_ready:
            on_ready([names[i] for i in idx])

    world().allreduce(grads, average=average, on_ready=ready)
    return dict(zip(names, grads))
