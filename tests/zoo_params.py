"""Parameters of the model-zoo reference nets too large to commit (vgg11_bn, inceptionv3):
generated from a seed with numpy's legacy RandomState, whose stream is the same on every numpy
version, so tools/make_zoo_reference.py (in MXNet's virtualenv) and the tests build the same
values.  Shared by both; numpy only."""
from __future__ import annotations

import numpy as np

SEED = 0
SAMPLE = 4096      # gradient entries kept per parameter above FULL elements
FULL = 65536
# a gradient whose true value is zero (a bias or beta followed by BatchNorm) is rounding noise:
# its error is measured against FLOOR x the net's largest gradient entry instead of its own size
FLOOR = 1e-6


def _init(rng: np.random.RandomState, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name.endswith(("_weight",)) and len(shape) >= 2:   # Xavier uniform, MXNet's "avg" factor
        field = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * field, shape[0] * field
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape).astype(np.float32)
    if name.endswith(("_gamma", "_running_var", "_moving_var")):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return rng.uniform(-0.1, 0.1, shape).astype(np.float32)   # biases, betas, running means


def seeded_params(args: dict[str, tuple[int, ...]], aux: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """``arg:<name>`` / ``aux:<name>`` -> values, drawn in sorted name order from one stream."""
    rng = np.random.RandomState(SEED)
    shapes = {f"arg:{k}": tuple(v) for k, v in args.items()} | {f"aux:{k}": tuple(v) for k, v in aux.items()}
    return {key: _init(rng, key.split(":", 1)[1], shapes[key]) for key in sorted(shapes)}


def sample_index(name: str, size: int) -> np.ndarray | None:
    """Which flat entries of a gradient are kept (None: all of them)."""
    if size <= FULL:
        return None
    seed = int.from_bytes(name.encode()[-4:].rjust(4, b"\0"), "little") ^ size
    return np.sort(np.random.RandomState(seed % 2**32).randint(0, size, SAMPLE))


def relative_error(actual: np.ndarray, truth: np.ndarray, floor: float) -> float:
    """||actual - truth|| / ||truth||, with ``truth``'s entries counted as at least ``floor``
    in size (``FLOOR`` x the net's largest gradient entry) so that true zeros compare as noise."""
    diff = float(np.linalg.norm(actual.astype(np.float64) - truth))
    return diff / max(float(np.linalg.norm(truth.astype(np.float64))), floor * np.sqrt(truth.size))
