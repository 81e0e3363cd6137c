"""`proctor-eval contamination`: normalisation, n-gram matching across documents, blocks and
formats, streaming in bounded memory, and the report's pass@k without the flagged prompts."""

from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from proctor_client.evaluation.cli import main
from proctor_client.evaluation.contamination import (
    PUNCTUATION_PLANES,
    PromptText,
    flagged_ids,
    normalise,
    scan,
    tokens,
)
from proctor_client.evaluation.estimators import pass_at_k
from tests.eval_synthetic import rows_with_counts, two_models, write_jsonl

WORDS = [f"w{i}" for i in range(40)]
"""A prompt of 40 distinct tokens: any 13 consecutive ones are a unique 13-gram."""


def _prompt(prompt_id: str, words: list[str], answer: str | None = None) -> PromptText:
    return PromptText(prompt_id, " ".join(words), answer)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hello, World!", "hello world"),  # ASCII punctuation goes, case folds
        ("“Quoted” — dash… ¿qué?", "quoted  dash qué"),  # Unicode punctuation (P*) goes too
        ("don't", "dont"),  # removed, not replaced by a space
        ("x + y = 3 $", "x + y = 3 $"),  # symbols (S*) are not punctuation: kept
    ],
)
def test_normalisation(text: str, expected: str) -> None:
    assert normalise(text) == expected
    assert tokens(text) == expected.split()


def test_no_punctuation_outside_the_searched_planes() -> None:
    assert not [
        code
        for code in range(PUNCTUATION_PLANES, sys.maxunicode + 1)
        if unicodedata.category(chr(code)).startswith("P")
    ]
    assert normalise("\U00010100\U0001039f x") == " x"  # Aegean and Ugaritic marks (plane 1)


def test_a_prompt_is_flagged_by_one_shared_ngram_and_its_spans_are_reported(
    tmp_path: Path,
) -> None:
    shown = " ".join(w.upper() + "," for w in WORDS[5:18])  # 13 tokens, other case, punctuated
    corpus = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"text": "nothing to see here"},
            {"text": f"before {shown} after"},
            {"text": " ".join(WORDS[20:32])},  # only 12 tokens in a row: not a 13-gram
        ],
    )
    result = scan([_prompt("p", WORDS), _prompt("q", ["other"] * 20)], [corpus])
    assert [f.prompt_id for f in result.flagged] == ["p"]
    assert result.flagged[0].spans == {"prompt": [" ".join(WORDS[5:18])]}
    assert result.flagged[0].first_seen == f"{corpus}:2"


def test_overlapping_matches_merge_into_one_span_and_the_answer_counts(tmp_path: Path) -> None:
    answer = " ".join(f"a{i}" for i in range(14))
    corpus = tmp_path / "c.txt"
    corpus.write_text(" ".join(WORDS[0:15]) + "\n" + " ".join(WORDS[30:40]) + "\n" + answer)
    result = scan([_prompt("p", WORDS, answer), _prompt("r", ["x"] * 3, answer)], [corpus], 13)
    spans = {f.prompt_id: f.spans for f in result.flagged}
    # prompt: the 13-grams at 0, 1 and 2 merge into tokens 0-14; w30..w39 (10 tokens) runs on
    # into the answer's tokens on the next line, which forms no n-gram of the prompt's own
    assert spans["p"] == {"prompt": [" ".join(WORDS[0:15])], "answer": [answer]}
    assert spans["r"] == {"answer": [answer]}


def test_plain_text_ngrams_span_lines_and_blocks(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    filler = " ".join(f"f{i}" for i in range(500))
    corpus.write_text(filler + "\n" + "\n".join(WORDS[10:23]) + "\n" + filler)
    for block in (7, 64, 1 << 20):  # blocks far smaller than the n-gram's text, and one
        result = scan([_prompt("p", WORDS)], [corpus], block=block)
        assert [f.prompt_id for f in result.flagged] == ["p"], block
        assert result.tokens_read == 1013


def test_jsonl_documents_do_not_run_into_each_other(tmp_path: Path) -> None:
    corpus = write_jsonl(
        tmp_path / "c.jsonl", [{"text": " ".join(WORDS[:7])}, {"text": " ".join(WORDS[7:14])}]
    )
    assert scan([_prompt("p", WORDS)], [corpus]).flagged == []


def test_gzip_and_the_field_option(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"content": " ".join(WORDS[:13])}) + "\n")
    assert [f.prompt_id for f in scan([_prompt("p", WORDS)], [corpus], key="content").flagged]
    with pytest.raises(ValueError, match="no text field 'text'"):
        scan([_prompt("p", WORDS)], [corpus])


def test_parquet_is_read_when_pyarrow_is_importable(tmp_path: Path) -> None:
    corpus = tmp_path / "c.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        corpus.write_bytes(b"PAR1")
        with pytest.raises(ValueError, match="needs pyarrow"):
            scan([_prompt("p", WORDS)], [corpus])
        return
    texts = ["unrelated", None, " ".join(WORDS[20:33])]
    pq.write_table(pa.table({"text": texts}), corpus)
    result = scan([_prompt("p", WORDS)], [corpus])
    assert [(f.prompt_id, f.first_seen) for f in result.flagged] == [("p", f"{corpus}#row3")]


def test_memory_stays_bounded_by_the_block_not_the_corpus(tmp_path: Path) -> None:
    """12 MB of corpus read in 64 KiB blocks: the scan's peak allocation stays near a block's
    tokens, far below the corpus (which is never held whole)."""
    corpus = tmp_path / "big.txt"
    line = " ".join(f"t{i}" for i in range(1000)) + "\n"  # 5,890 bytes
    with corpus.open("w") as handle:
        for _ in range(12_000_000 // len(line)):
            handle.write(line)
        handle.write(" ".join(WORDS[3:16]) + "\n")
    tracemalloc.start()
    try:
        result = scan([_prompt("p", WORDS)], [corpus], block=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [f.prompt_id for f in result.flagged] == ["p"]
    assert peak < 3_000_000, peak


def _prompts_file(path: Path, rows: list[dict[str, Any]]) -> Path:
    return write_jsonl(path, rows)


def test_cli_writes_the_result_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = _prompts_file(
        tmp_path / "prompts.jsonl",
        [
            {"prompt_id": "a", "prompt": [{"role": "user", "content": " ".join(WORDS)}]},
            {"prompt_id": "b", "prompt": "short", "reference": {"answer": " ".join(WORDS)}},
            {"prompt_id": "c", "prompt": "nothing shared here"},
        ],
    )
    corpus = tmp_path / "c.txt"
    corpus.write_text("... " + " ".join(WORDS[:5]) + " ...")
    out = tmp_path / "contamination.json"
    args = ["contamination", str(prompts), "--corpus", str(corpus), "--out", str(out)]
    assert main([*args, "--n", "5"]) == 0
    assert flagged_ids(out) == {"a", "b"}
    data = json.loads(out.read_text())
    assert data["n"] == 5 and data["prompts"] == 3
    assert main(args) == 0  # n = 13: five shared tokens are not enough
    assert flagged_ids(out) == set()
    assert main([*args, "--n", "0"]) == 2
    assert main(["contamination", str(corpus), "--corpus", str(corpus)]) == 2
    assert "needs prompt_id and prompt" in capsys.readouterr().err


def test_report_gives_pass_at_k_without_the_flagged_prompts_beside_the_full(
    tmp_path: Path,
) -> None:
    counts = two_models()
    rows = rows_with_counts(counts)
    for row in rows:
        row["prompt"] = f"question {row['prompt_id']} " + " ".join(WORDS)
    generations = write_jsonl(tmp_path / "generations.jsonl", rows)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("leaked: question m-3 " + " ".join(WORDS[:11]) + "\nand s-1 too\n")
    exclude = tmp_path / "contamination.json"
    assert (
        main(["contamination", str(generations), "--corpus", str(corpus), "--out", str(exclude)])
        == 0
    )
    assert flagged_ids(exclude) == {"m-3"}
    out = tmp_path / "out"
    assert (
        main(
            [
                str(generations),
                "--out",
                str(out),
                "--exclude",
                str(exclude),
                "--no-progress",
                "--workers",
                "2",
                "--bootstrap",
                "300",
            ]
        )
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    section = report["contamination"]
    assert section["flagged"] == ["m-3"]
    for name, prompts in counts.items():
        model = section["models"][name]
        assert model["flagged_prompts"] == 1 and model["prompts_left"] == len(prompts) - 1
        full = list(prompts.values())
        clean = [c for p, c in prompts.items() if p != "m-3"]
        for k, entry in model["pass_at_k_clean"].items():
            assert entry["estimate"] == pytest.approx(pass_at_k(16, clean, int(k)).mean())
            assert model["pass_at_k"][k]["estimate"] == pytest.approx(
                pass_at_k(16, full, int(k)).mean()
            )
            assert entry["ci"][0] <= entry["estimate"] <= entry["ci"][1]
    markdown = (out / "report.md").read_text()
    assert "## pass@k without contaminated prompts" in markdown
    assert "sharpened (clean, 27 prompts)" in markdown
