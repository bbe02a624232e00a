"""mxnet.util: numpy-shape switches (numpy-array semantics are not supported)."""
import functools
import os

from aotexec.util import is_np_shape, np_shape, set_np_shape, use_np_shape  # noqa: F401

from ._harness import Unsupported


def is_np_array() -> bool:
    return False


def use_np(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        raise Unsupported("mx.util.use_np (numpy-array semantics)")
    return wrapper


use_np_array = use_np


def np_array(active=True):
    raise Unsupported("mx.util.np_array")


def getenv(name):
    return os.environ.get(name)


def setenv(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
