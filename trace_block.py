"""Run the one-block model on real text and record what it does, in block-trace.json.

The trace builds the series-size model (d 16, hidden 64, 64 positions, the tokenizer's 96
tokens) and records: the first story's shapes and loss, layer norm at work, the position
experiment on two sentences that hold the same tokens in another order, and a full gradient
check of a small copy of the model against finite differences. Every figure is computed here
each time; block-trace.json only remembers them, so that a change that moves one shows up.

The file reads: the trace, the gradient check, the position experiment; then, out of the
lesson's path, the recorded file (write and check), timing, pictures, the command line and
the input checks.

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
WRITE_COMMAND = "python3 trace_block.py --write"

SERIES = {"d": 16, "hidden": 64, "max_len": 64, "seed": 3}
TINY = {"d": 4, "hidden": 8, "max_len": 8, "seed": 3}

# The position experiment: the same tokens, with the two names swapped.
ORDER_A = "now mia gives the hat to leo."
ORDER_B = "now leo gives the hat to mia."
GRADIENT_SENTENCE = "mia has a red ball."
STEP = 1e-6                 # the nudge of the central differences


################ The trace

def trace(tok=None, story=None):
    """Every figure of block-trace.json, computed afresh, keys in the file's order: by default
    for the lab's tokenizer and the first story of corpus.txt (with its newline)."""
    tok = load_tokenizer() if tok is None else tok
    story = first_story() if story is None else story
    ids = story_ids(tok, story, SERIES["max_len"])
    p = build(tok, SERIES)
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


def load_tokenizer():
    """The lab's trained tokenizer, tokenizer.json beside this file."""
    try:
        tok = Tokenizer.load(TOKENIZER_FILE)
    except (TypeError, ValueError) as error:        # the file is there, but not a tokenizer
        raise FileProblem(f"{error}. Run: python3 bpe.py --write") from None
    check_sentences(tok)
    return tok


def first_story():
    """The first line of corpus.txt, with its newline."""
    text = bpe.read_corpus(CORPUS_FILE)
    return text[:text.index("\n") + 1]


def story_ids(tok, story, max_len):
    """The token IDs of the first story, refused (naming corpus.txt) unless the model can read
    all but its last token."""
    check_story(tok, story, max_len)
    return tok.encode(story)


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config such as SERIES or TINY."""
    check_tokenizer(tok)
    check_config(cfg)
    return model.init_params(len(tok.vocab), cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])


################ The gradient check

def numeric_gradients(p, x, y, step=STEP, names=None):
    """Central differences of the loss for every entry of p (or of the tensors named), one
    entry at a time.

    Each entry is nudged by +step and -step and the loss recomputed: the slope between the
    two is the numerical gradient. Returns (numeric, kinks): numeric has p's names and shapes;
    kinks lists the entries, (name, row, column) or (name, index), whose nudge switched a relu
    on or off. The difference quotient there is a slope across the kink, not a derivative.
    Every entry is put back as it was, even if the loss raises or the run is interrupted.
    """
    check_nudging(p, step, names)
    numeric, kinks = {}, []
    for name, tensor in p.items():
        if names is not None and name not in names:
            continue
        is_matrix = isinstance(tensor[0], list)
        slopes = []
        for r, row in enumerate(tensor if is_matrix else [tensor]):
            slope_row = []
            for c, kept in enumerate(row):
                try:
                    row[c] = kept + step
                    loss_up, relu_up = loss_and_relu_pattern(p, x, y)
                    row[c] = kept - step
                    loss_down, relu_down = loss_and_relu_pattern(p, x, y)
                finally:
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
    """How far backward()'s gradients are from the numeric ones, over every tensor numeric
    holds: a dict of parameters_checked (the entries compared), max_abs_error, max_rel_error,
    errors_by_tensor (each tensor's largest absolute error), kinks, and worst, the entry of the
    largest absolute error with both its values.

    The relative error is cs231n's |a - n| / max(|a|, |n|), taken over the entries at least
    1e-4 in size: the difference quotient carries a rounding error near 1e-9, which would
    swamp the ratio for smaller ones. The entries named in kinks are listed, not compared.
    """
    check_gradients_fit(grads, numeric)
    worst_abs = worst_rel = 0.0
    worst = None
    checked = 0
    set_aside = set(kinks)
    by_tensor = {}
    for name in numeric:
        by_tensor[name] = 0.0
        is_matrix = isinstance(numeric[name][0], list)
        width = len(numeric[name][0]) if is_matrix else None
        for n, (analytic, slope) in enumerate(zip(flatten(grads[name]), flatten(numeric[name]))):
            where = (name, *divmod(n, width)) if is_matrix else (name, n)
            if where in set_aside:
                continue
            checked += 1
            error = abs(slope - analytic)
            by_tensor[name] = max(by_tensor[name], error) if error == error else error   # nan
            if worst is None or error > worst_abs or math.isnan(error):
                worst_abs, worst = error, {"entry": entry_name(where), "backward": analytic,
                                           "finite_difference": slope}
            size = max(abs(slope), abs(analytic))
            if size >= 1e-4:
                worst_rel = max(worst_rel, error / size)
    return {"parameters_checked": checked, "max_abs_error": worst_abs,
            "max_rel_error": worst_rel, "errors_by_tensor": by_tensor, "kinks": list(kinks),
            "worst": worst}


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


def worst_entry(report):
    """The worst entry of a gradient report, in words.

    >>> worst_entry({"worst": {"entry": "W1[3][7]", "backward": 0.0123,
    ...                        "finite_difference": 0.0456}})
    'W1[3][7]: backward 0.0123, finite difference 0.0456'
    """
    worst = report["worst"]
    if worst is None:
        return "no entry was compared"
    return (f"{worst['entry']}: backward {worst['backward']:.6g}, "
            f"finite difference {worst['finite_difference']:.6g}")


def entry_name(where):
    """An entry of a tensor as code writes it.

    >>> entry_name(("W1", 3, 7)), entry_name(("b1", 5))
    ('W1[3][7]', 'b1[5]')
    """
    name, *index = where
    return name + "".join(f"[{i}]" for i in index)


def flatten(tensor):
    """The numbers of a vector or a matrix, row by row.

    >>> flatten([[1.0, 2.0], [3.0, 4.0]]), flatten([5.0, 6.0])
    ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0])
    """
    check_tensor(tensor)
    return [v for row in tensor for v in row] if isinstance(tensor[0], list) else list(tensor)


################ The position experiment

def order_logits(p, tok, use_positions):
    """The scores of the two order sentences, each (T, V)."""
    check_tokenizer(tok)
    a, b = tok.encode(ORDER_A), tok.encode(ORDER_B)
    check_order_sentences(a, b)
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


################ The recorded file: print, write, check

AFTER_A_CHANGE = (f"If you changed the lab on purpose, record the new figures: {WRITE_COMMAND}\n"
                  f"If you did not, undo the change that moved them (git diff shows it); "
                  f"rewriting the file would hide it.")
LARGEST_TRACE = 1_000_000   # bytes; the trace is about 2,000, so a file beyond this is not one


def to_json(figures):
    """The trace as the text of block-trace.json."""
    return json.dumps(figures, indent=2, ensure_ascii=False) + "\n"


def write(path=None):
    """Compute the trace and write it to path (block-trace.json), replacing the old file only
    once the new one is complete."""
    bpe.write_atomically(TRACE_FILE if path is None else path, to_json(trace()))


def check(path=None):
    """Compare the recorded trace (block-trace.json, or path) with a fresh one, byte for byte:
    (up to date?, message)."""
    path = Path(TRACE_FILE if path is None else path)   # a str works too
    try:
        with open(path, "rb") as file:
            recorded = file.read(LARGEST_TRACE + 1)
    except FileNotFoundError:
        return False, f"{path.name} is missing. Run: {WRITE_COMMAND}"
    fresh = to_json(trace()).encode("utf-8")
    if recorded == fresh:
        return True, f"{path.name} is up to date."
    lines = file_differences(recorded, fresh)
    return False, "\n".join([f"{path.name} is out of date:"] + ["  " + s for s in lines]
                            + [AFTER_A_CHANGE])


def file_differences(recorded, fresh):
    """What differs between the bytes of a recorded trace and of a fresh one, as lines."""
    if len(recorded) > LARGEST_TRACE:
        return [f"the file holds more than {LARGEST_TRACE:,} bytes: it is not a trace"]
    try:
        text = recorded.decode("utf-8")
    except UnicodeDecodeError as error:
        return [f"the file is not UTF-8 text (byte {error.start} cannot be read)"]
    lines = []
    if "\r" in text:
        lines.append("its line ends differ: the file has \\r\\n (Windows) line ends, the trace "
                     "is written with \\n")
        text = text.replace("\r\n", "\n")
    try:
        old = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        return lines + [f"the file is not valid JSON ({error})"]
    lines += differences(old, json.loads(fresh.decode("utf-8")))
    if not lines:
        lines.append("the figures agree, but the file's layout differs (spacing or the "
                     "final newline)")
    return lines


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
            if key not in new:
                lines.append(f"{path}: no longer in the trace")
            elif key not in old:
                lines.append(f"{path}: missing from the file (now {json.dumps(new[key])})")
            else:
                lines += differences(old[key], new[key], path)
        if not lines and list(old) != list(new):
            lines.append(f"{where or 'the trace'}: keys in another order")
        return lines
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for n, (u, v) in enumerate(zip(old, new))
                for line in differences(u, v, f"{where}[{n}]")]
    as_json = json.dumps(old, ensure_ascii=False), json.dumps(new, ensure_ascii=False)
    return [f"{where}: {as_json[0]} -> {as_json[1]}"] if as_json[0] != as_json[1] else []


################ Timing

def time_steps(lengths=(8, 16, 32, 64), repeats=9):
    """Median milliseconds of one training step (forward, loss, backward) at each length T,
    on the start of the corpus."""
    check_lengths(lengths, SERIES["max_len"])
    tok = load_tokenizer()
    p = build(tok, SERIES)
    ids = corpus_ids(tok, max(lengths) + 1)

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


def corpus_ids(tok, count):
    """The first count token IDs of corpus.txt, read story by story (from the start again if
    the corpus is shorter)."""
    text = bpe.read_corpus(CORPUS_FILE)
    ids = []
    while len(ids) < count:
        for number, line in enumerate(text.splitlines(keepends=True), 1):
            ids += encode_line(tok, line, number)
            if len(ids) >= count:
                break
    return ids[:count]


def encode_line(tok, line, number):
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
# Shades for attention weights, each step down about half the weight. No cut point sits on a
# uniform share 1/n (0.6 falls between 1 and 1/2, 0.3 between 1/3 and 1/4, 0.15 between 1/6 and
# 1/7, 0.075 between 1/13 and 1/14), so a nearly uniform row gets one shade all along.
SHADES = ((0.6, "█"), (0.3, "▓"), (0.15, "▒"), (0.075, "░"), (0.0, " "))
MASKED = "·"                # drawn where a weight is exactly 0.0: what the causal mask gives j > i


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
    check_bar(value, top)
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


def shade(weight):
    """The cell for an attention weight between 0 and 1: MASKED for exactly 0.0, else a shade
    (see SHADES).

    >>> shade(1.0), shade(0.5), shade(0.25), shade(0.111), shade(0.01), shade(0.0)
    ('█', '▓', '▒', '░', ' ', '·')
    """
    check_weight(weight)
    if weight == 0.0:
        return MASKED
    return next(block for cut, block in SHADES if weight >= cut)


def cell(weight):
    """The two characters of a weight's cell in the grid.

    >>> cell(0.5), cell(0.0)
    ('▓▓', ' ·')
    """
    block = shade(weight)
    return " " + block if block == MASKED else block * 2


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
    print(caption(gaps_caption(without, with_)), file=out)


def gaps_caption(without, with_):
    """What the gap picture shows, read off its numbers."""
    same = [t for t, gap in enumerate(without[:-1]) if gap == 0.0]     # before the last
    if without[-1] == 0.0:
        last = ("without positions the last position's gap is exactly 0.0: both sentences hold "
                "the same tokens and every sum is correctly rounded (math.fsum), so their order "
                "is invisible there")
    else:
        last = (f"without positions the last position's gap is {figure(without[-1])}, not "
                f"0.0: something in the model sees the order of the tokens without positions")
    where = (f"position {same[0]} has" if len(same) == 1 else
             f"positions {', '.join(map(str, same))} have")
    earlier = (f"{where} a gap of 0.0 too (both sentences start with the same tokens there)"
               if same else "every earlier position differs")
    final = (f"with positions the last one differs too, by {figure(with_[-1])}"
             if with_[-1] > 0 else "with positions the last position still has a gap of 0.0")
    return f"{last}; {earlier}; {final}."


def show_attention(p, tok, out):
    """Picture 2: the attention weights of ORDER_A as a shaded T×T grid, tokens on the axes,
    every cell drawn from the weight the model computed."""
    tokens = tok.tokens(ORDER_A)
    _, cache = model.forward(p, tok.encode(ORDER_A), use_positions=True)
    weights = cache["att"]["weights"]                   # (T, T)
    T = len(tokens)
    w = max(len(visible(t)) for t in tokens)
    lead = 5 + w                                        # "  i  " + token
    print(f"Attention weights of a = {visible(ORDER_A)}, at initialization", file=out)
    print("  row i is the position that looks, column j the one it looks at (row j's token)",
          file=out)
    scale = ", ".join(f"{block * 2} ≥ {cut}" for cut, block in SHADES[:-1])
    print(f"  shades: {scale}, blank below; {MASKED} = exactly 0", file=out)
    print(f"{'':{lead}} " + "".join(f"{j:>2}" for j in range(T))
          + "    sum  1/(i+1)     min     max", file=out)
    for i, (token, row) in enumerate(zip(tokens, weights)):
        cells = "".join(cell(x) for x in row)
        seen = row[:i + 1]
        print(f"{i:>3}  {visible(token):<{w}}│{cells}│ {math.fsum(row):.4f}  {1 / (i + 1):.4f}"
              f"  {min(seen):.4f}  {max(seen):.4f}", file=out)
    print(caption(attention_caption(weights)), file=out)


def attention_caption(weights):
    """What the attention grid shows, read off its weights."""
    ahead = [(i, j) for i, row in enumerate(weights) for j, x in enumerate(row) if j > i and x]
    if ahead:
        i, j = ahead[0]
        mask = (f"{len(ahead)} cells above the diagonal carry weight (row {i} gives "
                f"{weights[i][j]:.4f} to the later column {j}): the causal mask leaks, and a "
                f"position sees tokens that come after it")
    else:
        mask = (f"every cell above the diagonal is {MASKED}, a weight of exactly 0: no position "
                f"looks at a later one (the causal mask)")
    # a weight that underflowed to 0.0 makes the spread infinite, not a ZeroDivisionError
    spread = max(max(row[:i + 1]) / min(row[:i + 1]) if min(row[:i + 1]) > 0 else math.inf
                 for i, row in enumerate(weights))
    if spread == math.inf:
        rows = "some weights a row can see are exactly 0 (compare min and max)"
    elif spread < 1.5:
        rows = ("each row's weights are nearly uniform over the positions it sees, about 1/(i+1) "
                "each (compare min and max), so the shade fades as the rows grow longer")
    else:
        rows = (f"within a row the weights differ by up to {spread:.1f} times (compare min and "
                f"max)")
    return f"{mask}; {rows}."


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
    """Run the command line; return the exit code. A problem with one of the lab's files, or
    with writing the output, is said in one line (exit 1); a traceback means a bug in the lab."""
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
                             "figure that moved (old -> new)")
    action.add_argument("--show", action="store_true",
                        help="draw the position experiment (a bar per position) and the "
                             "attention weights (a shaded grid) in the terminal")
    action.add_argument("--time", action="store_true",
                        help="time one training step (forward, loss, backward) at T = 8, 16, 32 "
                             "and 64 tokens: milliseconds per step and tokens per second")
    return bpe.run_reporting_problems(lambda: run(parser.parse_args(argv)))


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    if args.write:
        write()
        print(f"wrote {TRACE_FILE.name}")
    elif args.check:
        ok, message = check()
        print(message, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    elif args.time:
        corpus_ids(load_tokenizer(), 65)        # a problem with the files shows before the table
        print(f"python {sys.version.split()[0]}: one training step (forward, loss, backward)")
        print(f"{'T':>4} {'ms/step':>9} {'tokens/s':>9}")
        for T, ms in time_steps():
            print(f"{T:>4} {ms:9.1f} {T / ms * 1e3:9.0f}")
    elif args.show:
        if not can_print("█░·│") and hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(encoding="utf-8")   # e.g. a Windows console on a code page
        show()
    else:
        print(to_json(trace()), end="")
    return 0


################ Input checks (you can skip this section)

def check_tokenizer(tok):
    """Refuse anything but a tokenizer, such as load_tokenizer() returns."""
    if not hasattr(tok, "vocab") or not hasattr(tok, "encode"):
        raise TypeError(f"expected a tokenizer (trace_block.load_tokenizer()), "
                        f"not {type(tok).__name__}")


def check_sentences(tok):
    """Refuse a tokenizer.json that cannot encode the sentences of the trace."""
    for sentence in (ORDER_A, ORDER_B, GRADIENT_SENTENCE):
        try:
            tok.encode(sentence)
        except ValueError as error:
            raise FileProblem(f"{TOKENIZER_FILE.name} cannot encode {sentence!r}: {error}. "
                              f"Run: python3 bpe.py --write") from None


def check_config(cfg):
    """Refuse a config without exactly SERIES's keys."""
    if not isinstance(cfg, dict) or set(cfg) != set(SERIES):
        have = sorted(cfg) if isinstance(cfg, dict) else type(cfg).__name__
        raise ValueError(f"config must have exactly the keys {sorted(SERIES)}, not {have}")


def check_story(tok, story, max_len):
    """Refuse a first story the tokenizer cannot encode or the model cannot read, naming
    corpus.txt and its line 1."""
    ids = encode_line(tok, story, 1)
    if len(ids) - 1 > max_len:
        raise FileProblem(f"{CORPUS_FILE.name} line 1: the first story is {len(ids)} tokens; "
                          f"the model reads all but the last, and it has {max_len} positions")
    if len(ids) < 2:
        raise FileProblem(f"{CORPUS_FILE.name} line 1: the first story is {len(ids)} token; "
                          f"the trace needs at least 2 (one to read, one to predict)")


def check_nudging(p, step, names):
    """Refuse a finite-difference step that is not a positive, finite number, and names that
    are not parameters of p."""
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise TypeError(f"step must be a number, not {type(step).__name__}")
    if not 0 < step < math.inf:
        raise ValueError(f"step must be a positive number, such as 1e-6, not {step!r}")
    model.check_params(p)
    unknown = [name for name in names or () if name not in p]
    if isinstance(names, str) or unknown:
        raise ValueError(f"names must be a list of parameter names, such as ['W1', 'b1'], "
                         f"not {names!r}")


def check_tensor(tensor):
    """Refuse anything but a non-empty vector or matrix."""
    if not isinstance(tensor, (list, tuple)) or not tensor:
        raise ValueError(f"expected a non-empty vector or matrix, not {tensor!r:.40}")


def check_gradients_fit(grads, numeric):
    """Refuse two dicts of gradients unless they hold the same names and shapes."""
    for name, value in (("grads", grads), ("numeric", numeric)):
        if not isinstance(value, dict):
            raise TypeError(f"{name} must be a dict of gradients, not {type(value).__name__}")
    missing = [name for name in numeric if name not in grads]
    if missing or not numeric:
        raise ValueError(f"grads lacks {missing}, which numeric holds" if missing else
                         "numeric holds no gradient to compare")
    for name in numeric:
        if model.shape(grads[name]) != model.shape(numeric[name]):
            raise ValueError(f"gradient {name} has shape {model.shape(grads[name])} but the "
                             f"numeric one {model.shape(numeric[name])}")


def check_order_sentences(a, b):
    """Refuse order sentences of two lengths in tokens: position by position needs one."""
    if len(a) != len(b):
        raise ValueError(f"the order sentences must have one length in tokens, "
                         f"not {len(a)} and {len(b)}")


def check_lengths(lengths, max_len):
    """Refuse sequence lengths the model cannot take."""
    if not lengths or not all(type(T) is int and 1 <= T <= max_len for T in lengths):
        raise ValueError(f"lengths must be ints from 1 to {max_len}, not {lengths!r}")


def check_bar(value, top):
    """Refuse a bar for something that is not a number of at least 0."""
    if not (0 <= value < math.inf and 0 <= top < math.inf):
        raise ValueError(f"a bar needs a value and a top of at least 0, not {value!r} and {top!r}")


def check_weight(weight):
    """Refuse a weight outside 0..1 (nan included): no shade stands for it."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"an attention weight lies between 0 and 1, not {weight!r}")


if __name__ == "__main__":
    sys.exit(main())
