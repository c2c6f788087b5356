"""The lab's own tests beyond the lesson's twelve, and their helpers: README.md here says what
each module proves, and how to run them."""
import contextlib
import functools
import importlib.util
import io
import json
import runpy
import sys
import tempfile
from pathlib import Path
from unittest import mock

import bpe
import trace_block

LAB = Path(__file__).resolve().parent.parent


def run_main(main, *args):
    """Run a command line's main() in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as done:      # argparse: --help, or a usage error
            code = done.code
    return code, out.getvalue(), err.getvalue()


def tool_module(name):
    """tools/{name}.py as a fresh module, its globals a test's to patch."""
    spec = importlib.util.spec_from_file_location(name, LAB / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(path, *args):
    """Run `python3 path args` in this process, as a script, __main__ and all: (code, out, err)."""
    with mock.patch.object(sys, "argv", [str(path), *args]):
        return run_main(lambda _: runpy.run_path(str(path), run_name="__main__"))


@functools.lru_cache(maxsize=None)
def shown():
    """What `python3 trace_block.py --show` prints: made once (a dozen forward passes), shared."""
    code, out, err = run_script(LAB / "trace_block.py", "--show")
    if code != 0 or err:
        raise AssertionError(f"trace_block.py --show exited with {code}: {err}")
    return out


def recorded():
    return json.loads((LAB / "block-trace.json").read_text(encoding="utf-8"))


def the_recorded_trace():
    """trace() answered from block-trace.json, for the command-line tests not about figures."""
    return mock.patch.object(trace_block, "trace", lambda tok=None, story=None: recorded())


@contextlib.contextmanager
def lab_copy(**changed):
    """The lab's data files in a temporary folder (yielded), both command lines pointed at it;
    changed maps a file's name (. and - as _) to the bytes it holds instead, None: missing."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in ("tokenizer.json", "corpus.txt", "block-trace.json"):
            data = changed.get(name.replace(".", "_").replace("-", "_"), (LAB / name).read_bytes())
            if data is not None:
                (folder / name).write_bytes(data)
        with mock.patch.multiple(trace_block, TRACE_FILE=folder / "block-trace.json",
                                 TOKENIZER_FILE=folder / "tokenizer.json"), \
                mock.patch.multiple(bpe, CORPUS_PATH=str(folder / "corpus.txt"),
                                    TOKENIZER_PATH=str(folder / "tokenizer.json")):
            yield folder
