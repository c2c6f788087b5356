"""What README.md says is true: its excerpts of output, figures, tests, break-its and loop."""
import contextlib
import io
import re
import statistics
import unittest

import model
import trace_block
from test_model import series, tokenizer
from tests import LAB, diagnosis, recorded, shown
from tests.test_mistakes import LN_TERMS, TWELVE, first_line, planted, run_with

README = (LAB / "README.md").read_text(encoding="utf-8")
PROSE = " ".join(README.split())        # line breaks fall anywhere in the README's prose
NUMBERS = {"No": 0, "One": 1, "Two": 2, "Three": 3, "Four": 4}


class ReadmeTests(unittest.TestCase):

    def test_each_excerpt_of_output_is_what_its_command_prints(self):
        prints = {"python3 trace_block.py": "\n".join(trace_block.summary(recorded())),
                  "python3 trace_block.py --show": shown()}
        excerpts = re.findall(r"<!-- output: (.+?) -->\n```\n(.*?)```", README, re.S)
        self.assertEqual(sorted(command for command, _ in excerpts), sorted(prints))
        for command, excerpt in excerpts:
            with self.subTest(command=command):
                lines = prints[command].splitlines()
                stale = [line for line in excerpt.splitlines() if line not in lines]
                if stale:
                    self.fail(f"README.md's output of {command} holds {stale[0]!r}, which it "
                              f"no longer prints; it prints:\n{prints[command]}")

    def test_its_figures_are_the_lab_s(self):
        t = recorded()
        logits, cache = model.forward(series(), tokenizer().encode(t["story"])[:-1])
        row0, spread = cache["x0"][0], statistics.pstdev([v for row in logits for v in row])
        wrong = planted((LN_TERMS, "fsum((term1, -mean_d_xhat))"))
        for phrase in (f"{t['story_tokens']} story tokens, T = {t['shapes']['x0'][0]}",
                       f"Initial loss {t['initial_loss']}, against ln 96 = {t['uniform_loss']}",
                       f"variance {t['layernorm_row0']['variance']}",
                       f"ε = {model.EPS:g} is not negligible: v / (v + ε) = "
                       f"{t['layernorm_row0']['variance']}".replace("e-0", "e-"),
                       f"**{t['parameter_count']:,}**", f"{model.count_params(diagnosis.tiny()):,}",
                       f"gap is {t['order_test']['last_logit_gap_with_positions']}",
                       f"({statistics.pvariance(row0):.5f}, two gauss(0, 0.02) rows added)",
                       f"their spread is about {spread:.2f}", diagnosis.first_wrong(wrong)):
            with self.subTest(phrase=phrase):
                self.assertTrue(phrase in PROSE, f"README.md does not say {phrase!r}")

    def test_the_tests_it_names_exist(self):
        named = set(re.findall(r"`(test_\w+)`", README))
        self.assertGreaterEqual(len(named), 2)
        self.assertEqual(named - {name for _, name in TWELVE}, set())

    def test_the_lesson_s_command_runs_its_twelve_tests_in_its_order(self):
        lesson = ("Recorded.test_recorded_trace Mechanism.test_gradients_match_finite_differences "
                  "Mechanism.test_layernorm_centers_and_scales_each_row "
                  "Mechanism.test_layernorm_backward_with_nonunit_gains "
                  "Mechanism.test_later_token_does_not_change_earlier_logits "
                  "Mechanism.test_unused_positions_get_zero_gradient "
                  "FailureCases.test_without_positions_the_last_position_cannot_see_word_order "
                  "FailureCases.test_earlier_positions_still_differ_without_positions "
                  "FailureCases.test_sequence_longer_than_positions "
                  "FailureCases.test_token_id_outside_vocabulary FailureCases.test_empty_sequence "
                  "FailureCases.test_targets_must_match_positions").split()
        suite = unittest.defaultTestLoader.loadTestsFromName("test_model")  # as -v test_model.py
        self.assertEqual([test.id() for test in suite], [f"test_model.{n}" for n in lesson])

    def test_each_break_it_fails_and_skips_the_tests_it_says(self):
        section = README[README.index("## Break it on purpose"):]
        section = section[:section.index("\n## ", 4)]
        items = re.split(r"\n(?=\d\. )", section)[1:]
        self.assertEqual(len(items), 3)
        for item in items:
            item = " ".join(item.split())
            old, new = re.search(r"change `(.+?)` to `(.+?)`", item).groups()
            failing = NUMBERS[re.search(r"(\w+) tests? fails?", item).group(1)]
            skipping = 2 if "The two word-order tests skip" in item else 0
            opening = re.search(r"(?:opening with|the first names) (forward step \d|\w+)", item)
            with self.subTest(change=new):
                result = run_with(planted((old, new)), TWELVE)
                self.assertEqual((len(result.failures + result.errors), len(result.skipped)),
                                 (failing, skipping))
                self.assertTrue(first_line(result).startswith(opening.group(1)),
                                first_line(result))

    def test_the_training_loop_runs_whole_to_the_loss_it_states(self):      # 8 to 24 s
        loop = re.search(r"```python\n(.*?)```", README, re.S).group(1)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(loop, {"__name__": "readme_loop"})
        first, *_, last = out.getvalue().splitlines()
        at_first = re.search(r"the loss, (\d\.\d+) at first", README).group(1)
        loss, step = re.search(r"falls to (\d\.\d+) by step (\d+)", README).groups()
        said = (f"the loop prints {first!r} and {last!r}, but README.md says the loss is "
                f"{at_first} at first and falls to {loss} by step {step} (after an edit of "
                f"the corpus or the math, run it and restate both)")
        self.assertEqual(f"{float(first.split()[3]):.2f}", at_first, said)
        self.assertTrue(last.startswith(f"step {step}: loss {loss} ("), said)
