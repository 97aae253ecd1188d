"""Load a model exported by `meridian export --format safetensors` into PyTorch.

    import meridian_torch
    model = meridian_torch.load("cnn.safetensors")   # an eval-mode torch.nn.Module
    logits = model(images)                           # images: (N, C, H, W) pixels in [0, 1], or (N, F) raw rows

The network is rebuilt from the description in the file's metadata ("layers": one object per layer, as
Meridian's model fingerprint lists them) and loaded with the file's weights; the input standardization
the model was trained with ("input_mean", "input_stddev") is part of the module, so it takes raw inputs.
The file is parsed with numpy (the safetensors package is not needed). See docs/export.md.
"""

import json
import struct

import numpy as np
import torch
from torch import nn

__all__ = ["load", "read_safetensors", "MeridianModel"]


def read_safetensors(path):
    """Returns (tensors, metadata) of a safetensors file: {name: numpy array}, {key: string}."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes is too short for a safetensors file")
    (length,) = struct.unpack("<Q", data[:8])
    if 8 + length > len(data):
        raise ValueError(f"{path}: the header length {length} runs past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8 : 8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    body = memoryview(data)[8 + length :]
    dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "U8": "u1"}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this reader does not know")
        array = np.frombuffer(body[begin:end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors, metadata


class _Sequence(nn.Module):
    """Meridian's layers in order. Between layers a value of shape C×1×1 is (N, C), any other (N, C, H, W)."""

    def __init__(self, specs):
        super().__init__()
        self.specs = specs
        self.layers = nn.ModuleList(_layer(spec) for spec in specs)

    def forward(self, x):
        n = x.shape[0]
        for spec, layer in zip(self.specs, self.layers):
            c, h, w = spec["input"]
            if spec["op"] == "linear" or (spec["op"] == "batch_norm" and h * w == 1):
                x = x.reshape(n, c * h * w)
            elif spec["op"] in ("conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool", "batch_norm", "group_norm"):
                x = x.reshape(n, c, h, w)
            x = layer(x)
            oc, oh, ow = spec["output"]
            x = x.reshape(n, oc) if oh * ow == 1 else x.reshape(n, oc, oh, ow)
        return x


class _Residual(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.body = _Sequence(spec["body"])
        self.shortcut = _Sequence(spec["shortcut"]) if spec["shortcut"] else nn.Identity()

    def forward(self, x):
        return self.body(x) + self.shortcut(x)


def _layer(spec):
    op = spec["op"]
    c, h, w = spec["input"]
    if op == "flatten":
        return nn.Flatten()
    if op == "linear":
        return nn.Linear(c * h * w, spec["out"])
    if op == "conv2d":
        return nn.Conv2d(c, spec["out"], spec["kernel"], stride=spec["stride"], padding=spec["padding"])
    if op == "batch_norm":
        kind = nn.BatchNorm1d if h * w == 1 else nn.BatchNorm2d
        return kind(c, eps=spec["eps"], momentum=spec["momentum"])
    if op == "group_norm":
        return nn.GroupNorm(spec["groups"], c, eps=spec["eps"])
    if op == "relu":
        return nn.ReLU()
    if op == "gelu":
        return nn.GELU()
    if op == "tanh":
        return nn.Tanh()
    if op == "sigmoid":
        return nn.Sigmoid()
    if op == "dropout":
        return nn.Dropout(spec["p"])
    if op == "max_pool2d":
        return nn.MaxPool2d(spec["kernel"], stride=spec["stride"])
    if op == "avg_pool2d":
        return nn.AvgPool2d(spec["kernel"], stride=spec["stride"])
    if op == "global_avg_pool":
        return nn.AdaptiveAvgPool2d(1)
    if op == "residual":
        return _Residual(spec)
    raise ValueError(f"unknown layer '{op}' in the model description")


class MeridianModel(nn.Module):
    """A network exported by Meridian: input standardization (when the model has one), then the layers.

    Takes (N, *input_shape) or (N, features) raw inputs and returns (N, classes) logits.
    metadata holds the file's description (model, fingerprint, input_shape, classes, ...).
    """

    def __init__(self, metadata):
        super().__init__()
        self.metadata = dict(metadata)
        self.input_shape = tuple(json.loads(metadata["input_shape"]))
        self.classes = int(metadata["classes"])
        self.network = _Sequence(json.loads(metadata["layers"]))
        features = self.input_shape[0] * self.input_shape[1] * self.input_shape[2]
        if "input_mean" in metadata:
            mean = torch.tensor(json.loads(metadata["input_mean"]), dtype=torch.float32)
            stddev = torch.tensor(json.loads(metadata["input_stddev"]), dtype=torch.float32)
            if mean.numel() != features or stddev.numel() != features:
                raise ValueError(f"the input standardization has {mean.numel()} means and {stddev.numel()} "
                                 f"deviations, the model takes {features} features")
        else:
            # (x - 0) / 1 is x exactly.
            mean, stddev = torch.zeros(features), torch.ones(features)
        # Buffers, not parameters: they move with .to(device) and are not trained.
        self.register_buffer("input_mean", mean, persistent=False)
        self.register_buffer("input_stddev", stddev, persistent=False)

    def forward(self, x):
        n = x.shape[0]
        x = x.reshape(n, -1)
        x = (x - self.input_mean) / self.input_stddev
        return self.network(x)


def load(path):
    """The model in the safetensors file at `path`, an eval-mode torch.nn.Module (MeridianModel) with
    its weights loaded. Raises ValueError for a file that is not a Meridian export or whose tensors do
    not fit its description."""
    tensors, metadata = read_safetensors(path)
    if metadata.get("format") != "meridian-export-1":
        raise ValueError(f"{path}: not a Meridian export (metadata format is {metadata.get('format')!r})")
    model = MeridianModel(metadata)
    state = {"network." + name: torch.from_numpy(array) for name, array in tensors.items()}
    expected = {k for k in model.state_dict() if not k.endswith("num_batches_tracked")}
    if set(state) != expected:
        missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
        raise ValueError(f"{path}: the tensors do not fit the described network: missing {missing}, "
                         f"unexpected {unexpected}")
    model.load_state_dict(state, strict=False)
    return model.eval()
