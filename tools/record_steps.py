"""Write tests/steps.json: what the model computes on fixed token IDs, step by step.

test_model.py's first test reads it to say where a changed computation first departs, and
tests/test_math.py holds the model to it bit for bit (the same numbers on every Python). It
holds, for the small copy (trace_block.TINY, the 96-token vocabulary) reading
test_model.REPEATED[:-1] and predicting REPEATED[1:]: the numbers init_params draws, forward's
intermediate results, in the order test_model.FORWARD_STEPS lists them, the loss, d_logits and
backward()'s gradient of every parameter. The IDs are fixed, so a new corpus or tokenizer does
not move them; a change to model.py's math does, and only then is this worth running again:

    python3 tools/record_steps.py
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import model          # noqa: E402  (the lab's modules live one folder up)
import test_model     # noqa: E402


def recorded_steps():
    """The text of tests/steps.json, one tensor per line."""
    ids, p = test_model.REPEATED, test_model.tiny()
    found = test_model.forward_steps(model, p, ids)
    grads = test_model.gradient_steps(model, p, ids)
    sections = {"init": model.init_params(96, **test_model.TINY),
                "forward": {name: found[name] for names, _ in test_model.FORWARD_STEPS
                            for name in names.split()},
                "gradients": grads}
    parts = [f' "ids": {json.dumps(ids)}']
    for section, values in sections.items():
        body = ",\n".join(f"  {json.dumps(name)}: {json.dumps(value)}"
                           for name, value in values.items())
        parts.append(f' "{section}": {{\n{body}\n }}')
    return "{\n" + ",\n".join(parts) + "\n}\n"


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    path = os.path.join(ROOT, "tests", "steps.json")
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.write(recorded_steps())
    print(f"wrote {path}")
