"""The lesson's twelve tests, in its three classes and order: Recorded (1), Mechanism (2 to 6),
FailureCases (7 to 12). Run: python3 -m unittest -v test_model.py

A failure of test 1, 2 or 4 starts with the lesson function that is wrong, as the lab's own
checks of each function find it (tests/diagnosis.py). An error that a test meets again after
an earlier one failed on it skips the later test: one failure per cause."""
import functools
import math
import random
import re
import unittest

import model
import trace_block
from tests.diagnosis import REPEATED, first_wrong, tiny
from trace_block import SERIES, last_logits_gap, position_gaps

TOLERANCE = 1e-7    # the gradient check's bound on |central difference - backward()|


################ 1. The recorded trace

class Recorded(unittest.TestCase):
    """1. The recorded trace is up to date."""

    def test_recorded_trace(self):
        """block-trace.json holds what the code computes (trace_block.py --check)."""
        ok, message = trace_block.check()
        if not ok:
            self.fail(f"{diagnosis()}\n\n{message}")


################ 2 to 6. The mechanism

class Mechanism(unittest.TestCase):
    """2-6. Gradients, layer norm, causality and the position embeddings' gradient."""

    def test_gradients_match_finite_differences(self):
        """Every gradient of the small copy (1,060 numbers) against central differences: on
        "mia has a red ball." as the trace checks it, and on token IDs that repeat, with gains
        and biases away from 1 and 0 and attention far from uniform (tiny())."""
        ball = tuple(tokenizer().encode(trace_block.GRADIENT_SENTENCE))
        errors = {trace_block.GRADIENT_SENTENCE:
                  trace_block.small_copy_check(96, ball)["max_abs_error"],
                  f"the IDs {REPEATED}, with tiny()":
                  trace_block.gradient_error(tiny(), REPEATED[:-1], REPEATED[1:])}
        for what, error in errors.items():
            if not error < TOLERANCE:
                self.fail(f"{diagnosis()}\n\nOn {what}, the largest |central difference - "
                          f"backward()| is {error:.3g}, not below {TOLERANCE}.")

    def test_layernorm_centers_and_scales_each_row(self):
        """With gain 2 and bias 1, every row comes out with mean 1 and variance about 4."""
        rng = random.Random(1)
        x = [[rng.gauss(3.0, 5.0) for _ in range(16)] for _ in range(4)]
        y, _ = model.layernorm_forward(x, [2.0] * 16, [1.0] * 16)
        for t, row in enumerate(y):
            mean = math.fsum(row) / 16
            variance = math.fsum((v - mean) ** 2 for v in row) / 16
            self.assertAlmostEqual(mean, 1.0, places=12, msg=f"layernorm_forward: row {t}'s "
                                   f"mean is {mean!r}, not 1 = the bias: is the mean taken "
                                   f"away, and the bias added after the gain?")
            # the biased variance of the normalized row, 1 less a hair for EPS, times 2²
            self.assertAlmostEqual(variance, 4.0, delta=1e-4, msg=f"layernorm_forward: row "
                                   f"{t}'s variance is {variance!r}, not 4 = gain²: is the "
                                   f"row divided by √(its variance over d + EPS)?")

    def test_layernorm_backward_with_nonunit_gains(self):
        """d_x, d_g and d_b, with gains other than 1, against central differences of Σ y · dy
        (dy: random weights), each within 1e-8."""
        rng = random.Random(2)
        x = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)]
        dy = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)]
        g = [rng.uniform(0.5, 2.0) for _ in range(5)]
        b = [rng.uniform(-1, 1) for _ in range(5)]
        d_x, d_g, d_b = model.layernorm_backward(dy, g, model.layernorm_forward(x, g, b)[1])

        def loss():
            y, _ = model.layernorm_forward(x, g, b)
            return math.fsum(u * w for y_t, dy_t in zip(y, dy) for u, w in zip(y_t, dy_t))
        for name, analytic, tensor in (("d_x", d_x, x), ("d_g", d_g, g), ("d_b", d_b, b)):
            numeric = trace_block.central_differences(loss, tensor)
            pairs = zip(trace_block.flatten(analytic), trace_block.flatten(numeric))
            worst = max(abs(a - n) for a, n in pairs)
            if not worst < 1e-8:
                self.fail(f"{diagnosis('layernorm_forward', 'layernorm_backward')}\n\n"
                          f"layernorm_backward's {name} is up to {worst:.3g} off central "
                          f"differences of layernorm_forward.")

    def test_later_token_does_not_change_earlier_logits(self):
        """"mia has a red ball." and "mia has a red hat." share four tokens: the first four
        positions get bit-identical scores, the fifth does not."""
        hat = model.forward(series(), tokenizer().encode("mia has a red hat."))[0]
        ball = model.forward(series(), tokenizer().encode("mia has a red ball."))[0]
        seen = [t for t in range(4) if hat[t] != ball[t]]
        if seen:
            self.fail(f"position {seen[0]}'s scores changed when only position 4's token did: "
                      f"a position sees a later one (attention_forward step 2, the causal mask)")
        self.assertNotEqual(hat[4], ball[4], "position 4 holds another token, but its scores "
                                             "are the same")

    def test_unused_positions_get_zero_gradient(self):
        """pos_emb's rows past the sequence get an all-zero gradient, and row 0 does not;
        without positions, no row gets one."""
        ids = tokenizer().encode(trace_block.GRADIENT_SENTENCE)
        for use_positions in (False, True):
            logits, cache = model.forward(series(), ids[:-1], use_positions)
            d_logits = model.loss_and_dlogits(logits, ids[1:])[1]
            grads = model.backward(series(), cache, d_logits)
            used = [t for t, row in enumerate(grads["pos_emb"]) if any(row)]
            if used and not use_positions:
                self.fail(f"without positions, pos_emb rows {used[:3]}... got a gradient "
                          f"(backward step 1)")
        self.assertEqual(used[:1], [0], "pos_emb row 0 was used: it needs a gradient "
                                        "(backward step 1)")
        self.assertLess(used[-1], len(ids) - 1, f"pos_emb row {used[-1]} got a gradient, but "
                        f"{len(ids) - 1} tokens use rows 0 to {len(ids) - 2} (backward step 1)")


################ 7 to 12. Failure cases

class FailureCases(unittest.TestCase):
    """7-12. Without positions the order is invisible at the end; bad input is refused."""

    def test_without_positions_the_last_position_cannot_see_word_order(self):
        """The order sentences hold the same tokens: without position embeddings the last
        position's scores are bit-identical (gap 0.0); with them they differ."""
        skip_if_causality_failed(self)
        self.assertEqual(last_logits_gap(series(), tokenizer(), False), 0.0,
                         "without positions the last position saw the order: is pos_emb "
                         "left out (forward step 1), and every sum rounded once (math.fsum)?")
        self.assertGreater(last_logits_gap(series(), tokenizer(), True), 0.0,
                           "with positions the last position should tell the two apart: does "
                           "forward step 1 add the position embeddings?")

    def test_earlier_positions_still_differ_without_positions(self):
        """Without positions: gap 0 at positions 0, 1 and the last; above 0 at 2 to 7."""
        skip_if_causality_failed(self)
        gaps = position_gaps(series(), tokenizer(), False)
        self.assertEqual(len(gaps), 9)
        self.assertEqual(gaps[:2] + gaps[-1:], [0.0] * 3, "positions 0 and 1 saw the same "
                         "'n', 'ow'; the last, the same tokens")
        same = [t for t in range(2, 8) if not gaps[t] > 0.0]
        self.assertEqual(same, [], f"positions {same} have seen different prefixes ('now mia' "
                                   f"against 'now leo'), but got the same scores")

    def test_sequence_longer_than_positions(self):
        with self.assertRaisesRegex(ValueError, "^sequence of 65 tokens is longer than the "
                                                "64 positions the model has$"):
            model.forward(series(), [1] * 65)

    def test_token_id_outside_vocabulary(self):
        for bad in (96, -1):
            with self.assertRaisesRegex(ValueError, re.escape(
                    f"token IDs outside the vocabulary of size 96: [{bad}]")):
                model.forward(series(), [1, bad, 2])

    def test_empty_sequence(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.forward(series(), [])

    def test_targets_must_match_positions(self):
        logits = [[0.0] * 96 for _ in range(3)]     # by hand: this test needs no forward
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.loss_and_dlogits(logits, [2, 3])


################ Helpers

@functools.lru_cache(maxsize=None)
def tokenizer():
    return trace_block.load_tokenizer()


@functools.lru_cache(maxsize=None)
def series():
    """The series-size parameters (7,440 numbers); tests must not change them."""
    return trace_block.build(tokenizer(), SERIES)


def diagnosis(*names):
    """The first line of a failure: which lesson function is wrong (of names; all by
    default). If the diagnosis itself fails, it says so, and the test's finding follows."""
    try:
        found = first_wrong(model, names or None)
    except Exception as error:
        return f"(tests/diagnosis.py failed: {type(error).__name__}: {error})"
    return found or "Each lesson function agrees with its own checks (tests/diagnosis.py)."


FAILED = {}         # test name -> why it failed, in this run


def noting_failures(method):
    @functools.wraps(method)
    def test(self):
        try:
            method(self)
        except unittest.SkipTest:
            raise
        except AssertionError:
            FAILED[method.__name__] = "a failed assertion"
            raise
        except Exception as error:          # the model raised: its own message is the finding
            why = f"{type(error).__name__}: {error}"
            earlier = [name for name, reason in FAILED.items() if reason == why]
            if earlier:
                self.skipTest(f"{earlier[0]} failed on this already: {why}")
            FAILED[method.__name__] = why
            raise self.failureException(f"{diagnosis()}\n\n{why}") from None
    return test


def skip_if_causality_failed(test):
    """The order tests rest on causality (test 5): without it, they prove nothing."""
    if "test_later_token_does_not_change_earlier_logits" in FAILED:
        test.skipTest("test_later_token_does_not_change_earlier_logits fails, and the order "
                      "tests rest on causality")


for test_class in (Recorded, Mechanism, FailureCases):     # one failure per cause
    for name, method in list(vars(test_class).items()):
        if name.startswith("test_"):
            setattr(test_class, name, noting_failures(method))


def load_tests(loader, tests, pattern):
    """The twelve in the lesson's order (unittest alone would sort them by name)."""
    cases = (Recorded, Mechanism, FailureCases)
    return unittest.TestSuite(case(name) for case in cases for name in vars(case)
                              if name.startswith("test_"))


if __name__ == "__main__":
    unittest.main()
