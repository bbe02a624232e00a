"""Access to the MXNet 1.9.1 golden cases copied into tests/data/golden."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).parent / "data" / "golden"


@dataclass
class Case:
    id: str
    path: Path
    meta: dict

    @property
    def symbol_json(self) -> str:
        return (self.path / "symbol.json").read_text()

    @property
    def expected_json(self) -> dict:
        return json.loads((self.path / "expected.json").read_text())

    def inputs(self) -> dict[str, np.ndarray]:
        with np.load(self.path / "inputs.npz", allow_pickle=False) as f:
            return {k: f[k] for k in f.files}

    def expected(self) -> dict[str, np.ndarray]:
        with np.load(self.path / "expected.npz", allow_pickle=False) as f:
            return {k: f[k] for k in f.files}


def all_cases() -> list[Case]:
    index = json.loads((GOLDEN / "index.json").read_text())
    return [Case(c["id"], GOLDEN / c["id"], json.loads((GOLDEN / c["id"] / "meta.json").read_text()))
            for c in index["cases"]]


def cases(*kinds: str, categories: str = "ABCDE") -> list[Case]:
    return [c for c in all_cases() if (not kinds or c.meta["kind"] in kinds) and c.meta["category"] in categories]


def ids(cs: list[Case]) -> list[str]:
    return [c.id for c in cs]
