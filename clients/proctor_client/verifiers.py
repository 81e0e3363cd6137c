"""Proctor as a reward of a Prime Intellect verifiers 0.4 (v1) task: the `ProctorTask` mixin.

    import verifiers.v1 as vf
    from proctor_client.verifiers import ProctorTask

    class MathData(vf.TaskData):
        answer: str

    class MathTask(ProctorTask, vf.Task[MathData]):
        proctor_url = "http://proctor:8000"   # or PROCTOR_URL
        proctor_domain = "math"

The mixin's `@vf.reward` method `proctor` judges the trace's last reply against the task's
reference: its data's `reference` field (an object), else its `answer` (a gold answer); its
domain is the data's `domain` field, else `proctor_domain`. It records Proctor's `score`,
`success` and `parsed` with `trace.record_metric`, and passes the last model call's finish reason,
output tokens and `max_tokens`, so termination penalties apply as the spec says. The calls of one
event loop that arrive together go to Proctor as one request.

A sample Proctor did not judge is sent again `infra_retries` times, then the reward raises
`UnjudgedSample`: verifiers fails the rollout (`trace.ok` false, the scoring error in
`trace.errors`) and leaves the `proctor` reward unset (`None`), never a 0. verifiers'
`trace.reward` sums only the rewards that are set, so it reads 0 on such a trace: read it where
`trace.ok` holds, as verifiers' own summaries do.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import verifiers.v1 as vf

from proctor_client._judged import UnjudgedSample, coalescer, judged
from proctor_client._models import ScoreItem
from proctor_client._rows import as_reference

__all__ = ["ProctorTask", "UnjudgedSample"]


class ProctorTask:
    """Mixin for a `vf.Task`: put it first among the bases."""

    proctor_url: ClassVar[str | None] = None
    proctor_api_key: ClassVar[str | None] = None
    proctor_spec: ClassVar[str | None] = None
    proctor_domain: ClassVar[str] = "math"
    infra_retries: ClassVar[int] = 2
    data: Any

    def proctor_item(self, trace: Any) -> ScoreItem:
        """The item to judge: the last reply, this task's domain and reference, and the last
        model call's finish reason and lengths where verifiers recorded them."""
        reference = getattr(self.data, "reference", None)
        if reference is None:
            reference = getattr(self.data, "answer", None)
        call = next((c for c in reversed(trace.calls) if c.error is None), None)
        finish = call.finish_reason if call is not None else None
        return ScoreItem(
            domain=getattr(self.data, "domain", None) or self.proctor_domain,
            response=trace.last_reply,
            reference=as_reference(reference),
            finish_reason=finish if finish in ("stop", "length") else None,
            response_tokens=call.usage.completion_tokens if call and call.usage else None,
            max_response_tokens=call.sampling.max_tokens if call and call.sampling else None,
        )

    @vf.reward  # type: ignore[untyped-decorator]  # verifiers ships no type information
    async def proctor(self, trace: Any) -> float:
        url = self.proctor_url or os.environ.get("PROCTOR_URL")
        if not url:
            raise ValueError("no Proctor URL: set proctor_url or PROCTOR_URL")
        api_key = self.proctor_api_key or os.environ.get("PROCTOR_API_KEY")
        item = self.proctor_item(trace)
        batcher = coalescer(url, api_key, self.proctor_spec, 0.02, 600.0)
        what = f"a {item.domain} sample of task {type(self).__name__}"
        result, reward = await judged(batcher, item, self.infra_retries, what, "verifiers")
        trace.record_metric("score", result.score if result.score is not None else reward)
        trace.record_metric("success", float(bool(result.success)))
        trace.record_metric("parsed", float(bool(result.parsed)))
        return reward
