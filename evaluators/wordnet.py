"""WordNet for NLTK's METEOR, set up offline from the Debian WordNet packages.

METEOR matches synonyms through WordNet. ``nltk.download`` needs the network, so the suite builds
an NLTK data folder from the Debian packages ``wordnet-base`` and ``wordnet-sense-index``
(WordNet 3.0, installed under ``/usr/share/wordnet``):

1. copy every file of ``/usr/share/wordnet`` into ``<nltk_data>/corpora/wordnet`` (NLTK refuses
   files outside its data roots, and refuses symbolic links, so the files are copied);
2. write the ``lexnames`` file that Debian leaves out (the 45 lexicographer files of
   WordNet 3.0, as listed in ``lexnames(5WN)``);
3. register ``<nltk_data>`` as an NLTK data root.

:func:`setup_wordnet` does steps 1-2 (the ``drake setup-metrics`` command calls it) and
:func:`ensure_wordnet` finds the folder and does step 3. When WordNet cannot be found,
:func:`ensure_wordnet` raises :class:`~evaluators.errors.MetricSetupError`: METEOR never falls
back silently to exact-only matching.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from evaluators.errors import MetricSetupError

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

__all__ = [
    "LEXNAMES",
    "DEFAULT_WORDNET_SOURCE",
    "default_nltk_dir",
    "setup_wordnet",
    "find_wordnet",
    "ensure_wordnet",
]

logger = logging.getLogger(__name__)

DEFAULT_WORDNET_SOURCE = Path("/usr/share/wordnet")

#: WordNet 3.0 lexicographer files: (number, name, syntactic category 1=noun 2=verb 3=adj
#: 4=adverb), from the lexnames(5WN) manual page.
LEXNAMES: tuple[tuple[int, str, int], ...] = (
    (0, "adj.all", 3),
    (1, "adj.pert", 3),
    (2, "adv.all", 4),
    (3, "noun.Tops", 1),
    (4, "noun.act", 1),
    (5, "noun.animal", 1),
    (6, "noun.artifact", 1),
    (7, "noun.attribute", 1),
    (8, "noun.body", 1),
    (9, "noun.cognition", 1),
    (10, "noun.communication", 1),
    (11, "noun.event", 1),
    (12, "noun.feeling", 1),
    (13, "noun.food", 1),
    (14, "noun.group", 1),
    (15, "noun.location", 1),
    (16, "noun.motive", 1),
    (17, "noun.object", 1),
    (18, "noun.person", 1),
    (19, "noun.phenomenon", 1),
    (20, "noun.plant", 1),
    (21, "noun.possession", 1),
    (22, "noun.process", 1),
    (23, "noun.quantity", 1),
    (24, "noun.relation", 1),
    (25, "noun.shape", 1),
    (26, "noun.state", 1),
    (27, "noun.substance", 1),
    (28, "noun.time", 1),
    (29, "verb.body", 2),
    (30, "verb.change", 2),
    (31, "verb.cognition", 2),
    (32, "verb.communication", 2),
    (33, "verb.competition", 2),
    (34, "verb.consumption", 2),
    (35, "verb.contact", 2),
    (36, "verb.creation", 2),
    (37, "verb.emotion", 2),
    (38, "verb.motion", 2),
    (39, "verb.perception", 2),
    (40, "verb.possession", 2),
    (41, "verb.social", 2),
    (42, "verb.stative", 2),
    (43, "verb.weather", 2),
    (44, "adj.ppl", 3),
)

# Files the NLTK reader opens when it starts or looks up a word.
_REQUIRED = (
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
)

_INSTALL_HINT = (
    "needs Debian packages wordnet-base and wordnet-sense-index: "
    "apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index"
)


def lexnames_text() -> str:
    """The ``lexnames`` file: one ``NN<TAB>name<TAB>category`` line per lexicographer file."""
    return "".join(f"{num:02d}\t{name}\t{cat}\n" for num, name, cat in LEXNAMES)


def default_nltk_dir() -> Path:
    """The NLTK data folder the suite uses when none is given.

    ``$DRAKE_CACHE/nltk_data`` if ``DRAKE_CACHE`` is set, else
    ``$XDG_CACHE_HOME/drake/nltk_data`` if ``XDG_CACHE_HOME`` is set, else
    ``~/.cache/drake/nltk_data``.
    """
    drake_cache = os.environ.get("DRAKE_CACHE")
    if drake_cache:
        return Path(drake_cache).expanduser() / "nltk_data"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "drake" / "nltk_data"


def setup_wordnet(
    target_dir: Path | None = None, source_dir: Path = DEFAULT_WORDNET_SOURCE
) -> Path:
    """Build an NLTK data folder holding WordNet 3.0 from the Debian WordNet files.

    Copies every regular file of ``source_dir`` (following symbolic links, so the copies are
    plain files) into ``<target_dir>/corpora/wordnet`` and writes the ``lexnames`` file unless
    the source ships one. Running it again refreshes the copy.

    Parameters
    ----------
    target_dir : Path, optional
        The NLTK data folder to create or update; default :func:`default_nltk_dir`.
    source_dir : Path
        Folder with the WordNet database files (``data.noun``, ``index.noun``, ...);
        default ``/usr/share/wordnet`` (Debian packages ``wordnet-base`` and
        ``wordnet-sense-index``).

    Returns
    -------
    Path
        ``target_dir``: the folder to put in ``NLTK_DATA`` (not needed for the default folder,
        which :func:`ensure_wordnet` searches anyway).

    Raises
    ------
    MetricSetupError
        If ``source_dir`` lacks the WordNet database files, or the copy fails.

    Examples
    --------
    >>> setup_wordnet(tmp_path / "nltk_data")  # doctest: +SKIP
    PosixPath('/tmp/.../nltk_data')
    """
    target = Path(target_dir).expanduser() if target_dir is not None else default_nltk_dir()
    source = Path(source_dir).expanduser()
    missing = [f for f in _REQUIRED if not (source / f).is_file()]
    if missing:
        raise MetricSetupError(
            f"WordNet files not found in {source} (missing {', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}); {_INSTALL_HINT}, or pass --source-dir"
        )
    dest = target / "corpora" / "wordnet"
    try:
        dest.mkdir(parents=True, exist_ok=True)
        copied = 0
        for src in sorted(source.iterdir()):
            if not src.is_file():
                continue
            out = dest / src.name
            if out.is_symlink():
                out.unlink()
            shutil.copyfile(src, out)
            copied += 1
        if not (source / "lexnames").is_file():
            lex = dest / "lexnames"
            if lex.is_symlink():
                lex.unlink()
            lex.write_text(lexnames_text(), encoding="utf-8")
    except OSError as exc:
        raise MetricSetupError(f"could not write WordNet into {dest}: {exc}") from exc
    logger.info("WordNet: copied %d files from %s into %s", copied, source, dest)
    return target


def _candidate_roots() -> list[Path]:
    import nltk.data

    roots: list[Path] = []
    env = os.environ.get("NLTK_DATA", "")
    roots.extend(Path(p).expanduser() for p in env.split(os.pathsep) if p)
    for p in nltk.data.path:
        raw = getattr(p, "path", p)
        roots.append(Path(str(raw)).expanduser())
    roots.append(default_nltk_dir())
    seen: set[Path] = set()
    unique = []
    for r in roots:
        if r not in seen:
            seen.add(r)
            unique.append(r)
    return unique


def _has_wordnet(root: Path) -> bool:
    folder = root / "corpora" / "wordnet"
    if folder.is_dir():
        return (folder / "lexnames").is_file() and all((folder / f).is_file() for f in _REQUIRED)
    return (root / "corpora" / "wordnet.zip").is_file()


def find_wordnet() -> Path | None:
    """The first NLTK data root holding WordNet, or ``None``.

    Searched in order: the folders in ``NLTK_DATA``, ``nltk.data.path``, then
    :func:`default_nltk_dir`. A root qualifies with ``corpora/wordnet/`` holding the database
    files and ``lexnames``, or with ``corpora/wordnet.zip`` (as ``nltk.download`` leaves it).
    """
    for root in _candidate_roots():
        if _has_wordnet(root):
            return root
    return None


@functools.lru_cache(maxsize=4)
def _load_wordnet(root: str) -> WordNetCorpusReader:
    """Open (once per process and root) the WordNet reader under an NLTK data root."""
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    # NLTK only opens files below its registered data roots.
    if root not in nltk.data.path:
        nltk.data.path.append(root)
    try:
        pointer = nltk.data.find("corpora/wordnet", paths=[root])
        with warnings.catch_warnings():
            # The reader warns that multilingual (OMW) lookups are unavailable; METEOR is English.
            warnings.simplefilter("ignore", UserWarning)
            reader = WordNetCorpusReader(pointer, None)
    except (LookupError, OSError, ValueError) as exc:
        raise MetricSetupError(
            f"WordNet under {root} could not be read ({exc}); rebuild it with "
            f"`drake setup-metrics --nltk-dir {root}` ({_INSTALL_HINT})"
        ) from exc
    return reader


def ensure_wordnet() -> WordNetCorpusReader:
    """Find WordNet and return an NLTK WordNet reader for it.

    The folder found by :func:`find_wordnet` is added to ``nltk.data.path`` (NLTK reads files only
    below registered roots); the reader is opened once per process and folder.

    Returns
    -------
    nltk.corpus.reader.wordnet.WordNetCorpusReader
        A reader to pass to ``nltk.translate.meteor_score.meteor_score(..., wordnet=reader)``.

    Raises
    ------
    MetricSetupError
        When no WordNet is found; the message says how to install it.
    """
    root = find_wordnet()
    if root is None:
        roots = _candidate_roots()
        incomplete = [r for r in roots if (r / "corpora" / "wordnet" / "data.noun").is_file()]
        hint = (
            f"; {incomplete[0] / 'corpora' / 'wordnet'} lacks lexnames or database files: "
            f"rebuild it with `drake setup-metrics --nltk-dir {incomplete[0]}`"
            if incomplete
            else ""
        )
        raise MetricSetupError(
            "WordNet not found; run `drake setup-metrics` "
            f"({_INSTALL_HINT}), or set NLTK_DATA to a folder holding corpora/wordnet "
            f"(searched: {', '.join(str(r) for r in roots)}){hint}"
        )
    return _load_wordnet(str(root))
