"""Write corpus.txt, tools/quotas.json and tokenizer.json so that the lesson's sentences keep
their token IDs, or write nothing and say why (tools/README.md says how). From the lab:
    python3 tools/make_corpus.py            write the three files, searching when needed
    python3 tools/make_corpus.py --check    exit 1 unless they are what this program writes
"""
import argparse
import json
import os
import random
import re
import sys

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, ROOT)

import bpe           # noqa: E402  (the lab's modules live one folder up)

STORIES_PATH = os.path.join(TOOLS, "stories.txt")
PLOTS_PATH = os.path.join(TOOLS, "plots.txt")
QUOTAS_PATH = os.path.join(TOOLS, "quotas.json")


################ What the lesson pins

FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, "
               "mia gives the hat to ava. now ava has the red hat.")
ALPHABET = "\n ',.abcdeghiklmnoprstuvwyz"     # "." is 4 and "n" 16 only with exactly these
# The sentences whose IDs the trace and the tests read, split as the lesson's tokenizer does.
SPLITS = {
    FIRST_STORY + "\n":
        "mia| has| a| red| hat|.| mia| goes| to| the| g|ar|d|en|.| at| the|"
        " g|ar|d|en|,| mia| gives| the| hat| to| ava|.| now| ava| has| the|"
        " red| hat|.|\n",
    "now mia gives the hat to leo.": "n|ow| mia| gives| the| hat| to| leo|.",
    "now leo gives the hat to mia.": "n|ow| leo| gives| the| hat| to| mia|.",
    "mia has a red ball.": "mia| has| a| red| b|a|ll|.",
}
IDS = {"\n": 0, ",": 3, ".": 4, "a": 5, "d": 8, "n": 16, " a": 29, " the": 30, " b": 32,
       " g": 36, " to": 37, "ow": 40, " has": 46, " gives": 50, "ll": 53, " ava": 56,
       " mia": 65, "en": 66, "ar": 67, " leo": 70, " hat": 79, " now": 80, " at": 81,
       " red": 85, "mia": 89, " goes": 91}


################ The generated stories (tools/plots.txt says how to write a plot)

N_STORIES = 300      # stories generated from the plots
PLOT_SEED = 19       # picks the plots' order and each sentence's wording
FIELD = re.compile(r"\{(\w+)(?:\.(he|his|him))?(?::(\w+):(\w+):(\w+))?\}")
SHE = {"he": "she", "his": "her", "him": "her"}
GIVE_FORMS = {"gives-to": "{x} gives the {t} to {y}.", "gives-y": "{x} gives {y} the {t}.",
              "hands-to": "{x} hands the {t} to {y}.", "hands-y": "{x} hands {y} the {t}."}
FIELD_KINDS = {"a": "kid", "b": "kid", "g": "grown", "c": "colour", "d": "colour",
               "o": "thing", "p": "thing", "pl": "place", "at": "at", "go": "go",
               "gives": "gives", "give": "give", "now": "now", "has": "has"}
PAIRS = [("a", "b"), ("c", "d"), ("o", "p")]   # a pair's two fields never say one word


def check_present(path):
    """Refuse a missing file of tools/, saying where to take it from; return that advice, for
    a file found damaged."""
    name = f"tools/{os.path.basename(path)}"
    advice = f"take {name} from the lab's archive (or git checkout {name})"
    if not os.path.exists(path):
        raise bpe.FileProblem(f"cannot read {os.path.relpath(path)}: no such file: {advice}")
    return advice


def lines_of(path):
    """(where, line) for each line that is not empty or a comment, of a file in UTF-8
    without a byte-order mark (bpe.read_text refuses another, saying how to save it)."""
    advice = check_present(path)
    text = bpe.read_text(path)
    if not text.strip():        # cut short, say (a file of no stories keeps its comments)
        raise bpe.FileProblem(f"{os.path.relpath(path)} is empty: {advice}")
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            yield f"{os.path.relpath(path)} line {number}", line


def read_plots(path=PLOTS_PATH):
    """(plots, kinds, she): plots as (name, weight, [[ways of saying sentence 1], ...]), kinds
    as kind -> (steered words, other words), she the names that take "she"."""
    plots = []
    kinds = {}
    she = []
    for where, line in lines_of(path):
        if line.startswith("@"):
            kind, _, words = line[1:].partition(" ")
            steered, _, others = words.partition("|")
            others = ["" if word == "-" else word for word in others.split()]
            if kind == "give" and set(steered.split() + others) - set(GIVE_FORMS):
                raise bpe.FileProblem(f"{where}: give's words are among {', '.join(GIVE_FORMS)}")
            bad = sorted(set("".join(steered.split() + others)) - set(ALPHABET))
            if bad and kind != "give":          # give's words name GIVE_FORMS
                raise bpe.FileProblem(f"{where}: characters outside the alphabet {bad}")
            if kind in kinds:
                raise bpe.FileProblem(f"{where}: a second word list for {kind}")
            if kind == "she":
                she = steered.split()
            elif not others:
                raise bpe.FileProblem(f"{where}: a kind needs other words after '|'")
            else:
                kinds[kind] = (steered.split(), others)
        elif line.startswith("=="):
            match = re.fullmatch(r"== (\w+)(?: (\d+))? *", line)
            if not match:
                raise bpe.FileProblem(f"{where}: a plot starts with '== name' or "
                                      f"'== name weight', its weight a whole number")
            plots.append((match[1], min(int(match[2] or 1), N_STORIES), []))
        elif not plots:
            raise bpe.FileProblem(f"{where}: a sentence before the first '== name' line")
        else:
            ways = [way.strip() for way in line.split("|")]     # the ways of saying a sentence
            bad = sorted(set("".join(FIELD.sub("", way) for way in ways)) - set(ALPHABET))
            if bad:
                raise bpe.FileProblem(f"{where}: characters outside the alphabet {bad}")
            unknown = sorted({match[0] for match in FIELD.findall(line)} - set(FIELD_KINDS))
            if unknown:
                raise bpe.FileProblem(f"{where}: unknown fields {unknown}")
            if not all(ways):
                raise bpe.FileProblem(f"{where}: an empty way of saying a sentence")
            unended = [way for way in ways if not re.search(r"(\.'?|\{give:[\w:]+\})$", way)]
            if unended:     # a give field ends with its own full stop
                raise bpe.FileProblem(f"{where}: {unended[0]!r}: a sentence ends with a "
                                      f"full stop")
            plots[-1][2].append(ways)
    missing = sorted({"lead", "callee", *FIELD_KINDS.values()} - set(kinds))
    if missing:
        raise bpe.FileProblem(f"{os.path.relpath(path)}: no word list for {missing}")
    empty = [name for name, _, sentences in plots if not sentences]
    if empty:
        raise bpe.FileProblem(f"{os.path.relpath(path)}: the plot {empty[0]} has no sentences")
    return plots, kinds, she


def kinds_of(template):
    """Each field of a template -> its kind; a child named first is "lead", called "callee"."""
    found = {}
    for name, _, x, t, y in FIELD.findall(template):
        for field in (name, x, t, y):       # x, t and y: the fields of a {give:x:t:y}
            kind = FIELD_KINDS.get(field)
            if kind == "kid" and template.startswith("{%s}" % field):
                kind = "lead"
            elif kind == "kid" and "'{%s}" % field in template:     # '{a}, ...': called
                kind = "callee"
            if kind:
                found.setdefault(field, kind)
    return found


class Filler:
    """Fills the templates' slots from quotas (quota name "kind:word" -> how many slots)."""

    def __init__(self, extra):
        self.extra = extra          # the hand-written stories
        plots, self.kinds, self.she = read_plots()
        rng = random.Random(PLOT_SEED)
        order = []              # rounds of the plots, each shuffled, up to N_STORIES
        if not any(weight for _, weight, _ in plots):
            raise bpe.FileProblem(f"{PLOTS_PATH}: every plot has weight 0")
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
        self.names = [f"{k}:{w}" for k, (steered, _) in self.kinds.items() for w in steered]
        # each kind's slots in a shuffled order; lead slots whose child the story names fewer
        # times first, so that the quota "lead:mia" moves "mia" more than " mia"
        self.order = {}
        for kind, slots in self.slots.items():
            self.order[kind] = list(range(len(slots)))
            random.Random(kind).shuffle(self.order[kind])
            if kind == "lead":
                mentions = [self.templates[i].count("{%s}" % field) for i, field in slots]
                self.order[kind].sort(key=lambda j: mentions[j])

    def fit(self, quotas):
        """The quotas within 0 and the kind's slots (its last steered word gives way first)."""
        fitted = {name: max(0, quotas.get(name, 0)) for name in self.names}
        for kind, (steered, _) in self.kinds.items():
            excess = sum(fitted[f"{kind}:{w}"] for w in steered) - len(self.slots[kind])
            for word in reversed(steered):
                cut = min(max(excess, 0), fitted[f"{kind}:{word}"])
                fitted[f"{kind}:{word}"] -= cut
                excess -= cut
        return fitted

    def corpus(self, quotas):
        """The corpus, one story a line: the first, the generated ones (steered words fill their
        quotas' slots, other words the rest), the hand-written ones (adding one moves no other)."""
        values = [{} for _ in self.templates]       # story -> field -> word
        for kind, (steered, others) in self.kinds.items():
            slots = self.slots[kind]
            words = [others[j % len(others)] for j in range(len(slots))]
            chosen = [word for word in steered for _ in range(quotas[f"{kind}:{word}"])]
            for j, word in zip(self.order[kind], chosen):
                words[j] = word
            for (i, field), word in zip(slots, words):
                values[i][field] = word
        for i, fields in enumerate(self.fields):
            for first, second in PAIRS:
                if second in fields and values[i].get(first) == values[i][second]:
                    self.swap(values, i, second, values[i][first])
        generated = [self.render(t, v) for t, v in zip(self.templates, values)]
        return "\n".join([FIRST_STORY] + generated + self.extra) + "\n"

    def swap(self, values, i, field, word):
        """Story i's field says word, as its pair's other field does: swap it, counts kept."""
        mine = values[i]
        for j, other in self.slots[self.fields[i][field]]:
            theirs = values[j]
            kind = FIELD_KINDS[other]
            if j == i or theirs[other] == word:
                continue
            said = [theirs[f] for f in self.fields[j] if f != other and FIELD_KINDS[f] == kind]
            if mine[field] not in said:
                mine[field], theirs[other] = theirs[other], mine[field]
                return

    def render(self, template, values):
        """The story: each field of the template replaced by its word."""
        def fill(match):
            name, pronoun, x, t, y = match.groups()
            word = values[name]
            if name == "give":          # a sentence with fields: the second pass fills them
                if t in FIELD_KINDS:
                    t = "{%s}" % t
                return GIVE_FORMS[word].format(x="{%s}" % x, t=t, y="{%s}" % y)
            if name == "now" and word:
                return word + " "
            if pronoun and word in self.she:
                return SHE[pronoun]
            return pronoun or word
        return FIELD.sub(fill, FIELD.sub(fill, template))


################ The hand-written stories, the corpus, its tokenizer

def read_stories(path=STORIES_PATH):
    """The hand-written stories, checked line by line; a bad line stops the program."""
    stories = []
    for where, story in lines_of(path):
        bad = [word for word in story.split(" ") if set(word) - set(ALPHABET)]
        if bad:
            words = ", ".join(map(repr, bad))
            raise bpe.FileProblem(f"{where}: {words}: a story is written in lower case a to z "
                                  f"without f, j, q and x, with spaces, commas, full stops "
                                  f"and apostrophes")
        if story != " ".join(story.split()):
            raise bpe.FileProblem(f"{where}: spaces at the story's ends or two in a row")
        if not story.endswith("."):
            raise bpe.FileProblem(f"{where}: a story ends with a full stop")
        stories.append(story)
    return stories


def train(text, size=bpe.VOCAB_SIZE):
    """(tokenizer, misplaced, split, counts) of text: each pinned token not at its ID -> its
    ID; whether SPLITS is right; each merge's count, up to size tokens."""
    vocab, merges, counts = bpe.learn_merges(text, size)
    base = len(vocab) - len(merges)         # the characters of the text
    pairs = [(vocab[a], vocab[b]) for a, b in merges[:bpe.VOCAB_SIZE - base]]
    tok = bpe.Tokenizer(vocab[:bpe.VOCAB_SIZE], pairs)
    ids = {token: i for i, token in enumerate(tok.vocab)}
    found = {t: ids.get(t, bpe.VOCAB_SIZE) for t in IDS}      # 96: not a token
    misplaced = {t: i for t, i in found.items() if i != IDS[t]}
    split = all(tok.tokens(s) == want.split("|") for s, want in SPLITS.items())
    return tok, misplaced, split, dict(zip(vocab[base:], counts))


################ The search (tools/README.md describes it)

LOOK_PAST = 24       # merges past the vocabulary the search watches (tokens about to enter it)
REACH = 8            # how far one step moves a quota (the model is straight only nearby)
MARGIN = 3           # counts a pinned token's merge keeps from its neighbours', where it can
BUDGET = 1500        # tokenizers the search trains before it gives up


class Search:
    """Moves the quotas until every pinned ID is right."""

    def __init__(self, filler):
        self.filler = filler
        self.seen = {}          # each setting trained -> its measure

    def measure(self, quotas):
        """(score, problem, counts) of a setting; the smaller score is better, 0 first."""
        key = tuple(sorted(quotas.items()))
        if key not in self.seen:
            text = self.filler.corpus(quotas)
            _, misplaced, split, counts = train(text, bpe.VOCAB_SIZE + LOOK_PAST)
            off, margins = gaps(counts)
            # what keeps the tokenizer from the lesson's IDs: "' hat' +1" (one ID too late)
            said = ", ".join(f"{t!r} {i - IDS[t]:+d}" for t, i in misplaced.items())
            wrong = len(misplaced)
            if not split:
                wrong += 30             # a sentence split otherwise weighs as 30 IDs wrong
                said = said or "a pinned sentence splits into other tokens than SPLITS says"
            if wrong:
                wrong += off            # 0 only when every pinned token is in place
            self.seen[key] = ((wrong, -margins), said, counts)
        return self.seen[key]

    def score(self, quotas):
        return self.measure(quotas)[0]

    def effects(self, quotas):
        """Quota name -> [(token, how one more slot changes its merge count)], near quotas."""
        base = self.measure(quotas)[2]
        effects = {}
        for name in self.filler.names:
            for move in (REACH // 2, -(REACH // 2)):
                moved = self.filler.fit({**quotas, name: quotas[name] + move})
                d = moved[name] - quotas[name]
                if d != 0 and name not in effects:
                    counts = self.measure(moved)[2]
                    effects[name] = [(t, (counts[t] - base[t]) / d) for t in base
                                     if t in counts and counts[t] != base[t]]
        return effects

    def step(self, quotas, effects):
        """The setting the straight-line model of the quotas' effects calls best near quotas:
        quotas moved by 1, 2, 4 or 8 at a time while the model's prediction improves."""
        best = quotas
        counts = dict(self.measure(quotas)[2])
        score = predicted(counts)
        for _ in range(100):
            tries = []
            for name in effects:
                for d in (1, -1, 2, -2, 4, -4, 8, -8):
                    q = self.filler.fit({**best, name: best[name] + d})
                    if q[name] != best[name] + d or abs(q[name] - quotas[name]) > REACH:
                        continue
                    moved = dict(counts)
                    for n in effects:
                        if q[n] == best[n]:
                            continue
                        for t, e in effects[n]:
                            moved[t] = moved.get(t, 0) + e * (q[n] - best[n])
                    tries.append((predicted(moved), q, moved))
            if not tries or min(t[0] for t in tries) >= score:
                return best
            score, best, counts = min(tries, key=lambda t: t[0])
        return best

    def run(self, quotas, seed=1):
        """The closest setting found from quotas, in the steps tools/README.md describes."""
        rng = random.Random(seed)
        closest = quotas
        effects = None
        while self.score(closest)[0] and len(self.seen) < BUDGET:
            if not effects:
                effects = self.effects(quotas)
            here = self.score(quotas)
            target = self.step(quotas, effects)
            q = target
            if self.score(q) >= here:
                q = self.filler.fit({n: (quotas[n] + v) // 2 for n, v in target.items()})
            if self.score(q) >= here:
                nudged = [self.filler.fit({**quotas, n: quotas[n] + d})
                          for n in self.filler.names for d in (1, -1, 2, -2)]
                q = min(nudged, key=self.score)
            if self.score(q) >= here:
                names = rng.sample(self.filler.names, 2)
                kick = {n: closest[n] + rng.choice((-3, -2, 2, 3)) for n in names}
                q = self.filler.fit({**closest, **kick})
            if q is not target:
                effects = None          # measured again where the model failed
            quotas = q
            if self.score(q) < self.score(closest):
                closest = q
            wrong = self.measure(q)[1] or "every pinned ID right"
            print(f"  {len(self.seen)} tried: {wrong}")
        return closest


def gaps(counts):
    """How many counts the pinned tokens' merges lack or exceed, in all, to come at their
    IDs, and the margins of those in place (each at most MARGIN); a tie to the earlier."""
    ranked = sorted(counts.values(), reverse=True)
    off = 0
    margins = 0
    for token, want in IDS.items():
        k = want - len(ALPHABET)        # its place among the merges
        if k < 0:
            continue                    # a character, not a merge
        c = counts.get(token, 0)
        rest = list(ranked)             # the other merges' counts, largest first
        if token in counts:
            rest.remove(c)
        rest += [0] * (k + 1)           # past the last merge: counts of 0
        high = rest[k - 1] if k > 0 else 1e9
        low = rest[k]
        off += max(0, c - high + 1) + max(0, low - c + 1)
        if low < c < high:
            margins += min(MARGIN, high - c, c - low)
    return off, margins


def predicted(counts):
    """How good the straight-line model's counts are: smaller is better."""
    off, margins = gaps({t: c for t, c in counts.items() if c > 0})
    return off * 10 - margins


################ Command line

def read_quotas(path=None):
    """The stored quotas (tools/quotas.json, or path), where a search starts (from nothing, it
    would find none)."""
    path = path or QUOTAS_PATH
    advice = check_present(path)
    try:
        stored = bpe.read_json(path)
    except bpe.FileProblem as problem:
        raise bpe.FileProblem(f"{problem}: {advice}") from None
    quotas = stored.get("quotas") if isinstance(stored, dict) else None
    if not isinstance(quotas, dict):
        raise bpe.FileProblem(f"{os.path.relpath(path)}: no \"quotas\" object, as "
                              f"make_corpus.py writes it")
    bad = [name for name, n in quotas.items() if type(n) is not int or n < 0]   # a hand edit
    if bad:
        raise bpe.FileProblem(f"{os.path.relpath(path)}: the quota of {bad[0]} is not a "
                              f"whole number from 0 up: make it one, or {advice}")
    return quotas


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 unless "
                        "the three files are what this program writes")
    return bpe.run_reporting_problems(lambda: run(parser.parse_args(argv)))  # as bpe.main


def run(args):
    """Do what the parsed command line asks; return the exit code."""
    filler = Filler(read_stories())     # a bad line: bpe.FileProblem, one line from main
    search = Search(filler)
    stored = read_quotas()
    unknown = sorted(set(stored) - set(filler.names))   # a misspelt name, or a word dropped
    if unknown:
        print(f"tools/quotas.json: {', '.join(unknown)}: no steered word of tools/plots.txt "
              f"has this name; left out")
    quotas = filler.fit(stored)
    wrong = search.measure(quotas)[1]
    if wrong and not args.check:        # --check never searches: it names the stale files
        print(f"the stored quotas do not keep the lesson's IDs ({wrong}); searching")
        quotas = search.run(quotas)
        wrong = search.measure(quotas)[1]
        if wrong:
            return bpe.report(
                f"make_corpus: nothing was written: after {len(search.seen)} tries, the "
                f"closest quotas leave: {wrong} (+: the token comes too late, its words too "
                f"rare; -: too soon). Undo the last edit of tools/, or make it another way, "
                f"and run python3 tools/make_corpus.py again (tools/README.md says more).")
    if wrong:       # --check: the files may match, but this program would search
        return bpe.report(f"make_corpus --check: the stored quotas do not keep the lesson's "
                          f"IDs ({wrong}); run: python3 tools/make_corpus.py")
    text = filler.corpus(quotas)
    stored = {"note": "written by tools/make_corpus.py: how many slots of each kind hold each "
                      "steered word; the search starts from here", "quotas": quotas,
              "slots": {kind: len(filler.slots[kind]) for kind in filler.kinds}}
    files = {bpe.CORPUS_PATH: text, QUOTAS_PATH: json.dumps(stored, indent=2) + "\n",
             bpe.TOKENIZER_PATH: train(text)[0].to_json()}
    if args.check:
        stale = [os.path.relpath(p, ROOT) for p, t in files.items() if bpe.read_text(p) != t]
        if stale:
            hint = ""
            stories = [line for line in bpe.read_text(bpe.CORPUS_PATH).splitlines() if line]
            if len(stories) > len(text.splitlines()):       # more than it writes
                hint = " (a story typed into corpus.txt belongs in tools/stories.txt)"
            return bpe.report(f"make_corpus --check: not what tools/make_corpus.py writes: "
                              f"{', '.join(stale)}; run: python3 tools/make_corpus.py{hint}")
        print(f"corpus.txt, tools/quotas.json and tokenizer.json are what "
              f"tools/make_corpus.py writes, with the lesson's IDs")
        return 0
    bpe.write_texts(files)          # all three, or (one cannot be written) none
    print(f"wrote corpus.txt ({len(text.splitlines())} stories, {len(filler.extra)} from "
          f"tools/stories.txt), tools/quotas.json and tokenizer.json, with the lesson's IDs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
