"""`proctor-eval sample` with a tiny Llama and a word-level tokenizer built in code (no hub):
rows carry their decoding settings, sampling is reproducible from its seed, and the file goes
straight into `proctor-eval`. Llama, not Qwen2: transformers reloads any `qwen2` checkpoint's
tokenizer as Qwen2's byte-level BPE, which loses these words (the prompts came out as one
token); the model keeps a Qwen-style generation config of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor_client.evaluation.cli import main
from proctor_client.evaluation.rows import Generation

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["<pad>", "<eos>", "<unk>", "\\boxed{1}", "\\boxed{2}", "so", "is", "1", "2", "plus"]
MAX_NEW = 5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab = {w: i for i, w in enumerate(WORDS)}
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="<unk>"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=words, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
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
    path = tmp_path_factory.mktemp("tiny-llama")
    model = transformers.LlamaForCausalLM(config)
    # a generation config of its own, as Qwen checkpoints ship one: top_k 20, penalty 1.05
    model.generation_config = transformers.GenerationConfig(
        do_sample=True, top_k=20, repetition_penalty=1.05, temperature=0.7, top_p=0.8
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _prompts(path: Path) -> Path:
    lines = [
        {"prompt_id": f"p{a}", "prompt": f"{a} plus 1 is", "domain": "math",
         "reference": {"answer": str(a + 1)}}
        for a in (0, 1)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _sample(checkpoint: Path, prompts: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    args = ["sample", "--model", str(checkpoint), "--prompts", str(prompts), "--n", "6"]
    args += ["--output", str(out), "--max-new-tokens", str(MAX_NEW), "--model-name", "tiny"]
    assert main([*args, *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_rows_record_their_decoding_and_are_reproducible(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prompts = _prompts(tmp_path / "prompts.jsonl")
    rows = _sample(checkpoint, prompts, tmp_path / "a.jsonl", "--seed-label", "run-1")
    assert len(rows) == 12
    assert sorted((r["prompt_id"], r["sample"]) for r in rows) == [
        (p, s) for p in ("p0", "p1") for s in range(6)
    ]
    for row in rows:
        Generation.model_validate(row)  # the evaluator accepts every row as it is
        assert row["model"] == "tiny" and row["seed"] == "run-1"
        decoding = row["decoding"]["requested"]
        assert (decoding["temperature"], decoding["top_p"]) == (0.6, 0.95)  # the protocol's
        assert decoding["max_new_tokens"] == MAX_NEW and decoding["rng_seed"] == 0
        assert decoding["top_k"] is None and decoding["repetition_penalty"] is None
        assert row["prompt"].endswith("plus 1 is")
        assert row["prompt_tokens"] == 4  # the words survive the checkpoint's round trip
        assert row["max_response_tokens"] == MAX_NEW
        if row["finish_reason"] == "length":
            assert row["response_tokens"] == MAX_NEW
        else:
            assert row["finish_reason"] == "stop" and row["response_tokens"] < MAX_NEW
    assert len({r["response"] for r in rows}) > 1  # sampled, not greedy
    # every row names its run (one per process), the device and the wall time so far
    stamps = [r["sampling"] for r in rows]
    assert len({st["run"] for st in stamps}) == 1
    assert all(st["device"] == "cpu" and st["devices"] == 1 for st in stamps)
    elapsed = [st["elapsed_s"] for st in stamps]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 0
    assert all("training_gpu_hours" not in r for r in rows)
    again = _sample(
        checkpoint, prompts, tmp_path / "b.jsonl", "--seed-label", "run-1",
        "--training-gpu-hours", "12.5", "--device", "H100",
    )  # fmt: skip
    assert again[0]["sampling"]["run"] != stamps[0]["run"]
    assert all(r["training_gpu_hours"] == 12.5 and r["sampling"]["device"] == "H100" for r in again)
    unstamped = [{k: v for k, v in r.items() if k not in ("sampling", "training_gpu_hours")}
                 for r in again]  # fmt: skip
    assert unstamped == [{k: v for k, v in r.items() if k != "sampling"} for r in rows]
    other = _sample(checkpoint, prompts, tmp_path / "c.jsonl", "--rng-seed", "1")
    assert [r["response"] for r in other] != [r["response"] for r in rows]
    assert other[0]["decoding"]["requested"]["rng_seed"] == 1


def test_no_top_k_or_penalty_unless_given_and_the_rows_record_the_models_own(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    built: list[tuple[str, Any]] = []
    for cls in (
        transformers.TopKLogitsWarper,
        transformers.RepetitionPenaltyLogitsProcessor,
        transformers.TopPLogitsWarper,
        transformers.TemperatureLogitsWarper,
    ):
        original = cls.__init__

        def spy(self: Any, *args: Any, _o: Any = original, _c: Any = cls, **kw: Any) -> None:
            _o(self, *args, **kw)
            built.append((_c.__name__, self))

        monkeypatch.setattr(cls, "__init__", spy)
    prompts = _prompts(tmp_path / "prompts.jsonl")
    rows = _sample(checkpoint, prompts, tmp_path / "a.jsonl")
    names = {name for name, _ in built}
    assert "TopKLogitsWarper" not in names and "RepetitionPenaltyLogitsProcessor" not in names
    assert {"TopPLogitsWarper", "TemperatureLogitsWarper"} <= names
    temperature = next(w for n, w in built if n == "TemperatureLogitsWarper")
    assert temperature.temperature == 0.6  # ours, not the model's 0.7
    effective = rows[0]["decoding"]["effective"]
    assert effective["top_k"] == 0 and effective["repetition_penalty"] == 1.0
    assert (effective["temperature"], effective["top_p"]) == (0.6, 0.95)
    own = effective["generation_config"]
    assert own["top_k"] == 20 and own["repetition_penalty"] == 1.05  # recorded, not applied
    built.clear()
    given = _sample(
        checkpoint, prompts, tmp_path / "b.jsonl", "--top-k", "3", "--repetition-penalty", "1.2"
    )
    top_k = [w for n, w in built if n == "TopKLogitsWarper"]
    assert top_k and top_k[0].top_k == 3
    assert [w.penalty for n, w in built if n == "RepetitionPenaltyLogitsProcessor"] == [1.2]
    assert given[0]["decoding"]["requested"]["top_k"] == 3


def test_sampled_file_goes_through_the_evaluator(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    generations = tmp_path / "g.jsonl"
    _sample(checkpoint, _prompts(tmp_path / "prompts.jsonl"), generations, "--temperature", "1.5")
    out = tmp_path / "out"
    assert main([str(generations), "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    report = json.loads((out / "report.json").read_text())
    model = report["models"]["tiny"]
    assert model["samples"] == 12 and model["prompts"] == 2
    assert model["decoding"][0]["requested"]["temperature"] == 1.5
    assert list(model["pass_at_k"]) == ["1", "2", "4", "6"]


def test_a_rerun_resumes_a_file_cut_short(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prompts = _prompts(tmp_path / "prompts.jsonl")
    out = tmp_path / "a.jsonl"
    assert len(_sample(checkpoint, prompts, out)) == 12
    lines = out.read_text().splitlines(keepends=True)
    kept = "".join(lines[:7])  # all of p0, one sample of p1
    out.write_text(kept + lines[7][:10])  # and a line cut off by a crash
    rows = _sample(checkpoint, prompts, out)
    assert out.read_text().startswith(kept)
    keys = [(r["prompt_id"], r["sample"]) for r in rows]
    assert sorted(keys) == [(p, s) for p in ("p0", "p1") for s in range(6)]
    assert _sample(checkpoint, prompts, out) == rows  # complete: nothing is added
