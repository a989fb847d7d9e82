"""METEOR with WordNet, the WordNet set-up, and the missing-WordNet error."""

from __future__ import annotations

import re
from pathlib import Path

import nltk.data
import pytest
from nltk.translate.meteor_score import meteor_score

from evaluators import (
    MetricInputError,
    MetricSetupError,
    default_nltk_dir,
    ensure_wordnet,
    find_wordnet,
    meteor,
    setup_wordnet,
)
from evaluators.wordnet import LEXNAMES, lexnames_text

# The example in the docstring of nltk.translate.meteor_score.meteor_score (0.6944).
NLTK_HYP = (
    "It is a guide to action which ensures that the military always obeys the commands of the party"
)
NLTK_REFS = [
    "It is a guide to action that ensures that the military will forever heed Party commands",
    "It is the guiding principle which guarantees the military forces always being under the "
    "command of the Party",
    "It is the practical guide for the army always to heed the directions of the party",
]


class _NoSynonyms:
    """A WordNet stand-in without synsets: METEOR with exact and stem matches only."""

    def synsets(self, *args, **kwargs):
        return []


def test_meteor_reproduces_nltk_documentation_example(with_wordnet):
    value = meteor([NLTK_HYP], [NLTK_REFS])
    assert round(value / 100, 4) == 0.6944
    assert value == pytest.approx(69.4444, abs=1e-4)


def test_meteor_matches_nltk_direct_call(with_wordnet, predictions, references, reference_lists):
    wn = ensure_wordnet()
    direct = [
        meteor_score([r.split() for r in refs], pred.split(), wordnet=wn)
        for pred, refs in zip(predictions, reference_lists)
    ]
    assert meteor(predictions, references) == pytest.approx(
        100 * sum(direct) / len(direct), abs=1e-6
    )


def test_synonyms_score_higher_than_exact_only(with_wordnet):
    hyp, ref = "the kid is glad", "the child is happy"
    exact_only = 100 * meteor_score([ref.split()], hyp.split(), wordnet=_NoSynonyms())
    with_synonyms = meteor([hyp], [ref])
    assert with_synonyms > exact_only + 10


def test_meteor_hand_computed_with_empty_prediction(with_wordnet):
    # identical "a cat": F-mean 1, one chunk over two matches -> penalty 0.5 * (1/2)^3
    # an empty prediction scores 0; mean (0.9375 + 0) / 2
    assert meteor(["", "a cat"], ["a cat", "a cat"]) == pytest.approx(46.875, abs=1e-6)


def test_meteor_bad_input(with_wordnet):
    with pytest.raises(MetricInputError, match="length mismatch"):
        meteor(["a"], ["a", "b"])
    with pytest.raises(MetricInputError, match=r"predictions\[0\] is None"):
        meteor([None], ["a"])
    with pytest.raises(MetricInputError, match="empty"):
        meteor([], [])


def _no_wordnet_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])


def test_missing_wordnet_raises_with_install_hint(monkeypatch, tmp_path):
    _no_wordnet_anywhere(monkeypatch, tmp_path)
    assert find_wordnet() is None
    with pytest.raises(MetricSetupError) as info:
        meteor(["a cat"], ["a cat"])
    message = str(info.value)
    assert message.startswith("WordNet not found; run `drake setup-metrics`")
    assert "wordnet-base" in message and "wordnet-sense-index" in message
    assert "apt-get install" in message


def _fake_source(tmp_path: Path) -> Path:
    source = tmp_path / "wordnet-src"
    source.mkdir()
    for name in (
        "data.noun",
        "data.verb",
        "data.adj",
        "data.adv",
        "index.noun",
        "index.verb",
        "index.adj",
        "index.adv",
        "noun.exc",
        "verb.exc",
        "adj.exc",
        "adv.exc",
        "index.sense",
    ):
        (source / name).write_text(f"content of {name}\n")
    return source


def test_setup_wordnet_copies_plain_files_and_writes_lexnames(tmp_path):
    source = _fake_source(tmp_path)
    (source / "sentidx.vrb").symlink_to(source / "data.verb")
    target = tmp_path / "nltk_data"
    root = setup_wordnet(target, source)
    assert root == target
    folder = target / "corpora" / "wordnet"
    copied = sorted(p.name for p in folder.iterdir())
    assert "index.sense" in copied and "lexnames" in copied
    assert not any(p.is_symlink() for p in folder.iterdir())
    assert (folder / "sentidx.vrb").read_text() == "content of data.verb\n"
    lines = (folder / "lexnames").read_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[29] == "29\tverb.body\t2"
    assert lines[44] == "44\tadj.ppl\t3"
    assert all(re.fullmatch(r"\d\d\t[a-z]+\.[A-Za-z]+\t[1-4]", line) for line in lines)
    assert [n for n, _, _ in LEXNAMES] == list(range(45))
    # running again refreshes, also over a symlink left in the target
    (folder / "data.noun").unlink()
    (folder / "data.noun").symlink_to(source / "data.adj")
    setup_wordnet(target, source)
    assert not (folder / "data.noun").is_symlink()
    assert (folder / "data.noun").read_text() == "content of data.noun\n"
    assert (folder / "lexnames").read_text() == lexnames_text()


def test_setup_wordnet_reports_missing_source(tmp_path):
    with pytest.raises(MetricSetupError, match="apt-get install .*wordnet-base"):
        setup_wordnet(tmp_path / "out", tmp_path / "nowhere")


def test_default_dir_respects_drake_cache_and_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "dc"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_nltk_dir() == tmp_path / "dc" / "nltk_data"
    monkeypatch.delenv("DRAKE_CACHE")
    assert default_nltk_dir() == tmp_path / "xdg" / "drake" / "nltk_data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_nltk_dir() == Path.home() / ".cache" / "drake" / "nltk_data"


def test_wordnet_found_in_default_dir_without_nltk_data(wordnet_root, monkeypatch, tmp_path):
    _no_wordnet_anywhere(monkeypatch, tmp_path)
    monkeypatch.setenv("DRAKE_CACHE", str(wordnet_root.parent))
    assert find_wordnet() == wordnet_root
    reader = ensure_wordnet()
    assert reader.get_version() == "3.0"
    assert "kid" in {lemma.name() for s in reader.synsets("child") for lemma in s.lemmas()}


def test_wordnet_found_through_nltk_data(with_wordnet, monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "cache"))
    assert find_wordnet() == with_wordnet
    assert ensure_wordnet() is ensure_wordnet()  # opened once per process and folder


def test_setup_wordnet_defaults_to_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAKE_CACHE", str(tmp_path / "cache"))
    root = setup_wordnet(None, _fake_source(tmp_path))
    assert root == tmp_path / "cache" / "nltk_data"
    assert (root / "corpora" / "wordnet" / "lexnames").is_file()


def test_incomplete_wordnet_folder_is_named(monkeypatch, tmp_path):
    _no_wordnet_anywhere(monkeypatch, tmp_path)
    root = setup_wordnet(tmp_path / "nd", _fake_source(tmp_path))
    (root / "corpora" / "wordnet" / "lexnames").unlink()
    monkeypatch.setenv("NLTK_DATA", str(root))
    with pytest.raises(MetricSetupError, match="lacks lexnames") as info:
        ensure_wordnet()
    assert f"--nltk-dir {root}" in str(info.value)
