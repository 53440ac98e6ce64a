"""`gpucompat import`: another site's bundle merged into the store once its signature is checked (bundle.py).
The module's name ends in `_` because `import` is Python's keyword."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import guarded, print_json, say
from .options import DbOption


def import_(
    bundle: Path = typer.Argument(..., help="A file written by `gpucompat export --bundle`."),
    untrusted: bool = typer.Option(False, "--untrusted", help="Import an unsigned bundle, or one signed by a key this site does not trust; "
                                   "every view marks its sweeps unverified (a signature that does not verify is refused all the same)."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Merge a bundle into the store, with its provenance, once its signature is checked against the keys this site trusts: a sweep already there (the same observations, whoever exported them) is not added again, its site is kept as one more voucher, and a verified copy makes a held unverified one verified."""
    from ..bundle import merge, verify
    from ..store import Store

    checked = verify(bundle, untrusted)  # the whole file, before the store is opened: a refused bundle leaves it untouched
    store = Store(db)
    result = merge(store, checked)
    if json_out:
        print_json(result.to_json())
        return
    for line in result.lines(store.shown):  # the bundle, then each sweep: stored verified or not and why, held, vouched, upgraded
        say(line)


def register(app: typer.Typer) -> None:
    app.command("import")(guarded(import_))
