"""The near-tie verifier's ``.npz`` (issue 2, importer 7; REFERENCE-IMPLEMENTATIONS.md B.8).

Arrays: ``responses`` (items x models, complete 0/1), ``model_id``, ``family``, ``owner`` (per model) and
``item_group`` (per item), Unicode, not pickled (the file is opened with ``allow_pickle=False``). The
reference's validation is kept: missing or non-binary responses, blank labels and duplicate model ids are
rejected. Family and owner come from the file. Every array's ``.npy`` header is read first and checked against
the bytes its member holds and the import limit (issue 37: a 608-byte file whose header claimed a huge array was
"too large for this machine"; now "the header is implausible"), before any array is allocated. Item keys are ``item_id`` when the file has that array,
else ``item_00000`` ... in row order (the reference aligns items by position only).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from .archive import ArchiveTooBig, Budget
from .base import ImportFormatError, ParsedImport, not_a_file
from .limits import ENV
from .long import default_benchmark
from .readers import duplicate_rows

REQUIRED = ("responses", "model_id", "family", "owner", "item_group")


def parse_neartie_npz(path: str | Path, *, benchmark: str | None = None, **_: object) -> ParsedImport:
    """Parse a family-dif-audit ``.npz``; the matrix is transposed to models x items."""
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p)
    if p.stat().st_size == 0:
        raise ImportFormatError(p, "", "the file is empty", "write it with numpy.savez")
    with open(p, "rb") as fh:
        head = fh.read(6)
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")):  # zip (.npz) or a bare .npy
        raise ImportFormatError(p, "", f"not a .npz archive (it starts with bytes {head[:4].hex(' ')}; a .npz is a zip "
                                "of .npy arrays)", "write it with numpy.savez, or name the right file")
    _check_headers(p)
    try:
        with np.load(p, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ImportFormatError(
            p,
            "",
            f"not a readable .npz archive ({exc})",
            "save Unicode arrays with numpy.savez (no object arrays)",
        ) from None
    for name in REQUIRED:
        if name not in arrays:
            raise ImportFormatError(
                p,
                f"array '{name}'",
                f"missing array '{name}' (has {sorted(arrays)})",
                f"save the arrays {', '.join(REQUIRED)}",
            )
    resp = arrays["responses"]
    if resp.ndim != 2:
        raise ImportFormatError(
            p, "array 'responses'", f"responses has shape {resp.shape}", "save a 2-D items x models array"
        )
    n_items, n_models = resp.shape
    for name, n in (
        ("model_id", n_models),
        ("family", n_models),
        ("owner", n_models),
        ("item_group", n_items),
    ):
        if arrays[name].shape != (n,):
            raise ImportFormatError(
                p,
                f"array '{name}'",
                f"{name} has shape {arrays[name].shape}, expected ({n},)",
                "align labels with the responses matrix (items x models)",
            )
        labels = [str(x).strip() for x in arrays[name].tolist()]
        blank = [i for i, x in enumerate(labels) if not x]
        if blank:
            raise ImportFormatError(
                p, f"array '{name}', index {blank[0]}", f"blank {name}", f"give every {name}"
            )
    values = resp.astype(np.float64)
    bad = ~np.isin(values, (0.0, 1.0))
    if bad.any():
        i, m = (int(x) for x in np.argwhere(bad)[0])
        raise ImportFormatError(
            p,
            f"responses[{i}, {m}]",
            f"missing or non-binary response {_plain(resp[i, m])!r}",
            "the near-tie format needs a complete 0/1 matrix",
        )
    ids = [str(x).strip() for x in arrays["model_id"].tolist()]
    item_ids = (
        [str(x) for x in arrays["item_id"].tolist()]
        if "item_id" in arrays
        else [f"item_{i:05d}" for i in range(n_items)]
    )
    for name, keys in (("model_id", ids), ("item_id", item_ids)):
        dup = duplicate_rows(keys)
        if dup:
            raise ImportFormatError(
                p,
                f"array '{name}', index {dup[1]}",
                f"duplicate {name} '{keys[dup[1]]}'",
                f"make {name} unique",
            )
    models = pd.DataFrame(
        {
            "name": ids,
            "family": [str(x) for x in arrays["family"].tolist()],
            "owner": [str(x) for x in arrays["owner"].tolist()],
        }
    )
    items = pd.DataFrame({"key": item_ids, "group": [str(x) for x in arrays["item_group"].tolist()]})
    return ParsedImport(
        benchmark=benchmark or default_benchmark(p),
        kind="static",
        items=items,
        models=models,
        correct=values.T.astype(np.int8),
        source=f"neartie_npz:{path}",
    )


def _check_headers(p: Path) -> None:
    """Each array's shape and dtype from its ``.npy`` header, against the bytes its member holds (a header claiming
    more is implausible) and the import limit (all members together), before numpy allocates anything."""
    if not zipfile.is_zipfile(p):
        return  # a bare .npy or a damaged zip: np.load below says what it is
    budget = Budget()
    try:
        with zipfile.ZipFile(p) as z:
            for info in z.infolist():
                name = info.filename.removesuffix(".npy")
                budget.spend(info)
                with z.open(info) as fh:
                    try:
                        version = np.lib.format.read_magic(fh)
                        shape, _, dtype = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                                           else np.lib.format.read_array_header_2_0(fh))
                    except (ValueError, OSError, EOFError):
                        continue  # not an array np.load reads: it says so below
                    held = info.file_size - fh.tell()
                count = 1
                for n in shape:
                    count *= int(n)
                claimed = count * dtype.itemsize
                if claimed > held:
                    raise ImportFormatError(p, f"array '{name}'", f"its header claims shape {tuple(shape)} of "
                                            f"{dtype} ({claimed:,} bytes) but the file holds {held:,} bytes for it: "
                                            "the header is implausible (a damaged or crafted file)",
                                            "write the file again with numpy.savez")
    except ArchiveTooBig as exc:
        raise ImportFormatError(p, "", f"{exc}: refused before reading it into memory",
                                f"raise the limit with ${ENV}=BYTES if the machine has the memory") from None
    except (zipfile.BadZipFile, OSError, EOFError):
        return  # np.load below names the damage


def _plain(value):
    """A numpy scalar as the Python value it holds (``0.5``, not ``np.float64(0.5)``) for messages."""
    return value.item() if hasattr(value, "item") else value
