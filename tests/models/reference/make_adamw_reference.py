#!/usr/bin/env python3
"""Makes adamw.txt, the PyTorch reference for the AdamW test in tests/models/optimizer_test.cc.

torch.optim.AdamW (decoupled weight decay: w <- w * (1 - lr * weight_decay), then the bias-corrected
Adam step without decay) runs for a few steps over a small float64 parameter vector, with gradients
drawn once per step. The file stores the hyper-parameters, the start values, every step's gradients
and the parameters after every step. The test needs no torch at run time; re-run this script only
when the case changes:

    /usr/bin/python3 tests/models/reference/make_adamw_reference.py > tests/models/reference/adamw.txt
"""
import torch

torch.manual_seed(20261127)
torch.set_default_dtype(torch.float64)

N, STEPS = 7, 6
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 0.01, 0.9, 0.95, 1e-8, 0.1

w = torch.nn.Parameter(torch.rand(N) * 4 - 2)
start = w.detach().clone()
opt = torch.optim.AdamW([w], lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY)
gradients, after = [], []
for step in range(STEPS):
    g = torch.randn(N)
    w.grad = g.clone()
    opt.step()
    gradients.append(g)
    after.append(w.detach().clone())


def emit(name, values):
    values = [float(v) for v in values]
    print(f"{name} {len(values)}")
    print(" ".join(f"{v:.17g}" for v in values))


print("# PyTorch", torch.__version__, "float64 AdamW reference for optimizer_test.cc; made by make_adamw_reference.py")
emit("hyperparameters", [LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEPS])
emit("start", start)
emit("gradients", torch.cat(gradients))
emit("parameters_after", torch.cat(after))
