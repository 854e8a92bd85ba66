"""The Confluence Server / Data Center connector: REST client, storage format → Markdown, exact
view permissions (space AND every ancestor AND the page), and the incremental sync."""
