"""The word-level tokenizer of the tiny offline models, built locally from a vocabulary.

drake-synth's prompts and answers use a closed vocabulary (``drake.synth.vocabulary()``), so the
tiny models use one token per word instead of a learned sub-word model. Words follow drake-synth's
own word split: ``<image>``, runs of ASCII letters, runs of digits, and every other non-space
character on its own.

Spaces are kept: a word that follows a space is a distinct token spelled with a leading ``▁``
(``"▁red"`` vs ``"red"``), as in SentencePiece. Every word therefore has two tokens, and decoding
puts back exactly the text that was encoded (``"Choice list:[True, False]."`` round-trips),
which exact-match and token-F1 scoring of generated answers rely on. A word outside the
vocabulary becomes ``<unk>``; encoding never fails.

Special tokens, with fixed ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<image>`` 4.
The vocabulary is sorted, so the same word list always gives the same ids.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

__all__ = ["SPECIAL_TOKENS", "SPACE", "CHAT_WORDS", "build_tokenizer"]

PAD, BOS, EOS, UNK, IMAGE = "<pad>", "<s>", "</s>", "<unk>", "<image>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK, IMAGE)
SPACE = "\u2581"

#: Words of the fixed chat format ("USER: {prompt} ASSISTANT: {answer}</s>").
CHAT_WORDS: tuple[str, ...] = ("USER", "ASSISTANT", ":")

# A piece is an optional space marker followed by one word, or a lone space marker, or one
# other whitespace character (newline, tab).
_PIECE = SPACE + r"?(?:[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9" + SPACE + r"])|" + SPACE + r"|\s"
_WORD_CHARS = set(string.ascii_letters) | set(string.digits)


def _is_word(word: str) -> bool:
    if word.isalpha() and word.isascii():
        return True
    if word.isdigit() and word.isascii():
        return True
    return len(word) == 1 and not word.isspace() and word != SPACE and word not in _WORD_CHARS


def build_tokenizer(vocab: Iterable[str]) -> PreTrainedTokenizerFast:
    """Build the word-level tokenizer for a vocabulary.

    The vocabulary is the union of ``vocab``, the chat-format words, every single ASCII letter,
    digit and punctuation mark (so that unseen words degrade to characters' neighbours rather
    than all to ``<unk>``), newline and tab. Each word ``w`` gets two ids, ``w`` and ``▁w``, in
    sorted order after the five special tokens.

    Parameters
    ----------
    vocab : iterable of str
        Words as drake-synth's word split yields them. Entries that are not single words
        (they contain spaces, or mix letters and digits) are split with the same rule first.

    Returns
    -------
    PreTrainedTokenizerFast
        With ``pad``, ``bos``, ``eos`` and ``unk`` set and ``<image>`` as an extra special token.

    Examples
    --------
    >>> tok = build_tokenizer(["red", "circle"])
    >>> tok.convert_ids_to_tokens(tok("a red circle", add_special_tokens=False).input_ids)
    ['a', '▁red', '▁circle']
    >>> tok.decode(tok("a red circle.").input_ids, skip_special_tokens=True)
    'a red circle.'
    """
    splitter = Regex(_PIECE)
    words: set[str] = set(CHAT_WORDS)
    words.update(string.ascii_letters, string.digits, string.punctuation)
    piece = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")
    for entry in vocab:
        if not isinstance(entry, str):
            raise TypeError(f"vocabulary entries must be str, got {type(entry).__name__}")
        if entry in SPECIAL_TOKENS:
            continue
        if _is_word(entry):
            words.add(entry)
        else:
            words.update(w for w in piece.findall(entry.replace(IMAGE, " ")) if w != SPACE)
    words.discard(SPACE)
    table = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for extra in (SPACE, "\n", "\t"):
        table[extra] = len(table)
    for word in sorted(words):
        for form in (word, SPACE + word):
            table.setdefault(form, len(table))

    backend = Tokenizer(models.WordLevel(table, unk_token=UNK))
    backend.normalizer = normalizers.Replace(" ", SPACE)
    backend.pre_tokenizer = pre_tokenizers.Split(splitter, behavior="isolated")
    backend.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.Fuse()])
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        extra_special_tokens=[IMAGE],
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
