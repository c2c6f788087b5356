"""bpe.py: the BPE steps, training, encoding, decoding, the lab's files."""
import doctest
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import bpe
from test_model import tokenizer
from tests import LAB, lab_copy, run_main, tool_module

try:                                # optional: Hugging Face's tokenizers, where installed
    import tokenizers
except ImportError:
    tokenizers = None

FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, mia gives the hat "
               "to ava. now ava has the red hat.")


def load_tests(loader, tests, pattern):
    tests.addTests(doctest.DocTestSuite(bpe))
    return tests


class TrainingTests(unittest.TestCase):

    def test_a_pattern_and_size_of_one_s_own(self):     # aaabdaaabac: bpe.py's doctests
        self.assertEqual(bpe.Tokenizer.train("ab ab", 4, r"\S+|\s").pattern, r"\S+|\s")
        self.assertEqual(bpe.Tokenizer.train("abc", 3).vocab, ["a", "b", "c"])   # no merge at all

    def test_a_tie_goes_to_the_pair_with_the_smallest_left_then_right_id(self):
        for text, size, merges, counts in (     # (4, 0) against (0, 1): bpe.py's doctests
                ("cdab", 5, [(0, 1)], [1]),                    # (0, 1) comes last, and wins
                ("acab", 4, [(0, 1)], [1])):                   # left ids tie: right decides
            with self.subTest(text=text):
                self.assertEqual(bpe.learn_merges(text, size)[1:], (merges, counts))

    def test_encode_applies_merges_in_the_order_they_were_learned_within_each_chunk(self):
        ab_first = bpe.Tokenizer(["a", "b", "c", "ab", "bc"], [("a", "b"), ("b", "c")])
        bc_first = bpe.Tokenizer(["a", "b", "c", "bc", "ab"], [("b", "c"), ("a", "b")])
        spaces = bpe.Tokenizer(["a", " ", "  ", " a"], [(" ", " "), (" ", "a")])  # "a", " ", " a"
        self.assertEqual((ab_first.tokens("abc"), bc_first.tokens("abc"), spaces.tokens("a  a")),
                         (["ab", "c"], ["a", "bc"], ["a", " ", " a"]))   # not "a", "  ", "a"

    def test_chunks_cover_the_text_and_every_token_lies_in_one(self):
        corpus = bpe.read_corpus(LAB / "corpus.txt")
        for text in (corpus, "", " ", "   ", "\n\n", "a  b", " .,\n x ", "mia, hat.\n"):
            with self.subTest(text=text[:30]):
                self.assertEqual("".join(bpe.split_chunks(text)), text)
        self.assertEqual([t for t in tokenizer().vocab if bpe.split_chunks(t) != [t]], [])

    def test_decode_gives_back_the_text(self):
        tok = tokenizer()
        for text in ("", "m", ".", "\n", "    ", " \n  \n\n   ", "mia  has   a red hat .\n\n",
                     ",.,. ,", FIRST_STORY + "\n", bpe.read_corpus(LAB / "corpus.txt")[:3000]):
            with self.subTest(text=text[:30]):
                self.assertEqual(tok.decode(tok.encode(text)), text)
                self.assertEqual(tok.decode(iter(tok.encode(text))), text)


class TheLabsTokenizerTests(unittest.TestCase):

    def test_the_corpus_and_the_sentences_of_the_spec(self):
        corpus, tok = bpe.read_corpus(LAB / "corpus.txt"), tokenizer()
        stories = corpus[:-1].split("\n")
        self.assertEqual(stories[0], FIRST_STORY)
        self.assertEqual([s for s in stories if not s.endswith(".") or s != s.lower()], [])
        self.assertEqual(tok.vocab[:tok.alphabet_size], sorted(set(corpus)))
        self.assertEqual((len(tok.vocab), len(tok.encode(FIRST_STORY + "\n"))), (96, 37))
        a = tok.tokens("now mia gives the hat to leo.")
        self.assertEqual(a, ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."])
        self.assertEqual(tok.tokens("now leo gives the hat to mia."),
                         [{" mia": " leo", " leo": " mia"}.get(t, t) for t in a])
        hat, ball = tok.tokens("mia has a red hat."), tok.tokens("mia has a red ball.")
        self.assertEqual((hat[:4], ball[:4]), (["mia", " has", " a", " red"],) * 2)
        self.assertNotEqual(ball[4], hat[4])
        self.assertLessEqual(len(ball), 9)

    def test_make_corpus_check_names_each_of_its_three_files_that_it_would_write_otherwise(self):
        tool = tool_module("make_corpus")
        self.assertIn(FIRST_STORY + "\n", tool.SPLITS)     # --check holds SPLITS and IDS
        with lab_copy() as folder:
            tool.QUOTAS_PATH = str(folder / "quotas.json")
            (folder / "quotas.json").write_bytes((LAB / "tools" / "quotas.json").read_bytes())
            code, _, err = run_main(tool.main, "--check")
            self.assertEqual(code, 0, err)      # corpus.txt is what it writes from tools/
            with mock.patch.dict(tool.IDS, {" hat": 78}):   # the files match, the IDs do not
                code, _, err = run_main(tool.main, "--check")
            self.assertIn("the stored quotas do not keep the lesson's IDs (' hat' +1)", err)
            for name, added in (("corpus.txt", b"\n"), ("quotas.json", b"\n"),
                                ("tokenizer.json", b"\n"), ("corpus.txt", b"sam has a kite.\n")):
                with self.subTest(file=name, added=added):
                    kept = (folder / name).read_bytes()
                    (folder / name).write_bytes(kept + added)
                    code, _, err = run_main(tool.main, "--check")
                    (folder / name).write_bytes(kept)
                    self.assertEqual(code, 1)
                    self.assertIn(f"{name}; run: python3 tools/make_corpus.py", err)
                    self.assertEqual("belongs in tools/stories.txt" in err, b"kite" in added)
            stored = json.loads((folder / "quotas.json").read_text("utf-8"))
            stored["quotas"]["lead:mia"] += 1               # raised
            stored["quotas"]["lead:leoo"] = 47              # misspelt
            (folder / "quotas.json").write_text(json.dumps(stored), "utf-8")
            code, out, err = run_main(tool.main, "--check")
            self.assertIn("tools/quotas.json: lead:leoo: no steered word", out)
            if "do not keep the lesson's IDs" not in err:   # a teacher's corpus may move an ID
                self.assertIn("corpus.txt, ", err)
                self.assertIn("quotas.json; run: python3 tools/make_corpus.py\n", err)

    def test_make_corpus_refuses_a_line_of_tools_that_it_cannot_use_and_names_it(self):
        tool = tool_module("make_corpus")
        plots = (LAB / "tools" / "plots.txt").read_text("utf-8")
        bad_plots = [  # (an edit of plots.txt, what its refusal says)
            (("@thing hat", "@things hat"), "plots.txt: no word list for ['thing']"),
            (("| blue", "| Blue"), "plots.txt line 27: characters outside the alphabet ['B']"),
            (("| grinning, {give:b:o:a}", "| grinning, {give:b:o:a} |"),
             "plots.txt line 49: an empty way of saying a sentence"),
            (("== zoo 1", "== empty 1\n== zoo 1"), "plots.txt: the plot empty has no sentences"),
            (("@colour ", "@colour red | blue\n@colour "),
             "plots.txt line 28: a second word list for colour"),
            (("hands-to hands-y", "hands-to hands-x"), "give's words are among gives-to, "),
            (("a shiny {c} {o}.", "a shiny {c} {o}"),
             "plots.txt line 39: '{a} {has} a shiny {c} {o}': a sentence ends with a full stop"),
            (("a shiny {c} {o}.", "a shiny {c} {hat}."), "plots.txt line 39: unknown fields"),
            (("@at at | by", "@at at"), "plots.txt line 30: a kind needs other words after '|'"),
            (("== zoo 1", "== zoo one"), "a plot starts with '== name' or '== name weight'"),
            (("== first_like 6", "mia has a hat.\n== first_like 6"),
             "plots.txt line 38: a sentence before the first '== name' line")]
        cases = [(tool.read_plots, "plots.txt", plots.replace(*edit), said)
                 for edit, said in bad_plots]
        cases += [(tool.read_stories, "stories.txt", "Mia has a hat.\n",
                   "stories.txt line 1: 'Mia': a story is written in lower case"),
                  (tool.read_stories, "stories.txt", "sam  has a kite.\n",
                   "stories.txt line 1: spaces at the story's ends or two in a row"),
                  (tool.read_stories, "stories.txt", "sam has a kite\n",
                   "stories.txt line 1: a story ends with a full stop"),
                  (tool.read_stories, "stories.txt", "", "stories.txt is empty: take "),
                  (tool.read_stories, "stories.txt", "sam has a kite.\n".encode("utf-16"),
                   "stories.txt is not UTF-8 (byte 0): save it as UTF-8"),
                  *[(tool.read_quotas, "quotas.json", f'{{"quotas": {{"colour:red": {n}}}}}',
                     "quotas.json: the quota of colour:red is not a whole number from 0 up")
                    for n in (3.5, -5)],
                  (tool.read_quotas, "quotas.json", '{"quota": {}}', 'no "quotas" object'),
                  (lambda path: tool.read_quotas(path + ".gone"), "quotas.json", "{}",
                   "quotas.json.gone: no such file: take tools/quotas.json.gone from"),
                  (tool.read_quotas, "quotas.json", "", "empty: take tools/quotas.json from"),
                  (lambda path: tool.read_stories(path + ".gone"), "stories.txt", "",
                   "stories.txt.gone: no such file: take ")]
        for read, name, text, said in cases:
            with self.subTest(said=said), tempfile.TemporaryDirectory() as folder:
                data = text if isinstance(text, bytes) else text.encode("utf-8")
                Path(folder, name).write_bytes(data)
                with self.assertRaises(bpe.FileProblem) as refused:
                    read(os.path.join(folder, name))
                self.assertIn(said, str(refused.exception))

    @unittest.skipIf(tokenizers is None, "Hugging Face tokenizers is not installed")
    def test_hugging_face_tokenizers_encodes_the_corpus_as_bpe_py_does(self):
        """A tokenizers BPE built from tokenizer.json's vocab, merges and pattern (a regular
        expression that isolates each chunk) gives the corpus the same IDs as bpe.py."""
        data = json.loads((LAB / "tokenizer.json").read_text(encoding="utf-8"))
        theirs = tokenizers.Tokenizer(tokenizers.models.BPE(
            data["vocab"], [tuple(pair) for pair in data["merges"]]))
        theirs.pre_tokenizer = tokenizers.pre_tokenizers.Split(
            tokenizers.Regex(data["pattern"]), behavior="isolated")
        corpus = bpe.read_corpus(LAB / "corpus.txt")
        for text in (corpus, FIRST_STORY + "\n", "a  b", " .,\n a ", "mia, hat.\n\n", "   "):
            with self.subTest(text=text[:30]):
                self.assertEqual(theirs.encode(text).ids, tokenizer().encode(text))

    def test_retraining_writes_tokenizer_json_byte_for_byte(self):
        self.assertIn("up to date", run_main(bpe.main, "--check")[1])  # else: which line differs
        with lab_copy(tokenizer_json=b"stale\n") as folder:
            self.assertEqual(run_main(bpe.main, "--write")[:2],
                             (0, f"wrote {folder / 'tokenizer.json'}: 96 tokens\n"))
            self.assertEqual((folder / "tokenizer.json").read_bytes(),
                             (LAB / "tokenizer.json").read_bytes())

    def test_check_says_what_is_stale_or_missing_and_the_command_that_fixes_it(self):
        lines = (LAB / "tokenizer.json").read_bytes().splitlines(True)
        for files, words in (
                ({"tokenizer_json": b"".join(lines[:98])},                      # cut short
                 ["its line 99 is '(the end)', trained now '    \"", "python3 bpe.py --write"]),
                ({"tokenizer_json": b"".join(lines).replace(b"\n", b"\r\n")},    # Windows
                 ["its line 1 is '{\\r\\n', trained now '{\\n'"]),
                ({"tokenizer_json": None}, ["No such file", ". Run: python3 bpe.py --write"]),
                ({"corpus_txt": None}, ["No such file", ". Run: python3 tools/make_corpus.py"])):
            with self.subTest(words=words[0]), lab_copy(**files):
                code, out, err = run_main(bpe.main, "--check")
                self.assertEqual(code, 1)
                for part in words:
                    self.assertIn(part, err)

    def test_python3_bpe_py_into_a_reader_that_stops_early_ends_quietly(self):    # | head -1
        read, write = os.pipe()
        os.close(read)          # the reader has gone before the first line
        buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}   # as usual
        done = subprocess.run([sys.executable, str(LAB / "bpe.py")], stdout=write,
                              stderr=subprocess.PIPE, env=buffered)
        os.close(write)
        self.assertEqual((done.returncode, done.stderr.decode()), (1, ""))

    def test_the_demo_prints_the_lines_pasted_at_the_end_of_bpe_py(self):
        source = (LAB / "bpe.py").read_text(encoding="utf-8")
        pasted = [line[6:] for line in source[source.index("# Lines that `python3 bpe.py` prints"):]
                  .splitlines() if line.startswith("#     ")]
        code, out, _ = run_main(bpe.main)
        self.assertEqual((code, [line for line in pasted if line not in out.splitlines()]), (0, []))
        self.assertGreaterEqual(len(pasted), 2)

    def test_load_reads_ids_and_pattern_from_the_file_and_refuses_one_that_is_not_a_tokenizer(self):
        data = json.loads((LAB / "tokenizer.json").read_text(encoding="utf-8"))
        vocab, merges, A = data["vocab"], data["merges"], tokenizer().alphabet_size
        swapped = [merges[1], merges[0]] + merges[2:]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "tokenizer.json"
            not_ours = f"{path} is not a tokenizer that bpe.py writes"
            fields = f"{not_ours} (its fields are not version 1, a pattern, a vocab and merges)"
            for case, content, message in (    # empty, not JSON, not UTF-8: test_files
                    ("a list", [], fields),
                    ("merges missing", {k: v for k, v in data.items() if k != "merges"}, fields),
                    ("vocab a list", {**data, "vocab": list(vocab)}, fields),
                    ("version 2", {**data, "version": 2}, fields),
                    ("an ID given twice", {**data, "vocab": {**vocab, "z": 25}},
                     f"{not_ours} (its vocab's IDs are not 0 to 95, each once)"),
                    ("merges 0 and 1 swapped", {**data, "merges": swapped},
                     f"{not_ours} (merge 0 {merges[1]} does not make token {A}, "
                     f"{tokenizer().vocab[A]!r})")):
                path.write_text(json.dumps(content), encoding="utf-8")
                with self.subTest(case=case):
                    with self.assertRaises(bpe.FileProblem) as refused:
                        bpe.Tokenizer.load(path)
                    self.assertEqual(str(refused.exception), message)
            path.write_text(json.dumps(dict(data, vocab=dict(sorted(vocab.items())), pattern=".")))
            self.assertEqual(vars(bpe.Tokenizer.load(path)), {**vars(tokenizer()), "pattern": "."})
            self.assertEqual(bpe.Tokenizer.load(path).tokens("mia"), ["m", "i", "a"])  # "."

    def test_refusals_of_the_bpe_steps(self):
        tok = tokenizer()
        for case, call, exception, message in (
                ("below the alphabet", lambda: bpe.Tokenizer.train("abc", 2), ValueError,
                 "smaller than the base alphabet"),
                ("encode 'Mia'", lambda: tok.encode("Mia"), ValueError, "'M' at position 0"),
                ("encode bytes", lambda: tok.encode(b"mia"), TypeError,
                 "text must be a str, not a bytes"),
                *[(f"decode {i}", lambda i=i: tok.decode([0, i]), ValueError,
                   "outside the vocabulary") for i in (96, -1)],
                ("decode 96 twice", lambda: tok.decode([96, 96, -1]), ValueError,
                 r"size 96: \[96, -1\]$"),        # each offender once, as forward says them
                ("decode True", lambda: tok.decode([0, True]), TypeError, "not one holding True")):
            with self.subTest(case=case), self.assertRaisesRegex(exception, message):
                call()
