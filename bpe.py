"""A byte-pair-encoding (BPE) tokenizer on a character base alphabet.

Training numbers a text's characters 0..A-1 by code point (the base alphabet), then merges the
most frequent pair of neighbouring tokens into a new token until the vocabulary has the size asked
for, never across two chunks (" hat", ".", "\n"). Encoding applies the merges in the order learned.
No bytes (a character the corpus never used is refused) and no special tokens.

Run:
    python3 bpe.py            the merges it learns from corpus.txt, two sentences in tokens
    python3 bpe.py --check    exit 1 unless tokenizer.json is what corpus.txt trains to
    python3 bpe.py --write    train on corpus.txt and write tokenizer.json
"""
import argparse
import collections
import json
import os
import re
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_PATH = os.path.join(HERE, "corpus.txt")
TOKENIZER_PATH = os.path.join(HERE, "tokenizer.json")
REMAKE = {"corpus.txt": ". Run: python3 tools/make_corpus.py",    # what makes a missing file
          "tokenizer.json": ". Run: python3 bpe.py --write"}
VOCAB_SIZE = 96     # the lab's vocabulary size V; the model's parameter count depends on it

# A chunk is, trying each in turn: " ?\w+" a word (\w: a letter, digit or "_") with the space
# in front of it, if any; " +(?!\w)" spaces not followed by a word (a run of spaces before a
# word keeps all but its last, which goes with the word); "[^\w ]" any other character.
PATTERN = r" ?\w+| +(?!\w)|[^\w ]"


################ The BPE steps

def split_chunks(text, pattern=PATTERN):
    r"""Cut text into the chunks that merges never cross.

    >>> split_chunks("mia has a red hat.\n"), split_chunks("at  the garden, ")
    (['mia', ' has', ' a', ' red', ' hat', '.', '\n'], ['at', ' ', ' the', ' garden', ',', ' '])
    """
    return [chunk for chunk in re.findall(pattern, text) if chunk]


def count_pairs(ids, counts=None, weight=1):
    """Add up how often each pair of neighbours occurs in ids, weight times per occurrence.

    >>> count_pairs([1, 2, 3, 1, 2]), count_pairs([1, 2], {(1, 2): 1}, weight=3)
    ({(1, 2): 2, (2, 3): 1, (3, 1): 1}, {(1, 2): 4})
    """
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def best_pair(counts):
    """The pair to merge next: the most frequent; a tie goes to the smallest (left id, right id).

    >>> best_pair({(4, 0): 2, (0, 1): 2, (1, 3): 1})
    (0, 1)
    """
    return min(counts, key=lambda pair: (-counts[pair], pair))   # a tie: by pair, not dict order


def merge(ids, pair, new_id):
    """Replace every occurrence of pair in ids by new_id, scanning left to right.

    >>> merge([1, 2, 3, 1, 2], (1, 2), 4), merge([0, 0, 0], (0, 0), 4)   # "aaa": one is left
    ([4, 3, 4], [4, 0])
    """
    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def start_training(text, pattern=PATTERN):
    """The base alphabet (ids 0..A-1 by code point), each distinct chunk as ids, and its count."""
    vocab = sorted(set(text))
    char_id = {char: i for i, char in enumerate(vocab)}
    chunk_counts = collections.Counter(split_chunks(text, pattern))   # in first-seen order
    chunks = [[char_id[char] for char in chunk] for chunk in chunk_counts]
    return vocab, chunks, list(chunk_counts.values())


def learn_merges(text, vocab_size, pattern=PATTERN):
    """Train BPE, counting every pair again after each merge: vocab, merges, each merge's count.

    >>> learn_merges("aaabdaaabac", 7)
    (['a', 'b', 'c', 'd', 'aa', 'ab', 'aaab'], [(0, 0), (0, 1), (4, 5)], [4, 2, 2])
    """
    check_size(text, vocab_size)
    vocab, chunks, chunk_counts = start_training(text, pattern)
    merges, counts = [], []
    while len(vocab) < vocab_size:
        pair_counts = {}
        for ids, chunk_count in zip(chunks, chunk_counts):
            count_pairs(ids, pair_counts, chunk_count)
        check_counts(pair_counts, vocab_size)
        pair = best_pair(pair_counts)
        chunks = [merge(ids, pair, len(vocab)) for ids in chunks]   # the new token's ID
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        merges.append(pair)
        counts.append(pair_counts[pair])
    return vocab, merges, counts


################ The tokenizer

class Tokenizer:
    """A trained BPE tokenizer: token strings (index = ID), merges in learned order, pattern."""

    def __init__(self, vocab, merges, pattern=PATTERN):
        check_merges(vocab, merges)
        self.vocab = list(vocab)
        self.merges = [list(pair) for pair in merges]
        self.pattern = pattern
        self.alphabet_size = len(vocab) - len(merges)  # ids below it are the base alphabet
        self._ids = {token: i for i, token in enumerate(vocab)}
        self._pairs = [(self._ids[left], self._ids[right]) for left, right in merges]   # as ids

    @classmethod
    def train(cls, text, vocab_size, pattern=PATTERN):
        """Learn a tokenizer with vocab_size tokens from text.

        >>> Tokenizer.train("aaabdaaabac", 7).tokens("aaabdaaabac")
        ['aaab', 'd', 'aaab', 'a', 'c']
        """
        vocab, merges, _ = learn_merges(text, vocab_size, pattern)
        return cls(vocab, [(vocab[left], vocab[right]) for left, right in merges], pattern)

    def encode(self, text):
        """Token IDs of text: cut it into chunks, then apply the merges to each, in order."""
        check_text(text, self._ids)
        ids = []
        for chunk in split_chunks(text, self.pattern):
            chunk_ids = [self._ids[char] for char in chunk]
            for new_id, pair in enumerate(self._pairs, self.alphabet_size):   # as training did
                chunk_ids = merge(chunk_ids, pair, new_id)
            ids.extend(chunk_ids)
        return ids

    def tokens(self, text):
        """The token strings text splits into (the same split as encode)."""
        return [self.vocab[i] for i in self.encode(text)]

    def decode(self, ids):
        """The text of a list of token IDs: their token strings joined."""
        ids = list(ids)     # an iterator or a generator is read once, not used up by the check
        check_ids(ids, len(self.vocab))
        return "".join(self.vocab[i] for i in ids)

    def to_json(self):
        """The tokenizer as JSON text: one vocab entry and one merge per line, in id order."""
        vocab = ",\n".join(f"    {shown(token)}: {i}" for i, token in enumerate(self.vocab))
        merges = ",\n".join(f"    {shown(pair)}" for pair in self.merges)
        head = f'{{\n  "version": 1,\n  "pattern": {json.dumps(self.pattern)},\n'
        return f'{head}  "vocab": {{\n{vocab}\n  }},\n  "merges": [\n{merges}\n  ]\n}}\n'

    @classmethod
    def load(cls, path):
        """Read a tokenizer that to_json() wrote; refuse a file that is not one, saying why."""
        data = read_json(path)      # a missing file raises FileNotFoundError
        try:
            check_fields(data)
            vocab = sorted(data["vocab"], key=data["vocab"].get)    # in id order
            return cls(vocab, data["merges"], data["pattern"])
        except (TypeError, ValueError) as error:
            raise FileProblem(f"{path} is not a tokenizer that bpe.py writes ({error})") from None


################ Files and the command line (trace_block.py uses these too)

class FileProblem(ValueError):
    """A file of the lab's that cannot be used, or a text that cannot train: one line says why."""


def read_text(path):
    """A UTF-8 file's text, as stored (line ends untouched); a byte-order mark is refused."""
    data = Path(path).read_bytes()      # a missing file: FileNotFoundError
    if data.startswith(b"\xef\xbb\xbf"):     # U+FEFF would join the alphabet, moving every ID
        raise FileProblem(f"{path} starts with a byte-order mark: save it as UTF-8 without one")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileProblem(f"{path} is not UTF-8 (byte {error.start}): save it as UTF-8") from None


def read_json(path):
    """A file's JSON, refused if the file is empty or not JSON."""
    text = read_text(path)      # not UTF-8: said by read_text, not as "not JSON"
    if not text.strip():
        raise FileProblem(f"{path} is empty")
    try:
        return json.loads(text)
    except ValueError as error:         # json.JSONDecodeError is one
        raise FileProblem(f"{path} is not plain JSON: {error}") from None


def write_texts(texts):
    """Write each {path: text} in UTF-8: all of them in full, or none (the old files kept)."""
    replaced = {}       # path -> its bytes before, None where there was no file
    try:
        for path, text in texts.items():
            Path(f"{path}.tmp").write_bytes(text.encode("utf-8"))
        for path in texts:
            old = Path(path).read_bytes() if os.path.isfile(path) else None
            os.replace(f"{path}.tmp", path)     # fails on a folder, or a file locked on Windows
            replaced[path] = old
    except OSError as error:
        for done, old in replaced.items():      # put back the files replaced before it
            if old is None:
                os.remove(done)
            else:
                Path(done).write_bytes(old)
        raise FileProblem(f"cannot write {path}: {error.strerror}; no file was changed") from None
    finally:
        for path in texts:
            if os.path.isfile(f"{path}.tmp"):   # left only by a write that failed
                os.remove(f"{path}.tmp")


def read_corpus(path=None):
    """The corpus text (corpus.txt, or path): UTF-8 with "\\n" line ends, refused otherwise."""
    path = path or CORPUS_PATH
    name = os.path.basename(path)
    text = read_text(path)
    if not text:
        raise FileProblem(f"{name} is empty{REMAKE.get(name, '')}")
    if "\r" in text:
        line = text.count("\n", 0, text.index("\r")) + 1
        raise FileProblem(f"{name} line {line} ends with \\r\\n (Windows line ends); "
                          f"the lab's files use \\n: save it with LF line ends")
    if "\n" not in text:
        raise FileProblem(f"{name} line 1 does not end with a newline")
    return text


def write():
    """Train on corpus.txt and write tokenizer.json; return 0."""
    write_texts({TOKENIZER_PATH: Tokenizer.train(read_corpus(), VOCAB_SIZE).to_json()})
    print(f"wrote {TOKENIZER_PATH}: {VOCAB_SIZE} tokens")
    return 0


def check():
    """Print whether tokenizer.json is what corpus.txt trains to, or its first line that is not."""
    found = read_text(TOKENIZER_PATH).splitlines(keepends=True) + ["(the end)"]
    fresh_json = Tokenizer.train(read_corpus(), VOCAB_SIZE).to_json()
    trained = fresh_json.splitlines(keepends=True) + ["(the end)"]
    for n, (line, fresh) in enumerate(zip(found, trained), 1):
        if line != fresh:
            return report(f"tokenizer.json is not what the corpus trains to: its line {n} is "
                          f"{line!r}, trained now {fresh!r}; run: python3 bpe.py --write "
                          f"(corpus.txt edited? tools/make_corpus.py)")
    print(f"tokenizer.json is up to date: {VOCAB_SIZE} tokens, as the corpus trains to")
    return 0


def shown(token):
    """A token in quotes, so that a leading space shows: " mia" (a list of them: JSON's list)."""
    return json.dumps(token, ensure_ascii=False)


def demo():
    """Print the merges with their counts, then two sentences in tokens; return 0."""
    vocab, merges, counts = learn_merges(read_corpus(), VOCAB_SIZE)
    tokenizer = Tokenizer(vocab, [(vocab[left], vocab[right]) for left, right in merges])
    A = tokenizer.alphabet_size
    print(f"base alphabet: {A} characters, ids 0..{A - 1}: {shown(''.join(vocab[:A]))}")
    print(f"{len(merges)} merges, ids {A}..{len(vocab) - 1}, each with its pair's count then:")
    for new_id, ((left, right), count) in enumerate(zip(merges, counts), A):
        pair = f"{shown(vocab[left])} + {shown(vocab[right])}"
        print(f"  {new_id:3}  {pair:>18} -> {shown(vocab[new_id]):<10} {count:5}")
    for sentence in ("now mia gives the hat to leo.", "mia has a red ball."):
        print(sentence)
        print("  " + " ".join(f"{i}={shown(vocab[i])}" for i in tokenizer.encode(sentence)))
    return 0


def main(argv=None):
    """Run the command line; return the exit code."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description="The lab's BPE tokenizer; "
                                     "with no flag, the merges it learns and two sentences.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_const", dest="run", const=write,
                      help=f"train {VOCAB_SIZE} tokens on corpus.txt and write tokenizer.json")
    mode.add_argument("--check", action="store_const", dest="run", const=check, help="exit 1, "
                      "saying what differs, if tokenizer.json is not what corpus.txt trains to")
    parser.set_defaults(run=demo)
    return run_reporting_problems(parser.parse_args(argv).run)


def run_reporting_problems(action, errors="backslashreplace"):
    """Run action() and return its exit code: a file of the lab's that cannot be used (missing,
    say, or not permitted), or a function tools/exercise.py blanked, is one line on standard
    error, exit 1; a reader that stops early (| head) ends it quietly."""
    if hasattr(sys.stdout, "reconfigure"):      # a test's StringIO has none
        sys.stdout.reconfigure(errors=errors)   # how it prints a letter its encoding lacks
    try:
        code = action()
        sys.stdout.flush()          # a reader gone shows here, not at exit
        return code
    except (FileProblem, NotImplementedError) as problem:
        return report(str(problem))
    except BrokenPipeError:     # the flush at exit would fail too: send it to the null device
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:    # a file missing (REMAKE: what makes it), or one not permitted
        remake = REMAKE.get(os.path.basename(error.filename or ""), "")
        return report(f"cannot use {error.filename}: {error.strerror}{remake}")


def report(message):
    """Print the one line of a failed command on standard error; return 1."""
    print(message, file=sys.stderr)
    return 1


################ Input checks (you can skip this section)

def check_counts(counts, vocab_size):
    if not counts:
        raise FileProblem(f"vocabulary size {vocab_size} is out of reach: no pair left to merge")


def check_size(text, vocab_size):
    if vocab_size < len(set(text)):
        raise FileProblem(f"vocabulary size {vocab_size} is smaller than the base alphabet of "
                          f"the text, {len(set(text))} characters")


def check_merges(vocab, merges):
    A = len(vocab) - len(merges)
    for r, pair in enumerate(merges):
        if len(pair) != 2 or pair[0] + pair[1] != vocab[A + r]:     # merge r makes token A + r
            raise ValueError(f"merge {r} {pair} does not make token {A + r}, {vocab[A + r]!r}")


def check_fields(data):
    fields = {"version": int, "pattern": str, "vocab": dict, "merges": list}   # to_json()'s fields
    kinds = {k: type(v) for k, v in data.items()} if isinstance(data, dict) else None
    if kinds != fields or data["version"] != 1:
        raise ValueError("its fields are not version 1, a pattern, a vocab and merges")
    if sorted(data["vocab"].values()) != list(range(len(data["vocab"]))):    # load sorts by them
        raise ValueError(f"its vocab's IDs are not 0 to {len(data['vocab']) - 1}, each once")


def check_text(text, alphabet):
    if not isinstance(text, str):       # bytes, say, would be refused as "character 109"
        raise TypeError(f"encode: text must be a str, not a {type(text).__name__}")
    for position, char in enumerate(text):
        if char not in alphabet:    # every one-character token is in the base alphabet
            raise ValueError(f"character {char!r} at position {position} is not in the "
                             f"tokenizer's alphabet")


def check_ids(ids, vocab_size):
    wrong = [i for i in ids if type(i) is not int]
    if wrong:       # True would be token 1, silently
        raise TypeError(f"token IDs must be a list of ints, not one holding {wrong[0]!r:.20}")
    outside = list(dict.fromkeys(i for i in ids if not 0 <= i < vocab_size))   # as model.py's
    if outside:     # -1 would be the last token, silently
        raise ValueError(f"token IDs outside the vocabulary of size {vocab_size}: {outside[:5]}")


# Lines that `python3 bpe.py` prints (a test checks them; tools/make_corpus.py pins the IDs):
#     base alphabet: 27 characters, ids 0..26: "\n ',.abcdeghiklmnoprstuvwyz"
#     now mia gives the hat to leo.
#       16="n" 40="ow" 65=" mia" 50=" gives" 30=" the" 79=" hat" 37=" to" 70=" leo" 4="."

if __name__ == "__main__":
    sys.exit(main())
