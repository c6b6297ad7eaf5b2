"""An SSD-sized DETECTION_POSTPROCESSING head in regular mode (per-class NMS): 1917 anchors
(MobileNet-SSD's count), 91 classes (class 0 the background), boxes decoded from random deltas
on a grid of anchors, scores the sigmoid of random logits (float32), score threshold 0.05 (about 290 candidates per class),
IoU threshold 0.6, at most 100 detections per class and 100 in all (the TFLite SSD
converter's settings apart from its 1e-8 score threshold), built and run through the Python
API, one thread.

Prints "detection_regular_ms <ms> class_by_class_ms <ms>": the operation's median of 15 runs
(after 2 warm-up runs), and beside it, on the same decoded boxes, what the kernel did before
issue 28 (hard_nms class after class, the median of 3) plus the run's other work (the
operation's time less its own NMS part), so the ratio is from the same run.
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
    anchors = _anchors()
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
    op_ms = statistics.median(ts)
    from nnapi_py.ops.detection import hard_nms, per_class_hard_nms
    sc = feeds["scores"][0, :, 1:]
    boxes = _decode(feeds["deltas"][0], _anchors())
    th, iou = np.float32(0.05), np.float32(0.6)

    def walk():
        for k in range(sc.shape[1]):
            cand = np.flatnonzero(sc[:, k] > th)
            hard_nms(sc[cand, k], boxes[cand], iou, 100)

    def timed(f, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            f()
            out.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(out)
    new_ms = timed(lambda: per_class_hard_nms(sc, boxes, th, iou, 100), 7)
    old_ms = timed(walk, 3)
    print(f"detection_regular_ms {op_ms:.3f} class_by_class_ms {op_ms - new_ms + old_ms:.3f}")


def _anchors():
    side = int(np.ceil(np.sqrt(ANCHORS / 3)))
    g = (np.arange(side) + 0.5) / side
    cy, cx = np.meshgrid(g, g, indexing="ij")
    centres = np.repeat(np.stack([cy.ravel(), cx.ravel()], 1), 3, 0)[:ANCHORS]
    sizes = np.tile(np.array([[0.1, 0.1], [0.14, 0.07], [0.07, 0.14]]), (side * side, 1))[:ANCHORS]
    return np.concatenate([centres, sizes], 1).astype(np.float32)


def _decode(deltas, anchors):
    """The operation's box decoding (scales 10, 10, 5, 5), float32."""
    f = np.float32
    ay, ax, ah, aw = (anchors[:, k] for k in range(4))
    yc = ay + ah * deltas[:, 0] / f(10)
    xc = ax + aw * deltas[:, 1] / f(10)
    hh = ah * np.exp(deltas[:, 2] / f(5)) * f(0.5)
    wh = aw * np.exp(deltas[:, 3] / f(5)) * f(0.5)
    return np.stack((yc - hh, xc - wh, yc + hh, xc + wh), axis=-1)


if __name__ == "__main__":
    main()
