"""``ax.mod.Module``: MXNet 1.9.1's symbolic training module (python/mxnet/module/module.py) on
one aotexec executor: bind by data / label shapes, initialize or set parameters, run forward
and backward on ``DataBatch``es (rebinding by ``reshape`` when a batch's shapes change),
update with an ``ax.optimizer``, save and load checkpoints.

One context per module (MXNet's data parallelism across a context list is not provided:
a list of one context is accepted).  ``fit`` / ``score`` / ``predict`` run over any
``ax.io.DataIter`` (``NDArrayIter``) with ``ax.metric`` metrics, MXNet's loops and log lines."""
from __future__ import annotations

import logging
import time
import warnings
from collections import namedtuple
from typing import Any, Sequence

import numpy as np


from . import metric as metrics, model, optimizer as opt
from .base import AotexecError
from .initializer import InitDesc, Initializer, Uniform
from .io import DataBatch, DataDesc
from .runtime.context import Context, cpu
from .runtime.ndarray import NDArray
from .symbol import Symbol

log = logging.getLogger(__name__)
BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def _check_names(symbol: Symbol, names: Sequence[str], kind: str, throw: bool) -> None:
    """MXNet's _check_input_names: every data name must be an argument; label names only warn."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args if not a.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = (f"\033[91mYou created Module with Module(..., {kind}_names={list(names)}) but input with name "
               f"'{name}' is not found in symbol.list_arguments(). Did you mean one of:\n\t"
               + "\n\t".join(candidates) + "\033[0m")
        if throw:
            raise ValueError(msg)
        warnings.warn(msg)


def _descs(shapes: Sequence | None) -> list[DataDesc]:
    return [s if isinstance(s, DataDesc) else DataDesc(*s) for s in (shapes or [])]


class Module:
    def __init__(self, symbol: Symbol, data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",), logger: logging.Logger = log,
                 context: Context | Sequence[Context] | None = None, work_load_list: Any = None,
                 fixed_param_names: Sequence[str] | None = None, state_names: Sequence[str] | None = None,
                 group2ctxs: Any = None, compression_params: Any = None):
        contexts = [context or cpu()] if not isinstance(context, (list, tuple)) else list(context)
        if len(contexts) != 1:
            raise AotexecError(f"Module runs on one context; got {contexts} (aotexec has no data parallelism "
                               "across a context list: bind one Module per device and share parameters)")
        self._context, self.logger, self._symbol = contexts[0], logger, symbol
        self._data_names = list(data_names or [])
        self._label_names = list(label_names or [])
        self._state_names = list(state_names or [])
        self._fixed_param_names = list(fixed_param_names or [])
        _check_names(symbol, self._data_names, "data", True)
        _check_names(symbol, self._label_names, "label", False)
        _check_names(symbol, self._state_names, "state", True)
        _check_names(symbol, self._fixed_param_names, "fixed_param", True)
        inputs = set(self._data_names + self._label_names + self._state_names)
        self._param_names = [n for n in symbol.list_arguments() if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self.binded = self.for_training = self.inputs_need_grad = False
        self.params_initialized = self.optimizer_initialized = False
        self._exec: Any = None
        self._data_shapes: list[DataDesc] = []
        self._label_shapes: list[DataDesc] | None = None
        self._updater: opt.Updater | None = None
        self._optimizer: opt.Optimizer | None = None
        self._preload: tuple[dict, dict] | None = None     # Module.load's parameters, set at bind
        self._preload_states: str | None = None

    # --- names and shapes
    @property
    def symbol(self) -> Symbol:
        return self._symbol

    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list[DataDesc]:
        self._need("binded")
        return self._data_shapes

    @property
    def label_shapes(self) -> list[DataDesc] | None:
        self._need("binded")
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        self._need("binded")
        return [(n, o.shape) for n, o in zip(self._output_names, self._exec.outputs)]

    def _need(self, *states: str) -> None:
        what = {"binded": "call bind before", "params_initialized": "call init_params before",
                "optimizer_initialized": "call init_optimizer before"}
        for state in states:
            if not getattr(self, state):
                raise AssertionError(f"{what[state]} using the module ({state} is False)")

    # --- binding
    def _grad_reqs(self, grad_req: Any, arg_names: list[str]) -> dict[str, str]:
        """MXNet's DataParallelExecutorGroup: parameters get ``grad_req`` (fixed ones 'null'), data
        inputs get it only with ``inputs_need_grad``, labels and states never."""
        if not self.for_training:
            return {n: "null" for n in arg_names}
        if isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(arg_names):
                raise AssertionError(f"grad_req has {len(grad_req)} entries for {len(arg_names)} arguments")
            return dict(zip(arg_names, grad_req))
        if not isinstance(grad_req, (str, dict)):
            raise ValueError("grad_req must be one of str, list, tuple, or dict.")
        default = grad_req if isinstance(grad_req, str) else "write"
        reqs = {}
        for name in arg_names:
            if name in self._param_names:
                reqs[name] = "null" if name in self._fixed_param_names else default
            elif name in self._data_names:
                reqs[name] = default if self.inputs_need_grad else "null"
            else:
                reqs[name] = "null"
        if isinstance(grad_req, dict):
            reqs.update(grad_req)
        return reqs

    def bind(self, data_shapes: Sequence, label_shapes: Sequence | None = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module: "Module | None" = None,
             grad_req: Any = "write") -> None:
        if self.binded and not force_rebind:
            warnings.warn("Already bound, ignoring bind()", stacklevel=2)
            return
        kept = self.get_params() if self.binded and self.params_initialized else None
        if not for_training and inputs_need_grad:
            raise AssertionError("inputs_need_grad needs for_training")
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._data_shapes = _descs(data_shapes)
        self._label_shapes = _descs(label_shapes) if label_shapes else None
        given = self._data_shapes + (self._label_shapes or [])
        if [d.name for d in self._data_shapes] != self._data_names:
            raise ValueError(f"data_shapes name {[d.name for d in self._data_shapes]} do not match data_names "
                             f"{self._data_names}")
        shapes = {d.name: d.shape for d in given}
        types = {d.name: d.dtype for d in given}
        arg_names = self._symbol.list_arguments()
        self._exec = self._symbol.simple_bind(self._context, grad_req=self._grad_reqs(grad_req, arg_names),
                                              type_dict=types, **shapes)
        self.binded = True
        if shared_module is not None and shared_module.params_initialized:
            self.set_params(*shared_module.get_params())
        elif kept is not None:
            self.set_params(*kept)
        elif self._preload is not None:
            self.set_params(*self._preload)

    def reshape(self, data_shapes: Sequence, label_shapes: Sequence | None = None) -> None:
        """New input shapes for the bound executor (arrays shared, MXNet's reshape rules)."""
        self._need("binded")
        self._data_shapes = _descs(data_shapes)
        self._label_shapes = _descs(label_shapes) if label_shapes else None
        shapes = {d.name: d.shape for d in self._data_shapes + (self._label_shapes or [])}
        self._exec = self._exec.reshape(partial_shaping=True, allow_up_sizing=True, **shapes)

    # --- parameters
    def init_params(self, initializer: Initializer | None = Uniform(0.01), arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False, force_init: bool = False,
                    allow_extra: bool = False) -> None:
        """Parameters from ``arg_params`` / ``aux_params`` where given, else ``initializer``."""
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. init_params call ignored.",
                          stacklevel=2)
            return
        self._need("binded")
        attrs = self._symbol.attr_dict()

        def fill(name: str, arr: NDArray, cache: dict | None) -> None:
            if cache is not None and name in cache:
                if cache[name] is arr:
                    return
                if name in self._exec.arg_dict:
                    self._exec.copy_params_from({name: cache[name]})
                else:
                    self._exec.copy_params_from({}, {name: cache[name]})
            elif cache is not None and not allow_missing:
                raise RuntimeError(f"{name} is not presented")
            elif initializer is not None:
                initializer(InitDesc(name, attrs.get(name)), arr)

        for name in sorted(self._param_names):
            fill(name, self._exec.arg_dict[name], arg_params)
        for name in sorted(self._aux_names):
            fill(name, self._exec.aux_dict[name], aux_params)
        if not allow_extra:
            extra = [n for n in (arg_params or {}) if n not in self._exec.arg_dict]
            extra += [n for n in (aux_params or {}) if n not in self._exec.aux_dict]
            if extra:
                raise ValueError(f"Find name \"{extra[0]}\" that is not in the arguments")
        self.params_initialized = True

    def set_params(self, arg_params: dict, aux_params: dict | None, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params or {},
                         allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        """Copies of the parameters and auxiliary states, by name."""
        self._need("binded", "params_initialized")
        return ({n: self._exec.arg_dict[n].copy() for n in self._param_names},
                {n: self._exec.aux_dict[n].copy() for n in self._aux_names})

    # --- running
    def forward(self, data_batch: DataBatch, is_train: bool | None = None) -> None:
        self._need("binded", "params_initialized")
        is_train = self.for_training if is_train is None else is_train
        data = list(data_batch.data)
        labels = list(data_batch.label or []) if self._label_shapes else []
        if len(data) != len(self._data_names):
            raise ValueError(f"the batch has {len(data)} data arrays for data_names {self._data_names}")
        new = [tuple(a.shape) for a in data] != [d.shape for d in self._data_shapes] or \
            (labels and [tuple(a.shape) for a in labels] != [d.shape for d in self._label_shapes or []])
        if new:
            self.reshape([DataDesc(n, a.shape) for n, a in zip(self._data_names, data)],
                         [DataDesc(d.name, a.shape) for d, a in zip(self._label_shapes or [], labels)] or None)
        for name, value in zip(self._data_names, data):
            self._exec.arg_dict[name][:] = value
        for desc, value in zip(self._label_shapes or [], labels):
            self._exec.arg_dict[desc.name][:] = value
        self._exec.forward(is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._need("binded", "params_initialized")
        if not self.for_training:
            raise AssertionError("backward needs a module bound with for_training=True")
        self._exec.backward(out_grads=out_grads)

    def forward_backward(self, data_batch: DataBatch) -> None:
        self.forward(data_batch, is_train=True)
        self.backward()

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        self._need("binded", "params_initialized")
        return list(self._exec.outputs)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[NDArray | None]:
        self._need("binded", "params_initialized")
        if not self.inputs_need_grad:
            raise AssertionError("get_input_grads needs a module bound with inputs_need_grad=True")
        return [self._exec.grad_dict.get(n) for n in self._data_names]

    def update_metric(self, eval_metric: metrics.EvalMetric, labels: Sequence, pre_sliced: bool = False) -> None:
        eval_metric.update(labels, self.get_outputs())

    # --- loops over a data iterator (MXNet's BaseModule.fit / score / predict)
    def fit(self, train_data, eval_data=None, eval_metric: Any = "acc", epoch_end_callback: Any = None,
            batch_end_callback: Any = None, kvstore: Any = "local", optimizer: Any = "sgd",
            optimizer_params: Any = (("learning_rate", 0.01),), eval_end_callback: Any = None,
            eval_batch_end_callback: Any = None, initializer: Initializer | None = Uniform(0.01),
            arg_params: dict | None = None, aux_params: dict | None = None, allow_missing: bool = False,
            force_rebind: bool = False, force_init: bool = False, begin_epoch: int = 0,
            num_epoch: int | None = None, validation_metric: Any = None, monitor: Any = None) -> None:
        """Epochs ``[begin_epoch, num_epoch)`` of forward, backward and update over ``train_data``,
        the metric updated per batch and logged per epoch, ``eval_data`` scored after each."""
        if num_epoch is None:
            raise AssertionError("please specify number of epochs")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label, for_training=True,
                  force_rebind=force_rebind)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params)
        validation_metric = eval_metric if validation_metric is None else validation_metric
        eval_metric = metrics.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            for nbatch, batch in enumerate(train_data):
                self.forward_backward(batch)
                self.update()
                self.update_metric(eval_metric, batch.label or [])
                _call_all(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
            for name, value in eval_metric.get_name_value():
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, value)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg_params, aux_params = self.get_params()
            _call_all(epoch_end_callback, epoch, self._symbol, arg_params, aux_params)
            if eval_data is not None:
                for name, value in self.score(eval_data, validation_metric, score_end_callback=eval_end_callback,
                                              batch_end_callback=eval_batch_end_callback, epoch=epoch):
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, value)
            train_data.reset()

    def score(self, eval_data, eval_metric: Any, num_batch: int | None = None, batch_end_callback: Any = None,
              score_end_callback: Any = None, reset: bool = True, epoch: int = 0,
              sparse_row_id_fn: Any = None) -> list[tuple[str, float]]:
        """``eval_metric`` over inference-mode outputs of (the first ``num_batch``) batches."""
        self._need("binded", "params_initialized")
        if reset:
            eval_data.reset()
        eval_metric = metrics.create(eval_metric)
        eval_metric.reset()
        nbatch = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label or [])
            _call_all(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
        _call_all(score_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
        return eval_metric.get_name_value()

    def predict(self, eval_data, num_batch: int | None = None, merge_batches: bool = True, reset: bool = True,
                always_output_list: bool = False, sparse_row_id_fn: Any = None) -> Any:
        """Inference-mode outputs over the batches, each batch's padding dropped; with
        ``merge_batches`` one array per output (a single one unless ``always_output_list``)."""
        from .runtime.ndarray import array
        self._need("binded", "params_initialized")
        if reset:
            eval_data.reset()
        per_batch = []
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            keep = lambda o: o.asnumpy()[:o.shape[0] - (batch.pad or 0)]  # noqa: E731
            per_batch.append([keep(o) for o in self.get_outputs()])
        if not merge_batches:
            return [[array(o, dtype=o.dtype) for o in outs] for outs in per_batch]
        if not per_batch:
            return []
        merged = [array(np.concatenate(parts), dtype=parts[0].dtype) for parts in zip(*per_batch)]
        return merged[0] if len(merged) == 1 and not always_output_list else merged

    # --- optimization
    def init_optimizer(self, kvstore: Any = "local", optimizer: str | opt.Optimizer = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """``rescale_grad`` defaults to 1 / batch size, as in MXNet."""
        self._need("binded", "params_initialized")
        if self.optimizer_initialized and not force_init:
            warnings.warn("optimizer already initialized, ignoring...", stacklevel=2)
            return
        params = dict(optimizer_params)
        if isinstance(optimizer, str):
            batch = self._data_shapes[0].shape[DataDesc.get_batch_axis(self._data_shapes[0].layout)]
            params.setdefault("rescale_grad", 1.0 / batch)
            optimizer = opt.create(optimizer, param_idx2name=dict(enumerate(self._param_names)), **params)
        self._optimizer, self._updater = optimizer, opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_states is not None:
            self.load_optimizer_states(self._preload_states)

    def update(self) -> None:
        """One optimizer step on every parameter that has a gradient."""
        self._need("binded", "params_initialized", "optimizer_initialized")
        for index, name in enumerate(self._param_names):
            grad = self._exec.grad_dict.get(name)
            if grad is None:
                continue
            weight = self._exec.arg_dict[name].asnumpy()
            self._updater(index, grad.asnumpy(), weight)
            self._exec.arg_dict[name][:] = weight

    def save_optimizer_states(self, fname: str) -> None:
        self._need("optimizer_initialized")
        with open(fname, "wb") as f:
            f.write(self._updater.get_states())

    def load_optimizer_states(self, fname: str) -> None:
        self._need("optimizer_initialized")
        with open(fname, "rb") as f:
            self._updater.set_states(f.read())

    # --- checkpoints
    def save_params(self, fname: str) -> None:
        from .nd import save
        args, aux = self.get_params()
        save(fname, {**{f"arg:{k}": v for k, v in args.items()}, **{f"aux:{k}": v for k, v in aux.items()}})

    def load_params(self, fname: str) -> None:
        from .nd import load
        args, aux = model.split_params(load(fname), fname)
        self.set_params(args, aux)

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        args, aux = self.get_params()
        model.save_checkpoint(prefix, epoch, self._symbol, args, aux, remove_amp_cast=remove_amp_cast)
        if save_optimizer_states:
            self.save_optimizer_states("%s-%04d.states" % (prefix, epoch))

    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False, **kwargs: Any) -> "Module":
        """A module of ``prefix-symbol.json`` whose parameters are set from the epoch's file when
        it is bound (MXNet's ``Module.load``)."""
        symbol, args, aux = model.load_checkpoint(prefix, epoch)
        mod = Module(symbol=symbol, **kwargs)
        mod._preload = (args, aux)
        if load_optimizer_states:
            mod._preload_states = "%s-%04d.states" % (prefix, epoch)
        return mod


def _call_all(callbacks: Any, *args: Any) -> None:
    """MXNet calls a callback or each of a list of them."""
    if callbacks is None:
        return
    for cb in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
        cb(*args)
