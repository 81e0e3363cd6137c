"""The ProRL recipe's functions against hand-computed values (issue 15's acceptance list)."""

from __future__ import annotations

import math

import pytest
import torch

from proctor_client.trainer.groups import group_advantages, is_informative
from proctor_client.trainer.objective import (
    clipped_surrogate,
    kl_estimate,
    policy_loss,
    token_logprobs,
)
from proctor_client.trainer.resets import PlateauRule, reset_optimizer, reset_reference

# --- advantages ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rewards,std,expected",
    [
        # mean 0.5, population std 0.5 (the review's worked example)
        ((0, 0, 1, 1), "population", (-1, -1, 1, 1)),
        # mean 0.5, Bessel std sqrt(1/3)
        ((0, 0, 1, 1), "bessel", (-0.5 * math.sqrt(3),) * 2 + (0.5 * math.sqrt(3),) * 2),
        # mean 0.25, population std sqrt(3)/4: 0.75 / 0.433 and -0.25 / 0.433
        ((1, 0, 0, 0), "population", (math.sqrt(3), *(-1 / math.sqrt(3),) * 3)),
        # mean 0.25, Bessel std 0.5
        ((1, 0, 0, 0), "bessel", (1.5, -0.5, -0.5, -0.5)),
        # no spread: every advantage is 0, not a division by zero
        ((1, 1, 1, 1), "population", (0, 0, 0, 0)),
        ((0.3, 0.3), "bessel", (0, 0)),
    ],
)
def test_group_advantages(
    rewards: tuple[float, ...], std: str, expected: tuple[float, ...]
) -> None:
    got = group_advantages(rewards, std)  # type: ignore[arg-type]
    assert got == pytest.approx(expected)


# --- dynamic sampling ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores,kept",
    [
        ([1, 0, 0, 0], True),  # one success: informative, kept whole
        ([1, 1, 1, 0], True),  # one failure: informative, kept whole
        ([1, 1, 1, 1], False),  # all solved: no relative signal
        ([0, 0, 0, 0], False),  # all failed: no relative signal
        ([0.5, 0.25, 0.25], True),  # continuous scores that differ
        ([1], False),  # one judged response has nothing to compare with
    ],
)
def test_dynamic_sampling_keeps_or_drops_whole_groups(scores: list[float], kept: bool) -> None:
    assert is_informative(scores) is kept


def test_dynamic_sampling_reads_the_raw_score_not_the_shaped_reward() -> None:
    # Raw scores [0, 0, 0, 0] whose rewards differ because of length penalties (DAPO overlong):
    # the rewards vary, the task signal does not, and the group is dropped.
    scores = [0.0, 0.0, 0.0, 0.0]
    rewards = [0.0, -0.25, -1.0, 0.0]
    assert is_informative(rewards)
    assert not is_informative(scores)


# --- the clipped surrogate -----------------------------------------------------------------------


def _surrogate_grad(ratio: float, advantage: float) -> float:
    logp = torch.tensor([math.log(ratio)], dtype=torch.float64, requires_grad=True)
    old = torch.zeros(1, dtype=torch.float64)
    value = clipped_surrogate(logp, old, torch.tensor([advantage], dtype=torch.float64), 0.2, 0.4)
    value.sum().backward()
    assert logp.grad is not None
    return float(logp.grad)


@pytest.mark.parametrize("ratio", [1.41, 1.5, 3.0])
def test_positive_advantage_has_no_gradient_beyond_ratio_1_4(ratio: float) -> None:
    assert _surrogate_grad(ratio, 1.0) == 0.0


@pytest.mark.parametrize("ratio", [0.79, 0.5, 0.1])
def test_negative_advantage_has_no_gradient_below_ratio_0_8(ratio: float) -> None:
    assert _surrogate_grad(ratio, -1.0) == 0.0


@pytest.mark.parametrize(
    "ratio,advantage",
    [
        (1.3, 1.0),  # inside the upper bound: d(rA)/dlogp = rA
        (0.5, 1.0),  # a positive advantage is never clipped from below
        (0.9, -1.0),  # inside the lower bound
        (2.0, -1.0),  # a negative advantage is never clipped from above
    ],
)
def test_unclipped_side_has_the_ratio_gradient(ratio: float, advantage: float) -> None:
    assert _surrogate_grad(ratio, advantage) == pytest.approx(ratio * advantage)


def test_asymmetric_bounds_cap_the_objective_at_1_4_and_0_8() -> None:
    logp = torch.log(torch.tensor([2.0, 0.5], dtype=torch.float64))
    old = torch.zeros(2, dtype=torch.float64)
    pos = clipped_surrogate(logp, old, torch.tensor([1.0, 1.0], dtype=torch.float64), 0.2, 0.4)
    neg = clipped_surrogate(logp, old, torch.tensor([-1.0, -1.0], dtype=torch.float64), 0.2, 0.4)
    assert pos.tolist() == pytest.approx([1.4, 0.5])  # r = 2 capped at 1.4; r = 0.5 kept
    assert neg.tolist() == pytest.approx([-2.0, -0.8])  # r = 2 kept; r = 0.5 floored at 0.8


# --- KL estimators -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator,value,grad",
    [
        # log(pi/ref) = x = log 2: k1 = x, d/dx = 1
        ("k1", math.log(2), 1.0),
        # k2 = x^2 / 2, d/dx = x
        ("k2", 0.5 * math.log(2) ** 2, math.log(2)),
        # k3 = e^-x - 1 + x = 0.5 - 1 + log 2, d/dx = 1 - e^-x = 0.5
        ("k3", math.log(2) - 0.5, 0.5),
    ],
)
def test_kl_estimators(estimator: str, value: float, grad: float) -> None:
    logp = torch.tensor([math.log(0.5)], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([math.log(0.25)], dtype=torch.float64)
    kl = kl_estimate(logp, ref, estimator)  # type: ignore[arg-type]
    kl.sum().backward()
    assert float(kl.detach()) == pytest.approx(value)
    assert logp.grad is not None
    assert float(logp.grad) == pytest.approx(grad)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_estimators_are_zero_at_the_reference(estimator: str) -> None:
    logp = torch.tensor([-0.3, -2.0], dtype=torch.float64)
    assert kl_estimate(logp, logp.clone(), estimator).tolist() == [0.0, 0.0]  # type: ignore[arg-type]


# --- one token denominator -----------------------------------------------------------------------


def test_temperature_divides_the_logits() -> None:
    logits = torch.tensor([[2.0, 0.0]])
    got = token_logprobs(logits, torch.tensor([0]), temperature=2.0)
    assert float(got) == pytest.approx(math.log(math.e / (math.e + 1)))


def test_micro_batches_with_one_denominator_give_the_full_batch_gradient() -> None:
    torch.manual_seed(0)
    weights = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    features = torch.randn(6, 4, 5, dtype=torch.float64)  # 6 responses, up to 4 tokens each
    tokens = torch.randint(0, 7, (6, 4))
    lengths = torch.tensor([4, 1, 3, 2, 4, 1])
    mask = (torch.arange(4).unsqueeze(0) < lengths.unsqueeze(1)).double()
    old = torch.randn(6, 4, dtype=torch.float64) * 0.1 - 2
    ref = torch.randn(6, 4, dtype=torch.float64) * 0.1 - 2
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0], dtype=torch.float64)
    denominator = float(mask.sum())
    knobs = {"eps_low": 0.2, "eps_high": 0.4, "kl_coef": 0.1, "kl_estimator": "k2"}

    def loss(rows: slice) -> torch.Tensor:
        logp = token_logprobs(features[rows] @ weights, tokens[rows], temperature=1.2)
        parts = policy_loss(
            logp,
            old[rows],
            ref[rows],
            adv[rows],
            mask[rows],
            denominator,
            **knobs,  # type: ignore[arg-type]
        )
        return parts.loss

    loss(slice(0, 6)).backward()
    assert weights.grad is not None
    full = weights.grad.clone()
    weights.grad = None
    for rows in (slice(0, 1), slice(1, 4), slice(4, 6)):  # uneven micro-batches
        loss(rows).backward()
    assert torch.allclose(weights.grad, full, rtol=1e-12, atol=1e-14)


def test_policy_loss_counts_clipped_tokens_by_side() -> None:
    logp = torch.log(torch.tensor([[2.0, 0.5, 1.0]]))
    zeros = torch.zeros(1, 3)
    parts = policy_loss(
        logp, zeros, zeros, torch.tensor([1.0]), torch.tensor([[1.0, 1.0, 0.0]]), 2.0,
        eps_low=0.2, eps_high=0.4, kl_coef=0.0, kl_estimator="k2",
    )  # fmt: skip
    assert (parts.clip_high_count, parts.clip_low_count, parts.tokens) == (1.0, 0.0, 2.0)
    # -(1.4 + 0.5) / 2: the masked third token counts for nothing
    assert float(parts.loss) == pytest.approx(-0.95)


# --- resets --------------------------------------------------------------------------------------


def test_reset_makes_kl_zero_and_empties_the_optimizer_but_keeps_the_learning_rate() -> None:
    torch.manual_seed(0)
    policy = torch.nn.Linear(3, 4)
    reference = torch.nn.Linear(3, 4)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 4))
    inputs = torch.randn(8, 3)
    for _ in range(2):
        optimizer.zero_grad()
        policy(inputs).square().sum().backward()
        optimizer.step()
        schedule.step()
    lr_before = optimizer.param_groups[0]["lr"]
    assert optimizer.state  # AdamW has moments to forget

    @torch.no_grad()
    def kl() -> float:
        logp = torch.log_softmax(policy(inputs), -1)
        ref = torch.log_softmax(reference(inputs), -1)
        return float((logp.exp() * (logp - ref)).sum())

    assert kl() > 0
    reset_reference(policy, reference)
    reset_optimizer(optimizer)
    assert kl() == 0.0
    assert not optimizer.state
    assert optimizer.param_groups[0]["lr"] == lr_before
    schedule.step()  # the schedule carries on from where it was
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)
    optimizer.zero_grad()
    policy(inputs).square().sum().backward()
    optimizer.step()  # fresh state: step count 1 again
    assert int(optimizer.state[policy.weight]["step"]) == 1


def test_reference_reset_leaves_the_policy_alone() -> None:
    policy, reference = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    before = policy.weight.detach().clone()
    reset_reference(policy, reference)
    reference.weight.data.add_(1.0)  # a copy, not shared storage
    assert torch.equal(policy.weight, before)


def test_plateau_rule_fires_after_patience_stale_evaluations() -> None:
    rule = PlateauRule(patience=2, min_delta=0.01)
    assert [rule.observe(s) for s in (0.5, 0.6, 0.605, 0.6)] == [False, False, False, True]
    # starts afresh after firing: the next score is the new best
    assert [rule.observe(s) for s in (0.3, 0.2, 0.5)] == [False, False, False]


def test_plateau_rule_round_trips_its_state() -> None:
    rule = PlateauRule(patience=3)
    rule.observe(0.5)
    rule.observe(0.4)
    again = PlateauRule(patience=3)
    again.load_state_dict(rule.state_dict())
    assert (again.best, again.stale) == (0.5, 1)


def test_plateau_rule_refuses_zero_patience() -> None:
    with pytest.raises(ValueError, match="patience"):
        PlateauRule(patience=0)
