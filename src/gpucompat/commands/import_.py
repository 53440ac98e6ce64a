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
    """Merge a bundle into the store, with its provenance, once its signature is checked against the keys this site trusts; a sweep already there is not added again."""
    from ..bundle import merge, verify
    from ..store import Store

    checked = verify(bundle, untrusted)  # the whole file, before the store is opened: a refused bundle leaves it untouched
    store = Store(db)
    result = merge(store, checked)
    if json_out:
        print_json(result)
        return
    origin = f"the site {result['site']!r} (gpucompat {result['gpucompat']}, exported {result['exported_at']}, {signed(result)})"
    if not result["added"]:
        say(f"nothing new: the {result['known']} sweep(s) of {bundle} from {origin} are already in {store.shown}")
        return
    ids = ", ".join(f"{a['id']} (was {a['was']} at {a['site']})" for a in result["added"])
    held = f"; {result['known']} already held" if result["known"] else ""
    say(f"imported {len(result['added'])} sweep(s), {result['cells']} cells, from {origin} into {store.shown}: sweep {ids}{held}")


def signed(result: dict) -> str:
    """Who signed an imported bundle, and whether this site trusts that key."""
    from ..signing import OWN

    if result["verified"] and result["trusted_as"] == OWN:
        return f"signed with this site's own key {result['signer']}: verified"
    if result["verified"]:
        return f"signed with the key {result['signer']}, trusted as {result['trusted_as']!r}: verified"
    if result["signer"]:
        return f"signed with the key {result['signer']}, not trusted here: UNVERIFIED (--untrusted)"
    return "unsigned: UNVERIFIED (--untrusted)"


def register(app: typer.Typer) -> None:
    app.command("import")(guarded(import_))
