"""A benchmark worker: one system (aotexec, mxnet or torch) in its own process.

The harness (benchmarks/run.py) starts one worker per system configuration, each
under its own interpreter/virtualenv and environment, and drives them all over a
JSON-lines protocol on stdin/stdout, so it can interleave systems that cannot
share a process (MXNet needs numpy 1.23, aotexec numpy 2).  Requests:

  {"op": "hello"}                                  -> system, version, threads
  {"op": "setup", "net": N, "mode": M, "warmup": K} -> bind, load parameters, K warm-up steps
  {"op": "run", "net": N, "mode": M, "seconds": S, "min_iters": a, "max_iters": b}
        -> {"times": [seconds per step], "cpu_self": s, "cpu_machine": s, "wall": s}
  {"op": "check", "net": N}                        -> inference output and gradient norms (cross-check)
        (zoo: {"op": "check", "net": N, "train_net": T, "bind_missing": false} reuses set-up executors)
  {"op": "bind_time", "net": N, "mode": M}         -> bind + first step, seconds (compile included;
        aotexec also: peak RSS of the process and of its children, i.e. iree-compile, and cache hits)
  {"op": "memory", "net": N, "mode": M}            -> plan bytes / allocator peak (aotexec, mxnet)
  {"op": "mlir_ops", "net": N, "mode": M}          -> StableHLO/CHLO ops aotexec emits, nothing compiled
  {"op": "release", "net": N}                      -> drop N's executors / sessions (free memory)
  {"op": "compile_artifact", "net": N, "out": DIR} -> seconds (aotexec)
  {"op": "artifact_load", "path": DIR}             -> load, bind, first forward seconds (aotexec)
  {"op": "quit"}

Nets: the classic ones of nets.py, or model-zoo cases ``MODEL:BATCH`` (zoo.py).
Modes: "infer" (forward(is_train=False), grad_req 'null'), "train" (forward(is_train=True)
+ backward(), parameter gradients only), "train_fused" (aotexec: forward_backward()).
Every step ends with its results ready (MXNet: waitall).  Systems: aotexec, mxnet, torch,
onnxruntime (inference only, on the graph torch.onnx.export writes).  Usage:
``python benchmarks/worker.py SYSTEM`` (stdout carries only protocol lines).
"""
from __future__ import annotations

import gc
import json
import os
import re
import resource
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nets  # noqa: E402
import zoo  # noqa: E402

import numpy as np  # noqa: E402

_HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()[1:]
    except OSError:
        return float("nan")
    vals = [int(v) for v in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / _HZ


def _plan_bytes(debug: str) -> int | None:
    m = re.search(r"Total (\d+) MB allocated", debug)
    return int(m.group(1)) << 20 if m else None



class NotAvailable(Exception):
    """The system has no such net (e.g. torchvision lacks the architecture)."""


def load_net(mod, net: str):
    """(symbol, data, label, {param: array}, {aux: array}) of a classic net or a zoo case,
    through ``aotexec`` or ``mxnet`` (same symbol API)."""
    if zoo.is_case(net):
        data, label = zoo.inputs(net)
        return (zoo.symbol(mod.sym, net), data, label, *zoo.params(net))
    s = nets.symbol(mod.sym, net)
    args, aux = nets.shapes_of(s, net)
    data, label, params, auxv = nets.inputs_and_params(net, args, aux)
    return s, data, label, params, auxv


def bind_mxnet_style(mod, net: str, mode: str):
    """The same executor through ``aotexec`` or ``mxnet`` (same API): parameter gradients only
    when training, inputs and parameters from benchmark-nets.md's initialisation (classic nets)
    or the model-zoo export (zoo cases)."""
    s, data, label, params, auxv = load_net(mod, net)
    args = s.list_arguments()
    req = "null" if mode == "infer" else {n: ("null" if n in ("data", "softmax_label") else "write") for n in args}
    ex = s.simple_bind(mod.cpu(), grad_req=req, data=data.shape, softmax_label=label.shape)
    ex.copy_params_from({n: mod.nd.array(v, dtype=v.dtype) for n, v in params.items()},
                        {n: mod.nd.array(v, dtype=v.dtype) for n, v in auxv.items()})
    ex.arg_dict["data"][:] = data
    ex.arg_dict["softmax_label"][:] = label
    return ex


def check_mxnet_style(w, net: str, train_net: str | None, bind_missing: bool) -> dict:
    """Inference output of ``net`` and parameter-gradient norms of ``train_net`` (default: net);
    ``bind_missing=False`` uses only executors already set up (a zoo compile takes minutes)."""
    def get(n, mode):
        ex = w.execs.get((n, mode))
        return ex if ex is not None or not bind_missing else w.bind(n, mode)

    ex = get(net, "infer")
    if ex is None:
        raise KeyError(f"{net} infer is not set up")
    out = ex.forward(is_train=False)[0].asnumpy()
    tr, note = get(train_net or net, "train"), None
    if tr is not None:
        try:
            tr.forward(is_train=True)
            tr.backward()
        except Exception as e:  # aotexec: compare through the fused step when backward() does not build
            if not hasattr(w, "fused_check"):
                raise
            note = f"forward+backward failed ({type(e).__name__}); gradients from forward_backward()"
            tr = w.fused_check(train_net or net)
        w.wait()
    grads = {} if tr is None else \
        {n: float(np.linalg.norm(g.asnumpy())) for n, g in tr.grad_dict.items() if g is not None}
    return {"out": out.ravel().tolist(), "grad_norms": grads, "note": note}


class Base:
    system = "?"

    def __init__(self):
        self.steps = {}  # (net, mode) -> callable running one step to completion
        self.state = {}

    def version(self) -> str:
        return "?"

    def threads(self):
        return None

    def setup(self, net: str, mode: str, warmup: int) -> dict:
        t0 = time.perf_counter()
        step = self.make(net, mode)
        t1 = time.perf_counter()
        step()
        t2 = time.perf_counter()
        for _ in range(warmup):
            step()
        t3 = time.perf_counter()
        self.steps[(net, mode)] = step
        return {"bind_s": t1 - t0, "first_s": t2 - t1, "warm_step_s": (t3 - t2) / max(1, warmup)}

    def run(self, net: str, mode: str, seconds: float, min_iters: int, max_iters: int) -> dict:
        step = self.steps[(net, mode)]
        times = []
        pc = time.perf_counter
        c0, m0, w0 = time.process_time(), machine_busy_seconds(), pc()
        while len(times) < max_iters and (len(times) < min_iters or pc() - w0 < seconds):
            t = pc()
            step()
            times.append(pc() - t)
        wall = pc() - w0
        return {"times": times, "wall": wall, "cpu_self": time.process_time() - c0,
                "cpu_machine": machine_busy_seconds() - m0}

    def bind_time(self, net: str, mode: str) -> dict:
        r = self.setup(net, mode, warmup=0)
        self.steps.pop((net, mode), None)
        return r

    def wait(self) -> None:
        pass

    def release(self, net: str) -> dict:
        for store in (self.steps, self.state, getattr(self, "execs", {})):
            for k in [k for k in store if k == net or (isinstance(k, tuple) and k[0] == net)]:
                del store[k]
        gc.collect()
        return {}


class Aotexec(Base):
    system = "aotexec"

    def __init__(self):
        super().__init__()
        import aotexec as ax
        self.ax = ax
        self.execs = {}

    def version(self):
        from iree.runtime import version
        return f"{self.ax.__version__} (IREE runtime {version.VERSION})"

    def threads(self):
        from aotexec.runtime.device import default_driver
        return f"IREE driver {default_driver(self.ax.cpu())}"

    def bind(self, net: str, mode: str):
        ex = bind_mxnet_style(self.ax, net, mode)
        self.execs[(net, mode)] = ex
        return ex

    def make(self, net, mode):
        ex = self.bind(net, mode)
        if mode == "infer":
            return lambda: ex.forward(is_train=False)
        if mode == "train":
            def step():
                ex.forward(is_train=True)
                ex.backward()
            return step
        if mode == "train_fused":
            return lambda: ex.forward_backward()
        raise KeyError(mode)

    def check(self, net, train_net=None, bind_missing=True):
        return check_mxnet_style(self, net, train_net, bind_missing)

    def fused_check(self, net):
        tr = self.execs.get((net, "train_fused")) or self.bind(net, "train_fused")
        tr.forward_backward()
        return tr

    def bind_time(self, net, mode):
        """Bind + first step; the peak RSS of this process and of its waited-for children (with
        AOTEXEC_COMPILE_MODE=subprocess: the largest iree-compile), and compile-cache hits."""
        from aotexec.compiler import cache_stats
        r = super().bind_time(net, mode)
        kb = 1024  # ru_maxrss is in KiB on Linux
        return {**r, "peak_rss_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kb,
                "peak_rss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kb,
                "cache": cache_stats()}

    def mlir_ops(self, net, mode):
        """Ops in the module a bind would compile (lines with ``= "stablehlo.`` / ``= "chlo.``),
        emitted through the public pipeline as tests/test_emitted_mlir.py does: nothing compiled."""
        from aotexec import pipeline
        from aotexec.options import Options
        from aotexec.pipeline.entry_points import resident_parameters
        from aotexec.runtime.bind_args import bind_typing
        s, data, label, _, _ = load_net(self.ax, net)
        typing = bind_typing(s, {"data": data.shape, "softmax_label": label.shape}, {})
        opts = Options.from_env()
        args = s.list_arguments()
        if mode == "infer":
            modes, reqs, resident = ["forward_infer"], {n: "null" for n in args}, resident_parameters(s, typing)
        else:
            modes, resident = ["forward_train", "backward"], []
            reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in args}
        t0 = time.perf_counter()
        text, _ = pipeline.entry_points(s, typing, modes, reqs, opts.mirror,
                                        channels_last=opts.layout == "nhwc", resident=resident)
        ops = sum(1 for ln in text.splitlines() if '= "stablehlo.' in ln or '= "chlo.' in ln)
        return {"ops": ops, "chars": len(text), "emit_s": time.perf_counter() - t0}

    def memory(self, net, mode):
        from aotexec.runtime.device import Device
        ex = self.execs.get((net, mode)) or self.bind(net, mode)
        return {"plan_bytes": _plan_bytes(ex.debug_str()),
                "allocator": Device.get(self.ax.cpu()).allocator_statistics()}

    def compile_artifact(self, net, out):
        ax = self.ax
        s = nets.symbol(ax.sym, net)
        args, aux = nets.shapes_of(s, net)
        data, label, params, auxv = nets.inputs_and_params(net, args, aux)
        p = {**{f"arg:{k}": v for k, v in params.items()}, **{f"aux:{k}": v for k, v in auxv.items()}}
        t0 = time.perf_counter()
        ax.compile(s, {"data": data.shape, "softmax_label": label.shape}, params=p, out=out)
        return {"compile_s": time.perf_counter() - t0}

    def artifact_load(self, path):
        ax = self.ax
        t0 = time.perf_counter()
        art = ax.load(path)
        t1 = time.perf_counter()
        ex = art.simple_bind(ax.cpu())
        t2 = time.perf_counter()
        ex.forward(is_train=False)[0].asnumpy()
        t3 = time.perf_counter()
        return {"load_s": t1 - t0, "bind_s": t2 - t1, "first_forward_s": t3 - t2, "total_s": t3 - t0}


class MXNet(Base):
    system = "mxnet"

    def __init__(self):
        super().__init__()
        import mxnet as mx
        self.mx = mx
        self.execs = {}

    def version(self):
        return self.mx.__version__

    def threads(self):
        return os.environ.get("OMP_NUM_THREADS", "default (half the CPUs)")

    def bind(self, net, mode):
        mx = self.mx
        ex = bind_mxnet_style(mx, net, mode)
        mx.nd.waitall()
        self.execs[(net, mode)] = ex
        return ex

    def make(self, net, mode):
        ex, waitall = self.bind(net, mode), self.mx.nd.waitall
        if mode == "infer":
            def step():
                ex.forward(is_train=False)
                waitall()
        elif mode == "train":
            def step():
                ex.forward(is_train=True)
                ex.backward()
                waitall()
        else:
            raise KeyError(mode)
        return step

    def check(self, net, train_net=None, bind_missing=True):
        return check_mxnet_style(self, net, train_net, bind_missing)

    def wait(self):
        self.mx.nd.waitall()

    def memory(self, net, mode):
        ex = self.execs.get((net, mode)) or self.bind(net, mode)
        return {"plan_bytes": _plan_bytes(ex.debug_str())}


class Torch(Base):
    system = "torch"

    def __init__(self):
        super().__init__()
        import torch
        self.torch = torch

    def version(self):
        return self.torch.__version__

    def threads(self):
        return self.torch.get_num_threads()

    def model(self, net):
        return torch_model(net)

    def make(self, net, mode):
        torch = self.torch
        F = torch.nn.functional
        m, x, y = self.model(net)
        if mode == "infer":
            m.eval()

            def step():
                with torch.no_grad():
                    F.softmax(m(x), dim=1)
        elif mode == "train":
            m.train()

            def step():
                for p in m.parameters():
                    p.grad = None
                F.cross_entropy(m(x), y, reduction="sum").backward()
        else:
            raise KeyError(mode)
        return step

    def check(self, net):
        torch = self.torch
        F = torch.nn.functional
        m, x, y = self.model(net)
        m.eval()
        with torch.no_grad():
            out = F.softmax(m(x), dim=1).numpy()
        m.train()
        F.cross_entropy(m(x), y, reduction="sum").backward()
        return {"out": out.ravel().tolist(), "grad_norms": _torch_grad_norms(net, m)}

    def memory(self, net, mode):
        return {}


def torch_model(net: str):
    """(module, data, label) in PyTorch: the classic nets with the spec's parameters, zoo cases
    as torchvision's architecture with its own seeded init (NotAvailable where it has none)."""
    import torch
    if zoo.is_case(net):
        m = zoo.torch_model(net)
        if m is None:
            raise NotAvailable(f"torchvision has no {zoo.parse(net)[0]}")
        data, label = zoo.inputs(net)
    else:
        # shapes from the spec via a throwaway numpy-only walk: reuse the MXNet names
        args, aux = _torch_shapes(net)
        data, label, params, auxv = nets.inputs_and_params(net, args, aux)
        m = nets.torch_net(net, params, auxv)
    return m, torch.from_numpy(data), torch.from_numpy(label.astype(np.int64))


class OnnxRuntime(Base):
    """ONNX Runtime (CPU provider, all graph optimisations) on the graph ``torch.onnx.export``
    writes from the PyTorch model (+ softmax); inputs and outputs bound once (IOBinding), so
    no host copies are timed.  Inference only."""
    system = "onnxruntime"

    def __init__(self):
        super().__init__()
        import onnxruntime
        self.ort = onnxruntime
        self.n_threads = int(os.environ.get("ORT_THREADS", os.cpu_count() or 1))

    def version(self):
        return self.ort.__version__

    def threads(self):
        return self.n_threads

    def make(self, net, mode):
        if mode != "infer":
            raise NotAvailable("ONNX Runtime runs inference only here")
        ort = self.ort
        m, x, _ = torch_model(net)
        path = zoo.export_onnx(m, x, zoo.onnx_path(net))   # every run: the graph follows the code
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.n_threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        out_shape = (x.shape[0], sess.get_outputs()[0].shape[1])
        io = sess.io_binding()
        xin = ort.OrtValue.ortvalue_from_numpy(x.numpy())
        out = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32)
        io.bind_ortvalue_input("data", xin)
        io.bind_ortvalue_output("softmax", out)
        self.state[net] = (sess, io, xin, out)
        return lambda: sess.run_with_iobinding(io)

    def memory(self, net, mode):
        return {}


def _torch_shapes(net):
    """MXNet argument / aux shapes for net, without a symbol library (PyTorch worker)."""
    return _SPEC_SHAPES[net]


def _spec_shapes():
    """Parameter shapes by MXNet name, in MXNet's list_arguments order (static)."""
    out = {}
    out["tiny"] = ({"data": (4, 8), "fc1_weight": (10, 8), "fc1_bias": (10,), "softmax_label": (4,)}, {})
    out["mlp"] = ({"data": (64, 784), "fc1_weight": (512, 784), "fc1_bias": (512,), "fc2_weight": (512, 512),
                   "fc2_bias": (512,), "fc3_weight": (10, 512), "fc3_bias": (10,), "softmax_label": (64,)}, {})
    out["lenet"] = ({"data": (64, 1, 28, 28), "conv1_weight": (20, 1, 5, 5), "conv1_bias": (20,),
                     "conv2_weight": (50, 20, 5, 5), "conv2_bias": (50,), "fc1_weight": (500, 800),
                     "fc1_bias": (500,), "fc2_weight": (10, 500), "fc2_bias": (10,), "softmax_label": (64,)}, {})
    args, aux = {"data": (16, 3, 32, 32)}, {}

    def cb(conv, bn, cout, cin, k):
        args[conv + "_weight"] = (cout, cin, k, k)
        args[bn + "_gamma"] = (cout,)
        args[bn + "_beta"] = (cout,)
        aux[bn + "_moving_mean"] = (cout,)
        aux[bn + "_moving_var"] = (cout,)
    cb("conv0", "bn0", 16, 3, 3)
    cin = 16
    for k, nf in ((1, 16), (2, 32), (3, 64)):
        cb(f"s{k}_conv1", f"s{k}_bn1", nf, cin, 3)
        cb(f"s{k}_conv2", f"s{k}_bn2", nf, nf, 3)
        if k > 1:
            cb(f"s{k}_sc_conv", f"s{k}_sc_bn", nf, cin, 1)
        cin = nf
    args["fc_weight"], args["fc_bias"], args["softmax_label"] = (10, 64), (10,), (16,)
    out["resnet8"] = (args, aux)
    return out


_SPEC_SHAPES = _spec_shapes()


def _torch_grad_norms(net, m):
    """Gradient norms keyed by MXNet parameter names (modules were loaded in name order)."""
    args, _ = _SPEC_SHAPES[net]
    names = [n for n in args if n not in ("data", "softmax_label")]
    params = list(m.parameters())
    # nets.torch_net creates parameters in the same order as MXNet lists arguments, except that
    # a projection shortcut (sc) is created after c2 in both, so the orders agree.
    return {n: float(p.grad.norm()) for n, p in zip(names, params)}


SYSTEMS = {"aotexec": Aotexec, "mxnet": MXNet, "torch": Torch, "onnxruntime": OnnxRuntime}


def main() -> int:
    system = sys.argv[1]
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the protocol
    w = SYSTEMS[system]()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.pop("op")
        try:
            if op == "quit":
                proto.write(json.dumps({"ok": True}) + "\n")
                break
            if op == "hello":
                res = {"system": system, "version": w.version(), "threads": w.threads(), "pid": os.getpid()}
            else:
                res = getattr(w, op)(**req)
            proto.write(json.dumps({"ok": True, **res}) + "\n")
        except Exception as e:  # report, keep serving
            proto.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}",
                                    "traceback": traceback.format_exc()[-3000:]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
