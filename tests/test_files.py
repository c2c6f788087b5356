"""Faults: whatever happens to the lab's files, its output or its writes, the lab never answers
wrongly without a word, keeps every file whole, and says what went wrong in one line."""
import contextlib
import io
import json
import os
import sys
import unittest
from unittest import mock

import bpe
import trace_block
from test_model import ball, tiny
from tests import LAB, lab_copy, run_main, the_recorded_trace

CORPUS = (LAB / "corpus.txt").read_bytes()
FIRST = CORPUS[:CORPUS.index(b"\n")]
TOKENIZER = (LAB / "tokenizer.json").read_bytes()


class FailingOutput(io.BytesIO):
    """A standard output whose writes fail with OSError(number, why): 32 a closed pipe, 28 full."""

    def __init__(self, number, why):
        super().__init__()
        self.error = (number, why)

    def write(self, data):
        raise (BrokenPipeError if self.error[0] == 32 else OSError)(*self.error)


class FileTests(unittest.TestCase):

    def assert_one_line(self, code, out, err, *parts):
        """A failed command: exit 1, nothing on stdout, one line on stderr holding parts."""
        self.assertEqual((code, out, len(err.strip().splitlines())), (1, "", 1), err)
        self.assertNotIn("Traceback", err)
        for part in parts:
            self.assertIn(part, err)

    def test_problems_with_the_lab_s_files_are_one_line(self):
        cases = [  # (files changed, command, arguments, what the line must say)
            ({"tokenizer_json": b"{ not json"}, trace_block.main, ["--check"],
             ["tokenizer.json is not plain JSON", "python3 bpe.py --write"]),
            ({"tokenizer_json": TOKENIZER.replace(b'"version": 1,', b'"version": 1, "version": 1,')},
             trace_block.main, [], ["'version' appears twice"]),
            ({"tokenizer_json": TOKENIZER.replace(b'"version": 1', b'"version": 1' + b"0" * 5000)},
             trace_block.main, ["--show"], ["too long"]),
            ({"tokenizer_json": b"\xff\xfe"}, trace_block.main, [], ["not UTF-8 text"]),
            ({"tokenizer_json": None}, trace_block.main, ["--write"],
             ["tokenizer.json: no such file", "python3 bpe.py --write"]),
            ({"corpus_txt": b""}, trace_block.main, [], ["corpus.txt is empty"]),
            ({"corpus_txt": FIRST}, bpe.main, ["--write"], ["line 1 does not end with a newline"]),
            ({"corpus_txt": b"mia \xe9\n"}, bpe.main, [], ["corpus.txt is not UTF-8 text"]),
            ({"corpus_txt": b"\xef\xbb\xbf" + CORPUS}, trace_block.main, [], ["byte-order mark"]),
            ({"corpus_txt": CORPUS.replace(b"\n", b"\r\n")}, bpe.main, ["--check"],
             ["corpus.txt line 1 ends with \\r\\n"]),
            ({"corpus_txt": None}, bpe.main, ["--write"], ["corpus.txt: no such file"]),
            ({"corpus_txt": b"mia has a hat.\n"}, bpe.main, ["--write"], ["no pair left to merge"]),
            ({"corpus_txt": FIRST + b" mia has a red hat." * 6 + CORPUS[len(FIRST):]},
             trace_block.main, [], ["corpus.txt line 1: the first story is", "from 2 to 65"]),
            ({"corpus_txt": b"Mia" + CORPUS[3:]}, trace_block.main, [],
             ["corpus.txt line 1: character 'M'"]),
            ({"corpus_txt": FIRST + b"\nmia has 3 hats.\n"}, trace_block.main, ["--time"],
             ["corpus.txt line 2: character '3'"])]
        for files, main, args, parts in cases:
            with self.subTest(files=str(files)[:60], args=args), lab_copy(**files):
                self.assert_one_line(*run_main(main, *args), *parts)

    def test_check_compares_bytes_and_names_what_differs(self):
        t = json.loads(recorded := (LAB / "block-trace.json").read_bytes())
        t["layernorm_row0"]["mean"] = -0.0
        for expected, data in {
                "its line ends are \\r\\n": recorded.replace(b"\n", b"\r\n"),
                "layernorm_row0.mean: -0.0 -> 0.0": trace_block.to_json(t).encode(),
                "not UTF-8": b"\xff" + recorded, "nested too deep": b"[" * 100_000,
                "more than 1,000,000 bytes": b" " * 1_000_001,
                "the layout differs": recorded.replace(b'  "story"', b'"story"'),
                "'story' appears twice": recorded.replace(b'  "story"', b'  "story": 1,\n  "story"'),
                "too long": recorded.replace(b'"vocab_size": 96', b'"vocab_size": 96' + b"0" * 5000),
        }.items():
            with self.subTest(case=expected), lab_copy(block_trace_json=data):
                ok, message = trace_block.check(figures=json.loads(recorded))
                self.assertFalse(ok)
                self.assertIn(expected, message)

    def test_a_folder_where_a_file_belongs_is_one_line(self):
        for name, runs in (("tokenizer.json", [(trace_block.main, ["--show"]), (bpe.main, ["--write"])]),
                           ("corpus.txt", [(trace_block.main, ["--time"]), (bpe.main, ["--check"])]),
                           ("block-trace.json", [(trace_block.main, ["--write"])])):
            for main, args in runs:
                with self.subTest(file=name, command=[main.__module__] + args), \
                        lab_copy(**{name.replace(".", "_").replace("-", "_"): None}) as folder, \
                        the_recorded_trace():          # --write: not about the figures
                    (folder / name).mkdir()
                    self.assert_one_line(*run_main(main, *args), name)

    def test_a_tokenizer_that_does_not_fit_the_trace_s_sentences_is_one_line(self):
        without_w = bpe.Tokenizer.train(FIRST.decode().replace("w", "") + "\n", 40)
        seventy = bpe.Tokenizer.train(bpe.read_corpus(), 70)    # more tokens to a sentence
        for tok, words in ((without_w, ["tokenizer.json cannot encode 'now mia gives the hat to "
                                        "leo.'", "python3 bpe.py --write"]),
                           (seventy, ["'mia has a red ball.'", "(9 at most)", "(its --check)"])):
            with self.subTest(vocab=len(tok.vocab)), lab_copy(tokenizer_json=tok.to_json().encode()):
                self.assert_one_line(*run_main(trace_block.main, "--show"), *words)

    def test_a_write_that_fails_leaves_the_old_file_and_no_other(self):
        denied = PermissionError(13, "Permission denied")
        failures = [(mock.patch.object(os, "replace", side_effect=denied), "Permission denied"),
                    (mock.patch.object(os, "replace", side_effect=KeyboardInterrupt), None)]
        for patch, why in failures:
            for main, name in ((trace_block.main, "block-trace.json"), (bpe.main, "tokenizer.json")):
                with self.subTest(file=name, why=why), lab_copy() as folder, patch, \
                        the_recorded_trace():
                    self.assert_one_line(*run_main(main, "--write"), f"cannot write {folder / name}: "
                                         f"{why}; the old file is unchanged" if why else "interrupted")
                    self.assertEqual((folder / name).read_bytes(), (LAB / name).read_bytes())
                    self.assertEqual(len(os.listdir(folder)), 3, "a temporary file was left")
        for second, why in (("no/such.txt", "No such file"), ("a_folder", "Is a directory")):
            with self.subTest(second=second), lab_copy() as folder:   # two files: the first is kept
                (folder / "a_folder").mkdir()
                with self.assertRaisesRegex(bpe.FileProblem, f"{second}: {why}"):
                    bpe.write_texts({folder / "corpus.txt": "", folder / second: ""})
                self.assertEqual((folder / "corpus.txt").read_bytes(), CORPUS)
                self.assertEqual(len(os.listdir(folder)), 4, "a temporary file was left")

    def test_a_full_a_closed_or_an_abandoned_standard_output(self):
        full = "cannot write to standard output: No space left on device\n"
        for case, stdout, main, args, message in (
                ("> /dev/full", FailingOutput(28, "No space left on device"), bpe.main, [], full),
                ("--help > /dev/full", FailingOutput(28, "No space left on device"),
                 trace_block.main, ["--help"], full),   # its text flushed after argparse exits
                ("| head", FailingOutput(32, "Broken pipe"), bpe.main, [], ""),   # reader stopped
                ("1>&-", None, bpe.main, [], "cannot print: standard output is closed\n")):
            err = io.StringIO()
            with self.subTest(case=case), contextlib.redirect_stderr(err), mock.patch.object(
                    sys, "stdout", stdout and io.TextIOWrapper(stdout, encoding="utf-8")):
                self.assertEqual((main(args), err.getvalue()), (1, message))

    def test_a_terminal_that_cannot_print_a_letter_gets_an_escape_or_a_picture_s_stand_in(self):
        corpus = FIRST.replace(b"garden", b"jard\xc3\xa9n") + CORPUS[len(FIRST):]
        tok = bpe.Tokenizer.train(corpus.decode(), 96)
        with lab_copy(corpus_txt=corpus, tokenizer_json=tok.to_json().encode()):
            for main, args, seen in ((bpe.main, [], b"\\xe9"),
                                     (trace_block.main, ["--show"], b"|###")):
                raw = io.BytesIO()
                ascii_only = io.TextIOWrapper(raw, encoding="ascii")
                with self.subTest(command=main.__module__), mock.patch.object(sys, "stdout",
                                                                              ascii_only):
                    self.assertEqual(main(args), 0)
                    ascii_only.flush()
                    self.assertIn(seen, raw.getvalue())
        self.assertEqual("jardén █▌".encode("ascii", "trace_block"), b"jard\\xe9n #4")  # ▌: 4/8


class NumberTests(unittest.TestCase):

    def test_the_gradient_check_nudges_a_copy_of_p_never_p_itself(self):
        """p is left as it was even when the loss raises mid-way, and tuples can be nudged."""
        p, x, y = tiny(), ball()[:2], ball()[1:3]      # two positions: quick
        before, some = json.dumps(p), {"b2": tuple(p["b2"]), "Wo": [*map(tuple, p["Wo"])]}
        self.assertEqual(trace_block.numeric_gradients({**p, **some}, x, y, names=list(some)),
                         trace_block.numeric_gradients(p, x, y, names=list(some)))
        loss = trace_block.loss_and_relu_pattern(p, x, y)
        for stop in (RuntimeError("the loss failed"), KeyboardInterrupt()):
            # the 7th loss raises, mid-way through the 4th entry
            with self.subTest(stop=type(stop).__name__), mock.patch.object(
                    trace_block, "loss_and_relu_pattern", side_effect=[loss] * 6 + [stop]), \
                    self.assertRaises(type(stop)):
                trace_block.numeric_gradients(p, x, y)
            self.assertEqual(json.dumps(p), before, "a nudged entry was not put back")
