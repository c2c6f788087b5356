"""Run the one-block model on real text and record what it does, in block-trace.json.

The trace runs the series-size model on the first story (shapes, loss, layer norm at work) and
on two sentences that hold the same tokens in another order, and checks every gradient of a
small copy. Each run computes every figure afresh; block-trace.json only remembers them.

    python3 trace_block.py            the lesson's figures, and whether the file holds them
    python3 trace_block.py --show     the order experiment and the attention weights, drawn
    python3 trace_block.py --check    exit 1 if the file is out of date (--write: record it)
"""
import argparse
import codecs
import json
import math
import sys
import textwrap
from pathlib import Path

import bpe
import model
from bpe import FileProblem, Tokenizer

HERE = Path(__file__).resolve().parent
TRACE_FILE = HERE / "block-trace.json"
TOKENIZER_FILE = HERE / "tokenizer.json"

SERIES = {"d": 16, "hidden": 64, "max_len": 64, "seed": 3}   # the series' model: 7,440 numbers
TINY = {"d": 4, "hidden": 8, "max_len": 8, "seed": 3}       # the small copy: 1,060 numbers
ORDER_A = "now mia gives the hat to leo."       # the order experiment: the same tokens,
ORDER_B = "now leo gives the hat to mia."       # the two names swapped
GRADIENT_SENTENCE = "mia has a red ball."
STEP = 1e-6                                     # the nudge of the central differences
CHECKED = {}                                    # small_copy_check's reports


################ The trace

def trace(tok=None, story=None):
    """Every figure of block-trace.json, computed afresh, in the file's order: by default for
    the lab's tokenizer and the first story of corpus.txt (with its newline)."""
    tok = load_tokenizer() if tok is None else check_sentences(tok, "the tokenizer given")
    where = "the story"
    if story is None:                   # the first line of corpus.txt, with its newline
        where = "corpus.txt line 1 (the first story)"
        story = bpe.read_corpus().partition("\n")[0] + "\n"
    ids = encode_story(tok, story, where)
    p = build(tok, SERIES)
    x, y = ids[:-1], ids[1:]                            # each token predicts the next
    logits, cache = model.forward(p, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    row0 = cache["h1"][0]                               # LN1's output at position 0
    report = small_copy_check(len(tok.vocab), tuple(tok.encode(GRADIENT_SENTENCE)))
    shapes = {"x0": cache["x0"], "attention_weights": cache["att"]["weights"],
              "mlp_hidden": cache["act"], "logits": logits}
    return {
        "story": story, "story_tokens": len(ids), "series_config": dict(SERIES),
        "vocab_size": len(tok.vocab), "parameter_count": model.count_params(p),
        "parameters_by_tensor": {name: list(model.shape(t)) for name, t in p.items()},
        "shapes": {name: list(model.shape(value)) for name, value in shapes.items()},
        "initial_loss": round(loss, 4),
        "uniform_loss": round(math.log(len(tok.vocab)), 4),
        "layernorm_row0": {
            # + 0.0 turns a mean that rounds to -0.0 into 0.0; the variance: the mean of squares
            "mean": round(math.fsum(row0) / len(row0), 6) + 0.0,
            "variance": round(math.fsum(v * v for v in row0) / len(row0), 4)},
        "order_test": {
            "a": ORDER_A, "b": ORDER_B,
            "tokens_a": tok.tokens(ORDER_A), "tokens_b": tok.tokens(ORDER_B),
            "last_logit_gap_without_positions": last_logits_gap(p, tok, False),
            "last_logit_gap_with_positions": round(last_logits_gap(p, tok, True), 6),
            "gaps_by_position_without_positions": position_gaps(p, tok, False)},
        "gradient_check": {
            "config": dict(TINY), "parameters_checked": report["parameters_checked"],
            "max_error_rounded": round(report["max_abs_error"], 7)}}


def load_tokenizer():
    """The lab's trained tokenizer, tokenizer.json beside this file."""
    try:
        tok = Tokenizer.load(TOKENIZER_FILE)
    except ValueError as problem:       # damaged; a missing file is an OSError, for main()
        raise FileProblem(f"{problem}. Run: python3 bpe.py --write") from None
    hint = ": does python3 tools/make_corpus.py --check pass?"   # --check names the fix
    return check_sentences(tok, TOKENIZER_FILE.name, hint)


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config such as SERIES or TINY."""
    return model.init_params(len(tok.vocab), **cfg)


################ The gradient check

def central_differences(f, tensor, step=STEP):
    """(f() at entry + step - f() at entry - step) / (2·step), for each entry of tensor (a
    vector or a matrix, nudged in place and put back): f's slopes, in tensor's shape."""
    matrix = isinstance(tensor[0], list)
    rows = tensor if matrix else [tensor]      # a vector: one row
    slopes = []
    for row in rows:
        slope_row = []
        for j, kept in enumerate(row):
            row[j] = kept + step
            up = f()
            row[j] = kept - step
            down = f()
            row[j] = kept
            slope_row.append((up - down) / (2 * step))
        slopes.append(slope_row)
    return slopes if matrix else slopes[0]


def numeric_gradients(p, x, y):
    """Central differences of the loss for every entry of p (each nudged and put back)."""
    return {name: central_differences(lambda: model.sequence_loss(p, x, y), tensor)
            for name, tensor in p.items()}


def backward_gradients(p, x, y, use_positions=True):
    """backward()'s gradients of the loss of inputs x and next tokens y."""
    logits, cache = model.forward(p, x, use_positions)
    _, d_logits = model.loss_and_dlogits(logits, y)
    return model.backward(p, cache, d_logits)


def compare_gradients(grads, numeric):
    """The largest |slope - backward| of every entry; a nan, or another shape, counts as inf."""
    errors = []
    for name, slopes in numeric.items():
        if model.shape(grads[name]) != model.shape(slopes):
            return math.inf
        errors += [abs(s - g) for s, g in zip(flatten(slopes), flatten(grads[name]))]
    return max(math.inf if math.isnan(e) else e for e in errors)   # max() may pass over a nan


def gradient_error(p, x, y):
    """The largest |central difference - backward()| over every parameter, step 1e-6."""
    return compare_gradients(backward_gradients(p, x, y), numeric_gradients(p, x, y))


def small_copy_check(vocab, ids):
    """gradient_error() of the small copy, with its count: made once per run, shared."""
    key = (vocab, ids, model)           # model: a test may run another model.py
    if key not in CHECKED:
        p = model.init_params(vocab, **TINY)
        x, y = list(ids[:-1]), list(ids[1:])
        CHECKED[key] = {"parameters_checked": model.count_params(p),
                        "max_abs_error": gradient_error(p, x, y)}
    return CHECKED[key]


def flatten(tensor):
    """The numbers of a vector, or of a matrix row by row."""
    if isinstance(tensor[0], (list, tuple)):
        return [v for row in tensor for v in row]
    return list(tensor)


################ The order experiment

def exact_gaps(p, tok, use_positions):
    """Per position, the order sentences' largest score difference: 0.0 is bit-identical."""
    logits_a, _ = model.forward(p, tok.encode(ORDER_A), use_positions)
    logits_b, _ = model.forward(p, tok.encode(ORDER_B), use_positions)
    return [max(abs(u - v) for u, v in zip(a, b)) for a, b in zip(logits_a, logits_b)]


def position_gaps(p, tok, use_positions):
    """Per position, the order sentences' largest score difference, to 4 places."""
    return [round(gap, 4) for gap in exact_gaps(p, tok, use_positions)]


def last_logits_gap(p, tok, use_positions):
    """The largest absolute score difference at the last position, not rounded."""
    return exact_gaps(p, tok, use_positions)[-1]


################ The recorded file: summary, check, write

AFTER_A_CHANGE = """\
A function you wrote, a break-it or a slip moved them? python3 -m unittest -v
test_model.py names the function; python3 tools/exercise.py --restore puts back the
model.py it kept. Corpus edited? tools/README.md. Math changed on purpose, or the file
recorded from a broken model.py that is mended now? python3 trace_block.py --write"""


def to_json(figures):
    """The trace as the text of block-trace.json."""
    return json.dumps(figures, indent=2, ensure_ascii=False) + "\n"


def summary(figures):
    """The figures the lesson talks about, all but the order experiment's, as lines to read.

    >>> summary(json.loads(TRACE_FILE.read_text(encoding="utf-8")))[4]
    'initial loss          4.5805, against ln 96 = 4.5643 (the uniform model)'
    """
    cfg, grads = figures["series_config"], figures["gradient_check"]
    row0 = figures["layernorm_row0"]
    shapes = ", ".join(f"{name} {'×'.join(map(str, s))}"
                       for name, s in figures["shapes"].items())
    return [
        f"the first story of corpus.txt, {figures['story_tokens']} tokens:",
        f"  {figures['story'].strip()}",
        f"parameters            {figures['parameter_count']:,} (d {cfg['d']}, hidden "
        f"{cfg['hidden']}, {cfg['max_len']} positions, seed {cfg['seed']})",
        f"shapes (T = {figures['shapes']['x0'][0]})       {shapes}",
        f"initial loss          {figures['initial_loss']}, against ln "
        f"{figures['vocab_size']} = {figures['uniform_loss']} (the uniform model)",
        f"layer norm, row 0     mean {row0['mean']}, variance {row0['variance']} "
        f"(ε pulls it below 1)",
        f"gradient check        {grads['parameters_checked']:,} parameters of the small "
        f"copy, largest error {grads['max_error_rounded']:.7f} (rounded to 7 places)"]


def check(figures=None):
    """Compare block-trace.json with a fresh trace (or figures), byte for byte: (ok?, message)."""
    path = TRACE_FILE
    if not path.exists():
        return False, f"{path.name} is missing. Run: python3 trace_block.py --write"
    fresh = to_json(trace() if figures is None else figures)
    data = path.read_bytes()
    if data == fresh.encode("utf-8"):
        return True, f"{path.name} is up to date."
    if b"\r\n" in data:
        return False, (f"{path.name} has \\r\\n (Windows) line ends; the lab's files use "
                       f"\\n: save it with LF line ends")
    try:
        old = bpe.read_json(path)
    except FileProblem as problem:      # empty, not UTF-8, not JSON: nothing to compare
        return False, f"{problem}: python3 trace_block.py --write records it afresh"
    lines = differences(old, json.loads(fresh))
    if not lines:       # the file edited by hand, not the model
        return False, (f"{path.name}: the figures agree, but the layout differs: python3 "
                       f"trace_block.py --write records it afresh")
    text = "\n".join([f"{path.name} is out of date:"] + ["  " + line for line in lines])
    return False, f"{text}\n{AFTER_A_CHANGE}"


def differences(old, new):
    """The figures that differ between two traces, as lines 'key: old -> new'. A figure differs
    if its JSON does: 0.0 and -0.0 are two figures, and so are 1 and 1.0.

    >>> differences({"a": 1.0, "b": {"c": 0.0}}, {"a": 1.0, "b": {"c": -0.0}})
    ['b.c: 0.0 -> -0.0']
    """
    old, new = dict(figures_in(old)), dict(figures_in(new))
    return [f"{key}: {old.get(key, '(missing)')} -> {new.get(key, '(gone)')}"
            for key in {**old, **new} if old.get(key) != new.get(key)]


def figures_in(figures, where=""):
    """(where, the figure as JSON) for every number and string of a trace."""
    if isinstance(figures, dict):
        for key, value in figures.items():
            yield from figures_in(value, f"{where}.{key}" if where else key)
    elif isinstance(figures, list):
        for n, value in enumerate(figures):
            yield from figures_in(value, f"{where}[{n}]")
    else:
        yield where, json.dumps(figures, ensure_ascii=False)


################ Pictures (python3 trace_block.py --show)

# Shades, each cut about half the last and none on an even share 1/n (0.075 lies between 1/13
# and 1/14, say), so that a nearly even row gets one shade all along.
SHADES = ((0.6, "█"), (0.3, "▓"), (0.15, "▒"), (0.075, "░"), (0.0, " "))
MASKED = "·"        # drawn where a weight is exactly 0.0: what the mask gives j > i
# Stand-ins where the terminal lacks these (a Windows console); others become \x.. or \u..
PLAIN = str.maketrans({**dict(zip("█▓▒░·│×", "#%+-.|x")), "≥": ">=", "ε": "eps"})


def ascii_stand_in(error):
    text = error.object[error.start:error.end].translate(PLAIN)
    return text.encode("ascii", "backslashreplace").decode(), error.end


codecs.register_error("trace_block", ascii_stand_in)


def caption(text):
    """The sentence under a picture, wrapped to 80 columns."""
    return textwrap.fill(text, 80, initial_indent="Notice: ", subsequent_indent="  ")


def show_gaps(p, tok):
    """Picture 1: the gap at each position, without and with position embeddings, to 4
    places, as block-trace.json records those without."""
    tokens_a, tokens_b = tok.tokens(ORDER_A), tok.tokens(ORDER_B)
    without, with_ = exact_gaps(p, tok, False), exact_gaps(p, tok, True)
    w = max(len(bpe.shown(t)) for t in tokens_a + tokens_b)
    print("The order experiment: the largest score gap between the two sentences")
    print(f"  a = {bpe.shown(ORDER_A)}   b = {bpe.shown(ORDER_B)}")
    print(f"{'pos  token a / token b':{8 + 2 * w}}  without positions  with positions")
    for t, (a, b, gap0, gap1) in enumerate(zip(tokens_a, tokens_b, without, with_)):
        print(f"{t:>3}  {bpe.shown(a):<{w}} / {bpe.shown(b):<{w}}  {round(gap0, 4):>17}  "
              f"{round(gap1, 4):>14}")
    print(caption(gaps_caption(without, with_)))


def gaps_caption(without, with_):
    """What the gap table shows, read off its gaps.

    >>> gaps_caption([0.0, 0.3, 0.1], [0.0, 0.2, 0.01])
    "without position embeddings, the last position's gap is 0.1: something sees the order."
    """
    if without[-1] != 0.0:
        return (f"without position embeddings, the last position's gap is "
                f"{without[-1]:.4g}: something sees the order.")
    return ("without position embeddings, the last position's gap is exactly 0.0: both "
            "sentences hold the same tokens and every sum is correctly rounded (math.fsum), "
            f"so their order is invisible there; with them, it is {round(with_[-1], 6)}.")


def cell(weight):
    """The two characters of an attention weight's cell: MASKED for exactly 0.0, else a shade.

    >>> cell(1.0), cell(0.5), cell(0.25), cell(0.111), cell(0.01), cell(0.0)
    ('██', '▓▓', '▒▒', '░░', '  ', ' ·')
    """
    if weight == 0.0:
        return " " + MASKED
    return 2 * next(shade for cut, shade in SHADES if weight >= cut)


def show_attention(p, tok):
    """Picture 2: the attention weights of ORDER_A as a shaded T×T grid, tokens on the axes."""
    tokens = tok.tokens(ORDER_A)
    weights = model.forward(p, tok.encode(ORDER_A))[1]["att"]["weights"]     # (T, T)
    w = max(len(bpe.shown(t)) for t in tokens)
    print(f"\nAttention weights of a = {bpe.shown(ORDER_A)}, at initialization")
    print("  row i is the position that looks, column j the one it looks at (row j's token)")
    scale = ", ".join(f"{shade} ≥ {cut}" for cut, shade in SHADES[:-1])
    print(f"  shades: {scale}, blank below; {MASKED} = exactly 0")
    columns = "".join(f"{j:>2}" for j in range(len(tokens)))
    print(f"{'':{5 + w}} {columns}    sum  1/(i+1)     min     max")
    for i, (token, row) in enumerate(zip(tokens, weights)):
        seen = row[:i + 1]
        print(f"{i:>3}  {bpe.shown(token):<{w}}│{''.join(map(cell, row))}│ "
              f"{math.fsum(row):.4f}  {1 / (i + 1):.4f}  {min(seen):.4f}  {max(seen):.4f}")
    print(caption(attention_caption(weights)))


def attention_caption(weights):
    """What the attention grid shows, read off its weights.

    >>> attention_caption([[1.0, 0.0], [0.5, 0.5]])[:40]
    'every cell above the diagonal is ·, a we'
    """
    ahead = [w for i, row in enumerate(weights) for w in row[i + 1:] if w != 0.0]
    if ahead:
        return (f"{len(ahead)} cells above the diagonal carry weight: the causal mask leaks, "
                f"and a position sees tokens that come after it.")
    return (f"every cell above the diagonal is {MASKED}, a weight of exactly 0: no position "
            f"looks at a later one. Compare each row's min and max with 1/(i+1): at the "
            f"start, the weights are nearly even.")


################ Command line

QUESTION = """\
The order experiment: "{a}" and "{b}"
hold the same tokens in another order. Before you look, predict: at which positions
do their scores differ without position embeddings, and does the last position differ
with them? Then look: python3 trace_block.py --show"""
FLAGS = {"--show": "draw the order experiment and the attention weights",
         "--json": "print the whole trace, as block-trace.json holds it",
         "--check": "exit 1 if block-trace.json differs from a fresh trace, naming each "
                    "figure that moved (old -> new)",
         "--write": "rewrite block-trace.json from a fresh trace, after a deliberate change"}


def main(argv=None):
    """Run the command line; return the exit code (a lab file's problem: one line, exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    flags = parser.add_mutually_exclusive_group()
    for flag, text in FLAGS.items():
        flags.add_argument(flag, action="store_true", help=text)
    return bpe.run_reporting_problems(lambda: run(parser.parse_args(argv)), errors="trace_block")


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    if args.write:
        figures = trace()
        if figures["gradient_check"]["max_error_rounded"] != 0.0:     # a broken model
            return bpe.report(f"{TRACE_FILE.name} is left as it is: the gradient check fails; "
                              f"python3 -m unittest -v test_model.py names the function")
        bpe.write_texts({TRACE_FILE: to_json(figures)})
        print(f"wrote {TRACE_FILE.name}")
    elif args.check:
        ok, message = check()
        print(message, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    elif args.show:
        tok = load_tokenizer()
        p = build(tok, SERIES)
        show_gaps(p, tok)
        show_attention(p, tok)
    elif args.json:
        print(to_json(trace()), end="")
    else:
        figures = trace()
        print("\n".join(summary(figures)))
        ok, message = check(figures=figures)
        if " -> " in message:           # figures moved: --check lists them
            message = (f"{TRACE_FILE.name} holds other figures: python3 trace_block.py "
                       f"--check says which.")
        print(f"\n{message}\n\n{QUESTION.format(a=ORDER_A, b=ORDER_B)}")
    return 0


################ Input checks (you can skip this section)

def check_sentences(tok, name, hint=""):
    """tok, if it encodes the trace's sentences to lengths the trace can use; if not, one
    line that calls it name and ends with hint."""
    if not isinstance(tok, Tokenizer):      # trace("a story ...") gives the story as tok
        raise TypeError(f"{name} is a {type(tok).__name__}: a story goes in story=")
    try:
        lengths = [len(tok.encode(s)) for s in (ORDER_A, ORDER_B, GRADIENT_SENTENCE)]
    except ValueError as error:
        raise FileProblem(f"{name} cannot encode the trace's sentences: {error}{hint}") from None
    most = TINY["max_len"] + 1      # the small copy reads its positions, plus one
    if lengths[0] != lengths[1] or lengths[2] > most:
        raise FileProblem(f"{name} gives the order sentences {lengths[0]} and {lengths[1]} "
                          f"tokens, {GRADIENT_SENTENCE!r} {lengths[2]}: the trace needs the "
                          f"first two equal, the third at most {most}{hint}")
    return tok


def encode_story(tok, story, where):
    """The story's token IDs, refusing a story the tokenizer or the trace cannot take."""
    try:
        ids = tok.encode(story)
    except ValueError as error:         # a hand edit of corpus.txt, say
        raise FileProblem(f"{where}: {error} (python3 bpe.py --check compares "
                          f"tokenizer.json with corpus.txt)") from None
    most = SERIES["max_len"] + 1        # the model reads all the story but its last token
    if not 2 <= len(ids) <= most:
        raise FileProblem(f"{where} holds {len(ids)} of the tokenizer's tokens; the trace "
                          f"reads all but the last, so it needs from 2 to {most}")
    return ids


if __name__ == "__main__":
    sys.exit(main())
