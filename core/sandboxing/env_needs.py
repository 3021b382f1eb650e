"""What a suite's tasks call, and what their environment lacks (``harnessgrid env check``).

A task needs an environment that holds what its code uses: the Python modules its grader, its
workspace scripts and the code in its instruction import, the programs they run (a grader's
``ruby``, a script's ``subprocess.run(["java", ...])``, a ``reward.sh``'s ``jq``), and the
readers of the files it hands the agent (an ``.xlsx`` needs openpyxl). The scan is static and
conservative:

- Python: imports at any depth (``try`` blocks that catch ``ImportError`` are optional and
  skipped), less the standard library and the task's own modules; programs started through
  ``subprocess`` and ``os.system``/``os.popen`` when the command is a literal.
- Shell (``.sh`` files, ``#!`` scripts, ``sh``/``bash`` code blocks): each command word, less
  builtins, keywords, assignments, functions the script defines, here-documents and paths.
- Files: the readers of spreadsheet, document and PDF formats (:data:`FILE_READERS`).

:func:`check_tasks` then asks a sandbox with each environment mounted, in one command, which of
those modules its python cannot find and which programs its PATH lacks: what a task's commands
would see, the environment's ``bin/`` first, then the host's (or a rootfs's) ``/usr``.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.tasks import Task

__all__ = ["FILE_READERS", "Gap", "Needs", "check_tasks", "python_needs", "shell_commands",
           "task_needs"]

#: The module that reads a workspace file of this kind (what an agent asked to summarise a
#: spreadsheet imports, pandas included: it reads ``.xlsx`` through openpyxl).
FILE_READERS: dict[str, str] = {".xlsx": "openpyxl", ".xlsm": "openpyxl", ".xls": "xlrd",
                                ".docx": "docx", ".pptx": "pptx", ".parquet": "pyarrow",
                                ".pdf": "pypdf"}
#: Import names whose package on the index is named otherwise (for the report's hint).
PACKAGE_OF: dict[str, str] = {
    "yaml": "pyyaml", "bs4": "beautifulsoup4", "PIL": "pillow", "sklearn": "scikit-learn",
    "cv2": "opencv-python-headless", "docx": "python-docx", "pptx": "python-pptx",
    "dateutil": "python-dateutil", "fitz": "pymupdf", "Crypto": "pycryptodome",
    "dotenv": "python-dotenv", "jwt": "pyjwt", "magic": "python-magic", "serial": "pyserial",
    "attr": "attrs", "google": "(a google-* package)", "skimage": "scikit-image",
}
_SHELL_WORDS = frozenset("""
    ! { } [ [[ ]] . : alias bg break builtin case cd command compgen complete continue declare
    dirs disown do done echo elif else enable esac eval exec exit export false fc fg fi for
    function getopts hash help history if in jobs kill let local logout popd printf pushd pwd
    read readonly return select set shift shopt source suspend test then time times trap true
    type typeset ulimit umask unalias unset until wait while
""".split())  # noqa: SIM905 - a table of words reads better as text than as quoted items
#: Words after which the next word is the command that runs (``exec java``, ``xargs rm``).
_RUNS_NEXT = frozenset({"exec", "command", "nohup", "xargs", "env", "sudo", "time", "nice",
                        "then", "do", "else", "elif", "if", "while", "until", "!", "{"})
_COMMAND_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
_ARITHMETIC = re.compile(r"\$\(\((?:[^()]|\([^()]*\))*\)\)")
_CASE_PATTERN = re.compile(r"^\s*[\w*.\"'|-]+\)\s*")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")  # not <<<
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_SHELL_LANGS = frozenset({"sh", "bash", "shell", "console", "zsh"})
_PYTHON_LANGS = frozenset({"python", "py", "python3"})
_SUBPROCESS_CALLS = frozenset({"run", "call", "check_call", "check_output", "Popen"})
_SHELL_STRING_CALLS = frozenset({"system", "popen", "getoutput", "getstatusoutput"})
_SCANNED_BYTES = 512 * 1024  # a bigger file is data, not a script


@dataclass
class Needs:
    """Python modules (top-level import names) and programs a piece of code uses."""

    modules: set[str] = field(default_factory=set)
    executables: set[str] = field(default_factory=set)

    def add(self, other: Needs) -> None:
        self.modules |= other.modules
        self.executables |= other.executables


# ---------------------------------------------------------------------------- scanning


def shell_commands(text: str) -> set[str]:
    """The programs a shell script runs (see the module doc for what is left out)."""
    defined = set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\s*\)", text, re.M))
    defined |= set(re.findall(r"^\s*function\s+([A-Za-z_][\w-]*)", text, re.M))
    found: set[str] = set()
    for line in _logical_lines(text):
        found |= _line_commands(line)
    return {c for c in found if c not in defined}


def _logical_lines(text: str) -> Iterator[str]:
    """Whole commands: continuations joined, a quote left open carried on to the lines that
    close it (``python3 -c '...'`` over several lines), here-document bodies left out."""
    lines = iter(text.replace("\\\n", " ").splitlines())
    for line in lines:
        while not _balanced(line):
            following = next(lines, None)
            if following is None:
                return  # a quote never closed: not shell we can read
            line += "\n" + following
        yield line
        for match in _HEREDOC.finditer(line):
            for body in lines:  # skip to the terminator
                if body.strip() == match.group(2):
                    break


def _balanced(line: str) -> bool:
    try:
        list(_lexer(line))
    except ValueError:  # "No closing quotation"
        return False
    return True


def _lexer(line: str) -> shlex.shlex:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return lexer


def _line_commands(line: str) -> set[str]:
    line = _ARITHMETIC.sub("0", line)
    line = _CASE_PATTERN.sub("", line)  # `pattern)` of a case: no command
    # $(...) and `...` hold commands of their own: split them out as separate segments.
    line = line.replace("$(", " ; ").replace("`", " ; ")
    try:
        tokens = list(_lexer(line))
    except ValueError:
        return set()
    found: set[str] = set()
    at_command = True
    for token in tokens:
        if token and set(token) <= set(";&|()<>"):
            at_command = not set(token) <= set("<>")  # after a redirection comes a file
            continue
        if not at_command:
            continue
        if (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token) or token in _RUNS_NEXT
                or token.startswith("-")):
            continue  # an assignment, a word that runs the next one, or its option
        at_command = False
        if token not in _SHELL_WORDS and _COMMAND_NAME.match(token):
            found.add(token)
    return found


def python_needs(code: str) -> Needs:
    """The modules ``code`` imports (required ones, standard library excluded) and the
    programs it starts; nothing for code that does not parse (e.g. Python 2)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return Needs()
    needs = Needs()
    optional = _optional_import_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and id(node) not in optional:
            needs.modules |= {alias.name.split(".")[0] for alias in node.names}
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and id(node) not in optional):
            needs.modules.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call):
            needs.executables |= _started_programs(node)
    needs.modules -= set(sys.stdlib_module_names) | {"__future__"}
    return needs


def _optional_import_nodes(tree: ast.AST) -> set[int]:
    """Imports inside ``try`` blocks that catch their failure: the code copes without them."""
    catches = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")
    optional: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        if _names_caught(node) & set(catches):
            optional |= {id(n) for stmt in node.body for n in ast.walk(stmt)
                         if isinstance(n, ast.Import | ast.ImportFrom)}
    return optional


def _names_caught(node: ast.Try) -> set[str]:
    """The exception names a ``try`` catches; a bare ``except:`` catches BaseException."""
    names: set[str] = set()
    for handler in node.handlers:
        if handler.type is None:
            names.add("BaseException")
        else:
            names |= {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)}
    return names


def _started_programs(call: ast.Call) -> set[str]:
    """``subprocess.run(["ruby", ...])`` -> ruby; ``os.system("jq . x | sort")`` -> jq, sort;
    a command built with an f-string or ``+`` counts by its literal parts."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else ""
    first = call.args[0] if call.args else None
    if name in _SUBPROCESS_CALLS and isinstance(first, ast.List | ast.Tuple) and first.elts:
        head = _literal_text(first.elts[0])
        return {head} if head and _COMMAND_NAME.match(head) else set()
    shell = name in _SHELL_STRING_CALLS or (name in _SUBPROCESS_CALLS and any(
        k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords))
    text = _literal_text(first) if shell and first is not None else None
    return shell_commands(text) if text else set()


def _literal_text(node: ast.expr) -> str | None:
    """The text of a string expression, its computed parts as ``_`` (None: not a string)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal_text(v) or "_" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_text(node.left), _literal_text(node.right)
        return None if left is None and right is None else (left or "_") + (right or "_")
    return None


def code_blocks_needs(text: str) -> Needs:
    """What the fenced python and shell blocks of a text (an instruction) use."""
    needs = Needs()
    for match in _FENCE.finditer(text):
        lang, body = match.group(1).lower(), match.group(2)
        if lang in _PYTHON_LANGS:
            needs.add(python_needs(body))
        elif lang in _SHELL_LANGS:
            body = re.sub(r"^\s*[$#] ", "", body, flags=re.M)  # console prompts
            needs.executables |= shell_commands(body)
    return needs


def source_needs(name: str, text: str) -> Needs:
    """What one file uses, by its kind: python, shell (by extension or ``#!`` line), else
    nothing."""
    first = text.split("\n", 1)[0]
    if name.endswith(".py") or (first.startswith("#!") and "python" in first):
        return python_needs(text)
    if name.endswith((".sh", ".bash")) or (first.startswith("#!") and re.search(
            r"\b(ba|da|z)?sh\b", first)):
        return Needs(executables=shell_commands(text))
    return Needs()


def task_needs(task: Task) -> Needs:
    """Everything ``task`` uses: its grader's sources, its workspace's scripts and file kinds,
    and the code in its instruction; its own modules are not needs."""
    sources = {**_grader_sources(task), **_workspace_scripts(task)}
    needs = code_blocks_needs(task.instruction)
    for name, text in sources.items():
        needs.add(source_needs(name, text))
    for message in task.followups:
        needs.add(code_blocks_needs(message))
    for name in _workspace_names(task):
        reader = FILE_READERS.get(PurePosixPath(name).suffix.lower())
        if reader is not None:
            needs.modules.add(reader)
    needs.modules -= _own_modules([*sources, *_workspace_names(task)])
    if needs.modules:  # modules are imported by a python: the one commands find
        needs.executables.add("python3")
    return needs


def _grader_sources(task: Task) -> dict[str, str]:
    sources = getattr(task.grader, "sources", None)
    return dict(sources()) if callable(sources) else {}


def _workspace_names(task: Task) -> list[str]:
    names = list(task.files)
    if task.source_dir is not None and task.source_dir.is_dir():
        names += [p.relative_to(task.source_dir).as_posix()
                  for p in task.source_dir.rglob("*") if p.is_file() and not p.is_symlink()]
    return names


def _workspace_scripts(task: Task) -> dict[str, str]:
    """The workspace's files that may be code (by extension or ``#!``), as text."""
    scripts: dict[str, str] = {}
    for name, data in _workspace_bytes(task):
        if len(data) > _SCANNED_BYTES:
            continue
        if name.endswith((".py", ".sh", ".bash")) or data.startswith(b"#!"):
            try:
                scripts[name] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
    return scripts


def _workspace_bytes(task: Task) -> Iterator[tuple[str, bytes]]:
    for name, content in task.files.items():
        yield name, content.encode() if isinstance(content, str) else content
    if task.source_dir is not None and task.source_dir.is_dir():
        for path in sorted(task.source_dir.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= _SCANNED_BYTES:
                yield path.relative_to(task.source_dir).as_posix(), path.read_bytes()


def _own_modules(names: Iterable[str]) -> set[str]:
    """Modules a task brings itself: its ``.py`` files and the folders holding them."""
    own: set[str] = set()
    for name in names:
        path = PurePosixPath(name)
        if path.suffix == ".py":
            own.add(path.stem)
            own |= set(path.parent.parts)
    return own


# ---------------------------------------------------------------------------- checking


@dataclass
class Gap:
    """What one environment lacks for the tasks that run in it.

    ``environment`` is its name (None: no environment, the bare sandbox); ``built`` is False
    when the tasks declare one that is not built (then checked as the bare sandbox, where they
    would run). ``modules`` and ``executables`` map what is missing to the tasks needing it.
    """

    environment: str | None
    built: bool
    tasks: list[str]
    modules: dict[str, list[str]] = field(default_factory=dict)
    executables: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.built and not self.modules and not self.executables

    def as_dict(self) -> dict[str, object]:
        return {"environment": self.environment, "built": self.built, "tasks": len(self.tasks),
                "missing_modules": {m: {"package": PACKAGE_OF.get(m, m), "tasks": ids}
                                    for m, ids in sorted(self.modules.items())},
                "missing_executables": dict(sorted(self.executables.items())), "ok": self.ok}


def check_tasks(tasks: Iterable[Task], override: str | None = None) -> list[Gap]:
    """Check each task against the environment it runs in (``override``, as ``--env`` gives
    it, else its own): one :class:`Gap` per environment, in name order."""
    groups: dict[str | None, dict[str, Needs]] = {}
    for task in tasks:
        name = override if override is not None else task.environment
        name = None if name is not None and name.lower() == "none" else name
        groups.setdefault(name, {})[task.id] = task_needs(task)
    return [_check_group(name, groups[name])
            for name in sorted(groups, key=lambda n: (n is not None, n or ""))]


def _check_group(name: str | None, needs: Mapping[str, Needs]) -> Gap:
    from harnessgrid.sandboxing.environments import get_environment, is_built

    built = name is None or is_built(name)
    record = get_environment(name) if name is not None and built else None
    modules = set().union(*(n.modules for n in needs.values()))
    programs = set().union(*(n.executables for n in needs.values()))
    lacking_modules, lacking_programs = missing_in(record, modules, programs)
    gap = Gap(environment=name, built=built, tasks=sorted(needs))
    for task_id, need in sorted(needs.items()):
        for module in sorted(need.modules & lacking_modules):
            gap.modules.setdefault(module, []).append(task_id)
        for program in sorted(need.executables & lacking_programs):
            gap.executables.setdefault(program, []).append(task_id)
    return gap


_PROBE_PROGRAMS = ('for c in {programs}; do command -v -- "$c" >/dev/null 2>&1 '
                   '|| echo "program $c"; done\n')
_PROBE_MODULES = """\
py=$(command -v python3 || command -v python) || {{ echo no-python; exit 0; }}
"$py" -I -c 'import importlib.util, sys
for m in sys.argv[1:]:
    if importlib.util.find_spec(m) is None: print("module", m)' {modules}
"""


def missing_in(record: EnvironmentRecord | None, modules: set[str],
               programs: set[str]) -> tuple[set[str], set[str]]:
    """Which of ``modules`` the python of a sandbox with ``record`` mounted cannot import and
    which ``programs`` its PATH lacks: one command, in a sandbox as an episode's (without
    bubblewrap where there is none, with the host's PATH then)."""
    if not modules and not programs:
        return set(), set()
    probe = ""
    if programs:
        probe += _PROBE_PROGRAMS.format(programs=" ".join(map(shlex.quote, sorted(programs))))
    if modules:
        probe += _PROBE_MODULES.format(modules=" ".join(map(shlex.quote, sorted(modules))))
    said = _run_probe(record, probe)
    if ("no-python",) in said:  # no python at all: no module imports
        return set(modules), {w[1] for w in said if w[0] == "program"}
    return ({w[1] for w in said if w[0] == "module"},
            {w[1] for w in said if w[0] == "program"})


def _run_probe(record: EnvironmentRecord | None, probe: str) -> list[tuple[str, ...]]:
    """The probe's output lines, split in words, from a fresh sandbox with ``record``."""
    from harnessgrid.errors import HarnessgridError
    from harnessgrid.sandboxing.sandbox import Sandbox, sandbox_available
    from harnessgrid.sandboxing.workspace import Workspace

    ws = Workspace.create({}, None)
    try:
        with Sandbox(ws, environment=record, unsafe_no_sandbox=not sandbox_available()) as sb:
            result = sb.run_sync(probe, timeout_s=120)
    finally:
        ws.cleanup()
    if result.exit_code != 0:
        raise HarnessgridError("checking the environment failed: "
                               f"{(result.stderr or result.stdout).strip()[-300:]}")
    return [tuple(line.split(" ", 1)) for line in result.stdout.splitlines() if line.strip()]


def render(gaps: list[Gap]) -> list[str]:
    """The report as lines of text (``env check`` and ``env build --check`` print it)."""
    from harnessgrid.sandboxing.environments import system_tool_hint

    out: list[str] = []
    for gap in gaps:
        where = gap.environment or "no environment (the bare sandbox)"
        state = "" if gap.built else " - not built: checked as the bare sandbox, where they run"
        out.append(f"{where}: {len(gap.tasks)} task(s){state}")
        if not gap.built:
            out.append(f"  build it: `harnessgrid env build {gap.environment}` (with -r "
                       "requirements.txt unless it is a built-in list)")
        for module, ids in sorted(gap.modules.items()):
            package = PACKAGE_OF.get(module, module)
            out.append(f"  missing python module {module} (package {package}): {_ids(ids)}")
        for program, ids in sorted(gap.executables.items()):
            hint = _python_hint(gap) if program.startswith("python") else system_tool_hint(
                program)
            out.append(f"  missing program {program}: {_ids(ids)}; provide it with {hint}")
        if not gap.modules and not gap.executables:
            out.append("  nothing missing")
    return out


def _python_hint(gap: Gap) -> str:
    name = gap.environment or "NAME"
    return f"a venv environment (`harnessgrid env build {name}`): its bin/ has python"


def _ids(ids: list[str], shown: int = 5) -> str:
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def as_json(gaps: list[Gap]) -> str:
    return json.dumps([g.as_dict() for g in gaps], indent=2)
