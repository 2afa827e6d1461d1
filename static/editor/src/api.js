// The editor's calls to /api/v1, made with the browser's session like any other client's:
// JSON in, JSON out, every refusal a problem document (application/problem+json). Unsafe
// methods carry the CSRF token; a draft is saved with its ETag as If-Match (412 if someone
// saved it since). Every answer comes back as {ok, status, data, error, errors}: on a refusal
// `error` is the problem's detail, a sentence a person can act on, and `errors` its items;
// those about a definition carry the core's structure (code, node, field, cycle).

export class Api {
  constructor(config) {
    this.workflowUrl = config.api.workflow; // /api/v1/workflows/<slug>
    this.runsUrl = config.api.runs; // /api/v1/runs
    this.csrfToken = config.csrfToken;
  }

  versionUrl(number) {
    return `${this.workflowUrl}/versions/${number}`;
  }

  // The registered MCP servers' tools, for the agent form's picker ([{server, tools: [...]}]).
  mcpTools() {
    return this.request("GET", "/api/v1/mcp-tools");
  }

  versions() {
    return this.request("GET", `${this.workflowUrl}/versions`);
  }

  version(number) {
    return this.request("GET", this.versionUrl(number));
  }

  // Check a definition as a save would, without saving (200 with {valid, errors}).
  check(definition) {
    return this.request("POST", `${this.workflowUrl}/validate`, { definition });
  }

  createDraft(definition, comment) {
    return this.request("POST", `${this.workflowUrl}/versions`, { definition, comment });
  }

  // `version` as read (its etag); an empty comment leaves the draft's comment as it is.
  updateDraft(version, definition, comment) {
    const body = { definition, comment: comment || null };
    return this.request("PUT", this.versionUrl(version.number), body, { "If-Match": version.etag });
  }

  publish(number) {
    return this.request("POST", `${this.versionUrl(number)}/publish`, {});
  }

  activate(number) {
    return this.request("POST", `${this.versionUrl(number)}/activate`);
  }

  diff(from, to) {
    return this.request("GET", `${this.workflowUrl}/diff?${new URLSearchParams({ from, to })}`);
  }

  testRun(number, input) {
    return this.request("POST", `${this.versionUrl(number)}/test-runs`, { input });
  }

  // The editor's "Test against recent runs" (POST .../suites/recent-runs), then its report.
  testRecentRuns(number, last, mode) {
    return this.request("POST", `${this.workflowUrl}/suites/recent-runs`, { version: number, last, mode });
  }

  suiteRun(url) {
    return this.request("GET", url);
  }

  run(id) {
    return this.request("GET", `${this.runsUrl}/${id}`);
  }

  async request(method, url, body, headers = {}) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...headers } };
    if (method !== "GET") init.headers["X-CSRFToken"] = this.csrfToken;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      return refused(0, `The server could not be reached (${err.message}); check the connection and retry.`);
    }
    let data;
    try {
      data = await response.json();
    } catch {
      return refused(response.status, `The server answered ${response.status} ${response.statusText}.`);
    }
    if (response.ok) return { ok: true, status: response.status, data, error: null, errors: [] };
    const errors = Array.isArray(data?.errors) ? data.errors : [];
    let error = data?.detail || `The server answered ${response.status} ${response.statusText}.`;
    if (errors.some((e) => e.path === "X-CSRFToken")) error += " Reload the page (the security token may have expired).";
    return { ok: false, status: response.status, data, error, errors };
  }
}

function refused(status, error) {
  return { ok: false, status, data: null, error, errors: [] };
}
