"""Small PyTorch definitions of public architectures, for checking the ONNX importer and the whole
tool on graphs the built-in models and ../shared/models do not cover.

Each follows its paper's (or torchvision's) block structure at reduced width or depth so that an
export stays small; the op mix is what matters here: transposed and 1-D/3-D convolutions,
resizes, recurrent layers, normalisations other than batch norm, attention with masks, channel
shuffles, pixel shuffles, and the activations real exporters emit. Needs torch (not a dependency of
accel-tune): run through experiments/zoo/export.py.
"""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F


class UNetSmall(nn.Module):
    """U-Net (Ronneberger 2015): conv blocks, max pool down, transposed conv up, skip concat."""

    def __init__(self, c: int = 8, classes: int = 3):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.d1, self.d2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.u2, self.b2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2), block(4 * c, 2 * c)
        self.u1, self.b1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2), block(2 * c, c)
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        m = self.mid(F.max_pool2d(b, 2))
        y = self.b2(torch.cat([self.u2(m), b], 1))
        y = self.b1(torch.cat([self.u1(y), a], 1))
        return self.head(y)


class YoloNeck(nn.Module):
    """YOLOv5-style neck: SiLU convs, nearest 2x upsample, concat, sigmoid detection head."""

    def __init__(self, c: int = 16, anchors: int = 3, classes: int = 4):
        super().__init__()

        def cbs(i, o, s=1):
            return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.SiLU())
        self.s1, self.s2, self.s3 = cbs(3, c, 2), cbs(c, 2 * c, 2), cbs(2 * c, 4 * c, 2)
        self.lat = cbs(4 * c, 2 * c)
        self.fuse = cbs(4 * c, 2 * c)
        self.head = nn.Conv2d(2 * c, anchors * (5 + classes), 1)

    def forward(self, x):
        p2 = self.s2(self.s1(x))
        p3 = self.s3(p2)
        up = F.interpolate(self.lat(p3), scale_factor=2.0, mode="nearest")
        return torch.sigmoid(self.head(self.fuse(torch.cat([up, p2], 1))))


class DSCNN1d(nn.Module):
    """Keyword spotting on MFCC frames (Zhang 2017 'Hello Edge' style, 1-D): Conv1d, depthwise
    Conv1d, BatchNorm1d, adaptive average pool, linear, log-softmax."""

    def __init__(self, mfcc: int = 10, c: int = 32, classes: int = 12):
        super().__init__()
        layers = [nn.Conv1d(mfcc, c, 5, padding=2), nn.BatchNorm1d(c), nn.ReLU()]
        for _ in range(3):
            layers += [nn.Conv1d(c, c, 3, padding=1, groups=c), nn.BatchNorm1d(c), nn.ReLU(),
                       nn.Conv1d(c, c, 1), nn.BatchNorm1d(c), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = F.adaptive_avg_pool1d(self.body(x), 1).flatten(1)
        return F.log_softmax(self.fc(y), dim=-1)


class LSTMClassifier(nn.Module):
    """Two-layer LSTM over a sequence, last step to a linear classifier."""

    def __init__(self, feat: int = 16, hidden: int = 32, classes: int = 5):
        super().__init__()
        self.rnn = nn.LSTM(feat, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class GRUTagger(nn.Module):
    """Bidirectional GRU sequence tagger (per-step logits)."""

    def __init__(self, feat: int = 16, hidden: int = 24, tags: int = 6):
        super().__init__()
        self.rnn = nn.GRU(feat, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, tags)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


class ViTTiny(nn.Module):
    """ViT (Dosovitskiy 2020) at reduced depth: patch conv, class token, learned positions,
    pre-norm nn.TransformerEncoder (multi-head attention, GELU MLP), layer norm, head."""

    def __init__(self, img: int = 32, patch: int = 8, d: int = 64, depth: int = 2, heads: int = 4,
                 classes: int = 10):
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        t = self.embed(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], 1) + self.pos
        return self.head(self.norm(self.enc(t))[:, 0])


class GPTBlockLM(nn.Module):
    """GPT-2 style decoder (Radford 2019) at reduced size: token and position embeddings, causal
    self-attention written out (triangular mask, masked_fill, softmax), tanh-GELU MLP, tied LM
    head, log-softmax."""

    def __init__(self, vocab: int = 100, seq: int = 16, d: int = 32, heads: int = 2, depth: int = 2):
        super().__init__()
        self.tok, self.posn = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.heads = heads
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleDict(dict(ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d),
                                                  proj=nn.Linear(d, d), ln2=nn.LayerNorm(d),
                                                  fc=nn.Linear(d, 4 * d), out=nn.Linear(4 * d, d))))
        self.lnf = nn.LayerNorm(d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, ids):
        b, s = ids.shape
        x = self.tok(ids) + self.posn(torch.arange(s))
        d = x.shape[-1]
        hd = d // self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(d, dim=-1)
            q, k, v = (t.reshape(b, s, self.heads, hd).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            att = att.masked_fill(~self.mask[:s, :s], float("-inf")).softmax(-1)
            x = x + blk["proj"]((att @ v).transpose(1, 2).reshape(b, s, d))
            x = x + blk["out"](F.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        return F.log_softmax(self.lnf(x) @ self.tok.weight.t(), dim=-1)


class MobileNetV3Small(nn.Module):
    """MobileNetV3 (Howard 2019) blocks: hardswish, squeeze-excite with hardsigmoid, depthwise."""

    def __init__(self, classes: int = 10):
        super().__init__()

        def se(c):
            return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 4, 1), nn.ReLU(),
                                 nn.Conv2d(c // 4, c, 1), nn.Hardsigmoid())
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.se = se(16)
        self.pw = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.exp = nn.Sequential(nn.Conv2d(24, 72, 1, bias=False), nn.BatchNorm2d(72), nn.Hardswish(),
                                 nn.Conv2d(72, 72, 5, 1, 2, groups=72, bias=False), nn.BatchNorm2d(72),
                                 nn.Hardswish())
        self.se2 = se(72)
        self.proj = nn.Sequential(nn.Conv2d(72, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.head = nn.Sequential(nn.Linear(24, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        y = self.dw(self.stem(x))
        y = self.pw(y * self.se(y))
        z = self.exp(y)
        y = y + self.proj(z * self.se2(z))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


class ShuffleNetV2Unit(nn.Module):
    """ShuffleNetV2 (Ma 2018): channel split (chunk), branch, concat, channel shuffle."""

    def __init__(self, c: int = 24, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        h = c // 2
        self.branch = nn.Sequential(nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU(),
                                    nn.Conv2d(h, h, 3, 1, 1, groups=h), nn.BatchNorm2d(h),
                                    nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU())
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = self.stem(x)
        for _ in range(2):
            a, b = y.chunk(2, dim=1)
            y = torch.cat([a, self.branch(b)], 1)
            n, c, hh, ww = y.shape
            y = y.view(n, 2, c // 2, hh, ww).transpose(1, 2).reshape(n, c, hh, ww)
        return self.fc(y.mean((2, 3)))


class ConvNeXtBlock(nn.Module):
    """ConvNeXt (Liu 2022) block: 7x7 depthwise, channels-last LayerNorm via permute, GELU MLP,
    layer scale, residual."""

    def __init__(self, c: int = 32, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, 4)
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 1e-2))
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.pw2(F.gelu(self.pw1(self.ln(y))))
        x = x + y.permute(0, 3, 1, 2)
        return self.fc(x.mean((-2, -1)))


class StyleNet(nn.Module):
    """Johnson 2016 style-transfer net: reflection pad, instance norm, group norm, nearest
    upsampling, tanh output."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.c1 = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(3, c, 9), nn.InstanceNorm2d(c, affine=True), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1), nn.GroupNorm(4, 2 * c), nn.ReLU())
        self.res = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(2 * c, 2 * c, 3), nn.InstanceNorm2d(2 * c, affine=True))
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU())
        self.out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x):
        y = self.c2(self.c1(x))
        y = y + self.res(y)
        return torch.tanh(self.out(self.up(y)))


class ESPCN(nn.Module):
    """Super-resolution ESPCN (Shi 2016): tanh convs, pixel shuffle (DepthToSpace), bilinear skip."""

    def __init__(self, r: int = 2):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.Tanh(), nn.Conv2d(16, 8, 3, padding=1), nn.Tanh(),
                               nn.Conv2d(8, r * r, 3, padding=1))
        self.r = r

    def forward(self, x):
        skip = F.interpolate(x, scale_factor=float(self.r), mode="bilinear", align_corners=False)
        return F.pixel_shuffle(self.f(x), self.r) + skip


class Activations(nn.Module):
    """An MLP through the activations exporters emit as their own ops: PReLU, ELU, SELU, Softplus,
    Mish, LeakyReLU, clamp (Min/Max), plus elementwise max/min and a sum of squares norm."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.prelu = nn.PReLU(d)

    def forward(self, x):
        y = self.prelu(self.l1(x))
        y = F.elu(y) + F.selu(y) + F.softplus(y) + F.mish(y)
        y = torch.maximum(self.l2(y), torch.minimum(y, 2 * x)).clamp(-3.0, 3.0)
        y = F.leaky_relu(self.l3(y), 0.1)
        return y / (y.pow(2).sum(-1, keepdim=True).sqrt() + 1e-6)


class C3D(nn.Module):
    """Video clip classifier in the C3D style (Tran 2015): Conv3d, MaxPool3d, global average."""

    def __init__(self, c: int = 8, classes: int = 5):
        super().__init__()
        self.f = nn.Sequential(nn.Conv3d(3, c, 3, padding=1), nn.ReLU(), nn.MaxPool3d((1, 2, 2)),
                               nn.Conv3d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2))
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):
        return self.fc(self.f(x).mean((2, 3, 4)))


class SqueezeNetFire(nn.Module):
    """SqueezeNet 1.1 (Iandola 2016) fire modules: squeeze 1x1, expand 1x1 and 3x3, concat,
    ceil-mode max pool, conv classifier, global average pool."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True))
        self.sq = nn.Sequential(nn.Conv2d(32, 8, 1), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(8, 16, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.cls = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(32, classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        y = self.stem(x)
        s = self.sq(y)
        return torch.flatten(self.cls(torch.cat([self.e1(s), self.e3(s)], 1)), 1)


# name -> (constructor, example input); every model is exported in eval mode.
ZOO = {
    "unet_small": (UNetSmall, lambda: torch.randn(1, 3, 32, 32)),
    "yolo_neck": (YoloNeck, lambda: torch.randn(1, 3, 64, 64)),
    "dscnn_kws_1d": (DSCNN1d, lambda: torch.randn(1, 10, 49)),
    "lstm_classifier": (LSTMClassifier, lambda: torch.randn(1, 12, 16)),
    "gru_tagger": (GRUTagger, lambda: torch.randn(1, 10, 16)),
    "vit_tiny": (ViTTiny, lambda: torch.randn(1, 3, 32, 32)),
    "gpt_block_lm": (GPTBlockLM, lambda: torch.randint(0, 100, (1, 16))),
    "mobilenet_v3_small": (MobileNetV3Small, lambda: torch.randn(1, 3, 64, 64)),
    "shufflenet_v2_unit": (ShuffleNetV2Unit, lambda: torch.randn(1, 3, 64, 64)),
    "convnext_block": (ConvNeXtBlock, lambda: torch.randn(1, 3, 64, 64)),
    "style_net": (StyleNet, lambda: torch.randn(1, 3, 32, 32)),
    "espcn": (ESPCN, lambda: torch.randn(1, 1, 24, 24)),
    "activations_mlp": (Activations, lambda: torch.randn(2, 32)),
    "c3d_clip": (C3D, lambda: torch.randn(1, 3, 4, 16, 16)),
    "squeezenet_fire": (SqueezeNetFire, lambda: torch.randn(1, 3, 64, 64)),
}
