"""Planned buffers at the IREE ABI: steady-state forward / backward / fused steps allocate no
device memory (allocator statistics), on cpu and vulkan; results stay correct."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from aotexec.runtime.device import Device
from contexts import CONTEXTS


def _net():
    data = ax.sym.Variable("data")
    x = ax.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    x = ax.sym.BatchNorm(x, fix_gamma=False, name="bn")
    x = ax.sym.Activation(x, act_type="relu", name="relu")
    x = ax.sym.FullyConnected(x, num_hidden=5, name="fc")
    return ax.sym.SoftmaxOutput(x, name="softmax")


def _allocated(ctx) -> int:
    return Device.get(ctx).allocator_statistics()["device_bytes_allocated"]


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_steady_state_calls_allocate_nothing(ctx):
    net = _net()
    req = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    ex = net.simple_bind(ctx, grad_req=req, data=(4, 2, 5, 5))
    rng = np.random.default_rng(0)
    for name, arr in ex.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32) if name != "softmax_label" else rng.integers(0, 5, arr.shape)
    x = rng.uniform(-1, 1, (4, 2, 5, 5)).astype(np.float32)
    for _ in range(2):   # warm up: compile, load, allocate arenas and residual buffers once
        ex.forward(is_train=False, data=x)
        ex.forward(is_train=True, data=x)
        ex.backward()
        ex.forward_backward(data=x)
    before = _allocated(ctx)
    for _ in range(3):
        out = ex.forward(is_train=False, data=x)
        ex.forward(is_train=True, data=x)
        ex.backward()
        ex.forward_backward(data=x)
    assert _allocated(ctx) == before
    ref = net.simple_bind(ctx, grad_req="null", data=(4, 2, 5, 5))
    ref.copy_params_from({k: v.asnumpy() for k, v in ex.arg_dict.items()},
                         {k: v.asnumpy() for k, v in ex.aux_dict.items()})
    np.testing.assert_allclose(ex.forward(is_train=False, data=x)[0].asnumpy(),
                               ref.forward(is_train=False, data=x)[0].asnumpy(), rtol=1e-5, atol=1e-6)
    assert out[0] is ex.outputs[0]


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_functions_share_one_transient_arena(ctx):
    """forward_train and backward never overlap: the executor holds the larger arena, not both."""
    net = _net()
    req = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    ex = net.simple_bind(ctx, grad_req=req, data=(4, 2, 5, 5))
    before = ex.memory_usage()
    assert before["transient_arena"] == 0 and before["saved_activations"] == 0
    ex.forward(is_train=True, data=np.ones((4, 2, 5, 5), np.float32))
    ex.backward()
    prog = ex._program(("forward_train", "backward"))
    sizes = [prog.transients_size(fn) for fn in ("forward_train", "backward")]
    usage = ex.memory_usage()
    assert usage["transient_arena"] == max(max(sizes), 64)
    from aotexec.signature import Role
    res = prog.entry("forward_train").results_of(Role.RESIDUAL)
    assert res and usage["saved_activations"] >= 4 * 4 * 4 * 5 * 5   # at least the conv output is saved
    n_args = sum(int(np.prod(a.shape)) for a in ex.arg_arrays) * 4
    assert usage["arrays"] > n_args                                   # plus gradients, aux states, outputs


def test_saved_activations_are_written_in_place():
    """forward_train computes the activations it saves straight into the executor's buffers.

    IREE 3.13 only emplaces a result in caller storage when that is the value's one use; a
    saved activation the next layer also reads used to be computed in the transient arena and
    copied out at the end, so the arena held every one of them (lowering: ``alias_early``)."""
    x = ax.sym.Variable("data")
    for i in range(3):
        x = ax.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name=f"conv{i}")
        x = ax.sym.Activation(ax.sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}"), act_type="relu", name=f"relu{i}")
    net = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=3, name="fc"), name="softmax")
    req = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    ex = net.simple_bind(ax.cpu(), grad_req=req, data=(4, 8, 8, 8), mirror=False)   # nothing recomputed
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 8, 8, 8)).astype(np.float32)
    ex.forward(is_train=True, data=x)
    ex.backward()
    prog = ex._program(("forward_train", "backward"))
    saved = ex.memory_usage()["saved_activations"]
    assert saved >= 6 * 4 * 8 * 8 * 8 * 4          # each block keeps its conv and relu outputs
    assert prog.transients_size("forward_train") < saved
    # and what was written there is right: the outputs match the inference build
    ref = net.simple_bind(ax.cpu(), grad_req="null", data=(4, 8, 8, 8))
    ref.copy_params_from({k: v.asnumpy() for k, v in ex.arg_dict.items()}, {k: v.asnumpy() for k, v in ex.aux_dict.items()})
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), ref.forward(is_train=True, data=x)[0].asnumpy(), rtol=1e-5, atol=1e-6)
