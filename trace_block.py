"""Run the one-block model on real text and record what it does, in block-trace.json.

The trace builds the series-size model (d 16, hidden 64, 64 positions, the tokenizer's 96
tokens) and records: the first story's shapes and loss, layer norm at work, the position
experiment on two sentences that hold the same tokens in another order, and a full gradient
check of a small copy of the model against finite differences. Every figure is computed here
each time; block-trace.json only remembers them, so that a change that moves one shows up.

The file reads: the trace, the gradient check, the position experiment; then, out of the
lesson's path, the recorded file, timing, pictures, the command line and the input checks.
Run `python3 trace_block.py --help` for what it does; with no flag, it prints the figures.
"""
import argparse
import codecs
import functools
import itertools
import json
import math
import statistics
import sys
import textwrap
import time
from pathlib import Path

import bpe
import model
from bpe import FileProblem, Tokenizer

HERE = Path(__file__).resolve().parent
TRACE_FILE = HERE / "block-trace.json"
TOKENIZER_FILE = HERE / "tokenizer.json"
CORPUS_FILE = HERE / "corpus.txt"

SERIES = {"d": model.SIZES["d"], "hidden": model.SIZES["hidden"],
          "max_len": model.SIZES["max_len"], "seed": 3}     # d 16, hidden 64, 64 positions
TINY = {"d": 4, "hidden": 8, "max_len": 8, "seed": 3}       # the small copy: 1,060 numbers

# The position experiment: the same tokens, with the two names swapped.
ORDER_A = "now mia gives the hat to leo."
ORDER_B = "now leo gives the hat to mia."
GRADIENT_SENTENCE = "mia has a red ball."
STEP = 1e-6                 # the nudge of the central differences


################ The trace

def trace(tok=None, story=None):
    """Every figure of block-trace.json, computed afresh, keys in the file's order: by default
    for the lab's tokenizer and the first story of corpus.txt (with its newline)."""
    tok = load_tokenizer() if tok is None else check_sentences(tok)
    where = f"{CORPUS_FILE.name} line 1: the first story" if story is None else "the story"
    ids = encode_line(tok, 1, story := first_story()) if story is None else tok.encode(story)
    check_story(ids, SERIES["max_len"], where)
    p = build(tok, SERIES)
    x, y = ids[:-1], ids[1:]                                 # each token predicts the next
    logits, cache = model.forward(p, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    row0, d = cache["h1"][0], SERIES["d"]                   # LN1's output at position 0
    report = small_copy_check(len(tok.vocab), tuple(tok.encode(GRADIENT_SENTENCE)))
    return {
        "story": story, "story_tokens": len(ids),
        "series_config": dict(SERIES),                      # copies: the trace is the caller's
        "vocab_size": len(tok.vocab), "parameter_count": model.count_params(p),
        "parameters_by_tensor": {name: list(model.shape(t)) for name, t in p.items()},
        "shapes": {name: list(model.shape(value)) for name, value in (
            ("x0", cache["x0"]), ("attention_weights", cache["att"]["weights"]),
            ("mlp_hidden", cache["act"]), ("logits", logits))},
        "initial_loss": round(loss, 4),
        "uniform_loss": round(math.log(len(tok.vocab)), 4),
        "layernorm_row0": {
            # + 0.0 turns a mean that rounds to -0.0 into 0.0
            "mean": round(math.fsum(row0) / d, 6) + 0.0,
            "variance": round(math.fsum(v * v for v in row0) / d, 4),
        },
        "order_test": {
            "a": ORDER_A, "b": ORDER_B,
            "tokens_a": tok.tokens(ORDER_A), "tokens_b": tok.tokens(ORDER_B),
            "last_logit_gap_without_positions": last_logits_gap(p, tok, False),
            "last_logit_gap_with_positions": round(last_logits_gap(p, tok, True), 6),
            "gaps_by_position_without_positions": position_gaps(p, tok, False),
        },
        "gradient_check": {
            "config": dict(TINY), "parameters_checked": report["parameters_checked"],
            "max_error_rounded": round(report["max_abs_error"], 7),
        },
    }


def load_tokenizer():
    """The lab's trained tokenizer, tokenizer.json beside this file."""
    try:
        tok = Tokenizer.load(TOKENIZER_FILE)
    except (TypeError, ValueError) as error:        # the file is there, but not a tokenizer
        raise FileProblem(f"{error}. Run: python3 bpe.py --write") from None
    return check_sentences(tok)


def first_story():
    """The first line of corpus.txt, with its newline."""
    text = bpe.read_corpus(CORPUS_FILE)
    return text[:text.index("\n") + 1]


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config such as SERIES or TINY."""
    check_config(tok, cfg)
    return model.init_params(len(tok.vocab), cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])


################ The gradient check

def numeric_gradients(p, x, y, step=STEP, names=None):
    """Central differences of the loss for every entry of p (or of the tensors named): each
    entry nudged by +step and -step, the loss recomputed, the slope between the two. Returns
    (numeric, kinks): numeric has p's names and shapes; kinks lists the entries, (name, row,
    column) or (name, index), whose nudge switched a relu on or off, where the quotient is a
    slope across the kink, not a derivative. A copy of p is nudged: p itself never changes."""
    check_nudging(p, step, names)
    p = {name: [list(row) for row in t] if isinstance(t[0], (list, tuple)) else list(t)
         for name, t in p.items()}               # a copy, all lists (tuples too): nudged in place
    numeric, kinks = {}, []
    for name, tensor in ((n, t) for n, t in p.items() if names is None or n in names):
        is_matrix = isinstance(tensor[0], list)
        slopes = []
        for r, row in enumerate(tensor if is_matrix else [tensor]):
            slope_row = []
            for c, kept in enumerate(row):
                row[c] = kept + step
                loss_up, relu_up = loss_and_relu_pattern(p, x, y)
                row[c] = kept - step
                loss_down, relu_down = loss_and_relu_pattern(p, x, y)
                row[c] = kept
                slope_row.append((loss_up - loss_down) / (2 * step))
                if relu_up != relu_down:
                    kinks.append((name, r, c) if is_matrix else (name, c))
            slopes.append(slope_row)
        numeric[name] = slopes if is_matrix else slopes[0]
    return numeric, kinks


def loss_and_relu_pattern(p, x, y):
    """The loss, and which hidden units the relu let through, at every position."""
    logits, cache = model.forward(p, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    return loss, [[a > 0.0 for a in row] for row in cache["act"]]


def backward_gradients(p, x, y):
    """backward()'s gradients of the loss of inputs x and next tokens y."""
    logits, cache = model.forward(p, x)
    _, d_logits = model.loss_and_dlogits(logits, y)
    return model.backward(p, cache, d_logits)


def compare_gradients(grads, numeric, kinks=()):
    """How far backward()'s gradients are from the numeric ones, for every tensor numeric holds
    (the entries named in kinks left out): a dict of parameters_checked, max_abs_error,
    max_rel_error, errors_by_tensor (each tensor's largest error), kinks and worst (the worst
    entry, with both values). The relative error is cs231n's |a - n| / max(|a|, |n|), over the
    entries of 1e-4 or more: for smaller ones the quotient's rounding error (1e-9) swamps it."""
    check_gradients_fit(grads, numeric)
    report = {"parameters_checked": 0, "max_abs_error": 0.0, "max_rel_error": 0.0,
              "errors_by_tensor": {}, "kinks": list(kinks), "worst": None}
    for name in numeric:
        errors = [0.0]
        width = (*model.shape(numeric[name]), 0)[1]         # a matrix's row length, or 0
        for n, (analytic, slope) in enumerate(zip(flatten(grads[name]), flatten(numeric[name]))):
            where = (name, *divmod(n, width)) if width else (name, n)
            if where in report["kinks"]:
                continue
            report["parameters_checked"] += 1
            error = abs(slope - analytic)
            errors.append(error if error == error else math.inf)    # nan counts as the worst
            if errors[-1] > report["max_abs_error"] or report["worst"] is None:
                report["max_abs_error"] = errors[-1]
                report["worst"] = (f"{name}{''.join(f'[{i}]' for i in where[1:])}: backward "
                                   f"{analytic:.6g}, finite difference {slope:.6g}")
            if max(abs(slope), abs(analytic)) >= 1e-4:
                report["max_rel_error"] = max(report["max_rel_error"],
                                              errors[-1] / max(abs(slope), abs(analytic)))
        report["errors_by_tensor"][name] = max(errors)
    return report


def gradient_error(p, x, y):
    """The largest |central difference - backward()| over every parameter, relu kinks too."""
    numeric, _ = numeric_gradients(p, x, y)
    return compare_gradients(backward_gradients(p, x, y), numeric)["max_abs_error"]


@functools.lru_cache(maxsize=None)
def small_copy_check(vocab, ids):
    """The gradient check of the small copy (TINY, vocab tokens) on a tuple of token ids, kinks
    too: made once per run, as the trace and the lesson's test 2 share it (read-only)."""
    p = model.init_params(vocab, TINY["d"], TINY["hidden"], TINY["max_len"], TINY["seed"])
    x, y = list(ids[:-1]), list(ids[1:])
    return compare_gradients(backward_gradients(p, x, y), numeric_gradients(p, x, y)[0])


def flatten(tensor):
    """The numbers of a vector, or of a matrix row by row: [[1.0, 2.0], [3.0, 4.0]] -> 1.0..4.0."""
    return [v for row in tensor for v in row] if len(model.shape(tensor)) == 2 else list(tensor)


################ The position experiment

def exact_gaps(p, tok, use_positions):
    """Per position, the largest absolute score difference between the two order sentences,
    not rounded, so that 0.0 means bit-identical scores."""
    check_sentences(tok)
    la = model.forward(p, tok.encode(ORDER_A), use_positions)[0]
    lb = model.forward(p, tok.encode(ORDER_B), use_positions)[0]
    return [max(abs(u - v) for u, v in zip(ra, rb)) for ra, rb in zip(la, lb)]


def position_gaps(p, tok, use_positions):
    """Per position, exact_gaps (the order sentences' largest score difference) to 4 places."""
    return [round(gap, 4) for gap in exact_gaps(p, tok, use_positions)]


def last_logits_gap(p, tok, use_positions):
    """The largest absolute score difference at the last position, not rounded."""
    return exact_gaps(p, tok, use_positions)[-1]


################ The recorded file: summary, write, check

AFTER_A_CHANGE = ("If you changed the lab to keep the change, record the new figures: python3 "
                  "trace_block.py --write (new stories: tools/make_corpus.py keeps the figures)\n"
                  "If not (a break-it exercise, a slip), undo the change that moved them (put back "
                  "the file you edited, or the lab's download's); rewriting the file hides it.")


def to_json(figures):
    """The trace as the text of block-trace.json."""
    return json.dumps(figures, indent=2, ensure_ascii=False) + "\n"


def summary(figures):
    """The figures the lesson talks about, as lines to read.

    >>> summary(json.loads(TRACE_FILE.read_text(encoding="utf-8")))[4]
    'initial loss          4.5805, against ln 96 = 4.5643 for a model that knows nothing'
    """
    cfg, grads, order = figures["series_config"], figures["gradient_check"], figures["order_test"]
    shapes = ", ".join(f"{name} {'×'.join(map(str, s))}" for name, s in figures["shapes"].items())
    return [f"the first story of corpus.txt, {figures['story_tokens']} tokens:",
            f"  {figures['story'].strip()}",
            f"parameters            {figures['parameter_count']:,} (d {cfg['d']}, hidden "
            f"{cfg['hidden']}, {cfg['max_len']} positions, seed {cfg['seed']})",
            f"shapes (T = {figures['shapes']['x0'][0]})       {shapes}",
            f"initial loss          {figures['initial_loss']}, against ln {figures['vocab_size']}"
            f" = {figures['uniform_loss']} for a model that knows nothing",
            f"layer norm, row 0     mean {figures['layernorm_row0']['mean']}, variance "
            f"{figures['layernorm_row0']['variance']} (ε pulls it below 1)",
            f"gradient check        {grads['parameters_checked']:,} parameters of the small copy,"
            f" largest error {grads['max_error_rounded']:.7f} (rounded to 7 places)",
            f"position experiment   {order['a']!r} against {order['b']!r}",
            f"  largest score gap at the last position: {order['last_logit_gap_without_positions']}"
            f" without position embeddings, {order['last_logit_gap_with_positions']} with them",
            "  and at each position, without them: "
            + " ".join(map(str, order["gaps_by_position_without_positions"]))]


def check(path=None, figures=None):
    """Compare the recorded trace (block-trace.json, or path) with a fresh one (or figures),
    byte for byte: (up to date?, message)."""
    path = Path(TRACE_FILE if path is None else path)
    if not path.exists():
        return False, f"{path.name} is missing. Run: python3 trace_block.py --write"
    fresh = to_json(trace() if figures is None else figures)
    if path.stat().st_size > 1_000_000:
        lines = ["it holds more than 1,000,000 bytes: it is not a trace"]
    elif path.read_bytes() == fresh.encode("utf-8"):
        return True, f"{path.name} is up to date."
    else:
        try:
            lines = differences(bpe.read_json(path), json.loads(fresh)) or [
                "its line ends are \\r\\n (Windows); the trace is written with \\n"
                if b"\r" in path.read_bytes() else "the figures agree, but the layout differs"]
        except FileProblem as problem:
            lines = [str(problem).replace(str(path), "the file")]
    return False, "\n".join([f"{path.name} is out of date:"] + ["  " + s for s in lines]
                            + [AFTER_A_CHANGE])


def differences(old, new, where=""):
    """The figures that differ between two traces, as lines 'key: old -> new'. A figure differs
    if its JSON differs: 0.0 and -0.0 are two figures, and so are 1 and 1.0.

    >>> differences({"a": 1.0, "b": {"c": 0.0}}, {"a": 1.0, "b": {"c": -0.0}})
    ['b.c: 0.0 -> -0.0']
    """
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in list(old) + [k for k in new if k not in old]:
            path = f"{where}.{key}" if where else key
            if key not in new or key not in old:
                lines.append(f"{path}: " + ("no longer in the trace" if key not in new else
                                            f"missing from the file (now {json.dumps(new[key])})"))
            else:
                lines += differences(old[key], new[key], path)
        return lines or ([f"{where or 'the trace'}: keys in another order"]
                         if list(old) != list(new) else [])
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for n, (u, v) in enumerate(zip(old, new))
                for line in differences(u, v, f"{where}[{n}]")]
    as_json = json.dumps(old, ensure_ascii=False), json.dumps(new, ensure_ascii=False)
    return [f"{where}: {as_json[0]} -> {as_json[1]}"] if as_json[0] != as_json[1] else []


################ Timing

def time_steps(lengths=(8, 16, 32, 64), repeats=9):
    """The median milliseconds of repeats training steps (forward, loss, backward) at each
    length T, on the start of the corpus."""
    check_timing(lengths, repeats)
    tok = load_tokenizer()
    p = build(tok, SERIES)
    ids = corpus_ids(tok, max(lengths) + 1)
    rows = []
    for T in lengths:
        times = []
        for n in range(repeats + 1):                # the first step, not timed, warms up
            start = time.perf_counter()
            backward_gradients(p, ids[:T], ids[1:T + 1])
            times += [time.perf_counter() - start] * (n > 0)
        rows.append((T, statistics.median(times) * 1e3))
    return rows


def corpus_ids(tok, count):
    """The first count token IDs of corpus.txt, read story by story (from the start again if
    the corpus is shorter)."""
    lines, ids = itertools.cycle(enumerate(bpe.read_corpus(CORPUS_FILE).splitlines(True), 1)), []
    while len(ids) < count:                         # story by story, until there are enough
        ids += encode_line(tok, *next(lines))
    return ids[:count]


def encode_line(tok, number, line):
    """The token IDs of one line of corpus.txt; a character the tokenizer lacks is refused,
    naming the line."""
    try:
        return tok.encode(line)
    except ValueError as error:
        raise FileProblem(f"{CORPUS_FILE.name} line {number}: {error}; retrain the tokenizer: "
                          f"python3 bpe.py --write") from None


################ Pictures (python3 trace_block.py --show)

WIDTH = 80                  # every line of the pictures fits in this many columns
BAR_CELLS = 15              # the longest bar is this many characters
EIGHTHS = "▏▎▍▌▋▊▉"         # 1/8 .. 7/8 of a character; a whole one is █
# Shades for attention weights, each step about half the last. No cut sits on a uniform share
# 1/n (0.6, 0.3, 0.15, 0.075 fall between 1/1 and 1/2, 1/3 and 1/4, 1/6 and 1/7, 1/13 and 1/14),
# so a nearly uniform row gets one shade all along.
SHADES = ((0.6, "█"), (0.3, "▓"), (0.15, "▒"), (0.075, "░"), (0.0, " "))
MASKED = "·"                # drawn where a weight is exactly 0.0: what the causal mask gives j > i
# Stand-ins for an output that lacks these characters (PYTHONIOENCODING=ascii): ▌, 4 eighths, is 4
PLAIN = str.maketrans({**dict(zip("█▓▒░·│×▏▎▍▌▋▊▉", "#%+-.|x1234567")), "≥": ">=", "ε": "eps"})
codecs.register_error("trace_block", lambda error: (error.object[error.start:error.end].translate(
    PLAIN).encode("ascii", "backslashreplace").decode(), error.end))    # any other: \x.. or \u..


def bar(value, top, cells=BAR_CELLS):
    """A bar of value / top * cells characters, in eighths: nothing for 0.0, at least ▏ above.

    >>> bar(1.0, 1.0, 4), bar(0.5, 1.0, 4), bar(0.001, 1.0, 4), bar(0.0, 1.0, 4)
    ('████', '██  ', '▏   ', '    ')
    """
    eighths = round(value / top * cells * 8) if top > 0 else 0   # a half eighth rounds to even
    if value > 0 and eighths == 0:
        eighths = 1                 # subtle: a tiny gap still shows, so it never looks like 0.0
    whole, part = divmod(min(eighths, cells * 8), 8)
    return ("█" * whole + (EIGHTHS[part - 1] if part else "")).ljust(cells)


def figure(value):
    """A number to 4 significant places, with 0 written as 0.0.

    >>> figure(0.0), figure(0.19961656), figure(0.00309596)
    ('0.0', '0.1996', '0.003096')
    """
    return "0.0" if value == 0 else f"{value:.4g}"


def cell(weight):
    """The two characters of an attention weight's cell: MASKED for exactly 0.0, else a shade.

    >>> cell(1.0), cell(0.5), cell(0.25), cell(0.111), cell(0.01), cell(0.0)
    ('██', '▓▓', '▒▒', '░░', '  ', ' ·')
    """
    return " " + MASKED if weight == 0.0 else 2 * next(b for cut, b in SHADES if weight >= cut)


def caption(text):
    """The sentence under a picture, wrapped to the page width."""
    return textwrap.fill(text, WIDTH, initial_indent="Notice: ", subsequent_indent="  ")


def show_gaps(p, tok):
    """Picture 1: a bar per position of the score gap, without and with position embeddings."""
    tokens_a, tokens_b = tok.tokens(ORDER_A), tok.tokens(ORDER_B)
    without, with_ = exact_gaps(p, tok, False), exact_gaps(p, tok, True)
    top = max(without + with_)                          # both columns share one scale
    w = max(len(bpe.shown(t)) for t in tokens_a + tokens_b)
    print("The position experiment: the largest score gap between the two sentences")
    print(f"  a = {bpe.shown(ORDER_A)}   b = {bpe.shown(ORDER_B)}")
    print(f"  full bar = the largest gap, {figure(top)}; ▏ = 1/8 character; exactly 0.0 = no bar")
    print(f"{'pos  token a / token b':{8 + 2 * w}}  {'without positions':{BAR_CELLS + 11}}"
          f"with positions")
    for t, (a, b, g0, g1) in enumerate(zip(tokens_a, tokens_b, without, with_)):
        print(f"{t:>3}  {bpe.shown(a):<{w}} / {bpe.shown(b):<{w}}"
              f"  │{bar(g0, top)} {figure(g0):<9}│{bar(g1, top)} {figure(g1)}")
    print(caption(gaps_caption(without, with_)))


def gaps_caption(without, with_):
    """What the gap picture shows, read off its numbers.

    >>> gaps_caption([0.0, 0.3, 0.1], [0.0, 0.2, 0.01])[:57]
    "without positions the last position's gap is 0.1, not 0.0"
    """
    same = ", ".join(str(t) for t, gap in enumerate(without[:-1]) if gap == 0.0)
    return ((f"without positions the last position's gap is {figure(without[-1])}, not 0.0: "
             f"something sees the order" if without[-1] else "without positions the last "
             "position's gap is exactly 0.0: both sentences hold the same tokens and every sum "
             "is correctly rounded (math.fsum), so their order is invisible there")
            + (f"; position(s) {same}: 0.0 too, the same tokens so far" * bool(same))
            + (f"; with positions the last one differs too, by {figure(with_[-1])}." if with_[-1]
               else "; with positions the last gap is still 0.0."))


def show_attention(p, tok):
    """Picture 2: the attention weights of ORDER_A as a shaded T×T grid, tokens on the axes,
    every cell drawn from the weight the model computed."""
    tokens = tok.tokens(ORDER_A)
    weights = model.forward(p, tok.encode(ORDER_A))[1]["att"]["weights"]     # (T, T)
    w = max(len(bpe.shown(t)) for t in tokens)
    print(f"Attention weights of a = {bpe.shown(ORDER_A)}, at initialization")
    print("  row i is the position that looks, column j the one it looks at (row j's token)")
    scale = ", ".join(f"{block} ≥ {cut}" for cut, block in SHADES[:-1])
    print(f"  shades: {scale}, blank below; {MASKED} = exactly 0")
    print(f"{'':{5 + w}} " + "".join(f"{j:>2}" for j in range(len(tokens)))
          + "    sum  1/(i+1)     min     max")
    for i, (token, row) in enumerate(zip(tokens, weights)):
        seen = row[:i + 1]
        print(f"{i:>3}  {bpe.shown(token):<{w}}│{''.join(map(cell, row))}│ "
              f"{math.fsum(row):.4f}  {1 / (i + 1):.4f}  {min(seen):.4f}  {max(seen):.4f}")
    print(caption(attention_caption(weights)))


def attention_caption(weights):
    """What the attention grid shows, read off its weights.

    >>> attention_caption([[1.0, 0.0], [0.0, 1.0]])[-63:]
    'some weights a row can see are exactly 0 (compare min and max).'
    """
    ahead = [(i, j) for i, row in enumerate(weights) for j, x in enumerate(row) if j > i and x]
    spread = max(max(row[:i + 1]) / min(row[:i + 1]) if min(row[:i + 1]) > 0 else math.inf
                 for i, row in enumerate(weights))
    return ((f"{len(ahead)} cells above the diagonal carry weight: the causal mask leaks, and "
             f"a position sees tokens that come after it" if ahead else f"every cell above the "
             f"diagonal is {MASKED}, a weight of exactly 0: no position looks at a later one")
            + ("; some weights a row can see are exactly 0 (compare min and max)." if spread ==
               math.inf else "; each row's weights are nearly uniform, about 1/(i+1) each "
               "(compare min and max): the weights start small and random, and training has "
               "not yet taught the model where to look." if spread < 1.5 else
               f"; within a row the weights differ by up to {spread:.1f} times."))


def show():
    """Print the pictures: the position experiment, then the attention weights of one sentence."""
    tok = load_tokenizer()
    p = build(tok, SERIES)
    show_gaps(p, tok)
    print()
    show_attention(p, tok)


################ Command line

FLAGS = (("--json", "print the whole trace, as block-trace.json holds it"),
         ("--check", "exit 1 if block-trace.json differs from a fresh trace, naming each "
                     "figure that moved (old -> new)"),
         ("--write", "rewrite block-trace.json from a fresh trace, after a deliberate change"),
         ("--show", "draw the position experiment and the attention weights"),
         ("--time", "time one training step at T = 8, 16, 32 and 64 (the median of 9)"))


def main(argv=None):
    """Run the command line; return the exit code. A problem with one of the lab's files, or
    with writing the output, is said in one line (exit 1); a traceback means a bug in the code."""
    parser = argparse.ArgumentParser(
        description="Run the one-block transformer on real text. With no flag: the figures\n"
                    "the lesson talks about, and whether block-trace.json still holds them.",
        epilog="examples:\n" + "\n".join(f"  python3 trace_block.py {flag}".rstrip() for flag, _ in
                                          (("", ""),) + FLAGS),
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    action = parser.add_mutually_exclusive_group()
    for flag, text in FLAGS:
        action.add_argument(flag, action="store_true", help=text)
    return bpe.run_reporting_problems(lambda: run(parser.parse_args(argv)), errors="trace_block")


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    if args.write:
        bpe.write_texts({TRACE_FILE: to_json(trace())})
        print(f"wrote {TRACE_FILE.name}")
    elif args.check:
        ok, message = check()
        print(message, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    elif args.time:
        corpus_ids(load_tokenizer(), 65)        # a problem with the files shows before the table
        print(f"python {sys.version.split()[0]}: one training step (forward, loss, backward), "
              f"the median of 9\n{'T':>4} {'ms/step':>9} {'tokens/s':>9}")
        print("\n".join(f"{T:>4} {ms:9.1f} {T / ms * 1e3:9.0f}" for T, ms in time_steps()))
    elif args.show:
        show()
    elif args.json:
        print(to_json(trace()), end="")
    else:
        figures = trace()
        print("\n".join(summary(figures)))
        ok, message = check(figures=figures)
        print("\n" + (message if ok or not TRACE_FILE.exists() else f"{TRACE_FILE.name} holds "
                      f"other figures: run python3 trace_block.py --check to see which."))
    return 0


################ Input checks (you can skip this section)

def check_sentences(tok):
    """Return tok, refusing a tokenizer.json that cannot encode the trace's sentences, or splits
    the two order sentences into two lengths, or the gradient check's into too many tokens."""
    check_config(tok, SERIES)
    lengths, most = [], TINY["max_len"] + 1      # the small copy reads its positions, plus one
    for sentence in (ORDER_A, ORDER_B, GRADIENT_SENTENCE):
        try:
            lengths.append(len(tok.encode(sentence)))
        except ValueError as error:
            raise FileProblem(f"{TOKENIZER_FILE.name} cannot encode {sentence!r}: {error}. Run: "
                              f"python3 bpe.py --write (corpus.txt must use its letters)") from None
    if lengths[0] != lengths[1] or lengths[2] > most:
        raise FileProblem(f"{TOKENIZER_FILE.name} gives the order sentences {lengths[:2]} tokens "
                          f"(equal needed), {GRADIENT_SENTENCE!r} {lengths[2]} ({most} at most): "
                          f"corpus.txt is not tools/make_corpus.py's (its --check), or encode errs")
    return tok


def check_config(tok, cfg):
    """Refuse anything but a tokenizer, and a config without exactly SERIES's keys."""
    if not hasattr(tok, "vocab") or not hasattr(tok, "encode"):
        raise TypeError(f"expected a tokenizer (load_tokenizer()), not {type(tok).__name__}")
    if not isinstance(cfg, dict) or set(cfg) != set(SERIES):
        raise ValueError(f"config must have exactly the keys {sorted(SERIES)}, not {cfg!r:.60}")


def check_story(ids, max_len, where):
    if not 2 <= len(ids) <= max_len + 1:        # the model reads all the story but its last
        raise FileProblem(f"{where} is {len(ids)} token{'s' * (len(ids) != 1)}; the trace reads "
                          f"all but the last, so it needs from 2 to {max_len + 1}")


def check_nudging(p, step, names):
    """Refuse a step that is not a number in [1e-12, 1], and names that are not p's."""
    if type(step) not in (int, float) or not 1e-12 <= step <= 1:   # 1e-17 gave gradients of 0
        raise ValueError(f"step must be a number from 1e-12 to 1, such as 1e-6, not {step!r}")
    model.check_params(p)
    if names is not None and not (isinstance(names, (list, tuple))
                                  and all(isinstance(name, str) and name in p for name in names)):
        raise ValueError(f"names must be a list of parameter names, such as ['W1', 'b1'], "
                         f"not {names!r}")


def check_gradients_fit(grads, numeric):
    """Refuse two dicts of gradients unless grads holds numeric's names, in its shapes."""
    if not isinstance(grads, dict) or not isinstance(numeric, dict):
        raise TypeError(f"the gradients must be dicts, as backward() returns, not {grads!r:.40}")
    for name, t in reversed(numeric.items()):   # b_out first: about the order backward makes them
        found = model.dims(grads.get(name), "backward()", f"its gradient of {name}", numbers=True)
        if found != model.shape(t):
            raise ValueError(f"backward()'s gradient of {name} is {found}: it must have the "
                             f"shape of {name}, {model.shape(t)}")


def check_timing(lengths, repeats):
    if not isinstance(lengths, (list, tuple)) or not lengths or not all(
            type(T) is int and 1 <= T <= SERIES["max_len"] for T in lengths):
        raise ValueError(f"lengths must be ints from 1 to {SERIES['max_len']}, not {lengths!r}")
    if type(repeats) is not int or not 1 <= repeats <= 1000:
        raise ValueError(f"repeats must be an int from 1 to 1000, not {repeats!r:.30}")


if __name__ == "__main__":
    sys.exit(main())
