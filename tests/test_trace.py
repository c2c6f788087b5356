"""trace_block.py: the figures block-trace.json holds, the command line, and the pictures."""
import doctest
import math
import unittest
from unittest import mock

import model
import trace_block
from test_model import series, tokenizer
from tests import LAB, lab_copy, recorded, run_main, run_script, shown, the_recorded_trace


def load_tests(loader, tests, pattern):
    tests.addTests(doctest.DocTestSuite(trace_block))
    return tests


class TraceTests(unittest.TestCase):

    def test_the_recorded_trace_holds_the_figures_the_spec_names(self):
        """(test_recorded_trace holds the file to the code; this, to the series' spec.)"""
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
        self.assertEqual(sorted(t["order_test"]["tokens_a"]), sorted(t["order_test"]["tokens_b"]))

    def test_the_gradient_error_is_the_largest_of_every_tensor_a_nan_the_worst(self):
        numeric = {"b": [1.0, 3.0], "c": [[0.0]]}
        self.assertEqual(trace_block.compare_gradients({"b": [1.5, 2.0], "c": [[1.25]]}, numeric),
                         1.25)
        nan = trace_block.compare_gradients({"b": [math.nan, 3.0], "c": [[0.0]]}, numeric)
        self.assertEqual(nan, math.inf)
        flat = trace_block.compare_gradients({"b": [1.0, 3.0], "c": [0.0]}, numeric)
        self.assertEqual(flat, math.inf)        # a matrix's rows run together
        short = trace_block.compare_gradients({"b": [1.0], "c": [[0.0]]}, numeric)
        self.assertEqual(short, math.inf)       # a number left out


class CommandLineTests(unittest.TestCase):

    def test_a_plain_run_shows_the_figures_asks_the_question_and_shows_no_gap(self):
        code, out, _ = run_main(trace_block.main)
        self.assertEqual(code, 0)
        self.assertIn("largest error 0.0000000", out)
        self.assertIn("block-trace.json is up to date.", out)
        self.assertIn("Before you look, predict", out)
        self.assertTrue(out.endswith("Then look: python3 trace_block.py --show\n"), out[-80:])
        self.assertNotIn("gap", out)
        gaps = recorded()["order_test"]
        self.assertNotIn(str(gaps["last_logit_gap_with_positions"]), out)
        self.assertNotIn(str(gaps["gaps_by_position_without_positions"][2]), out)
        stale = trace_block.to_json({**recorded(), "initial_loss": 4.0}).encode()
        for data, said in ((stale, "holds other figures: python3 trace_block.py --check"),
                           (None, "is missing. Run: python3 trace_block.py --write")):
            with self.subTest(said=said), lab_copy(block_trace_json=data), the_recorded_trace():
                self.assertIn(said, run_main(trace_block.main)[1])

    def test_json_prints_the_trace_as_the_file_holds_it(self):
        with the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--json"),
                             (0, (LAB / "block-trace.json").read_text(encoding="utf-8"), ""))
        self.assertIn('"jardén"', trace_block.to_json({"story": "jardén"}))     # kept as it is

    def test_check_names_each_figure_that_moved_and_says_when_to_write(self):
        stale = {**recorded(), "initial_loss": 4.0}
        stale["order_test"]["gaps_by_position_without_positions"][8] = 0.5
        cases = [(trace_block.to_json(stale).encode(), [
                     f"initial_loss: 4.0 -> {recorded()['initial_loss']}",
                     "order_test.gaps_by_position_without_positions[8]: 0.5 -> 0.0",
                     "that is mended now? python3 trace_block.py --write",
                     "test_model.py names the function"]),
                 (trace_block.to_json({k: v for k, v in recorded().items() if k != "uniform_loss"})
                  .encode(), ["uniform_loss: (missing) -> 4.5643"]),
                 ((LAB / "block-trace.json").read_bytes().replace(b'  "story"', b'"story"'),
                  ["the layout differs", "--write records it afresh"])]
        with the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--check"),
                             (0, "block-trace.json is up to date.\n", ""))
            for data, lines in cases:
                with self.subTest(lines[0]), lab_copy(block_trace_json=data):
                    code, out, err = run_main(trace_block.main, "--check")
                    self.assertEqual(code, 1)
                    for line in lines:
                        self.assertIn(line, err)

    def test_check_on_a_missing_file_says_so_before_computing_anything(self):
        with lab_copy(block_trace_json=None), mock.patch.object(trace_block, "trace") as trace:
            code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual((code, err), (1, "block-trace.json is missing. Run: python3 "
                                          "trace_block.py --write\n"))
        trace.assert_not_called()

    def test_write_writes_the_trace_as_the_file_holds_it(self):
        with lab_copy(block_trace_json=None) as folder, the_recorded_trace():
            self.assertEqual(run_main(trace_block.main, "--write")[:2],
                             (0, "wrote block-trace.json\n"))
            self.assertEqual((folder / "block-trace.json").read_bytes(),
                             (LAB / "block-trace.json").read_bytes())

    def test_write_leaves_the_file_when_the_gradient_check_fails(self):
        from tests.test_mistakes import planted
        broken = planted(("fsum(map(mul, w, d_w))", "fsum(d_w) / len(d_w)"))  # 3e-6 off
        with lab_copy() as folder, mock.patch.object(trace_block, "model", broken):
            code, _, err = run_main(trace_block.main, "--write")
            self.assertEqual((folder / "block-trace.json").read_bytes(),
                             (LAB / "block-trace.json").read_bytes())
        self.assertEqual(code, 1)
        self.assertIn("block-trace.json is left as it is: the gradient check fails", err)

    def test_help_names_every_flag_a_wrong_one_exits_2_and_the_tools_run_nothing(self):
        code, out, _ = run_main(trace_block.main, "--help")
        self.assertEqual(code, 0)
        for flag in trace_block.FLAGS:
            self.assertIn(flag, out)
        for wrong in ("--chek", "--writ", "check"):
            with self.subTest(flag=wrong):
                self.assertEqual(run_main(trace_block.main, wrong)[0], 2)
        for tool in sorted((LAB / "tools").glob("*.py")) + [LAB / "bpe.py"]:
            with self.subTest(tool=tool.name):    # as scripts, __main__ and all
                code, out, _ = run_script(tool, "--help")
                self.assertTrue(code == 0 and out.startswith("usage: ") and "wrote" not in out)


class PictureTests(unittest.TestCase):

    def test_every_line_fits_in_80_columns_in_the_ascii_stand_ins_too(self):
        for text in (shown(), shown().encode("ascii", "trace_block").decode()):
            self.assertEqual([line for line in text.splitlines() if len(line) > 80], [])

    def test_the_gaps_read_as_block_trace_json_records_them(self):
        rows = [line.split() for line in shown().split("Attention")[0].splitlines()
                if line[:3].strip().isdigit()]
        order = recorded()["order_test"]
        self.assertEqual([float(row[-2]) for row in rows],
                         order["gaps_by_position_without_positions"])
        self.assertEqual([float(row[-1]) for row in rows],
                         trace_block.position_gaps(series(), tokenizer(), True))
        self.assertIn(f"with them, it is {order['last_logit_gap_with_positions']}.",
                      " ".join(shown().split()))
        self.assertIn("gap is 2e-16: something", trace_block.gaps_caption([2e-16], [0.0]))

    def test_the_grid_draws_each_weight_the_model_computed(self):
        weights = model.forward(series(), tokenizer().encode(trace_block.ORDER_A))[1]["att"]
        grid = [line.split("│")[1:] for line in shown().split("Attention")[1].splitlines()
                if "│" in line]
        self.assertEqual([cells for cells, _ in grid],
                         ["".join(map(trace_block.cell, row)) for row in weights["weights"]])
        seen = [row[:i + 1] for i, row in enumerate(weights["weights"])]     # min and max
        self.assertEqual([figures.split()[-2:] for _, figures in grid],
                         [[f"{min(row):.4f}", f"{max(row):.4f}"] for row in seen])

    def test_a_mask_that_leaks_shows_in_the_grid_s_caption(self):
        from tests.test_mistakes import planted
        leaky = planted(("if j <= i else -math.inf", "if j <= i + 1 else -math.inf"))
        with mock.patch.object(trace_block, "model", leaky):
            text = " ".join(run_main(trace_block.main, "--show")[1].split())
        self.assertIn("the causal mask leaks", text)
