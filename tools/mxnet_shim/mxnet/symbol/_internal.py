"""mx.sym._internal / mx.sym.op: every registered operator by its MXNet name."""
import aotexec.symbol as _ax_sym

from .._harness import MissingOp


def __getattr__(name: str):
    try:
        return getattr(_ax_sym, name)
    except AttributeError:
        raise MissingOp("mxnet.symbol._internal", name) from None
