"""The parts of nose MXNet 1.9.1's unit tests import (nose itself does not run on Python 3.11)."""
from . import tools  # noqa: F401
