"""trace_block.py: the figures block-trace.json holds, the command line, and the pictures."""
import doctest
import math
import unittest
from unittest import mock

import model
import trace_block
from test_model import series, tokenizer
from tests import LAB, lab_copy, recorded, run_main, run_script, shown, the_recorded_trace
from tests.test_mistakes import MASK, planted


def load_tests(loader, tests, pattern):
    tests.addTests(doctest.DocTestSuite(trace_block))
    return tests


class TraceTests(unittest.TestCase):

    def test_the_recorded_trace_holds_the_figures_the_spec_names(self):
        """(test_recorded_trace holds the file to the code; this, to the series' specification.)"""
        t = recorded()
        self.assertEqual(list(t), "story story_tokens series_config vocab_size parameter_count "
                         "parameters_by_tensor shapes initial_loss uniform_loss layernorm_row0 "
                         "order_test gradient_check".split())
        self.assertEqual((t["story_tokens"], t["vocab_size"], t["parameter_count"]), (37, 96, 7440))
        self.assertEqual(t["parameters_by_tensor"], {n: list(model.shape(v)) for n, v in
                                                     series().items()})
        self.assertEqual(t["shapes"], {"x0": [36, 16], "attention_weights": [36, 36],
                                       "mlp_hidden": [36, 64], "logits": [36, 96]})
        self.assertEqual((t["gradient_check"]["config"], t["gradient_check"]["parameters_checked"]),
                         (trace_block.TINY, 1060))
        self.assertEqual(t["uniform_loss"], round(math.log(96), 4))
        self.assertLess(abs(t["initial_loss"] - t["uniform_loss"]), 0.05)
        self.assertEqual((math.copysign(1.0, t["layernorm_row0"]["mean"]),
                          t["layernorm_row0"]["mean"]), (1.0, 0.0))     # never -0.0
        self.assertLess(t["layernorm_row0"]["variance"], 1.0)           # ε pulls it below 1
        order = t["order_test"]
        self.assertEqual(sorted(order["tokens_a"]), sorted(order["tokens_b"]))
        self.assertNotEqual(order["tokens_a"], order["tokens_b"])

    def test_gradient_error_and_position_gaps_on_stand_ins(self):
        """The largest absolute error of all tensors (a nan: the worst), each gap to 4 places."""
        with mock.patch.multiple(trace_block, exact_gaps=lambda p, tok, use: [0.123456 * use, 0.0],
                                 numeric_gradients=lambda *_: ({"b": [1.0, 3.0], "c": [0.0]}, []),
                                 backward_gradients=lambda *_: {"b": [1.5, 2.0], "c": [1.25]}):
            self.assertEqual(trace_block.gradient_error(None, [], []), 1.25)    # |0.0 - 1.25|
            self.assertEqual(trace_block.position_gaps(None, None, True), [0.1235, 0.0])
        nan = trace_block.compare_gradients({"b": [math.nan, 1.0]}, {"b": [1.0, 1.0]})
        self.assertEqual([nan["max_abs_error"], nan["errors_by_tensor"]["b"]], [math.inf] * 2)


class CommandLineTests(unittest.TestCase):

    def test_a_plain_run_shows_the_figures_and_whether_the_file_holds_them(self):
        code, out, _ = run_main(trace_block.main)
        self.assertEqual(code, 0)
        self.assertIn("the last position: 0.0 without position embeddings, 0.001282 with them", out)
        self.assertIn("largest error 0.0000000", out)
        self.assertTrue(out.endswith("block-trace.json is up to date.\n"))
        stale = trace_block.to_json({**recorded(), "initial_loss": 4.0}).encode()
        for data, said in ((stale, "holds other figures: run python3 trace_block.py --check"),
                           (None, "is missing. Run: python3 trace_block.py --write")):
            with self.subTest(said=said), lab_copy(block_trace_json=data), the_recorded_trace():
                self.assertIn(said, run_main(trace_block.main)[1])

    def test_json_prints_the_trace_as_the_file_holds_it(self):
        with the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--json"),
                             (0, (LAB / "block-trace.json").read_text(encoding="utf-8"), ""))

    def test_check_names_each_figure_that_moved_and_says_when_to_write(self):
        stale = {**recorded(), "initial_loss": 4.0}
        stale["order_test"]["gaps_by_position_without_positions"][8] = 0.5
        with the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--check"),
                             (0, "block-trace.json is up to date.\n", ""))
            with lab_copy(block_trace_json=trace_block.to_json(stale).encode()):
                code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual(code, 1)
        for line in ("initial_loss: 4.0 -> 4.5805",
                     "order_test.gaps_by_position_without_positions[8]: 0.5 -> 0.0",
                     "record the new figures: python3 trace_block.py --write",
                     "If not (a break-it exercise, a slip), undo the change"):
            self.assertIn(line, err)

    def test_check_on_a_missing_file_says_so_before_computing_anything(self):
        with lab_copy(block_trace_json=None), mock.patch.object(trace_block, "trace") as trace:
            code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual((code, err), (1, "block-trace.json is missing. Run: python3 "
                                          "trace_block.py --write\n"))
        trace.assert_not_called()

    def test_write_then_check(self):
        with lab_copy(block_trace_json=None) as folder, the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--write")[:2], (0, "wrote block-trace.json\n"))
            self.assertEqual((folder / "block-trace.json").read_bytes(),
                             (LAB / "block-trace.json").read_bytes())
            self.assertEqual(run_main(trace_block.main, "--check")[0], 0)

    def test_time_prints_the_median_of_each_length(self):
        real = trace_block.time_steps
        with mock.patch.object(trace_block, "time_steps", lambda: real(lengths=(2, 3), repeats=1)):
            code, out, _ = run_main(trace_block.main, "--time")
        lines = out.splitlines()
        self.assertEqual(code, 0)
        self.assertIn("the median of 9", lines[0])
        self.assertEqual(lines[1].split(), ["T", "ms/step", "tokens/s"])
        self.assertEqual([line.split()[0] for line in lines[2:]], ["2", "3"])

    def test_help_names_every_flag_and_a_wrong_one_exits_2(self):
        code, out, _ = run_main(trace_block.main, "--help")
        self.assertEqual(code, 0)
        for flag in ("--json", "--check", "--write", "--show", "--time"):
            self.assertIn(f"  python3 trace_block.py {flag}\n", out)
        for wrong in ("--chek", "--writ", "check"):
            with self.subTest(flag=wrong):
                self.assertEqual(run_main(trace_block.main, wrong)[0], 2)

    def test_the_maintainers_tools_answer_help_with_usage_and_run_nothing(self):
        for tool in (f"{LAB}/bpe.py", f"{LAB}/tools/break_it.py", f"{LAB}/tools/record_steps.py"):
            # as scripts, __main__ and all (past --help, record_steps.py would write steps.json)
            with self.subTest(tool=tool):
                code, out, _ = run_script(tool, "--help")
                self.assertTrue(code == 0 and out.startswith("usage: ") and "wrote" not in out, out)


class PictureTests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.text = shown()
        lines = cls.text.splitlines()
        split = next(n for n, line in enumerate(lines) if line.startswith("Attention"))
        cls.gap_rows = [line for line in lines[:split] if "│" in line]
        cls.grid_rows = [line for line in lines[split:] if "│" in line]

    def test_every_line_fits_in_80_columns(self):       # in the ASCII stand-ins too
        for text in (self.text, self.text.encode("ascii", "trace_block").decode()):
            self.assertEqual([line for line in text.splitlines() if len(line) > 80], [])

    def test_a_bar_is_drawn_exactly_where_the_gap_is_not_zero(self):
        for use_positions, column in ((False, 1), (True, 2)):
            gaps = trace_block.exact_gaps(series(), tokenizer(), use_positions)
            drawn = [row.split("│")[column][:trace_block.BAR_CELLS].strip() != ""
                     for row in self.gap_rows]
            self.assertEqual(drawn, [gap > 0 for gap in gaps])
        self.assertEqual(trace_block.bar(1e-12, 1.0, 10), "▏" + " " * 9)   # a sliver, not 0

    def test_the_grid_draws_each_weight_the_model_computed(self):
        weights = model.forward(series(), tokenizer().encode(trace_block.ORDER_A))[1]["att"]["weights"]
        self.assertEqual([row.split("│")[1] for row in self.grid_rows],
                         ["".join(map(trace_block.cell, row)) for row in weights])

    def test_a_mask_that_leaks_shows_in_the_grid_and_its_caption(self):
        leaky = planted((MASK, "for k_j in k[:i + 2]]"))
        with mock.patch.object(trace_block, "model", leaky):
            text = run_main(trace_block.main, "--show")[1]
        self.assertIn("the causal mask leaks", " ".join(text.split()))
        self.assertNotIn("no position looks at a later one", " ".join(self.text.split()) and text)
