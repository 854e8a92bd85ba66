"""Folder ingestion (KS-2): files → documents → ``record_upsert``, per-file errors, optional prune."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from achilles.errors import ApplicationError
from knowledge import services
from knowledge.documents import SUPPORTED_SUFFIXES, DocumentError, parse_document


@dataclass
class IngestReport:
    """Counts and per-file problems of one ingest run."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    pruned: int = 0
    chunks: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    prune_skipped: bool = False

    @property
    def files(self) -> int:
        return self.created + self.updated + self.unchanged + len(self.errors)

    def summary(self) -> str:
        line = (
            f"{self.files} files: {self.created} created, {self.updated} updated, {self.unchanged} unchanged, "
            f"{len(self.errors)} failed, {self.pruned} pruned; {self.chunks} chunks"
        )
        if self.prune_skipped:
            line += " (prune skipped because some files failed)"
        return line


def discover(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SUPPORTED_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def origin_for(root: Path) -> str:
    return f"ingest:{root.resolve()}"


def ingest_path(
    path: str | Path,
    *,
    prune: bool = False,
    default_acl: tuple[str, ...] = ("everyone",),
    progress: Callable[[Path], None] | None = None,
) -> IngestReport:
    """Ingest every supported file under ``path``; one bad file never stops the others."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    base = root if root.is_dir() else root.parent
    origin = origin_for(base)
    report = IngestReport()
    seen: set[tuple[str, str]] = set()
    pending_links: list[tuple[int, str, list[tuple[str, str]], str]] = []
    for file in discover(root):
        relative = file.relative_to(base).as_posix()
        try:
            try:
                raw = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise DocumentError(f"unreadable: {exc.__class__.__name__}: {exc}") from exc
            draft = parse_document(raw, external_id=relative, suffix=file.suffix, default_acl=default_acl)
            links = [(link.to_external_id, link.link_type) for link in draft.links]
            outcome = services.record_upsert(
                source_system=draft.source_system,
                external_id=draft.external_id,
                title=draft.title,
                text=draft.text,
                acl=draft.acl,
                acl_also=draft.acl_also,
                url=draft.url,
                author_principal_id=draft.author,
                origin=origin,
                links_fingerprint=sorted(links),
                never_hint=draft.never_hint,
                user_writable=draft.user_writable,
            )
        except (DocumentError, ApplicationError) as exc:
            report.errors.append((relative, str(exc)))
        else:
            seen.add((draft.source_system, draft.external_id))
            setattr(report, outcome.status, getattr(report, outcome.status) + 1)
            report.chunks += outcome.chunks
            report.warnings.extend((relative, w) for w in outcome.warnings)
            pending_links.append((outcome.record_id, draft.source_system, links, relative))
        if progress:
            progress(file)
    # Links resolve after every file is in, so a link may point at a file that sorts later.
    for record_id, source_system, links, relative in pending_links:
        for missing in services.record_links_set(record_id=record_id, source_system=source_system, links=links):
            report.warnings.append((relative, f"link target «{missing}» not stored yet: the link appears when it is"))
    if prune:
        if report.errors:
            report.prune_skipped = True
        else:
            report.pruned = services.records_prune(origin=origin, keep=seen)
    return report
