"""The StableHLO text builder moved to ``aotexec.emitter`` (it knows nothing of graphs, and
ops build on it); this name stays for scripts that still import it (benchmarks/levers.py)."""
from ..emitter import *  # noqa: F401,F403
