"""Write corpus.txt: tiny stories whose tokenizer reproduces the lesson's recorded trace.

The lesson prints a recorded trace, and the lab's block-trace.json must be that file, byte
for byte. The model's parameters depend only on the seed and the sizes, which the lab shares
with the lesson, so the trace can differ only through the token IDs that the tokenizer
trained on corpus.txt gives the first story and the test sentences. This program writes a
corpus.txt whose tokenizer gives the lesson's IDs, and checks that it does.

What it guarantees (all checked before anything is written; if one fails, nothing is
written and the program says which):
  - corpus.txt begins with the lesson's first story; it holds at least 300 stories, one per
    line, lower case, each ending with a full stop, in the characters of ALPHABET only.
  - bpe.py, trained on it, gives the IDs the lesson's figures pin down (PINNED below): "."
    is 4 and "n" is 16 (so the alphabet has four characters before "." and eleven between
    "." and "n"), " the" 30, " to" 37, "ow" 40, " gives" 50, " hat" 79, " mia" 65,
    " leo" 70 and "mia" (at the start of a text) 58 or 89; the first story is 37 tokens;
    the order sentences and the ball sentence split as the lesson's tests need.
  - trace_block.trace(), run on that tokenizer and the first story, gives the lesson's
    figures (LESSON below), the gradient check included.
  - The same inputs give the same bytes on every Python from 3.10 on: fixed seeds, lists
    in fixed orders, no set or hash order, and every loss summed by model.py with fsum.

Use (from the project's folder):
    python3 tools/make_corpus.py            write corpus.txt (steering anew if needed), then
                                            tokenizer.json, with bpe.py's own writer
    python3 tools/make_corpus.py --check    exit 1 unless corpus.txt is what this writes
Never run trace_block.py --write after it: block-trace.json is the lesson's file, and a check
that fails says the corpus no longer gives the lesson's trace (tools/README.md).

To add a story, write it as one line of tools/stories.txt and run the program. The stories
there go into the corpus word for word. Every new word shifts the counts that decide the
order of the merges, so the program then steers again: it changes how many story slots get
each steering word (the quotas, kept in tools/quotas.json) until the IDs and the figures
are the lesson's again, and writes the new quotas beside the corpus. If it cannot get there,
it writes nothing and says how close it came. To add a kind of story instead, write a plot
below (see "The plots") and add it to PLOTS.

Time: with nothing changed, 3 to 5 s (the stored quotas are checked, the trace's gradient
check included). After a change it searches: adding, removing or changing one story took
one and a half to two minutes on clean clones (CPython 3.11, two cores; tools/README.md).

How it works. The corpus is the first story, the stories of tools/stories.txt, and
N_STORIES stories that the plots below generate with fixed seeds. A plot's sentences have
slots ({a} a child, {c} a colour, {o} a thing, {now} "now" or nothing, ...). The sentences
and the order of the slots never change; only what fills the slots does. For each kind of
slot a few steering words have quotas (say 34 of the "thing" slots hold "hat"); the other
slots take the kind's other words in turn. A quota moves the count of its word and so the
place of that word's merges in BPE's order: "hat" more often, " hat" learned sooner, a
smaller ID. The search first moves the quotas until every pinned ID is right (one quota per
ID by bisection, then random moves of one to three quotas, kept when no ID gets worse). Then
it walks among settings that keep them right until the IDs of the first story's other
tokens (" has", " red", " goes", the pieces of " garden", ...) give the lesson's initial
loss, which about one set of those IDs in 500 does; the walk prefers steps towards that
loss, so it usually takes a few hundred. Both phases use a fast copy of bpe.py's training
(same rules, counts kept up to date between merges); the result is then checked with bpe.py
and trace_block.py themselves.
"""
import argparse
import heapq
import json
import os
import random
import re
import sys
import time
from unittest import mock

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, ROOT)

import bpe           # noqa: E402  (the project's modules live one folder up)
import model         # noqa: E402
import trace_block   # noqa: E402

CORPUS_PATH = os.path.join(ROOT, "corpus.txt")
STORIES_PATH = os.path.join(TOOLS, "stories.txt")
QUOTAS_PATH = os.path.join(TOOLS, "quotas.json")


# ---------------------------------------------------------------- what the lesson pins down

FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, mia gives the hat "
               "to ava. now ava has the red hat.")
# Four characters before "." (so "." is 4), eleven between "." and "n" (so "n" is 16): the
# letters a to m without f and j. After "n": the rest of the letters without q and x.
ALPHABET = "\n ',.abcdeghiklmnoprstuvwyz"
MIN_STORIES = 300

# token -> the IDs it may have. The lesson's order test pins its nine tokens (" mia" and
# " leo" could swap; the steering aims at this way round), the layer-norm variance pins
# "mia" at the start of a text to 58 or 89.
PINNED = {".": (4,), "n": (16,), " the": (30,), " to": (37,), "ow": (40,), " gives": (50,),
          " hat": (79,), " mia": (65,), " leo": (70,), "mia": (58, 89)}
# The other tokens of the first story: free IDs, but each must be one token.
STORY_WORDS = (" has", " a", " red", " goes", " at", " ava", " now")
ORDER_SENTENCES = {"now mia gives the hat to leo.":
                   ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."],
                   "now leo gives the hat to mia.":
                   ["n", "ow", " leo", " gives", " the", " hat", " to", " mia", "."]}
HAT, BALL = "mia has a red hat.", "mia has a red ball."

# The lesson's recorded figures (../shared/lesson/block-trace.json), the ones that depend
# on the corpus. trace_block.trace() must give exactly these.
LESSON = {
    "story_tokens": 37,
    "vocab_size": 96,
    "initial_loss": 4.5805,
    "layernorm_row0": {"mean": 0.0, "variance": 0.9852},
    "order_test": {
        "a": "now mia gives the hat to leo.",
        "b": "now leo gives the hat to mia.",
        "tokens_a": ORDER_SENTENCES["now mia gives the hat to leo."],
        "tokens_b": ORDER_SENTENCES["now leo gives the hat to mia."],
        "last_logit_gap_without_positions": 0.0,
        "last_logit_gap_with_positions": 0.001282,
        "gaps_by_position_without_positions": [0.0, 0.0, 0.3037, 0.0149, 0.0137, 0.0125,
                                               0.0232, 0.3097, 0.0],
    },
    "gradient_check": {"config": {"d": 4, "hidden": 8, "max_len": 8, "seed": 3},
                       "parameters_checked": 1060, "max_error_rounded": 0.0},
}


# ---------------------------------------------------------------- the plots
#
# A plot is a function of a random.Random that returns the sentences of one story, written
# with fields in braces:
#   {a} {b}         two children; {a.he} {a.his} {a.him} give she/her/her or he/his/him
#   {g}             a grown-up (mum, dad, grandma, grandpa), with {g.he} and so on
#   {c} {d}         colours              {o} {p}    things a child has
#   {w}             a hat, a cap or a bow (said once, where a hat can be steered finely)
#   {pl}            a place              {at}       "at" or "near" (before "the {pl}")
#   {go}            goes, walks or runs  {gives}    gives or hands
#   {now}           "now " or nothing, in front of the next word
#   {give:x:t:y}    a whole sentence in which x gives the t to y (t a field such as o,
#                   or a plain word such as cake)
# A child whose name begins the story fills a "lead" slot; one called at its start
# ("'{a}, come and see,' ...") a "callee" slot; every other child a "kid" slot. The plot's
# own choices (r.choice) pick the sentences; the slots are filled afterwards, by quota.

SPOTS = ["under a bush", "by the gate", "in the grass", "behind a tree", "near the bench",
         "in the sand", "under the slide", "by the shed", "down by the water",
         "under a big stone", "on a wall", "in a puddle"]


def first_like(r):
    return [r.choice(["{a} has a {c} {o}.", "{a} has a new {c} {o}.",
                      "{a} has a little {c} {o}."]),
            r.choice(["{a.he} {go} to the {pl}.", "{a.he} {go} to the {pl} with it.",
                      "one day {a.he} {go} to the {pl}."]),
            r.choice(["{at} the {pl}, {give:a:o:b}", "{a.he} sees {b} there. {give:a:o:b}",
                      "{at} the {pl}, {a.he} meets {b}. {give:a:o:b}",
                      "{b} is there, and {b.he} looks sad. {give:a:o:b}"]),
            r.choice(["{now}{b} has the {c} {o}.",
                      "{now}{b} has the {o}, and {b.he} says thank you.",
                      "{now}{b} is happy, and {b.he} gives {a} a hug.",
                      "{b} says thank you, and they play with it together."])]


def lost(r):
    return ["{a} has a {c} {o}.",
            r.choice(["{a.he} loses it {at} the {pl}.", "{a.he} loses the {o} {at} the {pl}."]),
            r.choice(["{a.he} looks and looks, but the {o} is gone.", "{a.he} is sad.",
                      "{a.he} sits down and cries a little.", "{a.he} looks everywhere."]),
            "{b} sees the {o} " + r.choice(SPOTS) + ".",
            "{give:b:o:a}",
            r.choice(["{now}{a} is happy.", "{a} says thank you to {b}.", "{a} gives {b} a hug.",
                      "{now}{a} has the {o} again."])]


def found(r):
    return ["{a} {go} to the {pl}.",
            r.choice(["there {a.he} sees a {c} {o} on the ground.",
                      "{at} the {pl}, {a.he} sees a {c} {o} by a bench.",
                      "{at} the {pl}, {a.he} sees a {c} {o} that someone has lost."]),
            "it is {b}'s {o}.", "{give:a:o:b}",
            r.choice(["{now}{b} has the {o} back.", "{b} is happy to see it again.",
                      "{b} gives {a} a big smile."])]


def turn(r):
    if r.random() < 0.5:
        start = ["{b} wants to play with {a}'s {c} {o}.",
                 r.choice(["{a} says no.", "{a} is not sure.", "{a} wants it too."]),
                 "then {a} sees that {b} is sad."]
    else:
        start = ["{b} and {a} both want the {c} {o}.",
                 r.choice(["they pull and pull.", "they both say it is theirs.",
                           "they both hold on to it."]),
                 r.choice(["then {a} lets go.", "then {a} has an idea."])]
    return start + ["{give:a:o:b}",
                    r.choice(["{now}they play with it together.",
                              "{now}{b} has a turn, and then {a} has a turn.",
                              "{b} says thank you, and soon {b.he} gives it back."])]


def call(r):
    return [r.choice(["'{a}, come and see,' says {b}.", "'{a}, look at this,' says {b}.",
                      "'{a}, come here,' calls {b}."]), "{a.he} {go} to {b}.",
            r.choice(["{b} has a {c} {o} in {b.his} hands.", "there is a {c} {o} in the grass.",
                      "a little bird sits on a {c} {o}."]),
            r.choice(["{give:b:o:a}", "'it is a good {o},' says {a}.",
                      "{now}they both look at it."])]


def card(r):
    return ["{a} makes a card.",
            r.choice(["{a.he} paints a {c} sun on it.", "{a.he} draws a {c} boat on it."]),
            "{give:a:card:b}",
            r.choice(["{b} puts it on the wall.", "{now}{b} has a card, and {b.he} is happy.",
                      "{b} says it is the best card and gives {a} a hug."])]


def picnic(r):
    return ["{a} and {b} have a picnic by the " + r.choice(["pond", "lake", "river", "sea"]) + ".",
            "{a} has buns and {b} has apples.",
            "{a} {gives} {b} a bun, and {b} {gives} {a} an apple.",
            r.choice(["{now}they both have a bun and an apple.",
                      "then a duck comes, and they give it some crumbs.",
                      "the sun is warm, and the buns are good."])]


def lunch(r):
    return ["it is lunch time at school.", "{a} has a bun, an apple and a little cake.",
            "{b} has no lunch, and {b.he} is hungry.",
            r.choice(["{a} {gives} the cake to {b}.", "{a} {gives} {b} the bun."]),
            r.choice(["{now}they both have some lunch.", "{b} says thank you.",
                      "they eat together in the sun."])]


def pencil(r):
    return ["at school, {b} wants to draw a {c} sun.", "{b.he} has no pencil.",
            "{a} has two, a {c} one and a {d} one.",
            r.choice(["{a} {gives} the {c} one to {b}.", "{a} {gives} {b} the {c} one."]),
            r.choice(["{now}{b} draws a {c} sun, and {a} draws a {d} moon.",
                      "{b} says thank you."])]


def library(r):
    return ["{a} and {g} go to the library.",
            r.choice(["{a} picks a book about a big bear.", "{a} picks a book about a boat.",
                      "{a} picks a book about the moon."]),
            "the man at the desk {gives} the book to {a}.",
            r.choice(["at home, {g} reads it to {a.him}.", "{now}{a} has a new book to read."])]


def share(r):
    o = r.choice(["apple", "bun", "cookie", "pear", "plum", "banana", "cupcake", "sandwich"])
    n = r.choice(["two", "three"])
    return [f"{{a}} has {n} {o}s.", "{b} has none.",
            r.choice([f"{{b}} looks at the {o}s.", "{b} is hungry.", "{b} is sad."]),
            r.choice([f"{{a}} {{gives}} one {o} to {{b}}.", f"{{a}} {{gives}} {{b}} one {o}."]),
            r.choice(["{now}they both have a snack.", "they sit down on the step to eat.",
                      "{b} gives {a} a smile.", "{now}{b} is happy too."])]


def swap(r):
    return ["{a} has a {c} {o}.", "{b} has a {d} {p}.",
            "{a} {gives} the {o} to {b}, and {b} {gives} the {p} to {a}.",
            r.choice(["{now}{a} has the {d} {p}.", "they both like the swap.",
                      "they play with the {o} and the {p} together.",
                      "{now}{b} has the {c} {o}."])]


def sad_pal(r):
    return ["{b} is sad, because {b.he} has no {o}.", "{a} has two {o}s.",
            "{a} {gives} {b} a {o}.",
            r.choice(["{now}{b} smiles.", "they play with the {o}s all day.",
                      "{b} says thank you."])]


def rain(r):
    return ["it rains.",
            r.choice(["{a} and {b} stay in the house.", "{a} and {b} stay at home."]),
            r.choice(["they play with a {c} {o}.", "they build a tent with a big sheet.",
                      "they read a book about a dragon.", "they paint a big rainbow.",
                      "they make a tower with blocks.", "they do a puzzle on the rug."]),
            r.choice(["then the sun is out again.", "soon the rain stops.",
                      "at last the rain stops, so they run out to play.",
                      "{now}the rain stops, and they go down to the {pl}."])]


def bedtime(r):
    o = r.choice(["teddy", "doll", "bear", "bunny", "blanket", "book"])
    return ["{a} is sleepy.", f"{{a.he}} goes to bed with {{a.his}} {o}.",
            r.choice(["{g} reads a story.", "{g} sings a song.", "{g} tucks {a.him} in.",
                      "the stars shine in the sky."]),
            "{g} gives {a} a hug.",
            r.choice(["good night, {a}.", "{now}{a.he} is asleep.",
                      "{a.he} shuts {a.his} eyes.", "{now}{a.he} lies down to sleep."])]


def help_animal(r):
    an = r.choice(["bird", "kitten", "duck", "puppy", "lamb", "mouse", "chick"])
    trouble = r.choice(["is stuck in a bush", "is wet and cold", "is lost", "has lost its mum",
                        "is hungry"])
    return [f"a little {an} {trouble}.", f"{{a}} sees the {an} {{at}} the {{pl}}.",
            r.choice(["{a.he} picks it up with care.", "{a.he} gives it some milk.",
                      f"{{g}} {{gives}} a basket to {{a}}, and {{a.he}} puts the {an} in it.",
                      "{a.he} helps it out."]),
            r.choice([f"{{now}}the {an} is ok.", f"the {an} licks {{a}}'s hand.",
                      f"then the {an} goes back to its mum."])]


def bake(r):
    c = r.choice(["pink", "red", "green", "yellow", "white", "brown"])
    return [f"{{a}} and {{g}} make a {c} cake.", "they put it in the oven.",
            r.choice(["the kitchen smells good.", "they wait and wait.", "the cake grows big."]),
            r.choice(["{b} comes to eat the cake.", "{a} {gives} a big piece to {b}.",
                      "{give:a:cake:b}", "{a} {gives} {b} a big piece."]),
            r.choice(["it is very good.", "{b} says yum.", "{now}{b} is happy.",
                      "{b} likes the cake."])]


def wind(r):
    o = r.choice(["hat", "kite", "cap", "paper", "balloon"])
    an = r.choice(["dog", "puppy", "goat"])
    s = [f"the wind blows {{a}}'s {o} away.", "{a.he} runs down the hill."]
    k = r.randrange(3)
    if k == 0:
        s += [f"the {an} runs to get the {o}.", f"{{a}} gives the {an} a pat."]
    elif k == 1:
        s += [f"the {o} lands in a tree.", f"{{g}} gets the {o} down and {{gives}} it to {{a}}."]
    else:
        s += [f"the {o} lands in the pond.",
              f"a duck pushes the {o} to the side, and {{a}} gets it back."]
    return s


def trip(r):
    o = r.choice(["shell", "stone", "stick", "nest", "bug", "snail", "pebble"])
    return [r.choice(["it is a sunny day.", "the sky is blue.", "it is a warm day."]),
            "{a} and {g} go to the {pl}.", f"{{at}} the {{pl}}, {{a}} sees a {{c}} {o}.",
            r.choice(["{a.he} takes it home and {gives} it to {b}.", "{a.he} {gives} it to {g}.",
                      "{a.he} shows it to {g}.", "{now}it sits by {a.his} bed at home."])]


def dog_steals(r):
    o = r.choice(["sock", "ball", "shoe", "hat", "bun", "stick", "cap"])
    an = r.choice(["dog", "puppy", "goat"])
    return [f"the {an} takes {{a}}'s {o} and runs away.", "{a} runs and runs.",
            r.choice([f"at last the {an} drops the {o}.",
                      f"the {an} hides the {o} in the grass.", f"the {an} stops by the gate."]),
            r.choice(["{a} laughs.", f"{{now}}{{a}} has the {o} back.",
                      f"{{a}} gives the {an} a pat.", f"the {an} wags its tail."])]


def snow(r):
    return ["it snows.", "{a} and {b} make a snowman.",
            "they give the snowman a {c} {w} and a carrot nose.",
            r.choice(["the snowman looks happy.",
                      "then they go in, and {g} {gives} them warm milk.",
                      "then they throw snowballs.", "{now}the snowman is ready."])]


def beach(r):
    return ["{a} {go} to the beach with {g}.", "{a.he} digs in the sand to build a castle.",
            r.choice(["a big wave washes the castle away.", "a crab walks by the castle.",
                      "a gull sits on the castle."]),
            r.choice(["{a.he} builds a new one.", "{a.he} laughs.", "{g} takes a picture.",
                      "{now}{a.he} wants to swim."])]


def birthday(r):
    return ["it is {a}'s birthday.", "{b} {gives} {a} a {c} {o}.",
            r.choice(["mum makes a big cake.", "there is a cake with candles.",
                      "dad hangs up balloons."]),
            r.choice(["they sing and eat cake.", "{a} blows out the candles.",
                      "{a} says it is the best day.", "{now}{a} has a {c} {o} and a big smile."])]


def pet(r):
    an = r.choice(["cat", "dog", "kitten", "puppy", "rabbit"])
    name = r.choice(["spot", "tiger", "bella", "milo", "coco", "pip", "sunny", "button"])
    return [f"{{a}} has a pet {an} called {name}.", f"{name} likes to sleep in the sun.",
            r.choice([f"one day {name} is lost.", f"one day {name} hides.",
                      f"one day {name} will not come in."]),
            r.choice(["{a.he} looks in the shed.", "{a.he} calls and calls.",
                      "{a.he} looks under the bed."]),
            r.choice([f"{name} is in a basket, asleep.", f"{name} is up in a tree.",
                      f"at last {name} comes back, and {{a}} gives {name} a hug."])]


def paint(r):
    o = r.choice(["cat", "dog", "duck", "bird", "pig", "cow", "hen", "owl", "house", "tree",
                  "boat", "sun", "horse", "zebra"])
    return [f"{{a}} paints a {{c}} {o}.", "{a.he} {gives} it to {g}.",
            r.choice(["{g} puts it on the wall.", "{g} says it is lovely.",
                      "{g} gives {a} a hug.", "{now}it hangs on the wall by the window."])]


def plant(r):
    c = r.choice(["red", "pink", "yellow", "white", "blue"])
    return ["{a} puts a seed in the ground.", "every day {a.he} gives it water.",
            r.choice(["soon a little plant grows.", "the sun helps it grow.",
                      "it grows and grows."]),
            f"then a {c} rose opens." if r.random() < 0.5 else
            f"{{now}}{{a}} has a tall {c} tulip."]


def shop(r):
    items = r.sample(["milk", "bread", "apples", "eggs", "rice", "cheese", "pears", "buns"], 3)
    return ["{a} and {g} go to the shop.", f"they buy {items[0]}, {items[1]} and {items[2]}.",
            r.choice(["{a} helps to pay.", "{g} gives {a} a treat.",
                      "the man at the shop {gives} a bun to {a}."]),
            r.choice(["{now}they go home.", "then they walk home.", "{a} carries the bag home."])]


def race(r):
    goal = r.choice(["the tree", "the gate", "the pond", "the big rock"])
    return [f"{{a}} and {{b}} run a race to {goal}.", "{b} wins.",
            r.choice(["{a} says well done and gives {b} a pat on the back.",
                      "then they race back, and {a} wins.", "they both sit down in the grass.",
                      "{now}they are both too tired to run."])]


def hide(r):
    spot = r.choice(["behind the door", "under the bed", "in the shed", "behind a big tree",
                     "under the table"])
    return ["{a} and {b} play hide and seek.", f"{{a}} hides {spot}.", "{b} counts to ten.",
            r.choice(["{b} looks and looks.", "{b} can hear {a} giggle."]),
            r.choice(["at last {b} sees {a}, and {a} gives {b} a hug.",
                      "then it is {b}'s turn to hide.", "{now}it is {b}'s turn to hide."])]


def broken(r):
    o = r.choice(["car", "train", "truck", "doll", "boat"])
    return [f"{{a}}'s toy {o} is broken.", "{g} helps {a} mend it.",
            r.choice([f"now the {o} is as good as new.", f"{{a}} plays with the {o} again.",
                      f"{{g}} {{gives}} the {o} back to {{a}}, and {{a}} says thank you."])]


def bath(r):
    return ["it is bath time.", "{a} has a {c} duck in the bath.",
            r.choice(["the duck goes round and round.", "the duck bobs up and down.",
                      "{a} makes big bubbles."]),
            r.choice(["then {a} is clean and warm.", "then {g} wraps {a} in a towel.",
                      "{now}{a} is clean, and {g} {gives} a towel to {a.him}."])]


def hen(r):
    return ["{a} {go} to the barn.",
            r.choice(["the hen is on her nest.", "the hens are in the straw."]),
            r.choice(["there are two brown eggs in the nest.",
                      "there are three eggs in the nest."]),
            r.choice(["{give:a:eggs:g}", "{a.he} says thank you to the hen."])]


def bike(r):
    return ["{a} has a new {c} bike.",
            r.choice(["{a.he} rides it down the lane.", "{a.he} rides it to the {pl}.",
                      "{a.he} rides it round and round."]),
            r.choice(["{a.he} rings the bell.", "{a.he} wobbles, but {a.he} stays on."]),
            r.choice(["{a} is proud.", "{a.he} wants to ride it every day.",
                      "{now}{a} can ride a bike."])]


def balloon(r):
    return ["{a} has a {c} balloon.",
            r.choice(["{a.he} lets go by mistake.", "the string slips away."]),
            "the balloon goes up and up into the sky.",
            r.choice(["{a.he} waves goodbye to it.",
                      "{a.he} is sad, but {g} {gives} {a.him} a new one."])]


def moon(r):
    return ["at night {a} looks out the window.",
            r.choice(["the moon is big and round.", "the stars shine in the dark sky."]),
            r.choice(["{a.he} counts the stars.", "an owl hoots in a tree.",
                      "{a.he} waves to the moon."]),
            r.choice(["then {g} says it is time to sleep.", "then {a.he} goes to bed.",
                      "{now}it is time to sleep."])]


def soup(r):
    veg = r.sample(["carrots", "peas", "beans", "leeks", "potatoes", "onions"], 2)
    return ["{a} helps {g} make soup.", f"{{a.he}} puts in the {veg[0]} and the {veg[1]}.",
            r.choice(["the soup is hot.", "they stir the pot."]),
            r.choice(["{a} eats two bowls.", "{g} {gives} {a} a bowl with bread.",
                      "{now}the soup is ready, and {g} {gives} a bowl to {a}."])]


def walk_dog(r):
    return ["{a} and {g} take the dog on a walk to the {pl}.",
            r.choice(["the dog smells every tree.", "the dog barks at a cat.",
                      "the dog splashes in a puddle."]),
            r.choice(["then they all go home.", "{a} gives the dog a pat.",
                      "{now}the dog is muddy."])]


def kind(r):
    return ["{b} drops {b.his} bag and the books spill out.", "{a} helps {b} pick them up.",
            "{b} says thank you and gives {a} a hug.",
            r.choice(["{now}they walk to school together.", "{g} says {a} is kind."])]


def zoo(r):
    an = r.sample(["zebra", "lion", "monkey", "bear", "tiger", "hippo", "camel", "goat"], 2)
    return ["{a} and {g} go to the zoo.", f"they see a {an[0]} and a {an[1]}.",
            r.choice([f"the {an[0]} eats a big lunch.", f"the {an[1]} is asleep.",
                      "{a} likes the monkeys best."]),
            r.choice(["{g} {gives} {a} an ice lolly.", "at home, {a} tells {b} about it.",
                      "{now}{a} wants to go again."])]


def hat_story(r):
    return ["{a}'s {c} hat is too big.",
            r.choice(["it comes down over {a.his} eyes.", "it slips down to {a.his} nose."]),
            "{a.he} gives the hat to {g}.",
            r.choice(["{g} makes it smaller.", "{g} puts a band in it."]),
            "{now}the hat is not too big."]


# The plots, and how many times each comes up in every round of the plots (1 if unnamed).
# The plots that give things away come up most: the lesson's IDs need " gives" and " to"
# among the most frequent tokens.
PLOTS = [lunch, pencil, library, card, picnic, turn, found, call, first_like, lost, share,
         rain, bedtime, swap, help_animal, bake, wind, trip, dog_steals, snow, beach, birthday,
         pet, paint, plant, shop, race, hide, sad_pal, broken, bath, hen, bike, balloon, moon,
         soup, walk_dog, kind, zoo, hat_story]
WEIGHTS = {"first_like": 8, "lost": 5, "call": 6, "found": 5, "turn": 5, "swap": 3,
           "share": 2, "sad_pal": 2, "card": 2, "picnic": 2}
N_STORIES = 330          # stories made by the plots (tools/stories.txt adds its own)
PLOT_SEED = 11           # picks the plots' order and each plot's sentences


# ---------------------------------------------------------------- the slots and their words

SHE = ("mia", "ava", "zoe", "molly", "tess", "bea", "mum", "grandma")
PRONOUNS = {"he": ("he", "she"), "his": ("his", "her"), "him": ("him", "her")}
OTHER_CHILDREN = ("tom", "sam", "ben", "owen", "molly", "sid", "tess", "bea", "eli", "zoe")
GIVE_FORMS = {"gives-to": "{x} gives the {t} to {y}.",     # x gives the t to y
              "gives-y": "{x} gives {y} the {t}.",          # x gives y the t
              "hands-to": "{x} hands the {t} to {y}."}      # x hands the t to y
# kind -> (the steering words, which have quotas; the other words, taken in turn)
KINDS = {
    "lead": (("mia", "leo", "ava"), OTHER_CHILDREN),
    "callee": (("mia",), OTHER_CHILDREN),
    "kid": (("mia", "leo", "ava"), OTHER_CHILDREN),
    "grown": (("grandma", "grandpa"), ("mum", "dad")),
    "colour": (("red", "brown"), ("blue", "green", "yellow", "pink", "white", "purple",
                                  "black")),
    "thing": (("hat",), ("ball", "kite", "book", "doll", "drum", "boat", "bell", "car", "teddy",
                         "truck", "train", "top", "cap", "puzzle", "cup", "bag")),
    "wear": (("hat",), ("cap", "bow")),
    "place": (("park",), ("beach", "pond", "lake", "river", "playground", "sea")),
    "at": (("at",), ("near",)),
    "go": (("goes",), ("walks", "runs")),
    "gives": (("gives",), ("hands",)),
    "give": (("gives-to", "gives-y"), ("hands-to",)),
    "now": (("now",), ("",)),
}
FIELD_KINDS = {"a": "kid", "b": "kid", "g": "grown", "c": "colour", "d": "colour",
               "o": "thing", "p": "thing", "w": "wear", "pl": "place", "at": "at", "go": "go",
               "gives": "gives", "give": "give", "now": "now"}
CHILD_KINDS = ("lead", "callee", "kid")
QUOTA_NAMES = [f"{kind}:{word}" for kind, (steered, _) in KINDS.items() for word in steered]
FIELD = re.compile(r"\{(\w+)(?:\.(\w+))?(?::(\w+):(\w+):(\w+))?\}")
# The quotas to start from when tools/quotas.json is missing (the ones it held when this
# program was written).
DEFAULT_QUOTAS = {"lead:mia": 105, "lead:leo": 59, "lead:ava": 4, "callee:mia": 0,
                  "kid:mia": 19, "kid:leo": 28, "kid:ava": 81, "grown:grandma": 0,
                  "grown:grandpa": 16, "colour:red": 95, "colour:brown": 54, "thing:hat": 36,
                  "wear:hat": 1, "place:park": 70, "at:at": 63, "go:goes": 88,
                  "gives:gives": 73, "give:gives-to": 93, "give:gives-y": 15, "now:now": 118}


class Template:
    """One generated story before its slots are filled: text with fields, and each
    field's kind."""

    def __init__(self, text):
        self.text = text
        self.kinds = {}
        for match in FIELD.finditer(text):
            name, _, x, t, y = match.groups()
            for field in [name] + ([x, t, y] if name == "give" else []):
                if field in FIELD_KINDS and field not in self.kinds:
                    self.kinds[field] = self.kind_of(field)

    def kind_of(self, field):
        kind = FIELD_KINDS[field]
        if kind == "kid" and self.text.startswith("{%s}" % field):
            return "lead"
        if kind == "kid" and self.text.startswith("'{%s}" % field):
            return "callee"
        return kind

    def render(self, values):
        """The story with every field filled from values (field -> word)."""
        def fill(match):
            name, attribute, x, t, y = match.groups()
            if name == "give":
                thing = "{%s}" % t if t in FIELD_KINDS else t
                return GIVE_FORMS[values["give"]].format(x="{%s}" % x, t=thing, y="{%s}" % y)
            if name == "now":
                return values["now"] + " " if values["now"] else ""
            if attribute:
                return PRONOUNS[attribute][values[name] in SHE]
            return values[name]
        return FIELD.sub(fill, FIELD.sub(fill, self.text))   # twice: a give holds fields


def make_templates():
    """The N_STORIES templates, the same on every run."""
    rng = random.Random(PLOT_SEED)
    order = []
    while len(order) < N_STORIES:
        round_ = [plot for plot in PLOTS for _ in range(WEIGHTS.get(plot.__name__, 1))]
        rng.shuffle(round_)
        order += round_
    for kind, (steered, others) in KINDS.items():
        for word in steered + others:
            bad = sorted(set(FIELD.sub("", GIVE_FORMS.get(word, word))) - set(ALPHABET))
            if bad:
                raise ValueError(f"the {kind} word {word!r} has characters outside the "
                                 f"alphabet: {bad}")
    templates = []
    for i, plot in enumerate(order[:N_STORIES]):
        text = " ".join(plot(random.Random(PLOT_SEED * 7919 + i)))
        bad = sorted(set(FIELD.sub("", text)) - set(ALPHABET))
        if bad or text != text.lower() or not re.search(r"(\.|\{give:[^}]*\})$", text):
            raise ValueError(f"the plot {plot.__name__} wrote {text!r}: every story must be "
                             f"lower case, end with a full stop and keep to the alphabet "
                             f"{ALPHABET[1:]!r}" + (f" (not {bad})" if bad else ""))
        templates.append(Template(text))
    return templates


class Filler:
    """Fills the slots of the templates from quotas (quota name -> how many slots)."""

    def __init__(self, templates):
        self.templates = templates
        self.slots = {kind: [] for kind in KINDS}       # kind -> [(story, field)]
        for i, template in enumerate(templates):
            for field, kind in template.kinds.items():
                self.slots[kind].append((i, field))
        # each kind hands its slots to quotas in a fixed shuffled order, so that a quota
        # one higher changes one slot, somewhere in the corpus, not the first story's
        self.order = {}
        for n, kind in enumerate(KINDS):
            order = list(range(len(self.slots[kind])))
            random.Random(1000 + n).shuffle(order)
            self.order[kind] = order

    def room(self, kind):
        return len(self.slots[kind])

    def fits(self, quotas):
        """Whether every quota is 0 or more and each kind has the slots its quotas ask for."""
        return (all(quotas[name] >= 0 for name in QUOTA_NAMES)
                and all(sum(quotas[f"{kind}:{word}"] for word in steered) <= self.room(kind)
                        for kind, (steered, _) in KINDS.items()))

    def fit(self, quotas):
        """The quotas, each cut to 0 or more and each kind's to the slots it has (the last
        steering word of a kind gives way first)."""
        quotas = {name: max(0, quotas[name]) for name in QUOTA_NAMES}
        for kind, (steered, _) in KINDS.items():
            excess = sum(quotas[f"{kind}:{word}"] for word in steered) - self.room(kind)
            for word in reversed(steered):
                cut = min(excess, quotas[f"{kind}:{word}"]) if excess > 0 else 0
                quotas[f"{kind}:{word}"] -= cut
                excess -= cut
        return quotas

    def stories(self, quotas):
        """The generated stories, their slots filled by quota."""
        values = [{} for _ in self.templates]
        for kind, (steered, others) in KINDS.items():
            words = [None] * self.room(kind)
            start = 0
            for word in steered:
                for j in self.order[kind][start:start + quotas[f"{kind}:{word}"]]:
                    words[j] = word
                start += quotas[f"{kind}:{word}"]
            for j, (i, field) in enumerate(self.slots[kind]):
                values[i][field] = words[j] if words[j] is not None else others[j % len(others)]
        self.two_names(values)
        return [t.render(v) for t, v in zip(self.templates, values)]

    def two_names(self, values):
        """Where one story got one name twice, swap the second for a name from another
        story's slot of the same kind (the counts of the names do not change)."""
        for i, template in enumerate(self.templates):
            fields = [f for f, kind in template.kinds.items() if kind in CHILD_KINDS]
            for field in fields[1:]:
                mine = [values[i][f] for f in fields if f != field]
                if values[i][field] not in mine:
                    continue
                kind = template.kinds[field]
                for j, other in self.slots[kind]:
                    theirs = [values[j][f] for f, k in self.templates[j].kinds.items()
                              if k in CHILD_KINDS and f != other]
                    if j != i and values[j][other] not in mine and values[i][field] not in theirs:
                        values[i][field], values[j][other] = values[j][other], values[i][field]
                        break


# ---------------------------------------------------------------- the stories of tools/stories.txt

def read_stories(path=STORIES_PATH):
    """The hand-written stories, checked line by line; a bad one stops the program."""
    stories = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            story = line.rstrip("\n")
            if not story.strip() or story.startswith("#"):
                continue
            where = f"{os.path.relpath(path)} line {number}"
            bad = sorted(set(story) - set(ALPHABET) - {"\n"})
            if bad:
                raise ValueError(f"{where}: characters outside the alphabet {bad} (the lesson's "
                                 f"IDs need exactly this alphabet: {ALPHABET[1:]!r})")
            if story != story.strip() or "  " in story:
                raise ValueError(f"{where}: spaces at an end or two in a row")
            if not story.endswith("."):
                raise ValueError(f"{where}: a story must end with a full stop")
            stories.append(story)
    return stories


def assemble(generated, extra):
    """The corpus text: the first story, then the generated stories with the extra ones
    spread evenly among them."""
    lines = [FIRST_STORY]
    spots = {(k * len(generated)) // max(1, len(extra)): k for k in range(len(extra))}
    for i, story in enumerate(generated):
        if i in spots:
            lines.append(extra[spots[i]])
        lines.append(story)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- training, fast

def train(chunk_counts, vocab_size=bpe.VOCAB_SIZE):
    """bpe.learn_merges on a table of chunk counts, with the pair counts kept up to date
    between merges instead of recounted: the same vocab and merges, several times faster.
    (verify() trains with bpe.py itself and compares.)"""
    vocab = sorted({char for chunk in chunk_counts for char in chunk})
    char_id = {char: i for i, char in enumerate(vocab)}
    words = [[char_id[char] for char in chunk] for chunk in chunk_counts]
    weights = list(chunk_counts.values())
    counts, where = {}, {}
    for w, ids in enumerate(words):
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + weights[w]
            where.setdefault(pair, []).append(w)
    heap = [(-count, pair) for pair, count in counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size:
        # the most frequent pair, ties to the smallest (left, right): the heap's first entry
        # whose count is still current (entries are pushed again when a count changes)
        while heap and counts.get(heap[0][1], 0) != -heap[0][0]:
            heapq.heappop(heap)
        if not heap:
            raise ValueError(f"every chunk is one token after {len(merges)} merges")
        pair = heapq.heappop(heap)[1]
        left, right = pair
        new_id = len(vocab)
        vocab.append(vocab[left] + vocab[right])
        merges.append(pair)
        touched = {}
        for w in dict.fromkeys(where.pop(pair)):       # each word once, in a fixed order
            old, weight = words[w], weights[w]
            new, i = [], 0
            while i < len(old):                          # bpe.merge, written out
                if i + 1 < len(old) and old[i] == left and old[i + 1] == right:
                    new.append(new_id)
                    i += 2
                else:
                    new.append(old[i])
                    i += 1
            if len(new) == len(old):
                continue                                 # an entry left from before a merge
            for p in zip(old, old[1:]):
                counts[p] -= weight
                touched[p] = True
            for p in zip(new, new[1:]):
                counts[p] = counts.get(p, 0) + weight
                touched[p] = True
                if new_id in p:
                    where.setdefault(p, []).append(w)
            words[w] = new
        for p in touched:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
            else:
                del counts[p]
    return vocab, merges


class Corpus:
    """The corpus for one setting of the quotas, its tokenizer, and how far its IDs are
    from the lesson's."""

    def __init__(self, text, chunk_counts):
        self.text = text
        self.vocab, merges = train(chunk_counts)
        self.tokenizer = bpe.Tokenizer(self.vocab, [(self.vocab[a], self.vocab[b])
                                                    for a, b in merges])
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        self.story = self.tokenizer.encode(FIRST_STORY + "\n")

    def errors(self):
        """How far each pinned ID is from its target (0 = right; + = too late), and the
        other requirements as 0 (met) or 1 (not), in a fixed order."""
        errors = {}
        for token, targets in PINNED.items():
            i = self.ids.get(token, len(self.vocab) + 50)
            errors[token] = min((i - target for target in targets), key=abs)
        errors["story tokens"] = len(self.story) - LESSON["story_tokens"]
        for word in STORY_WORDS:
            errors[word] = 0 if word in self.ids else 1
        for sentence, tokens in ORDER_SENTENCES.items():
            errors[sentence] = int(self.tokenizer.tokens(sentence) != tokens)
        hat, ball = self.tokenizer.tokens(HAT), self.tokenizer.tokens(BALL)
        errors["ball sentence"] = int(hat[:4] != ["mia", " has", " a", " red"]
                                      or ball[:4] != hat[:4] or ball[4] == hat[4]
                                      or len(ball) > 9)
        return errors

    def wrong(self):
        """The errors that are not 0."""
        return {name: e for name, e in self.errors().items() if e}


def initial_loss(story):
    """The trace's initial_loss for the first story's token IDs: ids[:-1] predicting ids[1:],
    rounded to 4 places."""
    logits, _ = model.forward(params(), list(story[:-1]))
    loss, _ = model.loss_and_dlogits(logits, list(story[1:]))
    return round(loss, 4)


_PARAMS = []


def params():
    """The series-size parameters (they do not depend on the corpus), made once."""
    if not _PARAMS:
        cfg = trace_block.SERIES
        _PARAMS.append(model.init_params(LESSON["vocab_size"], cfg["d"], cfg["hidden"],
                                         cfg["max_len"], cfg["seed"]))
    return _PARAMS[0]


class Maker:
    """Builds the corpus for a setting of the quotas, reusing the chunk counts of the
    stories that did not change."""

    def __init__(self, extra):
        self.filler = Filler(make_templates())
        self.extra = extra
        self.fixed = {}
        for story in [FIRST_STORY] + extra:
            self.add(self.fixed, story)
        self.cache = {}

    @staticmethod
    def add(counts, story):
        for chunk in bpe.split_chunks(story + "\n"):
            counts[chunk] = counts.get(chunk, 0) + 1

    def corpus(self, quotas):
        generated = self.filler.stories(quotas)
        counts = dict(self.fixed)
        for story in generated:
            if story not in self.cache:
                self.cache[story] = {}
                self.add(self.cache[story], story)
            for chunk, n in self.cache[story].items():
                counts[chunk] = counts.get(chunk, 0) + n
        return Corpus(assemble(generated, self.extra), counts)


# ---------------------------------------------------------------- steering

# pinned token -> the quotas that move it most, and which way: +1 if more of the quota
# makes the token's ID smaller (its merge comes sooner)
MOVERS = {" to": [("give:gives-y", -1), ("grown:grandpa", -1)],
          "ow": [("now:now", +1), ("colour:brown", +1)],
          " gives": [("gives:gives", +1), ("give:gives-to", +1), ("give:gives-y", +1)],
          " mia": [("kid:mia", +1)],
          " leo": [("kid:leo", +1), ("lead:leo", +1)],
          " hat": [("thing:hat", +1), ("wear:hat", +1)],
          "mia": [("lead:mia", +1), ("callee:mia", +1)],
          " goes": [("go:goes", +1)],
          " at": [("at:at", +1)],
          " red": [("colour:red", +1)]}


def size(errors):
    return sum(abs(e) for e in errors.values())


class Steering:
    """The search, with a log of what it tried."""

    def __init__(self, maker, say):
        self.maker = maker
        self.say = say
        self.cache = {}
        self.evaluations = 0
        self.closest = None        # (total error, quotas): the nearest miss of settle()

    def evaluate(self, quotas):
        """(errors, the first story's token IDs) for quotas, or (None, None) if they do not
        fit in the slots."""
        key = tuple(quotas[name] for name in QUOTA_NAMES)
        if key not in self.cache:
            if not self.maker.filler.fits(quotas):
                self.cache[key] = (None, None)
            else:
                self.evaluations += 1
                corpus = self.maker.corpus(quotas)
                self.cache[key] = (corpus.errors(), tuple(corpus.story))
        return self.cache[key]

    def errors(self, quotas):
        return self.evaluate(quotas)[0]

    def bisect(self, quotas, token, name, sign):
        """Move one quota until token's error is 0, or as small as this quota can make it."""
        tried = {}

        def at(value):
            if value not in tried:
                trial = dict(quotas, **{name: value})
                tried[value] = self.errors(trial)
            return tried[value]

        start = quotas[name]
        first = at(start)
        if first is None or first[token] == 0:
            return quotas
        towards = 1 if (first[token] > 0) == (sign > 0) else -1
        low, step, high = start, 2, None
        while step <= 256:
            value = low + towards * step
            e = at(value)
            if e is None:                               # past the room of the kind
                step //= 2
                if step == 0:
                    break
                continue
            if e[token] == 0 or (e[token] > 0) != (first[token] > 0):
                high = value
                break
            low, step = value, step * 2
        if high is not None:
            while abs(high - low) > 1:
                middle = (low + high) // 2
                e = at(middle)
                if e is None:
                    break
                if e[token] == 0 or (e[token] > 0) != (first[token] > 0):
                    high = middle
                else:
                    low = middle
        best = min((v for v in sorted(tried) if tried[v] is not None),
                   key=lambda v: (abs(tried[v][token]), size(tried[v]), abs(v - start)))
        return dict(quotas, **{name: best})

    def settle(self, quotas, seed):
        """Phase 1: every pinned ID right. Returns quotas with no error, or None."""
        for round_ in range(8):                          # one quota per token, by bisection
            e = self.errors(quotas)
            if size(e) == 0:
                return quotas
            before = dict(quotas)
            for token, movers in MOVERS.items():
                for name, sign in movers:
                    if self.errors(quotas)[token] == 0:
                        break
                    quotas = self.bisect(quotas, token, name, sign)
            self.say(f"  bisection round {round_ + 1}: {self.describe(quotas)}")
            if quotas == before:
                break
        rng = random.Random(seed)                        # then small moves, kept if no worse
        best = size(self.errors(quotas))
        for step in range(4000):
            if best == 0:
                return quotas
            trial = dict(quotas)
            for _ in range(rng.choice((1, 1, 2, 3))):
                name = rng.choice(QUOTA_NAMES)
                trial[name] += rng.choice((1, -1, 2, -2, 3, -3))
            e = self.errors(trial)
            if e is not None and size(e) <= best:
                if size(e) < best:
                    self.say(f"  small moves, {step + 1}: {self.describe(trial)}")
                best, quotas = size(e), trial
        if self.closest is None or best < self.closest[0]:
            self.closest = (best, quotas)
        return None

    def describe(self, quotas):
        wrong = {name: e for name, e in self.errors(quotas).items() if e}
        return "all pinned IDs right" if not wrong else "off: " + ", ".join(
            f"{name!r} {e:+d}" for name, e in wrong.items())

    def find_loss(self, quotas, seed, budget):
        """Phase 2: walk among settings that keep every pinned ID right until the first
        story's token IDs give the lesson's loss and verify() passes. Outside BAND around
        the lesson's loss a step may move the loss at most SLACK further away, so the walk
        drifts into the band; inside it, it moves freely. After JUMP_AFTER new sets of IDs
        without a hit it takes JUMP_STEPS steps wherever they lead. Returns quotas or None."""
        rng = random.Random(seed)
        target = LESSON["initial_loss"]
        losses = {}
        failed = set()                      # story IDs with the right loss that verify() refused
        story = self.evaluate(quotas)[1]
        losses[story] = initial_loss(story)
        since_jump, jumping = 0, 0
        # a quota is moved more often the more often moving it gave new story IDs (most
        # quotas move pinned IDs; a few, such as colour:red or at:at, move the others)
        tried = {name: 0 for name in QUOTA_NAMES}
        new = {name: 0 for name in QUOTA_NAMES}
        for _ in range(budget):
            if losses[story] == target and story not in failed:
                problems = verify(self.maker.corpus(quotas))
                if not problems:
                    self.say(f"  the lesson's loss at the {len(losses)}th set of story IDs")
                    return quotas
                self.say(f"  the loss is right but: {problems[0]}; walking on")
                failed.add(story)
            trial = dict(quotas)
            names = [pick(rng, QUOTA_NAMES, [(new[n] + 1) * 64 // (tried[n] + 2) + 1
                                             for n in QUOTA_NAMES])
                     for _ in range(rng.choice((1, 1, 1, 2)))]
            for name in names:
                trial[name] += rng.choice((1, -1, 2, -2, 3, -3))
                tried[name] += 1
            e, trial_story = self.evaluate(trial)
            if e is None or size(e) != 0:
                continue
            if trial_story not in losses:
                losses[trial_story] = initial_loss(trial_story)
                since_jump += 1
                for name in names:
                    new[name] += 1
                if len(losses) % 100 == 0:
                    self.say(f"  {len(losses)} sets of story IDs tried")
            if since_jump >= JUMP_AFTER:
                since_jump, jumping = 0, JUMP_STEPS
            # a step may not leave the band around the target loss, nor, outside it, move
            # further away than SLACK
            limit = max(BAND, abs(losses[story] - target) + SLACK)
            if jumping or abs(losses[trial_story] - target) <= limit or story in failed:
                quotas, story = trial, trial_story
                jumping = max(0, jumping - 1)
        return None


def pick(rng, items, weights):
    """One of items, each as likely as its whole-number weight (rng.randrange only, so the
    same on every Python)."""
    r = rng.randrange(sum(weights))
    for item, weight in zip(items, weights):
        if r < weight:
            return item
        r -= weight
    raise AssertionError("unreachable")


BAND = 0.01          # the loss walk moves freely within this distance of the lesson's loss
SLACK = 0.002        # and outside it, may move the loss at most this much further away
JUMP_AFTER = 150     # new sets of story IDs without a hit before the walk jumps
JUMP_STEPS = 25      # steps of a jump
ATTEMPTS = 3         # searches, each with its own seed, before the program gives up


def steer(maker, quotas, say, seed=1):
    """Search from quotas: (quotas that give the lesson's figures, "") or (None, a message
    saying how close it came)."""
    steering = Steering(maker, say)
    say(f"steering from: {steering.describe(quotas)}")
    for attempt in range(ATTEMPTS):
        settled = steering.settle(dict(quotas), seed + attempt)
        if settled is None:
            say(f"  attempt {attempt + 1}: the pinned IDs stay out of reach")
            continue
        found = steering.find_loss(settled, seed + attempt, budget=20000)
        if found is not None:
            say(f"  {steering.evaluations} tokenizers trained")
            return found, ""
        say(f"  attempt {attempt + 1}: no setting near these quotas gives the loss")
    if steering.closest is None:
        return None, "every setting tried breaks the pinned IDs"
    closest = steering.closest[1]
    full = [name for name in QUOTA_NAMES if closest[name] == 0]
    for kind, (steered, _) in KINDS.items():
        if sum(closest[f"{kind}:{word}"] for word in steered) == maker.filler.room(kind):
            full.append(f"{kind} ({maker.filler.room(kind)} slots, all steered)")
    wrong = {name: e for name, e in steering.errors(closest).items() if e}
    return None, ("the closest setting found leaves "
                  + ", ".join(f"{name!r} {e:+d}" for name, e in wrong.items())
                  + (f" (quotas at the end of their range: {', '.join(full)})" if full else ""))


# ---------------------------------------------------------------- checking with the lab's own code

def verify(corpus):
    """Everything promised, checked with bpe.py and trace_block.py themselves: a list of
    problems, empty when the corpus is right."""
    problems = []
    stories = corpus.text[:-1].split("\n") if corpus.text.endswith("\n") else [corpus.text]
    if stories[0] != FIRST_STORY:
        problems.append("the first line is not the lesson's first story")
    if len(stories) < MIN_STORIES:
        problems.append(f"{len(stories)} stories, fewer than {MIN_STORIES}")
    for number, story in enumerate(stories, 1):
        if not story.endswith(".") or story != story.lower() or set(story) - set(ALPHABET):
            problems.append(f"line {number} is not a lower-case story in the alphabet ending "
                            f"with a full stop: {story[:60]!r}")
            break
    tokenizer = bpe.Tokenizer.train(corpus.text, bpe.VOCAB_SIZE)
    if tokenizer.vocab != corpus.vocab:
        problems.append("internal error: bpe.py and the fast training disagree")
        return problems
    wrong = corpus.wrong()
    if wrong:
        problems.append("IDs: " + ", ".join(f"{name!r} {e:+d}" for name, e in wrong.items()))
        return problems
    with mock.patch.object(trace_block, "load_tokenizer", lambda: tokenizer), \
            mock.patch.object(trace_block, "first_story", lambda: FIRST_STORY + "\n"):
        figures = trace_block.trace()
    for key, want in LESSON.items():
        if figures[key] != want:
            problems.append(f"trace figure {key}: {json.dumps(figures[key])}, "
                            f"the lesson's is {json.dumps(want)}")
    return problems


# ---------------------------------------------------------------- command line

def read_quotas(path=QUOTAS_PATH, say=print):
    """The stored quotas; DEFAULT_QUOTAS for any the file lacks (or all, with no file)."""
    quotas = dict(DEFAULT_QUOTAS)
    if not os.path.exists(path):
        say(f"no {os.path.relpath(path)}: starting from the built-in quotas")
        return quotas
    with open(path, encoding="utf-8") as file:
        try:
            stored = json.load(file)["quotas"]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f"{os.path.relpath(path)} is not a file this program wrote "
                             f"({error}); delete it to start from the built-in quotas") from None
    for name, value in stored.items():
        if name not in quotas:
            say(f"{os.path.relpath(path)}: {name!r} is no longer steered; left out")
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{os.path.relpath(path)}: the quota {name!r} must be a whole "
                             f"number, not {value!r}")
        else:
            quotas[name] = value
    for name in QUOTA_NAMES:
        if name not in stored:
            say(f"{os.path.relpath(path)}: no quota {name!r}; starting it at "
                f"{DEFAULT_QUOTAS[name]}")
    return quotas


def quotas_json(quotas, maker):
    rooms = {name: maker.filler.room(name.split(":")[0]) for name in QUOTA_NAMES}
    return json.dumps({
        "note": "written by tools/make_corpus.py: how many slots of each kind hold each "
                "steering word (kind:word); the program starts its search from here",
        "quotas": quotas,
        "slots": {name: rooms[name] for name in QUOTA_NAMES},
    }, indent=2) + "\n"


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write corpus.txt so that the tokenizer trained on it reproduces the\n"
                    "lesson's recorded trace (see the docstring at the top of this file).",
        epilog="examples:\n"
               "  python3 tools/make_corpus.py            # write corpus.txt\n"
               "  python3 tools/make_corpus.py --check    # is corpus.txt what this writes?\n"
               "it writes tokenizer.json too; never run trace_block.py --write after it",
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 unless corpus.txt is what the stored "
                             "quotas give and those give the lesson's figures")
    parser.add_argument("--quiet", action="store_true", help="print only problems")
    args = parser.parse_args(argv)
    say = (lambda text: None) if args.quiet else (lambda text: print(text, flush=True))
    started = time.perf_counter()
    try:
        extra = read_stories()
        quotas = read_quotas(say=say)
        maker = Maker(extra)
    except (OSError, ValueError) as error:
        print(f"make_corpus: {error}", file=sys.stderr)
        return 1
    if not maker.filler.fits(quotas):
        if args.check:
            print("make_corpus --check: tools/quotas.json asks for more slots than the plots "
                  "have; run: python3 tools/make_corpus.py", file=sys.stderr)
            return 1
        quotas = maker.filler.fit(quotas)
        say("the stored quotas ask for more slots than the plots have now: cut to fit")
    corpus = maker.corpus(quotas)
    problems = verify(corpus)
    if args.check:
        try:
            with open(CORPUS_PATH, encoding="utf-8", newline="") as file:
                on_disk = file.read()
        except FileNotFoundError:
            on_disk = None
        if problems:
            print("make_corpus --check: the stored quotas no longer give the lesson's figures "
                  f"({problems[0]}); run: python3 tools/make_corpus.py", file=sys.stderr)
            return 1
        if on_disk != corpus.text:
            print("make_corpus --check: corpus.txt is not what tools/make_corpus.py writes; "
                  "run: python3 tools/make_corpus.py", file=sys.stderr)
            return 1
        say(f"corpus.txt is what tools/make_corpus.py writes, and gives the lesson's "
            f"figures ({time.perf_counter() - started:.1f} s)")
        return 0
    if problems:
        say(f"the stored quotas do not give the lesson's figures: {problems[0]}")
        found, why = steer(maker, quotas, say)
        if found is None:
            print(f"make_corpus: no setting of the quotas gives the lesson's figures, so nothing "
                  f"was written; {why}. A pinned ID marked + comes too late (its word is too "
                  f"rare), - too soon. New stories move the counts most when they use the words "
                  f"of the first story (mia, leo, ava, has, gives, the, to, now, hat): write "
                  f"fewer or shorter ones, or change a plot's weight or N_STORIES so that the "
                  f"quotas have room again.", file=sys.stderr)
            return 1
        quotas = found
        corpus = maker.corpus(quotas)
    write(CORPUS_PATH, corpus.text)
    write(QUOTAS_PATH, quotas_json(quotas, maker))
    lines = corpus.text.count("\n")
    say(f"wrote corpus.txt ({lines} stories, {len(maker.extra)} of them from tools/stories.txt) "
        f"and tools/quotas.json in {time.perf_counter() - started:.1f} s")
    say("token IDs: " + ", ".join(f"{token!r} {corpus.ids[token]}" for token in PINNED))
    say(f"the trace gives the lesson's figures (initial_loss {LESSON['initial_loss']}, "
        f"variance {LESSON['layernorm_row0']['variance']}, the order test's gaps)")
    try:
        bpe.write()                  # tokenizer.json, trained on the new corpus by bpe.py
    except (OSError, ValueError) as error:
        print(f"make_corpus: corpus.txt written, but not tokenizer.json: {error}", file=sys.stderr)
        return 1
    say("now check: python3 trace_block.py --check && python3 bpe.py --check && "
        "python3 -m unittest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
