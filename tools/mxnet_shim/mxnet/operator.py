"""mxnet.operator: custom Python operators are not supported (the classes exist so tests import)."""
from ._harness import Unsupported

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators", "get_operator_arguments",
           "OperatorArguments"]


class OperatorArguments:
    def __init__(self, *args, **kwargs):
        raise Unsupported("mx.operator.OperatorArguments")


def get_operator_arguments(op_name):
    raise Unsupported("mx.operator.get_operator_arguments")


class CustomOp:
    def __init__(self, *args, **kwargs):
        raise Unsupported("mx.operator.CustomOp")


class CustomOpProp:
    def __init__(self, *args, **kwargs):
        pass


def register(reg_name):
    raise Unsupported("mx.operator.register (custom operators)")


def get_all_registered_operators():
    from aotexec.ops import OPS
    return sorted(OPS)
