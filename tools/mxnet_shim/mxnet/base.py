"""mxnet.base: the error types and small helpers tests import."""
from __future__ import annotations

import numpy as np

from aotexec.base import AotexecError, MXNetError, NotImplementedForSymbol  # noqa: F401

mx_real_t = np.float32
string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.int32, np.int64)


def py_str(x):
    return x.decode("utf-8") if isinstance(x, bytes) else x


def _as_list(obj):
    return obj if isinstance(obj, list) else [obj]
