"""A training process attached to its Meridian site: the site, the shared segment, and the optimizer
wrapper that moves tensors in and out of it around the user's own optimizer step."""

from __future__ import annotations

import atexit
import logging
import mmap
import os
from typing import Callable, List, Optional

import numpy as np
import torch

from meridian._channel import PROTOCOL_VERSION, SOCKET_NAME, Channel, SiteError, SiteLost, StepRefused

__all__ = ["attach", "Site", "AttachedOptimizer", "SiteError", "SiteLost", "StepRefused"]

_log = logging.getLogger("meridian")


def attach(run_dir: Optional[str] = None, timeout: float = 60.0, reconnect: float = 300.0) -> "Site":
    """Connects to the site whose run directory is `run_dir` (default: $MERIDIAN_RUN_DIR, else
    ./meridian-run), waiting up to `timeout` seconds for it to listen. When the site's daemon goes
    away during the run (it died, or was restarted), the optimizer waits up to `reconnect` seconds for
    it to listen again and attaches again; the daemon resumes from its checkpoint and the model
    continues from the checkpoint's parameters. `reconnect=0` raises :class:`SiteLost` instead.

    Example::

        >>> import meridian  # doctest: +SKIP
        >>> site = meridian.attach("meridian-run")  # doctest: +SKIP
    """
    run_dir = run_dir or os.environ.get("MERIDIAN_RUN_DIR", "meridian-run")
    return Site(Channel(os.path.join(run_dir, SOCKET_NAME), timeout), reconnect)


class Site:
    """One attached site. Make the optimizer with :meth:`optimizer`; stop when :attr:`finished`.

    Example::

        >>> site = meridian.attach()  # doctest: +SKIP
        >>> opt = site.optimizer(model, torch.optim.SGD(model.parameters(), lr=0.05), steps=100)  # doctest: +SKIP
        >>> site.finished  # doctest: +SKIP
        False
    """

    def __init__(self, channel: Channel, reconnect: float = 0.0) -> None:
        self._channel: Optional[Channel] = channel
        self._channel_path = channel.path
        self.reconnect = reconnect
        # A script that ends without close() (Ctrl-C, an exception, sys.exit) still leaves its site
        # cleanly: the site checkpoints the parameters and stops, rather than losing its trainer.
        atexit.register(self.close)
        self.finished = False
        self.name = ""
        self.algorithm = ""
        self.hook = ""
        self._optimizer: Optional[AttachedOptimizer] = None

    def optimizer(self, model: torch.nn.Module, inner: torch.optim.Optimizer, steps: int) -> "AttachedOptimizer":
        """Declares `model`'s trainable parameters to the site, waits until the federation starts the
        run, and returns `inner` wrapped: call its zero_grad() and step() as usual. `steps` is how
        many steps this loop runs; the federation runs the smallest site's count.

        Example::

            >>> opt = site.optimizer(model, torch.optim.AdamW(model.parameters()), steps=1000)  # doctest: +SKIP
        """
        if self._optimizer is not None:
            raise RuntimeError("this site has its optimizer already: one model per site")
        if steps <= 0:
            raise ValueError(f"steps must be positive, not {steps}")
        self._optimizer = AttachedOptimizer(self, model, inner, int(steps))
        return self._optimizer

    @property
    def channel(self) -> Channel:
        if self._channel is None:
            raise SiteError("this trainer is no longer attached to its site")
        return self._channel

    def close(self) -> None:
        """Leaves the site before the run's end (the site checkpoints the parameters and stops), or
        just closes the channel once the run has finished."""
        if self._channel is None:
            return
        atexit.unregister(self.close)
        if not self.finished and self._optimizer is not None:
            try:
                # Interrupted inside a step (Ctrl-C while the site mixed): that step is finished
                # first, so that the site hears the bye between steps.
                self._optimizer._finish_exchange()
                try:
                    self._optimizer._check_shapes()
                    self._optimizer._copy_parameters_in()
                except ValueError:
                    pass  # a model that no longer fits: the site keeps the last exchange's parameters
                self._channel.send({"op": "bye"})
            except SiteError:
                pass
        self._channel.close()
        self._channel = None

    def __enter__(self) -> "Site":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AttachedOptimizer:
    """`inner` (any torch.optim optimizer) with the site's algorithm around its step: the averaged
    gradients before it (allreduce), the site's rule on the parameters after it (sgp, dsync, diloco,
    diloco-gossip, local), or the site's update in its place (dts, which is its own optimizer: `inner`
    only zeroes the gradients). Every tensor crosses the shared segment with one copy each way."""

    def __init__(self, site: Site, model: torch.nn.Module, inner: torch.optim.Optimizer, steps: int) -> None:
        self.site = site
        self.inner = inner
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters")
        self._params: List[torch.nn.Parameter] = [p for _, p in named]
        self._shapes = [tuple(p.shape) for p in self._params]
        self._tensors = [
            {"name": n, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")} for n, p in named
        ]
        self._declared_steps = steps
        self._step = 0
        self._in_exchange = False
        self._handshake()

    def _handshake(self) -> None:
        """Declares the model, maps the site's segment, hands over the parameters and waits for the
        run's start (copying the site's parameters in when it resumes)."""
        site = self.site
        channel = site.channel
        channel.send(
            {"op": "hello", "version": PROTOCOL_VERSION, "steps": self._declared_steps, "tensors": self._tensors}
        )
        welcome, fd = channel.receive(with_fd=True)
        if welcome.get("op") != "welcome" or fd is None:
            raise SiteError(f"the site answered the hello with {welcome}")
        total = sum(p.numel() for p in self._params)
        if welcome["parameters"] != total:
            os.close(fd)
            raise SiteError(f"the site shares {welcome['parameters']} parameters, this model has {total}")
        site.name, site.algorithm, site.hook = welcome["site"], welcome["algorithm"], welcome["hook"]
        try:
            self._segment = mmap.mmap(fd, 2 * total * 4)
        finally:
            os.close(fd)
        flat = torch.from_numpy(np.frombuffer(self._segment, dtype=np.float32))
        self._param_views, self._grad_views = [], []
        offset = 0
        for p in self._params:
            n = p.numel()
            self._param_views.append(flat[offset : offset + n].view(p.shape))
            self._grad_views.append(flat[total + offset : total + offset + n].view(p.shape))
            offset += n
        self._copy_parameters_in()
        channel.send({"op": "pulled"})
        start, _ = channel.receive()
        if start.get("op") != "start":
            raise SiteError(f"expected the run's start, got {start}")
        self.steps = start["steps"]
        if start["restore"]:
            self._copy_parameters_out()

    def _reattach(self, lost: SiteLost) -> None:
        """The site's daemon went away: waits for it to listen again (it resumes from its checkpoint)
        and attaches to it, taking its parameters. Raises `lost` when the site does not allow it."""
        site = self.site
        if site.reconnect <= 0:
            raise lost
        _log.warning("%s; waiting up to %g s for the site to come back", lost, site.reconnect)
        site._channel.close()
        site._channel = None
        self._in_exchange = False
        try:
            site._channel = Channel(site._channel_path, site.reconnect)
        except SiteError as e:
            raise SiteLost(f"{lost}, and it did not come back within {site.reconnect:g} s") from e
        self._handshake()
        _log.warning("attached again to site %s; it resumed from its checkpoint, %d steps left", site.name, self.steps)

    # The one copy each way between the model's tensors and the segment.
    @torch.no_grad()
    def _copy_parameters_in(self) -> None:
        for view, p in zip(self._param_views, self._params):
            view.copy_(p)

    @torch.no_grad()
    def _copy_parameters_out(self) -> None:
        for view, p in zip(self._param_views, self._params):
            p.copy_(view)

    @torch.no_grad()
    def _copy_gradients_in(self) -> None:
        for view, p in zip(self._grad_views, self._params):
            if p.grad is None:
                view.zero_()
            else:
                view.copy_(p.grad)

    @torch.no_grad()
    def _copy_gradients_out(self) -> None:
        for view, p in zip(self._grad_views, self._params):
            if p.grad is None:
                p.grad = view.to(device=p.device, dtype=p.dtype, copy=True)  # never an alias of the segment
            else:
                p.grad.copy_(view)

    def _check_shapes(self) -> None:
        for p, shape in zip(self._params, self._shapes):
            if tuple(p.shape) != shape:
                raise ValueError(
                    f"a parameter changed shape from {list(shape)} to {list(p.shape)} after it was declared to "
                    f"the site; the federation agreed on the declared model"
                )

    def _exchange(self, loss: Optional[float]) -> dict:
        """Sends this step to the site and answers its requests until the step is through."""
        self.site.channel.send({"op": "step", "step": self._step, "loss": loss})
        self._in_exchange = True
        return self._finish_exchange()

    def _finish_exchange(self) -> dict:
        """Answers the site's requests until the step in flight is through (nothing when none is)."""
        channel = self.site.channel
        while self._in_exchange:
            try:
                message, _ = channel.receive()
            except StepRefused:
                self._in_exchange = False  # the site refused the step; none is in flight
                raise
            if message["op"] == "pull":
                self._copy_parameters_in()
                channel.send({"op": "pulled"})
            elif message["op"] == "done":
                self._in_exchange = False
                return message
            else:
                raise SiteError(f"unexpected message from the site: {message}")
        return {}

    def zero_grad(self, set_to_none: bool = False) -> None:
        """As the inner optimizer's zero_grad."""
        self.inner.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Optional[Callable[[], float]] = None, loss: Optional[float] = None):
        """The inner optimizer's step with the site's algorithm around it. `loss` (or the closure's
        result) is reported to the site's metrics. Raises StepRefused for NaN or Inf gradients (the
        step is not taken: skip the batch), SiteError when the site ended the attachment. When the
        site's daemon goes away, waits for it to come back (see :func:`attach`) and returns with the
        step dropped and the model at the site's checkpoint.

        Example::

            >>> loss = loss_fn(model(x), y); loss.backward(); opt.step(loss=loss.item())  # doctest: +SKIP
        """
        if self.site.finished:
            return None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        value = float(loss) if loss is not None else None
        self._check_shapes()
        try:
            done = self._step_with_site(value)
        except SiteLost as lost:
            # The daemon went away (it is restarted): this step is dropped, and the loop goes on from
            # the parameters of the checkpoint the daemon resumes from.
            self._reattach(lost)
            return loss
        self._step += 1
        self.site.finished = bool(done["finished"])
        return loss

    def _step_with_site(self, value: Optional[float]) -> dict:
        """One step: the inner optimizer's and the site's, in the order the site's hook says."""
        if self.site.hook == "gradients":
            self._copy_gradients_in()
            done = self._exchange(value)
            if done["gradients"]:
                self._copy_gradients_out()
            if done["parameters"]:
                self._copy_parameters_out()
            self.inner.step()
            if done["finished"]:
                # The last update happens after the last exchange: the site checkpoints its result.
                self._copy_parameters_in()
                self.site.channel.send({"op": "pulled"})
        elif self.site.hook == "update":
            # The site's algorithm is its own optimizer (dts): its update, with its delayed
            # compensation, replaces the inner step, and the parameters come back updated.
            self._copy_gradients_in()
            done = self._exchange(value)
            if done["parameters"]:
                self._copy_parameters_out()
        else:
            self.inner.step()
            done = self._exchange(value)
            if done["parameters"]:
                self._copy_parameters_out()
        return done

    def state_dict(self) -> dict:
        """The inner optimizer's state (the site keeps the algorithm's own)."""
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)

    @property
    def param_groups(self):
        return self.inner.param_groups
