"""The ``aotexec`` command line: ``compile | inspect | run | bench | export-run-cmd``.

Built on the standard library's argparse so that a runtime-only install (numpy and
iree-base-runtime) runs ``inspect``, ``run`` and ``bench`` on artifacts; ``compile``
needs ``aotexec[compiler]`` and says so.  Entry point: ``aotexec.cli.main:main``.
"""
