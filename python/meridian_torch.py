"""Load a model exported by `meridian export --format safetensors` into PyTorch.

    import meridian_torch
    model = meridian_torch.load("cnn.safetensors")   # an eval-mode torch.nn.Module
    logits = model(images)                           # images: (N, C, H, W) pixels in [0, 1], or (N, F) raw rows

The network is rebuilt from the description in the file's metadata ("layers": one object per layer, as
Meridian's model fingerprint lists them) and loaded with the file's weights; the input standardization
the model was trained with ("input_mean", "input_stddev") is part of the module, so it takes raw inputs.
The file is parsed with numpy (the safetensors package is not needed).

A model trained on a table also knows its names and how a raw row becomes its inputs:

    model = meridian_torch.load("clinic.safetensors")
    model.feature_names        # ['age', 'glucose', 'age missing', ..., 'ward=surgery'], in input order
    model.class_names          # ['benign', 'malignant']
    row = {"mrn": "A-1001", "age": "", "sex": "F", "ward": "icu", "glucose": "104"}
    model.predict(row)         # 'benign': missing age filled, indicators and one-hot set, scaled
    model.encode(row)          # the (1, features) tensor model(...) takes

See docs/export.md.
"""

import json
import math
import struct
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from torch import nn

__all__ = ["load", "read_safetensors", "MeridianModel"]

# How a table field spells a missing value (any case, surrounding spaces ignored), as Meridian reads it.
_MISSING = {"", "na", "n/a", "nan", "null", "none", "?"}

Row = Mapping[str, str]


def _is_missing(field: str) -> bool:
    return field.strip().lower() in _MISSING


def _number(column: str, field: str) -> float:
    text = field.strip()
    text = text[1:] if text.startswith("+") else text
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"column {column!r}: {field!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"column {column!r}: {field!r} is not a finite number")
    return value


def _without_byte_order_mark(row: Row) -> Row:
    """The row with a UTF-8 byte order mark taken off its column names: a spreadsheet's CSV starts with
    one, which csv.DictReader keeps in the first column's name unless the file is opened with
    encoding="utf-8-sig", and which Meridian's reader skips."""
    if not any(name.startswith("\ufeff") for name in row):
        return row
    return {name.lstrip("\ufeff"): field for name, field in row.items()}


def read_safetensors(path: str):
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

    Takes (N, *input_shape) or (N, features) raw inputs and returns (N, classes) logits; a missing
    input (NaN) is filled with its mean, as Meridian fills it. metadata holds the file's description
    (model, fingerprint, input_shape, classes, ...). feature_names and class_names are the names the
    federation agreed on (None when the data had none); preprocessing is how a raw table row becomes
    the inputs (None for a model not trained on a table with a header), which encode() and predict()
    apply.

    Example::

        model = meridian_torch.load("clinic.safetensors")
        model.predict([{"age": "61", "glucose": "NA", "sex": "M", "ward": "surgery"}])  # ['malignant']
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
        self.feature_names: Optional[List[str]] = json.loads(metadata["feature_names"]) if "feature_names" in metadata else None
        self.class_names: Optional[List[str]] = json.loads(metadata["class_names"]) if "class_names" in metadata else None
        self.preprocessing: Optional[dict] = json.loads(metadata["preprocessing"]) if "preprocessing" in metadata else None
        if self.feature_names is not None and len(self.feature_names) != features:
            raise ValueError(f"{len(self.feature_names)} feature names for {features} features")
        if self.class_names is not None and len(self.class_names) != self.classes:
            raise ValueError(f"{len(self.class_names)} class names for {self.classes} classes")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = x.reshape(n, -1)
        x = torch.where(torch.isnan(x), self.input_mean.expand_as(x), x)
        x = (x - self.input_mean) / self.input_stddev
        return self.network(x)

    def encode(self, rows: Union[Row, Sequence[Row]]) -> torch.Tensor:
        """The (N, features) raw inputs of table rows, each a dict of column name to field text as a CSV
        holds it: numeric columns in input order with a missing value filled with the federation's
        value (preprocessing["numeric"][i]["impute"]), then the missing indicators (1.0 where the value
        was missing), then each category column one-hot (all 0 for a missing category). Ignored columns
        and the label column may be present and are left out. The scaling is the module's own (forward).
        Raises ValueError naming the column for a missing or unknown column, a field that is not a
        number, or a category outside the agreed list.

        Example::

            x = model.encode({"mrn": "7", "age": "", "sex": "F", "ward": "icu", "glucose": "98"})
            logits = model(x)
        """
        if isinstance(rows, Mapping):
            rows = [rows]
        if self.preprocessing is None:
            if self.feature_names is None:
                raise ValueError("this export records no column names: give model(...) a tensor instead")
            numeric = [{"name": name, "impute": None} for name in self.feature_names]
            categorical, indicators, skip = [], False, set()
        else:
            p = self.preprocessing
            numeric, categorical, indicators = p["numeric"], p["categorical"], p["missing_indicators"]
            skip = set(p["ignored"]) | {p["label"]}
        known = {c["name"] for c in numeric} | {c["name"] for c in categorical} | skip
        encoded = []
        for row in rows:
            row = _without_byte_order_mark(row)
            unknown = sorted(set(row) - known)
            if unknown:
                raise ValueError(f"unknown column(s) {unknown}: the model knows {sorted(known)}")
            values: List[float] = []
            missing: List[float] = []
            for column in numeric:
                name = column["name"]
                if name not in row:
                    raise ValueError(f"column {name!r} is missing from the row")
                if _is_missing(row[name]):
                    values.append(float("nan") if column["impute"] is None else float(column["impute"]))
                    missing.append(1.0)
                else:
                    values.append(_number(name, row[name]))
                    missing.append(0.0)
            if indicators:
                values += missing
            for column in categorical:
                name, categories = column["name"], column["categories"]
                if name not in row:
                    raise ValueError(f"column {name!r} is missing from the row")
                one_hot = [0.0] * len(categories)
                if not _is_missing(row[name]):
                    if row[name] not in categories:
                        raise ValueError(f"column {name!r}: category {row[name]!r} is not one of {categories}")
                    one_hot[categories.index(row[name])] = 1.0
                values += one_hot
            encoded.append(values)
        return torch.tensor(encoded, dtype=torch.float32).reshape(len(encoded), -1)

    def predict(self, rows: Union[Row, Sequence[Row]]) -> Union[str, List[str]]:
        """The class name the model predicts for a table row (a dict of column name to field text), or
        the list of them for a list of rows; class indices as text when the export has no class names.

        Example::

            model.predict({"age": "54", "glucose": "", "sex": "", "ward": "medicine"})  # 'benign'
        """
        single = isinstance(rows, Mapping)
        with torch.no_grad():
            labels = self(self.encode(rows)).argmax(dim=1).tolist()
        names = [self.class_names[k] if self.class_names else str(k) for k in labels]
        return names[0] if single else names


def load(path: str) -> MeridianModel:
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
