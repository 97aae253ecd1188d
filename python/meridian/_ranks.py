"""The ranks of one site that trains with torch.distributed (DDP, or FSDP without sharding): rank 0
attaches to the site, and the other ranks receive what the site's algorithm mixed by broadcast, so the
site sends and receives each tensor once. One process alone is a group of one, for which every
method here does nothing."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, TypeVar

import torch
import torch.distributed as dist

from meridian._channel import SiteError, SiteLost, StepRefused

__all__ = ["RankLost", "SiteRanks"]

T = TypeVar("T")


class RankLost(SiteError):
    """Another rank of the site's process group failed (it died, or its connection broke). The ranks of
    a site train together, so this one stops too; the site keeps its state and waits for the group to
    attach again (torchrun restarts the whole group after a failure)."""


# What rank 0 tells the others after each of its exchanges with the site (the first value of the
# control tensor), and the exception each of them raises there.
_OK, _REFUSED, _ERROR, _LOST, _RANK_LOST = 0, 1, 2, 3, 4
_RAISES = {_REFUSED: StepRefused, _ERROR: SiteError, _LOST: SiteLost, _RANK_LOST: RankLost}


def _code_of(error: BaseException) -> int:
    for kind in (RankLost, SiteLost, StepRefused, SiteError):  # subclasses before their bases
        if isinstance(error, kind):
            return {RankLost: _RANK_LOST, SiteLost: _LOST, StepRefused: _REFUSED, SiteError: _ERROR}[kind]
    return _ERROR


class SiteRanks:
    """The process group of a site's ranks, over gloo (its broadcasts carry host tensors, whatever
    backend trains the model). Rank 0 of the group is the one attached to the site. Not thread-safe:
    the training loop's thread uses it, on every rank in the same order."""

    def __init__(self, group: Optional[Any]) -> None:
        self.group = group
        self.size = dist.get_world_size(group) if group is not None else 1
        self.rank = dist.get_rank(group) if group is not None else 0
        self._src = dist.get_global_rank(group, 0) if group is not None and group is not dist.group.WORLD else 0
        self._control = torch.zeros(4, dtype=torch.int64)  # (kind, gradients, parameters, finished)

    @classmethod
    def of(cls, group: Optional[Any] = None) -> "SiteRanks":
        """The site's ranks: `group` (a gloo process group), or the default group when torch.distributed
        is initialized, or this process alone. A default group of another backend (nccl) gets a gloo
        group over the same ranks, made here: every rank must call this, as every rank calls
        :func:`meridian.attach`."""
        if not (dist.is_available() and dist.is_initialized()):
            if group is not None:
                raise ValueError("a process group was given, but torch.distributed is not initialized")
            return cls(None)
        if group is None:
            group = dist.group.WORLD
            if dist.get_backend(group) != "gloo":
                group = dist.new_group(backend="gloo")
        elif dist.get_backend(group) != "gloo":
            raise ValueError(
                f"the site's process group must be a gloo group (its broadcasts carry host tensors), "
                f"not {dist.get_backend(group)}: make one with torch.distributed.new_group(ranks, backend='gloo')"
            )
        return cls(group if dist.get_world_size(group) > 1 else None)

    @property
    def leader(self) -> bool:
        """Whether this process is rank 0, the one attached to the site."""
        return self.rank == 0

    def _collective(self, run: Callable[[], T]) -> T:
        try:
            return run()
        except RuntimeError as e:
            raise RankLost(
                f"rank {self.rank} of this site's {self.size} ranks: another rank failed ({e}); the site's ranks "
                f"train together, so this one stops: start them all again to resume from the site's state"
            ) from e

    def lead(self, work: Callable[[], T]) -> T:
        """Runs `work` on rank 0 and gives its result to every rank; when it raises a SiteError, every
        rank raises it (the same class, with rank 0's message)."""
        if self.group is None:
            return work()
        if self.leader:
            try:
                result = work()
            except SiteError as e:
                self._share_object([_code_of(e), str(e)])
                raise
            self._share_object([_OK, result])
            return result
        code, result = self._share_object([None, None])
        if code != _OK:
            raise _RAISES[code](result)
        return result

    def _share_object(self, values: List[Any]) -> List[Any]:
        self._collective(lambda: dist.broadcast_object_list(values, src=self._src, group=self.group))
        return values

    def share_done(self, done: Optional[dict], error: Optional[BaseException] = None) -> dict:
        """After rank 0's exchange of a step with the site: rank 0 passes what the site answered (or
        the SiteError it raised, which it raises itself afterwards); every other rank gets the answer,
        or raises rank 0's error."""
        if self.group is None:
            return done or {}
        if self.leader:
            if error is not None:
                self._control[0] = _code_of(error)
            else:
                self._control[0] = _OK
                self._control[1:] = torch.tensor(
                    [int(done["gradients"]), int(done["parameters"]), int(done["finished"])], dtype=torch.int64
                )
        self._collective(lambda: dist.broadcast(self._control, src=self._src, group=self.group))
        code = int(self._control[0])
        if code != _OK:
            message = self._share_object([str(error) if error is not None else None])[0]
            if self.leader:
                return {}
            raise _RAISES[code](message)
        gradients, parameters, finished = (bool(v) for v in self._control[1:].tolist())
        return {"gradients": gradients, "parameters": parameters, "finished": finished}

    def share(self, tensor: torch.Tensor) -> None:
        """Broadcasts `tensor` (contiguous, on the host) from rank 0 into the others' in place."""
        if self.group is not None and tensor.numel() > 0:
            self._collective(lambda: dist.broadcast(tensor, src=self._src, group=self.group))
