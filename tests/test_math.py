"""The model's math beyond the lesson's twelve: every sum rounded once, scores too large for
exp, every parameter's gradient at full size, the speed section's fast lines against the plain
ones they replace, the numbers of tests/steps.json bit for bit, and the refusals of bad input."""
import doctest
import json
import math
import random
import re
import unittest

import model
import trace_block
from test_model import (REPEATED, TOLERANCE, ball, forward_steps, gradient_steps, series, tiny,
                        tokenizer)
from tests import LAB


def load_tests(loader, tests, pattern):
    tests.addTests(doctest.DocTestSuite(model))
    return tests


def exact(values):
    """The sum of floats, exactly, rounded once at the end: what math.fsum promises. Every
    float is a whole number of units of 2**-1074, so the sum is an integer in those units,
    with no rounding; int / int then rounds once.

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


def reference_matmul(a, b):
    return [[dot(row, col) for col in zip(*b)] for row in a]


# Terms whose exact sum lies a hair above a rounding tie, so that it rounds up: 1 + 2**-53 +
# 2**-106 becomes 1 + 2**-52. Added left to right (sum() before Python 3.12) each small term
# is lost and the sum says 1.0; the compensated sum() of 3.12 keeps them aside but rounds
# their own sum to 2**-53, lands on the tie and says 1.0 too. Rounded once: 1.0000000000000002.
TRAP = [1.0, 2.0 ** -54, 2.0 ** -54, 2.0 ** -106]
TRAP3 = [1.0, 2.0 ** -53, 2.0 ** -106]
ROUNDED_ONCE = 1.0 + 2.0 ** -52
# exp(-X1) lies just below 2**-53 and exp(-X2) just above what it lacks: [1, exp(-X1),
# exp(-X2)], the weights of a softmax before dividing, make a trap like TRAP3.
X1 = 53 * math.log(2) + 1e-10
X2 = -math.log((2.0 ** -53 - math.exp(-X1)) * (1 + 5e-7))
I4 = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]


class ExactSumTests(unittest.TestCase):
    """Each sum in model.py is rounded once (math.fsum): fed terms like TRAP, which come out
    another way when added any other way, every function gives what the exact references
    above give, on every Python from 3.10."""

    def test_the_trap_and_the_list_helpers(self):
        self.assertEqual((math.fsum(TRAP), math.fsum(TRAP3), exact(TRAP)), (ROUNDED_ONCE,) * 3)
        self.assertEqual(model.matmul([TRAP], [[1.0]] * 4), [[ROUNDED_ONCE]])
        # rows holding 0.0 (scattered, at the end as in a causal row, only) take the speed path
        self.assertEqual(model.matmul([[1.0, 0.0, 2.0 ** -54, 2.0 ** -54, 0.0, 2.0 ** -106],
                                       TRAP + [0.0] * 2, [0.0] * 6], [[1.0]] * 6),
                         [[ROUNDED_ONCE], [ROUNDED_ONCE], [0.0]])
        # a causal a (row i: i + 1 entries) with TRAP as its row 3, or as its column 0
        a, a_T = [TRAP[:i + 1] for i in range(4)], [[t] + [1.0] * i for i, t in enumerate(TRAP)]
        self.assertEqual([model.causal_matmul(a, [[1.0]] * 4)[3], model.causal_matmul(
            a_T, [[1.0]] * 4, transpose_a=True)[0]], [[ROUNDED_ONCE]] * 2)
        self.assertEqual(model.matmul([[1.0] * 4], [[t] for t in TRAP]), [[ROUNDED_ONCE]])
        self.assertEqual(model.column_sums([[t, 2 * t] for t in TRAP]),
                         [ROUNDED_ONCE, 2 * ROUNDED_ONCE])
        self.assertEqual(model.linear([TRAP], [[1.0, -1.0]] * 4, [0.5, 0.0]),
                         [[ROUNDED_ONCE + 0.5, -ROUNDED_ONCE]])
        d_x, d_W, d_b = model.linear_backward([TRAP], [[1.0, 2.0, 3.0, 4.0]], [[1.0] * 4] * 4)
        self.assertEqual((d_x, d_b), ([[ROUNDED_ONCE] * 4], TRAP))
        d_pre, _, _ = model.linear_relu_backward([TRAP], [[1.0, 0.0]], [[1.0] * 4] * 2)
        self.assertEqual(d_pre, [[ROUNDED_ONCE, 0.0]])

    def test_softmax_and_its_backward(self):
        e = [1.0, math.exp(-X1), math.exp(-X2)]
        self.assertEqual(exact(e), ROUNDED_ONCE)
        self.assertEqual(model.softmax([[0.0, -X1, -X2]]), [[v / ROUNDED_ONCE for v in e]])
        w, d_w = [0.5, 0.25, 0.125, 0.125], [2.0, 2.0 ** -52, 2.0 ** -51, 2.0 ** -103]
        self.assertEqual(model.softmax_backward([w], [d_w]),
                         [[wj * (dj - ROUNDED_ONCE) for wj, dj in zip(w, d_w)]])

    def test_layer_norm(self):
        # row 0 sums to a trap (the mean); row 1 has mean 0 and squares that make a trap
        roots = [2.0 ** 4, 2.0 ** -23, 2.0 ** -23, 2.0 ** -49]
        rows = [TRAP + [0.0] * 4, roots + [-v for v in roots]]
        g, b = [1.5, 0.5, 2.0, 1.0] * 2, [0.0, 0.25, -0.5, 1.0] * 2
        y, cache = model.layernorm_forward([*map(tuple, rows)], g, b)   # tuples: x is not to change
        for row, y_row, s in zip(rows, y, cache["std"]):
            centred = [v - exact(row) / 8 for v in row]
            self.assertEqual(s, math.sqrt(exact(c * c for c in centred) / 8 + model.EPS))
            self.assertEqual(y_row, [c / s * gj + bj for c, gj, bj in zip(centred, g, b)])
        # backward: xhat is exactly ±1, so d_g, the means and the three terms are traps
        signs = [(-1) ** j for j in range(8)]
        _, cache = model.layernorm_forward([[2.0 ** 26 * s for s in signs]] * 4, [1.0] * 8,
                                           [0.0] * 8)
        three = [1.0, -2.0 ** -51, -1.0, 2.0 ** -104, -2.0 ** -51, 0.0, -2.0 ** -104, 0.0]
        rows = [TRAP + [0.0] * 4, [t * s for t, s in zip(TRAP + [0.0] * 4, signs)]]
        for d_y in ([[t * s for s in signs] for t in TRAP], rows + rows, [three] * 4):
            d_x, d_g, d_b = model.layernorm_backward(dy=d_y, g=[1.0] * 8, cache=cache)
            self.assertEqual(d_g, [dot(col, xcol) for col, xcol in zip(zip(*d_y), zip(*cache["xhat"]))])
            self.assertEqual(d_b, [exact(col) for col in zip(*d_y)])
            want = [[exact((t, -exact(row) / 8, -x * dot(row, xh) / 8)) / s for t, x in
                     zip(row, xh)] for row, xh, s in zip(d_y, cache["xhat"], cache["std"])]
            self.assertEqual(d_x, want)
        self.assertEqual(d_x[0][0], ROUNDED_ONCE / 2 ** 26)

    def test_attention_and_its_backward(self):
        # q = 2**52 x and k = x: q_2 · k_0 is 2**52 + 2**-2 + 2**-2 + 2**-60, a trap
        p = {"Wq": [[2.0 ** 52 * v for v in row] for row in I4], "Wk": I4, "Wv": I4, "Wo": I4}
        trap_row = [1.0, 2.0 ** -27, 2.0 ** -27, 2.0 ** -60]
        x = [trap_row, [1.0, 0.0, 0.0, 0.0], trap_row]
        out, cache = model.attention_forward(p, x)
        scores = [[dot(cache["q"][i], k) / 2.0 for k in cache["k"][:i + 1]] for i in range(3)]
        self.assertEqual(scores[2][0], (2.0 ** 52 + 1) / 2)
        weights = [[v / exact(e) for v in e] + [0.0] * (2 - i) for i, row in enumerate(scores)
                   for e in [[math.exp(z - max(row)) for z in row]]]
        self.assertEqual(cache["weights"], weights)
        self.assertEqual(out, reference_matmul(reference_matmul(weights, x), I4))
        # backward: d_mixed_2 · v_0 is a trap too; d_x sums its three paths as one sum
        d_out = [[1.0, 0.5, 0.25, 2.0], [0.5, 1.0, 1.0, 0.5], [2.0 ** 52 * v for v in trap_row]]
        grads, d_x = model.attention_backward(p, cache, d_out)
        d_mixed = reference_matmul(d_out, I4)
        d_w = [[dot(d_mixed[i], x[j]) if j <= i else 0.0 for j in range(3)] for i in range(3)]
        d_s = [[wj * (dj - dot(w, dw)) / 2.0 for wj, dj in zip(w, dw)] for w, dw in zip(weights, d_w)]
        d_q, d_k = reference_matmul(d_s, cache["k"]), reference_matmul(model.transpose(d_s), cache["q"])
        d_v = reference_matmul(model.transpose(weights), d_mixed)
        self.assertEqual(grads["Wv"], reference_matmul(model.transpose(x), d_v))
        self.assertEqual(d_x, [[exact(list(map(float.__mul__, dq + dk + dv, wq + wk + wv)))
                                for wq, wk, wv in zip(p["Wq"], p["Wk"], p["Wv"])]
                               for dq, dk, dv in zip(d_q, d_k, d_v)])

    def test_loss(self):
        cases = [  # row 0: the softmax's trap; row 1: the top score, 2**53, and the log of the
                   # total, 0.127, lose the 0.127 if they are added before the target's score
                   ([[0.0, -X1, -X2], [2.0 ** 53, 2.0 ** 53 - 2, 0.0]], [0, 1]),
                   # scores 745 or more below the top weigh exactly 0: each loss is that
                   # distance, and 2**116, 2**62, 2**62 and 2**10 make a trap for their mean
                   ([[0.0, -2.0 ** 116], [0.0, -2.0 ** 62], [0.0, -2.0 ** 62], [0.0, -2.0 ** 10]],
                    [1, 1, 1, 1])]
        for logits, targets in cases:
            losses, d_logits = [], []
            for row, target in zip(logits, targets):
                e = [math.exp(z - max(row)) for z in row]
                losses.append(exact((max(row), math.log(exact(e)), -row[target])))
                d_logits.append([v / (exact(e) * len(logits)) - (j == target) / len(logits)
                                 for j, v in enumerate(e)])
            self.assertEqual(model.loss_and_dlogits([*map(tuple, logits)], targets),  # tuples: kept
                             (exact(losses) / len(logits), d_logits))


class LargeScoreTests(unittest.TestCase):
    """exp(1000) overflows: each softmax subtracts its row's maximum first."""

    def test_attention_with_scores_in_the_thousands(self):
        big = [[200.0 * v for v in row] for row in I4]
        x = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.5]]  # scores up to 20000
        _, cache = model.attention_forward({"Wq": big, "Wk": big, "Wv": I4, "Wo": I4}, x)
        self.assertGreater(max(map(max, cache["scores"])), 1000.0)
        for row, w in zip(cache["scores"], cache["weights"]):
            e = [math.exp(z - max(row)) for z in row]
            self.assertEqual(w, [v / exact(e) for v in e])

    def test_loss_with_scores_in_the_thousands_and_near_the_largest_float(self):
        logits = [[1000.0, 1001.0, 1002.0], [-5000.0, 3000.0, 2990.0]]   # row 1: exp(-8000) = 0.0
        loss, d_logits = model.loss_and_dlogits(logits, [0, 0])
        want = [2.0 + math.log(1 + math.exp(-1) + math.exp(-2)), 8000.0 + math.log1p(math.exp(-10))]
        self.assertAlmostEqual(loss, (want[0] + want[1]) / 2, places=9)
        self.assertAlmostEqual(d_logits[1][1], 1 / (1 + math.exp(-10)) / 2, places=15)
        for big in (1e308, -1e308):             # the loss could overflow to inf: refused
            with self.subTest(score=big), self.assertRaisesRegex(ValueError, "too large"):
                model.loss_and_dlogits([[0.0, big]], [0])


class GradientTests(unittest.TestCase):

    def test_every_parameter_along_random_directions_at_full_size(self):
        """(L(p + h·u) - L(p - h·u)) / 2h against grad · u along random unit directions u
        through all 7,440 parameters at once, on the ball sentence; and on a model as narrow
        as the small copy with the series' 64 positions, at 1 token and at all 64."""
        rng, h = random.Random(64), 1e-5
        narrow = trace_block.build(tokenizer(), {**trace_block.TINY, "max_len": 64})   # P 64, H 8
        self.assertEqual([model.shape(narrow[n]) for n in ("pos_emb", "W1", "W2")],
                         [(64, 4), (4, 8), (8, 4)], "a size handed to the wrong dimension")
        for case, p, ids in (("the series model", series(), ball()),
                             ("1 token", narrow, [rng.randrange(96) for _ in range(2)]),
                             ("64 tokens", narrow, [rng.randrange(96) for _ in range(65)])):
            x, y = ids[:-1], ids[1:]
            logits, cache = model.forward(p, x)
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, y)[1])
            flat = {n: trace_block.flatten(t) for n, t in p.items()}
            u = {n: [rng.gauss(0, 1) for _ in flat[n]] for n in p}
            norm = math.sqrt(math.fsum(v * v for n in p for v in u[n]))         # u / norm: unit
            along = math.fsum(g * v for n in p for g, v in zip(trace_block.flatten(grads[n]), u[n]))

            def moved(sign):      # p + sign · h · u / norm, each tensor in its own shape
                nudged = {n: (a + sign * h * v / norm for a, v in zip(flat[n], u[n])) for n in p}
                return {n: [[next(nudged[n]) for _ in row] for row in t] if isinstance(t[0], list)
                        else list(nudged[n]) for n, t in p.items()}
            slope = (model.sequence_loss(moved(1), x, y) - model.sequence_loss(moved(-1), x, y)) / (2 * h)
            with self.subTest(case=case):
                self.assertLess(abs(slope - along / norm) / abs(slope), 1e-6)

    def test_forward_takes_every_length_from_1_to_its_positions(self):
        p = tiny()
        for T in range(1, len(p["pos_emb"]) + 1):
            logits, cache = model.forward(p, [7] * T)
            model.backward(p, cache, model.loss_and_dlogits(logits, [7] * T)[1])
            self.assertEqual(len(logits), T)

    def test_a_nudge_across_a_relu_kink_is_reported_not_failed(self):
        p, ids = tiny(), ball()[:3]
        x, y = ids[:-1], ids[1:]
        pre = model.forward(p, x)[1]["pre"][0][0]
        p["b1"][0] -= pre - 1e-9        # unit 0 at position 0 just above its kink: b1[0], W1[j][0]
        numeric, kinks = trace_block.numeric_gradients(p, x, y, names=["b1", "W1"])
        self.assertEqual(kinks, [("W1", 0, 0), ("W1", 1, 0), ("W1", 2, 0), ("W1", 3, 0), ("b1", 0)])
        grads = trace_block.backward_gradients(p, x, y)
        report = trace_block.compare_gradients(grads, numeric, kinks)
        self.assertEqual((report["parameters_checked"], report["kinks"]), (40 - 5, kinks),
                         "compare_gradients: b1 and W1's 40 entries, the 5 kinks left out")
        self.assertLess(report["max_abs_error"], TOLERANCE)
        # counted anyway (as gradient_error does), the kink's slope is not its derivative
        self.assertGreater(trace_block.compare_gradients(grads, numeric)["max_abs_error"], 1e-5)

    def test_the_gradients_belong_to_the_caller(self):
        """Every parameter gets a gradient of its shape, in p's order (a trainer may pair their
        values), in lists, none shared with another gradient or a parameter (a trainer may change
        them in place: clipping, say); and backward leaves its cache as forward made it."""
        p, ids = series(), tokenizer().encode("mia has a red hat. mia has a hat.")
        for use_positions in (True, False):
            logits, cache = model.forward(p, ids[:-1], use_positions)
            was = {key: repr(value) for key, value in cache.items()}
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, ids[1:])[1])
            self.assertEqual([k for k in was if repr(cache[k]) != was[k]], [], "backward changed")
            self.assertEqual([(n, model.shape(g)) for n, g in grads.items()],
                             [(n, model.shape(t)) for n, t in p.items()])
            tensors = list(grads.values()) + list(p.values())
            rows = [row for t in tensors if type(t[0]) is not float for row in t] + tensors
            self.assertEqual({type(row) for row in rows}, {list}, "a gradient row is not a list")
            self.assertEqual(len(rows), len({id(row) for row in rows}), "a gradient row is "
                             "another's list, or a parameter's: [[0.0] * d] * V repeats one")

    def test_a_parameter_of_tuples_gives_the_same_gradients(self):
        p = tiny()
        lists = gradient_steps(model, p, REPEATED)
        tuples = {name: [tuple(r) for r in t] if isinstance(t[0], list) else tuple(t)
                  for name, t in p.items()}                      # every parameter at once
        got = gradient_steps(model, tuples, REPEATED)             # (a diff of all: minutes)
        self.assertEqual([n for n in lists if got[n] != lists[n]], [])

    def test_sequence_loss_is_forward_then_the_loss(self):
        p, ids = series(), ball()
        for use_positions in (True, False):
            logits, _ = model.forward(p, ids[:-1], use_positions)
            self.assertEqual(model.sequence_loss(p, ids[:-1], ids[1:], use_positions),
                             model.loss_and_dlogits(logits, ids[1:])[0], f"{use_positions=}")

    def test_the_speed_section_gives_what_the_plain_lines_give(self):
        """Bit for bit: matmul_skipping_zeros against matmul's plain line (zeros first, last or amid
        a row of either factor; tuples; inf, nan met by 0), linear_relu_backward against its two."""
        rng = random.Random(17)
        a = [[0.0] * i + [rng.choice([0.0, rng.random()]) for _ in range(6 - i)] for i in range(7)]
        b = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(6)]
        for x, y in ((a, b), ([tuple(r) for r in a], b), (a, [[math.inf, math.nan, 1.0]] + b[1:])):
            for left, right in ((x, y), (model.transpose(y), model.transpose(x))):
                plain = [[math.fsum(map(float.__mul__, row, col)) for col in zip(*right)]
                         for row in left]             # exact() knows no nan or inf
                self.assertEqual(repr(model.matmul_skipping_zeros(left, right)), repr(plain))
        d_m, W2 = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(7)], b
        d_act, d_W2, d_b2 = model.linear_backward(d_m, a, W2)
        d_pre = [[d if z > 0.0 else 0.0 for d, z in zip(row, a_row)] for row, a_row in zip(d_act, a)]
        self.assertEqual(model.linear_relu_backward(d_m, a, W2), (d_pre, d_W2, d_b2))

    def test_the_recorded_steps_bit_for_bit(self):
        """init_params' numbers, forward's steps and every gradient on tests/steps.json's IDs,
        as recorded: the same numbers on every Python (test_model compares them only to within
        another platform's exp and log)."""
        recorded = json.loads((LAB / "tests" / "steps.json").read_text(encoding="utf-8"))
        self.assertEqual(recorded["ids"], REPEATED)
        p = tiny()
        found, grads = forward_steps(model, p, REPEATED), gradient_steps(model, p, REPEATED)
        drawn = model.init_params(96, **trace_block.TINY)
        for section, values in (("init", drawn), ("forward", found), ("gradients", grads)):
            moved = [name for name, value in recorded[section].items() if values[name] != value]
            self.assertEqual(moved, [], f"these {section} numbers moved: a mistake, unless you"
                                        f" changed the math on purpose: then tools/record_steps.py")


class Refusals(unittest.TestCase):
    """Bad input gets a ValueError or TypeError saying what is wrong: (case, call, type, words)."""

    def assert_refused(self, table):
        for case, call, exception, message in table:
            with self.subTest(case=case), self.assertRaisesRegex(exception, message):
                call()

    def test_forward_and_backward(self):
        p, tiny_p = series(), tiny()
        logits, cache = model.forward(p, [1, 2, 3])
        d_logits = model.loss_and_dlogits(logits, [2, 3, 4])[1]

        def changed_in_place(name):     # the cache keeps a copy of p's numbers, not p's rows
            cache_q = model.forward(q := model.init_params(96, 1, 1, 1, 3), [1])[1]   # small
            (q[name][0] if isinstance(q[name][0], list) else q[name])[0] += 1.0
            model.backward(q, cache_q, d_logits[:1])

        self.assert_refused([
            ("five offenders named", lambda: model.forward(p, list(range(96, 103))), ValueError,
             re.escape("[96, 97, 98, 99, 100] and 2 more")),
            ("text for IDs", lambda: model.forward(p, "mia"), TypeError, "encode the text first"),
            *[(f"IDs: {why}", lambda ids=ids: model.forward(p, ids), TypeError, f"ints, not {why}$")
              for ids, why in (([1] * 30 + [2.0], "one holding 2.0"), (["1"], "one holding '1'"),
                               ([True, 2], "one holding True"), (None, "None"), (5, "5"))],
            *[(f"use_positions={v!r}", lambda v=v: model.forward(p, [1], v), TypeError,
               "use_positions must be True or False") for v in ("no", None, 0)],
            ("unknown names, in p's order", lambda: model.forward(
                {**p, "W3": [[0.0]], 0: [[0.0]]}, [1]), ValueError, "unknown names: W3, 0$"),
            *[(f"{n} missing", lambda n=n: model.forward({k: v for k, v in p.items() if k != n},
                                                         [1]), ValueError, f"missing: {n}$")
              for n in ("tok_emb", "b_out")],
            *[(f"{n} of the small copy", lambda n=n: model.forward({**p, n: tiny_p[n]}, [1]),
               ValueError, f"{n} has shape") for n in ("Wq", "W1", "b1", "pos_emb")],
            ("a short row", lambda: model.forward({**p, "W2": p["W2"][:-1] + [[0.0] * 15]}, [1]),
             ValueError, "W2 is ragged: it has rows of lengths"),
            *[(f"a gain holding {v!r}", lambda v=v: model.forward({**p, "ln1_g": [v] * 16}, [1]),
               TypeError, "ln1_g must be a list of numbers") for v in ("1", None)],
            *[(f"a gain holding {v!r}", lambda v=v: model.forward({**p, "ln1_g": [v] * 16}, [1]),
               ValueError, "parameters: ln1_g holds inf, nan") for v in (math.inf, math.nan, 1e20)],
            *[(f"a weight holding {v!r:.9}", lambda v=v: model.forward({**p, "W1": [[0.5] * 40 + [
                v] * 24] * 16}, [1]), TypeError, f"parameters: W1 row 0 must hold numbers a float "
               f"can hold, not {v!r:.9}") for v in ("1", 10 ** 400)],   # past the 50th character
            ("parameters as a list", lambda: model.forward(list(p.values()), [1]), TypeError,
             "the dict init_params returns"),
            *[(f"d_logits {case}", lambda bad=bad: model.backward(p, cache, bad), ValueError,
               r"d_logits (has shape|row 0 holds inf, nan)") for case, bad in (
                   ("of 2 rows", d_logits[:2]), ("of 95 columns", [r[:95] for r in d_logits]),
                   *[(f"holding {v}", [[v] * 96] * 3) for v in (math.nan, math.inf, 1e20)])],
            ("d_logits None", lambda: model.backward(p, cache, None), TypeError, "d_logits must"),
            *[(f"the cache is {case}", lambda bad=bad: model.backward(p, bad, d_logits),
               TypeError, r"the cache that forward\(p, ids\) returned; this one lacks \['(par|hf)")
              for case, bad in (("attention's", cache["att"]), ("empty", {}), ("None", None),
                                ("without hf", {k: v for k, v in cache.items() if k != "hf"}))],
            ("cache IDs changed", lambda: model.backward(p, {**cache, "ids": [200]}, d_logits),
             ValueError, r"the cache's token IDs outside the vocabulary of size 96: \[200\]"),
            *[(f"a cache from before {n} changed in place", lambda n=n: changed_in_place(n),
               ValueError, "p has changed since") for n in model.PARAM_NAMES],
            ("two of other shapes: backward's first named", lambda: trace_block.compare_gradients(
                {**tiny_p, "tok_emb": [[0.0]], "b_out": [0.0] * 8}, tiny_p), ValueError, re.escape(
                "gradient of b_out is (8,): it must have the shape of b_out, (96,)"))])

    def test_the_loss(self):
        logits, _ = model.forward(series(), [1, 2])
        self.assert_refused([
            ("empty", lambda: model.loss_and_dlogits([], []), ValueError, "^empty sequence$"),
            *[(f"target {bad}", lambda bad=bad: model.loss_and_dlogits(logits, [1, bad]),
               ValueError, re.escape(f"target IDs outside the vocabulary of size 96: [{bad}]"))
              for bad in (96, -1)],
            *[(f"a score of {bad}", lambda bad=bad: model.loss_and_dlogits([[0.0, bad]], [1]),
               ValueError, "logits row 0 holds inf, nan") for bad in (math.inf, math.nan)],
            ("ragged rows", lambda: model.loss_and_dlogits([[0.0, 1.0], [0.0]], [1, 0]),
             ValueError, r"rows of lengths \[1, 2\]"),
            ("rows of text", lambda: model.loss_and_dlogits([["a", "b"]], [1]), TypeError,
             "must hold numbers")])

    def test_layer_norm_attention_and_softmax(self):
        p, x = series(), [[1.0, 2.0, 4.0]]
        cache1 = model.forward(p, [1])[1]
        _, cache = model.layernorm_forward(x, [1.0] * 3, [0.0] * 3)
        self.assert_refused([
            ("gain 3, bias 2", lambda: model.layernorm_forward(x, [1.0] * 3, [0.0] * 2),
             ValueError, r"b has shape \(2,\), but it must be \(d,\) with d = 3, as in x"),
            ("rows of 3, a gain of 2", lambda: model.layernorm_forward(x, [1.0] * 2, [0.0] * 2),
             ValueError, "g has shape"),
            *[(f"a row holding {v}", lambda v=v: model.layernorm_forward([[1.0, v]], [1.0] * 2,
                                                                         [0.0] * 2), ValueError,
               "x row 0 holds inf, nan or values too large") for v in (math.inf, math.nan, 1e160)],
            ("a gain of inf", lambda: model.layernorm_forward(x, [1.0, math.inf, 1.0], [0.0] * 3),
             ValueError, r"layernorm_forward: g holds inf"),
            *[(f"backward: {what}", lambda bad=bad: model.layernorm_backward(
                [[1.0] * 16], [1.0] * 16, bad), TypeError, "the cache that layernorm_forward "
               "returned") for what, bad in (("the model's whole cache", cache1), ("an int", 5))],
            *[(f"backward: dy {dy}", lambda dy=dy: model.layernorm_backward(dy, [1.0] * 3, cache),
               ValueError, rf"dy has shape \({len(dy)}, {len(dy) and 3}\), but it must be \(T, d\) "
               "with T = 1, as in xhat") for dy in ([[1.0] * 3] * 2, [])],   # not "empty sequence"
            ("backward: dy holding nan", lambda: model.layernorm_backward(
                [[math.nan] * 3], [1.0] * 3, cache), ValueError, "dy row 0 holds inf, nan"),
            ("attention: empty", lambda: model.attention_forward(p, []), ValueError,
             "^empty sequence$"),
            ("attention: rows of 4 for weights of 16", lambda: model.attention_forward(
                p, [[0.5] * 4]), ValueError, r"Wq has shape \(16, 16\), but it must be \(d, d\) "
                                             r"with d = 4, as in x"),
            ("attention: Wk missing", lambda: model.attention_forward(
                {k: v for k, v in p.items() if k != "Wk"}, [[0.5] * 16]), ValueError,
             "parameters missing: Wk"),
            *[(f"attention backward: {what}", lambda c=c: model.attention_backward(
                p, c, [[0.1] * 16]), TypeError, message) for what, c, message in (
                ("the model's cache", cache1, r"cache\['att'\]"),
                ("a cache with v None", {**cache1["att"], "v": None}, "v must be a list of rows"))],
            ("attention backward: d_out holding inf", lambda: model.attention_backward(
                p, cache1["att"], [[math.inf] * 16]), ValueError, "d_out row 0 holds inf, nan"),
            *[(f"softmax: row 1 of {row}", lambda row=row: model.softmax([[0.0], row]), ValueError,
               "row 1 is all -inf: the causal mask hid every position")
              for row in ([], [-math.inf] * 2)],
            *[(f"softmax of {row}", lambda row=row: model.softmax([row]), ValueError,
               "holds nan or inf") for row in ([0.0, math.nan], [0.0, math.inf],
                                               [-math.inf, math.nan])],
            *[(f"softmax_backward of {w} and {d_w}", lambda w=w, d_w=d_w: model.softmax_backward(
                w, d_w), ValueError, message) for w, d_w, message in (([[0.5, 0.5]], [[1.0]], "row 0 "
                "of d_weights has length 1, not 2, as in weights"), ([[]], [[]], "weights is empty"))]])

    def test_sizes_and_list_helpers(self):
        ragged, I2, (p, x, y) = [[1.0, 2.0], [3.0]], [[1.0, 0.0], [0.0, 1.0]], (tiny(), [1], [2])
        self.assert_refused([
            *[(f"sizes {args}", lambda args=args: model.init_params(*args, seed=3), ValueError,
               "must be an int of at least 1") for args in ((96, 0, 64, 64), (0, 16, 64, 64))],
            *[(f"sizes {args!s:.40}", lambda args=args: model.check_sizes("init_params", **dict(zip(
                model.SIZES, args)), seed=3), ValueError, "init_params: these sizes make over 1e8 "
               "numbers") for args in ((96, 10**4, 64, 64), (10**400, 16, 64, 64))],
            ("d of 16.0", lambda: model.init_params(96, 16.0, 64, 64, 3), TypeError,
             "d must be an int"),
            ("a negative seed", lambda: model.init_params(96, 16, 64, 64, -3), ValueError,
             "seed must be an int of at least 0, not -3"),
            *[(f"seed {s!r}", lambda s=s: model.init_params(96, 16, 64, 64, s), TypeError,
               "seed must be an int") for s in (None, "3", 3.5, True)],
            ("count_params of a list", lambda: model.count_params([[0.0]]), TypeError,
             "the parameters must be the dict init_params returns"),
            ("matmul: 3 against 2 rows", lambda: model.matmul([[1.0] * 3], I2), ValueError,
             r"b has shape \(2, 2\), but it must be \(k, m\) with k = 3, as in a"),
            *[(f"{f.__name__}: ragged", lambda f=f: f(ragged), ValueError,
               r"rows of lengths \[1, 2\]") for f in (model.transpose, model.column_sums,
                                                       model.shape)],
            ("matmul: a float", lambda: model.matmul(1.5, I2), TypeError,
             "a must be a list of rows"),
            *[(f"matmul: None in {m}", lambda a=a, b=b: model.matmul(a, b), TypeError,
               "matmul: a matrix must hold numbers") for m, a, b in (
                ("a", [[None, 1.0]], I2), ("b", [[1.0, 2.0]], [[None, 1.0], [1.0, 1.0]]))],
            *[(f"causal_matmul: a row of 3 (transpose_a={t})", lambda t=t: model.causal_matmul(
                [[1.0], [1.0] * 3], I2, t), ValueError, "row 1 of a has length 3") for t in (0, 1)],
            ("add: two shapes", lambda: model.add([[1.0, 2.0]], [[1.0]]), ValueError,
             r"b has shape \(1, 1\), but it must be \(n, k\) with k = 2, as in a"),
            ("linear: a bias of 3", lambda: model.linear([[1.0, 2.0]], I2, [0.5] * 3), ValueError,
             r"b has shape \(3,\)"),
            ("linear_backward: 2 rows of d_y, 1 of x", lambda: model.linear_backward(
                [[1.0, 2.0]] * 2, [[3.0]], [[4.0, 5.0]]), ValueError, r"d_y has shape \(2, 2\)"),
            *[(f"shape of {v!r}", lambda v=v: model.shape(v), TypeError, "shape") for v in
              (1.5, [[[1.0]]], [1.0, [2.0]], "ab")],
            *[(f"trace_block: {why}", call, ValueError, why) for why, call in (
                ("config must have exactly", lambda: trace_block.build(tokenizer(), {"d": 4})),
                ("the story is 0 tokens", lambda: trace_block.trace(tokenizer(), "")),
                *[("step must be a number from 1e-12", lambda s=s: trace_block.numeric_gradients(
                    p, x, y, step=s)) for s in (0, 1e-17, 1e30)],
                ("names must be a list", lambda: trace_block.numeric_gradients(p, x, y, names=5)),
                *[(why, lambda a=a: trace_block.time_steps(*a)) for a, why in [(((T,),), "lengths "
                  "must be ints from 1 to 64") for T in (0, 65)] + [(((8,), 0), "repeats must")]])],
            *[(f"trace_block: {why}", call, TypeError, why) for why, call in (
                ("expected a tokenizer", lambda: trace_block.build("bpe", trace_block.TINY)),
                ("the gradients must be dicts", lambda: trace_block.compare_gradients([], {})))]])
