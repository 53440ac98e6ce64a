"""`gpucompat trust add|list|remove`: the public keys of the sites whose bundles this site trusts (signing.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import guarded, print_json, say


def trust_add(
    name: str = typer.Argument(..., help="What to call the site whose key it is (a site name: letters, digits, spaces, ._@+-)."),
    keyfile: Path = typer.Argument(..., help="That site's public key file, as `gpucompat key` wrote it there (site-key.pub)."),
):
    """Trust another site's public key: bundles it signed import as verified."""
    from ..signing import trust_add as add

    result = add(name, keyfile)
    say(f"trusted {result['name']!r}, key {result['fingerprint']} (in {result['file']})")


def trust_list(json_out: bool = typer.Option(False, "--json", help="Print one JSON array.")):
    """The keys this site trusts, this site's own first."""
    from ..signing import trusted

    keys = trusted()
    if json_out:
        print_json(keys)
        return
    if not keys:
        say("no key is trusted yet: `gpucompat key` makes this site's own, `gpucompat trust add NAME KEYFILE` trusts another site's")
    for entry in keys:
        say(f"{entry['fingerprint']}  {entry['name']}")


def trust_remove(name: str = typer.Argument(..., help="The name the key was trusted under (`gpucompat trust list`).")):
    """Trust a site's key no longer: its later bundles are refused (or, with --untrusted, marked unverified); sweeps imported before keep their mark."""
    from ..signing import trust_remove as remove

    result = remove(name)
    say(f"no longer trusted: {result['name']!r}, key {result['fingerprint']}")


def register(app: typer.Typer) -> None:
    trust_app = typer.Typer(help="The public keys of the sites whose bundles this site trusts.", no_args_is_help=True)
    trust_app.command("add")(guarded(trust_add))
    trust_app.command("list")(guarded(trust_list))
    trust_app.command("remove")(guarded(trust_remove))
    app.add_typer(trust_app, name="trust")
