"""``ax.rnn``: MXNet's symbolic recurrent cells (``mx.rnn``): per-step cells unrolled into
ordinary graphs, and ``FusedRNNCell`` for the single ``RNN`` op."""
from .cells import (BaseRNNCell, BidirectionalCell, DropoutCell, GRUCell, LSTMCell, ModifierCell,  # noqa: F401
                    ResidualCell, RNNCell, RNNParams, SequentialRNNCell, ZoneoutCell)
from .fused import FusedRNNCell  # noqa: F401

__all__ = ["BaseRNNCell", "BidirectionalCell", "DropoutCell", "FusedRNNCell", "GRUCell", "LSTMCell", "ModifierCell",
           "ResidualCell", "RNNCell", "RNNParams", "SequentialRNNCell", "ZoneoutCell"]
