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
from aotexec.kernels import executable as kernel_executable
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
    assert kernel_executable.uses_kernels(text) == taken
    assert ("stablehlo.dot_general" in text) != taken
    free_a = [d for i, d in enumerate(a_shape) if i not in ca and i not in ba]
    free_b = [d for i, d in enumerate(b_shape) if i not in cb and i not in bb]
    assert out.shape == tuple([a_shape[i] for i in ba] + free_a + free_b)


@pytest.mark.lowering
def test_deep_products_stay_with_iree_when_kernels_take_none():
    b = Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o"), deep_products=False))
    b.dot_general(_v("%a", (300, 400)), _v("%b", (400, 100)), ([1], [0]))
    assert not kernel_executable.uses_kernels("\n".join(line for line in b.lines if line))
    b.dot_general(_v("%c", (4, 300, 64)), _v("%d", (4, 64, 96)), ([2], [1]), ([0], [0]), alone=True)
    assert kernel_executable.uses_kernels("\n".join(line for line in b.lines if line))
    # an inference function's products go to the kernel anyway (their epilogues fold), from depth 64
    b = Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o"), deep_products=False, epilogues=True))
    b.dot_general(_v("%a", (600, 64)), _v("%b", (64, 100)), ([1], [0]))
    assert kernel_executable.uses_kernels("\n".join(line for line in b.lines if line))


def test_grouped_convolution_nets_get_only_deeper_products(tmp_path_factory):
    _available(tmp_path_factory)
    x = ax.sym.Variable("data")
    plain = ax.sym.Convolution(x, num_filter=8, kernel=(3, 3), name="c")
    grouped = ax.sym.Convolution(x, num_filter=8, kernel=(3, 3), num_group=4, name="g")
    options = Options(cache_dir=tmp_path_factory.mktemp("kernels"))
    kernels = {name: kernel_build.kernels_for(CompileOptions(), options,
                                              bind_typing(sym, {"data": (1, 8, 8, 8)}, {}).graph)
               for name, sym in (("plain", plain), ("grouped", grouped))}
    assert kernel_matmul.fused_min_depth(kernels["plain"]) == kernel_matmul.FUSED_MIN_DEPTH
    assert kernel_matmul.fused_min_depth(kernels["grouped"]) == kernel_build.GROUPED_DEEP_MIN_DEPTH
    b = Emitter(kernels=kernels["grouped"])
    b.dot_general(_v("%a", (3136, 256)), _v("%b", (256, 256)), ([1], [0]))         # IREE's
    assert not kernel_executable.uses_kernels("\n".join(line for line in b.lines if line))
    b.dot_general(_v("%c", (3136, 512)), _v("%d", (512, 512)), ([1], [0]))         # deep: the kernel's
    assert kernel_executable.uses_kernels("\n".join(line for line in b.lines if line))


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


def _windows(x, kernel, pad, stride, dilate):
    """{(i, j): the NCHW input window (float64) kernel offset (i, j) multiplies}, output size."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh, ow = ((h + 2 * pad[0] - dilate[0] * (kernel[0] - 1) - 1) // stride[0] + 1,
              (wd + 2 * pad[1] - dilate[1] * (kernel[1] - 1) - 1) // stride[1] + 1)
    return {(i, j): xp[:, :, i * dilate[0]:i * dilate[0] + (oh - 1) * stride[0] + 1:stride[0],
                       j * dilate[1]:j * dilate[1] + (ow - 1) * stride[1] + 1:stride[1]]
            for i in range(kernel[0]) for j in range(kernel[1])}


def _conv_nchw(x, w, pad, stride=(1, 1), dilate=(1, 1)):
    """Cross-correlation of NCHW ``x`` with OIHW ``w``, zero padding ``pad``, float64."""
    return sum(np.einsum("nchw,fc->nfhw", v, w[:, :, i, j])
               for (i, j), v in _windows(x, w.shape[2:], pad, stride, dilate).items())


def _conv_weight_grad(x, g, kernel, pad, stride=(1, 1), dilate=(1, 1)):
    """d weight (OIHW) of ``_conv_nchw`` for the head gradient ``g``, float64."""
    dw = np.zeros((g.shape[1], x.shape[1]) + tuple(kernel))
    for (i, j), v in _windows(x, kernel, pad, stride, dilate).items():
        dw[:, :, i, j] = np.einsum("nchw,nfhw->fc", v, g.astype(np.float64))
    return dw


def _conv_data_grad(x_shape, w, g, pad, stride=(1, 1), dilate=(1, 1)):
    """d data of ``_conv_nchw`` for the head gradient ``g``: the windows' adjoint, float64."""
    n, c, h, wd = x_shape
    kh, kw = w.shape[2:]
    _, _, oh, ow = g.shape
    dxp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, i * dilate[0]:i * dilate[0] + (oh - 1) * stride[0] + 1:stride[0],
                j * dilate[1]:j * dilate[1] + (ow - 1) * stride[1] + 1:stride[1]] += np.einsum(
                    "nfhw,fc->nchw", g.astype(np.float64), w[:, :, i, j])
    return dxp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd]


def test_one_axis_convolution_through_the_kernel_matches_numpy(tmp_path_factory):
    # Inception's 1x7 layers: the convolution kernel (im2col_nhwc's one product without it)
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


@pytest.mark.parametrize("shape,filters,kernel,stride,pad,dilate", [
    ((2, 40, 17, 17), 64, (3, 3), (1, 1), (1, 1), (1, 1)),     # 17-wide rows: tiles of 9 + 8 pixels
    ((2, 24, 15, 16), 40, (3, 3), (2, 2), (1, 1), (1, 1)),     # strided; 40 = 32 + 8 output channels
    ((2, 3, 30, 30), 48, (7, 7), (2, 2), (3, 3), (1, 1)),      # a stem: 3 channels, 7 x 7 / 2
    ((1, 32, 12, 12), 32, (3, 3), (1, 1), (2, 2), (2, 2)),     # dilated rows and columns
    ((1, 1100, 5, 5), 40, (3, 3), (1, 1), (1, 1), (1, 1)),     # border tiles' channels in two passes
    ((1, 32, 6, 6), 64, (3, 3), (1, 1), (4, 4), (1, 1)),       # output rows wholly in the padding
])
def test_convolutions_through_the_kernel_match_numpy(tmp_path_factory, shape, filters, kernel, stride, pad, dilate):
    # the implicit-GEMM kernel forward and for the data gradient (a convolution of g), its
    # weight-gradient kernel (no column dilation) against float64 numpy
    _available(tmp_path_factory)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((filters, shape[1]) + kernel).astype(np.float32)
    s = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=filters, kernel=kernel, stride=stride, pad=pad,
                           dilate=dilate, no_bias=True, name="c")
    ex = s.simple_bind(ax.cpu(), grad_req="write", data=x.shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["c_weight"][:] = w
    ex.forward(is_train=True)
    y = _conv_nchw(x, w, pad, stride, dilate)
    g = rng.standard_normal(y.shape).astype(np.float32)
    ex.backward(ax.nd.array(g))
    _check("output", ex.outputs[0].asnumpy(), y)
    _check("grad data", ex.grad_dict["data"].asnumpy(), _conv_data_grad(x.shape, w, g, pad, stride, dilate))
    _check("grad weight", ex.grad_dict["c_weight"].asnumpy(), _conv_weight_grad(x, g, kernel, pad, stride, dilate))


@pytest.mark.lowering
def test_the_emitter_hands_the_conv_kernel_what_it_takes():
    nhwc = lambda b, x, wt, out, stride=(1, 1), lhs=(1, 1), groups=1: b.conv_nhwc(  # noqa: E731
        _v("%x", x), _v("%w", wt), out, stride, [(1, 1), (1, 1)], lhs, (1, 1), groups)
    cases = [
        (dict(x=(16, 56, 56, 64), wt=(3, 3, 64, 64), out=(16, 56, 56, 64)), True),
        (dict(x=(16, 56, 56, 64), wt=(3, 3, 64, 128), out=(16, 28, 28, 128), stride=(2, 2)), True),
        (dict(x=(16, 56, 56, 64), wt=(1, 1, 64, 64), out=(16, 58, 58, 64)), False),      # 1x1: IREE's matmul
        (dict(x=(16, 56, 56, 64), wt=(3, 3, 16, 64), out=(16, 56, 56, 64), groups=4), False),
        (dict(x=(16, 28, 28, 64), wt=(3, 3, 64, 64), out=(16, 55, 55, 64), lhs=(2, 2)), False),
        (dict(x=(1, 8, 8, 4), wt=(3, 3, 4, 8), out=(1, 8, 8, 8)), False),               # too small
    ]
    for kw, taken in cases:
        b = _emitter()
        nhwc(b, **kw)
        text = "\n".join(line for line in b.lines if line)
        assert ("@aotexec_kernels::@conv" in text) == taken, kw
        assert ("stablehlo.convolution" in text) != taken, kw
        assert not (taken and "stablehlo.pad" in text), kw      # the kernel pads inside


@pytest.mark.lowering
@pytest.mark.parametrize("width,taken", [(223, True), (225, False)])
def test_shallow_convolutions_go_to_the_kernel_where_iree_would_slice(width, taken):
    # SqueezeNet's 3x3/2 stem (depth 27): 111 output columns, which IREE's form computes 112 wide
    # and slices; at 112 columns IREE's own convolution (its BatchNorm and ReLU fused) stays
    from aotexec.ops.conv_forms import conv_nhwc_wide
    b = _emitter()
    ow = (width - 3) // 2 + 1
    conv_nhwc_wide(b, _v("%x", (1, width, width, 3)), _v("%w", (3, 3, 3, 64)), (1, ow, ow, 64), (2, 2),
                   [(0, 0), (0, 0)])
    text = "\n".join(line for line in b.lines if line)
    assert ("@aotexec_kernels::@conv" in text) == taken
    assert ("stablehlo.convolution" in text) != taken


def _epilogue_emitter(extra_use: bool, residual: bool = False, relu6: bool = False):
    """A kernel convolution, a BatchNorm's inference arithmetic, a residual add and a ReLU or
    ReLU6, as rules emit them."""
    from aotexec.kernels import epilogue
    b = _emitter()
    y = b.conv_nhwc(_v("%x", (16, 56, 56, 64)), _v("%w", (3, 3, 64, 64)), (16, 56, 56, 64), (1, 1), [(1, 1), (1, 1)])
    bc = lambda v: b.broadcast_in_dim(v, y.shape, [3])  # noqa: E731
    z = b.add(b.mul(b.sub(y, bc(_v("%mean", (64,)))), bc(_v("%scale", (64,)))), bc(_v("%beta", (64,))))
    if residual:
        z = b.add(z, _v("%res", y.shape))
    r = b.clamp(0.0, z, 6.0) if relu6 else b.max(z, 0.0)
    results = [r, y] if extra_use else [r]
    b.lines.append(f'    "func.return"({", ".join(v.name for v in results)}) : () -> ()')
    return b, epilogue.fuse(b), r


@pytest.mark.lowering
@pytest.mark.parametrize("residual,relu6", [(False, False), (True, False), (False, True)])
def test_a_batchnorm_and_relu_after_a_kernel_fold_into_its_call(residual, relu6):
    b, fused, r = _epilogue_emitter(extra_use=False, residual=residual, relu6=relu6)
    text = "\n".join(b.body())
    assert fused == 1 and "@aotexec_kernels::@conv_ep" in text
    assert "stablehlo.maximum" not in text and "stablehlo.clamp" not in text
    assert ('"stablehlo.reshape"(%res)' in text) == residual      # the residual, flat, is an operand of the call
    assert f"{r.name} = " in text                # the chain's last value is still defined, by the call
    # the folded scale / shift: one subtraction, one multiplication, no tensor-sized op left
    assert "@aotexec_kernels::@conv[" not in text


@pytest.mark.lowering
def test_a_kernel_result_read_elsewhere_keeps_its_epilogue_apart():
    b, fused, _ = _epilogue_emitter(extra_use=True)
    text = "\n".join(b.body())
    assert fused == 0 and "@aotexec_kernels::@conv[" in text and "stablehlo.maximum" in text


@pytest.mark.parametrize("layer,tail", [("conv3x3", "relu"), ("conv1x1", "relu"), ("fc", "relu"),
                                        ("conv3x3", "residual"), ("conv1x1", "relu6")])
def test_inference_epilogues_in_the_kernel_match_numpy(tmp_path_factory, layer, tail):
    # Convolution / FullyConnected + BatchNorm (moving statistics) + ReLU, a residual add then
    # ReLU, or ReLU6 (clip), bound for inference: the kernel applies them itself (kernels.epilogue)
    _available(tmp_path_factory)
    rng = np.random.default_rng(4)
    c, o = (40, 64) if layer == "conv3x3" else (288, 72)
    x = rng.standard_normal((2, c, 17, 17) if layer != "fc" else (300, c)).astype(np.float32)
    d = ax.sym.Variable("data")
    if layer == "fc":
        w = rng.standard_normal((o, c)).astype(np.float32)
        y = ax.sym.FullyConnected(d, num_hidden=o, name="c")
    else:
        k = 3 if layer == "conv3x3" else 1
        w = rng.standard_normal((o, c, k, k)).astype(np.float32)
        y = ax.sym.Convolution(d, num_filter=o, kernel=(k, k), pad=(k // 2, k // 2), name="c")
    z = ax.sym.BatchNorm(y, fix_gamma=False, eps=1e-3, name="bn")
    res = rng.standard_normal((2, o, 17, 17)).astype(np.float32)
    if tail == "residual":
        z = z + ax.sym.Variable("res")
    s = ax.sym.clip(z, 0.0, 6.0) if tail == "relu6" else ax.sym.Activation(z, act_type="relu")
    bias, gamma, beta, mean = (rng.standard_normal(o).astype(np.float32) for _ in range(4))
    var = rng.uniform(0.5, 2, o).astype(np.float32)
    shapes = {"data": x.shape, **({"res": res.shape} if tail == "residual" else {})}
    ex = s.simple_bind(ax.cpu(), grad_req="null", **shapes)
    ex.copy_params_from({"c_weight": ax.nd.array(w), "c_bias": ax.nd.array(bias), "bn_gamma": ax.nd.array(gamma),
                         "bn_beta": ax.nd.array(beta)},
                        {"bn_moving_mean": ax.nd.array(mean), "bn_moving_var": ax.nd.array(var)})
    ex.arg_dict["data"][:] = x
    if tail == "residual":
        ex.arg_dict["res"][:] = res
    got = ex.forward(is_train=False)[0].asnumpy()
    if layer == "fc":
        ref, axis = x.astype(np.float64) @ w.T.astype(np.float64) + bias, (1, -1)
    else:
        ref, axis = _conv_nchw(x, w, (w.shape[2] // 2,) * 2) + bias[:, None, None], (1, -1, 1, 1)
    per = lambda v: v.reshape(axis)  # noqa: E731
    ref = (ref - per(mean)) / np.sqrt(per(var) + 1e-3) * per(gamma) + per(beta)
    ref = np.clip(ref, 0, 6) if tail == "relu6" else np.maximum(ref + (res if tail == "residual" else 0), 0)
    _check("output", got, ref)


@pytest.mark.lowering
def test_two_products_meeting_in_a_residual_add_fold_once():
    # ResNet's projection blocks: body and shortcut products both end in one add; the first
    # chain takes the add (the shortcut's BatchNorm as its residual), the second stops before it
    from aotexec.kernels import epilogue
    b = _emitter()
    conv = lambda name: b.conv_nhwc(_v(name, (16, 28, 28, 64)), _v("%w", (3, 3, 64, 64)), (16, 28, 28, 64),  # noqa: E731
                                    (1, 1), [(1, 1), (1, 1)])
    bn = lambda y, v: b.mul(y, b.broadcast_in_dim(_v(v, (64,)), y.shape, [3]))  # noqa: E731
    body, short = bn(conv("%x1"), "%s1"), bn(conv("%x2"), "%s2")
    r = b.max(b.add(body, short), 0.0)
    b.lines.append(f'    "func.return"({r.name}) : () -> ()')
    assert epilogue.fuse(b) == 2
    text = "\n".join(b.body())
    assert text.count("@aotexec_kernels::@conv_ep") == 2 and f'"stablehlo.reshape"({short.name})' in text
    defined = [line.split(" = ")[0].strip() for part in b.body() for line in part.split("\n") if " = " in line]
    assert len(defined) == len(set(defined)) and short.name in defined and r.name in defined


def _max_pool_grad(x, g, kernel, stride, pad):
    """float64 numpy: each window's g to its first maximum (row-major), padding never taken."""
    dx = np.zeros(x.shape)
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            y0, x0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
            ys, xs = slice(max(y0, 0), min(y0 + kernel[0], x.shape[2])), slice(max(x0, 0), min(x0 + kernel[1], x.shape[3]))
            win = x[:, :, ys, xs]
            arg = win.reshape(*win.shape[:2], -1).argmax(-1)
            yy, xx = np.divmod(arg, win.shape[3])
            n, c = np.indices(arg.shape)
            np.add.at(dx, (n, c, ys.start + yy, xs.start + xx), g[:, :, i, j])
    return dx


@pytest.mark.parametrize("shape,kernel,stride,pad,convention", [
    ((2, 40, 11, 13), (3, 3), (2, 2), (1, 1), "valid"),     # ResNet's 3x3/2; 40 = 32 + 8 channels
    ((1, 64, 12, 12), (3, 3), (2, 2), (0, 0), "full"),      # SqueezeNet's: windows past the input
    ((2, 17, 9, 9), (2, 3), (1, 2), (1, 1), "valid"),       # uneven window and stride
    ((2, 64, 10, 10), (3, 3), (1, 1), (1, 1), "valid"),     # stride 1: nine windows per input
])
def test_max_pool_gradient_through_the_kernel_matches_numpy(tmp_path_factory, shape, kernel, stride, pad,
                                                            convention):
    # channels-last after a convolution (identity weights); inputs on a quarter grid, so windows
    # hold ties: the first maximum takes the gradient, as in MXNet
    _available(tmp_path_factory)
    rng = np.random.default_rng(5)
    x = (np.round(rng.uniform(-2, 2, shape) * 4) / 4).astype(np.float32)
    c = shape[1]
    conv = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=c, kernel=(1, 1), no_bias=True, name="c")
    s = ax.sym.Pooling(conv, kernel=kernel, stride=stride, pad=pad, pool_type="max",
                       pooling_convention=convention, name="pool")
    ex = s.simple_bind(ax.cpu(), grad_req={"data": "write", "c_weight": "null"}, data=shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["c_weight"][:] = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
    y = ex.forward(is_train=True)[0]
    g = rng.standard_normal(y.shape).astype(np.float32)
    ex.backward(ax.nd.array(g))
    _check("grad data", ex.grad_dict["data"].asnumpy(), _max_pool_grad(x, g, kernel, stride, pad))


@pytest.mark.lowering
def test_channels_last_max_pool_gradient_is_one_kernel_call():
    from aotexec.ops.pool import _overlapping_grad_lower, PoolingParam
    from types import SimpleNamespace
    b = _emitter()
    p = PoolingParam(kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    ctx = SimpleNamespace(b=b, in_nhwc=[True], fwd_in_shapes=[(16, 64, 112, 112)], fwd_out_shapes=[(16, 64, 56, 56)])
    _overlapping_grad_lower(ctx, p, _v("%g", (16, 56, 56, 64)), _v("%x", (16, 112, 112, 64)))
    text = "\n".join(line for line in b.lines if line)
    assert text.count("flow.dispatch @aotexec_kernels::@maxpool_grad") == 1
    assert "stablehlo.slice" not in text and "stablehlo.pad" not in text


def _channels_last_layer(rng, x, w, **conv):
    """A Convolution ``layer`` (``conv``: its other parameters; 3x3 unless they say) of ``x`` with weight ``w``,
    between a 1x1 convolution with identity weights and a 1x1 average pool (identity), so data
    and head gradient reach it channels-last; forward and backward run with a random head
    gradient. (executor, output, head gradient)."""
    c = x.shape[1]
    s = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=c, kernel=(1, 1), no_bias=True, name="c")
    s = ax.sym.Convolution(s, num_filter=w.shape[0], no_bias=True, name="layer", **{"kernel": (3, 3), **conv})
    s = ax.sym.Pooling(s, kernel=(1, 1), pool_type="avg", name="pool")
    ex = s.simple_bind(ax.cpu(), grad_req={"data": "write", "c_weight": "null", "layer_weight": "write"},
                       data=x.shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["c_weight"][:] = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
    ex.arg_dict["layer_weight"][:] = w
    y = ex.forward(is_train=True)[0]
    g = rng.standard_normal(y.shape).astype(np.float32)
    ex.backward(ax.nd.array(g))
    return ex, y, g


@pytest.mark.parametrize("filters,channels,stride,through", [
    (256, 40, (1, 1), [True, False]),      # 256 deep: the kernel's depth where a pass follows
    (256, 40, (2, 2), [True, False]),      # strided: the one phase that has a tap
    (160, 136, (1, 1), [True, True]),      # both sides >= 128: the kernel, the product alone
    (160, 40, (1, 1), [False, False]),     # 40 columns of dx: IREE's contraction
])
def test_pointwise_data_gradients_through_the_kernel_match_numpy(tmp_path_factory, monkeypatch, filters, channels,
                                                                  stride, through):
    # a 1x1 layer's data gradient as one 2-D product through the matmul kernel where it takes
    # it (``conv.pointwise_data_grad``); the identity layer before it is the second call
    from aotexec.ops import conv
    from aotexec.pipeline import program
    _available(tmp_path_factory)
    monkeypatch.setattr(program, "_programs", type(program._programs)())      # lowered again, not memoized
    calls = []
    grad = conv.pointwise_data_grad
    monkeypatch.setattr(conv, "pointwise_data_grad", lambda b, g, w: calls.append((g.shape[3], grad(b, g, w))) or calls[-1][1])
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, channels, 24, 24)).astype(np.float32)       # 40 = 32 + 8 columns of dx
    w = (rng.standard_normal((filters, channels, 1, 1)) * 0.1).astype(np.float32)
    ex, y, g = _channels_last_layer(rng, x, w, kernel=(1, 1), stride=stride)
    dx = np.zeros(x.shape)
    dx[:, :, ::stride[0], ::stride[1]] = np.einsum("nfhw,fc->nchw", g.astype(np.float64), w[:, :, 0, 0].astype(np.float64))
    _check("grad data", ex.grad_dict["data"].asnumpy(), dx)
    assert [(o, v is not None) for o, v in calls] == list(zip((filters, channels), through))


@pytest.mark.parametrize("shape,filters,kernel,pad", [
    ((2, 3, 30, 30), 64, (7, 7), (3, 3)),          # a 7x7/2 stem: phases of 16, 12, 12 and 9 taps
    ((2, 4, 40, 35), 96, (3, 3), (1, 1)),          # odd width: the last phase block reads g's padding
])
def test_strided_data_gradients_onto_few_channels_are_tap_products(tmp_path_factory, monkeypatch, shape, filters,
                                                                   kernel, pad):
    # d data of a stride-2 layer onto 3-4 channels: every tap's product through the matmul
    # kernel, then each output phase a sum of its taps' windows
    from aotexec.ops import conv
    from aotexec.pipeline import program
    _available(tmp_path_factory)
    monkeypatch.setattr(program, "_programs", type(program._programs)())      # lowered again, not memoized
    made = []
    products = conv.tap_products
    monkeypatch.setattr(conv, "tap_products", lambda *a: made.append(products(*a)) or made[-1])
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((filters, shape[1]) + kernel) * 0.1).astype(np.float32)
    ex, y, g = _channels_last_layer(rng, x, w, kernel=kernel, stride=(2, 2), pad=pad)
    n, c, h, wd = shape
    oh, ow = g.shape[2:]
    dxp = np.zeros((n, c, h + 2 * pad[0] + kernel[0], wd + 2 * pad[1] + kernel[1]))
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            dxp[:, :, ky:ky + 2 * oh:2, kx:kx + 2 * ow:2] += np.einsum(
                "nfhw,fc->nchw", g.astype(np.float64), w[:, :, ky, kx].astype(np.float64))
    _check("grad data", ex.grad_dict["data"].asnumpy(), dxp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd])
    assert len(made) == 1 and made[0] is not None


@pytest.mark.parametrize("shape,stride,pad,dilate", [
    ((2, 40, 9, 9), (1, 1), (1, 1), (1, 1)),      # 40 = 32 + 8 channels
    ((2, 33, 10, 10), (2, 2), (1, 1), (1, 1)),    # MobileNet's strided layers
    ((1, 17, 11, 11), (1, 1), (2, 2), (2, 2)),    # dilated; batch 1: row blocks summed
    ((3, 64, 8, 8), (2, 2), (0, 0), (1, 1)),      # no padding
    ((1, 48, 5, 7), (1, 1), (3, 3), (1, 1)),      # rows and columns wholly in the padding
])
def test_depthwise_weight_gradient_through_the_kernel_matches_numpy(tmp_path_factory, shape, stride, pad, dilate):
    # channels-last after a 1x1 convolution (identity weights), a 1x1 average pool after it
    # (identity): the head gradient reaches the depthwise layer channels-last
    _available(tmp_path_factory)
    rng = np.random.default_rng(6)
    c = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    ex, y, g = _channels_last_layer(rng, x, w, num_group=c, stride=stride, pad=pad, dilate=dilate)
    wins = _windows(x, (3, 3), pad, stride, dilate)
    ref = np.zeros((c, 1, 3, 3))
    for (i, j), v in wins.items():
        ref[:, 0, i, j] = np.einsum("nchw,nchw->c", v, g.astype(np.float64))
    _check("output", y.asnumpy(), sum(v * w[None, :, 0, i, j, None, None] for (i, j), v in wins.items()))
    _check("grad weight", ex.grad_dict["layer_weight"].asnumpy(), ref)


@pytest.mark.lowering
def test_a_depthwise_weight_gradient_is_one_kernel_call():
    from aotexec.kernels import depthwise
    b = _emitter()
    dw = depthwise.weight_grad(b, _v("%x", (16, 112, 112, 32)), _v("%g", (16, 112, 112, 32)), (3, 3), (1, 1), (1, 1),
                               (1, 1))
    assert dw is not None and dw.shape == (32, 1, 3, 3)
    text = "\n".join(line for line in b.lines if line)
    assert text.count("flow.dispatch @aotexec_kernels::@dwgrad") == 1
    assert "stablehlo.multiply" not in text and "stablehlo.pad" not in text
    # other kernel sizes keep ops.conv's form
    assert depthwise.weight_grad(_emitter(), _v("%x", (2, 8, 8, 32)), _v("%g", (2, 8, 8, 32)), (5, 5), (1, 1),
                                 (1, 1), (2, 2)) is None


def _batchnorm_after_identity_conv(rng, shape, offset: float, gamma, grad_req, relu: bool = False, beta=0.0, **bn):
    """A channels-last BatchNorm (training) after a 1x1 convolution with identity weights, and a
    ReLU after it with ``relu``, bound to data whose channel means lie in [-offset, offset] with
    spreads of 0.1-2; (executor, data)."""
    c = shape[1]
    x = (rng.uniform(-offset, offset, (1, c, 1, 1)) + rng.uniform(0.1, 2, (1, c, 1, 1)) * rng.standard_normal(shape))
    x = x.astype(np.float32)
    conv = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=c, kernel=(1, 1), no_bias=True, name="c")
    s = ax.sym.BatchNorm(conv, fix_gamma=False, name="bn", **bn)
    if relu:
        s = ax.sym.Activation(s, act_type="relu", name="relu")
    ex = s.simple_bind(ax.cpu(), grad_req=grad_req, data=shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["c_weight"][:] = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
    ex.arg_dict["bn_gamma"][:] = gamma
    ex.arg_dict["bn_beta"][:] = beta
    return ex, x


@pytest.mark.parametrize("shape", [
    (2, 40, 30, 30),      # 1,800 rows in blocks of 1,638 and 162; 40 = 32 + 8 channels
    (1, 300, 16, 16),     # 300 = 4 x 64 + 44 channels
])
def test_batch_statistics_through_the_kernel_match_numpy(tmp_path_factory, shape):
    # channels-last after a 1x1 convolution (identity weights); channel means far from zero
    # against their spread, where summing squares without centering would cancel
    _available(tmp_path_factory)
    rng = np.random.default_rng(7)
    ex, x = _batchnorm_after_identity_conv(rng, shape, 50, np.ones(shape[1], np.float32), "null",
                                           output_mean_var=True)
    out, mean, inv_std = (o.asnumpy() for o in ex.forward(is_train=True))
    x64 = x.astype(np.float64)
    ref_mean, ref_var = x64.mean((0, 2, 3)), x64.var((0, 2, 3))
    _check("mean", mean, ref_mean)
    _check("1 / std", inv_std, 1 / np.sqrt(ref_var + 1e-3))
    # x - mean in float32 loses x's own rounding (~4e-6 at 50) scaled by 1 / std: 1e-4, MXNet's bar
    ref = (x64 - ref_mean[None, :, None, None]) / np.sqrt(ref_var + 1e-3)[None, :, None, None]
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-4


@pytest.mark.lowering
def test_batch_statistics_are_two_kernel_calls_and_small_maps_stay_with_iree():
    from aotexec.kernels import stats
    b = _emitter()
    mean, var = stats.batch_stats(b, _v("%x", (16, 56, 56, 64)))
    assert mean.shape == var.shape == (64,)
    text = "\n".join(line for line in b.lines if line)
    assert text.count("flow.dispatch @aotexec_kernels::@colstats[") == 1
    assert text.count("flow.dispatch @aotexec_kernels::@colstats_combine") == 1
    assert "stablehlo.reduce" not in text
    assert stats.batch_stats(_emitter(), _v("%x", (2, 8, 8, 64))) is None


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape", [(2, 40, 30, 30), (1, 300, 16, 16), (2, 12, 6, 6)])   # the last: IREE's sums
def test_batchnorm_gradient_sums_through_the_kernel_match_numpy(tmp_path_factory, shape, relu):
    # d gamma, d beta (the kernel's two sums) and d data of a channels-last BatchNorm in training;
    # with a ReLU after it, the fused gradient (passes.fuse_gradients) masks the head gradient
    # in the kernel and again in the d data pass
    _available(tmp_path_factory)
    rng = np.random.default_rng(8)
    c = shape[1]
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    ex, x = _batchnorm_after_identity_conv(rng, shape, 5, gamma, {"data": "write", "c_weight": "null",
                                                                  "bn_gamma": "write", "bn_beta": "write"},
                                           relu=relu, beta=beta)
    ex.forward(is_train=True)
    dz = rng.standard_normal(shape).astype(np.float32)
    ex.backward(ax.nd.array(dz))
    x64, axes = x.astype(np.float64), (0, 2, 3)
    inv = 1 / np.sqrt(x64.var(axes) + 1e-3)
    xhat = (x64 - x64.mean(axes)[None, :, None, None]) * inv[None, :, None, None]
    y = xhat * gamma[None, :, None, None] + beta[None, :, None, None]
    g64 = np.where(y > 0, dz, 0.0) if relu else dz.astype(np.float64)
    if relu:
        assert 0.2 < (y > 0).mean() < 0.8        # the mask matters
    dbeta, dgamma = g64.sum(axes), (g64 * xhat).sum(axes)
    n = x.size // c
    dx = (gamma * inv / n)[None, :, None, None] * (n * g64 - dbeta[None, :, None, None]
                                                  - xhat * dgamma[None, :, None, None])
    _check("grad beta", ex.grad_dict["bn_beta"].asnumpy(), dbeta)
    _check("grad gamma", ex.grad_dict["bn_gamma"].asnumpy(), dgamma)
    _check("grad data", ex.grad_dict["data"].asnumpy(), dx)


@pytest.mark.parametrize("permuted, g_tiles_iree", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape", [
    (2, 128, 30, 30),     # F(4x4): 128 tiles, streams 64 KB apart: two zero rows after them
    (2, 128, 11, 9),      # F(2x2); the last tiles reach past the map
    (2, 80, 12, 12),      # F(2x2) forward, F(4x4) d weight: 80 channels, a half-empty last panel of g's tiles
])
def test_winograd_tiles_through_the_kernel_match_numpy(tmp_path_factory, monkeypatch, shape, permuted, g_tiles_iree):
    # a Winograd 3x3 layer (ops.winograd) in training, forward, d data (Winograd on the flipped
    # weight) and d weight, with every stack of tiles through the kernel; ``permuted``: the
    # transforms' tile index reversed (the same convolution), which the kernel's code
    # specialized for ops.winograd's own matrices does not take: its generic loops;
    # ``g_tiles_iree``: the weight gradient's tiles of g in IREE's form, padded to x's rows
    from aotexec.kernels import winograd
    from aotexec.ops import winograd as ops_winograd
    from aotexec.pipeline import program
    _available(tmp_path_factory)
    monkeypatch.setattr(winograd, "MIN_FLOATS", 0)
    monkeypatch.setattr(program, "_programs", type(program._programs)())      # lowered again, not memoized
    if permuted:
        monkeypatch.setattr(ops_winograd, "TRANSFORMS", {m: (bt[::-1], g[::-1], at[:, ::-1])
                                                        for m, (bt, g, at) in ops_winograd.TRANSFORMS.items()})
    calls = []
    tiles = winograd.tiles
    monkeypatch.setattr(winograd, "tiles", lambda *a, rows=None, packed=False: calls.append(
        (packed, None if g_tiles_iree and rows is not None else tiles(*a, rows=rows, packed=packed))) or calls[-1][1])
    rng = np.random.default_rng(9)
    c = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)
    ex, y, g = _channels_last_layer(rng, x, w, pad=(1, 1))
    g64 = g.astype(np.float64)
    wins = _windows(x, (3, 3), (1, 1), (1, 1), (1, 1))
    dw = np.zeros((c, c, 3, 3))
    for (i, j), v in wins.items():
        dw[:, :, i, j] = np.einsum("nchw,nfhw->fc", v, g64)
    dx = _conv_nchw(g64, np.flip(w.astype(np.float64), (2, 3)).transpose(1, 0, 2, 3), (1, 1))
    _check("output", y.asnumpy(), _conv_nchw(x, w.astype(np.float64), (1, 1)))
    _check("grad data", ex.grad_dict["data"].asnumpy(), dx)
    _check("grad weight", ex.grad_dict["layer_weight"].asnumpy(), dw)
    # forward's input tiles, d data's tiles of g, d weight's tiles of x and of g (packed as the
    # matmul kernel's B; else asked for once more, unpacked)
    made = [packed for packed, v in calls if v is not None]
    assert made == ([False] * 3 if g_tiles_iree else [False] * 3 + [True]) and len(calls) == 4 + g_tiles_iree


@pytest.mark.lowering
def test_winograd_tiles_are_one_kernel_call_and_small_stacks_stay_with_iree():
    from aotexec.kernels import winograd
    from aotexec.ops.winograd import TRANSFORMS
    b = _emitter()
    v = winograd.tiles(b, _v("%x", (16, 28, 28, 128)), TRANSFORMS[4][0], 7, 7, 4, (1, 1))
    assert v.shape == (36, 16 * 7 * 7 + 2, 128)       # streams 392 KB + 1 KB apart, not a multiple of 4 KB
    text = "\n".join(line for line in b.lines if line)
    assert text.count("flow.dispatch @aotexec_kernels::@wino_tiles[") == 1 and "concatenate" not in text
    assert winograd.tiles(_emitter(), _v("%x", (1, 7, 7, 512)), TRANSFORMS[2][0], 4, 4, 2, (1, 1)) is None
