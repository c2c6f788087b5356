"""What README.md says is true: its excerpts of output are what the commands print, its
figures are the lab's, the tests and commands it names exist, and its training loop runs."""
import contextlib
import io
import os
import re
import statistics
import unittest

import model
import test_model
import trace_block
from test_model import series, tokenizer
from tests import LAB, recorded, shown

README = (LAB / "README.md").read_text(encoding="utf-8")
PROSE = " ".join(README.split())        # line breaks fall anywhere in the README's prose


class ReadmeTests(unittest.TestCase):

    def test_each_excerpt_of_output_is_what_its_command_prints(self):
        prints = {"python3 trace_block.py": "\n".join(trace_block.summary(recorded())),
                  "python3 trace_block.py --show": shown()}
        excerpts = re.findall(r"<!-- output: (.+?) -->\n```\n(.*?)```", README, re.S)
        self.assertEqual(sorted(command for command, _ in excerpts), sorted(prints))
        for command, excerpt in excerpts:
            with self.subTest(command=command):
                lines = prints[command].splitlines()
                self.assertEqual([line for line in excerpt.splitlines() if line not in lines], [])

    def test_its_figures_are_the_lab_s(self):
        t = recorded()
        logits, cache = model.forward(series(), tokenizer().encode(t["story"])[:-1])
        row0, spread = cache["x0"][0], statistics.pstdev([v for row in logits for v in row])
        for phrase in (f"{t['story_tokens']} story tokens, T = {t['shapes']['x0'][0]}",
                       f"Initial loss {t['initial_loss']}, against ln 96 = {t['uniform_loss']}",
                       f"variance {t['layernorm_row0']['variance']}",
                       f"**{t['parameter_count']:,}**", f"{model.count_params(test_model.tiny()):,}",
                       f"its gap is {t['order_test']['last_logit_gap_with_positions']}",
                       f"({statistics.pvariance(row0):.5f}, two gauss(0, 0.02) rows added)",
                       f"their spread is about {spread:.2f}"):
            with self.subTest(phrase=phrase):
                self.assertTrue(phrase in PROSE, f"README.md does not say {phrase!r}")

    def test_the_tests_and_commands_it_names_exist(self):
        named = set(re.findall(r"`(test_\w+)`", README))
        self.assertGreaterEqual(len(named), 3)
        self.assertEqual(named - set(dir(test_model.Mechanism)) - set(dir(test_model.Recorded))
                         - set(dir(test_model.FailureCases)), set())
        for flag in set(re.findall(r"trace_block\.py (--\w+)", README)):
            self.assertIn(flag, ("--json", "--check", "--write", "--show", "--time"))

    def test_the_training_loop_runs_as_it_stands(self):
        """The README's loop, from its text, made small: 4 steps of 8 tokens, the first stories."""
        loop = re.search(r"```python\n(.*?)```", README, re.S).group(1)
        for size, small in (("300, 32, 0.5", "4, 8, 0.5"), ("step % 50 == 0", "step % 2 == 0"),
                            ("read_corpus()", "read_corpus()[:3000]")):    # its first stories
            self.assertEqual(loop.count(size), 1, f"the loop no longer holds {size!r}")
            loop = loop.replace(size, small)
        self.assertLessEqual(len(loop.strip().splitlines()), 15)
        here, out = os.getcwd(), io.StringIO()
        try:
            os.chdir(LAB)
            with contextlib.redirect_stdout(out):
                exec(loop, {"__name__": "readme_loop"})
        finally:
            os.chdir(here)
        self.assertEqual([line.split(":")[0] for line in out.getvalue().splitlines()],
                         ["step 2", "step 4"])
