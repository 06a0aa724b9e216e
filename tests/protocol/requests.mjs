// The request bodies the pinned clients send, kept as fixtures for the server's tests, so the
// server is tested against what the real clients post:
//   fixtures/ui/agui-client/*.json    what `@ag-ui/client` sends
//   fixtures/ui/ai-sdk-client/*.json  what ai 6's chat (`useChat`) sends, built by the real client
//                                     from a stream the server's tests recorded (an approval), or
//                                     from replies of the server's shape (an edit, a retry, a
//                                     regenerate of an answered message, the last message alone)
//   node requests.mjs <fixtures/ui> <ui-streams>           check that the fixtures are current
//   node requests.mjs <fixtures/ui> <ui-streams> --write   write them
import { readFile, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { AbstractChat as AbstractChatV5, DefaultChatTransport as DefaultChatTransportV5 } from "ai-v5.0.0";

function aguiRequests() {
  const agent = new HttpAgent({ url: "http://127.0.0.1:1/api/v1/agui", threadId: "t-client" });
  agent.messages = [
    { id: "u1", role: "user", content: "What time is it?" },
    {
      id: "a1",
      role: "assistant",
      content: "",
      toolCalls: [{ id: "call_1", type: "function", function: { name: "core__get_current_time", arguments: "{}" } }],
    },
    { id: "t1", role: "tool", toolCallId: "call_1", content: '{"iso8601":"2026-11-23T10:00:00Z"}' },
    { id: "r1", role: "reasoning", content: "the user wants the time again" },
    { id: "x1", role: "activity", activityType: "progress", content: { done: 1 } },
    { id: "u2", role: "user", content: "And now?" },
  ];
  const run = agent.prepareRunAgentInput({ runId: "r-client" });
  // The run after one that paused for approval of call_time and call_read (the calls of
  // fixtures/wire/loop/turn-1-tool-calls.sse): read approved, time refused. The client's
  // messages end with the paused run's calls, as its events left them (a user message last
  // would be one typed instead of answering, which the server takes as the run's turn).
  agent.messages = [
    { id: "u1", role: "user", content: "What do my notes say?" },
    {
      id: "r-paused-m1",
      role: "assistant",
      content: "Let me look.",
      toolCalls: [
        { id: "call_time", type: "function", function: { name: "core__get_current_time", arguments: "{}" } },
        { id: "call_read", type: "function", function: { name: "core__workspace_read", arguments: '{"path":"notes.txt"}' } },
      ],
    },
  ];
  const resume = [
    { interruptId: "call_read", status: "resolved", payload: { approved: true } },
    { interruptId: "call_time", status: "cancelled" },
  ];
  return {
    "agui-client/run.json": run,
    "agui-client/resume.json": agent.prepareRunAgentInput({ runId: "r-client-resume", resume }),
  };
}

// The chat state a framework binding keeps (as @ai-sdk/react's does), in plain JavaScript.
class State {
  status = "ready";
  error = undefined;
  messages = [];
  pushMessage = (message) => (this.messages = [...this.messages, message]);
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (at, message) => (this.messages = this.messages.map((m, k) => (k === at ? message : m)));
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

class ChatV5 extends AbstractChatV5 {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

// What ai 6 sends once the user answered the approval requests of the paused run the server's
// tests recorded (approval.v6.aisdk.sse): read approved, time denied, sent automatically by
// `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses`.
async function aiSdkRequests(streams) {
  const file = path.join(streams, "approval.v6.aisdk.sse");
  const recorded = await readFile(file, "utf8").catch(() => {
    console.error(`requests: ${file} is missing; run the server's tests first (cargo test -p cogni-tests)`);
    process.exit(1);
  });
  // The server names the message after its run (and so the clock): a fixed name keeps the
  // fixture the same from run to run. The server does not read message ids.
  const paused = recorded.replace(/"messageId":"[^"]*"/, '"messageId":"a-paused"');
  // The answers' reply settles both calls, so the chat has nothing more to send.
  const settled = [
    { type: "start" },
    { type: "tool-output-denied", toolCallId: "call_time" },
    { type: "tool-output-available", toolCallId: "call_read", output: {} },
    { type: "finish" },
  ];
  const replies = [paused, `${settled.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`];
  const bodies = [];
  const fetch = async (_url, init) => {
    bodies.push(JSON.parse(init.body));
    const body = replies.shift();
    if (body === undefined) throw new Error("the chat sent more requests than expected");
    return new Response(body, { headers: { "content-type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" } });
  };
  let ids = 0;
  const chat = new Chat({
    id: "chat-approve",
    generateId: () => `u-${++ids}`,
    transport: new DefaultChatTransport({ api: "http://127.0.0.1:1/api/v1/chat", fetch }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: "What do my notes say?" });
  if (chat.error) throw chat.error;
  await chat.addToolApprovalResponse({ id: "call_read", approved: true });
  await chat.addToolApprovalResponse({ id: "call_time", approved: false, reason: "not now" });
  for (let wait = 0; bodies.length < 2 && wait < 100; wait++) await new Promise((r) => setTimeout(r, 10));
  if (bodies.length < 2) throw new Error("the chat did not send the answers");
  return { "ai-sdk-client/approval-response.json": bodies[1] };
}

// A reply of the server's shape: one text answer (the assistant message named `id`).
function answer(id, text) {
  const chunks = [
    { type: "start", messageId: id },
    { type: "start-step" },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: text },
    { type: "text-end", id: "t" },
    { type: "finish-step" },
    { type: "finish" },
  ];
  const body = `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`;
  return new Response(body, { headers: { "content-type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" } });
}

// A chat whose requests are answered by `replies` in turn, and the bodies it sent (ai 6's, or
// with `v5` ai 5.0.0's).
function recordingChat(id, replies, v5 = false) {
  const bodies = [];
  const fetch = async (_url, init) => {
    bodies.push(JSON.parse(init.body));
    const reply = replies.shift();
    if (reply === undefined) throw new Error("the chat sent more requests than expected");
    return reply;
  };
  let ids = 0;
  const [ChatClass, Transport] = v5 ? [ChatV5, DefaultChatTransportV5] : [Chat, DefaultChatTransport];
  const chat = new ChatClass({
    id,
    generateId: () => `u-${++ids}`,
    transport: new Transport({ api: "http://127.0.0.1:1/api/v1/chat", fetch }),
  });
  return { chat, bodies };
}

// What the stock Regenerate button sends for a message the server answered: `regenerate()` of
// the last answer (the history cut before it, no `messageId`), then `regenerate({ messageId })`
// of an earlier answer (the history cut before it, naming the assistant message it dropped).
// ai 5.0.0 must send the same bodies as ai 6: the server's tests post ai 6's.
async function aiSdkRegenerateRequests() {
  const sent = [];
  for (const v5 of [false, true]) {
    const replies = [answer("a-1", "One."), answer("a-2", "Two."), answer("a-3", "Two, again."), answer("a-4", "One, again.")];
    const regenerate = recordingChat("chat-regenerate", replies, v5);
    await regenerate.chat.sendMessage({ text: "first" });
    await regenerate.chat.sendMessage({ text: "second" });
    await regenerate.chat.regenerate();
    if (regenerate.chat.error) throw regenerate.chat.error;
    await regenerate.chat.regenerate({ messageId: "a-1" });
    if (regenerate.chat.error) throw regenerate.chat.error;
    sent.push(regenerate.bodies.slice(2));
  }
  if (JSON.stringify(sent[0]) !== JSON.stringify(sent[1])) {
    throw new Error("ai 5.0.0 and ai 6 send different regenerate requests; the fixtures hold ai 6's only");
  }
  return {
    "ai-sdk-client/regenerate-answered.json": sent[0][0],
    "ai-sdk-client/regenerate-earlier-answer.json": sent[0][1],
  };
}

// What ai 6 sends to edit a message (`sendMessage({text, messageId})`: the history cut at the
// edited user message, which is last) and to retry one a 503 refused (`regenerate()`: the history
// ending with the user's message, `trigger: "regenerate-message"`).
async function aiSdkEditAndRetryRequests() {
  const edit = recordingChat("chat-edit", [answer("a-1", "One."), answer("a-2", "Two."), answer("a-3", "Two, again.")]);
  await edit.chat.sendMessage({ text: "first" });
  await edit.chat.sendMessage({ text: "second" });
  const second = edit.chat.messages.at(-2);
  if (edit.chat.error || second.role !== "user") throw edit.chat.error ?? new Error("no second message");
  await edit.chat.sendMessage({ text: "second, edited", messageId: second.id });
  if (edit.chat.error) throw edit.chat.error;

  const refused = new Response(
    JSON.stringify({ error: { code: "too_many_runs", message: "nothing ran: try again" } }),
    { status: 503, headers: { "content-type": "application/json" } },
  );
  const retry = recordingChat("chat-retry", [answer("a-1", "One."), refused, answer("a-2", "Two.")]);
  await retry.chat.sendMessage({ text: "first" });
  await retry.chat.sendMessage({ text: "second" });
  if (!retry.chat.error) throw new Error("the 503 was not an error to the chat");
  await retry.chat.regenerate();
  if (retry.chat.error) throw retry.chat.error;
  return {
    "ai-sdk-client/edit.json": edit.bodies[2],
    "ai-sdk-client/regenerate-after-503.json": retry.bodies[2],
  };
}

// What ai 6 sends with the transport the AI SDK's docs suggest for a server that keeps its
// threads ("Sending only the last message"): `{ message, id }`, the last message alone, for a
// new chat's first message and for the next one.
async function aiSdkLastMessageOnlyRequests() {
  const bodies = [];
  const replies = [answer("a-1", "One."), answer("a-2", "Two.")];
  const fetch = async (_url, init) => {
    bodies.push(JSON.parse(init.body));
    return replies.shift();
  };
  let ids = 0;
  const chat = new Chat({
    id: "chat-last-only",
    generateId: () => `u-${++ids}`,
    transport: new DefaultChatTransport({
      api: "http://127.0.0.1:1/api/v1/chat",
      fetch,
      prepareSendMessagesRequest({ messages, id }) {
        return { body: { message: messages[messages.length - 1], id } };
      },
    }),
  });
  await chat.sendMessage({ text: "first" });
  await chat.sendMessage({ text: "second" });
  if (chat.error) throw chat.error;
  return {
    "ai-sdk-client/last-message-only-first.json": bodies[0],
    "ai-sdk-client/last-message-only.json": bodies[1],
  };
}

const [dir, streams, mode] = process.argv.slice(2);
if (!dir || !streams) {
  console.error("usage: node requests.mjs <fixtures/ui> <ui-streams> [--write]");
  process.exit(2);
}
let stale = 0;
const all = {
  ...aguiRequests(),
  ...(await aiSdkRequests(streams)),
  ...(await aiSdkEditAndRetryRequests()),
  ...(await aiSdkRegenerateRequests()),
  ...(await aiSdkLastMessageOnlyRequests()),
};
for (const [name, body] of Object.entries(all)) {
  const file = path.join(dir, name);
  const text = `${JSON.stringify(body, null, 2)}\n`;
  if (mode === "--write") {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, text);
    continue;
  }
  const kept = await readFile(file, "utf8").catch(() => "");
  if (kept !== text) {
    console.log(`requests: ${file} is not what the client sends now; run: node tests/protocol/requests.mjs ${dir} ${streams} --write`);
    stale++;
  }
}
if (stale > 0) process.exit(1);
if (mode === "--write") console.log(`requests: wrote the client request fixtures to ${dir}`);
else console.log(`requests: ok (the client request fixtures in ${dir} are current)`);
