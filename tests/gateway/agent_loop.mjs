// A 3-turn agent loop against the toolrun gateway, as a Node.js orchestrator
// would run it: only `node` and its built-in fetch, no npm packages.
//
//   GATEWAY_URL=http://127.0.0.1:8000 SUBMITTER_KEY=trk_... APPROVER_KEY=trk_... \
//   WORKSPACE=/srv/agents/demo node agent_loop.mjs
//
// Each turn submits the model's Anthropic message, reads the batch's events
// (answering an approval with the approver key when one is asked), fetches the
// reply and appends it to the conversation. Prints the conversation as JSON.

const { GATEWAY_URL, SUBMITTER_KEY, APPROVER_KEY, WORKSPACE } = process.env;

async function call(method, path, key, body) {
  const response = await fetch(GATEWAY_URL + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

// Server-Sent Events: blocks separated by a blank line, `field: value` lines.
async function* events(path, key) {
  const response = await fetch(GATEWAY_URL + path, {
    headers: { Authorization: `Bearer ${key}`, Accept: "text/event-stream" },
  });
  if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true }).replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = {};
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const at = line.indexOf(":");
        event[line.slice(0, at)] = line.slice(at + 1).replace(/^ /, "");
      }
      if (event.event) yield event;
    }
  }
}

async function runTurn(assistant, turn) {
  const submitted = await call("POST", "/v1/batches", SUBMITTER_KEY, {
    message: assistant, mode: "default", workspace: WORKSPACE,
  });
  const seen = { turn, batch_id: submitted.batch_id, results: [], notices: [], approvedBy: [] };
  for await (const event of events(`/v1/batches/${submitted.batch_id}/events`, SUBMITTER_KEY)) {
    if (event.event === "end") break;
    const data = JSON.parse(event.data);
    if (event.event === "notice") {
      seen.notices.push(data.call_id);
      const answer = await call(
        "POST", `/v1/batches/${submitted.batch_id}/calls/${data.call_id}/approve`, APPROVER_KEY, {},
      );
      seen.approvedBy.push(answer.by);
    } else {
      seen.results.push({ call_id: data.call_id, status: data.status });
    }
  }
  const reply = await call("GET", `/v1/batches/${submitted.batch_id}/reply`, SUBMITTER_KEY);
  return { seen, reply };
}

function toolUse(id, name, input) {
  return { type: "tool_use", id, name, input };
}

// What the model says in each turn; a real loop would call the Messages API here.
const turns = [
  [toolUse("toolu_1", "read_file", { path: "README.md" })],
  [toolUse("toolu_2", "write_file", { path: "NOTES.md", content: "seen by node\n" })],
  [toolUse("toolu_3", "read_file", { path: "NOTES.md" }), toolUse("toolu_4", "list_dir", { path: "." })],
];

const conversation = [{ role: "user", content: "Take notes on this workspace." }];
const log = [];
for (const [index, content] of turns.entries()) {
  const assistant = { role: "assistant", content: [{ type: "text", text: `turn ${index + 1}` }, ...content] };
  conversation.push(assistant);
  const { seen, reply } = await runTurn(assistant, index + 1);
  conversation.push(reply);
  log.push(seen);
}
console.log(JSON.stringify({ turns: log, conversation }));
