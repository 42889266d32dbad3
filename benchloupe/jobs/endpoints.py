"""The endpoints a BenchFill session calls (rewriter, judge, annotators): the per-user file overridden by the
database's own settings, set and removed per role, checked before a session runs. Apart from :mod:`.fill` (issue
36 point 4): ``benchloupe endpoints set/show`` loads neither the BenchFill engine nor the ``openai`` package
(1.9 s of CPU per command before, most of it imports)."""

from __future__ import annotations

from benchloupe.engine.common import EngineError
from benchloupe.hints import Alt, Opt, say
from benchloupe.prompts import endpoints_file
from benchloupe.prompts.endpoint import EndpointConfig, redact_url
from benchloupe.store import read
from benchloupe.store.curation import put_setting
from benchloupe.store.db import connect

ENDPOINTS_KEY = "benchfill.endpoints"
ENDPOINT_FIELDS = ("base_url", "model", "api_key_env", "timeout", "max_retries", "concurrency", "temperature",
                   "max_tokens", "json_mode", "retry_after_max", "deadline", "max_reply_mb")
SCOPES = ("database", "user")


def user_endpoints_path():
    """The per-user endpoints file (:mod:`benchloupe.prompts.endpoints_file`) that a database's settings override."""
    return endpoints_file.path()


def _db_endpoints(conn) -> dict:
    return read.setting(conn, ENDPOINTS_KEY, endpoints_file.empty())


def get_endpoints(conn, *, with_source: bool = False) -> dict:
    """``{"rewriter": {...}, "judge": {...}, "annotators": [{"name", "model", "base_url", "trials", ...}]}``:
    the per-user file (:mod:`benchloupe.prompts.endpoints_file`) overridden by the database's own settings,
    per role and per annotator name. ``with_source`` adds ``"source": "user" | "database"`` to each."""
    user, here = endpoints_file.load(), _db_endpoints(conn)
    out = endpoints_file.empty()
    for role in ("rewriter", "judge"):
        for scope, eps in (("user", user), ("database", here)):
            if eps.get(role):
                out[role] = {**eps[role], **({"source": scope} if with_source else {})}
    merged: dict[str, dict] = {}
    for scope, eps in (("user", user), ("database", here)):
        for a in eps.get("annotators") or []:
            merged[a["name"]] = {**a, **({"source": scope} if with_source else {})}
    out["annotators"] = list(merged.values())
    return out


def redacted(eps: dict) -> dict:
    """*eps* as shown: any ``user:password@`` in a base URL (a database written before issue 37 #9's refusal)
    replaced by ``***@``."""
    out = {**eps, "annotators": [dict(a) for a in eps.get("annotators") or []]}
    for role in ("rewriter", "judge"):
        if isinstance(out.get(role), dict):
            out[role] = dict(out[role])
    for e in [out.get("rewriter"), out.get("judge"), *out["annotators"]]:
        if isinstance(e, dict) and isinstance(e.get("base_url"), str):
            e["base_url"] = redact_url(e["base_url"])
    return out


def _clean(role: str, fields: dict) -> dict:
    clean = {k: v for k, v in fields.items() if v is not None and (k in ENDPOINT_FIELDS or k in ("name", "trials"))}
    if role in ("rewriter", "judge") and not clean.get("model"):
        raise EngineError(say(f"the {role} endpoint needs ", Opt("model"), " (the model name the server knows)"))
    if role == "annotator":
        if not clean.get("name"):
            raise EngineError(say("an annotator needs ", Opt("name"), ": the benchmark model whose ability it has"))
        clean.setdefault("model", clean["name"])
        trials = clean.get("trials", 4)
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise EngineError(say(Opt("trials"), f" must be a whole number 1 or more, got {trials!r}"))
        clean["trials"] = trials
    endpoint_config(clean)  # the client's own checks: URL, --timeout > 0, --max-retries >= 0, ...
    return clean


def set_endpoint(db_path, role: str, *, scope: str = "database", **fields) -> dict:
    """Set the rewriter or judge endpoint, or add/replace an annotator (``role="annotator"``, ``name=``), or
    remove one (``remove-rewriter``, ``remove-judge``, ``remove-annotator`` with ``name=``), in the database
    (``scope="database"``) or in the per-user file shared by every database (``"user"``).
    No ``base_url`` means ``$OPENAI_BASE_URL`` when the session runs. Returns the endpoints now in effect."""
    if scope not in SCOPES:
        raise EngineError(f"unknown endpoints scope {scope!r}; use database or user")
    if role not in ("rewriter", "judge", "annotator", "remove-annotator", "remove-rewriter", "remove-judge"):
        raise EngineError(f"unknown endpoint role {role!r}; use rewriter, judge or annotator")
    conn = connect(db_path)
    try:
        eps = endpoints_file.load() if scope == "user" else _db_endpoints(conn)
        if role in ("rewriter", "judge"):
            eps[role] = _clean(role, fields)
        elif role == "annotator":
            clean = _clean(role, fields)
            eps["annotators"] = [a for a in eps["annotators"] if a["name"] != clean["name"]] + [clean]
        elif role in ("remove-rewriter", "remove-judge"):  # issue 32: a role can be removed, not only annotators
            which = role.removeprefix("remove-")
            if not eps.get(which):
                where = "the user endpoints file" if scope == "user" else "this database"
                raise EngineError(say(f"no {which} set in {where}; ", Alt(
                    "`benchloupe endpoints show` says where each role comes from",
                    "E on the BenchFill screen shows the endpoints")))
            eps[which] = None
        else:
            name = fields.get("name")
            if not any(a["name"] == name for a in eps["annotators"]):
                where = "the user endpoints file" if scope == "user" else "this database"
                raise EngineError(say(f"no annotator {name!r} in {where}; ",
                                      Alt("`benchloupe endpoints show` lists them", "E on the BenchFill screen lists them")))
            eps["annotators"] = [a for a in eps["annotators"] if a["name"] != name]
        if scope == "user":
            endpoints_file.save(eps)
        else:
            put_setting(conn, ENDPOINTS_KEY, eps)
        return get_endpoints(conn, with_source=True)
    finally:
        conn.close()


def endpoint_config(d: dict) -> EndpointConfig:
    return EndpointConfig(**{"base_url": None, **{k: d[k] for k in ENDPOINT_FIELDS if k in d and d[k] is not None}})


def check_endpoints(eps: dict) -> None:
    """Every endpoint is configured and its settings can work (checked before a session starts running)."""
    hint = Alt("set it with `benchloupe endpoints set {role} --model NAME [--base-url URL] [--user]` or in the "
               "BenchFill screen", "set it with E (endpoints) on the BenchFill screen")
    for role in ("rewriter", "judge"):
        if not eps.get(role) or not eps[role].get("model"):
            raise EngineError(say(f"no {role} endpoint configured; ",
                                  Alt(hint.cli.format(role=role), hint.ui)))
    if not eps.get("annotators"):
        raise EngineError(say("no annotator models configured; add the benchmark's models ",
                              Alt("with `benchloupe endpoints set annotator --name MODEL --model NAME_AT_ENDPOINT "
                                  "[--base-url URL]`", "as annotators with E (endpoints) on the BenchFill screen")))
    for role, d in [("rewriter", eps["rewriter"]), ("judge", eps["judge"])] + [
            (f"annotator {a['name']}", a) for a in eps["annotators"]]:
        try:
            _clean("annotator" if role.startswith("annotator") else role, d)
        except EngineError as exc:
            raise EngineError(say(f"the {role} endpoint is misconfigured: ", exc.args[0] if exc.args else "", "; fix it ",
                                  Alt("with `benchloupe endpoints set`", "with E on the BenchFill screen"))) from None
