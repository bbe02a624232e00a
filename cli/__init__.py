"""The ``aotexec`` command line (typer)."""
