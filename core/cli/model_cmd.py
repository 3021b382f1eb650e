"""``harnessgrid model``: build the tiny offline model used by tests, CI and the demo; check
what a checkpoint's chat template and tokens let a training run train on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

model_app = typer.Typer(help="Models for tests and demos, and checks of a checkpoint.",
                        no_args_is_help=True)


@model_app.command("tiny")
def tiny(out_dir: Path = typer.Argument(..., help="Where to write the model and tokenizer."),
         size: str = typer.Option("tiny", "--size", help="tiny, small or micro (micro: "
                                  "the demo's model, its tokenizer trained on the micro "
                                  "plugin's harness and task texts)."),
         seed: int = typer.Option(0, "--seed")) -> None:
    """Build a small Qwen3-style model and a tokenizer trained on the spot (no downloads);
    use it anywhere as ``hf:OUT_DIR``."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.paths import require_output_dir
    from harnessgrid.policies.tiny_model import SIZES, build_tiny_model

    if size not in SIZES:
        raise ConfigError(f"unknown tiny-model size {size!r}", hint=f"sizes: {', '.join(SIZES)}")
    require_output_dir(out_dir, "OUT_DIR")
    from rich.console import Console

    # On stderr, so that stdout stays the one line a script reads.
    with Console(stderr=True).status(f"building the {size} model") as status:
        def step(what: str) -> None:
            status.update(f"building the {size} model: {what}")

        if size == "micro":  # the micro plugin's model, through the registry like any plugin
            from harnessgrid.plugin_system.registry import get_registry

            micro = get_registry().plugin_object("micro")
            path = micro.build_micro_model(out_dir, seed=seed, on_step=step)
        else:
            path = build_tiny_model(out_dir, size=size, seed=seed, on_step=step)
    typer.echo(f"built {size} model in {path}; use it as --policy hf:{path}")


@model_app.command("check")
def check(path: str = typer.Argument(..., help="A checkpoint directory, a .gguf file, a hub "
                                     "name or tiny:SIZE."),
          gguf_file: str | None = typer.Option(None, "--gguf-file", help="The GGUF file in "
                                               "PATH to read the tokenizer and config from."),
          text_tools: bool = typer.Option(False, "--text-tools", help="Check for harnesses "
                                          "that write tool calls as text (xml_tags, "
                                          "bash_only), which need no tools= in the template."),
          as_json: bool = typer.Option(False, "--json", help="The report as JSON.")) -> None:
    """What PATH's chat template does with tools and tool calls, its eos and pad tokens and
    context length; exits 2, saying why, when a training run would refuse it."""
    import json

    from harnessgrid.errors import ConfigError
    from harnessgrid.policies.chat_template_check import inspect_template

    tokenizer, config, shown = _load_for_check(path, gguf_file)
    report = inspect_template(tokenizer, config)
    native, text = report.problems(native_tools=True), report.problems(native_tools=False)
    refused = text if text_tools else native
    if as_json:
        typer.echo(json.dumps({"model": shown, **report.as_dict(),
                               "refused": [what for what, _ in refused]}, indent=2))
    else:
        for line in _report_lines(shown, report, native, text):
            typer.echo(line)
    if refused:
        raise ConfigError(f"model {shown!r} cannot be trained"
                          + ("" if text_tools else " through native-tool harnesses") + ": "
                          + "; ".join(what for what, _ in refused),
                          hint="; ".join(dict.fromkeys(hint for _, hint in refused)))


def _report_lines(shown: str, report: Any, native: list[tuple[str, str]],
                  text: list[tuple[str, str]]) -> list[str]:
    def token(name: str, value: str | None, token_id: int | None, problem: str | None,
              missing: str) -> str:
        line = f"{name}: {value!r} (id {token_id})" if value is not None else f"{name}: {missing}"
        return line + (f" -- suspicious: {problem}" if problem else "")

    lines = [f"model: {shown}", f"chat template: {'yes' if report.has_template else 'none'}",
             "tools=: " + ("rendered" if report.tools_rendered
                           else f"dropped ({report.tools_detail})"),
             "assistant tool calls: " + ("rendered" if report.tool_calls_rendered
                                         else f"dropped ({report.tool_calls_detail})"),
             f"end of turn: {report.end_of_turn!r}" if report.end_of_turn
             else "end of turn: not found",
             "chat format tokens: " + (", ".join(repr(t) for t in report.format_tokens)
                                       or "none"),
             token("eos token", report.eos_token, report.eos_token_id, report.eos_problem,
                   "none"),
             token("pad token", report.pad_token, report.pad_token_id, report.pad_problem,
                   "none (trainers pad with the eos)"),
             f"context length: {report.context_length} ({report.context_source})"
             if report.context_length else "context length: unknown"]
    if not native:
        lines.append("training: ok, native-tool and text harnesses")
    elif not text:
        lines.append("training: ok for harnesses that write tool calls as text; refused for "
                     "native-tool harnesses")
    else:
        lines.append("training: refused")
    return lines


def _load_for_check(path: str, gguf_file: str | None) -> tuple[Any, Any, str]:
    """The tokenizer, the config (None when it cannot be read) and the name to show."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.trainer.run import resolve_model_path

    where = Path(path).expanduser()
    if gguf_file is None and where.suffix == ".gguf" and where.is_file():
        where, gguf_file = where.parent, where.name
    # A hub name is NAME or OWNER/NAME: a path with more slashes, or whose first part is a
    # directory here, is a local path that does not exist (yet), not a hub name.
    first = path.split("/", 1)[0]
    local = (where.exists() or path.startswith(("/", "./", "../", "~")) or gguf_file is not None
             or path.count("/") > 1 or ("/" in path and Path(first).expanduser().is_dir()))
    if local and not where.exists():
        raise ConfigError(f"no such file or directory {path!r}",
                          hint="give a checkpoint directory (one a training run wrote, e.g. "
                               "OUTPUT_DIR/final), a .gguf file or a hub name")
    if gguf_file is not None and not (where / gguf_file).is_file():
        raise ConfigError(f"no GGUF file {gguf_file!r} in {str(where)!r}",
                          hint="--gguf-file names a file inside PATH")
    name = str(where) if local else resolve_model_path(path)
    options = {"gguf_file": gguf_file} if gguf_file else {}
    shown = str(where / gguf_file) if gguf_file else name
    try:
        import transformers
    except ImportError:
        raise ConfigError("model check needs transformers",
                          hint="pip install 'harnessgrid[hf]'") from None
    hf: Any = transformers  # partially typed upstream
    try:
        tokenizer = hf.AutoTokenizer.from_pretrained(name, **options)
    except (OSError, ValueError, ImportError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = ("pip install gguf (transformers reads GGUF files with it)"
                if gguf_file and "gguf" in reason.lower() else
                "give a checkpoint directory with tokenizer files, a .gguf file or a hub "
                "name that is in the local cache")
        raise ConfigError(f"cannot load the tokenizer of {shown!r}: {reason}",
                          hint=hint) from None
    try:
        config = hf.AutoConfig.from_pretrained(name, **options)
    except Exception:  # noqa: BLE001 - a tokenizer-only folder: no context length from it
        config = None
    return tokenizer, config, shown
