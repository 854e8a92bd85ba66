"""The Confluence sync: pages and attachments into the store (content), ACLs re-read (permissions).

Content run, resumable (checkpoint committed with each batch, ``knowledge.connectors.runs``):

1. ``pages``: per space, ``type=page and space="K" [and lastmodified >= "<watermark − overlap>"]
   order by lastmodified asc``, a batch per result page. A batch is fetched and converted first
   (no transaction open), then its records, counters and the checkpoint (space, offset, watermark)
   are committed together. One page that fails is recorded with its error; the run goes on.
2. ``reconcile``: every page id the connector's account can still see, listed; stored records of
   pages not among them (trashed, deleted, moved out of scope, no longer visible) are deleted.

Permission run: every page's space permission, ancestors and restrictions re-read, ACLs put through
``records_access_set`` (no re-embedding). Restriction changes do not move ``lastmodified``, a move
may not either, hence this run on its own, more frequent schedule.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction

from achilles.identity import EVERYONE
from knowledge import facade
from knowledge.connectors.confluence.client import ConfluenceClient, ConfluenceError
from knowledge.connectors.confluence.permissions import UNREADABLE, Layer, PageAccess, page_access
from knowledge.connectors.confluence.storage import storage_to_markdown
from knowledge.connectors.models import Connector, ConnectorRun, RunKind
from knowledge.connectors.runs import Batch, run_commit
from knowledge.connectors.secrets import credentials_decrypt
from knowledge.connectors.store import CLOSED, effective_access, record_put, records_access_put
from knowledge.models import Record
from knowledge.parsers import ParseError, parse_file

log = logging.getLogger(__name__)

# CQL dates have minute resolution and the server's time zone: re-read a window behind the watermark.
OVERLAP = timedelta(minutes=10)
# A batch is one result page of the CQL search with bodies: DC caps ``limit`` at 50 when ``body`` is
# expanded, so 50 pages come with one call (the offset arithmetic copes with a lower cap).
BATCH = 50
MAX_ATTACHMENT_BYTES = 50 * 2**20
PAGE_EXPAND = "body.storage,version,ancestors,space,history"
LIST_EXPAND = "ancestors,restrictions.read.restrictions.user,restrictions.read.restrictions.group"
# The content run's listing: each page with its body, ancestors, own view restriction and first
# attachments, so a page costs no call of its own (one per 50 pages instead of three per page).
BATCH_EXPAND = f"body.storage,version,space,children.attachment,{LIST_EXPAND}"
ATTACHMENT_SEP = "/attachment/"
UNKNOWN_USER = "\x00unknown"
DEFAULT_EVERYONE_GROUPS = frozenset({"confluence-users"})


def everyone_groups(connector: Connector) -> frozenset[str]:
    return frozenset(connector.scope.get("everyone_groups", DEFAULT_EVERYONE_GROUPS))


def client_for(connector: Connector) -> ConfluenceClient:
    token = credentials_decrypt(connector.credentials_encrypted).get("token", "")
    return ConfluenceClient(connector.base_url, token)


def signed_in(client: ConfluenceClient) -> str:
    """The account the token signs in as. A site that allows anonymous access serves a token it
    does not accept as an anonymous caller (CONFSERVER-98199) instead of a 401: a run would then
    see only public pages and delete the rest from the store. Such a run fails, saying why."""
    me = client.current_user()
    if me.get("type") == "anonymous" or not me.get("username"):
        raise ConfluenceError(
            "Confluence treats the token as an anonymous caller (expired, revoked or mistyped personal"
            " access token on a site with anonymous access): nothing synced, nothing deleted; save a valid token",
            status=401,
        )
    return str(me["username"])


def cql_date(when: str) -> str:
    """An ISO timestamp as CQL's ``yyyy/MM/dd HH:mm`` in the timestamp's own offset (the server's zone)."""
    return datetime.fromisoformat(when.replace("Z", "+00:00")).strftime("%Y/%m/%d %H:%M")


def page_cql(space: str, since: str | None) -> str:
    clause = f' and lastmodified >= "{since}"' if since else ""
    return f'type=page and space="{space}"{clause} order by lastmodified asc'


# ------------------------------------------------------------------ who may read


@dataclass
class Access:
    """Per-run caches of space permissions, restrictions and user mapping."""

    client: ConfluenceClient
    spaces: dict[str, Layer] = field(default_factory=dict)
    restrictions: dict[str, Layer] = field(default_factory=dict)
    users: dict[str, str | None] = field(default_factory=dict)  # Confluence username → principal
    keys: dict[str, dict | None] = field(default_factory=dict)
    # Confluence groups every account is in (``confluence-users``): read as the platform's ``everyone``.
    everyone_groups: frozenset[str] = DEFAULT_EVERYONE_GROUPS

    def _username(self, user: dict) -> str | None:
        username = user.get("username")
        if username:
            email = user.get("email")
            if email and username not in self.users:
                self.users[username] = _platform_principal(username, email)
            return username
        key = user.get("userKey")
        if not key:
            return None
        if key not in self.keys:
            self.keys[key] = self.client.user(key=key)
        found = self.keys[key]
        if not found or not found.get("username"):
            return None
        return self._username(found)

    def group_principal(self, name: str) -> str:
        return EVERYONE if name in self.everyone_groups else f"group:{name}"

    def user_map(self, username: str) -> str | None:
        if username == UNKNOWN_USER:
            return None
        if username not in self.users:
            self.users[username] = _platform_principal(username, None)
        return self.users[username]

    def space(self, key: str) -> Layer:
        if key not in self.spaces:
            try:
                perms = self.client.space_permissions(key)
            except ConfluenceError as exc:
                log.warning("space %s permissions unreadable (%s): its pages are readable by nobody", key, exc)
                self.spaces[key] = UNREADABLE
                return UNREADABLE
            users = self._layer(perms["users"], perms["groups"])
            self.spaces[key] = Layer(users=users.users, groups=users.groups, anonymous=perms["anonymous"])
        return self.spaces[key]

    def note_restriction(self, page_id: str, content: dict) -> None:
        """Take a page's own view restriction from a listing that expanded it (saves a call)."""
        read = content.get("restrictions", {}).get("read", {}).get("restrictions")
        if read is None:
            return
        users, groups = read.get("user", {}), read.get("group", {})
        if _truncated(users) or _truncated(groups):
            return  # more than a page of names: the dedicated call reads it
        self.restrictions[page_id] = self._layer(
            users.get("results", []), [g.get("name", "") for g in groups.get("results", [])]
        )

    def _layer(self, users: list[dict], groups: list[str]) -> Layer:
        # A user Confluence cannot name stays in the layer as a name no account has: the layer
        # still restricts (an emptied layer would read as "no restriction" and over-grant).
        names = frozenset(self._username(u) or UNKNOWN_USER for u in users)
        return Layer(users=names, groups=frozenset(g for g in groups if g))

    def restriction(self, page_id: str) -> Layer:
        if page_id not in self.restrictions:
            try:
                found = self.client.read_restriction(page_id)
            except ConfluenceError as exc:
                log.warning("restriction of page %s unreadable (%s): readable by nobody", page_id, exc)
                found = False
            if found is None:  # 404: no such content (a trashed ancestor) → no layer
                layer = Layer()
            elif found is False:
                layer = UNREADABLE
            else:
                layer = self._layer(found["user"], found["group"])
            self.restrictions[page_id] = layer
        return self.restrictions[page_id]

    def of(self, content: dict) -> PageAccess:
        space_key = content.get("space", {}).get("key", "")
        path = [str(a["id"]) for a in content.get("ancestors", [])] + [str(content["id"])]
        return page_access(
            space=self.space(space_key),
            restrictions=[self.restriction(pid) for pid in path],
            user_map=self.user_map,
            group_map=self.group_principal,
        )


def _truncated(block: dict) -> bool:
    size, limit = block.get("size", 0), block.get("limit")
    return bool(block.get("_links", {}).get("next")) or (limit is not None and size >= limit > 0)


def _platform_principal(username: str, email: str | None) -> str | None:
    """``user:<id>`` of the platform account with this username (else this e-mail, if exactly one)."""
    users = get_user_model().objects.filter(is_active=True)
    found = list(users.filter(username__iexact=username).values_list("pk", flat=True)[:2])
    if len(found) != 1 and email:
        found = list(users.filter(email__iexact=email).values_list("pk", flat=True)[:2])
    return f"user:{found[0]}" if len(found) == 1 else None


# ------------------------------------------------------------------ content


@dataclass
class PageTitles:
    """Page ids by (space, title), for a body's ``ac:link``s to other pages: the run's listings
    first, then one lookup per distinct target (cached); spaces out of scope are not looked up."""

    client: ConfluenceClient
    spaces: frozenset[str]
    ids: dict[tuple[str, str], str | None] = field(default_factory=dict)

    def note(self, content: dict) -> None:
        space = (content.get("space") or {}).get("key")
        if space and content.get("title"):
            self.ids[(space, content["title"])] = str(content["id"])

    def resolve(self, space: str, title: str) -> str | None:
        if space not in self.spaces:
            return None
        if (space, title) not in self.ids:
            try:
                self.ids[(space, title)] = self.client.page_id_by_title(space, title)
            except ConfluenceError as exc:
                log.info("link target %s/%s not looked up (%s)", space, title, exc)
                return None
        return self.ids[(space, title)]


@dataclass
class Doc:
    """A page or attachment converted, ready to store."""

    external_id: str
    title: str
    text: str
    url: str
    author: str | None
    access: PageAccess
    links: list[tuple[str, str]]


def _webui(client: ConfluenceClient, content: dict) -> str:
    links = content.get("_links", {})
    base = links.get("base") or client.base_url.rstrip("/")
    return base.rstrip("/") + links["webui"] if links.get("webui") else ""


def page_docs(
    client: ConfluenceClient, access: Access, content: dict, titles: PageTitles | None = None
) -> tuple[list[Doc], list[tuple[str, str]]]:
    """A page and its attachments as records, plus the attachments that failed (id, reason). With
    ``titles``, the body's links to other pages become graph links (``links_to``)."""
    page_id = str(content["id"])
    if "body" not in content:
        content = client.page(page_id, expand=PAGE_EXPAND)
    acl = access.of(content)
    author_name = (content.get("version", {}).get("by") or {}).get("username")
    author = access.user_map(author_name) if author_name else None
    body = content.get("body", {}).get("storage", {}).get("value", "")
    converted = storage_to_markdown(body, space_key=content.get("space", {}).get("key", ""))
    ancestors = content.get("ancestors", [])
    links = [(str(ancestors[-1]["id"]), "child_of")] if ancestors else []
    if titles is not None:
        targets = {titles.resolve(space, title) for space, title in converted.links.pages}
        links += [(target, "links_to") for target in sorted(t for t in targets if t and t != page_id)]
    docs, failed = [], []
    for att in _attachments(client, content):
        att_id = f"{page_id}{ATTACHMENT_SEP}{att['id']}"
        try:
            size = int(att.get("extensions", {}).get("fileSize") or 0)
            if size > MAX_ATTACHMENT_BYTES:
                raise ParseError(f"{size} bytes, over the attachment limit", code="too_large")
            data = client.download(att["_links"]["download"])
            parsed = parse_file(data, filename=att["title"], max_bytes=MAX_ATTACHMENT_BYTES)
        except ParseError as exc:
            if exc.code == "unsupported_format":
                continue  # an image or an archive: nothing to index, not an error
            failed.append((att_id, f"{exc.code}: {exc}"))
            continue
        except ConfluenceError as exc:
            failed.append((att_id, str(exc)))
            continue
        docs.append(
            Doc(
                att_id,
                f"{content['title']} / {att['title']}",
                parsed.text,
                _webui(client, att) or _webui(client, content),
                author,
                acl,
                [(page_id, "attachment_of")],
            )
        )
    page = Doc(
        page_id,
        content["title"],
        f"# {content['title']}\n\n{converted.markdown}",
        _webui(client, content),
        author,
        acl,
        links + [(d.external_id, "attachment") for d in docs],
    )
    return [page, *docs], failed


def _attachments(client: ConfluenceClient, content: dict) -> list[dict]:
    """The page's attachments: from the listing's expansion when it holds them all, else listed."""
    inline = (content.get("children") or {}).get("attachment")
    if (
        inline is not None
        and not _truncated(inline)
        and all("download" in a.get("_links", {}) for a in inline["results"])
    ):
        return list(inline["results"])
    return client.attachments(str(content["id"]))


def _store_batch(connector: Connector, prepared: list[tuple[str, list[Doc]]], errors: list[tuple[str, str]]) -> int:
    """Write a batch's records at once (``facade.upsert_records``); attachments no longer on their
    page are deleted. Returns changes; a document the store refuses goes to ``errors``. A database
    error is raised (the caller then goes page by page)."""
    source = connector.source_system
    if not prepared:
        return 0
    keep = {d.external_id for _, docs in prepared for d in docs}
    stale_pages = set(
        Record.objects.filter(
            source_system=source,
            external_id__regex=r"^(" + "|".join(re.escape(p) for p, _ in prepared) + ")" + re.escape(ATTACHMENT_SEP),
        )
        .exclude(external_id__in=keep)
        .values_list("external_id", flat=True)
    )
    changed = 0
    if stale_pages:
        Record.objects.filter(source_system=source, external_id__in=stale_pages).delete()
        changed += len({eid.split(ATTACHMENT_SEP)[0] for eid in stale_pages})
    writes = [_write(source, doc) for _, docs in prepared for doc in docs]
    for write, outcome in zip(writes, facade.upsert_records(writes), strict=True):
        if isinstance(outcome, Exception):
            errors.append((write.external_id, f"{type(outcome).__name__}: {outcome}"))
        else:
            changed += outcome.status != "unchanged"
    return changed


def _write(source: str, doc: Doc) -> facade.RecordWrite:
    access = effective_access(doc.access)
    return facade.RecordWrite(
        source_system=source,
        external_id=doc.external_id,
        title=doc.title[:500] or doc.external_id,
        text=doc.text,
        acl=list(access.acl),
        acl_also=[list(c) for c in access.acl_also],
        url=doc.url,
        author_principal_id=doc.author,
        links=doc.links,
        user_writable=True,
    )


def _store(connector: Connector, docs: list[Doc], page_id: str) -> int:
    """Write one page's records; attachments of the page no longer there are deleted. Returns changes."""
    source = connector.source_system
    keep = {d.external_id for d in docs}
    stale = Record.objects.filter(source_system=source, external_id__startswith=f"{page_id}{ATTACHMENT_SEP}").exclude(
        external_id__in=keep
    )
    changed = stale.delete()[0] and 1
    # attachments first, then the page: its links to them find their targets
    for doc in sorted(docs, key=lambda d: d.external_id == page_id):
        before = (
            Record.objects.filter(source_system=source, external_id=doc.external_id)
            .values_list("content_hash", "acl")
            .first()
        )
        record_put(
            source_system=source,
            external_id=doc.external_id,
            title=doc.title,
            text=doc.text,
            access=doc.access,
            url=doc.url,
            author=doc.author,
            links=doc.links,
        )
        after = (
            Record.objects.filter(source_system=source, external_id=doc.external_id)
            .values_list("content_hash", "acl")
            .first()
        )
        changed += before != after
    return changed


def content_sync(run: ConnectorRun) -> None:
    connector = run.connector
    spaces = list(connector.scope.get("spaces", []))
    checkpoint = dict(run.checkpoint or {})
    if "since" not in checkpoint:
        previous = (
            ConnectorRun.objects.filter(connector=connector, kind=RunKind.CONTENT, state="succeeded")
            .exclude(pk=run.pk)
            .order_by("-finished_at")
            .values_list("checkpoint", flat=True)
            .first()
        ) or {}
        marks = previous.get("watermark", {})
        checkpoint = {
            "phase": "pages",
            "space": 0,
            "start": 0,
            "watermark": dict(marks),
            "since": {
                k: cql_date((datetime.fromisoformat(v.replace("Z", "+00:00")) - OVERLAP).isoformat())
                for k, v in marks.items()
                if k in spaces
            },
        }
    with client_for(connector) as client:
        signed_in(client)
        access = Access(client=client, everyone_groups=everyone_groups(connector))
        titles = PageTitles(client=client, spaces=frozenset(spaces))
        while checkpoint["phase"] == "pages" and checkpoint["space"] < len(spaces):
            space = spaces[checkpoint["space"]]
            cql = page_cql(space, checkpoint["since"].get(space))
            pages = client.search(cql, start=checkpoint["start"], limit=BATCH, expand=BATCH_EXPAND)
            for next_start, results in pages:
                batch, prepared = Batch(), []
                # the batch's own restrictions first: a parent listed with its child costs no call
                for content in results:
                    access.note_restriction(str(content["id"]), content)
                    titles.note(content)
                for content in results:
                    batch.seen += 1
                    try:
                        docs, failed = page_docs(client, access, content, titles)
                        prepared.append((str(content["id"]), docs))
                        batch.errors.extend(failed)
                    except (ConfluenceError, KeyError, ValueError, TypeError) as exc:
                        batch.errors.append((str(content.get("id")), f"{type(exc).__name__}: {exc}"))
                    when = (content.get("version") or {}).get("when")
                    if when and when > checkpoint["watermark"].get(space, ""):
                        checkpoint["watermark"][space] = when
                with transaction.atomic():
                    try:
                        with transaction.atomic():
                            batch.changed += _store_batch(connector, prepared, batch.errors)
                    except Exception:  # noqa: BLE001 — page by page, so one bad document is named alone
                        for page_id, docs in prepared:
                            try:
                                with transaction.atomic():
                                    batch.changed += _store(connector, docs, page_id)
                            except Exception as exc:  # noqa: BLE001 — one bad document never stops the run
                                batch.errors.append((page_id, f"{type(exc).__name__}: {exc}"))
                    checkpoint["start"] = next_start
                    run_commit(run, batch=batch, checkpoint=dict(checkpoint))
            with transaction.atomic():
                checkpoint.update(space=checkpoint["space"] + 1, start=0)
                run_commit(run, batch=Batch(), checkpoint=dict(checkpoint))
        alive: set[str] = set()
        for space in spaces:
            for _, results in client.search(f'type=page and space="{space}"', limit=500):
                alive.update(str(r["id"]) for r in results)
    with transaction.atomic():
        gone = Record.objects.filter(source_system=connector.source_system)
        stale = [eid for eid in gone.values_list("external_id", flat=True) if eid.split(ATTACHMENT_SEP)[0] not in alive]
        deleted = (
            Record.objects.filter(source_system=connector.source_system, external_id__in=stale).delete()[0]
            if stale
            else 0
        )
        checkpoint["phase"] = "done"
        run_commit(run, batch=Batch(deleted=len(stale) if deleted else 0), checkpoint=dict(checkpoint))


# ------------------------------------------------------------------ permissions


def permission_sync(run: ConnectorRun) -> None:
    connector = run.connector
    source = connector.source_system
    stored = list(Record.objects.filter(source_system=source).values_list("external_id", flat=True))
    by_page: dict[str, list[str]] = {}
    for eid in stored:
        by_page.setdefault(eid.split(ATTACHMENT_SEP)[0], []).append(eid)
    with client_for(connector) as client:
        signed_in(client)
        access = Access(client=client, everyone_groups=everyone_groups(connector))
        listed: list[dict] = []
        for space in connector.scope.get("spaces", []):
            for _, results in client.search(f'type=page and space="{space}"', limit=200, expand=LIST_EXPAND):
                for content in results:
                    content.setdefault("space", {"key": space})
                    access.note_restriction(str(content["id"]), content)
                    listed.append(content)
        batch = Batch()
        computed: dict[str, PageAccess] = {}
        for content in listed:
            page_id = str(content["id"])
            if page_id not in by_page:
                continue
            batch.seen += 1
            acl = access.of(content)
            for eid in by_page[page_id]:
                computed[eid] = acl
        # Stored pages the account no longer sees (restricted away from it, trashed): readable by nobody
        # until the next content run deletes them — never left under their old, wider ACL.
        listed_ids = {str(c["id"]) for c in listed}
        for page_id, eids in by_page.items():
            if page_id not in listed_ids:
                computed.update(dict.fromkeys(eids, CLOSED))
    with transaction.atomic():
        batch.changed = records_access_put(source_system=source, access=computed)
        run_commit(run, batch=batch, checkpoint={"phase": "done"}, total=batch.seen)


def connector_run_body(run: ConnectorRun) -> None:
    if run.kind == RunKind.PERMISSIONS:
        permission_sync(run)
    else:
        content_sync(run)
