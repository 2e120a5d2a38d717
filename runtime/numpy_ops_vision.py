"""Numpy references of vision.roi_align and vision.roi_pool (registered into ``NUMPY_OPS`` when
``numpy_ops`` imports this module), following TVM's topi kernels: region coordinates scaled by
``spatial_scale``, each output bin averaging (or maxing) bilinear samples (roi_align) or maxing
the pixels it covers (roi_pool)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .numpy_ops import numpy_op


def _bilinear(image: np.ndarray, y: float, x: float) -> np.ndarray:
    """image (C, H, W) at (y, x), zero outside [-1, H] x [-1, W], clamped inside."""
    h, w = image.shape[1:]
    if y < -1.0 or x < -1.0 or y > h or x > w:
        return np.zeros(image.shape[0], image.dtype)
    y, x = min(max(y, 0.0), h - 1.0), min(max(x, 0.0), w - 1.0)
    y0, x0 = math.floor(y), math.floor(x)
    out = np.zeros(image.shape[0], np.float64)
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy <= h - 1 and 0 <= xx <= w - 1:
                out += wy * wx * image[:, yy, xx]
    return out


@numpy_op("vision.roi_align")
def roi_align(args: tuple, attrs: Any) -> np.ndarray:
    data, rois = np.asarray(args[0]), np.asarray(args[1])
    nhwc = attrs["layout"] == "NHWC"
    if nhwc:
        data = data.transpose(0, 3, 1, 2)
    ph, pw = attrs["pooled_size"]
    scale, ratio, aligned = attrs["spatial_scale"], attrs["sample_ratio"], attrs["aligned"]
    out = np.zeros((len(rois), data.shape[1], ph, pw), data.dtype)
    for i, (b, x0, y0, x1, y1) in enumerate(rois.astype(np.float64)):
        x0, y0, x1, y1 = x0 * scale, y0 * scale, x1 * scale, y1 * scale
        roi_h, roi_w = (y1 - y0, x1 - x0) if aligned else (max(y1 - y0, 1.0), max(x1 - x0, 1.0))
        bin_h, bin_w = roi_h / ph, roi_w / pw
        grid_h = ratio if ratio > 0 else math.ceil(roi_h / ph)
        grid_w = ratio if ratio > 0 else math.ceil(roi_w / pw)
        for py in range(ph):
            for px in range(pw):
                samples = [_bilinear(data[int(b)], y0 + py * bin_h + (sy + 0.5) * bin_h / grid_h,
                                     x0 + px * bin_w + (sx + 0.5) * bin_w / grid_w)
                           for sy in range(grid_h) for sx in range(grid_w)]
                if attrs["mode"] == "avg":
                    out[i, :, py, px] = sum(s / (grid_h * grid_w) for s in samples) if samples else 0
                else:
                    out[i, :, py, px] = np.max(samples, axis=0) if samples else -np.inf
    return out.transpose(0, 2, 3, 1) if nhwc else out


@numpy_op("vision.roi_pool")
def roi_pool(args: tuple, attrs: Any) -> np.ndarray:
    data, rois = np.asarray(args[0]), np.asarray(args[1])
    ph, pw = attrs["pooled_size"]
    h, w = data.shape[2:]
    out = np.zeros((len(rois), data.shape[1], ph, pw), data.dtype)
    for i, roi in enumerate(rois.astype(np.float64)):
        x0, y0, x1, y1 = (math.floor(v * attrs["spatial_scale"] + 0.5) for v in roi[1:])
        bin_h, bin_w = max(y1 - y0 + 1, 1) / ph, max(x1 - x0 + 1, 1) / pw
        for py in range(ph):
            for px in range(pw):
                hs, he = (min(max(v + y0, 0), h) for v in (math.floor(py * bin_h), math.ceil((py + 1) * bin_h)))
                ws, we = (min(max(v + x0, 0), w) for v in (math.floor(px * bin_w), math.ceil((px + 1) * bin_w)))
                if he > hs and we > ws:  # (an empty bin stays 0)
                    out[i, :, py, px] = data[int(roi[0]), :, hs:he, ws:we].max(axis=(1, 2))
    return out


@numpy_op("vision.get_valid_counts")
def get_valid_counts(args: tuple, attrs: Any) -> tuple:
    """Per batch, the boxes scoring above the threshold (and of a class >= 0) moved first in
    order; the rest filled with -1; with their count and original indices."""
    data = np.asarray(args[0])
    batch, anchors, _ = data.shape
    counts = np.zeros(batch, np.int32)
    boxes = np.full_like(data, -1)
    indices = np.full((batch, anchors), -1, np.int32)
    score, cls = attrs["score_index"], attrs["id_index"]
    for b in range(batch):
        keep = data[b, :, score] > data.dtype.type(attrs["score_threshold"])
        if cls >= 0:
            keep &= data[b, :, cls] >= 0
        kept = np.flatnonzero(keep)
        counts[b] = len(kept)
        boxes[b, :len(kept)] = data[b, kept]
        indices[b, :len(kept)] = kept
    return counts, boxes, indices


@numpy_op("vision.multibox_transform_loc")
def multibox_transform_loc(args: tuple, attrs: Any) -> tuple:
    """Anchors (left, top, right, bottom) moved and scaled by the predicted offsets into
    (ymin, xmin, ymax, xmax) boxes; class scores softmaxed, those under the threshold zeroed."""
    cls, loc, anchor = (np.asarray(a) for a in args)
    dtype = cls.dtype.type
    batch, _, anchors = cls.shape
    vx, vy, vw, vh = (dtype(v) for v in attrs["variances"])
    left, top, right, bottom = (anchor[0, :, k] for k in range(4))
    ah, aw = bottom - top, right - left
    ay, ax = (top + bottom) * dtype(0.5), (left + right) * dtype(0.5)
    ex, ey, ew, eh = (loc.reshape(batch, anchors, 4)[..., k] for k in range(4))
    yc, xc = ey * vy * ah + ay, ex * vx * aw + ax
    hh, hw = dtype(0.5) * np.exp(eh * vh) * ah, dtype(0.5) * np.exp(ew * vw) * aw
    boxes = np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=-1).astype(cls.dtype)
    if attrs["clip"]:
        boxes = np.clip(boxes, 0, 1)
    scores = cls
    if attrs["apply_softmax"]:
        e = np.exp(cls - cls.max(axis=1, keepdims=True))
        scores = e / e.sum(axis=1, keepdims=True)
    scores = np.where(scores >= dtype(attrs["threshold"]), scores, dtype(0)).astype(cls.dtype)
    if not attrs["keep_background"]:
        scores[:, 0] = 0
    return boxes, scores


def _iou(a: np.ndarray, b: np.ndarray) -> Any:
    """Intersection over union of two (x0, y0, x1, y1) boxes in either corner order, in their dtype."""
    zero = a.dtype.type(0)
    al, at, ar, ab = min(a[0], a[2]), min(a[1], a[3]), max(a[0], a[2]), max(a[1], a[3])
    bl, bt, br, bb = min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])
    inter = max(zero, min(ab, bb) - max(at, bt)) * max(zero, min(ar, br) - max(al, bl))
    union = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - inter
    return zero if union <= zero else inter / union


@numpy_op("vision.non_max_suppression")
def non_max_suppression(args: tuple, attrs: Any) -> Any:
    """TVM's classic NMS, batch by batch: the valid boxes by descending score (top_k of them),
    each kept box (score above 0, up to max_output_size) suppressing the later ones of its class
    that overlap it by iou_threshold or more; soft-NMS instead picks the best remaining box each
    round and decays the scores of the others."""
    data, valid_count, indices = (np.asarray(a) for a in args)
    batch, anchors, _ = data.shape
    a = attrs
    score, start, cls, limit = a["score_index"], a["coord_start"], a["id_index"], a["max_output_size"]
    soft = a["soft_nms_sigma"] > 0
    thresh = data.dtype.type(a["score_threshold"] if soft else 0.0)
    iou_threshold = data.dtype.type(a["iou_threshold"])
    out = np.full_like(data, -1)
    box = np.full((batch, anchors), -1, np.int32)
    kept = np.zeros((batch, 1), np.int32)
    for i in range(batch):
        n = int(valid_count[i])
        order = np.argsort(-data[i, :n, score].astype(np.float64), kind="stable")
        keep = min(n, a["top_k"]) if a["top_k"] > 0 else n
        out[i, :keep], box[i, :keep] = data[i, order[:keep]], order[:keep]
        rows, ids = out[i], box[i]

        def suppresses(j: int, k: int) -> bool:
            return a["force_suppress"] or cls < 0 or rows[j, cls] == rows[k, cls]

        count = 0
        if soft:
            scale = data.dtype.type(-0.5 / a["soft_nms_sigma"])
            for _ in range(keep):
                if limit > 0 and count >= limit:
                    continue
                live = [j for j in range(count, keep) if ids[j] >= 0 and rows[j, score] > thresh]
                if live:
                    best = max(live, key=lambda j: (rows[j, score], -j))  # (the first of equal scores)
                    rows[[count, best]], ids[[count, best]] = rows[[best, count]], ids[[best, count]]
                    for k in range(count + 1, keep):
                        if ids[k] >= 0 and rows[k, score] > thresh and suppresses(count, k):
                            iou = _iou(rows[count, start:start + 4], rows[k, start:start + 4])
                            if iou >= iou_threshold:
                                ids[k] = -1
                            else:
                                rows[k, score] *= np.exp(scale * iou * iou)
                                if rows[k, score] <= thresh:
                                    ids[k] = -1
                    count += 1
            ids[:count] = [indices[i, j] for j in ids[:count]]
            rows[count:], ids[count:] = -1, -1
            kept[i, 0] = count
            continue
        for j in range(keep):
            if rows[j, score] > thresh and (limit <= 0 or count < limit):
                count += 1
                for k in range(j + 1, keep):
                    if rows[k, score] > thresh and suppresses(j, k) \
                            and _iou(rows[j, start:start + 4], rows[k, start:start + 4]) >= iou_threshold:
                        rows[k, score], ids[k] = -1, -1
            else:
                rows[j], ids[j] = -1, -1
        chosen = [indices[i, j] for j in ids if j >= 0]
        ids[:] = -1
        ids[:len(chosen)] = chosen
        kept[i, 0] = len(chosen)
    if a["return_indices"]:
        return (out, box, kept) if soft else (box, kept)
    if a["invalid_to_bottom"]:
        for i in range(batch):
            valid = out[i, out[i, :, score] >= 0]
            out[i] = -1
            out[i, :len(valid)] = valid
    return out


def _first(value: Any) -> Any:
    """The value of a scalar or one-element tensor argument."""
    return np.asarray(value).reshape(-1)[0]


@numpy_op("vision.all_class_non_max_suppression")
def all_class_non_max_suppression(args: tuple, attrs: Any) -> tuple:
    """NMS per batch and class (ONNX NonMaxSuppression): boxes by descending score, those above
    score_threshold kept greedily (up to max_output_boxes_per_class) unless a kept one overlaps
    them by iou_threshold or more. ONNX format: (batch, class, box) rows, then zeros, and their
    count; TensorFlow format: per batch (class, box) rows and their scores, then zeros, and counts."""
    boxes, scores = np.asarray(args[0]), np.asarray(args[1])
    limit, iou_threshold = int(_first(args[2])), np.float32(_first(args[3]))
    threshold = np.float32(_first(args[4]))
    batch, classes, count = scores.shape
    chosen: dict = {}
    for b in range(batch):
        for c in range(classes):
            order = np.argsort(-scores[b, c].astype(np.float64), kind="stable")
            live = scores[b, c, order].astype(np.float32)
            valid = int((live > threshold).sum())
            picked: list = []
            for j in range(valid if iou_threshold > 0 else 0):
                if live[j] > -1 and len(picked) < limit and live[j] > threshold:
                    picked.append(j)
                    for k in range(j + 1, valid):
                        if live[k] > 0 and _iou(boxes[b, order[j]], boxes[b, order[k]]) >= iou_threshold:
                            live[k] = -1
            chosen[b, c] = [(int(order[j]), scores[b, c, order[j]]) for j in picked]
    if attrs["output_format"] == "onnx":
        rows = [(b, c, box) for (b, c), found in chosen.items() for box, _ in found]
        out = np.zeros((batch * classes * count, 3), np.int64)
        out[:len(rows)] = rows
        return out, np.array([len(rows)], np.int64)
    indices = np.zeros((batch, classes * count, 2), np.int64)
    kept_scores = np.zeros((batch, classes * count), np.float32)
    totals = np.zeros(batch, np.int64)
    for b in range(batch):
        found = [(c, box, s) for c in range(classes) for box, s in chosen[b, c]]
        totals[b] = len(found)
        for r, (c, box, s) in enumerate(found):
            indices[b, r], kept_scores[b, r] = (c, box), s
    return indices, kept_scores, totals
