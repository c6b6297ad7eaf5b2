"""An SSD-sized DETECTION_POSTPROCESSING head in regular mode (per-class NMS): 1917 anchors
(MobileNet-SSD's count), 91 classes (class 0 the background), boxes decoded from random deltas
on a grid of anchors, scores the sigmoid of random logits (float32), score threshold 0.05 (about 290 candidates per class),
IoU threshold 0.6, at most 100 detections per class and 100 in all (the TFLite SSD
converter's settings apart from its 1e-8 score threshold), built and run through the Python
API, one thread.

Prints "detection_regular_ms <median ms>" (median of 15 runs after 2 warm-up runs).
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ANCHORS, CLASSES = 1917, 91


def head(seed=0, score_th=0.05):
    """(model inputs, compiled model) of the SSD-sized head."""
    import nnapi_py as nn
    rng = np.random.default_rng(seed)
    side = int(np.ceil(np.sqrt(ANCHORS / 3)))
    g = (np.arange(side) + 0.5) / side
    cy, cx = np.meshgrid(g, g, indexing="ij")
    centres = np.repeat(np.stack([cy.ravel(), cx.ravel()], 1), 3, 0)[:ANCHORS]
    sizes = np.tile(np.array([[0.1, 0.1], [0.14, 0.07], [0.07, 0.14]]), (side * side, 1))[:ANCHORS]
    anchors = np.concatenate([centres, sizes], 1).astype(np.float32)
    scores = (1 / (1 + np.exp(-rng.normal(-5.0, 2.0, (1, ANCHORS, CLASSES))))).astype(np.float32)
    deltas = rng.normal(0, 0.5, (1, ANCHORS, 4)).astype(np.float32)
    m = nn.Model()
    s = m.input("scores", nn.float32, scores.shape)
    d = m.input("deltas", nn.float32, deltas.shape)
    outs = m.op("DETECTION_POSTPROCESSING", s, d, m.constant(anchors), 10.0, 10.0, 5.0, 5.0, True,
                100, 1, 100, float(score_th), 0.6, False,
                outputs=[(nn.float32, (1, 100)), (nn.float32, (1, 100, 4)), (nn.int32, (1, 100)),
                         (nn.int32, (1,))])
    for k, o in enumerate(outs):
        m.output(o, f"out{k}")
    return {"scores": scores, "deltas": deltas}, m.compile()


def main():
    feeds, c = head()
    e = c.execution(reusable=True)
    for _ in range(2):
        e.run(feeds)
    ts = []
    for _ in range(15):
        t0 = time.perf_counter()
        e.run(feeds)
        ts.append((time.perf_counter() - t0) * 1e3)
    print(f"detection_regular_ms {statistics.median(ts):.3f}")


if __name__ == "__main__":
    main()
