"""Lines of code per package (tinygrad's sz.py habit): growth should be a conscious choice.

    python tools/sz.py
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    per_pkg: Counter[str] = Counter()
    for path in sorted(ROOT.glob("aotexec/**/*.py")):
        lines = sum(1 for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#"))
        per_pkg[str(path.parent.relative_to(ROOT))] += lines
    for pkg, n in sorted(per_pkg.items()):
        print(f"{pkg:24s} {n:6d}")
    print(f"{'total':24s} {sum(per_pkg.values()):6d}")


if __name__ == "__main__":
    main()
