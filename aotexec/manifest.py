"""What an artifact's parts must agree on, checked at every boundary (``ax.load``, ``ax.compile``).

The sha256 in the manifest only proves the files are the ones the manifest names; a
user re-saving parameters, an edited manifest or a crafted artifact gets past it.  So
loading also checks every field against the others, each check one link of a chain:

    symbol.json  --(shape inference)-->   each variant's shapes and dtypes
    variant      --(ports by role)-->     each entry point's ports (manifest)
    entry point  --(IREE ABI declaration)--> the compiled function in the .vmfb
    symbol       --(names, shapes, dtypes)--> params.npz (complete: every variable that
                                            is not an input)
    params.npz   --(byte for byte)-->       params.irpa (``param_archive``, for IREE's tools)

and every file name stays inside the artifact folder.  Every failure is one
``AotexecError`` line starting ``invalid artifact <path>:``.  Runtime only: numpy,
iree.runtime and the graph passes that need no compiler.
"""
from __future__ import annotations

import dataclasses
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .base import AotexecError
from .emitter import MLIR_DTYPES, tensor_type
from .options import MIRROR_POLICIES
from .passes.infer import Typing
from .runtime.bind_args import GRAD_REQS, bind_typing
from .signature import RESIDENT_SCOPE, EntryPoint, ProgramSpec, Role

# 2: shape variants, planned-buffer ABI; 3: typed entry-point ports; 4: inputs, checked params;
# 5: each entry point's calling convention ('abi', transient bytes), params.irpa, parameters keyed by name
FORMAT_VERSION = 6
MANIFEST = "manifest.json"
TARGET_FILES = {"llvm-cpu": "llvm-cpu.vmfb", "vulkan-spirv": "vulkan-spirv.vmfb", "cuda": "cuda.vmfb"}
RESIDENT = "llvm-cpu-resident"   # a variant's forward_infer with resident parameters (optional file)
TRAIN_ENTRIES = ("forward_train", "backward", "train_step")


def invalid(path: Path, what: str) -> AotexecError:
    return AotexecError(f"invalid artifact {path}: {what}")


def is_label(name: str) -> bool:
    """MXNet's convention (``softmax_label``): an input that inference does not need."""
    return name.endswith("label")


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ------------------------------------------------------------------ files
def confined(root: Path, name: Any, what: str) -> Path:
    """``root / name`` for a plain file name that stays inside ``root`` (symlinks resolved)."""
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0") \
            or len(name.encode("utf-8", "surrogatepass")) > 255:     # longer: the OS refuses it (ENAMETOOLONG)
        raise invalid(root, f"the {what} file {(name[:80] if isinstance(name, str) else name)!r} must be a plain "
                            "file name inside the artifact folder (of at most 255 bytes)")
    p = root / name
    if not p.resolve().is_relative_to(root.resolve()):
        raise invalid(root, f"the {what} file {name!r} leads outside the artifact folder")
    return p


def read_params(file: str | os.PathLike) -> dict[str, np.ndarray]:
    """A parameter file by its content: an .npz archive or an MXNet NDArray file (``*.params`` of
    ``save_checkpoint`` / ``mx.nd.save`` of a dict); keys as stored (names or arg:/aux: prefixes)."""
    from .runtime.ndarray_file import is_ndarray_file, load_numpy
    path = Path(file)
    if not path.is_file():
        raise AotexecError(f"params file {path} does not exist")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise AotexecError(f"cannot read params file {path}: {e.strerror or e}") from None
    if head.startswith(b"PK"):
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:   # damaged, or needs pickle
            raise AotexecError(f"params file {path} is a damaged .npz archive ({first_line(e)})") from None
    if is_ndarray_file(head):
        data = load_numpy(path)
        if isinstance(data, list) and data:
            raise AotexecError(f"params file {path} holds {len(data)} unnamed arrays (mx.nd.save of a list); "
                               "parameters need names (a dict, or save_checkpoint's arg:/aux: keys)")
        return dict(data) if isinstance(data, dict) else {}
    kind = "a single-array numpy .npy file" if head.startswith(b"\x93NUMPY") else "not a parameter file"
    raise AotexecError(f"params file {path} is {kind}: give an .npz archive (names or arg:/aux: keys) or an "
                       "MXNet .params file (save_checkpoint / mx.nd.save of a dict)")


# ------------------------------------------------------------------ structure
def _need(ok: bool, path: Path, what: str) -> None:
    if not ok:
        raise invalid(path, what)


def _dtype_ok(d: Any) -> bool:
    return isinstance(d, str) and d in MLIR_DTYPES


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _file_rec(path: Path, rec: Any, what: str) -> None:
    _need(isinstance(rec, dict) and isinstance(rec.get("sha256"), str), path, f"malformed file record for {what}")
    confined(path, rec.get("file"), what)


def check_structure(path: Path, m: dict) -> list[tuple[str, dict]]:
    """Every field present with its type, file names confined; returns (what, record) per file."""
    for key in ("name", "symbol", "targets", "variants", "arg_names", "aux_names", "output_names", "inputs",
                "mirror"):
        _need(key in m, path, f"manifest lacks '{key}'")
    for key in ("arg_names", "aux_names", "output_names", "inputs"):
        _need(_str_list(m[key]), path, f"manifest '{key}' must be a list of names")
    _need(isinstance(m["name"], str), path, "manifest 'name' must be a string")
    _need(m["mirror"] in MIRROR_POLICIES, path, f"manifest 'mirror' is {m['mirror']!r}; one of {MIRROR_POLICIES}")
    confined(path, m["symbol"], "symbol")
    targets = m["targets"]
    _need(isinstance(targets, dict) and bool(targets), path, "manifest 'targets' must name at least one target")
    for t, meta in targets.items():
        _need(t in TARGET_FILES, path, f"unknown target {t!r}; aotexec knows {', '.join(TARGET_FILES)}")
        _need(isinstance(meta, dict), path, f"malformed target record for {t}")
        cpu = meta.get("cpu") if t == "llvm-cpu" else None
        _need(cpu is None or isinstance(cpu, dict) and (cpu.get("features") is None or _str_list(cpu["features"]))
              and all(isinstance(cpu.get(k), (str, type(None))) for k in ("cpu", "host_cpu", "triple")),
              path, "malformed llvm-cpu CPU record")
    variants = m["variants"]
    _need(isinstance(variants, list) and bool(variants), path, "manifest has no compiled variants")
    files = []
    for k, v in enumerate(variants):
        _need(isinstance(v, dict), path, f"variant {k} must be an object")
        for key in ("shapes", "dtypes", "entry_points", "files"):
            _need(isinstance(v.get(key), dict), path, f"variant {k} lacks '{key}'")
        _need(all(isinstance(s, list) and all(isinstance(d, int) and d >= 0 for d in s) for s in v["shapes"].values()),
              path, f"variant {k}: shapes must be lists of non-negative integers")
        for n, d in v["dtypes"].items():
            _need(_dtype_ok(d), path, f"variant {k}: {n} has dtype {d!r}; aotexec's dtypes are {sorted(MLIR_DTYPES)}")
        req = v.get("grad_req")
        _need(req is None or isinstance(req, dict) and all(r in GRAD_REQS for r in req.values()), path,
              f"variant {k}: grad_req must be null or an object of {GRAD_REQS}")
        for t, rec in v["files"].items():
            _need(t in targets or t == RESIDENT, path, f"variant {k} has a file for {t!r}, which is not a target")
            _file_rec(path, rec, f"{t} of variant {k}")
            files.append((t, rec))
        missing = [t for t in targets if t not in v["files"]]
        _need(not missing, path, f"variant {k} has no module for {', '.join(missing)}")
        _need((RESIDENT in v["files"]) == isinstance(v.get("resident_entry_points"), dict), path,
              f"variant {k}: a resident module and its entry points go together")
    if m.get("params") is not None:
        _file_rec(path, m["params"], "params")
        _need(_str_list(m["params"].get("names")), path, "manifest params record lacks its names")
        files.append(("params", m["params"]))
        _file_rec(path, m["params"].get("irpa"), "parameter archive")
        _need(m["params"]["irpa"].get("scope") == RESIDENT_SCOPE, path,
              f"the parameter archive's scope must be {RESIDENT_SCOPE!r}")
        files.append(("parameter archive", m["params"]["irpa"]))
    _need(len({rec["file"] for _, rec in files}) == len(files), path, "two parts of the artifact name one file")
    return files


# ------------------------------------------------------------------ the symbol
def check_symbol(path: Path, m: dict, symbol) -> list[Typing]:
    """Names against the symbol, and each variant's shapes and dtypes against shape inference."""
    args, aux = symbol.list_arguments(), symbol.list_auxiliary_states()
    for key, want in (("arg_names", args), ("aux_names", aux), ("output_names", symbol.list_outputs())):
        _need(m[key] == want, path, f"manifest {key} {m[key]} do not match the symbol's {want}")
    odd = [n for n in m["inputs"] if n not in args and n not in aux]
    _need(not odd, path, f"manifest inputs {odd} are not inputs of the symbol")
    variables = set(args) | set(aux)
    typings = []
    for k, v in enumerate(m["variants"]):
        for key in ("shapes", "dtypes"):
            _need(set(v[key]) == variables, path, f"variant {k} gives {key} for {sorted(v[key])}; the symbol's "
                                                  f"arguments and aux states are {sorted(variables)}")
        _need(v.get("grad_req") is None or set(v["grad_req"]) == set(args), path,
              f"variant {k}: grad_req must name exactly the symbol's arguments")
        _need(v.get("grad_req") == m["variants"][0].get("grad_req") and v["dtypes"] == m["variants"][0]["dtypes"],
              path, f"variant {k} differs from variant 0 in grad_req or dtypes (variants differ in shapes only)")
        try:
            typings.append(bind_typing(symbol, {n: tuple(s) for n, s in v["shapes"].items()},
                                       {n: np.dtype(d) for n, d in v["dtypes"].items()}))
        except Exception as e:   # noqa: BLE001 (shape rules may fail any way on shapes nobody compiled)
            kind = "" if isinstance(e, AotexecError) else f"{type(e).__name__}: "
            raise invalid(path, f"variant {k}'s shapes do not fit the symbol: {kind}{first_line(e)}") from None
    return typings


def _expected(p, typing: Typing, symbol, args: set[str], aux: set[str]) -> tuple | None:
    """(shape, dtype) the symbol gives a port, None where only the module knows (residuals, rng)."""
    g = typing.graph
    var = {n.name: n for n in g.variables()}
    outs = symbol.list_outputs()
    if p.role in (Role.VARIABLE, Role.GRAD, Role.OLD_GRAD, Role.AUX):
        pool = {Role.VARIABLE: args | aux, Role.AUX: aux}.get(p.role, args)
        if p.name not in pool:
            return ("no such", p.role.value)
        n = var[p.name]
        return tuple(typing.node_shape(n)), np.dtype(typing.node_dtype(n)).name
    if p.role in (Role.OUTPUT, Role.HEAD_GRAD):
        i = outs.index(p.name) if p.role is Role.OUTPUT and p.name in outs else p.index
        if not 0 <= i < len(outs):
            return ("no such", p.role.value)
        e = symbol._outputs[i]
        return tuple(typing.shape_of(e)), np.dtype(typing.dtype_of(e)).name
    return None


def _check_entry(path: Path, where: str, ep: EntryPoint, typing: Typing, symbol) -> None:
    args, aux = set(symbol.list_arguments()), set(symbol.list_auxiliary_states())
    for p in (*ep.params, *ep.results):
        _need(_dtype_ok(p.dtype) and all(d >= 0 for d in p.shape), path,
              f"{where}: port {p.name!r} has shape {tuple(p.shape)} and dtype {p.dtype!r}")
        want = _expected(p, typing, symbol, args, aux)
        if want is not None and want[0] == "no such":
            raise invalid(path, f"{where}: port {p.name!r} ({p.role.value}) names nothing of the symbol")
        if want is not None and (tuple(p.shape), p.dtype) != want:
            raise invalid(path, f"{where}: {p.role.value} {p.name} is {tuple(p.shape)} {p.dtype} in the manifest; "
                                f"the symbol gives {want[0]} {want[1]}")
    # the executor passes every variable (list_arguments + aux order) but the resident ones
    order = symbol.list_arguments() + symbol.list_auxiliary_states()
    passed = [p.name for p in ep.of(Role.VARIABLE)]
    _need(passed == [n for n in order if n not in ep.resident] and set(ep.resident) <= set(order), path,
          f"{where}: its variables {passed} (resident: {ep.resident}) are not the symbol's, in order")


def check_entry_points(path: Path, m: dict, symbol, typings: Sequence[Typing]) -> list[tuple]:
    """Every port against the variant's shapes; returns ({target: ProgramSpec}, resident
    ProgramSpec | None) per variant."""
    specs = []
    for k, (v, typing) in enumerate(zip(m["variants"], typings)):
        targets = [t for t in v["files"] if t != RESIDENT]
        _need(sorted(v["entry_points"]) == sorted(targets), path,
              f"variant {k}: entry points for {sorted(v['entry_points'])}, modules for {sorted(targets)}")
        try:
            by_target = {t: ProgramSpec.from_json(v["entry_points"][t]) for t in targets}
            res = ProgramSpec.from_json(v["resident_entry_points"]) if RESIDENT in v["files"] else None
        except AotexecError as e:
            raise invalid(path, f"variant {k}: {first_line(e)}") from None

        train = any(r != "null" for r in (v.get("grad_req") or {}).values())
        need = ["forward_infer"] + (list(TRAIN_ENTRIES) if train else [])
        for t, spec in by_target.items():
            missing = [e for e in need if e not in spec.entries]
            _need(not missing, path, f"variant {k} lacks the entry points {missing}" +
                  (f" ({t})" if len(by_target) > 1 else ""))
        for s in (*by_target.values(), res):
            for name, ep in (s.entries.items() if s else ()):
                _need(ep.name == name, path, f"variant {k}: entry point {name!r} describes {ep.name!r}")
                _check_entry(path, f"variant {k} entry point {name}", ep, typing, symbol)
        _need(res is None or list(res.entries) == ["forward_infer"], path,
              f"variant {k}: the resident module holds forward_infer only")
        specs.append((by_target, res))
    return specs


# ------------------------------------------------------------------ the compiled modules
_DECL_PARAM = re.compile(r"%input\d+: (tensor<[^>]*>|![\w.]+)")
_DECL_RESULT = re.compile(r"%output\d+: (tensor<[^>]*>|![\w.]+)")


def _signless(t: str) -> str:
    """IREE declares integers signless (ui64 -> i64) and may store i1 as i8."""
    return re.sub(r"(?<=[<x])ui(\d+)>", r"i\1>", t).replace("i1>", "i8>")


def _declared(decl: str) -> tuple[list[str], list[str]]:
    head, _, tail = decl.partition(") -> (")
    return [_signless(t) for t in _DECL_PARAM.findall(head)], [_signless(t) for t in _DECL_RESULT.findall(tail)]


def _transients(fn) -> int | None:
    size = dict(fn.reflection).get("iree.abi.transients.size.constant")
    return int(size) if size is not None and str(size).isdigit() else None


def _abi(module, spec: ProgramSpec) -> dict[str, list]:
    """Each function's calling convention in ``module`` (its transient arena size is the module's)."""
    return {n: dataclasses.replace(ep, transients=_transients(module.lookup_function(n))).abi()
            for n, ep in spec.entries.items()}


def module_abi(spec: ProgramSpec, vmfb: bytes) -> dict[str, list]:
    """What a module's file record holds as ``abi``: every function's arguments in call order
    (``signature.EntryPoint.abi``), so IREE's own tools can call it (``aotexec.run_command``)."""
    import iree.runtime as rt
    from .runtime.device import vm_instance
    return _abi(rt.VmModule.copy_buffer(vm_instance(), vmfb), spec)


def check_module(path: Path, fname: str, vmfb: bytes, spec: ProgramSpec, abi: Any = None) -> None:
    """The manifest's entry points against the functions IREE compiled (their ABI declarations)."""
    import iree.runtime as rt
    from .runtime.device import vm_instance
    try:
        module = rt.VmModule.copy_buffer(vm_instance(), vmfb)
    except Exception as e:   # noqa: BLE001 (IREE raises RuntimeError / ValueError variously)
        raise invalid(path, f"{fname} is not an IREE module ({first_line(e)})") from None
    try:
        _check_functions(path, fname, module, spec, abi)
    except AotexecError:
        raise
    except (RuntimeError, UnicodeError, ValueError) as e:   # e.g. names that are not UTF-8 (nanobind)
        raise invalid(path, f"{fname}: unreadable function metadata ({first_line(e)})") from None


def _check_functions(path: Path, fname: str, module, spec: ProgramSpec, abi: Any) -> None:
    for name, ep in spec.entries.items():
        fn = module.lookup_function(name)
        _need(fn is not None, path, f"{fname} has no function {name!r} (it has {module.function_names})")
        decl = dict(fn.reflection).get("iree.abi.declaration")
        if decl is None:
            continue
        params, results = _declared(decl)
        want_results = [_signless(tensor_type(p.shape, p.dtype)) for p in ep.results]
        want_params = [_signless(tensor_type(p.shape, p.dtype)) for p in ep.params]
        if ep.output_args:
            # a result bound where it is computed (hal.tensor.alias) declares its caller buffer untyped
            n = len(want_params)
            params = params[:n] + [w if g == "!hal.buffer_view" else g for g, w in zip(params[n:], want_results)] \
                + params[n + len(want_results):]
            want_params += want_results + ["!hal.buffer"]
        for kind, got, want in (("parameters", params, want_params), ("results", results, want_results)):
            if got != want:
                i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                raise invalid(path, f"{fname}: {name} was compiled with {len(got)} {kind} ({kind[:-1]} {i}: "
                                    f"{got[i] if i < len(got) else 'none'}), the manifest describes {len(want)} "
                                    f"({want[i] if i < len(want) else 'none'})")
    # what IREE's tools are told to pass; a transient arena smaller than the module needs corrupts
    # memory (seen with iree-run-module), so the recorded sizes must be the module's
    _need(abi == _abi(module, spec), path, f"{fname}: its recorded calling convention ('abi') is not the one its "
                                           "entry points and the module's transient sizes give")


# ------------------------------------------------------------------ parameters
def _problem(name: str, arr: np.ndarray, typings: Sequence[Typing]) -> tuple[str | None, np.dtype]:
    """What is wrong with ``arr`` as the value of variable ``name`` in every variant, and its dtype."""
    want_dt = None
    for t in typings:
        n = next(n for n in t.graph.variables() if n.name == name)
        shape, want_dt = tuple(t.node_shape(n)), np.dtype(t.node_dtype(n))
        if arr.shape != shape:
            return f"{name} has shape {arr.shape}; the symbol needs {shape}", want_dt
    return None, want_dt


def check_params(path: Path, m: dict, arrays: dict[str, np.ndarray], symbol,
                 typings: Sequence[Typing]) -> tuple[dict, dict]:
    """params.npz against the manifest and the symbol: (arg_params, aux_params) by name."""
    fname = m["params"]["file"]
    _need(sorted(arrays) == sorted(m["params"]["names"]), path,
          f"{fname} holds {sorted(arrays)}; the manifest lists {sorted(m['params']['names'])}")
    args, aux = set(symbol.list_arguments()), set(symbol.list_auxiliary_states())
    out: dict[str, dict] = {"arg": {}, "aux": {}}
    for key, arr in arrays.items():
        kind, _, name = key.partition(":")
        _need(kind == "arg" and name in args or kind == "aux" and name in aux, path,
              f"{fname}: '{key}' is not an argument (arg:) or aux state (aux:) of the symbol")
        problem, want = _problem(name, arr, typings)
        _need(problem is None, path, f"{fname}: {problem}")
        _need(arr.dtype == want, path, f"{fname}: {name} is {arr.dtype.name}; the symbol needs {want.name}")
        out[kind][name] = arr
    missing = [n for n in symbol.list_arguments() + symbol.list_auxiliary_states()
               if n not in m["inputs"] and n not in out["arg"] and n not in out["aux"]]
    _need(not missing, path, f"{fname} lacks {', '.join(missing)} (every argument and aux state that is not an "
                             f"input needs a value; inputs: {', '.join(m['inputs'])})")
    return out["arg"], out["aux"]


def prepare_params(params: Any, symbol, typings: Sequence[Typing], inputs: Sequence[str],
                   cast: bool = False) -> dict[str, np.ndarray]:
    """``ax.compile``'s params (a dict by name or MXNet's 'arg:' / 'aux:' keys, or an .npz path)
    checked before anything compiles: known names, complete, exact shapes, and dtypes exact
    or, with ``cast``, cast within their kind (float64 -> float32; never float -> int)."""
    if isinstance(params, (str, os.PathLike)):
        params = read_params(params)
    if not isinstance(params, dict):
        raise AotexecError(f"params must be a dict of arrays or the path of an .npz or .params file, "
                           f"not {type(params).__name__}")
    args, aux = set(symbol.list_arguments()), set(symbol.list_auxiliary_states())
    out: dict[str, np.ndarray] = {}
    for key, value in params.items():
        prefix, _, rest = str(key).partition(":")
        name = rest if prefix in ("arg", "aux") and rest else str(key)
        kind = "aux" if name in aux else "arg" if name in args else None
        if kind is None:
            raise AotexecError(f"parameter '{key}' is not an argument or aux state of the symbol")
        if prefix in ("arg", "aux") and rest and prefix != kind:
            raise AotexecError(f"parameter '{key}': {name} is an {'aux state' if kind == 'aux' else 'argument'}; "
                               f"key it '{kind}:{name}'")
        if f"{kind}:{name}" in out:
            raise AotexecError(f"parameter {name} is given twice")
        arr = np.asarray(value)
        problem, want = _problem(name, arr, typings)
        if problem:
            raise AotexecError(f"parameter {problem}")
        if arr.dtype != want:
            if not (cast and np.can_cast(arr.dtype, want, "same_kind")):
                raise AotexecError(f"parameter {name} is {arr.dtype.name}; the symbol needs {want.name}: convert it "
                                   f"(arr.astype('{want.name}'))" + ("" if cast else " or pass cast_params=True "
                                                                     "(aotexec compile --cast-params)"))
            arr = arr.astype(want)
        out[f"{kind}:{name}"] = arr
    given = {k.split(":", 1)[1] for k in out}
    missing = [n for n in symbol.list_arguments() + symbol.list_auxiliary_states()
               if n not in inputs and n not in given]
    if missing:
        raise AotexecError(f"params lack {', '.join(missing)}: every argument and aux state that is not an input "
                           f"(inputs: {', '.join(inputs)}) needs a value")
    return out
