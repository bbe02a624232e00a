"""mxnet.attribute"""
from aotexec.attribute import AttrScope  # noqa: F401
