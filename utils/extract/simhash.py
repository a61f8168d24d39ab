"""64-bit SimHash (Charikar) of a page's main text: what its near-duplicate index compares.

Features are word 3-shingles of the text's prose lines, lower-cased, each hashed to 64 bits with
BLAKE2b and weighted by its count. Words with a digit are left out: dates, times, counters and
prices are what changes between two copies of one article ("updated 3 hours ago"); with them, a
changed date line moved a 330-word article 6 bits away from itself. Even so one edited word moves
a 700-word text 0 to 6 bits (bench/near_duplicates.py), hence a distance of 6 by default.
The index (utils/frontier/near_duplicates.py) cuts it into 5 bands (13, 13, 13, 13 and 12 bits):
two fingerprints within 4 bits share a band exactly (pigeonhole), and at 5, 6 and 7 bits they still
do with probability 0.96, 0.89 and 0.79, so a lookup reads 5 buckets, never a scan; the candidates
are then checked bit by bit.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

BITS = 64
SHINGLE = 3  # words per feature
PROSE_WORDS = 10  # words; shorter lines of a text are left out of its fingerprint (unless all are shorter)
_WORD = re.compile(r"\w+", re.UNICODE)
_DIGIT = re.compile(r"\d")
_MASK = (1 << BITS) - 1


def prose(text: str) -> str:
    """The text's lines of PROSE_WORDS words or more (all of it when it has none): datelines, bylines,
    "Advertisement" and "Read more: ..." lines that a page's copies vary are short; paragraphs are not."""
    lines = [line for line in text.splitlines() if len(_WORD.findall(line)) >= PROSE_WORDS]
    return "\n".join(lines) if lines else text


def features(text: str) -> Counter[str]:
    """Word 3-shingles of the text's prose (a text of fewer words: its words), counted."""
    words = [word for word in _WORD.findall(prose(text).lower()) if not _DIGIT.search(word)]
    if len(words) < SHINGLE:
        return Counter(words)
    return Counter(" ".join(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def simhash(text: str) -> int:
    """The text's 64-bit SimHash; 0 for a text without words.

    Weights are summed per byte position and byte value (8 additions a feature, not 64), then
    spread over the bits once: 1,000 distinct words took 77 ms bit by bit, ~10 ms this way.
    """
    tables = [[0] * 256 for _ in range(BITS // 8)]
    blake2b = hashlib.blake2b
    for feature, weight in features(text).items():
        digest = blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        for position, value in enumerate(digest):
            tables[position][value] += weight
    fingerprint = 0
    for position, table in enumerate(tables):
        shift = (BITS // 8 - 1 - position) * 8  # digest byte 0 is the most significant
        for bit in range(8):
            total = sum(weight if value >> bit & 1 else -weight for value, weight in enumerate(table) if weight)
            if total > 0:
                fingerprint |= 1 << (shift + bit)
    return fingerprint


def distance(a: int, b: int) -> int:
    """Hamming distance of two fingerprints."""
    return ((a ^ b) & _MASK).bit_count()


def as_hex(fingerprint: int) -> str:
    """16 hex digits: how a fingerprint (and a cluster id) travels in messages and rows."""
    return f"{fingerprint & _MASK:016x}"
