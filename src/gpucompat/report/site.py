"""`gpucompat report --site DIR`: a static compatibility site from a store, to publish as it is.

Pages (templates/site/): `index.html`, a matrix of frameworks x GPU classes counting the stacks that are
valid, invalid and could not be tested there (each stack's newest result on each class), and every stack listed; one
page per stack (`stack-*.html`) with its verdict on each GPU class, the evidence a click away, its bench
figures and how to install it (answers.advise's install command, or its image); one page per GPU class
(`gpu-*.html`) with every stack's verdict there. Only real GPU classes and stacks are shown: the stand-in target of a
machine without a GPU is no class, a stack none of whose cells could be tested (not installed here) is no stack, and
the cells that could not be tested are counted apart on each page, by cause with its sentence (build() says how); a
class on which no cell ran (the scheduler placed none of its jobs) is listed apart as not tested. The classes are this
site's own (site_pool.py): rows imported from other sites are supporting evidence on the class they match, each class
page carries advise --pool's install lines and the scheduler request that selects it, and rows on a GPU the site does
not have are only listed as observed elsewhere. Each page names its sources (local, or each site a bundle came from, verified or not), and every row, figure and install line
imported without a signature from a key this site trusts is marked UNVERIFIED.
Jinja2 escapes every value; a Content-Security-Policy forbids every fetch, so the site needs no network to view; it
is whole without JavaScript (a small inline script only filters the index's list). A second run replaces the pages
of the first; a directory that holds other files is refused.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import time
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from .. import __version__
from ..errors import UserError
from ..analysis import as_read, shown_python, shown_version
from ..model import PASS, UNTESTED, is_verified
from .bench import display as bench_display
from ..discover.local import NO_GPU
from .rows import apart_cause, apart_summary, display_row, is_gpu_class, probe_driver
from .site_pool import SitePool, class_of, install_lines, site_pool

MARKER = ".gpucompat-site"  # in a directory the site wrote: its pages may be replaced
STATUS = ("valid", "invalid", "untested", "pending")  # untested: could not be tested (UNTESTED, with a cause); pending: not run yet
EVIDENCE_CHARS = 4000


def _slug(kind: str, text: str) -> str:
    """A file name for a page: readable, and unique by a digest of the whole text."""
    readable = re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.")[:60] or "x"
    return f"{kind}-{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.html"


def _status(row: dict) -> str:
    if row["code"] == PASS:
        return "valid"
    return "untested" if row["code"] == UNTESTED else "pending" if row["code"] == "PENDING" else "invalid"


def _stack_key(row: dict) -> tuple:
    return (row["framework"], row["version"], row["variant"], row["python"], row["env"], row.get("image") or "")


def _stack_label(key: tuple) -> str:
    framework, version, variant, python, env, image = key
    return f"{framework} {version} [{variant}] {python_label(python)} {env}" + (f" {image}" if image else "")


def python_label(python: str) -> str:
    """'py3.12', or for a probe that never ran in a `current` interpreter or an image, whose Python nobody read: 'py?'."""
    return f"py{python}" if python[:1].isdigit() else "py?"


def _release(version: str) -> tuple:
    """A version's numbers, to sort by ('2.5.1+cu121' -> (2, 5, 1); a version without numbers sorts last)."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", version.split("+")[0])[:4]) or (-1,)


def newest(raw_rows: list[dict], cells: dict | None = None) -> list[dict]:
    """Each stack's newest result on each GPU class (the newest verdict; an untested or pending cell only where there is
    none), as display rows with their evidence as text. cells, if given, gets every cell's (stack, sweep time, sweep, source,
    verified)."""
    best: dict[tuple, tuple] = {}
    for raw in raw_rows:
        raw = as_read(raw)  # a verdict stored before its could-not-test cause existed is ranked as that cause
        code = raw["code"]
        local = (raw.get("source") or "local") == "local"
        if not local and code in (UNTESTED, None):
            continue  # another site's could-not-test says nothing of this site: its supporting line only
        stack = (raw["framework"], shown_version(raw), raw["variant"], shown_python(raw), raw["env"], raw.get("image") or "")
        key = (stack, raw["gpu"], raw["cc"] or "")
        if cells is not None:
            cells[raw["cell_id"]] = (stack, raw.get("created_at") or 0, raw.get("sweep_id"), raw.get("source") or "local",
                                     is_verified(raw))
        # this site's own result first (another site's verdict supports a class, never hides what happened here); then a
        # verdict before a cell that could not be tested (no verdict, README), both before one still pending; among them a
        # verified row before one imported unverified, however new (as explain's observations are ranked)
        rank = (local, code is not None and code != UNTESTED, is_verified(raw), code is not None, raw.get("created_at") or 0, raw["cell_id"])
        if key not in best or rank > best[key][0]:
            best[key] = (rank, raw)
    shown = []
    for _rank, raw in best.values():
        row = display_row(raw)
        evidence = raw.get("evidence") or {}
        row["evidence_text"] = json.dumps(evidence, indent=1, sort_keys=True, default=str)[:EVIDENCE_CHARS] if evidence else ""
        row["driver"] = row["driver_seen"] or row["driver"]  # the driver the job ran on, where its probe read one
        row["scheduler"] = evidence.get("scheduler") if row["cause"] == "not-scheduled" else None  # the scheduler's own words
        row["status"] = _status(row)
        row["when"] = _day(row.get("created_at"))
        shown.append(row)
    return shown


def _day(timestamp) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d") if timestamp else ""


def _how_to_use(stack: tuple, passed: list[dict], cache: dict) -> list[dict]:
    """One line per GPU class where the stack passed: what to install (advise's command), or the image to run."""
    from ..answers.advise import image_line, install_command

    framework, version, variant, _python, env, image = stack
    if env == "container":
        what = f"a container stack: {image_line(image)}" if image else ""
    elif env == "current":
        what = f"as installed in an interpreter with {framework} {version}; to build it anew, see `gpucompat advise {framework}`"
    else:
        if (framework, version, variant) not in cache:
            try:
                cache[(framework, version, variant)] = install_command(framework, version, variant)
            except Exception:  # noqa: BLE001 - a stack the knowledge cannot name a command for still gets its page
                cache[(framework, version, variant)] = ""
        what = cache[(framework, version, variant)]
        if what and env == "conda":
            what = f"{what}  (tested as a conda stack; `gpucompat advise {framework} --format conda` writes its environment.yml)"
    if not what:
        return []
    return [{"gpu": r["gpu"], "cc": r["cc"], "driver": r["driver"], "command": what, "source": r.get("source") or "local",
             "verified": r["verified"], "gpu_page": r["gpu_page"]} for r in passed]


def _sources(rows: list[dict]) -> list[dict]:
    """Where a page's rows came from, each source once: local (run here) first, then each site, verified or not, with how
    many of the rows it gave and the key that signed them."""
    found: dict[tuple, dict] = {}
    for row in rows:
        source = row.get("source") or "local"
        entry = found.setdefault((source != "local", source, row["verified"]),
                                 {"site": source, "verified": row["verified"], "signer": row.get("signer"), "cells": 0})
        entry["cells"] += 1
    for entry in found.values():
        if entry["site"] == "local":
            entry["label"] = "local (run here)"
        elif entry["verified"]:
            entry["label"] = f"{entry['site']} (verified: key {entry['signer']})"
        else:
            entry["label"] = f"{entry['site']} (UNVERIFIED: " + (f"key {entry['signer']} not trusted here)" if entry["signer"] else "unsigned)")
    return [found[key] for key in sorted(found)]


NOT_RUN_CAUSES = ("not-scheduled", "not-installed")  # no job ran the probe on the class: its GPU was never reached


def _ran(row: dict) -> bool:
    """Whether a job ran on the cell's GPU class: a verdict or a could-not-test met there, never a cell still pending, one
    predicted and not run, one decided before any job (resolving the stack), or a job that never started."""
    return (row["code"] != "PENDING" and row["observed"] is not False and row["stage"] not in ("", "resolve")
            and row["cause"] not in NOT_RUN_CAUSES)


def _not_tested(gpu: tuple, rows: list[dict]) -> dict:
    """A GPU class nothing ran on, listed apart: never a column or a page. Why, in the scheduler's own words where it could
    not place the jobs; else the causes of its cells."""
    said = list(dict.fromkeys(r["scheduler"] for r in rows if r.get("scheduler")))
    if said:
        why = "no job of it started: " + "; ".join(said[:3]) + (f" (and {len(said) - 3} more)" if len(said) > 3 else "")
    else:
        causes: dict[str, int] = {}
        for row in rows:
            key = row["cause"] or row["code"].lower()
            causes[key] = causes.get(key, 0) + 1
        why = "no job ran on it: " + ", ".join(f"{n} {'cell' if n == 1 else 'cells'} {c}" for c, n in sorted(causes.items())) if causes else \
            "no job ran on it"
    return {"name": gpu[0], "cc": gpu[1], "why": why, "cells": len(rows)}


def _counts(rows: list[dict]) -> dict:
    return {s: sum(1 for r in rows if r["status"] == s) for s in STATUS}


def _placed(raw_rows: list[dict], pool: SitePool) -> tuple[list[dict], list[dict]]:
    """(the rows on this site's classes, each keyed by its class's name and compute capability, with the GPU it saw kept as
    seen_gpu; the rows on a GPU class that is none of the site's, run here or imported: observed elsewhere). A row on no GPU
    class at all (the stand-in of a machine without a GPU) stays, to be counted apart as before."""
    placed, elsewhere = [], []
    for raw in raw_rows:
        if raw["gpu"] == NO_GPU.name and not raw["cc"]:
            placed.append(raw)
            continue
        target = class_of({**raw, "cc": raw["cc"] or "", "driver_seen": probe_driver(raw.get("probe_driver"))}, pool)
        if target is None:
            elsewhere.append(raw)
        else:
            placed.append({**raw, "gpu": target.name, "cc": target.cc or "", "seen_gpu": raw["gpu"]})
    return placed, elsewhere


def _elsewhere(raw_rows: list[dict]) -> list[dict]:
    """The rows on GPU classes that are none of this site's, one line per site, GPU, driver and verification."""
    found: dict[tuple, dict] = {}
    for raw in raw_rows:
        driver = probe_driver(raw.get("probe_driver")) or raw["driver"] or ""
        key = (raw.get("source") or "local", raw["gpu"], raw["cc"] or "", driver, is_verified(raw))
        entry = found.setdefault(key, {"site": key[0], "gpu": key[1], "cc": key[2], "driver": key[3], "verified": key[4], "cells": 0})
        entry["cells"] += 1
    return [found[k] for k in sorted(found)]


def _supporting(raw_rows: list[dict], vouchers: dict) -> list[dict]:
    """The observations other sites made on a class of this one (every imported row placed on it, the newest or not): one
    line per imported sweep, GPU and driver, with every site that vouched for that sweep (Store.vouchers)."""
    found: dict[tuple, dict] = {}
    for raw in raw_rows:
        if (raw.get("source") or "local") == "local" or raw["code"] is None:
            continue
        key = (raw["source"], raw["sweep_id"], raw.get("seen_gpu") or raw["gpu"], probe_driver(raw.get("probe_driver")) or raw["driver"] or "",
               is_verified(raw))
        entry = found.setdefault(key, {"site": key[0], "sweep": key[1], "gpu": key[2], "driver": key[3], "verified": key[4], "cells": 0,
                                       "vouchers": vouchers.get(key[1]) or []})
        entry["cells"] += 1
    return [found[k] for k in sorted(found, key=lambda k: (not k[4], k[0], str(k[1]), k[2], k[3]))]


def build(raw_rows: list[dict], bench_rows: list[dict], title: str, source: str | None = None, pool: SitePool | None = None,
          vouchers: dict | None = None) -> dict:
    """Everything the pages show, from Store.result_rows(None) and bench.present()'s rows of Store.bench_rows(None).

    With a pool (site_pool.py: --pool, the plan every local sweep shares, or the local sweeps' classes), only this site's
    classes are classes: a row is placed on the class it matches, rows on any other GPU are listed as observed elsewhere,
    rows imported from other sites are named as supporting evidence on the class they match, and each class page carries
    its install lines (advise --pool's) with the scheduler request that selects it.

    Only real GPU classes get a column and a page, and only stacks with a verdict somewhere a row and a page: the cells that
    could not be tested (UNTESTED, with a cause) are counted apart on every page, by cause. Inside a real class and a real
    stack such a cell keeps its own mark, never valid and never invalid. A verdict reached off any GPU class (an unresolvable
    stack swept where no GPU was visible) is its stack's, shown on its page as reached before any GPU."""
    every: dict[int, tuple] = {}
    elsewhere: list[dict] = []
    if pool is not None:
        raw_rows, elsewhere = _placed(raw_rows, pool)
    rows = newest(raw_rows, every)
    by_class: dict[tuple, list[dict]] = {}
    for row in rows:
        by_class.setdefault((row["gpu"], row["cc"]), []).append(row)
    real = {g for g, mine in by_class.items() if is_gpu_class(g, mine)}
    # a class on which no cell ran (its jobs never started: the scheduler could not place them) is no column: listed apart
    not_tested = sorted(g for g in real if not any(_ran(r) for r in by_class[g]))
    real -= set(not_tested)
    unseen = sorted({(t.name, t.cc or "") for t in (pool.targets if pool else ())} - set(by_class))  # nothing stored ran there
    apart, off, grid_rows = [], [], []  # could not test; a verdict off any GPU class; a cell on a real class
    for row in rows:
        on_class = (row["gpu"], row["cc"]) in real
        row["apart"] = apart_cause(row, on_class)
        row["on_class"] = on_class
        row["class_not_tested"] = (row["gpu"], row["cc"]) in not_tested
        row["stack_key"] = _stack_key(row)
        row["label"] = _stack_label(row["stack_key"])
        if row["apart"] is not None:
            apart.append(row)
        if on_class:
            grid_rows.append(row)
        elif row["apart"] is None and row["code"] != "PENDING":
            off.append(row)
    # a stack is shown where it has anything but cells that could not be tested (a verdict, or a cell still pending)
    real_stacks = {r["stack_key"] for r in grid_rows + off if r["apart"] is None}
    grid_rows = [r for r in grid_rows if r["stack_key"] in real_stacks]
    classes = sorted({(r["gpu"], r["cc"]) for r in grid_rows}, key=lambda g: (_release(g[1] or ""), g[0]), reverse=True)
    gpu_pages = {g: _slug("gpu", f"{g[0]} cc{g[1]}") for g in classes}
    column = {g: i for i, g in enumerate(classes)}
    stacks: dict[tuple, list[dict]] = {key: [] for key in real_stacks}
    grid: dict[tuple, list[dict]] = {}  # (framework, GPU class) -> its rows
    for row in grid_rows:
        stacks[row["stack_key"]].append(row)
        grid.setdefault((row["framework"], (row["gpu"], row["cc"])), []).append(row)
        row["gpu_page"] = gpu_pages[(row["gpu"], row["cc"])]
    off_by_stack: dict[tuple, list[dict]] = {}
    for row in off:
        off_by_stack.setdefault(row["stack_key"], []).append(row)
    apart_by_stack: dict[tuple, list[dict]] = {}
    apart_by_class: dict[tuple, list[dict]] = {}
    for row in apart:
        apart_by_stack.setdefault(row["stack_key"], []).append(row)
        apart_by_class.setdefault((row["gpu"], row["cc"]), []).append(row)
        row.setdefault("gpu_page", gpu_pages.get((row["gpu"], row["cc"])))
    frameworks = sorted({g[0] for g in grid})
    # frameworks A-Z, each newest version first
    order = sorted(stacks, key=lambda k: (k[0], tuple(-x for x in _release(k[1])), k[1:]))
    figures: dict[tuple, dict] = {}  # each stack's newest figure of each measurement on each GPU class, from whichever sweep took it
    for figure in bench_rows:
        if figure["cell"] in every:
            stack, when, sweep, origin, verified = every[figure["cell"]]  # origin: where it was taken (never the site's --source)
            key = (stack, figure["gpu"], figure["cc"], figure["measurement"], figure["dtype"], figure.get("processes") or 1)
            if key not in figures or (when, figure["cell"]) > figures[key][0]:
                figures[key] = ((when, figure["cell"]), {**bench_display(figure), "sweep": sweep, "source": origin, "verified": verified,
                                                          "when": _day(when)})
    by_stack: dict[tuple, list[dict]] = {}
    for key, (_when, shown) in sorted(figures.items(), key=lambda item: (item[0][1], item[0][2], item[0][3], item[0][4], item[0][5])):
        by_stack.setdefault(key[0], []).append(shown)
    commands: dict = {}
    stack_pages = []
    for key in order:
        mine = sorted(stacks[key], key=lambda r: column[(r["gpu"], r["cc"])])
        before = off_by_stack.get(key, [])
        label = _stack_label(key)
        counts = _counts(mine + before)
        counts["untested"] = len(apart_by_stack.get(key, []))  # every cell of it that could not be tested, on a class or not
        stack_pages.append({"key": key, "label": label, "file": _slug("stack", label), "framework": key[0], "version": key[1],
                            "variant": key[2], "python": key[3], "env": key[4], "image": key[5], "rows": mine, "before": before,
                            "counts": counts, "apart": apart_summary(apart_by_stack.get(key, [])), "figures": by_stack.get(key, []),
                            "use": _how_to_use(key, [r for r in mine if r["status"] == "valid"], commands),
                            "sources": _sources(mine + before + apart_by_stack.get(key, []))})
        for r in mine + before + apart_by_stack.get(key, []):
            r["stack_page"] = stack_pages[-1]["file"]
    matrix = []
    for framework in frameworks:
        line = {"framework": framework, "cells": []}
        for g in classes:
            here = grid.get((framework, g), [])
            counts = _counts(here)
            waiting = counts["untested"] + counts["pending"]
            state = "none" if not here else ("valid" if counts["valid"] == len(here) else "mixed" if counts["valid"] else
                                             "untested" if waiting == len(here) else "invalid")
            line["cells"].append({"counts": counts, "state": state, "page": gpu_pages[g], "anchor": f"fw-{framework}"})
        matrix.append(line)
    rank = {p["key"]: i for i, p in enumerate(stack_pages)}
    gpus = []
    for g in classes:
        sections = [{"framework": f, "anchor": f"fw-{f}", "rows": sorted(grid[(f, g)], key=lambda r: rank[r["stack_key"]])}
                    for f in frameworks if (f, g) in grid]
        here = [r for section in sections for r in section["rows"]]
        counts = _counts(here)
        counts["untested"] = len(apart_by_class.get(g, []))  # every cell on it that could not be tested, of a shown stack or not
        gpus.append({"name": g[0], "cc": g[1], "file": gpu_pages[g], "sections": sections, "counts": counts,
                     "apart": apart_summary(apart_by_class.get(g, [])), "drivers": sorted({r["driver_seen"] for r in here if r["driver_seen"]}),
                     "sources": _sources(here + apart_by_class.get(g, []))})
    lines = install_lines(pool, classes, frameworks, grid_rows) if pool is not None else {}
    placed: dict[tuple, list[dict]] = {}
    for raw in raw_rows:
        placed.setdefault((raw["gpu"], raw["cc"] or ""), []).append(raw)
    for gpu in gpus:
        gpu["supporting"] = _supporting(placed.get((gpu["name"], gpu["cc"]), []) if pool is not None else [], vouchers or {})
        gpu["install"] = lines.get((gpu["name"], gpu["cc"]), {"request": None, "lines": [], "why": ""})
    supporting = [line for gpu in gpus for line in gpu["supporting"]]
    shown = grid_rows + off
    counts = _counts(shown)
    counts["untested"] = len(apart)
    return {"title": title, "source": source, "sources": _sources(rows),
            "local_cells": sum(1 for r in raw_rows + elsewhere if (r.get("source") or "local") == "local"),
            "classes": [{"name": g[0], "cc": g[1], "file": gpu_pages[g]} for g in classes],
            "matrix": matrix, "stacks": stack_pages, "gpus": gpus, "cells": len(rows), "counts": counts, "apart": apart_summary(apart),
            "not_tested": [_not_tested(g, by_class[g]) for g in not_tested] + [
                {"name": g[0], "cc": g[1], "why": "no cell stored here ran on it", "cells": 0} for g in unseen],
            "pool": pool.origin if pool else None, "elsewhere": _elsewhere(elsewhere),
            "supporting": {"cells": sum(s["cells"] for s in supporting),
                           "unverified": sum(s["cells"] for s in supporting if not s["verified"])},
            "generated": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "version": __version__}


def _prepare(directory: Path) -> None:
    """A new or empty directory, or one this site wrote before (its old pages are removed); else refused."""
    if directory.exists() and not directory.is_dir():
        raise UserError(f"--site {directory} is a file; give a directory (new, empty, or a site gpucompat wrote).")
    if directory.is_dir() and any(directory.iterdir()):
        if not (directory / MARKER).is_file():
            raise UserError(f"--site {directory} holds files gpucompat did not write; give a new or empty directory, or the site's own.")
        for old in directory.iterdir():
            if old.is_file() and (old.name == "index.html" or re.fullmatch(r"(stack|gpu)-[A-Za-z0-9._-]+\.html", old.name)):
                old.unlink()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MARKER).write_text("written by gpucompat report --site; its pages are replaced by the next run\n")
    except OSError as exc:
        raise UserError(f"cannot write the site into {directory}: {exc.strerror or exc}.") from None


def publish(store, directory: Path, title: str, source: str | None = None, pool: str | None = None) -> dict:
    """report --site DIR [--pool PLAN]: the site of this store's newest results (of one source, if given) on this site's
    GPU classes (site_pool.site_pool: --pool, else the plan every local sweep shares, else the local sweeps' classes)."""
    from ..bench import present

    rows = store.result_rows(None, source)
    if not rows:
        raise UserError(f"no results {f'from the source {source!r} ' if source else ''}are stored in {store.shown}; nothing to publish.")
    cells = {r["cell_id"] for r in rows}
    figures = [present(r) for r in store.bench_rows(None) if r["cell"] in cells]
    local = [r for r in rows if (r.get("source") or "local") == "local"] if source in (None, "local") else store.result_rows(None, "local")
    sweeps = [store.sweep(sweep_id) for sweep_id in sorted({r["sweep_id"] for r in local})]
    # what the classes need of each local row (its GPU, the driver its probe read), not a display row: 100,000 rows cost 9 s
    seen = [{"gpu": r["gpu"], "cc": r["cc"] or "", "driver": r["driver"], "driver_seen": probe_driver(r.get("probe_driver")),
             "created_at": r.get("created_at")} for r in local]
    classes = site_pool(pool, sweeps, seen)
    vouchers = {sweep_id: store.vouchers(sweep_id) for sweep_id in sorted({r["sweep_id"] for r in rows if (r.get("source") or "local") != "local"})}
    return write(directory, rows, figures, title, source, classes, vouchers)


def write(directory: Path, raw_rows: list[dict], bench_rows: list[dict], title: str, source: str | None = None,
          pool: SitePool | None = None, vouchers: dict | None = None) -> dict:
    """Render every page into directory; how many pages, cells, and the seconds it took."""
    began = time.perf_counter()
    directory = Path(directory)
    site = build(raw_rows, bench_rows, title, source, pool, vouchers)
    _prepare(directory)
    environment = Environment(loader=PackageLoader("gpucompat.report", "templates"), autoescape=select_autoescape(["html", "j2"]),
                              trim_blocks=True, lstrip_blocks=True)
    pages = [("index.html", "site/index.html.j2", {})]
    pages += [(p["file"], "site/stack.html.j2", {"stack": p}) for p in site["stacks"]]
    pages += [(g["file"], "site/gpu.html.j2", {"gpu": g}) for g in site["gpus"]]
    try:
        for name, template, extra in pages:
            text = environment.get_template(template).render(site=site, **extra)
            temporary = directory / f".{name}.part"
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, directory / name)
    except OSError as exc:
        raise UserError(f"cannot write the site into {directory}: {exc.strerror or exc}.") from None
    return {"directory": str(directory), "pages": len(pages), "stacks": len(site["stacks"]), "gpu_classes": len(site["gpus"]),
            "cells": site["cells"], "seconds": round(time.perf_counter() - began, 2)}
