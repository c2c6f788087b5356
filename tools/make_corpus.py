"""Write corpus.txt, tools/quotas.json and tokenizer.json so that the lab's trace stays the
lesson's, byte for byte, or write nothing and say why (tools/README.md says how). From the lab:
    python3 tools/make_corpus.py            write the three files, searching when needed
    python3 tools/make_corpus.py --check    exit 1 unless they are what this program writes
"""
import argparse
import json
import os
import random
import re
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, ROOT)

import bpe           # noqa: E402  (the lab's modules live one folder up)
import trace_block   # noqa: E402

STORIES_PATH = os.path.join(TOOLS, "stories.txt")
PLOTS_PATH = os.path.join(TOOLS, "plots.txt")
QUOTAS_PATH = os.path.join(TOOLS, "quotas.json")


################ What the lesson pins

FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, mia gives the hat "
               "to ava. now ava has the red hat.")
# "." is 4 and "n" 16 only with exactly this alphabet: the letters without f, j, q and x.
ALPHABET = "\n ',.abcdeghiklmnoprstuvwyz"
# Every sentence whose token IDs the trace or a test reads, split as the lesson's tokenizer
# splits it; IDS gives each token's ID. Together they pin every ID those read: the first
# story's (its loss, layer norm's row 0), the order test's, and the gradient check's.
SPLITS = {FIRST_STORY + "\n": "mia| has| a| red| hat|.| mia| goes| to| the| g|ar|d|en|.| at| the| "
                              "g|ar|d|en|,| mia| gives| the| hat| to| ava|.| now| ava| has| the| "
                              "red| hat|.|\n",
          "now mia gives the hat to leo.": "n|ow| mia| gives| the| hat| to| leo|.",
          "now leo gives the hat to mia.": "n|ow| leo| gives| the| hat| to| mia|.",
          "mia has a red ball.": "mia| has| a| red| b|a|ll|."}
IDS = {"\n": 0, ",": 3, ".": 4, "a": 5, "d": 8, "n": 16, " a": 29, " the": 30, " b": 32,
       " g": 36, " to": 37, "ow": 40, " has": 46, " gives": 50, "ll": 53, " ava": 56,
       " mia": 65, "en": 66, "ar": 67, " leo": 70, " hat": 79, " now": 80, " at": 81,
       " red": 85, "mia": 89, " goes": 91}
# The figures of the lesson's block-trace.json that depend on the token IDs.
LESSON = {"story_tokens": 37, "initial_loss": 4.5805, "layernorm_row0": {"mean": 0.0,
          "variance": 0.9852}, "gradient_check": {"config": trace_block.TINY,
          "parameters_checked": 1060, "max_error_rounded": 0.0}}
LESSON_GAPS = {"last_logit_gap_without_positions": 0.0, "last_logit_gap_with_positions": 0.001282,
               "gaps_by_position_without_positions": [0.0, 0.0, 0.3037, 0.0149, 0.0137, 0.0125,
                                                      0.0232, 0.3097, 0.0]}


################ The plots and their words (tools/plots.txt)

N_STORIES = 300      # stories generated from the plots
PLOT_SEED = 19       # picks the plots' order and each sentence's wording
FIELD = re.compile(r"\{(\w+)(?:\.(he|his|him))?(?::(\w+):(\w+):(\w+))?\}")
PRONOUNS = {"he": ("he", "she"), "his": ("his", "her"), "him": ("him", "her")}
GIVE_FORMS = {"gives-to": "{x} gives the {t} to {y}.", "gives-y": "{x} gives {y} the {t}.",
              "hands-to": "{x} hands the {t} to {y}.", "hands-y": "{x} hands {y} the {t}."}
FIELD_KINDS = {"a": "kid", "b": "kid", "g": "grown", "c": "colour", "d": "colour", "o": "thing",
               "p": "thing", "pl": "place", "at": "at", "go": "go", "gives": "gives",
               "give": "give", "now": "now", "has": "has"}
PAIRS = (("a", "b"), ("c", "d"), ("o", "p"))     # the two fields of a pair never say one word


def read_plots(path=PLOTS_PATH):
    """(plots, kinds, she): plots as (name, weight, [[ways of saying sentence 1], ...]), kinds
    as kind -> (steered words, other words), and the names that take "she"."""
    plots, kinds, she = [], {}, ()
    with open(path, encoding="utf-8-sig", errors="replace") as file:   # a BOM is dropped
        for number, line in enumerate(file, 1):                         # a bad byte: "\ufffd"
            line, where = line.rstrip("\n"), f"{os.path.relpath(path)} line {number}"
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith("@"):
                kind, _, words = line[1:].partition(" ")
                steered, _, others = words.partition("|")
                others = ["" if w == "-" else w for w in others.split()]
                if kind == "she":
                    she = tuple(steered.split())
                elif not others:
                    raise ValueError(f"{where}: a kind needs other words after '|'")
                else:
                    kinds[kind] = (steered.split(), others)
            elif m := re.fullmatch(r"== (\w+)(?: (\d+))? *", line):
                plots.append((m[1], min(int(m[2] or 1), N_STORIES), []))
            elif line.startswith("=="):
                raise ValueError(f"{where}: a plot starts with '== name' or '== name weight', "
                                 f"its weight a whole number")
            elif not plots:
                raise ValueError(f"{where}: a sentence before the first '== name' line")
            else:
                ways = line.split(" | ")
                bad = sorted({c for way in ways for c in FIELD.sub("", way)} - set(ALPHABET))
                unknown = sorted({m[0] for m in FIELD.findall(line)} - set(FIELD_KINDS))
                if bad or unknown or any(not way.strip() for way in ways):
                    raise ValueError(f"{where}: " + (f"characters outside the alphabet {bad}"
                                     if bad else f"unknown fields {unknown}" if unknown
                                     else "an empty way of saying a sentence"))
                plots[-1][2].append(ways)
    missing = sorted((set(FIELD_KINDS.values()) | {"lead", "callee"}) - set(kinds))
    if missing or not any(weight for _, weight, _ in plots):     # a weight of 0 leaves a plot out
        raise ValueError(f"{os.path.relpath(path)}: " + (
            f"no word list for {missing}" if missing else "no plot of weight 1 or more"))
    return plots, kinds, she


def kinds_of(template):
    """Each field of a template -> its kind; a child named first fills a "lead" slot, one
    called at the start of something said ('{a}, ...') a "callee" slot."""
    found = {}
    for name, _, x, t, y in FIELD.findall(template):
        for field in [name] + ([x, t, y] if name == "give" else []):
            kind = FIELD_KINDS.get(field)
            lead, callee = template.startswith("{%s}" % field), "'{%s}" % field in template
            if kind == "kid" and (lead or callee):
                kind = "lead" if lead else "callee"
            if kind:
                found.setdefault(field, kind)
    return found


class Filler:
    """Fills the templates' slots from quotas (quota name "kind:word" -> how many slots)."""

    def __init__(self):
        plots, self.kinds, self.she = read_plots()
        rng, order = random.Random(PLOT_SEED), []      # the N_STORIES plots in a fixed order
        while len(order) < N_STORIES:
            round_ = [plot for plot in plots for _ in range(plot[1])]
            rng.shuffle(round_)
            order += round_
        self.templates = [" ".join(rng.choice(ways) for ways in plot[2])
                          for plot in order[:N_STORIES]]
        self.fields = [kinds_of(t) for t in self.templates]
        self.slots = {kind: [] for kind in self.kinds}      # kind -> [(story, field)]
        for i, fields in enumerate(self.fields):
            for field, kind in fields.items():
                self.slots[kind].append((i, field))
        self.names = [f"{kind}:{word}" for kind, (steered, _) in self.kinds.items()
                      for word in steered]
        # each kind's slots go to the quotas in a fixed shuffled order, lead slots whose child
        # is named fewer times first (tools/README.md says why)
        self.order = {}
        for kind, slots in self.slots.items():
            self.order[kind] = list(range(len(slots)))
            random.Random(kind).shuffle(self.order[kind])
            if kind == "lead":
                self.order[kind].sort(key=lambda j: self.templates[slots[j][0]].count(
                    "{%s}" % slots[j][1]))

    def fit(self, quotas):
        """The quotas within 0 and the kind's slots (its last steered word gives way first)."""
        quotas = {name: max(0, quotas.get(name, 0)) for name in self.names}
        for kind, (steered, _) in self.kinds.items():
            excess = sum(quotas[f"{kind}:{w}"] for w in steered) - len(self.slots[kind])
            for word in reversed(steered):
                cut = min(max(excess, 0), quotas[f"{kind}:{word}"])
                quotas[f"{kind}:{word}"], excess = quotas[f"{kind}:{word}"] - cut, excess - cut
        return quotas

    def stories(self, quotas):
        """The generated stories, their slots filled by quota."""
        values = [{} for _ in self.templates]
        for kind, (steered, others) in self.kinds.items():
            words = [others[j % len(others)] for j in range(len(self.slots[kind]))]
            chosen = [word for word in steered for _ in range(quotas[f"{kind}:{word}"])]
            for j, word in zip(self.order[kind], chosen):
                words[j] = word
            for (i, field), word in zip(self.slots[kind], words):
                values[i][field] = word
        self.make_pairs_differ(values)
        return [self.render(t, v) for t, v in zip(self.templates, values)]

    def make_pairs_differ(self, values):
        """Where the two fields of a pair (two children, colours or things) got one word, swap
        the second with the same kind's word of another story (counts stay as they were)."""
        for i, fields in enumerate(self.fields):
            for first, second in PAIRS:
                if second not in fields or values[i].get(first) != values[i][second]:
                    continue
                for j, other in self.slots[fields[second]]:
                    mine, theirs = values[i], values[j]
                    if j != i and theirs[other] != mine[first] and mine[second] not in [
                            theirs[f] for f in self.fields[j] if f != other and
                            FIELD_KINDS[f] == FIELD_KINDS[other]]:
                        mine[second], theirs[other] = theirs[other], mine[second]
                        break

    def render(self, template, values):
        def fill(match):
            name, pronoun, x, t, y = match.groups()
            if name == "give":
                thing = "{%s}" % t if t in FIELD_KINDS else t
                return GIVE_FORMS[values["give"]].format(x="{%s}" % x, t=thing, y="{%s}" % y)
            if name == "now":
                return values["now"] + " " if values["now"] else ""
            if pronoun:
                return PRONOUNS[pronoun][values[name] in self.she]
            return values[name]
        return FIELD.sub(fill, FIELD.sub(fill, template))   # twice: a give holds fields


################ The stories of tools/stories.txt, and the corpus

def read_stories(path=STORIES_PATH):
    """The hand-written stories, checked line by line; a bad line stops the program."""
    stories = []
    with open(path, encoding="utf-8-sig", errors="replace") as file:   # a BOM is dropped
        for number, line in enumerate(file, 1):                         # a bad byte: "\ufffd"
            story, where = line.rstrip("\n"), f"{os.path.relpath(path)} line {number}"
            if not story.strip() or story.startswith("#"):
                continue
            bad = [word for word in story.split(" ") if set(word) - set(ALPHABET)]
            problem = (f"{', '.join(map(repr, bad))}: a story is written in lower case a to z "
                       f"without f, j, q and x, with spaces, commas, full stops and apostrophes"
                       if bad else "spaces at the story's ends or two in a row"
                       if story != " ".join(story.split()) else "a story ends with a full stop"
                       if not story.endswith(".") else "")
            if problem:
                raise ValueError(f"{where}: {problem}")
            stories.append(story)
    return stories


def assemble(generated, extra):
    """The corpus text, one story per line: the first story, the generated stories, then the
    hand-written ones (so that adding or removing one moves no other line)."""
    return "\n".join([FIRST_STORY] + generated + extra) + "\n"


def pinned_errors(text, size=bpe.VOCAB_SIZE):
    """Each pinned token -> its trained ID minus the lesson's (100: not a token), whether the
    sentences split as SPLITS says, the tokenizer, and the merge counts of size tokens."""
    vocab, merges, counts = bpe.learn_merges(text, size)
    ids = {token: i for i, token in enumerate(vocab[:bpe.VOCAB_SIZE])}
    errors = {token: ids.get(token, 100) - want for token, want in IDS.items()}
    tok = bpe.Tokenizer(vocab[:bpe.VOCAB_SIZE],
                        [(vocab[a], vocab[b]) for a, b in merges[:bpe.VOCAB_SIZE - len(ALPHABET)]])
    splits = all(tok.tokens(s) == want.split("|") for s, want in SPLITS.items()
                 if not set(s) - set(vocab))
    return errors, splits, tok, dict(zip(vocab[len(vocab) - len(counts):], counts))


def verify(text):
    """Everything promised, checked with bpe.py and trace_block.py: (problems, the tokenizer)."""
    if set(text) != set(ALPHABET):
        return [f"the corpus does not use every character of {ALPHABET!r}"], None
    errors, splits, tok, _ = pinned_errors(text)
    wrong = [f"{token!r} {IDS[token] + e if e < 100 - IDS[token] else 'not a token'} (the "
             f"lesson's {IDS[token]})" for token, e in errors.items() if e]
    if wrong or not splits:
        return ["token IDs: " + ", ".join(wrong) if wrong else
                "a pinned sentence splits into other tokens than SPLITS says"], tok
    figures = trace_block.trace(tok, FIRST_STORY + "\n")
    want = dict(LESSON, order_test=dict(figures["order_test"], **LESSON_GAPS))
    return [f"the trace's {key} is {json.dumps(figures[key])}, the lesson's {json.dumps(value)}"
            for key, value in want.items() if figures[key] != value], tok


################ The search

LOOK_PAST = 24       # merges past the vocabulary the search watches (tokens about to enter it)
REACH = 12           # how far one step moves a quota (the model is straight only nearby)
MARGIN = 3           # counts a pinned token's merge keeps from its neighbours', where it can
BUDGET = 4000        # tokenizers the search trains before it gives up


class Search:
    """Moves the quotas until every pinned ID is right, as tools/README.md describes."""

    def __init__(self, filler, extra):
        self.filler, self.extra, self.seen = filler, extra, {}

    def measure(self, quotas):
        """(score, errors, counts) of a setting: a smaller score is better, 0 first: all right."""
        key = tuple(sorted(quotas.items()))
        if key not in self.seen:
            text = assemble(self.filler.stories(quotas), self.extra)
            errors, splits, _, counts = pinned_errors(text, bpe.VOCAB_SIZE + LOOK_PAST)
            off, margins = self.gaps(counts)
            wrong = sum(e != 0 for e in errors.values()) + 30 * (not splits)
            wrong = wrong and wrong + off       # 0: every pinned token in place
            self.seen[key] = ((wrong, -margins), errors, counts)
        return self.seen[key]

    @staticmethod
    def gaps(counts):
        """How many counts the pinned tokens' merges lack or exceed, in all, to come at their
        IDs, and the margins of those in place (each at most MARGIN); a tie to the earlier."""
        order = sorted(counts, key=lambda t: -counts[t])
        where, off, margins = {t: i for i, t in enumerate(order)}, 0, 0
        for token, want in IDS.items():
            k, p = want - len(ALPHABET), where.get(token, len(order))
            if k < 0:
                continue
            def other(i):           # the count i-th in order without this token
                i += i >= p
                return counts[order[i]] if i < len(order) else 0
            c, high, low = counts.get(token, 0), other(k - 1) if k else 1e9, other(k)
            off += max(0, c - high + 1) + max(0, low - c + 1)
            margins += min(MARGIN, high - c, c - low) if low < c < high else 0
        return off, margins

    def effects(self, quotas):
        """How each quota's next slot changes each token's merge count, measured around quotas."""
        base, effects = self.measure(quotas)[2], {}
        for name in self.filler.names:
            for move in (REACH // 2, -REACH // 2):
                moved = self.filler.fit({**quotas, name: quotas[name] + move})
                if moved[name] != quotas[name]:
                    counts, d = self.measure(moved)[2], moved[name] - quotas[name]
                    effects[name] = [(t, (counts[t] - base[t]) / d) for t in base
                                     if t in counts and counts[t] != base[t]]
                    break
        return effects

    def step(self, quotas, effects):
        """The setting the straight-line model of the quotas' effects calls best near quotas."""
        base = self.measure(quotas)[2]
        def value(counts):  # noqa: E306
            off, margins = self.gaps({t: c for t, c in counts.items() if c > 0})
            return off * 10 - margins
        best, counts, score = quotas, dict(base), value(base)
        for _ in range(100):
            tries = []
            for name in effects:
                for d in (1, -1, 2, -2, 4, -4, 8, -8):
                    q = self.filler.fit({**best, name: best[name] + d})
                    if q[name] != best[name] + d or abs(q[name] - quotas[name]) > REACH:
                        continue
                    moved = dict(counts)
                    for n in effects:
                        for t, e in effects[n] if q[n] != best[n] else ():
                            moved[t] = moved.get(t, 0) + e * (q[n] - best[n])
                    tries.append((value(moved), q, moved))
            if not tries or min(t[0] for t in tries) >= score:
                return best
            score, best, counts = min(tries, key=lambda t: t[0])
        return best

    def run(self, quotas, seed=1):
        """The best setting found from quotas, and its measure."""
        rng, closest, effects = random.Random(seed), (self.measure(quotas)[0], quotas), None
        while closest[0][0] and len(self.seen) < BUDGET:
            effects = effects or self.effects(quotas)   # measured again where the model failed
            here, target = self.measure(quotas)[0], self.step(quotas, effects)
            halfway = self.filler.fit({n: (quotas[n] + v) // 2 for n, v in target.items()})
            q = target if self.measure(target)[0] < here else halfway
            if self.measure(q)[0] >= here:
                q = min((self.filler.fit({**quotas, n: quotas[n] + d}) for n in self.filler.names
                         for d in (1, -1, 2, -2)), key=lambda q: self.measure(q)[0])
            if self.measure(q)[0] >= here:
                kick = {n: closest[1][n] + rng.choice((-3, -2, 2, 3))
                        for n in rng.sample(self.filler.names, 2)}
                q = self.filler.fit({**closest[1], **kick})
            quotas, effects = q, effects if q is target else None
            closest = min(closest, (self.measure(q)[0], q), key=lambda c: c[0])
            print(f"  {len(self.seen)} tried: {self.describe(self.measure(q)[1])}")
        return closest[1], self.measure(closest[1])

    @staticmethod
    def describe(errors):
        return ", ".join(f"{t!r} {e:+d}" for t, e in errors.items() if e) or "every pinned ID right"


################ Command line

def read_quotas(path=QUOTAS_PATH):
    """The stored quotas ({} without the file)."""
    try:
        quotas = json.loads(read(path) or '{"quotas": {}}')["quotas"]
        if all(type(v) is int for v in quotas.values()):
            return quotas
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        pass
    raise ValueError(f"{os.path.relpath(path)} is not a file this program wrote; delete it and "
                     f"run python3 tools/make_corpus.py")


def quotas_json(quotas, filler):
    return json.dumps({"note": "written by tools/make_corpus.py: how many slots of each kind "
                       "hold each steered word; the search starts from here", "quotas": quotas,
                       "slots": {k: len(filler.slots[k]) for k in filler.kinds}}, indent=2) + "\n"


def read(path):
    return bpe.read_text(path) if os.path.exists(path) else None


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write corpus.txt, tools/quotas.json and tokenizer.json from the plots and "
                    "stories in tools/, keeping the token IDs the lesson's trace reads.",
        epilog="see tools/README.md", allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 unless "
                        "corpus.txt, quotas.json and tokenizer.json are what this writes")
    return bpe.run_reporting_problems(lambda: run(parser.parse_args(argv)))   # as bpe.main


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    started = time.perf_counter()
    try:
        extra, filler, quotas = read_stories(), Filler(), read_quotas()
    except (OSError, ValueError) as error:
        return bpe.report(f"make_corpus{' --check' * args.check}: {error}"
                          + "; nothing was written" * (not args.check))
    quotas = filler.fit(quotas)
    text = assemble(filler.stories(quotas), extra)
    problems, tok = verify(text)
    if problems and args.check:
        return bpe.report(f"make_corpus --check: the stored quotas no longer keep the lesson's "
                          f"IDs ({problems[0]}); run: python3 tools/make_corpus.py")
    if problems:
        print(f"the stored quotas do not keep the lesson's IDs ({problems[0]}); searching")
        search = Search(filler, extra)
        quotas, ((wrong, _), errors, _) = search.run(quotas)
        text = assemble(filler.stories(quotas), extra)
        problems, tok = ([Search.describe(errors) + " (+: the token comes too late, its words "
                          "too rare; -: too soon)"], None) if any(errors.values()) else verify(text)
        if problems:
            return bpe.report(
                f"make_corpus: nothing was written: after {len(search.seen)} tries, the closest "
                f"quotas leave: {problems[0]}. Undo the last change to tools/stories.txt or "
                "plots.txt, or make it another way (a story shorter or reworded; a removal with "
                "another story added or removed too), and run python3 tools/make_corpus.py "
                "again; the pinned sentences' words (mia, leo, ava, has, gives, goes, to, the, "
                "now, at, red, hat) move the lesson's IDs most.")
    files = {bpe.CORPUS_PATH: text, QUOTAS_PATH: quotas_json(quotas, filler),
             bpe.TOKENIZER_PATH: tok.to_json()}
    if args.check:
        stale = [os.path.relpath(p, ROOT) for p, t in files.items() if read(p) != t]
        if stale:
            return bpe.report(f"make_corpus --check: not what tools/make_corpus.py writes: "
                              f"{', '.join(stale)}; run: python3 tools/make_corpus.py")
        print(f"corpus.txt, tools/quotas.json and tokenizer.json are what tools/make_corpus.py "
              f"writes, with the lesson's IDs and figures ({time.perf_counter() - started:.1f} s)")
        return 0
    bpe.write_texts(files)          # all three, or (a failed write) none
    print(f"wrote corpus.txt ({text.count(chr(10))} stories, {len(extra)} from "
          f"tools/stories.txt), tools/quotas.json and tokenizer.json, with the lesson's IDs and "
          f"figures, in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
