// Shared by the pages' scripts: the API with the session's CSRF token, a 401 (the session ended)
// sends the page to the sign-in form and back here afterwards, a text-only element maker, one
// date format and plurals, in the page's language (<html lang>; the texts come from Django's
// JavaScript catalog, /jsi18n/, loaded before this script).
window.achilles = (() => {
  // The token comes from the page (the CSRF cookie may be HttpOnly); the cookie is the fallback.
  const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content
      || document.cookie.split("; ").find(c => c.startsWith("csrftoken="))?.split("=")[1] || "";
  let leaving = false;  // several calls may see the 401 at once: navigate once
  const signIn = () => {
    if (leaving) return; leaving = true;
    location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
  };
  const api = async (path, opts = {}) => {
    const response = await fetch("/api" + path, {credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf()}, ...opts});
    if (response.status === 401) signIn();
    return response;
  };
  // Every list route answers {items, next_cursor} (the API's one list contract): all the pages'
  // items, or null when a page fails. `first` is a page already fetched (e.g. a thread's messages).
  const apiAll = async (path, first) => {
    const sep = path.includes("?") ? "&" : "?";
    let page = first;
    if (!page) { const r = await api(path + sep + "limit=200"); if (!r.ok) return null; page = await r.json(); }
    const items = [...page.items];
    while (page.next_cursor) {
      const r = await api(path + sep + "limit=200&cursor=" + encodeURIComponent(page.next_cursor));
      if (!r.ok) return null;
      page = await r.json(); items.push(...page.items);
    }
    return items;
  };
  const el = (tag, cls, text) => {
    const e = document.createElement(tag); if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text; return e;
  };
  // Every date in the user's time zone (users.timezone, else the organisation's; the page names it
  // in <meta name="time-zone">), like the dates the server renders, not in the browser's own.
  const timeZone = document.querySelector('meta[name="time-zone"]')?.content || undefined;
  const language = document.documentElement.lang === "en" ? "en" : "ru";
  const locale = language === "en" ? "en-GB" : "ru-RU";  // day before month, 24 hours, as in Russian
  let dateFormat;
  try {
    dateFormat = new Intl.DateTimeFormat(locale, {day: "2-digit", month: "2-digit", year: "numeric", hour: "2-digit", minute: "2-digit", timeZone});
  } catch (e) {  // a zone this browser does not know: its own
    dateFormat = new Intl.DateTimeFormat(locale, {day: "2-digit", month: "2-digit", year: "numeric", hour: "2-digit", minute: "2-digit"});
  }
  const formatDate = value => value ? dateFormat.format(new Date(value)).replace(",", "") : "—";
  // plural(n, gettext("токен"), gettext("токена"), gettext("токенов")) → «1 токен», «2 токена», «5 токенов»;
  // in English «1 token», «2 tokens» (the few and many forms both translate to the plural)
  const plural = (n, one, few, many) => {
    const m10 = n % 10, m100 = n % 100;
    const word = language === "en" ? (n === 1 ? one : many)
        : m10 === 1 && m100 !== 11 ? one : (m10 >= 2 && m10 <= 4 && (m100 < 12 || m100 > 14) ? few : many);
    return `${n.toLocaleString(locale)} ${word}`;
  };
  // Icons drawn as SVG strokes (no emoji font needed).
  const ICONS = {
    copy: "M9 9h11v11H9zM5 15H4V4h11v1", regen: "M20 11a8 8 0 1 0-2.3 5.7M20 4v7h-7",
    stop: "M6 6h12v12H6z", edit: "M4 20h4L19 9l-4-4L4 16v4z", trash: "M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13",
    up: "M7 11l5-6 5 6M12 5v14", down: "M7 13l5 6 5-6M12 19V5", send: "M4 12l16-8-6 16-3-7z", menu: "M4 6h16M4 12h16M4 18h16",
  };
  const icon = name => {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 24 24"); svg.setAttribute("class", "icon"); svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS("http://www.w3.org/2000/svg", "path"); path.setAttribute("d", ICONS[name]);
    svg.append(path); return svg;
  };
  // The cited sources as cards, one renderer for the chat, a shared thread and an agent's run:
  // one card per marker, each with the passage its marker points to (``passages``; a citation stored
  // before passages were kept shows its best chunk under all its markers), ``id`` = `src-<prefix>-<N>`
  // as the server's rendering links [N]; the source by its label («Файлы», «Confluence»), never its
  // internal key. A source closed to the reader shows ``unavailable`` and nothing of it.
  // ``onOpen(c)``: called when the reader follows the source's link; ``openLink``: an «открыть» link too.
  const sourceCards = (citations, {prefix, unavailable = gettext("источник недоступен"), onOpen = null, openLink = false} = {}) => {
    const wrap = el("div", "sources"); wrap.setAttribute("aria-label", gettext("Источники"));
    const perMarker = [];
    (citations || []).forEach(c => {
      if (c.available !== false && c.passages && c.passages.length) c.passages.forEach(p => perMarker.push({...c, markers: [p.marker], chunk_text: p.text}));
      else perMarker.push(c);
    });
    if (perMarker.every(c => c.markers && c.markers.length)) perMarker.sort((a, b) => a.markers[0] - b.markers[0]);
    perMarker.forEach(c => {
      const numbers = (c.markers && c.markers.length) ? c.markers : [c.rank];
      const card = el("div", "source" + (c.available === false ? " unavailable" : ""));
      card.id = `src-${prefix}-${numbers[0]}`;
      numbers.slice(1).forEach(n => { const alias = el("span"); alias.id = `src-${prefix}-${n}`; card.append(alias); });
      const head = el("div", "head"); head.append(el("span", "num", numbers.map(n => `[${n}]`).join("")));
      if (c.available === false) { head.append(el("span", "title", unavailable)); card.append(head); wrap.append(card); return; }
      const safe = /^https?:\/\//i.test(c.url || "");
      const title = el(safe ? "a" : "span", "title", c.title || gettext("Без названия"));
      if (safe) {
        title.href = c.url; title.target = "_blank"; title.rel = "noopener noreferrer";
        if (onOpen) title.onclick = () => onOpen(c);
      }
      head.append(title); card.append(head);
      const label = c.source_label || c.source_system;
      if (label) card.append(el("div", "system", label));
      if (c.chunk_text) card.append(el("div", "passage", c.chunk_text));
      if (safe && openLink) {
        const open = el("a", null, gettext("открыть")); open.href = c.url; open.target = "_blank"; open.rel = "noopener noreferrer";
        if (onOpen) open.onclick = () => onOpen(c);
        card.append(open);
      }
      wrap.append(card);
    });
    return wrap;
  };
  return {api, apiAll, el, signIn, formatDate, plural, icon, sourceCards, timeZone, language, locale};
})();
document.addEventListener("DOMContentLoaded", () => {
  // the current page's link in the header
  document.querySelectorAll("header nav a").forEach(a => {
    const path = new URL(a.href).pathname;
    if (path === location.pathname || (path !== "/" && location.pathname.startsWith(path))) a.setAttribute("aria-current", "page");
  });
});

// The notices' bell (templates/base.html): the unread count on page load, then live over the
// account's websocket (/ws/chat/ delivers {"event": "notification"} frames to every open page of
// the account); no polling. The socket reconnects with a growing pause; a close for a lost session
// (4401) does not reconnect.
document.addEventListener("DOMContentLoaded", () => {
  const bell = document.getElementById("bell");
  if (!bell) return;
  const {api, el, formatDate} = window.achilles;
  const button = document.getElementById("bell-button"), panel = document.getElementById("bell-panel");
  const count = document.getElementById("bell-count"), list = document.getElementById("bell-list");
  let unread = 0, loaded = false;
  const showCount = n => {
    unread = Math.max(0, n);
    count.textContent = unread > 99 ? "99+" : String(unread);
    count.hidden = unread === 0;
    button.setAttribute("aria-label", unread ? interpolate(gettext("Уведомления: непрочитанных %(unread)s"), {unread: unread}, true) : gettext("Уведомления"));
  };
  const refreshCount = async () => {
    const r = await api("/notifications/unread");
    if (r.ok) showCount((await r.json()).count);
  };
  const item = n => {
    const li = el("li", n.read_at ? "" : "unread"); li.dataset.id = n.id;
    const title = n.link ? el("a", "bell-title", n.title) : el("span", "bell-title", n.title);
    if (n.link) title.href = n.link;
    li.append(title);
    if (n.body) li.append(el("p", "", n.body));
    const meta = el("div", "bell-meta"); meta.append(el("span", "", formatDate(n.created_at)));
    if (!n.read_at) {
      const mark = el("button", "link-button", gettext("Прочитано")); mark.type = "button";
      mark.onclick = async () => {
        const r = await api(`/notifications/${n.id}/read`, {method: "POST"});
        if (r.ok) { li.classList.remove("unread"); mark.remove(); showCount(unread - 1); }
      };
      meta.append(mark);
    }
    li.append(meta);
    if (n.link) title.addEventListener("click", () => { if (!n.read_at) api(`/notifications/${n.id}/read`, {method: "POST"}); });
    return li;
  };
  const loadList = async () => {
    const r = await api("/notifications?limit=20");
    if (!r.ok) return;
    const page = await r.json();
    list.replaceChildren(...page.items.map(item));
    if (!page.items.length) list.append(el("li", "muted", gettext("Уведомлений пока нет.")));
    loaded = true;
  };
  const close = () => { panel.hidden = true; button.setAttribute("aria-expanded", "false"); };
  button.addEventListener("click", async () => {
    if (!panel.hidden) { close(); return; }
    panel.hidden = false; button.setAttribute("aria-expanded", "true");
    await loadList();
  });
  document.addEventListener("click", e => { if (!panel.hidden && !bell.contains(e.target)) close(); });
  document.addEventListener("keydown", e => { if (e.key === "Escape" && !panel.hidden) { close(); button.focus(); } });
  document.getElementById("bell-read-all").addEventListener("click", async () => {
    const r = await api("/notifications/read-all", {method: "POST"});
    if (r.ok) { showCount((await r.json()).count); await loadList(); }
  });
  const notice = frame => {
    showCount(unread + 1);
    if (loaded) {
      list.querySelector("li.muted")?.remove();
      list.prepend(item(frame.notification));
    }
  };
  const live = on => { if (on) bell.dataset.live = "true"; else delete bell.dataset.live; };
  refreshCount();
  // A page with a socket of its own (the chat, window.achilles.pageSocket) hands its notification
  // frames and its open/closed state to the bell: one socket per page, never two.
  window.achilles.bell = {notice, live, refresh: refreshCount};
  if (window.achilles.pageSocket) { live(document.body.dataset.socket === "open"); return; }
  let pause = 1000;
  const connect = () => {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/chat/");
    ws.onopen = () => { pause = 1000; live(true); };  // open: joined the account's group
    ws.onmessage = ev => {
      let frame; try { frame = JSON.parse(ev.data); } catch (e) { return; }
      if (frame.event === "notification") notice(frame);
    };
    ws.onclose = ev => {
      live(false);
      if (ev.code === 4401) return;  // the session ended: the next API call sends the page to sign-in
      setTimeout(() => { refreshCount(); connect(); }, pause);  // a notice sent while away is counted
      pause = Math.min(pause * 2, 60000);
    };
  };
  connect();
});
