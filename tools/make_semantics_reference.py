"""Write tests/data/semantics/ from MXNet 1.9.1: what MXNet answers for the cases of
tests/test_mxnet_semantics.py, and MXNet's operator inventory.

Run in a Python with mxnet 1.9.1 and numpy < 2 (never a dependency of aotexec):

    /path/to/mxnet-venv/bin/python tools/make_semantics_reference.py [--out tests/data/semantics]

Every case is a snippet run with ``mx`` bound to mxnet here and to aotexec in the test, so the
JSON holds the code next to MXNet's answer.  Error cases name a phrase the generator checks is
in MXNet's message (MXNet's messages also carry a timestamp and a source line).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from semantics_cases import ERRORS, EXEC, INFER, INFER_TYPE, MONITOR  # noqa: E402

import mxnet as mx  # noqa: E402


def _shapes(x):
    return None if x is None else [None if s is None else list(s) for s in x]


def _build(code: str) -> dict:
    """Run a case's snippet with fresh automatic names (``_mulscalar0``...)."""
    env = {"mx": mx, "np": np}
    with mx.name.NameManager():
        exec(code, env)
    return env


def infer_case(case: dict) -> dict:
    env = _build(case["code"])
    with mx.np_shape(case.get("np_shape", False)), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = env["out"].infer_shape_partial if case.get("partial", True) else env["out"].infer_shape
        try:
            arg, out, aux = fn(**{k: tuple(v) for k, v in case.get("kwargs", {}).items()})
        except mx.MXNetError as e:
            phrase = case["error"]
            assert phrase in str(e), (case["name"], str(e))
            return dict(case, error=phrase)
    got = dict(case, arg=_shapes(arg), out=_shapes(out), aux=_shapes(aux))
    unknown = [line.strip() for w in caught for line in str(w.message).splitlines()[1:]]
    if unknown:
        got["warned"] = unknown
    return got


def infer_type_case(case: dict) -> dict:
    env = _build(case["code"])
    fn = env["out"].infer_type_partial if case.get("partial", False) else env["out"].infer_type
    try:
        arg, out, aux = fn(**case.get("kwargs", {}))
    except mx.MXNetError as e:
        assert case["error"] in str(e), (case["name"], str(e))
        return dict(case)
    name = lambda t: None if t is None else np.dtype(t).name  # noqa: E731
    names = lambda ts: None if ts is None else [name(t) for t in ts]  # noqa: E731
    return dict(case, arg=names(arg), out=names(out), aux=names(aux))


def error_case(case: dict) -> dict:
    env = _build(case["code"])
    try:
        exec(case["call"], env)
    except Exception as e:  # noqa: BLE001  (MXNetError, or the builtin MXNet's Python raises)
        assert case["phrase"] in str(e), (case["name"], str(e))
        return dict(case, type=type(e).__name__)
    raise AssertionError(f"{case['name']}: MXNet raised nothing")


def _inputs(case: dict, sym) -> dict:
    rng = np.random.RandomState(case.get("seed", 0))
    shapes = case["shapes"]
    values = {}
    for name in sym.list_arguments() + sym.list_auxiliary_states():
        lo, hi = case.get("range", {}).get(name, (-1.0, 1.0))
        values[name] = rng.uniform(lo, hi, size=shapes[name]).astype(case.get("dtypes", {}).get(name, "float32"))
    return values


def exec_case(case: dict, arrays: dict) -> dict:
    """Outputs of forward(is_train=False) and, with ``grad``, forward(is_train=True) + backward:
    outputs, gradients and aux states after it."""
    sym = _build(case["code"])["out"]
    values = _inputs(case, sym)
    key = case["name"]
    for n, v in values.items():
        arrays[f"{key}/in/{n}"] = v
    args = {n: mx.nd.array(values[n], dtype=values[n].dtype) for n in sym.list_arguments()}
    aux = {n: mx.nd.array(values[n]) for n in sym.list_auxiliary_states()}
    grads = {n: mx.nd.zeros(args[n].shape, dtype=args[n].dtype) for n in sym.list_arguments()
             if n not in case.get("no_grad", ()) and case.get("grad")}
    ex = sym.bind(mx.cpu(), args=args, args_grad=grads, aux_states=aux, grad_req="write")
    for i, o in enumerate(ex.forward(is_train=False)):
        arrays[f"{key}/infer/{i}"] = o.asnumpy()
    if case.get("grad"):
        if not case.get("backward_after_inference") and not case.get("inference_backward"):
            for i, o in enumerate(ex.forward(is_train=True)):
                arrays[f"{key}/train/{i}"] = o.asnumpy()
        rng = np.random.RandomState(1)
        heads = [rng.uniform(-1, 1, size=o.shape).astype(o.dtype) for o in ex.outputs]
        for i, h in enumerate(heads):
            arrays[f"{key}/head/{i}"] = h
        ex.backward([mx.nd.array(h) for h in heads] if not case.get("loss") else None,
                    is_train=not case.get("inference_backward"))
        for n, g in grads.items():
            arrays[f"{key}/grad/{n}"] = g.asnumpy()
        for n, a in ex.aux_dict.items():
            arrays[f"{key}/aux/{n}"] = a.asnumpy()
    return case


def monitor_case(case: dict) -> dict:
    """The names MXNet's monitor callback receives, in order."""
    sym = _build(case["code"])["out"]
    ex = sym.simple_bind(mx.cpu(), grad_req=case.get("grad_req", "null"), **case["shapes"])
    names = []
    ex.set_monitor_callback(lambda name, arr: names.append(mx.base.py_str(name)), monitor_all=case["all"])
    ex.forward(is_train=case.get("train", False))
    if case.get("train"):
        ex.backward([mx.nd.ones(o.shape) for o in ex.outputs])
    mx.nd.waitall()
    ops = re.findall(r"Op:(\S+), Name=", ex.debug_str())
    return dict(case, names=names, debug_ops=ops)


def operator_inventory() -> list[str]:
    """Every operator MXNet 1.9.1 registers, and every public name of ``mx.sym``."""
    from mxnet.base import _LIB, check_call, py_str
    plist, size = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_uint()
    check_call(_LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(plist)))
    ops = {py_str(plist[i]) for i in range(size.value)}
    public = {n for n in dir(mx.sym) if not n.startswith("_") and callable(getattr(mx.sym, n))
              and not isinstance(getattr(mx.sym, n), type)}
    rows = [f"{n}\top" for n in sorted(ops)]
    rows += [f"{n}\tfunction" for n in sorted(public - ops)]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/data/semantics"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    assert mx.__version__ == "1.9.1", mx.__version__
    arrays: dict = {}
    doc = {"mxnet": mx.__version__,
           "infer": [infer_case(c) for c in INFER],
           "infer_type": [infer_type_case(c) for c in INFER_TYPE],
           "errors": [error_case(c) for c in ERRORS],
           "exec": [exec_case(c, arrays) for c in EXEC],
           "monitor": [monitor_case(c) for c in MONITOR]}
    (out / "cases.json").write_text(json.dumps(doc, indent=1) + "\n")
    np.savez_compressed(out / "exec.npz", **arrays)
    (out / "mxnet_ops.txt").write_text("# MXNet 1.9.1: registered operators (op) and other public mx.sym "
                                       "functions (function); tools/make_semantics_reference.py\n"
                                       + "\n".join(operator_inventory()) + "\n")
    print(f"wrote {out}: {sum(len(v) for v in doc.values() if isinstance(v, list))} cases, {len(arrays)} arrays")
    return 0


if __name__ == "__main__":
    sys.exit(main())
