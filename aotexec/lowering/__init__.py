"""Lowering of typed graphs to StableHLO MLIR text."""
