"""Faults a learner or teacher meets: a lab file missing, empty or damaged is named in one line
with what to do; a write that fails leaves the old file whole; a terminal that lacks a letter
gets an escape, and the pictures ASCII stand-ins."""
import io
import os
import sys
import unittest
from unittest import mock

import bpe
import model
import test_model
import trace_block
from tests import LAB, diagnosis, lab_copy, run_main, the_recorded_trace

CORPUS = (LAB / "corpus.txt").read_bytes()
FIRST = CORPUS[:CORPUS.index(b"\n")]
CRLF_AT_3 = CORPUS.replace(b"\n", b"\r\n", 3).replace(b"\r\n", b"\n", 2)    # line 3 alone


class FileTests(unittest.TestCase):

    def assert_one_line(self, code, out, err, *parts):
        """A failed command: exit 1, nothing on stdout, one line on stderr holding parts."""
        self.assertEqual((code, out, len(err.strip().splitlines())), (1, "", 1), err)
        for part in parts:
            self.assertIn(part, err)

    def test_a_lab_file_that_cannot_be_used_is_named_in_one_line_with_what_to_do(self):
        """(Missing: tokenizer.json in the twelve's test below, block-trace.json in test_trace.)"""
        without_w = bpe.Tokenizer.train(FIRST.decode().replace("w", "") + "\n", 40)
        seventy = bpe.Tokenizer.train(CORPUS.decode(), 70)    # more tokens to a sentence
        cases = [  # (files changed, command, arguments, what the line must say)
            ({"tokenizer_json": b"{ not json"}, trace_block.main, ["--check"],
             ["tokenizer.json is not plain JSON", "python3 bpe.py --write"]),
            ({"tokenizer_json": without_w.to_json().encode()}, trace_block.main, ["--show"],
             ["tokenizer.json cannot encode the trace's sentences", "make_corpus.py --check"]),
            ({"tokenizer_json": seventy.to_json().encode()}, trace_block.main, ["--show"],
             ["'mia has a red ball.'", "the third at most 9", "make_corpus.py --check pass?"]),
            ({"corpus_txt": b""}, trace_block.main, [],
             ["corpus.txt is empty", "tools/make_corpus.py"]),
            ({"corpus_txt": FIRST}, bpe.main, ["--write"], ["line 1 does not end with a newline"]),
            ({"corpus_txt": b"mia \xe9\n"}, bpe.main, [],
             ["corpus.txt is not UTF-8", "save it as UTF-8"]),
            ({"corpus_txt": b"\xef\xbb\xbf" + CORPUS}, trace_block.main, [], ["byte-order mark"]),
            ({"corpus_txt": CRLF_AT_3}, bpe.main, ["--check"],
             ["corpus.txt line 3 ends with \\r\\n", "save it with LF"]),
            ({"corpus_txt": b"mia has a hat.\n"}, bpe.main, ["--write"],
             ["no pair left to merge"]),
            ({"corpus_txt": FIRST + b" mia has a red hat." * 6 + CORPUS[len(FIRST):]},
             trace_block.main, [], ["corpus.txt line 1 (the first story) holds", "from 2 to 65"]),
            ({"corpus_txt": b"Mia" + CORPUS[3:]}, trace_block.main, [],
             ["corpus.txt line 1 (the first story): character 'M'", "python3 bpe.py --check"]),
            ({"block_trace_json": b""}, trace_block.main, ["--check"],
             ["block-trace.json is empty: python3 trace_block.py --write"])]
        for files, main, args, parts in cases:
            with self.subTest(files=str(files)[:60], args=args), lab_copy(**files):
                self.assert_one_line(*run_main(main, *args), *parts)
        with lab_copy(tokenizer_json=None) as folder:     # a folder where the file belongs
            (folder / "tokenizer.json").mkdir()
            self.assert_one_line(*run_main(bpe.main, "--check"), "cannot use", "tokenizer.json")
        with self.assertRaisesRegex(ValueError, r"^the tokenizer given gives .*third at most 9$"):
            trace_block.trace(tok=seventy)      # a program's own: not blamed on tokenizer.json
        with self.assertRaisesRegex(TypeError, "^the tokenizer given is a str: a story goes in story="):
            trace_block.trace("mia has a red hat.\n")      # the story, given as tok

    def test_the_twelve_fail_once_and_first_name_the_lab_file_not_a_lesson_function(self):
        from tests.test_mistakes import first_line, run_with
        trace = (LAB / "block-trace.json").read_bytes()
        for files, said, then in (
                ({"tokenizer_json": None}, "FileNotFoundError: [Errno 2] No such",
                 "tokenizer.json'. Run: python3 bpe.py --write"),
                ({"corpus_txt": None}, "FileNotFoundError: [Errno 2] No such",
                 "corpus.txt'. Run: python3 tools/make_corpus.py"),
                ({"block_trace_json": trace.replace(b"\n", b"\r\n")},
                 "block-trace.json has \\r\\n (Windows) line ends", "save it with LF")):
            with self.subTest(said=said), lab_copy(**files):
                test_model.tokenizer.cache_clear()      # read afresh, from the copy
                result = run_with(model, test_model.TWELVE)
                self.assertTrue(first_line(result).startswith(said), first_line(result))
                self.assertIn(then, first_line(result))
                self.assertEqual(len(result.failures + result.errors), 1)
        test_model.tokenizer.cache_clear()      # the lab's own again, for the tests after

    def test_a_write_that_fails_leaves_the_old_file_and_no_other(self):
        denied = PermissionError(13, "Permission denied")
        for main, name in ((trace_block.main, "block-trace.json"), (bpe.main, "tokenizer.json")):
            with self.subTest(file=name), lab_copy() as folder, the_recorded_trace(), \
                    mock.patch.object(os, "replace", side_effect=denied):
                self.assert_one_line(*run_main(main, "--write"), f"cannot write {folder / name}: "
                                     f"Permission denied; no file was changed")
                self.assertEqual((folder / name).read_bytes(), (LAB / name).read_bytes())
                self.assertEqual(len(os.listdir(folder)), 3, "a temporary file was left")
        with lab_copy() as folder:          # two files, the second cannot be written: neither
            (folder / "b").mkdir()          # a folder in its place: the first is put back
            for second in (folder / "no" / "b.txt", folder / "b"):
                with self.assertRaises(bpe.FileProblem):
                    bpe.write_texts({folder / "corpus.txt": "new\n", second: "b"})
                self.assertEqual(((folder / "corpus.txt").read_bytes(), len(os.listdir(folder))),
                                 (CORPUS, 4))

    def test_a_damaged_tests_reference_json_is_named_not_a_lesson_function(self):
        with lab_copy() as folder:
            path = folder / "reference.json"    # missing, then empty, then not JSON
            for data in (None, b"", b'{"init_params'):
                if data is not None:
                    path.write_bytes(data)
                with self.subTest(data=data), mock.patch.object(diagnosis, "REFERENCE", path):
                    found = diagnosis.first_wrong(model)
                    self.assertTrue(found.startswith("tests/reference.json cannot be used ("),
                                    found)
                    self.assertTrue(found.endswith("(or git checkout tests/reference.json)"))

    def test_a_terminal_that_cannot_print_a_letter_gets_an_escape_or_a_stand_in(self):
        corpus = FIRST.replace(b"garden", b"jard\xc3\xa9n") + CORPUS[len(FIRST):]
        tok = bpe.Tokenizer.train(corpus.decode(), 96)
        with lab_copy(corpus_txt=corpus, tokenizer_json=tok.to_json().encode()):
            for main, args, seen in ((bpe.main, [], b"\\xe9"),
                                     (trace_block.main, ["--show"], b"|%%%%")):
                raw = io.BytesIO()
                ascii_only = io.TextIOWrapper(raw, encoding="ascii")
                with self.subTest(command=main.__module__), \
                        mock.patch.object(sys, "stdout", ascii_only):
                    self.assertEqual(main(args), 0)
                    ascii_only.flush()
                    self.assertIn(seen, raw.getvalue())
