"""TRL's real GRPOTrainer, two steps on CPU, with Proctor's reward function against a live server.

The model is a tiny Qwen2 built in code and the tokenizer a word-level one built in code (no hub
download). Its vocabulary holds whole `\\boxed{n}` answers, so random completions are sometimes
right, and an EOS, so some stop and some are cut at `max_completion_length`: under
`prorl-v1-termination` a cut response earns 0. The rewards TRL logged must equal what Proctor
gives when the same completions are scored directly.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from proctor_client import ProctorClient, ProctorUnreachable, ScoreItem
from proctor_client.trl import completion_text, finish_reason, reward_func
from tests.fault_proxy import Refusal, fault_proxy
from tests.helpers import Server, free_port

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")
trl = pytest.importorskip("trl")

WORDS = ["<pad>", "<eos>", "<unk>", "\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "so", "is", "1",
         "2", "3", "what", "plus", "?"]  # fmt: skip
# TRL 1.16 still calls a transformers 5.24 method deprecated under a new name.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

MAX_COMPLETION = 4
SPEC = "prorl-v1-termination"


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(WORDS)}
    words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=words, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def _model(tokenizer: Any) -> Any:
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    return transformers.Qwen2ForCausalLM(config)


class _Snapshots(transformers.TrainerCallback):  # type: ignore[misc]
    """What the trainer logged at each step: its metrics and its completions table."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.steps: list[dict[str, Any]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
        table = self.trainer._logs
        self.steps.append(
            {
                "logs": dict(logs or {}),
                "prompts": list(table["prompt"]),
                "completions": list(table["completion"]),
                "rewards": list(table["rewards"]["proctor"]),
            }
        )


def test_grpo_trainer_logs_the_rewards_proctor_returns(server: Server, tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    model = _model(tokenizer)
    questions = [("what is 1 plus 1 ?", "2"), ("what is 1 plus 2 ?", "3"), ("what is 2 ?", "2")]
    answers = dict(questions)
    dataset = datasets.Dataset.from_list([{"prompt": q, "answer": a} for q, a in questions * 4])
    reward = reward_func(
        server.url,
        domain="math",
        reference="answer",
        max_completion_length=MAX_COMPLETION,
        eos_token_id=tokenizer.eos_token_id,
        spec=SPEC,
    )
    config = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=MAX_COMPLETION,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        seed=0,
        activation_checkpointing=False,
    )
    snapshots = _Snapshots()
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[snapshots],
    )
    snapshots.trainer = trainer
    trainer.train()
    # The reward function's connections live on TRL's reward loop: close them there.
    asyncio.run_coroutine_threadsafe(reward.aclose(), trainer.async_loop).result(timeout=30)

    steps = [s for s in snapshots.steps if "rewards/proctor/mean" in s["logs"]]
    assert len(steps) == 2
    seen_finishes: set[str] = set()
    seen_rewards: set[float | None] = set()
    with ProctorClient(server.url) as direct:
        for step in steps:
            assert len(step["completions"]) == 8
            items = []
            for prompt, completion in zip(step["prompts"], step["completions"], strict=True):
                # Word-level decoding drops the EOS: fewer words than the limit means a stop.
                words = len(completion.split())
                finish = "stop" if words < MAX_COMPLETION else "length"
                seen_finishes.add(finish)
                items.append(
                    ScoreItem(
                        domain="math",
                        response=completion,
                        reference={"answer": answers[prompt]},
                        finish_reason=finish,
                        response_tokens=words + (finish == "stop"),
                        max_response_tokens=MAX_COMPLETION,
                    )
                )
            expected = [r.reward for r in direct.score(items, spec=SPEC)]
            assert all(r is not None for r in expected)
            assert step["rewards"] == expected
            seen_rewards.update(expected)
            assert math.isclose(step["logs"]["rewards/proctor/mean"], sum(expected) / 8)  # type: ignore[arg-type]
            assert 0.0 <= step["logs"]["proctor/parse_rate"] <= 1.0
            assert step["logs"]["proctor/infra_error_frac"] == 0.0
    assert seen_finishes == {"stop", "length"}, "the run should exercise both finishes"
    assert seen_rewards == {0.0, 1.0}, "the run should see right and wrong answers"


def test_finish_reason_from_completion_ids() -> None:
    eos = frozenset({1})
    assert finish_reason([5, 6, 1], 4, eos) == "stop"  # EOS before the limit
    assert finish_reason([5, 6], 4, eos) == "stop"  # a stop string: ended early without EOS
    assert finish_reason([5, 6, 7, 1], 4, eos) == "stop"  # EOS as the very last allowed token
    assert finish_reason([5, 6, 7, 8], 4, eos) == "length"
    assert finish_reason([5, 6, 7, 1], 4, frozenset()) == "length"  # EOS unknown: a cut


def test_conversational_completions_are_judged_on_the_assistant_text() -> None:
    assert completion_text([{"role": "assistant", "content": "so \\boxed{2}"}]) == "so \\boxed{2}"
    parts = [{"type": "text", "text": "so"}, {"type": "image"}, {"type": "text", "text": "42"}]
    assert completion_text([{"role": "assistant", "content": parts}]) == "so\n42"


def test_an_unjudged_item_is_none_not_zero(server: Server) -> None:

    logged: dict[str, list[float]] = {}

    def log_metric(name: str, value: float) -> None:
        logged.setdefault(name, []).append(value)

    live = reward_func(server.url, spec=SPEC)
    conversational = [[{"role": "assistant", "content": "so \\boxed{2}"}], "\\boxed{7}"]

    async def run() -> tuple[list[float | None], list[float | None]]:
        with fault_proxy(server.url, refusals=[Refusal(503)]) as proxy:
            refused = reward_func(proxy.url, max_retries=0)  # the server answers, with a 503
            try:
                unjudged = await refused(
                    prompts=["q"], completions=["\\boxed{2}"], answer=["2"], log_metric=log_metric
                )
                judged = await live(
                    prompts=["q", "q"], completions=conversational, answer=["2", "2"]
                )
                return unjudged, judged
            finally:
                await refused.aclose()
                await live.aclose()

    unjudged, rewards = asyncio.run(run())
    assert unjudged == [None]
    assert logged["proctor/infra_error_frac"] == [1.0]
    assert rewards == [1.0, 0.0]


def test_a_url_nobody_answers_stops_the_reward_function(server: Server) -> None:
    """The SDK's unreachable rule reaches TRL: a wrong URL raises at the first step, while a
    function that has had an answer turns a server gone away into `None` rewards."""
    dead = reward_func(f"http://127.0.0.1:{free_port()}", max_retries=0)

    async def first_call() -> None:
        try:
            await dead(prompts=["q"], completions=["\\boxed{2}"], answer=["2"])
        finally:
            await dead.aclose()

    with pytest.raises(ProctorUnreachable, match="cannot reach Proctor"):
        asyncio.run(first_call())

    async def later_calls() -> list[float | None]:
        with fault_proxy(server.url) as proxy:
            gone = reward_func(proxy.url, max_retries=0)
            assert await gone(prompts=["q"], completions=["\\boxed{2}"], answer=["2"]) == [1.0]
        try:  # the proxy has stopped: nothing listens there any more
            return await gone(prompts=["q"], completions=["\\boxed{2}"], answer=["2"])
        finally:
            await gone.aclose()

    assert asyncio.run(later_calls()) == [None]


def test_what_the_docs_say_trl_does_with_a_none_reward_is_in_trl() -> None:
    # proctor_client.trl's docstring and clients/README state TRL 1.16's handling of a `None`
    # reward: NaN, `nansum` across functions, and, when every function gave None, a sample left
    # out of its group's mean and std with advantage 0. The installed TRL must still do that.
    import inspect

    from trl.trainer import grpo_trainer

    from proctor_client import trl as proctor_trl

    source = inspect.getsource(grpo_trainer.GRPOTrainer)
    for step in (
        "reward if reward is not None else torch.nan",  # None becomes NaN
        "unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)",
        "rewards[unscorable_mask] = torch.nan",
        "torch.nanmean(rewards.view(-1, num_generations), dim=1)",  # the group's mean
        "nanstd(rewards.view(-1, num_generations), dim=1)",  # and std
        "advantages = torch.nan_to_num(advantages, nan=0.0)",  # advantage 0
    ):
        assert step in source, step
    readme = " ".join((Path(__file__).parent.parent / "clients" / "README.md").read_text().split())
    docstring = " ".join((proctor_trl.__doc__ or "").split())
    for text in (readme, docstring):
        assert "out of its group's mean and std" in text
        assert "advantage 0" in text or "advantage is set to 0" in text
