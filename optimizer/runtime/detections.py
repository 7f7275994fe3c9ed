"""Server-side reduction of an SSD head to its best anchors (plan ``split.result: topk``).

A detector's head outputs box encodings ``[A, 4]`` and class logits ``[A, C]`` for every anchor
(51,150 at 640x640: 19.4 MB as float32). ``TFLite_Detection_PostProcess`` (TF Object Detection
API) keeps at most ``max_total_detections`` (100) of them after score ranking and non-maximum
suppression. The split's server therefore sends back only the ``k`` anchors of highest class
score, each with its index, box encoding, score (the best class logit) and class; the phone
decodes those boxes with its anchors and finishes NMS on them. Ranking by logit equals ranking by
sigmoid score. Column 0 of the logits is the background class when ``C > 1`` (the API's
``add_background_class``) and is not a detection.
"""

from __future__ import annotations

import numpy as np

from ..plan.manifest import TOPK_ANCHOR as ANCHOR
from ..plan.manifest import TOPK_BOX as BOX
from ..plan.manifest import TOPK_CLASS as CLASS
from ..plan.manifest import TOPK_SCORE as SCORE


def topk_detections(boxes: np.ndarray, logits: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """The ``k`` anchors of highest class score of one frame (``boxes`` [.., A, 4], ``logits``
    [.., A, C], real values); ties keep the lower anchor index."""
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    lg = np.asarray(logits, dtype=np.float32).reshape(len(b), -1)
    cls_logits = lg[:, 1:] if lg.shape[1] > 1 else lg
    cls = np.argmax(cls_logits, axis=1) + (1 if lg.shape[1] > 1 else 0)
    score = cls_logits.max(axis=1)
    order = np.argsort(-score, kind="stable")[:k]
    return {ANCHOR: order.astype(np.int32)[None], BOX: b[order][None], SCORE: score[order][None],
            CLASS: cls[order].astype(np.int32)[None]}
