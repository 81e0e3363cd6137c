"""`proctor-eval`: score a generations file and report its pass@k study.

    proctor-eval GENERATIONS.jsonl --out DIR [--spec NAME] [--url URL] [--k 1,2,4,...] ...
        [--review-size N --review-seed S] [--review-labels FILE] [--review-judge SPEC]
    proctor-eval sample --model PATH --prompts PROMPTS.jsonl --n 64 --output GENERATIONS.jsonl
    proctor-eval contamination PROMPTS.jsonl --corpus FILES... [--n 13] [--out FILE]

Every row is validated before anything is scored; scored rows go to DIR/scored.jsonl and are
reused by the next run under the same spec hash; DIR/report.md, DIR/report.json and the figures
are rewritten on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
from tqdm import tqdm

from proctor_client import ProctorError
from proctor_client.evaluation import review, review_judge
from proctor_client.evaluation.analysis import Options, Study, analyse, build_table, succeeded
from proctor_client.evaluation.contamination import flagged_ids
from proctor_client.evaluation.contamination import main as contamination_main
from proctor_client.evaluation.plots import draw_all
from proctor_client.evaluation.report import (
    Decontaminated,
    JudgeReview,
    Verified,
    build_json,
    write_json,
)
from proctor_client.evaluation.report_markdown import write_markdown
from proctor_client.evaluation.rows import Generation, StudyError, check_consistency
from proctor_client.evaluation.rows import read_generations as read_rows
from proctor_client.evaluation.scoring import DEFAULT_SPEC, Result, RowScorer
from proctor_client.evaluation.store import (
    SCORED_FILE,
    ScoredRow,
    load_reusable,
    split_reuse,
    write_scored,
)
from proctor_client.evaluation.study import study_from_scored

__all__ = ["main"]

LOCAL_INSTALL = 'pip install . "./clients[eval]"'
"""How in-process scoring is installed, run from the checkout's root: the server package is on no
index, so it comes from the checkout beside the evaluator (clients/README, tested as written)."""

BATCH = 4096
"""Rows handed to the scorer at a time (the progress bar moves within a batch)."""


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--k takes integers like 1,2,4,8: {exc}") from exc
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("--k needs positive integers")
    return ks


def _pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition(",")
    if not sep or not a or not b:
        raise argparse.ArgumentTypeError("--pair takes MODEL_A,MODEL_B")
    return a, b


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="proctor-eval", description=__doc__.split("\n\n")[0])
    p.add_argument("generations", type=Path, help="GENERATIONS.jsonl, one sampled response a line")
    p.add_argument("--out", type=Path, required=True, help="directory for scores, report, plots")
    p.add_argument("--spec", default=None, help=f"reward spec name (default {DEFAULT_SPEC})")
    p.add_argument("--spec-dir", type=Path, action="append", default=[], help="extra specs")
    p.add_argument("--url", default=None, help="score against this Proctor service instead")
    p.add_argument(
        "--api-key",
        default=os.environ.get("PROCTOR_API_KEY") or None,
        help="bearer token for --url (default: PROCTOR_API_KEY)",
    )
    p.add_argument("--workers", type=int, default=None, help="scoring processes (default: cores)")
    p.add_argument(
        "--sandbox-backend",
        choices=("local", "docker", "unsafe"),
        default="local",
        help="where in-process scoring runs code answers",
    )
    p.add_argument(
        "--registry",
        default="reward_specs.domains:default_registry",
        help="module:function returning the scorers' Registry (in-process scoring)",
    )
    p.add_argument("--skip-bad", action="store_true", help="report and skip malformed rows")
    p.add_argument("--k", type=_ks, default=None, help="k values (default 1,2,4,... up to n)")
    p.add_argument("--weights", type=Path, default=None, help='JSON {"family": weight, ...}')
    p.add_argument("--two-level", action="store_true", help="bootstrap families, then prompts")
    p.add_argument("--bootstrap", type=int, default=2000, help="resamples (default 2000)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (0.95)")
    p.add_argument("--alpha", type=float, default=0.05, help="zero-success bound level (0.05)")
    p.add_argument(
        "--success-threshold",
        type=float,
        default=None,
        help="success is score >= this (default: the scorer's own success, full success)",
    )
    p.add_argument("--pair", type=_pair, action="append", default=None, help="A,B to compare")
    p.add_argument("--rng-seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--review-size", type=int, default=None, help="successes per model to review")
    p.add_argument("--review-seed", type=int, default=None, help="pre-registered review seed")
    p.add_argument("--review-labels", type=Path, default=None, help="labelled review JSONL")
    p.add_argument(
        "--review-judge",
        default=None,
        metavar="SPEC",
        help="label the registered review sample by this judge spec's review_template",
    )
    p.add_argument(
        "--review-stratify",
        choices=("none", "only-one"),
        default="none",
        help="only-one: draw first from prompts solved only by some models",
    )
    p.add_argument(
        "--exclude",
        type=Path,
        default=None,
        help="contamination.json: pass@k again without its flagged prompts, beside the full",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _scorer(args: argparse.Namespace) -> RowScorer:
    spec = args.spec or DEFAULT_SPEC
    if args.url is not None:
        from proctor_client.evaluation.remote import RemoteScorer  # the SDK's client, only here

        return RemoteScorer(args.url, spec, api_key=args.api_key)
    try:
        from proctor_client.local import LocalScorer  # needs the server package
    except ImportError as exc:
        raise SystemExit(
            f"proctor-eval: in-process scoring needs the proctor server package ({exc}); "
            f"install it from the checkout's root with `{LOCAL_INSTALL}`, "
            "or score against a service with --url"
        ) from exc
    return LocalScorer.with_sandbox(
        spec, args.spec_dir, args.workers, args.sandbox_backend, args.registry
    )


def _score(
    rows: Sequence[Generation], scorer: RowScorer, out: Path, quiet: bool
) -> list[ScoredRow]:
    store = out / SCORED_FILE
    stored, missing = split_reuse(rows, load_reusable(store, scorer.spec.hash))
    if len(missing) < len(rows):
        print(f"proctor-eval: {len(rows) - len(missing)} rows reused from {store}", file=sys.stderr)
    results: list[Result | None] = list(stored)
    with tqdm(total=len(missing), unit="row", disable=quiet, file=sys.stderr) as bar:
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            fresh = scorer.score([rows[i] for i in batch], bar.update)
            for position, result in zip(batch, fresh, strict=True):
                results[position] = result
    scored = [ScoredRow(row, r) for row, r in zip(rows, results, strict=True) if r is not None]
    write_scored(store, scorer.spec, scored)
    return scored


def _verified(
    args: argparse.Namespace, scored: Sequence[ScoredRow], options: Options
) -> tuple[Verified | None, review.Labels | None]:
    if args.review_labels is None:
        return None, None
    labels = review.read_labels(args.review_labels, args.out)
    return _verified_by(labels, scored, options), labels


def _verified_by(labels: review.Labels, scored: Sequence[ScoredRow], options: Options) -> Verified:
    low = analyse(build_table(scored, options.threshold, labels.low), options)
    high = analyse(build_table(scored, options.threshold, labels.high), options)
    labelled: dict[str, tuple[int, int]] = {}
    for key, correct in labels.verdicts.items():
        read, good = labelled.get(key.model, (0, 0))
        labelled[key.model] = (read + 1, good + int(correct))
    return Verified(low, high, labelled, labels.sampled)


def _review_judge(
    args: argparse.Namespace,
    scored: Sequence[ScoredRow],
    options: Options,
    human: review.Labels | None,
) -> JudgeReview | None:
    """The registered sample labelled by the judge spec `--review-judge`, through the service's
    judge path (review_judge.py), beside the human labels where both exist."""
    if args.review_judge is None:
        return None
    judge_scorer = _scorer(argparse.Namespace(**{**vars(args), "spec": args.review_judge}))
    try:
        found = review_judge.label_sample(args.out, judge_scorer, judge_scorer.spec)
    finally:
        judge_scorer.close()
    return JudgeReview(
        found.spec,
        _verified_by(found.labels, scored, options),
        found.unlabelled,
        None if human is None else review_judge.agreement(human, found.labels),
    )


def _export_review(
    args: argparse.Namespace, scored: Sequence[ScoredRow], options: Options, scorer: RowScorer
) -> None:
    if args.review_size is None:
        return
    if args.review_seed is None:
        raise SystemExit("proctor-eval: --review-size needs --review-seed (declare it up front)")
    won = [e.result["status"] == "ok" and succeeded(e.result, options.threshold) for e in scored]
    successes: dict[str, int] = {}
    for entry, w in zip(scored, won, strict=True):
        successes[entry.row.model] = successes.get(entry.row.model, 0) + int(w)
    stratify = args.review_stratify == "only-one"
    drawn = review.draw(scored, args.review_size, args.review_seed, won, stratify)
    path = review.export(
        args.out, drawn, args.review_size, args.review_seed, successes, scorer.spec, stratify
    )
    print(f"proctor-eval: review sample in {path}", file=sys.stderr)


def _decontaminated(
    args: argparse.Namespace, scored: Sequence[ScoredRow], options: Options, spec_name: str
) -> Decontaminated | None:
    if args.exclude is None:
        return None
    flagged = frozenset(flagged_ids(args.exclude))
    left = [e for e in scored if e.row.prompt_id not in flagged]
    study = study_from_scored(left, options, spec_name) if left else None
    if study is not None and not study.models:
        study = None
    return Decontaminated(str(args.exclude), flagged, study)


def _options(args: argparse.Namespace) -> Options:
    weights = None
    if args.weights is not None:
        weights = json.loads(args.weights.read_text(encoding="utf-8"))
        if not isinstance(weights, dict) or not all(
            isinstance(v, int | float) for v in weights.values()
        ):
            raise SystemExit(f'proctor-eval: {args.weights} must hold {{"family": weight, ...}}')
    return Options(
        ks=args.k,
        weights=weights,
        two_level=args.two_level,
        resamples=args.bootstrap,
        confidence=args.confidence,
        alpha=args.alpha,
        threshold=args.success_threshold,
        pairs=args.pair,
        rng_seed=args.rng_seed,
    )


def run(args: argparse.Namespace) -> int:
    try:
        numbered, skipped = read_rows(args.generations, args.skip_bad)
        check_consistency(numbered)
    except (StudyError, OSError) as exc:
        print(f"proctor-eval: {exc}", file=sys.stderr)
        return 2
    for bad in skipped:
        print(f"proctor-eval: skipped {bad.message}", file=sys.stderr)
    if not numbered:
        print("proctor-eval: no rows to evaluate", file=sys.stderr)
        return 2
    options = _options(args)
    try:
        scorer = _scorer(args)
    except (ValueError, ProctorError) as exc:
        print(f"proctor-eval: {exc}", file=sys.stderr)
        return 2
    except httpx.TransportError as exc:  # refused, unresolvable, timed out: one line, not a trace
        print(f"proctor-eval: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        scored = _score([row for _, row in numbered], scorer, args.out, args.no_progress)
        study: Study = study_from_scored(scored, options, scorer.spec.name)
        _export_review(args, scored, options, scorer)
        verified, human = _verified(args, scored, options)
        judged = _review_judge(args, scored, options, human)
        clean = _decontaminated(args, scored, options, scorer.spec.name)
    except (ValueError, review.ReviewError, ProctorError) as exc:
        print(f"proctor-eval: {exc}", file=sys.stderr)
        return 2
    except httpx.TransportError as exc:
        print(f"proctor-eval: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    finally:
        scorer.close()
    if not study.models:
        counts = {m: dict(c) for m, c in study.excluded.items()}
        print(
            f"proctor-eval: no row was judged ({counts}); see the errors in {SCORED_FILE}",
            file=sys.stderr,
        )
        return 1
    figures = draw_all(study, args.out)
    write_json(
        args.out / "report.json", build_json(study, scorer.spec, skipped, verified, clean, judged)
    )
    write_markdown(
        args.out / "report.md", study, scorer.spec, figures, skipped, verified, clean, judged
    )
    for warning in study.warnings:
        print(f"proctor-eval: warning: {warning}", file=sys.stderr)
    print(f"proctor-eval: report in {args.out / 'report.md'}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["sample"]:
        from proctor_client.evaluation.sample import main as sample_main  # torch, only here

        return sample_main(arguments[1:])
    if arguments[:1] == ["contamination"]:
        return contamination_main(arguments[1:])
    return run(_parser().parse_args(arguments))


if __name__ == "__main__":
    sys.exit(main())
