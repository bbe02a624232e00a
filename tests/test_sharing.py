"""simple_bind sharing (bucketing): shared_exec parameters, shared_buffer data arrays, mismatch errors."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax


def _net():
    data = ax.sym.Variable("data")
    return ax.sym.FullyConnected(data, num_hidden=3, name="fc")


def test_shared_exec_shares_parameters_and_gradients():
    net = _net()
    big = net.simple_bind(ax.cpu(), data=(8, 4))
    params = ["fc_weight", "fc_bias"]
    small = net.simple_bind(ax.cpu(), data=(2, 4), shared_arg_names=params, shared_exec=big)
    assert small.arg_dict["fc_weight"] is big.arg_dict["fc_weight"]
    assert small.grad_dict["fc_bias"] is big.grad_dict["fc_bias"]
    small.arg_dict["fc_weight"][:] = np.ones((3, 4))
    np.testing.assert_allclose(big.arg_dict["fc_weight"].asnumpy(), 1.0)
    small.forward(is_train=True, data=np.ones((2, 4)))
    small.backward(ax.nd.ones((2, 3)))
    np.testing.assert_allclose(big.grad_dict["fc_bias"].asnumpy(), 2.0)


def test_shared_buffer_reuses_data_arrays():
    net = _net()
    buf: dict = {}
    a = net.simple_bind(ax.cpu(), grad_req="null", data=(8, 4), shared_buffer=buf)
    assert "data" in buf
    b = net.simple_bind(ax.cpu(), grad_req="null", data=(2, 4), shared_buffer=buf, shared_arg_names=["fc_weight"],
                        shared_exec=a)
    b.arg_dict["data"][:] = np.full((2, 4), 7.0)
    np.testing.assert_allclose(a.arg_dict["data"].asnumpy()[:2], 7.0)


def test_shared_exec_shape_mismatch_is_an_error():
    net = _net()
    a = net.simple_bind(ax.cpu(), data=(2, 4))
    other = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=5, name="fc")
    with pytest.raises(ax.MXNetError, match="fc_weight mismatch"):
        other.simple_bind(ax.cpu(), data=(2, 4), shared_arg_names=["fc_weight"], shared_exec=a)
