"""Runs an exported model on raw inputs for tests/cli/export_test.cc and writes its logits.

    export_check.py torch MODEL.safetensors INPUTS.f32 ROWS LOGITS.f32
    export_check.py onnx  MODEL.onnx        INPUTS.f32 ROWS LOGITS.f32
    export_check.py rows  MODEL.safetensors ROWS.json  -    LOGITS.f32

INPUTS.f32 holds ROWS raw samples as little-endian float32, row-major; LOGITS.f32 receives (ROWS,
classes) float32. `torch` loads the file with python/meridian_torch.py. `onnx` checks the file with
onnx.checker (ONNX 1.12 has no reference evaluator) and then evaluates its graph node by node with
torch's functional operators, so the numbers come from the ONNX graph itself, not from the PyTorch
module. Prints one line "classes=N" plus, for onnx, "opset=N". `rows` reads ROWS.json, a list of
raw table rows (column name to field text), turns them into inputs with the export's own
preprocessing (MeridianModel.encode) and prints one JSON line with the export's feature_names,
class_names and the class names predict() gives.
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def run_torch(path, x):
    import meridian_torch

    model = meridian_torch.load(path)
    assert not model.training, "load() must return an eval-mode module"
    with torch.no_grad():
        return model(x), model.classes


def run_onnx(path, x):
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(f"opset={opset}")
    graph = model.graph
    values = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer}
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim[1:]]
    values[graph.input[0].name] = x.reshape(x.shape[0], *dims)
    for node in graph.node:
        a = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
        i = [values[name] for name in node.input]
        op = node.op_type
        if op == "Sub":
            y = i[0] - i[1]
        elif op == "Div":
            y = i[0] / i[1]
        elif op == "Mul":
            y = i[0] * i[1]
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Gemm":
            assert a.get("transB") == 1 and a.get("transA", 0) == 0
            y = i[0] @ i[1].T + i[2]
        elif op == "Conv":
            p = list(a["pads"])
            assert p[0] == p[2] and p[1] == p[3]
            y = F.conv2d(i[0], i[1], i[2], stride=tuple(a["strides"]), padding=(p[0], p[1]))
        elif op == "BatchNormalization":
            y = F.batch_norm(i[0], i[3], i[4], i[1], i[2], training=False, eps=a["epsilon"])
        elif op == "InstanceNormalization":
            y = F.instance_norm(i[0], weight=i[1], bias=i[2], eps=a["epsilon"])
        elif op == "Reshape":
            shape = [i[0].shape[k] if s == 0 else int(s) for k, s in enumerate(i[1].tolist())]
            y = i[0].reshape(shape)
        elif op == "Flatten":
            y = i[0].reshape(i[0].shape[0], -1)
        elif op == "Relu":
            y = torch.relu(i[0])
        elif op == "Tanh":
            y = torch.tanh(i[0])
        elif op == "Sigmoid":
            y = torch.sigmoid(i[0])
        elif op == "Erf":
            y = torch.erf(i[0])
        elif op == "MaxPool":
            y = F.max_pool2d(i[0], tuple(a["kernel_shape"]), stride=tuple(a["strides"]))
        elif op == "AveragePool":
            y = F.avg_pool2d(i[0], tuple(a["kernel_shape"]), stride=tuple(a["strides"]))
        elif op == "GlobalAveragePool":
            y = i[0].mean(dim=(2, 3), keepdim=True)
        elif op == "Identity":
            y = i[0]
        elif op == "IsNaN":
            y = torch.isnan(i[0])
        elif op == "Where":
            y = torch.where(i[0], i[1], i[2])
        else:
            raise SystemExit(f"export_check.py: operator {op} is not evaluated here")
        values[node.output[0]] = y
    classes = graph.output[0].type.tensor_type.shape.dim[1].dim_value
    return values[graph.output[0].name], classes


def run_rows(path, rows_file, out):
    import meridian_torch

    model = meridian_torch.load(path)
    with open(rows_file) as f:
        rows = json.load(f)
    # A spreadsheet's byte order mark, kept in the first column's name by csv.DictReader, changes nothing.
    marked = [{("\ufeff" + name if i == 0 else name): field for i, (name, field) in enumerate(row.items())}
              for row in rows]
    assert torch.equal(model.encode(marked), model.encode(rows)), "a byte order mark changed the inputs"
    with torch.no_grad():
        logits = model(model.encode(rows))
    logits.numpy().astype("<f4").tofile(out)
    print(json.dumps({"feature_names": model.feature_names, "class_names": model.class_names,
                      "predicted": model.predict(rows), "first": model.predict(rows[0])}))


def main():
    kind, path, inputs, rows, out = sys.argv[1:6]
    if kind == "rows":
        run_rows(path, inputs, out)
        return
    x = torch.from_numpy(np.fromfile(inputs, dtype="<f4").reshape(int(rows), -1).copy())
    with torch.no_grad():
        logits, classes = run_torch(path, x) if kind == "torch" else run_onnx(path, x)
    logits = logits.reshape(int(rows), classes)
    logits.numpy().astype("<f4").tofile(out)
    print(f"classes={classes}")


if __name__ == "__main__":
    main()
