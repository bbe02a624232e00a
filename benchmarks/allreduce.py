"""Time aotexec.distributed's bucketed allreduce of ResNet-50-size gradients (25.6 M float32,
102 MB) across the ranks of an MPI job, for docs/SCALING.md:

    mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo python benchmarks/allreduce.py
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from aotexec import distributed

RESNET50 = 25_557_032      # parameters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=RESNET50)
    ap.add_argument("--tensors", type=int, default=161, help="parameter tensors (ResNet-50: 161)")
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    comm = distributed.world(timeout=600)
    sizes = np.full(a.tensors, a.params // a.tensors)
    sizes[-1] += a.params - sizes.sum()
    grads = [np.ones(int(n), np.float32) for n in sizes]
    comm.allreduce(grads)           # warm-up: connections, registration
    times = []
    for _ in range(a.repeat):
        comm.barrier()
        t = time.perf_counter()
        comm.allreduce(grads, bucket_bytes=int(a.bucket_mb * 2 ** 20))
        times.append(time.perf_counter() - t)
    if comm.rank == 0:
        mb = a.params * 4 / 1e6
        best = min(times)
        print(f"{comm.size} ranks, {mb:.0f} MB in {a.tensors} tensors, {a.bucket_mb:g} MB buckets: "
              f"best {best * 1e3:.0f} ms, median {np.median(times) * 1e3:.0f} ms "
              f"({mb / best:.0f} MB/s of gradient; ring volume per rank {2 * (comm.size - 1) / comm.size * mb:.0f} MB)")


if __name__ == "__main__":
    main()
