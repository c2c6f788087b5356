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
import sys
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


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config such as SERIES or TINY."""
    return model.init_params(len(tok.vocab), cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])


################ The gradient check

def gradient_check(p, x, y, step=STEP):
    """Compare backward() with central differences for every parameter of p, one at a time.

    Each entry is nudged by +step and -step and the loss recomputed: the slope between the two
    is the numerical gradient. Returns a dict: parameters_checked, max_abs_error,
    max_rel_error (cs231n style, |a - n| / max(|a|, |n|), over the entries whose gradient is
    at least 1e-4 in size: the difference quotient carries a rounding error near 1e-9, which
    would swamp the ratio for smaller ones) and kinks, the entries whose nudge
    switched a relu on or off; the difference quotient is not a derivative there, so those
    entries are listed instead of counted as errors.
    """
    logits, cache = model.forward(p, x)
    _, d_logits = model.loss_and_dlogits(logits, y)
    grads = model.backward(p, cache, d_logits)
    worst_abs = worst_rel = 0.0
    checked, kinks = 0, []
    for name, tensor in p.items():
        rows, grad_rows = (tensor, grads[name]) if isinstance(tensor[0], list) \
            else ([tensor], [grads[name]])
        for r, (row, grad_row) in enumerate(zip(rows, grad_rows)):
            for c, analytic in enumerate(grad_row):
                kept = row[c]
                row[c] = kept + step
                loss_up, relu_up = loss_and_relu_pattern(p, x, y)
                row[c] = kept - step
                loss_down, relu_down = loss_and_relu_pattern(p, x, y)
                row[c] = kept
                checked += 1
                if relu_up != relu_down:
                    kinks.append((name, r, c) if isinstance(tensor[0], list) else (name, c))
                    continue
                numeric = (loss_up - loss_down) / (2 * step)
                error = abs(numeric - analytic)
                worst_abs = max(worst_abs, error)
                size = max(abs(numeric), abs(analytic))
                if size >= 1e-4:
                    worst_rel = max(worst_rel, error / size)
    return {"parameters_checked": checked, "max_abs_error": worst_abs,
            "max_rel_error": worst_rel, "kinks": kinks}


def loss_and_relu_pattern(p, x, y):
    """The loss, and which hidden units the relu let through, at every position."""
    logits, cache = model.forward(p, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    return loss, [[a > 0.0 for a in row] for row in cache["act"]]


def gradient_error(p, x, y):
    """The largest |central difference - backward()| over every parameter, step 1e-6."""
    return gradient_check(p, x, y)["max_abs_error"]


################ The position experiment

def order_logits(p, tok, use_positions):
    """The scores of the two order sentences, each (T, V)."""
    a, b = tok.encode(ORDER_A), tok.encode(ORDER_B)
    if len(a) != len(b):
        raise ValueError(f"the order sentences must have one length in tokens, "
                         f"not {len(a)} and {len(b)}")
    return model.forward(p, a, use_positions)[0], model.forward(p, b, use_positions)[0]


def position_gaps(p, tok, use_positions):
    """Per position, the largest absolute score difference between the two order sentences,
    rounded to 4 places."""
    la, lb = order_logits(p, tok, use_positions)
    return [round(max(abs(u - v) for u, v in zip(ra, rb)), 4) for ra, rb in zip(la, lb)]


def last_logits_gap(p, tok, use_positions):
    """The largest absolute score difference at the last position, not rounded."""
    la, lb = order_logits(p, tok, use_positions)
    return max(abs(u - v) for u, v in zip(la[-1], lb[-1]))


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
    return {
        "story": story,
        "story_tokens": len(ids),
        "series_config": SERIES,
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
            "config": TINY,
            "parameters_checked": model.count_params(tiny),
            "max_error_rounded": round(gradient_error(tiny, ball[:-1], ball[1:]), 7),
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
    fresh = to_json(trace())
    try:
        recorded = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return False, f"{path.name} is missing. Run: {WRITE_COMMAND}"
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

def time_steps(lengths=(8, 16, 32, 64), repeats=5):
    """Median milliseconds of one training step (forward, loss, backward) at each length T."""
    tok = load_tokenizer()
    p = build(tok, SERIES)
    text = open(HERE / "corpus.txt", encoding="utf-8").read(4000)
    ids = tok.encode(text)
    rows = []
    for T in lengths:
        x, y = ids[:T], ids[1:T + 1]
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            logits, cache = model.forward(p, x)
            _, d_logits = model.loss_and_dlogits(logits, y)
            model.backward(p, cache, d_logits)
            times.append(time.perf_counter() - start)
        times.sort()
        rows.append((T, times[len(times) // 2] * 1e3))
    return rows


################ Command line

def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run the one-block transformer on real text and print, write or check "
                    "its recorded trace, block-trace.json.",
        epilog="Examples: python3 trace_block.py   |   python3 trace_block.py --check")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true",
                        help="recompute the trace and rewrite block-trace.json "
                             "(e.g. after you change model.py on purpose)")
    action.add_argument("--check", action="store_true",
                        help="exit 1 if block-trace.json differs from a fresh trace, naming "
                             "each figure that moved, old -> new")
    action.add_argument("--show", action="store_true",
                        help="draw the position experiment and the attention weights in the "
                             "terminal")
    action.add_argument("--time", action="store_true",
                        help="time one training step at T = 8, 16, 32, 64 tokens")
    args = parser.parse_args(argv)
    if args.write:
        TRACE_FILE.write_text(to_json(trace()), encoding="utf-8")
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
        show()
    else:
        print(to_json(trace()), end="")
    return 0


def show():
    """Pictures in the terminal (filled in by the learner-experience work)."""
    raise NotImplementedError


if __name__ == "__main__":
    sys.exit(main())
