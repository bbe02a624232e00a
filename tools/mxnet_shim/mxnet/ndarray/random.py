"""mx.nd.random"""
from ..random import normal, randint, randn, seed, uniform  # noqa: F401
