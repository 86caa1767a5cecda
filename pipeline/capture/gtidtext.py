"""MySQL GTID set text (``uuid:1-5:7,uuid2:tag:1-3``, as servers print it): its intervals, and one
canonical text of a set (per server UUID, in order, intervals merged) to compare and store.
(python-mysql-replication's ``GtidSet``, which capture's GTID state is, cannot parse a tag, and
neither merges a UUID named twice nor compares sets whose UUIDs come in another order.)"""

from __future__ import annotations


def intervals(text: str) -> list[tuple[str, str | None, int, int]]:
    """A GTID set's intervals: ``(uuid, tag or None, first, last)``, UUIDs and tags in lower case."""
    out = []
    for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
        uuid, *fields = part.split(":")
        tag = None
        for f in fields:
            first, _, last = f.strip().partition("-")
            if first.isdigit():
                out.append((uuid.strip().lower(), tag, int(first), int(last or first)))
            else:
                tag = f.strip().lower()
    return out


def canonical(items: list[tuple[str, str | None, int, int]]) -> str | None:
    """The set of untagged ``items`` as one text (None: empty)."""
    by_uuid: dict[str, list[list[int]]] = {}
    for uuid, _tag, a, b in sorted(i for i in items if i[1] is None):
        runs = by_uuid.setdefault(uuid, [])
        if runs and a <= runs[-1][1] + 1:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    text = ",".join(uuid + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in runs)
                    for uuid, runs in sorted(by_uuid.items()))
    return text or None
