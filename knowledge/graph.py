"""``graph`` (KS-5): records linked to a record within one or two hops, never through a hidden one."""

from __future__ import annotations

from django.db import connection

from achilles.errors import NotFound, ValidationFailed
from knowledge.contracts import MAX_GRAPH_DEPTH, GraphNode, GraphResult, Identity
from knowledge.selectors import principals_of

GRAPH_STEP_SQL = """
SELECT l.from_record_id, l.to_record_id, l.link_type, r.id, r.title, r.url, r.source_system
FROM knowledge_record_links l
JOIN knowledge_records r
  ON r.id = CASE WHEN l.from_record_id = ANY(%(frontier)s) THEN l.to_record_id ELSE l.from_record_id END
WHERE (l.from_record_id = ANY(%(frontier)s) OR l.to_record_id = ANY(%(frontier)s))
  AND knowledge_acl_allows(r.acl, r.acl_also, %(principals)s::text[])
ORDER BY l.from_record_id, l.to_record_id, l.link_type
"""


def graph(record_id: int, identity: Identity, depth: int = 1) -> GraphResult:
    """Records linked to ``record_id`` within ``depth`` (1–2) hops, never through a hidden record.

    An unknown record and a record the identity cannot see are the same ``NotFound``.
    """
    principals = principals_of(identity)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_GRAPH_DEPTH:
        raise ValidationFailed(f"depth must be 1 or {MAX_GRAPH_DEPTH}", code="invalid_depth")
    if not isinstance(record_id, int) or isinstance(record_id, bool):
        raise ValidationFailed("record_id must be an integer", code="invalid_record_id")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM knowledge_records WHERE id = %s AND knowledge_acl_allows(acl, acl_also, %s::text[])",
            [record_id, principals],
        )
        if cursor.fetchone() is None:
            raise NotFound("record not found", code="record_not_found")
        seen = {record_id}
        frontier = [record_id]
        nodes: list[GraphNode] = []
        for level in range(1, depth + 1):
            cursor.execute(GRAPH_STEP_SQL, {"frontier": frontier, "principals": principals})
            next_frontier: list[int] = []
            for from_id, to_id, link_type, node_id, title, url, source_system in cursor.fetchall():
                if node_id in seen:
                    continue
                seen.add(node_id)
                outgoing = from_id in frontier and to_id == node_id
                nodes.append(
                    GraphNode(
                        record_id=node_id,
                        title=title,
                        url=url or "",
                        source_system=source_system,
                        depth=level,
                        link_type=link_type,
                        via_record_id=from_id if outgoing else to_id,
                        direction="out" if outgoing else "in",
                    )
                )
                next_frontier.append(node_id)
            frontier = next_frontier
            if not frontier:
                break
    return GraphResult(root_record_id=record_id, nodes=tuple(nodes))
