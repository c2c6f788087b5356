"""The lab's tests: every claim the lesson makes about the model and the tokenizer, checked.

Run (from this folder, with nothing to install):
    python3 -m unittest -v test_model.py

First come the lesson's twelve tests, by the lesson's names, in its three classes:
    Recorded        the recorded trace (and the README's figures) are what the code computes
    Mechanism       gradients, layer norm, causality, positions
    FailureCases    what the model cannot do, and the input it refuses
Then the lab's own, beyond the lesson: more gradient checks, exact sums, large scores, golden
values, learner mistakes planted in a scratch copy of model.py, refusals as tables, faults in
files and command lines, the pictures, the README, the tokenizer, and an optional comparison
with PyTorch (skipped where PyTorch is not installed). The >>> examples in the docstrings of
model.py, bpe.py, trace_block.py and this file run too (load_tests, at the end).

The expensive part, the finite differences of the small copy, is computed once per run and
shared by every test that needs it.
"""
import ast
import atexit
import contextlib
import doctest
import functools
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
import types
import unittest
import warnings
from pathlib import Path
from unittest import mock

import bpe
import model
import trace_block
from trace_block import SERIES, TINY, build, flatten, last_logits_gap, position_gaps

try:
    with warnings.catch_warnings():
        # A CPU wheel without numpy warns "Failed to initialize NumPy" on import; the
        # comparison never touches numpy, so the warning is noise.
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
except ImportError:
    torch = None

HERE = Path(__file__).resolve().parent
CORPUS_PATH = str(HERE / "corpus.txt")
TOKENIZER_PATH = str(HERE / "tokenizer.json")
FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, mia gives the hat "
               "to ava. now ava has the red hat.")
TOLERANCE = 1e-7            # the gradient check's bound on |central difference - backward()|
REAL_MODEL = model          # the module as imported; planted bugs swap in scratch copies


################ Shared fixtures: computed once per run

@functools.lru_cache(maxsize=None)
def tokenizer():
    return trace_block.load_tokenizer()


@functools.lru_cache(maxsize=None)
def series_params():
    """The series-size parameters; shared, so tests that change parameters take a copy."""
    return build(tokenizer(), SERIES)


@functools.lru_cache(maxsize=None)
def narrow_params():
    """A model as narrow as the small copy (d 4, hidden 8) with the series' 64 positions."""
    return build(tokenizer(), {**TINY, "max_len": 64})


@functools.lru_cache(maxsize=None)
def tiny_params_once():
    return build(tokenizer(), TINY)


def tiny_params():
    """The small copy's parameters, a fresh copy each time: some tests change them."""
    return copy_params(tiny_params_once())


def copy_params(p):
    return {name: [list(row) for row in t] if isinstance(t[0], list) else list(t)
            for name, t in p.items()}


@functools.lru_cache(maxsize=None)
def ball_ids():
    return tuple(tokenizer().encode(trace_block.GRADIENT_SENTENCE))


def ball_example():
    """The gradient check's sentence, as inputs and next-token targets."""
    ids = list(ball_ids())
    return ids[:-1], ids[1:]


REAL_NUMERIC_GRADIENTS = trace_block.numeric_gradients


@functools.lru_cache(maxsize=None)
def small_copy_numeric():
    """Central differences of the small copy's loss on the ball sentence, every entry: the
    slow part of the gradient check, computed once per run with model.py as it is."""
    return REAL_NUMERIC_GRADIENTS(tiny_params(), *ball_example())


def numeric_gradients_shared(p, x, y, step=trace_block.STEP, names=None):
    """trace_block.numeric_gradients, answered from small_copy_numeric() when asked exactly
    that question of the unchanged model (the trace and the gradient tests ask it)."""
    if (trace_block.model is REAL_MODEL and names is None and step == trace_block.STEP
            and [x, y] == list(ball_example())
            and REAL_MODEL.fingerprint(p) == REAL_MODEL.fingerprint(tiny_params())):
        numeric, kinks = small_copy_numeric()
        return copy_params(numeric), list(kinks)
    return REAL_NUMERIC_GRADIENTS(p, x, y, step, names)


SHARED_LEARN_MERGES = functools.lru_cache(maxsize=None)(bpe.learn_merges)


@contextlib.contextmanager
def sharing_training():
    """Train the tokenizer on a text once per run, however many tests ask (the same result:
    training is deterministic)."""
    with mock.patch.object(bpe, "learn_merges", SHARED_LEARN_MERGES):
        yield


@contextlib.contextmanager
def sharing_numeric_gradients():
    with mock.patch.object(trace_block, "numeric_gradients", numeric_gradients_shared):
        yield


REAL_TRACE = trace_block.trace


def recorded_trace():
    """The trace as block-trace.json holds it (a fresh copy): for the tests of the command
    lines, which must not fail because a figure moved."""
    return json.loads((HERE / "block-trace.json").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def fresh_trace():
    """The trace, computed once for all the tests."""
    with sharing_numeric_gradients():
        return REAL_TRACE()


def gradient_report(module=None):
    """The gradient check of the small copy (every entry, kinks too), with model.py as it is
    or with a scratch copy (module): backward() against the shared finite differences."""
    module = module or REAL_MODEL
    with mock.patch.object(trace_block, "model", module):
        grads = trace_block.backward_gradients(tiny_params(), *ball_example())
    return trace_block.compare_gradients(grads, small_copy_numeric()[0])


def earlier_scores_change(module=None, p=None):
    """Whether changing the last token of a sequence changes any earlier position's scores."""
    module, p = module or REAL_MODEL, p or series_params()
    ids = tokenizer().encode("mia has a red hat. leo has a ball.")
    other = ids[:-1] + [(ids[-1] + 1) % len(tokenizer().vocab)]
    a, b = module.forward(p, ids)[0], module.forward(p, other)[0]
    return a[:-1] != b[:-1]


def printed(function, *args):
    """What a function prints to standard output, as a string."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    return out.getvalue()


def run_main(main, *args):
    """Run a command line's main() in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as done:      # argparse: --help, or a usage error
            code = done.code
    return code, out.getvalue(), err.getvalue()


################ The lesson's twelve tests: 1, the recorded trace

def readme_text():
    return (HERE / "README.md").read_text(encoding="utf-8")


def readme_figures(trace):
    """The phrases in which the README quotes the trace's figures."""
    report = gradient_report()
    return {
        "story tokens": f"`story_tokens`: {trace['story_tokens']}",
        "initial loss": f"`initial_loss`: {trace['initial_loss']}",
        "uniform loss": f"`uniform_loss`: {trace['uniform_loss']}",
        "row-0 variance": f"variance {trace['layernorm_row0']['variance']}",
        "gap with positions":
            f"its gap becomes {trace['order_test']['last_logit_gap_with_positions']}",
        "largest gradient error": f"the largest difference is {short(report['max_abs_error'])}",
        "largest relative error": f"({short(report['max_rel_error'])} at most on the small copy)",
    }


@functools.lru_cache(maxsize=None)
def readme_outputs():
    """The README's excerpts of command output, with what each command prints today."""
    commands = {
        "python3 trace_block.py": lambda: trace_block.to_json(fresh_trace()),
        "python3 trace_block.py --show": lambda: printed(trace_block.show),
        "python3 bpe.py": lambda: printed(bpe.demo),
    }
    with sharing_training():
        return [(command, excerpt, commands[command]() if command in commands else None)
                for command, excerpt in re.findall(r"<!-- output: (.+?) -->\n```\n(.*?)```",
                                                   readme_text(), re.S)]


def moved_figures():
    """Every figure the lab records or quotes that the code no longer gives: lines of what
    moved and by how much (block-trace.json and the README together)."""
    with mock.patch.object(trace_block, "trace", fresh_trace):
        ok, message = trace_block.check()
    lines = [] if ok else [line for line in message.splitlines()[1:] if line.startswith("  ")]
    prose = " ".join(readme_text().split())      # line breaks fall anywhere in the README
    for figure, phrase in readme_figures(fresh_trace()).items():
        if phrase not in prose:
            lines.append(f"  README.md: the {figure} should read: {phrase}")
    for command, excerpt, output in readme_outputs():
        if output is None:
            lines.append(f"  README.md: an excerpt of {command}, which no test can run")
        elif not contains_lines(output, excerpt):
            lines.append(f"  README.md: its excerpt of `{command}` is not what it prints now")
    return lines


def contains_lines(text, excerpt):
    """Whether the lines of excerpt appear, consecutive and whole, among the lines of text."""
    lines, wanted = text.splitlines(), excerpt.splitlines()
    return any(lines[n:n + len(wanted)] == wanted for n in range(len(lines) - len(wanted) + 1))


class Recorded(unittest.TestCase):
    """1. The recorded trace is up to date."""

    def test_recorded_trace(self):
        """block-trace.json, and every figure the README quotes, are what the code computes."""
        moved = moved_figures()
        if moved:
            self.fail("\n".join(["the recorded figures differ from what the code computes now:"]
                                + moved + [trace_block.AFTER_A_CHANGE, "(After a deliberate "
                                           "change, update the README's figures too.)"]))


################ The lesson's twelve tests: 2 to 6, the mechanism

class Mechanism(unittest.TestCase):
    """2-6. Gradients, layer norm, causality and the position embeddings' gradient."""

    def test_gradients_match_finite_differences(self):
        """Every gradient of the small copy (1,060 parameters) matches central differences
        on "mia has a red ball.": largest |difference| below 1e-7."""
        report = gradient_report()
        self.assertEqual(report["parameters_checked"], 1060)
        wrong = [name for name, error in report["errors_by_tensor"].items()
                 if not error < TOLERANCE]
        self.assertLess(report["max_abs_error"], TOLERANCE,
                        f"backward() disagrees with the finite differences by up to "
                        f"{report['max_abs_error']:.2e}, in the gradients of {', '.join(wrong)}; "
                        f"the worst entry is {trace_block.worst_entry(report)}")
        self.assertLess(report["max_rel_error"], 1e-5,
                        f"largest relative error = {report['max_rel_error']:.2e}")

    def test_layernorm_centers_and_scales_each_row(self):
        """With gain 2 and bias 1, every row comes out with mean 1 and variance about 4."""
        rng = random.Random(1)
        x = [[rng.gauss(3.0, 5.0) for _ in range(16)] for _ in range(4)]
        y, _ = model.layernorm_forward(x, [2.0] * 16, [1.0] * 16)
        for t, row in enumerate(y):
            mean = math.fsum(row) / 16
            variance = math.fsum((v - mean) ** 2 for v in row) / 16
            with self.subTest(row=t):
                self.assertAlmostEqual(mean, 1.0, places=12, msg=f"row {t}: mean {mean!r}")
                # the biased variance of the normalized row, 1 less a hair for EPS, times 2²
                self.assertAlmostEqual(variance, 4.0, delta=1e-4, msg=f"row {t}: variance "
                                       f"{variance!r}; the biased variance divides by d")

    def test_layernorm_backward_with_nonunit_gains(self):
        """d_x, d_g and d_b of layer norm, with gains other than 1, match central
        differences of a loss that weighs every output."""
        rng = random.Random(2)
        T, d, h = 3, 5, 1e-6
        x = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(T)]
        g = [rng.uniform(0.5, 2.0) for _ in range(d)]
        b = [rng.uniform(-1.0, 1.0) for _ in range(d)]
        weights = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(T)]

        def loss():   # a scalar that depends on every output: the sum of y · weights
            y, _ = model.layernorm_forward(x, g, b)
            return math.fsum(o * w for ro, rw in zip(y, weights) for o, w in zip(ro, rw))

        _, cache = model.layernorm_forward(x, g, b)
        d_x, d_g, d_b = model.layernorm_backward(weights, g, cache)
        for name, values, analytic in (("x", x, d_x), ("g", [g], [d_g]), ("b", [b], [d_b])):
            worst, where = 0.0, None
            for r, (row, a_row) in enumerate(zip(values, analytic)):
                for c, kept in enumerate(row):
                    row[c] = kept + h
                    up = loss()
                    row[c] = kept - h
                    down = loss()
                    row[c] = kept
                    error = abs((up - down) / (2 * h) - a_row[c])
                    if error > worst:
                        worst, where = error, (r, c, a_row[c], (up - down) / (2 * h))
            with self.subTest(gradient="d_" + name):
                self.assertLess(worst, 1e-8, f"d_{name}: largest error {worst:.2e}, at "
                                f"{where[:2]}: backward {where[2]:.6g}, finite difference "
                                f"{where[3]:.6g}" if where else "")

    def test_later_token_does_not_change_earlier_logits(self):
        """"mia has a red ball." and "mia has a red hat." share four tokens: the first four
        positions get bit-identical scores, the fifth does not."""
        tok, p = tokenizer(), series_params()
        hat = model.forward(p, tok.encode("mia has a red hat."))[0]
        ball = model.forward(p, tok.encode("mia has a red ball."))[0]
        for t in range(4):
            with self.subTest(position=t):
                self.assertTrue(hat[t] == ball[t], f"position {t} saw a later token: its "
                                f"scores changed when only position 4 did")
        self.assertNotEqual(hat[4], ball[4], "position 4 holds another token but the same "
                            "scores")

    def test_unused_positions_get_zero_gradient(self):
        """pos_emb rows past the sequence get an all-zero gradient; row 0 does not."""
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        for t in range(len(x), len(p["pos_emb"])):
            with self.subTest(position=t):
                self.assertEqual(grads["pos_emb"][t], [0.0] * len(p["pos_emb"][t]),
                                 f"pos_emb row {t} was not used by a {len(x)}-token sequence")
        self.assertNotEqual(grads["pos_emb"][0], [0.0] * len(p["pos_emb"][0]),
                            "position 0 was used, so its row needs a gradient")


################ The lesson's twelve tests: 7 to 12, failure cases

class FailureCases(unittest.TestCase):
    """7-12. Without positions the order is invisible at the end; bad input is refused."""

    def test_without_positions_the_last_position_cannot_see_word_order(self):
        """The order sentences hold the same tokens: without position embeddings the last
        position's scores are bit-identical (gap 0.0); with them they differ."""
        self.assertEqual(last_logits_gap(series_params(), tokenizer(), False), 0.0,
                         "without positions the last position saw the order: is every sum "
                         "correctly rounded (math.fsum), whatever the order of its terms?")
        self.assertGreater(last_logits_gap(series_params(), tokenizer(), True), 0.0,
                           "with positions the last position should tell the two apart: "
                           "are the position embeddings added in forward()?")

    def test_earlier_positions_still_differ_without_positions(self):
        """Without positions: gap 0 at positions 0, 1 and the last, > 0 at positions 2 to 7,
        which have seen different prefixes."""
        gaps = position_gaps(series_params(), tokenizer(), False)
        self.assertEqual(len(gaps), 9)
        self.assertEqual(gaps[:2], [0.0, 0.0], "positions 0 and 1 saw the same 'n', 'ow'")
        self.assertEqual(gaps[-1], 0.0)
        for t in range(2, 8):
            with self.subTest(position=t):
                self.assertGreater(gaps[t], 0.0, f"position {t} has seen different prefixes")

    def test_sequence_longer_than_positions(self):
        with self.assertRaisesRegex(ValueError, "^sequence of 65 tokens is longer than the "
                                                "64 positions the model has$"):
            model.forward(series_params(), [1] * 65)

    def test_token_id_outside_vocabulary(self):
        for bad in (96, -1):
            with self.subTest(id=bad), self.assertRaisesRegex(
                    ValueError, re.escape(f"token IDs outside the vocabulary of size 96: [{bad}]")):
                model.forward(series_params(), [1, bad, 2])

    def test_empty_sequence(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.forward(series_params(), [])

    def test_targets_must_match_positions(self):
        logits, _ = model.forward(series_params(), [1, 2, 3])
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.loss_and_dlogits(logits, [2, 3])


################ Beyond the lesson: the trace's other figures

class TraceFigures(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        start_script_runs()     # the runs that need processes of their own go on meanwhile

    def test_trace_keys_are_in_the_order_of_the_spec(self):
        self.assertEqual(list(fresh_trace()), [
            "story", "story_tokens", "series_config", "vocab_size", "parameter_count",
            "parameters_by_tensor", "shapes", "initial_loss", "uniform_loss",
            "layernorm_row0", "order_test", "gradient_check"])

    def test_structural_figures_match_the_series(self):
        t = fresh_trace()
        self.assertEqual((t["story_tokens"], t["vocab_size"], t["parameter_count"]),
                         (37, 96, 7440))
        self.assertEqual(t["shapes"], {"x0": [36, 16], "attention_weights": [36, 36],
                                       "mlp_hidden": [36, 64], "logits": [36, 96]})
        self.assertEqual((t["gradient_check"]["config"], t["gradient_check"]["parameters_checked"]),
                         (TINY, 1060))
        self.assertEqual(list(t["parameters_by_tensor"]), list(model.PARAM_NAMES))
        self.assertEqual(sum(math.prod(s) for s in t["parameters_by_tensor"].values()), 7440)
        self.assertEqual(model.count_params(tiny_params()), 1060)

    def test_initial_loss_is_near_the_uniform_loss_ln_96(self):
        t = fresh_trace()
        self.assertEqual(t["uniform_loss"], round(math.log(96), 4))
        self.assertLess(abs(t["initial_loss"] - t["uniform_loss"]), 0.05)

    def test_layernorm_row0_has_mean_0_and_variance_below_1(self):
        row0 = fresh_trace()["layernorm_row0"]
        self.assertEqual(math.copysign(1.0, row0["mean"]), 1.0, "the mean must not be -0.0")
        self.assertEqual(row0["mean"], 0.0)
        self.assertLess(row0["variance"], 1.0, "EPS pulls the variance below 1")

    def test_the_two_order_sentences_hold_one_multiset_of_tokens(self):
        tok = tokenizer()
        a, b = tok.encode(trace_block.ORDER_A), tok.encode(trace_block.ORDER_B)
        self.assertEqual(sorted(a), sorted(b))
        self.assertNotEqual(a, b)


################ Beyond the lesson: gradients

class GradientTests(unittest.TestCase):

    def test_every_parameter_of_the_series_model_along_random_directions(self):
        """Directional derivatives, (L(p + h·u) - L(p - h·u)) / 2h against grad · u, along
        random unit directions u through every parameter at once: the series model (7,440
        parameters) on "mia has a red ball."; and a model as narrow as the small copy but with
        the series' 64 positions on 1 token and on 64, the shortest and longest sequences."""
        rng = random.Random(64)
        problems = []
        for case, p, ids in (("the ball sentence", series_params(), list(ball_ids())),
                             ("1 token", narrow_params(), [rng.randrange(96) for _ in range(2)]),
                             ("64 tokens", narrow_params(),
                              [rng.randrange(96) for _ in range(65)])):
            x, y = ids[:-1], ids[1:]
            logits, cache = model.forward(p, x)
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
            if (len(logits), len(logits[0])) != (len(x), 96):
                problems.append(f"{case}: logits of shape {model.shape(logits)}")
            worst = directional_error(p, grads, x, y, directions=2, seed=len(x))
            if not worst < 1e-6:
                problems.append(f"{case}: a relative error of {worst:.2e} along 2 random "
                                f"directions")
        if problems:
            self.fail("backward() disagrees with the loss's slope: " + "; ".join(problems))

    def test_a_nudge_across_a_relu_kink_is_reported_not_failed(self):
        p = tiny_params()
        x, y = ball_example()
        # put hidden unit 0 at position 0 a hair above its kink: pre-activation 1e-9
        _, cache = model.forward(p, x)
        pre = model.linear(cache["h2"], p["W1"], p["b1"])[0][0]
        p["b1"][0] -= pre - 1e-9
        numeric, kinks = trace_block.numeric_gradients(p, x, y, names=["b1"])
        self.assertIn(("b1", 0), kinks)
        grads = trace_block.backward_gradients(p, x, y)
        report = trace_block.compare_gradients(grads, numeric, kinks)
        self.assertEqual(report["kinks"], kinks)
        self.assertEqual(report["parameters_checked"], 8 - len(kinks))
        self.assertLess(report["max_abs_error"], TOLERANCE)
        # counted anyway (as gradient_error does), the kink's slope is not its derivative
        everything = trace_block.compare_gradients(grads, numeric)
        self.assertGreater(everything["max_abs_error"], 100 * TOLERANCE)
        self.assertEqual(everything["worst"]["entry"], "b1[0]")

    def test_gradient_error_is_the_largest_difference_over_every_entry(self):
        with sharing_numeric_gradients():
            error = trace_block.gradient_error(tiny_params(), *ball_example())
            report = trace_block.gradient_check(tiny_params(), *ball_example())
        self.assertEqual(error, gradient_report()["max_abs_error"])
        self.assertEqual(report["kinks"], [], "no nudge should cross a relu kink here")
        self.assertEqual(max(report["errors_by_tensor"].values()), report["max_abs_error"])

    def test_backward_gives_every_parameter_a_gradient_of_its_shape(self):
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        self.assertEqual(list(grads), list(p))
        for name in p:
            with self.subTest(tensor=name):
                self.assertEqual(model.shape(grads[name]), model.shape(p[name]))

    def test_without_positions_pos_emb_gets_an_all_zero_gradient(self):
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x, use_positions=False)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        self.assertEqual(set(flatten(grads["pos_emb"])), {0.0})

    def test_no_two_gradients_share_a_row(self):
        """A trainer may change gradients in place (clipping, say): no row may be the same list
        as another gradient's row or a parameter's, or one change would land twice."""
        p = series_params()
        ids = tokenizer().encode("mia has a red hat. mia has a hat.")
        for use_positions in (True, False):
            logits, cache = model.forward(p, ids[:-1], use_positions)
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, ids[1:])[1])
            tensors = list(grads.values()) + list(p.values())
            rows = [row for t in tensors if isinstance(t[0], list) for row in t] + tensors
            shared = len(rows) - len({id(row) for row in rows})
            with self.subTest(use_positions=use_positions):
                self.assertEqual(shared, 0, f"{shared} rows are shared")

    def test_loss_gradient_is_softmax_minus_one_hot_over_T(self):
        logits = [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]]
        loss, d = model.loss_and_dlogits(logits, [2, 0])
        for row, target, d_row in zip(logits, [2, 0], d):
            total = math.fsum(math.exp(z) for z in row)
            for j, z in enumerate(row):
                self.assertAlmostEqual(d_row[j], (math.exp(z) / total - (j == target)) / 2,
                                       places=15)
        expected = (-math.log(math.exp(3) / math.fsum(map(math.exp, [1, 2, 3])))
                    + math.log(3)) / 2
        self.assertAlmostEqual(loss, expected, places=14)

    def test_sequence_loss_is_forward_then_the_loss(self):
        p, (x, y) = series_params(), ball_example()
        for use_positions in (True, False):
            with self.subTest(use_positions=use_positions):
                logits, _ = model.forward(p, x, use_positions)
                self.assertEqual(model.sequence_loss(p, x, y, use_positions),
                                 model.loss_and_dlogits(logits, y)[0])

    def test_backward_refuses_a_cache_from_before_the_parameters_changed(self):
        p = copy_params(series_params())
        x, y = ball_example()
        logits, cache = model.forward(p, x)
        p["W1"][0][0] += 0.1                # an update between forward and backward
        with self.assertRaisesRegex(ValueError, r"p has changed since, so run forward"):
            model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])


def directional_error(p, grads, x, y, directions, seed):
    """The largest relative error between grad · u and (L(p + h·u) - L(p - h·u)) / 2h over
    random unit directions u through every parameter."""
    rng, h, worst = random.Random(seed), 1e-5, 0.0
    for _ in range(directions):
        u = {name: [rng.gauss(0, 1) for _ in flatten(t)] for name, t in p.items()}
        norm = math.sqrt(math.fsum(v * v for name in u for v in u[name]))
        u = {name: [v / norm for v in vs] for name, vs in u.items()}
        analytic = math.fsum(g * v for name in p for g, v in zip(flatten(grads[name]), u[name]))
        sides = [trace_block.loss_and_relu_pattern(nudged(p, u, sign * h), x, y)
                 for sign in (1, -1)]
        if sides[0][1] != sides[1][1]:
            raise AssertionError("a nudge crossed a relu kink: pick another seed")
        numeric = (sides[0][0] - sides[1][0]) / (2 * h)
        worst = max(worst, abs(numeric - analytic) / max(abs(numeric), abs(analytic)))
    return worst


def nudged(p, u, h):
    """A copy of the parameters moved by h along u (u: name -> flat list of numbers)."""
    out = {}
    for name, t in p.items():
        step = iter(u[name])
        out[name] = ([[a + h * next(step) for a in row] for row in t] if isinstance(t[0], list)
                     else [a + h * next(step) for a in t])
    return out


################ Beyond the lesson: every sum is rounded once, large scores are safe

def exact(values):
    """The sum of floats, exactly, rounded once at the end: what math.fsum promises. Every
    float is a whole number of units of 2**-1074, the smallest float, so the sum is computed
    in those units as an integer, with no rounding; Python's int / int rounds once.

    >>> exact([1e16, 1.0, -1e16]), exact([0.1] * 10)
    (1.0, 1.0)
    """
    total = 0
    for value in values:
        numerator, denominator = value.as_integer_ratio()       # denominator: a power of 2
        total += numerator << (1075 - denominator.bit_length())
    return total / (1 << 1074)


def dot(a, b):
    """a · b as the model means it: each product rounded, their sum rounded once."""
    return exact(u * v for u, v in zip(a, b))


# Terms whose exact sum lies a hair above a rounding tie, so that it rounds up: 1 + 2**-53 +
# 2**-106 becomes 1 + 2**-52. Added left to right (as sum() does before Python 3.12) each
# small term rounds away and the sum says 1.0; the compensated sum() of Python 3.12 carries the
# small terms aside, but rounds their own sum, 2**-53 + 2**-106, to 2**-53, lands on the tie,
# and says 1.0 as well. A helper that rounds its sum once says 1.0000000000000002.
TRAP = [1.0, 2.0 ** -54, 2.0 ** -54, 2.0 ** -106]
TRAP3 = [1.0, 2.0 ** -53, 2.0 ** -106]
ROUNDED_ONCE = 1.0 + 2.0 ** -52


class ExactSumTests(unittest.TestCase):
    """Each sum in model.py is rounded once (math.fsum). The inputs hold terms like TRAP, whose
    sum comes out another way when it is added any other way, on every Python from 3.10. The
    references sum exactly, in integers (see exact), and round once."""

    def test_trap_sums_to_the_rounded_exact_value(self):
        self.assertEqual((math.fsum(TRAP), math.fsum(TRAP3), exact(TRAP)),
                         (ROUNDED_ONCE, ROUNDED_ONCE, ROUNDED_ONCE))
        total = 0.0
        for term in TRAP:
            total += term
        self.assertEqual(total, 1.0)        # left to right, the small terms are lost

    def test_matmul(self):
        ones = [[1.0], [1.0], [1.0], [1.0]]
        self.assertEqual(model.matmul([TRAP], ones), [[ROUNDED_ONCE]])
        # a row holding 0.0 takes the path that leaves out its zeros (row_times_skipping_zeros)
        with_zeros = [1.0, 0.0, 2.0 ** -54, 2.0 ** -54, 0.0, 2.0 ** -106]
        self.assertEqual(model.matmul([with_zeros], [[1.0]] * 6), [[ROUNDED_ONCE]])
        self.assertEqual(model.matmul([[0.0, 0.0]], [[1.0, 2.0], [3.0, 4.0]]), [[0.0, 0.0]])

    def test_add_of_three_and_column_sums(self):
        self.assertEqual(model.add(*[[[t]] for t in TRAP3]), [[ROUNDED_ONCE]])
        self.assertEqual(model.column_sums([[t, 2 * t] for t in TRAP]),
                         [ROUNDED_ONCE, 2 * ROUNDED_ONCE])

    def test_linear_and_linear_backward(self):
        x, W, b = [TRAP], [[1.0, -1.0]] * 4, [0.5, 0.0]
        self.assertEqual(model.linear(x, W, b), [[ROUNDED_ONCE + 0.5, -ROUNDED_ONCE]])
        d_x, d_W, d_b = model.linear_backward([TRAP], [[1.0, 2.0, 3.0, 4.0]], [[1.0] * 4] * 4)
        self.assertEqual((d_x, d_b), ([[ROUNDED_ONCE] * 4], TRAP))
        self.assertEqual(d_W, [[v * t for t in TRAP] for v in (1.0, 2.0, 3.0, 4.0)])

    def test_softmax_and_its_backward(self):
        # exp(-x1) lies just below 2**-53 and exp(-x2) just above what it lacks, so the three
        # weights before dividing, [1, exp(-x1), exp(-x2)], make a trap like TRAP3
        x1 = 53 * math.log(2) + 1e-10
        x2 = -math.log((2.0 ** -53 - math.exp(-x1)) * (1 + 5e-7))
        row = [0.0, -x1, -x2]
        e = [math.exp(z) for z in row]
        self.assertEqual(exact(e), ROUNDED_ONCE)
        self.assertEqual(model.softmax(row), [v / ROUNDED_ONCE for v in e])
        w, d_w = [0.5, 0.25, 0.125, 0.125], [2.0, 2.0 ** -52, 2.0 ** -51, 2.0 ** -103]
        self.assertEqual([a * b for a, b in zip(w, d_w)], TRAP)
        self.assertEqual(model.softmax_backward(w, d_w),
                         [wj * (dj - ROUNDED_ONCE) for wj, dj in zip(w, d_w)])

    def test_layernorm_forward(self):
        # row 0 sums to a trap (the mean); row 1 has mean 0 and squares that make a trap
        # (the variance): 2**8 + 2**-46 + 2**-46 + 2**-98, twice
        square_roots = [2.0 ** 4, 2.0 ** -23, 2.0 ** -23, 2.0 ** -49]
        rows = [TRAP + [0.0] * 4, square_roots + [-v for v in square_roots]]
        g, b = [1.5, 0.5, 2.0, 1.0] * 2, [0.0, 0.25, -0.5, 1.0] * 2
        self.assertEqual(model.layernorm_forward(rows, g, b), reference_layernorm(rows, g, b))
        # rows whose squares overflow: their std is computed on the row scaled down
        huge = [[v * 2.0 ** 600 for v in rows[1]],
                [-1.5 * 2.0 ** 616, 1.5 * 2.0 ** 616, 2.0 ** 593, 2.0 ** 539, 2.0 ** 539,
                 2.0 ** 487, 2.0 ** 614, -2.0 ** 614]]
        y, cache = model.layernorm_forward(huge, g, b)
        want = []
        for row in huge:
            centred = [v - exact(row) / 8 for v in row]
            scale = 2.0 ** math.frexp(max(map(abs, centred)))[1]
            scaled = [c / scale for c in centred]
            want.append(scale * math.sqrt(exact(c * c for c in scaled) / 8 + model.EPS / scale
                                          / scale))
        self.assertEqual(cache["std"], want)

    def test_layernorm_backward(self):
        plus_minus = [[2.0 ** 26 * (-1) ** j for j in range(8)]] * 4   # xhat is exactly ±1
        signs = [(-1) ** j for j in range(8)]
        _, cache = model.layernorm_forward(plus_minus, [1.0] * 8, [0.0] * 8)
        self.assertEqual(cache["xhat"], [[float(s) for s in signs]] * 4)
        # d_g sums down each column; term 2 and term 3 along each row; then the three terms
        columns = [[t * s for s in signs] for t in TRAP]
        rows = [TRAP + [0.0] * 4, [t * s for t, s in zip(TRAP + [0.0] * 4, signs)]]
        three = [1.0, -2.0 ** -51, -1.0, 2.0 ** -104, -2.0 ** -51, 0.0, -2.0 ** -104, 0.0]
        g = [1.0] * 8
        for case, d_y in (("d_g", columns), ("terms 2 and 3", rows + rows),
                          ("the three terms", [three] * 4)):
            with self.subTest(sum=case):
                d_x, d_g, d_b = model.layernorm_backward(d_y, g, cache)
                self.assertEqual((d_x, d_g, d_b), reference_layernorm_backward(d_y, g, cache))
        self.assertEqual(model.layernorm_backward([three] * 4, g, cache)[0][0][0],
                         ROUNDED_ONCE / 2 ** 26)

    def test_attention_scores_and_their_backward(self):
        # q = 2**52 x and k = x: q_2 · k_0 is 2**52 + 2**-2 + 2**-2 + 2**-60, a trap
        I = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]
        p = {"Wq": [[2.0 ** 52 * v for v in row] for row in I], "Wk": I, "Wv": I, "Wo": I}
        trap_row = [1.0, 2.0 ** -27, 2.0 ** -27, 2.0 ** -60]
        x = [trap_row, [1.0, 0.0, 0.0, 0.0], trap_row]
        out, cache = model.attention_forward(p, x)
        # position i sees j <= i (Mechanism tests the mask; here the sums are what matter)
        seen = [max([i] + [j for j, w in enumerate(row) if w]) + 1
                for i, row in enumerate(cache["weights"])]
        scores = [[dot(q_i, k_j) / 2.0 for k_j in cache["k"][:seen[i]]]
                  for i, q_i in enumerate(cache["q"])]
        self.assertEqual(scores[2][0], (2.0 ** 52 + 1) / 2)
        weights = [reference_softmax(row) + [0.0] * (3 - len(row)) for row in scores]
        self.assertEqual(cache["weights"], weights)
        self.assertEqual(out, [[dot(w, col) for col in zip(*x)] for w in weights])
        # d_mixed_2 · v_0 is a trap too
        d_out = [[1.0, 0.5, 0.25, 2.0], [0.5, 1.0, 1.0, 0.5], [2.0 ** 52 * v for v in trap_row]]
        grads, d_x = model.attention_backward(p, cache, d_out)
        self.assertEqual((grads, d_x), reference_attention_backward(p, cache, d_out))

    def test_loss(self):
        x1 = 53 * math.log(2) + 1e-10                   # the softmax's trap, as above
        x2 = -math.log((2.0 ** -53 - math.exp(-x1)) * (1 + 5e-7))
        cases = {
            # row 0: the softmax's trap; row 1: the top score, 2**53, and the log of the
            # total, 0.127, lose the 0.127 if they are added before the target's score
            "the total and the three terms": ([[0.0, -x1, -x2], [2.0 ** 53, 2.0 ** 53 - 2, 0.0]],
                                              [0, 1]),
            # a score more than 745 below the top has a weight of exactly 0, so each loss is
            # that distance: 2**116, 2**62, 2**62 and 2**10 make a trap for their mean
            "the mean": ([[0.0, -2.0 ** 116], [0.0, -2.0 ** 62], [0.0, -2.0 ** 62],
                          [0.0, -2.0 ** 10]], [1, 1, 1, 1]),
        }
        for case, (logits, targets) in cases.items():
            with self.subTest(sum=case):
                self.assertEqual(model.loss_and_dlogits(logits, targets),
                                 reference_loss(logits, targets))


def reference_softmax(row):
    top = max(row)
    e = [math.exp(z - top) for z in row]
    return [v / exact(e) for v in e]


def reference_layernorm(x, g, b):
    y, xhat, std = [], [], []
    for row in x:
        mean = exact(row) / len(g)
        centred = [v - mean for v in row]
        s = math.sqrt(exact(c * c for c in centred) / len(g) + model.EPS)
        xhat.append([c / s for c in centred])
        std.append(s)
        y.append([v * gi + bi for v, gi, bi in zip(xhat[-1], g, b)])
    return y, {"xhat": xhat, "std": std}


def reference_layernorm_backward(d_y, g, cache):
    d = len(g)
    d_x = []
    for d_y_row, xh, s in zip(d_y, cache["xhat"], cache["std"]):
        d_xhat = [v * gi for v, gi in zip(d_y_row, g)]
        term2, term3 = exact(d_xhat) / d, dot(d_xhat, xh) / d
        d_x.append([exact((t1, -term2, -v * term3)) / s for t1, v in zip(d_xhat, xh)])
    d_g = [dot(col, xh_col) for col, xh_col in zip(zip(*d_y), zip(*cache["xhat"]))]
    return d_x, d_g, [exact(col) for col in zip(*d_y)]


def reference_matmul(a, b):
    return [[dot(row, col) for col in zip(*b)] for row in a]


def reference_attention_backward(p, cache, d_out):
    T, sqrt_d = len(cache["x"]), math.sqrt(len(cache["x"][0]))
    q, k, v, weights = cache["q"], cache["k"], cache["v"], cache["weights"]
    transpose = model.transpose
    d_mixed = reference_matmul(d_out, transpose(p["Wo"]))
    d_weights = [[dot(d_mixed[i], v[j]) if j <= i else 0.0 for j in range(T)] for i in range(T)]
    d_scores = [[wj * (dj - dot(w, d_w)) for wj, dj in zip(w, d_w)]
                for w, d_w in zip(weights, d_weights)]
    d_q = [[e / sqrt_d for e in row] for row in reference_matmul(d_scores, k)]
    d_k = [[e / sqrt_d for e in row] for row in reference_matmul(transpose(d_scores), q)]
    d_v = reference_matmul(transpose(weights), d_mixed)
    x_T = transpose(cache["x"])
    grads = {"Wq": reference_matmul(x_T, d_q), "Wk": reference_matmul(x_T, d_k),
             "Wv": reference_matmul(x_T, d_v),
             "Wo": reference_matmul(transpose(cache["mixed"]), d_out)}
    via = [reference_matmul(d, transpose(p[name])) for d, name in
           ((d_q, "Wq"), (d_k, "Wk"), (d_v, "Wv"))]
    return grads, [[exact(three) for three in zip(*rows)] for rows in zip(*via)]


def reference_loss(logits, targets):
    losses, d_logits = [], []
    T = len(logits)
    for row, target in zip(logits, targets):
        top = max(row)
        e = [math.exp(z - top) for z in row]
        total = exact(e)
        losses.append(exact((top, math.log(total), -row[target])))
        d_row = [v / (total * T) for v in e]
        d_row[target] -= 1.0 / T
        d_logits.append(d_row)
    return exact(losses) / T, d_logits


class LargeScoreTests(unittest.TestCase):
    """Scores of 1000 and more: exp(1000) overflows, so a softmax must subtract the row's
    maximum first, in attention and in the loss."""

    def test_attention_with_scores_in_the_thousands(self):
        big = [[200.0 if r == c else 0.0 for c in range(4)] for r in range(4)]
        I = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]
        p = {"Wq": big, "Wk": big, "Wv": I, "Wo": I}
        x = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.5]]
        _, cache = model.attention_forward(p, x)            # scores up to 200² · 1 / 2 = 20000
        for i, row in enumerate(cache["weights"]):
            scores = [dot(cache["q"][i], k) / 2.0 for k in cache["k"][:i + 1]]
            with self.subTest(row=i):
                self.assertGreater(max(scores), 1000.0)
                self.assertEqual(row, reference_softmax(scores) + [0.0] * (2 - i))

    def test_loss_with_scores_in_the_thousands(self):
        logits = [[1000.0, 1001.0, 1002.0], [-5000.0, 3000.0, 2990.0]]
        loss, d_logits = model.loss_and_dlogits(logits, [0, 2])
        want = [2.0 + math.log(1 + math.exp(-1) + math.exp(-2)), 10.0 + math.log1p(math.exp(-10))]
        self.assertAlmostEqual(loss, (want[0] + want[1]) / 2, places=12)
        self.assertAlmostEqual(math.fsum(d_logits[0]) + math.fsum(d_logits[1]), 0.0, places=15)
        self.assertAlmostEqual(d_logits[1][1], 1 / (1 + math.exp(-10)) / 2, places=15)


################ Beyond the lesson: golden values

# float.hex of a few of the series model's numbers on "mia has a red ball.": every one of
# them moves if any sum is rounded another way, or any step of the math changes.
GOLDEN = {
    'loss': '0x1.23ecec76ebd3dp+2',
    'logits[0][0]': '-0x1.47f7c005f727ep-5',
    'logits[3][50]': '0x1.f019bb4b0e61bp-6',
    'd_Wq[2][5]': '0x1.53c1b31216b88p-17',
    'd_W1[7][33]': '-0x1.a1302adb45fa5p-6',
    'd_ln1_g[4]': '0x1.01792cf8f37b8p-9',
    'd_tok_emb[first token][0]': '-0x1.6bdd784af1e70p-5',
    'd_pos_emb[3][9]': '-0x1.362925706944dp-4',
    'd_W_out[11][80]': '0x1.27a4903b65211p-12',
}


class GoldenValueTests(unittest.TestCase):

    def test_a_few_numbers_to_the_last_bit(self):
        got = golden_values()
        moved = [f"{key}: {GOLDEN[key]} -> {value}" for key, value in got.items()
                 if GOLDEN.get(key) != value]
        if moved:
            self.fail("these numbers changed (in their last bits: a sum not rounded once by "
                      "math.fsum; or more: a change in the math):\n  " + "\n  ".join(moved))


def golden_values():
    """A few of the series model's numbers on "mia has a red ball.", as float.hex."""
    p, (x, y) = series_params(), ball_example()
    logits, cache = model.forward(p, x)
    loss, d_logits = model.loss_and_dlogits(logits, y)
    grads = model.backward(p, cache, d_logits)
    numbers = {"loss": loss, "logits[0][0]": logits[0][0], "logits[3][50]": logits[3][50],
               "d_Wq[2][5]": grads["Wq"][2][5], "d_W1[7][33]": grads["W1"][7][33],
               "d_ln1_g[4]": grads["ln1_g"][4],
               "d_tok_emb[first token][0]": grads["tok_emb"][x[0]][0],
               "d_pos_emb[3][9]": grads["pos_emb"][3][9], "d_W_out[11][80]": grads["W_out"][11][80]}
    return {key: value.hex() for key, value in numbers.items()}


################ Beyond the lesson: learner mistakes, planted in a scratch copy of model.py

MODEL_SOURCE = (HERE / "model.py").read_text(encoding="utf-8")
MODEL_LINES = MODEL_SOURCE.splitlines(keepends=True)
MODEL_LINE_STARTS = [0]
for _line in MODEL_LINES:
    MODEL_LINE_STARTS.append(MODEL_LINE_STARTS[-1] + len(_line))
# the top-level functions of model.py: (first line, start offset, end offset)
MODEL_FUNCTIONS = [(node.lineno, MODEL_LINE_STARTS[node.lineno - 1],
                    MODEL_LINE_STARTS[node.end_lineno])
                   for node in ast.parse(MODEL_SOURCE).body if isinstance(node, ast.FunctionDef)]


def model_changed_at(edits):
    """A scratch copy of model.py in which each edit (offset, old, new) replaces the text old
    found at that offset by new. Only the functions edited are compiled again (which keeps
    the many planted bugs quick); the rest are model.py's own, bound to the copy's names."""
    module = types.ModuleType("model_with_a_planted_bug")
    namespace = module.__dict__
    for key, value in vars(REAL_MODEL).items():
        if isinstance(value, types.FunctionType):
            value = types.FunctionType(value.__code__, namespace, value.__name__,
                                       value.__defaults__, value.__closure__)
        namespace.setdefault(key, value)
    changed = {}
    for at, old, new in sorted(edits, reverse=True):     # later offsets first: earlier stay
        line, start, end = function_holding(at)
        text = changed.get(line, MODEL_SOURCE[start:end])
        changed[line] = text[:at - start] + new + text[at - start + len(old):]
    for line, text in changed.items():
        code = compile("\n" * (line - 1) + text, "model.py (with a planted bug)", "exec")
        exec(code, namespace)
    return module


def function_holding(at):
    """The top-level function of model.py that holds the offset at: (first line, start, end)."""
    return next(f for f in MODEL_FUNCTIONS if f[1] <= at < f[2])


def function_at(at):
    """The name of the top-level function of model.py that holds the offset at."""
    return re.match(r"def (\w+)", MODEL_LINES[function_holding(at)[0] - 1]).group(1)


def model_with(*changes):
    """A scratch copy of model.py with a bug planted: each change is (old, new), and old must
    occur in model.py exactly once, inside a function. model.py itself is never edited."""
    for old, _ in changes:
        if MODEL_SOURCE.count(old) != 1:
            raise AssertionError(f"cannot plant the bug: {old!r} is not in model.py exactly once")
    return model_changed_at([(MODEL_SOURCE.index(old), old, new) for old, new in changes])


def model_with_if_possible(*changes):
    """model_with(*changes), or None if model.py no longer holds a line to change."""
    try:
        return model_with(*changes)
    except AssertionError:
        return None


UNPLANTED = {}


def passes_unplanted(check):
    """Whether model.py as it is passes the check (asked once per run for each check)."""
    key = (check.func, tuple(sorted(check.keywords.items()))) if isinstance(
        check, functools.partial) else check
    if key not in UNPLANTED:
        UNPLANTED[key] = check(REAL_MODEL)
    return UNPLANTED[key]


def gradient_check_passes(module):
    """backward() of module against the finite differences of model.py: for a bug in a
    backward pass, where the forward pass is model.py's own."""
    return gradient_report(module)["max_abs_error"] < TOLERANCE


def partial_gradient_check_passes(module, names):
    """backward() of module against its own finite differences, for the tensors named: for
    a bug that changes the forward pass too."""
    p, (x, y) = tiny_params(), ball_example()
    with mock.patch.object(trace_block, "model", module):
        if module is REAL_MODEL:
            numeric = {name: small_copy_numeric()[0][name] for name in names}
        else:
            numeric, _ = REAL_NUMERIC_GRADIENTS(p, x, y, names=names)
        grads = trace_block.backward_gradients(p, x, y)
    return trace_block.compare_gradients(grads, numeric)["max_abs_error"] < TOLERANCE


def tests_pass(module, *cases):
    """Whether the tests named (class, method) pass with module in place of model.py."""
    suite = unittest.TestSuite(case(name) for case, name in cases)
    result = unittest.TestResult()
    with mock.patch.object(sys.modules[__name__], "model", module), \
            mock.patch.object(trace_block, "model", module):
        suite.run(result)
    return result.wasSuccessful()


def causality_holds(module):
    return not earlier_scores_change(module, narrow_params())


def layernorm_rows_pass(module):
    return tests_pass(module, (Mechanism, "test_layernorm_centers_and_scales_each_row"))


def large_scores_pass(module):
    return tests_pass(module, (LargeScoreTests, "test_attention_with_scores_in_the_thousands"),
                      (LargeScoreTests, "test_loss_with_scores_in_the_thousands"))


def exact_sums_pass(module, function=None):
    """Whether ExactSumTests pass with module as model.py: the test of the function named, or
    all of them."""
    names = EXACT_SUM_TEST_OF.get(function) or unittest.defaultTestLoader.getTestCaseNames(
        ExactSumTests)
    return tests_pass(module, *[(ExactSumTests, name) for name in names])


# which of ExactSumTests looks at the sums of each function of model.py
EXACT_SUM_TEST_OF = {
    "matmul": ["test_matmul"], "row_times_skipping_zeros": ["test_matmul"],
    "add": ["test_add_of_three_and_column_sums"],
    "column_sums": ["test_add_of_three_and_column_sums"],
    "softmax": ["test_softmax_and_its_backward"],
    "softmax_backward": ["test_softmax_and_its_backward"],
    "layernorm_forward": ["test_layernorm_forward"], "std_of_huge_row": ["test_layernorm_forward"],
    "layernorm_backward": ["test_layernorm_backward"],
    "attention_forward": ["test_attention_scores_and_their_backward"],
    "attention_backward": ["test_attention_scores_and_their_backward"],
    "loss_and_dlogits": ["test_loss"],
}


def edge_lengths_pass(module):
    """Whether forward, the loss and backward run on 1 token and on all 64 (of a narrow model
    with the series' 64 positions)."""
    p = narrow_params()
    try:
        for T in (1, 64):
            x = [7] * T
            logits, cache = module.forward(p, x)
            module.backward(p, cache, module.loss_and_dlogits(logits, x)[1])
    except ValueError:
        return False
    return True


def sequence_loss_passes(module):
    x, y = ball_example()
    logits, _ = module.forward(narrow_params(), x)
    return module.sequence_loss(narrow_params(), x, y) == module.loss_and_dlogits(logits, y)[0]


# (the mistake, the lines it changes in model.py (old, new), the check that must catch it)
MISTAKES = [
    ("layer-norm backward without its last term",
     [("fsum((t1, -term2, -xhat_j * term3))", "fsum((t1, -term2))")], gradient_check_passes),
    ("a sign flipped in layer-norm backward",
     [("fsum((t1, -term2, -xhat_j * term3))", "fsum((t1, term2, -xhat_j * term3))")],
     gradient_check_passes),
    ("layer norm with the unbiased variance (divide by d - 1)",
     [("variance = fsum(c * c for c in centred) / d",
       "variance = fsum(c * c for c in centred) / (d - 1)")], layernorm_rows_pass),
    ("relu letting gradient through negative inputs",
     [("[[d_z if z > 0.0 else 0.0 for", "[[d_z for")], gradient_check_passes),
    ("the relu's mask taken from the gradient, not from act",
     [("[[d_z if z > 0.0 else 0.0 for", "[[d_z if d_z > 0.0 else 0.0 for")],
     gradient_check_passes),
    ("a missing skip-path gradient around the MLP",
     [("d_x1 = add(d_x2, d_x1_mlp)", "d_x1 = d_x1_mlp")], gradient_check_passes),
    ("a missing skip-path gradient around attention",
     [("d_x0 = add(d_x1, d_x0_att)", "d_x0 = d_x0_att")], gradient_check_passes),
    ("a mask that lets a position see one token ahead",
     [("/ sqrt_d if j <= i else", "/ sqrt_d if j <= i + 1 else")], causality_holds),
    ("the loss gradient without its 1/T",
     [("[e_j / (total * T) for e_j in e]", "[e_j / total for e_j in e]"),
      ("d_row[target] -= 1.0 / T", "d_row[target] -= 1.0")], gradient_check_passes),
    ("attention backward without 1/√d",
     [("[[entry / sqrt_d for entry in row] for row in matmul(d_scores, k)]",
       "matmul(d_scores, k)"),
      ("[[entry / sqrt_d for entry in row] for row in matmul(transpose(d_scores), q)]",
       "matmul(transpose(d_scores), q)")], gradient_check_passes),
    ("1/√d in the forward pass only, not in the backward",
     [("fsum(map(mul, q[i], k[j])) / sqrt_d if", "fsum(map(mul, q[i], k[j])) if")],
     lambda module: partial_gradient_check_passes(module, ["Wq"])),
    ("a weight used untransposed in a backward pass",
     [("d_mixed = matmul(d_out, transpose(p[\"Wo\"]))", "d_mixed = matmul(d_out, p[\"Wo\"])")],
     gradient_check_passes),
    ("position-embedding gradients added to the wrong rows",
     [('grads["pos_emb"][:len(ids)] = d_x0', 'grads["pos_emb"][1:len(ids) + 1] = d_x0')],
     gradient_check_passes),
    ("attention's softmax shifted by the minimum",
     [("    top = max(row)\n    e = [", "    top = min(row)\n    e = [")], large_scores_pass),
    ("attention's softmax adding the maximum instead of subtracting it",
     [("\n    e = [exp(z - top) for z in row]", "\n    e = [exp(z + top) for z in row]")],
     large_scores_pass),
    ("attention's softmax without the shift",
     [("\n    e = [exp(z - top) for z in row]", "\n    e = [exp(z) for z in row]")],
     large_scores_pass),
    ("the loss's softmax without the shift",
     [("\n        e = [exp(z - top) for z in row]", "\n        e = [exp(z) for z in row]")],
     large_scores_pass),
    ("the loss's softmax shifted by the minimum",
     [("        top = max(row)   ", "        top = min(row)   ")], large_scores_pass),
    ("forward refusing all 64 positions",
     [("if len(ids) > len(p[\"pos_emb\"]):", "if len(ids) >= len(p[\"pos_emb\"]):")],
     edge_lengths_pass),
    ("forward refusing a single token",
     [("if len(ids) == 0:", "if len(ids) <= 1:")], edge_lengths_pass),
    ("sequence_loss returning the gradient, not the loss",
     [("return loss_and_dlogits(logits, targets)[0]",
       "return loss_and_dlogits(logits, targets)[1]")],
     sequence_loss_passes),
]


def fsum_sites():
    """The calls of math.fsum in the math and speed sections of model.py (not in its
    comments or docstrings): [(line number, offset of the call in the source)]."""
    end = MODEL_SOURCE.index("################ Input checks")
    tokens = list(tokenize.generate_tokens(io.StringIO(MODEL_SOURCE).readline))
    return [(name.start[0], MODEL_LINE_STARTS[name.start[0] - 1] + name.start[1])
            for name, after in zip(tokens, tokens[1:])
            if name.string == "fsum" and after.string == "("
            and MODEL_LINE_STARTS[name.start[0] - 1] + name.start[1] < end]


def sum_left_to_right(terms):
    """The sum of terms, each added to the running total in turn (as sum() does before
    Python 3.12): a rounding at every step."""
    total = 0.0
    for term in terms:
        total += term
    return total


def model_summing_with(at, summing):
    """model.py with the fsum call at offset `at` replaced by a call of the function summing."""
    module = model_changed_at([(at, "fsum", "planted_sum")])
    module.planted_sum = summing
    return module


# The lines of model.py where the compensated sum() of Python 3.12 and later gives what
# math.fsum gives on every input we could build (the loss's three terms: the top score, the log
# of the total and the target's score); a sum added left to right is caught there too.
COMPENSATED_SUM_AGREES = {MODEL_SOURCE[:MODEL_SOURCE.index(
    "losses.append(fsum((top, log(total), -row[target])))")].count("\n") + 1}


class LearnerMistakes(unittest.TestCase):
    """The mistakes a learner might make, each planted in a scratch copy of model.py (one line
    of its text changed; model.py itself is never edited), and the check that catches it.
    Each check first runs on model.py as it is: if that fails already, the test says so
    instead of blaming the check."""

    def assert_caught(self, what, module, check):
        if module is None:
            self.skipTest(f"the line that {what} changes is not in model.py as it is: has it "
                          f"been edited?")
        name = getattr(check, "__name__", None) or check.func.__name__
        if not passes_unplanted(check):
            self.skipTest(f"model.py fails this check before any bug is planted: fix that "
                          f"first ({name})")
        self.assertFalse(check(module), f"the check ({name}) missed: {what}")

    def test_each_mistake_is_caught(self):
        for what, changes, check in MISTAKES:
            with self.subTest(mistake=what):
                self.assert_caught(what, model_with_if_possible(*changes), check)

    def test_every_sum_that_is_not_rounded_once_is_caught(self):
        """Each math.fsum of model.py replaced, one at a time, by a sum added left to right,
        and by the built-in sum() of this Python (compensated from 3.12)."""
        sites = fsum_sites()
        self.assertGreaterEqual(len(sites), 15)
        for line, at in sites:
            for summing in (sum_left_to_right, sum):
                if (summing is sum and line in COMPENSATED_SUM_AGREES
                        and sys.version_info >= (3, 12)):
                    continue
                with self.subTest(line=line, sum=summing.__name__):
                    function = function_at(at)
                    self.assert_caught(f"{summing.__name__}() in place of math.fsum on line "
                                       f"{line} of model.py, in {function}",
                                       model_summing_with(at, summing),
                                       functools.partial(exact_sums_pass, function=function))


################ Beyond the lesson: refusals, one table per function

class Refusals(unittest.TestCase):
    """Bad input gets a ValueError or TypeError that says what is wrong: one row per case,
    (the case, the call, the exception, the message it must match)."""

    def assert_refused(self, table):
        for case, call, exception, message in table:
            with self.subTest(case=case):
                with self.assertRaisesRegex(exception, message):
                    call()

    def test_forward(self):
        p, tiny = series_params(), tiny_params()
        W2 = [list(row) for row in p["W2"]]
        W2[5] = W2[5][:-1]
        W1 = [list(row) for row in p["W1"]]
        W1[2][3] = "0.5"
        self.assert_refused([
            ("at most five offending IDs are named", lambda: model.forward(p, list(range(96, 103))),
             ValueError, re.escape("[96, 97, 98, 99, 100] and 2 more")),
            ("text instead of IDs", lambda: model.forward(p, "mia has a red hat."),
             TypeError, "not a str"),
            *[(f"IDs {ids!r}", lambda ids=ids: model.forward(p, ids), TypeError, "token IDs must")
              for ids in ([1.0, 2.0], ["1", "2"], [None], [True, 2], None, 5, (i for i in [1]))],
            *[(f"use_positions={value!r}", lambda value=value: model.forward(p, [1, 2], value),
               TypeError, "use_positions must be True or False")
              for value in ("no", None, 0, [2, 3], [])],
            ("parameters with an unknown name", lambda: model.forward({**p, "W3": [[0.0]]}, [1]),
             ValueError, "parameters with unknown names: W3"),
            *[(f"parameters missing {name}",
               lambda name=name: model.forward({k: v for k, v in p.items() if k != name}, [1]),
               ValueError, f"^parameters missing: {name}$") for name in ("tok_emb", "W2", "b_out")],
            *[(f"{name} of the small copy", lambda name=name: model.forward({**p, name: tiny[name]},
                                                                            [1, 2]),
               ValueError, re.escape(f"parameter {name} has shape {model.shape(tiny[name])}"))
              for name in ("Wq", "W1", "b1", "W_out", "ln2_g", "pos_emb")],
            ("a short row", lambda: model.forward({**p, "W2": W2}, [1, 2]),
             ValueError, "parameter W2 has rows of different lengths"),
            ("a str among the numbers", lambda: model.forward({**p, "W1": W1}, [1, 2]),
             TypeError, re.escape("parameter W1[2][3] is '0.5' (str)")),
            ("None as a gain", lambda: model.forward({**p, "ln1_g": [None] * 16}, [1, 2]),
             TypeError, re.escape("parameter ln1_g[0] is None")),
            *[(f"parameters as {type(bad).__name__}", lambda bad=bad: model.forward(bad, [1, 2]),
               TypeError, "parameters must be the dict init_params returns")
              for bad in (None, list(p.values()), p["W1"])],
        ])

    def test_loss_and_sequence_loss(self):
        p = series_params()
        logits, _ = model.forward(p, [1, 2])
        self.assert_refused([
            ("an empty sequence", lambda: model.loss_and_dlogits([], []), ValueError,
             "^empty sequence$"),
            ("3 positions, 2 targets", lambda: model.sequence_loss(p, [1, 2, 3], [2, 3]),
             ValueError, "^3 positions but 2 targets$"),
            *[(f"target {bad}", lambda bad=bad: model.loss_and_dlogits(logits, [1, bad]),
               ValueError, re.escape(f"target IDs outside the vocabulary of size 96: [{bad}]"))
              for bad in (96, -1)],
            *[(f"targets {bad!r}", lambda bad=bad: model.loss_and_dlogits(logits, bad),
               TypeError, "target IDs must") for bad in ([1.0, 2.0], "ab", None)],
            *[(f"a score of {bad}", lambda bad=bad: model.loss_and_dlogits(
                [[0.0, 1.0, 2.0], [0.0, bad, 2.0]], [1, 1]), ValueError,
               "logits at position 1 are not all finite") for bad in (math.inf, math.nan,
                                                                      -math.inf)],
            ("rows of two lengths", lambda: model.loss_and_dlogits([[0.0, 1.0], [0.0]], [1, 0]),
             ValueError, "logits rows must all have 2 scores, not 1"),
            ("logits that are not rows", lambda: model.loss_and_dlogits([1.0, 2.0], [0, 1]),
             TypeError, r"logits must be a list of rows"),
        ])

    def test_backward(self):
        p = series_params()
        logits, cache = model.forward(p, [1, 2, 3])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3, 4])
        small_logits, small_cache = model.forward(p, [1, 2])
        self.assert_refused([
            *[(f"d_logits of {len(bad)} rows of {len(bad[0])}",
               lambda bad=bad: model.backward(p, cache, bad), ValueError,
               r"d_logits must have shape \(3, 96\)")
              for bad in (d_logits[:2], [row[:95] for row in d_logits], d_logits + d_logits[:1])],
            *[(f"d_logits as {type(bad).__name__}", lambda bad=bad: model.backward(p, cache, bad),
               TypeError, "d_logits must be a list of rows")
              for bad in (None, d_logits[0], [tuple(row) for row in d_logits])],
            *[(f"a cache without {part}",
               lambda part=part: model.backward(p, {k: v for k, v in cache.items() if k != part},
                                                d_logits), TypeError, "the cache that forward")
              for part in ("x0", "act", "att", "use_positions", "params")],
            *[(f"the cache is {case}", lambda bad=bad: model.backward(p, bad, d_logits),
               TypeError, r"backward needs the cache that forward\(p, ids\) returned")
              for case, bad in (("attention's", cache["att"]), ("an empty dict", {}),
                                ("the logits", logits), ("None", None))],
            ("a cache whose IDs this vocabulary lacks",
             lambda: model.backward(p, dict(cache, ids=[1, 200, 3]), d_logits), ValueError,
             re.escape("the cache's token IDs outside the vocabulary of size 96: [200]")),
            ("a cache of another model size",
             lambda: model.backward(tiny_params(), small_cache, d_logits[:2]), ValueError,
             r"the cache comes from a model of width 16 and hidden 64 on 2 positions, "
             r"not from p \(width 4"),
            *[(f"parameters missing {name}",
               lambda name=name: model.backward({k: v for k, v in p.items() if k != name},
                                                cache, d_logits),
               ValueError, f"^parameters missing: {name}$") for name in ("tok_emb", "b_out")],
        ])

    def test_layer_norm(self):
        x = [[1.0, 2.0, 4.0]]
        _, cache = model.layernorm_forward(x, [1.0] * 3, [0.0] * 3)
        _, model_cache = model.forward(series_params(), [1, 2])
        short = dict(model.layernorm_forward([[1.0, 2.0, 4.0], [3.0, 1.0, 0.0]], [1.0] * 3,
                                             [0.0] * 3)[1])
        short["std"] = short["std"][:1]
        self.assert_refused([
            ("a gain of 2, a bias of 3",
             lambda: model.layernorm_forward(x, [1.0, 1.0], [0.0, 0.0, 0.0]), ValueError,
             "gain has 2 entries but bias has 3"),
            ("rows of 3, a gain of 2", lambda: model.layernorm_forward(x, [1.0, 1.0], [0.0, 0.0]),
             ValueError, "rows of 3 values, but the gain has 2"),
            ("an empty gain", lambda: model.layernorm_forward([[]], [], []), ValueError,
             "at least one entry"),
            *[(f"a row holding {bad}", lambda bad=bad: model.layernorm_forward(
                [[1.0, bad, 2.0]], [1.0] * 3, [0.0] * 3), ValueError,
               "row 0 of x holds inf, nan or a value beyond 1e301")
              for bad in (math.inf, math.nan, 1e305)],
            ("x as a number", lambda: model.layernorm_forward(1.5, [1.0], [0.0]), TypeError,
             "layer norm needs x as a matrix"),
            ("backward: a cache with a row missing",
             lambda: model.layernorm_backward([[1.0] * 3] * 2, [1.0] * 3, short),
             ValueError, "2 rows but 1 standard deviations"),
            *[(f"backward: {case}", lambda bad=bad: model.layernorm_backward(
                [[1.0] * 16] * 2, [1.0] * 16, bad), TypeError,
               "needs the cache its layernorm_forward returned")
              for case, bad in (("the model's whole cache", model_cache), ("an empty dict", {}))],
            *[(f"backward: {case}", lambda d_y=d_y, g=g: model.layernorm_backward(d_y, g, cache),
               ValueError, r"forward pass normalized \(1, 3\)")
              for case, d_y, g in (("d_y has 2 rows, not 1", [[1.0] * 3] * 2, [1.0] * 3),
                                   ("d_y has no rows", [], [1.0] * 3),
                                   ("d_y rows of 2, not 3", [[1.0] * 2], [1.0] * 3),
                                   ("a gain of 2, not 3", [[1.0] * 3], [1.0] * 2),
                                   ("an empty gain", [[1.0] * 3], []))],
        ])

    def test_attention(self):
        p = series_params()
        x = [[0.5] * 16, [0.25] * 16]
        _, cache = model.forward(p, [1, 2, 3])
        _, att_cache = model.attention_forward(p, [[0.1 * i for i in range(16)]] * 2)
        del att_cache["q"]
        self.assert_refused([
            ("an empty sequence", lambda: model.attention_forward(p, []), ValueError,
             "^empty sequence$"),
            ("rows of 16, 15, 16", lambda: model.attention_forward(p, [[0.1] * 16, [0.2] * 15,
                                                                       [0.3] * 16]),
             ValueError, r"rows of one width, not \[15, 16\]"),
            ("rows of 4 for weights of 16", lambda: model.attention_forward(p, [r[:4] for r in x]),
             ValueError, r"rows of 4 values needs Wq of shape \(4, 4\), not \(16, 16\)"),
            ("rows of 16 for weights of 4", lambda: model.attention_forward(tiny_params(), x),
             ValueError, r"rows of 16 values needs Wq of shape \(16, 16\), not \(4, 4\)"),
            ("Wk missing", lambda: model.attention_forward(
                {k: v for k, v in p.items() if k != "Wk"}, x),
             ValueError, r"attention needs p\['Wk'\], which is missing"),
            ("backward: a cache missing q",
             lambda: model.attention_backward(p, att_cache, [[0.0] * 16] * 2), TypeError,
             "the cache attention_forward returned"),
            ("backward: the whole model's cache",
             lambda: model.attention_backward(p, cache, [[0.1] * 16] * 3), TypeError,
             r"cache\['att'\]"),
            *[(f"backward: d_out of {len(bad)} rows", lambda bad=bad: model.attention_backward(
                p, cache["att"], bad), ValueError, r"d_out must have shape \(3, 16\)")
              for bad in ([[0.1] * 16] * 2, [[0.1] * 16] * 4, [[0.1] * 4] * 3, [])],
        ])

    def test_init_params_and_count_params(self):
        self.assert_refused([
            *[(f"sizes {args}", lambda args=args: model.init_params(*args, seed=3), ValueError,
               "positive size") for args in ((96, 0, 64, 64), (96, 16, -4, 64), (0, 16, 64, 64),
                                            (96, 16, 64, -1))],
            ("d of 16.0", lambda: model.init_params(96, 16.0, 64, 64, seed=3), TypeError,
             "d must be an int"),
            ("a negative seed", lambda: model.init_params(96, 16, 64, 64, seed=-3), ValueError,
             "seed must be 0 or more, not -3"),
            *[(f"seed {seed!r}", lambda seed=seed: model.init_params(96, 16, 64, 64, seed=seed),
               TypeError, "seed must be an int") for seed in (None, "3", 3.5, True)],
            *[(f"count_params of {type(v).__name__}", lambda v=v: model.count_params(v),
               TypeError, "count_params takes the dict of parameters")
              for v in (None, [[0.0]], [1.0])],
        ])

    def test_list_helpers(self):
        ragged, I = [[1.0, 2.0], [3.0]], [[1.0, 0.0], [0.0, 1.0]]
        rows_of_one_length = r"needs rows of one length, not \[1, 2\]"
        self.assert_refused([
            ("matmul: rows of 3 against 2 rows of b", lambda: model.matmul(
                [[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), ValueError,
             "the rows of a have 3 entries but b has 2 rows"),
            ("matmul: a ragged a", lambda: model.matmul(ragged, I), ValueError,
             rows_of_one_length),
            ("matmul: a ragged b", lambda: model.matmul(I, ragged), ValueError,
             rows_of_one_length),
            ("matmul: a float as a", lambda: model.matmul(1.5, I), TypeError,
             "matmul: a needs a matrix"),
            ("matmul: None as b", lambda: model.matmul(I, None), TypeError,
             "matmul: b needs a matrix"),
            *[(f"add: b of {model.shape(b)}", lambda b=b: model.add([[1.0, 2.0]], b), ValueError,
               r"add\(\) needs two matrices of one shape, not \(1, 2\)")
              for b in ([[1.0]], [[1.0, 2.0], [3.0, 4.0]])],
            ("add: a ragged first", lambda: model.add(ragged, I), ValueError, rows_of_one_length),
            ("add: a ragged third", lambda: model.add(I, I, ragged), ValueError,
             rows_of_one_length),
            *[(f"linear: {case}", lambda x=x, b=b: model.linear(x, I, b), ValueError,
               r"linear needs x \(T, n\), W \(n, m\) and b \(m\)")
              for case, x, b in (("bias of 1", [[1.0, 2.0]], [0.5]),
                                 ("bias of 3", [[1.0, 2.0]], [0.5, 0.5, 0.5]),
                                 ("rows of 3", [[1.0, 2.0, 3.0]], [0.0, 0.0]),
                                 ("rows of 1", [[1.0]], [0.0, 0.0]))],
            ("linear: a ragged x", lambda: model.linear(ragged, I, [0.0, 0.0]), ValueError,
             rows_of_one_length),
            *[(f"linear_backward: {case}", lambda d_y=d_y, x=x: model.linear_backward(
                d_y, x, [[4.0, 5.0]]), ValueError, "linear_backward needs d_y")
              for case, d_y, x in (("2 rows of d_y, 1 of x", [[1.0, 2.0]] * 2, [[3.0]]),
                                   ("d_y rows of 1, W columns 2", [[1.0]], [[3.0]]),
                                   ("x rows of 2, W rows 1", [[1.0, 2.0]], [[3.0, 3.0]]))],
            ("transpose: ragged", lambda: model.transpose(ragged), ValueError, rows_of_one_length),
            ("column_sums: ragged", lambda: model.column_sums(ragged), ValueError,
             rows_of_one_length),
            ("shape: ragged", lambda: model.shape(ragged), ValueError, "ragged"),
            ("shape: nested three deep", lambda: model.shape([[[1.0, 2.0]], [[3.0, 4.0]]]),
             ValueError, "nested three deep"),
            ("shape: numbers and rows mixed", lambda: model.shape([1.0, [2.0]]), ValueError,
             "not a mix"),
            ("shape: a float", lambda: model.shape(1.5), TypeError, "shape\\(\\) takes a list"),
            *[(f"zeros({rows}, {cols})", lambda rows=rows, cols=cols: model.zeros(rows, cols),
               ValueError, "sizes of at least 0") for rows, cols in ((-1, 3), (2, -1))],
            *[(f"softmax({row!r})", lambda row=row: model.softmax(row), TypeError,
               "softmax needs a non-empty list of numbers") for row in ([], None, ["1"])],
            ("softmax_backward of two lengths", lambda: model.softmax_backward([0.5, 0.5], [1.0]),
             ValueError, "softmax_backward: d_w has 1 entries, not 2"),
            ("softmax_backward of None", lambda: model.softmax_backward([1.0], None), TypeError,
             "softmax_backward: d_w needs a non-empty list"),
        ])

    def test_trace_block(self):
        tok, p = tokenizer(), tiny_params()
        grads = trace_block.backward_gradients(p, *ball_example())
        cut = dict(grads, W1=grads["W1"][:2])
        self.assert_refused([
            *[(f"build with {tok_!r}", lambda tok_=tok_: build(tok_, SERIES), TypeError,
               "expected a tokenizer") for tok_ in ("tokenizer.json", None)],
            *[(f"a config with {case}", lambda cfg=cfg: build(tok, cfg), ValueError,
               re.escape("config must have exactly the keys ['d', 'hidden', 'max_len', 'seed']"))
              for case, cfg in (("seed missing", {"d": 4, "hidden": 8, "max_len": 8}),
                                ("hidden misspelt", {"d": 4, "hiden": 8, "max_len": 8, "seed": 3}),
                                ("an extra key", {**TINY, "lr": 0.1}), ("not a dict", None))],
            *[(f"{f.__name__} with {tok_!r}", lambda f=f, tok_=tok_: f(p, tok_, True), TypeError,
               "expected a tokenizer") for f in (position_gaps, last_logits_gap)
              for tok_ in (None, "tokenizer.json")],
            *[(f"a step of {step!r}", lambda step=step: trace_block.gradient_check(
                p, *ball_example(), step=step), ValueError, "step must be a positive number")
              for step in (0, -1e-6, math.inf, math.nan)],
            ("numeric_gradients of an unknown tensor", lambda: trace_block.numeric_gradients(
                p, *ball_example(), names=["W3"]), ValueError, "names must be a list of parameter"),
            ("compare_gradients with nothing", lambda: trace_block.compare_gradients({}, grads),
             ValueError, r"grads lacks \['tok_emb'"),
            ("compare_gradients, a gradient cut short", lambda: trace_block.compare_gradients(
                cut, grads), ValueError, r"gradient W1 has shape \(2, 8\) but the numeric one "
                                         r"\(4, 8\)"),
            ("flatten of []", lambda: flatten([]), ValueError, "non-empty vector or matrix"),
            *[(f"shade({w!r})", lambda w=w: trace_block.shade(w), ValueError,
               "an attention weight lies between 0 and 1") for w in (math.nan, -0.5, 1.5)],
            ("a bar of nan", lambda: trace_block.bar(math.nan, 1.0), ValueError,
             "a bar needs a value and a top"),
        ])

    def test_bpe(self):
        tok = tokenizer()
        self.assert_refused([
            *[(f"merge of {pair!r}", lambda pair=pair: bpe.merge([1, 2, 3], pair, 4), TypeError,
               "pair must be a tuple of two token ids") for pair in ([1, 2], (1, 2, 3), "ab")],
            ("best_pair of nothing", lambda: bpe.best_pair({}), ValueError, "no pair to merge"),
            *[(f"Tokenizer({vocab!r}, {merges!r})", lambda vocab=vocab, merges=merges:
               bpe.Tokenizer(vocab, merges), TypeError, message)
              for vocab, merges, message in (("abc", [], "vocab must be a list, not str"),
                                             (None, [], "vocab must be a list, not NoneType"),
                                             (["a"], None, "merges must be a list, not NoneType"))],
            ("train with a pattern that is not a regular expression",
             lambda: bpe.Tokenizer.train("ab ab", 4, pattern="( ?\\w+"), ValueError,
             "not a regular expression"),
            ("train with a pattern that skips text", lambda: bpe.Tokenizer.train("ab, ab", 5,
                                                                                pattern=r"\w+"),
             ValueError, r"skips ', ' at position 2"),
            ("train below the alphabet", lambda: bpe.Tokenizer.train("abc", 2), ValueError,
             "size 2 is smaller than the base alphabet"),
            ("train past what the text can reach", lambda: bpe.Tokenizer.train("ab ab", 6),
             ValueError, "size 6 is out of reach"),
            ("train on bytes", lambda: bpe.Tokenizer.train(b"abc", 3), TypeError,
             "training text must be a str"),
            *[(f"train to size {size!r}", lambda size=size: bpe.Tokenizer.train("abc", size),
               TypeError, "vocabulary size must be an int") for size in (3.0, "3", True)],
            ("train on nothing", lambda: bpe.Tokenizer.train("", 0), ValueError, "empty text"),
            *[(f"encode {text!r}", lambda text=text: tok.encode(text), ValueError, message)
              for text, message in (("Mia", "'M' at position 0"),
                                    ("a\tb", r"'\\t' at position 1"),
                                    ("mia has 2 hats.", "'2' at position 8"))],
            *[(f"encode {value!r}", lambda value=value: tok.encode(value), TypeError,
               "encode takes a str") for value in (b"mia", None, ["mia"], 3)],
            *[(f"decode {ids!r}", lambda ids=ids: tok.decode(ids), ValueError,
               "outside the vocabulary of size 96") for ids in ([96], [-1], [0, 1000])],
            *[(f"decode {ids!r}", lambda ids=ids: tok.decode(ids), TypeError, "must be an int")
              for ids in ([1.0], ["1"], [None], [0, 2.5], [True], [0, False])],
            *[(f"decode {ids!r}", lambda ids=ids: tok.decode(ids), TypeError,
               "decode takes a list") for ids in ((1, 2), "12", None, 5, range(3))],
        ])


################ Beyond the lesson: faults in files, writes and command lines

LAB_FILES = ("model.py", "bpe.py", "trace_block.py", "tokenizer.json", "corpus.txt",
             "block-trace.json")


@contextlib.contextmanager
def lab_copy(**changed):
    """A copy of the lab's data files in a temporary folder, with both scripts pointed at it;
    changed maps a file's name (dots as underscores) to the bytes it holds instead, or to None
    for a file that is missing. Yields the folder."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in ("tokenizer.json", "corpus.txt", "block-trace.json"):
            data = changed.get(re.sub(r"[.-]", "_", name), (HERE / name).read_bytes())
            if data is not None:
                (folder / name).write_bytes(data)
        with mock.patch.object(trace_block, "TRACE_FILE", folder / "block-trace.json"), \
                mock.patch.object(trace_block, "TOKENIZER_FILE", folder / "tokenizer.json"), \
                mock.patch.object(trace_block, "CORPUS_FILE", folder / "corpus.txt"), \
                mock.patch.object(bpe, "CORPUS_PATH", str(folder / "corpus.txt")), \
                mock.patch.object(bpe, "TOKENIZER_PATH", str(folder / "tokenizer.json")), \
                sharing_numeric_gradients(), sharing_training():
            yield folder


def one_line(test, code, out, err, *parts):
    """Assert a failed command: exit 1, nothing on stdout, one line on stderr with parts."""
    test.assertEqual(code, 1, out + err)
    test.assertEqual(out, "")
    test.assertNotIn("Traceback", err)
    test.assertEqual(len(err.strip().splitlines()), 1, err)
    for part in parts:
        test.assertIn(part, err)


class FaultTests(unittest.TestCase):
    """Whatever happens to the lab's files, its environment or its arguments, it keeps every
    file whole, never answers wrongly without a word, and says what went wrong in one line."""

    # -- writes: built whole first, then put in place; a failure leaves the old file

    def test_a_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_one(self):
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, file):
                self.file = file

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.file.close()

            def write(self, data):
                self.file.write(data[:len(data) // 2])
                raise OSError(28, "No space left on device")

            def __getattr__(self, name):
                return getattr(self.file, name)

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "tokenizer.json"
            path.write_bytes(b"the old file\n")
            with mock.patch.object(bpe.os, "fdopen", lambda *a: HalfWriter(real_fdopen(*a))):
                with self.assertRaisesRegex(bpe.FileProblem, "cannot write .*tokenizer.json: No "
                                            "space left on device; the old file is unchanged"):
                    tokenizer().save(path)
            self.assertEqual(path.read_bytes(), b"the old file\n")
            self.assertEqual(os.listdir(tmp), ["tokenizer.json"])

    def test_an_interruption_while_the_text_is_built_leaves_the_old_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "tokenizer.json"
            path.write_bytes(b"the old file\n")
            with mock.patch.object(bpe.Tokenizer, "to_json", side_effect=KeyboardInterrupt), \
                    self.assertRaises(KeyboardInterrupt):
                tokenizer().save(path)
            self.assertEqual(path.read_bytes(), b"the old file\n")
            self.assertEqual(os.listdir(tmp), ["tokenizer.json"])

    def test_write_commands_that_cannot_write_say_so_and_leave_the_old_files(self):
        refused = mock.patch.object(bpe.os, "replace",
                                    side_effect=PermissionError(13, "Permission denied"))
        for main, name, args in ((trace_block.main, "block-trace.json", ["--write"]),
                                 (bpe.main, "tokenizer.json", ["--write"])):
            with self.subTest(file=name), lab_copy() as folder, refused, \
                    mock.patch.object(trace_block, "trace", recorded_trace):
                code, out, err = run_main(main, *args)
                one_line(self, code, out, err, f"cannot write {folder / name}: Permission "
                                               f"denied; the old file is unchanged")
                self.assertEqual((folder / name).read_bytes(), (HERE / name).read_bytes())
                self.assertEqual(sorted(os.listdir(folder)), ["block-trace.json", "corpus.txt",
                                                              "tokenizer.json"])

    # -- the gradient check puts every nudge back

    def test_the_gradient_check_puts_every_nudge_back_when_the_loss_raises(self):
        for stop in (RuntimeError("the loss failed"), KeyboardInterrupt()):
            p = tiny_params()
            before = copy_params(p)
            calls = []

            def failing(p_, x, y, stop=stop, calls=calls):
                calls.append(1)
                if len(calls) == 7:             # mid-way through the fourth entry
                    raise stop
                return REAL_LOSS_AND_RELU(p_, x, y)

            with self.subTest(stop=type(stop).__name__), \
                    mock.patch.object(trace_block, "loss_and_relu_pattern", failing), \
                    self.assertRaises(type(stop)):
                trace_block.numeric_gradients(p, *ball_example())
            self.assertEqual(p, before, "a nudged entry was not put back")

    # -- no silent wrong answers

    def test_layer_norm_of_huge_rows_is_right(self):
        row = [1e160, -3e160, 2e160, 5e159]
        y, cache = model.layernorm_forward([row, [v / 1e150 for v in row]], [1.0] * 4, [0.0] * 4)
        for a, b in zip(*y):           # scaling a row does not change its normalized values
            self.assertAlmostEqual(a, b, places=12)
        self.assertAlmostEqual(math.fsum(v * v for v in y[0]) / 4, 1.0, places=12)
        self.assertTrue(all(math.isfinite(s) for s in cache["std"]))

    def test_check_compares_bytes_and_names_what_differs(self):
        recorded = (HERE / "block-trace.json").read_bytes()
        t = json.loads(recorded)
        t["layernorm_row0"]["mean"] = -0.0
        cases = {
            "its line ends differ": recorded.replace(b"\n", b"\r\n"),
            "layernorm_row0.mean: -0.0 -> 0.0": trace_block.to_json(t).encode(),
            "not UTF-8": b"\xff" + recorded,
            "not valid JSON": b"[" * 100_000,
            "more than 1,000,000 bytes": b" " * 1_000_001,
            "layout differs": recorded.replace(b'  "story"', b'"story"'),
        }
        for expected, data in cases.items():
            with self.subTest(case=expected), lab_copy(block_trace_json=data), \
                    mock.patch.object(trace_block, "trace", recorded_trace):
                ok, message = trace_block.check()
                self.assertFalse(ok)
                self.assertIn(expected, message)

    # -- one line, never a traceback, from both command lines

    def test_problems_with_the_lab_s_files_are_one_line(self):
        corpus = (HERE / "corpus.txt").read_bytes()
        first = corpus[:corpus.index(b"\n")]
        cases = [
            ("tokenizer.json is not JSON", {"tokenizer_json": b"{ not json"}, ["--check"],
             ["tokenizer.json is not JSON", "python3 bpe.py --write"]),
            ("tokenizer.json is not UTF-8", {"tokenizer_json": b"\xff\xfe"}, [],
             ["tokenizer.json is not UTF-8 text"]),
            ("tokenizer.json is missing", {"tokenizer_json": None}, ["--write"],
             ["tokenizer.json: no such file", "python3 bpe.py --write"]),
            ("corpus.txt is empty", {"corpus_txt": b""}, [], ["corpus.txt is empty"]),
            ("corpus.txt is not UTF-8", {"corpus_txt": b"mia \xe9\n"}, [],
             ["corpus.txt is not UTF-8 text"]),
            ("corpus.txt has Windows line ends", {"corpus_txt": corpus.replace(b"\n", b"\r\n")},
             ["--check"], ["corpus.txt line 1 ends with \\r\\n"]),
            ("the first story is too long", {"corpus_txt": first + b" mia has a red hat." * 6
                                             + corpus[len(first):]}, [],
             ["corpus.txt line 1: the first story is", "it has 64 positions"]),
            ("the first story holds a character the tokenizer lacks",
             {"corpus_txt": b"Mia" + corpus[3:]}, [], ["corpus.txt line 1: character 'M'"]),
            ("a story --time reads holds such a character",
             {"corpus_txt": first + b"\nmia has 3 hats.\n"}, ["--time"],
             ["corpus.txt line 2: character '3'"]),
        ]
        for case, files, args, parts in cases:
            with self.subTest(case=case), lab_copy(**files):
                one_line(self, *run_main(trace_block.main, *args), *parts)
        bpe_cases = [
            ("corpus.txt is missing", {"corpus_txt": None}, ["--write"],
             ["corpus.txt: no such file"]),
            ("corpus.txt has Windows line ends", {"corpus_txt": corpus.replace(b"\n", b"\r\n")},
             ["--check"], ["corpus.txt line 1 ends with \\r\\n"]),
            ("corpus.txt is empty", {"corpus_txt": b""}, [], ["corpus.txt is empty"]),
        ]
        for case, files, args, parts in bpe_cases:
            with self.subTest(case="bpe.py: " + case), lab_copy(**files):
                one_line(self, *run_main(bpe.main, *args), *parts)

    def test_a_folder_where_a_file_belongs_is_one_line(self):
        for name, runs in (("tokenizer.json", [(trace_block.main, ["--show"]),
                                                (bpe.main, ["--write"])]),
                           ("corpus.txt", [(trace_block.main, ["--time"]), (bpe.main, ["--check"])]),
                           ("block-trace.json", [(trace_block.main, ["--check"]),
                                                 (trace_block.main, ["--write"])])):
            for main, args in runs:
                with self.subTest(file=name, command=[main.__module__] + args), \
                        lab_copy(**{re.sub(r"[.-]", "_", name): None}) as folder, \
                        mock.patch.object(trace_block, "trace", recorded_trace):
                    (folder / name).mkdir()
                    one_line(self, *run_main(main, *args), name)

    def test_a_folder_that_cannot_be_written_in_is_one_line(self):
        refused = mock.patch.object(bpe.tempfile, "mkstemp",
                                    side_effect=PermissionError(13, "Permission denied"))
        with lab_copy() as folder, refused, mock.patch.object(trace_block, "trace",
                                                              recorded_trace):
            one_line(self, *run_main(trace_block.main, "--write"), "cannot write",
                     "block-trace.json: Permission denied", "the old file is unchanged")
            self.assertEqual((folder / "block-trace.json").read_bytes(),
                             (HERE / "block-trace.json").read_bytes())

    def test_a_tokenizer_that_cannot_encode_the_trace_s_sentences_is_one_line(self):
        without_w = bpe.Tokenizer.train(FIRST_STORY.replace("w", "") + "\n", 40)
        with lab_copy(tokenizer_json=without_w.to_json().encode()):
            one_line(self, *run_main(trace_block.main, "--show"),
                     "tokenizer.json cannot encode 'now mia gives the hat to leo.'",
                     "python3 bpe.py --write")

    def test_time_on_a_corpus_of_one_short_story(self):
        with lab_copy(corpus_txt=b"mia has a red hat.\n"), mock.patch.object(
                trace_block, "time_steps", functools.partial(REAL_TIME_STEPS, lengths=(4, 9),
                                                             repeats=1)):
            code, out, err = run_main(trace_block.main, "--time")
        self.assertEqual(code, 0, err)
        self.assertEqual([line.split()[0] for line in out.splitlines()[2:]], ["4", "9"])

    def test_a_full_standard_output_is_one_line(self):
        # python3 bpe.py >/dev/full: every write fails
        err = io.StringIO()
        with mock.patch.object(sys, "stdout", io.TextIOWrapper(FailingOutput(28, "No space left "
                                                                          "on device"))), \
                contextlib.redirect_stderr(err), \
                mock.patch.object(bpe, "silence_stdout") as silenced, sharing_training():
            code = bpe.main([])
        one_line(self, code, "", err.getvalue(), "cannot write to standard output: No space "
                                                 "left on device")
        silenced.assert_called_once()      # so that Python's flush at exit does not fail again

    def test_a_closed_standard_output_is_one_line(self):
        # python3 trace_block.py --show 1>&-: Python starts with sys.stdout None
        err = io.StringIO()
        with mock.patch.object(sys, "stdout", None), contextlib.redirect_stderr(err):
            code = trace_block.main(["--show"])
        one_line(self, code, "", err.getvalue(), "standard output is closed")

    def test_a_reader_that_stops_early_ends_quietly(self):
        # python3 bpe.py | head: the reader closes the pipe before the end
        closed = io.TextIOWrapper(FailingOutput(32, "Broken pipe"), encoding="utf-8")
        err = io.StringIO()
        with mock.patch.object(sys, "stdout", closed), contextlib.redirect_stderr(err), \
                mock.patch.object(bpe, "silence_stdout") as silenced, sharing_training():
            code = bpe.main([])
        self.assertEqual((code, err.getvalue()), (1, ""))
        silenced.assert_called_once()      # so that Python's flush at exit does not fail again

    def test_usage_errors_exit_with_code_2(self):
        for main in (trace_block.main, bpe.main):
            for flag in ("--chek", "--writ", "check"):
                with self.subTest(script=main.__module__, flag=flag):
                    code, _, err = run_main(main, flag)
                    self.assertEqual(code, 2)
                    self.assertIn("unrecognized arguments", err)


REAL_LOSS_AND_RELU = trace_block.loss_and_relu_pattern


class FailingOutput(io.RawIOBase):
    """A standard output whose every write fails with OSError(number, why): a closed pipe
    (32), a full disk (28)."""

    def __init__(self, number, why):
        super().__init__()
        self.error = (number, why)

    def writable(self):
        return True

    def write(self, data):
        raise (BrokenPipeError if self.error[0] == 32 else OSError)(*self.error)


@functools.lru_cache(maxsize=None)
def start_script_runs():
    """Start the two runs of the lab's scripts that need a process of their own (each must
    exit with 0 through `sys.exit(main())`), so that they go on while other tests run:
    {case: (process, folder)}."""
    folder = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, folder, True)
    for name in LAB_FILES:
        (Path(folder) / name).write_bytes((HERE / name).read_bytes())
    (Path(folder) / "tokenizer.json").write_text("stale\n")        # --write must replace it
    env = dict(os.environ, PYTHONIOENCODING="utf-8", COLUMNS="80", PYTHONDONTWRITEBYTECODE="1")
    give_way = (lambda: os.nice(5)) if os.name == "posix" else None    # this process first
    runs = {}
    for case, args, cwd in (("bpe.py --write", ["bpe.py", "--write"], folder),
                            ("trace_block.py --show", ["trace_block.py", "--show"], HERE)):
        # -S: without site-packages, which the lab never needs (and it starts sooner)
        runs[case] = (subprocess.Popen([sys.executable, "-S", *args], cwd=cwd, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       preexec_fn=give_way), cwd)
    return runs


@functools.lru_cache(maxsize=None)
def script_runs():
    """How the runs of start_script_runs ended: {case: (exit code, stdout, stderr, folder)}."""
    results = {}
    for case, (process, cwd) in start_script_runs().items():
        out, err = process.communicate(timeout=120)
        results[case] = (process.returncode, out.decode("utf-8"), err.decode("utf-8"), str(cwd))
    return results


################ Beyond the lesson: the pictures and the command lines

BLOCKS = set("▏▎▍▌▋▊▉█")    # anything a bar is drawn with


def pictures(module=None):
    """What python3 trace_block.py --show prints, split into the rows of its two pictures."""
    with mock.patch.object(trace_block, "model", module or REAL_MODEL):
        text = printed(trace_block.show)
    lines = text.splitlines()
    split = next(n for n, line in enumerate(lines) if line.startswith("Attention weights"))
    # the rows of each picture are the lines drawn between │ rules
    return (text, [line for line in lines[:split] if "│" in line],
            [line for line in lines[split:] if "│" in line])


class PictureTests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.text, cls.gap_rows, cls.grid_rows = pictures()
        p, tok = series_params(), tokenizer()
        cls.T = len(tok.encode(trace_block.ORDER_A))
        cls.gaps = {False: trace_block.exact_gaps(p, tok, False),
                    True: trace_block.exact_gaps(p, tok, True)}

    def bars(self, row):
        """The two bars of a gap row: without positions, with positions."""
        _, without, with_ = row.split("│")
        return without[:trace_block.BAR_CELLS], with_[:trace_block.BAR_CELLS]

    def test_every_line_fits_in_80_columns(self):
        for n, line in enumerate(self.text.splitlines()):
            with self.subTest(line=n):
                self.assertLessEqual(len(line), 80, line)

    def test_a_bar_is_drawn_exactly_where_the_gap_is_not_zero(self):
        self.assertEqual(len(self.gap_rows), self.T)
        for t, row in enumerate(self.gap_rows):
            for use_positions, drawn in zip((False, True), self.bars(row)):
                with self.subTest(position=t, use_positions=use_positions):
                    self.assertEqual(bool(BLOCKS & set(drawn)), self.gaps[use_positions][t] > 0,
                                     f"gap {self.gaps[use_positions][t]!r}, bar {drawn!r}")
        self.assertEqual(trace_block.bar(1e-12, 1.0, 10), "▏" + " " * 9)   # a sliver, not 0
        self.assertEqual(trace_block.bar(0.0, 1.0, 10), " " * 10)

    def test_the_grid_draws_each_weight_the_model_computed(self):
        _, cache = model.forward(series_params(), tokenizer().encode(trace_block.ORDER_A))
        weights = cache["att"]["weights"]
        self.assertEqual(len(self.grid_rows), self.T)
        for i, (row, drawn) in enumerate(zip(weights, self.grid_rows)):
            cells = drawn.split("│")[1]
            with self.subTest(row=i):
                self.assertEqual(cells, "".join(trace_block.cell(w) for w in row))
                self.assertEqual(drawn.split("│")[2].split()[0], "1.0000")   # the row's sum

    def test_a_mask_that_leaks_shows_in_the_grid_and_its_caption(self):
        if "no position looks at a later one" not in " ".join(self.text.split()):
            self.skipTest("model.py's own mask already leaks (see "
                          "Mechanism.test_later_token_does_not_change_earlier_logits)")
        leaky = model_with_if_possible(("/ sqrt_d if j <= i else", "/ sqrt_d if j <= i + 1 else"))
        if leaky is None:
            self.skipTest("the line that masks j > i is not in model.py as it is")
        text, _, grid_rows = pictures(leaky)
        above = [cells for i, row in enumerate(grid_rows)
                 for cells in [row.split("│")[1][2 * (i + 1):2 * (i + 2)]] if i + 1 < self.T]
        self.assertTrue(all(cell != " " + trace_block.MASKED for cell in above), above)
        self.assertIn("the causal mask leaks", " ".join(text.split()))

    def test_the_captions_say_what_the_numbers_show(self):
        self.assertIn("some weights a row can see are exactly 0",       # a weight underflowed
                      trace_block.attention_caption([[1.0, 0.0], [0.0, 1.0]]))
        # a last gap that is not 0.0 is not counted among the earlier ones
        self.assertIn("last position's gap is 0.1, not 0.0",
                      trace_block.gaps_caption([0.0, 0.3, 0.1], [0.0, 0.2, 0.01]))
        self.assertIn("position 0 has a gap of 0.0 too",
                      trace_block.gaps_caption([0.0, 0.3, 0.1], [0.0, 0.2, 0.01]))

    def test_the_script_prints_the_same_pictures_and_exits_0(self):
        code, out, err, _ = script_runs()["trace_block.py --show"]
        self.assertEqual(code, 0, err)
        self.assertEqual(out, self.text)


class CommandLineTests(unittest.TestCase):
    """The two command lines: help, and what each mode prints and returns."""

    def test_help_explains_every_flag_with_examples_in_80_columns(self):
        with mock.patch.dict(os.environ, COLUMNS="80"):
            for main, flags in ((trace_block.main, ("--write", "--check", "--show", "--time")),
                                (bpe.main, ("--write", "--check"))):
                code, out, _ = run_main(main, "--help")
                script = main.__module__ + ".py"
                with self.subTest(script=script):
                    self.assertEqual(code, 0)
                    for flag in flags:
                        self.assertIn(f"python3 {script} {flag}", out)
                    self.assertLessEqual(max(map(len, out.splitlines())), 79)

    def test_check_passes_when_the_file_holds_the_trace(self):
        with mock.patch.object(trace_block, "trace", recorded_trace):
            code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual((code, out, err), (0, "block-trace.json is up to date.\n", ""))

    def test_check_on_a_stale_trace_names_the_figure_and_says_when_to_write(self):
        stale = recorded_trace()
        stale["initial_loss"] = 4.0
        stale["order_test"]["gaps_by_position_without_positions"][8] = 0.5
        with lab_copy(block_trace_json=trace_block.to_json(stale).encode()), \
                mock.patch.object(trace_block, "trace", recorded_trace):
            code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual(code, 1)
        self.assertIn(f"initial_loss: 4.0 -> {recorded_trace()['initial_loss']}", err)
        self.assertIn("order_test.gaps_by_position_without_positions[8]: 0.5 -> 0.0", err)
        self.assertIn("If you changed the lab on purpose, record the new figures: "
                      "python3 trace_block.py --write", err)
        self.assertIn("If you did not, undo the change", err)

    def test_check_on_a_missing_trace_says_so_before_computing_anything(self):
        with lab_copy(block_trace_json=None), \
                mock.patch.object(trace_block, "trace", side_effect=AssertionError("computed")):
            code, out, err = run_main(trace_block.main, "--check")
        self.assertEqual(code, 1)
        self.assertIn("block-trace.json is missing. Run: python3 trace_block.py --write", err)

    def test_write_then_check(self):
        with lab_copy(block_trace_json=None) as folder, \
                mock.patch.object(trace_block, "trace", recorded_trace):
            self.assertEqual(run_main(trace_block.main, "--write")[:2],
                             (0, "wrote block-trace.json\n"))
            self.assertEqual((folder / "block-trace.json").read_bytes(),
                             trace_block.to_json(recorded_trace()).encode("utf-8"))
            self.assertEqual(run_main(trace_block.main, "--check")[0], 0)

    def test_no_flag_prints_the_trace(self):
        with mock.patch.object(trace_block, "trace", recorded_trace):
            code, out, _ = run_main(trace_block.main)
        self.assertEqual((code, out), (0, trace_block.to_json(recorded_trace())))

    def test_time_prints_milliseconds_and_tokens_per_second(self):
        fast = functools.partial(REAL_TIME_STEPS, lengths=(2, 3), repeats=1)
        with mock.patch.object(trace_block, "time_steps", fast):
            code, out, _ = run_main(trace_block.main, "--time")
        lines = out.splitlines()
        self.assertEqual(code, 0)
        self.assertIn("ms/step", lines[1])
        self.assertIn("tokens/s", lines[1])
        self.assertEqual([line.split()[0] for line in lines[2:]], ["2", "3"])

    def test_bpe_write_rewrites_tokenizer_json_byte_for_byte_and_exits_0(self):
        code, out, err, folder = script_runs()["bpe.py --write"]
        self.assertEqual(code, 0, err)
        self.assertIn("wrote", out)
        self.assertEqual((Path(folder) / "tokenizer.json").read_bytes(),
                         (HERE / "tokenizer.json").read_bytes())

    def test_bpe_check_and_demo_exit_0(self):
        for args in (["--check"], []):
            with self.subTest(args=args), sharing_training():
                code, out, err = run_main(bpe.main, *args)
                self.assertEqual(code, 0, err)
                self.assertTrue(out)


REAL_TIME_STEPS = trace_block.time_steps


################ Beyond the lesson: the README

class ReadmeTests(unittest.TestCase):
    """What the README says about the lab is true. (Its figures and excerpts of output are
    checked with the recorded trace, in Recorded.test_recorded_trace.)"""

    def test_the_readme_shows_the_two_commands_a_newcomer_runs(self):
        self.assertIn("python3 trace_block.py", readme_text())
        self.assertIn("python3 -m unittest -v test_model.py", readme_text())

    def test_every_test_the_readme_names_exists(self):
        names = set(re.findall(r"`(test_\w+)`", readme_text()))
        self.assertGreaterEqual(len(names), 5)
        known = {name for case in all_test_classes() for name in dir(case)
                 if name.startswith("test_")}
        self.assertEqual(names - known, set(), "the README names tests that do not exist")

    def test_every_excerpt_comes_from_a_command_the_tests_run(self):
        commands = [command for command, _, output in readme_outputs() if output is not None]
        self.assertGreaterEqual(len(commands), 2)


def all_test_classes():
    module = sys.modules[__name__]
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, unittest.TestCase)]


################ Beyond the lesson: the tokenizer

class TokenizerTests(unittest.TestCase):
    """bpe.py's training, encoding and decoding; the lab's corpus.txt and tokenizer.json."""

    @classmethod
    def setUpClass(cls):
        cls.corpus = bpe.read_corpus(CORPUS_PATH)
        cls.tok = tokenizer()
        with open(TOKENIZER_PATH, encoding="utf-8") as file:
            cls.data = json.load(file)

    # ---- the algorithm, on small texts

    def test_textbook_example_aaabdaaabac_merges_aa_then_ab_then_aaab(self):
        tok = bpe.Tokenizer.train("aaabdaaabac", 7)
        self.assertEqual(tok.vocab, ["a", "b", "c", "d", "aa", "ab", "aaab"])
        self.assertEqual(tok.merges, [["a", "a"], ["a", "b"], ["aa", "ab"]])
        self.assertEqual(tok.encode("aaabdaaabac"), [6, 3, 6, 0, 2])
        self.assertEqual(tok.decode([6, 3, 6, 0, 2]), "aaabdaaabac")

    def test_a_tie_goes_to_the_pair_with_the_smallest_left_then_right_id(self):
        # (text, vocab size, the merges that must win, the counts they had)
        cases = [
            # the textbook's 2nd merge: ("aa", "a") = (4, 0) and ("a", "b") = (0, 1) both occur
            # twice
            ("aaabdaaabac", 6, [(0, 0), (0, 1)], [4, 2]),
            # every pair occurs once; ("a", "b") = (0, 1) comes last in the text and still wins
            ("cdab", 5, [(0, 1)], [1]),
            # the left ids tie, so the right id decides: ("a", "b") = (0, 1) beats
            # ("a", "c") = (0, 2)
            ("acab", 4, [(0, 1)], [1]),
        ]
        for text, size, merges, counts in cases:
            with self.subTest(text=text):
                _, got_merges, got_counts = bpe.learn_merges(text, size)
                self.assertEqual((got_merges, got_counts), (merges, counts))

    def test_encode_applies_merges_in_the_order_they_were_learned(self):
        # "abc" can become ab|c or a|bc: the merge learned first decides
        ab_first = bpe.Tokenizer(["a", "b", "c", "ab", "bc"], [("a", "b"), ("b", "c")])
        bc_first = bpe.Tokenizer(["a", "b", "c", "bc", "ab"], [("b", "c"), ("a", "b")])
        self.assertEqual(ab_first.tokens("abc"), ["ab", "c"])
        self.assertEqual(bc_first.tokens("abc"), ["a", "bc"])

    def test_every_learned_token_lies_within_one_chunk(self):
        for token in self.tok.vocab:
            with self.subTest(token=token):
                self.assertEqual(bpe.split_chunks(token), [token])

    def test_chunks_join_back_to_the_text(self):
        for text in [self.corpus, "", " ", "   ", "\n\n", "a  b", " .,\n x ", "mia, hat.\n"]:
            with self.subTest(text=text[:30]):
                self.assertEqual("".join(bpe.split_chunks(text)), text)

    def test_round_trip_gives_back_the_text(self):
        cases = [self.corpus[:3000], "", "m", ".", "\n", " ", "    ", "\n\n\n", " \n  \n\n   ",
                 "mia  has   a red hat .\n\n", ",.,. ,", FIRST_STORY + "\n"]
        for text in cases:
            with self.subTest(text=text[:30]):
                ids = self.tok.encode(text)
                self.assertEqual(self.tok.decode(ids), text)
                self.assertEqual("".join(self.tok.tokens(text)), text)

    # ---- what the lab needs from corpus.txt and tokenizer.json

    def test_the_vocabulary_has_96_tokens_from_the_corpus_alphabet(self):
        self.assertEqual(len(self.tok.vocab), 96)
        alphabet = sorted(set(self.corpus))
        self.assertEqual(self.tok.vocab[:len(alphabet)], alphabet)
        self.assertEqual(self.tok.alphabet_size, len(alphabet))

    def test_the_corpus_starts_with_the_first_story_and_every_story_ends_with_a_full_stop(self):
        self.assertTrue(self.corpus.endswith("\n"))
        stories = self.corpus[:-1].split("\n")
        self.assertEqual(stories[0], FIRST_STORY)
        self.assertGreaterEqual(len(stories), 300)
        for number, story in enumerate(stories, 1):
            with self.subTest(line=number):
                self.assertTrue(story.endswith("."), story)
                self.assertEqual(story, story.lower())

    def test_the_sentences_of_the_spec_split_as_it_says(self):
        tokens = self.tok.tokens
        self.assertEqual(len(tokens(FIRST_STORY + "\n")), 37, "|".join(tokens(FIRST_STORY)))
        a, b = tokens("now mia gives the hat to leo."), tokens("now leo gives the hat to mia.")
        self.assertEqual(a, ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."])
        swap = {" mia": " leo", " leo": " mia"}
        self.assertEqual(b, [swap.get(token, token) for token in a])
        hat, ball = tokens("mia has a red hat."), tokens("mia has a red ball.")
        self.assertEqual(hat[:4], ["mia", " has", " a", " red"])
        self.assertEqual(ball[:4], hat[:4])
        self.assertNotEqual(ball[4], hat[4])
        self.assertLessEqual(len(ball), 9, "|".join(ball))

    def test_retraining_on_the_corpus_reproduces_tokenizer_json_byte_for_byte(self):
        with sharing_training():
            trained = bpe.Tokenizer.train(self.corpus, 96).to_json().encode("utf-8")
        self.assertEqual(trained, (HERE / "tokenizer.json").read_bytes())

    def test_a_saved_tokenizer_loads_back_the_same(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "copy.json")
            self.tok.save(path)
            again = bpe.Tokenizer.load(path)
        self.assertEqual((again.vocab, again.merges), (self.tok.vocab, self.tok.merges))
        self.assertEqual(again.to_json(), self.tok.to_json())

    def test_check_reports_a_stale_or_missing_tokenizer_and_the_command_that_fixes_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            bpe.Tokenizer(self.tok.vocab[:-1], self.tok.merges[:-1]).save(path)   # one short
            out = io.StringIO()
            with sharing_training():
                self.assertEqual(bpe.check(CORPUS_PATH, path, out), 1)
                self.assertIn(f'+    {json.dumps(self.tok.vocab[95], ensure_ascii=False)}: 95',
                              out.getvalue())
                self.assertIn("python3 bpe.py --write", out.getvalue())
                out = io.StringIO()
                self.assertEqual(bpe.check(CORPUS_PATH, os.path.join(tmp, "none.json"), out), 1)
        self.assertIn("missing", out.getvalue())
        self.assertIn("python3 bpe.py --write", out.getvalue())

    def test_the_demo_prints_the_output_pasted_at_the_end_of_bpe_py(self):
        source = Path(bpe.__file__).read_text(encoding="utf-8")
        block = source[source.index("# What `python3 bpe.py` prints"):
                       source.index('if __name__ == "__main__":')]
        pasted = [line[len("#     "):] for line in block.splitlines()
                  if line.startswith("#     ") and line != "#     ..."]
        with sharing_training():
            lines = printed(bpe.demo).splitlines()
        self.assertGreater(len(pasted), 5)
        missing = [line for line in pasted if line not in lines]
        if missing:
            self.fail("bpe.py's pasted demo output has lines the demo no longer prints (after a "
                      "change to corpus.txt, paste the new output):\n  " + "\n  ".join(missing))

    # ---- tokenizer.json that is not one: refused, saying why

    def load_data(self, data):
        """Load a tokenizer from a file holding data as JSON."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "tokenizer.json"
            path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
            return bpe.Tokenizer.load(path)

    def changed(self, **fields):
        """A copy of tokenizer.json's data with some fields replaced."""
        data = json.loads(json.dumps(self.data))
        data.update(fields)
        return data

    def test_load_refuses_a_file_that_is_not_a_tokenizer(self):
        vocab, merges = self.data["vocab"], self.data["merges"]
        last, first = self.tok.vocab[-1], self.tok.vocab[0]
        A = self.tok.alphabet_size
        without = {field: {k: v for k, v in self.data.items() if k != field}
                   for field in bpe.FIELDS}
        rows = [
            *[(f"not JSON: {text!r}", text, ValueError, "is not JSON")
              for text in ("", "vocab: 96", '{"version": 1,')],
            ("JSON nested too deep", "[" * 100_000, ValueError, "nested too deep|is not JSON"),
            *[(f"{field} missing", without[field], ValueError, f"missing field.*{field}")
              for field in bpe.FIELDS],
            ("an unknown field", self.changed(added=[]), ValueError, "unknown field.*added"),
            ("a key given twice", '{"version": 1, "version": 1}', ValueError,
             "'version' appears twice"),
            ("version 2", self.changed(version=2), ValueError, "version 2 is not supported"),
            ("a pattern that is not a regular expression", self.changed(pattern="( ?\\w+"),
             ValueError, "not a regular expression"),
            ("a merge part not in vocab", self.changed(merges=[["Q", "t"]] + merges[1:]),
             ValueError, "merge 0 .*part 'Q' is not in vocab"),
            ("a merge whose result is not in vocab",
             self.changed(merges=[[merges[0][1], merges[0][0]]] + merges[1:]), ValueError,
             "merge 0 .*which is not in vocab"),
            ("the first two merges swapped", self.changed(merges=[merges[1], merges[0]]
                                                          + merges[2:]),
             ValueError, f"merge 0 .*must make token {A}|merge 0 .*before it is made"),
            ("a merge that uses a token before it is made",
             self.changed(merges=[[self.tok.vocab[A], "a"]] + merges[1:]), ValueError,
             "merge 0 .*before it is made"),
            *[(f"vocab ids with {case}", self.changed(vocab=bad), ValueError,
               "vocab ids must run 0..")
              for case, bad in (("a gap", {**vocab, last: 96}),
                                ("an id twice", {**vocab, last: 94}),
                                ("ids from 1", {t: i + 1 for t, i in vocab.items()}),
                                ("a negative id", {**vocab, first: -1}))],
            ("a base token of two characters",
             self.changed(vocab={(t + t if i == 0 else t): i for t, i in vocab.items()}),
             ValueError, "is in the base alphabet .* but is not a single character"),
            *[(case, data, TypeError, "")
              for case, data in (("a list", []), ("version a string", self.changed(version="1")),
                                 ("version a bool", self.changed(version=True)),
                                 ("pattern a number", self.changed(pattern=5)),
                                 ("vocab a list", self.changed(vocab=list(vocab))),
                                 ("a vocab id a string", self.changed(vocab={**vocab, last: "95"})),
                                 ("a vocab id a bool", self.changed(vocab={**vocab, first: False})),
                                 ("merges an object", self.changed(merges={"a": "b"})),
                                 ("a merge one string", self.changed(
                                     merges=[merges[0], "".join(merges[1])] + merges[2:])),
                                 ("a merge of three parts", self.changed(
                                     merges=[merges[0] + [""]] + merges[1:])),
                                 ("a merge part a number", self.changed(
                                     merges=[[merges[0][0], 5]] + merges[1:])))],
        ]
        for case, data, exception, message in rows:
            with self.subTest(case=case), self.assertRaisesRegex(exception, message):
                self.load_data(data)
        with tempfile.TemporaryDirectory() as tmp, self.assertRaises(FileNotFoundError):
            bpe.Tokenizer.load(Path(tmp) / "none.json")


################ PyTorch, an outside oracle (optional)

# The 18 parameters, in the order the spec's table gives them.
TORCH_PARAM_NAMES = list(model.PARAM_NAMES)
VOCAB = 96
TORCH_TOLERANCE = 1e-12


def torch_reference(params, ids, targets, use_positions=True):
    """The same model written with torch's own layers; autograd gives the gradients.

    Returns (logits, loss, grads) as float64 tensors; grads maps every name in
    PARAM_NAMES to a tensor shaped like the parameter (all zeros where the
    forward never used it, as pos_emb without positions).
    """
    F = torch.nn.functional
    # Copy the lab's lists in exactly: a Python float is a float64.
    P = {name: torch.tensor(params[name], dtype=torch.float64, requires_grad=True)
         for name in TORCH_PARAM_NAMES}
    T = len(ids)
    d = P["Wq"].shape[0]

    x0 = P["tok_emb"][torch.tensor(ids)]                               # (T, d)
    if use_positions:
        x0 = x0 + P["pos_emb"][:T]
    h1 = F.layer_norm(x0, (d,), P["ln1_g"], P["ln1_b"], eps=1e-5)     # (T, d)
    q, k, v = h1 @ P["Wq"], h1 @ P["Wk"], h1 @ P["Wv"]                 # (T, d)
    scores = (q @ k.T) / math.sqrt(d)                                  # (T, T)
    # Upper triangle above the diagonal = the future: -inf, so softmax gives it 0.
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    x1 = x0 + (weights @ v) @ P["Wo"]                                  # (T, d)
    h2 = F.layer_norm(x1, (d,), P["ln2_g"], P["ln2_b"], eps=1e-5)
    act = F.relu(h2 @ P["W1"] + P["b1"])                               # (T, H)
    x2 = x1 + act @ P["W2"] + P["b2"]                                  # (T, d)
    hf = F.layer_norm(x2, (d,), P["lnf_g"], P["lnf_b"], eps=1e-5)
    logits = hf @ P["W_out"] + P["b_out"]                              # (T, V)
    loss = F.cross_entropy(logits, torch.tensor(targets), reduction="mean")
    loss.backward()

    grads = {name: P[name].grad if P[name].grad is not None
             else torch.zeros_like(P[name])
             for name in TORCH_PARAM_NAMES}
    return logits.detach(), loss.detach(), grads


def random_tokens(count, seed):
    """`count` token IDs drawn from a seeded random.Random, the same on every run."""
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(count)]


def lab_against_torch(cfg, T, use_positions=True, token_seed=0):
    """Run the lab and torch on one random sequence of T tokens.

    Returns (diffs, lab_grads): diffs maps "logits", "loss" and every parameter
    name to the largest absolute difference between the two.
    """
    p = model.init_params(VOCAB, cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])
    tokens = random_tokens(T + 1, token_seed)
    ids, targets = tokens[:-1], tokens[1:]        # each position predicts the next

    logits, cache = model.forward(p, ids, use_positions=use_positions)
    loss, d_logits = model.loss_and_dlogits(logits, targets)
    lab_grads = model.backward(p, cache, d_logits)

    t_logits, t_loss, t_grads = torch_reference(p, ids, targets, use_positions)

    def largest_gap(lab_value, torch_value):
        lab_tensor = torch.tensor(lab_value, dtype=torch.float64)
        if lab_tensor.shape != torch_value.shape:
            raise AssertionError(f"shape {tuple(lab_tensor.shape)} from the lab, "
                                 f"{tuple(torch_value.shape)} from torch")
        return (lab_tensor - torch_value).abs().max().item()

    diffs = {"logits": largest_gap(logits, t_logits),
             "loss": abs(loss - t_loss.item())}
    for name in TORCH_PARAM_NAMES:
        diffs[name] = largest_gap(lab_grads[name], t_grads[name])
    return diffs, lab_grads


@unittest.skipIf(torch is None,
                 "PyTorch is not installed: pip install torch to run this comparison")
class TorchOracleTests(unittest.TestCase):
    """The lab agrees with PyTorch (float64, autograd) to within 1e-12.

    Logits, loss and all 18 parameter gradients are compared; the tolerance is
    the largest absolute difference allowed, element by element. Both sides
    compute in float64, so they differ only by rounding (the lab's math.fsum
    against torch's ordinary sums), far below 1e-12; a real mistake in a
    forward or backward shows up many orders of magnitude above it.
    """

    def assert_matches_torch(self, cfg, T, use_positions=True):
        diffs, lab_grads = lab_against_torch(cfg, T, use_positions)
        self.assertEqual(list(lab_grads), TORCH_PARAM_NAMES,
                         "backward() must give one gradient per parameter, in order")
        for name, gap in diffs.items():
            with self.subTest(tensor=name, T=T, d=cfg["d"], use_positions=use_positions):
                self.assertLessEqual(
                    gap, TORCH_TOLERANCE,
                    f"{name}: largest |lab - torch| = {gap:.3e} "
                    f"exceeds the tolerance {TORCH_TOLERANCE:g}")
        return lab_grads

    def test_series_size_64_positions_matches_torch(self):
        self.assert_matches_torch(SERIES, T=64)

    def test_series_size_one_position_matches_torch(self):
        self.assert_matches_torch(SERIES, T=1)

    def test_small_copy_matches_torch(self):
        self.assert_matches_torch(TINY, T=8)

    def test_without_positions_matches_torch(self):
        lab_grads = self.assert_matches_torch(SERIES, T=64, use_positions=False)
        for row in lab_grads["pos_emb"]:
            for value in row:
                self.assertEqual(value, 0.0, "pos_emb gradient must be all zero "
                                             "when the forward leaves positions out")


################ Helpers the tests share, with examples

def short(x):
    """A number as the README writes it: 2 significant figures, 7.4e-10 rather than 7.4e-010.

    >>> short(7.431e-10), short(3.16e-06)
    ('7.4e-10', '3.2e-6')
    """
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def load_tests(loader, tests, pattern):
    """The lesson's twelve first, in the lesson's order, then the lab's own tests in the order
    of this file; then the >>> examples in the docstrings of model.py, bpe.py, trace_block.py
    and this file."""
    suite = unittest.TestSuite()
    classes = sorted(all_test_classes(), key=lambda case: SOURCE_ORDER.index(case.__name__))
    for case in classes:
        names = [name for name in vars(case) if name.startswith("test_")]
        suite.addTests(case(name) for name in names)
    for module in (model, bpe, trace_block, sys.modules[__name__]):
        suite.addTests(doctest.DocTestSuite(module))
    return suite


SOURCE_ORDER = re.findall(r"^class (\w+)\(unittest\.TestCase\)",
                          Path(__file__).read_text(encoding="utf-8"), re.M)


if __name__ == "__main__":
    unittest.main()
