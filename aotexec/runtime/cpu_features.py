"""Host CPU feature detection and the load-time check for llvm-cpu artifacts.

Runtime-only: stdlib + aotexec.base, so a deployment without ``iree.compiler``
can refuse an artifact whose code would die with SIGILL on this CPU.
Feature names are canonicalised to LLVM's spelling (``avx512vnni``, ``bmi``,
``sse4.2``, ``amx-tile``) because that is what ``--iree-llvmcpu-target-cpu-features``
and the compiler's target attributes use; /proc/cpuinfo spells several differently.
"""

from __future__ import annotations

import functools
import logging
import platform

from aotexec.base import AotexecError

__all__ = [
    "normalize_feature",
    "host_cpu_features",
    "host_cpu_model",
    "named_cpu_features",
    "best_portable_cpu",
    "check_cpu_compatible",
    "X86_LEVELS",
]

_log = logging.getLogger("aotexec.cpu_features")

# /proc/cpuinfo (Linux x86 + aarch64 "Features") spelling -> LLVM spelling.
_CPUINFO_TO_LLVM = {
    "pni": "sse3",
    "sse4_1": "sse4.1",
    "sse4_2": "sse4.2",
    "bmi1": "bmi",
    "abm": "lzcnt",
    "avx512_vnni": "avx512vnni",
    "avx512_bf16": "avx512bf16",
    "avx512_fp16": "avx512fp16",
    "avx512_bitalg": "avx512bitalg",
    "avx512_vpopcntdq": "avx512vpopcntdq",
    "avx512_vbmi2": "avx512vbmi2",
    "avx512_vp2intersect": "avx512vp2intersect",
    "avx_vnni": "avxvnni",
    "amx_tile": "amx-tile",
    "amx_bf16": "amx-bf16",
    "amx_int8": "amx-int8",
    "amx_fp16": "amx-fp16",
    "amx_complex": "amx-complex",
    "pclmulqdq": "pclmul",
    # aarch64
    "asimd": "neon",
    "asimddp": "dotprod",
    "asimdhp": "fullfp16",
}

# ISA extensions LLVM's vector/scalar codegen may emit; the rest of cpuinfo
# (virtualisation, security, power flags) cannot cause SIGILL in compiled kernels.
_CODEGEN_RELEVANT = frozenset(
    """
    sse3 ssse3 sse4.1 sse4.2 popcnt lzcnt movbe avx avx2 fma f16c bmi bmi2
    avx512f avx512bw avx512dq avx512vl avx512cd avx512ifma avx512vbmi avx512vbmi2
    avx512vnni avx512bf16 avx512fp16 avx512bitalg avx512vpopcntdq avx512vp2intersect
    avxvnni gfni vaes vpclmulqdq amx-tile amx-bf16 amx-int8 amx-fp16 amx-complex
    neon dotprod fullfp16 i8mm bf16 sve sve2 sme
    """.split()
)

# x86-64 psABI micro-architecture levels (cumulative), LLVM spelling.
_V2 = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt")
_V3 = _V2 + ("avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
X86_LEVELS: dict[str, tuple[str, ...]] = {
    "x86-64": (),
    "x86-64-v2": _V2,
    "x86-64-v3": _V3,
    "x86-64-v4": _V4,
}

# A small table of common -mcpu names; unknown names resolve to None (not checkable).
_NAMED_CPUS: dict[str, tuple[str, ...]] = {
    "generic": (),
    **X86_LEVELS,
    "haswell": _V3,
    "broadwell": _V3,
    "skylake": _V3,
    "znver2": _V3,
    "znver3": _V3,
    "skylake-avx512": _V4,
    "cascadelake": _V4 + ("avx512vnni",),
    "icelake-server": _V4 + ("avx512vnni", "avx512ifma", "avx512vbmi", "avx512vbmi2",
                             "avx512bitalg", "avx512vpopcntdq", "gfni", "vaes"),
    "znver4": _V4 + ("avx512vnni", "avx512bf16", "avx512ifma", "avx512vbmi",
                     "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "gfni", "vaes"),
    "sapphirerapids": _V4 + ("avx512vnni", "avx512bf16", "avx512fp16", "avx512ifma",
                             "avx512vbmi", "avx512vbmi2", "avx512bitalg",
                             "avx512vpopcntdq", "avxvnni", "gfni", "vaes",
                             "amx-tile", "amx-bf16", "amx-int8"),
}


def normalize_feature(name: str) -> str:
    """One spelling per feature: lower case, no '+' prefix, LLVM's name."""
    n = name.strip().lower().lstrip("+")
    return _CPUINFO_TO_LLVM.get(n, n)


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[frozenset[str] | None, str | None]:
    """(all flags, model name) of the first CPU; (None, None) where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None, None
    flags: frozenset[str] | None = None
    model = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features") and flags is None:
            flags = frozenset(normalize_feature(f) for f in value.split())
        elif key in ("model name", "cpu model") and model is None:
            model = value.strip()
        if flags is not None and model is not None:
            break
    return flags, model


def host_cpu_features() -> set[str]:
    """Codegen-relevant ISA features of this CPU (LLVM names); empty if unknown."""
    flags, _ = _cpuinfo()
    return set(flags & _CODEGEN_RELEVANT) if flags else set()


def host_cpu_model() -> str | None:
    return _cpuinfo()[1]


def named_cpu_features(cpu: str) -> list[str] | None:
    """Features a named -mcpu implies (sorted), or None for names not in the table."""
    feats = _NAMED_CPUS.get(cpu.lower())
    return None if feats is None else sorted(set(feats))


def best_portable_cpu(features: set[str] | None = None) -> str:
    """Highest x86-64 psABI level this CPU satisfies ('generic' off x86)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "generic"
    have = host_cpu_features() if features is None else features
    best = "x86-64"
    for level, need in X86_LEVELS.items():
        if set(need) <= have:
            best = level
    return best


_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def check_cpu_compatible(
    required: list[str] | None,
    cpu_name: str,
    *,
    host_cpu: str | None = None,
    triple: str | None = None,
) -> None:
    """Raise AotexecError if this CPU lacks a feature the artifact's code needs.

    ``required``/``cpu_name``/``host_cpu``/``triple`` are what
    ``aotexec.compiler.resolve_cpu`` recorded at compile time; ``required=None``
    (a CPU name the feature table does not know) checks only the architecture.
    """
    machine = platform.machine().lower()
    machine = _ARCH_ALIASES.get(machine, machine)
    if triple:
        arch = triple.split("-", 1)[0].lower()
        arch = _ARCH_ALIASES.get(arch, arch)
        if arch and arch != machine:
            raise AotexecError(
                f"artifact was compiled for {triple} (CPU {cpu_name!r}) but this "
                f"machine is {machine}; recompile for this machine"
            )
    flags, _ = _cpuinfo()
    if required is None:
        return
    if flags is None:
        # No /proc/cpuinfo (non-Linux): nothing to check against; let it run.
        _log.debug("cannot read host CPU features; skipping CPU compatibility check")
        return
    have = set(flags)
    need = {normalize_feature(f) for f in required}
    missing = sorted(need - have)
    if not missing:
        return
    what = f"CPU {cpu_name!r}" + (f" ({host_cpu})" if host_cpu else "")
    best = best_portable_cpu(have & _CODEGEN_RELEVANT)
    hint = f"--cpu {best} or --cpu generic" if best not in ("generic", "x86-64") else "--cpu generic"
    raise AotexecError(
        f"artifact was compiled for {what} and needs {', '.join(missing)} which this "
        f"CPU lacks; recompile with {hint} for portable code"
    )
