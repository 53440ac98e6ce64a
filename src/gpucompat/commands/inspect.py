"""`gpucompat inspect`: the SASS and PTX a CUDA binary, wheel or installed distribution carries."""

from __future__ import annotations

import typer

from .common import err, escape, guarded, out, print_json


def inspect(
    target: str = typer.Argument(..., help="A .so/.o file, a directory, a wheel, or an installed distribution such as torch."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """The SASS architectures and PTX versions embedded in CUDA binaries (no cuobjdump needed)."""
    from ..knowledge.fatbin import inspect as run_inspect

    result = run_inspect(target)
    if json_out:
        print_json(result)
        return
    if result.get("skipped"):  # the rest was read: its kernels are below, and these are named so nobody takes them for none
        skipped = result["skipped"]
        named = ", ".join(f"{item['file']} ({item['why']})" for item in skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        err.print(f"skipped {len(skipped)} file(s) or folder(s) that could not be read: {escape(named)}", highlight=False, soft_wrap=True)
    if not result["files"]:
        out.print(f"{escape(target)}: no CUDA fat binaries found")
        return
    out.print(f"{escape(target)}: SASS {' '.join(result['sass']) or 'none'}; PTX {' '.join(result['ptx']) or 'none'}"
              + (f" (PTX ISA {', '.join(result['ptx_isa'])})" if result["ptx_isa"] else "")
              + f"; {len(result['files'])} file(s) with kernels")
    for f in result["files"][:50]:
        out.print(f"  {escape(f['file'])}: {' '.join(f['sass'] + f['ptx'])}")


def register(app: typer.Typer) -> None:
    app.command("inspect")(guarded(inspect))
