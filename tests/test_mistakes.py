"""Learner mistakes, each planted in a scratch copy of model.py (model.py itself is never edited),
and the failure that names it.

A mistake in a lesson function must be named by the diagnosis (tests/diagnosis.py), which test 1,
2 or 4 prints first; for one mistake in each lesson function, the whole twelve are run and the
first line of their first failure must name it. Mistakes no lesson claim covers (softmax's shift
against overflow, a sum not rounded once, refusing a length the model takes) must fail the lab's
own test of that claim. If model.py no longer holds the line a mistake edits, the test fails and
says which line it looked for: it never passes in silence.
"""
import ast
import contextlib
import importlib.util
import io
import shutil
import sys
import tempfile
import tokenize
import types
import unittest
from pathlib import Path
from functools import reduce
from operator import add
from unittest import mock

import model
import test_model
import trace_block
import tests.test_math as math_tests
from tests import LAB, diagnosis

SOURCE = (LAB / "model.py").read_text(encoding="utf-8")
LINES = SOURCE.splitlines(keepends=True)
# model.py's top-level functions: (name, first line, start offset, end offset)
FUNCTIONS = [(node.name, node.lineno, sum(map(len, LINES[:node.lineno - 1])),
              sum(map(len, LINES[:node.end_lineno]))) for node in ast.parse(SOURCE).body
             if isinstance(node, ast.FunctionDef)]


def planted(*edits):
    """A scratch copy of model.py, as a module, with each edit (old, new) made where old stands
    (once in model.py), or (offset, old, new) at that offset. Only the functions an edit
    changes are compiled again; the others are model.py's own, bound to the copy's names."""
    module = types.ModuleType("model_with_a_mistake")
    for name, value in vars(model).items():
        if isinstance(value, types.FunctionType):
            value = types.FunctionType(value.__code__, module.__dict__, name, value.__defaults__)
        module.__dict__[name] = value
    changed = {}
    for edit in edits:
        if len(edit) == 2:
            edit = (SOURCE.find(edit[0]), *edit)
            if SOURCE.count(edit[1]) != 1:
                raise AssertionError(f"cannot plant: model.py does not hold {edit[1]!r} once")
        at, old, new = edit
        name, line, start, end = next(f for f in FUNCTIONS if f[2] <= at < f[3])
        text = changed.get(name, (line, SOURCE[start:end]))[1]
        shift = len(text) - (end - start)       # earlier edits of this function moved it
        at += shift - start
        changed[name] = line, text[:at] + new + text[at + len(old):]
    for name, (line, text) in changed.items():
        code = compile("\n" * (line - 1) + text, "model.py (a mistake planted)", "exec")
        exec(code, module.__dict__)
    return module


def run_with(module, tests):
    """The result of tests, (TestCase, name) pairs, run in order with module as model.py."""
    result = unittest.TestResult()
    with mock.patch.object(math_tests, "model", module), \
            mock.patch.object(test_model, "model", module), \
            mock.patch.object(trace_block, "model", module), \
            mock.patch.dict(test_model.FAILED, clear=True):
        for case, name in tests:
            case(name).run(result)
    return result


def first_line(result):
    """The first line of the message of the result's first failure, or None."""
    failed = result.failures + result.errors
    if not failed:
        return None
    text = failed[0][1]         # a traceback, then the exception's own message
    start = text.index("\n", text.rindex("Traceback (most recent call last):"))
    message = next(line for line in text[start:].splitlines()[1:] if line[:1] != " ")
    return message.partition(": ")[2]


def counted(module, tests):
    """(how many of tests fail, how many skip) with module as model.py."""
    result = run_with(module, tests)
    return len(result.failures + result.errors), len(result.skipped)


MASK = "if j <= i else -math.inf"
LN_TERMS = "fsum((term1, -mean_d_xhat, -xhat_j * mean_d_xhat_xhat))"
SHIFTED = "        e = [exp(z - top) for z in row]\n        total = fsum(e)\n"
# (lesson function, the mistake, its edits of model.py); the diagnosis must name the function
MISTAKES = [
    ("layernorm_forward", "the unbiased variance, over d - 1", [
        ("fsum(c * c for c in centred) / d", "fsum(c * c for c in centred) / (d - 1)")]),
    ("layernorm_forward", "ε outside the square root", [
        ("s = sqrt(variance + EPS)", "s = sqrt(variance) + EPS")]),
    ("layernorm_forward", "the bias before the gain", [
        ("xh * g_j + b_j for", "(xh + b_j) * g_j for")]),
    ("layernorm_forward", "x changed in place", [
        ("centred = [x_j - mean for x_j in row]",
         "row[:] = [x_j - mean for x_j in row]\n        centred = row")]),
    ("layernorm_backward", "the last term dropped", [(LN_TERMS, "fsum((term1, -mean_d_xhat))")]),
    ("layernorm_backward", "a sign flipped", [(LN_TERMS, LN_TERMS.replace("-mean_d_xhat,",
                                                                        "mean_d_xhat,"))]),
    ("layernorm_backward", "times the std, not divided by it", [
        ("xhat_j * mean_d_xhat_xhat)) / s", "xhat_j * mean_d_xhat_xhat)) * s")]),
    ("layernorm_backward", "dy for dy · g", [
        ("d_xhat = [dy_j * g_j for dy_j, g_j in zip(dy_t, g)]", "d_xhat = list(dy_t)")]),
    ("layernorm_backward", "the gain's gradient without xhat", [
        ("d_g = column_sums([list(map(mul, dy_t, xhat_t)) for dy_t, xhat_t in zip(dy, xhat)])",
         "d_g = column_sums(dy)")]),
    ("softmax", "shifted by the minimum", [
        ("        top = max(row)\n" + SHIFTED + "        weights", "        top = min(row)\n"
         + SHIFTED + "        weights")]),
    ("softmax", "not divided by the total", [
        ("weights.append([e_j / total for e_j in e])", "weights.append(e)")]),
    ("softmax", "a masked score weighed", [("e = [exp(z - top) for z in row]\n        total = "
                                            "fsum(e)\n        weights", "e = [exp(max(z, -30.0)"
                                            " - top) for z in row]\n        total = fsum(e)\n"
                                            "        weights")]),
    ("softmax_backward", "a sign flipped", [("w_j * (d_w_j - average)", "w_j * (d_w_j + average)")]),
    ("softmax_backward", "the average not weighted", [
        ("average = fsum(map(mul, w, d_w))", "average = fsum(d_w) / len(d_w)")]),
    ("softmax_backward", "without the weight", [("[w_j * (d_w_j - average)", "[(d_w_j - average)")]),
    ("attention_forward", "a mask that sees one ahead", [(MASK, "if j <= i + 1 else -math.inf")]),
    ("attention_forward", "a mask reversed", [(MASK, "if j >= i else -math.inf")]),
    ("attention_forward", "a mask that hides the diagonal too", [(MASK, "if j < i else -math.inf")]),
    ("attention_forward", "no 1/√d", [("s / sqrt_d if j", "s if j")]),
    ("attention_forward", "Wk for Wq", [('q = matmul(x, p["Wq"])', 'q = matmul(x, p["Wk"])')]),
    ("attention_backward", "1/√d in the forward pass only", [
        (f"[[e / sqrt_d for e in row] for row in matmul({m}",
         f"[[e for e in row] for row in matmul({m}") for m in ("d_scores, k", "transpose(d_sc")]),
    ("attention_backward", "Wo untransposed", [('d_mixed = matmul(d_out, transpose(p["Wo"]))',
                                                'd_mixed = matmul(d_out, p["Wo"])')]),
    ("attention_backward", "the value path left out of d_x", [
        (',\n              matmul(d_v, transpose(p["Wv"])))', ")")]),
    ("attention_backward", "d_v from the weights untransposed", [
        ("d_v = matmul(transpose(weights), d_mixed)", "d_v = matmul(weights, d_mixed)")]),
    ("forward", "a position looked up by the token", [
        ('p["pos_emb"][:len(ids)]', '[p["pos_emb"][i % len(p["pos_emb"])] for i in ids]')]),
    ("forward", "a skip path dropped", [("x1 = add(x0, a)", "x1 = a")]),
    ("forward", "use_positions=False ignored", [("    if use_positions:\n", "    if True:\n")]),
    ("forward", "LN2 fed x0", [('layernorm_forward(x1, p["ln2_g"]', 'layernorm_forward(x0, p["ln2_g"]')]),
    ("forward", "no relu", [("act = [[max(0.0, z) for z in row] for row in pre]", "act = pre")]),
    ("loss_and_dlogits", "the gradient without 1/T", [
        ("e_j / (total * T)", "e_j / total"), ("d_row[target] -= 1.0 / T", "d_row[target] -= 1.0")]),
    ("loss_and_dlogits", "the loss summed, not averaged", [
        ("return fsum(losses) / T, d_logits", "return fsum(losses), d_logits")]),
    ("loss_and_dlogits", "the one-hot left out", [("d_row[target] -= 1.0 / T", "pass")]),
    ("backward", "the relu's gate left open", [
        ("d_pre = [[d_j if z > 0.0 else 0.0", "d_pre = [[d_j if True else 0.0")]),
    ("backward", "the skip path's gradient around the MLP forgotten", [
        ("d_x1 = add(d_x2, d_x1_mlp)", "d_x1 = d_x1_mlp")]),
    ("backward", "the skip path's gradient around attention forgotten", [
        ("d_x0 = add(d_x1, d_x0_att)", "d_x0 = d_x0_att")]),
    ("backward", "position gradients in the wrong rows", [
        ('grads["pos_emb"][:len(d_x0)] = d_x0', 'grads["pos_emb"][1:len(d_x0) + 1] = d_x0')]),
    ("backward", "a repeated token's gradient overwritten, not summed", [
        ('grads["tok_emb"][token] = column_sums(rows)', 'grads["tok_emb"][token] = rows[-1]')]),
    ("backward", "LN2's backward given LN1's gain", [
        ('layernorm_backward(d_h2, p["ln2_g"]', 'layernorm_backward(d_h2, p["ln1_g"]')]),
    ("backward", "pos_emb given a gradient without positions", [
        ('if cache["use_positions"]:', "if True:")]),
    ("init_params", "drawn column by column", [
        ("[[rng.gauss(0.0, 0.02) for _ in range(m[0])] for _ in range(n)]",
         "[list(c) for c in zip(*[[rng.gauss(0.0, 0.02) for _ in range(n)]\n"
         "                                  for _ in range(m[0])])]")])]
TWELVE = [(case, name) for case in (test_model.Recorded, test_model.Mechanism,
                                    test_model.FailureCases)
          for name in vars(case) if name.startswith("test_")]
LARGE = [(math_tests.LargeScoreTests, name) for name in (
    "test_attention_with_scores_in_the_thousands", "test_the_loss_with_scores_in_the_thousands")]
LENGTHS = [(math_tests.GradientTests, "test_forward_takes_every_length_from_1_to_its_positions")]
# (the mistake, its edits, the lab's own tests that must catch it)
CAUGHT_BY_THE_LAB = [
    ("attention's softmax without the shift", [("        e = [exp(z - top) for z in row]\n        "
                                                "total = fsum(e)\n        weights",
                                                "        e = [exp(z) for z in row]\n        "
                                                "total = fsum(e)\n        weights")], LARGE),
    ("the loss's softmax without the shift", [("        e = [exp(z - top) for z in row]\n        "
                                               "total = fsum(e)\n        # -log",
                                               "        e = [exp(z) for z in row]\n        "
                                               "total = fsum(e)\n        # -log")], LARGE),
    ("forward refusing all its positions", [('if len(ids) > sizes["P"]:',
                                             'if len(ids) >= sizes["P"]:')], LENGTHS)]


class LearnerMistakes(unittest.TestCase):

    @classmethod
    def setUpClass(cls):    # a mistake planted on top of one already in model.py says nothing
        found = diagnosis.first_wrong(model)
        if found:
            raise AssertionError(f"model.py itself fails the diagnosis: {found}")

    def test_the_diagnosis_names_each_mistake_s_function(self):
        for function, what, edits in MISTAKES:
            with self.subTest(function=function, mistake=what):
                found = diagnosis.first_wrong(planted(*edits))
                self.assertTrue(found and found.startswith(function), found)

    def test_the_twelve_s_first_failure_names_the_function(self):
        """One mistake per lesson function, the twelve run in order: the first line of the first
        failure starts with the function, and at most four of the twelve fail."""
        done = set()
        for function, what, edits in MISTAKES:
            if function in done:
                continue
            done.add(function)
            with self.subTest(function=function, mistake=what):
                result = run_with(planted(*edits), TWELVE)
                self.assertTrue(first_line(result).startswith(function), first_line(result))
                self.assertLessEqual(len(result.failures + result.errors), 4)

    def test_each_function_blanked_and_put_back_with_tools_exercise_py(self):
        """In a scratch folder, tools/exercise.py blanks each lesson function in turn: the
        twelve's first failure names it and at most four fail; --restore NAME puts it back;
        --restore asks before it puts the original over a function written since, and then
        model.py is back byte for byte."""
        spec = importlib.util.spec_from_file_location("exercise", LAB / "tools" / "exercise.py")
        exercise = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(exercise)
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            model_py = Path(tmp, "model.py")
            shutil.copy(LAB / "model.py", model_py)
            kept = {"MODEL": str(model_py), "KEPT": f"{tmp}/.exercise/model.py",
                    "BLANKED": f"{tmp}/.exercise/blanked.txt"}
            with mock.patch.multiple(exercise, **kept):
                for name in exercise.FORMULAS:
                    with self.subTest(function=name):
                        self.assertEqual(exercise.blank(name), 0)
                        module = types.ModuleType("model_blanked")
                        source = model_py.read_text(encoding="utf-8")
                        exec(compile(source, "model.py", "exec"), module.__dict__)
                        result = run_with(module, TWELVE)
                        self.assertTrue(first_line(result).startswith(name), first_line(result))
                        self.assertLessEqual(len(result.failures + result.errors), 4)
                        self.assertEqual(exercise.restore(name), 0)
                        self.assertEqual(model_py.read_text(encoding="utf-8"), SOURCE)
                exercise.blank("softmax")
                exercise.blank("forward")
                source = model_py.read_text(encoding="utf-8")
                source = source.replace("raise NotImplementedError('softmax is",
                                        "return scores  # ('softmax is")
                model_py.write_text(source, encoding="utf-8")
                self.assertEqual(exercise.restore(None, ask=lambda question: "n"), 1)
                self.assertEqual(model_py.read_text(encoding="utf-8"), source)
                self.assertEqual(exercise.restore(None, ask=lambda question: "y"), 0)
                self.assertEqual(model_py.read_text(encoding="utf-8"), SOURCE)

    def test_the_lab_s_own_tests_catch_what_the_lesson_does_not_claim(self):
        for what, edits, tests in CAUGHT_BY_THE_LAB:
            with self.subTest(mistake=what):
                self.assertIsNotNone(first_line(run_with(planted(*edits), tests)))

    def test_every_sum_not_rounded_once_is_named_with_its_function_and_math_fsum(self):
        """Each math.fsum of model.py replaced, one at a time, by a sum added left to right
        and, from Python 3.12, by the built-in sum() (compensated): the exact-sum test fails,
        its first line naming the function that holds the sum, and math.fsum. One sum, the
        loss's top + log(total) - target, rounds as fsum does under 3.12's sum() on every input
        we could build, so there sum() is not planted."""
        exact_sums = [(math_tests.ExactSumTests, "test_every_sum_is_rounded_once")]
        calls = fsum_calls()
        self.assertGreaterEqual(len(calls), 12)
        loss_terms = SOURCE.find("fsum((top, log(total), -row[target]))")
        for at in calls:
            function = next(f[0] for f in FUNCTIONS if f[2] <= at < f[3])
            for summing in (sum_left_to_right, sum):
                if summing is sum and (at == loss_terms or sys.version_info < (3, 12)):
                    continue
                with self.subTest(function=function, sum=summing.__name__):
                    module = planted((at, "fsum", "planted_sum"))
                    module.planted_sum = summing     # a name the copy's edited function reads
                    message = first_line(run_with(module, exact_sums))
                    self.assertTrue((message or "").startswith(f"{function}: a sum is not "
                                                               f"rounded once (use math.fsum)"),
                                    message)


def fsum_calls():
    """The offsets of model.py's calls of math.fsum, before its input checks."""
    end = SOURCE.index("################ Input checks")
    tokens = list(tokenize.generate_tokens(io.StringIO(SOURCE).readline))
    offsets = []
    for name, after in zip(tokens, tokens[1:]):
        at = sum(map(len, LINES[:name.start[0] - 1])) + name.start[1]
        if name.string == "fsum" and after.string == "(" and at < end:
            offsets.append(at)
    return offsets


def sum_left_to_right(terms):
    """The sum of terms, each added to the running total in turn (sum() before Python 3.12)."""
    return reduce(add, terms, 0.0)
