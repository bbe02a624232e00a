"""Compile side: typed graph -> entry points -> StableHLO -> IREE vmfb (needs ``iree.compiler``).

- ``plan``: the full training graph and its split into forward_train / backward;
- ``entry_points``: the functions of a program and their signatures;
- ``program``: compile (memoized in-process, cached on disk by ``compiler``);
- ``placement``: group2ctx segments;
- ``provider``: ``CompileProvider``, what executors bound from a symbol compile through.
"""
from .entry_points import PARAMETER_SUFFIXES, entry_points, resident_parameters  # noqa: F401
from .placement import Segment, compile_segments, node_contexts, segment_plan  # noqa: F401
from .plan import TRAIN_MODES, TrainingPlan, saved_activation_bytes, step_plan, training_plan  # noqa: F401
from .program import check_target_dtypes, compile_program, options_for, program_key, stats  # noqa: F401
from .provider import CompileProvider, compile_provider  # noqa: F401
