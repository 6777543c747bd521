"""torchvision detectors with small backbones, for exports whose post-processing has data-dependent
shapes (score thresholds -> NonZero, top-k of min(K, #kept), batched NonMaxSuppression).

Each is torchvision's own detector class (SSD, RetinaNet, FCOS, Faster R-CNN) with its own
transform and post-processing, built on a small two-level convolutional backbone so the exports
stay under about 2 MB with random (seeded) weights. Score thresholds are set so that random
weights keep some but not all candidates, which is what exercises the data-dependent sizes.
The wrapper returns (boxes, scores, labels) of the one image in the batch.
"""
from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


class TinyBackbone(nn.Module):
    """Two feature levels (strides 8 and 16) as an OrderedDict, as torchvision's detectors expect."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.out_channels = width
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(width, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU())

    def forward(self, x):
        a = self.stem(x)
        return OrderedDict([("0", a), ("1", self.down(a))])


class Detections(nn.Module):
    """(boxes [K, 4], scores [K], labels [K]) of a one-image batch [1, 3, H, W]."""

    all_outputs = True  # export.py keeps all three outputs

    @staticmethod
    def dynamo_context():
        return traceable_nms()

    def __init__(self, det):
        super().__init__()
        self.det = det

    def forward(self, x):
        out = self.det([x[0]])[0]
        return out["boxes"], out["scores"], out["labels"]


SIZE = 128


def _even_prior(head: nn.Module) -> None:
    """He-initialised classification convs with zero bias: torchvision's focal-loss prior (p = 0.01)
    and its std-0.01 weights put every random-weight score at one value under any useful threshold,
    so nothing would reach the data-dependent steps."""
    with torch.no_grad():
        for mod in head.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight)
                mod.bias.zero_()


def ssd():
    torch.manual_seed(0)  # the same weights whichever detectors are built before
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD, SSDHead
    bb = TinyBackbone()
    anchors = DefaultBoxGenerator([[2], [2]])
    head = SSDHead([bb.out_channels] * 2, anchors.num_anchors_per_location(), 5)
    return Detections(SSD(bb, anchors, (SIZE, SIZE), 5, head=head, score_thresh=0.23,
                          topk_candidates=100, detections_per_img=50))


def retinanet():
    torch.manual_seed(0)  # the same weights whichever detectors are built before
    from torchvision.models.detection import RetinaNet
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    anchors = AnchorGenerator(sizes=((16,), (32,)), aspect_ratios=((0.5, 1.0, 2.0),) * 2)
    m = RetinaNet(TinyBackbone(), 5, min_size=SIZE, max_size=SIZE, anchor_generator=anchors,
                  score_thresh=0.58, topk_candidates=100, detections_per_img=50)
    _even_prior(m.head.classification_head)
    return Detections(m)


def fcos():
    torch.manual_seed(0)  # the same weights whichever detectors are built before
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    anchors = AnchorGenerator(sizes=((8,), (16,)), aspect_ratios=((1.0,),) * 2)
    m = FCOS(TinyBackbone(32), 5, min_size=SIZE, max_size=SIZE, anchor_generator=anchors,
             score_thresh=0.68, topk_candidates=100, detections_per_img=50)
    _even_prior(m.head.classification_head)
    return Detections(m)


def fasterrcnn():
    torch.manual_seed(0)  # the same weights whichever detectors are built before
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign
    bb = TinyBackbone()
    anchors = AnchorGenerator(sizes=((16,), (32,)), aspect_ratios=((0.5, 1.0, 2.0),) * 2)
    pool = MultiScaleRoIAlign(featmap_names=["0", "1"], output_size=7, sampling_ratio=2)
    m = FasterRCNN(bb, None, min_size=SIZE, max_size=SIZE, rpn_anchor_generator=anchors,
                   box_roi_pool=pool, box_head=TwoMLPHead(bb.out_channels * 49, 64),
                   box_predictor=FastRCNNPredictor(64, 5), rpn_pre_nms_top_n_test=100,
                   rpn_post_nms_top_n_test=40, box_score_thresh=0.205, box_detections_per_img=20)
    return Detections(m)


def _batched_nms_traceable(boxes, scores, idxs, iou_threshold):
    """torchvision's coordinate-offset batched NMS without its branches on the number of boxes
    (``numel() == 0``, ``> 4000``), which torch.export cannot decide for data-dependent sizes.
    Same result: boxes of different classes are moved apart so that one NMS never mixes them."""
    from torchvision.ops import nms
    top = torch.cat([boxes.reshape(-1), boxes.new_zeros(1)]).max()
    offsets = idxs.to(boxes) * (top + torch.tensor(1).to(boxes))
    return nms(boxes + offsets[:, None], scores, iou_threshold)


class traceable_nms:
    """Context: torchvision's detectors call ``_batched_nms_traceable`` instead (export.py uses it
    for the dynamo exporter only)."""

    def __enter__(self):
        from torchvision.ops import boxes
        self.saved = boxes.batched_nms
        boxes.batched_nms = _batched_nms_traceable

    def __exit__(self, *exc):
        from torchvision.ops import boxes
        boxes.batched_nms = self.saved


def _image():
    g = torch.Generator().manual_seed(1)
    return torch.rand(1, 3, SIZE, SIZE, generator=g)


DETECTORS = {
    "det_ssd": (ssd, _image),
    "det_retinanet": (retinanet, _image),
    "det_fcos": (fcos, _image),
    "det_fasterrcnn": (fasterrcnn, _image),
}


def _torchvision(builder: str, size: int):
    """One of torchvision's own detector builders at full size (random weights, no download)."""
    def make():
        from torchvision.models import detection
        torch.manual_seed(0)
        kw = {} if builder.startswith("ssd") else {"min_size": size, "max_size": size}
        return Detections(getattr(detection, builder)(weights=None, weights_backbone=None, **kw))
    return make


# Full-size torchvision detectors (tens of MB each): for experiments/zoo/check.py, not the test data.
FULL = {
    "tv_ssdlite320": (_torchvision("ssdlite320_mobilenet_v3_large", 320), lambda: torch.rand(1, 3, 320, 320)),
    "tv_fasterrcnn_mnv3_320": (_torchvision("fasterrcnn_mobilenet_v3_large_320_fpn", 320),
                               lambda: torch.rand(1, 3, 320, 320)),
    "tv_retinanet_r50_v2": (_torchvision("retinanet_resnet50_fpn_v2", 320), lambda: torch.rand(1, 3, 320, 320)),
    "tv_fcos_r50": (_torchvision("fcos_resnet50_fpn", 320), lambda: torch.rand(1, 3, 320, 320)),
}
