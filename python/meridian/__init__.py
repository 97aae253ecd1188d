"""Train your own PyTorch model across Meridian sites.

A site started with ``meridian start --trainer attached`` runs membership, the algorithm's rounds,
checkpoints and metrics, and waits for a local training process to attach. That process keeps its
loop and wraps its optimizer::

    import meridian, torch
    site = meridian.attach()                     # the site in $MERIDIAN_RUN_DIR (default ./meridian-run)
    opt = site.optimizer(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), steps=1000)
    for x, y in loader:
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        if site.finished: break

docs/pytorch.md says what each algorithm hooks. ``meridian.load`` reads a model that
``meridian export`` wrote (``meridian_torch``).
"""

from meridian._site import AttachedOptimizer, Site, SiteError, SiteLost, StepRefused, attach
from meridian_torch import load

__all__ = ["attach", "Site", "AttachedOptimizer", "SiteError", "SiteLost", "StepRefused", "load"]
