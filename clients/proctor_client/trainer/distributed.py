"""Data parallelism under `torchrun`: each rank samples, scores and back-propagates its share of
the batch; gradients are summed across ranks before every optimizer step.

The gradients are all-reduced by hand rather than by DDP's hooks because dynamic sampling makes
the ranks' shares uneven: a rank may have more micro-batches than another, or none in a minibatch,
and DDP needs the same number of backward passes everywhere. With every rank's loss divided by the
minibatch's token count summed over all ranks, the summed gradient is exactly the gradient of the
whole minibatch's token mean. Parameters stay identical on every rank because they start equal and
take the same steps.

With one process (no `torchrun`), every call is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["World"]


@dataclass(frozen=True)
class World:
    """This process's rank among `size` processes."""

    rank: int = 0
    size: int = 1

    @staticmethod
    def from_environment(device: str) -> World:
        """Join the process group `torchrun` describes (WORLD_SIZE, RANK), if there is one."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size == 1:
            return World()
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
        return World(rank=dist.get_rank(), size=dist.get_world_size())

    @property
    def main(self) -> bool:
        """Whether this rank writes metrics and checkpoints."""
        return self.rank == 0

    def device(self, device: str) -> str:
        """`cuda` becomes this rank's GPU (LOCAL_RANK); anything else is kept."""
        if self.size > 1 and device == "cuda":
            return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        return device

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over the ranks."""
        if self.size == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.float64)
        if dist.get_backend() == "nccl":
            tensor = tensor.cuda()
        dist.all_reduce(tensor)
        return [float(v) for v in tensor.cpu()]

    def sum_gradients(self, model: torch.nn.Module) -> None:
        """Replace every parameter's gradient by its sum over the ranks (a missing one is 0)."""
        if self.size == 1:
            return
        for parameter in model.parameters():
            if not parameter.requires_grad:
                continue
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            dist.all_reduce(parameter.grad)

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank."""
        if self.size == 1:
            return [value]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, value)
        return out

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()
