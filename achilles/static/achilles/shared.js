// A thread a colleague shared, read-only: its shown versions, the answers as the server rendered
// them, and each cited source only when the reader may read it — «источник недоступен» otherwise
// (the API sends no title, text, link or system for it).
(() => {
  const {api, apiAll, el, formatDate} = window.achilles;
  const root = document.getElementById("shared"), log = document.getElementById("log");
  const id = root.dataset.conversation;
  document.getElementById("export-md").href = `/api/shared/${id}/export?format=markdown`;
  document.getElementById("export-pdf").href = `/api/shared/${id}/export?format=pdf`;

  function sources(m) {
    const wrap = el("div", "sources"); wrap.setAttribute("aria-label", gettext("Источники"));
    m.citations.forEach(c => {
      const numbers = c.markers.length ? c.markers : [c.rank];
      const card = el("div", "source" + (c.available ? "" : " unavailable"));
      card.id = `src-${m.id}-${numbers[0]}`;
      numbers.slice(1).forEach(n => { const alias = el("span"); alias.id = `src-${m.id}-${n}`; card.append(alias); });
      const head = el("div", "head"); head.append(el("span", "num", numbers.map(n => `[${n}]`).join("")));
      if (!c.available) { head.append(el("span", "title", gettext("источник недоступен"))); card.append(head); wrap.append(card); return; }
      const safe = /^https?:\/\//i.test(c.url || "");
      const title = el(safe ? "a" : "span", "title", c.title || gettext("Без названия"));
      if (safe) { title.href = c.url; title.target = "_blank"; title.rel = "noopener noreferrer"; }
      head.append(title); card.append(head, el("div", "system", c.source_system));
      if (c.chunk_text) card.append(el("div", "passage", c.chunk_text));
      wrap.append(card);
    });
    return wrap;
  }

  function message(m) {
    const box = el("div", `msg ${m.role} ${m.state || ""}`); box.dataset.id = m.id;
    const text = el("div", "text");
    if (m.content_html) text.innerHTML = m.content_html;  // rendered and sanitised by the server
    else text.textContent = m.content;
    text.querySelectorAll("a:not(.cite)").forEach(a => { a.target = "_blank"; a.rel = "noopener noreferrer"; });
    box.append(text);
    if (m.citations && m.citations.length) box.append(sources(m));
    if (m.created_at) box.append(el("div", "meta", formatDate(m.created_at)));
    return box;
  }

  (async () => {
    const r = await api(`/shared/${id}?limit=200`);
    if (r.status === 401) return;
    log.textContent = "";
    if (!r.ok) { log.append(el("p", "muted", gettext("Беседа недоступна: ею больше не делятся с вами или её удалили."))); return; }
    const thread = await r.json();
    const messages = (await apiAll(`/shared/${id}/messages`, thread.messages)) || thread.messages.items;
    document.getElementById("thread-title").textContent = thread.title || gettext("Без названия");
    document.getElementById("shared-by").textContent =
      interpolate(gettext("Поделился: %(x)s. Только для чтения."), {x: thread.owner_name ? `${thread.owner_name} (${thread.owner})` : thread.owner}, true);
    messages.forEach(m => log.append(message(m)));
  })();
})();
