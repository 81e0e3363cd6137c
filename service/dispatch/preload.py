"""The worker pool's fork server warms up here, once, before it forks any worker.

multiprocessing's fork server offers one hook, the modules it imports before forking (its
`preload`), so this module's import is the warm-up: it loads the registry and spec directories
the pool put in `WARM_ENV` (`processes.start_fork_server`, around the server's start) and scores
every process scorer's examples as each worker does (importing the verifier libraries, building
their grammars and language data). Every worker forked afterwards shares that state
copy-on-write; its own warm-up (`worker.warm_up`, which still decides when it is ready) then
finds it done, and it tunes its own heap (`settle_heap`). The registry and specs loaded here
are kept (`worker.keep_loaded`): a worker starts from them instead of reading the files again.

The collector waits during the warm-up: the imports and first parses allocate what stays, so
the collections that would run among them walk ever more objects to free almost none. One
collection at the end, then the warmed objects are frozen (`gc.freeze`), so that no child's
collection, its first one included, walks them again; the thresholds stay as they are for the
other children it forks (puzzle sampling). Only the fork server imports this module; outside
one started that way (no `WARM_ENV`), the import warms nothing.

The fork server ignores SIGTERM, as multiprocessing has it ignore SIGINT, and so do the children
it forks: the service decides when they stop. A SIGTERM sent to the whole process group (a
terminal, systemd's default) would otherwise end them before the service's grace period, and
the pool would read each worker's end as a crash (exit code 255: the fork server that reports
it is gone too). The fork server still exits with the service (its `alive` pipe closes).

The fork server must survive whatever happens here: a registry that fails to load or an example
that raises is logged and left to the workers, which report it as they always have.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
from pathlib import Path

from reward_specs import ScoreContext
from service.core.loading import load_all_specs, load_registry
from service.dispatch.pool_worker import keep_loaded, warm_up
from service.dispatch.processes import WARM_ENV

__all__: list[str] = []

log = logging.getLogger(__name__)


def _warm_from_environment() -> None:
    raw = os.environ.pop(WARM_ENV, None)  # the workers forked from here need not see it
    if raw is None:
        return
    gc.disable()  # the warm-up only allocates what it keeps: one collection at the end will do
    try:
        wanted = json.loads(raw)
        registry = load_registry(wanted["registry"])
        spec_dirs = [Path(d) for d in wanted["spec_dirs"]]
        specs = load_all_specs(registry, spec_dirs)
        warm_up(registry, specs, ScoreContext())
        keep_loaded(wanted["registry"], spec_dirs, registry, specs)
    except Exception:  # the fork server must live on: each worker warms (and fails) itself
        log.exception("the worker pool's fork server could not warm up")
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()


signal.signal(signal.SIGTERM, signal.SIG_IGN)
_warm_from_environment()
