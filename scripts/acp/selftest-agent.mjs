// A tiny ACP agent on stdio, made with the same SDK, to test client.mjs without dsh
// (selftest.sh runs it). Sessions are numbered s1, s2, ...; session/load knows any session
// this process made and replays its history. session/prompt, by the prompt's text:
//   "misbehave": writes a garbage line, a response to an id nobody sent and two invalid
//                session/updates straight to stdout, sends a session/request_permission
//                without options, says what came back ("error -32602") in an
//                agent_message_chunk, then ends the turn
//   "bad stop": answers at once with a stopReason that ACP does not have
//   anything else: an agent_message_chunk "hi", a tool_call, a session/request_permission
//                (options of the four kinds), a tool_call_update (completed, or failed when
//                rejected or cancelled), then end_turn, or cancelled after session/cancel
// Errors: -32002 for an unknown session, -32602 for an unknown mode.
import { createRequire } from "node:module";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const modulesDir = process.env.DSH_ACP_NODE_MODULES;
const sdkMain = createRequire(join(modulesDir, "index.js")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkMain).href);

const sessions = new Map(); // id -> {mode, cancelled, history}
let next = 1;

function session(id) {
  const s = sessions.get(id);
  if (!s) throw acp.RequestError.sessionNotFound(id);
  return s;
}

const modes = (current) => ({
  currentModeId: current,
  availableModes: [
    { id: "default", name: "Default" },
    { id: "read-only", name: "Read only" },
  ],
});

const app = acp
  .agent({ name: "selftest-agent" })
  .onRequest(acp.methods.agent.initialize, async () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: true },
    agentInfo: { name: "selftest-agent", version: "0" },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, async () => {
    const id = `s${next++}`;
    sessions.set(id, { mode: "default", cancelled: false, history: [] });
    return { sessionId: id, modes: modes("default") };
  })
  .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
    const s = session(params.sessionId);
    for (const update of s.history) {
      await client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update });
    }
    return { modes: modes(s.mode) };
  })
  .onRequest(acp.methods.agent.session.setMode, async ({ params }) => {
    const s = session(params.sessionId);
    if (!["default", "read-only"].includes(params.modeId)) {
      throw acp.RequestError.invalidParams({ modeId: params.modeId }, "unknown mode");
    }
    s.mode = params.modeId;
    return {};
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    const s = sessions.get(params.sessionId);
    if (s) s.cancelled = true;
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    const s = session(sessionId);
    s.cancelled = false;
    const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join("");
    s.history.push({ sessionUpdate: "user_message_chunk", content: { type: "text", text } });
    const update = async (u) => {
      s.history.push(u);
      await client.notify(acp.methods.client.session.update, { sessionId, update: u });
    };
    if (text === "bad stop") return { stopReason: "no_such_reason" };
    if (text === "misbehave") {
      process.stdout.write("this is not json\n");
      process.stdout.write('{"jsonrpc":"2.0","id":"nobody","result":{}}\n');
      process.stdout.write(
        JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "no_such_kind" } } }) + "\n",
      );
      process.stdout.write(
        JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "tool_call", toolCallId: "t0" } } }) + "\n",
      );
      // Options missing: the client's SDK answers -32602 without asking its handler.
      const refused = await client
        .request(acp.methods.client.session.requestPermission, {
          sessionId,
          toolCall: { toolCallId: "t0" },
        })
        .then(() => "answered", (err) => `error ${err.code}`);
      await update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: refused } });
      return { stopReason: "end_turn" };
    }
    await update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "hi" } });
    await update({
      sessionUpdate: "tool_call",
      toolCallId: "t1",
      title: "Write a file",
      kind: "edit",
      status: "pending",
    });
    const answer = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall: { toolCallId: "t1", title: "Write a file", kind: "edit", status: "pending" },
      options: [
        { optionId: "o-allow-once", name: "Allow once", kind: "allow_once" },
        { optionId: "o-allow-always", name: "Allow always", kind: "allow_always" },
        { optionId: "o-reject-once", name: "Reject", kind: "reject_once" },
        { optionId: "o-reject-always", name: "Reject always", kind: "reject_always" },
      ],
    });
    const allowed =
      answer.outcome.outcome === "selected" && answer.outcome.optionId.startsWith("o-allow");
    await update({
      sessionUpdate: "tool_call_update",
      toolCallId: "t1",
      status: allowed ? "completed" : "failed",
    });
    return { stopReason: s.cancelled ? "cancelled" : "end_turn" };
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
await connection.closed;
process.exit(0);
