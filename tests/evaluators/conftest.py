"""Shared fixtures: a varied text set and a WordNet folder built from the Debian files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluators import setup_wordnet

WORDNET_SOURCE = Path("/usr/share/wordnet")

# Unicode, an empty prediction, multi-sentence (newline) texts, several references per sample.
PREDICTIONS = [
    "The cat sat on the mat.",
    "",
    "Café naïve résumé — déjà vu at 東京 tower 🚀",
    "A man is riding a horse on the beach.\nThe sun is setting.",
    "two dogs play",
    "the the the the",
    "Numbers like 3.14 and 1,000 appear!",
    "a kid is glad",
]
REFERENCES = [
    "A cat was sitting on the mat.",
    "There is nothing here.",
    ["Cafe naive resume, deja vu at Tokyo tower", "déjà vu in 東京"],
    [
        "A man rides a horse along the beach.\nThe sun sets behind him.",
        "Someone on horseback at the seaside.\nSunset.",
    ],
    ["Two dogs are playing.", "Dogs playing together", "a pair of dogs at play"],
    "the cat",
    "Numbers such as 3.14 and 1000 appear.",
    ["a child is happy"],
]


@pytest.fixture
def predictions() -> list[str]:
    """A varied set of predictions (unicode, empty, multi-sentence)."""
    return list(PREDICTIONS)


@pytest.fixture
def references() -> list[str | list[str]]:
    """References for ``predictions``: one string or several per sample."""
    return [r if isinstance(r, str) else list(r) for r in REFERENCES]


@pytest.fixture
def reference_lists() -> list[list[str]]:
    """``references`` with every sample's references as a list."""
    return [[r] if isinstance(r, str) else list(r) for r in REFERENCES]


@pytest.fixture(scope="session")
def wordnet_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An NLTK data folder with WordNet, built by setup_wordnet from /usr/share/wordnet."""
    if not (WORDNET_SOURCE / "data.noun").is_file():
        msg = "WordNet not installed (Debian wordnet-base); run .ci/setup-wordnet.sh"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    # <cache>/nltk_data, so that DRAKE_CACHE=<cache> makes it the default folder too
    return setup_wordnet(tmp_path_factory.mktemp("drake_cache") / "nltk_data", WORDNET_SOURCE)


@pytest.fixture
def with_wordnet(wordnet_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point NLTK_DATA at the test WordNet folder for one test."""
    monkeypatch.setenv("NLTK_DATA", str(wordnet_root))
    return wordnet_root
