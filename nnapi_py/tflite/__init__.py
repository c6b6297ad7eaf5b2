"""Run .tflite models through NNAPI on Linux.

    import nnapi_py.tflite as T
    m = T.load("face_detection_short_range.tflite")   # read, fold, map, Model_finish + Compilation_finish
    outs = m.run([x])                                  # numpy inputs in the model's order -> outputs
    print(m.report())                                  # the delegate's view; per operator NNAPI op(s) or why not

The package, in the order a model goes through it:

* reader.py -- the only module reading the flatbuffer (the `tflite` package: the official
  schema's generated Python code): subgraphs, tensors, operators, options.
* fold.py -- load-time folding: nodes whose outputs are known on load become constants.
* base.py -- the shared layer of the mapping modules: the registry (`@maps`, per-level `Rule`s),
  the mapping context (operands, constants, scalar options, fused activations), `decide`.
* map_*.py -- one mapping module per operator family; each imports only base.py.
* partition.py -- the delegate's partitioning (TFLite's graph_info.cc, greedy, at most 3 NNAPI
  partitions) and the run through the partitions (Stitch).
* cpu.py -- a CPU partition: a sub-model of the file run by LiteRT's builtin kernels.
* report.py -- what the delegate would do at the model's feature level, beside what nnapi_py does.
* model.py -- TfliteModel / load / LoadError: read -> fold -> decide -> partition -> map and
  compile each NNAPI partition, make each CPU one; run().

Every NNAPI model is built through the C library with the Python API (nnapi_py.nn), exactly as
a client would.  Mapping follows what TFLite's NNAPI delegate does: options become scalar
operands, fused activations become FuseCodes (or a separate activation where NNAPI has no fused
form), SAME/VALID padding becomes the implicit padding code, float16 weights behind DEQUANTIZE
are folded to float32 constants.  What NNAPI cannot run at the target feature level runs on
TFLite's own CPU kernels through LiteRT (optional); without LiteRT, `load` fails with one error
listing every such operator with its index and the reason, and the command that installs it.
"""
from .base import REGISTRY, Rule, Unmapped  # noqa: F401
from .model import LoadError, TfliteModel, _StatePair, load, mapping_modules  # noqa: F401

__all__ = ["load", "LoadError", "TfliteModel"]

mapping_modules()
