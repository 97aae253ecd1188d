#!/usr/bin/env python3
"""Makes small_network.txt, the PyTorch reference for tests/models/pytorch_reference_test.cc.

A small fixed network with every layer kind Meridian has (Conv2d with padding, ReLU, MaxPool2d, a
second Conv2d, Flatten, Linear, softmax cross-entropy) runs forward and backward on a fixed batch in
float64. The file stores the parameters in Meridian's order (each layer's weight then bias, which is
also torch's parameters() order), the input, the labels, the logits, the mean loss and the
gradients of every parameter. The test needs no torch at run time; re-run this script only when
the network in the test changes:

    /usr/bin/python3 tests/models/reference/make_reference.py > tests/models/reference/small_network.txt
"""
import torch
from torch import nn

torch.manual_seed(20261121)
torch.set_default_dtype(torch.float64)

BATCH, CLASSES = 3, 4
net = nn.Sequential(
    nn.Conv2d(2, 3, 3, padding=1),  # 2x6x6 -> 3x6x6
    nn.ReLU(),
    nn.MaxPool2d(2),                # -> 3x3x3
    nn.Conv2d(3, 4, 2),             # -> 4x2x2
    nn.ReLU(),
    nn.Flatten(),                   # -> 16
    nn.Linear(16, 5),
    nn.ReLU(),
    nn.Linear(5, CLASSES),
)
# Biases drawn away from zero keep every ReLU input clear of its kink.
for p in net.parameters():
    with torch.no_grad():
        p.uniform_(-0.6, 0.6)
x = torch.rand(BATCH, 2, 6, 6) * 2 - 1
labels = torch.tensor([2, 0, 3])
logits = net(x)
loss = nn.functional.cross_entropy(logits, labels)
loss.backward()


def emit(name, values):
    values = [float(v) for v in values]
    print(f"{name} {len(values)}")
    print(" ".join(f"{v:.17g}" for v in values))


print("# PyTorch", torch.__version__, "float64 reference for pytorch_reference_test.cc; made by make_reference.py")
emit("parameters", torch.cat([p.detach().flatten() for p in net.parameters()]))
emit("input", x.flatten())
emit("labels", labels)
emit("logits", logits.detach().flatten())
emit("loss", [loss.item()])
emit("gradients", torch.cat([p.grad.flatten() for p in net.parameters()]))
