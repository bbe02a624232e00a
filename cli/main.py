"""``aotexec compile | inspect | run | bench``: build, examine, execute and time artifacts.

Bad input exits with code 2 and a one-line message (typer's convention);
``--help`` works on every command.
"""
from __future__ import annotations

import functools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Ahead-of-time compile MXNet symbol graphs with IREE, and run the artifacts.")


def _fail(msg: str) -> None:
    typer.echo(f"Error: {msg}", err=True)
    raise typer.Exit(2)


def _friendly(fn: Callable) -> Callable:
    """Turn the library's errors into typer's exit code 2 with one line; long compiles report
    their progress (aotexec.compiler's INFO records) on stderr."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from aotexec.base import AotexecError
        log = logging.getLogger("aotexec.compiler")
        if not log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("  %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        try:
            return fn(*args, **kwargs)
        except (AotexecError, ValueError, TypeError, OSError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            _fail(first)
    return wrapper


def _pairs(items: List[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            _fail(f"{what} '{item}' must look like NAME=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _variants(items: List[str]) -> list[dict[str, tuple[int, ...]]]:
    """Repeating --shape for a name makes variants: the i-th occurrences form variant i;
    a name given once applies to every variant."""
    seen: dict[str, list[tuple[int, ...]]] = {}
    for item in items:
        if "=" not in item:
            _fail(f"--shape '{item}' must look like NAME=D0,D1,...")
        k, v = item.split("=", 1)
        seen.setdefault(k.strip(), []).append(_shape(v.strip(), k.strip()))
    count = max(len(v) for v in seen.values())
    bad = [k for k, v in seen.items() if len(v) not in (1, count)]
    if bad:
        _fail(f"--shape for {bad} is repeated {[len(seen[k]) for k in bad]} times; give each repeated input "
              f"the same number of variants ({count})")
    return [{k: (v[i] if len(v) > 1 else v[0]) for k, v in seen.items()} for i in range(count)]


def _shape(text: str, name: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("(", "").replace(")", "").split(",") if d.strip())
    except ValueError:
        _fail(f"shape of '{name}' must be comma-separated integers, got '{text}'")
    if not dims or any(d <= 0 for d in dims):
        _fail(f"shape of '{name}' must have positive dimensions, got '{text}'")
    return dims


@app.command()
@_friendly
def compile(
    symbol_json: Path = typer.Argument(..., help="MXNet *-symbol.json file"),
    shape: List[str] = typer.Option([], "--shape", "-s", help="input shape, NAME=D0,D1,... (repeatable)"),
    dtype: List[str] = typer.Option([], "--dtype", help="input dtype, NAME=float32 (repeatable)"),
    params: Optional[Path] = typer.Option(None, "--params", help="parameters: MXNet .params (save_checkpoint, "
                                          "mx.nd.save of a dict) or .npz (names or arg:/aux: keys)"),
    target: List[str] = typer.Option(["llvm-cpu"], "--target", "-t", help="llvm-cpu | vulkan-spirv | cuda (repeatable)"),
    cpu: str = typer.Option("host", "--cpu", help="llvm-cpu target CPU: host (fast, not portable), x86-64-v3, generic..."),
    cuda_arch: str = typer.Option("sm_80", "--cuda-arch", help="CUDA target (sm_80 runs on Ampere and newer)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="artifact directory (default artifacts/<symbol name>)"),
    grad_req: str = typer.Option("null", "--grad-req", help="null (inference only) | write | add: also build the "
                                 "training entry points, with this grad_req for the parameters (the inputs given "
                                 "by --shape and *label arguments get null)"),
    mirror: Optional[str] = typer.Option(None, "--mirror", help="training: recompute in backward, auto (default: "
                                         "where it plans less memory) | none | mxnet | dots"),
) -> None:
    """Compile SYMBOL_JSON into a deployable artifact directory."""
    import aotexec as ax
    if not symbol_json.is_file():
        _fail(f"symbol file {symbol_json} does not exist")
    if not shape:
        _fail("give at least one --shape NAME=D0,D1,... for the data inputs")
    sym = ax.sym.load(str(symbol_json))
    shapes = _variants(shape)
    dtypes = _pairs(dtype, "--dtype")
    stem = symbol_json.name.removesuffix(".json").removesuffix("-symbol")
    out = out or Path("artifacts") / stem
    if grad_req not in ("null", "write", "add"):
        _fail(f"--grad-req must be null, write or add, got {grad_req!r}")
    inputs = {n for v in shapes for n in v}
    reqs = {n: ("null" if n in inputs or n.endswith("label") else grad_req) for n in sym.list_arguments()}
    t0 = time.perf_counter()
    art = ax.compile(sym, shapes, dtypes=dtypes, targets=tuple(target), params=str(params) if params else None,
                     grad_req=reqs, mirror=mirror,
                     out=out, cpu=cpu, cuda_arch=cuda_arch, name=out.name,
                     progress=lambda msg: typer.echo(f"  {msg} ...", err=True))
    typer.echo(f"wrote {art.path} in {time.perf_counter() - t0:.2f} s")
    _print_summary(art)


def _print_summary(art) -> None:
    from aotexec.artifact import RESIDENT
    m = art.manifest
    for k, variant in enumerate(m["variants"]):
        if len(m["variants"]) > 1:
            data = {n: tuple(v) for n, v in variant["shapes"].items() if n in art._data_names()}
            typer.echo(f"  variant {k}: {data}")
        for t, rec in variant["files"].items():
            if t == RESIDENT:
                typer.echo(f"  resident      {rec['file']:36s} {rec['bytes']:>10,d} bytes  "
                           "(llvm-cpu inference, parameters resident)")
                continue
            meta = m["targets"].get(t, {})
            extra = ""
            if t == "llvm-cpu" and meta.get("cpu"):
                c = meta["cpu"]
                extra = f"  cpu={c.get('cpu')}" + (f" ({c['host_cpu']})" if c.get("host_cpu") else "")
            if t == "cuda":
                extra = f"  arch={meta.get('cuda_arch')}"
            typer.echo(f"  target {t:13s} {rec['file']:22s} {rec['bytes']:>10,d} bytes{extra}")
    if m.get("params"):
        typer.echo(f"  params        {m['params']['file']} ({len(m['params']['names'])} arrays)")
    if art.grad_req:
        trained = [n for n, r in art.grad_req.items() if r != "null"]
        typer.echo(f"  training      grad_req {sorted(set(art.grad_req[n] for n in trained))} for {len(trained)} "
                   f"arguments: {', '.join(trained)}; mirror policy {m.get('mirror', 'none')}")


@app.command()
@_friendly
def inspect(artifact: Path = typer.Argument(..., help="artifact directory")) -> None:
    """Show an artifact's targets, entry points, shapes and sizes."""
    import aotexec as ax
    art = ax.load(artifact)
    m = art.manifest
    typer.echo(f"artifact {m.get('name')} (format {m['format_version']}, aotexec {m.get('aotexec_version')}, "
               f"IREE {m.get('iree_compiler_version')})")
    typer.echo(f"targets: {', '.join(art.targets)}")
    _print_summary(art)
    for name, ep in art.spec.entries.items():
        typer.echo(f"entry {name}:")
        for kind, ports in (("in ", ep.params), ("out", ep.results)):
            for p in ports:
                typer.echo(f"    {kind} {p.name:24s} {str(tuple(p.shape)):20s} {p.dtype:8s} {p.role.value}")


@app.command()
@_friendly
def run(
    artifact: Path = typer.Argument(..., help="artifact directory"),
    input: List[str] = typer.Option([], "--input", "-i", help="NAME=file.npy (repeatable)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write outputs as <output name>.npy here"),
    device: str = typer.Option("cpu", "--device", "-d", help="cpu | vulkan | gpu"),
) -> None:
    """Run an artifact's forward pass on .npy inputs and print a summary of the outputs."""
    import numpy as np

    import aotexec as ax
    ctx = {"cpu": ax.cpu, "vulkan": ax.vulkan, "gpu": ax.gpu}.get(device)
    if ctx is None:
        _fail(f"unknown device '{device}'; use cpu, vulkan or gpu")
    art = ax.load(artifact, ctx=ctx())
    ex = art.simple_bind(ctx())
    feeds = {}
    for name, file in _pairs(input, "--input").items():
        if name not in ex.arg_dict:
            _fail(f"'{name}' is not an input of the artifact; inputs: {', '.join(art.manifest['arg_names'])}")
        arr = np.load(file, allow_pickle=False)
        if not isinstance(arr, np.ndarray):
            _fail(f"--input {name}={file} must be a single-array .npy file")
        want = ex.arg_dict[name]
        if arr.shape != want.shape:
            _fail(f"input '{name}' has shape {arr.shape}; the artifact was compiled for {want.shape}")
        feeds[name] = arr.astype(want.dtype, copy=False)
    t0 = time.perf_counter()
    outs = ex.forward(is_train=False, **feeds)
    dt = time.perf_counter() - t0
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for name, o in zip(art.manifest["output_names"], outs):
        a = o.asnumpy()
        typer.echo(f"{name}: shape={a.shape} dtype={a.dtype} min={a.min():.6g} max={a.max():.6g} "
                   f"mean={a.mean():.6g}")
        if a.ndim == 2 and a.shape[1] <= 32:
            typer.echo(f"  argmax[:8] = {a.argmax(axis=1)[:8].tolist()}")
        if out:
            np.save(out / f"{name}.npy", a)
    typer.echo(f"forward took {dt * 1e3:.3f} ms on {ctx()}" + (f"; outputs written to {out}" if out else ""))


def _stats_ms(times: list[float]) -> str:
    ts = sorted(times)
    q = lambda f: ts[round(f * (len(ts) - 1))] * 1e3  # noqa: E731
    return f"median {q(0.5):.3f} ms  p10 {q(0.1):.3f}  p90 {q(0.9):.3f}  min {ts[0] * 1e3:.3f}  (n={len(ts)})"


@app.command()
@_friendly
def bench(
    source: Path = typer.Argument(..., help="MXNet *-symbol.json file, or an artifact directory"),
    shape: List[str] = typer.Option([], "--shape", "-s", help="input shape, NAME=D0,D1,... (symbols; repeatable)"),
    params: Optional[Path] = typer.Option(None, "--params", help="MXNet .params or .npz of parameters (symbols; "
                                          "default: random)"),
    iters: int = typer.Option(100, "--iters", "-n", help="timed iterations"),
    warmup: int = typer.Option(10, "--warmup", help="untimed iterations first"),
    train: bool = typer.Option(False, "--train", help="also time a training step (symbols only): "
                               "forward(is_train=True) + backward(), and the fused forward_backward()"),
    device: str = typer.Option("cpu", "--device", "-d", help="cpu | vulkan | gpu"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of text"),
) -> None:
    """Time aotexec on SOURCE: bind (+ compile), then forward (and training) steps.

    Inputs and parameters are random U(-1, 1) unless --params / the artifact give them;
    labels (inputs ending in 'label') are random class ids. The peers (MXNet, PyTorch)
    and the fixed benchmark nets live in benchmarks/run.py.
    """
    import numpy as np

    import aotexec as ax
    ctx = {"cpu": ax.cpu, "vulkan": ax.vulkan, "gpu": ax.gpu}.get(device)
    if ctx is None:
        _fail(f"unknown device '{device}'; use cpu, vulkan or gpu")
    if iters < 1 or warmup < 0:
        _fail("--iters must be >= 1 and --warmup >= 0")
    rng = np.random.RandomState(0)
    report: dict = {"source": str(source), "device": str(ctx())}
    t0 = time.perf_counter()
    if source.is_dir():
        if shape:
            _fail("an artifact has fixed shapes; drop --shape")
        art = ax.load(source, ctx=ctx())
        if train and not art.grad_req:
            _fail(f"--train needs training entry points: {source} was compiled without --grad-req")
        t1 = time.perf_counter()
        execs = {"infer": art.simple_bind(ctx(), grad_req="null")}
        if train:
            execs["train"] = art.simple_bind(ctx())
        report["load_s"] = t1 - t0
        given = set(art.arg_params) | set(art.aux_params)
    else:
        if not source.is_file():
            _fail(f"{source} is neither a symbol file nor an artifact directory")
        if not shape:
            _fail("give at least one --shape NAME=D0,D1,... for the data inputs")
        sym = ax.sym.load(str(source))
        shapes = {k: _shape(v, k) for k, v in _pairs(shape, "--shape").items()}
        unknown = sorted(set(shapes) - set(sym.list_inputs()))
        if unknown:
            _fail(f"--shape names {unknown} are not inputs of the symbol; its inputs are {sym.list_inputs()}")
        execs = {"infer": sym.simple_bind(ctx(), grad_req="null", **shapes)}
        if train:
            req = {n: ("null" if n in shapes or n.endswith("label") else "write") for n in sym.list_arguments()}
            execs["train"] = sym.simple_bind(ctx(), grad_req=req, **shapes)
        given = set()
        if params:
            from aotexec.artifact import read_params
            loaded = {k.split(":", 1)[-1]: v for k, v in read_params(params).items()}
            for ex in execs.values():
                ex.copy_params_from({k: v for k, v in loaded.items() if k in ex.arg_dict},
                                    {k: v for k, v in loaded.items() if k in ex.aux_dict})
            given = set(loaded)
        report["bind_s"] = time.perf_counter() - t0
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
        for _ in range(warmup):
            step(ex)
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            step(ex)
            times.append(time.perf_counter() - t)
        report[mode] = times
    if as_json:
        typer.echo(json.dumps({k: (v if not isinstance(v, list) else {"median_ms": sorted(v)[len(v) // 2] * 1e3,
                                                                         "times_s": v})
                               for k, v in report.items()}))
        return
    typer.echo(f"{source} on {report['device']}")
    for k in ("load_s", "bind_s"):
        if k in report:
            typer.echo(f"  {k[:-2]:12s} {report[k] * 1e3:.1f} ms")
    for mode in steps:
        typer.echo(f"  {mode:12s} first call {report[f'{mode}_first_s'] * 1e3:.1f} ms (compile or cache); "
                   + _stats_ms(report[mode]))
    ex = execs.get("train", execs["infer"])
    plan = [ln for ln in ex.debug_str().splitlines() if ln.startswith("Total ") and "MB allocated" in ln]
    if plan:
        typer.echo(f"  memory plan  {plan[0]}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
