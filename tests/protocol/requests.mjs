// The request bodies the pinned `@ag-ui/client` sends, kept as fixtures for the server's tests
// (fixtures/ui/agui-client/*.json), so the server is tested against what the real client posts.
//   node requests.mjs <dir>           check that the fixtures match what the client sends now
//   node requests.mjs <dir> --write   write them
import { readFile, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";

function requests() {
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
  // The run after one that paused for approval of call_time and call_read (the calls of
  // fixtures/wire/loop/turn-1-tool-calls.sse): read approved, time refused.
  const resume = [
    { interruptId: "call_read", status: "resolved", payload: { approved: true } },
    { interruptId: "call_time", status: "cancelled" },
  ];
  return {
    "run.json": agent.prepareRunAgentInput({ runId: "r-client" }),
    "resume.json": agent.prepareRunAgentInput({ runId: "r-client-resume", resume }),
  };
}

const [dir, mode] = process.argv.slice(2);
if (!dir) {
  console.error("usage: node requests.mjs <dir> [--write]");
  process.exit(2);
}
let stale = 0;
for (const [name, body] of Object.entries(requests())) {
  const file = path.join(dir, name);
  const text = `${JSON.stringify(body, null, 2)}\n`;
  if (mode === "--write") {
    await mkdir(dir, { recursive: true });
    await writeFile(file, text);
    continue;
  }
  const kept = await readFile(file, "utf8").catch(() => "");
  if (kept !== text) {
    console.log(`requests: ${file} is not what @ag-ui/client sends now; run: node tests/protocol/requests.mjs ${dir} --write`);
    stale++;
  }
}
if (stale > 0) process.exit(1);
if (mode === "--write") console.log(`requests: wrote the @ag-ui/client request fixtures to ${dir}`);
else console.log(`requests: ok (the @ag-ui/client request fixtures in ${dir} are current)`);
