"""mxnet.name"""
from aotexec.name import NameManager, Prefix  # noqa: F401
