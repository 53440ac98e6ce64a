"""Rich tables and progress for the terminal."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..model import Cell, Outcome, is_verified
from ..quoting import printable, printable_values

CODE_STYLE = {"PASS": "green", "NO_MATCH": "yellow", "ENV_UNRESOLVABLE": "magenta", "TIMEOUT": "yellow", "INTERNAL": "red bold", "UNTESTED": "dim"}


def code_text(code: str) -> str:
    return f"[{CODE_STYLE.get(code, 'red')}]{escape(code)}[/]"


# ---- Tables that fit the terminal -------------------------------------------------------------
# A table is laid out for the width it is printed at: the long text (a reason, notes) wraps between
# words and is never cut with "…"; where even that is too wide, low-value columns go first (or merge
# into a neighbour, which loses nothing), in a fixed order; `wide` keeps every column and lets the
# table be as wide as that needs. Nothing here depends on which outcome codes exist.

@dataclass
class Col:
    """One column: `fixed` is never wrapped (a Python version, a driver), `words` may wrap between words
    (a GPU name, a failure and its stage), `flex` is the long text that wraps and takes the width left
    over. `floor`: the width a `words`/`flex` column keeps before an optional column is shown beside it;
    a `flex` column also keeps `share` of the whole width (on a wide terminal the long text gains more
    than a low-value column would)."""

    key: str
    header: str
    cells: list[Text]
    kind: str = "fixed"
    floor: int = 0
    share: float = 1 / 3

    @cached_property
    def content(self) -> int:
        """The longest line of any cell."""
        return max([0, *(cell_len(line) for cell in self.cells for line in cell.plain.splitlines())])

    @cached_property
    def longest_word(self) -> int:
        return max([0, *(cell_len(w) for cell in self.cells for w in cell.plain.split())])

    @property
    def natural(self) -> int:
        return max(cell_len(self.header), self.content)

    def minimum(self, width: int) -> int:
        header = max([0, *(cell_len(w) for w in self.header.split())])  # a header may wrap between its words
        if self.kind == "fixed":
            return max(header, self.content)
        if self.kind == "flex":
            return max(header, min(self.natural, max(self.floor, int(width * self.share))))
        return max(header, self.longest_word, min(self.natural, self.floor))


@dataclass
class Step:
    """What to give up when the table does not fit: drop column `key`, or merge it into `into`
    (its value in parentheses after the other's, or the given `cells`)."""

    key: str
    into: str | None = None
    header: str | None = None
    cells: list[Text] | None = None


def _joined(target: Text, extra: Text) -> Text:
    return Text.assemble(target, " (", extra, ")") if extra.plain else target.copy()


class FitTable:
    """A Rich renderable: a table that fits the width it is printed at (see the comment above)."""

    def __init__(self, title: str, columns: list[Col], steps: list[Step] = (), wide: bool = False, title_style: str | None = None):
        self.title, self.columns, self.wide, self.title_style = title, columns, wide, title_style
        keys = {c.key for c in columns}
        self.steps = [s for s in steps if s.key in keys and (s.into is None or s.into in keys)]

    @staticmethod
    def overhead(n: int) -> int:
        return 3 * n + 1  # the default box: an edge each side, a rule between columns, a space either side of each cell

    @cached_property
    def variants(self) -> list[list[Col]]:
        """The columns as they are, then after each step in order."""
        columns = list(self.columns)
        out = [columns]
        for step in self.steps:
            if step.into is None:
                columns = [c for c in columns if c.key != step.key]
            else:
                source = next(c for c in columns if c.key == step.key)
                target = next(c for c in columns if c.key == step.into)
                cells = step.cells or [_joined(t, s) for t, s in zip(target.cells, source.cells)]
                merged = replace(target, header=step.header or f"{target.header} ({source.header})", cells=cells)
                columns = [merged if c.key == step.into else c for c in columns if c.key != step.key]
            out.append(columns)
        return out

    def need(self, columns: list[Col], width: int) -> int:
        return sum(c.minimum(width) for c in columns) + self.overhead(len(columns))

    def layout(self, width: int) -> tuple[list[Col], list[int]]:
        """The columns shown at this width and the width of each."""
        if self.wide:
            columns = self.columns
        else:
            for columns in self.variants:
                if self.need(columns, width) <= width:
                    break
        widths = [c.minimum(width) for c in columns]
        extra = width - self.need(columns, width)
        if self.wide:  # every column, the table as wide as that takes
            extra = max(extra, 0)
        if extra < 0:  # nothing left to give up: narrow the long text, then word columns, then any column
            for kinds, floor in ((("flex",), 12), (("flex", "words"), 6), (("flex", "words", "fixed"), 1)):
                while extra < 0:
                    candidates = [i for i, c in enumerate(columns) if c.kind in kinds and widths[i] > floor]
                    if not candidates:
                        break
                    widest = max(candidates, key=lambda i: widths[i])
                    widths[widest] -= 1
                    extra += 1
            return columns, widths
        for i, c in sorted(enumerate(columns), key=lambda ic: ic[1].natural - widths[ic[0]]):  # unwrap the cheapest first
            if c.kind != "flex":
                grow = min(extra, c.natural - widths[i])
                widths[i] += grow
                extra -= grow
        flex = [i for i, c in enumerate(columns) if c.kind == "flex"]
        while extra > 0:  # then the long text, evenly
            growing = [i for i in flex if widths[i] < columns[i].natural]
            if not growing:
                break
            share = max(1, extra // len(growing))
            for i in growing:
                grow = min(share, extra, columns[i].natural - widths[i])
                widths[i] += grow
                extra -= grow
        return columns, widths

    def table(self, width: int) -> Table:
        columns, widths = self.layout(width)
        wraps = any(c.content > w for c, w in zip(columns, widths))  # then a rule between rows keeps them apart
        total = sum(widths) + self.overhead(len(columns))
        table = Table(title=self.title, title_justify="left", title_style=self.title_style, show_lines=wraps,
                      width=total if total > width else None)
        for c, w in zip(columns, widths):
            table.add_column(c.header, width=w, overflow="fold")
        for row in zip(*(c.cells for c in columns)):
            table.add_row(*row)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)


def _text(value) -> Text:
    return Text("" if value is None else printable(value))


def _duration(seconds) -> Text:
    if seconds is None:
        return Text("")
    return Text(f"{seconds:.1f} s" if seconds < 100 else f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds:.0f} s")


def _failure(row: dict, stage: bool) -> Text:
    """A failure code, its stage if asked, whether it was only predicted, and whether it was imported unverified:
    'NO_DEVICE (device, predicted)', 'NO_DEVICE (unverified)'."""
    notes = [row["stage"]] if stage and row.get("stage") else []
    notes += [] if row.get("observed", True) else ["predicted"]
    notes += [] if is_verified(row) else ["unverified"]
    code = Text(row["code"], style=CODE_STYLE.get(row["code"], "red"))
    return Text.assemble(code, f" ({', '.join(notes)})") if notes else code


# The order in which a per-cell table gives columns up when it is too wide for the terminal.
CELL_STEPS = [Step("duration"), Step("cudnn"), Step("driver"), Step("env"), Step("stage", into="code"),
              Step("cc", into="gpu"), Step("python"), Step("cuda_runtime"), Step("variant", into="version", header="Version (variant)")]


def cell_columns(rows: list[dict]) -> list[Col]:
    """The stack and target of each cell: the first columns of every per-cell table."""
    return [
        Col("framework", "Framework", [_text(r["framework"]) for r in rows]),
        Col("version", "Version", [_text(r["version"]) for r in rows], "words"),
        Col("variant", "Variant", [_text(r["variant"]) for r in rows]),
        Col("python", "Python", [_text(r["python"]) for r in rows]),
        Col("env", "Env", [_text(r.get("env")) for r in rows]),
        Col("gpu", "GPU", [_text(r["gpu"]) for r in rows], "words", 12),
        Col("cc", "CC", [_text(r["cc"]) for r in rows]),
        Col("driver", "Driver", [_text(r.get("driver")) for r in rows]),
        Col("cuda_runtime", "CUDA runtime", [_text(r["cuda_runtime"]) for r in rows]),
        Col("cudnn", "cuDNN", [_text(r.get("cudnn")) for r in rows]),
        Col("duration", "Duration", [_duration(r.get("duration_s")) for r in rows]),
    ]


def _steps(rows: list[dict]) -> list[Step]:
    """CELL_STEPS, the stage merged into the failure code as 'CODE (stage, predicted)'."""
    merged = [_failure(r, stage=True) for r in rows]
    return [replace(s, header="Failure (stage)", cells=merged) if s.key == "stage" else s for s in CELL_STEPS]


def seed_tables(valid: list[dict], invalid: list[dict]) -> list[FitTable]:
    """Valid and invalid combinations grouped as the CHTC sweep published them (one line per framework, version and
    compute capability, CUDA runtimes collapsed into runs), under the sweep's own column names, the reason wrapped."""
    from .rows import python_differs, seed_table

    tables = []
    by_python = python_differs(valid + invalid)
    for title, rows, with_reason in (("Valid combinations", valid, False), ("Invalid combinations", invalid, True)):
        lines = seed_table(rows, with_reason, by_python)
        columns = [Col("framework", "Framework", [_text(line["framework"]) for line in lines]),
                   Col("version", "Version", [_text(line["version"]) for line in lines], "words"),
                   *([Col("python", "Python", [_text(line["python"]) for line in lines])] if by_python else []),
                   Col("cc", "CC", [_text(line["cc"]) for line in lines]),
                   Col("cuda_runtime", "CUDA runtime", [_text(line["cuda_runtime"]) for line in lines])]
        if with_reason:
            failures = []
            for line in lines:
                code, rest = (line["failure"].split(" ", 1) + [""])[:2]
                failures.append(Text.assemble(Text(code, style=CODE_STYLE.get(code, "red")), " " + rest if rest else ""))
            columns += [Col("failure", "Failure (stage)", failures, "words"),
                        Col("reason", "Reason", [_text(line["reason"]) for line in lines], "flex", 30)]
        tables.append(FitTable(f"{title} ({len(rows)} cells)", columns))
    return tables


def surprises_view(rows: list[dict], wide: bool = False):
    """`results --surprises`: every observed cell that disagrees with the rules' prediction, or one line saying none does."""
    return results_tables(rows, [], [], True, wide)[0] if rows else Text("no surprises: every observed cell agrees with the rules' prediction")


def results_tables(surprises: list[dict], valid: list[dict], invalid: list[dict], per_cell: bool = True, wide: bool = False) -> list:
    """Surprises first, then the valid and the invalid cells (one row each, or the seed's grouped tables);
    each fits the width it is printed at, or with `wide` shows every column. Where some cells were imported unverified,
    each table's title counts them and a sentence after the tables says from where."""
    from .rows import unverified_note

    if per_cell:
        notes = [Text.assemble(("" if is_verified(r) else "UNVERIFIED" + ("; " if r["warnings"] else ""), "bold yellow"),
                               "; ".join(r["warnings"])) for r in valid]
        tables = [
            FitTable(f"Valid combinations ({len(valid)})", [*cell_columns(valid), Col("notes", "Notes", notes, "flex", 20, share=0)],
                     CELL_STEPS, wide),
            FitTable(f"Invalid combinations ({len(invalid)})",
                     [*cell_columns(invalid), Col("code", "Failure", [_failure(r, stage=False) for r in invalid], "words"),
                      Col("stage", "Stage", [_text(r["stage"]) for r in invalid]),
                      Col("reason", "Reason", [_text(r["reason"]) for r in invalid], "flex", 30)],
                     _steps(invalid), wide),
        ]
    else:
        tables = seed_tables(valid, invalid)
    if surprises:
        predicted = [Text(f"{r['predicted']} {r['predicted_code']}".strip() + (f": {r['predicted_reason']}" if r["predicted_reason"] else ""))
                     for r in surprises]
        tables.insert(0, FitTable(
            f"Surprises ({len(surprises)}): observed differs from predicted — a knowledge gap or a broken node",
            [*cell_columns(surprises), Col("code", "Observed", [_failure(r, stage=False) for r in surprises], "words"),
             Col("stage", "Stage", [_text(r["stage"]) for r in surprises]),
             Col("predicted", "Predicted", predicted, "flex", 30)],
            _steps(surprises), wide, title_style="bold red"))
    note = unverified_note(surprises + valid + invalid)
    if note:
        for table, rows in zip(tables, ([surprises] if surprises else []) + [valid, invalid]):
            count = sum(1 for r in rows if not is_verified(r))
            table.title += f" — {count} UNVERIFIED" if count else ""
        tables.append(Text(note, style="bold yellow"))
    return tables


class AdviseTable:
    """advise's table: Install in the table when every command fits whole, else numbered lines below it."""

    def __init__(self, result: dict):
        self.result = result
        self.items = result["observed"] + result["predicted"]

    def _table(self, install: list[Text], kind: str) -> FitTable:
        items = self.items
        notes = [Text.assemble(  # an observation imported without a trusted signature says so first (answers.advise: verified)
            (f"UNVERIFIED (imported from {printable(i.get('site'))}); " if not is_verified(i) else "", "bold yellow"),
            Text(("conditional: " if i.get("verdict") == "conditional" else "")  # it needs the system's CUDA (answers/conditions.py)
                 + ("; ".join(i["warnings"]) or (f"{i.get('seen_in') or 'sweep ' + str(i['sweep'])}, driver {i['driver']}" if i["source"] == "observed" else "")),
                 style="blue" if i.get("verdict") == "conditional" else "")) for i in items]
        return FitTable(escape(self.result["note"]), [
            Col("source", "Source", [_text(i["source"]) for i in items]),
            Col("version", "Version", [_text(i["version"]) for i in items], "words"),
            Col("variant", "Variant", [_text(i["variant"]) for i in items]),
            Col("install", "Install", install, kind),
            Col("notes", "Notes", notes, "flex", 20, share=0),
        ])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.items and self.result.get("undriven"):  # no stack can use the GPU: the note says why, and what to ask
            return
        width = options.max_width
        whole = self._table([Text(i["install"] or "(the interpreter it ran in)") for i in self.items], "fixed")
        if whole.need(whole.columns, width) <= width:
            yield whole.table(width)
            return
        commands = [i["install"] for i in self.items if i["install"]]
        refs, n = [], 0
        for i in self.items:
            if i["install"]:
                n += 1
            refs.append(Text(f"[{n}] below" if i["install"] else "(the interpreter it ran in)"))
        yield self._table(refs, "words").table(width)
        for n, command in enumerate(commands, 1):  # whole lines: print with crop=False so a narrow terminal wraps, not cuts
            yield Segment(f"[{n}] ")
            yield Segment(command)
            yield Segment.line()


def left_out_table(left_out: list[dict]) -> FitTable:
    """advise --explain: each candidate not advised, with the rule that kept it out."""
    return FitTable(f"left out ({len(left_out)})", [
        Col("source", "Source", [_text(i["source"]) for i in left_out]),
        Col("version", "Version", [_text(i["version"]) for i in left_out], "words"),
        Col("variant", "Variant", [_text(i["variant"]) for i in left_out]),
        Col("why", "Why", [_text(i["why"]) for i in left_out], "flex", 30, share=1),
    ])


class RichProgress:
    """sweep.Progress drawn with Rich: bars per phase, a line per finished cell, on stderr (stdout stays for --json)."""

    def __init__(self, console: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console
        self.bars = Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=console, transient=False)
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.bars.start()
        return self

    def __exit__(self, *exc):
        self.bars.stop()

    def phase(self, name: str, total: int) -> None:
        self.tasks[name] = self.bars.add_task(name, total=total)

    def advance(self, name: str) -> None:
        self.bars.advance(self.tasks[name])

    def note(self, text: str) -> None:
        self.bars.console.print(escape(printable(text)))

    def cell_done(self, cell: Cell, outcome: Outcome) -> None:
        # the summary is the stack's own error text (or a scheduler's): printed as results prints it, escape sequences
        # and bidirectional overrides taken out (quoting.printable)
        self.bars.console.print(f"  {code_text(outcome.code)} {escape(printable(cell.stack.key))} on {escape(printable(cell.target.key))}: "
                                f"{escape(printable(outcome.summary[:200]))}")


VERDICT_STYLE = {"pass": "green", "fail": "red", "uncertain": "yellow", "untested": "magenta"}


def runtimes_table(runtimes: list[dict]):
    """The container runtimes on this node (env = "container" stacks), or one line saying there are none."""
    if not runtimes:
        return "no container runtime on the PATH (apptainer, singularity, podman, docker): container stacks cannot run here"
    table = Table("Runtime", "Version", "Path", "nvidia-container-cli", title="Container runtimes", title_justify="left")
    for r in runtimes:
        nvccli = {True: "yes (apptainer.conf)", False: "no", None: ""}[r.get("nvccli")] if r["name"] in ("apptainer", "singularity") else ""
        version = r["version"] + (f"; daemon {r['daemon']}" if r.get("daemon") else "")
        table.add_row(escape(r["name"]), escape(version), escape(r["path"]), nvccli)
    return table


def doctor_tables(result: dict) -> list:
    """The doctor's report: a summary line, then GPUs, frameworks, the CUDA environment (with
    warnings for what changes kernel loading), the CUDA libraries mapped, and verdicts with fixes."""
    result = printable_values(result)  # GPU names, versions and errors the probe read on this machine
    items: list = [f"[bold]{escape(result['summary'])}[/]"]
    if result.get("next_step"):
        items.append(f"next: {escape(result['next_step'])}")
    visible = result["cuda_visible_devices"]
    if visible["value"] is None:  # unset: worth a line only where there are GPUs to hide
        if result["gpus"]:
            items.append("CUDA_VISIBLE_DEVICES is not set: every GPU is visible")
    else:
        items.append(f"CUDA_VISIBLE_DEVICES={escape(repr(visible['value']))} ({visible['form']}): {escape(visible['note'])}")
    state = result.get("gpu_state")
    if state:
        shot = state["snapshot"]
        memory = shot.get("memory") or {}
        line = (f"GPU state: {escape(shot.get('uuid') or '?')} at PCI {escape(shot.get('pci_bus_id') or '?')}, "
                f"{memory.get('free_mib', '?')} of {memory.get('total_mib', '?')} MiB free, compute mode {escape(str(shot.get('compute_mode') or 'not known'))}")
        items.append(line + (f"; {escape(state['note'])}" if state["note"] else ""))
        items.append("[green]a probe can test stacks on it now[/]" if state["testable"] else f"[red]cannot test stacks on it now:[/] {escape(state['why'])}")
    if result["gpus"]:
        gpus = Table("Index", "Name", "CC", "Memory MiB", "MIG", "UUID", title="GPUs", title_justify="left")
        for g in result["gpus"]:
            mig = "n/a" if g["mig_mode"] is None else ("on: " + ", ".join(g["mig_devices"]) if g["mig_mode"] else "off")
            gpus.add_row(str(g["index"]), escape(g["name"]), escape(g["cc"] or "?"), str(g["memory_mib"] or "?"), escape(mig), escape(g["uuid"] or ""))
        items.append(gpus)
    frameworks = Table("Framework", "Version", "CUDA runtime", "cuDNN", "Arch list", "Note", title=f"Frameworks in {escape(result['python']['executable'])}",
                       title_justify="left")
    for f in result["frameworks"]:
        frameworks.add_row(f["framework"], escape(str(f["version"])), escape(f["cuda_runtime"] or ""), escape(str(f["cudnn"] or "")),
                           escape(" ".join(f["arch_list"] or [])), escape(f["import_error"] or f["note"] or ""))
    items.append(frameworks if result["frameworks"] else "no ML framework is installed in this interpreter")
    env = result.get("cuda_env") or {}
    if env:
        variables = Table("Variable", "Value", title="CUDA environment (what changes kernel loading)", title_justify="left", min_width=50)
        for name, value in env.items():
            variables.add_row(escape(name), escape(value))
        items.append(variables)
    else:
        items.append("no environment variable that changes how CUDA loads kernels is set")
    for w in result.get("loading_warnings") or []:
        items.append(f"[yellow]warning[/] {escape(w['variable'])}={escape(repr(w['value'][:200]))}: {escape(w['text'])}\n"
                     f"        [dim]source: {escape(w['source'])}[/]")
    mapped = [("gpucompat doctor", lib) for lib in result.get("loaded_libraries") or []]
    mapped += [(f"import {f['framework']}", lib) for f in result["frameworks"] for lib in f.get("loaded_libraries") or []]
    if mapped:
        libraries = Table("Process", "Library", "Version", "Path", title="CUDA libraries mapped (/proc/self/maps)", title_justify="left")
        for process, lib in mapped:
            libraries.add_row(escape(process), escape(lib["name"]), escape(lib["version"] or ""), escape(lib["path"]))
        items.append(libraries)
    else:
        items.append("no CUDA library is mapped (no libcuda here, and no framework loaded one on import)")
    if "container_runtimes" in result:
        items.append(runtimes_table(result["container_runtimes"]))
    if result.get("env_cache"):
        from ..env_cache import summary_line

        items.append(escape(summary_line(result["env_cache"])))
    if result["verdicts"]:
        verdicts = Table("Framework", "GPU", "Verdict", "Why", "Fix", title="On this machine's GPUs", title_justify="left")
        for v in result["verdicts"]:
            verdict = f"[{VERDICT_STYLE[v['verdict']]}]{v['verdict']}{(' ' + v['code']) if v['code'] else ''}[/]"
            why = "; ".join([v["reason"], *v["warnings"]])
            verdicts.add_row(v["framework"], escape(f"{v['gpu']} ({v['cc']})"), verdict, escape(why), escape(v["fix"] or ""))
        items.append(verdicts)
    return items


DIFF_TITLES = {"newly_broken": "Newly broken", "newly_working": "Newly working", "changed": "Failure changed",
               "added": "Added", "removed": "Removed", "untested": "Not compared (could not test)"}


def _side(row: dict | None) -> str:
    if row is None:
        return ""
    return f"{code_text(row['code'])} [dim]driver {escape(row['driver'] or '?')}[/] {escape(row['reason'][:160])}"


def diff_tables(changes: dict[str, list[dict]], a: int, b: int) -> list:
    items: list = [f"sweep {a} -> sweep {b}: " + ", ".join(f"{len(changes[k])} {DIFF_TITLES[k].lower()}" for k in DIFF_TITLES)]
    for kind, title in DIFF_TITLES.items():
        if not changes[kind]:
            continue
        table = Table("Framework", "Version", "Python", "GPU", f"Sweep {a}", f"Sweep {b}", title=f"{title} ({len(changes[kind])})",
                      title_justify="left", title_style="bold red" if kind == "newly_broken" else None)
        for change in changes[kind]:
            row = change.get("after") or change.get("before")
            table.add_row(escape(row["framework"]), escape(row["version"]), escape(row["python"]),
                          escape(f"{row['gpu']} ({row['cc'] or '?'})"), _side(change.get("before")), _side(change.get("after")))
        items.append(table)
    return items


def history_table(rows: list[dict], title: str) -> Table:
    table = Table("Sweep", "Date", "GPU", "CC", "Driver", "CUDA runtime", "Result", "Reason", title=title, title_justify="left")
    import datetime

    for row in rows:
        when = datetime.datetime.fromtimestamp(row["created_at"]).strftime("%Y-%m-%d %H:%M") if row.get("created_at") else ""
        # a row imported from a bundle no trusted key of its site signed says so where its verdict is
        mark = "" if is_verified(row) else f"UNVERIFIED ({row.get('source') or 'imported'}): "
        table.add_row(str(row["sweep"]), when, escape(row["gpu"]), escape(row["cc"] or ""), escape(row["driver"] or ""), escape(row["cuda_runtime"] or ""),
                      code_text(row["code"]), escape(mark + row["reason"][:160]))
    return table


def untested_attempts(rows: list[dict], framework: str, version: str | None, gpu: str | None, cc: str | None) -> list[dict]:
    """`history`'s cells of the stack on the class (its GPU by name, or the knowledge's name for it; else its compute
    capability) that could not be tested: no verdict, but attempts a person should hear of, oldest first."""
    from ..knowledge import tables

    names = {n for n in (gpu, (tables.gpu(gpu) or {}).get("name")) if n} if gpu else set()
    return [r for r in rows if r["code"] == "UNTESTED" and r["framework"] == framework
            and (version is None or r["version"] == version or r["version"].split("+")[0] == version)
            and (r["gpu"] in names if gpu else r["cc"] == cc)]


def no_verdict_text(asked: str, attempts: list[dict], shown: int = 5) -> str:
    """`history` with no stored verdict: one sentence, naming the attempts that could not be tested (cause, sweep, when)."""
    import datetime

    if not attempts:
        return f"no stored verdict for {asked}"
    named = []
    for row in attempts[-shown:][::-1]:  # the newest first
        when = datetime.datetime.fromtimestamp(row["created_at"]).strftime("%Y-%m-%d %H:%M") if row.get("created_at") else "?"
        named.append(f"sweep {row['sweep']} on {when}, {row['cause'] or 'cause unknown'}"
                     + (f" ({row['reason'][:120]})" if row.get("reason") else ""))
    more = f"; and {len(attempts) - shown} older" if len(attempts) > shown else ""
    count = f"{len(attempts)} attempt" + (" was" if len(attempts) == 1 else "s were")
    return (f"no stored verdict for {asked}: {count} made but could not be tested: " + "; ".join(named) + more
            + "; `gpucompat sweep --resume ID` tries a sweep's again")


def untested_table(rows: list[dict], wide: bool = False) -> FitTable:
    """The cells that could not be tested: no verdict, so apart from the valid and invalid ones."""
    return FitTable(f"Could not test ({len(rows)}): no verdict; `gpucompat sweep --resume ID` tries them again",
                    [*cell_columns(rows), Col("cause", "Cause", [_text(r["cause"]) for r in rows]),
                     Col("stage", "Stage", [_text(r["stage"]) for r in rows]),
                     Col("reason", "What happened", [_text(r["reason"]) for r in rows], "flex", 30)],
                    CELL_STEPS, wide, title_style="bold yellow")


def _stack_text(stack: dict | None) -> str:
    if not stack:
        return "?"
    return stack.get("key") or " ".join(filter(None, (stack.get("framework"), stack.get("version"), stack.get("python"))))


def _use_text(use: dict | None) -> str:
    return f"sweep {use['sweep']} of {use['plan']} ({(use.get('at') or '')[:16].replace('T', ' ')})" if use else "none recorded"


def envs_table(result: dict) -> list:
    """`gpucompat envs`: one row per environment (oldest use first), then the cache in one sentence."""
    from ..env_cache import size_text, summary_line

    table = Table("Environment", "Stack", "Size", "Hard-linked", "Only here", "Files", "Last sweep that used it", "State",
                  title=f"Environments under {escape(result['root'])}", title_justify="left")
    for env in result["environments"]:
        state = "[yellow]in use[/]" if env["in_use"] else ("ready" if env["ready"] else "[red]incomplete[/]")
        table.add_row(env["key"], escape(_stack_text(env["stack"])), size_text(env["bytes"]), size_text(env["shared_bytes"]),
                      size_text(env["own_bytes"]), str(env["files"]), escape(_use_text(env["last_use"])), state)
    items: list = [table] if result["environments"] else []
    items.append(escape(summary_line(result)))
    return items


def prune_lines(result: dict) -> list[str]:
    """`gpucompat envs prune`: what went (or would go), what stayed because a job holds it, and the total."""
    from ..env_cache import size_text

    verb = "would remove" if result["dry_run"] else "removed"
    lines = [f"{verb} {e['key']} {escape(_stack_text(e['stack']))} ({size_text(e['bytes'])}, {size_text(e['own_bytes'])} only there): "
             f"{escape(e['why'])}" for e in result["removed"]]
    lines += [f"[yellow]skipped[/] {e['key']} {escape(_stack_text(e['stack']))}: {escape(e['why'])}" for e in result["skipped"]]
    lines.append(f"{verb} {len(result['removed'])} environments, {'freeing' if not result['dry_run'] else 'which would free'} "
                 f"{size_text(result['freed_bytes'])} (the files no other link holds); kept {len(result['kept'])} that the latest "
                 f"{result['keep']} sweeps of each plan use" + (f"; skipped {len(result['skipped'])} in use" if result["skipped"] else ""))
    return lines
