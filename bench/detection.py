"""An SSD-sized DETECTION_POSTPROCESSING head in regular mode (per-class NMS): 1917 anchors
(MobileNet-SSD's count), 91 classes (class 0 the background), boxes decoded from random deltas
on a grid of anchors, scores the sigmoid of random logits (float32), score threshold 0.05 (about 290 candidates per class),
IoU threshold 0.6, at most 100 detections per class and 100 in all (the TFLite SSD
converter's settings apart from its 1e-8 score threshold), built and run through the Python
API, one thread.

Prints "detection_regular_ms <ms> class_by_class_ms <ms>": in 5 rounds (after 2 warm-up
runs), the operation (median of 3 runs), its own NMS part alone (median of 3) and, on the same
decoded boxes, what the kernel did before issue 28 (hard_nms class after class, one run):
the operation's median, and the class-by-class time as that times the median of the rounds'
own ratios (the operation's time less its NMS part plus the walk, over the operation's time),
so the ratio is measured side by side.
"""
import statistics
import time

import numpy as np

ANCHORS, CLASSES = 1917, 91
ROUNDS = 5


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
    from nnapi_py.ops.nms import hard_nms, per_class_hard_nms
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
    # rounds of the three side by side (the shared machine's speed drifts within a run):
    # the ratio is the median of the rounds' own ratios
    ops, ratios = [], []
    for _ in range(ROUNDS):
        op = timed(lambda: e.run(feeds), 3)
        new = timed(lambda: per_class_hard_nms(sc, boxes, th, iou, 100), 3)
        old = timed(walk, 1)
        ops.append(op)
        ratios.append((op - new + old) / op)
    op_ms = statistics.median(ops)
    print(f"detection_regular_ms {op_ms:.3f} class_by_class_ms {op_ms * statistics.median(ratios):.3f}")


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
