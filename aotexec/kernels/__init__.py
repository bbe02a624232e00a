"""Hand-written dispatch kernels, linked into IREE's llvm-cpu executables as objects.

IREE 3.13's own f32 matmul runs at ~half of this CPU's FMA peak (PERFORMANCE.md); a kernel
written in C (``avx512_kernels.c``), built once per machine with the system C compiler
(``pipeline.kernel_build``: compile side), is called from dispatches the emitter writes as
``flow.dispatch``es of a ``stream.executable`` whose object IREE links into the module
(``matmul``). Without a C compiler, on CPUs without the kernel's ISA, or with
``AOTEXEC_KERNELS=0``, modules use IREE's codegen as before.
"""
