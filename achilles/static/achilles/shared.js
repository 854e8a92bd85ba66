// A thread a colleague shared, read-only: its shown versions, the answers as the server rendered
// them, and each cited source only when the reader may read it — «источник недоступен» otherwise
// (the API sends no title, text, link or system for it).
(() => {
  const {api, apiAll, el, formatDate, sourceCards} = window.achilles;
  const root = document.getElementById("shared"), log = document.getElementById("log");
  const id = root.dataset.conversation;
  document.getElementById("export-md").href = `/api/shared/${id}/export?format=markdown`;
  document.getElementById("export-pdf").href = `/api/shared/${id}/export?format=pdf`;

  function message(m) {
    const box = el("div", `msg ${m.role} ${m.state || ""}`); box.dataset.id = m.id;
    const text = el("div", "text");
    if (m.content_html) text.innerHTML = m.content_html;  // rendered and sanitised by the server
    else text.textContent = m.content;
    text.querySelectorAll("a:not(.cite)").forEach(a => { a.target = "_blank"; a.rel = "noopener noreferrer"; });
    // a code block wider than a phone scrolls sideways: the keyboard must reach it too
    text.querySelectorAll("pre").forEach(pre => { pre.tabIndex = 0; });
    box.append(text);
    if (m.citations && m.citations.length) box.append(sourceCards(m.citations, {prefix: m.id}));
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
