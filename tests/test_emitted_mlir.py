"""The emitted StableHLO of the benchmark nets, checked without compiling (the fast tier,
``pytest -m lowering``): it verifies with IREE's dialects, every op names its node, the
signatures agree with the functions, and the module grows with the layers, not the images."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

import aotexec as ax
from aotexec import pipeline
from aotexec.compiler import verify_mlir
from aotexec.runtime.bind_args import bind_typing
from aotexec.signature import Role

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import nets  # noqa: E402  (the benchmark nets, defined once)

pytestmark = pytest.mark.lowering
TRAIN = ["forward_infer", "forward_train", "backward", "train_step"]
OP = re.compile(r'= "(stablehlo|chlo)\.(\w+)"')


def _module(name: str, data_shape, modes=TRAIN, channels_last=True, reductions="blocks"):
    sym = nets.symbol(ax.sym, name)
    typing = bind_typing(sym, {"data": data_shape}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}
    return sym, pipeline.entry_points(sym, typing, modes, reqs, "auto", channels_last=channels_last,
                                      reductions=reductions)


@pytest.mark.parametrize("name", nets.BENCH_NETS)
def test_benchmark_net_modules_verify_and_locate_every_op(name):
    _, (text, spec) = _module(name, nets.NETS[name][0])
    verify_mlir(text)                       # IREE's parser and verifiers, no compile
    # every op but those inside a region body (reduce / select bodies) names its node
    ops = [ln for ln in text.splitlines() if OP.search(ln) and ln.lstrip().startswith("%v")]
    assert ops and all('loc("' in ln or ln.endswith("({") for ln in ops)
    assert set(spec.entries) == set(TRAIN)
    for fn, ep in spec.entries.items():
        header = next(ln for ln in text.splitlines() if f"func.func @{fn}(" in ln)
        # one parameter per port, then an output buffer per result and the transient arena
        assert header.count("%arg") == len(ep.params)
        assert header.count("iree.abi.transients") == 1


def test_training_signatures_connect_forward_and_backward():
    sym, (_, spec) = _module("resnet8", (2, 3, 8, 8))
    fwd, bwd, step = (spec.entries[k] for k in ("forward_train", "backward", "train_step"))
    saved = fwd.results_of(Role.RESIDUAL)
    assert saved and bwd.of(Role.RESIDUAL) == saved           # what forward saves is what backward reads
    wrt = [n for n in sym.list_arguments() if n not in ("data", "softmax_label")]
    assert [p.name for p in bwd.results_of(Role.GRAD)] == wrt
    assert sorted(p.name for p in bwd.results_of(Role.AUX)) == sorted(sym.list_auxiliary_states())
    assert [p.name for p in step.results_of(Role.OUTPUT)] == sym.list_outputs()
    assert not bwd.of(Role.HEAD_GRAD)                          # SoftmaxOutput is a loss


def _op_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in OP.finditer(text):
        counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    return counts


@pytest.mark.parametrize("channels_last", [True, False])
def test_module_size_does_not_grow_with_the_image(channels_last):
    """ResNet-8 at 64x64 and 128x128 images: the same ops, only the tensor types differ
    (both sizes past the row count from which column reductions are summed in blocks)."""
    small = _op_counts(_module("resnet8", (2, 3, 64, 64), channels_last=channels_last)[1][0])
    large = _op_counts(_module("resnet8", (2, 3, 128, 128), channels_last=channels_last)[1][0])
    assert small == large


def test_module_size_does_not_grow_with_the_batch():
    """LeNet at batch 2 and 32 (whole reductions: summing in row blocks depends on the rows,
    ``Emitter.reduce``, a few ops more per reduction)."""
    small = _op_counts(_module("lenet", (2, 1, 28, 28), reductions="whole")[1][0])
    large = _op_counts(_module("lenet", (32, 1, 28, 28), reductions="whole")[1][0])
    assert small == large
    # a few tens of ops per layer (10 layers) and function (4)
    assert sum(_op_counts(_module("lenet", (32, 1, 28, 28))[1][0]).values()) < 25 * 10 * 4


# --- model-zoo nets (issue 16): the training module grows with the layers, not the tensors
S = ax.sym
TRAIN_STEPS = ["forward_train", "backward", "train_step"]


def resnet18_v1(classes: int = 1000):
    """Gluon's resnet18_v1: 7x7/2 stem + BatchNorm + relu + 3x3/2 max pool, 4 stages of 2
    basic blocks (1x1/2 convolution + BatchNorm shortcuts where the shape changes), global
    average pool, dense; 20 convolutions and 1 dense layer."""
    def conv_bn(x, nf, k, s, p, name):
        x = S.Convolution(x, kernel=(k, k), stride=(s, s), pad=(p, p), num_filter=nf, no_bias=True, name=name + "_conv")
        return S.BatchNorm(x, fix_gamma=False, eps=1e-5, momentum=0.9, name=name + "_bn")

    x = S.Activation(conv_bn(S.Variable("data"), 64, 7, 2, 3, "stem"), act_type="relu")
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
    cin = 64
    for stage, nf in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            name = f"stage{stage}_block{block}"
            y = S.Activation(conv_bn(x, nf, 3, stride, 1, name + "a"), act_type="relu")
            y = conv_bn(y, nf, 3, 1, 1, name + "b")
            shortcut = conv_bn(x, nf, 1, stride, 0, name + "_down") if stride != 1 or cin != nf else x
            x, cin = S.Activation(y + shortcut, act_type="relu"), nf
    x = S.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1))
    return S.SoftmaxOutput(S.FullyConnected(S.Flatten(x), num_hidden=classes, name="fc"), name="softmax")


def mobilenet(width: int, groups: int | None = None, classes: int = 10):
    """A MobileNet-like net: 3x3/2 stem, then 3x3 convolutions with ``groups`` groups (None:
    depthwise) each followed by a 1x1 one, BatchNorm + relu after each; channels from
    ``width``."""
    def conv_bn_relu(x, nf, k, s, g, name):
        x = S.Convolution(x, kernel=(k, k), stride=(s, s), pad=(k // 2, k // 2), num_filter=nf, num_group=g,
                          no_bias=True, name=name + "_conv")
        return S.Activation(S.BatchNorm(x, fix_gamma=False, name=name + "_bn"), act_type="relu")

    x, c = conv_bn_relu(S.Variable("data"), width, 3, 2, 1, "stem"), width
    for i, (mult, stride) in enumerate(((2, 1), (4, 2), (4, 1), (8, 2))):
        x = conv_bn_relu(x, c, 3, stride, groups or c, f"dw{i}")
        x, c = conv_bn_relu(x, width * mult, 1, 1, 1, f"pw{i}"), width * mult
    x = S.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1))
    return S.SoftmaxOutput(S.FullyConnected(S.Flatten(x), num_hidden=classes, name="fc"), name="softmax")


def _training_ops(sym, data_shape, reductions: str = "whole", vulkan: bool = False) -> dict[str, dict[str, int]]:
    """Ops per training function of ``sym`` as llvm-cpu (or Vulkan) gets it. ``whole``
    reductions: summing column reductions in row blocks (``Emitter.reduce``) depends on the
    rows, a constant number of ops more per reduction."""
    typing = bind_typing(sym, {"data": data_shape}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}
    text, _ = pipeline.entry_points(sym, typing, TRAIN_STEPS, reqs, "auto", channels_last=not vulkan,
                                    reductions=reductions, target="vulkan-spirv" if vulkan else "llvm-cpu")
    return {fn: _op_counts(body) for fn, body in zip(TRAIN_STEPS, text.split("func.func @")[1:])}


def _total(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts.values():
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def test_resnet18_training_module_grows_with_the_layers_not_the_tensors(monkeypatch):
    """ResNet-18 at 224x224 (issue 16: batch 2 emitted 55,878 ops, 25,528 slices, one per
    output pixel of the stem's weight gradient): a few hundred ops per layer in each training
    function, the same ops at batch 2 (and at 112x112 up to elided zero pads); batch 1 adds only the zero second
    batch row of the stem's direct weight gradient (conv_forms.weight_grad), besides its Winograd 64-channel layers. A Winograd layer
    (ops/winograd.py: its tile slices and transforms, forward and both gradients) emits ~100-250 ops
    more than a direct one per function."""
    sym = resnet18_v1()
    layers, per_layer = 21, 600
    # small strided layers (ops.conv.strided_as_im2col: batch 2's 7x7 maps) are im2col + matmul,
    # and Winograd and its tile size depend on the tile count (from winograd.MIN_TILES, F(4x4) from
    # MIN_TILES_F4): forms chosen by size, bounded below, kept fixed for the same-ops comparisons
    from aotexec.ops import conv, winograd
    assert all(sum(c.values()) < per_layer * layers for c in _training_ops(sym, (2, 3, 224, 224)).values())
    monkeypatch.setattr(conv, "STRIDED_IM2COL_MAX_PIXELS", 0)
    monkeypatch.setattr(winograd, "MIN_TILES_F4", 0)
    monkeypatch.setattr(winograd, "MIN_TILES", 0)
    base = _training_ops(sym, (16, 3, 224, 224))
    assert all(sum(c.values()) < per_layer * layers for c in base.values()), \
        {k: sum(c.values()) for k, c in base.items()}
    assert all(sum(c.values()) < per_layer * layers
               for c in _training_ops(sym, (16, 3, 224, 224), reductions="blocks").values())
    # at 112x112 the same ops but for zero-width pads elided where a strided layer's phases
    # (ops.conv.strided_data_grad_nhwc) meet other sizes, and a convolution computed wider and
    # sliced where its width is slow (conv_forms.good_width): at most one pad and slice per layer
    small = _training_ops(sym, (16, 3, 112, 112))
    for fn, counts in base.items():
        diff = {k: small[fn].get(k, 0) - counts.get(k, 0) for k in set(counts) | set(small[fn])}
        assert {k for k, v in diff.items() if v} <= {"pad", "constant", "slice"}, (fn, diff)
        assert all(abs(v) <= layers for v in diff.values()), (fn, diff)
    assert _training_ops(sym, (2, 3, 224, 224)) == base
    # batch 1 also runs the 64-channel layers as Winograd (their tiles fit in cache): bounded too
    assert all(sum(c.values()) < per_layer * layers for c in _training_ops(sym, (1, 3, 224, 224)).values())
    monkeypatch.setattr(winograd, "SMALL_TILES_BYTES", 0)
    one, many = _total(_training_ops(sym, (1, 3, 224, 224))), _total(base)
    assert {k: one[k] - many.get(k, 0) for k in one if one[k] != many.get(k, 0)} == {"pad": 4, "constant": 4}


@pytest.mark.parametrize("vulkan", [False, True])
def test_depthwise_net_module_does_not_grow_with_the_channels(vulkan, monkeypatch):
    """MobileNet-like nets: 8x as many channels (and depthwise groups), the same ops; on
    llvm-cpu, grouped convolutions of 2 channels per group too (Vulkan runs those one
    convolution per group). (1x1 layers as convolutions throughout: wide ones on small maps
    would otherwise be matmuls, ops.conv.pointwise_as_matmul, and wide 3x3 data gradients
    im2col, conv_forms.small_map_im2col.)"""
    from aotexec.ops import conv, conv_forms
    monkeypatch.setattr(conv, "POINTWISE_MATMUL_MIN_CHANNELS", 1 << 30)
    monkeypatch.setattr(conv_forms, "IM2COL_MIN_CHANNELS", 1 << 30)
    narrow = _training_ops(mobilenet(8), (2, 3, 32, 32), vulkan=vulkan)
    assert narrow == _training_ops(mobilenet(64), (2, 3, 32, 32), vulkan=vulkan)
    assert sum(_total(narrow).values()) < 300 * 10 * 3       # 10 layers, 3 functions
    if not vulkan:
        assert _training_ops(mobilenet(8, groups=4), (2, 3, 32, 32)) == \
            _training_ops(mobilenet(64, groups=32), (2, 3, 32, 32))


def test_channels_last_keeps_activations_nhwc_between_convolutions(monkeypatch):
    """Channels-last (``Options.layout``): only the data and weights change layout (fenced);
    the fenced NCHW form transposes around every convolution. (Direct convolutions only: the
    64-channel stage of this small input would otherwise be Winograd, ops/winograd.py.)"""
    from aotexec.ops import winograd
    monkeypatch.setattr(winograd, "SMALL_TILES_BYTES", 0)
    nhwc, nchw = (_op_counts(_module("resnet8", (2, 3, 8, 8), ["forward_infer"], channels_last=c)[1][0])
                  for c in (True, False))
    convs = nhwc["convolution"]
    assert convs == 9                                        # conv0, 3 stages x 2, 2 shortcut convolutions
    assert nhwc["optimization_barrier"] == 1 + convs         # the data, and each weight once
    assert nchw["optimization_barrier"] > nhwc["optimization_barrier"] and nchw["transpose"] > nhwc["transpose"]


def dense_block(layers: int, growth: int = 4):
    """DenseNet's pattern: each layer's BN-ReLU-conv output joined to all before it (Concat)."""
    x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True,
                           name="conv0")
    for i in range(layers):
        h = ax.sym.Activation(ax.sym.BatchNorm(x, name=f"bn{i}"), act_type="relu", name=f"relu{i}")
        h = ax.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=growth, no_bias=True, name=f"conv{i + 1}")
        x = ax.sym.Concat(x, h, dim=1, name=f"concat{i}")
    return ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=10, name="fc"), name="softmax")


def test_dense_block_concatenations_stay_channels_last():
    """Concat along C of channels-last maps joins along their last axis, forward and backward,
    and its gradient keeps the maps' layout even from an NCHW head gradient (the classifier's):
    no map-sized transpose is added per layer, only the weights' (densenet121 transposed every
    map at every concatenation: 834 transposes)."""
    def map_transposes(layers: int) -> dict[str, int]:
        sym = dense_block(layers)
        typing = bind_typing(sym, {"data": (2, 3, 16, 16)}, {})
        reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}
        text, _ = pipeline.entry_points(sym, typing, TRAIN_STEPS, reqs, "auto", channels_last=True)
        return {fn: len(re.findall(r'"stablehlo.transpose".*: \(tensor<2x(?:\d+x16x16|16x16x\d+)x', body))
                for fn, body in zip(TRAIN_STEPS, text.split("func.func @")[1:])}
    assert map_transposes(2) == map_transposes(6)



def test_fenced_form_puts_each_pointwise_layer_behind_a_barrier():
    """The fallback form for DenseNet-121's training module and ResNet v2's inference module
    (``compile_with_fallback``): each 1x1 layer's output and data gradient, and nothing else, is
    fenced; the rest of the module is the same."""
    x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True, name="c0")
    for i in range(3):      # dense layers with a bottleneck: BN-ReLU-conv1x1-BN-ReLU-conv3x3
        h = ax.sym.Activation(ax.sym.BatchNorm(x, name=f"bn{i}a"), act_type="relu")
        h = ax.sym.Convolution(h, kernel=(1, 1), num_filter=16, no_bias=True, name=f"pw{i}")
        h = ax.sym.Activation(ax.sym.BatchNorm(h, name=f"bn{i}b"), act_type="relu")
        h = ax.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True, name=f"c{i + 1}")
        x = ax.sym.Concat(x, h, dim=1)
    sym = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=10, name="fc"), name="softmax")
    typing = bind_typing(sym, {"data": (2, 3, 16, 16)}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}

    def module(fenced: bool, mode: str = "backward") -> str:
        text, _ = pipeline.entry_points(sym, typing, [mode], reqs, "auto", channels_last=True,
                                        fenced_pointwise=fenced)
        verify_mlir(text)
        return text
    def barriers(text: str) -> Counter:      # (result type, node) of each barrier
        return Counter(re.search(r"-> (tensor<[^>]*>) loc\(\"([^\"]*)\"\)", ln).groups()
                       for ln in text.splitlines() if "stablehlo.optimization_barrier" in ln)
    plain, fenced = module(False), module(True)
    added = barriers(fenced) - barriers(plain)
    # each pointwise data gradient, (2, 16, 16, C) channels-last for C = 8, 12, 16 (the concatenated inputs)
    assert added == Counter({(f"tensor<2x16x16x{c}xf32>", f"pw{i}_backward"): 1 for i, c in enumerate((8, 12, 16))})
    assert not barriers(plain) - barriers(fenced)
    assert _op_counts(fenced)["optimization_barrier"] == _op_counts(plain).get("optimization_barrier", 0) + 3
    # forward: each 1x1 layer's output, (2, 16, 16, 16) channels-last
    added = barriers(module(True, "forward_infer")) - barriers(module(False, "forward_infer"))
    assert added == Counter({("tensor<2x16x16x16xf32>", f"pw{i}"): 1 for i in range(3)})


def test_one_axis_kernels_are_matmuls_forward_and_data_gradient():
    """Inception's factorized 1x7 / 7x1 layers (conv_forms.im2col_nhwc): forward and data
    gradient each one dot_general over the joined windows, no convolution op (IREE 3.13 ran
    those scalar), whether the head gradient arrives channels-last (a global pool) or NCHW (a
    sum); the weight gradient stays one contraction per offset."""
    for head in ("pool", "sum"):
        x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(1, 7), pad=(0, 3), num_filter=8, name="c17")
        x = ax.sym.square(ax.sym.Convolution(x, kernel=(7, 1), pad=(3, 0), num_filter=8, name="c71"))
        x = ax.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1)) if head == "pool" else x
        sym = ax.sym.MakeLoss(ax.sym.sum(x))
        typing = bind_typing(sym, {"data": (2, 6, 17, 17)}, {})
        reqs = {n: "write" for n in sym.list_arguments()}
        text, _ = pipeline.entry_points(sym, typing, ["forward_infer", "backward"], reqs, "auto", channels_last=True)
        infer, backward = (_op_counts(body) for body in text.split("func.func @")[1:])
        assert infer.get("convolution", 0) == 0 and infer["dot_general"] == 2, (head, infer)
        # two data gradients, and 7 offset contractions per weight gradient
        assert backward.get("convolution", 0) == 0 and backward["dot_general"] == 2 + 2 * 7, (head, backward)


def test_convolutions_run_at_a_good_output_width():
    """A 3x3 layer with a 17-wide output (Inception-v3's) is computed 18 wide and sliced
    (conv_forms.good_width: IREE 3.13 ran 17 4x slower); 7-smooth widths (ResNet's 56 and 7,
    Inception's 147, small odd ones like 7 and 15) stay as they are; odd ones from
    conv_forms.EVEN_FROM up go one wider where that is smooth too (SqueezeNet's 27)."""
    from aotexec.ops.conv_forms import good_width
    assert [good_width(w) for w in (13, 17, 71, 73, 149, 147, 56, 28, 7, 15, 27, 35, 45)] == \
        [14, 18, 72, 75, 150, 147, 56, 28, 7, 15, 28, 36, 45]
    sym = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=8, name="c")
    typing = bind_typing(sym, {"data": (2, 6, 17, 17)}, {})
    text, _ = pipeline.entry_points(sym, typing, ["forward_infer"], None, "auto", channels_last=True)
    conv = next(ln for ln in text.splitlines() if '"stablehlo.convolution"' in ln)
    assert conv.endswith("tensor<2x17x18x8xf32>") or "-> tensor<2x17x18x8xf32>" in conv, conv


def test_wide_pointwise_layers_on_small_maps_are_matmuls():
    """1x1 layers of >= 128 input channels on at most 4,096 pixels (ResNet-50's bottlenecks at
    batch 1, Inception's 17x17 and 8x8 blocks) are one 2-D dot_general; a 64-channel one stays a
    convolution (ops.conv.pointwise_as_matmul)."""
    def counts(c: int, shape) -> dict[str, int]:
        sym = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(1, 1), num_filter=32, name="c")
        typing = bind_typing(sym, {"data": shape}, {})
        return _op_counts(pipeline.entry_points(sym, typing, ["forward_infer"], None, "auto", channels_last=True)[0])
    wide = counts(256, (1, 256, 14, 14))
    assert wide.get("convolution", 0) == 0 and wide["dot_general"] == 1
    assert counts(64, (1, 64, 14, 14))["convolution"] == 1
    assert counts(256, (16, 256, 28, 28))["convolution"] == 1          # 12,544 pixels


def test_bias_gradient_before_batchnorm_reads_no_map():
    """A convolution's bias gradient where a BatchNorm reads its output is BatchNorm's closed
    form (``Emitter.channel_sums``), not another reduction over the output gradient: the
    training module has as many reductions as without the bias."""
    def net(no_bias: bool):
        x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=8,
                               no_bias=no_bias, name="conv")
        x = ax.sym.Activation(ax.sym.BatchNorm(x, fix_gamma=False, name="bn"), act_type="relu")
        return ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=4, name="fc"), name="softmax")
    with_bias, without = (_total(_training_ops(net(nb), (4, 3, 16, 16))) for nb in (False, True))
    assert with_bias.get("reduce", 0) == without.get("reduce", 0) > 0, (with_bias, without)
