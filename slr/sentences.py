"""The sentences of the probing experiment (Appendix E.1 of the paper, Figure 1(b)): five sets built as
Cartesian products of word lists, each sentence labelled +1 / -1 by one sentiment adjective whose position
varies (the single informative token).

:func:`sentence_sets` returns the five sets (train, test, OOD tokens, OOD structure, OOD structure +
tokens) with the sizes the paper reports, 15552 / 4608 / 3072 / 144 / 96; :func:`build` fills one
template. :mod:`slr.probe` encodes them and probes the encoder's [CLS] states.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["SENTIMENT", "SENTIMENT_OOD", "TRAIN_WORDS", "TEST_WORDS", "TEMPLATES", "SET_NAMES", "SET_SIZES",
           "SentenceSet", "build", "sentence_sets"]

# --- Appendix E.1: word lists -------------------------------------------------------------------
#: Sentiment adjectives that set the label, in and out of the training vocabulary.
SENTIMENT = {"nice": 1, "cute": 1, "delightful": 1, "mean": -1, "dreadful": -1, "aggressive": -1}
SENTIMENT_OOD = {"lovely": 1, "charming": 1, "nasty": -1, "foul": -1}

#: Filler slots; "" drops the word. ``city_adj`` is the distractor of the first sentence: it carries
#: sentiment ("nice.", "dreadful.") but never sets the label.
TRAIN_WORDS = {
    "city_adj": ("nice.", "dreadful.", "clean.", "dirty."),
    "pronoun": ("my", "his", "her", "our"),
    "color": ("", "blue", "orange", "beige", "green", "red"),
    "animal": ("dog", "owl", "cow"),
    "adverb": ("", "very", "extremely"),
    "size": ("tiny", "giant"),
}
TEST_WORDS = {
    "city_adj": ("nice.", "dreadful.", "clean.", "dirty."),
    "pronoun": ("their", "your"),
    "color": ("purple", "gray"),
    "animal": ("cat", "eagle", "goat"),
    "adverb": ("", "especially"),
    "size": ("big", "little", "mini", "enormous"),
}

# --- Appendix E.1: templates ---------------------------------------------------------------------
# A template is a tuple of slots: "<name>" is filled from a word list, "S" is the sentiment adjective,
# anything else is literal text. Patterns A and B swap where S sits.
_A_TRAIN = ("The city is", "<city_adj>", "<pronoun>", "<color>", "<animal>", "is", "<adverb>", "S")
_B = ("The city is", "<city_adj>", "<pronoun>", "<color>", "S", "<animal>", "is", "<adverb>", "<size>")
_A_TEST = ("The city is", "<city_adj>", "<pronoun>", "<size>", "<color>", "<animal>", "is", "<adverb>", "S")
_A_OOD = ("The city is", "<city_adj>", "Good evening,", "<pronoun>", "<size>", "<color>", "<animal>", "is",
          "<adverb>", "S")
_B_OOD = ("The city is", "<city_adj>", "Good evening,", "<pronoun>", "S", "<color>", "<animal>", "is",
          "<adverb>", "<size>")
_STRUCT = ("Hello, how are you? Good evening,", "<pronoun>", "<color>", "<animal>", "is", "<adverb>", "S")

#: set name -> list of (pattern, template, filler words, sentiment words)
TEMPLATES = {
    "train": [("A", _A_TRAIN, TRAIN_WORDS, SENTIMENT), ("B", _B, TRAIN_WORDS, SENTIMENT)],
    "test": [("A", _A_TEST, TEST_WORDS, SENTIMENT), ("B", _B, TEST_WORDS, SENTIMENT)],
    "ood_tokens": [("A", _A_OOD, TEST_WORDS, SENTIMENT_OOD), ("B", _B_OOD, TEST_WORDS, SENTIMENT_OOD)],
    "ood_structure": [("A", _STRUCT, TEST_WORDS, SENTIMENT)],
    "ood_structure_tokens": [("A", _STRUCT, TEST_WORDS, SENTIMENT_OOD)],
}
SET_NAMES = tuple(TEMPLATES)
#: The sizes the paper reports (Appendix E.1).
SET_SIZES = {"train": 15552, "test": 4608, "ood_tokens": 3072, "ood_structure": 144,
             "ood_structure_tokens": 96}


@dataclass(frozen=True)
class SentenceSet:
    """One set of sentences: ``sentences[i]`` has label ``labels[i]`` in {-1, +1}, set by the sentiment
    adjective ``sentiment[i]``; ``pattern[i]`` ("A" or "B") says which template built it."""
    name: str
    sentences: tuple[str, ...]
    labels: np.ndarray
    sentiment: tuple[str, ...]
    pattern: tuple[str, ...]

    def __len__(self):
        return len(self.sentences)


def build(template: Sequence[str], words: Mapping[str, Sequence[str]],
          sentiment: Mapping[str, int]) -> tuple[list[str], list[int], list[str]]:
    """Sentences of one template: the Cartesian product of its slots, in slot order.

    Empty words are dropped and the rest joined by single spaces. Returns (sentences, labels, sentiment
    words), the label being the sign attached to the sentiment word that fills ``S``.
    """
    for slot in template:
        if slot.startswith("<") and slot.endswith(">") and slot[1:-1] not in words:
            raise ValueError(f"template slot {slot!r} has no word list; lists: {sorted(words)}")
    choices = [tuple(sentiment) if slot == "S" else tuple(words[slot[1:-1]]) if slot.startswith("<")
               and slot.endswith(">") else (slot,) for slot in template]
    s_index = list(template).index("S")
    combos = list(itertools.product(*choices))
    return ([" ".join(w for w in combo if w) for combo in combos],
            [int(sentiment[combo[s_index]]) for combo in combos], [combo[s_index] for combo in combos])


def sentence_sets() -> dict[str, SentenceSet]:
    """The five sets of Appendix E.1, in the order of :data:`SET_NAMES`, with the sizes of :data:`SET_SIZES`."""
    out = {}
    for name, parts in TEMPLATES.items():
        sents, labs, adjs, pats = [], [], [], []
        for pattern, template, words, sentiment in parts:
            s, y, a = build(template, words, sentiment)
            sents, labs, adjs, pats = sents + s, labs + y, adjs + a, pats + [pattern] * len(s)
        out[name] = SentenceSet(name, tuple(sents), np.asarray(labs, dtype=np.int64), tuple(adjs), tuple(pats))
    return out
