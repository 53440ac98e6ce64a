"""`gpucompat knowledge update` and `knowledge reset`: learn the releases an index has past the packaged tables
(learn.py), show what was learned, and optionally write a sweep plan of them. Progress goes to stderr, so stdout
stays for --json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import err, escape, guarded, out, print_json


def summary_table(result: dict):
    """What an update learned: one row per release series and variant."""
    from rich.table import Table

    table = Table(title=f"learned from {result.get('index') or 'nothing yet'}" + (f" on {result['date']}" if result.get("date") else ""))
    for column in ("package", "release", "versions", "variant", "CUDA", "architectures", "how", "bytes"):
        table.add_column(column, overflow="fold")
    for entry in result.get("learned", []):
        variants = entry.get("variants") or [{}]
        for number, variant in enumerate(variants):
            archs = "; ".join(filter(None, (variant.get("sass", ""), variant.get("ptx", ""))))
            table.add_row(entry["package"] if number == 0 else "", entry["release"] if number == 0 else "",
                          ", ".join(entry["versions"]) if number == 0 else "", variant.get("variant", ""), variant.get("cuda", "") or "",
                          archs.replace(";", " "), variant.get("how", ""), f"{entry.get('bytes', 0):,}" if number == 0 else "")
    return table


def fetch_table(result: dict):
    """What a dry run found an update would fetch: one row per wheel."""
    from rich.table import Table

    table = Table(title=f"an update from {result.get('index')} would read")
    for column in ("package", "release", "file", "bytes (at most)"):
        table.add_column(column, overflow="fold")
    for read in result["fetch"]["reads"]:
        table.add_row(read["package"], read["release"], read["file"], f"{read['bytes']:,}" if read["bytes"] is not None else "not given")
    return table


def register(app: typer.Typer) -> None:
    knowledge_app = typer.Typer(help="The knowledge tables: bring them up to date with what the index has (a user-level overlay).",
                                no_args_is_help=True)

    @knowledge_app.command("update")
    @guarded
    def update(
        index: Optional[str] = typer.Option(None, "--index", help="The simple-API index to read (default: uv's, $UV_DEFAULT_INDEX or $UV_INDEX_URL, else PyPI)."),
        wheelhouse: Optional[Path] = typer.Option(None, "--wheelhouse", help="A folder of wheels to read instead of an index."),
        offline: bool = typer.Option(False, "--offline", help="Ask no index: with --wheelhouse learn from it (uv offline); else show what is known."),
        plan: Optional[Path] = typer.Option(None, "--plan", help="Also write a sweep plan of the new releases (for `gpucompat sweep`); this is no dry run (see --dry-run)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Read the index pages and list what an update would fetch, with the bytes; fetch no wheel and change nothing."),
        files_host: list[str] = typer.Option([], "--files-host", help="A host the index keeps its files on besides its own (PyPI's files.pythonhosted.org is known); repeatable."),
        executor: str = typer.Option("local", "--executor", help="The plan's executor: its GPU classes are what `sweep` discovers there."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ):
        """Read the index for torch, JAX, TensorFlow and CuPy releases newer than the tables and learn their CUDA builds,
        Pythons and kernels; the overlay beside the store changes only when the whole update succeeds."""
        from ..errors import UserError
        from ..learn import plan_text
        from ..learn import update as learn
        from ..model import EXECUTORS

        if index and wheelhouse:
            raise UserError("give --index or --wheelhouse, not both.")
        if executor not in EXECUTORS:
            raise UserError(f"unknown executor {executor!r}; this version has: {', '.join(EXECUTORS)}.")
        if dry_run and plan is not None:
            raise UserError("--dry-run writes nothing, so it takes no --plan; run without --dry-run to write the plan.")
        if plan is not None and plan.exists() and plan.is_dir():
            raise UserError(f"--plan {plan} is a directory; give a file name such as new.toml.")
        if plan is not None and not plan.resolve().parent.is_dir():  # said before anything is fetched
            raise UserError(f"--plan {plan}: the folder {plan.resolve().parent} does not exist.")
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err.real(), transient=True) as progress:
            task = progress.add_task("knowledge update", total=None)
            # the bytes are said before any wheel is fetched, on stderr, terminal or not: no prompt, the update goes on
            result = learn(index, str(wheelhouse) if wheelhouse else None, offline, say=lambda text: progress.update(task, description=text),
                           dry_run=dry_run, announce=lambda text: progress.console.print(text, highlight=False, soft_wrap=True),
                           hosts=tuple(files_host))
        if result.get("dry_run"):
            if json_out:
                print_json(result)
                return
            out.print(fetch_table(result), highlight=False)
            planned = result["fetch"]
            out.print(f"dry run: {len(planned['reads'])} wheel(s) whose CUDA libraries would be read, at most {planned['bytes']:,} bytes"
                      + (f" ({planned['unsized']} of a size the index does not give)" if planned["unsized"] else "")
                      + f"; {len(planned['checks'])} listed file(s) checked (metadata or 4 bytes each); {result['index_bytes']:,} bytes of index "
                      "pages read to find them. Nothing was fetched or changed.", highlight=False, soft_wrap=True)
            for sentence in result.get("refused", []):
                out.print(f"refused: {sentence}", highlight=False, soft_wrap=True)
            return
        if plan is not None:
            text = plan_text(result, executor, str(wheelhouse) if wheelhouse else None) if result.get("changed") else None
            if text is not None:
                from ..plan import parse_plan

                parse_plan(text, str(plan))  # a plan sweep refuses is a bug here, not a file to leave behind
                try:
                    plan.write_text(text, encoding="utf-8")
                except OSError as exc:
                    raise UserError(f"--plan {plan} cannot be written ({exc.strerror or exc}); the knowledge was updated, "
                                    "so `gpucompat knowledge update --plan OTHER.toml` writes the plan without fetching again.") from None
            result["plan"] = str(plan) if text is not None else None
        if json_out:
            print_json(result)
            return
        out.print(summary_table(result))
        if result.get("offline"):
            out.print("offline: no index was asked; this is what the overlay holds", highlight=False)
            return
        rows = ", ".join(f"{n} {name}" for name, n in sorted(result.get("rows", {}).items())) or "none"
        hows = [v.get("how", "") for e in result["learned"] for v in e.get("variants", [])]
        counted = ", ".join(f"{hows.count(how)} {word}" for how, word in (("read", "read"), ("inferred", "inferred"), ("kept from the last update", "kept"))
                            if hows.count(how))
        out.print(f"{len(result['learned'])} release series past the packaged tables on {result['index']} ({counted or 'no CUDA build'}) "
                  f"in {result['seconds']} s; "
                  f"{result['bytes_fetched']:,} bytes of wheels and {result['index_bytes']:,} of index pages fetched"
                  + ("" if result.get("range_requests", True) else "; the index ignores range requests, so kernels were inferred")
                  + f". Overlay rows: {rows} ({result['overlay']}).", highlight=False, soft_wrap=True)
        if result.get("current"):  # nothing new: how current the tables answering are
            out.print(escape(result["current"]), highlight=False, soft_wrap=True)
        for sentence in result.get("not_learned", []):
            out.print(f"not learned: {sentence}", highlight=False, soft_wrap=True)
        for sentence in result.get("refused", []):
            out.print(f"refused: {sentence}", highlight=False, soft_wrap=True)
        if result.get("replaced_damaged"):
            out.print("the damaged overlay was replaced by this update's", highlight=False)
        if plan is not None:
            out.print(f"plan: {plan}" if result.get("plan") else "plan: nothing new to sweep, so no plan was written", highlight=False)

    @knowledge_app.command("reset")
    @guarded
    def reset():
        """Remove the learned knowledge (the overlay `knowledge update` wrote); the packaged tables stay and answer alone."""
        from ..knowledge.overlay import reset as remove

        where, removed = remove()
        out.print(f"removed the learned knowledge ({where}); the packaged tables answer alone now" if removed else
                  f"nothing learned to remove ({where}); the packaged tables answer alone already", highlight=False, soft_wrap=True)

    app.add_typer(knowledge_app, name="knowledge")
