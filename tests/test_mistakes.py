"""Learner mistakes, each planted in a scratch copy of model.py (model.py itself is never edited),
and the failure that names it.

A mistake in the math that the lesson's twelve cover must make test_model.where_it_departs,
which test 1 prints, name the function and step where it is; a mistake that forward refuses must
be refused with a message that says why; one that the recorded trace cannot see (its figures are
those of gains of 1, biases of 0 and nearly uniform attention) must be named by the lesson's
test that catches it. Mistakes no lesson claim covers (softmax's shift against overflow, sums
not rounded once, refusing a sequence it can take) must fail the test of this lab's own that
holds that claim. If model.py no longer holds the line a mistake edits, the test fails and says
which line it looked for: it never passes or skips in silence.
"""
import ast
import io
import sys
import tokenize
import types
import unittest
from functools import reduce
from operator import add
from unittest import mock

import model
import test_model
import trace_block
import tests.test_math as math_tests
from tests import LAB

MODEL_SOURCE = (LAB / "model.py").read_text(encoding="utf-8")


# model.py's top-level functions: (name, first line, start offset, end offset)
LINES = MODEL_SOURCE.splitlines(keepends=True)
FUNCTIONS = [(node.name, node.lineno, sum(map(len, LINES[:node.lineno - 1])),
              sum(map(len, LINES[:node.end_lineno]))) for node in ast.parse(MODEL_SOURCE).body
             if isinstance(node, ast.FunctionDef)]


def planted(*edits):
    """A scratch copy of model.py, as a module, with each edit (old, new) made where old stands
    (once in model.py), or (offset, old, new) at that offset. Only the functions an edit
    changes are compiled again (which keeps many plantings quick); the others are model.py's
    own, bound to the copy's names."""
    module = types.ModuleType("model_with_a_mistake")
    for name, value in vars(model).items():
        module.__dict__[name] = (types.FunctionType(value.__code__, module.__dict__, name,
                                                    value.__defaults__)
                                 if isinstance(value, types.FunctionType) else value)
    changed = {}
    for edit in edits:
        at, old, new = edit if len(edit) == 3 else (MODEL_SOURCE.find(edit[0]), *edit)
        if MODEL_SOURCE.count(old) != 1 and len(edit) == 2 or MODEL_SOURCE[at:at + len(old)] != old:
            raise AssertionError(f"cannot plant the mistake: model.py no longer holds this "
                                 f"line exactly once: {old!r}")
        name, line, start, end = next(f for f in FUNCTIONS if f[2] <= at < f[3])
        text = changed.get(name, (line, MODEL_SOURCE[start:end]))[1]
        shift = len(text) - (end - start)       # earlier edits of this function moved it
        changed[name] = line, text[:at - start + shift] + new + text[at - start + shift + len(old):]
    for name, (line, text) in changed.items():
        exec(compile("\n" * (line - 1) + text, "model.py (a mistake planted)", "exec"),
             module.__dict__)
    return module


def first_failure(module, tests):
    """The message of the first of tests (TestCase, name) to fail with module as model.py."""
    trace_block.small_copy_check(96, tuple(test_model.ball()))  # cached first: model.py's own
    result = unittest.TestResult()
    with mock.patch.object(math_tests, "model", module), \
            mock.patch.object(test_model, "model", module), \
            mock.patch.object(trace_block, "model", module):
        for case, name in tests:
            case(name).run(result)
            if result.failures or result.errors:
                return (result.failures + result.errors)[0][1]
    return None


MASK = "for k_j in k[:i + 1]]"
LN_TERMS = "fsum((term1, -mean_d_xhat, -xhat_j * mean_d_xhat_xhat))"
# (the mistake, its edits of model.py, words the first failure must hold)
NAMED_BY_THE_TWELVE = [
    ("a mask that lets a position see one ahead", [(MASK, "for k_j in k[:i + 2]]")],
     "attention_forward step 2"),
    ("a mask reversed", [(MASK, "for k_j in k[i:]]")], "attention_forward step 2"),
    ("a mask that hides the diagonal too", [(MASK, "for k_j in k[:i]]")],
     "row 0 is all -inf: the causal mask hid every position"),
    ("1/√d in the forward pass only", [("fsum(map(mul, q_i, k_j)) / sqrt_d", "fsum(map(mul, q_i, k_j))")],
     "attention_forward step 2"),
    ("1/√d in the backward pass only", [(f"[[e / sqrt_d for e in row] for row in causal_matmul("
                                         f"d_scores, {m}", f"[*causal_matmul(d_scores, {m}")
                                        for m in "kq"], "Wq, made in attention_backward"),
    ("the wrong matrix for the queries", [('    q = matmul(x, p["Wq"])  ', '    q = matmul(x, p["Wk"])  ')],
     "attention_forward step 1: the queries"),
    ("Wo untransposed in the backward pass", [('d_mixed = matmul(d_out, transpose(p["Wo"]))',
                                              'd_mixed = matmul(d_out, p["Wo"])')],
     "attention_backward steps 4 and 1"),
    ("the value path left out of d_x", [("[*q_t, *k_t, *v_t] for", "[*q_t, *k_t] for"),
                                        ("[*q_r, *k_r, *v_r] for", "[*q_r, *k_r] for")],
     "attention_backward's d_x"),
    ("a softmax backward with its sign flipped", [("w_j * (d_w_j - average)", "w_j * (d_w_j + average)")],
     "softmax_backward"),
    ("layer norm dividing by d - 1", [("fsum(c * c for c in centred) / d",
                                       "fsum(c * c for c in centred) / (d - 1)")],
     "layernorm_forward (LN1) step 2"),
    ("ε outside the square root", [("s = sqrt(variance + EPS)", "s = sqrt(variance) + EPS")],
     "layernorm_forward (LN1) step 2"),
    ("layer-norm backward without its last term", [(LN_TERMS, "fsum((term1, -mean_d_xhat))")],
     "layernorm_backward's d_x"),
    ("a sign flipped in layer-norm backward", [(LN_TERMS, LN_TERMS.replace("-mean_d_xhat,",
                                                                           "mean_d_xhat,"))],
     "layernorm_backward's d_x"),
    ("the gain's gradient without xhat", [("d_g = [fsum(map(mul, dy_col, xhat_col))",
                                           "d_g = [fsum(dy_col) + 0 * len(xhat_col)")],
     "lnf_g, made in backward step 4: layernorm_backward"),
    ("the relu's gate left open", [("fsum(map(mul, d_m_t, W2_row)) if z > 0.0 else 0.0",
                                    "fsum(map(mul, d_m_t, W2_row))")], "the relu's gate"),
    ("a skip path's gradient forgotten, around the MLP", [("d_x1 = add(d_x2, d_x1_mlp)",
                                                           "d_x1 = d_x1_mlp")],
     "step 3's skip path"),
    ("a skip path's gradient forgotten, around attention", [("d_x0 = add(d_x1, d_x0_att)",
                                                             "d_x0 = d_x0_att")],
     "step 2's skip path"),
    ("a position looked up by the token", [('p["pos_emb"][:len(ids)]',
                                            '[p["pos_emb"][i % len(p["pos_emb"])] for i in ids]')],
     "forward step 1: the embeddings"),
    ("position gradients in the wrong rows", [('grads["pos_emb"][:len(ids)] = d_x0',
                                               'grads["pos_emb"][1:len(ids) + 1] = d_x0')],
     "pos_emb, made in backward step 1"),
    ("a gradient in p", [('grads["pos_emb"] = [[0.0] * len(row) for row in p["pos_emb"]]',
                          'grads["pos_emb"] = p["pos_emb"]')], "p's own pos_emb was changed"),
    ("a repeated token's gradient overwritten, not summed", [(
        "rows_of.setdefault(token, []).append(d_x0_t)", "rows_of[token] = [d_x0_t]")],
     "tok_emb, made in backward step 1"),
    ("the loss's gradient without 1/T", [("scale = total * T", "scale = total"),
                                          ("d_row[target] -= 1.0 / T", "d_row[target] -= 1.0")],
     "d_logits, made in loss_and_dlogits"),
    ("the loss summed, not averaged", [("return fsum(losses) / T, d_logits",
                                        "return fsum(losses), d_logits")],
     "loss_and_dlogits: the mean cross-entropy"),
    ("init_params drawing column by column", [(
        "[[rng.gauss(0.0, 0.02) for _ in range(cols[0])] for _ in range(rows)]",
        "[list(c) for c in zip(*[[rng.gauss(0.0, 0.02) for _ in range(rows)]\n"
        "                                  for _ in range(cols[0])])]")],
     "init_params draws other numbers")]
LARGE = [(math_tests.LargeScoreTests, name) for name in (
    "test_attention_with_scores_in_the_thousands",
    "test_loss_with_scores_in_the_thousands_and_near_the_largest_float")]
# (the mistake, its edits, the lesson's test whose own message names it, the words it holds):
# mistakes test 1 cannot see, the recorded trace's figures being those of a model at its start
NAMED_BY_ONE_TEST = [
    ("softmax_backward's average not weighted", [("average = fsum(map(mul, w, d_w))",
                                                  "average = fsum(d_w) / len(d_w)")],
     (test_model.Mechanism, "test_gradients_match_finite_differences"), "softmax_backward"),
    ("the bias added before the gain", [("xhat_j * g_j + b_j for", "(xhat_j + b_j) * g_j for")],
     (test_model.Mechanism, "test_layernorm_centers_and_scales_each_row"),
     "the bias added after the gain"),
    ("a gain handed to the wrong layer norm's backward", [(
        'layernorm_backward(d_h2, p["ln2_g"]', 'layernorm_backward(d_h2, p["ln1_g"]')],
     (test_model.Mechanism, "test_gradients_match_finite_differences"), "LN2's d_x"),
    ("pos_emb given a gradient without positions", [('if cache["use_positions"]:', "if True:")],
     (test_model.Mechanism, "test_unused_positions_get_zero_gradient"),
     "without positions, pos_emb rows [0, 1, 2]"),
    ("use_positions=False ignored", [("    if use_positions:\n", "    if True:\n")],
     (test_model.FailureCases, "test_without_positions_the_last_position_cannot_see_word_order"),
     "is pos_emb left out"),
    *[(f"layer norm changing {arg} in place", [(f"{new} = [", f"{new} = {arg}; {new}[:] = [")],
       (test_model.Mechanism, "test_layernorm_backward_with_nonunit_gains"),
       "changed x or dy in place") for new, arg in (("centred", "row"), ("d_xhat", "dy_t"))]]
LENGTHS = [(math_tests.GradientTests, "test_forward_takes_every_length_from_1_to_its_positions")]
# (the mistake, its edits, the tests of this lab's own that must catch it)
CAUGHT_BY_THE_LAB = [
    ("attention's softmax shifted by the minimum",
     [("        top = max(row)\n        e = [", "        top = min(row)\n        e = [")], LARGE),
    ("attention's softmax without the shift", [("        e = [exp(z - top) for z in row]\n        "
                                                "total = fsum(e)\n        weights",
                                                "        e = [exp(z) for z in row]\n        "
                                                "total = fsum(e)\n        weights")], LARGE),
    ("the loss's softmax without the shift", [("        e = [exp(z - top) for z in row]\n        "
                                               "total = fsum(e)\n        # -log",
                                               "        e = [exp(z) for z in row]\n        "
                                               "total = fsum(e)\n        # -log")], LARGE),
    ("forward refusing all its positions", [('if not 0 < len(ids) <= sizes["P"]:',
                                             'if not 0 < len(ids) < sizes["P"]:')], LENGTHS),
    ("forward refusing a single token", [('if not 0 < len(ids) <= sizes["P"]:',
                                          'if not 1 < len(ids) <= sizes["P"]:')], LENGTHS)]

def fsum_calls():
    """The offsets of model.py's calls of math.fsum, in its math and speed sections."""
    end = MODEL_SOURCE.index("################ Input checks")
    tokens = list(tokenize.generate_tokens(io.StringIO(MODEL_SOURCE).readline))
    return [sum(map(len, LINES[:name.start[0] - 1])) + name.start[1]
            for name, after in zip(tokens, tokens[1:]) if name.string == "fsum"
            and after.string == "(" and sum(map(len, LINES[:name.start[0] - 1])) < end]


def sum_left_to_right(terms):
    """The sum of terms, each added to the running total in turn (sum() before Python 3.12)."""
    return reduce(add, terms, 0.0)


class LearnerMistakes(unittest.TestCase):

    @classmethod
    def setUpClass(cls):    # a mistake planted on top of one already in model.py says nothing
        if "backward are unchanged" not in (where := test_model.where_it_departs()):
            raise AssertionError(f"model.py itself departs from tests/steps.json, so no "
                                 f"mistake planted in it can be told apart. {where}")

    def test_the_lesson_s_first_failure_names_each_mistake(self):
        for what, edits, named in NAMED_BY_THE_TWELVE:
            with self.subTest(mistake=what):
                try:
                    where = test_model.where_it_departs(planted(*edits))
                except ValueError as refusal:       # forward itself refuses, saying why
                    where = str(refusal)
                self.assertIn(named, where)
        for what, edits, test, named in NAMED_BY_ONE_TEST:
            with self.subTest(mistake=what):
                self.assertIn(named, first_failure(planted(*edits), [test]) or "no failure")

    def test_the_lab_s_own_tests_catch_what_the_lesson_does_not_claim(self):
        for what, edits, tests in CAUGHT_BY_THE_LAB:
            with self.subTest(mistake=what):
                self.assertIsNotNone(first_failure(planted(*edits), tests))

    def test_every_sum_not_rounded_once_is_caught(self):
        """Each math.fsum of model.py replaced, one at a time, by a sum added left to right
        and, from 3.12, by the built-in sum(), compensated (before, sum() is the first one):
        ExactSumTests fail. One sum, the loss's top + log(total) - target, rounds as fsum does
        under 3.12's sum() on every input we could build, so there sum() is not planted."""
        exact_sums = [(math_tests.ExactSumTests, name) for name in
                      unittest.TestLoader().getTestCaseNames(math_tests.ExactSumTests)]
        calls = fsum_calls()
        self.assertGreaterEqual(len(calls), 15)
        loss_terms = MODEL_SOURCE.find("fsum((top, log(total), -row[target]))")  # -1: gone
        for at in calls:
            for summing in (sum_left_to_right, sum):
                if summing is sum and (at == loss_terms or sys.version_info < (3, 12)):
                    continue
                line = MODEL_SOURCE.count("\n", 0, at) + 1
                with self.subTest(line=line, sum=summing.__name__):
                    module = planted((at, "fsum", "planted_sum"))
                    module.planted_sum = summing     # a name the copy's edited function reads
                    self.assertIsNotNone(first_failure(module, exact_sums),
                                         f"{summing.__name__}() in place of math.fsum on line "
                                         f"{line} of model.py was not caught")
