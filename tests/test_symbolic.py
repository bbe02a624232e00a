"""Symbolic dimensions (aotexec.symbolic): canonical arithmetic, guards answered from the
traced binding and checked against others, pinning.  Pure Python: no compile."""
import itertools

import pytest

from aotexec.symbolic import (Dim, Trace, Unsupported, binding_env, concrete, shape_pattern, simplify,
                              symbolic_shape, tracing)

pytestmark = pytest.mark.lowering


def dims(**hints):
    return {k: Dim.symbol(k, v) for k, v in hints.items()}


def test_equal_expressions_compare_equal_however_built():
    d = dims(n=4, c=3)
    n, c = d["n"], d["c"]
    with tracing(Trace()) as t:
        assert n * c + n == n * (c + 1)
        assert (n * c * 6) // 3 == 2 * c * n
        assert (n + 1) - 1 == n
        assert 2 * n - n - n == 0 and isinstance(2 * n - n - n, int)
    assert t.guards == {}        # decided structurally: nothing recorded


def test_values_follow_the_hint_for_every_binding():
    d = dims(h=11, w=7)
    h, w = d["h"], d["w"]
    exprs = [(h + 2 - 3) // 2 + 1, (h * w) // 4, h % 3, (h - 1) // 1 + 1, -(-(h - 2) // 3)]
    for k, e in enumerate(exprs):
        for hv, wv in itertools.product(range(2, 20), range(2, 9)):
            env = {"h": hv, "w": wv}
            want = {0: (hv + 2 - 3) // 2 + 1, 1: (hv * wv) // 4, 2: hv % 3, 3: hv, 4: -(-(hv - 2) // 3)}
            assert concrete(e, env) == want[k]
        assert e.hint == concrete(e, {"h": 11, "w": 7})


def test_comparisons_record_guards_that_other_bindings_must_satisfy():
    d = dims(a=5, b=5)
    with tracing(Trace()) as t:
        assert d["a"] == d["b"]          # true for the traced binding: recorded
        assert not d["a"] > 6
    assert t.holds({"a": 3, "b": 3})
    assert not t.holds({"a": 3, "b": 4})       # a == b no longer holds
    assert not t.holds({"a": 7, "b": 7})       # a > 6 now


def test_symbols_are_at_least_one_so_signs_decide_without_guards():
    n = Dim.symbol("n", 9)
    with tracing(Trace()) as t:
        assert n != 0 and n > 0 and n >= 1 and not n < 0 and (n - 1) >= 0
    assert t.guards == {}
    with tracing(Trace()) as t:
        assert n != 1                       # broadcasting asks: a guard, n = 1 takes another program
    assert t.holds({"n": 2}) and not t.holds({"n": 1})


def test_int_pins_the_dimension_and_later_expressions_become_constant():
    n, c = Dim.symbol("n", 6), Dim.symbol("c", 3)
    with tracing(Trace()) as t:
        assert int(n) == 6                  # e.g. a lowering writing the size into an attribute
        assert (n * c) .poly != ()          # still symbolic in c
        assert simplify(n + 1) == 7 and isinstance(simplify(n + 1), int)
        assert f"{c}" == "3"                # formatting pins too
    assert t.pinned == {"n": 6, "c": 3}
    assert t.holds({"n": 6, "c": 3}) and not t.holds({"n": 7, "c": 3})


def test_comparison_outside_a_trace_is_refused():
    with pytest.raises(Unsupported):
        bool(Dim.symbol("n", 4) == Dim.symbol("m", 4))


def test_variable_shapes_keep_zero_static():
    s = symbolic_shape("x", (1, 5, 0, 7))
    assert s[2] == 0 and all(isinstance(s[i], Dim) for i in (0, 1, 3))
    assert binding_env({"x": (1, 5, 0, 7)}) == {"x:0": 1, "x:1": 5, "x:2": 0, "x:3": 7}
    assert shape_pattern({"x": (1, 5, 0, 7)}) == shape_pattern({"x": (3, 9, 0, 2)}) != \
        shape_pattern({"x": (2, 9, 1, 2)})
