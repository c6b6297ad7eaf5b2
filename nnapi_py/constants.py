"""NNAPI constants (values as in include/android/NeuralNetworks.h) and operand-type facts."""
import numpy as np

# ResultCode: the names by code, and each name bound to its code
RESULT_NAMES = {
    0: "NO_ERROR", 1: "OUT_OF_MEMORY", 2: "INCOMPLETE", 3: "UNEXPECTED_NULL", 4: "BAD_DATA",
    5: "OP_FAILED", 6: "BAD_STATE", 7: "UNMAPPABLE", 8: "OUTPUT_INSUFFICIENT_SIZE",
    9: "UNAVAILABLE_DEVICE", 10: "MISSED_DEADLINE_TRANSIENT", 11: "MISSED_DEADLINE_PERSISTENT",
    12: "RESOURCE_EXHAUSTED_TRANSIENT", 13: "RESOURCE_EXHAUSTED_PERSISTENT", 14: "DEAD_OBJECT",
}
(NO_ERROR, OUT_OF_MEMORY, INCOMPLETE, UNEXPECTED_NULL, BAD_DATA, OP_FAILED, BAD_STATE, UNMAPPABLE,
 OUTPUT_INSUFFICIENT_SIZE, UNAVAILABLE_DEVICE, MISSED_DEADLINE_TRANSIENT, MISSED_DEADLINE_PERSISTENT,
 RESOURCE_EXHAUSTED_TRANSIENT, RESOURCE_EXHAUSTED_PERSISTENT, DEAD_OBJECT) = RESULT_NAMES

# Implementation limits (docs/decisions.md, "Limits"): Android sets none; lists this long are
# rejected (BAD_DATA) before they are read, so no call spends seconds on a huge count.
MAX_OPERATION_OPERANDS = 1 << 16   # operands in one variadic operation list (CONCATENATION, SPLIT, IF, WHILE)
MAX_RANK = 64                      # dimensions of one operand (numpy's limit: no kernel could run more)

# OperandCode: the names by code, and each name bound to its code
TYPE_NAMES = {
    0: "FLOAT32", 1: "INT32", 2: "UINT32", 3: "TENSOR_FLOAT32", 4: "TENSOR_INT32",
    5: "TENSOR_QUANT8_ASYMM", 6: "BOOL", 7: "TENSOR_QUANT16_SYMM", 8: "TENSOR_FLOAT16",
    9: "TENSOR_BOOL8", 10: "FLOAT16", 11: "TENSOR_QUANT8_SYMM_PER_CHANNEL",
    12: "TENSOR_QUANT16_ASYMM", 13: "TENSOR_QUANT8_SYMM", 14: "TENSOR_QUANT8_ASYMM_SIGNED",
    15: "MODEL", 10000: "OEM_SCALAR", 10001: "TENSOR_OEM_BYTE",
}
(FLOAT32, INT32, UINT32, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM, BOOL, TENSOR_QUANT16_SYMM,
 TENSOR_FLOAT16, TENSOR_BOOL8, FLOAT16, TENSOR_QUANT8_SYMM_PER_CHANNEL, TENSOR_QUANT16_ASYMM, TENSOR_QUANT8_SYMM,
 TENSOR_QUANT8_ASYMM_SIGNED, MODEL, OEM_SCALAR, TENSOR_OEM_BYTE) = TYPE_NAMES
for _names in (RESULT_NAMES, TYPE_NAMES):       # the two spellings of each name agree
    for _code, _name in _names.items():
        if globals()[_name] != _code:
            raise ImportError(f"nnapi_py.constants: {_name} is bound to {globals()[_name]}, named for {_code}")
del _names, _code, _name
TYPE_CODES = {v: k for k, v in TYPE_NAMES.items()}

SCALAR_TYPES = frozenset((FLOAT32, INT32, UINT32, BOOL, FLOAT16, MODEL, OEM_SCALAR))
TENSOR_TYPES = frozenset(set(TYPE_NAMES) - SCALAR_TYPES)

# numpy dtype of each type (scalars included, MODEL/OEM_SCALAR excluded)
DTYPES = {
    FLOAT32: np.dtype(np.float32), INT32: np.dtype(np.int32), UINT32: np.dtype(np.uint32),
    BOOL: np.dtype(np.bool_), FLOAT16: np.dtype(np.float16),
    TENSOR_FLOAT32: np.dtype(np.float32), TENSOR_INT32: np.dtype(np.int32),
    TENSOR_QUANT8_ASYMM: np.dtype(np.uint8), TENSOR_QUANT16_SYMM: np.dtype(np.int16),
    TENSOR_FLOAT16: np.dtype(np.float16), TENSOR_BOOL8: np.dtype(np.bool_),
    TENSOR_QUANT8_SYMM_PER_CHANNEL: np.dtype(np.int8), TENSOR_QUANT16_ASYMM: np.dtype(np.uint16),
    TENSOR_QUANT8_SYMM: np.dtype(np.int8), TENSOR_QUANT8_ASYMM_SIGNED: np.dtype(np.int8),
    TENSOR_OEM_BYTE: np.dtype(np.uint8),
}
ELEMENT_SIZE = {t: d.itemsize for t, d in DTYPES.items()}
ELEMENT_SIZE[OEM_SCALAR] = 1  # OEM values are not validated (any length accepted)

# feature level (1..8) at which each operand type appeared
TYPE_LEVEL = {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 3, 7: 3, 8: 3, 9: 3, 10: 3, 11: 3, 12: 3, 13: 3,
              14: 4, 15: 4, 10000: 1, 10001: 1}

QUANT_TYPES = frozenset((TENSOR_QUANT8_ASYMM, TENSOR_QUANT16_SYMM, TENSOR_QUANT16_ASYMM,
                         TENSOR_QUANT8_SYMM, TENSOR_QUANT8_ASYMM_SIGNED))
ZERO_POINT_RANGE = {TENSOR_QUANT8_ASYMM: (0, 255), TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
                    TENSOR_QUANT16_ASYMM: (0, 65535)}

# FuseCode, PaddingCode, PreferenceCode, PriorityCode, DeviceTypeCode, DurationCode
FUSED_NONE, FUSED_RELU, FUSED_RELU1, FUSED_RELU6 = 0, 1, 2, 3
PADDING_SAME, PADDING_VALID = 1, 2
PREFERENCES = (0, 1, 2)
PREFER_LOW_POWER, PREFER_FAST_SINGLE_ANSWER, PREFER_SUSTAINED_SPEED = 0, 1, 2
PRIORITIES = (90, 100, 110)
PRIORITY_DEFAULT = 100
DEVICE_CPU = 2
DURATION_CODES = (0, 1, 2, 3)

# FeatureLevelCode: level n (1..8) -> code
FEATURE_LEVEL_CODE = {1: 27, 2: 28, 3: 29, 4: 30, 5: 31, 6: 1000006, 7: 1000007, 8: 1000008}
RUNTIME_FEATURE_LEVEL = 8

# feature level at which each function appeared (those not listed: 1); tests/test_devices.py
# checks this against the header's comments
FUNCTION_LEVEL = {
    "Model_relaxComputationFloat32toFloat16": 2,
    "Burst_create": 3, "Burst_free": 3, "Compilation_createForDevices": 3, "Compilation_setCaching": 3,
    "Device_getFeatureLevel": 3, "Device_getName": 3, "Device_getType": 3, "Device_getVersion": 3,
    "Execution_burstCompute": 3, "Execution_compute": 3, "Execution_getDuration": 3,
    "Execution_getOutputOperandDimensions": 3, "Execution_getOutputOperandRank": 3,
    "Execution_setMeasureTiming": 3, "Memory_createFromAHardwareBuffer": 3,
    "Model_getSupportedOperationsForDevices": 3, "Model_setOperandSymmPerChannelQuantParams": 3,
    "_getDevice": 3, "_getDeviceCount": 3,
    "Compilation_setPriority": 4, "Compilation_setTimeout": 4, "Device_wait": 4,
    "Event_createFromSyncFenceFd": 4, "Event_getSyncFenceFd": 4, "Execution_setLoopTimeout": 4,
    "Execution_setTimeout": 4, "Execution_startComputeWithDependencies": 4, "MemoryDesc_addInputRole": 4,
    "MemoryDesc_addOutputRole": 4, "MemoryDesc_create": 4, "MemoryDesc_finish": 4, "MemoryDesc_free": 4,
    "MemoryDesc_setDimensions": 4, "Memory_copy": 4, "Memory_createFromDesc": 4,
    "Model_setOperandValueFromModel": 4, "_getDefaultLoopTimeout": 4, "_getMaximumLoopTimeout": 4,
    "Compilation_getPreferredMemoryAlignmentForInput": 5,
    "Compilation_getPreferredMemoryAlignmentForOutput": 5,
    "Compilation_getPreferredMemoryPaddingForInput": 5, "Compilation_getPreferredMemoryPaddingForOutput": 5,
    "Execution_enableInputAndOutputPadding": 5, "Execution_setReusable": 5, "_getRuntimeFeatureLevel": 5,
}

MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES = 128
BYTE_SIZE_OF_CACHE_TOKEN = 32
DEFAULT_LOOP_TIMEOUT_NS = 2_000_000_000
MAXIMUM_LOOP_TIMEOUT_NS = 15_000_000_000

DEVICE_NAME = "nnapi_py-cpu"
DEVICE_VERSION = "nnapi_py-1.0"

# OperationCode: index = code (0..105); OEM_OPERATION = 10000
OPERATION_NAMES = (
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D",
    "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "DEQUANTIZE", "EMBEDDING_LOOKUP",
    "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP", "L2_NORMALIZATION",
    "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION",
    "LSTM", "MAX_POOL_2D", "MUL", "RELU",
    "RELU1", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
    "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF",
    "TANH", "BATCH_TO_SPACE_ND", "DIV", "MEAN",
    "PAD", "SPACE_TO_BATCH_ND", "SQUEEZE", "STRIDED_SLICE",
    "SUB", "TRANSPOSE", "ABS", "ARGMAX",
    "ARGMIN", "AXIS_ALIGNED_BBOX_TRANSFORM", "BIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_RNN",
    "BOX_WITH_NMS_LIMIT", "CAST", "CHANNEL_SHUFFLE", "DETECTION_POSTPROCESSING",
    "EQUAL", "EXP", "EXPAND_DIMS", "GATHER",
    "GENERATE_PROPOSALS", "GREATER", "GREATER_EQUAL", "GROUPED_CONV_2D",
    "HEATMAP_MAX_KEYPOINT", "INSTANCE_NORMALIZATION", "LESS", "LESS_EQUAL",
    "LOG", "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR",
    "LOG_SOFTMAX", "MAXIMUM", "MINIMUM", "NEG",
    "NOT_EQUAL", "PAD_V2", "POW", "PRELU",
    "QUANTIZE", "QUANTIZED_16BIT_LSTM", "RANDOM_MULTINOMIAL", "REDUCE_ALL",
    "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
    "REDUCE_SUM", "ROI_ALIGN", "ROI_POOLING", "RSQRT",
    "SELECT", "SIN", "SLICE", "SPLIT",
    "SQRT", "TILE", "TOPK_V2", "TRANSPOSE_CONV_2D",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "RESIZE_NEAREST_NEIGHBOR", "QUANTIZED_LSTM",
    "IF", "WHILE", "ELU", "HARD_SWISH",
    "FILL", "RANK", "BATCH_MATMUL", "PACK",
    "MIRROR_PAD", "REVERSE",
)
OEM_OPERATION = 10000
OPERATION_CODES = {n: i for i, n in enumerate(OPERATION_NAMES)}
