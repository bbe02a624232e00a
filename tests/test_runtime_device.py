"""Runtime device layer and NDArray, against modules built by the real IREE compiler."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest
import iree.runtime as rt

from aotexec import nd
from aotexec.base import AotexecError, MXNetError
from aotexec.runtime import Context, Device, LoadedModule, NDArray, cpu, current_context, gpu, vulkan

# One tiny module, compiled once per backend: `add` for results, `traced` for the sink.
SRC = """
func.func @add(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
func.func @traced(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<2x3xf32>
  flow.tensor.trace "squared" = [%0 : tensor<2x3xf32>]
  return %0 : tensor<2x3xf32>
}
"""
FLAGS = {
    "cpu": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host"],
    "vulkan": ["--iree-hal-target-device=vulkan"],
}
A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


def _vulkan_missing() -> str | None:
    if "vulkan" not in rt.query_available_drivers():
        return "IREE runtime has no vulkan driver"
    try:
        if not rt.get_driver("vulkan").query_available_devices():
            return "no Vulkan device enumerates"
    except Exception as e:  # no loader / ICD
        return f"Vulkan driver unusable: {e}"
    return None


def _require(kind: str) -> Context:
    if kind == "vulkan":
        reason = _vulkan_missing()
        if reason:
            if os.environ.get("CI"):
                pytest.fail(f"Vulkan must run in CI (install mesa-vulkan-drivers): {reason}")
            pytest.skip(f"{reason}; apt-get install mesa-vulkan-drivers libvulkan1 to run")
        return vulkan()
    return cpu()


@pytest.fixture(scope="module")
def vmfbs() -> dict[str, bytes]:
    return {}


@pytest.fixture(scope="module", params=["cpu", "vulkan"])
def ctx(request) -> Context:
    return _require(request.param)


@pytest.fixture(scope="module")
def dev(ctx) -> Device:
    return Device.get(ctx)


def _vmfb(vmfbs: dict[str, bytes], kind: str) -> bytes:
    if kind not in vmfbs:
        from iree.compiler.tools import compile_str
        vmfbs[kind] = compile_str(SRC, input_type="stablehlo", extra_args=FLAGS[kind])
    return vmfbs[kind]


@pytest.fixture(scope="module")
def module(dev, ctx, vmfbs) -> LoadedModule:
    return dev.load_module(_vmfb(vmfbs, ctx.device_type))


# -- Context --------------------------------------------------------------------------------
def test_context_basics():
    c = cpu()
    assert str(c) == repr(c) == "cpu(0)" and str(gpu(1)) == "gpu(1)"
    assert c == Context("cpu", 0) and hash(c) == hash(cpu(0)) and c != cpu(1) and c != vulkan(0)
    assert len({cpu(), cpu(0), vulkan()}) == 2
    assert (cpu().target, gpu().target, vulkan().target) == ("llvm-cpu", "cuda", "vulkan-spirv")
    assert (cpu().device_typeid, gpu().device_typeid, vulkan().device_typeid) == (1, 2, 7)
    assert Context(vulkan(2)) == vulkan(2) and Context(2, 1) == gpu(1)


def test_context_bad_type():
    with pytest.raises(AotexecError, match="unknown device type 'tpu'"):
        Context("tpu")
    assert MXNetError is AotexecError


def test_default_context_stack():
    assert current_context() == cpu(0)
    with vulkan(1) as c:
        assert current_context() == c
        with cpu(3):
            assert current_context() == cpu(3)
        assert current_context() == vulkan(1)
    assert current_context() == cpu(0)


def test_unavailable_devices_raise_clearly():
    with pytest.raises(AotexecError, match="Vulkan device 99 .*not available.*ax.cpu"):
        Device.get(vulkan(99))
    try:  # CUDA: a clear error without a GPU, a device with one
        Device.get(gpu(0))
    except AotexecError as e:
        assert "CUDA device 0" in str(e)


def test_device_cached(ctx, dev):
    assert Device.get(ctx) is dev and Device.get(Context(ctx)) is dev


# -- Device buffers -------------------------------------------------------------------------
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_upload_download_roundtrip(dev, dtype):
    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    v = dev.upload(x)
    assert list(v.shape) == [3, 4]
    y = dev.download(v, (3, 4), dtype)
    assert y.dtype == np.dtype(dtype) and np.array_equal(x, y)
    assert np.array_equal(dev.download(v), x)  # shape/dtype from the view
    y[0, 0] = 1
    assert np.array_equal(dev.download(v), x)  # a copy, not a view


@pytest.mark.parametrize("dtype,fill", [("float32", 0), ("float32", 2.5), ("int64", 7),
                                        ("float64", -1.25), ("int8", 3), ("float16", 1.5),
                                        ("bool", True)])
def test_allocate_fill(dev, dtype, fill):
    v = dev.allocate((5,), dtype, fill=fill)
    assert np.array_equal(dev.download(v), np.full(5, fill, dtype))


def test_zero_size_and_scalar(dev):
    assert dev.download(dev.allocate((0, 3))).shape == (0, 3)
    assert dev.download(dev.upload(np.float32(4.0))).shape == ()


def test_write_in_place_visible_through_reshape_view(dev):
    v = dev.upload(A)
    r = dev.view(v, (3, 2))
    dev.write(v, B)
    assert np.array_equal(dev.download(r), B.reshape(3, 2))
    dev.write(r, A.reshape(3, 2))
    assert np.array_equal(dev.download(v), A)
    with pytest.raises(AotexecError, match="write of 4 bytes"):
        dev.write(v, np.zeros(1, np.float32))


def test_copy_device_to_device(dev):
    src, dst = dev.upload(A), dev.allocate((2, 3))
    dev.copy(src, dst)
    assert np.array_equal(dev.download(dst), A)
    with pytest.raises(AotexecError):
        dev.copy(src, dev.allocate((4,)))


def test_prefix_view_invoke(dev, module):
    big = dev.upload(np.arange(12, dtype=np.float32))
    prefix = dev.view(big, (2, 3))
    assert prefix.get_buffer().byte_length() == 48 and prefix.byte_length == 24
    out = module.invoke("add", [prefix, dev.upload(B)])[0]
    assert np.array_equal(dev.download(out), A + B)
    with pytest.raises(AotexecError, match="exceeds"):
        dev.view(big, (4, 4))


def test_offset_view(ctx, dev, module):
    big = dev.upload(np.arange(32, dtype=np.float32))
    if ctx.device_type != "cpu":
        with pytest.raises(AotexecError, match="not supported"):
            dev.view(big, (2, 3), byte_offset=64)
        return
    v = dev.view(big, (2, 3), byte_offset=64)  # elements 16..21, aliasing big's memory
    assert np.array_equal(dev.download(v).ravel(), np.arange(16, 22))
    dev.write(v, np.zeros((2, 3), np.float32))
    assert dev.download(big)[16:22].sum() == 0 and dev.download(big)[22] == 22
    out = module.invoke("add", [v, dev.upload(B)])[0]
    assert np.array_equal(dev.download(out), B)
    with pytest.raises(AotexecError, match="multiple of 64"):
        dev.view(big, (2,), byte_offset=4)
    alias = dev.view(dev.upload(np.arange(40, dtype=np.float32)), (4,), byte_offset=128)
    gc.collect()  # the alias alone must keep the original memory alive
    assert np.array_equal(dev.download(alias), np.arange(32, 36))


def test_allocator_statistics(dev):
    stats = dev.allocator_statistics()
    if stats:
        assert {"device_bytes_peak", "device_bytes_allocated", "device_bytes_freed"} <= set(stats)


# -- LoadedModule ---------------------------------------------------------------------------
def test_invoke_matches_numpy(dev, module):
    assert module.function_names == ["add", "traced"]
    assert "sync func @add" in module.reflection("add")["iree.abi.declaration"]
    (out,) = module.invoke("add", [dev.upload(A), dev.upload(B)])
    assert isinstance(out, rt.HalBufferView) and list(out.shape) == [2, 3]
    assert np.array_equal(dev.download(out, (2, 3), np.float32), A + B)


def test_invoke_errors(dev, module):
    with pytest.raises(AotexecError, match=r"no function 'nope'.*\['add', 'traced'\]"):
        module.invoke("nope", [])
    with pytest.raises(AotexecError, match="invoking 'add'"):
        module.invoke("add", [dev.upload(np.zeros((3, 3), np.float32)), dev.upload(B)])


def test_debug_sink(ctx, dev, vmfbs):
    seen = []
    sink = rt.HalModuleDebugSink(lambda key, views: seen.append((key, dev.download(views[0]))))
    m = dev.load_module(_vmfb(vmfbs, ctx.device_type), debug_sink=sink)
    m.invoke("traced", [dev.upload(A)])
    assert [k for k, _ in seen] == ["squared"] and np.array_equal(seen[0][1], A * A)


def test_load_module_from_path_and_wrong_target(ctx, dev, vmfbs, tmp_path):
    path = tmp_path / "m.vmfb"
    path.write_bytes(_vmfb(vmfbs, ctx.device_type))
    m = dev.load_module(path)
    assert np.array_equal(dev.download(m.invoke("add", [dev.upload(A), dev.upload(B)])[0]), A + B)
    if ctx.device_type == "vulkan":
        with pytest.raises(AotexecError, match="cannot load module on cpu"):
            Device.get(cpu()).load_module(_vmfb(vmfbs, "vulkan"))


def test_local_sync_driver(vmfbs):
    dev = Device.get(cpu(), "local-sync")
    assert dev is not Device.get(cpu()) and dev.driver == "local-sync"
    m = dev.load_module(_vmfb(vmfbs, "cpu"))
    a = Device.get(cpu()).upload(A)  # host buffers interoperate across local drivers
    assert np.array_equal(dev.download(m.invoke("add", [a, dev.upload(B)])[0]), A + B)


# -- NDArray --------------------------------------------------------------------------------
def test_array_dtypes_and_properties(ctx):
    x = nd.array([[1, 2, 3], [4, 5, 6]], ctx=ctx)
    assert x.dtype is np.float32 and x.shape == (2, 3) and x.size == 6 and x.ndim == 2
    assert x.context == ctx and len(x) == 2 and isinstance(x.handle, rt.HalBufferView)
    assert nd.array(np.arange(3), ctx=ctx).dtype is np.int64
    assert nd.array(np.arange(3), ctx=ctx, dtype="float16").dtype is np.float16
    assert nd.array(x, ctx=ctx).dtype is np.float32
    assert nd.array(x.asnumpy().astype(np.float64), ctx=ctx).dtype is np.float64
    with pytest.raises(AotexecError, match="not supported"):
        nd.array(np.zeros(2, np.complex64), ctx=ctx)


def test_creation_functions(ctx):
    assert np.array_equal(nd.zeros((2, 2), ctx).asnumpy(), np.zeros((2, 2), np.float32))
    o = nd.ones(3, ctx, dtype="int32")
    assert o.dtype is np.int32 and np.array_equal(o.asnumpy(), [1, 1, 1])
    assert nd.empty((4, 1), ctx).shape == (4, 1)
    assert np.array_equal(nd.full((2,), 9.5, ctx, "float64").asnumpy(), [9.5, 9.5])
    with ctx:
        assert nd.zeros(1).context == ctx
    nd.waitall()


def test_asnumpy_array_protocol(ctx):
    x = nd.array(A, ctx=ctx)
    h = x.asnumpy()
    h[0, 0] = 100
    assert x.asnumpy()[0, 0] == 0
    assert np.array_equal(np.asarray(x), A) and np.asarray(x, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError):
        np.array(x, copy=False)
    assert (np.asarray(x) + 1).sum() == A.sum() + 6


def test_setitem_in_place(ctx):
    x = nd.zeros((2, 3), ctx)
    handle, buf = x.handle, x.handle.get_buffer()
    x[:] = 1.5
    assert np.all(x.asnumpy() == 1.5)
    x[:] = np.array([1, 2, 3])  # broadcast, cast to float32
    assert np.array_equal(x.asnumpy(), [[1, 2, 3], [1, 2, 3]])
    x[:] = nd.array(B, ctx=ctx)  # device copy
    assert np.array_equal(x.asnumpy(), B)
    x[:] = nd.array(A.astype(np.int32), ctx=ctx)  # other dtype: via host
    assert np.array_equal(x.asnumpy(), A)
    x[...] = nd.array(B, ctx=cpu())  # other context
    assert np.array_equal(x.asnumpy(), B)
    x[1, 2] = -1
    x[0] = nd.array([7, 8, 9], ctx=ctx)
    assert np.array_equal(x.asnumpy(), [[7, 8, 9], [0.5, 0.5, -1]])
    assert x.handle is handle and x.handle.get_buffer().byte_length() == buf.byte_length()


def test_reshape_shares_memory(ctx):
    x = nd.array(A, ctx=ctx)
    y = x.reshape((3, 2))
    assert y.shape == (3, 2) and x.reshape(-1).shape == (6,) and x.reshape(0, -1).shape == (2, 3)
    assert x.reshape(shape=(1, 6)).shape == (1, 6) and x.reshape(3, 2).shape == (3, 2)
    x[:] = 4
    assert np.all(y.asnumpy() == 4)
    y[:] = np.arange(6).reshape(3, 2)
    assert np.array_equal(x.asnumpy(), A)
    with pytest.raises(AotexecError, match="cannot reshape"):
        x.reshape(4, 2)


def test_copies_and_conversions(ctx):
    x = nd.array(A, ctx=ctx)
    c = x.copy()
    x[:] = 0
    assert np.array_equal(c.asnumpy(), A) and c.context == ctx
    d = nd.zeros((2, 3), ctx)
    assert c.copyto(d) is d and np.array_equal(d.asnumpy(), A)
    h = c.copyto(cpu())
    assert h.context == cpu() and np.array_equal(h.asnumpy(), A)
    assert c.as_in_context(ctx) is c
    with pytest.raises(AotexecError, match="shape mismatch"):
        c.copyto(nd.zeros((3,), ctx))
    i = c.astype("int32")
    assert i.dtype is np.int32 and np.array_equal(i.asnumpy(), A.astype(np.int32))
    assert c.astype(np.float32, copy=False) is c


def test_getitem_scalar_repr(ctx):
    x = nd.array(A, ctx=ctx)
    assert np.array_equal(x[1].asnumpy(), A[1]) and x[1].context == ctx
    assert x[0, 2].shape == (1,) and x[0, 2].asscalar() == 2.0
    assert np.array_equal(x[:, 1:].asnumpy(), A[:, 1:])
    with pytest.raises(ValueError):
        x.asscalar()
    assert repr(x) == f"\n{A}\n<NDArray 2x3 @{ctx}>"


def test_ndarray_from_executor_view(ctx, dev, module):
    a, b = nd.array(A, ctx=ctx), nd.array(B, ctx=ctx)
    (out,) = module.invoke("add", [a.handle, b.handle])
    r = NDArray._from_view(out, (2, 3), np.float32, ctx)
    assert np.array_equal(r.asnumpy(), A + B) and r.dtype is np.float32
