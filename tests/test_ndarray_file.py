"""MXNet's NDArray files (``ax.nd.load`` / ``save``, ``ax.model`` checkpoints, ``aotexec compile --params``)
against files MXNet 1.9.1 wrote (tests/data/ndfile, from tools/make_params_reference.py): values, dtypes
and names; byte-for-byte round trips; damaged files as one clear error naming the file and byte offset."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.artifact import read_params
from aotexec.runtime.ndarray_file import V1_MAGIC, V2_MAGIC, V3_MAGIC
from cli_runner import invoke

DATA = Path(__file__).resolve().parent / "data" / "ndfile"
ND_FILES = ["arrays-dict.nd", "arrays-list.nd", "arrays-np.nd", "empty.nd", "tiny-0000.params"]
DATA_SHAPE = (2, 3, 8, 8)


def _npz(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


EXPECTED = _npz("arrays.npz")
TINY = _npz("tiny-expected.npz")


def _assert_same(got: ax.nd.NDArray, want: np.ndarray) -> None:
    a = got.asnumpy()
    assert (a.dtype, a.shape) == (want.dtype, want.shape)
    assert a.tobytes() == want.tobytes()      # bit for bit: nan, -0.0 and int extremes included


# ------------------------------------------------------------------ MXNet's files
def test_load_dict_file_gives_names_dtypes_values_in_file_order():
    got = ax.nd.load(str(DATA / "arrays-dict.nd"))
    assert isinstance(got, dict)
    assert list(got) == [str(n) for n in EXPECTED["dict_names"]]     # includes 'arg:...', 'café λ'
    for i, arr in enumerate(got.values()):
        assert isinstance(arr, ax.nd.NDArray) and arr.context == ax.cpu()
        _assert_same(arr, EXPECTED[f"dict_{i}"])
    assert {np.dtype(a.dtype).name for a in got.values()} >= {"float16", "float32", "float64", "int8", "int32",
                                                               "int64", "uint8", "bool"}


def test_load_list_file_and_empty_file():
    got = ax.nd.load(DATA / "arrays-list.nd")
    assert isinstance(got, list) and len(got) == len(EXPECTED["dict_names"])
    for i, arr in enumerate(got):
        _assert_same(arr, EXPECTED[f"list_{i}"])
    assert ax.nd.load(DATA / "empty.nd") == []


@pytest.mark.parametrize("np_shape", [True, False])
def test_load_np_shape_file(np_shape):
    """V3 arrays (0-d, zero-size) load in either mode (MXNet insists on np_shape; nothing is ambiguous)."""
    with ax.np_shape(np_shape):
        got = ax.nd.load(DATA / "arrays-np.nd")
    assert list(got) == [str(n) for n in EXPECTED["np_names"]]
    for i, arr in enumerate(got.values()):
        _assert_same(arr, EXPECTED[f"np_{i}"])
    assert got["scalar"].shape == () and got["empty"].shape == (2, 0)


def test_load_frombuffer_and_ctx():
    buf = (DATA / "arrays-dict.nd").read_bytes()
    got = ax.nd.load_frombuffer(buf, ctx=ax.cpu(0))
    _assert_same(got["int64"], EXPECTED["dict_5"])
    with pytest.raises(TypeError):
        ax.nd.load_frombuffer(12)


# ------------------------------------------------------------------ round trips and writing
@pytest.mark.parametrize("name", ND_FILES)
def test_round_trip_is_byte_for_byte(tmp_path, name):
    original = (DATA / name).read_bytes()
    with ax.np_shape(name == "arrays-np.nd"):     # MXNet's rule: V3 arrays are written under np_shape
        ax.nd.save(tmp_path / "again", ax.nd.load(DATA / name))
    assert (tmp_path / "again").read_bytes() == original


def test_save_fresh_arrays_all_dtypes(tmp_path):
    values = {str(n): EXPECTED[f"dict_{i}"] for i, n in enumerate(EXPECTED["dict_names"])}
    ax.nd.save(tmp_path / "d.nd", {k: ax.nd.array(v) for k, v in values.items()})
    assert (tmp_path / "d.nd").read_bytes() == (DATA / "arrays-dict.nd").read_bytes()
    ax.nd.save(tmp_path / "l.nd", list(values.values()))            # numpy values are accepted too
    assert (tmp_path / "l.nd").read_bytes() == (DATA / "arrays-list.nd").read_bytes()
    ax.nd.save(tmp_path / "one.nd", ax.nd.array([1, 2]))               # one NDArray: a list of one
    (one,) = ax.nd.load(tmp_path / "one.nd")
    _assert_same(one, np.array([1, 2], np.float32))


def test_save_refuses_what_mxnet_cannot_read(tmp_path):
    f = tmp_path / "x.nd"
    with pytest.raises(TypeError, match="dict str->NDArray"):
        ax.nd.save(f, {1: ax.nd.zeros((2,))})
    with pytest.raises(TypeError, match="dict str->NDArray"):
        ax.nd.save(f, [ax.nd.zeros((2,)), "nope"])
    with pytest.raises(ValueError, match="needs to either be a NDArray"):
        ax.nd.save(f, (ax.nd.zeros((2,)),))
    with pytest.raises(ax.AotexecError, match="'w'.*not int16"):
        ax.nd.save(f, {"w": np.zeros(3, np.int16)})
    with pytest.raises(ax.AotexecError, match="0-d array.*np_shape"):
        ax.nd.save(f, [np.array(1, np.float32)])
    assert not f.exists()                      # refused before the file was opened


def _header(count: int) -> bytes:
    return struct.pack("<QQQ", 0x112, 0, count)


def test_legacy_v1_and_pre_v1_arrays_load(tmp_path):
    """Files of MXNet before NDArray V2: V1 (i64 dims) and the magic-less form (u32 ndim and dims)."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    v1 = struct.pack("<Iiqq", V1_MAGIC, 2, 2, 3)
    pre = struct.pack("<III", 2, 2, 3)
    body = b"".join(head + struct.pack("<iii", 1, 0, 0) + data.tobytes() for head in (v1, pre))
    (tmp_path / "old.params").write_bytes(_header(2) + body + struct.pack("<Q", 0))
    got = ax.nd.load(tmp_path / "old.params")
    for arr in got:
        _assert_same(arr, data)


# ------------------------------------------------------------------ checkpoints
def test_load_checkpoint_matches_the_npz():
    sym, args, aux = ax.model.load_checkpoint(str(DATA / "tiny"), 0)
    assert sym.list_arguments() == ["data", *[k[4:] for k in TINY if k.startswith("arg:")], "softmax_label"]
    assert set(args) == {k[4:] for k in TINY if k.startswith("arg:")}
    assert list(aux) == sym.list_auxiliary_states() == [k[4:] for k in TINY if k.startswith("aux:")]
    for k, v in {**args, **aux}.items():
        _assert_same(v, TINY[("aux:" if k in aux else "arg:") + k])


def test_save_checkpoint_round_trips(tmp_path):
    sym, args, aux = ax.model.load_checkpoint(str(DATA / "tiny"), 0)
    ax.model.save_checkpoint(str(tmp_path / "copy"), 12, sym, args, aux)
    assert (tmp_path / "copy-0012.params").read_bytes() == (DATA / "tiny-0000.params").read_bytes()
    again = ax.sym.load(str(tmp_path / "copy-symbol.json"))
    assert again.tojson() == sym.tojson()
    # numpy values and symbol=None (parameters only), as MXNet allows
    ax.model.save_checkpoint(str(tmp_path / "np"), 0, None, {k[4:]: v for k, v in TINY.items() if k[:4] == "arg:"},
                             {k[4:]: v for k, v in TINY.items() if k[:4] == "aux:"})
    assert not (tmp_path / "np-symbol.json").exists()
    assert ax.model.load_params(str(tmp_path / "np"), 0)[1].keys() == aux.keys()


def test_load_params_refuses_non_checkpoints(tmp_path):
    shutil.copy(DATA / "arrays-list.nd", tmp_path / "l-0000.params")
    with pytest.raises(ax.AotexecError, match="unnamed arrays"):
        ax.model.load_params(str(tmp_path / "l"), 0)
    shutil.copy(DATA / "arrays-dict.nd", tmp_path / "d-0000.params")
    with pytest.raises(ax.AotexecError, match="'float16' has no 'arg:' or 'aux:' prefix"):
        ax.model.load_params(str(tmp_path / "d"), 0)


def test_read_params_by_content(tmp_path):
    assert read_params(DATA / "tiny-0000.params").keys() == {k for k in TINY if k[:4] in ("arg:", "aux:")}
    assert read_params(DATA / "tiny-expected.npz").keys() == TINY.keys()
    np.save(tmp_path / "w.npy", np.zeros(3))
    with pytest.raises(ax.AotexecError, match="single-array numpy .npy file"):
        read_params(tmp_path / "w.npy")
    with pytest.raises(ax.AotexecError, match="unnamed arrays"):
        read_params(DATA / "arrays-list.nd")
    with pytest.raises(ax.AotexecError, match="not a parameter file"):
        read_params(DATA / "tiny-symbol.json")


# ------------------------------------------------------------------ compile --params, copy_params_from
@pytest.fixture(scope="module")
def reference_output() -> np.ndarray:
    """The checkpoint's net bound directly with the npz's parameters."""
    sym = ax.sym.load(str(DATA / "tiny-symbol.json"))
    ex = sym.simple_bind(ax.cpu(), grad_req="null", data=DATA_SHAPE)
    ex.copy_params_from({k[4:]: v for k, v in TINY.items() if k[:4] == "arg:"},
                        {k[4:]: v for k, v in TINY.items() if k[:4] == "aux:"})
    out = ex.forward(data=TINY["data"])[0].asnumpy()
    np.testing.assert_allclose(out, TINY["output"], rtol=1e-5, atol=1e-6)      # MXNet's own output
    # what load_checkpoint gives goes straight into copy_params_from
    _, args, aux = ax.model.load_checkpoint(str(DATA / "tiny"), 0)
    ex.copy_params_from({k: ax.nd.zeros(v.shape) for k, v in args.items()}, aux)
    assert not np.array_equal(ex.forward(data=TINY["data"])[0].asnumpy(), out)
    ex.copy_params_from(args, aux)
    np.testing.assert_array_equal(ex.forward(data=TINY["data"])[0].asnumpy(), out)
    with pytest.raises(ax.AotexecError, match="shape mismatch.*fc0_bias of shape \\(3,\\)"):
        ex.copy_params_from({"fc0_bias": ax.nd.zeros((3,))})
    return out


def test_cli_compile_with_mxnet_params(tmp_path, reference_output):
    out = tmp_path / "tiny"
    res = invoke(["compile", str(DATA / "tiny-symbol.json"), "--shape", "data=2,3,8,8",
                  "--params", str(DATA / "tiny-0000.params"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    art = ax.load(out)
    for k, v in {**art.arg_params, **art.aux_params}.items():
        np.testing.assert_array_equal(v, TINY[("aux:" if k in art.aux_params else "arg:") + k])
    got = art.simple_bind(ax.cpu()).forward(data=TINY["data"])[0].asnumpy()
    np.testing.assert_allclose(got, reference_output, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make,message", [
    (lambda d: np.save(d / "p.npy", np.zeros(3)) or d / "p.npy", "single-array numpy .npy file"),
    (lambda d: d / "missing.params", "does not exist"),
    (lambda d: _write(d / "t.params", (DATA / "tiny-0000.params").read_bytes()[:-40]), "byte offset"),
    (lambda d: _write(d / "l.params", (DATA / "arrays-list.nd").read_bytes()), "unnamed arrays"),
])
def test_cli_refuses_bad_params_before_compiling(tmp_path, make, message):
    out = tmp_path / "art"
    res = invoke(["compile", str(DATA / "tiny-symbol.json"), "--shape", "data=2,3,8,8",
                  "--params", str(make(tmp_path)), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert "compiling" not in res.output and not out.exists()
    assert len(res.output.strip().splitlines()) == 1


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ damaged files
# one float32 (2, 3) array named "w": header 0-24, magic 24, storage 28, ndim 32, dims 36-52,
# device 52-60, type flag 60, data 64-88, name count 88, name length 96, name 104, end 105
ONE = _header(1) + struct.pack("<Iii2q", V2_MAGIC, 0, 2, 2, 3) + struct.pack("<iii", 1, 0, 0) + \
    np.arange(6, dtype=np.float32).tobytes() + struct.pack("<QQ", 1, 1) + b"w"


def _patch(buf: bytes, at: int, fmt: str, value: int) -> bytes:
    raw = struct.pack("<" + fmt, value)
    return buf[:at] + raw + buf[at + len(raw):]


@pytest.mark.parametrize("data,offset,message", [
    (_patch(ONE, 0, "Q", 0x113), 0, "0x113 is not MXNet's NDArray list magic"),
    (_patch(ONE, 16, "Q", 2**40), 16, "1099511627776 arrays cannot fit"),
    (_patch(ONE, 24, "I", 0xDEADBEEF), 24, "unknown NDArray magic 0xdeadbeef"),
    (_patch(ONE, 28, "i", 1), 28, "row_sparse (sparse) arrays are not supported"),
    (_patch(ONE, 28, "i", 9), 28, "unknown storage type 9"),
    (_patch(ONE, 32, "i", -5), 32, "negative ndim -5"),
    (_patch(ONE, 32, "i", 2**30), 36, "needs 8589934592 bytes"),
    (_patch(ONE, 36, "q", -3), 36, "negative dimension"),
    (_patch(ONE, 36, "q", 2**40), 64, "needs 13194139533312 bytes"),
    (_patch(ONE, 52, "i", 9), 52, "unknown device (9, 0)"),
    (_patch(ONE, 60, "i", 12), 60, "bfloat16"),
    (_patch(ONE, 60, "i", 99), 60, "unknown type flag 99"),
    (_patch(ONE, 88, "Q", 2**62), 88, "names cannot fit"),
    (_patch(ONE, 88, "Q", 0), 96, "9 unexpected bytes"),
    (_patch(ONE, 96, "Q", 2**60), 104, "needs 1152921504606846976 bytes"),
    (_patch(ONE, 104, "B", 0xFF), 96, "not UTF-8"),
    (ONE + b"\0", 105, "1 unexpected bytes"),
    (ONE[:88] + struct.pack("<QQ", 2, 1) + b"w" + struct.pack("<Q", 1) + b"v", 88, "2 names for 1 arrays"),
    (_header(1) + struct.pack("<Iii", V2_MAGIC, 0, 0) + struct.pack("<Q", 0), 36, "a none array"),
    (_header(1) + struct.pack("<Iii", V3_MAGIC, 0, -1) + struct.pack("<Q", 0), 32, "a none array"),
    ((DATA / "tiny-expected.npz").read_bytes(), 0, "numpy .npz"),
])
def test_damaged_file_is_one_clear_error(tmp_path, data, offset, message):
    f = tmp_path / "bad.params"
    f.write_bytes(data)
    with pytest.raises(ax.AotexecError) as e:
        ax.nd.load(f)
    msg = str(e.value)
    assert msg.startswith(f"Invalid NDArray file format: {f}: ") and "\n" not in msg
    assert f"at byte offset {offset}:" in msg and message in msg, msg


def test_every_truncation_is_refused(tmp_path):
    f = tmp_path / "cut.params"
    for name in ("arrays-dict.nd", "tiny-0000.params"):
        full = (DATA / name).read_bytes()
        for n in range(len(full)):
            f.write_bytes(full[:n])
            with pytest.raises(ax.AotexecError, match=f"^Invalid NDArray file format: {f}: .* at byte offset"):
                ax.nd.load(f)


def test_missing_file_and_bad_fname():
    with pytest.raises(ax.AotexecError, match="cannot read NDArray file .*nope.nd"):
        ax.nd.load("nope.nd")
    with pytest.raises(TypeError, match="fname required to be a string"):
        ax.nd.load(3)


def test_fuzz_truncations_and_byte_flips_only_raise_the_clear_error(tmp_path):
    """Seeded damage of real files: each either loads or raises AotexecError naming file and offset."""
    rng = np.random.default_rng(18)
    sources = [(DATA / n).read_bytes() for n in ND_FILES if n != "empty.nd"]
    f = tmp_path / "fuzz.params"
    outcomes = {"loaded": 0, "refused": 0}
    for case in range(400):
        buf = bytearray(sources[case % len(sources)])
        if case % 3 != 1:       # flip 1-4 bytes
            for at in rng.integers(0, len(buf), rng.integers(1, 5)):
                buf[at] ^= int(rng.integers(1, 256))
        if case % 3 != 0:       # truncate
            del buf[rng.integers(0, len(buf)):]
        f.write_bytes(bytes(buf))
        try:
            with ax.np_shape(case % 2 == 0):
                got = ax.nd.load(f)
        except ax.AotexecError as e:
            assert str(e).startswith(f"Invalid NDArray file format: {f}: ") and "byte offset" in str(e), str(e)
            assert "\n" not in str(e)
            outcomes["refused"] += 1
        else:
            assert isinstance(got, (list, dict))
            outcomes["loaded"] += 1
    assert outcomes["loaded"] > 20 and outcomes["refused"] > 200, outcomes
