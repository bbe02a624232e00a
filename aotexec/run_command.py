"""The ``iree-run-module`` command that runs one entry point of an artifact without aotexec.

Everything comes from the calling convention the manifest records per module (``abi``): the
inputs in order as ``.npy`` files (``--input=@file.npy``), one zero-filled storage buffer per
output (``iree.abi.output``), the transient arena as a plain buffer of the recorded size
(``--input=&<bytes>xi8``; a smaller one corrupts memory), and each result written with
``--output=@file.npy``.  Inference on llvm-cpu runs the resident module, whose parameters
IREE reads from ``params.irpa`` (``--parameters=aotexec=...``), so it needs the data inputs
only; other entry points take the parameters as inputs, written as ``.npy`` files from the
artifact (``write_params``).  CPU task workers get the stack the compiled dispatches may use
(``options.WORKER_STACK_BYTES``), as the Python runtime gives them.  Runtime only.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .base import AotexecError
from .emitter import MLIR_DTYPES
from .manifest import RESIDENT, is_label
from .options import WORKER_STACK_BYTES
from .signature import RESIDENT_SCOPE, Role

TOOL = "iree-run-module"
IREE_DEVICES = {"llvm-cpu": "local-task", "vulkan-spirv": "vulkan", "cuda": "cuda"}
# the file stem of a port of each role: variables and outputs by name, the rest prefixed
_PREFIX = {Role.VARIABLE: "", Role.OUTPUT: "", Role.GRAD: "grad.", Role.AUX: "aux.", Role.RESIDUAL: "residual.",
           Role.HEAD_GRAD: "head_grad.", Role.OLD_GRAD: "old_grad.", Role.VALUE: "value."}


def stem(role: Role, name: str) -> str:
    """The file stem of a port: a plain file name whatever the graph's names hold."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
    return _PREFIX.get(role, f"{role.value}.") + ("_" + safe[1:] if safe.startswith(".") else safe)


def tensor_spec(shape, dtype: str) -> str:
    """iree-run-module's ``<dims>x<type>`` for a zero-filled tensor (``<type>=0`` when 0-d)."""
    el = MLIR_DTYPES[dtype]
    return "x".join([*(str(d) for d in shape), el]) if len(shape) else f"{el}=0"


@dataclass
class RunCommand:
    argv: list[str]
    module: str
    params: dict[str, str] = field(default_factory=dict)     # parameter inputs: variable name -> .npy path
    inputs: list[tuple[str, str, tuple, str]] = field(default_factory=list)   # (key, file, shape, dtype) to give
    outputs: list[tuple[str, tuple, str]] = field(default_factory=list)      # (file, shape, dtype) written
    output_dir: str = "outputs"

    def shell(self) -> str:
        """A bash snippet: what each file must hold, then the command."""
        lines = [f"# {self.module}: inputs (.npy files of exactly these shapes and dtypes)"]
        lines += [f"#   {key:20s} {file}  {tuple(shape)} {dtype}" + ("  (a parameter, written by --params-dir)"
                                                                     if file in self.params.values() else "")
                  for key, file, shape, dtype in self.inputs]
        lines += ["# outputs"] + [f"#   {file}  {tuple(shape)} {dtype}" for file, shape, dtype in self.outputs]
        lines.append(f"mkdir -p {shlex.quote(self.output_dir)}")
        lines.append(" \\\n    ".join(shlex.quote(a) for a in self.argv))
        return "\n".join(lines)


def run_command(art, function: str = "forward_infer", *, variant: int = 0, target: str | None = None,
                inputs: dict[str, str] | None = None, input_dir: str = ".", output_dir: str = "outputs",
                params_dir: str | None = None, tool: str = TOOL, resident: bool = True, seed: int = 0) -> RunCommand:
    """The command running ``function`` of ``art``'s ``variant`` on ``target`` (default llvm-cpu).

    Input files: ``inputs`` by key (the file stem: a variable's name, ``residual.<name>``...),
    else ``<input_dir>/<key>.npy``; inference leaves unused labels zero.  Parameter inputs are
    ``<params_dir>/<name>.npy`` (``write_params`` writes them).  Results go to
    ``<output_dir>/<key>.npy``.  ``seed``: random ops' seed (the call counter is 0)."""
    k = art.check_variant(variant)
    target = target or ("llvm-cpu" if "llvm-cpu" in art.targets else art.targets[0])
    if target not in art.targets:
        raise AotexecError(f"artifact {art.path} has no {target} module; it was compiled for {', '.join(art.targets)}")
    files = art.variants[k]["files"]
    spec = art.specs[k][target]
    archive = (art.manifest.get("params") or {}).get("irpa")
    params = {**art.arg_params, **art.aux_params}
    res_spec = art.resident_specs[k]
    if resident and function == "forward_infer" and target == "llvm-cpu" and res_spec is not None and archive \
            and set(res_spec.entries[function].resident) <= set(params):
        spec, rec = res_spec, files[RESIDENT]
    else:
        rec, archive = files[target], None
    module = rec["file"]
    if function not in spec.entries:
        raise AotexecError(f"artifact {art.path} has no function {function!r}; it has {', '.join(spec.entries)}")
    ep = spec.entries[function]
    root = Path(art.path)
    argv = [tool, f"--device={IREE_DEVICES[target]}"]
    if target == "llvm-cpu":
        argv.append(f"--task_worker_stack_size={WORKER_STACK_BYTES}")
    argv.append(f"--module={root / module}")
    if archive:
        argv.append(f"--parameters={RESIDENT_SCOPE}={root / archive['file']}")
    argv.append(f"--function={function}")
    cmd = RunCommand(argv, str(root / module), output_dir=output_dir)
    given = dict(inputs or {})
    for arg in rec["abi"][function]:     # validated at load against the module
        argv.append("--input=" + _input(cmd, arg, function, given, input_dir, params, params_dir, seed))
    unknown = sorted(set(given) - {key for key, *_ in cmd.inputs})
    if unknown:
        raise AotexecError(f"{function} takes no input {unknown}; its inputs are {[key for key, *_ in cmd.inputs]}")
    for p in ep.results:
        file = str(Path(output_dir) / f"{stem(p.role, p.name)}.npy")
        cmd.outputs.append((file, p.shape, p.dtype))
        argv.append(f"--output=@{file}")
    return cmd


def _input(cmd: RunCommand, arg: dict[str, Any], function: str, given: dict[str, str], input_dir: str,
           params: dict[str, np.ndarray], params_dir: str | None, seed: int) -> str:
    """One ``--input=`` value for an argument of ``EntryPoint.abi``."""
    kind, shape, dtype = arg["kind"], arg.get("shape", ()), arg.get("dtype", "")
    if kind == "transients":
        if arg["bytes"] is None:
            raise AotexecError(f"the manifest records no transient arena size for {function}")
        return f"&{max(arg['bytes'], 1)}xi8"
    if kind == "output_storage":
        return tensor_spec(shape, dtype)
    role, name = Role(arg["role"]), arg["name"]
    if role is Role.RNG:
        return f"{tensor_spec(shape, dtype).split('=')[0]}={seed} 0"
    key = stem(role, name)
    if role is Role.VARIABLE and name in params and key not in given:
        if params_dir is None:
            raise AotexecError(f"{function} takes the parameter {name} as an input (only inference on llvm-cpu reads "
                               "them from params.irpa): give a folder to write them to (--params-dir DIR)")
        file = cmd.params[name] = str(Path(params_dir) / f"{key}.npy")
    elif role is Role.VARIABLE and is_label(name) and function == "forward_infer" and key not in given:
        cmd.inputs.append((key, "zeros (inference does not read it)", shape, dtype))
        return tensor_spec(shape, dtype)
    else:
        file = given.get(key, str(Path(input_dir) / f"{key}.npy"))
    cmd.inputs.append((key, file, shape, dtype))
    return f"@{file}"


def write_params(art, cmd: RunCommand) -> None:
    """Write the parameter inputs ``cmd`` reads (``--params-dir``) from the artifact's values."""
    params = {**art.arg_params, **art.aux_params}
    for name, file in cmd.params.items():
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        np.save(file, params[name])
