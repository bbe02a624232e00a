"""MXNet symbol JSON: read (1.x and pre-1.0 files) and write (loadable by MXNet 1.9).

Format: ``nodes`` (op, name, attrs, inputs as [node, output, version]),
``arg_nodes``, ``node_row_ptr``, ``heads``, ``attrs.mxnet_version``.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ..attribute import attr_key
from ..base import AotexecError
from ..graph import Entry, IndexedGraph, Node
from ..ops.params import parse_params
from ..ops.registry import get_op
from ..util import is_np_shape

MXNET_VERSION = 10901


def graph_to_json(heads: list[Entry]) -> str:
    g = IndexedGraph(heads)
    nodes = []
    for n in g.nodes:
        item: dict[str, Any] = {"op": n.op_name, "name": n.name}
        if n.attrs:
            item["attrs"] = dict(sorted(n.attrs.items()))
        aux = set(n.aux_positions())  # MXNet bumps the version of variables an op mutates
        item["inputs"] = [[g.nid(e.node), e.index, int(i in aux)] for i, e in enumerate(n.inputs)]
        if n.control_deps:
            item["control_deps"] = [g.nid(c) for c in n.control_deps]
        nodes.append(item)
    doc = {
        "nodes": nodes,
        "arg_nodes": [i for i, n in enumerate(g.nodes) if n.is_variable],
        "node_row_ptr": g.row_ptr,
        "heads": [[g.nid(h.node), h.index, 0] for h in heads],
        "attrs": {"mxnet_version": ["int", MXNET_VERSION]},
    }
    if is_np_shape():   # MXNet marks graphs saved under numpy shape semantics
        doc["attrs"] = {"is_np_shape": ["int", 1], **doc["attrs"]}
    text = json.dumps(doc, indent=2)
    # keep [node, index, version] triples and id lists on one line, as MXNet writes them
    return re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]",
                  lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)


def _node_attrs(item: dict, where: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    # pre-1.0 files keep op parameters in "param" and hidden attributes in "attr"
    for key in ("param", "attr", "attrs"):
        val = item.get(key)
        if val is None:
            continue
        if not isinstance(val, dict):
            raise AotexecError(f"malformed symbol JSON: '{key}' of {where} must be an object")
        if key == "attr":   # pre-1.0 files spell hidden keys bare (ctx_group, lr_mult)
            attrs.update({attr_key(str(k)): str(v) for k, v in val.items()})
        else:
            attrs.update({str(k): str(v) for k, v in val.items()})
    return attrs


def _index_list(v: Any) -> bool:
    """[node, output, (version)]: ints (a JSON true is not a node id)."""
    return isinstance(v, list) and bool(v) and all(type(x) is int for x in v)


def _list_of(doc: dict, key: str, where: str) -> list:
    val = doc.get(key, [])
    if not isinstance(val, list):
        raise AotexecError(f"malformed symbol JSON: '{key}' of {where} must be a list")
    return val


def json_to_heads(text: str) -> list[Entry]:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise AotexecError(f"malformed symbol JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or "heads" not in doc:
        raise AotexecError("malformed symbol JSON: expected an object with 'nodes' and 'heads' "
                           "(an MXNet *-symbol.json file)")
    nodes: list[Node] = []
    for i, item in enumerate(doc["nodes"]):
        if not isinstance(item, dict) or "op" not in item or "name" not in item:
            raise AotexecError(f"malformed symbol JSON: node {i} needs 'op' and 'name'")
        name, op_name = str(item["name"]), str(item["op"])
        where = f"node {i} ('{name}')"
        attrs = _node_attrs(item, where)
        inputs = []
        for inp in _list_of(item, "inputs", where):
            if not _index_list(inp) or len(inp) < 2:
                raise AotexecError(f"malformed symbol JSON: bad input {inp!r} of {where}")
            src, idx = inp[0], inp[1]
            if not 0 <= src < i:
                raise AotexecError(f"malformed symbol JSON: {where} reads node {src}, which is not an earlier node")
            if not 0 <= idx < nodes[src].num_outputs:
                raise AotexecError(f"malformed symbol JSON: {where} reads output {idx} of '{nodes[src].name}', "
                                   f"which has {nodes[src].num_outputs} outputs")
            inputs.append(Entry(nodes[src], idx))
        if op_name == "null":
            nodes.append(Node(None, name, attrs))
            continue
        op = get_op(op_name, name)
        params = parse_params(op.params, attrs, op.name, name)
        node = Node(op, name, attrs, inputs, params)
        expected = node.input_names()
        if len(inputs) != len(expected):
            raise AotexecError(f"malformed symbol JSON: {where} ({op.name}) has {len(inputs)} inputs, "
                               f"expected {len(expected)} ({', '.join(expected)})")
        nodes.append(node)
        for c in _list_of(item, "control_deps", where) if item.get("control_deps") is not None else []:
            if type(c) is not int or not 0 <= c < i:
                raise AotexecError(f"malformed symbol JSON: {where} has control dependency {c!r}, not an earlier node")
            node.control_deps.append(nodes[c])
    heads = []
    for h in _list_of(doc, "heads", "the symbol"):
        if not _index_list(h) or not 0 <= h[0] < len(nodes):
            raise AotexecError(f"malformed symbol JSON: bad head {h!r}")
        idx = h[1] if len(h) > 1 else 0
        if not 0 <= idx < nodes[h[0]].num_outputs:
            raise AotexecError(f"malformed symbol JSON: head {h!r} names a missing output")
        heads.append(Entry(nodes[h[0]], idx))
    _check_unique_variables(heads)
    return heads


def _check_unique_variables(heads: list[Entry]) -> None:
    """Two different variables of one name would bind one array (arg_dict is by name) while
    the compiled code takes two: refused here, at load, not deep in IREE at the first call."""
    seen: dict[str, int] = {}
    g = IndexedGraph(heads)
    for i, n in enumerate(g.nodes):
        if n.is_variable:
            if n.name in seen:
                raise AotexecError(f"malformed symbol JSON: nodes {seen[n.name]} and {i} are two variables named "
                                   f"'{n.name}'; argument and aux state names must be unique")
            seen[n.name] = i
