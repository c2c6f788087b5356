"""A byte-pair-encoding (BPE) tokenizer on a character base alphabet.

Training starts from the characters of a text, the base alphabet, sorted by
code point and numbered 0..A-1. It then merges the most frequent pair of
neighbouring tokens into one new token, again and again, until the vocabulary
has the size asked for. Before any counting the text is cut into chunks: a
word carries the space in front of it (" hat"), punctuation and the newline
stand alone, and no merge ever crosses from one chunk into the next.
Encoding cuts a text the same way and applies the learned merges in the order
they were learned; decoding joins the token strings back together.

But:
- the base alphabet is the corpus's own characters, not the 256 byte values,
  so a character the corpus never used cannot be encoded: it is refused with
  an error that names it, never replaced by an "unknown" token or dropped;
- there are no special tokens (no end-of-text, no padding);
- training is the plain textbook loop that recounts every pair after every
  merge: quick for a small corpus like ours, slow for a big one.

The file reads: the BPE steps, the tokenizer; then reading and writing the
lab's files, the command line (whose reporter of file problems trace_block.py
uses too), and the input checks, which can be skipped: each entry point calls
its check in one line.

Run:
    python3 bpe.py            # demo: the merges with their counts, the first story in tokens
    python3 bpe.py --write    # train on corpus.txt and write tokenizer.json
    python3 bpe.py --check    # exit 1 if tokenizer.json is not what corpus.txt trains to
    python3 -m doctest -v bpe.py
"""

import argparse
import difflib
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_PATH = os.path.join(HERE, "corpus.txt")
TOKENIZER_PATH = os.path.join(HERE, "tokenizer.json")
VOCAB_SIZE = 96          # the lab's vocabulary size V; the model's parameter count depends on it
FORMAT_VERSION = 1       # the "version" field of tokenizer.json
FIELDS = ("version", "pattern", "vocab", "merges")

# A chunk is one of three things, tried in this order:
#   " ?\w+"      a word, with the one space in front of it if there is one;
#   " +(?!\w)"   a run of spaces that is not followed by a word (in "a  b" the
#                run keeps one space and the last space goes with " b");
#   "[^\w ]"     any other single character: ".", ",", "\n".
# Every character of any text lands in exactly one chunk. (\w is a letter, a
# digit or "_"; our corpus has only letters.)
PATTERN = r" ?\w+| +(?!\w)|[^\w ]"


# ---------------------------------------------------------------- the BPE steps

def split_chunks(text, pattern=PATTERN):
    r"""Cut text into the chunks that merges never cross.

    >>> split_chunks("mia has a red hat.\n")
    ['mia', ' has', ' a', ' red', ' hat', '.', '\n']
    >>> split_chunks("at  the garden, ")
    ['at', ' ', ' the', ' garden', ',', ' ']
    """
    chunks = [match.group() for match in re.finditer(pattern, text) if match.group()]
    check_chunks_cover(chunks, text, pattern)   # a pattern that skips text would drop it
    return chunks


def count_pairs(ids, counts=None, weight=1):
    """Add up how often each pair of neighbours occurs in ids, weight times per occurrence.

    >>> count_pairs([1, 2, 3, 1, 2])
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}
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
    check_counts(counts)
    # Tie rule: among pairs with the same count, the smallest (left id, right id)
    # wins, so the result never depends on the order the counts were filled in.
    return min(counts, key=lambda pair: (-counts[pair], pair))


def merge(ids, pair, new_id):
    """Replace every occurrence of pair in ids by new_id, scanning left to right.

    >>> merge([1, 2, 3, 1, 2], (1, 2), 4)
    [4, 3, 4]
    >>> merge([0, 0, 0], (0, 0), 4)  # "aaa": the first two merge, the last one is left over
    [4, 0]
    """
    check_pair(pair)
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def learn_merges(text, vocab_size, pattern=PATTERN):
    """Train BPE on text: return the vocab, the merges (id pairs, in rank order) and their counts.

    >>> vocab, merges, counts = learn_merges("aaabdaaabac", 7)
    >>> vocab
    ['a', 'b', 'c', 'd', 'aa', 'ab', 'aaab']
    >>> merges, counts
    ([(0, 0), (0, 1), (4, 5)], [4, 2, 2])
    """
    check_training(text, vocab_size, pattern)
    vocab = sorted(set(text))  # the base alphabet: ids 0..A-1 in code-point order
    char_id = {char: i for i, char in enumerate(vocab)}
    # Count each distinct chunk once, with how often it occurs: far faster than
    # walking the whole text at every step, and the same pair counts.
    chunk_counts = {}
    for chunk in split_chunks(text, pattern):
        chunk_counts[chunk] = chunk_counts.get(chunk, 0) + 1
    words = [[char_id[char] for char in chunk] for chunk in chunk_counts]
    weights = list(chunk_counts.values())
    merges, counts = [], []
    while len(vocab) < vocab_size:
        pair_counts = {}
        for ids, weight in zip(words, weights):
            count_pairs(ids, pair_counts, weight)
        check_merge_possible(pair_counts, vocab, merges, vocab_size)
        pair = best_pair(pair_counts)
        new_id, new_token = len(vocab), vocab[pair[0]] + vocab[pair[1]]
        check_new_token(new_token, vocab, len(merges))
        words = [merge(ids, pair, new_id) for ids in words]
        vocab.append(new_token)
        merges.append(pair)
        counts.append(pair_counts[pair])
    return vocab, merges, counts


# ---------------------------------------------------------------- the tokenizer

class Tokenizer:
    """A trained BPE tokenizer: token strings (index = id), merges in rank order, chunk pattern."""

    def __init__(self, vocab, merges, pattern=PATTERN):
        """Build from vocab (token strings, index = id) and merges, [left, right] token strings."""
        check_tokenizer_parts(vocab, merges, pattern)
        self.vocab = list(vocab)
        self.pattern = re.compile(pattern)
        self.alphabet_size = len(vocab) - len(merges)  # ids below it are the base alphabet
        self._ids = {token: i for i, token in enumerate(vocab)}
        # (left id, right id) -> merged id; merge number `rank` made token alphabet_size + rank
        self._merged = {(self._ids[left], self._ids[right]): self.alphabet_size + rank
                        for rank, (left, right) in enumerate(merges)}

    @property
    def merges(self):
        """The merges in rank order, as [left, right] token strings."""
        # A dict keeps insertion order, and _merged was filled in rank order.
        return [[self.vocab[left], self.vocab[right]] for left, right in self._merged]

    @classmethod
    def train(cls, text, vocab_size, pattern=PATTERN):
        """Learn a tokenizer with vocab_size tokens from text."""
        vocab, merges, _ = learn_merges(text, vocab_size, pattern)
        return cls(vocab, [(vocab[left], vocab[right]) for left, right in merges], pattern)

    # ---- encoding and decoding

    def encode(self, text):
        """Token ids of text: cut it into chunks, then merge within each chunk in rank order."""
        check_text(text, self._ids)
        ids = []
        for chunk in split_chunks(text, self.pattern):
            chunk_ids = [self._ids[char] for char in chunk]
            while len(chunk_ids) >= 2:
                # Of the neighbouring pairs, merge the one learned earliest (smallest
                # merged id), just as training did; stop when no pair was learned.
                pair = min(zip(chunk_ids, chunk_ids[1:]),
                           key=lambda p: self._merged.get(p, len(self.vocab)))
                if pair not in self._merged:
                    break
                chunk_ids = merge(chunk_ids, pair, self._merged[pair])
            ids.extend(chunk_ids)
        return ids

    def tokens(self, text):
        """The token strings text splits into (the same split as encode)."""
        return [self.vocab[i] for i in self.encode(text)]

    def decode(self, ids):
        """The text of a list of token ids: their token strings joined."""
        check_ids(ids, len(self.vocab))
        return "".join(self.vocab[i] for i in ids)

    # ---- saving and loading

    def to_json(self):
        """The tokenizer as JSON text: one vocab entry and one merge per line, in id order."""
        def dump(value):
            return json.dumps(value, ensure_ascii=False)
        vocab = ",\n".join(f"    {dump(token)}: {i}" for i, token in enumerate(self.vocab))
        merges = ",\n".join(f"    {dump(pair)}" for pair in self.merges)
        return (f'{{\n  "version": {FORMAT_VERSION},\n  "pattern": {dump(self.pattern.pattern)},\n'
                f'  "vocab": {{\n{vocab}\n  }},\n'
                f'  "merges": [\n{merges}\n  ]\n}}\n')

    def save(self, path):
        """Write the tokenizer to path as JSON (UTF-8, "\\n" line ends on every system); the old
        file is replaced only once the new one is whole (see write_atomically)."""
        write_atomically(path, self.to_json())

    @classmethod
    def load(cls, path):
        """Read a tokenizer that save() wrote; refuse a file that is not one, saying why."""
        text = read_text(path)      # a missing file raises FileNotFoundError
        try:
            data = json.loads(text, object_pairs_hook=_refuse_repeated_keys)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not JSON: {error}") from None
        except RecursionError:
            raise ValueError(f"{path} is not a tokenizer: its JSON is nested too deep") from None
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{path}: {error}") from None

    @classmethod
    def from_dict(cls, data):
        """Build from the parsed JSON of tokenizer.json."""
        check_fields(data)
        tokens = sorted(data["vocab"], key=data["vocab"].get)  # index = id
        return cls(tokens, data["merges"], data["pattern"])


# ---------------------------------------------------------------- files

class FileProblem(ValueError):
    """One of the lab's files cannot be used as it is; the message names the file and says
    why. The command lines print it in one line, without a traceback."""


def read_text(path):
    """The text of a UTF-8 file, exactly as stored (line ends untouched)."""
    with open(path, "rb") as file:      # a missing file raises FileNotFoundError
        data = file.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileProblem(f"{path} is not UTF-8 text: byte {error.start} is "
                          f"{data[error.start:error.start + 1]!r}") from None


def write_atomically(path, text):
    """Write text to path as UTF-8 so that path is never left half written: the text goes to a
    temporary file in the same folder, which replaces path only once it is complete. On any
    failure the old file is untouched and the temporary one removed."""
    data = text.encode("utf-8")         # the whole text first: nothing is opened before
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path),
                                             suffix=".tmp")
    except OSError as error:
        raise FileProblem(f"cannot write {path}: {error.strerror} (in {folder}); "
                          f"the old file is unchanged") from None
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if os.path.exists(path):        # the new file keeps the old one's permissions
            os.chmod(temporary, os.stat(path).st_mode & 0o777)
        else:
            os.chmod(temporary, 0o666 & ~current_umask())
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.remove(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise FileProblem(f"cannot write {path}: {error.strerror}; "
                              f"the old file is unchanged") from None
        raise


def current_umask():
    """The process's umask (os has no way to read it without setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_corpus(path=None):
    """The corpus text (corpus.txt, or path), exactly as stored: UTF-8 with "\\n" line ends,
    refused otherwise."""
    path = CORPUS_PATH if path is None else path
    text = read_text(path)
    check_corpus(text, os.path.basename(path))
    return text


def _refuse_repeated_keys(pairs):
    """A dict of JSON key/value pairs that refuses a key given twice (json would keep the last)."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice in one JSON object")
        seen[key] = value
    return seen


# ---------------------------------------------------------------- command line

def check(corpus_path=None, tokenizer_path=None, out=None):
    """Compare tokenizer_path (tokenizer.json) with what corpus_path (corpus.txt) trains to;
    print what differs; return 0 or 1."""
    corpus_path = CORPUS_PATH if corpus_path is None else corpus_path
    tokenizer_path = TOKENIZER_PATH if tokenizer_path is None else tokenizer_path
    out = sys.stdout if out is None else out
    name = os.path.basename(tokenizer_path)
    fix = "to fix it, run: python3 bpe.py --write"
    expected = Tokenizer.train(read_corpus(corpus_path), VOCAB_SIZE).to_json()
    try:
        actual = read_text(tokenizer_path)
    except FileNotFoundError:
        print(f"{name} is missing ({tokenizer_path}); {fix}", file=out)
        return 1
    except FileProblem:                     # read_text's only refusal: not UTF-8
        print(f"{name} is not UTF-8 text; {fix}", file=out)
        return 1
    if actual == expected:
        print(f"{name} is up to date: {VOCAB_SIZE} tokens, as "
              f"{os.path.basename(corpus_path)} trains to", file=out)
        return 0
    diff = list(difflib.unified_diff(actual.splitlines(), expected.splitlines(),
                                     f"{name} (on disk)", f"{name} (trained now)",
                                     n=0, lineterm=""))
    print(f"{name} is not what {os.path.basename(corpus_path)} trains to; "
          f"changed lines (- on disk, + trained now):", file=out)
    for line in diff[:24]:
        print("  " + line, file=out)
    if len(diff) > 24:
        print(f"  ... and {len(diff) - 24} more diff lines", file=out)
    if not diff:
        print("  (the same lines, but the bytes differ: line ends or the last newline)", file=out)
    print(fix, file=out)
    return 1


def show(token):
    """A token as the demo prints it: a newline as \\n, everything else as is."""
    return token.replace("\n", "\\n")


def demo():
    """Print the merges with their counts, then the first story split into tokens."""
    text = read_corpus()
    vocab, merges, counts = learn_merges(text, VOCAB_SIZE)
    alphabet = "".join(vocab[:len(vocab) - len(merges)])
    print(f"base alphabet, {len(alphabet)} characters (ids 0..{len(alphabet) - 1}): {alphabet!r}")
    print(f"{len(merges)} merges in rank order (ids {len(alphabet)}..{len(vocab) - 1}), "
          f"each with how often its pair occurred when it was merged:")
    for rank, ((left, right), count) in enumerate(zip(merges, counts)):
        pair = f"{vocab[left]!r} + {vocab[right]!r}"
        print(f"  {rank:2}  {pair:>16} -> {vocab[left] + vocab[right]!r:<10} {count:5}")
    tokenizer = Tokenizer(vocab, [(vocab[left], vocab[right]) for left, right in merges])
    story = text.split("\n")[0] + "\n"
    tokens = tokenizer.tokens(story)
    print(f"the first story plus its newline, {len(tokens)} tokens ('|' between tokens):")
    print("|" + "|".join(show(token) for token in tokens) + "|")


def main(argv=None):
    """Run the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        description="The lab's BPE tokenizer. With no flag: a demo of the merges it learns\n"
                    "from corpus.txt and of the first story split into tokens.",
        epilog="examples:\n"
               "  python3 bpe.py            # the merges and the first story, split\n"
               "  python3 bpe.py --check    # is tokenizer.json what corpus.txt trains to?\n"
               "  python3 bpe.py --write    # retrain after you change corpus.txt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help=f"train {VOCAB_SIZE} tokens on corpus.txt and write tokenizer.json")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 (and say what differs) if tokenizer.json is not what "
                           "corpus.txt trains to")
    return run_reporting_problems(lambda: run(parser.parse_args(argv)))


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    if args.write:
        tokenizer = Tokenizer.train(read_corpus(), VOCAB_SIZE)
        tokenizer.save(TOKENIZER_PATH)
        print(f"wrote {TOKENIZER_PATH}: {len(tokenizer.vocab)} tokens, "
              f"{len(tokenizer.merges)} merges")
        return 0
    if args.check:
        return check()
    demo()
    return 0


def run_reporting_problems(action):
    """Run action() and return its exit code. A problem with one of the lab's files, or with
    standard output, ends in one line on standard error and exit code 1; only a bug in the lab
    itself gives a traceback. (Both command lines, this one and trace_block.py's, use it.)"""
    if sys.stdout is None:                  # started with its output closed: 1>&-
        return report("cannot print: standard output is closed")
    try:
        try:
            code = action()
        finally:                            # also when argparse exits after --help
            sys.stdout.flush()              # a full disk shows here, not at exit
        return code
    except BrokenPipeError:                 # python3 bpe.py | head: the reader stopped early
        silence_stdout()
        return 1
    except FileProblem as problem:
        return report(str(problem))
    except FileNotFoundError as error:
        made_by = {"tokenizer.json": " Run: python3 bpe.py --write",
                   "block-trace.json": " Run: python3 trace_block.py --write"}
        hint = made_by.get(os.path.basename(str(error.filename)), "")
        return report(f"cannot read {error.filename}: no such file.{hint}")
    except OSError as error:
        if error.filename is not None:
            return report(f"cannot use {error.filename}: {error.strerror}")
        silence_stdout()                    # what is left in its buffer cannot be written
        return report(f"cannot write to standard output: {error.strerror or error}")


def report(message):
    """Print message as the one line of a failed command; return exit code 1."""
    if sys.stderr is not None:
        try:
            print(message, file=sys.stderr)
        except OSError:
            pass
    return 1


def silence_stdout():
    """Point standard output at the null device, so that Python's own flush at exit does not
    fail a second time on what it could not write."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# ---------------------------------------------------------------- input checks
#
# Each function above calls its check in one line; the checks below refuse what
# would give a wrong answer or a raw error, with a message that says what is wrong.

def check_chunks_cover(chunks, text, pattern):
    """Refuse a split that lost part of text (a custom pattern can skip characters)."""
    if "".join(chunks) == text:
        return
    end = 0
    for match in re.finditer(pattern, text):    # find the first character no chunk covers
        if match.group() and match.start() > end:
            skipped = text[end:match.start()]
            break
        end = max(end, match.end())
    else:
        skipped = text[end:]
    raise ValueError(f"the pattern {getattr(pattern, 'pattern', pattern)!r} skips {skipped!r} "
                     f"at position {end}")


def check_corpus(text, name="corpus.txt"):
    """Refuse a corpus that is empty, has Windows line ends, or does not end its first story
    with a newline: the lab's files are compared byte for byte, with "\\n" line ends."""
    if not text:
        raise FileProblem(f"{name} is empty: it needs at least one story, one per line")
    if "\r" in text:
        line = text.count("\n", 0, text.index("\r")) + 1
        raise FileProblem(f"{name} line {line} ends with \\r\\n (Windows line ends); the lab's "
                          f"files use \\n (git checkout {name} restores it)")
    if "\n" not in text:
        raise FileProblem(f"{name} line 1 does not end with a newline: each story is one line")


def check_counts(counts):
    """Refuse empty pair counts: there is nothing left to merge."""
    if not counts:
        raise ValueError("no pair to merge: the counts are empty (every chunk is one token)")


def check_pair(pair):
    """Refuse a pair that is not a tuple of two ids."""
    # A list [1, 2] never equals the tuple (ids[i], ids[i + 1]): it would merge nothing.
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError(f"pair must be a tuple of two token ids, such as (1, 2), not {pair!r}")


def check_pattern(pattern):
    """Refuse a pattern that is not a regular expression."""
    if isinstance(pattern, re.Pattern):
        return
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"pattern {pattern!r} is not a regular expression: {error}") from None


def check_training(text, vocab_size, pattern):
    """Refuse a text, a vocabulary size or a pattern that training cannot use."""
    if not isinstance(text, str):
        raise TypeError(f"training text must be a str, not {type(text).__name__}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocabulary size must be an int, not {vocab_size!r}")
    if not text:
        raise ValueError("cannot train on an empty text")
    alphabet = len(set(text))
    if vocab_size < alphabet:
        raise ValueError(f"vocabulary size {vocab_size} is smaller than the base alphabet: "
                         f"the text has {alphabet} different characters")
    check_pattern(pattern)


def check_merge_possible(pair_counts, vocab, merges, vocab_size):
    """Refuse to go on when no pair is left: every chunk is already one token."""
    if not pair_counts:
        raise ValueError(f"vocabulary size {vocab_size} is out of reach: after "
                         f"{len(merges)} merges every chunk of the text is one token, "
                         f"{len(vocab)} tokens in all")


def check_new_token(new_token, vocab, rank):
    """Refuse a merge whose token exists already ("a"+"bc" after "ab"+"c"): tokenizer.json
    maps token -> id, so two ids cannot share one string."""
    if new_token in vocab:
        raise ValueError(f"merge {rank} would make {new_token!r} a second time "
                         f"(it is already token {vocab.index(new_token)})")


def check_tokenizer_parts(vocab, merges, pattern):
    """Refuse vocab, merges and pattern unless they make one consistent tokenizer."""
    for name, value in (("vocab", vocab), ("merges", merges)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list, not {type(value).__name__}")
    check_pattern(pattern)
    for i, token in enumerate(vocab):
        if not isinstance(token, str):
            raise TypeError(f"token {i} must be a str, not {token!r}")
        if not token:
            raise ValueError(f"token {i} is the empty string")
    if len(set(vocab)) != len(vocab):
        twice = sorted({token for token in vocab if vocab.count(token) > 1})
        raise ValueError(f"tokens appear more than once in vocab: {twice}")
    alphabet_size = len(vocab) - len(merges)
    if alphabet_size < 1:
        raise ValueError(f"{len(merges)} merges but only {len(vocab)} tokens: "
                         f"no room for a base alphabet")
    for i in range(alphabet_size):
        if len(vocab[i]) != 1:
            raise ValueError(f"token {i} {vocab[i]!r} is in the base alphabet (ids 0.."
                             f"{alphabet_size - 1}) but is not a single character")
    ids = {token: i for i, token in enumerate(vocab)}
    for rank, pair in enumerate(merges):
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(part, str) for part in pair)):
            raise TypeError(f"merge {rank} must be a [left, right] pair of strings, "
                            f"not {pair!r}")
        left, right = pair
        new_id = alphabet_size + rank
        for part in (left, right):
            if part not in ids:
                raise ValueError(f"merge {rank} {[left, right]}: part {part!r} is not in vocab")
            if ids[part] >= new_id:
                raise ValueError(f"merge {rank} {[left, right]} uses {part!r} (token "
                                 f"{ids[part]}) before it is made")
        if left + right not in ids:
            raise ValueError(f"merge {rank} {[left, right]} makes {left + right!r}, "
                             f"which is not in vocab")
        if vocab[new_id] != left + right:
            raise ValueError(f"merge {rank} {[left, right]} must make token {new_id}, but "
                             f"token {new_id} is {vocab[new_id]!r}, not {left + right!r}")


def check_fields(data):
    """Refuse parsed JSON unless it holds tokenizer.json's four fields, each of its type."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, not {type(data).__name__}")
    missing = [field for field in FIELDS if field not in data]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    unknown = [field for field in data if field not in FIELDS]
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(unknown)}")
    version, pattern, vocab, merges = (data[field] for field in FIELDS)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"field 'version' must be an integer, not {version!r}")
    if version != FORMAT_VERSION:
        raise ValueError(f"version {version} is not supported "
                         f"(this bpe.py reads version {FORMAT_VERSION})")
    if not isinstance(pattern, str):
        raise TypeError(f"field 'pattern' must be a string, not {type(pattern).__name__}")
    if not isinstance(vocab, dict):
        raise TypeError(f"field 'vocab' must be an object (token -> id), "
                        f"not {type(vocab).__name__}")
    for token, i in vocab.items():
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"vocab id of {token!r} must be an integer, not {i!r}")
    ids = sorted(vocab.values())
    if ids != list(range(len(vocab))):
        missing = sorted(set(range(len(vocab))) - set(ids))
        outside = sorted(set(ids) - set(range(len(vocab))))
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"vocab ids must run 0..{len(vocab) - 1}, each once; missing: "
                         f"{missing[:5]}, outside: {outside[:5]}, repeated: {repeated[:5]}")
    if not isinstance(merges, list):
        raise TypeError(f"field 'merges' must be a list, not {type(merges).__name__}")


def check_text(text, alphabet):
    """Refuse anything but a str whose every character is in the tokenizer's alphabet."""
    if not isinstance(text, str):
        raise TypeError(f"encode takes a str, not {type(text).__name__}")
    for position, char in enumerate(text):
        if char not in alphabet:    # every one-character token is in the base alphabet
            raise ValueError(f"character {char!r} at position {position} is not in the "
                             f"tokenizer's alphabet")


def check_ids(ids, vocab_size):
    """Refuse anything but a list of int ids in 0..vocab_size-1."""
    if not isinstance(ids, list):
        raise TypeError(f"decode takes a list of token ids, not {type(ids).__name__}")
    for position, i in enumerate(ids):
        if isinstance(i, bool) or not isinstance(i, int):  # True is an int in Python; refuse it
            raise TypeError(f"token id at position {position} must be an int, not {i!r}")
        if not 0 <= i < vocab_size:
            raise ValueError(f"token id {i} at position {position} is outside the vocabulary "
                             f"of size {vocab_size} (ids 0..{vocab_size - 1})")


# What `python3 bpe.py` prints (abridged at "..."; the tests check that every
# other line below is printed exactly so):
#
#     base alphabet, 27 characters (ids 0..26): "\n ',.abcdeghiklmnoprstuvwyz"
#     69 merges in rank order (ids 27..95), each with how often its pair occurred when it was merged:
#        0         ' ' + 't' -> ' t'        1899
#        1         'h' + 'e' -> 'he'        1471
#        2         ' ' + 'a' -> ' a'        1329
#        3       ' t' + 'he' -> ' the'      1031
#        4         ' ' + 's' -> ' s'         826
#        5         ' ' + 'b' -> ' b'         729
#        6         'e' + 's' -> 'es'         662
#     ...
#       67         ' ' + 'e' -> ' e'         102
#       68         ' ' + 'r' -> ' r'         102
#     the first story plus its newline, 37 tokens ('|' between tokens):
#     |mia| has| a| red| hat|.| mia| goes| to| the| g|ar|d|en|.| at| the| g|ar|d|en|,| mia| gives| the| hat| to| ava|.| now| ava| has| the| red| hat|.|\n|

if __name__ == "__main__":
    sys.exit(main())
