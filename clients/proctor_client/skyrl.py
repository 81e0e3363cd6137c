"""Proctor as a SkyRL-gym 0.4 environment: `ProctorEnv`, registered as `proctor`.

    import proctor_client.skyrl  # registers the environment
    environment.env_class=proctor
    +environment.skyrl_gym.proctor.url=http://proctor:8000   # or PROCTOR_URL

A dataset row names `env_class: proctor`; SkyRL hands the environment the row's fields as
`extras`. The reference is `extras["reward_spec"]["ground_truth"]` (an object, its JSON text, or a
plain gold answer), read as `proctor_client.verl` reads verl's: SkyRL's datasets are verl's, so
`data_source` picks the domain and the dataset's own answer or test format. A row may name its
domain instead (`reward_spec.domain`). The environment's config (`env_config`) takes `url`,
`api_key`, `spec`, `domains`, `default_domain`, `infra_retries`, `max_code_cases`.

One step, one judgement: `step(response)` answers `done` with Proctor's reward, and
`get_metrics()` gives Proctor's score, success and parse for the episode. SkyRL's generator runs
steps in threads; the steps of one process share an event loop of their own, and the ones that
arrive together go to Proctor as one request. SkyRL's `step` gets the response text alone, with
no finish reason or length, so termination penalties do not apply. SkyRL cannot leave a sample
out: a sample Proctor did not judge is sent again `infra_retries` times, then `step` raises
`UnjudgedSample`, never a reward of 0.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register

from proctor_client._judged import UnjudgedSample, coalescer, judged, numbers
from proctor_client._loops import LoopThread
from proctor_client._models import ScoreItem, ScoreResult
from proctor_client.verl import domain_of, reference_of

__all__ = ["ENV_ID", "ProctorEnv", "UnjudgedSample"]

ENV_ID = "proctor"

_loop: LoopThread | None = None
_loop_lock = threading.Lock()


def _shared_loop() -> LoopThread:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = LoopThread("proctor-skyrl")
        return _loop


class ProctorEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl-gym ships no type information
    """A single-turn text environment whose reward is Proctor's judgement of the response."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = env_config if env_config is not None else {}
        extras = extras or {}
        reward_spec = extras.get("reward_spec") or {}
        if "ground_truth" not in reward_spec:
            raise ValueError("ProctorEnv needs extras['reward_spec']['ground_truth']")
        url = config.get("url") or os.environ.get("PROCTOR_URL")
        if not url:
            raise ValueError("no Proctor URL: set the environment's url or PROCTOR_URL")
        self.url: str = url
        self.api_key = config.get("api_key") or os.environ.get("PROCTOR_API_KEY")
        self.spec_name: str | None = config.get("spec")  # `spec` is skyrl-gym's EnvSpec
        self.infra_retries = int(config.get("infra_retries", 2))
        self.data_source = str(extras.get("data_source") or "")
        self.domain: str = reward_spec.get("domain") or domain_of(
            self.data_source, config.get("domains"), config.get("default_domain")
        )
        self.reference = reference_of(
            self.data_source,
            self.domain,
            reward_spec["ground_truth"],
            config.get("max_code_cases"),
        )
        self.result: ScoreResult | None = None

    async def _judge(self, response: str) -> tuple[ScoreResult, float]:
        item = ScoreItem(domain=self.domain, response=response, reference=self.reference)
        batcher = coalescer(self.url, self.api_key, self.spec_name, 0.02, 600.0)
        what = f"a {self.domain} sample of {self.data_source or 'its dataset'!r}"
        return await judged(batcher, item, self.infra_retries, what, "SkyRL")

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        self.result, reward = _shared_loop().run(self._judge(action))
        return BaseTextEnvStepOutput(
            observations=[],
            reward=reward,
            done=True,
            metadata={"proctor": self.result.model_dump(mode="json", exclude_none=True)},
        )

    def get_metrics(self) -> dict[str, Any]:
        return numbers(self.result) if self.result is not None else {}


register(id=ENV_ID, entry_point=ProctorEnv)
