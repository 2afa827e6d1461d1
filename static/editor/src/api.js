// JSON calls to the editor endpoints. Every POST carries the CSRF token; every answer comes
// back as {ok, status, data} with data.error set to a sentence a person can act on.

export class Api {
  constructor(config) {
    this.urls = config.urls;
    this.csrfToken = config.csrfToken;
  }

  // URLs are rendered with 0 in place of the number (a version or run); the number always
  // comes after the slug, so the last "/0" is the one to replace.
  url(name, number) {
    const template = this.urls[name];
    if (number === undefined) return template;
    const at = template.lastIndexOf("/0");
    return `${template.slice(0, at)}/${number}${template.slice(at + 2)}`;
  }

  get(name, number, query) {
    const url = this.url(name, number) + (query ? `?${new URLSearchParams(query)}` : "");
    return this.request("GET", url);
  }

  post(name, number, body) {
    return this.request("POST", this.url(name, number), body ?? {});
  }

  async request(method, url, body) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.headers["X-CSRFToken"] = this.csrfToken;
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      const error = `The server could not be reached (${err.message}); check the connection and retry.`;
      return { ok: false, status: 0, data: { error, issues: [] } };
    }
    let data;
    try {
      data = await response.json();
    } catch {
      const hint = response.status === 403 ? " Reload the page (the security token may have expired)." : "";
      data = { error: `The server answered ${response.status} ${response.statusText}.${hint}`, issues: [] };
    }
    return { ok: response.ok, status: response.status, data };
  }
}
