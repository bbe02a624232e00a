"""The hand-written AVX-512 matmul kernel (``aotexec.kernels``): which contractions the emitter
hands it, and its results against numpy in float64 through the real compiler and runtime
(row-major and transposed A, B stored (K, N) or (N, K), batched, sizes off its 14 x 32 tile)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.compiler import CompileOptions
from aotexec.emitter import Emitter, Value
from aotexec.kernels import matmul as kernel_matmul
from aotexec.kernels.code import Kernels
from aotexec.options import Options
from aotexec.pipeline import kernel_build
from aotexec.runtime.bind_args import bind_typing
from aotexec.symbolic import Dim


def _emitter() -> Emitter:
    return Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o")))


def _v(name, shape, dtype="float32") -> Value:
    return Value(name, tuple(shape), np.dtype(dtype))


@pytest.mark.lowering
@pytest.mark.parametrize("a_shape,b_shape,ca,cb,ba,bb,alone,taken", [
    ((300, 400), (400, 100), [1], [0], [], [], False, True),          # A (M, K), B (K, N)
    ((300, 400), (100, 400), [1], [1], [], [], False, True),          # B (N, K): a FullyConnected weight
    ((400, 300), (400, 100), [0], [0], [], [], False, True),          # A stored (K, M): a weight gradient
    ((4, 300, 64), (4, 64, 96), [2], [1], [0], [0], True, True),      # batched, alone (Winograd's products)
    ((300, 64), (64, 100), [1], [0], [], [], False, False),           # shallow, its consumer would fuse
    ((30, 20), (20, 10), [1], [0], [], [], True, False),              # too small to pay for a dispatch
    ((300, 400), (400, 8), [1], [0], [], [], True, False),            # too narrow for a 32-column panel
    ((4, 300, 64), (64, 4, 96), [2], [0], [0], [1], True, False),     # batch not leading on both
])
def test_the_emitter_hands_the_kernel_what_it_takes(a_shape, b_shape, ca, cb, ba, bb, alone, taken):
    b = _emitter()
    out = b.dot_general(_v("%a", a_shape), _v("%b", b_shape), (ca, cb), (ba, bb), alone=alone)
    text = "\n".join(line for line in b.lines if line)
    assert kernel_matmul.uses_kernels(text) == taken
    assert ("stablehlo.dot_general" in text) != taken
    free_a = [d for i, d in enumerate(a_shape) if i not in ca and i not in ba]
    free_b = [d for i, d in enumerate(b_shape) if i not in cb and i not in bb]
    assert out.shape == tuple([a_shape[i] for i in ba] + free_a + free_b)


@pytest.mark.lowering
def test_deep_products_stay_with_iree_when_kernels_take_none():
    b = Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o"), deep_products=False))
    b.dot_general(_v("%a", (300, 400)), _v("%b", (400, 100)), ([1], [0]))
    assert not kernel_matmul.uses_kernels("\n".join(line for line in b.lines if line))
    b.dot_general(_v("%c", (4, 300, 64)), _v("%d", (4, 64, 96)), ([2], [1]), ([0], [0]), alone=True)
    assert kernel_matmul.uses_kernels("\n".join(line for line in b.lines if line))


def test_grouped_convolution_nets_get_no_deep_products(tmp_path_factory):
    _available(tmp_path_factory)
    x = ax.sym.Variable("data")
    plain = ax.sym.Convolution(x, num_filter=8, kernel=(3, 3), name="c")
    grouped = ax.sym.Convolution(x, num_filter=8, kernel=(3, 3), num_group=4, name="g")
    options = Options(cache_dir=tmp_path_factory.mktemp("kernels"))
    for sym, deep in ((plain, True), (grouped, False)):
        graph = bind_typing(sym, {"data": (1, 8, 8, 8)}, {}).graph
        assert kernel_build.kernels_for(CompileOptions(), options, graph).deep_products == deep


@pytest.mark.lowering
def test_dynamic_and_double_contractions_stay_with_iree():
    b = _emitter()
    assert kernel_matmul.call(b, _v("%a", (Dim.symbol("n", 300), 200)), _v("%b", (200, 100)), [1], [0], [], []) is None
    assert kernel_matmul.call(b, _v("%c", (300, 200), "float64"), _v("%d", (200, 100), "float64"),
                              [1], [0], [], []) is None
    assert not b.lines


@pytest.mark.lowering
def test_kernels_only_for_llvm_cpu_x86_with_avx512_and_when_on(tmp_path):
    on = Options(cache_dir=tmp_path)
    assert kernel_build.kernels_for(CompileOptions(target="vulkan-spirv"), on) is None
    assert kernel_build.kernels_for(CompileOptions(cpu="generic", triple="aarch64-unknown-unknown-eabi-elf"), on) is None
    assert kernel_build.kernels_for(CompileOptions(cpu="x86-64-v3"), on) is None         # AVX2, no AVX-512
    assert kernel_build.kernels_for(CompileOptions(), on.replace(kernels=False)) is None


def _available(tmp_path_factory) -> Kernels:
    k = kernel_build.kernels_for(CompileOptions(), Options(cache_dir=tmp_path_factory.mktemp("kernels")))
    if k is None:
        pytest.skip("no AVX-512 CPU or no C compiler here: the kernel is not used")
    return k


def test_the_kernel_builds_freestanding(tmp_path_factory):
    k = _available(tmp_path_factory)
    data = k.object_path.read_bytes()
    assert data[:4] == b"\x7fELF" and b"aotexec_sgemm_workgroup" in data


def test_modules_name_the_same_object_whatever_the_cache_folder(tmp_path_factory):
    # a module's text is its compile cache key: a copied cache must hit
    k1 = _available(tmp_path_factory)
    k2 = kernel_build.kernels_for(CompileOptions(), Options(cache_dir=tmp_path_factory.mktemp("other")))
    assert k1.object_path == k2.object_path and k1.object_path.read_bytes() == k2.object_path.read_bytes()


def _check(name, got, ref):
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-5, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_batch_dot_through_the_kernel_matches_numpy(tmp_path_factory, ta, tb):
    _available(tmp_path_factory)
    rng = np.random.default_rng(0)
    z, m, k, n = 3, 281, 300, 263                # every product deep enough; off the 14 x 32 tile
    a = rng.standard_normal((z, k, m) if ta else (z, m, k)).astype(np.float32)
    c = rng.standard_normal((z, n, k) if tb else (z, k, n)).astype(np.float32)
    g = rng.standard_normal((z, m, n)).astype(np.float32)
    s = ax.sym.batch_dot(ax.sym.Variable("a"), ax.sym.Variable("c"), transpose_a=ta, transpose_b=tb)
    ex = s.simple_bind(ax.cpu(), grad_req="write", a=a.shape, c=c.shape)
    ex.arg_dict["a"][:] = a
    ex.arg_dict["c"][:] = c
    ex.forward(is_train=True)
    ex.backward(ax.nd.array(g))
    A = (a.transpose(0, 2, 1) if ta else a).astype(np.float64)
    C = (c.transpose(0, 2, 1) if tb else c).astype(np.float64)
    _check("output", ex.outputs[0].asnumpy(), A @ C)
    da, dc = g @ C.transpose(0, 2, 1), A.transpose(0, 2, 1) @ g
    _check("grad a", ex.grad_dict["a"].asnumpy(), da.transpose(0, 2, 1) if ta else da)
    _check("grad c", ex.grad_dict["c"].asnumpy(), dc.transpose(0, 2, 1) if tb else dc)


def test_fully_connected_through_the_kernel_matches_numpy(tmp_path_factory):
    _available(tmp_path_factory)
    rng = np.random.default_rng(1)
    m, k, n = 333, 300, 270                      # every product deep enough; off the 14 x 32 tile
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    g = rng.standard_normal((m, n)).astype(np.float32)
    s = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=n, no_bias=True, name="fc")
    ex = s.simple_bind(ax.cpu(), grad_req="write", data=x.shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["fc_weight"][:] = w
    ex.forward(is_train=True)
    ex.backward(ax.nd.array(g))
    _check("output", ex.outputs[0].asnumpy(), x.astype(np.float64) @ w.T)
    _check("grad data", ex.grad_dict["data"].asnumpy(), g.astype(np.float64) @ w)
    _check("grad weight", ex.grad_dict["fc_weight"].asnumpy(), g.T.astype(np.float64) @ x)
    infer = s.simple_bind(ax.cpu(), grad_req="null", data=x.shape)   # the weight resident, packed once
    infer.copy_params_from({"fc_weight": ax.nd.array(w)})
    infer.arg_dict["data"][:] = x
    infer.forward(is_train=False)
    _check("inference", infer.outputs[0].asnumpy(), x.astype(np.float64) @ w.T)


def _conv_nchw(x, w, pad):
    """Cross-correlation of NCHW ``x`` with OIHW ``w``, stride 1, zero padding ``pad``, float64."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh, ow = h + 2 * pad[0] - kh + 1, wd + 2 * pad[1] - kw + 1
    y = np.zeros((n, f, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,fc->nfhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y


def test_one_axis_convolution_through_the_kernel_matches_numpy(tmp_path_factory):
    # Inception's 1x7 layers: the windows joined on channels (K = 7 C), one product (im2col_nhwc)
    _available(tmp_path_factory)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 40, 17, 17)).astype(np.float32)
    w = rng.standard_normal((64, 40, 1, 7)).astype(np.float32)
    g = rng.standard_normal((2, 64, 17, 17)).astype(np.float32)
    s = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=64, kernel=(1, 7), pad=(0, 3), no_bias=True, name="c")
    ex = s.simple_bind(ax.cpu(), grad_req="write", data=x.shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["c_weight"][:] = w
    ex.forward(is_train=True)
    ex.backward(ax.nd.array(g))
    _check("output", ex.outputs[0].asnumpy(), _conv_nchw(x, w, (0, 3)))
    # the data gradient: g correlated with the flipped weight, in / out channels swapped
    w_flip = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    _check("grad data", ex.grad_dict["data"].asnumpy(), _conv_nchw(g, w_flip, (0, 3)))
