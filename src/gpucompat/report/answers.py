"""What `explain` prints: its checks one per line, wrapped to the terminal; sources as short references [1]
listed at the end (in full with --sources); the nearest yes with commands that are never broken; a
requirements file's packages and a pool's GPU classes as tables that fit (terminal.FitTable).

Every value is put in a rich Text, never in markup, so nothing a user or a scheduler wrote is read as markup.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from .terminal import CODE_STYLE, AdviseTable, Col, FitTable, Step, left_out_table

VERDICT_STYLE = {"pass": "green", "fail": "red", "uncertain": "yellow", "conditional": "blue"}  # conditional: never green


class WholeLine:
    """A line printed as it is, never wrapped or cut (print with crop=False): an install command a person copies."""

    def __init__(self, text: str, indent: int = 4):
        self.text, self.indent = text, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Segment(" " * self.indent + self.text)
        yield Segment.line()


class Sources:
    """Sources numbered in the order they are cited; one number per distinct source."""

    def __init__(self):
        self.numbers: dict[str, int] = {}

    def ref(self, source: str) -> str:
        if not source:
            return ""
        return f" [{self.numbers.setdefault(source, len(self.numbers) + 1)}]"

    def view(self, full: bool) -> list:
        if not self.numbers:
            return []
        if not full:
            return [Text("Sources (the first of each; --sources shows them in full):"), ShortSources(self.numbers)]
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, min_width=len(f"[{len(self.numbers)}]"))
        grid.add_column(overflow="fold")
        for source, number in self.numbers.items():
            grid.add_row(f"[{number}]", Text(source))
        return [Text("Sources:"), Padding(grid, (0, 0, 0, 2))]


class ShortSources:
    """One line per source, its first reference cut to the width with an ellipsis."""

    def __init__(self, numbers: dict[str, int]):
        self.numbers = numbers

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for source, number in self.numbers.items():
            line = f"  [{number}] {source.split(' ; ')[0]}"
            yield Text(line if len(line) <= width else line[:max(width - 1, 8)] + "…", no_wrap=True, overflow="ignore")


def verdict_text(verdict: str, code: str | None = None, stage: str | None = None) -> Text:
    shown = verdict.upper() + (f" {code}" if code else "") + (f" at {stage}" if stage else "")
    return Text(shown, style=VERDICT_STYLE.get(verdict, "red"))


def gpu_text(t: dict) -> str:
    if not t.get("gpu"):
        return f"compute capability {t['cc']}"
    if t.get("cc") is None:
        return f"{t['gpu']} (compute capability unknown: the knowledge holds no such GPU name; give --cc)"
    alias = f"pci.ids: {t['matched']}, " if (t.get("cc_source") or "").startswith("pci.ids") else ""
    return f"{t['gpu']} ({alias}CC {t['cc']})"


def driver_text(t: dict) -> str:
    """The driver as read: a bare branch with the release it was read as (answers/asked.py says why)."""
    typed = t.get("driver_typed")
    if typed and typed != t["driver"]:
        return f"driver {typed} (as {t['driver']}, CUDA {t['driver_cuda'] or '?'})"
    return f"driver {t['driver']} (CUDA {t['driver_cuda'] or '?'})"


def python_text(t: dict) -> str:
    if t.get("python"):
        return f", Python {t['python']}"
    return ", each release's newest Python" if t.get("python_from") == "newest with wheels" else ", any Python"


def _notes(notes: list[str]) -> list:
    return [Text.assemble(("note: ", "dim"), note) for note in notes]


def checks_view(reasons: list[dict], warnings: list[str], sources: Sources) -> Padding:
    """One line per rule (wrapped with a hanging indent), its source as a reference; then the warnings."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=9)
    grid.add_column(overflow="fold")
    for reason in reasons:
        grid.add_row(Text(reason["verdict"], style=VERDICT_STYLE.get(reason["verdict"], "")),
                     Text.assemble(f"{reason['rule']}: {reason['text']}", (sources.ref(reason["source"]), "dim")))
    for warning in warnings:
        grid.add_row(Text("warning", style="yellow"), Text(warning))
    return Padding(grid, (0, 0, 0, 2))


def nearest_view(items: list[dict], where: str, python: str | None = None) -> list:
    """The nearest yes, in its order; a stack with its pip command below it (whole), a driver with what it changes; a stack
    judged on another Python than the answer's (a question about another machine: its newest with wheels) says which."""
    if not items:
        return [Text(f"Nearest yes on {where}: none that the knowledge predicts to pass")]
    out: list = [Text(f"Nearest yes on {where}:")]
    for item in items:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, min_width=17)
        grid.add_column(overflow="fold")
        if item["kind"] == "branch":  # the GPU is not driven: a driver that drives it, and what runs there
            grid.add_row(Text(item["label"], style="cyan"), Text(f"{item['text']}; an administrator's change"))
            out += [Padding(grid, (0, 0, 0, 2))] + ([WholeLine(item["install"]["pip"])] if item.get("install") else [])
            continue
        if item["kind"] == "driver":
            clean = f"; {item['clean_driver']} or newer runs it without" if item.get("clean_driver") else ""
            how = " (under CUDA minor-version compatibility" + clean + ")" if any("minor-version" in w for w in item["warnings"]) else ""
            grid.add_row(Text(item["label"], style="cyan"), Text(f"driver {item['driver']} or newer makes {item['spec']} pass{how}; "
                                                                 "an administrator's change"))
            out += [Padding(grid, (0, 0, 0, 2))]
            continue
        if item["kind"] == "python":  # only the Python is in the way: another interpreter, no install command
            others = ", ".join(item["pythons"])
            runs = f"is conditional with Python {item['python']}: it needs {item['needs']['text']}" if item.get("needs") \
                else f"passes with Python {item['python']}"
            grid.add_row(Text(item["label"], style="cyan"), Text(f"{item['spec']} {runs} (it runs here with Python {others})"))
            out += [Padding(grid, (0, 0, 0, 2))]
            continue
        how = " (under CUDA minor-version compatibility)" if any("minor-version" in w for w in item["warnings"]) else ""
        if python and item.get("python") and item["python"] != python:
            how += f" with Python {item['python']}"
        if item.get("needs"):  # a build that runs only where the system has the CUDA libraries: never a plain pass
            grid.add_row(Text(item["label"], style="cyan"), Text.assemble(f"{item['spec']} ", ("conditional", VERDICT_STYLE["conditional"]),
                                                                          f": it needs {item['needs']['text']}{how}"))
        else:
            grid.add_row(Text(item["label"], style="cyan"), Text(f"{item['spec']} passes{how}"))
        out += [Padding(grid, (0, 0, 0, 2)), WholeLine(item["install"]["pip"])]
    return out


def explain_view(result: dict, full_sources: bool = False) -> list:
    """`explain SPEC`: notes, the verdict line, the checks, the nearest yes, the sources."""
    t = result["target"]
    sources = Sources()
    head = Text.assemble(f"{result['spec']} on {gpu_text(t)}, {driver_text(t)}{python_text(t)}: ",
                         verdict_text(result["verdict"], result["code"], result["stage"]))
    out = [*_notes(result.get("notes", [])), head]
    if result.get("source") == "observed":  # observation first; the rules' checks below are the prediction beside it
        seen = result["observed"]
        out.append(Padding(Text(f"{result['decided_by']} ({seen['passed']} of {seen['cells']} stored cells passed)"), (0, 0, 0, 2)))
        if result.get("disagreement"):
            out.append(Padding(Text(f"surprise: {result['disagreement']}", style="yellow"), (0, 0, 0, 2)))
        out.append(Text("The rules' prediction:"))
    if result.get("needs"):  # a conditional yes: what the system must have, before the checks
        needs = result["needs"]
        out.append(Padding(Text.assemble(("needs: ", "blue"), f"{needs['text']}; {needs['why']}; {needs.get('without', 'without them it runs on the CPU')}",
                                         (sources.ref(needs["source"]), "dim")), (0, 0, 0, 2)))
    out.append(checks_view(result["reasons"], result["warnings"], sources))
    if result["verdict"] != "pass":
        out += nearest_view(result.get("nearest", []), f"{gpu_text(t)}, driver {t['driver']}", t.get("python"))
    elif result.get("install"):  # a yes: the command that installs it, whole
        out += [Text("Install:"), WholeLine(result["install"]["pip"])]
    return out + sources.view(full_sources)


def requirements_view(result: dict, full_sources: bool = False, wide: bool = False) -> list:
    """`explain -r FILE`: the file's GPU packages (a table that fits), the rules over the set, then the nearest yes."""
    t = result["target"]
    sources = Sources()
    head = Text.assemble(f"{result['file']} ({result['kind']}: {result['packages']} packages, {result['gpu_packages']} for the GPU) on "
                         f"{gpu_text(t)}, {driver_text(t)}{python_text(t)}: ",
                         verdict_text(result["verdict"], result["code"], result["stage"]))
    out = [*_notes(result["notes"]), head]
    rows = result["rows"]
    if rows:
        why = [Text.assemble(r["reason"] + ("; " + "; ".join(r["notes"]) if r["notes"] else ""),
                             (sources.ref(next((x["source"] for x in r["reasons"] if x["text"] == r["reason"]), "")), "dim")) for r in rows]
        out.append(FitTable(f"GPU packages ({len(rows)})", [
            Col("package", "Package", [Text(r["package"]) for r in rows], "words"),
            Col("line", "Line", [Text(str(r["line"]) if r["line"] else "") for r in rows]),
            Col("read_as", "Read as", [Text(r["read_as"]) for r in rows], "words", 14),
            Col("verdict", "Verdict", [verdict_text(r["verdict"], r["code"]) for r in rows], "words"),
            Col("why", "Why", why, "flex", 30, share=0.4),
        ], [Step("line"), Step("read_as", into="package")], wide))
    if result["set"]:
        out += [Text("Together:"), checks_view(result["set"], [], sources)]
    if result.get("fixes"):  # a line per failing package and for the set: what to change in the file
        out.append(Text("Fix:"))
        for fix in result["fixes"]:
            unchecked = f" ({fix['checked']})" if fix.get("checked", "resolves") != "resolves" else ""  # never shown as if it resolved
            out += [Padding(Text(fix["text"] + unchecked), (0, 0, 0, 2)), *([WholeLine(fix["install"])] if fix["install"] else [])]
    for spec, items in result["nearest"].items():
        out += nearest_view(items, f"{gpu_text(t)}, driver {t['driver']}, instead of {spec}")
    return out + sources.view(full_sources)


POOL_STEPS = [Step("count"), Step("cc", into="name"), Step("observed")]


def pool_view(result: dict, wide: bool = False) -> list:
    """`explain SPEC --pool`: one row per GPU class, then how to ask the scheduler for the classes that pass."""
    classes = result["classes"]
    conditional = f", {result['conditional']} only with the system's CUDA libraries" if result.get("conditional") else ""
    head = Text.assemble(f"{result['spec']} on the {len(classes)} GPU class{'es' if len(classes) != 1 else ''} of {result['origin']}: ",
                         (f"{result['passing']} of {len(classes)} pass{conditional}", VERDICT_STYLE[result["verdict"]]))
    columns = [
        Col("name", "GPU class", [Text(c["name"] + (f" ({c['gres']})" if c["gres"] else "")) for c in classes], "words", 12),
        Col("cc", "CC", [Text(c["cc"] or "?") for c in classes]),
        Col("driver", "Driver", [Text((c["driver"] or "?") + ("" if c["driver_from"] == "its own" or not c["driver"] else f" ({c['driver_from']})"))
                                 for c in classes], "words"),
        Col("count", "GPUs", [Text(str(c["count"])) for c in classes]),
        Col("verdict", "Verdict", [verdict_text(c["verdict"], c["code"]) for c in classes], "words"),
        Col("reason", "Why", [Text(c["reason"] + (f"; the driver is {c['driver_from']}" if not c["driver"] else "")) for c in classes],
            "flex", 30, share=0.35),
    ]
    if any(c["observed"] for c in classes):  # the store's cells of this stack on each class
        columns.append(Col("observed", "Observed", [Text(c["observed_summary"] or "-", style=CODE_STYLE.get((c["observed"] or [{}])[0].get("code", ""), ""))
                                                    for c in classes], "words"))
    table = FitTable(escape(f"GPU classes of {result['pool']}"), columns, POOL_STEPS, wide)
    out: list = [*_notes(result.get("notes", [])), head, table, *class_nearest_view(classes, result.get("python"))]
    if result.get("install"):  # the classes that pass run the stack this command installs
        out += [Text("Install (on the classes that pass):"), WholeLine(result["install"]["pip"])]
    requests = [c for c in classes if c["request"]]
    which = "that pass" if not result.get("conditional") else "it runs on (a CONDITIONAL one only with the system's CUDA libraries)"
    if result["executor"] == "htcondor" and result.get("htcondor"):
        out += [Text(f"Ask HTCondor for the classes {which} (in the submit description):")]
        out += [WholeLine(line) for line in result["htcondor"].splitlines()]
    elif requests:
        what = {"slurm": "Slurm", "kubernetes": "Kubernetes (in the pod spec)"}.get(result["executor"], result["executor"])
        out += [Text(f"Ask {what} for the classes {which}:")] + [WholeLine(c["request"]) for c in requests]
    elif not result["passing"] and not any(c.get("nearest") for c in classes):
        out += [Text("No class of the pool is predicted to pass; `gpucompat explain SPEC --gpu NAME --driver VERSION` gives the nearest yes for one.")]
    return out


def class_nearest_view(classes: list[dict], python: str | None = None) -> list:
    """For each class the stack does not run on, every nearest yes its answer holds (stacks, another Python, driver changes),
    the smallest change first; classes of one GPU and driver share one list."""
    groups: dict[tuple, tuple[dict, list[str]]] = {}
    for c in classes:
        if c.get("nearest"):
            groups.setdefault((c["name"], c["cc"], c["driver"]), (c, []))[1].append(c["name"] or f"CC {c['cc']}")
    out: list = []
    for c, labels in groups.values():
        shown = labels[0] if len(labels) == 1 else f"{labels[0]} ({len(labels)} classes)"
        out += nearest_view(c["nearest"], f"{shown}, driver {c['driver']}", python)
    return out


def advise_view(result: dict, left_out: bool = False) -> list:
    """`advise`: notes, the target, the stacks advised (a table that fits), or the sentence saying why none and what would."""
    t = result["target"]
    out: list = [*_notes(result["notes"]),
                 Text(f"{result['framework']} for {t['gpu'] or 'compute capability ' + t['cc']} (CC {t['cc']}), {driver_text(t)}{python_text(t)}")]
    if result.get("empty"):
        out.append(Text(result["empty"]))
    else:
        out.append(AdviseTable(result))
    if left_out:
        out.append(left_out_table(result["left_out"]))
    return out


def _spec(framework: str, line: dict) -> str:
    return f"{framework}=={line['version']}" + (f" ({line['variant']})" if line["variant"] not in ("default", "") else "")


def _classes_text(labels: list[str], limit: int = 12) -> str:
    """Class names, each once with how many classes carry it; past `limit` names, how many more."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    names = [f"{n} (x{k})" if k > 1 else n for n, k in counts.items()]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def site_sentences(result: dict, answer: dict) -> dict:
    """What advise --pool says of the site on one Python, as plain sentences every format prints: the headline, one
    sentence per install line, what holds the site back and which driver change would give one install for all."""
    framework, lines = result["framework"], answer["lines"]
    on = f" on Python {answer['python']}" if answer["python"] else ""
    if not lines:
        head = f"No {framework} release the knowledge holds is predicted to run on any class of the site{on}."
    elif answer["one_install"]:
        head = f"One install serves every class{on}: {_spec(framework, lines[0])}, the newest release that runs on each."
    else:
        head = (f"No single install gives every class its newest release{on}: {len(lines)} install line"
                f"{'s' if len(lines) != 1 else ''}, each the newest release that runs on its classes.")
    if lines and not answer["python"]:  # a site runs its own Python: say that these are not on it
        head += (" The plan names no Python, so each line is on the newest Python its release has wheels for; "
                 "`--python X.Y`, or the plan's `python`, answers for the site's own.")
    per_line = []
    for line in lines:
        needs = f", where the system has {line['needs']['text']}" if line.get("needs") else ""
        python = f", Python {line['python']}" if line.get("python") and not answer["python"] else ""
        seen = f"; observed on {_classes_text(line['observed_on'])}" if line["observed_on"] else "; predicted, not observed"
        per_line.append({"spec": _spec(framework, line), "verdict": line["verdict"],
                         "text": f"for {_classes_text(line['classes'])}{needs}{python}{seen}", "install": line["install"]})
    held = []
    for h in answer["held_back"]:
        if h["driver_change"]:
            clean = f" ({h['clean_driver']} or newer without CUDA minor-version compatibility)" if h.get("clean_driver") else ""
            held.append(f"{_classes_text(h['classes'])}, driver {h['driver']}: driver {h['driver_change']} or newer{clean} would run "
                        f"{_spec(framework, lines[0])} (an administrator's change)")
        else:
            held.append(f"{_classes_text(h['classes'])}, driver {h['driver']}: no driver the knowledge names makes "
                        f"{_spec(framework, lines[0])} run there")
    summary = ""
    if held:
        summary = ("The driver changes below would give one install for all: " if answer["driver_change_gives_one_install"] else
                   "No driver change alone gives one install for all; ") + f"these classes hold the site back from {_spec(framework, lines[0])}:"
    return {"head": head, "lines": per_line, "held_summary": summary, "held": held}


def advise_pool_view(result: dict) -> list:
    """`advise --pool`: on each Python, the site's install lines (each class its newest release, classes that share it on
    one line), what holds the site back and the driver changes that would give one install; then per class its advice,
    its nearest yes (a driver change included) and the scheduler request that selects it."""
    framework, answers = result["framework"], result["answers"]
    classes = answers[0]["classes"] if answers else []
    out: list = [*_notes(result["notes"]), Text(f"{framework} for the {len(classes)} GPU class{'es' if len(classes) != 1 else ''} of {result['origin']}")]
    for answer in answers:
        said = site_sentences(result, answer)
        out.append(Text(said["head"]))
        for line in said["lines"]:
            out += [Padding(Text.assemble((line["spec"], VERDICT_STYLE[line["verdict"]]), f" {line['text']}"), (0, 0, 0, 2)),
                    WholeLine(line["install"])]
        if said["held"]:
            out.append(Text(said["held_summary"]))
            out += [Padding(Text(h), (0, 0, 0, 2)) for h in said["held"]]
        on = f" on Python {answer['python']}" if answer["python"] else ""
        out.append(Text(f"Per class{on} (observed first, predicted second):"))
        for c in answer["classes"]:
            head = f"{c['name'] or 'CC ' + str(c['cc'])} (CC {c['cc']}), driver {c['driver']}" + (
                "" if c["driver_from"] == "its own" else f" ({c['driver_from']})") + f", {c['count']} GPU(s)"
            lines: list = [Padding(Text(head), (0, 0, 0, 2))]
            for label, item in (("observed", c["observed"]), ("predicted", c["predicted"])):
                if item and item.get("install"):
                    where = f" (sweep {item['sweep']})" if item.get("sweep") else ""
                    lines += [Padding(Text(f"{label}: {framework}=={item['version']} {item['variant']}{where}"), (0, 0, 0, 4)),
                              WholeLine(item["install"], 6)]
            if c["empty"]:
                lines.append(Padding(Text(c["empty"]), (0, 0, 0, 4)))
            if c["request"] and (c["observed"] or c["predicted"]):
                lines.append(Padding(Text("select it with:"), (0, 0, 0, 4)))
                lines += [WholeLine(line, 6) for line in c["request"].splitlines()]
            out += lines
    for u in result["unjudged"]:
        out.append(Text(f"  {u['name'] or '?'}: not judged, {u['why']}"))
    out.append(Text(result["note"], style="dim"))
    return out


def advise_pool_paragraph(result: dict, fmt: str) -> str:
    """advise --pool --format md|html: the paragraph a facilitator pastes into the site's documentation (every value
    escaped for HTML; Markdown keeps install lines in code spans)."""
    from html import escape as html_escape

    classes = result["answers"][0]["classes"] if result["answers"] else []
    title = f"{result['framework']} on the {len(classes)} GPU classes of {result['origin']}"
    out: list[str] = []
    for answer in result["answers"]:
        said = site_sentences(result, answer)
        if fmt == "html":
            items = "".join(f"<li>{html_escape(line['spec'])} {html_escape(line['text'])}:<br><code>{html_escape(line['install'])}</code></li>"
                            for line in said["lines"])
            held = ("<p>" + html_escape(said["held_summary"]) + "</p><ul>" + "".join(f"<li>{html_escape(h)}</li>" for h in said["held"]) + "</ul>"
                    if said["held"] else "")
            out.append(f"<p>{html_escape(said['head'])}</p>" + (f"<ul>{items}</ul>" if items else "") + held)
        else:
            items = "".join(f"- {_md(line['spec'])} {_md(line['text'])}:  \n  `{line['install'].replace('`', '')}`\n" for line in said["lines"])
            held = (f"\n{_md(said['held_summary'])}\n\n" + "".join(f"- {_md(h)}\n" for h in said["held"])) if said["held"] else ""
            out.append(f"{_md(said['head'])}\n\n{items}{held}")
    if fmt == "html":
        return f"<section class=\"gpucompat-advice\"><h3>{html_escape(title)}</h3>{''.join(out)}<p><small>{html_escape(result['note'])}</small></p></section>\n"
    return f"### {_md(title)}\n\n" + "\n".join(out) + f"\n_{_md(result['note'])}_\n"


def _md(text: str) -> str:
    """Markdown's own characters in a value written as text, escaped."""
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in text)


def view(result: dict, full_sources: bool = False, wide: bool = False) -> list:
    """What to print for an answer of `answers.explain.answer`, by its mode."""
    if result["mode"] == "pool":
        return pool_view(result, wide)
    if result["mode"] == "requirements":
        return requirements_view(result, full_sources, wide)
    return explain_view(result, full_sources)
