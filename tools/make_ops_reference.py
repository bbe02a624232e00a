"""Reference data for the ops of issue #18 (``tests/test_ops_ext.py``), computed by MXNet 1.9.1:
``tests/data/ops_ext/`` gets, per case, ``<case>-symbol.json`` (MXNet's JSON of a group of ops
with independent inputs, so one compile checks several ops) and ``<case>.npz`` with the inputs
(``arg:<name>``), the outputs of a training forward (``out:<i>``), the head gradients
(``head:<i>``, fixed by the seed) and MXNet's input gradients for them (``grad:<name>``);
``cases.json`` lists each case's gradient arguments and whether it runs backward.

    python tools/make_ops_reference.py [--out tests/data/ops_ext] [--only CASE]

runs itself in the MXNet virtualenv of the benchmark harness (``benchmarks/venvs.py``,
``native_mxnet``: MXNet's native kernels) when ``mxnet`` is not importable.  MXNet is only needed
here, never by aotexec or its tests.  Inputs are small and kept away from ties (sorting) and
kinks (smooth_l1, the sampler's pixel boundaries), where references would be ambiguous.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = 18


def _distinct(np, rng, shape):
    """Values with no ties (a shuffled ramp, spaced 0.37 apart)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.37 - n * 0.15).astype(np.float32)


def norms(mx, np, rng):
    V = mx.sym.var
    outs = [mx.sym.LayerNorm(V("ln_x"), name="ln"),
            mx.sym.LayerNorm(V("ln1_x"), axis=1, eps=1e-3, output_mean_var=True, name="ln1"),
            mx.sym.GroupNorm(V("gn_x"), num_groups=2, output_mean_var=True, name="gn"),
            mx.sym.InstanceNorm(V("in_x"), eps=1e-3, name="inorm"),
            mx.sym.InstanceNorm(V("in4_x"), name="inorm4"),
            mx.sym.L2Normalization(V("l2i_x"), name="l2i"),
            mx.sym.L2Normalization(V("l2c_x"), mode="channel", name="l2c"),
            mx.sym.L2Normalization(V("l2s_x"), mode="spatial", eps=1e-6, name="l2s"),
            mx.sym.L2Normalization(V("l2f_x"), name="l2f")]
    shapes = {"ln_x": (2, 3, 4), "ln1_x": (2, 3, 4), "gn_x": (2, 4, 3, 2), "in_x": (2, 3, 5),
              "in4_x": (2, 2, 3, 3), "l2i_x": (2, 3, 2, 2), "l2c_x": (2, 3, 2, 2), "l2s_x": (2, 3, 2, 2),
              "l2f_x": (3, 4)}
    return outs, shapes, None


def spatial(mx, np, rng):
    V = mx.sym.var
    outs = [mx.sym.Pad(V("pad_c"), mode="constant", constant_value=1.5, pad_width=(0, 0, 0, 0, 1, 2, 2, 1)),
            mx.sym.Pad(V("pad_e"), mode="edge", pad_width=(0, 0, 0, 0, 2, 1, 1, 3)),
            mx.sym.pad(V("pad_r"), mode="reflect", pad_width=(0, 0, 0, 0, 2, 3, 1, 2)),
            mx.sym.Pad(V("pad_e5"), mode="edge", pad_width=(0, 0, 0, 0, 1, 0, 0, 1, 2, 1)),
            mx.sym.Pad(V("pad_c5"), mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 0, 2, 1, 0)),
            mx.sym.Crop(V("crop_x"), V("crop_like"), offset=(1, 2)),
            mx.sym.Crop(V("crop_y"), h_w=(2, 3), center_crop=True),
            mx.sym.slice_like(V("sl_x"), V("sl_like"), axes=(0, -1)),
            mx.sym.slice_like(V("sl_x2"), V("sl_like2")),
            mx.sym.depth_to_space(V("d2s_x"), block_size=2),
            mx.sym.space_to_depth(V("s2d_x"), block_size=2)]
    shapes = {"pad_c": (1, 2, 3, 3), "pad_e": (1, 2, 3, 3), "pad_r": (1, 2, 4, 3), "pad_e5": (1, 1, 2, 3, 2),
              "pad_c5": (1, 1, 2, 2, 2), "crop_x": (2, 2, 5, 6), "crop_like": (1, 1, 3, 4), "crop_y": (2, 2, 5, 6),
              "sl_x": (3, 4, 5), "sl_like": (2, 4, 3), "sl_x2": (3, 4), "sl_like2": (2, 2),
              "d2s_x": (1, 8, 2, 3), "s2d_x": (1, 2, 4, 6)}
    return outs, shapes, None


def ordering(mx, np, rng):
    V = mx.sym.var
    outs = [mx.sym.topk(V("tk_v"), k=2, ret_typ="value"),
            mx.sym.topk(V("tk_b"), axis=0, k=2, ret_typ="both", is_ascend=True, dtype="int32"),
            mx.sym.topk(V("tk_i"), axis=None, k=3),
            mx.sym.topk(V("tk_m"), axis=1, k=2, ret_typ="mask"),
            mx.sym.sort(V("st"), axis=0, is_ascend=False),
            mx.sym.sort(V("st_n"), axis=None),
            mx.sym.argsort(V("as"), axis=1),
            mx.sym.argsort(V("as_i"), axis=None, is_ascend=False, dtype="int32")]
    shapes = {"tk_v": (3, 5), "tk_b": (4, 3), "tk_i": (2, 3, 2), "tk_m": (3, 4), "st": (3, 4), "st_n": (2, 3),
              "as": (3, 4), "as_i": (2, 3)}
    return outs, shapes, {k: _distinct(np, rng, s) for k, s in shapes.items()}


def nd_index(mx, np, rng):
    V = mx.sym.var
    outs = [mx.sym.gather_nd(V("gn_data"), V("gn_idx")),
            mx.sym.gather_nd(V("gn1_data"), V("gn1_idx")),
            mx.sym.scatter_nd(V("sn_data"), V("sn_idx"), shape=(3, 5)),
            mx.sym.scatter_nd(V("sn2_data"), V("sn2_idx"), shape=(4, 3))]
    shapes = {"gn_data": (3, 4, 2), "gn_idx": (2, 5), "gn1_data": (4, 3), "gn1_idx": (1, 2, 3),
              "sn_data": (4,), "sn_idx": (2, 4), "sn2_data": (2, 3), "sn2_idx": (1, 2)}
    # repeats accumulate; no negative ids: MXNet 1.9.1's _backward_gather_nd does not wrap them and
    # writes out of bounds (heap corruption), so they are checked in forward only (case 'forward')
    fixed = {"gn_idx": np.array([[0, 2, 2, 1, 0], [3, 1, 1, 0, 3]], np.float32),
             "gn1_idx": np.array([[[3, 0, 1], [1, 1, 0]]], np.float32),
             "sn_idx": np.array([[0, 2, 1, 2], [4, 0, 3, 2]], np.float32),
             "sn2_idx": np.array([[3, 1]], np.float32)}
    return outs, shapes, fixed


def forward(mx, np, rng):
    """Ops without gradients, and gather_nd's negative ids (counted from the end)."""
    sa_x = mx.sym.var("sa_x")
    outs = [mx.sym.arange(2, 11, 3, repeat=2), mx.sym.arange(5), mx.sym.arange(4, -3, step=-1.5, dtype="int32"),
            # integer ranges from a fractional step (numpy's rule), unsigned ones that wrap
            mx.sym.arange(1.3, 456.6, 1.3, dtype="int32"), mx.sym.arange(50, -50, -2, dtype="uint8"),
            mx.sym.arange(-100, 100, 1, repeat=2, dtype="uint8"),
            mx.sym.full((2, 3), 2.5), mx.sym.full((3,), 7, dtype="int32"),
            mx.sym.shape_array(sa_x), mx.sym.size_array(sa_x),
            mx.sym.gather_nd(mx.sym.var("neg_data"), mx.sym.var("neg_idx"))]
    fixed = {"neg_idx": np.array([[0, 2, -1, 1, -3], [3, -2, 1, 0, -4]], np.float32)}
    return outs, {"sa_x": (2, 3, 4), "neg_data": (3, 4, 2), "neg_idx": (2, 5)}, fixed


def losses(mx, np, rng):
    V = mx.sym.var
    outs = [mx.sym.softmax_cross_entropy(V("sce_data"), V("sce_label")),
            mx.sym.smooth_l1(V("sl1_x"), scalar=1.0), mx.sym.smooth_l1(V("sl1_y"), scalar=2.0)]
    shapes = {"sce_data": (4, 5), "sce_label": (4,), "sl1_x": (3, 4), "sl1_y": (3, 4)}
    # |x| at least 0.1 away from the kinks 1 (sigma 1) and 0.25 (sigma 2)
    away = lambda c, s: (rng.choice([-1, 1], s) * np.where(rng.random(s) < 0.5, rng.uniform(0.05, c - 0.1, s),  # noqa
                                                          rng.uniform(c + 0.1, 3 * c, s))).astype(np.float32)
    fixed = {"sce_label": np.array([1, 0, 4, 2], np.float32), "sl1_x": away(1.0, (3, 4)), "sl1_y": away(0.25, (3, 4))}
    return outs, shapes, fixed


def sampler(mx, np, rng):
    V = mx.sym.var
    affine = mx.sym.GridGenerator(V("affine"), transform_type="affine", target_shape=(3, 4))
    warp = mx.sym.GridGenerator(V("flow"), transform_type="warp")
    outs = [affine, warp,
            mx.sym.BilinearSampler(V("img"), affine), mx.sym.BilinearSampler(V("img2"), warp),
            mx.sym.BilinearSampler(V("bs_data"), V("bs_grid"))]
    shapes = {"affine": (2, 6), "flow": (1, 2, 3, 4), "img": (2, 2, 4, 5), "img2": (1, 2, 3, 4),
              "bs_data": (2, 2, 3, 4), "bs_grid": (2, 2, 3, 3)}
    theta = np.array([[0.9, -0.25, 0.1, 0.2, 0.8, -0.05], [1.1, 0.15, -0.1, -0.1, 0.95, 0.07]], np.float32)
    fixed = {"affine": theta, "flow": rng.uniform(-0.8, 0.8, (1, 2, 3, 4)).astype(np.float32),
             "bs_grid": rng.uniform(-1.3, 1.3, (2, 2, 3, 3)).astype(np.float32)}
    return outs, shapes, fixed


def contrib(mx, np, rng):
    """The _contrib_ ops of segmentation heads and attention."""
    V, C, al = mx.sym.var, mx.sym.contrib, mx.sym.var("al")
    outs = [C.BilinearResize2D(V("rs_a"), height=5, width=7),
            C.BilinearResize2D(V("rs_b"), scale_height=0.5, scale_width=0.6, align_corners=False),
            C.BilinearResize2D(V("rs_c"), V("rs_like"), mode="like", align_corners=False),
            C.BilinearResize2D(V("rs_d"), mode="to_even_up"),
            C.BilinearResize2D(V("rs_e"), mode="odd_scale", scale_height=2.0, scale_width=0.5),
            C.AdaptiveAvgPooling2D(V("ap_a"), output_size=(2, 3)), C.AdaptiveAvgPooling2D(V("ap_b"), output_size=3),
            C.AdaptiveAvgPooling2D(V("ap_c")), C.div_sqrt_dim(V("dsd")),
            C.arange_like(al, start=1, step=0.5, repeat=2), C.arange_like(al, axis=-1)]
    shapes = {"rs_a": (1, 2, 3, 4), "rs_b": (2, 1, 6, 5), "rs_c": (1, 2, 3, 3), "rs_like": (1, 1, 4, 6),
              "rs_d": (1, 1, 5, 4), "rs_e": (1, 1, 5, 4), "ap_a": (1, 2, 5, 7), "ap_b": (2, 1, 4, 4),
              "ap_c": (1, 2, 3, 2), "dsd": (2, 3, 4), "al": (2, 3)}
    return outs, shapes, None


def ravel(mx, np, rng):
    """ravel_multi_index / unravel_index (issue #21): non-integer and negative inputs (MXNet's
    float sums truncated), a leading -1, flat indices past the shape (an unbounded first
    coordinate), int32 data."""
    V = mx.sym.var
    outs = [mx.sym.ravel_multi_index(V("rv_a"), shape=(3, 5, 4)), mx.sym.ravel_multi_index(V("rv_b"), shape=(-1, 5)),
            mx.sym.ravel_multi_index(V("rv_i"), shape=(4, 6)),
            mx.sym.unravel_index(V("ur_a"), shape=(3, 5, 4)), mx.sym.unravel_index(V("ur_b"), shape=(-1, 5)),
            mx.sym.unravel_index(V("ur_i"), shape=(4, 6))]
    fixed = {"rv_a": np.stack([rng.randint(0, n, 7) for n in (3, 5, 4)]).astype(np.float32),
             "rv_b": np.array([[1.5, -1.5, 2, 0, 7], [2.7, -0.5, 4, 9, 3]], np.float32),
             "rv_i": np.stack([rng.randint(0, n, 5) for n in (4, 6)]).astype(np.int32),
             "ur_a": rng.randint(0, 60, 9).astype(np.float32),
             "ur_b": np.array([8, 11, 4, 100, 7.9, -3], np.float32),
             "ur_i": np.array([0, 5, 23, 24, 13], np.int32)}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def histogram(mx, np, rng):
    """histogram (issue #21): equal bins over a range (values on and outside its ends), given
    edges, float64 and float32 data."""
    V = mx.sym.var
    outs = [mx.sym.histogram(a=V("hg_a"), bins=7, range=(-2.5, 2.5)), mx.sym.histogram(a=V("hg_b"), bins=V("hg_e")),
            mx.sym.histogram(a=V("hg_c"), bins=4, range=(0.0, 1.0))]
    a = rng.uniform(-3, 3, (4, 9))
    a.flat[:4] = [-2.5, 2.5, 3.0, -3.0]
    b = rng.uniform(-2, 60, (3, 5, 2))
    b.flat[:3] = [-1.0, 50.0, 4.5]
    fixed = {"hg_a": a, "hg_b": b, "hg_e": np.array([-1.0, 0.5, 2.0, 4.5, 50.0]),
             "hg_c": rng.uniform(-0.2, 1.2, (30,)).astype(np.float32)}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def stn(mx, np, rng):
    """SpatialTransformer (issue #21): an affine transform that samples inside and past the
    image's edges; both gradients."""
    V = mx.sym.var
    outs = [mx.sym.SpatialTransformer(V("st_data"), V("st_loc"), target_shape=(4, 5), transform_type="affine",
                                      sampler_type="bilinear", name="stn")]
    theta = np.array([[0.8, -0.2, 0.1, 0.15, 0.9, -0.05], [1.2, 0.1, 0.05, -0.1, 1.1, 0.2]], np.float32)
    return outs, {"st_data": (2, 3, 6, 7), "st_loc": (2, 6)}, {"st_loc": theta}


def roi(mx, np, rng):
    """ROIPooling (issue #21): MXNet's test rois (a one-pixel roi, another batch image, bins
    of one row), a scaled one past the image; distinct values (no ties)."""
    V = mx.sym.var
    outs = [mx.sym.ROIPooling(V("roi_data"), V("roi_rois"), pooled_size=(4, 4), spatial_scale=1.0, name="roip"),
            mx.sym.ROIPooling(V("roi_data2"), V("roi_rois2"), pooled_size=(2, 3), spatial_scale=0.5, name="roip2")]
    rois = np.array([[0, 1.1, 1.1, 6.2, 6.2], [2, 6.1, 2.1, 8.2, 11.2], [1, 3.1, 1.1, 5.2, 10.2], [0, 3, 3, 3, 3]],
                    np.float32)
    rois2 = np.array([[1, 0, 0, 9, 7], [0, 4.9, 3.1, 30, 20]], np.float32)
    fixed = {"roi_data": _distinct(np, rng, (4, 3, 12, 8)), "roi_rois": rois,
             "roi_data2": _distinct(np, rng, (2, 2, 6, 7)), "roi_rois2": rois2}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def correlation(mx, np, rng):
    """Correlation (issue #21): products with a 3x3 kernel and stride 2 (windows reaching the
    padding), absolute differences on a displacement grid of step 2; both gradients."""
    V = mx.sym.var
    outs = [mx.sym.Correlation(V("co_a"), V("co_b"), kernel_size=3, max_displacement=1, stride1=2, stride2=1,
                               pad_size=2, is_multiply=True, name="corr"),
            mx.sym.Correlation(V("co_c"), V("co_d"), kernel_size=1, max_displacement=4, stride1=1, stride2=2,
                               pad_size=3, is_multiply=False, name="corr2")]
    return outs, {"co_a": (2, 3, 5, 6), "co_b": (2, 3, 5, 6), "co_c": (1, 2, 7, 6), "co_d": (1, 2, 7, 6)}, None


def ctc(mx, np, rng):
    """ctc_loss (issue #21): blank first with 0-padded labels (one empty, one with a repeat),
    blank last with -1 padding and data lengths, given label lengths; gradients of the data."""
    V = mx.sym.var
    outs = [mx.sym.ctc_loss(V("ctc_a"), V("ctc_la"), name="ctc1"),
            mx.sym.contrib.ctc_loss(V("ctc_b"), V("ctc_lb"), data_lengths=V("ctc_db"), blank_label="last",
                                    use_data_lengths=True, name="ctc2"),
            mx.sym.ctc_loss(V("ctc_c"), V("ctc_lc"), label_lengths=V("ctc_lenc"), use_label_lengths=True, name="ctc3")]
    fixed = {"ctc_a": rng.uniform(-2, 2, (6, 3, 5)).astype(np.float32),
             "ctc_la": np.array([[1, 2, 2, 0], [3, 1, 4, 2], [0, 0, 0, 0]], np.float32),
             "ctc_b": rng.uniform(-2, 2, (7, 2, 4)).astype(np.float32),
             "ctc_lb": np.array([[0, 1, -1], [2, 2, 0]], np.float32), "ctc_db": np.array([5, 7], np.float32),
             "ctc_c": rng.uniform(-2, 2, (5, 2, 4)).astype(np.float32),
             "ctc_lc": np.array([[1, 3, 2], [2, 3, 3]], np.float32), "ctc_lenc": np.array([2, 3], np.float32)}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def im2col(mx, np, rng):
    """im2col / col2im (issue #21): 2-D with stride, dilation and padding, col2im with overlaps;
    both gradients (MXNet 1.9.1 fails a shape check binding a 1-D im2col beside these)."""
    V = mx.sym.var
    kw = dict(kernel=(3, 2), stride=(2, 1), dilate=(1, 2), pad=(1, 0))
    outs = [mx.sym.im2col(V("ic_a"), name="i2c", **kw),
            mx.sym.col2im(V("ic_b"), output_size=(7, 6), name="c2i", **kw)]
    return outs, {"ic_a": (2, 3, 7, 6), "ic_b": (2, 18, 16)}, None


def linalg(mx, np, rng):
    """mx.sym.linalg ops without factorizations (issue #21): gemm / gemm2 with transposes, a row
    axis other than -2 and batches; syrk, trmm in its four sides / transposes, sumlogdiag, and
    diagonals / triangles at offsets of both signs (CopyTrian's vector order)."""
    L, V = mx.sym.linalg, mx.sym.var
    outs = [L.gemm(V("ge_a"), V("ge_b"), V("ge_c"), alpha=2.0, beta=0.5, name="ge"),
            L.gemm(V("get_a"), V("get_b"), V("get_c"), transpose_a=True, transpose_b=True, alpha=-1.5, name="get"),
            L.gemm2(V("g2_a"), V("g2_b"), transpose_b=True, axis=0, alpha=0.75, name="g2"),
            L.gemm2(V("g2t_a"), V("g2t_b"), transpose_a=True, axis=-3, name="g2t"),
            L.syrk(V("sy_a"), alpha=0.5, name="sy"),
            L.syrk(V("syt_a"), transpose=True, name="syt"),
            L.trmm(V("tr_a"), V("tr_b"), alpha=2.0, name="tr"),
            L.trmm(V("trt_a"), V("trt_b"), transpose=True, lower=False, name="trt"),
            L.trmm(V("trr_a"), V("trr_b"), rightside=True, name="trr"),
            L.trmm(V("trrt_a"), V("trrt_b"), rightside=True, transpose=True, lower=False, alpha=-0.5, name="trrt"),
            L.sumlogdiag(V("sld_a"), name="sld"),
            L.sumlogdiag(V("sld2_a"), name="sld2"),
            L.extractdiag(V("ed_a"), name="ed"),
            L.extractdiag(V("edp_a"), offset=2, name="edp"),
            L.makediag(V("md_a"), offset=-1, name="md"),
            L.extracttrian(V("et_a"), name="et"),
            L.extracttrian(V("etu_a"), lower=False, name="etu"),
            L.extracttrian(V("etn_a"), offset=-1, name="etn"),
            L.extracttrian(V("etp_a"), offset=2, name="etp"),
            L.maketrian(V("mt_a"), name="mt"),
            L.maketrian(V("mtu_a"), offset=1, lower=False, name="mtu"),
            L.maketrian(V("mtn_a"), offset=-2, name="mtn")]
    shapes = {"ge_a": (2, 3, 4), "ge_b": (2, 4, 5), "ge_c": (2, 3, 5), "get_a": (4, 3), "get_b": (5, 4),
              "get_c": (3, 5), "g2_a": (3, 2, 4), "g2_b": (5, 2, 4), "g2t_a": (4, 2, 3, 2), "g2t_b": (4, 2, 3, 5),
              "sy_a": (2, 3, 4), "syt_a": (3, 4), "tr_a": (2, 3, 3), "tr_b": (2, 3, 4), "trt_a": (3, 3),
              "trt_b": (3, 2), "trr_a": (4, 4), "trr_b": (3, 4), "trrt_a": (2, 4, 4), "trrt_b": (2, 3, 4),
              "sld2_a": (2, 3, 3), "ed_a": (2, 4, 4), "edp_a": (4, 4), "md_a": (2, 3), "et_a": (2, 3, 3),
              "etu_a": (4, 4), "etn_a": (4, 4), "etp_a": (2, 5, 5), "mt_a": (2, 6), "mtu_a": (10,),
              "mtn_a": (2, 3)}
    fixed = {k: rng.uniform(-1.0, 1.0, v).astype(np.float32) for k, v in shapes.items()}
    fixed["sld_a"] = (np.eye(3) * rng.uniform(0.5, 2.0, (3, 3)) + rng.uniform(-1, 1, (3, 3))).astype(np.float32)
    fixed["sld_a"][np.diag_indices(3)] = rng.uniform(0.5, 2.0, 3)
    for i in range(2):
        fixed["sld2_a"][i][np.diag_indices(3)] = rng.uniform(0.5, 2.0, 3)
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def linalg_solve(mx, np, rng):
    """trsm (four sides / transposes, alpha), potrf and potri (lower and upper) of issue #21 on
    well-conditioned inputs: symmetric positive definite matrices for potrf, factors and
    triangles with diagonals in [1, 2] for potri and trsm."""
    L, V = mx.sym.linalg, mx.sym.var
    outs = [L.trsm(V("ts_a"), V("ts_b"), alpha=2.0, name="ts"),
            L.trsm(V("tst_a"), V("tst_b"), transpose=True, lower=False, name="tst"),
            L.trsm(V("tsr_a"), V("tsr_b"), rightside=True, alpha=-0.5, name="tsr"),
            L.trsm(V("tsrt_a"), V("tsrt_b"), rightside=True, transpose=True, lower=False, name="tsrt"),
            L.potrf(V("pf_a"), name="pf"),
            L.potrf(V("pfu_a"), lower=False, name="pfu"),
            L.potri(V("pi_a"), name="pi"),
            L.potri(V("piu_a"), lower=False, name="piu")]
    shapes = {"ts_a": (2, 3, 3), "ts_b": (2, 3, 4), "tst_a": (4, 4), "tst_b": (4, 2), "tsr_a": (2, 4, 4),
              "tsr_b": (2, 3, 4), "tsrt_a": (3, 3), "tsrt_b": (2, 3), "pf_a": (2, 4, 4), "pfu_a": (3, 3),
              "pi_a": (2, 3, 3), "piu_a": (4, 4)}
    fixed = {k: rng.uniform(-0.5, 0.5, v) for k, v in shapes.items()}
    for k in ("ts_a", "tst_a", "tsr_a", "tsrt_a", "pi_a", "piu_a"):
        n = shapes[k][-1]
        fixed[k][..., np.arange(n), np.arange(n)] = rng.uniform(1.0, 2.0, shapes[k][:-1])
    for k in ("pf_a", "pfu_a"):
        m = fixed[k]
        fixed[k] = m @ np.swapaxes(m, -1, -2) + np.eye(shapes[k][-1])
    fixed = {k: v.astype(np.float32) for k, v in fixed.items()}
    return outs, shapes, fixed


def linalg_lu(mx, np, rng):
    """inverse, det, slogdet (issue #21) on matrices whose elimination needs row swaps (a zero
    leading entry) and of both determinant signs."""
    L, V = mx.sym.linalg, mx.sym.var
    outs = [L.inverse(V("inv_a"), name="inv"), L.det(V("det_a"), name="det"), L.det(V("det2_a"), name="det2"),
            L.slogdet(V("sld_a"), name="sld")]
    fixed = {"inv_a": rng.uniform(-1, 1, (2, 3, 3)) + 2 * np.eye(3), "det_a": rng.uniform(-1, 1, (4, 4)),
             "det2_a": rng.uniform(-1, 1, (2, 3, 3)), "sld_a": rng.uniform(-1, 1, (3, 4, 4))}
    fixed["inv_a"][1, 0, 0] = 0.0
    fixed["det_a"][0, 0] = 0.0
    fixed["sld_a"][2] = fixed["sld_a"][2][[1, 0, 3, 2]]
    fixed = {k: v.astype(np.float32) for k, v in fixed.items()}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def linalg_lq(mx, np, rng):
    """gelqf (issue #21): LAPACK's Householder signs, a batch and a square matrix."""
    L, V = mx.sym.linalg, mx.sym.var
    outs = [L.gelqf(V("lq_a"), name="lq"), L.gelqf(V("lq2_a"), name="lq2")]
    fixed = {"lq_a": rng.uniform(-1, 1, (2, 3, 5)), "lq2_a": rng.uniform(-1, 1, (4, 4)) + 2 * np.eye(4)}
    fixed = {k: v.astype(np.float32) for k, v in fixed.items()}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def linalg_eig(mx, np, rng):
    """syevd (issue #21): a batch of symmetric matrices with well separated eigenvalues (the
    gradient divides by their gaps) and a 1x1 one."""
    L, V = mx.sym.linalg, mx.sym.var
    outs = [L.syevd(V("ev_a"), name="ev"), L.syevd(V("ev1_a"), name="ev1")]
    m = rng.uniform(-1, 1, (2, 5, 5))
    fixed = {"ev_a": m + np.swapaxes(m, -1, -2) + np.diag(np.arange(5.0) * 1.5), "ev1_a": rng.uniform(-1, 1, (1, 1))}
    fixed = {k: v.astype(np.float32) for k, v in fixed.items()}
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def contrib_tensor(mx, np, rng):
    """allclose (both NaN conventions) and index_array (all / chosen axes), forward only (issue #21)."""
    C, V = mx.sym.contrib, mx.sym.var
    a, b, c, x = V("ac_a"), V("ac_b"), V("ac_c"), V("ia_x")
    outs = [C.allclose(a, b, name="ac"), C.allclose(a, b, equal_nan=False, name="acn"),
            C.allclose(a, c, rtol=1e-3, name="acc"), C.allclose(a, c, name="acf"),
            C.index_array(x, name="ia"), C.index_array(x, axes=(-1, 0), name="iax")]
    fixed = {k: rng.uniform(-1, 1, v).astype(np.float32) for k, v in {"ac_a": (3, 4), "ia_x": (2, 3, 4)}.items()}
    fixed["ac_b"] = fixed["ac_a"] + np.float32(1e-9)
    fixed["ac_c"] = fixed["ac_a"] * np.float32(1 + 5e-4)
    fixed["ac_a"][0, 0] = fixed["ac_b"][0, 0] = fixed["ac_c"][0, 0] = np.nan
    return outs, {k: v.shape for k, v in fixed.items()}, fixed


def attention(mx, np, rng):
    """quadratic and the interleaved multi-head attention products (issue #21), with gradients."""
    C, V = mx.sym.contrib, mx.sym.var
    outs = [C.quadratic(V("qd_x"), a=0.5, b=-1.25, c=2.0, name="qd"),
            C.interleaved_matmul_selfatt_qk(V("sa_qkv"), heads=2, name="saqk"),
            C.interleaved_matmul_selfatt_valatt(V("sa_qkv2"), V("sa_att"), heads=2, name="sava"),
            C.interleaved_matmul_encdec_qk(V("ed_q"), V("ed_kv"), heads=2, name="edqk"),
            C.interleaved_matmul_encdec_valatt(V("ed_kv2"), V("ed_att"), heads=2, name="edva")]
    shapes = {"qd_x": (2, 3), "sa_qkv": (4, 2, 12), "sa_qkv2": (4, 2, 12), "sa_att": (4, 4, 4), "ed_q": (3, 2, 4),
              "ed_kv": (5, 2, 8), "ed_kv2": (5, 2, 8), "ed_att": (4, 3, 5)}
    return outs, shapes, None


def image(mx, np, rng):
    """mx.sym.image's deterministic ops (issue #21): normalize (per-channel and single mean / std,
    3-D and 4-D), to_tensor of 0-255 values, both flips."""
    I, V = mx.sym.image, mx.sym.var
    outs = [I.normalize(V("nm_x"), mean=(0.5, 1.0, 2.0), std=(3.0, 2.0, 0.5), name="nm"),
            I.normalize(V("nm4_x"), mean=(0.25,), std=(2.0,), name="nm4"),
            I.to_tensor(V("tt_x"), name="tt"), I.to_tensor(V("tt4_x"), name="tt4"),
            I.flip_left_right(V("fl_x"), name="fl"), I.flip_top_bottom(V("ft_x"), name="ft")]
    shapes = {"nm_x": (3, 4, 5), "nm4_x": (2, 1, 3, 4), "tt_x": (4, 5, 3), "tt4_x": (2, 3, 4, 1),
              "fl_x": (3, 4, 3), "ft_x": (4, 3, 1)}
    fixed = {k: rng.uniform(-1, 1, v).astype(np.float32) for k, v in shapes.items()}
    fixed["tt_x"] = rng.randint(0, 256, shapes["tt_x"]).astype(np.float32)
    fixed["tt4_x"] = rng.randint(0, 256, shapes["tt4_x"]).astype(np.float32)
    return outs, shapes, fixed


CASES = {"norms": norms, "spatial": spatial, "ordering": ordering, "nd_index": nd_index, "forward": forward,
         "losses": losses, "sampler": sampler, "contrib": contrib, "ravel": ravel, "histogram": histogram,
         "stn": stn, "roi": roi, "correlation": correlation, "ctc": ctc,
         "im2col": im2col, "linalg": linalg,
         "linalg_solve": linalg_solve, "linalg_lu": linalg_lu,
         "linalg_lq": linalg_lq, "linalg_eig": linalg_eig,
         "contrib_tensor": contrib_tensor, "attention": attention,
         "image": image}
FORWARD_ONLY = {"forward", "ravel", "histogram", "contrib_tensor", "image"}
NO_GRAD = {"gn_idx", "gn1_idx", "sn_idx", "sn2_idx", "sce_label", "roi_rois", "roi_rois2",
           "ctc_la", "ctc_lb", "ctc_db", "ctc_lc", "ctc_lenc"}


def make_case(mx, np, name: str, out: Path) -> dict:
    rng = np.random.RandomState(SEED + list(CASES).index(name))
    outs, shapes, fixed = CASES[name](mx, np, rng)
    sym = mx.sym.Group(outs)
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    args = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in zip(sym.list_arguments(), arg_shapes)}
    args.update(fixed or {})
    # shape-only inputs (crop_like, sl_like) get gradients too: zeros, as MXNet writes them
    grad = [n for n in sym.list_arguments() if n not in NO_GRAD] if name not in FORWARD_ONLY else []
    ctx = mx.cpu()
    ex = sym.bind(ctx, {k: mx.nd.array(v, ctx, dtype=v.dtype) for k, v in args.items()},
                  args_grad={k: mx.nd.zeros(args[k].shape, ctx) for k in grad},
                  grad_req={k: ("write" if k in grad else "null") for k in args})
    res = [o.asnumpy() for o in ex.forward(is_train=bool(grad))]
    arrays = {f"arg:{k}": v for k, v in args.items()}
    arrays.update({f"out:{i}": v for i, v in enumerate(res)})
    if grad:
        heads = [rng.uniform(-1, 1, o.shape).astype(o.dtype) if o.dtype.kind == "f" else np.zeros_like(o) for o in res]
        ex.backward([mx.nd.array(h, ctx, dtype=h.dtype) for h in heads])
        mx.nd.waitall()
        arrays.update({f"head:{i}": h for i, h in enumerate(heads)})
        arrays.update({f"grad:{k}": ex.grad_dict[k].asnumpy() for k in grad})
    (out / f"{name}-symbol.json").write_text(sym.tojson())
    np.savez_compressed(out / f"{name}.npz", **arrays)
    return {"grad": grad, "outputs": sym.list_outputs()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "ops_ext")
    ap.add_argument("--only", choices=list(CASES), help="write this case only (its entry in cases.json too)")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import venvs
    mx, code = venvs.native_mxnet(__file__, sys.argv[1:])
    if mx is None:
        return code
    import numpy as np
    assert mx.__version__ == "1.9.1", mx.__version__
    a.out.mkdir(parents=True, exist_ok=True)
    index = json.loads((a.out / "cases.json").read_text()) if a.only else {}
    index.update({name: make_case(mx, np, name, a.out) for name in ([a.only] if a.only else CASES)})
    index = {name: index[name] for name in CASES if name in index}
    (a.out / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {len(index)} cases to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
