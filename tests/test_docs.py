"""The documentation's code blocks run, and print what the documentation shows.

Every fenced block of README.md, docs/*.md and examples/*/README.md is one
of these:

* a ```` ```python ```` block: run (the blocks of one file share one
  namespace, in order, from the repository root, with an empty on-disk kernel
  cache of the file's own); the plain block right after it, if any, is what it
  prints;
* a shell session, lines ``$ command`` and the output that follows each: run
  with bash from a scratch directory that links the repository's top-level
  entries (commands may write files there), ``tcdsl`` being the virtual
  environment's, and one kernel cache shared by all shell blocks;
* a block marked ``<!-- doctest: command -->``: its first line is a command
  (as ``make`` echoes it), the rest its output;
* a TC listing (a block with a ``def``): it must appear, line for line, in a
  ``.tc`` file shipped under examples/ or tests/programs/ (the runnable
  blocks use those files);
* anything else (syntax summaries, diagrams, abridged listings) carries
  ``<!-- doctest: skip REASON -->``.

In an expected output, ``...`` stands for any text (also several lines).
A block marked ``<!-- doctest: timings -->`` shows timings, which depend on
the machine: a number followed by ``ms`` or ``s`` matches any number.
A block marked ``<!-- doctest: slow -->`` runs under ``pytest -m slow`` only
(not in the default run): blocks that compile, tune or train for seconds and
whose subject default tests check too (the stages' outputs:
tests/test_stage_goldens.py; the command line: tests/test_cli.py; tuning and
training: tests/test_tune.py, tests/test_grad_training.py).  Every page keeps
blocks in the default run (test_every_page_keeps_blocks_in_the_default_run).
A Python block run without the blocks before it (under ``-m slow``) runs them
first, so that its namespace is the same.
Blocks that need nvcc are skipped without it; Python blocks that import
torch are skipped without PyTorch.
"""
from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/README.md"))]
SEPARATOR = "@@tcdsl-doctest@@"
_DIRECTIVE = re.compile(r"^<!--\s*doctest:\s*(.*?)\s*-->$")
_TIMING = re.compile(r"\d+(?:\.\d+)?(?= ?m?s\b)")


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    directives: list[str] = field(default_factory=list)
    end: int = 0  # line of the closing fence
    output: "Block | None" = None
    kind: str = ""

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    def has(self, word: str) -> bool:
        return any(d.split()[0] == word for d in self.directives if d)


def _parse(doc: str) -> list[Block]:
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            prev = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            m = _DIRECTIVE.match(prev)
            directives = [d.strip() for d in m[1].split(",")] if m else []
            blocks.append(Block(doc, i + 1, lines[i][3:].strip(), "\n".join(lines[i + 1:j]), directives, j + 1))
            i = j + 1
        else:
            i += 1
    for b, nxt in zip(blocks, blocks[1:]):
        between = lines[b.end:nxt.line - 1]
        if b.info == "python" and nxt.info in ("", "text") and not any(x.strip() for x in between):
            b.output, nxt.kind = nxt, "output"
    for b in blocks:
        if b.kind:
            continue
        first = next((x for x in b.text.splitlines() if x.strip()), "")
        if b.has("skip"):
            b.kind = "skip"
        elif b.info == "python":
            b.kind = "python"
        elif first.startswith("$ "):
            b.kind = "session"
        elif b.has("command"):
            b.kind = "command"
        elif re.search(r"(?m)^\s*def \w+\s*\(", b.text):
            b.kind = "listing"
        else:
            b.kind = "unknown"
    return blocks


BLOCKS = [b for doc in DOCS for b in _parse(doc)]


def _blocks(*kinds: str) -> list:
    # One doc's blocks share a namespace: they run in one worker (``--dist loadgroup``), in order,
    # so that no worker runs the blocks before one again.
    return [pytest.param(b, id=b.id, marks=([pytest.mark.slow] if b.has("slow") else [])
                         + [pytest.mark.xdist_group(b.doc)])
            for b in BLOCKS if b.kind in kinds]


# ------------------------------------------------------------------ compare
def _normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def _pattern(expected: str, timings: bool) -> re.Pattern:
    text = _normalize(expected)
    if timings:
        text = _TIMING.sub("\0", text)
    rx = re.escape(text).replace(r"\.\.\.", "(?s:.*?)").replace("\0", r"[0-9.]+")
    return re.compile(rx)


def _assert_prints(expected: str, actual: str, timings: bool, where: str) -> None:
    if _pattern(expected, timings).fullmatch(_normalize(actual)):
        return
    diff = "\n".join(difflib.unified_diff(_normalize(expected).splitlines(), _normalize(actual).splitlines(),
                                          "documented", "printed", lineterm=""))
    pytest.fail(f"{where}: the output differs from the documentation:\n{diff}", pytrace=False)


# ------------------------------------------------------------------ python
_NAMESPACES: dict[str, dict] = {}
_CACHES: dict[str, str] = {}
_RAN: dict[str, set[int]] = {}  # doc -> lines of the Python blocks run in its namespace


@pytest.mark.parametrize("block", _blocks("python"))
def test_python_block(block: Block, monkeypatch, tmp_path_factory):
    if re.search(r"(?m)^\s*import torch|^import .*\btorch\b", block.text):
        pytest.importorskip("torch")
    if block.doc not in _CACHES:
        _CACHES[block.doc] = str(tmp_path_factory.mktemp("doctest-cache"))  # (pytest removes old ones)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TCDSL_CACHE_DIR", _CACHES[block.doc])
    monkeypatch.delenv("TCDSL_DISK_CACHE", raising=False)
    namespace = _NAMESPACES.setdefault(block.doc, {"__name__": "__doctest__"})
    ran = _RAN.setdefault(block.doc, set())
    # blocks before this one that did not run (deselected, e.g. -m slow): run them first, in order
    for earlier in BLOCKS:
        if earlier.doc == block.doc and earlier.kind == "python" and earlier.line < block.line \
                and earlier.line not in ran:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(earlier.text, f"{earlier.doc}:{earlier.line + 1}", "exec"), namespace)
            ran.add(earlier.line)
    ran.add(block.line)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, f"{block.doc}:{block.line + 1}", "exec"), namespace)
    if block.output is not None:
        _assert_prints(block.output.text, out.getvalue(), block.has("timings") or block.output.has("timings"),
                       block.id)


# ------------------------------------------------------------------- shell
def _commands(block: Block) -> list[tuple[str, str]]:
    """``[(command, expected output)]``: a session's ``$`` lines, or a
    ``command`` block's first line."""
    if block.kind == "command":
        first, _, rest = block.text.partition("\n")
        return [(first, rest)]
    out: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return [(c, "\n".join(lines)) for c, lines in out]


@pytest.fixture
def scratch(tmp_path):
    """A directory that looks like the repository root (links to its entries)."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv") and not entry.name.startswith(".tcdsl"):
            (work / entry.name).symlink_to(entry)
    (work / ".venv").symlink_to(Path(sys.prefix))
    return work


@pytest.fixture(scope="session")
def shell_cache(tmp_path_factory):
    """One kernel cache for every shell block (a block that needs an empty one
    exports its own): the same examples are compiled once, not per block."""
    return tmp_path_factory.mktemp("doctest-shell-cache")


@pytest.mark.parametrize("block", _blocks("session", "command"))
def test_shell_block(block: Block, scratch, shell_cache):
    commands = _commands(block)
    if any("--target cuda" in c for c, _ in commands) and not shutil.which("nvcc"):
        pytest.skip("needs nvcc")
    script = ["set +e", "exec 2>&1"]
    for command, _ in commands:
        script += [command, f"__rc=$?; printf '\\n{SEPARATOR}\\n'; (exit $__rc)"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TCDSL_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="80",
               TCDSL_CACHE_DIR=str(shell_cache), TCDSL_PROGRESS="0")
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=scratch, env=env, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    outputs = proc.stdout.split(f"\n{SEPARATOR}\n")
    assert len(outputs) == len(commands) + 1, proc.stdout
    for (command, expected), actual in zip(commands, outputs):
        _assert_prints(expected, actual, block.has("timings"), f"{block.id}: $ {command}")


# ----------------------------------------------------------------- listings
def _shipped_sources() -> dict[str, str]:
    files = sorted((ROOT / "examples").rglob("*.tc")) + sorted((ROOT / "tests" / "programs").glob("*.tc"))
    return {str(p.relative_to(ROOT)): _normalize(p.read_text(encoding="utf-8")) for p in files}


@pytest.mark.parametrize("block", _blocks("listing"))
def test_listing_is_a_shipped_file(block: Block):
    listing = _normalize(block.text)
    where = [name for name, text in _shipped_sources().items() if listing in text]
    assert where, f"{block.id}: this TC listing is in no .tc file under examples/ or tests/programs/"


def test_every_block_is_tested():
    unknown = [b.id for b in BLOCKS if b.kind == "unknown"]
    assert not unknown, ("blocks that are neither run, nor a shipped TC listing, nor marked "
                         f"'<!-- doctest: skip REASON -->': {unknown}")
    assert {b.kind for b in BLOCKS} >= {"python", "session", "listing", "output"}


def test_every_page_keeps_blocks_in_the_default_run():
    runnable = {b.doc for b in BLOCKS if b.kind in ("python", "session", "command")}
    assert runnable == {b.doc for b in BLOCKS if b.kind in ("python", "session", "command") and not b.has("slow")}


def test_skips_give_a_reason():
    for b in BLOCKS:
        for d in b.directives:
            assert d.split()[0] in ("skip", "timings", "command", "slow"), (b.id, d)
            assert d != "skip", f"{b.id}: say why the block is not run ('skip REASON')"
