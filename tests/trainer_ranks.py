"""Run by `torchrun --nproc-per-node 2 trainer_ranks.py URL OUT` from
tests/test_trainer_distributed.py (gloo, on CPU), one check after the other.

First, ranks hold uneven shares of one minibatch (one response on rank 0, five in three
micro-batches on rank 1); with the token count summed over ranks as the denominator and the
gradients summed, every rank must hold the whole minibatch's gradient. Then three steps of
tiny-cpu.yaml (every checkpoint compares the ranks' weights and fails if they differ).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from proctor_client.trainer.distributed import World
from proctor_client.trainer.grpo import load_args, train
from proctor_client.trainer.objective import policy_loss, token_logprobs

TINY = Path(__file__).parent.parent / "clients" / "configs" / "tiny-cpu.yaml"


def gradient() -> int:
    world = World.from_environment("cpu")
    torch.manual_seed(0)  # the same data and weights on both ranks
    weights = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    features = torch.randn(6, 4, 5, dtype=torch.float64)
    tokens = torch.randint(0, 7, (6, 4))
    lengths = torch.tensor([4, 1, 3, 2, 4, 1])
    mask = (torch.arange(4).unsqueeze(0) < lengths.unsqueeze(1)).double()
    old = torch.randn(6, 4, dtype=torch.float64) * 0.1 - 2
    ref = torch.randn(6, 4, dtype=torch.float64) * 0.1 - 2
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0], dtype=torch.float64)

    def backward(rows: slice, denominator: float) -> None:
        logp = token_logprobs(features[rows] @ weights, tokens[rows], temperature=1.2)
        parts = policy_loss(
            logp, old[rows], ref[rows], adv[rows], mask[rows], denominator,
            eps_low=0.2, eps_high=0.4, kl_coef=0.1, kl_estimator="k2",
        )  # fmt: skip
        parts.loss.backward()  # type: ignore[no-untyped-call]

    backward(slice(0, 6), float(mask.sum()))
    assert weights.grad is not None
    full = weights.grad.clone()
    weights.grad = None
    shares = [[slice(0, 1)], [slice(1, 3), slice(3, 4), slice(4, 6)]][world.rank]
    local_tokens = sum(float(mask[rows].sum()) for rows in shares)
    (denominator,) = world.sum([local_tokens])
    for rows in shares:
        backward(rows, denominator)
    module = torch.nn.Module()
    module.weights = torch.nn.Parameter(weights.detach())
    module.weights.grad = weights.grad
    world.sum_gradients(module)
    same = torch.allclose(module.weights.grad, full, rtol=1e-12, atol=1e-14)
    print(f"rank {world.rank}: summed gradient equals the full minibatch's: {same}")
    return 0 if same else 1


def run(url: str, out: Path) -> int:
    train(load_args(TINY, tensorboard=False), url, out, stop_after=3)
    return 0


if __name__ == "__main__":
    sys.exit(gradient() or run(sys.argv[1], Path(sys.argv[2])))
