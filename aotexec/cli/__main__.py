"""``python -m aotexec.cli ...``: the same as the ``aotexec`` console script."""
import sys

from .main import main

sys.exit(main())
