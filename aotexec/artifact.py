"""The deployable artifact: ``artifacts/<name>/`` with manifest, symbol, vmfbs, params.

Layout::

    manifest.json      format version, versions, targets (file + sha256 + CPU record),
                       per shape variant: entry points (argument/result names, shapes,
                       dtypes) and, for a training artifact, the grad_req it was built for
    symbol.json        the MXNet symbol
    <target>.vmfb      one IREE module per target
    llvm-cpu.resident.vmfb   forward_infer reading the parameters as IREE parameters
                       (inference executors, ``runtime.program.Program.bind_parameters``)
    params.npz         optional; numpy archive read with allow_pickle=False

Writing needs the compiler (``ax.compile``); reading (``ax.load``) needs only
numpy and iree.runtime.  Loading validates everything before running anything:
missing files, hash mismatches, a newer format, an IREE runtime that differs from
the compiler that built the modules, and a CPU lacking the code's features.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .base import AotexecError
from .options import Options
from .runtime.context import Context, current_context
from .runtime.program import Program, resident_wanted
from .runtime.provider import Placement
from .signature import ProgramSpec

FORMAT_VERSION = 3   # 2: shape variants, planned-buffer ABI (iree.abi.output); 3: typed entry-point ports
MANIFEST = "manifest.json"
TARGET_FILES = {"llvm-cpu": "llvm-cpu.vmfb", "vulkan-spirv": "vulkan-spirv.vmfb", "cuda": "cuda.vmfb"}
RESIDENT = "llvm-cpu-resident"   # a variant's forward_infer with resident parameters (optional file)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _iree_major_minor(v: str) -> str:
    return ".".join(v.split("@")[0].split(".")[:2])


def runtime_version() -> str:
    from iree.runtime import version
    return version.VERSION


# ------------------------------------------------------------------ writing
def compile(symbol, shapes: dict[str, Sequence[int]] | Sequence[dict[str, Sequence[int]]], *,
            dtypes: dict[str, Any] | None = None, targets: Sequence[str] = ("llvm-cpu",), grad_req: str = "null",
            params: Any = None, out: str | os.PathLike | None = None, cpu: str = "host",
            cuda_arch: str = "sm_80", name: str | None = None, progress=None,
            mirror: bool | str | None = None) -> "Artifact":
    """Compile ``symbol`` for ``targets`` and write an artifact directory.

    ``shapes`` is one dict of input shapes or a list of them: each is a *variant*
    (e.g. batch 1 and batch 16), so ``Executor.reshape`` between them works in a
    runtime-only deployment.

    ``grad_req`` other than 'null' (a str for every argument, or a dict by argument, as in
    ``simple_bind``) adds the training entry points (forward_train, backward, train_step)
    for exactly that grad_req: a runtime-only install then runs training steps too, with the
    recomputation policy ``mirror`` (``passes.mirror``; recorded, so ``debug_str`` shows the
    graph the modules run).
    """
    from . import pipeline
    from .compiler import CompileOptions, compiler_version, resolve_cpu
    from .ops.registry import train_mode_matters
    from .runtime.bind_args import bind_typing, normalize_grad_req
    from .util import shape_from_user

    options = Options.from_env(mirror=mirror)
    reqs = normalize_grad_req(grad_req, symbol.list_arguments())
    train = any(r != "null" for r in reqs.values())
    policy = options.mirror
    variants_in = [shapes] if isinstance(shapes, dict) else list(shapes)
    if not variants_in:
        raise AotexecError("give the input shapes of at least one variant")
    inputs = set(symbol.list_inputs())
    for v in variants_in:
        unknown = sorted(set(v) - inputs)
        if unknown:
            raise AotexecError(f"--shape names {unknown} are not inputs of the symbol; its inputs are "
                               f"{symbol.list_inputs()}")
    # parameters are read and checked before compiling: a wrong file fails in a moment, not after minutes
    arrays = _params_to_numpy(params, symbol) if params is not None else None
    name = name or (Path(out).name if out else "model")
    out_dir = Path(out) if out else Path("artifacts") / name
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION, "name": name,
        "aotexec_version": __import__("aotexec").__version__,
        "iree_compiler_version": compiler_version(),
        "symbol": "symbol.json", "targets": {}, "variants": [],
        "arg_names": symbol.list_arguments(), "aux_names": symbol.list_auxiliary_states(),
        "output_names": symbol.list_outputs(), "params": None, "mirror": policy,
    }
    (out_dir / "symbol.json").write_text(symbol.tojson())
    for target in targets:
        if target not in TARGET_FILES:
            raise AotexecError(f"unknown target {target!r}; choose from {', '.join(TARGET_FILES)}")
        opts = CompileOptions(target=target, cpu=cpu, cuda_arch=cuda_arch, extra_flags=options.iree_flags)
        manifest["targets"][target] = {"cpu": resolve_cpu(opts, options=options)} if target == "llvm-cpu" else \
            {"cuda_arch": cuda_arch} if target == "cuda" else {}
    for k, v in enumerate(variants_in):
        typing = bind_typing(symbol, {n: shape_from_user(sh) for n, sh in v.items()},
                        {n: np.dtype(d) for n, d in (dtypes or {}).items()})
        g = typing.graph
        modes = ["forward_infer"] + (["forward_train", "backward", "train_step"] if train else
                                     ["forward_train"] if train_mode_matters(g.nodes) else [])
        variant: dict[str, Any] = {
            "shapes": {n.name: list(typing.node_shape(n)) for n in g.variables()},
            "dtypes": {n.name: typing.node_dtype(n).name for n in g.variables()},
            "grad_req": reqs if train else None, "entry_points": None, "files": {}}
        for target in targets:
            opts = CompileOptions(target=target, cpu=cpu, cuda_arch=cuda_arch, extra_flags=options.iree_flags)
            if progress:
                progress(f"compiling {target}" + (f" (cpu={cpu})" if target == "llvm-cpu" else "")
                         + (f" for {v}" if len(variants_in) > 1 else ""))
            vmfb, spec = pipeline.compile_program(symbol, typing, modes, opts, options, reqs=reqs if train else None,
                                               mirror=policy)
            fname = TARGET_FILES[target] if k == 0 else TARGET_FILES[target].replace(".vmfb", f".v{k}.vmfb")
            variant["files"][target] = _write(out_dir / fname, vmfb)
            variant["entry_points"] = spec.to_json()
            if pipeline.program.resident_enabled(opts, options):
                # inference executors keep their parameters resident (docs/ARCHITECTURE.md); such a
                # module needs them at load, so it is a file of its own
                vmfb, spec = pipeline.compile_program(symbol, typing, ["forward_infer"], opts, options,
                                                   resident=pipeline.resident_parameters(symbol, typing))
                variant["files"][RESIDENT] = _write(out_dir / fname.replace(".vmfb", ".resident.vmfb"), vmfb)
                variant["resident_entry_points"] = spec.to_json()
        manifest["variants"].append(variant)
    if arrays is not None:
        path = out_dir / "params.npz"
        np.savez(path, **arrays)
        manifest["params"] = {"file": path.name, "sha256": _sha256(path), "names": sorted(arrays)}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return load(out_dir)


def _write(path: Path, vmfb: bytes) -> dict[str, Any]:
    path.write_bytes(vmfb)
    return {"file": path.name, "sha256": hashlib.sha256(vmfb).hexdigest(), "bytes": len(vmfb)}


def read_params(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A parameter file by its content: an .npz archive or an MXNet NDArray file (``*.params`` of
    ``save_checkpoint`` / ``mx.nd.save`` of a dict); keys as stored (names or arg:/aux: prefixes)."""
    from .runtime.ndarray_file import is_ndarray_file, load_numpy
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise AotexecError(f"cannot read parameter file {path}: {e.strerror or e}") from None
    if head.startswith(b"PK"):
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:   # damaged, or a member needs pickle
            raise AotexecError(f"cannot read parameter archive {path}: {e}") from None
    if is_ndarray_file(head):
        data = load_numpy(path)
        if isinstance(data, list) and data:
            raise AotexecError(f"parameter file {path} holds {len(data)} unnamed arrays (mx.nd.save of a list); "
                               "parameters need names (a dict, or save_checkpoint's arg:/aux: keys)")
        return dict(data) if isinstance(data, dict) else {}
    kind = "a single-array numpy .npy file" if head.startswith(b"\x93NUMPY") else "not a parameter file"
    raise AotexecError(f"parameter file {path} is {kind}: give an .npz archive (names or arg:/aux: keys) or an "
                       "MXNet .params file (save_checkpoint / mx.nd.save of a dict)")


def _params_to_numpy(params: Any, symbol) -> dict[str, np.ndarray]:
    """Accept a dict of arrays (names, or MXNet's 'arg:'/'aux:' prefixes; NDArray or numpy) or the path
    of an .npz or MXNet .params file."""
    if isinstance(params, (str, os.PathLike)):
        params = read_params(params)
    if not isinstance(params, dict):
        raise AotexecError(f"params must be a dict of name -> array or a file path, not {type(params).__name__}")
    args, aux = set(symbol.list_arguments()), set(symbol.list_auxiliary_states())
    out = {}
    for k, v in params.items():
        key = k.split(":", 1)[1] if k.startswith(("arg:", "aux:")) else k
        if key not in args and key not in aux:
            raise AotexecError(f"parameter '{k}' is not an argument or aux state of the symbol")
        out[("aux:" if key in aux else "arg:") + key] = np.asarray(v)
    return out


# ------------------------------------------------------------------ reading
class Artifact:
    """A loaded artifact: its symbol, parameters and, per shape variant, one module per target."""

    def __init__(self, path: Path, manifest: dict[str, Any], ctx: Context | None, options: Options):
        from .symbol import load_json
        self.path = path
        self.options = options
        self.manifest = manifest
        self.ctx = ctx
        self.symbol = load_json((path / manifest["symbol"]).read_text())
        self.variants = manifest["variants"]
        self.specs = [ProgramSpec.from_json(v["entry_points"]) for v in self.variants]
        self.resident_specs = [ProgramSpec.from_json(v["resident_entry_points"]) if RESIDENT in v["files"] else None
                               for v in self.variants]
        self._programs: dict[tuple[Context, int, bool], Program] = {}
        self.arg_params: dict[str, np.ndarray] = {}
        self.aux_params: dict[str, np.ndarray] = {}
        if manifest.get("params"):
            with np.load(path / manifest["params"]["file"], allow_pickle=False) as f:
                for k in f.files:
                    (self.aux_params if k.startswith("aux:") else self.arg_params)[k.split(":", 1)[1]] = f[k]

    @property
    def targets(self) -> list[str]:
        return list(self.manifest["targets"])

    @property
    def spec(self) -> ProgramSpec:
        return self.specs[0]

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The first variant's shapes (what ``simple_bind()`` without shapes uses)."""
        return self.variant_shapes(0)

    def variant_shapes(self, k: int) -> dict[str, tuple[int, ...]]:
        return {n: tuple(v) for n, v in self.variants[k]["shapes"].items()}

    def program(self, ctx: Context, variant: int = 0, resident: bool = False) -> Program:
        """``resident``: the variant's inference-only module with resident parameters."""
        prog = self._programs.get((ctx, variant, resident))
        if prog is None:
            target = ctx.target
            rec = self.variants[variant]["files"].get(RESIDENT if resident else target)
            if rec is None:
                raise AotexecError(f"artifact {self.path} has no module for {ctx} (target {target}); "
                                   f"it was compiled for: {', '.join(self.targets)}")
            if target == "llvm-cpu":
                from .runtime.cpu_features import check_cpu_compatible
                cpu = self.manifest["targets"][target].get("cpu") or {}
                check_cpu_compatible(cpu.get("features"), cpu.get("cpu") or "host",
                                     host_cpu=cpu.get("host_cpu"), triple=cpu.get("triple"))
            vmfb = (self.path / rec["file"]).read_bytes()
            spec = self.resident_specs[variant] if resident else self.specs[variant]
            prog = self._programs[(ctx, variant, resident)] = Program(ctx, vmfb, spec)
        return prog

    @property
    def _provider(self) -> "ArtifactProvider":
        return ArtifactProvider(self)

    def find_variant(self, typing, modes, reqs) -> int:
        """The variant compiled for these shapes, holding ``modes`` for this grad_req."""
        g = typing.graph
        want = {n.name: tuple(typing.node_shape(n)) for n in g.variables()}
        for k in range(len(self.variants)):
            if self.variant_shapes(k) == want:
                break
        else:
            have = "; ".join(str({n: s for n, s in self.variant_shapes(k).items() if n in self._data_names()})
                             for k in range(len(self.variants)))
            raise AotexecError(f"artifact {self.path} has no variant compiled for shapes "
                               f"{ {n: s for n, s in want.items() if n in self._data_names()} }; it has: {have}. "
                               "Recompile with aotexec compile --shape ... (repeat --shape for several variants)")
        built = self.variants[k].get("grad_req")
        for m in modes:
            if m not in self.specs[k].entries:
                raise AotexecError(f"artifact {self.path} has no '{m}' entry point (it has "
                                   f"{', '.join(self.specs[k].entries)}); compile it with a grad_req "
                                   "(aotexec compile --grad-req write) to run training steps from it")
        if any(m in ("backward", "train_step") for m in modes) and reqs != built:
            diff = {n: f"{(reqs or {}).get(n)} (compiled: {(built or {}).get(n)})" for n in sorted(set(reqs or {}) |
                    set(built or {})) if (reqs or {}).get(n) != (built or {}).get(n)}
            raise AotexecError(f"artifact {self.path} was compiled for another grad_req: {diff}; bind with the "
                               "grad_req it was compiled for (the default) or recompile")
        return k

    @property
    def grad_req(self) -> dict[str, str] | None:
        """The grad_req the training entry points were compiled for (None: inference only)."""
        return self.variants[0].get("grad_req")

    def _data_names(self) -> set[str]:
        """Inputs whose shapes differ between variants, or all inputs that are not parameters."""
        names = set(self.variant_shapes(0))
        varying = {n for n in names if len({self.variant_shapes(k).get(n) for k in range(len(self.variants))}) > 1}
        return varying or (names - set(self.arg_params) - set(self.aux_params))

    def _check_grad_req(self, grad_req) -> Any:
        """The grad_req to bind with: the compiled one by default; 'null' always works."""
        if grad_req is None:
            return self.grad_req or "null"
        if grad_req != "null" and not self.grad_req:
            raise AotexecError("this artifact has inference entry points only; bind with grad_req='null' "
                               "or recompile with a grad_req (aotexec compile --grad-req write)")
        return grad_req

    def simple_bind(self, ctx: Context | None = None, grad_req=None, **shapes) -> Any:
        """An Executor at one of the artifact's variants, with its parameters loaded.
        ``grad_req`` defaults to what the training entry points were compiled for."""
        from .runtime.binding import simple_bind
        grad_req = self._check_grad_req(grad_req)
        ctx = ctx or self.ctx or current_context()
        self.program(ctx)
        shapes = shapes or self.shapes
        dtypes = {k: np.dtype(v) for k, v in self.variants[0]["dtypes"].items()}
        ex = simple_bind(self.symbol, ctx, grad_req=grad_req, type_dict=dtypes, provider=self._provider, **shapes)
        self._check_bound(ex)
        ex.copy_params_from(self.arg_params, self.aux_params, allow_extra_params=True)
        return ex

    def bind(self, ctx: Context | None = None, args=None, args_grad=None, grad_req=None, aux_states=None,
             **kwargs) -> Any:
        from .runtime.binding import bind
        grad_req = self._check_grad_req(grad_req)
        ctx = ctx or self.ctx or current_context()
        ex = bind(self.symbol, ctx, args, args_grad=args_grad, grad_req=grad_req, aux_states=aux_states,
                  provider=self._provider)
        self._check_bound(ex)
        return ex

    @staticmethod
    def _check_bound(ex) -> None:
        """Loading is cheap: check shapes, target and grad_req at bind, not at the first step."""
        ex._program(("forward_infer",))
        if ex._wrt:
            ex._program(("forward_train", "backward"))

    def __repr__(self) -> str:
        return f"<Artifact {self.manifest.get('name')} at {self.path} targets={self.targets}>"


class ArtifactProvider:
    """``runtime.provider.ProgramProvider`` from an artifact's precompiled modules only."""
    eager = True

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        # artifacts written before the policy was recorded were compiled without mirroring
        self.mirror = artifact.manifest.get("mirror", "none")

    def program(self, symbol, typing, modes, ctx, reqs=None, monitor=None) -> Program:
        if monitor:
            raise AotexecError("monitor callbacks run a traced debug build, which needs the compiler; "
                               "artifacts hold the fast build only")
        art = self.artifact
        k = art.find_variant(typing, modes, reqs)
        return art.program(ctx, k, art.resident_specs[k] is not None and
                           resident_wanted(modes, reqs, ctx.target, art.options.resident))

    def debug_str(self, symbol, typing, wrt: list[str]) -> str:
        from .debug_str import render   # graph passes only: no compiler needed
        return render(symbol, typing, wrt, self.mirror)

    def placement(self, symbol, typing, reqs, group2ctx, ctx, train: bool) -> Placement:
        """group2ctx compiles one module per context: artifacts hold whole-graph modules only."""
        try:
            from .pipeline.provider import CompileProvider
        except ImportError as e:
            raise AotexecError(f"group2ctx compiles one module per context, which needs the IREE compiler "
                               f"(pip install 'aotexec[compiler]'; {e}); bind the artifact without group2ctx") from None
        return CompileProvider(self.artifact.options.replace(mirror=self.mirror)).placement(
            symbol, typing, reqs, group2ctx, ctx, train)


def _fail(path: Path, what: str) -> AotexecError:
    return AotexecError(f"invalid artifact {path}: {what}")


def load(path: str | os.PathLike, ctx: Context | None = None) -> Artifact:
    """Open and validate an artifact directory (runtime only; no compiler needed)."""
    options = Options.from_env()
    path = Path(path)
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise _fail(path, f"no {MANIFEST} (is this an aotexec artifact directory?)")
    try:
        manifest = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _fail(path, f"{MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise _fail(path, f"{MANIFEST} must be a JSON object")
    fv = manifest.get("format_version")
    if not isinstance(fv, int):
        raise _fail(path, "manifest has no format_version")
    if fv < FORMAT_VERSION:
        raise _fail(path, f"format version {fv} was written by an earlier aotexec whose modules use another "
                          f"calling convention; recompile it with aotexec compile")
    if fv > FORMAT_VERSION:
        raise _fail(path, f"format version {fv} is newer than this aotexec supports ({FORMAT_VERSION}); "
                          "upgrade aotexec")
    for key in ("symbol", "targets", "variants"):
        if key not in manifest:
            raise _fail(path, f"manifest lacks '{key}'")
    if not isinstance(manifest["variants"], list) or not manifest["variants"]:
        raise _fail(path, "manifest has no compiled variants")
    built = str(manifest.get("iree_compiler_version", ""))
    if _iree_major_minor(built) != _iree_major_minor(runtime_version()):
        raise _fail(path, f"its modules were built by IREE {built} but this runtime is IREE "
                          f"{runtime_version()}; recompile the artifact or install iree-base-runtime=="
                          f"{built.split('@')[0]}")
    if not (path / manifest["symbol"]).is_file():
        raise _fail(path, f"missing {manifest['symbol']}")
    try:
        files = [(t, r) for v in manifest["variants"] for t, r in v["files"].items()]
    except (KeyError, TypeError, AttributeError) as e:
        raise _fail(path, f"malformed variants in the manifest ({e})") from None
    if manifest.get("params"):
        files.append(("params", manifest["params"]))
    for what, rec in files:
        f = path / rec["file"]
        if not f.is_file():
            raise _fail(path, f"missing {rec['file']} ({what})")
        if _sha256(f) != rec["sha256"]:
            raise _fail(path, f"{rec['file']} ({what}) does not match the sha256 in the manifest "
                              "(corrupt or modified file); recompile the artifact")
    try:
        return Artifact(path, manifest, ctx, options)
    except (KeyError, ValueError, TypeError) as e:
        raise _fail(path, f"{type(e).__name__}: {e}") from None
