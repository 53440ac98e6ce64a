"""`gpucompat key`: this site's signing key, made once and shown after (signing.py)."""

from __future__ import annotations

import typer

from .common import guarded, print_json, say


def key(
    new: bool = typer.Option(False, "--new", help="Make a new key even though the site has one (the old pair is kept aside under its "
                             "fingerprint; other sites must then trust the new public key)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """This site's signing key: made once (Ed25519, private 0600 under ~/.config/gpucompat), shown on every later run; give its public key file to the sites that import your bundles."""
    from ..signing import site_key

    result = site_key(new)
    if json_out:
        print_json(result)
        return
    if result["retired"]:
        say(f"the old key was set aside as {result['retired']}")
    say(f"{'made a new' if result['created'] else 'this site has a'} signing key {result['fingerprint']}: private {result['private']} (0600, "
        f"keep it here); public {result['public']} (give it to other sites: `gpucompat trust add NAME site-key.pub`)")


def register(app: typer.Typer) -> None:
    app.command("key")(guarded(key))
