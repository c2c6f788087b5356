"""The lab's tests: every claim the lesson makes about the model and the tokenizer, checked.

Run (from this folder, with nothing to install):
    python3 -m unittest -v test_model.py

The classes: the recorded trace; gradients against finite differences; layer norm; causality
and positions; bad input; planted bugs that the checks must catch; the pictures and the command
lines; the README's excerpts and figures; the tokenizer; and an optional comparison with
PyTorch, skipped where PyTorch is not installed.
The >>> examples in the docstrings of model.py, bpe.py and trace_block.py run too (load_tests,
at the end).
"""
import contextlib
import doctest
import functools
import io
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import types
import unittest
import warnings
from pathlib import Path
from unittest import mock

import bpe
import model
import trace_block
from trace_block import (SERIES, TINY, build, flatten, gradient_check, gradient_error,
                         last_logits_gap, position_gaps)

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


################ Shared fixtures

TOLERANCE = 1e-7            # the gradient check's bound on |central difference - backward()|


@functools.lru_cache(maxsize=None)
def tokenizer():
    return trace_block.load_tokenizer()


@functools.lru_cache(maxsize=None)
def series_params():
    return build(tokenizer(), SERIES)


def tiny_params():
    return build(tokenizer(), TINY)          # fresh each time: some tests change it


REAL_TRACE = trace_block.trace      # kept: some tests patch trace_block.trace with fresh_trace


@functools.lru_cache(maxsize=None)
def fresh_trace():
    """The trace, computed once for all the tests."""
    return REAL_TRACE()


def ball_example():
    """The gradient check's sentence, as inputs and next-token targets."""
    ids = tokenizer().encode(trace_block.GRADIENT_SENTENCE)
    return ids[:-1], ids[1:]


@functools.lru_cache(maxsize=None)
def numeric_gradients():
    """Central differences of the small copy's loss for every parameter (computed once)."""
    return trace_block.numeric_gradients(tiny_params(), *ball_example())


def backward_error():
    """The largest |central difference - backward()| on the small copy, with whatever
    model.backward (and the functions it calls) are at the moment of the call."""
    grads = trace_block.backward_gradients(tiny_params(), *ball_example())
    return trace_block.compare_gradients(grads, *numeric_gradients())["max_abs_error"]


def earlier_scores_change():
    """Whether changing the last token of a sequence changes any earlier position's scores."""
    p = series_params()
    ids = tokenizer().encode("mia has a red hat. leo has a ball.")
    other = ids[:-1] + [(ids[-1] + 1) % len(tokenizer().vocab)]
    a, b = model.forward(p, ids)[0], model.forward(p, other)[0]
    return a[:-1] != b[:-1]


def nudged(p, u, h):
    """A copy of the parameters moved by h along u (u: name -> flat list of numbers)."""
    out = {}
    for name, t in p.items():
        step = iter(u[name])
        out[name] = ([[a + h * next(step) for a in row] for row in t] if isinstance(t[0], list)
                     else [a + h * next(step) for a in t])
    return out


def run_script(*args):
    """Run one of the lab's scripts with this Python; returns the CompletedProcess."""
    # the pictures are not ASCII; argparse wraps --help to COLUMNS, so fix it at 80
    env = dict(os.environ, PYTHONIOENCODING="utf-8", COLUMNS="80")
    return subprocess.run([sys.executable, *args], cwd=HERE, env=env, capture_output=True,
                          encoding="utf-8", timeout=120)


################ The recorded trace

class TraceTests(unittest.TestCase):

    def test_recorded_trace_is_up_to_date(self):
        recorded = (HERE / "block-trace.json").read_text(encoding="utf-8")
        self.assertEqual(recorded, trace_block.to_json(fresh_trace()),
                         "block-trace.json is stale: run python3 trace_block.py --write")

    def test_trace_keys_are_in_the_order_of_the_spec(self):
        self.assertEqual(list(fresh_trace()), [
            "story", "story_tokens", "series_config", "vocab_size", "parameter_count",
            "parameters_by_tensor", "shapes", "initial_loss", "uniform_loss",
            "layernorm_row0", "order_test", "gradient_check"])

    def test_structural_figures_match_the_series(self):
        t = fresh_trace()
        self.assertEqual(t["story_tokens"], 37)
        self.assertEqual(t["vocab_size"], 96)
        self.assertEqual(t["parameter_count"], 7440)
        self.assertEqual(t["shapes"], {"x0": [36, 16], "attention_weights": [36, 36],
                                       "mlp_hidden": [36, 64], "logits": [36, 96]})
        self.assertEqual(t["gradient_check"]["parameters_checked"], 1060)
        self.assertEqual(t["gradient_check"]["max_error_rounded"], 0.0)

    def test_initial_loss_is_near_the_uniform_loss_ln_96(self):
        t = fresh_trace()
        self.assertEqual(t["uniform_loss"], round(math.log(96), 4))
        self.assertLess(abs(t["initial_loss"] - t["uniform_loss"]), 0.05)

    def test_layernorm_row0_has_mean_0_and_variance_just_below_1(self):
        row0 = fresh_trace()["layernorm_row0"]
        self.assertEqual(row0["mean"], 0.0)
        self.assertEqual(math.copysign(1.0, row0["mean"]), 1.0, "the mean must not be -0.0")
        self.assertTrue(0.97 < row0["variance"] < 1.0, row0)

    def test_parameters_by_tensor_add_up_to_7440(self):
        shapes = fresh_trace()["parameters_by_tensor"]
        self.assertEqual(list(shapes), list(model.PARAM_NAMES))
        self.assertEqual(sum(math.prod(s) for s in shapes.values()), 7440)

    def test_small_copy_has_1060_parameters(self):
        self.assertEqual(model.count_params(tiny_params()), 1060)


################ Gradients

class GradientTests(unittest.TestCase):

    def test_every_gradient_of_the_small_copy_matches_finite_differences(self):
        x, y = ball_example()
        report = gradient_check(tiny_params(), x, y)
        self.assertEqual(report["parameters_checked"], 1060)
        self.assertEqual(report["kinks"], [], "no nudge should cross a relu kink here")
        self.assertLess(report["max_abs_error"], TOLERANCE,
                        f"largest |numeric - backward| = {report['max_abs_error']:.2e}")
        self.assertLess(report["max_rel_error"], 1e-5,
                        f"largest relative error = {report['max_rel_error']:.2e}")

    def test_gradient_error_is_the_largest_absolute_difference(self):
        x, y = ball_example()
        self.assertLess(gradient_error(tiny_params(), x, y), TOLERANCE)

    def test_a_nudge_across_a_relu_kink_is_reported_not_failed(self):
        p = tiny_params()
        x, y = ball_example()
        # put hidden unit 0 at position 0 a hair above its kink: pre-activation 1e-9
        _, cache = model.forward(p, x)
        pre = model.linear(cache["h2"], p["W1"], p["b1"])[0][0]
        p["b1"][0] -= pre - 1e-9
        numeric, kinks = trace_block.numeric_gradients(p, x, y)
        self.assertIn(("b1", 0), kinks)
        with mock.patch.object(trace_block, "numeric_gradients", return_value=(numeric, kinks)):
            report = gradient_check(p, x, y)
            error = gradient_error(p, x, y)
        self.assertEqual(report["kinks"], kinks)
        self.assertEqual(report["parameters_checked"], 1060 - len(kinks))
        self.assertLess(report["max_abs_error"], TOLERANCE)
        # gradient_error is the spec's figure over every entry, kinks too, and across a kink
        # the slope of the loss is not its derivative
        self.assertGreater(error, 100 * TOLERANCE)

    def test_every_parameter_of_the_series_model_along_20_random_directions(self):
        """Directional derivatives: (L(p + h·u) - L(p - h·u)) / 2h against grad · u, for 20
        random unit directions u through all 7,440 parameters at once."""
        tok, p = tokenizer(), series_params()
        ids = tok.encode(trace_block.first_story())
        x, y = ids[:-1], ids[1:]
        grads = trace_block.backward_gradients(p, x, y)
        rng = random.Random(7)
        h = 1e-5
        worst = 0.0
        for _ in range(20):
            u = {name: [rng.gauss(0, 1) for _ in flatten(t)] for name, t in p.items()}
            norm = math.sqrt(math.fsum(v * v for name in u for v in u[name]))
            u = {name: [v / norm for v in vs] for name, vs in u.items()}
            analytic = math.fsum(g * v for name in p for g, v in zip(flatten(grads[name]), u[name]))
            sides = [trace_block.loss_and_relu_pattern(nudged(p, u, sign * h), x, y)
                     for sign in (1, -1)]
            self.assertEqual(sides[0][1], sides[1][1], "a nudge crossed a relu kink")
            numeric = (sides[0][0] - sides[1][0]) / (2 * h)
            worst = max(worst, abs(numeric - analytic) / max(abs(numeric), abs(analytic)))
        self.assertLess(worst, 1e-6, f"largest relative error over 20 directions: {worst:.2e}")

    def test_backward_gives_every_parameter_a_gradient_of_its_shape(self):
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        self.assertEqual(list(grads), list(p))
        for name in p:
            self.assertEqual(model.shape(grads[name]), model.shape(p[name]), name)

    def test_no_two_gradients_share_a_row(self):
        """A trainer may change gradients in place (clipping, say): no row may be the same list
        as another gradient's row or a parameter's, or one change would land twice."""
        p = series_params()
        ids = tokenizer().encode("mia has a red hat.")
        for use_positions in (True, False):
            logits, cache = model.forward(p, ids[:-1], use_positions)
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, ids[1:])[1])
            rows = [row for t in list(grads.values()) + list(p.values())
                    if isinstance(t[0], list) for row in t]
            rows += [t for t in list(grads.values()) + list(p.values())]
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


################ Layer norm

class LayerNormTests(unittest.TestCase):

    def test_gain_2_and_bias_1_give_rows_of_mean_1_and_variance_about_4(self):
        rng = random.Random(1)
        x = [[rng.gauss(3.0, 5.0) for _ in range(16)] for _ in range(4)]
        out, _ = model.layernorm_forward(x, [2.0] * 16, [1.0] * 16)
        for row in out:
            mean = math.fsum(row) / 16
            variance = math.fsum((v - mean) ** 2 for v in row) / 16
            self.assertAlmostEqual(mean, 1.0, places=12)
            self.assertAlmostEqual(variance, 4.0, delta=1e-4)   # eps pulls it a hair below 4

    def test_backward_with_non_unit_gains_matches_finite_differences(self):
        rng = random.Random(2)
        T, d, h = 3, 5, 1e-6
        x = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(T)]
        g = [rng.uniform(0.5, 2.0) for _ in range(d)]
        b = [rng.uniform(-1.0, 1.0) for _ in range(d)]
        weights = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(T)]

        def loss():   # a scalar that depends on every output: sum of out * weights
            out, _ = model.layernorm_forward(x, g, b)
            return math.fsum(o * w for ro, rw in zip(out, weights) for o, w in zip(ro, rw))

        _, cache = model.layernorm_forward(x, g, b)
        d_x, d_g, d_b = model.layernorm_backward(weights, g, cache)
        for name, values, analytic in (("x", x, d_x), ("g", [g], [d_g]), ("b", [b], [d_b])):
            worst = 0.0
            for row, a_row in zip(values, analytic):
                for c, kept in enumerate(row):
                    row[c] = kept + h
                    up = loss()
                    row[c] = kept - h
                    down = loss()
                    row[c] = kept
                    worst = max(worst, abs((up - down) / (2 * h) - a_row[c]))
            with self.subTest(gradient="d_" + name):
                self.assertLess(worst, 1e-8, f"d_{name}: largest error {worst:.2e}")


################ Causality and positions

class CausalityTests(unittest.TestCase):

    def test_ball_and_hat_sentences_agree_at_the_first_four_positions_only(self):
        tok, p = tokenizer(), series_params()
        hat = model.forward(p, tok.encode("mia has a red hat."))[0]
        ball = model.forward(p, tok.encode("mia has a red ball."))[0]
        self.assertEqual(hat[:4], ball[:4], "the first four positions must be bit-identical")
        self.assertNotEqual(hat[4], ball[4])

    def test_a_later_token_never_changes_earlier_scores(self):
        self.assertFalse(earlier_scores_change())

    def test_no_position_attends_to_a_later_one(self):
        _, cache = model.forward(series_params(), ball_example()[0])
        weights = cache["att"]["weights"]
        for i, row in enumerate(weights):
            self.assertEqual(row[i + 1:], [0.0] * (len(row) - i - 1))
            self.assertAlmostEqual(math.fsum(row), 1.0, places=15)


class PositionTests(unittest.TestCase):

    def test_positions_past_the_sequence_get_a_zero_pos_emb_gradient(self):
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        for t in range(len(x), len(p["pos_emb"])):
            self.assertEqual(grads["pos_emb"][t], [0.0] * len(p["pos_emb"][t]), t)
        self.assertNotEqual(grads["pos_emb"][0], [0.0] * len(p["pos_emb"][0]))

    def test_without_positions_pos_emb_gets_an_all_zero_gradient(self):
        p = series_params()
        x, y = ball_example()
        logits, cache = model.forward(p, x, use_positions=False)
        grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
        self.assertEqual(set(flatten(grads["pos_emb"])), {0.0})

    def test_without_positions_the_last_position_cannot_tell_the_order_apart(self):
        self.assertEqual(last_logits_gap(series_params(), tokenizer(), False), 0.0)

    def test_with_positions_the_last_position_can(self):
        self.assertGreater(last_logits_gap(series_params(), tokenizer(), True), 0.0)

    def test_without_positions_earlier_positions_still_differ(self):
        gaps = position_gaps(series_params(), tokenizer(), False)
        self.assertEqual(len(gaps), 9)
        self.assertEqual(gaps[:2], [0.0, 0.0])       # "n", "ow": the same in both sentences
        self.assertEqual(gaps[-1], 0.0)
        for t in range(2, 8):
            self.assertGreater(gaps[t], 0.0, f"position {t}")

    def test_the_two_order_sentences_hold_one_multiset_of_tokens(self):
        tok = tokenizer()
        a, b = tok.encode(trace_block.ORDER_A), tok.encode(trace_block.ORDER_B)
        self.assertEqual(sorted(a), sorted(b))
        self.assertNotEqual(a, b)


################ Bad input

class BadInputTests(unittest.TestCase):

    def setUp(self):
        self.p = series_params()

    def test_65_tokens_are_longer_than_the_64_positions(self):
        with self.assertRaisesRegex(ValueError, "^sequence of 65 tokens is longer than the "
                                                "64 positions the model has$"):
            model.forward(self.p, [1] * 65)

    def test_token_ids_outside_the_vocabulary_are_refused(self):
        for bad in (96, -1):
            with self.subTest(id=bad), self.assertRaisesRegex(
                    ValueError, re.escape(f"token IDs outside the vocabulary of size 96: [{bad}]")):
                model.forward(self.p, [1, bad, 2])

    def test_at_most_five_offending_ids_are_named(self):
        with self.assertRaisesRegex(ValueError, re.escape("[96, 97, 98, 99, 100] and 2 more")):
            model.forward(self.p, list(range(96, 103)))

    def test_an_empty_sequence_is_refused(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.forward(self.p, [])
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.loss_and_dlogits([], [])

    def test_three_positions_and_two_targets_are_refused(self):
        logits, _ = model.forward(self.p, [1, 2, 3])
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.loss_and_dlogits(logits, [2, 3])
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.sequence_loss(self.p, [1, 2, 3], [2, 3])

    def test_targets_outside_the_vocabulary_are_refused_not_wrapped(self):
        logits, _ = model.forward(self.p, [1, 2])
        for bad in (96, -1):
            with self.subTest(target=bad), self.assertRaisesRegex(
                    ValueError, re.escape(f"target IDs outside the vocabulary of size 96: [{bad}]")):
                model.loss_and_dlogits(logits, [1, bad])

    def test_text_instead_of_ids_is_refused(self):
        with self.assertRaisesRegex(TypeError, "not a str"):
            model.forward(self.p, "mia has a red hat.")

    def test_ids_that_are_not_ints_are_refused(self):
        for ids in ([1.0, 2.0], ["1", "2"], [None], [True, 2], None, 5, (i for i in [1])):
            with self.subTest(ids=ids), self.assertRaises(TypeError):
                model.forward(self.p, ids)

    def test_targets_that_are_not_ints_are_refused(self):
        logits, _ = model.forward(self.p, [1, 2])
        for targets in ([1.0, 2.0], "ab", None):
            with self.subTest(targets=targets), self.assertRaises(TypeError):
                model.loss_and_dlogits(logits, targets)

    def test_d_logits_of_the_wrong_shape_are_refused(self):
        logits, cache = model.forward(self.p, [1, 2, 3])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3, 4])
        for bad in (d_logits[:2], [row[:95] for row in d_logits], d_logits + d_logits[:1]):
            with self.subTest(shape=(len(bad), len(bad[0]))), \
                    self.assertRaisesRegex(ValueError, r"d_logits must have shape \(3, 96\)"):
                model.backward(self.p, cache, bad)

    def test_layer_norm_gain_or_bias_of_the_wrong_length_is_refused(self):
        x = [[1.0, 2.0, 3.0]]
        with self.assertRaisesRegex(ValueError, "gain has 2 entries but bias has 3"):
            model.layernorm_forward(x, [1.0, 1.0], [0.0, 0.0, 0.0])
        with self.assertRaisesRegex(ValueError, "rows of 3 values, but the gain has 2"):
            model.layernorm_forward(x, [1.0, 1.0], [0.0, 0.0])

    def test_init_params_refuses_sizes_that_are_not_positive_ints(self):
        for args in ((96, 0, 64, 64), (96, 16, -4, 64), (0, 16, 64, 64), (96, 16, 64, -1)):
            with self.subTest(args=args), self.assertRaisesRegex(ValueError, "positive size"):
                model.init_params(*args, seed=3)
        with self.assertRaisesRegex(TypeError, "d must be an int"):
            model.init_params(96, 16.0, 64, 64, seed=3)

    def test_attention_refuses_rows_of_different_widths(self):
        x = [[0.1] * 16, [0.2] * 15, [0.3] * 16]
        with self.assertRaisesRegex(ValueError, r"rows of one width, not \[15, 16\]"):
            model.attention_forward(self.p, x)

    def test_attention_backward_refuses_a_cache_missing_a_part(self):
        _, cache = model.attention_forward(self.p, [[0.1 * i for i in range(16)]] * 2)
        del cache["q"]
        with self.assertRaisesRegex(TypeError, "the cache attention_forward returned"):
            model.attention_backward(self.p, cache, [[0.0] * 16] * 2)

    def test_backward_refuses_a_cache_missing_a_part(self):
        logits, cache = model.forward(self.p, [1, 2])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3])
        for part in ("x0", "act", "att", "use_positions"):
            broken = {k: v for k, v in cache.items() if k != part}
            with self.subTest(missing=part), self.assertRaisesRegex(
                    TypeError, "the cache that forward"):
                model.backward(self.p, broken, d_logits)

    def test_backward_refuses_a_cache_whose_ids_this_vocabulary_lacks(self):
        logits, cache = model.forward(self.p, [1, 2])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3])
        cache = dict(cache, ids=[1, 200])
        with self.assertRaisesRegex(ValueError, re.escape("the cache's token IDs outside the "
                                                          "vocabulary of size 96: [200]")):
            model.backward(self.p, cache, d_logits)

    def test_parameters_with_an_unknown_name_are_refused(self):
        with self.assertRaisesRegex(ValueError, "parameters with unknown names: W3"):
            model.forward({**self.p, "W3": [[0.0]]}, [1, 2])

    def test_parameters_with_a_short_row_are_refused_naming_the_tensor(self):
        W2 = [list(row) for row in self.p["W2"]]
        W2[5] = W2[5][:-1]
        with self.assertRaisesRegex(ValueError, "parameter W2 has rows of different lengths"):
            model.forward({**self.p, "W2": W2}, [1, 2])

    def test_layer_norm_backward_refuses_a_cache_with_a_row_missing(self):
        x = [[1.0, 2.0, 4.0], [3.0, 1.0, 0.0]]
        _, cache = model.layernorm_forward(x, [1.0] * 3, [0.0] * 3)
        cache["std"] = cache["std"][:1]
        with self.assertRaisesRegex(ValueError, "2 rows but 1 standard deviations"):
            model.layernorm_backward(x, [1.0] * 3, cache)

    def test_init_params_refuses_a_negative_seed(self):
        with self.assertRaisesRegex(ValueError, "seed must be 0 or more, not -3"):
            model.init_params(96, 16, 64, 64, seed=-3)

    def test_scores_that_are_not_finite_are_refused(self):
        for bad in (math.inf, math.nan, -math.inf):     # -inf as the target's score: loss inf
            logits = [[0.0, 1.0, 2.0], [0.0, bad, 2.0]]
            with self.subTest(score=bad), self.assertRaisesRegex(
                    ValueError, "logits at position 1 are not all finite"):
                model.loss_and_dlogits(logits, [1, 2])

    def test_shape_refuses_ragged_rows(self):
        with self.assertRaisesRegex(ValueError, "ragged"):
            model.shape([[1.0, 2.0], [3.0]])

    # -- the model's parameters and caches

    def test_parameters_missing_a_tensor_are_refused_naming_it(self):
        for name in ("tok_emb", "W2", "b_out"):
            p = {k: v for k, v in self.p.items() if k != name}
            logits, cache = model.forward(self.p, [1, 2])
            _, d_logits = model.loss_and_dlogits(logits, [2, 3])
            with self.subTest(missing=name):
                with self.assertRaisesRegex(ValueError, f"^parameters missing: {name}$"):
                    model.forward(p, [1, 2])
                with self.assertRaisesRegex(ValueError, f"^parameters missing: {name}$"):
                    model.backward(p, cache, d_logits)

    def test_parameters_with_a_tensor_of_another_model_size_are_refused_naming_it(self):
        tiny = tiny_params()
        for name, got in (("Wq", (4, 4)), ("W1", (4, 8)), ("b1", (8,)), ("W_out", (4, 96)),
                          ("ln2_g", (4,)), ("pos_emb", (8, 4))):
            with self.subTest(tensor=name), self.assertRaisesRegex(
                    ValueError, re.escape(f"parameter {name} has shape {got}")):
                model.forward({**self.p, name: tiny[name]}, [1, 2])

    def test_parameters_that_are_not_a_dict_are_refused(self):
        for p in (None, list(self.p.values()), self.p["W1"]):
            with self.subTest(p=type(p).__name__), self.assertRaisesRegex(
                    TypeError, "parameters must be the dict init_params returns"):
                model.forward(p, [1, 2])

    def test_use_positions_that_is_not_a_bool_is_refused(self):
        # forward(p, x, y): the targets passed where use_positions goes
        for value in ("no", None, 0, [2, 3], []):
            with self.subTest(use_positions=value), self.assertRaisesRegex(
                    TypeError, "use_positions must be True or False"):
                model.forward(self.p, [1, 2], value)

    def test_backward_refuses_a_cache_that_forward_did_not_return(self):
        logits, cache = model.forward(self.p, [1, 2])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3])
        for case, bad in (("attention's cache", cache["att"]), ("an empty dict", {}),
                          ("the logits", logits), ("None", None)):
            with self.subTest(cache=case), self.assertRaisesRegex(
                    TypeError, r"backward needs the cache that forward\(p, ids\) returned"):
                model.backward(self.p, bad, d_logits)

    def test_backward_refuses_a_cache_from_a_model_of_another_size(self):
        logits, cache = model.forward(self.p, [1, 2])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3])
        with self.assertRaisesRegex(ValueError, r"the cache comes from a model of width 16 and "
                                                r"hidden 64 on 2 positions, not from p \(width 4"):
            model.backward(tiny_params(), cache, d_logits)

    def test_backward_refuses_d_logits_that_are_not_a_list_of_rows(self):
        logits, cache = model.forward(self.p, [1, 2])
        _, d_logits = model.loss_and_dlogits(logits, [2, 3])
        for bad in (None, d_logits[0], [tuple(row) for row in d_logits]):
            with self.subTest(d_logits=type(bad).__name__), self.assertRaisesRegex(
                    TypeError, "d_logits must be a list of rows"):
                model.backward(self.p, cache, bad)

    def test_init_params_refuses_a_seed_that_is_not_an_int(self):
        # None would draw other numbers on every call; "3" and 3.5 other numbers than 3
        for seed in (None, "3", 3.5, True):
            with self.subTest(seed=seed), self.assertRaisesRegex(TypeError,
                                                                 "seed must be an int"):
                model.init_params(96, 16, 64, 64, seed=seed)

    def test_count_params_refuses_anything_but_a_dict(self):
        for value in (None, self.p["W1"], list(self.p.values())):
            with self.subTest(value=type(value).__name__), self.assertRaisesRegex(
                    TypeError, "count_params takes the dict of parameters"):
                model.count_params(value)

    # -- layer norm and attention

    def test_layer_norm_refuses_an_empty_gain_instead_of_dividing_by_zero(self):
        with self.assertRaisesRegex(ValueError, "at least one entry"):
            model.layernorm_forward([[]], [], [])

    def test_layer_norm_backward_refuses_a_cache_it_did_not_make(self):
        _, cache = model.forward(self.p, [1, 2])
        for case, bad in (("the model's whole cache", cache), ("an empty dict", {})):
            with self.subTest(cache=case), self.assertRaisesRegex(
                    TypeError, "needs the cache its layernorm_forward returned"):
                model.layernorm_backward([[1.0] * 16] * 2, [1.0] * 16, bad)

    def test_layer_norm_backward_refuses_dy_or_gain_that_do_not_fit_the_forward_pass(self):
        _, cache = model.layernorm_forward([[1.0, 2.0, 4.0]], [1.0] * 3, [0.0] * 3)
        for case, dy, g in (("dy has 2 rows, not 1", [[1.0] * 3] * 2, [1.0] * 3),
                            ("dy has no rows", [], [1.0] * 3),
                            ("dy rows of 2, not 3", [[1.0] * 2], [1.0] * 3),
                            ("a gain of 2, not 3", [[1.0] * 3], [1.0] * 2),
                            ("an empty gain", [[1.0] * 3], [])):
            with self.subTest(case=case), self.assertRaisesRegex(
                    ValueError, r"forward pass normalized \(1, 3\)"):
                model.layernorm_backward(dy, g, cache)

    def test_attention_refuses_an_empty_sequence(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.attention_forward(self.p, [])

    def test_attention_refuses_weights_that_do_not_fit_the_rows_of_x(self):
        x = [[0.5] * 16, [0.25] * 16]
        with self.assertRaisesRegex(ValueError, r"rows of 4 values needs Wq of shape \(4, 4\), "
                                                r"not \(16, 16\)"):
            model.attention_forward(self.p, [row[:4] for row in x])
        with self.assertRaisesRegex(ValueError, r"rows of 16 values needs Wq of shape \(16, 16\), "
                                                r"not \(4, 4\)"):
            model.attention_forward(tiny_params(), x)
        with self.assertRaisesRegex(ValueError, r"attention needs p\['Wk'\], which is missing"):
            model.attention_forward({k: v for k, v in self.p.items() if k != "Wk"}, x)

    def test_attention_backward_refuses_the_whole_model_cache(self):
        _, cache = model.forward(self.p, [1, 2])
        with self.assertRaisesRegex(TypeError, r"cache\['att'\]"):
            model.attention_backward(self.p, cache, [[0.1] * 16] * 2)

    def test_attention_backward_refuses_d_out_of_the_wrong_shape(self):
        _, cache = model.forward(self.p, [1, 2, 3])
        for bad in ([[0.1] * 16] * 2, [[0.1] * 16] * 4, [[0.1] * 4] * 3, []):
            with self.subTest(rows=len(bad)), self.assertRaisesRegex(
                    ValueError, r"d_out must have shape \(3, 16\)"):
                model.attention_backward(self.p, cache["att"], bad)

    # -- the list helpers: zip() and map() stop at the shorter argument, so they check

    def test_matmul_refuses_rows_of_a_that_do_not_fit_the_rows_of_b(self):
        # a · b needs as many entries in each row of a as b has rows
        a, b = [[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
        with self.assertRaisesRegex(ValueError, r"the rows of a have 3 entries but b has 2 rows"):
            model.matmul(a, b)

    def test_add_refuses_matrices_of_two_shapes(self):
        for b in ([[1.0]], [[1.0, 2.0], [3.0, 4.0]]):
            with self.subTest(b=b), self.assertRaisesRegex(
                    ValueError, r"add\(\) needs two matrices of one shape, not \(1, 2\)"):
                model.add([[1.0, 2.0]], b)

    def test_linear_refuses_an_input_or_bias_of_the_wrong_length(self):
        W = [[1.0, 0.0], [0.0, 1.0]]
        for case, x, b in (("bias of 1", [[1.0, 2.0]], [0.5]),
                           ("bias of 3", [[1.0, 2.0]], [0.5, 0.5, 0.5]),
                           ("rows of 3", [[1.0, 2.0, 3.0]], [0.0, 0.0]),
                           ("rows of 1", [[1.0]], [0.0, 0.0])):
            with self.subTest(case=case), self.assertRaisesRegex(
                    ValueError, r"linear needs x \(T, n\), W \(n, m\) and b \(m\)"):
                model.linear(x, W, b)

    def test_linear_backward_refuses_shapes_that_do_not_fit(self):
        W = [[4.0, 5.0]]
        for case, d_y, x in (("2 rows of d_y, 1 of x", [[1.0, 2.0]] * 2, [[3.0]]),
                             ("d_y rows of 1, W columns 2", [[1.0]], [[3.0]]),
                             ("x rows of 2, W rows 1", [[1.0, 2.0]], [[3.0, 3.0]])):
            with self.subTest(case=case), self.assertRaisesRegex(
                    ValueError, "linear_backward needs d_y"):
                model.linear_backward(d_y, x, W)

    def test_the_list_helpers_refuse_ragged_rows_instead_of_cutting_them_short(self):
        ragged, I = [[1.0, 2.0], [3.0]], [[1.0, 0.0], [0.0, 1.0]]
        for name, call in (("linear", lambda: model.linear(ragged, I, [0.0, 0.0])),
                           ("add", lambda: model.add(ragged, I)),
                           ("add, b", lambda: model.add(I, ragged)),
                           ("matmul, a", lambda: model.matmul(ragged, I)),
                           ("matmul, b", lambda: model.matmul(I, ragged)),
                           ("add, three", lambda: model.add(I, I, ragged))):
            with self.subTest(name), self.assertRaisesRegex(
                    ValueError, r"needs rows of one length, not \[1, 2\]"):
                call()

    def test_transpose_refuses_ragged_rows(self):
        with self.assertRaisesRegex(ValueError, r"rows of one length, not \[1, 2\]"):
            model.transpose([[1.0, 2.0], [3.0]])

    def test_column_sums_refuses_ragged_rows(self):
        with self.assertRaisesRegex(ValueError, r"rows of one length, not \[1, 2\]"):
            model.column_sums([[1.0, 2.0], [3.0]])

    def test_shape_refuses_lists_nested_three_deep(self):
        with self.assertRaisesRegex(ValueError, "nested three deep"):
            model.shape([[[1.0, 2.0]], [[3.0, 4.0]]])

    def test_shape_refuses_a_mix_of_numbers_and_rows(self):
        with self.assertRaisesRegex(ValueError, "not a mix"):
            model.shape([1.0, [2.0]])

    def test_zeros_refuses_a_negative_size(self):
        for rows, cols in ((-1, 3), (2, -1)):
            with self.subTest(rows=rows, cols=cols), self.assertRaisesRegex(
                    ValueError, "sizes of at least 0"):
                model.zeros(rows, cols)

    # -- bpe.py

    def test_merge_refuses_a_pair_that_is_not_a_tuple_of_two_ids(self):
        # a list pair, as a merge read from tokenizer.json, would silently merge nothing
        for pair in ([1, 2], (1, 2, 3), "ab"):
            with self.subTest(pair=pair), self.assertRaisesRegex(
                    TypeError, "pair must be a tuple of two token ids"):
                bpe.merge([1, 2, 3, 1, 2], pair, 4)

    def test_best_pair_refuses_empty_counts(self):
        with self.assertRaisesRegex(ValueError, "no pair to merge"):
            bpe.best_pair({})

    def test_tokenizer_refuses_vocab_or_merges_that_are_not_lists(self):
        for vocab, merges, message in (("abc", [], "vocab must be a list, not str"),
                                       (None, [], "vocab must be a list, not NoneType"),
                                       (["a"], None, "merges must be a list, not NoneType")):
            with self.subTest(vocab=vocab, merges=merges), self.assertRaisesRegex(TypeError,
                                                                                  message):
                bpe.Tokenizer(vocab, merges)

    # -- trace_block.py

    def test_build_refuses_something_that_is_not_a_tokenizer(self):
        for tok in ("tokenizer.json", None):
            with self.subTest(tok=tok), self.assertRaisesRegex(TypeError,
                                                               "expected a tokenizer"):
                build(tok, SERIES)

    def test_build_refuses_a_config_with_a_key_missing_misspelt_or_extra(self):
        configs = {"seed missing": {"d": 4, "hidden": 8, "max_len": 8},
                   "hidden misspelt": {"d": 4, "hiden": 8, "max_len": 8, "seed": 3},
                   "an extra key": {**TINY, "lr": 0.1},
                   "not a dict": None}
        for case, cfg in configs.items():
            with self.subTest(case=case), self.assertRaisesRegex(
                    ValueError, re.escape("config must have exactly the keys "
                                          "['d', 'hidden', 'max_len', 'seed']")):
                build(tokenizer(), cfg)

    def test_the_position_experiment_refuses_something_that_is_not_a_tokenizer(self):
        for function in (position_gaps, last_logits_gap):
            for tok in (None, "tokenizer.json"):
                with self.subTest(function=function.__name__, tok=tok), \
                        self.assertRaisesRegex(TypeError, "expected a tokenizer"):
                    function(self.p, tok, True)

    def test_check_of_a_missing_file_named_by_a_string_says_so_and_gives_the_command(self):
        # CommandLineTests covers a Path; a str path used to raise AttributeError on .name
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(trace_block, "trace", fresh_trace):
            ok, message = trace_block.check(str(Path(tmp) / "block-trace.json"))
        self.assertFalse(ok)
        self.assertIn("block-trace.json is missing", message)
        self.assertIn("python3 trace_block.py --write", message)

    def run_trace_block_in_a_copy_without(self, missing, *args):
        """Run trace_block.py with args in a copy of the lab that lacks the file `missing`."""
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("model.py", "bpe.py", "trace_block.py", "tokenizer.json",
                         "corpus.txt", "block-trace.json"):
                if name != missing:
                    (Path(tmp) / name).write_bytes((HERE / name).read_bytes())
            return subprocess.run([sys.executable, "trace_block.py", *args], cwd=tmp,
                                  capture_output=True, text=True, timeout=120)

    def test_check_command_with_the_recorded_file_missing_exits_1_with_a_message(self):
        result = self.run_trace_block_in_a_copy_without("block-trace.json", "--check")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertIn("block-trace.json is missing", result.stderr)
        self.assertIn("python3 trace_block.py --write", result.stderr)

    def test_trace_block_without_tokenizer_json_exits_1_with_a_message(self):
        for args in (("--check",), ("--write",), ()):
            with self.subTest(args=args):
                result = self.run_trace_block_in_a_copy_without("tokenizer.json", *args)
                self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
                self.assertNotIn("Traceback", result.stderr)
                self.assertIn("tokenizer.json: no such file", result.stderr)
                self.assertIn("python3 bpe.py --write", result.stderr)


################ Planted bugs: each one must make a check fail

MODEL_SOURCE = (HERE / "model.py").read_text(encoding="utf-8")


def model_with(*changes):
    """A scratch copy of model.py with a bug planted: each change is (old, new), and old must
    occur in model.py exactly once. model.py itself is never edited."""
    source = MODEL_SOURCE
    for old, new in changes:
        if source.count(old) != 1:
            raise AssertionError(f"cannot plant the bug: {old!r} is not in model.py exactly once")
        source = source.replace(old, new)
    module = types.ModuleType("model_with_a_planted_bug")
    exec(compile(source, "model.py (with a planted bug)", "exec"), module.__dict__)
    return module


@contextlib.contextmanager
def planted(*changes):
    """Run the block with trace_block and this file using model.py with a bug planted."""
    mutant = model_with(*changes)
    with mock.patch.object(trace_block, "model", mutant), \
            mock.patch.object(sys.modules[__name__], "model", mutant):
        yield mutant


class PlantedBugTests(unittest.TestCase):
    """The lesson says its checks catch these mistakes; here each is planted in a scratch copy
    of model.py and the check that should catch it is shown to fail."""

    def assert_gradient_check_fails(self):
        error = backward_error()
        self.assertGreater(error, TOLERANCE, "the gradient check missed the planted bug")

    def test_the_unpatched_model_passes_the_same_check(self):
        self.assertLess(backward_error(), TOLERANCE)

    def test_layernorm_backward_without_its_last_term_is_caught(self):
        with planted(("fsum((t1, -term2, -xh_j * term3))", "fsum((t1, -term2))")):
            self.assert_gradient_check_fails()

    def test_relu_letting_gradient_through_negative_inputs_is_caught(self):
        with planted(("[[d_z if z > 0.0 else 0.0 for", "[[d_z for")):
            self.assert_gradient_check_fails()

    def test_a_missing_skip_path_gradient_around_the_mlp_is_caught(self):
        with planted(("d_x1 = add(d_x2, d_x1_mlp)", "d_x1 = d_x1_mlp")):
            self.assert_gradient_check_fails()

    def test_a_missing_skip_path_gradient_around_attention_is_caught(self):
        with planted(("d_x0 = add(d_x1, d_x0_att)", "d_x0 = d_x0_att")):
            self.assert_gradient_check_fails()

    def test_a_mask_that_sees_one_token_ahead_is_caught(self):
        with planted(("/ sqrt_d if j <= i else", "/ sqrt_d if j <= i + 1 else")):
            self.assertTrue(earlier_scores_change(), "the causality check missed the leak")

    def test_a_loss_gradient_without_its_1_over_T_is_caught(self):
        with planted(("[v / (total * T) for v in e]", "[v / total for v in e]"),
                     ("d_row[target] -= 1.0 / T", "d_row[target] -= 1.0")):
            self.assert_gradient_check_fails()

    def test_attention_backward_without_1_over_sqrt_d_is_caught(self):
        with planted(("[[entry / sqrt_d for entry in row] for row in matmul(d_scores, k)]",
                      "matmul(d_scores, k)"),
                     ("[[entry / sqrt_d for entry in row] for row in matmul(transpose(d_scores), q)]",
                      "matmul(transpose(d_scores), q)")):
            self.assert_gradient_check_fails()

    def test_position_gradients_added_to_the_wrong_rows_are_caught(self):
        with planted(('grads["pos_emb"][:len(ids)] = d_x0', 'grads["pos_emb"][1:len(ids) + 1] = d_x0')):
            self.assert_gradient_check_fails()


################ Pictures and the command line

BLOCKS = set("▏▎▍▌▋▊▉█")    # anything a bar is drawn with


class ShowTests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        buffer = io.StringIO()
        trace_block.show(buffer)
        cls.text = buffer.getvalue()
        lines = cls.text.splitlines()
        split = next(n for n, line in enumerate(lines) if line.startswith("Attention weights"))
        # Rows of each picture are the lines drawn between │ rules.
        cls.gap_rows = [line for line in lines[:split] if "│" in line]
        cls.grid_rows = [line for line in lines[split:] if "│" in line]
        tok = trace_block.load_tokenizer()
        p = trace_block.build(tok, trace_block.SERIES)
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

    def test_gap_picture_has_one_row_per_position(self):
        self.assertEqual(len(self.gap_rows), self.T)

    def test_zero_gap_without_positions_draws_an_empty_bar(self):
        without, with_ = self.bars(self.gap_rows[-1])
        self.assertEqual(self.gaps[False][-1], 0.0)
        self.assertEqual(without.strip(), "", "the exact 0.0 must draw no block at all")
        self.assertIn(" 0.0 ", self.gap_rows[-1].split("│")[1])
        self.assertTrue(BLOCKS & set(with_), "with positions the last gap is small, not zero")

    def test_a_bar_is_drawn_exactly_where_the_gap_is_not_zero(self):
        for t, row in enumerate(self.gap_rows):
            for use_positions, drawn in zip((False, True), self.bars(row)):
                with self.subTest(position=t, use_positions=use_positions):
                    self.assertEqual(bool(BLOCKS & set(drawn)), self.gaps[use_positions][t] > 0,
                                     f"gap {self.gaps[use_positions][t]!r}, bar {drawn!r}")

    def test_positions_2_to_7_draw_a_bar_in_both_columns(self):
        for t in range(2, self.T - 1):
            for use_positions, drawn in zip((False, True), self.bars(self.gap_rows[t])):
                with self.subTest(position=t, use_positions=use_positions):
                    self.assertTrue(BLOCKS & set(drawn))

    def test_a_tiny_gap_still_draws_a_sliver(self):
        self.assertEqual(trace_block.bar(1e-12, 1.0, 10), "▏" + " " * 9)
        self.assertEqual(trace_block.bar(0.0, 1.0, 10), " " * 10)

    def test_grid_has_one_row_per_position(self):
        self.assertEqual(len(self.grid_rows), self.T)

    def test_grid_draws_nothing_above_the_diagonal(self):
        for i, row in enumerate(self.grid_rows):
            cells = row.split("│")[1]
            self.assertEqual(len(cells), 2 * self.T, row)
            for j in range(self.T):
                cell = cells[2 * j:2 * j + 2]
                with self.subTest(row=i, column=j):
                    if j > i:
                        self.assertEqual(cell, " " + trace_block.MASKED)
                    else:       # at init every weight is near 1/(i+1) >= 1/9, so a shade shows
                        self.assertIn(cell[0], "░▒▓█")
                        self.assertEqual(cell[0], cell[1])

    def test_each_grid_row_says_it_sums_to_1(self):
        for i, row in enumerate(self.grid_rows):
            with self.subTest(row=i):
                self.assertEqual(row.split("│")[2].split()[0], "1.0000")

    def test_show_flag_prints_the_same_pictures(self):
        done = run_script("trace_block.py", "--show")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, self.text)


class CommandLineTests(unittest.TestCase):
    """trace_block.py's command line: help, refusals, and a --check that says what moved."""

    def test_help_explains_every_flag_with_examples(self):
        done = run_script("trace_block.py", "--help")
        self.assertEqual(done.returncode, 0)
        for flag in ("--write", "--check", "--show", "--time"):
            self.assertIn(flag, done.stdout)
            self.assertIn(f"python3 trace_block.py {flag}", done.stdout)

    def test_help_of_each_command_fits_in_80_columns(self):
        for script in ("trace_block.py", "bpe.py"):
            done = run_script(script, "--help")
            for line in done.stdout.splitlines():
                with self.subTest(script=script, line=line):
                    self.assertLessEqual(len(line), 79)

    def test_an_unknown_flag_is_refused_with_exit_code_2(self):
        for flag in ("--chek", "--writ", "check"):
            with self.subTest(flag=flag):
                done = run_script("trace_block.py", flag)
                self.assertEqual(done.returncode, 2)
                self.assertIn("unrecognized arguments", done.stderr)

    def test_check_passes_on_the_recorded_trace(self):
        with mock.patch.object(trace_block, "trace", fresh_trace):
            ok, message = trace_block.check()
        self.assertTrue(ok, message)

    def test_check_on_a_stale_trace_names_the_figure_and_the_fix(self):
        stale = json.loads(trace_block.to_json(fresh_trace()))
        stale["initial_loss"] = 4.0
        stale["order_test"]["gaps_by_position_without_positions"][8] = 0.5
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "block-trace.json"
            path.write_text(trace_block.to_json(stale), encoding="utf-8")
            with mock.patch.object(trace_block, "trace", fresh_trace):
                ok, message = trace_block.check(path)
        self.assertFalse(ok)
        self.assertIn(f"initial_loss: 4.0 -> {fresh_trace()['initial_loss']}", message)
        self.assertIn("order_test.gaps_by_position_without_positions", message)
        self.assertIn("on purpose, record the new figures: python3 trace_block.py --write", message)

    def test_check_on_a_missing_trace_says_so_without_a_traceback(self):
        with tempfile.TemporaryDirectory() as folder:
            with mock.patch.object(trace_block, "trace", fresh_trace):
                ok, message = trace_block.check(Path(folder) / "block-trace.json")
        self.assertFalse(ok)
        self.assertIn("block-trace.json is missing", message)
        self.assertIn("python3 trace_block.py --write", message)

    def test_check_on_a_file_that_is_not_json_says_so(self):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "block-trace.json"
            path.write_text("{ not json", encoding="utf-8")
            with mock.patch.object(trace_block, "trace", fresh_trace):
                ok, message = trace_block.check(path)
        self.assertFalse(ok)
        self.assertIn("not valid JSON", message)

    def test_no_flag_prints_the_trace(self):
        out = io.StringIO()
        with mock.patch.object(trace_block, "trace", fresh_trace), \
                contextlib.redirect_stdout(out):
            self.assertEqual(trace_block.main([]), 0)
        self.assertEqual(out.getvalue(), trace_block.to_json(fresh_trace()))

    def test_time_prints_milliseconds_and_tokens_per_second(self):
        out = io.StringIO()
        fast = functools.partial(trace_block.time_steps, lengths=(4, 8), repeats=1)
        with mock.patch.object(trace_block, "time_steps", fast), contextlib.redirect_stdout(out):
            self.assertEqual(trace_block.main(["--time"]), 0)
        lines = out.getvalue().splitlines()
        self.assertIn("ms/step", lines[1])
        self.assertIn("tokens/s", lines[1])
        self.assertEqual([line.split()[0] for line in lines[2:]], ["4", "8"])


class ReadmeTests(unittest.TestCase):
    """What the README says the commands print is what they print today."""

    OUTPUTS = {
        "python3 trace_block.py": lambda: trace_block.to_json(fresh_trace()),
        "python3 trace_block.py --show": lambda: printed(trace_block.show),
        "python3 bpe.py": lambda: printed(bpe.demo),
    }

    def test_every_output_excerpt_is_printed_by_its_command(self):
        text = (HERE / "README.md").read_text(encoding="utf-8")
        excerpts = re.findall(r"<!-- output: (.+?) -->\n```\n(.*?)```", text, re.S)
        self.assertGreaterEqual(len(excerpts), 2)
        for command, excerpt in excerpts:
            with self.subTest(command=command):
                self.assertIn(command, self.OUTPUTS, "an excerpt from a command the test can't run")
                lines = excerpt.splitlines()
                output = self.OUTPUTS[command]().splitlines()
                starts = [n for n in range(len(output) - len(lines) + 1)
                          if output[n:n + len(lines)] == lines]
                self.assertTrue(starts, f"the README's excerpt of {command} is not in its output")

    def test_the_figures_the_readme_quotes_are_the_ones_the_code_gives(self):
        text = (HERE / "README.md").read_text(encoding="utf-8")
        t = fresh_trace()
        grads = trace_block.backward_gradients(tiny_params(), *ball_example())
        report = trace_block.compare_gradients(grads, *numeric_gradients())
        quoted = {
            "initial loss": f"`initial_loss`: {t['initial_loss']}",
            "uniform loss": f"`uniform_loss`: {t['uniform_loss']}",
            "row-0 variance": f"variance {t['layernorm_row0']['variance']}",
            "gap with positions":
                f"its gap becomes {t['order_test']['last_logit_gap_with_positions']}",
            "story tokens": f"`story_tokens`: {t['story_tokens']}",
            "largest gradient error":
                f"the largest difference is {short(report['max_abs_error'])}",
            "largest relative error":
                f"({short(report['max_rel_error'])} at most on the small copy)",
        }
        prose = " ".join(text.split())               # line breaks fall anywhere in the README
        for figure, phrase in quoted.items():
            with self.subTest(figure=figure):
                self.assertTrue(phrase in prose, f"the README should say: {phrase}")

    def test_the_readme_shows_the_two_commands_a_newcomer_runs(self):
        text = (HERE / "README.md").read_text(encoding="utf-8")
        self.assertIn("python3 trace_block.py", text)
        self.assertIn("python3 -m unittest -v test_model.py", text)


def short(x):
    """A number as the README writes it: 2 significant figures, 7.4e-10 rather than 7.4e-010.

    >>> short(7.431e-10), short(3.16e-06)
    ('7.4e-10', '3.2e-6')
    """
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def printed(function):
    """What a function prints to standard output, as a string."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function()
    return out.getvalue()


################ The tokenizer

class TokenizerTests(unittest.TestCase):
    """bpe.py's training, encoding and decoding; the lab's corpus.txt and tokenizer.json."""

    @classmethod
    def setUpClass(cls):
        cls.corpus = bpe.read_corpus(CORPUS_PATH)
        cls.tok = bpe.Tokenizer.load(TOKENIZER_PATH)
        with open(TOKENIZER_PATH, encoding="utf-8") as file:
            cls.data = json.load(file)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write_file(self, text, name="tokenizer.json"):
        """Write text to a file in a fresh temporary folder and return its path."""
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
        return path

    def load_data(self, data):
        """Load a tokenizer from a file holding data as JSON."""
        return bpe.Tokenizer.load(self.write_file(json.dumps(data, ensure_ascii=False)))

    def changed(self, **fields):
        """A copy of tokenizer.json's data with some fields replaced."""
        data = json.loads(json.dumps(self.data))
        data.update(fields)
        return data

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
            # the textbook's 2nd merge: ("aa", "a") = (4, 0) and ("a", "b") = (0, 1) both occur twice
            ("aaabdaaabac", 6, [(0, 0), (0, 1)], [4, 2]),
            # every pair occurs once; ("a", "b") = (0, 1) comes last in the text and still wins
            ("cdab", 5, [(0, 1)], [1]),
            # the left ids tie, so the right id decides: ("a", "b") = (0, 1) beats ("a", "c") = (0, 2)
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
        cases = [self.corpus, "", "m", ".", "\n", " ", "    ", "\n\n\n", " \n  \n\n   ",
                 "mia  has   a red hat .\n\n", ",.,. ,", FIRST_STORY + "\n"]
        for text in cases:
            with self.subTest(text=text[:30]):
                ids = self.tok.encode(text)
                self.assertEqual(self.tok.decode(ids), text)
                self.assertEqual("".join(self.tok.tokens(text)), text)

    def test_tokens_are_the_strings_of_the_ids_encode_gives(self):
        ids = self.tok.encode(FIRST_STORY)
        self.assertEqual(self.tok.tokens(FIRST_STORY), [self.tok.vocab[i] for i in ids])

    # ---- what the lab needs from corpus.txt and tokenizer.json

    def test_the_vocabulary_has_96_tokens(self):
        self.assertEqual(len(self.tok.vocab), 96)

    def test_the_base_alphabet_is_the_corpus_characters_in_code_point_order(self):
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

    def test_the_first_story_plus_its_newline_is_37_tokens(self):
        tokens = self.tok.tokens(FIRST_STORY + "\n")
        self.assertEqual(len(tokens), 37, "|".join(tokens))

    def test_now_mia_gives_the_hat_to_leo_splits_into_the_nine_tokens_of_the_spec(self):
        self.assertEqual(self.tok.tokens("now mia gives the hat to leo."),
                         ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."])

    def test_swapping_mia_and_leo_swaps_only_their_tokens(self):
        a = self.tok.tokens("now mia gives the hat to leo.")
        b = self.tok.tokens("now leo gives the hat to mia.")
        swap = {" mia": " leo", " leo": " mia"}
        self.assertEqual(b, [swap.get(token, token) for token in a])
        self.assertEqual(sorted(self.tok.encode("now mia gives the hat to leo.")),
                         sorted(self.tok.encode("now leo gives the hat to mia.")))

    def test_hat_and_ball_sentences_share_exactly_four_tokens_then_differ(self):
        hat = self.tok.tokens("mia has a red hat.")
        ball = self.tok.tokens("mia has a red ball.")
        self.assertEqual(hat[:4], ["mia", " has", " a", " red"])
        self.assertEqual(ball[:4], hat[:4])
        self.assertNotEqual(ball[4], hat[4])

    def test_the_ball_sentence_has_at_most_9_tokens(self):
        tokens = self.tok.tokens("mia has a red ball.")
        self.assertLessEqual(len(tokens), 9, "|".join(tokens))

    def test_retraining_on_the_corpus_reproduces_tokenizer_json_byte_for_byte(self):
        trained = bpe.Tokenizer.train(self.corpus, 96).to_json().encode("utf-8")
        with open(TOKENIZER_PATH, "rb") as file:
            self.assertEqual(trained, file.read())

    def test_a_saved_tokenizer_loads_back_the_same(self):
        path = os.path.join(self.tmp.name, "copy.json")
        self.tok.save(path)
        again = bpe.Tokenizer.load(path)
        self.assertEqual((again.vocab, again.merges), (self.tok.vocab, self.tok.merges))
        self.assertEqual(again.to_json(), self.tok.to_json())

    # ---- the command line

    def run_bpe(self, *args):
        """Run python3 bpe.py with args; return the finished process."""
        return subprocess.run([sys.executable, os.path.join(HERE, "bpe.py"), *args],
                              capture_output=True, text=True, cwd=HERE)

    def test_a_reader_that_stops_early_gets_no_traceback(self):
        # python3 bpe.py | head: the pipe closes before the demo is printed
        demo = subprocess.Popen([sys.executable, os.path.join(HERE, "bpe.py")], cwd=HERE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        demo.stdout.close()
        errors = demo.stderr.read().decode()
        demo.stderr.close()
        self.assertEqual(demo.wait(), 1)
        self.assertNotIn("Traceback", errors)

    def test_check_command_passes_on_the_committed_tokenizer(self):
        result = self.run_bpe("--check")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_check_reports_a_stale_tokenizer_and_prints_the_command_that_fixes_it(self):
        path = os.path.join(self.tmp.name, "tokenizer.json")
        bpe.Tokenizer.train(self.corpus, 95).save(path)
        out = io.StringIO()
        self.assertEqual(bpe.check(CORPUS_PATH, path, out), 1)
        self.assertIn(f'+    {json.dumps(self.tok.vocab[95], ensure_ascii=False)}: 95',
                      out.getvalue())
        self.assertIn("python3 bpe.py --write", out.getvalue())

    def test_check_reports_a_missing_tokenizer_without_a_traceback(self):
        out = io.StringIO()
        self.assertEqual(bpe.check(CORPUS_PATH, os.path.join(self.tmp.name, "none.json"), out), 1)
        self.assertIn("missing", out.getvalue())
        self.assertIn("python3 bpe.py --write", out.getvalue())

    def test_an_unknown_flag_is_refused_with_exit_code_2(self):
        result = self.run_bpe("--wirte")
        self.assertEqual(result.returncode, 2)
        self.assertIn("unrecognized arguments: --wirte", result.stderr)

    def test_the_demo_prints_the_output_pasted_at_the_end_of_bpe_py(self):
        with open(bpe.__file__, encoding="utf-8") as file:
            source = file.read()
        block = source[source.index("# What `python3 bpe.py` prints"):
                       source.index('if __name__ == "__main__":')]
        pasted = [line[len("#     "):] for line in block.splitlines()
                  if line.startswith("#     ") and line != "#     ..."]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            bpe.demo()
        self.assertGreater(len(pasted), 5)
        for line in pasted:
            with self.subTest(line=line):
                self.assertIn(line, printed.getvalue().splitlines())

    # ---- bad input: each is refused with an error that says what is wrong

    def test_encode_refuses_a_character_outside_the_alphabet_naming_it_and_its_position(self):
        for text, message in [("mia has a red hat!", "'!' at position 17"),
                              ("Mia", "'M' at position 0"),
                              ("a\tb", r"'\\t' at position 1")]:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, message):
                    self.tok.encode(text)

    def test_encode_refuses_a_text_that_is_not_a_string(self):
        for value in [b"mia", None, ["mia"], 3]:
            with self.subTest(value=value):
                with self.assertRaisesRegex(TypeError, "encode takes a str"):
                    self.tok.encode(value)

    def test_decode_refuses_an_id_outside_the_vocabulary(self):
        for ids in [[96], [-1], [0, 1000]]:
            with self.subTest(ids=ids):
                with self.assertRaisesRegex(ValueError, "outside the vocabulary of size 96"):
                    self.tok.decode(ids)

    def test_decode_refuses_an_id_that_is_not_an_integer(self):
        for ids in [[1.0], ["1"], [None], [0, 2.5]]:
            with self.subTest(ids=ids):
                with self.assertRaisesRegex(TypeError, "must be an int"):
                    self.tok.decode(ids)

    def test_decode_refuses_a_bool_id(self):
        for ids in [[True], [0, False]]:
            with self.subTest(ids=ids):
                with self.assertRaisesRegex(TypeError, "must be an int"):
                    self.tok.decode(ids)

    def test_decode_refuses_ids_that_are_not_a_list(self):
        for ids in [(1, 2), "12", None, 5, range(3)]:
            with self.subTest(ids=ids):
                with self.assertRaisesRegex(TypeError, "decode takes a list"):
                    self.tok.decode(ids)

    def test_load_refuses_a_missing_file(self):
        with self.assertRaises(FileNotFoundError):
            bpe.Tokenizer.load(os.path.join(self.tmp.name, "none.json"))

    def test_load_refuses_a_file_that_is_not_json(self):
        for text in ["", "vocab: 96", '{"version": 1,']:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, "is not JSON"):
                    bpe.Tokenizer.load(self.write_file(text))

    def test_load_refuses_a_file_with_a_field_missing(self):
        for field in ["version", "pattern", "vocab", "merges"]:
            with self.subTest(field=field):
                data = self.changed()
                del data[field]
                with self.assertRaisesRegex(ValueError, f"missing field.*{field}"):
                    self.load_data(data)

    def test_load_refuses_an_unknown_field(self):
        with self.assertRaisesRegex(ValueError, "unknown field.*added"):
            self.load_data(self.changed(added=[]))

    def test_load_refuses_a_key_given_twice(self):
        text = '{"version": 1, "version": 1}'
        with self.assertRaisesRegex(ValueError, "'version' appears twice"):
            bpe.Tokenizer.load(self.write_file(text))

    def test_load_refuses_a_field_of_the_wrong_type(self):
        last, first = self.tok.vocab[-1], self.tok.vocab[0]
        cases = {
            "file is a list": [],
            "version is a string": self.changed(version="1"),
            "version is a bool": self.changed(version=True),
            "pattern is a number": self.changed(pattern=5),
            "vocab is a list": self.changed(vocab=list(self.data["vocab"])),
            "a vocab id is a string": self.changed(vocab={**self.data["vocab"], last: "95"}),
            "a vocab id is a bool": self.changed(vocab={**self.data["vocab"], first: False}),
            "merges is an object": self.changed(merges={"a": "b"}),
            "a merge is one string": self.changed(merges=[[" ", "t"]] + [" he"] + self.data["merges"][2:]),
            "a merge has three parts": self.changed(merges=[[" ", "t", ""]] + self.data["merges"][1:]),
            "a merge part is a number": self.changed(merges=[[" ", 5]] + self.data["merges"][1:]),
        }
        for case, data in cases.items():
            with self.subTest(case=case):
                with self.assertRaises(TypeError):
                    self.load_data(data)

    def test_load_refuses_an_unsupported_version(self):
        with self.assertRaisesRegex(ValueError, "version 2 is not supported"):
            self.load_data(self.changed(version=2))

    def test_load_refuses_a_pattern_that_is_not_a_regular_expression(self):
        with self.assertRaisesRegex(ValueError, "not a regular expression"):
            self.load_data(self.changed(pattern="( ?\\w+"))

    def test_load_refuses_a_merge_whose_part_is_not_in_vocab(self):
        merges = [["Q", "t"]] + self.data["merges"][1:]
        with self.assertRaisesRegex(ValueError, "merge 0 .*part 'Q' is not in vocab"):
            self.load_data(self.changed(merges=merges))

    def test_load_refuses_a_merge_whose_result_is_not_in_vocab(self):
        merges = [["t", " "]] + self.data["merges"][1:]
        with self.assertRaisesRegex(ValueError, "merge 0 .*makes 't ', which is not in vocab"):
            self.load_data(self.changed(merges=merges))

    def test_load_refuses_a_merge_whose_result_is_not_left_plus_right(self):
        # the first two merges swapped: merge 0 makes what merge 1 made, in merge 0's place
        merges = [self.data["merges"][1], self.data["merges"][0]] + self.data["merges"][2:]
        with self.assertRaisesRegex(ValueError, f"merge 0 .*must make token {self.tok.alphabet_size}"):
            self.load_data(self.changed(merges=merges))

    def test_load_refuses_a_merge_that_uses_a_token_before_it_is_made(self):
        # merge 0 makes token A (the alphabet size) and so cannot use token A itself
        made_first = self.tok.vocab[self.tok.alphabet_size]
        merges = [[made_first, "a"]] + self.data["merges"][1:]
        with self.assertRaisesRegex(ValueError, "merge 0 .*before it is made"):
            self.load_data(self.changed(merges=merges))

    def test_load_refuses_vocab_ids_that_do_not_run_from_0_to_n_minus_1(self):
        vocab, last, first = self.data["vocab"], self.tok.vocab[-1], self.tok.vocab[0]
        cases = {
            "a gap (95 becomes 96)": {**vocab, last: 96},
            "an id twice (95 becomes 94)": {**vocab, last: 94},
            "starting at 1": {token: i + 1 for token, i in vocab.items()},
            "a negative id": {**vocab, first: -1},
        }
        for case, bad in cases.items():
            with self.subTest(case=case):
                with self.assertRaisesRegex(ValueError, "vocab ids must run 0..95"):
                    self.load_data(self.changed(vocab=bad))

    def test_load_refuses_a_base_token_longer_than_one_character(self):
        vocab = {("xy" if i == 4 else token): i for token, i in self.data["vocab"].items()}
        with self.assertRaisesRegex(ValueError, "token 4 'xy' is in the base alphabet"):
            self.load_data(self.changed(vocab=vocab))

    def test_training_refuses_a_size_below_the_alphabet(self):
        with self.assertRaisesRegex(ValueError, "size 2 is smaller than the base alphabet"):
            bpe.Tokenizer.train("abc", 2)

    def test_training_refuses_a_size_the_text_cannot_reach(self):
        # "ab ab" is the chunks "ab" and " ab": 3 characters + 2 merges = 5 tokens at most
        self.assertEqual(len(bpe.Tokenizer.train("ab ab", 5).vocab), 5)
        with self.assertRaisesRegex(ValueError, "size 6 is out of reach"):
            bpe.Tokenizer.train("ab ab", 6)

    def test_training_refuses_a_text_that_is_not_a_string(self):
        with self.assertRaisesRegex(TypeError, "training text must be a str"):
            bpe.Tokenizer.train(b"abc", 3)

    def test_training_refuses_a_size_that_is_not_an_integer(self):
        for size in [3.0, "3", True]:
            with self.subTest(size=size):
                with self.assertRaisesRegex(TypeError, "vocabulary size must be an int"):
                    bpe.Tokenizer.train("abc", size)

    def test_training_refuses_an_empty_text(self):
        with self.assertRaisesRegex(ValueError, "empty text"):
            bpe.Tokenizer.train("", 0)


################ PyTorch, an outside oracle (optional)

# The 18 parameters, in the order the spec's table gives them.
TORCH_PARAM_NAMES = [
    "tok_emb", "pos_emb", "ln1_g", "ln1_b", "Wq", "Wk", "Wv", "Wo",
    "ln2_g", "ln2_b", "W1", "b1", "W2", "b2", "lnf_g", "lnf_b",
    "W_out", "b_out",
]
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


def load_tests(loader, tests, pattern):
    """Run the >>> examples in the docstrings of model.py, bpe.py, trace_block.py and this
    file too."""
    tests.addTests(doctest.DocTestSuite(model))
    tests.addTests(doctest.DocTestSuite(bpe))
    tests.addTests(doctest.DocTestSuite(trace_block))
    tests.addTests(doctest.DocTestSuite(sys.modules[__name__]))
    return tests


if __name__ == "__main__":
    unittest.main()
