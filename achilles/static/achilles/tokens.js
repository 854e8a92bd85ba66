// Tokens page: copy the new secret, confirm before revoking.
document.addEventListener("DOMContentLoaded", () => {
  const copy = document.getElementById("copy-token");
  if (copy) copy.onclick = async () => {
    const secret = document.getElementById("new-token").textContent;
    try { await navigator.clipboard.writeText(secret); }
    catch { const range = document.createRange(); range.selectNodeContents(document.getElementById("new-token"));
            getSelection().removeAllRanges(); getSelection().addRange(range); document.execCommand("copy"); }
    document.getElementById("copied").textContent = gettext("скопировано");
  };
  document.querySelectorAll("form.revoke").forEach(form => form.addEventListener("submit", e => {
    if (!confirm(interpolate(gettext("Отозвать токен «%(name)s»? Программы, которые им пользуются, потеряют доступ."), {name: form.dataset.name}, true))) e.preventDefault();
  }));
});
