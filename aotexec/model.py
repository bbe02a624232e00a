"""MXNet's checkpoints (``mx.model``): ``prefix-symbol.json`` and ``prefix-%04d.params``, an NDArray
file whose keys are ``arg:<name>`` for arguments and ``aux:<name>`` for auxiliary states."""
from __future__ import annotations

import logging
from typing import Any

from .base import AotexecError
from .runtime.context import cpu
from .runtime.ndarray import NDArray
from .runtime.ndarray_file import load as nd_load
from .runtime.ndarray_file import save as nd_save
from .symbol import Symbol
from .symbol import load as sym_load

log = logging.getLogger(__name__)


def _params_file(prefix: str, epoch: int) -> str:
    return "%s-%04d.params" % (prefix, epoch)


def save_checkpoint(prefix: str, epoch: int, symbol: Symbol | None, arg_params: dict[str, Any],
                    aux_params: dict[str, Any], remove_amp_cast: bool = True) -> None:
    """Write ``prefix-symbol.json`` (unless ``symbol`` is None) and ``prefix-%04d.params``
    (values: NDArray or numpy arrays), files MXNet's ``load_checkpoint`` reads."""
    if symbol is not None:
        symbol.save("%s-symbol.json" % prefix, remove_amp_cast=remove_amp_cast)
    on_cpu = lambda v: v.as_in_context(cpu()) if isinstance(v, NDArray) else v  # noqa: E731 (MXNet records cpu)
    save_dict = {f"arg:{k}": on_cpu(v) for k, v in arg_params.items()}
    save_dict.update({f"aux:{k}": on_cpu(v) for k, v in aux_params.items()})
    nd_save(_params_file(prefix, epoch), save_dict)
    log.info('Saved checkpoint to "%s"', _params_file(prefix, epoch))


def split_params(save_dict: dict[str, Any] | list, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``arg:``/``aux:`` keys -> (arg_params, aux_params); other prefixes are skipped, as in MXNet."""
    if isinstance(save_dict, list):
        if save_dict:
            raise AotexecError(f"{source} holds a list of {len(save_dict)} unnamed arrays, not a checkpoint's "
                               "arg:/aux: parameters")
        save_dict = {}
    arg_params: dict[str, Any] = {}
    aux_params: dict[str, Any] = {}
    for k, v in save_dict.items():
        tp, sep, name = k.partition(":")
        if not sep:
            raise AotexecError(f"{source}: key {k!r} has no 'arg:' or 'aux:' prefix (not a checkpoint's "
                               "parameters; load it with ax.nd.load)")
        if tp == "arg":
            arg_params[name] = v
        elif tp == "aux":
            aux_params[name] = v
    return arg_params, aux_params


def load_params(prefix: str, epoch: int) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    fname = _params_file(prefix, epoch)
    save_dict = nd_load(fname)
    if not save_dict:
        log.warning("Params file '%s' is empty", fname)
    return split_params(save_dict, fname)


def load_checkpoint(prefix: str, epoch: int) -> tuple[Symbol, dict[str, NDArray], dict[str, NDArray]]:
    """``(symbol, arg_params, aux_params)`` from ``prefix-symbol.json`` and ``prefix-%04d.params``."""
    symbol = sym_load("%s-symbol.json" % prefix)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params
