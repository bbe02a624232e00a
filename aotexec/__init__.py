"""aotexec: an ahead-of-time compiler and runtime for MXNet-style symbolic graphs.

``import aotexec as ax`` gives MXNet's ``mx.sym`` / ``mx.nd`` / Executor surface
(see API.md).  Importing needs only numpy and iree.runtime; the compiler is
imported lazily when something must be compiled.
"""
from . import name, symbol  # noqa: F401
from .attribute import AttrScope  # noqa: F401
from .base import AotexecError, MXNetError, NotImplementedForSymbol  # noqa: F401
from .util import is_np_shape, np_shape, set_np_shape, use_np_shape  # noqa: F401

sym = symbol

__version__ = "0.1.0"

from . import nd  # noqa: E402,F401
from .runtime.context import Context, cpu, current_context, gpu, vulkan  # noqa: E402,F401
from .runtime.executor import Executor  # noqa: E402,F401
from .artifact import Artifact, compile, load  # noqa: E402,F401
from . import random  # noqa: E402,F401
from . import monitor as mon  # noqa: E402,F401
