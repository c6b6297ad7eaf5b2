"""Custom operators with an NNAPI form."""
from __future__ import annotations

import numpy as np

from .base import Unmapped, maps


@maps("CUSTOM_Convolution2DTransposeBias", delegate=False)
def convolution_2d_transpose_bias(ctx, node):
    """MediaPipe's transposed convolution with bias: options are a TfLiteTransposeConvParams
    struct (padding, stride_width, stride_height) -> TRANSPOSE_CONV_2D, implicit padding."""
    raw = node.custom_options
    if len(raw) < 12:
        raise Unmapped("custom options (padding, strides) missing")
    padding, sw, sh = np.frombuffer(raw[:12], np.int32)
    w = ctx.tensors[node.ins[1]]
    out = ctx.tensors[node.outs[0]]
    pad = {1: 1, 2: 2}.get(int(padding), 1)       # TfLitePadding: 1 SAME, 2 VALID
    return ctx.emit("TRANSPOSE_CONV_2D", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]),
                                          ctx.bias(node, w.shape[0]), ctx.ivec(out.shape), pad, int(sw), int(sh),
                                          0, False], node.outs[0])
