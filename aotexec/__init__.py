"""aotexec: an ahead-of-time compiler and runtime for MXNet-style symbolic graphs.

``import aotexec as ax`` gives MXNet's ``mx.sym`` / ``mx.nd`` / Executor surface
(see API.md).  Importing needs only numpy and iree.runtime; the compiler is
imported lazily when something must be compiled.
"""
from . import monitor as mon  # noqa: F401
from . import distributed, kvstore, model, name, nd, optimizer, random, ray, symbol  # noqa: F401
from . import initializer, io, metric, module, rnn  # noqa: F401
from .artifact import Artifact, compile, load  # noqa: F401
from .attribute import AttrScope  # noqa: F401
from .base import AotexecError, MXNetError, NotImplementedForSymbol  # noqa: F401
from .options import Options  # noqa: F401
from .runtime.context import Context, cpu, current_context, gpu, vulkan  # noqa: F401
from .runtime.executor import Executor  # noqa: F401
from .util import is_np_shape, np_shape, set_np_shape, use_np_shape  # noqa: F401

sym = symbol
kv = kvstore
mod = module
init = initializer

__version__ = "0.1.0"
