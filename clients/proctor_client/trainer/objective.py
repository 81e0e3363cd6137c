"""The token-level GRPO objective: log-probabilities, the clipped surrogate and the KL penalty.

Every function here takes tensors and returns tensors; none owns a model. Log-probabilities are
taken at the rollout temperature (logits divided by it) for the old, current and reference
policies alike, so that the ratio compares the distribution the tokens were sampled from.

The loss of a minibatch is a sum over its tokens divided by one denominator fixed before the
micro-batch loop (the minibatch's valid token count): accumulating micro-batches then gives
exactly the full minibatch's gradient, whatever the split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "KL_ESTIMATORS",
    "KLEstimator",
    "LossParts",
    "clipped_surrogate",
    "kl_estimate",
    "policy_loss",
    "token_entropy",
    "token_logprobs",
]

KLEstimator = Literal["k1", "k2", "k3"]


def _k1(log_ratio: Tensor) -> Tensor:
    """log(pi/ref): unbiased for KL(pi||ref) in value; its gradient is not the KL's."""
    return log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    """0.5 * log(pi/ref)^2: biased in value, but its gradient is the KL's (on-policy samples)."""
    return 0.5 * log_ratio.square()


def _k3(log_ratio: Tensor) -> Tensor:
    """ref/pi - 1 - log(ref/pi): unbiased in value and never negative (Schulman's k3)."""
    return torch.expm1(-log_ratio) + log_ratio


KL_ESTIMATORS: dict[KLEstimator, Callable[[Tensor], Tensor]] = {"k1": _k1, "k2": _k2, "k3": _k3}
"""Per-token estimators of KL(pi || ref) from log(pi/ref) at tokens sampled from pi."""


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: KLEstimator) -> Tensor:
    """The per-token KL estimate between the current policy and the reference."""
    return KL_ESTIMATORS[estimator](logp - ref_logp)


def token_logprobs(logits: Tensor, tokens: Tensor, temperature: float) -> Tensor:
    """log pi(token) under `logits / temperature`; logits [..., V] aligned with tokens [...]."""
    scaled = logits.float() / temperature
    return torch.log_softmax(scaled, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: Tensor, temperature: float) -> Tensor:
    """The entropy of each position's distribution at `temperature` (nats), without gradient."""
    with torch.no_grad():
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        return -(logp.exp() * logp).sum(-1)


def clipped_surrogate(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float, eps_high: float
) -> Tensor:
    """min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) per token, r = pi / pi_old (to maximise).

    With A > 0 the objective stops growing (zero gradient) once r > 1 + eps_high; with A < 0 once
    r < 1 - eps_low. `advantages` broadcasts against the token tensors.
    """
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return torch.minimum(ratio * advantages, clipped * advantages)


@dataclass(frozen=True)
class LossParts:
    """One micro-batch's loss and the sums its diagnostics are made of (all over valid tokens)."""

    loss: Tensor
    """The micro-batch's share of the minibatch loss (already divided by the denominator)."""
    kl_sum: float
    clip_low_count: float
    """Tokens with A < 0 whose ratio is below 1 - eps_low (their gradient is zero)."""
    clip_high_count: float
    """Tokens with A > 0 whose ratio is above 1 + eps_high (their gradient is zero)."""
    tokens: float


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    ref_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    denominator: float,
    *,
    eps_low: float,
    eps_high: float,
    kl_coef: float,
    kl_estimator: KLEstimator,
) -> LossParts:
    """-(surrogate - kl_coef * KL) summed over the tokens where `mask` is 1, over `denominator`.

    Token tensors are [B, T]; `advantages` is [B] (one per response). `denominator` is the valid
    token count of the whole minibatch, not of this micro-batch.
    """
    if denominator <= 0:
        raise ValueError(f"the token denominator must be positive, got {denominator}")
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(-1)
    surrogate = clipped_surrogate(logp, old_logp, adv, eps_low, eps_high)
    kl = kl_estimate(logp, ref_logp, kl_estimator)
    per_token = -(surrogate - kl_coef * kl)
    loss = (per_token * mask).sum() / denominator
    with torch.no_grad():
        ratio = torch.exp(logp - old_logp)
        low = ((ratio < 1.0 - eps_low) & (adv < 0)).to(mask.dtype) * mask
        high = ((ratio > 1.0 + eps_high) & (adv > 0)).to(mask.dtype) * mask
        return LossParts(
            loss=loss,
            kl_sum=float((kl.detach() * mask).sum()),
            clip_low_count=float(low.sum()),
            clip_high_count=float(high.sum()),
            tokens=float(mask.sum()),
        )
