"""``aotexec run`` and ``aotexec bench``: need only the runtime for artifacts."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .common import context, fail, load_array, pairs, shape, variants


def add_run(sub) -> None:
    p = sub.add_parser("run", help="run an artifact's forward pass on .npy inputs",
                       description="Run an artifact's forward pass on .npy inputs and print a summary of the "
                                   "outputs. The shape variant is the one the inputs fit (or --variant).")
    p.add_argument("artifact", type=Path, help="artifact directory")
    p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy", help="an input array (repeatable)")
    p.add_argument("--out", "-o", type=Path, help="write outputs as <output name>.npy here")
    p.add_argument("--device", "-d", default="cpu", help="cpu | vulkan | gpu")
    p.add_argument("--variant", type=int, help="the shape variant to run (default: the one the inputs fit)")
    p.add_argument("--zeros", action="store_true", help="run data inputs not given by --input on zeros "
                                                        "(without it a missing data input is an error)")
    p.set_defaults(func=run_cmd)


def _pick_variant(art, given: dict[str, tuple[int, ...]], variant: int | None) -> int:
    if variant is None:
        return art.variant_for(given)
    k = art.check_variant(variant)
    bad = {n: s for n, s in given.items() if art.variant_shapes(k).get(n) != s}
    if bad:
        fail(f"--variant {k} was compiled for {art.describe_variant(k)}; the inputs have "
             f"{', '.join(f'{n}={s}' for n, s in bad.items())}")
    return k


def run_cmd(args: argparse.Namespace) -> None:
    import numpy as np

    import aotexec as ax
    ctx = context(args.device)
    art = ax.load(args.artifact, ctx=ctx)
    feeds = {}
    for name, file in pairs(args.input, "--input").items():
        if name not in art.symbol.list_arguments():
            fail(f"'{name}' is not an input of the artifact; inputs: {', '.join(art.inputs)}")
        feeds[name] = load_array(file, f"--input {name}")
    k = _pick_variant(art, {n: a.shape for n, a in feeds.items()}, args.variant)
    missing = [n for n in art.data_inputs if n not in feeds]
    if missing and not args.zeros:
        fail(f"no --input for {', '.join(missing)} (the artifact's data inputs: {', '.join(art.data_inputs)}); "
             "give --input NAME=FILE.npy, or --zeros to run on zeros")
    ex = art.simple_bind(ctx, grad_req="null", variant=k)
    for name, arr in feeds.items():
        want = np.dtype(ex.arg_dict[name].dtype)
        if arr.dtype != want and not np.can_cast(arr.dtype, want, "same_kind"):
            fail(f"--input {name} is {arr.dtype.name}; the artifact takes {want.name}")
        feeds[name] = arr.astype(want, copy=False)   # float64 data for a float32 model, as MXNet's forward does
    t0 = time.perf_counter()
    outs = ex.forward(is_train=False, **feeds)
    dt = time.perf_counter() - t0
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if len(art.variants) > 1:
        print(f"variant {k}: {art.describe_variant(k)}")
    for name, o in zip(art.symbol.list_outputs(), outs):
        a = o.asnumpy()
        print(f"{name}: shape={a.shape} dtype={a.dtype} min={a.min():.6g} max={a.max():.6g} mean={a.mean():.6g}")
        if a.ndim == 2 and a.shape[1] <= 32:
            print(f"  argmax[:8] = {a.argmax(axis=1)[:8].tolist()}")
        if args.out:
            np.save(args.out / f"{name}.npy", a)
    print(f"forward took {dt * 1e3:.3f} ms on {ctx}" + (f"; outputs written to {args.out}" if args.out else ""))


def add_bench(sub) -> None:
    p = sub.add_parser("bench", help="time aotexec on a symbol file or an artifact",
                       description="Time aotexec on SOURCE: bind (+ compile), then forward (and training) steps. "
                                   "Inputs and parameters are random U(-1, 1) unless --params / the artifact give "
                                   "them; labels (inputs ending in 'label') are random class ids. The peers (MXNet, "
                                   "PyTorch) and the fixed benchmark nets live in benchmarks/run.py.")
    p.add_argument("source", type=Path, help="MXNet *-symbol.json file, or an artifact directory")
    p.add_argument("--shape", "-s", action="append", metavar="NAME=D0,D1,...",
                   help="input shape (symbols: required; artifacts: picks the variant)")
    p.add_argument("--variant", type=int, help="artifacts: the shape variant to time (default 0)")
    p.add_argument("--params", type=Path, help="MXNet .params or .npz of parameters (symbols; default: random)")
    p.add_argument("--iters", "-n", type=int, default=100, help="timed iterations")
    p.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    p.add_argument("--train", action="store_true", help="also time a training step: forward(is_train=True) + "
                                                        "backward(), and the fused forward_backward()")
    p.add_argument("--device", "-d", default="cpu", help="cpu | vulkan | gpu")
    p.add_argument("--json", dest="as_json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=bench_cmd)


def _bind_artifact(args, ctx, report: dict) -> tuple[dict, set]:
    import aotexec as ax
    t0 = time.perf_counter()
    art = ax.load(args.source, ctx=ctx)
    if args.train and not art.grad_req:
        fail(f"--train needs training entry points: {args.source} was compiled without --grad-req")
    given = variants(args.shape)
    if len(given) > 1:
        fail("give one --shape per input to pick a variant")
    k = _pick_variant(art, given[0] if given else {}, args.variant)
    report["load_s"] = time.perf_counter() - t0
    report["variant"] = k
    report["shapes"] = {n: list(s) for n, s in art.variant_shapes(k).items() if n in art.inputs}
    execs = {"infer": art.simple_bind(ctx, grad_req="null", variant=k)}
    if args.train:
        execs["train"] = art.simple_bind(ctx, variant=k)
    if len(art.variants) > 1 and not args.as_json:
        others = "; ".join(f"--variant {j}: {art.describe_variant(j)}" for j in range(len(art.variants)) if j != k)
        print(f"variant {k}: {art.describe_variant(k)} (others: {others})")
    return execs, set(art.arg_params) | set(art.aux_params)


def _bind_symbol(args, ctx, report: dict) -> tuple[dict, set]:
    import aotexec as ax
    from aotexec.artifact import read_params
    from aotexec.base import require_compiler
    t0 = time.perf_counter()
    if not args.source.is_file():
        fail(f"{args.source} is neither a symbol file nor an artifact directory")
    if args.variant is not None:
        fail("--variant picks a variant of an artifact; a symbol file takes --shape")
    if not args.shape:
        fail("give at least one --shape NAME=D0,D1,... for the data inputs")
    require_compiler("aotexec bench on a symbol file (benchmark an artifact with the runtime alone)")
    sym = ax.sym.load(str(args.source))
    shapes = {k: shape(v, k) for k, v in pairs(args.shape, "--shape").items()}
    unknown = sorted(set(shapes) - set(sym.list_inputs()))
    if unknown:
        fail(f"--shape names {unknown} are not inputs of the symbol; its inputs are {sym.list_inputs()}")
    loaded = read_params(args.params) if args.params else {}
    execs = {"infer": sym.simple_bind(ctx, grad_req="null", **shapes)}
    if args.train:
        req = {n: ("null" if n in shapes or n.endswith("label") else "write") for n in sym.list_arguments()}
        execs["train"] = sym.simple_bind(ctx, grad_req=req, **shapes)
    loaded = {k.split(":", 1)[-1]: v for k, v in loaded.items()}
    for ex in execs.values():
        ex.copy_params_from({k: v for k, v in loaded.items() if k in ex.arg_dict},
                            {k: v for k, v in loaded.items() if k in ex.aux_dict})
    report["bind_s"] = time.perf_counter() - t0
    return execs, set(loaded)


def _randomize(execs: dict, given: set) -> None:
    import numpy as np
    rng = np.random.RandomState(0)
    for ex in execs.values():
        for name, arr in list(ex.arg_dict.items()) + list(ex.aux_dict.items()):
            if name in given:
                continue
            if name.endswith("label"):
                n_cls = ex.outputs[0].shape[-1] if ex.outputs and len(ex.outputs[0].shape) > 1 else 2
                arr[:] = rng.randint(0, n_cls, arr.shape).astype(arr.dtype)
            elif name.endswith("_var") or name.endswith("_gamma"):
                arr[:] = rng.uniform(0.5, 1.5, arr.shape).astype(arr.dtype)
            else:
                arr[:] = rng.uniform(-1, 1, arr.shape).astype(arr.dtype)


def _stats_ms(times: list[float]) -> str:
    ts = sorted(times)
    q = lambda f: ts[round(f * (len(ts) - 1))] * 1e3  # noqa: E731
    return f"median {q(0.5):.3f} ms  p10 {q(0.1):.3f}  p90 {q(0.9):.3f}  min {ts[0] * 1e3:.3f}  (n={len(ts)})"


def bench_cmd(args: argparse.Namespace) -> None:
    ctx = context(args.device)
    if args.iters < 1 or args.warmup < 0:
        fail("--iters must be >= 1 and --warmup >= 0")
    report: dict = {"source": str(args.source), "device": str(ctx)}
    execs, given = (_bind_artifact if args.source.is_dir() else _bind_symbol)(args, ctx, report)
    _randomize(execs, given)
    steps = {"infer": lambda ex: ex.forward(is_train=False)}
    if "train" in execs:
        def train_step(ex):
            ex.forward(is_train=True)
            ex.backward()
        steps["train"] = train_step
        steps["train_fused"] = lambda ex: ex.forward_backward()
    for mode, step in steps.items():
        ex = execs["train" if mode.startswith("train") else "infer"]
        t = time.perf_counter()
        step(ex)  # compiles on first use (or hits the cache)
        report[f"{mode}_first_s"] = time.perf_counter() - t
        for _ in range(args.warmup):
            step(ex)
        times = []
        for _ in range(args.iters):
            t = time.perf_counter()
            step(ex)
            times.append(time.perf_counter() - t)
        report[mode] = times
    if args.as_json:
        print(json.dumps({k: (v if not isinstance(v, list) else {"median_ms": sorted(v)[len(v) // 2] * 1e3,
                                                                  "times_s": v})
                          for k, v in report.items()}))
        return
    print(f"{args.source} on {report['device']}")
    for k in ("load_s", "bind_s"):
        if k in report:
            print(f"  {k[:-2]:12s} {report[k] * 1e3:.1f} ms")
    for mode in steps:
        print(f"  {mode:12s} first call {report[f'{mode}_first_s'] * 1e3:.1f} ms (compile or cache); "
              + _stats_ms(report[mode]))
    ex = execs.get("train", execs["infer"])
    plan = [ln for ln in ex.debug_str().splitlines() if ln.startswith("Total ") and "MB allocated" in ln]
    if plan:
        print(f"  memory plan  {plan[0]}")
