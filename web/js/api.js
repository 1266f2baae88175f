// The studio's only way to the server: the JSON API under /api/v1/
// (docs/serve.md). Every failure becomes an ApiError whose message a person
// can read: what went wrong, in words, and what the server said.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// What each status means for the person at the page, before the server's own words.
const MEANINGS = {
  400: "The request was not understood",
  404: "Not found",
  405: "Not allowed",
  413: "The text is too long to send",
  422: "The model cannot read this",
  500: "The server failed",
  503: "The server is busy",
};

async function call(method, path, body) {
  let response;
  try {
    response = await fetch("/api/v1/" + path, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError("Cannot reach the server. Is `tformer serve` still running?", 0);
  }
  let data = null;
  try {
    data = await response.json();
  } catch (e) {
    // not JSON: said below by the status alone
  }
  if (!response.ok) {
    const said = data && data.error && data.error.message ? data.error.message : response.statusText;
    const meaning = MEANINGS[response.status] || `The server answered ${response.status}`;
    let text = `${meaning}: ${said}.`;
    const retry = response.headers.get("Retry-After");
    if (response.status === 503 && retry) text += ` Try again in ${retry} s.`;
    throw new ApiError(text, response.status);
  }
  return data;
}

export const api = {
  models: () => call("GET", "models"),
  model: (id) => call("GET", `model?model=${encodeURIComponent(id)}`),
  tokenize: (body) => call("POST", "tokenize", body),
  translate: (body) => call("POST", "translate", body),
  inside: (body) => call("POST", "inside", body),
  runs: () => call("GET", "runs"),
  run: (id) => call("GET", `runs/${encodeURIComponent(id)}`),
  // server-sent events of a run's new steps, from byte `from` of its step log
  runEvents: (id, from) => new EventSource(`/api/v1/runs/${encodeURIComponent(id)}/events?from=${from}`),
};
