"""Where a benchmark net's time goes, per IREE dispatch, with Linux ``perf``.

    python benchmarks/dispatch_profile.py resnet8 train [--seconds 10] [--top 30]
    python benchmarks/dispatch_profile.py lenet backward
    python benchmarks/dispatch_profile.py resnet18_v1:16 infer     # a model-zoo case (zoo.py)

IREE's default llvm-cpu executables are embedded ELFs that ``perf`` cannot name. This
compiles the net with ``--iree-llvmcpu-link-embedded=false`` (system ELF, loaded with
dlopen) and ``--iree-hal-dump-executable-binaries-to`` (a copy of that library), runs the
step in a loop under ``perf record``, and maps the sampled addresses to the dispatch
functions with ``nm``. Shares are of all CPU samples of the process (both worker threads):
the dispatches, then IREE's runtime, the kernel (thread wake-ups) and libc (``memset``: the
zero fills of padded buffers). A benchmark-side experiment: aotexec itself is unchanged.
Needs ``perf`` (Debian: ``linux-perf``) and ``perf_event_paranoid`` <= 2.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("infer", "train", "forward_train", "backward")


def run(net: str, mode: str, seconds: float, dump: str) -> None:
    """The child: bind ``net`` with system-ELF dispatches dumped to ``dump`` and loop ``mode``."""
    sys.path.insert(0, str(HERE))
    import aotexec as ax
    import nets
    import zoo
    from aotexec.pipeline import program as build
    orig = build.options_for
    extra = ("--iree-llvmcpu-link-embedded=false", f"--iree-hal-dump-executable-binaries-to={dump}")
    build.options_for = lambda ctx, **kw: dataclasses.replace(orig(ctx, **kw),
                                                              extra_flags=orig(ctx, **kw).extra_flags + extra)
    _load_kernels(Path(dump))
    if zoo.is_case(net):
        s = zoo.symbol(ax.sym, net)
        data, label = zoo.inputs(net)
        params, auxv = zoo.params(net)
        args = s.list_arguments()
    else:
        s = nets.symbol(ax.sym, net)
        args, aux = nets.shapes_of(s, net)
        data, label, params, auxv = nets.inputs_and_params(net, args, aux)
    train = mode != "infer"
    req = {n: ("null" if n in ("data", "softmax_label") or not train else "write") for n in args}
    ex = s.simple_bind(ax.cpu(), grad_req=req, data=data.shape, softmax_label=label.shape)
    ex.copy_params_from({k: v for k, v in params.items()}, auxv)
    ex.arg_dict["data"][:] = data
    ex.arg_dict["softmax_label"][:] = label
    step = {"infer": lambda: ex.forward(is_train=False),
            "train": lambda: (ex.forward(is_train=True), ex.backward()),
            "forward_train": lambda: ex.forward(is_train=True),
            "backward": ex.backward}[mode]
    if mode == "backward":
        ex.forward(is_train=True)
    step()                                    # compiles (outside the profile's interest)
    end = time.time() + seconds
    while time.time() < end:
        step()


def _load_kernels(dump: Path) -> None:
    """A system-ELF dispatch library leaves the hand-written kernels' symbols undefined (IREE
    links the object into embedded ELFs only): load the object as a shared library, globally,
    before any module is, so those symbols resolve and ``perf`` names the kernels too."""
    import ctypes
    from aotexec.compiler import CompileOptions
    from aotexec.options import Options
    from aotexec.pipeline import kernel_build
    kernels = kernel_build.kernels_for(CompileOptions(), Options.from_env())
    if kernels is None:
        return
    dump.mkdir(parents=True, exist_ok=True)
    so = dump / "aotexec_kernels.so"
    subprocess.run(["gcc", "-shared", "-o", str(so), str(kernels.object_path)], check=True)
    ctypes.CDLL(str(so), mode=ctypes.RTLD_GLOBAL)


def symbols(dump: Path) -> list[tuple[int, str]]:
    out = []
    for so in dump.glob("*.so"):
        for ln in subprocess.run(["nm", "-n", "--defined-only", str(so)], capture_output=True,
                                 text=True, check=True).stdout.splitlines():
            parts = ln.split()
            if len(parts) >= 3 and parts[1] in "tT":
                out.append((int(parts[0], 16), parts[2]))
    return sorted(out)


def report(data: Path, syms: list[tuple[int, str]], top: int) -> None:
    rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "dso,sym", "--stdio"],
                         capture_output=True, text=True, check=True).stdout
    addrs = [a for a, _ in syms]
    dispatches: collections.Counter = collections.Counter()
    other: collections.Counter = collections.Counter()
    for ln in rep.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[.\]\s+(\S+)", ln)
        if not m:
            continue
        share, dso, sym = float(m.group(1)), m.group(2), m.group(3)
        if dso == "aotexec_kernels.so":
            dispatches[f"kernel {sym}"] += share
        elif dso.startswith("iree_dylib") and sym.startswith("0x"):
            i = bisect.bisect_right(addrs, int(sym, 16)) - 1
            dispatches[syms[i][1] if i >= 0 else "?"] += share
        else:
            other[dso] += share
    print(f"dispatches: {sum(dispatches.values()):.1f}% of CPU samples")
    for name, share in dispatches.most_common(top):
        print(f"  {share:6.2f}%  {name}")
    print("elsewhere:", ", ".join(f"{k} {v:.1f}%" for k, v in other.most_common(6)))
    kinds: collections.Counter = collections.Counter()
    for name, share in dispatches.items():
        m = re.match(r"(\w+?)_dispatch_\d+_([a-z_]+?)_\d", name)
        kinds[f"{m.group(1)} {m.group(2)}" if m else name.split("_")[0] + "_"] += share
    print("by entry point and kind:", ", ".join(f"{k} {v:.1f}%" for k, v in kinds.most_common(16)))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("net")
    p.add_argument("mode", choices=MODES)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        run(a.net, a.mode, a.seconds, a.child)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        dump, data = Path(tmp) / "bin", Path(tmp) / "perf.data"
        child = [sys.executable, __file__, a.net, a.mode, "--child", str(dump)]
        subprocess.run(child + ["--seconds", "0"], check=True)          # compile into the cache first
        subprocess.run(["perf", "record", "-q", "-F", "2000", "-o", str(data), "--"] + child +
                       ["--seconds", str(a.seconds)], check=True)
        report(data, symbols(dump), a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
