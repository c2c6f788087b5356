"""Write a lesson function yourself: blank it in model.py, write it again, put the original back.

    python3 tools/exercise.py                       the functions it can blank, and their state
    python3 tools/exercise.py layernorm_backward    blank one: a stub that says what to write
    python3 tools/exercise.py --keep                keep model.py as it is now (before a break-it)
    python3 tools/exercise.py --restore softmax     put one function's original back
    python3 tools/exercise.py --restore             put model.py back as it was kept

A stub keeps the function up to its input check, then raises with the lesson's formula. model.py
is kept in .exercise/ (git ignores it) until all of it is put back; --restore asks before it
undoes a function written since it was blanked or, while one is blank, an edit elsewhere.
"""
import argparse
import ast
import functools
import json
import os
import shutil
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import bpe          # noqa: E402  (the lab's modules live one folder up)

MODEL = os.path.join(ROOT, "model.py")
KEPT = os.path.join(ROOT, ".exercise", "model.py")
BLANKED = os.path.join(ROOT, ".exercise", "blanked.txt")
FORMULAS = {
    "layernorm_forward": "each row: 1. centre, x - mean; 2. scale, xhat = (x - mean) / std, "
                         "std = √(variance + EPS), the variance over d; 3. y = xhat · g + b; "
                         "the cache keeps xhat and std",
    "layernorm_backward": "d_xhat = dy · g; d_x = (d_xhat - mean(d_xhat) - xhat · mean(d_xhat "
                          "· xhat)) / std, its three terms one math.fsum; d_g = Σ over rows of "
                          "dy · xhat; d_b = Σ of dy",
    "softmax": "each row: exp(z - max) / Σ exp(z - max), so -inf weighs 0",
    "softmax_backward": "each row: d_z_j = w_j · (d_w_j - Σ_k w_k · d_w_k)",
    "attention_forward": "1. q, k, v = x·Wq, x·Wk, x·Wv; 2. scores = q·kᵀ / √d, -inf where "
                         "j > i; 3. weights = softmax(scores); 4. mixed = weights · v; 5. out "
                         "= mixed · Wo; the cache keeps x, q, k, v, scores, weights, mixed",
    "attention_backward": "steps 5 to 1 walked back: d_Wo, d_mixed; d_weights, d_v; "
                          "softmax_backward; d_q, d_k (÷ √d); d_W..., d_x = Σ d_·W_ᵀ",
    "forward": "1. x0 = tok_emb[ids] + pos_emb[0:T]; 2. x1 = x0 + Attention(LN1(x0)); 3. x2 = "
               "x1 + MLP(LN2(x1)); 4. logits = LNF(x2) · W_out + b_out; the cache keeps a copy of "
               "ids, use_positions, x0, h1, x1, h2, pre, act, x2, hf, and the caches that "
               "LN1, attention, LN2 and LNF return as ln1, att, ln2, lnf",
    "loss_and_dlogits": "each row's -log softmax(row)[target] = top + log(total) - z[target], "
                        "one math.fsum of the three, top the row's maximum, total = Σ exp(z - "
                        "top) (exp cannot overflow, log never meets 0); the loss, their mean; "
                        "d_logits = softmax / T - one-hot / T",
    "backward": "forward's steps 4 to 1 walked back; a skip path adds the two gradients; a "
                "token at several positions gets its rows of d_x0 summed, one math.fsum"}


def functions(source):
    """Each top-level function of source -> (its node, its text)."""
    lines = source.splitlines(keepends=True)
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node, "".join(lines[node.lineno - 1:node.end_lineno])
    return found


def stub(node, text):
    """The function's text up to its input check, then a raise that says what to write."""
    lines = text.splitlines(keepends=True)
    end = node.body[0].end_lineno                     # the docstring
    for statement in node.body[1:]:
        end = statement.end_lineno
        calls = [n.func.id for n in ast.walk(statement)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        if any(name.startswith("check") for name in calls):
            break
    message = f"{node.name} is yours to write: {FORMULAS[node.name]}"
    parts = textwrap.wrap(message, 78, break_long_words=False, break_on_hyphens=False)
    literals = [json.dumps(part + " ", ensure_ascii=False) for part in parts[:-1]]
    literals.append(json.dumps(parts[-1], ensure_ascii=False))     # lines that join back to it
    raising = "    raise NotImplementedError(\n        " + "\n        ".join(literals) + ")\n"
    return "".join(lines[:end - node.lineno + 1]) + raising


def replaced(source, name, text):
    """source with the function name's text replaced by text."""
    node, old = functions(source)[name]
    start = sum(map(len, source.splitlines(keepends=True)[:node.lineno - 1]))
    return source[:start] + text + source[start + len(old):]


def read_blanked():
    return bpe.read_text(BLANKED).split() if os.path.exists(BLANKED) else []


def blanks(source):
    """The lesson functions that are stubs in source."""
    found = functions(source)
    return [n for n in FORMULAS if n in found and found[n][1] == stub(*found[n])]


def keep():
    """Keep model.py as it is now, for --restore; never over a changed kept one, nor a stub."""
    source = bpe.read_text(MODEL)
    if os.path.exists(KEPT) and bpe.read_text(KEPT) != source:
        return bpe.report("tools/exercise.py: model.py has changed since it was kept: "
                          "--restore first, so that the kept model.py stays the original")
    stubs = ", ".join(blanks(source))
    if stubs:
        return bpe.report(f"tools/exercise.py: model.py holds a stub ({stubs}) and no "
                          f"original is kept: write it, or take model.py from the lab's "
                          f"archive (or git checkout model.py)")
    os.makedirs(os.path.dirname(KEPT), exist_ok=True)
    bpe.write_texts({KEPT: source, BLANKED: ""})
    print("kept model.py as it is now: python3 tools/exercise.py --restore puts it back")
    return 0


def blank(name):
    """Blank one lesson function, keeping the original model.py first if none is kept."""
    source = bpe.read_text(MODEL)
    node, text = functions(source)[name]    # no parse, or no def: one line from main()
    if not os.path.exists(KEPT) and keep():
        return 1
    if written_since(source, bpe.read_text(KEPT), [name]):
        return bpe.report(f"tools/exercise.py: you have written {name} since it was blanked;"
                          f" to blank it again, first --restore {name} (it asks)")
    blanked = sorted(set(read_blanked()) | {name})
    bpe.write_texts({MODEL: replaced(source, name, stub(node, text)),
                     BLANKED: "\n".join(blanked) + "\n"})
    print(f"{name} is blank: write it, then run python3 -m unittest -v test_model.py")
    return 0


def restore(name, ask=input):
    """Put back one function's original, or the kept model.py; ask before undoing a rewrite."""
    if not os.path.exists(KEPT):
        return bpe.report("no model.py is kept, so there is nothing to put back (git "
                          "checkout model.py gives the lab's own, and drops your edits)")
    kept = bpe.read_text(KEPT)
    source = kept
    if os.path.exists(MODEL):       # a model.py deleted has nothing of yours to ask about
        source = bpe.read_text(MODEL)
    restored, blanked = kept, []
    if name is not None:        # a model.py that does not parse: said by main(), not asked
        restored = replaced(source, name, functions(kept)[name][1])
        blanked = [n for n in read_blanked() if n != name]
    for written in written_since(source, kept, [name] if name else None):
        try:
            answer = ask(f"{written}: put the original back over it? [y/N] ")
        except EOFError:            # no one to answer: the answer is no
            print()
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("model.py is unchanged (--restore NAME puts back one function)")
            return 1
    bpe.write_texts({MODEL: restored, BLANKED: "".join(f"{n}\n" for n in blanked)})
    print(f"put back {name or 'model.py as it was kept'}")
    if restored == kept:        # nothing left to put back: the next blank or --keep keeps anew
        shutil.rmtree(os.path.dirname(KEPT))
    elif not blanked:           # nothing blank, but a def written beside a function, say
        print("model.py still differs from the kept one elsewhere: python3 tools/exercise.py "
              "--restore puts all of it back")
    return 0


def written_since(source, kept, names=None):
    """Those of names (None: all) blanked and written since (neither stub nor original now),
    in words; with None, and something blanked, a change outside them since it was kept too."""
    try:
        functions(source)
    except SyntaxError as error:
        return [f"model.py does not parse (line {error.lineno}), so its functions are unknown"]
    blanked = read_blanked()
    written = []
    rest = source           # the blanked functions as they were kept: then kept, if no more
    for name in [n for n in FORMULAS if n in (names or blanked) and n in blanked]:
        now = functions(source).get(name)
        node, original = functions(kept)[name]
        if now is None or now[1] not in (original, stub(node, original)):
            written.append(f"you have written {name} since it was blanked")
        if now is not None:
            rest = replaced(rest, name, original)
    if names is None and blanked and rest != kept:
        written.append("you have edited model.py elsewhere since it was kept")
    return written


def show():
    """The functions it can blank, each with its state, and how to blank one."""
    source = bpe.read_text(MODEL)
    stubs = blanks(source)
    print("The lesson functions; python3 tools/exercise.py NAME blanks one:")
    for name in FORMULAS:
        state = "blank" if name in stubs else ""
        if not state and name in read_blanked():
            state = "written since it was blanked"
        print(f"  {name:20} {state}".rstrip())
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="functions: " + ", ".join(FORMULAS))
    parser.add_argument("name", nargs="?", help="a lesson function to blank (or to --restore)")
    flags = parser.add_mutually_exclusive_group()
    flags.add_argument("--restore", action="store_true",
                       help="put NAME's original back; with no NAME, the kept model.py")
    flags.add_argument("--keep", action="store_true", help="keep model.py as it is now")
    args = parser.parse_args(argv)
    if args.keep and args.name:
        parser.error("--keep keeps the whole of model.py: give it no function's name")
    if args.name is not None and args.name not in FORMULAS:
        return bpe.report(f"tools/exercise.py: {args.name!r} is not a lesson function; "
                          f"these are: {', '.join(FORMULAS)}")
    action = show
    if args.keep:
        action = keep
    elif args.restore:
        action = functools.partial(restore, args.name)
    elif args.name:
        action = functools.partial(blank, args.name)
    back = "take the lab's model.py from its archive (or git checkout model.py)"
    if os.path.exists(KEPT):
        back = "put the kept one back whole: python3 tools/exercise.py --restore"
    try:
        return bpe.run_reporting_problems(action)
    except SyntaxError as error:        # a rewrite that does not parse yet
        return bpe.report(f"model.py does not parse (line {error.lineno}): fix it, or {back}")
    except KeyError as error:           # a lesson function's def renamed or deleted
        return bpe.report(f"model.py has no def {error.args[0]}: name it so again, or {back}")


if __name__ == "__main__":
    sys.exit(main())
