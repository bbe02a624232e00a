"""``aotexec compile`` (needs aotexec[compiler]) and ``aotexec inspect`` (runtime only)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .common import fail, pairs, variants


def add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile an MXNet *-symbol.json into a deployable artifact directory",
                       description="Compile SYMBOL_JSON into a deployable artifact directory "
                                   "(needs the compiler: pip install 'aotexec[compiler]').")
    p.add_argument("symbol_json", type=Path, help="MXNet *-symbol.json file")
    p.add_argument("--shape", "-s", action="append", metavar="NAME=D0,D1,...",
                   help="input shape (repeatable; repeating a name makes shape variants)")
    p.add_argument("--dtype", action="append", metavar="NAME=DTYPE", help="input dtype, e.g. data=float16 (repeatable)")
    p.add_argument("--params", type=Path, help="parameters: MXNet .params (save_checkpoint, mx.nd.save of a "
                   "dict) or .npz (names or arg:/aux: keys; np.savez)")
    p.add_argument("--cast-params", action="store_true",
                   help="cast parameters to the dtypes the symbol gives them (same kind only, e.g. float64 -> "
                        "float32); without it a dtype mismatch is an error")
    p.add_argument("--target", "-t", action="append", help="llvm-cpu (default) | vulkan-spirv | cuda (repeatable)")
    p.add_argument("--cpu", help="llvm-cpu target CPU: host (default; fast, not portable), x86-64-v3, generic "
                                 "(the default with --cpu-triple), an LLVM CPU name (cortex-a76...)")
    p.add_argument("--cpu-triple", metavar="TRIPLE", help="cross-compile llvm-cpu code for another machine, e.g. "
                                                          "aarch64-linux-gnu (run it there with iree-run-module: "
                                                          "aotexec export-run-cmd)")
    p.add_argument("--cuda-arch", default="sm_80", help="CUDA target (sm_80 runs on Ampere and newer)")
    p.add_argument("--out", "-o", type=Path, help="artifact directory (default artifacts/<symbol name>)")
    p.add_argument("--grad-req", default="null",
                   help="null (inference only) | write | add: also build the training entry points, with this "
                        "grad_req for the parameters (--shape inputs and *label arguments get null)")
    p.add_argument("--mirror", help="training: recompute in backward, auto (default: where it plans less memory) "
                                    "| none | mxnet | dots")
    p.set_defaults(func=compile_cmd)


def compile_cmd(args: argparse.Namespace) -> None:
    import aotexec as ax
    from aotexec.base import require_compiler
    require_compiler("aotexec compile")
    if not args.symbol_json.is_file():
        fail(f"symbol file {args.symbol_json} does not exist")
    if not args.shape:
        fail("give at least one --shape NAME=D0,D1,... for the data inputs")
    sym = ax.sym.load(str(args.symbol_json))
    shapes = variants(args.shape)
    dtypes = pairs(args.dtype, "--dtype")
    stem = args.symbol_json.name.removesuffix(".json").removesuffix("-symbol")
    out = args.out or Path("artifacts") / stem
    if args.grad_req not in ("null", "write", "add"):
        fail(f"--grad-req must be null, write or add, got {args.grad_req!r}")
    inputs = {n for v in shapes for n in v}
    reqs = {n: ("null" if n in inputs or n.endswith("label") else args.grad_req) for n in sym.list_arguments()}
    t0 = time.perf_counter()
    art = ax.compile(sym, shapes, dtypes=dtypes, targets=tuple(args.target or ["llvm-cpu"]),
                     params=str(args.params) if args.params else None, cast_params=args.cast_params,
                     grad_req=reqs, mirror=args.mirror, out=out, cpu=args.cpu, cpu_triple=args.cpu_triple,
                     cuda_arch=args.cuda_arch,
                     name=out.name, progress=lambda msg: print(f"  {msg} ...", file=sys.stderr, flush=True))
    print(f"wrote {art.path} in {time.perf_counter() - t0:.2f} s")
    print_summary(art)


def print_summary(art) -> None:
    from aotexec.artifact import RESIDENT
    m = art.manifest
    for k, variant in enumerate(m["variants"]):
        if len(m["variants"]) > 1:
            print(f"  variant {k}: {art.describe_variant(k)}")
        for t, rec in variant["files"].items():
            if t == RESIDENT:
                print(f"  resident      {rec['file']:36s} {rec['bytes']:>10,d} bytes  "
                      "(llvm-cpu inference, parameters resident)")
                continue
            meta = m["targets"].get(t, {})
            extra = ""
            if t == "llvm-cpu" and meta.get("cpu"):
                c = meta["cpu"]
                extra = f"  cpu={c.get('cpu')}" + (f" ({c['host_cpu']})" if c.get("host_cpu") else "") \
                    + (f" triple={c['triple']}" if c.get("triple") and "unknown" not in c["triple"] else "")
            if t == "cuda":
                extra = f"  arch={meta.get('cuda_arch')}"
            print(f"  target {t:13s} {rec['file']:22s} {rec['bytes']:>10,d} bytes{extra}")
    if m.get("params"):
        print(f"  params        {m['params']['file']} ({len(m['params']['names'])} arrays), "
              f"{m['params']['irpa']['file']} (IREE parameter archive)")
    if art.grad_req:
        trained = [n for n, r in art.grad_req.items() if r != "null"]
        print(f"  training      grad_req {sorted(set(art.grad_req[n] for n in trained))} for {len(trained)} "
              f"arguments: {', '.join(trained)}; mirror policy {m.get('mirror', 'none')}")


def add_inspect(sub) -> None:
    p = sub.add_parser("inspect", help="show an artifact's targets, variants, entry points, shapes and sizes",
                       description="Show an artifact's targets, shape variants, entry points, shapes and sizes.")
    p.add_argument("artifact", type=Path, help="artifact directory")
    p.set_defaults(func=inspect_cmd)


def inspect_cmd(args: argparse.Namespace) -> None:
    import aotexec as ax
    art = ax.load(args.artifact)
    m = art.manifest
    print(f"artifact {m.get('name')} (format {m['format_version']}, aotexec {m.get('aotexec_version')}, "
          f"IREE {m.get('iree_compiler_version')})")
    print(f"targets: {', '.join(art.targets)}")
    print(f"inputs: {', '.join(art.inputs)}")
    print_summary(art)
    for k, by_target in enumerate(art.specs):
        shown = {}
        for target, spec in by_target.items():      # targets whose signatures match print once
            shown.setdefault(json.dumps(spec.to_json(), sort_keys=True), (spec, []))[1].append(target)
        for spec, targets in shown.values():
            for name, ep in spec.entries.items():
                where = [f"variant {k}"] if len(art.specs) > 1 else []
                where += [", ".join(targets)] if len(shown) > 1 else []
                print(f"entry {name}" + (f" ({'; '.join(where)})" if where else "") + ":")
                for kind, ports in (("in ", ep.params), ("out", ep.results)):
                    for p in ports:
                        print(f"    {kind} {p.name:24s} {str(tuple(p.shape)):20s} {p.dtype:8s} {p.role.value}")
                arenas = {t: a["bytes"] for t, rec in art.variants[k]["files"].items()
                          for a in rec["abi"].get(name, []) if a["kind"] == "transients" and (t in targets or
                                                                                           len(shown) == 1)}
                if arenas:
                    print("    + a storage buffer per output and a transient arena of "
                          + ", ".join(f"{n:,} bytes ({t})" for t, n in arenas.items() if n is not None))
