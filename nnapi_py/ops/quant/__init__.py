"""Quantized arithmetic shared by every operation: one place, the reference rounding.

The shared layer of every quantized kernel, one module per concern (each imports only its
siblings here, numpy, constants and ops/base.py; never an operation module):

  clamp.py        clamps (the clip ufunc called directly), fused activations float and quantized,
                  a quantized type's integer range, the clamped store
  fixedpoint.py   gemmlowp-style 32-bit fixed point: quantize_multiplier(s), the doubling high
                  multiply and rounding shift, multiply_by_quantized_multiplier, Requant; the
                  exact std::round (round_half_away), requantize_into, quantize_value, dequantize
  exact.py        when integer products are exact in float32 / float64 BLAS (exact_dtype,
                  exact_splits, centered_max, scale_product)
  stage.py        OutputStage, the requantization of int32 accumulators, from its mixins:
    stage_forms.py  the exact float64 / int64 / general evaluations
    stage_steps.py  the step table of small calls
    stage_f32.py    the float32 form and its proof (prepare_f32)
    f32search.py    the proof's search for least float32 constants (also PairAffine's walk)
  products.py     one-row products with constant weights: TableProduct, DirectProduct
  tables.py       8-bit tables: byte_codes, ByteLookup, PairAffine, dequant / requant / unary tables
  fixed16.py      the 16-bit fixed point of the quantized LSTMs (wrap16 ... int_layer_norm)
  work.py         each thread's reused work arrays

Operation modules keep `from . import quant as Q` and `Q.name`: this package re-exports every
name they use.  Tuning constants that a module reads at call time (clamp._FMAX_UPTO,
stage_f32._STEP_WINDOWS, f32search._M_NUDGES, ...) are not re-exported: a test that changes
one patches the module that reads it.
"""
from .clamp import (_CLIP_FAST, _CLIP_UFUNC, activation_range, apply_float_activation, clamp_into,  # noqa: F401
                    clip_inplace, float_activation, negpart_into, qrange, qrange_of_dtype, relu_into, store)
from .fixedpoint import (INT32_MAX, INT32_MIN, Requant, dequantize, multiply_by_quantized_multiplier,  # noqa: F401
                         quantize_multiplier, quantize_multipliers, quantize_to, quantize_value, requantize_into,
                         round_half_away)
from .exact import centered_max, exact_dtype, exact_splits, scale_product  # noqa: F401
from .stage_steps import _SMALL_VALUES, SMALL_VALUES  # noqa: F401
from .stage import OutputStage  # noqa: F401
from .products import (DIRECT_TWO_MAX, DirectProduct, TableProduct, _exact_affine, c_einsum, direct_columns,  # noqa: F401
                       flip_table)
from .tables import (PAIR_AFFINE_MIN, PAIR_LOOKUP_MIN, ByteLookup, PairAffine, affine_requant_table,  # noqa: F401
                     as_bytes, byte_codes, dequant_table, requant_table, small_lookup, take,
                     unary_table)
from .work import aligned, aligned_empty  # noqa: F401
from .fixed16 import (I16_MAX, I16_MIN, exp_on_negative16, int_layer_norm, inv_sqrt_multiplier,  # noqa: F401
                      logistic16, rdbpot, rescale16, sat16, srdhm16, tanh16, wrap16)
