"""``aotexec export-run-cmd``: the ``iree-run-module`` command for an artifact's entry point
(runtime only; the command itself needs neither Python nor aotexec)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import pairs


def add_export(sub) -> None:
    p = sub.add_parser("export-run-cmd", help="print the iree-run-module command that runs an artifact without "
                                              "Python", description="Print a bash snippet running one entry point "
                       "of ARTIFACT with IREE's iree-run-module (no Python needed where it runs): the .npy files it "
                       "reads and writes, then the command. Inference on llvm-cpu reads the parameters from the "
                       "artifact's params.irpa; other entry points take them as .npy inputs (--params-dir).")
    p.add_argument("artifact", type=Path, help="artifact directory (paths in the command are relative to where "
                                               "you give it from)")
    p.add_argument("--function", "-f", default="forward_infer",
                   help="entry point: forward_infer (default), forward_train, backward, train_step")
    p.add_argument("--variant", type=int, default=0, help="shape variant (default 0)")
    p.add_argument("--target", "-t", help="llvm-cpu (default) | vulkan-spirv | cuda")
    p.add_argument("--input", "-i", action="append", metavar="KEY=FILE.npy",
                   help="an input file (repeatable); KEY is the name the snippet lists (data, residual.<name>...)")
    p.add_argument("--input-dir", default=".", help="where inputs not given by --input are (<key>.npy)")
    p.add_argument("--output-dir", default="outputs", help="where the results go (<key>.npy)")
    p.add_argument("--params-dir", help="write the parameters the function takes as inputs here, as .npy files")
    p.add_argument("--tool", default="iree-run-module", help="the iree-run-module binary to name")
    p.add_argument("--no-resident", action="store_true",
                   help="inference: pass the parameters as inputs instead of from params.irpa")
    p.add_argument("--seed", type=int, default=0, help="random ops' seed, where the function draws")
    p.set_defaults(func=export_cmd)


def export_cmd(args: argparse.Namespace) -> None:
    import aotexec as ax
    from aotexec.run_command import run_command, write_params
    art = ax.load(args.artifact)
    cmd = run_command(art, args.function, variant=args.variant, target=args.target,
                      inputs=pairs(args.input, "--input"), input_dir=args.input_dir, output_dir=args.output_dir,
                      params_dir=args.params_dir, tool=args.tool, resident=not args.no_resident, seed=args.seed)
    if cmd.params:
        write_params(art, cmd)
    print(cmd.shell())
