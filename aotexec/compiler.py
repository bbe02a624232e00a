"""Compile StableHLO MLIR text to IREE vmfb bytes (cached), and verify MLIR cheaply.

Two drivers produce the same module: the in-process C embedding API
(``iree.compiler.api``, ~25 ms less per compile, no temp files) and the
``iree-compile`` binary in a subprocess (isolates compiler crashes and memory).
Small graphs take the in-process path because bind-time latency matters;
graphs whose text exceeds ``_INPROCESS_MAX_CHARS`` go to the subprocess, where
the spawn cost is noise. ``Options.compile_mode`` (AOTEXEC_COMPILE_MODE) forces one.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import platform
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aotexec.base import AotexecError
from aotexec.compile_errors import CompileError, CompileTimeout, format_failure, subprocess_diags
from aotexec import compile_cache
from aotexec.compile_cache import cache_stats, clear_memory_cache, reset_cache_stats
from aotexec.options import DISPATCH_STACK_BYTES, Options
from aotexec.runtime import cpu_features

__all__ = [
    "CompileOptions",
    "CompileError",
    "CompileTimeout",
    "TARGETS",
    "iree_flags",
    "compile_mlir",
    "verify_mlir",
    "resolve_cpu",
    "compiler_version",
    "cache_stats",
    "reset_cache_stats",
    "clear_memory_cache",
]

_log = logging.getLogger("aotexec.compiler")

TARGETS = ("llvm-cpu", "vulkan-spirv", "cuda")
_INPROCESS_MAX_CHARS = 4 << 20
# x86 CPUs without SIMD beyond SSE2: data tiling made the 512x784 MLP ~5x slower there
# (35 ms vs 6.8 ms on local-task), so it is not applied for them (generic aarch64 has NEON).
_NO_DATA_TILING_CPUS = frozenset({"generic", "x86-64"})


@dataclass(frozen=True)
class CompileOptions:
    target: str = "llvm-cpu"  # "llvm-cpu" | "vulkan-spirv" | "cuda"
    cpu: str = "host"  # llvm-cpu -mcpu: 'host' (not portable), 'x86-64-v3', 'generic', ...
    triple: str | None = None  # llvm-cpu cross builds, e.g. 'aarch64-linux-gnu' (None: this machine)
    cuda_arch: str = "sm_80"  # 3.13 has no sm_90 entry; sm_80 PTX is JIT-compiled on Hopper
    opt_level: str = "O2"  # IREE's default is O0
    data_tiling: bool = True  # off by default in IREE; llvm-cpu only
    large_vectors: bool = False  # llvm-cpu: let codegen keep vectors over its size check (a fallback)
    pads_into_consumers: bool = False  # llvm-cpu: fuse each tensor.pad into its consumer (``PADS_INTO_CONSUMERS_FLAG``)
    multi_use_fusion: bool = True  # off: producers with several users stay out of consumers' dispatches (a fallback)
    extra_flags: tuple[str, ...] = ()


CONST_EXPR_GROWTH_BYTES = 1 << 40
# a global (not session) LLVM option: only iree-compile, the subprocess, takes it
LARGE_VECTORS_FLAG = "--iree-llvmcpu-fail-on-large-vector=false"
PADS_INTO_CONSUMERS_FLAG = "--iree-dispatch-creation-enable-fuse-padding-into-linalg-consumer-ops"
NO_MULTI_USE_FUSION_FLAG = "--iree-dispatch-creation-fuse-multi-use=false"


def iree_flags(opts: CompileOptions) -> list[str]:
    """The full iree-compile flag list for ``opts`` (also part of the cache key)."""
    if opts.target == "llvm-cpu":
        flags = [
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            f"--iree-llvmcpu-target-cpu={opts.cpu}",
            *([f"--iree-llvmcpu-target-triple={opts.triple}"] if opts.triple else []),
            f"--iree-opt-level={opts.opt_level}",
            # IREE demotes f64 to f32 by default, which changes the ABI under the caller
            "--iree-input-demote-f64-to-f32=false",
            f"--iree-llvmcpu-stack-allocation-limit={DISPATCH_STACK_BYTES}",
            # hoist weight transforms of resident parameters (layout changes, data-tiling packs,
            # Winograd's G w G^T) into the module's initializer whatever their size: IREE's
            # default (1 MB of growth) left ResNet-50's packed 1x1 weights and the Winograd
            # weights of 512-channel layers computed at every call
            f"--iree-opt-const-expr-max-size-increase-threshold={CONST_EXPR_GROWTH_BYTES}",
        ]
        if opts.large_vectors:
            flags.append(LARGE_VECTORS_FLAG)
        if opts.pads_into_consumers:
            flags.append(PADS_INTO_CONSUMERS_FLAG)
        plain_x86 = opts.cpu.lower() in _NO_DATA_TILING_CPUS and _arch(target_triple(opts)) == "x86_64"
        if opts.data_tiling and not plain_x86:
            flags.append("--iree-opt-data-tiling")
    elif opts.target == "vulkan-spirv":
        # Default SPIR-V target env; it ran on Mesa lavapipe. Data tiling changed nothing.
        flags = ["--iree-hal-target-device=vulkan", f"--iree-opt-level={opts.opt_level}"]
    elif opts.target == "cuda":
        flags = [
            "--iree-hal-target-device=cuda",
            f"--iree-cuda-target={opts.cuda_arch}",
            f"--iree-opt-level={opts.opt_level}",
        ]
    else:
        raise AotexecError(f"unknown compile target {opts.target!r}; expected one of {', '.join(TARGETS)}")
    if not opts.multi_use_fusion:
        flags.append(NO_MULTI_USE_FUSION_FLAG)
    return flags + list(opts.extra_flags)


@functools.lru_cache(maxsize=1)
def compiler_version() -> str:
    """Version + source revision: a nightly rebuild with the same version still differs."""
    from iree.compiler import version

    return f"{version.VERSION}@{version.REVISIONS.get('IREE', '')}"


def _describe(opts: CompileOptions) -> str:
    if opts.target == "llvm-cpu":
        return f"llvm-cpu (cpu={opts.cpu})"
    if opts.target == "cuda":
        return f"cuda ({opts.cuda_arch})"
    return opts.target


# ---------------------------------------------------------------- drivers

_DIAG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p)
_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}


@functools.lru_cache(maxsize=1)
def _inprocess_api():
    """The embedding API plus the callback-diagnostics entry point the wrapper lacks."""
    from iree.compiler.api import Output, Session, Source, ctypes_dl

    fn = ctypes_dl._dylib.ireeCompilerInvocationEnableCallbackDiagnostics
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, _DIAG_CALLBACK, ctypes.c_void_p]
    to_phase = ctypes_dl._dylib.ireeCompilerInvocationSetCompileToPhase
    to_phase.restype = None
    to_phase.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return Session, Source, Output, fn, to_phase


def _compile_inprocess(
    mlir_text: str, flags: list[str], opts: CompileOptions, *, to_phase: str | None = None
) -> bytes:
    Session, Source, Output, enable_diags, set_phase = _inprocess_api()
    diags: list[tuple[str, str]] = []

    def on_diag(severity: int, message: bytes, size: int, _user: int) -> None:
        diags.append((_SEVERITY.get(severity, "error"), ctypes.string_at(message, size).decode("utf-8", "replace")))

    callback = _DIAG_CALLBACK(on_diag)  # must outlive the invocation
    session = Session()
    try:
        try:
            session.set_flags(*flags)
        except ValueError as e:
            raise CompileError(
                f"IREE rejected the compiler flags for {_describe(opts)}: {e}",
                target=opts.target, nodes=[], diagnostics=[str(e)],
            ) from None
        inv = session.invocation()
        enable_diags(inv._inv_p, 0, callback, None)
        if to_phase:
            set_phase(inv._inv_p, to_phase.encode())
        source = Source.wrap_buffer(session, mlir_text.encode(), buffer_name="graph.mlir")
        if not inv.parse_source(source):
            raise format_failure(f"IREE could not parse the module for {_describe(opts)}", diags, mlir_text, opts.target)
        if not inv.execute():
            raise format_failure(f"IREE compilation failed for {_describe(opts)}", diags, mlir_text, opts.target)
        out = Output.open_membuffer()
        try:
            (inv.output_ir if to_phase else inv.output_vm_bytecode)(out)
            return bytes(out.map_memory())
        finally:
            out.close()
    finally:
        session.close()  # closes the invocation and source too


def _die_with_parent() -> None:
    """In the child, before exec: the kernel kills it when its parent dies (Linux), so a
    killed test or Ctrl-C never leaves an ``iree-compile`` running on its own."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)          # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _child_setup(memory_limit: int | None):
    """The child's setup before exec: death with the parent, and an address-space limit
    (``memory_limit`` bytes; past it LLVM reports out of memory and iree-compile exits)."""
    def setup() -> None:
        _die_with_parent()
        if memory_limit:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    return setup


def _compile_subprocess(mlir_text: str, flags: list[str], opts: CompileOptions, timeout: float | None = None,
                        memory_limit: int | None = None) -> bytes:
    from iree.compiler.tools.binaries import find_tool

    cmd = [find_tool("iree-compile"), "-", "-o", "-", *flags]
    # run() kills the child on an exception here (KeyboardInterrupt, a timeout); the death
    # signal covers the parent being killed outright
    try:
        proc = subprocess.run(cmd, input=mlir_text.encode(), capture_output=True, timeout=timeout,
                              preexec_fn=_child_setup(memory_limit) if sys.platform == "linux" else None)
    except subprocess.TimeoutExpired:
        raise CompileTimeout(f"IREE compilation of {_describe(opts)} took over {timeout:.0f} s and was stopped",
                           target=opts.target, nodes=[], diagnostics=[f"timed out after {timeout:.0f} s"]) from None
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        raise format_failure(
            f"IREE compilation failed for {_describe(opts)} (iree-compile exit {proc.returncode})",
            subprocess_diags(stderr), mlir_text, opts.target,
        )
    return proc.stdout


# a function the module defines at its top level (not one inside an executable it embeds: the
# kernels' exports, ``kernels.executable``)
FUNCTION = re.compile(r"^ {0,2}func\.func @(\w+)\(", re.M)
PROGRESS_EVERY = 15.0   # seconds between "still compiling" log records


def _functions(mlir_text: str) -> str:
    names = FUNCTION.findall(mlir_text)
    return f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"


@contextlib.contextmanager
def _progress(what: str):
    """Log (aotexec.compiler, INFO) a compile that takes long: every ``PROGRESS_EVERY`` s
    which module and the time so far, then its total; short compiles log nothing above DEBUG."""
    t0 = time.perf_counter()
    done = threading.Event()

    def report() -> None:
        while not done.wait(PROGRESS_EVERY):
            _log.info("compiling %s: %.0f s so far", what, time.perf_counter() - t0)
    watcher = threading.Thread(target=report, name="aotexec-compile-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        elapsed = time.perf_counter() - t0
        if elapsed >= PROGRESS_EVERY:
            _log.info("compiled %s in %.0f s", what, elapsed)


def _choose_mode(mlir_text: str, mode: str) -> str:
    if mode in ("inprocess", "subprocess"):
        return mode
    return "inprocess" if len(mlir_text) <= _INPROCESS_MAX_CHARS else "subprocess"


def compile_mlir(mlir_text: str, opts: CompileOptions, *, use_cache: bool | None = None,
                 options: Options | None = None, timeout: float | None = None,
                 memory_limit: int | None = None) -> bytes:
    """StableHLO/MLIR text -> vmfb bytes. Raises CompileError (an AotexecError).

    ``options`` (default: from the environment) gives the cache and the compile mode;
    an explicit ``use_cache`` wins over ``options.cache``. A ``timeout`` (seconds) or a
    ``memory_limit`` (bytes of address space, Linux) compiles in an ``iree-compile`` child."""
    options = options or Options.from_env()
    flags = iree_flags(opts)
    key = None
    if options.cache if use_cache is None else use_cache:
        key = compile_cache.cache_key(mlir_text, flags, compiler_version())
        hit = compile_cache.lookup(options.cache_dir, key)
        if hit is not None:
            return hit
    check_cpu_name(opts)     # before the in-process compiler, which LLVM would abort on a bad name
    mode = _choose_mode(mlir_text, options.compile_mode)
    if LARGE_VECTORS_FLAG in flags or timeout is not None or memory_limit is not None:
        mode = "subprocess"
    t0 = time.perf_counter()
    if mode == "inprocess":
        try:
            _inprocess_api()
        except (ImportError, OSError, RuntimeError, ValueError, AttributeError) as e:
            _log.debug("in-process compiler API unavailable (%s); using iree-compile", e)
            mode = "subprocess"
    what = f"{_describe(opts)} module {_functions(mlir_text)}"
    with _progress(what):
        vmfb = (_compile_inprocess(mlir_text, flags, opts) if mode == "inprocess"
                else _compile_subprocess(mlir_text, flags, opts, timeout, memory_limit))
    _log.debug(
        "compiled %s (%d chars) -> %d bytes in %.3f s [%s]%s",
        what, len(mlir_text), len(vmfb), time.perf_counter() - t0, mode,
        f" key {key[:16]}" if key else "",
    )
    if key is not None:
        compile_cache.store(options.cache_dir, key, vmfb)
    return vmfb


def remember_as(mlir_text: str, opts: CompileOptions, vmfb: bytes, options: Options | None = None) -> None:
    """Cache ``vmfb`` (compiled from another form of the module, a fallback) under the key of
    ``mlir_text`` with ``opts``, so the next bind does not pay the failing compile again."""
    options = options or Options.from_env()
    if options.cache:
        compile_cache.store(options.cache_dir, compile_cache.cache_key(mlir_text, iree_flags(opts), compiler_version()),
                            vmfb)


# ---------------------------------------------------------------- verify

_verify_local = threading.local()
# Attributes (e.g. dense constants) are uniqued in the context forever: start a
# fresh one after this much parsed text to bound memory in long-lived processes.
_VERIFY_CONTEXT_BUDGET = 64 << 20


def _verify_context():
    from iree.compiler import ir

    ctx = getattr(_verify_local, "ctx", None)
    if ctx is None or _verify_local.used > _VERIFY_CONTEXT_BUDGET:
        ctx = ir.Context()  # IREE's site init registers every dialect it compiles (stablehlo, chlo, ...)
        _verify_local.ctx, _verify_local.used = ctx, 0
    return ir, ctx


def verify_mlir(mlir_text: str) -> None:
    """Parse + verify with IREE's dialects; raises CompileError naming loc() nodes."""
    ir, ctx = _verify_context()
    _verify_local.used += len(mlir_text)
    try:
        module = ir.Module.parse(mlir_text, ctx)  # parse runs the verifier
    except ir.MLIRError as e:
        raw: list[tuple[str, str]] = []
        for d in e.error_diagnostics:
            raw.append(("error", f"{d.location}: {d.message}"))
            raw.extend(("note", f"{n.location}: {n.message}") for n in d.notes)
        if not raw:
            raw = [("error", str(e))]
        raise format_failure("invalid MLIR module", raw, mlir_text, "verify") from None
    del module


# ---------------------------------------------------------------- CPU target record


def _host_triple() -> str:
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    # llvm-cpu's default output is an embedded ELF for the host architecture.
    return f"{machine}-unknown-unknown-eabi-elf"


def _arch(triple: str) -> str:
    arch = triple.split("-", 1)[0].lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def target_triple(opts: CompileOptions) -> str:
    """The llvm-cpu target triple: ``opts.triple``, an --iree-llvmcpu-target-triple in the extra
    flags, else this machine's."""
    return opts.triple or _flag_value(opts.extra_flags, "--iree-llvmcpu-target-triple") or _host_triple()


def _flag_value(flags: tuple[str, ...], name: str) -> str | None:
    value = None
    for f in flags:
        if f.startswith(name + "="):
            value = f.split("=", 1)[1]
    return value


@functools.lru_cache(maxsize=4)
def _llvm_host_cpu(cache_dir: Path) -> str | None:
    """LLVM's name for this CPU (e.g. 'rocketlake'), for messages; ~0.2 s once per machine
    (remembered in ``cache_dir``)."""
    flags_have = sorted(cpu_features.host_cpu_features())
    marker = f"{compiler_version()}|{cpu_features.host_cpu_model()}|{','.join(flags_have)}"
    path = cache_dir / "host-cpu.json"
    try:
        rec = json.loads(path.read_text())
        if rec.get("marker") == marker:
            return rec.get("cpu")
    except (OSError, ValueError, AttributeError):
        pass
    probe = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    opts = CompileOptions()
    try:
        ir_text = _compile_inprocess(probe, iree_flags(opts), opts, to_phase="executable-sources").decode()
    except Exception as e:  # informational only: never fail a build over a name
        _log.debug("could not resolve LLVM host CPU name: %s", e)
        return None
    m = re.search(r'\bcpu = "([^"]+)"', ir_text)
    name = m.group(1) if m else None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"marker": marker, "cpu": name}))
        os.replace(tmp, path)
    except OSError:
        pass
    return name


def resolve_cpu(opts: CompileOptions, *, llvm_host_name: bool = True, options: Options | None = None) -> dict:
    """What an llvm-cpu artifact must record so a loader can refuse an unfit CPU.

    ``{"cpu", "triple", "features"}`` (+ ``"host_cpu"``, LLVM's name, for 'host').
    For 'host' the features are this CPU's codegen-relevant ISA flags; for named
    CPUs they come from a small table (None when the name is not in it).
    """
    if opts.target != "llvm-cpu":
        return {"cpu": None, "triple": None, "features": []}
    check_cpu_name(opts)
    triple = target_triple(opts)
    if opts.cpu == "host" and _arch(triple) != _arch(_host_triple()):
        raise AotexecError(f"--cpu host names this machine's CPU, not one of {triple}: give --cpu generic or an "
                           "LLVM CPU name (e.g. cortex-a76 for aarch64)")
    rec: dict = {"cpu": opts.cpu, "triple": triple}
    if opts.cpu == "host":
        rec["features"] = sorted(cpu_features.host_cpu_features())
        rec["host_cpu"] = _llvm_host_cpu((options or Options.from_env()).cache_dir) if llvm_host_name else None
    else:
        feats = cpu_features.named_cpu_features(opts.cpu)
        if feats is None:
            _log.debug("CPU %r not in the feature table; its artifact cannot be checked at load", opts.cpu)
        rec["features"] = feats
    extra = _flag_value(opts.extra_flags, "--iree-llvmcpu-target-cpu-features")
    if extra and extra != "host":
        plus = {cpu_features.normalize_feature(f) for f in extra.split(",") if f.strip().startswith("+")}
        rec["features"] = sorted(set(rec["features"] or []) | plus)
    return rec


_ACCEPTED_CPUS = re.compile(r"List of accepted CPUs: (.*)")


@functools.lru_cache(maxsize=8)
def llvm_cpu_names(triple: str) -> frozenset[str] | None:
    """The CPU names LLVM accepts for ``triple`` (None if they cannot be learned).  Asked of an
    ``iree-compile`` child once: an unknown name makes LLVM print this list and then abort the
    process ("LLVM ERROR: 64-bit code requested..."), which in-process would be ours."""
    from iree.compiler.tools.binaries import find_tool
    probe = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
    flags = iree_flags(CompileOptions(cpu="help", triple=triple))
    try:
        proc = subprocess.run([find_tool("iree-compile"), "-", "-o", os.devnull, *flags], input=probe.encode(),
                              capture_output=True, timeout=120,
                              preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    except (OSError, subprocess.SubprocessError) as e:
        _log.debug("could not list LLVM's CPU names: %s", e)
        return None
    m = _ACCEPTED_CPUS.search(proc.stderr.decode("utf-8", "replace") + proc.stdout.decode("utf-8", "replace"))
    return frozenset(n.strip() for n in m.group(1).split(",") if n.strip()) if m else None


def check_cpu_name(opts: CompileOptions) -> None:
    """An llvm-cpu target CPU LLVM does not know is a one-line error, not LLVM's list and abort."""
    if opts.target != "llvm-cpu" or opts.cpu in ("host", "generic"):
        return
    triple = target_triple(opts)
    names = llvm_cpu_names(triple)
    if names is not None and opts.cpu not in names:
        arch = triple.split("-")[0]
        near = sorted(n for n in names if n[:3] == opts.cpu[:3])[:6]
        portable = "x86-64-v2/v3/v4, " if arch == "x86_64" else ""
        raise AotexecError(f"unknown CPU {opts.cpu!r} for {arch}: use host (this machine), generic, {portable}or an "
                           "LLVM CPU name" + (f" such as {', '.join(near)}" if near else "")
                           + f" ({len(names)} are known; iree-compile --iree-llvmcpu-target-cpu=help lists them)")
