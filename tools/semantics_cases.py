"""The cases tools/make_semantics_reference.py asks MXNet 1.9.1 about (and
tests/test_mxnet_semantics.py asks aotexec): snippets that bind ``out`` with ``mx`` being either."""
from __future__ import annotations

V = "mx.sym.Variable"


def _infer(name: str, code: str, partial: bool = True, np_shape: bool = False, error: str | None = None,
           **kwargs) -> dict:
    case = {"name": name, "code": code, "kwargs": kwargs, "partial": partial, "np_shape": np_shape}
    if error:
        case["error"] = error
    return case


# ---- partial shape inference (MXNet keeps partly known shapes, infers backward) ----
INFER = [
    _infer("slicechannel_partial", f"out = mx.sym.SliceChannel({V}('x'), num_outputs=3, axis=1)", x=(0, 6)),
    _infer("slicechannel_squeeze_partial",
           f"out = mx.sym.SliceChannel({V}('x'), num_outputs=3, axis=1, squeeze_axis=True)", x=(0, 3)),
    _infer("slicechannel_back_from_partner",
           f"a = {V}('a', shape=(0, 15, 0))\nb = mx.sym.SliceChannel(a, num_outputs=3, squeeze_axis=False)\n"
           f"out = b[1] + {V}('c', shape=(3, 5, 2))"),
    _infer("slicechannel_unknown_axis_error", f"out = mx.sym.SliceChannel({V}('x'), num_outputs=3, axis=1)",
           error="evenly sized chunks", x=(2, 0)),
    _infer("conv_partial_data", f"out = mx.sym.Convolution({V}('x'), num_filter=4, kernel=(3, 3), name='c')",
           x=(0, 2, 5, 5)),
    _infer("conv_unknown_data_leaves_bias_unknown",
           f"out = mx.sym.Convolution({V}('x'), num_filter=4, kernel=(3, 3), name='c')"),
    _infer("conv_partial_channels", f"out = mx.sym.Convolution({V}('x'), num_filter=4, kernel=(3, 3), name='c')",
           x=(0, 0, 5, 0)),
    _infer("conv_back_from_output",
           f"b = mx.sym.Convolution({V}('a', shape=(0, 10, 0, 0)), num_filter=21, kernel=(3, 3), pad=(1, 1), "
           f"name='c')\nout = b + {V}('d', shape=(5, 21, 32, 32))"),
    _infer("conv_weight_from_cast_data",
           f"data = {V}('data', shape=(1, 0, 0, 0))\nw = {V}('weight')\n"
           "out = mx.sym.Convolution(data=mx.sym.cast(data, dtype='float16'), weight=mx.sym.cast(w, dtype='float16'),"
           " pad=(3, 3), num_filter=64, stride=(2, 2), no_bias=True, kernel=(7, 7))"),
    _infer("concat_partial", f"out = mx.sym.Concat({V}('a'), {V}('b'), dim=1)", a=(0, 3), b=(2, 0)),
    _infer("concat_one_known", f"out = mx.sym.Concat({V}('a'), {V}('b'), dim=1)", a=(2, 3)),
    _infer("concat_back_from_partner",
           f"c = mx.sym.Concat({V}('a', shape=(0, 10)), {V}('b', shape=(0, 5)), num_args=2, dim=1)\n"
           f"out = {V}('d', shape=(2, 0)) + c"),
    _infer("reshape_zero_code", f"out = mx.sym.Reshape({V}('x'), shape=(0, -1))", x=(0, 3, 4)),
    _infer("reshape_infer_unknown", f"out = mx.sym.Reshape({V}('x'), shape=(2, -1))", x=(0, 3, 4)),
    _infer("reshape_keep_known", f"out = mx.sym.Reshape({V}('x'), shape=(-1, 12))", x=(0, 3, 4)),
    _infer("reshape_back_from_partner",
           f"out = mx.sym.Reshape({V}('x', shape=(0, 3, 4)), shape=(-1, 12)) + {V}('z', shape=(5, 12))"),
    _infer("dot_partial", f"out = mx.sym.dot({V}('x'), {V}('y'))", x=(0, 3, 4), y=(4, 5)),
    _infer("dot_transpose_a_partial", f"out = mx.sym.dot({V}('x'), {V}('y'), transpose_a=True)", x=(4, 0), y=(4, 5)),
    _infer("dot_partial_np", f"out = mx.sym.dot({V}('x'), {V}('y'))", np_shape=True, x=(-1, 3, 4), y=(4, 5)),
    _infer("batch_dot_partial", f"out = mx.sym.batch_dot({V}('x'), {V}('y'))", x=(0, 3, 4), y=(0, 4, 5)),
    _infer("batch_dot_unknown_k", f"out = mx.sym.batch_dot({V}('x'), {V}('y'))", x=(0, 3, 4), y=(0, 0, 5)),
    _infer("batch_dot_4d", f"out = mx.sym.batch_dot({V}('x'), {V}('y'), transpose_b=True)", x=(2, 0, 3, 4),
           y=(2, 0, 5, 4)),
    _infer("embedding_partial", f"out = mx.sym.Embedding({V}('x'), {V}('w'), input_dim=100, output_dim=10)",
           x=(0, 5), w=(100, 10)),
    _infer("transpose_partial", f"out = mx.sym.transpose({V}('x'), axes=(0, 3, 2, 1))", x=(0, 3, 224, 224)),
    _infer("transpose_back_from_output",
           f"out = mx.sym.transpose({V}('x', shape=(0, 3))) + {V}('y', shape=(3, 7))"),
    _infer("pick_partial", f"out = mx.sym.pick({V}('x'), {V}('i'), axis=1)", x=(0, 3, 3), i=(0, 3)),
    _infer("pick_keepdims_partial", f"out = mx.sym.pick({V}('x'), {V}('i'), axis=1, keepdims=True)", x=(0, 3)),
    _infer("slice_partial", f"out = mx.sym.slice({V}('x'), begin=(None, 1), end=(None, 3))", x=(0, 5)),
    _infer("slice_axis_partial", f"out = mx.sym.slice_axis({V}('x'), axis=1, begin=1, end=3)", x=(0, 5)),
    _infer("ones_from_partner", f"out = {V}('x') + mx.sym.ones(shape=(-1, -1))", x=(2, 3)),
    _infer("zeros_zero_dims_from_partner", f"out = {V}('x') * mx.sym.zeros(shape=(0, 0))", x=(2, 3)),
    _infer("fc_partial", f"out = mx.sym.FullyConnected({V}('x'), num_hidden=3, name='fc')", x=(0, 4)),
    _infer("fc_no_flatten_partial", f"out = mx.sym.FullyConnected({V}('x'), num_hidden=3, flatten=False, name='fc')",
           x=(0, 2, 4)),
    _infer("pooling_partial", f"out = mx.sym.Pooling({V}('x'), kernel=(2, 2), pool_type='max')", x=(0, 3, 4, 4)),
    _infer("pooling_same_1d", f"out = mx.sym.Pooling({V}('x'), kernel=(2,), stride=(2,), pad=(0, 0, 0), "
           "pool_type='max', pooling_convention='same')", x=(1, 1, 10)),
    _infer("batchnorm_partial", f"out = mx.sym.BatchNorm({V}('x'), name='bn')", x=(0, 3, 4, 4)),
    _infer("sum_partial", f"out = mx.sym.sum({V}('x'), axis=1)", x=(0, 3, 4)),
    _infer("expand_dims_partial", f"out = mx.sym.expand_dims({V}('x'), axis=1)", x=(0, 3)),
    _infer("softmax_output_label_partial", f"out = mx.sym.SoftmaxOutput({V}('x'), name='sm')", x=(0, 3)),
    _infer("softmax_output_probability_label", f"out = mx.sym.SoftmaxOutput({V}('x'), {V}('p'))", x=(4, 3), p=(4, 3)),
    _infer("broadcast_partial", f"out = mx.sym.broadcast_add({V}('x'), {V}('y'))", x=(0, 3), y=(2, 1)),
    _infer("stack_partial", f"out = mx.sym.stack({V}('x'), {V}('y'))", x=(0, 3), y=(2, 0)),
    _infer("swapaxis_partial", f"out = mx.sym.SwapAxis({V}('x'), dim1=0, dim2=1)", x=(0, 3)),
    _infer("repeat_partial", f"out = mx.sym.repeat({V}('x'), repeats=2, axis=1)", x=(0, 3)),
    _infer("deconv_partial", f"out = mx.sym.Deconvolution({V}('x'), num_filter=4, kernel=(3, 3), name='d')",
           x=(0, 2, 5, 5)),
    _infer("upsampling_partial", f"out = mx.sym.UpSampling({V}('x'), scale=2, sample_type='nearest')",
           x=(0, 2, 5, 5)),
    _infer("where_needs_known_condition", f"out = mx.sym.where({V}('c'), {V}('x'), {V}('y'))", c=(0, 2), x=(0, 2),
           y=(0, 2)),
    _infer("reshape_like_ranges",
           f"out = mx.sym.reshape_like({V}('l'), {V}('r'), lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)",
           l=(30, 7), r=(15, 2, 4)),
    _infer("completely_unknown", f"out = mx.sym.sin({V}('x'))"),
    _infer("completely_unknown_np", f"out = mx.sym.sin({V}('x'))", np_shape=True),
    # a declared shape is a hint: a complete shape given to infer_shape wins
    _infer("explicit_shape_wins", f"out = mx.sym.elemwise_add({V}('a', shape=(2, 3)), {V}('b'))", partial=False,
           a=(5, 6)),
    _infer("partial_given_shape_takes_hint", f"out = {V}('a', shape=(2, 3)) + {V}('b')", a=(0, 3)),
    # infer_shape (not partial): undecided -> None and a warning naming the undecided arguments
    _infer("warning_names_undecided",
           f"x2h = mx.sym.FullyConnected({V}('data'), name='x2h', num_hidden=8)\n"
           f"h2h = mx.sym.FullyConnected({V}('prev'), name='h2h', num_hidden=8)\nout = x2h + h2h", partial=False,
           data=(10, 6)),
    _infer("warning_conv_bias_undecided",
           f"out = mx.sym.Convolution({V}('data', shape=(1, 0, 0, 0)), num_filter=4, kernel=(3, 3), name='c')",
           partial=False),
]

# ---- dtype inference: a dtype given to infer_type wins over a Variable's declared one ----
INFER_TYPE = [
    {"name": "explicit_dtype_wins", "code": f"out = {V}('a', dtype='float16') + {V}('b')",
     "kwargs": {"a": "float32"}},
    {"name": "declared_dtype_used", "code": f"out = {V}('a', dtype='float16') + {V}('b')", "kwargs": {}},
    {"name": "amp_cast_floats_only",
     "code": f"out = mx.sym.Group([mx.sym.amp_cast({V}('a'), dtype='float16'), "
             f"mx.sym.amp_cast({V}('b'), dtype='float16')])",
     "kwargs": {"a": "float32", "b": "int32"}},
    {"name": "fc_partial_types", "code": f"out = mx.sym.FullyConnected({V}('d'), num_hidden=2, name='fc')",
     "kwargs": {}, "partial": True},
]

# ---- error messages: the phrase each must carry (checked against MXNet's own message) ----
ERRORS = [
    {"name": "elemwise_shape_mismatch", "code": f"a, b = {V}('a'), {V}('b')\nout = mx.sym.elemwise_add(a, b, name='p')",
     "call": "out.infer_shape(a=(4, 3), b=(2, 3))",
     "phrase": "Error in operator p: "},
    {"name": "elemwise_shape_mismatch_detail",
     "code": f"a, b = {V}('a'), {V}('b')\nout = mx.sym.elemwise_add(a, b, name='p')",
     "call": "out.infer_shape(a=(4, 3), b=(2, 3))",
     "phrase": "Incompatible attr in node p at 1-th input: expected [4,3], got [2,3]"},
    {"name": "elemwise_dtype_mismatch", "code": f"a, b = {V}('a'), {V}('b')\nout = mx.sym.elemwise_add(a, b, name='p')",
     "call": "out.infer_type(a='float32', b='float16')",
     "phrase": "Incompatible attr in node p at 1-th input: expected float32, got float16"},
    {"name": "transpose_add_mismatch",
     "code": f"v = {V}('V')\nout = mx.sym.elemwise_add(mx.sym.transpose(v), {V}('x') + v, name='s3')",
     "call": "out.infer_shape(x=(2, 3))", "phrase": "Error in operator"},
    {"name": "fc_weight_mismatch", "code": f"out = mx.sym.FullyConnected({V}('a'), num_hidden=3, name='fc')",
     "call": "out.infer_shape(a=(4, 3), fc_weight=(2, 3))",
     "phrase": "Error in operator fc: Shape inconsistent, Provided = [2,3], inferred shape=(3,3)"},
    {"name": "broadcast_mismatch", "code": f"out = mx.sym.broadcast_add({V}('a'), {V}('b'), name='ba')",
     "call": "out.infer_shape(a=(4, 3), b=(2, 3))",
     "phrase": "operands could not be broadcast together with shapes [4,3] [2,3]"},
    {"name": "concat_mismatch", "code": f"out = mx.sym.Concat({V}('a'), {V}('b'), dim=1, name='cc')",
     "call": "out.infer_shape(a=(4, 3), b=(2, 3))", "phrase": "Incompatible input shape: expected [4,-1], got [2,3]"},
    {"name": "pooling_same_with_pad",
     "code": f"out = mx.sym.Pooling({V}('x'), kernel=(2,), stride=(2,), pad=(2, 0, 0), pool_type='max', "
             "pooling_convention='same')",
     "call": "out.infer_shape(x=(1, 1, 10))", "phrase": "Same pooling convention disables the use of pad parameter."},
    {"name": "reshape_like_bad_range",
     "code": f"out = mx.sym.reshape_like({V}('l'), {V}('r'), lhs_begin=1, lhs_end=1)",
     "call": "out.infer_shape(l=(30, 7), r=(15, 2, 4))", "phrase": "Invalid begin, end, get lhs_begin=1"},
    # MXNet's test_zero_size_min_max: max / min of no elements (numpy shape semantics)
    {"name": "min_zero_size", "code": f"out = mx.sym.min({V}('x'), axis=1, name='m')",
     "call": "with mx.np_shape(True):\n    out.infer_shape(x=(5, 0))",
     "phrase": "Check failed: (*in_attrs)[0].Size() > 0U (0 vs. 0) : Reduction input's size should > 0 [5,0]"},
    {"name": "max_zero_size_all_axes", "code": f"out = mx.sym.max({V}('x'), name='m')",
     "call": "with mx.np_shape(True):\n    out.infer_shape(x=(0, 3))", "phrase": "Error in operator m: "},
    {"name": "bind_args_list_length", "code": f"out = {V}('a') + {V}('b')",
     "call": "out.bind(mx.cpu(), args=[mx.nd.zeros((2,))])",
     "phrase": "Length of args does not match the number of arguments"},
]

# ---- executors: forward (inference), forward + backward (training), against MXNet's numbers ----
EXEC = [
    {"name": "reshape_like_rhs_end",
     "code": f"out = mx.sym.reshape_like({V}('l'), {V}('r'), lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)",
     "shapes": {"l": (30, 7), "r": (15, 2, 4)}, "grad": True, "no_grad": ["r"]},
    {"name": "reshape_like_negative_begin",
     "code": f"out = mx.sym.reshape_like({V}('l'), {V}('r'), lhs_begin=-1, rhs_begin=1)",
     "shapes": {"l": (3, 12), "r": (4, 2, 2, 3)}, "grad": True, "no_grad": ["r"]},
    {"name": "pooling_same_1d_max",
     "code": f"out = mx.sym.Pooling({V}('x'), kernel=(2,), stride=(2,), pad=(0, 0, 0), pool_type='max', "
             "pooling_convention='same')",
     "shapes": {"x": (2, 3, 10)}, "grad": True},
    {"name": "prelu_channel_gamma", "code": f"out = mx.sym.LeakyReLU({V}('x'), {V}('g'), act_type='prelu')",
     "shapes": {"x": (3, 4, 2, 2), "g": (4,)}, "grad": True},
    {"name": "prelu_full_gamma_2d", "code": f"out = mx.sym.LeakyReLU({V}('x'), {V}('g'), act_type='prelu')",
     "shapes": {"x": (3, 4), "g": (3, 4)}, "grad": True},
    {"name": "prelu_batch_channel_gamma_4d", "code": f"out = mx.sym.LeakyReLU({V}('x'), {V}('g'), act_type='prelu')",
     "shapes": {"x": (3, 4, 2, 2), "g": (3, 4)}, "grad": True},
    {"name": "softmax_output_probability_label",
     "code": f"out = mx.sym.SoftmaxOutput({V}('x'), {V}('p'), grad_scale=2.0)",
     "shapes": {"x": (4, 5), "p": (4, 5)}, "range": {"p": (0.0, 0.4)}, "grad": True, "loss": True, "no_grad": ["p"]},
    {"name": "selu_gradient", "code": f"out = mx.sym.LeakyReLU({V}('x'), act_type='selu')",
     "shapes": {"x": (4, 6)}, "range": {"x": (-2.0, 2.0)}, "grad": True},
    {"name": "power_symbol_scalar",
     "code": f"x = {V}('x')\nout = mx.sym.Group([mx.sym.power(x, 2.0), mx.sym.power(3.0, x), "
             f"mx.sym.power(x, {V}('y'))])",
     "shapes": {"x": (3, 4), "y": (3, 4)}, "range": {"x": (0.5, 2.0)}, "grad": True},
    {"name": "hypot_maximum_minimum",
     "code": f"x, y = {V}('x'), {V}('y')\nout = mx.sym.Group([mx.sym.hypot(x, 4.0), mx.sym.hypot(x, y), "
             "mx.sym.maximum(0.5, x), mx.sym.minimum(x, y)])",
     "shapes": {"x": (3, 4), "y": (3, 4)}, "grad": True},
    {"name": "batchnorm_v1_training",
     "code": f"out = mx.sym.BatchNorm_v1({V}('x'), name='bn', fix_gamma=False, output_mean_var=True)",
     "shapes": {"x": (4, 3, 2, 2), "bn_gamma": (3,), "bn_beta": (3,), "bn_moving_mean": (3,),
                "bn_moving_var": (3,)}, "range": {"bn_moving_var": (0.5, 1.5)}, "grad": True},
    {"name": "batchnorm_v1_global_stats",
     "code": f"out = mx.sym.BatchNorm_v1({V}('x'), name='bn', use_global_stats=True)",
     "shapes": {"x": (4, 3), "bn_gamma": (3,), "bn_beta": (3,), "bn_moving_mean": (3,), "bn_moving_var": (3,)},
     "range": {"bn_moving_var": (0.5, 1.5)}, "grad": True},
    {"name": "argmax_channel", "code": f"out = mx.sym.argmax_channel({V}('x'))", "shapes": {"x": (4, 7)}},
    {"name": "new_unary_ops",
     "code": f"x = {V}('x')\nout = mx.sym.Group([mx.sym.rcbrt(x), mx.sym.softmin(x, axis=1), "
             "mx.sym.reverse(x, axis=1), mx.sym.flip(x, axis=(0, 1)), mx.sym.hard_sigmoid(x, alpha=0.3, beta=0.4)])",
     "shapes": {"x": (3, 5)}, "range": {"x": (0.2, 3.0)}, "grad": True},
    {"name": "logical_xor",
     "code": f"x, y = {V}('x'), {V}('y')\nout = mx.sym.Group([mx.sym._internal._logical_xor(x, y), "
             "mx.sym.broadcast_logical_xor(x, mx.sym.sum(y, axis=1, keepdims=True)), "
             "mx.sym._internal._logical_xor_scalar(x, scalar=0.0)])",
     "shapes": {"x": (3, 4), "y": (3, 4)}, "range": {"x": (-1.0, 1.0), "y": (-0.2, 1.0)}},
    {"name": "broadcast_like_axes",
     "code": f"out = mx.sym.broadcast_like({V}('x'), {V}('r'), lhs_axes=(0,), rhs_axes=(1,))",
     "shapes": {"x": (1, 9), "r": (1, 5)}, "grad": True, "no_grad": ["r"]},
    {"name": "dot_nd_transpose_a", "code": f"out = mx.sym.dot({V}('a'), {V}('b'), transpose_a=True)",
     "shapes": {"a": (4, 2, 3), "b": (4, 5)}, "grad": True},
    {"name": "dot_nd_transpose_b", "code": f"out = mx.sym.dot({V}('a'), {V}('b'), transpose_b=True)",
     "shapes": {"a": (2, 3, 4), "b": (5, 2, 4)}, "grad": True},
    {"name": "batch_dot_4d", "code": f"out = mx.sym.batch_dot({V}('a'), {V}('b'), transpose_a=True)",
     "shapes": {"a": (2, 3, 4, 5), "b": (2, 3, 4, 6)}, "grad": True},
    {"name": "backward_after_inference_forward",
     "code": f"out = mx.sym.FullyConnected({V}('x'), num_hidden=3, name='fc') * 2.0",
     "shapes": {"x": (4, 5), "fc_weight": (3, 5), "fc_bias": (3,)}, "grad": True, "backward_after_inference": True},
]

EXEC += [
    {"name": "batchnorm_inference_backward",
     "code": f"out = mx.sym.BatchNorm({V}('x'), name='bn', fix_gamma=False)",
     "shapes": {"x": (4, 3, 2, 2), "bn_gamma": (3,), "bn_beta": (3,), "bn_moving_mean": (3,), "bn_moving_var": (3,)},
     "range": {"bn_moving_var": (0.5, 1.5)}, "grad": True, "inference_backward": True},
    {"name": "dropout_inference_backward", "code": f"out = mx.sym.Dropout({V}('x') * 2.0, p=0.5)",
     "shapes": {"x": (4, 5)}, "grad": True, "inference_backward": True},
]

EXEC += [
    {"name": "moments", "code": f"m = mx.sym.moments({V}('x'), axes=(0, 2), keepdims=True)\n"
     "out = mx.sym.Group([m[0], m[1]])", "shapes": {"x": (3, 4, 5)}, "grad": True},
    {"name": "svm_output_l1", "code": f"out = mx.sym.SVMOutput({V}('x'), {V}('l'), use_linear=True)",
     "shapes": {"x": (6, 4), "l": (6,)}, "range": {"l": (0.0, 3.99)}, "grad": True, "loss": True, "no_grad": ["l"]},
    {"name": "svm_output_l2", "code": f"out = mx.sym.SVMOutput({V}('x'), {V}('l'), margin=0.5, "
     "regularization_coefficient=2.0)", "shapes": {"x": (6, 4), "l": (6,)}, "range": {"l": (0.0, 3.99)},
     "grad": True, "loss": True, "no_grad": ["l"]},
]

EXEC += [
    {"name": "diag_1d", "code": f"out = mx.sym.diag({V}('x'), k=-1)", "shapes": {"x": (4,)}, "grad": True},
    {"name": "diag_2d", "code": f"out = mx.sym.diag({V}('x'), k=2)", "shapes": {"x": (3, 5)}, "grad": True},
    {"name": "diag_nd_axes", "code": f"out = mx.sym.diag({V}('x'), k=-1, axis1=2, axis2=0)",
     "shapes": {"x": (3, 2, 4)}, "grad": True},
    {"name": "multi_all_finite",
     "code": f"x, y = {V}('x'), {V}('y')\nout = mx.sym.Group([mx.sym.all_finite(x), "
             "mx.sym.multi_all_finite(x, y / x, num_arrays=2)])",
     "shapes": {"x": (2, 3), "y": (2, 3)}, "range": {"x": (0.0, 0.0)}},
]

EXEC += [   # top_k (a partial sort): value gradients routed back; the bound argument left as it was
    {"name": "topk_value_last_axis", "code": f"out = mx.sym.topk({V}('x'), axis=-1, k=1, ret_typ='value')",
     "shapes": {"x": (3, 4, 5)}, "grad": True},
    {"name": "topk_both_ascending_axis0",
     "code": f"out = mx.sym.topk({V}('x'), axis=0, k=2, ret_typ='both', is_ascend=True)",
     "shapes": {"x": (5, 3, 2)}, "grad": True},
    {"name": "topk_mask_flat_int32", "code": f"out = mx.sym.topk({V}('x'), axis=None, k=3, ret_typ='mask')",
     "shapes": {"x": (3, 4)}, "dtypes": {"x": "int32"}, "range": {"x": (-1000.0, 1000.0)}},
    {"name": "topk_uint8_ascending", "code": f"out = mx.sym.topk({V}('x'), k=2, ret_typ='both', is_ascend=True)",
     "shapes": {"x": (3, 4)}, "dtypes": {"x": "uint8"}, "range": {"x": (0.0, 255.0)}},
]

EXEC += [   # MXNet's test_pick: out-of-range indices wrap or clip
    {"name": "pick_wrap", "code": f"out = mx.sym.pick({V}('x'), {V}('i'), axis=1, mode='wrap')",
     "shapes": {"x": (3, 4, 2), "i": (3, 2)}, "dtypes": {"i": "int32"}, "range": {"i": (-9.0, 9.0)},
     "grad": True, "no_grad": ["i"]},
    {"name": "pick_clip_keepdims", "code": f"out = mx.sym.pick({V}('x'), {V}('i'), axis=0, keepdims=True)",
     "shapes": {"x": (3, 4), "i": (4,)}, "dtypes": {"i": "int32"}, "range": {"i": (-4.0, 6.0)},
     "grad": True, "no_grad": ["i"]},
]

# ---- monitor callback names and debug_str's backward ops ----
MONITOR = [
    {"name": "batchnorm_outputs", "code": f"out = mx.sym.BatchNorm({V}('data'), name='bn')",
     "shapes": {"data": (2, 3, 4, 4)}, "all": False},
    {"name": "softmax_activation_all", "code": f"out = mx.sym.SoftmaxActivation({V}('data'), name='softmax')",
     "shapes": {"data": (2, 3)}, "all": True},
    {"name": "lrn_all", "code": f"out = mx.sym.LRN({V}('data'), nsize=1, name='lrn')",
     "shapes": {"data": (2, 3, 4, 4)}, "all": True},
    {"name": "training_mlp", "code": f"h = mx.sym.FullyConnected({V}('data'), num_hidden=4, name='fc')\n"
     "out = mx.sym.Flatten(mx.sym.Activation(h * 2.0, act_type='relu', name='act'), name='flat')",
     "shapes": {"data": (2, 5)}, "all": False, "train": True, "grad_req": "write"},
    {"name": "training_mlp_all", "code": f"h = mx.sym.FullyConnected({V}('data'), num_hidden=4, name='fc')\n"
     "out = mx.sym.Flatten(mx.sym.Activation(h * 2.0, act_type='relu', name='act'), name='flat')",
     "shapes": {"data": (2, 5)}, "all": True, "train": True, "grad_req": "write"},
    {"name": "training_add_clones_gradient",
     "code": f"out = mx.sym.elemwise_add({V}('x') * 2.0, mx.sym.relu({V}('y')), name='s')",
     "shapes": {"x": (2, 3), "y": (2, 3)}, "all": False, "train": True, "grad_req": "write"},
    {"name": "training_batchnorm", "code": f"out = mx.sym.BatchNorm({V}('data'), name='bn')",
     "shapes": {"data": (2, 3, 4, 4)}, "all": False, "train": True, "grad_req": "write"},
]
