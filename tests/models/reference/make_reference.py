#!/usr/bin/env python3
"""Makes the PyTorch references for tests/models/pytorch_reference_test.cc.

Without an argument it prints small_network.txt; with `normalized` it prints normalized_network.txt:

    /usr/bin/python3 tests/models/reference/make_reference.py normalized > tests/models/reference/normalized_network.txt

small_network.txt:

A small fixed network with every layer kind Meridian has (Conv2d with padding, ReLU, MaxPool2d, a
second Conv2d, Flatten, Linear, softmax cross-entropy) runs forward and backward on a fixed batch in
float64. The file stores the parameters in Meridian's order (each layer's weight then bias, which is
also torch's parameters() order), the input, the labels, the logits, the mean loss and the
gradients of every parameter. The test needs no torch at run time; re-run this script only when
the network in the test changes:

    /usr/bin/python3 tests/models/reference/make_reference.py > tests/models/reference/small_network.txt
"""
import sys

import torch
from torch import nn

torch.manual_seed(20261121)
torch.set_default_dtype(torch.float64)


def emit(name, values):
    values = [float(v) for v in values]
    print(f"{name} {len(values)}")
    print(" ".join(f"{v:.17g}" for v in values))


class Residual(nn.Module):
    """body(x) + shortcut(x), the shortcut being the identity when None (Meridian's residual block)."""

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x):
        return self.body(x) + (x if self.shortcut is None else self.shortcut(x))


def normalized_network():
    """normalized_network.txt: the layers of residual networks and their neighbours (batch norm 2d and 1d,
    identity and projection residual blocks, GELU, group norm, average and global average pooling, tanh,
    sigmoid). One training step's forward and backward (batch statistics) gives the logits, loss and
    gradients, and the running statistics it leaves ("state", each batch norm's running mean then running
    variance, in layer order, which is Meridian's state buffer); then an evaluation forward of the same
    batch with those running statistics gives "eval_logits"."""
    batch, classes = 4, 3
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),                       # 3x8x8 -> 4x8x8
        nn.BatchNorm2d(4),
        nn.ReLU(),
        Residual(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                               nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4, eps=1e-3, momentum=0.3))),
        nn.ReLU(),
        Residual(nn.Sequential(nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                               nn.Conv2d(6, 6, 3, padding=1), nn.BatchNorm2d(6)),
                 nn.Sequential(nn.Conv2d(4, 6, 1, stride=2), nn.BatchNorm2d(6))),  # -> 6x4x4
        nn.GELU(),
        nn.GroupNorm(3, 6),
        nn.AvgPool2d(2),                                     # -> 6x2x2
        nn.Tanh(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),                                        # -> 6
        nn.Linear(6, 5),
        nn.BatchNorm1d(5),
        nn.Sigmoid(),
        nn.Linear(5, classes),
    )
    with torch.no_grad():
        for p in net.parameters():
            p.uniform_(-0.6, 0.6)
        for m in net.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm)):
                m.weight.uniform_(0.5, 1.5)
    x = torch.rand(batch, 3, 8, 8) * 2 - 1
    labels = torch.tensor([2, 0, 1, 2])
    net.train()
    logits = net(x)
    loss = nn.functional.cross_entropy(logits, labels)
    loss.backward()
    state = []
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            state += [m.running_mean, m.running_var]
    net.eval()
    with torch.no_grad():
        eval_logits = net(x)
    print("# PyTorch", torch.__version__, "float64 reference for pytorch_reference_test.cc; made by make_reference.py")
    emit("parameters", torch.cat([p.detach().flatten() for p in net.parameters()]))
    emit("input", x.flatten())
    emit("labels", labels)
    emit("logits", logits.detach().flatten())
    emit("loss", [loss.item()])
    emit("gradients", torch.cat([p.grad.flatten() for p in net.parameters()]))
    emit("state", torch.cat([s.flatten() for s in state]))
    emit("eval_logits", eval_logits.flatten())


if len(sys.argv) > 1 and sys.argv[1] == "normalized":
    normalized_network()
    sys.exit(0)

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


print("# PyTorch", torch.__version__, "float64 reference for pytorch_reference_test.cc; made by make_reference.py")
emit("parameters", torch.cat([p.detach().flatten() for p in net.parameters()]))
emit("input", x.flatten())
emit("labels", labels)
emit("logits", logits.detach().flatten())
emit("loss", [loss.item()])
emit("gradients", torch.cat([p.grad.flatten() for p in net.parameters()]))
