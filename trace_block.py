"""Run the one-block model on real text and record what it does, in block-trace.json.

The trace builds the series-size model (d 16, hidden 64, 64 positions, the tokenizer's 96
tokens) and records: the first story's shapes and loss, layer norm at work, the position
experiment on two sentences that hold the same tokens in another order, and a full gradient
check of a small copy of the model against finite differences. Every figure is computed here
each time; block-trace.json only remembers them, so that a change that moves one shows up.

Run:
    python3 trace_block.py            print the trace
    python3 trace_block.py --write    rewrite block-trace.json from the code
    python3 trace_block.py --check    exit 1 if block-trace.json is out of date, naming what moved
    python3 trace_block.py --show     pictures: the position experiment and the attention weights
    python3 trace_block.py --time     milliseconds per training step and tokens per second
"""
import argparse
import json
import math
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path

import model
from bpe import Tokenizer

HERE = Path(__file__).resolve().parent
TRACE_FILE = HERE / "block-trace.json"
WRITE_COMMAND = "python3 trace_block.py --write"

SERIES = {"d": 16, "hidden": 64, "max_len": 64, "seed": 3}
TINY = {"d": 4, "hidden": 8, "max_len": 8, "seed": 3}

# The position experiment: the same tokens, with the two names swapped.
ORDER_A = "now mia gives the hat to leo."
ORDER_B = "now leo gives the hat to mia."
GRADIENT_SENTENCE = "mia has a red ball."
STEP = 1e-6                 # the nudge of the central differences


def load_tokenizer():
    """The lab's trained tokenizer, tokenizer.json beside this file."""
    return Tokenizer.load(HERE / "tokenizer.json")


def first_story():
    """The first line of corpus.txt, with its newline."""
    with open(HERE / "corpus.txt", encoding="utf-8") as f:
        return f.readline()


def check_tokenizer(tok):
    """Refuse anything but a tokenizer, such as load_tokenizer() returns."""
    if not hasattr(tok, "vocab") or not hasattr(tok, "encode"):
        raise TypeError(f"expected a tokenizer (trace_block.load_tokenizer()), "
                        f"not {type(tok).__name__}")


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config such as SERIES or TINY."""
    check_tokenizer(tok)
    if not isinstance(cfg, dict) or set(cfg) != set(SERIES):
        have = sorted(cfg) if isinstance(cfg, dict) else type(cfg).__name__
        raise ValueError(f"config must have exactly the keys {sorted(SERIES)}, not {have}")
    return model.init_params(len(tok.vocab), cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])


################ The gradient check

def numeric_gradients(p, x, y, step=STEP):
    """Central differences of the loss for every entry of p, one entry at a time.

    Each entry is nudged by +step and -step and the loss recomputed: the slope between the
    two is the numerical gradient. Returns (numeric, kinks): numeric has p's names and shapes;
    kinks lists the entries, (name, row, column) or (name, index), whose nudge switched a relu
    on or off. The difference quotient there is a slope across the kink, not a derivative.
    """
    numeric, kinks = {}, []
    for name, tensor in p.items():
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


def compare_gradients(grads, numeric, kinks=()):
    """How far backward()'s gradients are from the numeric ones: a dict of
    parameters_checked (the entries compared), max_abs_error, max_rel_error and kinks.

    The relative error is cs231n's |a - n| / max(|a|, |n|), taken over the entries at least
    1e-4 in size: the difference quotient carries a rounding error near 1e-9, which would
    swamp the ratio for smaller ones. The entries named in kinks are listed, not compared.
    """
    worst_abs = worst_rel = 0.0
    checked = 0
    set_aside = set(kinks)
    for name in numeric:
        is_matrix = isinstance(numeric[name][0], list)
        width = len(numeric[name][0]) if is_matrix else None
        for n, (analytic, slope) in enumerate(zip(flatten(grads[name]), flatten(numeric[name]))):
            where = (name, *divmod(n, width)) if is_matrix else (name, n)
            if where in set_aside:
                continue
            checked += 1
            error = abs(slope - analytic)
            worst_abs = max(worst_abs, error)
            size = max(abs(slope), abs(analytic))
            if size >= 1e-4:
                worst_rel = max(worst_rel, error / size)
    return {"parameters_checked": checked, "max_abs_error": worst_abs,
            "max_rel_error": worst_rel, "kinks": list(kinks)}


def flatten(tensor):
    """The numbers of a vector or a matrix, row by row.

    >>> flatten([[1.0, 2.0], [3.0, 4.0]]), flatten([5.0, 6.0])
    ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0])
    """
    return [v for row in tensor for v in row] if isinstance(tensor[0], list) else list(tensor)


def backward_gradients(p, x, y):
    """backward()'s gradients of the loss of inputs x and next tokens y."""
    logits, cache = model.forward(p, x)
    _, d_logits = model.loss_and_dlogits(logits, y)
    return model.backward(p, cache, d_logits)


def gradient_check(p, x, y, step=STEP):
    """Compare backward() with central differences for every parameter of p, setting aside
    the entries at a relu kink (see numeric_gradients and compare_gradients): the report as
    compare_gradients gives it."""
    return compare_gradients(backward_gradients(p, x, y), *numeric_gradients(p, x, y, step))


def gradient_error(p, x, y):
    """The largest |central difference - backward()| over every parameter, step 1e-6.

    Every entry counts, a relu kink's too (gradient_check sets those aside); the trace's
    sentence crosses no kink, so there the two agree.
    """
    numeric, _ = numeric_gradients(p, x, y)
    return compare_gradients(backward_gradients(p, x, y), numeric)["max_abs_error"]


################ The position experiment

def order_logits(p, tok, use_positions):
    """The scores of the two order sentences, each (T, V)."""
    check_tokenizer(tok)
    a, b = tok.encode(ORDER_A), tok.encode(ORDER_B)
    if len(a) != len(b):
        raise ValueError(f"the order sentences must have one length in tokens, "
                         f"not {len(a)} and {len(b)}")
    return model.forward(p, a, use_positions)[0], model.forward(p, b, use_positions)[0]


def exact_gaps(p, tok, use_positions):
    """Per position, the largest absolute score difference between the two order sentences,
    not rounded, so that 0.0 means bit-identical scores."""
    la, lb = order_logits(p, tok, use_positions)
    return [max(abs(u - v) for u, v in zip(ra, rb)) for ra, rb in zip(la, lb)]


def position_gaps(p, tok, use_positions):
    """Per position, the largest absolute score difference between the two order sentences,
    rounded to 4 places."""
    return [round(gap, 4) for gap in exact_gaps(p, tok, use_positions)]


def last_logits_gap(p, tok, use_positions):
    """The largest absolute score difference at the last position, not rounded."""
    return exact_gaps(p, tok, use_positions)[-1]


################ The trace

def trace():
    """Every figure of block-trace.json, computed afresh, keys in the file's order."""
    tok = load_tokenizer()
    p = build(tok, SERIES)
    story = first_story()
    ids = tok.encode(story)
    x, y = ids[:-1], ids[1:]                                 # each token predicts the next
    logits, cache = model.forward(p, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    row0 = cache["h1"][0]                                   # LN1's output at position 0
    d = len(row0)
    tiny = build(tok, TINY)
    ball = tok.encode(GRADIENT_SENTENCE)
    numeric, _ = numeric_gradients(tiny, ball[:-1], ball[1:])
    # every entry, relu kinks too: the report's max_abs_error is gradient_error(...)
    report = compare_gradients(backward_gradients(tiny, ball[:-1], ball[1:]), numeric)
    return {
        "story": story,
        "story_tokens": len(ids),
        "series_config": dict(SERIES),                      # copies: the trace is the caller's
        "vocab_size": len(tok.vocab),
        "parameter_count": model.count_params(p),
        "parameters_by_tensor": {name: list(model.shape(t)) for name, t in p.items()},
        "shapes": {
            "x0": list(model.shape(cache["x0"])),
            "attention_weights": list(model.shape(cache["att"]["weights"])),
            "mlp_hidden": list(model.shape(cache["act"])),
            "logits": list(model.shape(logits)),
        },
        "initial_loss": round(loss, 4),
        "uniform_loss": round(math.log(len(tok.vocab)), 4),
        "layernorm_row0": {
            # + 0.0 turns a mean that rounds to -0.0 into 0.0
            "mean": round(math.fsum(row0) / d, 6) + 0.0,
            "variance": round(math.fsum(v * v for v in row0) / d, 4),
        },
        "order_test": {
            "a": ORDER_A,
            "b": ORDER_B,
            "tokens_a": tok.tokens(ORDER_A),
            "tokens_b": tok.tokens(ORDER_B),
            "last_logit_gap_without_positions": last_logits_gap(p, tok, False),
            "last_logit_gap_with_positions": round(last_logits_gap(p, tok, True), 6),
            "gaps_by_position_without_positions": position_gaps(p, tok, False),
        },
        "gradient_check": {
            "config": dict(TINY),
            "parameters_checked": report["parameters_checked"],
            "max_error_rounded": round(report["max_abs_error"], 7),
        },
    }


def to_json(figures):
    """The trace as the text of block-trace.json."""
    return json.dumps(figures, indent=2, ensure_ascii=False) + "\n"


def differences(old, new, where=""):
    """The figures that differ between two traces, as lines 'key: old -> new'."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in list(old) + [k for k in new if k not in old]:
            path = f"{where}.{key}" if where else key
            if key not in new:
                lines.append(f"{path}: no longer in the trace")
            elif key not in old:
                lines.append(f"{path}: missing from the file (now {json.dumps(new[key])})")
            else:
                lines += differences(old[key], new[key], path)
        if not lines and list(old) != list(new):
            lines.append(f"{where or 'the trace'}: keys in another order")
        return lines
    if old != new or type(old) is not type(new):
        return [f"{where}: {json.dumps(old, ensure_ascii=False)} -> "
                f"{json.dumps(new, ensure_ascii=False)}"]
    return []


def check(path=TRACE_FILE):
    """Compare the recorded trace with a fresh one: (up to date?, message)."""
    path = Path(path)   # a str works too
    try:
        recorded = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False, f"{path.name} is missing. Run: {WRITE_COMMAND}"
    fresh = to_json(trace())
    if recorded == fresh:
        return True, f"{path.name} is up to date."
    try:
        lines = differences(json.loads(recorded), json.loads(fresh))
    except json.JSONDecodeError as e:
        lines = [f"the file is not valid JSON ({e})"]
    if not lines:
        lines = ["the figures agree, but the file's layout differs"]
    return False, "\n".join([f"{path.name} is out of date:"] + ["  " + s for s in lines]
                            + [f"Run: {WRITE_COMMAND}"])


################ Timing

def time_steps(lengths=(8, 16, 32, 64), repeats=9):
    """Median milliseconds of one training step (forward, loss, backward) at each length T,
    on the start of the corpus."""
    tok = load_tokenizer()
    p = build(tok, SERIES)
    with open(HERE / "corpus.txt", encoding="utf-8") as f:
        ids = tok.encode(f.read(4000))

    def step(x, y):
        logits, cache = model.forward(p, x)
        _, d_logits = model.loss_and_dlogits(logits, y)
        model.backward(p, cache, d_logits)

    for T in lengths:                   # warm up: one step of each length, not timed
        step(ids[:T], ids[1:T + 1])
    rows = []
    for T in lengths:
        x, y = ids[:T], ids[1:T + 1]
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step(x, y)
            times.append(time.perf_counter() - start)
        rows.append((T, statistics.median(times) * 1e3))
    return rows


################ Pictures (python3 trace_block.py --show)

WIDTH = 80                  # every line of the pictures fits in this many columns
BAR_CELLS = 15              # the longest bar is this many characters
EIGHTHS = "▏▎▍▌▋▊▉"         # 1/8 .. 7/8 of a character; a whole one is █
# Shades for attention weights, each step down about half the weight. No cut point sits on a
# uniform share 1/n (0.6 falls between 1 and 1/2, 0.3 between 1/3 and 1/4, 0.15 between 1/6 and
# 1/7, 0.075 between 1/13 and 1/14), so a nearly uniform row gets one shade all along.
SHADES = ((0.6, "█"), (0.3, "▓"), (0.15, "▒"), (0.075, "░"), (0.0, " "))
MASKED = "·"                # drawn where the causal mask hides column j > i


def visible(token):
    """A token in double quotes with escapes, so that its leading space shows.

    >>> visible(" mia"), visible(".")
    ('" mia"', '"."')
    """
    return json.dumps(token, ensure_ascii=False)


def bar(value, top, cells=BAR_CELLS):
    """A bar of value / top * cells characters, in eighths, padded with spaces to cells.

    Exactly 0.0 draws nothing at all; anything above 0 draws at least one eighth (▏).
    >>> bar(1.0, 1.0, 4), bar(0.5, 1.0, 4), bar(0.001, 1.0, 4), bar(0.0, 1.0, 4)
    ('████', '██  ', '▏   ', '    ')
    """
    eighths = round(value / top * cells * 8) if top > 0 else 0   # a half eighth rounds to even
    if value > 0 and eighths == 0:
        eighths = 1                 # subtle: a tiny gap still shows, so it never looks like 0.0
    whole, part = divmod(eighths, 8)
    return ("█" * whole + (EIGHTHS[part - 1] if part else "")).ljust(cells)


def figure(value):
    """A number to 4 significant places, with 0 written as 0.0.

    >>> figure(0.0), figure(0.19961656), figure(0.00309596)
    ('0.0', '0.1996', '0.003096')
    """
    return "0.0" if value == 0 else f"{value:.4g}"


def shade(weight):
    """The shade block for an attention weight between 0 and 1 (see SHADES).

    >>> shade(1.0), shade(0.5), shade(0.25), shade(0.111), shade(0.01)
    ('█', '▓', '▒', '░', ' ')
    """
    return next(block for cut, block in SHADES if weight >= cut)


def caption(text):
    """The sentence under a picture, wrapped to the page width."""
    return textwrap.fill(text, WIDTH, initial_indent="Notice: ", subsequent_indent="  ")


def show_gaps(p, tok, out):
    """Picture 1: a bar per position of the score gap, without and with position embeddings."""
    tokens_a, tokens_b = tok.tokens(ORDER_A), tok.tokens(ORDER_B)
    without, with_ = exact_gaps(p, tok, False), exact_gaps(p, tok, True)
    top = max(without + with_)                          # both columns share one scale
    w = max(len(visible(t)) for t in tokens_a + tokens_b)
    lead = 5 + 2 * w + 3                                # "pos  " + token a + " / " + token b
    print("The position experiment: the largest score gap between the two sentences", file=out)
    print(f'  a = {visible(ORDER_A)}   b = {visible(ORDER_B)}', file=out)
    print(f"  full bar = the largest gap, {figure(top)}; ▏ = 1/8 character; "
          f"exactly 0.0 = no bar", file=out)
    print(f"{'pos  token a / token b':{lead}}  {'without positions':{BAR_CELLS + 11}}"
          f"with positions", file=out)
    for t, (a, b, g0, g1) in enumerate(zip(tokens_a, tokens_b, without, with_)):
        print(f"{t:>3}  {visible(a):<{w}} / {visible(b):<{w}}"
              f"  │{bar(g0, top)} {figure(g0):<9}│{bar(g1, top)} {figure(g1)}", file=out)
    print(caption(
        f"without positions the last position's gap is exactly 0.0: both sentences hold the "
        f"same tokens and every sum is correctly rounded (math.fsum), so their order is "
        f"invisible there; positions 2 to {len(tokens_a) - 2} differ because they have seen "
        f"different prefixes (0 and 1 saw the same {visible(tokens_a[0])}, "
        f"{visible(tokens_a[1])}); with positions the last one differs too, by a small "
        f"{figure(with_[-1])} that still draws a sliver."), file=out)


def show_attention(p, tok, out):
    """Picture 2: the attention weights of ORDER_A as a shaded T×T grid, tokens on the axes."""
    tokens = tok.tokens(ORDER_A)
    _, cache = model.forward(p, tok.encode(ORDER_A), use_positions=True)
    weights = cache["att"]["weights"]                   # (T, T), zeros above the diagonal
    T = len(tokens)
    w = max(len(visible(t)) for t in tokens)
    lead = 5 + w                                        # "  i  " + token
    print(f"Attention weights of a = {visible(ORDER_A)}, at initialization", file=out)
    print("  row i is the position that looks, column j the one it looks at (row j's token)",
          file=out)
    scale = ", ".join(f"{block * 2} ≥ {cut}" for cut, block in SHADES[:-1])
    print(f"  shades: {scale}, blank below; {MASKED} = masked", file=out)
    print(f"{'':{lead}} " + "".join(f"{j:>2}" for j in range(T))
          + "    sum  1/(i+1)     min     max", file=out)
    for i, (token, row) in enumerate(zip(tokens, weights)):
        cells = "".join(shade(x) * 2 if j <= i else " " + MASKED for j, x in enumerate(row))
        seen = row[:i + 1]
        print(f"{i:>3}  {visible(token):<{w}}│{cells}│ {math.fsum(row):.4f}  {1 / (i + 1):.4f}"
              f"  {min(seen):.4f}  {max(seen):.4f}", file=out)
    print(caption(
        f"row i has weights only up to column i (the causal mask, {MASKED}) and each row sums "
        f"to 1; at initialization the weights are nearly uniform over what each position can "
        f"see, about 1/(i+1) each (compare min and max), so the shade fades as the rows grow "
        f"longer."), file=out)


def show(out=None):
    """Print the pictures: the position experiment, then the attention weights of one sentence."""
    out = sys.stdout if out is None else out
    tok = load_tokenizer()
    p = build(tok, SERIES)
    show_gaps(p, tok, out)
    print(file=out)
    show_attention(p, tok, out)


################ Command line

def can_print(text):
    """Whether standard output's encoding can write text."""
    try:
        text.encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def main(argv=None):
    """Run the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        description="Run the one-block transformer on real text and print, write or check\n"
                    "its recorded trace, block-trace.json. With no flag: print the trace.",
        epilog="examples:\n"
               "  python3 trace_block.py            # print the trace (JSON)\n"
               "  python3 trace_block.py --check    # is block-trace.json up to date?\n"
               "  python3 trace_block.py --write    # record it after a deliberate change\n"
               "  python3 trace_block.py --show     # the position experiment, as pictures\n"
               "  python3 trace_block.py --time     # how long one training step takes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true",
                        help="recompute the trace and rewrite block-trace.json, e.g. after you "
                             "change model.py on purpose")
    action.add_argument("--check", action="store_true",
                        help="exit 1 if block-trace.json differs from a fresh trace, naming each "
                             "figure that moved (old -> new) and the command that rewrites it")
    action.add_argument("--show", action="store_true",
                        help="draw the position experiment (a bar per position) and the "
                             "attention weights (a shaded grid) in the terminal")
    action.add_argument("--time", action="store_true",
                        help="time one training step (forward, loss, backward) at T = 8, 16, 32 "
                             "and 64 tokens: milliseconds per step and tokens per second")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except FileNotFoundError as error:   # tokenizer.json or corpus.txt is missing
        made_by_bpe = str(error.filename).endswith("tokenizer.json")
        hint = " Run: python3 bpe.py --write" if made_by_bpe else ""
        print(f"cannot read {error.filename}: no such file.{hint}", file=sys.stderr)
        return 1


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    if args.write:
        TRACE_FILE.write_text(to_json(trace()), encoding="utf-8", newline="\n")   # on Windows too
        print(f"wrote {TRACE_FILE.name}")
    elif args.check:
        ok, message = check()
        print(message, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    elif args.time:
        print(f"python {sys.version.split()[0]}: one training step (forward, loss, backward)")
        print(f"{'T':>4} {'ms/step':>9} {'tokens/s':>9}")
        for T, ms in time_steps():
            print(f"{T:>4} {ms:9.1f} {T / ms * 1e3:9.0f}")
    elif args.show:
        if not can_print("█░·│"):
            sys.stdout.reconfigure(encoding="utf-8")   # e.g. a Windows console on a code page
        show()
    else:
        print(to_json(trace()), end="")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:     # e.g. python3 trace_block.py | head: the reader stopped early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error
        sys.exit(1)
