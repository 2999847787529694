// A scenario driver for ACP agents: it plays the client side with the official TypeScript
// SDK (@agentclientprotocol/sdk, installed by install.sh beside this file) and writes what
// happened as a transcript, one JSON object a line, on stdout.
//
// Usage: node client.mjs SCENARIO.json -- AGENT ARGV...
// Environment: DSH_ACP_NODE_MODULES, the node_modules holding the SDK (install.sh exports it).
//
// The agent is spawned with our environment; its stderr goes to our stderr; the SDK talks to
// it over its stdin/stdout (newline-delimited JSON-RPC). The driver reads the agent's stdout
// itself and hands a copy of every chunk to the SDK, so the transcript is in wire order and
// shows what the agent sent as it sent it.
//
// Scenario: {"steps": [STEP...], "tee": false, "tee_sent": false}. Every step may have
// "timeout_ms" (default 60000); a request step may have "params" (sent instead of the params
// it would build). Steps:
//   {"op":"initialize"}      initialize, protocolVersion = the SDK's PROTOCOL_VERSION, no fs or
//                            terminal capabilities, clientInfo {name:"dsh-acp-test",version:"1"}
//   {"op":"authenticate","methodId":"x"}
//   {"op":"new_session","cwd":"/abs","mcpServers":[]}   its sessionId becomes the current one
//   {"op":"load_session","sessionId":"s","cwd":"/abs","mcpServers":[]}   "s" becomes current
//   {"op":"prompt","text":"hi"|"content":[ContentBlock...],"sessionId"?:"s",
//    "answers":["allow_once"|"allow_always"|"reject_once"|"cancelled"|"wait_for_cancel",...],
//    "cancel_on":null|"permission"|<a sessionUpdate kind, e.g. "tool_call">}
//       Each session/request_permission that arrives while this step runs takes the next
//       answer: the option of that kind, or cancelled ("wait_for_cancel": cancelled, sent
//       only after this step has sent session/cancel). With no option of the kind, or no
//       answer left, it is answered cancelled and a driver_note says why. cancel_on sends
//       session/cancel once, at the first update of that kind (or first permission request).
//       "until": "text" (with "max_tries", default 100, and "pause_ms", default 100) sends
//       the prompt again until an agent_message_chunk of it contains the text.
//   {"op":"set_mode","modeId":"read-only","sessionId"?:"s"}
//   {"op":"raw","line":"any text","wait_response":false}
//       writes the line and "\n" to the agent's stdin as is. A raw request is told apart from
//       the SDK's by its id: give it a string id (the SDK numbers its own 0, 1, 2, ...).
//       wait_response: wait for the agent's response to that id.
//   {"op":"sleep_until_update","sessionUpdate":"agent_message_chunk"}  waits for an update
//       of that kind not yet claimed by an earlier sleep_until_update
//   {"op":"sleep","ms":100}
//   {"op":"close"}           ends the agent's stdin and waits for it to exit (done at the end
//                            if the last step is not a close)
//
// Transcript events (stdout, in the order things happened on the wire):
//   {"event":"response","op":OP,"result":R}            the agent's result (as on the wire)
//   {"event":"error","op":OP,"error":{code,message,data}}   the agent's error response
//       OP is the step's op, or "raw" (then "id" too) for a response to a raw request
//   {"event":"update","params":P}                      every session/update, whatever step
//   {"event":"permission","params":P,"answer":A}       every session/request_permission; A is
//       the result sent ({"outcome":{...}}), null when the SDK rejected the params itself
//       (-32602); "deferred":"wait_for_cancel" when it waits for our session/cancel
//   {"event":"cancel_sent","sessionId":S}              we sent session/cancel
//   {"event":"request","method":M,"id":I,"params":P}   another request from the agent (the SDK
//                                                      answers it -32601: no capabilities)
//   {"event":"notification","method":M,"params":P}     another notification from the agent
//   {"event":"schema_error","method":M,"issues":[...]} what came before it fails the SDK's own
//       schema (stable ACP v1): a session/update the SDK then drops, a permission request it
//       answers -32602, or a response result (M is then the request's method)
//   {"event":"bad_line","line":L}                      agent stdout line that is not JSON-RPC
//       (the SDK answers it with a -32700/-32600 error, id null)
//   {"event":"stray_response","message":M}             a response to an id nobody sent
//   {"event":"bad_response","op":OP,"message":M}       a malformed response to our request
//   {"event":"wire","line":L}                          every agent stdout line ("tee": true)
//   {"event":"sent","line":L}                          every line we wrote ("tee_sent": true)
//   {"event":"driver_note","message":M}
//   {"event":"timeout","op":OP}                        a step timed out (then exit 1)
//   {"event":"exit","code":N,"signal":S}               the agent exited
//   {"event":"driver_error","message":M}               last line of a failed run (exit 1)
// Exit status: 0 when every step ran (error responses included), 1 on a driver failure.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

// Nothing but the transcript goes to stdout.
console.log = console.info = console.debug = console.error;

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

class DriverError extends Error {}

function fail(message) {
  throw new DriverError(message);
}

// --- arguments and the SDK ------------------------------------------------------------------

const argv = process.argv.slice(2);
const dashes = argv.indexOf("--");
if (argv.length < 3 || dashes !== 1) {
  console.error("usage: node client.mjs SCENARIO.json -- AGENT ARGV...");
  process.exit(2);
}
const scenarioPath = argv[0];
const agentArgv = argv.slice(2);

const modulesDir = process.env.DSH_ACP_NODE_MODULES;
if (!modulesDir) {
  console.error("client.mjs: DSH_ACP_NODE_MODULES is not set (eval \"$(scripts/acp/install.sh)\")");
  process.exit(1);
}
const sdkMain = createRequire(join(modulesDir, "index.js")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkMain).href);
// The schemas the stable entry point validates with (not an exported path, so by file).
const zod = await import(pathToFileURL(join(dirname(sdkMain), "../schema/zod.gen.js")).href);

const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
if (!scenario || !Array.isArray(scenario.steps)) {
  console.error(`client.mjs: ${scenarioPath}: expected {"steps": [...]}`);
  process.exit(1);
}
const tee = scenario.tee === true;
const teeSent = scenario.tee_sent === true;
const DEFAULT_TIMEOUT_MS = 60_000;

const opOfMethod = {
  initialize: "initialize",
  authenticate: "authenticate",
  "session/new": "new_session",
  "session/load": "load_session",
  "session/prompt": "prompt",
  "session/set_mode": "set_mode",
};
const responseSchemaOfMethod = {
  initialize: zod.zInitializeResponse,
  authenticate: zod.zAuthenticateResponse,
  "session/new": zod.zNewSessionResponse,
  "session/load": zod.zLoadSessionResponse,
  "session/prompt": zod.zPromptResponse,
  "session/set_mode": zod.zSetSessionModeResponse,
};

// Zod's issues, made short: {path, code, message}. In a union (ACP's tagged unions: session
// updates, content blocks, ...) only the branches whose tag matched are followed; when none
// did, the union's own issue stands (e.g. an unknown sessionUpdate kind).
function shortIssues(issues, base = []) {
  const out = [];
  for (const issue of issues) {
    const path = [...base, ...issue.path];
    if (issue.code === "invalid_union" && Array.isArray(issue.errors)) {
      const tagMiss = (branch) =>
        branch.some((i) => i.code === "invalid_value" && i.path.length === 1);
      const matched = issue.errors.filter((branch) => !tagMiss(branch));
      if (matched.length >= 1 && matched.length < issue.errors.length) {
        for (const branch of matched) out.push(...shortIssues(branch, path));
        continue;
      }
    }
    out.push({ path, code: issue.code, message: issue.message });
  }
  return out;
}

function checkSchema(schema, value, method) {
  if (!schema) return true;
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    emit({ event: "schema_error", method, issues: shortIssues(parsed.error.issues) });
  }
  return parsed.success;
}

// --- the agent process ----------------------------------------------------------------------

const child = spawn(agentArgv[0], agentArgv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
let spawnError = null;
const childSpawned = new Promise((resolve) => {
  child.once("spawn", resolve);
  child.once("error", resolve);
});
const childExited = new Promise((resolve) => {
  child.on("error", (err) => {
    spawnError = err;
    resolve(null);
  });
  child.on("exit", (code, signal) => resolve({ code, signal }));
});
const stdoutClosed = new Promise((resolve) => child.stdout.on("close", resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// The exit is recorded once the agent's stdout is read to its end, so that everything the
// agent wrote comes before it; if a process the agent left behind holds its stdout open, a
// second after the agent exited.
let childDone = false;
const childClosed = childExited.then(async (status) => {
  if (status) {
    await Promise.race([stdoutClosed, sleep(1000)]);
    emit({ event: "exit", code: status.code, signal: status.signal });
  }
  childDone = true;
});
child.stdin.on("error", () => {}); // EPIPE after the agent died: a write then fails

function writeToAgent(text) {
  return new Promise((resolve, reject) => {
    if (child.stdin.destroyed || child.stdin.writableEnded) {
      reject(new Error("the agent's stdin is closed"));
      return;
    }
    child.stdin.write(text, (err) => (err ? reject(err) : resolve()));
  });
}

// --- driver state ---------------------------------------------------------------------------

let currentSession = null;
let step = null; // the running step's state (see runStep)
const sdkRequests = new Map(); // JSON id -> {method, answered}
const rawRequests = new Map(); // JSON id -> {answered, waiters}
const permissionDecisions = new Map(); // JSON id of the agent's request -> decision
const updateLog = []; // every session/update's params, in order
let updateCursor = 0; // for sleep_until_update
let updateWaiters = [];

const key = (id) => JSON.stringify(id);

// Lines we write: the SDK's (through its stream) and raw ones. The SDK's requests are noted so
// the agent's responses to them can be recorded in wire order.
function noteOutgoing(text, fromSdk) {
  for (const line of text.split("\n")) {
    if (!line) continue;
    if (teeSent) emit({ event: "sent", line });
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      continue;
    }
    if (!msg || typeof msg !== "object" || Array.isArray(msg)) continue;
    if (typeof msg.method === "string" && "id" in msg) {
      if (fromSdk) {
        const entry = { method: msg.method, answered: false };
        sdkRequests.set(key(msg.id), entry);
        if (step && step.awaiting && !step.request && msg.method === step.method) {
          step.request = entry;
        }
      } else {
        rawRequests.set(key(msg.id), { answered: false, waiters: [] });
      }
    }
  }
}

// --- the agent's output: tee, record, decide ------------------------------------------------

function sendCancel(sessionId) {
  if (!step || step.cancelSent) return;
  step.cancelSent = true;
  emit({ event: "cancel_sent", sessionId });
  step.cancelDone = connection.agent
    .notify(acp.methods.agent.session.cancel, { sessionId })
    .catch((err) => console.error(`client.mjs: sending session/cancel failed: ${err}`));
  for (const resolve of step.cancelWaiters.splice(0)) resolve();
}

function decidePermission(params) {
  const answers = step && step.op === "prompt" ? step.answers : [];
  if (answers.length === 0) {
    emit({ event: "driver_note", message: "no answer left for a permission request" });
    return { answer: { outcome: { outcome: "cancelled" } } };
  }
  const kind = answers.shift();
  if (kind === "cancelled") return { answer: { outcome: { outcome: "cancelled" } } };
  if (kind === "wait_for_cancel") {
    return { answer: { outcome: { outcome: "cancelled" } }, deferred: "wait_for_cancel" };
  }
  const option = (params.options || []).find((o) => o && o.kind === kind);
  if (!option) {
    emit({ event: "driver_note", message: `no option of kind ${kind}` });
    return { answer: { outcome: { outcome: "cancelled" } } };
  }
  return { answer: { outcome: { outcome: "selected", optionId: option.optionId } } };
}

function onAgentLine(line) {
  if (tee) emit({ event: "wire", line });
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    emit({ event: "bad_line", line });
    return;
  }
  if (!msg || typeof msg !== "object" || Array.isArray(msg) || msg.jsonrpc !== "2.0") {
    emit({ event: "bad_line", line });
    return;
  }
  const isCall = typeof msg.method === "string";
  if (isCall && !("id" in msg)) {
    if (msg.method === "session/update") {
      updateLog.push(msg.params);
      emit({ event: "update", params: msg.params });
      checkSchema(zod.zSessionNotification, msg.params, msg.method);
      const kind = msg.params && msg.params.update && msg.params.update.sessionUpdate;
      if (step && step.op === "prompt" && step.cancelOn && step.cancelOn === kind) {
        sendCancel(step.sessionId);
      }
      for (const w of updateWaiters.splice(0)) w();
    } else {
      emit({ event: "notification", method: msg.method, params: msg.params });
    }
    return;
  }
  if (isCall) {
    if (msg.method === "session/request_permission") {
      const ok = zod.zRequestPermissionRequest.safeParse(msg.params ?? {});
      if (!ok.success) {
        emit({ event: "permission", params: msg.params, answer: null });
        emit({ event: "schema_error", method: msg.method, issues: shortIssues(ok.error.issues) });
        return;
      }
      const decision = decidePermission(msg.params);
      permissionDecisions.set(key(msg.id), decision);
      const event = { event: "permission", params: msg.params, answer: decision.answer };
      if (decision.deferred) event.deferred = decision.deferred;
      emit(event);
      if (step && step.op === "prompt" && step.cancelOn === "permission") {
        sendCancel(step.sessionId);
      }
    } else {
      emit({ event: "request", method: msg.method, id: msg.id, params: msg.params });
    }
    return;
  }
  // A response.
  const raw = "id" in msg ? rawRequests.get(key(msg.id)) : undefined;
  const sdk = "id" in msg ? sdkRequests.get(key(msg.id)) : undefined;
  if (raw && !raw.answered) {
    raw.answered = true;
    if ("error" in msg) emit({ event: "error", op: "raw", id: msg.id, error: msg.error });
    else emit({ event: "response", op: "raw", id: msg.id, result: msg.result });
    for (const w of raw.waiters.splice(0)) w();
    return;
  }
  if (!sdk || sdk.answered) {
    emit({ event: "stray_response", message: msg });
    return;
  }
  sdk.answered = true;
  const op = opOfMethod[sdk.method] ?? sdk.method;
  const hasResult = Object.hasOwn(msg, "result");
  const hasError = Object.hasOwn(msg, "error");
  const e = msg.error;
  const goodError =
    e && typeof e === "object" && Number.isInteger(e.code) && typeof e.message === "string";
  if (hasResult === hasError || (hasError && !goodError)) {
    emit({ event: "bad_response", op, message: msg });
  } else if (hasError) {
    emit({ event: "error", op, error: msg.error });
  } else {
    emit({ event: "response", op, result: msg.result });
    checkSchema(responseSchemaOfMethod[sdk.method], msg.result, sdk.method);
  }
}

// The SDK's input: every chunk of the agent's stdout, after the tee has seen its lines.
let sdkInput;
const sdkReadable = new ReadableStream({
  start(controller) {
    sdkInput = controller;
  },
});
let pending = Buffer.alloc(0);
child.stdout.on("data", (chunk) => {
  let buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
  let nl;
  while ((nl = buf.indexOf(0x0a)) !== -1) {
    let line = buf.subarray(0, nl);
    if (line.length && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
    onAgentLine(line.toString("utf8"));
    buf = buf.subarray(nl + 1);
  }
  pending = Buffer.from(buf);
  try {
    sdkInput.enqueue(new Uint8Array(chunk));
  } catch {
    // The SDK closed the connection (a write to the agent failed); the tee goes on.
  }
});
child.stdout.on("end", () => {
  if (pending.length) onAgentLine(pending.toString("utf8"));
  pending = Buffer.alloc(0);
  try {
    sdkInput.close();
  } catch {
    // already closed by the SDK
  }
});

const sdkWritable = new WritableStream({
  async write(chunk) {
    const text = Buffer.from(chunk).toString("utf8");
    noteOutgoing(text, true);
    await writeToAgent(text);
  },
});

// --- the SDK client -------------------------------------------------------------------------

const app = acp
  .client({ name: "dsh-acp-test" })
  .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
    const decision = permissionDecisions.get(key(ctx.requestId));
    permissionDecisions.delete(key(ctx.requestId));
    if (!decision) {
      emit({ event: "driver_note", message: "a permission request the driver did not see" });
      return { outcome: { outcome: "cancelled" } };
    }
    if (decision.deferred === "wait_for_cancel") {
      const s = step;
      if (s && !s.cancelSent) await new Promise((resolve) => s.cancelWaiters.push(resolve));
      if (s && s.cancelDone) await s.cancelDone;
    }
    return decision.answer;
  })
  .onNotification(acp.methods.client.session.update, () => {
    // Recorded from the wire (onAgentLine); the SDK validates it before calling this.
  });
const connection = app.connect(acp.ndJsonStream(sdkWritable, sdkReadable));

// --- steps ----------------------------------------------------------------------------------

function withTimeout(promise, ms, op) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new DriverError(`${op}: timed out after ${ms} ms`), { timeoutOp: op })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const requestOps = {
  initialize: (s) => [
    "initialize",
    {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "dsh-acp-test", version: "1" },
    },
  ],
  authenticate: (s) => ["authenticate", { methodId: s.methodId }],
  new_session: (s) => ["session/new", { cwd: s.cwd, mcpServers: s.mcpServers ?? [] }],
  load_session: (s) => [
    "session/load",
    { sessionId: s.sessionId, cwd: s.cwd, mcpServers: s.mcpServers ?? [] },
  ],
  prompt: (s) => [
    "session/prompt",
    {
      sessionId: s.sessionId ?? currentSession,
      prompt: s.content ?? [{ type: "text", text: s.text ?? "" }],
    },
  ],
  set_mode: (s) => [
    "session/set_mode",
    { sessionId: s.sessionId ?? currentSession, modeId: s.modeId },
  ],
};

async function runRequest(s, timeoutMs) {
  const [method, built] = requestOps[s.op](s);
  const params = s.params ?? built;
  step = {
    op: s.op,
    method,
    awaiting: true,
    request: null,
    sessionId: params && params.sessionId,
    answers: Array.isArray(s.answers) ? [...s.answers] : [],
    cancelOn: s.cancel_on ?? null,
    cancelSent: false,
    cancelDone: null,
    cancelWaiters: [],
  };
  if (s.op === "load_session") currentSession = params.sessionId;
  let result;
  let sdkError = null;
  try {
    result = await withTimeout(connection.agent.request(method, params), timeoutMs, s.op);
  } catch (err) {
    if (err instanceof DriverError) throw err;
    sdkError = err;
  }
  const answered = step.request && step.request.answered;
  if (!answered) {
    // No response came on the wire: the connection closed, or the request never went out.
    const why = childDone ? "the agent exited" : sdkError ? sdkError.message : "?";
    fail(`${s.op}: no response from the agent (${why})`);
  }
  if (s.op === "new_session" && !sdkError && result && typeof result.sessionId === "string") {
    currentSession = result.sessionId;
  }
  if (s.op === "prompt" && step.answers.length) {
    emit({ event: "driver_note", message: `${step.answers.length} answer(s) not used` });
  }
  step = null;
}

// The text of the agent_message_chunk updates logged from `from` on.
function saidSince(from) {
  let text = "";
  for (let i = from; i < updateLog.length; i++) {
    const u = updateLog[i];
    if (u && u.update && u.update.sessionUpdate === "agent_message_chunk") {
      text += (u.update.content && u.update.content.text) || "";
    }
  }
  return text;
}

async function runStep(s) {
  const timeoutMs = s.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  if (s.op === "prompt" && typeof s.until === "string") {
    // Polls: the prompt again (after pause_ms) until the agent's message says `until`, at
    // most max_tries times (a slash command that reports a state that comes, e.g. /mcp).
    const tries = s.max_tries ?? 100;
    for (let i = 0; i < tries; i++) {
      const from = updateLog.length;
      await runRequest(s, timeoutMs);
      if (saidSince(from).includes(s.until)) return;
      await new Promise((r) => setTimeout(r, s.pause_ms ?? 100));
    }
    fail(`prompt: the agent never said ${JSON.stringify(s.until)} in ${tries} tries`);
  }
  if (s.op in requestOps) return runRequest(s, timeoutMs);
  switch (s.op) {
    case "raw": {
      if (typeof s.line !== "string") fail("raw: no line");
      noteOutgoing(s.line + "\n", false);
      try {
        await writeToAgent(s.line + "\n");
      } catch (err) {
        fail(`raw: writing to the agent failed: ${err.message}`);
      }
      if (s.wait_response) {
        let id;
        try {
          id = JSON.parse(s.line).id;
        } catch {
          fail("raw: wait_response needs a JSON request line with an id");
        }
        const entry = rawRequests.get(key(id));
        if (!entry) fail("raw: wait_response needs a JSON request line with an id");
        if (!entry.answered) {
          const got = new Promise((resolve) => entry.waiters.push(resolve));
          await withTimeout(Promise.race([got, childClosed]), timeoutMs, "raw");
          if (!entry.answered) fail("raw: the agent exited without answering");
        }
      }
      return;
    }
    case "sleep_until_update": {
      const find = () => {
        for (let i = updateCursor; i < updateLog.length; i++) {
          const u = updateLog[i];
          if (u && u.update && u.update.sessionUpdate === s.sessionUpdate) {
            updateCursor = i + 1;
            return true;
          }
        }
        return false;
      };
      const wait = async () => {
        while (!find()) {
          if (childDone) fail("sleep_until_update: the agent exited first");
          await Promise.race([new Promise((r) => updateWaiters.push(r)), childClosed]);
        }
      };
      await withTimeout(wait(), timeoutMs, "sleep_until_update");
      return;
    }
    case "sleep":
      await new Promise((r) => setTimeout(r, s.ms ?? 0));
      return;
    case "close":
      return closeAgent(timeoutMs);
    default:
      fail(`unknown op ${JSON.stringify(s.op)}`);
  }
}

let closed = false;
async function closeAgent(timeoutMs) {
  closed = true;
  if (!child.stdin.writableEnded) child.stdin.end();
  await withTimeout(childClosed, timeoutMs, "close");
  if (spawnError) fail(`could not start the agent: ${spawnError.message}`);
}

async function killAgent() {
  if (childDone || spawnError) return;
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), 2000);
  await Promise.race([childClosed, sleep(5000)]);
  clearTimeout(t);
}

function finish(code) {
  process.stdout.write("", () => process.exit(code));
}

try {
  await childSpawned;
  for (const s of scenario.steps) {
    if (spawnError) fail(`could not start the agent: ${spawnError.message}`);
    await runStep(s);
  }
  if (!closed) await closeAgent(DEFAULT_TIMEOUT_MS);
  connection.close();
  finish(0);
} catch (err) {
  if (err && err.timeoutOp) emit({ event: "timeout", op: err.timeoutOp });
  const message = err instanceof DriverError ? err.message : String(err && err.stack ? err.stack : err);
  console.error(`client.mjs: ${message}`);
  await killAgent();
  emit({ event: "driver_error", message });
  finish(1);
}
