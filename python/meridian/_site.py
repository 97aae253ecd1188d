"""A training process attached to its Meridian site: the site, the shared segment, and the optimizer
wrapper that moves tensors in and out of it around the user's own optimizer step. A site of several
ranks (torch.distributed) attaches through rank 0; the others follow it (meridian._ranks)."""

from __future__ import annotations

import atexit
import json
import logging
import math
import mmap
import os
import sys
import time
from typing import Any, Callable, List, Optional

import numpy as np
import torch

from meridian._channel import PROTOCOL_VERSION, SOCKET_NAME, Channel, SiteError, SiteLost, StepRefused
from meridian._ranks import RankLost, SiteRanks

__all__ = ["attach", "Site", "AttachedOptimizer", "SiteError", "SiteLost", "StepRefused", "RankLost"]

_log = logging.getLogger("meridian")

# The trainer's evaluations, beside the site's own trail in its run directory (Site.report).
EVALUATIONS_NAME = "trainer-progress.jsonl"


def attach(
    run_dir: Optional[str] = None, timeout: float = 60.0, reconnect: float = 300.0, group: Optional[Any] = None
) -> "Site":
    """Connects to the site whose run directory is `run_dir` (default: $MERIDIAN_RUN_DIR, else
    ./meridian-run), waiting up to `timeout` seconds for it to listen. When the site's daemon goes
    away during the run (it died, or was restarted), the optimizer waits up to `reconnect` seconds for
    it to listen again and attaches again; the daemon resumes from its checkpoint and the model
    continues from the checkpoint's parameters. `reconnect=0` raises :class:`SiteLost` instead.

    A site that trains with torch.distributed (DDP, or FSDP without sharding) calls this on every
    rank, after ``init_process_group``: rank 0 attaches, and the other ranks receive what the site's
    algorithm mixed from it by broadcast. `group` is the site's ranks (a gloo group); by default the
    default group, or a gloo group over its ranks when that one is not gloo (nccl).

    Example::

        >>> import meridian  # doctest: +SKIP
        >>> site = meridian.attach("meridian-run")  # doctest: +SKIP
    """
    ranks = SiteRanks.of(group)
    run_dir = run_dir or os.environ.get("MERIDIAN_RUN_DIR", "meridian-run")
    path = os.path.join(run_dir, SOCKET_NAME)
    channel: Optional[Channel] = None

    def connect() -> None:
        nonlocal channel
        channel = Channel(path, timeout)

    ranks.lead(connect)
    return Site(channel, reconnect, ranks, path)


class Site:
    """One attached site. Make the optimizer with :meth:`optimizer`; stop when :attr:`finished`.

    Example::

        >>> site = meridian.attach()  # doctest: +SKIP
        >>> opt = site.optimizer(model, torch.optim.SGD(model.parameters(), lr=0.05), steps=100)  # doctest: +SKIP
        >>> site.finished  # doctest: +SKIP
        False
    """

    def __init__(
        self,
        channel: Optional[Channel],
        reconnect: float = 0.0,
        ranks: Optional[SiteRanks] = None,
        path: Optional[str] = None,
    ) -> None:
        self.ranks = ranks or SiteRanks(None)
        self._channel: Optional[Channel] = channel
        self._channel_path = path or (channel.path if channel else "")
        self._closed = False
        self.reconnect = reconnect
        # A script that ends without close() (Ctrl-C, an exception, sys.exit) still leaves its site
        # cleanly: the site checkpoints the parameters and stops, rather than losing its trainer.
        atexit.register(self.close)
        # Except, on rank 0 of several, an exception other than Ctrl-C: there it is mostly another
        # rank's failure seen through the process group, after which torchrun restarts the whole
        # group. The site treats it as its trainer's crash, goes on without it, and takes the group
        # back when it attaches again.
        self._group_failure: Optional[BaseException] = None
        if self.ranks.size > 1 and self.ranks.leader:
            self._previous_excepthook = sys.excepthook
            sys.excepthook = self._excepthook
        self.finished = False
        self.name = ""
        self.algorithm = ""
        self.hook = ""
        self._optimizer: Optional[AttachedOptimizer] = None

    def _excepthook(self, kind, value, traceback) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            self._group_failure = value
        self._previous_excepthook(kind, value, traceback)

    def optimizer(self, model: torch.nn.Module, inner: torch.optim.Optimizer, steps: int) -> "AttachedOptimizer":
        """Declares `model`'s trainable parameters to the site, waits until the federation starts the
        run, and returns `inner` wrapped: call its zero_grad() and step() as usual. `steps` is how
        many steps this loop runs; the federation runs the smallest site's count. A model wrapped in
        DistributedDataParallel is declared by its module's names (as the same model without DDP).
        On a site of several ranks every rank calls this, with the same model.

        Example::

            >>> opt = site.optimizer(model, torch.optim.AdamW(model.parameters()), steps=1000)  # doctest: +SKIP
        """
        if self._optimizer is not None:
            raise RuntimeError("this site has its optimizer already: one model per site")
        if steps <= 0:
            raise ValueError(f"steps must be positive, not {steps}")
        self._optimizer = AttachedOptimizer(self, model, inner, int(steps))
        return self._optimizer

    def report(self, test_accuracy: float, epoch: Optional[float] = None) -> None:
        """Records an evaluation of the model by your script: `test_accuracy`, a fraction in [0, 1], at
        the current step (and `epoch`, when your loop counts them). It goes to
        ``RUN_DIR/trainer-progress.jsonl``, one JSON object a line in the format of the site's own
        progress.jsonl (docs/pytorch.md); ``meridian simulate --trainer-command`` reads it for its
        accuracy columns, and it may be called after the run's end. The record's byte counts are 0 (the
        site counts its traffic itself). On a site of several ranks only rank 0 writes.

        Example::

            >>> site.report(test_accuracy=0.86)  # doctest: +SKIP
        """
        accuracy = float(test_accuracy)
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"test_accuracy must be a fraction in [0, 1], not {test_accuracy}")
        if not self.ranks.leader:
            return
        opt = self._optimizer
        record = {
            "time": time.time(),
            "site": self.name,
            "step": opt._step if opt else 0,
            "epoch": float(epoch) if epoch is not None else 0.0,
            "train_loss": opt._last_loss if opt else None,
            "test_accuracy": accuracy,
            "bytes_sent": 0,
            "bytes_received": 0,
        }
        path = os.path.join(os.path.dirname(self._channel_path), EVALUATIONS_NAME)
        # Never through a link planted in the run directory; one write per line, appended.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)

    @property
    def channel(self) -> Channel:
        if self._channel is None:
            raise SiteError("this trainer is no longer attached to its site")
        return self._channel

    def close(self) -> None:
        """Leaves the site before the run's end (the site checkpoints the parameters and stops), or
        just closes the channel once the run has finished. On a site of several ranks, rank 0's
        close() leaves the site; the other ranks' does nothing."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._channel is None:
            return
        failure = self._group_failure or (self._optimizer._rank_lost if self._optimizer else None)
        if failure is not None:
            # The group failed: no bye, so that the site keeps its state for the group's restart.
            _log.warning(
                "this site's process group failed (%s: %s); the site goes on without its trainer and takes the "
                "ranks back when they attach again",
                type(failure).__name__,
                failure,
            )
        elif not self.finished and self._optimizer is not None:
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
    only zeroes the gradients). Every tensor crosses the shared segment with one copy each way.

    On a site of several ranks, rank 0 exchanges with the site, then broadcasts what came back (the
    step's outcome, and the segment's parameters or gradients when the site changed them) to the
    other ranks, which copy it into their model from a host buffer of the segment's layout. Every rank
    then runs `inner` on the same values, so the ranks stay identical to the bit."""

    def __init__(self, site: Site, model: torch.nn.Module, inner: torch.optim.Optimizer, steps: int) -> None:
        self.site = site
        self.inner = inner
        self._ranks = site.ranks
        # DDP's wrapper names its parameters "module.*": the site declares the model's own names, so
        # that a site of several ranks agrees with a site of one that trains the same model.
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters")
        self._params: List[torch.nn.Parameter] = [p for _, p in named]
        self._shapes = [tuple(p.shape) for p in self._params]
        self._tensors = [
            {"name": n, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")} for n, p in named
        ]
        self._total = sum(p.numel() for p in self._params)
        self._declared_steps = steps
        self._step = 0
        self._last_loss: Optional[float] = None
        self._in_exchange = False
        self._rank_lost: Optional[RankLost] = None
        if not self._ranks.leader:
            # The other ranks' copy of the segment's layout (parameters, then gradients), made once.
            self._point_views(torch.zeros(2 * self._total, dtype=torch.float32))
        self._handshake()

    def _point_views(self, flat: torch.Tensor) -> None:
        """Points the per-parameter views into `flat`: parameters at 0, gradients at the total."""
        total = self._total
        self._flat = flat
        self._param_views, self._grad_views = [], []
        offset = 0
        for p in self._params:
            n = p.numel()
            self._param_views.append(flat[offset : offset + n].view(p.shape))
            self._grad_views.append(flat[total + offset : total + offset + n].view(p.shape))
            offset += n

    def _handshake(self, lost: Optional[SiteLost] = None) -> None:
        """Rank 0 declares the model, maps the site's segment, hands over the parameters and waits for
        the run's start (after reconnecting first when `lost` says the daemon went away); every rank
        then takes the site's parameters when it resumes."""
        try:
            info = self._ranks.lead(lambda: self._handshake_with_site(lost))
        except RankLost as e:
            self._rank_lost = e
            raise
        site = self.site
        if info["parameters"] != self._total:
            raise SiteError(f"rank 0's model has {info['parameters']} parameters, this rank's {self._total}")
        site.name, site.algorithm, site.hook = info["site"], info["algorithm"], info["hook"]
        self.steps = info["steps"]
        if info["restore"]:
            self._share(parameters=True, gradients=False)
            self._copy_parameters_out()

    def _handshake_with_site(self, lost: Optional[SiteLost]) -> dict:
        site = self.site
        if lost is not None:
            self._reconnect(lost)
        channel = site.channel
        channel.send(
            {"op": "hello", "version": PROTOCOL_VERSION, "steps": self._declared_steps, "tensors": self._tensors}
        )
        welcome, fd = channel.receive(with_fd=True)
        if welcome.get("op") != "welcome" or fd is None:
            raise SiteError(f"the site answered the hello with {welcome}")
        total = self._total
        if welcome["parameters"] != total:
            os.close(fd)
            raise SiteError(f"the site shares {welcome['parameters']} parameters, this model has {total}")
        try:
            self._segment = mmap.mmap(fd, 2 * total * 4)
        finally:
            os.close(fd)
        self._point_views(torch.from_numpy(np.frombuffer(self._segment, dtype=np.float32)))
        self._copy_parameters_in()
        channel.send({"op": "pulled"})
        start, _ = channel.receive()
        if start.get("op") != "start":
            raise SiteError(f"expected the run's start, got {start}")
        return {
            "site": welcome["site"],
            "algorithm": welcome["algorithm"],
            "hook": welcome["hook"],
            "parameters": total,
            "steps": start["steps"],
            "restore": bool(start["restore"]),
        }

    def _reconnect(self, lost: SiteLost) -> None:
        """The site's daemon went away: waits for it to listen again (it resumes from its checkpoint).
        Raises `lost` when the site does not allow it."""
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

    def _reattach(self, lost: SiteLost) -> None:
        """Attaches again to a site whose daemon went away, and takes its parameters."""
        self._handshake(lost)
        if self._ranks.leader:
            _log.warning(
                "attached again to site %s; it resumed from its checkpoint, %d steps left", self.site.name, self.steps
            )

    def _share(self, parameters: bool, gradients: bool) -> None:
        """Broadcasts the parameters and/or the gradients of rank 0's segment into the other ranks'
        buffer, in one broadcast."""
        total = self._total
        begin = 0 if parameters else total
        end = 2 * total if gradients else total
        if parameters or gradients:
            try:
                self._ranks.share(self._flat[begin:end])
            except RankLost as e:
                self._rank_lost = e
                raise

    # The one copy each way between the model's tensors and the segment (rank 0) or the buffer
    # the segment's values were broadcast into (the other ranks).
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
        if not self._ranks.leader:
            return  # only rank 0's gradients go to the site; DDP made them every rank's
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
        """Sends this step to the site and answers its requests until the step is through (rank 0),
        then gives every rank the outcome and what the site changed."""
        done: Optional[dict] = None
        try:
            if self._ranks.leader:
                try:
                    self.site.channel.send({"op": "step", "step": self._step, "loss": loss})
                    self._in_exchange = True
                    done = self._finish_exchange()
                except (SiteError, StepRefused) as e:
                    self._ranks.share_done(None, e)
                    raise
            done = self._ranks.share_done(done)
            self._share(parameters=done["parameters"], gradients=done["gradients"])
        except RankLost as e:
            self._rank_lost = e
            raise
        return done

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
        result) is reported to the site's metrics (rank 0's). Raises StepRefused for NaN or Inf
        gradients (the step is not taken: skip the batch), SiteError when the site ended the
        attachment, RankLost (a SiteError) when another rank of the site failed. When the site's
        daemon goes away, waits for it to come back (see :func:`attach`) and returns with the step
        dropped and the model at the site's checkpoint.

        Example::

            >>> loss = loss_fn(model(x), y); loss.backward(); opt.step(loss=loss.item())  # doctest: +SKIP
        """
        if self.site.finished:
            return None
        if self._rank_lost is not None:
            raise self._rank_lost
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        value = float(loss) if loss is not None else None
        if value is not None and math.isfinite(value):
            self._last_loss = value
        self._check_shapes()
        try:
            done = self._step_with_site(value)
        except RankLost:
            raise
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
            if done["finished"] and self._ranks.leader:
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
