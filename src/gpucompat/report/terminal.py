"""Rich tables and progress for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..model import Cell, Outcome

CODE_STYLE = {"PASS": "green", "NO_MATCH": "yellow", "ENV_UNRESOLVABLE": "magenta", "TIMEOUT": "yellow", "INTERNAL": "red bold"}


def code_text(code: str) -> str:
    return f"[{CODE_STYLE.get(code, 'red')}]{escape(code)}[/]"


def seed_tables(valid: list[dict], invalid: list[dict]) -> list[Table]:
    """The seed's two tables, CUDA runtime versions collapsed into runs."""
    from .rows import seed_table

    tables = []
    for title, rows, with_reason in (("Valid combinations", valid, False), ("Invalid combinations", invalid, True)):
        lines = seed_table(rows, with_reason)
        table = Table("Framework", "Framework Version", "Compute Capability", "CUDA Runtime Version",
                      title=f"{title} ({len(rows)} cells)", title_justify="left")
        if with_reason:
            table.add_column("Failure Reason")
        for line in lines:
            cells = [escape(line[k]) for k in ("framework", "version", "cc", "cuda_runtime")]
            table.add_row(*cells, *([code_text(line["failure"].split(" ")[0]) + " " + escape(line["failure"].split(" ", 1)[1])] if with_reason else []))
        tables.append(table)
    return tables


def results_tables(surprises: list[dict], valid: list[dict], invalid: list[dict], per_cell: bool = True) -> list[Table]:
    keys = [("Framework", "framework"), ("Version", "version"), ("Variant", "variant"), ("Python", "python"),
            ("GPU", "gpu"), ("CC", "cc"), ("CUDA runtime", "cuda_runtime")]
    valid_table = Table(title=f"Valid combinations ({len(valid)})", title_justify="left")
    invalid_table = Table(title=f"Invalid combinations ({len(invalid)})", title_justify="left")
    for table in (valid_table, invalid_table):
        for head, _ in keys:
            table.add_column(head, no_wrap=True)
    valid_table.add_column("Notes", overflow="fold", min_width=30)
    invalid_table.add_column("Failure", no_wrap=True)
    invalid_table.add_column("Stage")
    invalid_table.add_column("Reason", overflow="fold", min_width=40)
    for row in valid:
        valid_table.add_row(*(escape(str(row[k])) for _, k in keys), escape("; ".join(row["warnings"])[:300]))
    for row in invalid:
        code = code_text(row["code"]) + ("" if row["observed"] else " [dim](predicted)[/]")
        invalid_table.add_row(*(escape(str(row[k])) for _, k in keys), code, escape(row["stage"]), escape(row["reason"]))
    tables = [valid_table, invalid_table] if per_cell else seed_tables(valid, invalid)
    if surprises:
        surprise_table = Table(title=f"Surprises ({len(surprises)}): observed differs from predicted — a knowledge gap or a broken node",
                               title_justify="left", title_style="bold red")
        for head, _ in keys:
            surprise_table.add_column(head, no_wrap=True)
        surprise_table.add_column("Observed", no_wrap=True)
        surprise_table.add_column("Predicted", overflow="fold", min_width=30)
        for row in surprises:
            predicted = f"{row['predicted']} {row['predicted_code']}".strip() + (f": {row['predicted_reason']}" if row["predicted_reason"] else "")
            surprise_table.add_row(*(escape(str(row[k])) for _, k in keys), code_text(row["code"]), escape(predicted))
        tables.insert(0, surprise_table)
    return tables


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
        self.bars.console.print(escape(text))

    def cell_done(self, cell: Cell, outcome: Outcome) -> None:
        self.bars.console.print(
            f"  {code_text(outcome.code)} {escape(cell.stack.key)} on {escape(cell.target.key)}: {escape(outcome.summary[:200])}"
        )


VERDICT_STYLE = {"pass": "green", "fail": "red", "uncertain": "yellow"}


def explain_text(result: dict) -> list[str]:
    """The prediction as a few lines: verdict first, then each rule with its source."""
    t = result["target"]
    gpu = f"{t['gpu']} (CC {t['cc']})" if t["gpu"] else f"compute capability {t['cc']}"
    verdict = result["verdict"].upper() + (f" {result['code']} at {result['stage']}" if result["code"] else "")
    lines = [f"{escape(result['spec'])} on {escape(gpu)}, driver {escape(t['driver'])} (CUDA {t['driver_cuda'] or '?'}): "
             f"[{VERDICT_STYLE[result['verdict']]}]{verdict}[/]"]
    for reason in result["reasons"]:
        lines.append(f"  [{VERDICT_STYLE[reason['verdict']]}]{reason['verdict']:<9}[/] {escape(reason['rule'])}: {escape(reason['text'])}")
        if reason["source"]:
            lines.append(f"            [dim]source: {escape(reason['source'])}[/]")
    lines += [f"  [yellow]warning[/]   {escape(w)}" for w in result["warnings"]]
    return lines


def doctor_tables(result: dict) -> list:
    """The doctor's report: a summary line, then GPUs, frameworks and verdicts with fixes."""
    items: list = [f"[bold]{escape(result['summary'])}[/]"]
    visible = result["cuda_visible_devices"]
    items.append(f"CUDA_VISIBLE_DEVICES: {escape(repr(visible['value']))} ({visible['form']}): {escape(visible['note'])}")
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
    if result["verdicts"]:
        verdicts = Table("Framework", "GPU", "Verdict", "Why", "Fix", title="On this machine's GPUs", title_justify="left")
        for v in result["verdicts"]:
            verdict = f"[{VERDICT_STYLE[v['verdict']]}]{v['verdict']}{(' ' + v['code']) if v['code'] else ''}[/]"
            why = "; ".join([v["reason"], *v["warnings"]])
            verdicts.add_row(v["framework"], escape(f"{v['gpu']} ({v['cc']})"), verdict, escape(why), escape(v["fix"] or ""))
        items.append(verdicts)
    return items


DIFF_TITLES = {"newly_broken": "Newly broken", "newly_working": "Newly working", "changed": "Failure changed",
               "added": "Added", "removed": "Removed"}


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
        table.add_row(str(row["sweep"]), when, escape(row["gpu"]), escape(row["cc"] or ""), escape(row["driver"] or ""), escape(row["cuda_runtime"] or ""),
                      code_text(row["code"]), escape(row["reason"][:160]))
    return table
