"""Convolution and Deconvolution (MXNet 1.9.1 src/operator/nn/convolution.cc,
deconvolution.cc): parameters, shape rule, lowering and gradient per op, and the
channels-last form of 2-D convolutions and their gradients (``passes.layout``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..emitter import Emitter, Value
from ..kernels import conv as kernel_conv
from ..kernels import depthwise as kernel_depthwise
from ..kernels import matmul as kernel_matmul
from ..symbolic import any_dynamic
from .conv_forms import (MAX_OFFSETS, TAP_PRODUCTS_MAX_CHANNELS, conv_nhwc_wide, convolution, im2col_nhwc, one_axis,
                         small_map_im2col, tap_products, tap_sum, weight_grad,
                         weight_grad_offsets, windows)
from .nhwc import NHWC_SPATIAL, TO_NCHW, ChannelsLast, LayoutQuery, first_nhwc, to_nhwc
from .params import Shape
from . import winograd
from .registry import define, differentiable, lays_out, lowers
from .rules import merge, prod, same_dtype, shape_str, weighted_inputs


# --- Convolution (src/operator/nn/convolution.cc) ---
@dataclass(frozen=True)
class ConvolutionParam:
    kernel: Shape
    num_filter: int
    stride: Shape = ()
    dilate: Shape = ()
    pad: Shape = ()
    num_group: int = 1
    workspace: int = 1024
    no_bias: bool = False
    cudnn_tune: Optional[str] = None
    cudnn_off: bool = False
    layout: Optional[str] = None

    def check(self):
        if not 1 <= len(self.kernel) <= 3:
            raise ValueError(f"kernel must have 1 to 3 dimensions, got {self.kernel}")
        if self.layout not in (None, "NCW", "NCHW", "NCDHW"):
            raise ValueError(f"layout {self.layout} is not supported (aotexec supports NCW/NCHW/NCDHW)")

    def spatial(self, name: str, default: int) -> tuple[int, ...]:
        v = getattr(self, name)
        return tuple(v) if v else (default,) * len(self.kernel)


def _conv_shape(p: ConvolutionParam, ins, outs):
    """MXNet's ConvolutionShape (convolution.cc): nothing before the data's rank is known; then
    the weight (its input channels once known), the bias, the output's known dims, and back
    from the output the batch and, where the stride is 1, the spatial dims."""
    data = ins[0]
    if data is None:
        return ins, outs
    nd = len(p.kernel)
    if len(data) != nd + 2:
        raise ValueError(f"Convolution with a {nd}-D kernel needs a {nd + 2}-D input, got {shape_str(data)}")
    if data[1] >= 0 and data[1] % p.num_group:
        raise ValueError("input num_filter must divide group size")
    if p.num_filter % p.num_group:
        raise ValueError("output num_filter must divide group size")
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    ek = [d * (k - 1) + 1 for k, d in zip(p.kernel, dilate)]
    weight = (p.num_filter, data[1] // p.num_group if data[1] >= 0 else -1) + tuple(p.kernel)
    out = merge(outs[0], (data[0], p.num_filter) + tuple(
        (x + 2 * pd - e) // st + 1 if x >= 0 else -1 for x, e, st, pd in zip(data[2:], ek, stride, pad)))
    back = (out[0], data[1]) + tuple(o + e - 1 - 2 * pd if o >= 0 and st == 1 else x
                                     for x, o, e, st, pd in zip(data[2:], out[2:], ek, stride, pad))
    data = merge(data, back)
    for x, k, e, pd in zip(data[2:], p.kernel, ek, pad):
        if x >= 0 and x + 2 * pd < e:
            raise ValueError(f"kernel size ({k}) exceeds input ({x} padded to {x + 2 * pd})")
    bias = [] if p.no_bias else [(p.num_filter,)]
    return [data, weight] + bias, [out]


Convolution = define("Convolution", params=ConvolutionParam, inputs=weighted_inputs,
                     infer_shape=_conv_shape, infer_type=same_dtype, mirror_kept=True, matmul_like=True)


def _add_channel_bias(b, y, bias):
    return y if bias is None else b.add(y, b.broadcast_in_dim(bias, y.shape, [1]))


def _convolve(b, x, w, out_shape, stride, pads, lhs_dilation, rhs_dilation, groups):
    """A convolution (``conv_forms.convolution``); negative pads (crops) become a slice of a
    non-negative one."""
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if pos == list(pads):
        return convolution(b, x, w, out_shape, stride, pads, lhs_dilation, rhs_dilation, groups)
    full = list(out_shape[:2])
    for i, (lo, hi) in enumerate(pads):
        full.append(out_shape[2 + i] + max(-lo, 0) + max(-hi, 0))  # only unit stride reaches here
    y = convolution(b, x, w, full, stride, pos, lhs_dilation, rhs_dilation, groups)
    start = [0, 0] + [max(-lo, 0) for lo, _ in pads]
    return b.slice(y, start, [s + o for s, o in zip(start, out_shape)])


@lowers(Convolution)
def _conv_lower(ctx, p: ConvolutionParam, x, w, bias=None):
    nd = len(p.kernel)
    pads = [(q, q) for q in p.spatial("pad", 0)]
    y = _convolve(ctx.b, x, w, ctx.out_shapes[0], p.spatial("stride", 1), pads, (1,) * nd,
                  p.spatial("dilate", 1), p.num_group)
    return _add_channel_bias(ctx.b, y, bias)


def conv_weight_grad(b, x, g, kernel, stride, dilate, pad, groups: int):
    """d weight (F, C/groups, k...) of a convolution of data x (N, C, ...) giving g (N, F, o...)
    in the form ``conv_forms.weight_grad_form`` picks."""
    return weight_grad(b, x, g, kernel, stride, dilate, pad, groups)


@differentiable(Convolution, ("ograd0", "in0", "in1"))
def _conv_grad(ctx, p: ConvolutionParam, g, x, w):
    """[d data (a transposed convolution of g), d weight, d bias]."""
    b = ctx.b
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    dx = transposed_conv(b, g, w, x.shape, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(0) else None
    dw = conv_weight_grad(b, x, g, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(1) else None
    return [dx, dw] if p.no_bias else [dx, dw, b.channel_sums(g, 1)]


# --- Convolution channels-last (passes.layout): 2-D convolutions between NHWC activations
# weight gradients by one contraction per kernel offset: measured as fast as the fenced
# NHWC convolution for 3x3 kernels, 1.5x slower for LeNet's 5x5 (which keeps the NCHW rule;
# conv_forms.MAX_OFFSETS)


def _conv2d(p) -> bool:
    return len(p.kernel) == 2 and p.num_group == 1 and p.layout in (None, "NCHW")


def _depthwise2d(p, shape) -> bool:
    """A 2-D depthwise convolution (one input and one output channel per group) of a known
    4-D input."""
    return (len(p.kernel) == 2 and p.layout in (None, "NCHW") and shape is not None and len(shape) == 4
            and p.num_group > 1 and shape[1] == p.num_group == p.num_filter)


def _hwio(b: Emitter, w: Value) -> Value:
    """OIHW weight -> HWIO, fenced at the top of the function."""
    return b.fence(b.transpose(w, (2, 3, 1, 0)))


# 1x1 convolutions of at most this many pixels (batch x height x width) and at least this many
# input channels run as one 2-D matmul: IREE 3.13 tiled the 4-D form poorly there (ResNet-50 b1
# 50 -> 40 ms, b16 612 -> 472; Inception-v3 b1 83 -> 68; MobileNet b16 110 -> 94); larger maps
# and MobileNet v2's narrow expansions measured faster as convolutions (docs/PERFORMANCE.md)
POINTWISE_MATMUL_MAX_PIXELS = 4096
POINTWISE_MATMUL_MIN_CHANNELS = 128
# ... and on maps of at least twice that many pixels when in x out channels reach this
# (ResNet-50's 512 <-> 128 layers at 28x28, batch 16: the 4-D form at ~180 GFLOP/s, the 2-D
# matmul at ~310 once its weight's packing is hoisted into the initializer; Inception-v3's
# 768 -> 192 layers at 17x17, batch 16 (4,624 pixels) and its narrow 35x35 ones measured slower)
POINTWISE_MATMUL_WIDE = 65536
# 1x1 data gradients (and strided layers' one-tap phases) through the matmul kernel (``pointwise_data_grad``)
POINTWISE_GRAD_AS_MATMUL = True
# ... and from this depth and width (O, C) whatever follows (``pointwise_data_grad``): 64 columns
# of dx, SqueezeNet's squeezes, made its training 1.7-3% slower; None: the kernel's own rule only
POINTWISE_GRAD_MIN_DEPTH: int | None = 128


# strided 2-D convolutions with at most this many output pixels (batch x height x width) and at
# least this many channels in and out run as im2col + one matmul: IREE 3.13's direct form ran
# ResNet-18's 3x3/2 256 -> 512 layer at batch 1 (7x7 out) at ~46 GFLOP/s (b1 20.4 -> 19.6 ms)
STRIDED_IM2COL_MAX_PIXELS = 196
STRIDED_IM2COL_MIN_CHANNELS = 128


def strided_as_im2col(kernel, stride, in_channels: int, out_shape) -> bool:
    """Whether a strided 2-D convolution with NHWC output ``out_shape`` runs as im2col + matmul."""
    return (len(kernel) == 2 and any(s > 1 for s in stride) and not any_dynamic(out_shape)
            and prod(out_shape[:3]) <= STRIDED_IM2COL_MAX_PIXELS
            and min(in_channels, out_shape[3]) >= STRIDED_IM2COL_MIN_CHANNELS)


def pointwise_as_matmul(shape, out_channels: int, kernel_depth: int | None = None) -> bool:
    """Whether a 1x1, stride-1 convolution of the NHWC input ``shape`` is emitted as a matmul;
    ``kernel_depth``: the function may call ``kernels.matmul``, which takes products from that
    depth at any size."""
    if any_dynamic(shape):
        return False
    if kernel_depth is not None and shape[3] >= kernel_depth:
        return True
    if shape[3] < POINTWISE_MATMUL_MIN_CHANNELS:
        return False
    pixels = prod(shape[:3])
    return pixels <= POINTWISE_MATMUL_MAX_PIXELS or (
        pixels >= 2 * POINTWISE_MATMUL_MAX_PIXELS and shape[3] * out_channels >= POINTWISE_MATMUL_WIDE)


def _nhwc_bias(b: Emitter, y: Value, bias: Value | None) -> Value:
    return y if bias is None else b.add(y, b.broadcast_in_dim(bias, y.shape, [3]))


def conv_nhwc(b: Emitter, p, x: Value, x_nhwc: bool, w: Value, bias: Value | None, out_shape) -> Value:
    """Convolution, NHWC out: a direct NHWC convolution, or Winograd F(2x2 / 4x4, 3x3) for wide
    3x3 stride-1 layers (``winograd.tile``; their data gradients too, ``conv_grad_nhwc``).

    One input channel gets a second, zero one (and zero weights for it): IREE 3.13 ran the
    3x3 one-channel convolution (16x1x32x32 -> 16) in 1.46 ms, with two channels in 0.125 ms.
    Two to four channels used to go through im2col + matmul; measured again with the layout
    and resident weights of today, the direct form is 4-6x faster (3x3 @32 batch 16, 3
    channels: 0.17 vs 0.92-1.05 ms; ResNet-8 inference 3.85 -> 3.41 ms, local-sync)."""
    x = x if x_nhwc else to_nhwc(b, x)
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    if tuple(p.kernel) == (1, 1) and any(s > 1 for s in stride):
        # the pixels a strided 1x1 convolution reads, then a matmul: IREE 3.13 compiled the
        # strided form as a generic reduction (ResNet-50's 1x1/2 convolutions: 67% of its b1 time)
        x = b.pad(x, 0.0, (0, pad[0], pad[1], 0), (0, pad[0], pad[1], 0))
        x = b.slice(x, (0, 0, 0, 0), (x.shape[0], (out_shape[1] - 1) * stride[0] + 1,
                                      (out_shape[2] - 1) * stride[1] + 1, x.shape[3]), (1, stride[0], stride[1], 1))
        stride, pad = (1, 1), (0, 0)
    deep = b.kernels is not None and (b.kernels.deep_products or b.kernels.epilogues)
    if tuple(p.kernel) == (1, 1) and tuple(pad) == (0, 0) and pointwise_as_matmul(
            x.shape, out_shape[3], kernel_matmul.fused_min_depth(b.kernels) if deep else None):
        y = b.dot_general(b.reshape(x, (prod(x.shape[:3]), x.shape[3])), b.reshape(_hwio(b, w), (x.shape[3], out_shape[3])),
                          contract=([1], [0]))
        y = b.reshape(y, tuple(out_shape))
        return _nhwc_bias(b, y, bias)
    kernel_takes = kernel_conv.takes(b, x, (*p.kernel, x.shape[3], out_shape[3]), out_shape, stride, (1, 1), dilate)
    if not kernel_takes and ((one_axis(p.kernel) and not any_dynamic(x.shape))
                             or strided_as_im2col(p.kernel, stride, x.shape[3], out_shape)):
        y = im2col_nhwc(b, x, _hwio(b, w), tuple(out_shape), stride, [(q, q) for q in pad], dilate)
        return _nhwc_bias(b, y, bias)
    m = winograd.tile(p.kernel, stride, dilate, x.shape[3], out_shape[3], x.shape)
    if m:
        y = winograd.conv3x3_nhwc(b, x, w, tuple(out_shape), pad, m)
        return _nhwc_bias(b, y, bias)
    if x.shape[3] == 1:
        x = b.pad(x, 0.0, (0, 0, 0, 0), (0, 0, 0, 1))
        w = b.pad(w, 0.0, (0, 0, 0, 0), (0, 1, 0, 0))
    y = conv_nhwc_wide(b, x, _hwio(b, w), tuple(out_shape), stride, [(q, q) for q in pad], (1, 1), dilate)
    return _nhwc_bias(b, y, bias)


@lays_out(Convolution)
def _conv_layout(q: LayoutQuery) -> ChannelsLast | None:
    """NHWC out (whatever the input's layout: an NCHW one is transposed, fenced)."""
    p = q.params
    if _conv2d(p) and q.four_d(0):
        return ChannelsLast("conv", first_nhwc(q.num_outputs), lower=_conv_nhwc_lower)
    if _depthwise2d(p, q.shapes[0]):
        return ChannelsLast("depthwise", first_nhwc(q.num_outputs), lower=_depthwise_nhwc_lower)
    return None


def _depthwise_nhwc_lower(ctx, p: ConvolutionParam, x, w, bias=None):
    # where the next 1x1 layers are the kernel's (epilogues folded), no data-tiling pack follows:
    # the BatchNorm-ReLU after the depthwise layer then fuses into its dispatch instead of
    # making a pass of its own (MobileNet v1 / v2 b16 inference 6% / 3% faster)
    folded = ctx.b.kernels is not None and ctx.b.kernels.epilogues
    return depthwise_nhwc(ctx.b, p, x, ctx.in_nhwc[0], w, bias, ctx.out_shapes[0],
                          own_dispatch=not ctx.is_train and not folded)


def depthwise_nhwc(b: Emitter, p, x: Value, x_nhwc: bool, w: Value, bias: Value | None, out_shape,
                   own_dispatch: bool = False) -> Value:
    """A depthwise convolution, NHWC in and out: one grouped convolution with (KH, KW, 1, C)
    weights, which IREE 3.13 compiles to its depthwise kernel (MobileNet v2 at batch 1: 19.5 ms
    with NCHW shifted sums and their transposes, 8.2 ms; docs/PERFORMANCE.md).

    ``own_dispatch`` (inference) gives the result a second use, a one-element read
    (``Emitter.after``): IREE 3.13 fuses the data-tiling pack of a consumer matmul (the next
    1x1 layer's input) into a single-use producer's dispatch, and MobileNet v2's depthwise
    layers with that pack fused ran at ~5 GFLOP/s (b16: 38% of its time; 132 -> 103 ms
    without). In training the output is saved for the backward pass: used twice anyway."""
    x = x if x_nhwc else to_nhwc(b, x)
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    wt = b.fence(b.transpose(w, (2, 3, 1, 0)))                                      # (KH, KW, 1, C)
    y = b.conv_nhwc(x, wt, tuple(out_shape), stride, [(q, q) for q in pad], (1, 1), dilate, groups=x.shape[3])
    if own_dispatch:
        y = b.after(y, y)
    return _nhwc_bias(b, y, bias)


def _conv_nhwc_lower(ctx, p: ConvolutionParam, x, w, bias=None):
    y = conv_nhwc(ctx.b, p, x, ctx.in_nhwc[0], w, bias, ctx.out_shapes[0])
    # the fallback form for IREE 3.13's codegen rejecting a 1x1 layer's matmul with the next
    # layer's BatchNorm fused as a multi-result consumer (ResNet v2's strided shortcuts at b16)
    return ctx.b.barrier(y) if ctx.b.fenced_pointwise and tuple(p.kernel) == (1, 1) else y


def conv_grad_nhwc(b: Emitter, p, g: Value, x: Value, x_nhwc: bool, w: Value) -> list[Value]:
    """[d data (NHWC when x is), d weight (OIHW), d bias] from an NHWC head gradient."""
    xl = x if x_nhwc else to_nhwc(b, x)
    n, h, wd, c = xl.shape
    _, oh, ow, o = g.shape
    kernel, stride, dilate, pad = p.kernel, p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    dx = None
    if any(s > 1 for s in stride) and all(d == 1 for d in dilate) and not any_dynamic(g.shape):
        dx = strided_data_grad_nhwc(b, g, w, (n, h, wd, c), kernel, stride, pad)
    elif tuple(kernel) == (1, 1) and tuple(pad) == (0, 0):
        dx = pointwise_data_grad(b, g, w)
    if dx is None:
        # g convolved (lhs-dilated by the stride) with the flipped weight, in/out swapped
        pads = [(d * (k - 1) - q, xi - s * (gi - 1) - 1 + q)
                for xi, gi, k, s, d, q in zip((h, wd), (oh, ow), kernel, stride, dilate, pad)]
        m = winograd.tile(kernel, stride, dilate, o, c, g.shape)
        if m and all(lo == hi >= 0 for lo, hi in pads):     # Winograd before im2col: ResNet-50 b16 training 5% faster
            w_flip = b.transpose(b.reverse(w, [2, 3]), (1, 0, 2, 3))                  # (C, O, 3, 3)
            dx = winograd.conv3x3_nhwc(b, g, w_flip, (n, h, wd, c),
                                       (pads[0][0], pads[1][0]), m)
        else:
            wt = b.fence(b.transpose(b.reverse(w, [2, 3]), (2, 3, 0, 1)))          # (KH, KW, O, C)
            if all(s == 1 for s in stride) and not any_dynamic(g.shape) and (
                    one_axis(kernel) or small_map_im2col(kernel, g.shape, c)) and not kernel_conv.takes(
                    b, g, wt.shape, (n, h, wd, c), stride, (1, 1), dilate):
                dx = im2col_nhwc(b, g, wt, (n, h, wd, c), (1, 1), pads, dilate)
            else:
                dx = _conv_nhwc_any_pad(b, g, wt, (n, h, wd, c), pads, stride, dilate)
    if b.fenced_pointwise and tuple(kernel) == (1, 1):
        # the same for the data gradient (DenseNet-121's dense layers: ``compile_with_fallback``);
        # 1-12% slower where the first form compiles (MobileNet v1 / v2, ResNet-50 training)
        dx = b.barrier(dx)
    if not x_nhwc:
        dx = b.transpose(dx, TO_NCHW)
    # weight: Winograd's tile products (3x3, stride 1), else the kernel's (kernels.conv), else one
    # (N*OH*OW)-contraction per kernel offset, of g with the offset's input slice
    need = [(k - 1) * d + (gi - 1) * s + 1 for k, d, s, gi in zip(kernel, dilate, stride, (oh, ow))]
    padded = lambda: b.pad(xl, 0.0, (0, pad[0], pad[1], 0),  # noqa: E731
                           (0, max(need[0] - pad[0] - h, 0), max(need[1] - pad[1] - wd, 0), 0))
    if winograd.weight_grad_applies(kernel, stride, dilate, c, o, g.shape):
        # before the kernel's direct form: ResNet-18 b16 training 1,512-1,519 -> 1,264-1,302 ms
        dw = winograd.weight_grad(b, xl, g, pad, 4)
    elif kernel_conv.takes_weight_grad(b, xl, g, kernel, stride, dilate):
        dw = b.transpose(kernel_conv.weight_grad(b, padded(), g, kernel, stride, dilate), (3, 2, 0, 1))
    elif kernel[0] * kernel[1] <= MAX_OFFSETS:
        dw = weight_grad_offsets(b, padded(), g, kernel, stride, dilate)
    else:   # the direct form (conv_forms.weight_grad_form), from NCHW views IREE folds into its own transposes
        dw = weight_grad(b, b.transpose(xl, TO_NCHW), b.transpose(g, TO_NCHW), kernel, stride, dilate, pad, 1)
    out = [dx, dw]
    if not p.no_bias:
        out.append(b.channel_sums(g, 3))
    return out


def pointwise_data_grad(b: Emitter, g: Value, w: Value) -> Value | None:
    """g (N, H, W, O) . w (O, C, 1...) as one 2-D product through the matmul kernel, from the
    depth O at which forward's 1x1 layers take it (ResNet-50 b16 training 1.5% faster), and from
    ``POINTWISE_GRAD_MIN_DEPTH`` on both O and C as a product alone, whatever pass follows it
    (Inception-v3 b8 training 3.4%, MobileNet v1 / v2 1.2% / 1.6% faster; as IREE's 2-D matmul
    below the kernel's depth, DenseNet-121 1.2% slower than its 4-D form); None elsewhere."""
    n, h, wd, o = g.shape
    c = w.shape[1]
    if not POINTWISE_GRAD_AS_MATMUL or any_dynamic(g.shape):
        return None
    alone = POINTWISE_GRAD_MIN_DEPTH is not None and min(o, c) >= POINTWISE_GRAD_MIN_DEPTH
    if not kernel_matmul.takes(b, 1, n * h * wd, c, o, alone):
        return None
    dx = b.dot_general(b.reshape(g, (n * h * wd, o)), b.reshape(w, (o, c)), contract=([1], [0]), alone=alone)
    return b.reshape(dx, (n, h, wd, c))


def _conv_nhwc_any_pad(b: Emitter, x: Value, wt: Value, out_shape, pads, lhs_dilation, rhs_dilation,
                       groups: int = 1) -> Value:
    """``b.conv_nhwc`` with stride 1 and (low, high) ``pads`` that may be negative (a crop)."""
    n, h, w, c = out_shape
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    full = [xi + max(-lo, 0) + max(-hi, 0) for xi, (lo, hi) in zip((h, w), pads)]
    y = conv_nhwc_wide(b, x, wt, (n, full[0], full[1], c), (1, 1), pos, lhs_dilation, rhs_dilation, groups)
    if pos != list(pads):
        start = (0, max(-pads[0][0], 0), max(-pads[1][0], 0), 0)
        y = b.slice(y, start, (n, start[1] + h, start[2] + w, c))
    return y


def strided_data_grad_nhwc(b: Emitter, g: Value, w: Value, x_shape, kernel, stride, pad) -> Value:
    """d data (NHWC ``x_shape``) of a strided, undilated convolution from its NHWC head gradient
    ``g`` and OIHW weight ``w``, one stride-1 convolution per output phase: the input rows
    y with (y + pad) mod s = r get g convolved with the flipped taps r, r + s, ... of the
    kernel, and the phases interleave.  The lhs-dilated form multiplies the zeros between
    g's pixels: (s_h * s_w - 1) / (s_h * s_w) of its work (3/4 at ResNet's stride 2)."""
    n, h, wd, c = x_shape
    f = w.shape[0]
    # positions (y + pad) of the padded input, as (phase-block Z, phase r): Z < blocks
    blocks = [-(-(xi + q) // s) for xi, q, s in zip((h, wd), pad, stride)]
    flipped = b.fence(b.transpose(b.reverse(w, [2, 3]), (2, 3, 0, 1)))               # (KH, KW, F, C)
    # few channels: every tap's product at once, each phase a sum of its taps' windows (the
    # phase block Z reads g's pixel Z - u through tap r + s u), g padded so each is in bounds
    lo = [-(-k // s) - 1 for k, s in zip(kernel, stride)]
    y = tap_products(b, g, w, lo, [max(z - o, 0) for z, o in zip(blocks, g.shape[1:3])]) \
        if c < TAP_PRODUCTS_MAX_CHANNELS else None
    rows = []
    for ry in range(stride[0]):
        cols = []
        for rx in range(stride[1]):
            taps = [-(-(k - r) // s) for k, r, s in zip(kernel, (ry, rx), stride)]
            shape = (n, blocks[0], blocks[1], c)
            if min(taps) <= 0:
                v = b.full_like(g, 0.0, shape)
            elif y is not None:
                v = tap_sum(b, y, [(lo[0] - u, lo[1] - t, (ry + stride[0] * u) * kernel[1] + rx + stride[1] * t)
                                   for u in range(taps[0]) for t in range(taps[1])], blocks, c)
            elif taps == [1, 1]:
                # one tap (ResNet's 1x1/2 shortcuts; the odd phase of 3x3/2): a matmul with the
                # tap as a (C, F) matrix, as FullyConnected's weight (an (F, C) one, or a 1x1
                # filter, failed IREE 3.13's data-tiled codegen: a 32 KB vector packing it)
                tap = b.reshape(b.slice(w, (0, 0, ry, rx), (f, c, ry + 1, rx + 1)), (f, c))
                v = pointwise_data_grad(b, g, tap)
                if v is None:
                    v = b.dot_general(g, b.fence(b.transpose(tap, (1, 0))), contract=([3], [1]))
                keep = [min(z, o) for z, o in zip(blocks, g.shape[1:3])]
                if keep != list(g.shape[1:3]):
                    v = b.slice(v, (0, 0, 0, 0), (n, keep[0], keep[1], c))
                v = b.pad(v, 0.0, (0, 0, 0, 0), (0, blocks[0] - keep[0], blocks[1] - keep[1], 0))
            else:
                # taps r + s*t of the kernel, flipped: every s-th tap of the flipped kernel
                start = [k - 1 - r - s * (t - 1) for k, r, s, t in zip(kernel, (ry, rx), stride, taps)]
                wt = b.slice(flipped, (start[0], start[1], 0, 0), (kernel[0], kernel[1], f, c),
                             (stride[0], stride[1], 1, 1))                          # (TY, TX, F, C)
                # square, with zero taps last: IREE 3.13 ran ResNet's 2x1 phases 20x slower than 2x2
                side = max(taps)
                wt = b.pad(wt, 0.0, (0, 0, 0, 0), (side - taps[0], side - taps[1], 0, 0))
                pads = [(t - 1, z - o + side - t) for t, z, o in zip(taps, blocks, g.shape[1:3])]
                v = _conv_nhwc_any_pad(b, g, wt, shape, pads, (1, 1), (1, 1))
            cols.append(b.reshape(v, (n, blocks[0], 1, blocks[1], 1, c)))
        rows.append(b.concatenate(cols, 4) if len(cols) > 1 else cols[0])
    dz = b.concatenate(rows, 2) if len(rows) > 1 else rows[0]
    dz = b.reshape(dz, (n, blocks[0] * stride[0], blocks[1] * stride[1], c))
    return b.slice(dz, (0, pad[0], pad[1], 0), (n, pad[0] + h, pad[1] + wd, c))


@lays_out(Convolution.backward)
def _conv_grad_layout(q: LayoutQuery) -> ChannelsLast | None:
    """From an NHWC head gradient; d data is stored as the data is."""
    p = q.params
    if _conv2d(p) and q.nhwc[0]:
        return ChannelsLast("conv_grad", first_nhwc(q.num_outputs, q.nhwc[1]), lower=_conv_grad_nhwc_lower)
    if _depthwise2d(p, q.shapes[1]) and q.nhwc[0]:
        return ChannelsLast("depthwise_grad", first_nhwc(q.num_outputs, q.nhwc[1]), lower=_depthwise_grad_nhwc_lower)
    return None


def _depthwise_grad_nhwc_lower(ctx, p: ConvolutionParam, g, x, w):
    return depthwise_grad_nhwc(ctx.b, p, g, x, ctx.in_nhwc[1], w, ctx.wants)


def depthwise_grad_nhwc(b: Emitter, p, g: Value, x: Value, x_nhwc: bool, w: Value, wants) -> list:
    """[d data (NHWC when x is), d weight (C, 1, KH, KW), d bias] of a depthwise convolution
    from its NHWC head gradient: d data a depthwise convolution of g (lhs-dilated by the
    stride) with the flipped kernel; d weight per kernel offset the input window times g,
    summed over batch and space (channels the contiguous axis)."""
    xl = x if x_nhwc else to_nhwc(b, x)
    n, h, wd, c = xl.shape
    _, oh, ow, _ = g.shape
    kernel, stride, dilate, pad = p.kernel, p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    dx = dw = None
    if wants(0):
        wt = b.fence(b.transpose(b.reverse(w, [2, 3]), (2, 3, 1, 0)))                 # (KH, KW, 1, C)
        pads = [(d * (k - 1) - q, xi - s * (gi - 1) - 1 + q)
                for xi, gi, k, s, d, q in zip((h, wd), (oh, ow), kernel, stride, dilate, pad)]
        dx = _conv_nhwc_any_pad(b, g, wt, (n, h, wd, c), pads, stride, dilate, groups=c)
        if not x_nhwc:
            dx = b.transpose(dx, TO_NCHW)
    if wants(1):
        dw = kernel_depthwise.weight_grad(b, xl, g, kernel, stride, dilate, pad)
    if wants(1) and dw is None:
        need = [(k - 1) * d + (gi - 1) * s + 1 for k, d, s, gi in zip(kernel, dilate, stride, (oh, ow))]
        xp = b.pad(xl, 0.0, (0, pad[0], pad[1], 0),
                   (0, max(need[0] - pad[0] - h, 0), max(need[1] - pad[1] - wd, 0), 0))
        parts = [b.reshape(b.reduce(b.mul(win, g), [0, 1, 2], "add"), (c, 1))
                 for win in windows(b, xp, kernel, stride, dilate, (oh, ow), NHWC_SPATIAL)]
        dw = b.reshape(b.concatenate(parts, 1), (c, 1) + tuple(kernel))
    out = [dx, dw]
    if not p.no_bias:
        out.append(b.channel_sums(g, 3))
    return out


def _conv_grad_nhwc_lower(ctx, p: ConvolutionParam, g, x, w):
    return conv_grad_nhwc(ctx.b, p, g, x, ctx.in_nhwc[1], w)


# --- Deconvolution (src/operator/nn/deconvolution.cc) ---
@dataclass(frozen=True)
class DeconvolutionParam(ConvolutionParam):
    """Convolution's parameters with MXNet's other defaults, plus adj / target_shape."""
    workspace: int = 512
    no_bias: bool = True
    adj: Shape = ()
    target_shape: Shape = ()


def _deconv_shape(p: DeconvolutionParam, ins, outs):
    """MXNet's DeconvolutionShape: like Convolution's forward half (no inference back from the
    output); unknown spatial dims stay unknown."""
    data = ins[0]
    if data is None:
        return ins, outs
    stride, dilate, pad, adj = (p.spatial("stride", 1), p.spatial("dilate", 1),
                                p.spatial("pad", 0), p.spatial("adj", 0))
    weight = (data[1], p.num_filter // p.num_group) + tuple(p.kernel)
    sp = []
    for i, (x, k, s, d, pd, a) in enumerate(zip(data[2:], p.kernel, stride, dilate, pad, adj)):
        if p.target_shape:
            sp.append(p.target_shape[i])
        else:
            sp.append(s * (x - 1) + d * (k - 1) + 1 - 2 * pd + a if x >= 0 else -1)
    bias = [] if p.no_bias else [(p.num_filter,)]
    return [data, weight] + bias, [(data[0], p.num_filter) + tuple(sp)]


Deconvolution = define("Deconvolution", params=DeconvolutionParam, inputs=weighted_inputs,
                       infer_shape=_deconv_shape, infer_type=same_dtype, mirror_kept=True, matmul_like=True)


def transposed_conv(b, x, w, out_shape, kernel, stride, dilate, pad, groups: int):
    """MXNet Deconvolution: weight (C_in, C_out/g, k...) -> a stride-dilated input convolved
    with the spatially flipped kernel, in/out channels swapped within each group."""
    nd = len(kernel)
    cin, cout = x.shape[1], out_shape[1]
    sp = tuple(range(3, 3 + nd))
    w = b.reshape(w, (groups, cin // groups, cout // groups) + tuple(kernel))
    w = b.reshape(b.transpose(w, (0, 2, 1) + sp), (cout, cin // groups) + tuple(kernel))
    w = b.reverse(w, list(range(2, 2 + nd)))
    pads = []
    for xi, oi, k, s, d, q in zip(x.shape[2:], out_shape[2:], kernel, stride, dilate, pad):
        lo = d * (k - 1) - q
        pads.append((lo, oi - s * (xi - 1) - 1 + q))   # high side absorbs adj / target_shape
    return _convolve(b, x, w, out_shape, (1,) * nd, pads, stride, dilate, groups)


def _deconv_pad(p: DeconvolutionParam, in_sp) -> tuple[int, ...]:
    """DeconvolutionParam::InferPad: target_shape overrides pad (adj follows from out shape)."""
    if p.target_shape and any(p.target_shape):
        stride, dilate = p.spatial("stride", 1), p.spatial("dilate", 1)
        return tuple((s * (x - 1) + d * (k - 1) + 1 - t + 1) // 2
                     for x, k, s, d, t in zip(in_sp, p.kernel, stride, dilate, p.target_shape))
    return p.spatial("pad", 0)


@lowers(Deconvolution)
def _deconv_lower(ctx, p: DeconvolutionParam, x, w, bias=None):
    y = transposed_conv(ctx.b, x, w, ctx.out_shapes[0], p.kernel, p.spatial("stride", 1),
                        p.spatial("dilate", 1), _deconv_pad(p, x.shape[2:]), p.num_group)
    return _add_channel_bias(ctx.b, y, bias)


def deconv_data_grad(b, g, w, x_shape, kernel, stride, dilate, pad, groups):
    """A convolution of g with the deconvolution's weight; the high pad drops what adj added."""
    pads = []
    for xi, oi, k, s, d, q in zip(x_shape[2:], g.shape[2:], kernel, stride, dilate, pad):
        adj = oi - (s * (xi - 1) + d * (k - 1) + 1 - 2 * q)
        pads.append((q, max(q - adj, 0)))
    return _convolve(b, g, w, x_shape, stride, pads, (1,) * len(kernel), dilate, groups)


@differentiable(Deconvolution, ("ograd0", "in0", "in1"))
def _deconv_grad(ctx, p: DeconvolutionParam, g, x, w):
    b = ctx.b
    stride, dilate = p.spatial("stride", 1), p.spatial("dilate", 1)
    pad = _deconv_pad(p, x.shape[2:])
    dx = deconv_data_grad(b, g, w, x.shape, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(0) else None
    # y[o*s + j*d - q] += x[i] w[j]: the weight gradient of a convolution of g by x
    dw = conv_weight_grad(b, g, x, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(1) else None
    return [dx, dw] if p.no_bias else [dx, dw, b.channel_sums(g, 1)]
