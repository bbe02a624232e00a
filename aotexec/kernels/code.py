"""What a module embeds of the kernels (``pipeline.kernel_build`` makes it, ``matmul`` emits it)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Kernels:
    """The kernels' x86-64 object file. IREE 3.13 links an object into an executable from a
    path only (one given as data crashed or went unlinked), so modules name this file, whose
    name holds the hash of its source and compiler. ``deep_products``: products whose
    elementwise consumers IREE would fuse go to the kernel too when deep (``matmul``);
    ``epilogues``: an inference function's, where those consumers fold into the call
    (``epilogue``): such products go to the kernel from a smaller depth, whatever
    ``deep_products`` says."""
    object_path: Path
    deep_products: bool = True
    epilogues: bool = False
    deep_min_depth: int = 0
