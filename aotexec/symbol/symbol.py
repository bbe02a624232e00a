"""``Symbol``: the user's graph handle, MXNet 1.x compatible.

A Symbol is a list of output entries over shared ``Node`` objects.  Op
constructors (``FullyConnected``, ``_plus`` via ``a + b``...) are generated from
the op registry in ``aotexec.sym``; this module holds the class itself:
listing, attributes, inference, JSON, operators and composition.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator

import numpy as np

from ..attribute import attr_key
from ..base import AotexecError, NotImplementedForSymbol, require_compiler
from ..graph import Entry, IndexedGraph, Node
from ..options import Options
from ..passes import infer as _infer
from ..util import shape_from_user, shape_to_user

# ax.sym's functions by name (op constructors and wrappers), registered by the package
# (aotexec/symbol/__init__.py): Symbol's operators and fluent methods call them from here
CONSTRUCTORS: dict[str, Callable[..., "Symbol"]] = {}
# the package's op-node builder (aotexec.symbol.create), for composing atomic symbols
CREATE: list[Callable[..., "Symbol"]] = []


class Symbol:
    """A handle to one or more outputs of a graph."""

    __slots__ = ("_outputs", "_indexed")

    def __init__(self, outputs: list[Entry]):
        self._outputs = list(outputs)
        self._indexed: IndexedGraph | None = None

    # ---- structure -------------------------------------------------------
    @property
    def _graph(self) -> IndexedGraph:
        if self._indexed is None:
            self._indexed = IndexedGraph(self._outputs)
        return self._indexed

    @property
    def name(self) -> str | None:
        """The head node's name; None for a group of several nodes (nnvm's GetName)."""
        node = self._outputs[0].node
        return node.name if all(e.node is node for e in self._outputs) else None

    @property
    def handle(self) -> "Symbol":
        return self

    def list_arguments(self) -> list[str]:
        return [n.name for n in self._graph.arguments()]

    def list_auxiliary_states(self) -> list[str]:
        return [n.name for n in self._graph.aux_states()]

    def list_inputs(self) -> list[str]:
        return [n.name for n in self._graph.variables()]

    def list_outputs(self) -> list[str]:
        return [e.name for e in self._outputs]

    def get_internals(self) -> "Symbol":
        return Symbol([Entry(n, i) for n in self._graph.nodes for i in range(n.num_visible_outputs)])

    def get_children(self) -> "Symbol | None":
        """The inputs of the head nodes (each node once: nnvm's Symbol::GetChildren)."""
        nodes = list({id(e.node): e.node for e in self._outputs}.values())
        entries = [e for n in nodes for e in n.inputs]
        return Symbol(entries) if entries else None

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self) -> Iterator["Symbol"]:
        return (Symbol([e]) for e in self._outputs)

    def __getitem__(self, index: int | str | slice) -> "Symbol":
        if isinstance(index, str):
            names = self.list_outputs()
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                raise ValueError(f"Cannot find output that matches name \"{index}\"")
            if len(hits) > 1:
                raise ValueError(f"There are multiple outputs with name \"{index}\"")
            return Symbol([self._outputs[hits[0]]])
        if isinstance(index, slice):
            return Symbol(self._outputs[index])
        if not isinstance(index, (int, np.integer)):
            raise TypeError("Symbol only support integer index to fetch i-th output")
        if not -len(self._outputs) <= index < len(self._outputs):
            raise IndexError(f"index {index} is out of range for a symbol with {len(self._outputs)} outputs")
        return Symbol([self._outputs[index]])

    # ---- attributes ------------------------------------------------------
    def attr(self, key: str) -> str | None:
        if len(self._outputs) != 1:
            return None
        return self._outputs[0].node.attrs.get(attr_key(key))

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        if recursive:
            raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated. "
                                     "Please use attr_dict instead.")
        return dict(self._outputs[0].node.attrs)     # the first output's node, as nnvm's kShallow

    def attr_dict(self) -> dict[str, dict[str, str]]:
        return {n.name: dict(n.attrs) for n in self._graph.nodes if n.attrs}

    def _set_attr(self, **kwargs: str) -> None:
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError("Set Attr only accepts string values")
            for e in self._outputs:
                e.node.attrs[attr_key(k)] = v

    # ---- inference -------------------------------------------------------
    def _known(self, args: tuple, kwargs: dict, convert) -> dict[str, Any]:
        known: dict[str, Any] = {}
        if args:
            names = self.list_arguments()
            if len(args) > len(names):
                raise AotexecError(f"too many positional arguments: the symbol has {len(names)} arguments")
            known.update({n: convert(v) for n, v in zip(names, args) if v is not None})
        inputs = set(self.list_inputs())
        for k, v in kwargs.items():
            if k not in inputs:
                raise AotexecError(f"Cannot find argument '{k}' in the symbol's inputs: {sorted(inputs)}")
            if v is not None:
                known[k] = convert(v)
        return known

    def _shape_results(self, shapes: list):
        g = self._graph
        arg = [shapes[g.row_ptr[g.nid(n)]] for n in g.arguments()]
        out = [shapes[g.eid(e)] for e in self._outputs]
        aux = [shapes[g.row_ptr[g.nid(n)]] for n in g.aux_states()]
        return arg, out, aux

    def infer_shape(self, *args, **kwargs):
        """(arg_shapes, out_shapes, aux_shapes), or (None, None, None) with a warning if undecided."""
        shapes = _infer.infer_shapes(self._graph, self._known(args, kwargs, shape_from_user))
        arg, out, aux = self._shape_results(shapes)
        from ..ops.rules import known
        if all(known(s) for s in shapes):
            return ([tuple(s) for s in arg], [tuple(s) for s in out], [tuple(s) for s in aux])
        unknowns = []
        for name, s in zip(self.list_arguments(), arg):
            if not known(s):
                unknowns.append(f"{name}: {shape_to_user(s)}")
        warnings.warn("Cannot decide shape for the following arguments (0s in shape means unknown dimensions). "
                      "Consider providing them as input:\n\t" + "\n\t".join(unknowns), stacklevel=2)
        return None, None, None

    def infer_shape_partial(self, *args, **kwargs):
        shapes = _infer.infer_shapes(self._graph, self._known(args, kwargs, shape_from_user))
        arg, out, aux = self._shape_results(shapes)
        conv = shape_to_user
        return [conv(s) for s in arg], [conv(s) for s in out], [conv(s) for s in aux]

    def _infer_type_impl(self, partial: bool, args, kwargs):
        def conv(v):
            return None if v is None else np.dtype(v)
        dtypes = _infer.infer_dtypes(self._graph, self._known(args, kwargs, conv))
        arg, out, aux = self._shape_results(dtypes)
        if not partial and any(d is None for d in dtypes):
            return None, None, None
        t = lambda d: None if d is None else d.type  # noqa: E731 (MXNet returns numpy type objects)
        return [t(d) for d in arg], [t(d) for d in out], [t(d) for d in aux]

    def infer_type(self, *args, **kwargs):
        return self._infer_type_impl(False, args, kwargs)

    def infer_type_partial(self, *args, **kwargs):
        return self._infer_type_impl(True, args, kwargs)

    # ---- serialization ---------------------------------------------------
    def tojson(self) -> str:
        from .json_format import graph_to_json
        return graph_to_json(self._outputs)

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        with open(fname, "w") as f:
            f.write(self.tojson())

    def __getstate__(self) -> dict:
        return {"handle": self.tojson()}

    def __setstate__(self, state: dict) -> None:
        from .json_format import json_to_heads
        self._outputs = json_to_heads(state["handle"])
        self._indexed = None

    def __copy__(self) -> "Symbol":
        return self.__deepcopy__(None)

    def __deepcopy__(self, memo) -> "Symbol":
        return Symbol(_clone_graph(self._outputs))

    def __reduce__(self):
        return (_from_json, (self.tojson(),))

    def __repr__(self) -> str:
        name = self.name
        return f"<Symbol {name}>" if name is not None else "<Symbol group [" + ", ".join(
            e.node.name for e in self._outputs) + "]>"

    def __str__(self) -> str:
        return self.__repr__()

    def debug_str(self) -> str:
        return str(self._graph)

    def __bool__(self):
        raise NotImplementedForSymbol(self.__bool__, "bool")

    __nonzero__ = __bool__

    # ---- composition -----------------------------------------------------
    def __call__(self, *args: "Symbol", **kwargs: Any) -> "Symbol":
        s = self.__copy__()
        s._compose(*args, **kwargs)
        return s

    def _gen_atomic_symbol(self) -> "Symbol":
        """The head operator uncomposed: same op and attributes, no inputs and no name (nnvm's
        functor; MXGenAtomicSymbolFromSymbol). Calling it with inputs applies the op to them."""
        node = self._outputs[0].node
        if any(e.node is not node for e in self._outputs):
            raise AotexecError("Generating atomic symbol from other symbol only works for nongrouped symbol.")
        if node.is_variable:
            raise AotexecError(f"Cannot generate an atomic symbol from variable '{node.name}': it has no operator")
        functor = Node(node.op, "", dict(node.attrs), [], node.params)
        return Symbol([Entry(functor, i) for i in range(functor.num_visible_outputs)])

    def _functor(self) -> Node | None:
        node = self._outputs[0].node
        return node if node.op is not None and not node.inputs and node.name == "" else None

    def _compose(self, *args: "Symbol", name: str | None = None, **kwargs: "Symbol") -> None:
        functor = self._functor()
        if functor is not None:     # an atomic symbol: the op applied, missing inputs named as MXNet names them
            self._outputs = CREATE[0](functor.op, functor.op.name.lower(), args,
                                   {**functor.attrs, **kwargs, "name": name}, unnamed=True)._outputs
            self._indexed = None
            return
        g = self._graph
        variables = {n.name: n for n in g.variables()}
        replace: dict[int, Entry] = {}
        if args and kwargs:
            raise TypeError("compose only accept input Symbols either as positional or keyword arguments, not both")
        for var, sym in zip(g.arguments(), args):
            replace[id(var)] = _single_entry(sym, var.name)
        for k, sym in kwargs.items():
            if not isinstance(sym, Symbol):
                raise TypeError(f"Compose expects Symbols, got {type(sym).__name__} for '{k}'")
            if k in variables:
                replace[id(variables[k])] = _single_entry(sym, k)
        for n in g.nodes:
            n.inputs = [replace.get(id(e.node), e) if e.node.is_variable else e for e in n.inputs]
        self._outputs = [replace.get(id(e.node), e) if e.node.is_variable else e for e in self._outputs]
        if name and len(self._outputs) == 1 and not self._outputs[0].node.is_variable:
            self._outputs[0].node.name = name
        self._indexed = None

    # ---- execution (delegates to the runtime) ----------------------------
    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None, group2ctx=None,
                    shared_arg_names=None, shared_exec=None, shared_buffer=None, *, mirror=None, **kwargs):
        """``mirror``: recompute cheap activations in backward (default: MXNET_BACKWARD_DO_MIRROR)."""
        from ..runtime.binding import simple_bind
        return simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict, group2ctx=group2ctx,
                           shared_arg_names=shared_arg_names, shared_exec=shared_exec,
                           shared_buffer=shared_buffer, provider=_compiling_provider(mirror), **kwargs)

    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None, group2ctx=None,
             shared_exec=None, *, mirror=None):
        from ..runtime.binding import bind
        return bind(self, ctx, args, args_grad=args_grad, grad_req=grad_req, aux_states=aux_states,
                    group2ctx=group2ctx, shared_exec=shared_exec, provider=_compiling_provider(mirror))

    def eval(self, ctx=None, **kwargs):
        from ..runtime.context import cpu
        ex = self.bind(ctx or cpu(), kwargs, grad_req="null")
        return ex.forward()

    # ---- Python operators ------------------------------------------------
    def _binary(self, other, sym_op: str, scalar_op: str):
        if isinstance(other, Symbol):
            return CONSTRUCTORS[sym_op](self, other)
        if isinstance(other, (int, float, np.number, bool)):
            return CONSTRUCTORS[scalar_op](self, scalar=other)
        raise TypeError(f"type {type(other).__name__} not supported")

    def _rscalar(self, other, scalar_op: str):
        if isinstance(other, (int, float, np.number, bool)):
            return CONSTRUCTORS[scalar_op](self, scalar=other)
        raise TypeError(f"type {type(other).__name__} not supported")

    def __add__(self, o): return self._binary(o, "_Plus", "_PlusScalar")
    def __radd__(self, o): return self.__add__(o)
    def __sub__(self, o): return self._binary(o, "_Minus", "_MinusScalar")
    def __rsub__(self, o): return self._rscalar(o, "_RMinusScalar")
    def __mul__(self, o): return self._binary(o, "_Mul", "_MulScalar")
    def __rmul__(self, o): return self.__mul__(o)
    def __truediv__(self, o): return self._binary(o, "_Div", "_DivScalar")
    def __rtruediv__(self, o): return self._rscalar(o, "_RDivScalar")
    __div__, __rdiv__ = __truediv__, __rtruediv__
    def __mod__(self, o): return self._binary(o, "_Mod", "_ModScalar")
    def __rmod__(self, o): return self._rscalar(o, "_RModScalar")
    def __pow__(self, o): return self._binary(o, "_Power", "_PowerScalar")
    def __rpow__(self, o): return self._rscalar(o, "_RPowerScalar")
    def __neg__(self): return self.__mul__(-1.0)
    def __abs__(self): return self.abs()
    def __eq__(self, o): return self._binary(o, "_equal", "_equal_scalar")
    def __ne__(self, o): return self._binary(o, "_not_equal", "_not_equal_scalar")
    def __gt__(self, o): return self._binary(o, "_greater", "_greater_scalar")
    def __ge__(self, o): return self._binary(o, "_greater_equal", "_greater_equal_scalar")
    def __lt__(self, o): return self._binary(o, "_lesser", "_lesser_scalar")
    def __le__(self, o): return self._binary(o, "_lesser_equal", "_lesser_equal_scalar")
    __hash__ = object.__hash__

    def __iadd__(self, o): return self.__add__(o)
    def __isub__(self, o): return self.__sub__(o)
    def __imul__(self, o): return self.__mul__(o)
    def __itruediv__(self, o): return self.__truediv__(o)

    def astype(self, dtype, **kwargs):
        return CONSTRUCTORS["Cast"](self, dtype=dtype, **kwargs)

    def split(self, *args, **kwargs):
        return CONSTRUCTORS["split"](self, *args, **kwargs)      # named split0, as MXNet


# fluent methods: x.reshape(...), x.sum(axis=...) call the op of the same name with x first
FLUENT = ("reshape", "reshape_like", "zeros_like", "ones_like", "broadcast_to", "broadcast_like",
          "broadcast_axes", "repeat", "tile", "pad", "transpose", "swapaxes", "flip", "split_v2",
          "slice", "slice_axis", "take", "one_hot", "pick", "sort", "topk", "argsort", "argmax",
          "argmin", "clip", "abs", "sign", "flatten", "expand_dims", "squeeze", "sum", "nansum",
          "prod", "nanprod", "mean", "max", "min", "norm", "round", "rint", "fix", "floor", "ceil",
          "trunc", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "degrees", "radians", "sinh",
          "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "exp", "expm1", "log", "log10", "log2",
          "log1p", "sqrt", "rsqrt", "cbrt", "square", "reciprocal", "relu", "sigmoid", "softmax",
          "log_softmax", "softmin", "dot", "stop_gradient", "identity", "slice_like", "argmax_channel",
          "shape_array", "size_array", "depth_to_space", "space_to_depth", "diag", "rcbrt")


def _fluent(op_name: str):
    def method(self, *args, **kwargs):
        if op_name in ("flatten", "expand_dims"):
            kwargs.pop("inplace", None)       # MXNet's signature has it; it changes nothing
        if op_name not in CONSTRUCTORS:
            from ..ops.registry import get_op
            get_op(op_name)                   # the "not registered in aotexec" error
        return CONSTRUCTORS[op_name](self, *args, **kwargs)
    method.__name__ = op_name
    method.__doc__ = f"Convenience fluent method for :func:`aotexec.sym.{op_name}`."
    return method


for _name in FLUENT:
    if not hasattr(Symbol, _name):
        setattr(Symbol, _name, _fluent(_name))


def _single_entry(sym: Any, what: str) -> Entry:
    if not isinstance(sym, Symbol):
        raise TypeError(f"Compose expects Symbols, got {type(sym).__name__} for '{what}'")
    if len(sym._outputs) != 1:
        raise AotexecError(f"Cannot compose '{what}' with a symbol of {len(sym._outputs)} outputs; "
                           "select one output with sym[i]")
    return sym._outputs[0]


def _clone_graph(heads: list[Entry]) -> list[Entry]:
    g = IndexedGraph(heads)
    clones: dict[int, Node] = {}
    for n in g.nodes:
        c = Node(n.op, n.name, dict(n.attrs), [Entry(clones[id(e.node)], e.index) for e in n.inputs],
                 n.params, [clones[id(d)] for d in n.control_deps])
        clones[id(n)] = c
    return [Entry(clones[id(e.node)], e.index) for e in heads]


def _from_json(text: str) -> Symbol:
    from .json_format import json_to_heads
    return Symbol(json_to_heads(text))


def _compiling_provider(mirror: bool | str | None):
    """Programs compiled on demand, with the options of this bind (the API edge).  Checked
    here, at bind, so a runtime-only install fails in one line rather than at the first
    forward, deep in the compiler's import."""
    options = Options.from_env(mirror=mirror)
    require_compiler("binding a symbol (it compiles the graph)")
    from ..pipeline.provider import CompileProvider
    return CompileProvider(options)
