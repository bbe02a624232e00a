"""Random samplers (ops/distributions.py): the distributions against their analytic CDFs
(Kolmogorov-Smirnov distance of 20,000 draws), per-element parameters, shapes, dtypes and names
as MXNet 1.9.1 gives them, a seed repeating the draws and every call drawing anew."""
from __future__ import annotations

import math

import numpy as np
import pytest

import aotexec as ax

S = ax.sym
N = 20000
KS_LIMIT = 1.63 / math.sqrt(N)         # the 1% critical value of the one-sample KS statistic


def _ks(samples: np.ndarray, cdf) -> float:
    x = np.sort(samples.astype(np.float64))
    f = cdf(x)
    i = np.arange(1, x.size + 1)
    return float(max(np.max(i / x.size - f), np.max(f - (i - 1) / x.size)))


def _normal_cdf(loc, scale):
    erf = np.vectorize(math.erf)
    return lambda x: 0.5 * (1 + erf((x - loc) / (scale * math.sqrt(2))))


def test_distributions_and_parameters():
    ax.random.seed(11)
    mu, sigma = np.array([10.0, -5.0], np.float32), np.array([0.5, 3.0], np.float32)
    lo, hi = np.array([0.0, 1.0, -4.0], np.float32), np.array([1.0, 2.0, 4.0], np.float32)
    outs = S.Group([S.random_uniform(low=-2, high=3, shape=(N,)), S.random_normal(loc=1, scale=2, shape=(N,)),
                    S.sample_normal(S.var("mu"), S.var("sigma"), shape=(N,)),
                    S.sample_uniform(S.var("lo"), S.var("hi"), shape=(N,))])
    ex = outs.simple_bind(ax.cpu(), grad_req="null", mu=(2,), sigma=(2,), lo=(3,), hi=(3,))
    u, z, zs, us = (o.asnumpy() for o in ex.forward(mu=mu, sigma=sigma, lo=lo, hi=hi))
    assert u.min() >= -2 and u.max() < 3
    assert _ks(u, lambda x: (x + 2) / 5) < KS_LIMIT
    assert _ks(z, _normal_cdf(1, 2)) < KS_LIMIT
    assert zs.shape == (2, N) and us.shape == (3, N)
    for k in range(2):
        assert _ks(zs[k], _normal_cdf(mu[k], sigma[k])) < KS_LIMIT
    for k in range(3):
        assert _ks(us[k], lambda x, k=k: (x - lo[k]) / (hi[k] - lo[k])) < KS_LIMIT
    again = ex.forward(mu=mu, sigma=sigma, lo=lo, hi=hi)[0].asnumpy()
    assert not np.array_equal(u, again)                       # a new draw every call
    ax.random.seed(11)
    np.testing.assert_array_equal(ex.forward(mu=mu, sigma=sigma, lo=lo, hi=hi)[0].asnumpy(), u)


def test_shapes_dtypes_and_names_as_mxnet():
    # MXNet 1.9.1: sample_normal(mu (3,), sigma (3,), shape=(2,)) -> (3, 2); without shape (3,);
    # random_uniform(dtype='float64') is float64; nodes named after the function called
    mu, sigma = S.var("mu"), S.var("sigma")
    assert S.sample_normal(mu, sigma, shape=(2,)).infer_shape(mu=(3,), sigma=(3,))[1] == [(3, 2)]
    assert S.sample_normal(mu, sigma).infer_shape(mu=(3,), sigma=(3,))[1] == [(3,)]
    assert S.random_uniform(low=1, high=2, shape=(4,), dtype="float64").infer_type()[1] == [np.float64]
    with ax.name.NameManager():
        assert S.random_uniform(shape=(2, 3)).list_outputs() == ["random_uniform0_output"]
        assert S.random_normal(shape=(2,)).list_outputs() == ["random_normal0_output"]
        assert S.sample_uniform(S.var("a"), S.var("b"), shape=(2,)).list_outputs() == ["sample_uniform0_output"]
        assert S.random.uniform(0, 1, shape=(2,)).list_outputs() == ["_random_uniform0_output"]
        assert S.random.uniform(S.var("l"), S.var("h")).list_outputs() == ["_sample_uniform0_output"]
    like = S._random_normal_like(S.var("x"), loc=3.0, scale=0.1)
    ex = like.simple_bind(ax.cpu(), grad_req="null", x=(4, 5), type_dict={"x": "float64"})
    y = ex.forward()[0].asnumpy()
    assert y.shape == (4, 5) and y.dtype == np.float64 and abs(y.mean() - 3.0) < 0.1


def test_no_gradient():
    """MXNet's samplers have a zero gradient: the parameters' gradients stay zero."""
    s = S.sample_uniform(S.var("a"), S.var("b"), shape=(2,)) * S.var("w")
    ex = s.simple_bind(ax.cpu(), a=(3,), b=(3,), w=(3, 2))
    ex.forward(is_train=True, a=np.zeros(3), b=np.ones(3), w=np.ones((3, 2)))
    ex.backward([ax.nd.ones((3, 2))])
    assert np.all(ex.grad_dict["a"].asnumpy() == 0) and np.all(ex.grad_dict["b"].asnumpy() == 0)
    assert np.all((ex.grad_dict["w"].asnumpy() >= 0) & (ex.grad_dict["w"].asnumpy() < 1))


def test_mixed_parameters_refused():
    with pytest.raises(ValueError, match="both"):
        S.random.normal(S.var("m"), 1.0)
