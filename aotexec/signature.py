"""The calling convention of compiled programs, shared by the compile side (which writes
it) and the runtime (which reads it); imports nothing else of aotexec's."""
from __future__ import annotations

RESIDENT_SCOPE = "aotexec"      # the IREE parameter scope of resident inputs (lowering.module)
