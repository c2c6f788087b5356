"""The lesson's twelve tests, in its three classes and order: Recorded (1), Mechanism (2 to 6),
FailureCases (7 to 12). A failure of test 1, 2, 4, 5 or 8, or an error, starts with the lesson
function that is wrong (tests/diagnosis.py); a test meeting an error already met skips."""
import functools
import math
import random
import re
import unittest

import model
import trace_block
from tests.diagnosis import REPEATED, cause, first_wrong, raised, tiny
from trace_block import SERIES, last_logits_gap, position_gaps

TOLERANCE = 1e-7    # the gradient check's bound on |central difference - backward()|


@functools.cache
def tokenizer():
    return trace_block.load_tokenizer()


@functools.cache
def series():
    """The series' 7,440 parameters, without reading tokenizer.json; tests must not change them."""
    return model.init_params(model.SIZES["vocab"], **SERIES)


def diagnosis(*names):
    """Which lesson function (of names; all by default) is wrong, in one line."""
    return first_wrong(model, names) or "Every lesson function passes its checks."


def skip_if_failed(test, *numbers):     # a test that rests on others
    for number in numbers:
        if TWELVE[number - 1][1] in FAILED:
            test.skipTest(f"test {number} fails, and this test rests on it")


################ 1. The recorded trace

class Recorded(unittest.TestCase):

    def test_recorded_trace(self):
        """block-trace.json holds what the code computes (trace_block.py --check)."""
        ok, message = trace_block.check()
        if " -> " in message:           # figures moved: which function moved them?
            message = f"{diagnosis()}\n\n{message}"
        if not ok:
            self.fail(message)


################ 2 to 6. The mechanism

class Mechanism(unittest.TestCase):

    def test_gradients_match_finite_differences(self):
        """Every gradient of the small copy (1,060 numbers) against central differences: on
        "mia has a red ball." as the trace checks it, and on token IDs that repeat, with gains
        and biases away from 1 and 0 and attention far from even (tiny())."""
        ball = tokenizer().encode(trace_block.GRADIENT_SENTENCE)
        report = trace_block.small_copy_check(96, tuple(ball))
        x, y = REPEATED[:-1], REPEATED[1:]
        on_repeats = trace_block.gradient_error(tiny(), x, y)
        errors = {"the ball sentence": report["max_abs_error"],
                  f"the IDs {REPEATED}": on_repeats}
        for what, error in errors.items():
            if not error < TOLERANCE:
                self.fail(f"{diagnosis()}\n\nOn {what}, a gradient is "
                          f"{error:.3g} off (the bound: {TOLERANCE}).")

    def test_layernorm_centers_and_scales_each_row(self):
        """With gain 2 and bias 1, every row comes out with mean 1 and variance about 4: the
        normalized row's variance is 1, less a hair for EPS, times 2²."""
        rng = random.Random(1)
        x = [[rng.gauss(3.0, 5.0) for _ in range(16)] for _ in range(4)]
        y, _ = model.layernorm_forward(x, [2.0] * 16, [1.0] * 16)
        for t, row in enumerate(y):
            mean = math.fsum(row) / 16
            variance = math.fsum((v - mean) ** 2 for v in row) / 16
            if abs(mean - 1) > 1e-12 or abs(variance - 4) > 1e-4:
                self.fail(f"layernorm_forward: row {t} has mean {mean} and "
                          f"variance {variance}, not 1 (the bias) and 4 "
                          f"(gain²): centre, divide by √(variance + EPS) "
                          f"(over d), times the gain, plus the bias")

    def test_layernorm_backward_with_nonunit_gains(self):
        """d_x, d_g and d_b, with gains other than 1, against central differences of Σ y · dy
        (dy: random weights), each within 1e-8."""
        rng = random.Random(2)
        x = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)]
        dy = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)]
        g = [rng.uniform(0.5, 2.0) for _ in range(5)]
        b = [rng.uniform(-1, 1) for _ in range(5)]
        _, cache = model.layernorm_forward(x, g, b)
        d_x, d_g, d_b = model.layernorm_backward(dy, g, cache)

        flat = trace_block.flatten
        def loss():         # Σ y · dy: its gradient is what backward gives
            y, _ = model.layernorm_forward(x, g, b)
            return math.fsum(y_j * dy_j for y_j, dy_j in zip(flat(y), flat(dy)))
        for name, found, tensor in (("d_x", d_x, x), ("d_g", d_g, g), ("d_b", d_b, b)):
            slopes = trace_block.central_differences(loss, tensor)
            error = trace_block.compare_gradients({name: found}, {name: slopes})
            if not error < 1e-8:        # a nan, or another shape: inf
                which = diagnosis("layernorm_forward", "layernorm_backward")
                self.fail(f"{which}\n\nlayernorm_backward's {name} is up to "
                          f"{error:.3g} off central differences.")

    def test_later_token_does_not_change_earlier_logits(self):
        """"mia has a red ball." and "mia has a red hat." share four tokens: the first four
        positions get bit-identical scores, the fifth does not."""
        skip_if_failed(self, 3)         # it rests on layer norm
        p, tok = series(), tokenizer()
        hat, _ = model.forward(p, tok.encode("mia has a red hat."))
        ball, _ = model.forward(p, tok.encode("mia has a red ball."))
        seen = [t for t in range(4) if hat[t] != ball[t]]
        if seen:
            self.fail(f"{diagnosis()}\n\nposition {seen[0]}'s scores changed, "
                      f"though the tokens differ only from position 4 on: a "
                      f"later token reached an earlier position")
        if hat[4] == ball[4]:
            self.fail(f"{diagnosis()}\n\nposition 4: another token, but the same scores")

    def test_unused_positions_get_zero_gradient(self):
        """pos_emb's rows past the sequence get an all-zero gradient, and row 0 does not;
        without positions, no row gets one (backward step 1)."""
        ids = tokenizer().encode(trace_block.GRADIENT_SENTENCE)
        x, y = ids[:-1], ids[1:]
        without = trace_block.backward_gradients(series(), x, y, False)
        used = [t for t, row in enumerate(without["pos_emb"]) if any(row)]
        if used:
            self.fail(f"backward step 1: without positions, pos_emb rows "
                      f"{used[:3]}... got a gradient")
        grads = trace_block.backward_gradients(series(), x, y)
        used = [t for t, row in enumerate(grads["pos_emb"]) if any(row)]
        if used[:1] != [0] or used[-1] >= len(x):
            self.fail(f"backward step 1: pos_emb rows {used} got a gradient, "
                      f"but rows 0 to {len(x) - 1} were used")


################ 7 to 12. Failure cases

class FailureCases(unittest.TestCase):

    def test_without_positions_the_last_position_cannot_see_word_order(self):
        """The order sentences hold the same tokens: without position embeddings the last
        position's scores are bit-identical (gap 0.0); with them they differ."""
        skip_if_failed(self, 3, 5)      # layer norm, causality
        p, tok = series(), tokenizer()
        self.assertEqual(last_logits_gap(p, tok, False), 0.0,
                         "without positions the last position saw the "
                         "order: is pos_emb left out (forward step 1), "
                         "and every sum rounded once (math.fsum)?")
        self.assertGreater(last_logits_gap(p, tok, True), 0.0,
                           "with positions the last position should tell "
                           "them apart: does forward step 1 add pos_emb?")

    def test_earlier_positions_still_differ_without_positions(self):
        """Without positions: gap 0 at positions 0, 1 and the last; above 0 at 2 to 7."""
        skip_if_failed(self, 3, 5)      # layer norm, causality
        gaps = position_gaps(series(), tokenizer(), False)
        self.assertEqual(len(gaps), 9)
        ends = gaps[:2] + gaps[-1:]
        if ends != [0.0] * 3:
            self.fail(f"{diagnosis()}\n\npositions 0, 1 and the last got gaps {ends}, "
                      f"not 0.0: 0 and 1 saw the same 'n', 'ow'; the last, the same tokens")
        same = [t for t in range(2, 8) if not gaps[t] > 0.0]
        if same:
            self.fail(f"{diagnosis()}\n\npositions {same} have seen different "
                      f"prefixes, but got the same scores")

    def test_sequence_longer_than_positions(self):
        message = ("^sequence of 65 tokens is longer than the 64 "
                   "positions the model has$")
        with self.assertRaisesRegex(ValueError, message):
            model.forward(series(), [1] * 65)

    def test_token_id_outside_vocabulary(self):
        for bad in (96, -1):
            message = f"token IDs outside the vocabulary of size 96: [{bad}]"
            with self.assertRaisesRegex(ValueError, re.escape(message)):
                model.forward(series(), [1, bad, 2])

    def test_empty_sequence(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.forward(series(), [])

    def test_targets_must_match_positions(self):
        logits = [[0.0] * 96 for _ in range(3)]     # by hand: this test needs no forward
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.loss_and_dlogits(logits, [2, 3])


################ One failure per cause, in the lesson's order

FAILED = {}         # test name -> a cause(), or "a failed assertion", in this run


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
            why = raised(error)
            earlier = [n for n, c in FAILED.items() if c == cause(error)]
            if earlier:
                self.skipTest(f"the same {type(error).__name__} as {earlier[0]}")
            FAILED[method.__name__] = cause(error)
            if isinstance(error, (trace_block.FileProblem, OSError)):  # a lab file
                raise self.failureException(why) from None
            which = diagnosis()
            if why in which:        # a blank function, say: the diagnosis's line says it all
                raise self.failureException(which) from None
            raise self.failureException(f"{which}\n\n{why}") from None
    return test


TWELVE = [(case, name) for case in (Recorded, Mechanism, FailureCases)
          for name in vars(case) if name.startswith("test_")]
for case, name in TWELVE:           # one failure per cause
    setattr(case, name, noting_failures(getattr(case, name)))


def load_tests(loader, tests, pattern):
    """The twelve in the lesson's order (unittest alone would sort them by name)."""
    return unittest.TestSuite(case(name) for case, name in TWELVE)


if __name__ == "__main__":
    unittest.main()
