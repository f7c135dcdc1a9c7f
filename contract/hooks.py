"""Schemathesis hooks for contract/run.sh: what JSON Schema cannot say about the API, so that
generated "valid" requests are valid.

- `format: cron` (the `CronExpr` schema): croner's grammar, and "occurs again", are beyond a
  pattern; valid expressions are drawn here. The server checks every expression itself and
  answers 400 `invalid_field` (field `cron`) for the rest.
- `format: iana-time-zone` (the `TimeZone` schema): names from the tz database. The server
  knows the database it was built with; these are names every release of it has.
- `PUT /schedules/{name}`: a body `name`, when given, is the path's (400 `name_mismatch`
  otherwise). A generated body that names one gets the path's name (and loses a `cron` that
  a mis-inferred link filled with the name, with or without a body `name`; see `before_call`).

- `format: deck-cursor` (the `PageCursor` schema of `GET /jobs`): `<job id>~<sort key>`; which
  keys fit depends on the sort, so cursors are drawn with an integer key, which fits every
  sort (the server answers 400 `invalid_cursor` for a key that does not fit).
- `PUT`/`PATCH /settings`: `retry.base_delay_ms` is at most `retry.max_delay_ms` (400
  otherwise), a rule between two fields; a generated body gets them in order, and a patch
  that gives one of them also gets the other, since the saved one may be anything.

Loaded through SCHEMATHESIS_HOOKS (see run.sh).
"""

from urllib.parse import unquote

from hypothesis import strategies as st

import schemathesis

ZONES = [
    "UTC",
    "Etc/GMT+5",
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Tokyo",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
]


def _field(low, high, names=()):
    """One cron field: a value, a range, a list, a step, or a name; never `*` alone for the
    fast fields (see `_cron`)."""
    value = st.integers(low, high).map(str)
    ranged = (
        st.tuples(st.integers(low, high), st.integers(low, high))
        .filter(lambda ab: ab[0] != ab[1])
        .map(lambda ab: f"{min(ab)}-{max(ab)}")
    )
    listed = st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True).map(
        lambda xs: ",".join(str(x) for x in sorted(xs))
    )
    stepped = st.integers(2, max(2, (high - low) // 2)).map(lambda n: f"*/{n}")
    options = [value, ranged, listed, stepped]
    if names:
        options.append(st.sampled_from(names))
    return st.one_of(options)


MONTHS = ["JAN", "MAR-JUN", "DEC"]
DAYS = ["MON", "MON-FRI", "SAT,SUN"]


def _cron():
    # Day of month stays within 1-28, so every month has it and the expression always occurs
    # again. Seconds and minutes are never `*`: a contract run should not fire every second.
    seconds = st.integers(0, 59).map(str)
    minute = _field(0, 59)
    hour = st.one_of(st.just("*"), _field(0, 23))
    dom = st.one_of(st.just("*"), _field(1, 28))
    month = st.one_of(st.just("*"), _field(1, 12, MONTHS))
    dow = st.one_of(st.just("*"), _field(0, 6, DAYS))
    five = st.tuples(minute, hour, dom, month, dow).map(" ".join)
    six = st.tuples(seconds, minute, hour, dom, month, dow).map(" ".join)
    alias = st.sampled_from(["@yearly", "@monthly", "@weekly", "@daily", "@hourly"])
    return st.one_of(five, six, alias)


schemathesis.openapi.format("cron", _cron())
schemathesis.openapi.format("iana-time-zone", st.sampled_from(ZONES))
schemathesis.openapi.format(
    "deck-cursor",
    st.builds(
        lambda job, key: f"{job}~{key}",
        st.uuids(),
        st.integers(-(2**62), 2**62),
    ),
)

# The settings' delay bounds (`validation::SETTING_RANGES`).
MAX_DELAY_MS = 7 * 86_400_000


def _order_delays(body):
    """Give a settings body's retry delays in the order the server requires."""
    retry = body.get("retry") if isinstance(body, dict) else None
    if not isinstance(retry, dict):
        return
    base, most = retry.get("base_delay_ms"), retry.get("max_delay_ms")
    # Whole numbers may come as `451.0`; the server reads them as integers.
    ints = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if ints(base) and most is None and "max_delay_ms" not in retry:
        retry["max_delay_ms"] = MAX_DELAY_MS
    elif ints(most) and base is None and "base_delay_ms" not in retry:
        retry["base_delay_ms"] = 0
    elif ints(base) and ints(most) and base > most:
        retry["base_delay_ms"], retry["max_delay_ms"] = most, base


@schemathesis.hook
def before_call(context, case, kwargs):
    # Every phase sends through here (the stateful one skips `map_case`); schemathesis
    # re-judges the case afterwards, so a body made valid this way counts as positive.
    operation = case.operation
    if operation.path.endswith("/settings") and operation.method.upper() in ("PUT", "PATCH"):
        _order_delays(case.body)
        return
    if not (
        operation.method.upper() == "PUT"
        and operation.path.endswith("/schedules/{name}")
        and isinstance(case.body, dict)
        and isinstance(case.path_parameters, dict)
        and isinstance(case.path_parameters.get("name"), str)
    ):
        return
    # Path parameters may be held percent-encoded (a link's value is); the server reads the
    # decoded name, and schemathesis sends `quote(unquote(value))` either way.
    name = unquote(case.path_parameters["name"])
    # Schemathesis infers a link POST /schedules -> PUT /schedules/{name} that fills body
    # fields with the created name (`$request.body#/name`), `cron` among them, whether or not
    # the body also names the schedule. A name in `cron` is schema-valid only because
    # validators skip unknown formats; drop it, and the case is judged as the invalid one it is.
    cron = case.body.get("cron")
    if isinstance(cron, str) and cron in (case.body.get("name"), name):
        del case.body["cron"]
    if isinstance(case.body.get("name"), str):
        case.body["name"] = name
