"""The judge domain: a free-form answer judged by a model behind an OpenAI-compatible endpoint.

`domain` is the scorer, `client` the calls with their cache and limits (`Judges`), `text` the
defences applied to what is sent and read, `endpoint` an endpoint as the server's settings name
it. This package's own namespace holds only the last, so that the settings import no domain.
"""

from reward_specs.judge.endpoint import DEFAULT_CACHE_BYTES, Endpoint

__all__ = ["DEFAULT_CACHE_BYTES", "Endpoint"]
