"""The deployable artifact: ``artifacts/<name>/`` with manifest, symbol, vmfbs, params.

Layout::

    manifest.json      format version, versions, targets (file + sha256 + CPU record), the
                       inputs (data and labels: what is not a parameter), per shape variant:
                       entry points (argument/result names, shapes, dtypes) and, for a
                       training artifact, the grad_req it was built for
    symbol.json        the MXNet symbol
    <target>.vmfb      one IREE module per target (<target>.v<k>.vmfb for variant k > 0)
    llvm-cpu.resident.vmfb   forward_infer reading the parameters as IREE parameters
                       (inference executors, ``runtime.program.Program.bind_parameters``)
    params.npz         optional; every argument and aux state that is not an input, with the
                       symbol's shapes and dtypes; read with allow_pickle=False
    params.irpa        the same arrays as an IREE parameter archive keyed by variable name (with
                       params.npz): what ``iree-run-module --parameters=aotexec=params.irpa``
                       feeds the resident module (``aotexec.run_command``)

Each module's file record holds the full calling convention of its functions (``abi``, from
``signature.EntryPoint.abi``: arguments in order, output storage, transient arena bytes, which
differ per target), so IREE's own tools run the modules without aotexec (``aotexec
export-run-cmd``).

Writing needs the compiler (``ax.compile``) and is atomic: everything goes into a temporary
folder beside ``out``, checked by loading it, then renamed into place, so a failed compile
leaves no half-written artifact.  Reading (``ax.load``) needs only numpy and iree.runtime
and validates everything before running anything (``aotexec.manifest``): missing files,
hash mismatches, file names leading outside the folder, a newer format, an IREE runtime
that differs from the compiler that built the modules, every manifest field against the
symbol and the compiled functions, the parameters (complete, exact shapes and dtypes),
and (at bind) a CPU lacking the code's features.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .base import AotexecError, require_compiler
from .manifest import (FORMAT_VERSION, MANIFEST, RESIDENT, TARGET_FILES, check_entry_points, check_module,
                       check_params, check_structure, check_symbol, confined, first_line, invalid, is_label,
                       prepare_params, read_params, module_abi)
from .options import Options
from .param_archive import ARCHIVE, archive_arrays, check_archive, write_archive
from .runtime.context import Context, current_context
from .runtime.program import Program, resident_wanted
from .runtime.provider import Placement
from .signature import RESIDENT_SCOPE, ProgramSpec

__all__ = ["Artifact", "ArtifactProvider", "compile", "load", "read_params", "FORMAT_VERSION", "MANIFEST",
           "RESIDENT", "TARGET_FILES"]


def _iree_major_minor(v: str) -> str:
    return ".".join(v.split("@")[0].split(".")[:2])


def runtime_version() -> str:
    from iree.runtime import version
    return version.VERSION


# ------------------------------------------------------------------ writing
def compile(symbol, shapes: dict[str, Sequence[int]] | Sequence[dict[str, Sequence[int]]], *,
            dtypes: dict[str, Any] | None = None, targets: Sequence[str] = ("llvm-cpu",), grad_req: str = "null",
            params: Any = None, out: str | os.PathLike | None = None, cpu: str | None = None,
            cpu_triple: str | None = None, cuda_arch: str = "sm_80", name: str | None = None, progress=None,
            mirror: bool | str | None = None, cast_params: bool = False) -> "Artifact":
    """Compile ``symbol`` for ``targets`` and write an artifact directory.

    ``shapes`` is one dict of input shapes or a list of them: each is a *variant*
    (e.g. batch 1 and batch 16); ``aotexec run`` picks the one its inputs fit, and
    ``Executor.reshape`` between them works in a runtime-only deployment.

    ``params`` (a dict by name or by MXNet's 'arg:' / 'aux:' keys, or an .npz path) must give
    every argument and aux state that is not an input (the names in ``shapes``, and arguments
    ending in 'label') with the symbol's shapes and dtypes; ``cast_params=True`` casts dtypes
    within their kind (float64 -> float32).  Checked before anything compiles.

    ``grad_req`` other than 'null' (a str for every argument, or a dict by argument, as in
    ``simple_bind``) adds the training entry points (forward_train, backward, train_step)
    for exactly that grad_req: a runtime-only install then runs training steps too, with the
    recomputation policy ``mirror`` (``passes.mirror``; recorded, so ``debug_str`` shows the
    graph the modules run).

    ``cpu_triple`` cross-compiles llvm-cpu code (e.g. 'aarch64-linux-gnu'; default: this machine),
    for ``cpu`` (an LLVM CPU name such as 'cortex-a76'; default 'host', or 'generic' when cross
    compiling).  Such an artifact loads anywhere and runs where its triple does, e.g. with
    ``iree-run-module`` (``aotexec export-run-cmd``).
    """
    require_compiler("ax.compile (aotexec compile)")
    from . import pipeline
    from .compiler import CompileOptions, compiler_version, resolve_cpu
    from .ops.registry import train_mode_matters
    from .runtime.bind_args import bind_typing, normalize_grad_req
    from .util import shape_from_user

    options = Options.from_env(mirror=mirror)
    reqs = normalize_grad_req(grad_req, symbol.list_arguments())
    train = any(r != "null" for r in reqs.values())
    variants_in = [shapes] if isinstance(shapes, dict) else list(shapes)
    if not variants_in:
        raise AotexecError("give the input shapes of at least one variant")
    for v in variants_in:
        unknown = sorted(set(v) - set(symbol.list_inputs()))
        if unknown:
            raise AotexecError(f"--shape names {unknown} are not inputs of the symbol; its inputs are "
                               f"{symbol.list_inputs()}")
    for target in targets:
        if target not in TARGET_FILES:
            raise AotexecError(f"unknown target {target!r}; choose from {', '.join(TARGET_FILES)}")
    args = set(symbol.list_arguments())
    inputs = [n for n in symbol.list_inputs() if any(n in v for v in variants_in) or n in args and is_label(n)]
    # everything the user gave is checked before the (minutes-long) compile
    typings = [bind_typing(symbol, {n: shape_from_user(sh) for n, sh in v.items()},
                           {n: np.dtype(d) for n, d in (dtypes or {}).items()}) for v in variants_in]
    arrays = prepare_params(params, symbol, typings, inputs, cast_params) if params is not None else None
    name = name or (Path(out).name if out else "model")
    final = Path(out) if out else Path("artifacts") / name
    _check_destination(final)
    cpu = cpu or ("generic" if cpu_triple else "host")
    compile_opts = {t: CompileOptions(target=t, cpu=cpu, triple=cpu_triple if t == "llvm-cpu" else None,
                                      cuda_arch=cuda_arch, extra_flags=options.iree_flags) for t in targets}
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION, "name": name,
        "aotexec_version": __import__("aotexec").__version__,
        "iree_compiler_version": compiler_version(),
        "symbol": "symbol.json", "targets": {}, "variants": [], "inputs": inputs,
        "arg_names": symbol.list_arguments(), "aux_names": symbol.list_auxiliary_states(),
        "output_names": symbol.list_outputs(), "params": None, "mirror": options.mirror,
    }
    for target, opts in compile_opts.items():   # resolve_cpu refuses a CPU name LLVM does not know
        manifest["targets"][target] = {"cpu": resolve_cpu(opts, options=options)} if target == "llvm-cpu" else \
            {"cuda_arch": cuda_arch} if target == "cuda" else {}
    with _staging(final) as tmp:
        (tmp / "symbol.json").write_text(symbol.tojson())
        for k, (v, typing) in enumerate(zip(variants_in, typings)):
            g = typing.graph
            modes = ["forward_infer"] + (["forward_train", "backward", "train_step"] if train else
                                         ["forward_train"] if train_mode_matters(g.nodes) else [])
            variant: dict[str, Any] = {
                "shapes": {n.name: list(typing.node_shape(n)) for n in g.variables()},
                "dtypes": {n.name: typing.node_dtype(n).name for n in g.variables()},
                "grad_req": reqs if train else None, "entry_points": {}, "files": {}}
            for target, opts in compile_opts.items():
                if progress:
                    progress(f"compiling {target}" + (f" (cpu={cpu})" if target == "llvm-cpu" else "")
                             + (f" for {v}" if len(variants_in) > 1 else ""))
                vmfb, spec = pipeline.compile_program(symbol, typing, modes, opts, options,
                                                      reqs=reqs if train else None, mirror=options.mirror)
                fname = TARGET_FILES[target] if k == 0 else TARGET_FILES[target].replace(".vmfb", f".v{k}.vmfb")
                variant["files"][target] = _write(tmp / fname, vmfb, spec)
                # per target: their signatures differ where layouts do (llvm-cpu's channels-last
                # residuals between forward_train and backward, NCHW on GPUs)
                variant["entry_points"][target] = spec.to_json()
                if pipeline.program.resident_enabled(opts, options):
                    # inference executors keep their parameters resident (docs/ARCHITECTURE.md); such a
                    # module needs them at load, so it is a file of its own
                    vmfb, spec = pipeline.compile_program(symbol, typing, ["forward_infer"], opts, options,
                                                          resident=pipeline.resident_parameters(symbol, typing))
                    variant["files"][RESIDENT] = _write(tmp / fname.replace(".vmfb", ".resident.vmfb"), vmfb, spec)
                    variant["resident_entry_points"] = spec.to_json()
            manifest["variants"].append(variant)
        if arrays is not None:
            np.savez(tmp / "params.npz", **arrays)
            write_archive(tmp / ARCHIVE, archive_arrays(arrays))
            os.chmod(tmp / ARCHIVE, (tmp / "params.npz").stat().st_mode & 0o777)   # IREE writes it 0640
            manifest["params"] = {"file": "params.npz", "sha256": _sha256(tmp / "params.npz"),
                                  "names": sorted(arrays), "irpa": {"file": ARCHIVE, "sha256": _sha256(tmp / ARCHIVE),
                                                                    "scope": RESIDENT_SCOPE}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        art = load(tmp)     # what was written passes the checks every loader makes
    art.path = final
    return art


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(path: Path, vmfb: bytes, spec: ProgramSpec) -> dict[str, Any]:
    path.write_bytes(vmfb)
    return {"file": path.name, "sha256": hashlib.sha256(vmfb).hexdigest(), "bytes": len(vmfb),
            "abi": module_abi(spec, vmfb)}


def _check_destination(final: Path) -> None:
    """An existing artifact (or an empty folder) is replaced; anything else is not ours to delete."""
    if final.exists() and not final.is_dir():
        raise AotexecError(f"cannot write the artifact to {final}: it is a file")
    if final.is_dir() and any(final.iterdir()) and not (final / MANIFEST).is_file():
        raise AotexecError(f"{final} exists and is not an aotexec artifact (no {MANIFEST}); choose another "
                           "output folder or remove it")


@contextlib.contextmanager
def _staging(final: Path) -> Iterator[Path]:
    """A temporary folder beside ``final``, renamed to it at the end; removed on any failure."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if final.exists():
            old = final.parent / f".{final.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(final, old)
        os.rename(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ------------------------------------------------------------------ reading
class Artifact:
    """A loaded, validated artifact: its symbol, parameters and, per shape variant, one module
    per target."""

    def __init__(self, path: Path, manifest: dict[str, Any], symbol, specs: list[tuple], arg_params: dict,
                 aux_params: dict, ctx: Context | None, options: Options):
        self.path = path
        self.options = options
        self.manifest = manifest
        self.ctx = ctx
        self.symbol = symbol
        self.variants = manifest["variants"]
        self.specs: list[dict[str, ProgramSpec]] = [s for s, _ in specs]     # per variant: target -> spec
        self.resident_specs: list[ProgramSpec | None] = [r for _, r in specs]
        self._programs: dict[tuple[Context, int, bool], Program] = {}
        self.arg_params: dict[str, np.ndarray] = arg_params
        self.aux_params: dict[str, np.ndarray] = aux_params

    @property
    def targets(self) -> list[str]:
        return list(self.manifest["targets"])

    @property
    def spec(self) -> ProgramSpec:
        """The first variant's entry points on the first target."""
        return next(iter(self.specs[0].values()))

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The first variant's shapes (what ``simple_bind()`` without shapes uses)."""
        return self.variant_shapes(0)

    def variant_shapes(self, k: int) -> dict[str, tuple[int, ...]]:
        return {n: tuple(v) for n, v in self.variants[k]["shapes"].items()}

    @property
    def inputs(self) -> list[str]:
        """Arguments that are not parameters: the data inputs and the labels."""
        return list(self.manifest["inputs"])

    @property
    def data_inputs(self) -> list[str]:
        """The inputs inference needs values for (not labels, not packaged parameters)."""
        return [n for n in self.inputs if not is_label(n) and n not in self.arg_params]

    def describe_variant(self, k: int) -> str:
        shapes = self.variant_shapes(k)
        return ", ".join(f"{n}={shapes[n]}" for n in (self.data_inputs or self.inputs or list(shapes)))

    def describe_variants(self) -> str:
        return "; ".join(f"variant {k}: {self.describe_variant(k)}" for k in range(len(self.variants)))

    def check_variant(self, k: int) -> int:
        if not isinstance(k, int) or not 0 <= k < len(self.variants):
            raise AotexecError(f"artifact {self.path} has {len(self.variants)} variant(s), numbered from 0: "
                               f"{self.describe_variants()}")
        return k

    def variant_for(self, shapes: dict[str, Sequence[int]]) -> int:
        """The first variant whose shapes are ``shapes`` (by name; names not given match any)."""
        given = {n: tuple(s) for n, s in shapes.items()}
        unknown = sorted(set(given) - set(self.variant_shapes(0)))
        if unknown:
            raise AotexecError(f"{unknown} are not inputs of artifact {self.path}; its inputs are {self.inputs}")
        for k in range(len(self.variants)):
            have = self.variant_shapes(k)
            if all(have[n] == s for n, s in given.items()):
                return k
        raise self._no_variant(given)

    def _no_variant(self, shapes: dict[str, tuple]) -> AotexecError:
        names = [n for n in (self.data_inputs or self.inputs) if n in shapes] or list(shapes)
        return AotexecError(f"artifact {self.path} has no variant compiled for shapes "
                            f"{', '.join(f'{n}={shapes[n]}' for n in names)}; it has: {self.describe_variants()}. "
                            "Recompile with aotexec compile --shape ... (repeat --shape for several variants)")

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
            vmfb = confined(self.path, rec["file"], target).read_bytes()
            if hashlib.sha256(vmfb).hexdigest() != rec["sha256"]:   # changed since load
                raise invalid(self.path, f"{rec['file']} does not match the sha256 in the manifest")
            spec = self.resident_specs[variant] if resident else self.specs[variant][target]
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
            raise self._no_variant(want)
        built = self.variants[k].get("grad_req")
        entries = next(iter(self.specs[k].values())).entries      # the same functions on every target
        for m in modes:
            if m not in entries:
                raise AotexecError(f"artifact {self.path} has no '{m}' entry point (it has "
                                   f"{', '.join(entries)}); compile it with a grad_req "
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

    def _check_grad_req(self, grad_req) -> Any:
        """The grad_req to bind with: the compiled one by default; 'null' always works."""
        if grad_req is None:
            return self.grad_req or "null"
        if grad_req != "null" and not self.grad_req:
            raise AotexecError("this artifact has inference entry points only; bind with grad_req='null' "
                               "or recompile with a grad_req (aotexec compile --grad-req write)")
        return grad_req

    def simple_bind(self, ctx: Context | None = None, grad_req=None, variant: int | None = None, **shapes) -> Any:
        """An Executor at one of the artifact's variants, with its parameters loaded: ``variant``
        (a number), or the one compiled for ``shapes`` (input shapes by name), else variant 0.
        ``grad_req`` defaults to what the training entry points were compiled for."""
        from .runtime.binding import simple_bind
        grad_req = self._check_grad_req(grad_req)
        ctx = ctx or self.ctx or current_context()
        if variant is not None:
            k = self.check_variant(variant)
            if any(self.variant_shapes(k).get(n) != tuple(s) for n, s in shapes.items()):
                raise AotexecError(f"variant {k} was compiled for {self.describe_variant(k)}, not {shapes}")
        else:
            k = self.variant_for(shapes) if shapes else 0
        self.program(ctx, k)
        dtypes = {n: np.dtype(d) for n, d in self.variants[k]["dtypes"].items()}
        ex = simple_bind(self.symbol, ctx, grad_req=grad_req, type_dict=dtypes, provider=self._provider,
                         **self.variant_shapes(k))
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
        self.mirror = artifact.manifest["mirror"]

    def executed_symbol(self, symbol):
        return symbol           # the graph the artifact was compiled from

    def program(self, symbol, typing, modes, ctx, reqs=None, monitor=None) -> Program:
        if monitor:
            raise AotexecError("monitor callbacks run a traced debug build, which needs the compiler; "
                               "artifacts hold the fast build only")
        art = self.artifact
        k = art.find_variant(typing, modes, reqs)
        return art.program(ctx, k, art.resident_specs[k] is not None and
                           resident_wanted(modes, reqs, ctx.target, art.options.resident))

    def check_gradients(self, symbol, wrt: list[str]) -> None:
        """Nothing to check: the artifact's training programs were compiled with their gradients
        (a binding they do not cover fails in ``find_variant``)."""

    def debug_str(self, symbol, typing, wrt: list[str]) -> str:
        from .debug_str import render   # graph passes only: no compiler needed
        return render(symbol, typing, wrt, self.mirror)

    def placement(self, symbol, typing, reqs, group2ctx, ctx, train: bool) -> Placement:
        """group2ctx compiles one module per context: artifacts hold whole-graph modules only."""
        require_compiler("group2ctx on an artifact (it compiles one module per context; bind without group2ctx)")
        from .pipeline.provider import CompileProvider
        return CompileProvider(self.artifact.options.replace(mirror=self.mirror)).placement(
            symbol, typing, reqs, group2ctx, ctx, train)


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise invalid(path, "it is a file, not an artifact directory" if path.exists() else "no such directory")
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise invalid(path, f"no {MANIFEST} (is this an aotexec artifact directory?)")
    try:
        manifest = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise invalid(path, f"{MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise invalid(path, f"{MANIFEST} must be a JSON object")
    fv = manifest.get("format_version")
    if not isinstance(fv, int):
        raise invalid(path, "manifest has no format_version")
    if fv < FORMAT_VERSION:
        raise invalid(path, f"format version {fv} was written by an earlier aotexec (this one reads format "
                            f"{FORMAT_VERSION}); recompile it with aotexec compile")
    if fv > FORMAT_VERSION:
        raise invalid(path, f"format version {fv} is newer than this aotexec supports ({FORMAT_VERSION}); "
                            "upgrade aotexec")
    built = str(manifest.get("iree_compiler_version", ""))
    if _iree_major_minor(built) != _iree_major_minor(runtime_version()):
        raise invalid(path, f"its modules were built by IREE {built} but this runtime is IREE "
                            f"{runtime_version()}; recompile the artifact or install iree-base-runtime=="
                            f"{built.split('@')[0]}")
    return manifest


def load(path: str | os.PathLike, ctx: Context | None = None) -> Artifact:
    """Open and validate an artifact directory (runtime only; no compiler needed)."""
    from .symbol import load_json
    options = Options.from_env()
    path = Path(path)
    manifest = _read_manifest(path)
    files = check_structure(path, manifest)
    contents: dict[str, bytes] = {}
    for what, rec in files:
        f = confined(path, rec["file"], what)
        if not f.is_file():
            raise invalid(path, f"missing {rec['file']} ({what})")
        data = contents[rec["file"]] = f.read_bytes()
        if hashlib.sha256(data).hexdigest() != rec["sha256"]:
            raise invalid(path, f"{rec['file']} ({what}) does not match the sha256 in the manifest "
                                "(corrupt or modified file); recompile the artifact")
    spath = confined(path, manifest["symbol"], "symbol")
    if not spath.is_file():
        raise invalid(path, f"missing {manifest['symbol']}")
    try:
        symbol = load_json(spath.read_text())
    except Exception as e:   # noqa: BLE001 (whatever a crafted symbol.json trips, it is one line)
        kind = "" if isinstance(e, AotexecError) else f"{type(e).__name__}: "
        raise invalid(path, f"{manifest['symbol']}: {kind}{first_line(e)}") from None
    typings = check_symbol(path, manifest, symbol)
    specs = check_entry_points(path, manifest, symbol, typings)
    for v, (spec, resident) in zip(manifest["variants"], specs):
        for t, rec in v["files"].items():
            check_module(path, rec["file"], contents[rec["file"]], resident if t == RESIDENT else spec[t], rec.get("abi"))
    arg_params: dict = {}
    aux_params: dict = {}
    if manifest.get("params") is not None:
        try:
            arrays = read_params(confined(path, manifest["params"]["file"], "params"))
        except AotexecError as e:
            raise invalid(path, first_line(e)) from None
        arg_params, aux_params = check_params(path, manifest, arrays, symbol, typings)
        irpa = manifest["params"]["irpa"]["file"]
        check_archive(path, irpa, contents[irpa], archive_arrays(arrays))
    return Artifact(path, manifest, symbol, specs, arg_params, aux_params, ctx, options)
