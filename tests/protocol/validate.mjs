#!/usr/bin/env node
// Validates recorded SSE response bodies of cogni's two UI protocols against the
// protocols' own published code:
//   *.agui.sse   AG-UI events      -> @ag-ui/core EventSchemas (zod), the @ag-ui/client
//                                     enforcement stage (unknown keys), the client's own SSE
//                                     parser, and @ag-ui/client verifyEvents (order)
//   *.aisdk.sse  AI SDK UI stream  -> ai parseJsonEventStream + uiMessageChunkSchema (strict
//                                     in the pinned version), readUIMessageStream (order), and
//                                     ai@5.0.0's chat transport unless the name has `.v6.`
//                                     (approvals are an ai 6 exchange)
//   <base>-resumed[-<what>].<ext>  -> a stream that continues <base>.<ext>'s assistant message
//                                     after the user answered its approval requests: checked
//                                     from that message, whose calls must all end settled
//                                     (but for a call it asks about itself, when it pauses again)
// plus a few cogni contract rules, tagged [cogni] in the output (see README.md).
//
// Usage: node validate.mjs <dir>
// Prints `ok <file>` or `FAIL <file>: <reason>` per file, then `N passed, M failed`.
// Exit code: 0 only if every file passed and at least one stream file was found.

import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";

import { EventSchemas } from "@ag-ui/core/schemas";
import { verifyEvents, enforceEvents, transformHttpEventStream } from "@ag-ui/client";
import {
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  UIMessageStreamError,
} from "ai";
// The oldest release of the protocol's v5 line: its chunk schemas are strict objects too, and
// know fewer chunks and fields than later releases. A stream must pass both.
import { DefaultChatTransport as DefaultChatTransportV5 } from "ai-v5.0.0";
import { asyncScheduler, from, of, lastValueFrom } from "rxjs";
import { observeOn, tap, toArray } from "rxjs/operators";

class Failure extends Error {}
const fail = (msg) => {
  throw new Failure(msg);
};

// ---------------------------------------------------------------------------------------
// SSE framing, strict: what our server must emit byte for byte.
//   frame := ("data: " <one line of JSON> | ":" comment) "\n" ... then a blank line
// Only "\n" line ends, exactly one `data: ` line per frame, no `event:`/`id:`/`retry:`,
// and the body ends with "\n\n" (a trailing partial frame is what a cut connection looks like).
// Returns [{ frame, data }] for data frames (comment-only frames are skipped).
function parseFramesStrict(bytes) {
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    fail("[framing] body is not valid UTF-8");
  }
  if (text.length === 0) fail("[framing] empty body");
  if (text.includes("\r")) fail("[framing] CR found; frames must use bare \\n line ends");
  if (!text.endsWith("\n\n")) {
    fail("[framing] body does not end with a blank line (last frame not terminated by \\n\\n)");
  }
  const blocks = text.slice(0, -2).split("\n\n");
  const out = [];
  blocks.forEach((block, frame) => {
    if (block === "") fail(`[framing] frame[${frame}]: empty frame (extra blank line)`);
    const lines = block.split("\n");
    const dataLines = lines.filter((l) => !l.startsWith(":"));
    if (dataLines.length === 0) return; // keep-alive comment, ignored by both clients
    if (dataLines.length > 1) {
      fail(`[framing] frame[${frame}]: ${dataLines.length} non-comment lines, expected one \`data: \` line`);
    }
    const line = dataLines[0];
    if (!line.startsWith("data: ")) {
      fail(`[framing] frame[${frame}]: line does not start with \`data: \`: ${JSON.stringify(line.slice(0, 60))}`);
    }
    out.push({ frame, data: line.slice("data: ".length) });
  });
  return out;
}

function parseJsonObject(data, label) {
  let v;
  try {
    v = JSON.parse(data);
  } catch (e) {
    fail(`${label}: data is not JSON (${e.message})`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(`${label}: data is not a JSON object`);
  if (typeof v.type !== "string") fail(`${label}: no string \`type\``);
  return v;
}

const fmtPath = (p) => (p && p.length ? p.join(".") : "(root)");
const fmtIssues = (issues) =>
  issues
    .slice(0, 3)
    .map((i) => `${fmtPath(i.path)}: ${i.message}`)
    .join("; ");

// ---------------------------------------------------------------------------------------
// AG-UI
async function validateAgui(bytes) {
  const frames = parseFramesStrict(bytes);
  if (frames.length === 0) fail("[framing] no events");
  const raw = frames.map((f, i) => {
    if (f.data === "[DONE]") fail(`event[${i}]: [framing] AG-UI streams carry no \`data: [DONE]\``);
    return parseJsonObject(f.data, `event[${i}]`);
  });

  // The client's own SSE parser (the one HttpAgent uses) must see the same events.
  const clientEvents = await lastValueFrom(
    transformHttpEventStream(
      from([
        { type: "headers", status: 200, headers: new Headers({ "content-type": "text/event-stream" }) },
        { type: "data", data: bytes },
      ]).pipe(observeOn(asyncScheduler)), // the parser subscribes eagerly: emit after we subscribe
    ).pipe(toArray()),
  ).catch((e) => fail(`[@ag-ui/client parseSSEStream] ${e.message}`));
  if (!isDeepStrictEqual(clientEvents, raw)) {
    fail(`[@ag-ui/client parseSSEStream] client decoded ${clientEvents.length} events, strict framing found ${raw.length}`);
  }

  // Schema, event by event (@ag-ui/core/schemas EventSchemas: a zod discriminated union).
  const parsed = raw.map((ev, i) => {
    const r = EventSchemas.safeParse(ev);
    if (!r.success) {
      const typeIssue = r.error.issues.find((x) => x.path.length === 1 && x.path[0] === "type");
      if (typeIssue) fail(`event[${i}] (${ev.type}): [EventSchemas] unknown event type`);
      fail(`event[${i}] (${ev.type}): [EventSchemas] ${fmtIssues(r.error.issues)}`);
    }
    return r.data;
  });

  // Unknown keys: the schemas are loose, but the client's enforcement stage strips anything
  // they do not describe (with a warning) before the app sees the event. We treat that as an
  // error: the server must send only documented fields.
  const origWarn = console.warn;
  try {
    raw.forEach((ev, i) => {
      const warnings = [];
      console.warn = (...a) => warnings.push(a.join(" "));
      let err;
      enforceEvents()(of(ev)).subscribe({ error: (e) => (err = e) });
      console.warn = origWarn;
      if (err) fail(`event[${i}] (${ev.type}): [@ag-ui/client enforceEvents] ${err.message}`);
      if (warnings.length) {
        const m = warnings[0].match(/at '([^']*)'/);
        fail(`event[${i}] (${ev.type}): [@ag-ui/client enforceEvents] unknown field ${m ? m[1] : warnings[0]} (the client strips it)`);
      }
    });
  } finally {
    console.warn = origWarn;
  }

  // Order (@ag-ui/client verifyEvents). Synchronous, so `current` names the failing event.
  let current = -1;
  await lastValueFrom(
    from(parsed).pipe(
      tap(() => current++),
      verifyEvents(),
      toArray(),
    ),
  ).catch((e) => fail(`event[${current}] (${parsed[current]?.type}): [verifyEvents] ${e.message}`));

  // cogni contract: one run per response, ending in RUN_FINISHED or RUN_ERROR;
  // TOOL_CALL_RESULT for a tool call started in this run only after its TOOL_CALL_END (a run that
  // resumes from interrupts answers calls an earlier run showed, without starting them again);
  // one TOOL_CALL_RESULT per call id (verifyEvents lets an id be started again after its end).
  const started = new Set();
  const ended = new Set();
  const answered = new Set();
  const openText = new Set();
  parsed.forEach((ev, i) => {
    if (ev.type === "TOOL_CALL_RESULT") {
      // @ag-ui/client keeps each result as a tool message of its own: the next run's model
      // would get two answers to one call.
      if (answered.has(ev.toolCallId)) fail(`event[${i}] (TOOL_CALL_RESULT): [cogni] a second TOOL_CALL_RESULT for toolCallId '${ev.toolCallId}'`);
      answered.add(ev.toolCallId);
    }
    if (ev.type === "TEXT_MESSAGE_START") openText.add(ev.messageId);
    if (ev.type === "TEXT_MESSAGE_END") openText.delete(ev.messageId);
    if (ev.type === "RUN_STARTED" && i !== 0) fail(`event[${i}] (RUN_STARTED): [cogni] a response carries exactly one run; RUN_STARTED only as event[0]`);
    if (ev.type === "TOOL_CALL_START") started.add(ev.toolCallId);
    if (ev.type === "TOOL_CALL_END") ended.add(ev.toolCallId);
    if (ev.type === "TOOL_CALL_RESULT" && started.has(ev.toolCallId) && !ended.has(ev.toolCallId)) {
      fail(`event[${i}] (TOOL_CALL_RESULT): [cogni] toolCallId '${ev.toolCallId}' has no earlier TOOL_CALL_END`);
    }
  });
  const last = parsed[parsed.length - 1];
  if (last.type !== "RUN_FINISHED" && last.type !== "RUN_ERROR") {
    fail(`event[${parsed.length - 1}] (${last.type}): [cogni] stream ends without RUN_FINISHED or RUN_ERROR`);
  }
  // verifyEvents lets RUN_ERROR leave tool calls open; nothing more comes for them, so the
  // client's history would keep them unanswered.
  const open = [...started].filter((id) => !ended.has(id));
  if (open.length) fail(`event[${parsed.length - 1}] (${last.type}): [cogni] tool call(s) ${open.join(", ")} still open at the end of the run`);
  if (openText.size) fail(`event[${parsed.length - 1}] (${last.type}): [cogni] text message(s) ${[...openText].join(", ")} still open at the end of the run`);
  // A call this run showed gets its TOOL_CALL_RESULT, or waits in RUN_FINISHED's interrupts;
  // otherwise @ag-ui/client counts it as pending and a next run's model refuses the history.
  const interrupts = new Set((raw[raw.length - 1].outcome?.interrupts ?? []).map((x) => x.toolCallId ?? x.id));
  const unanswered = [...started].filter((id) => !answered.has(id) && !interrupts.has(id));
  if (unanswered.length) fail(`event[${parsed.length - 1}] (${last.type}): [cogni] tool call(s) ${unanswered.join(", ")} left without TOOL_CALL_RESULT or interrupt at the end of the run`);
}

// ---------------------------------------------------------------------------------------
// AI SDK UI message stream v1
const streamOf = (items) =>
  new ReadableStream({
    start(c) {
      for (const x of items) c.enqueue(x);
      c.close();
    },
  });

// Runs the AI SDK's client state machine (readUIMessageStream -> processUIMessageStream) over
// `chunks`. Returns { streamError, reported }: the first UIMessageStreamError (out-of-order
// chunk) or other processing error, and the texts of `error` chunks (reported, not a fault).
async function runUiStateMachine(chunks, message) {
  const reported = [];
  let streamError;
  const onError = (e) => {
    if (UIMessageStreamError.isInstance(e)) streamError ??= e;
    else if (e instanceof Error && e.constructor === Error && chunks.some((c) => c.type === "error" && c.errorText === e.message)) reported.push(e.message);
    else streamError ??= e;
  };
  let lastMessage;
  for await (const m of readUIMessageStream({ message, stream: streamOf(chunks), onError, terminateOnError: false })) lastMessage = m;
  return { streamError, reported, lastMessage };
}

// `continues`: the assistant message (with its calls' approvals answered) a resumed stream
// continues; `v5`: also check with ai@5.0.0. Returns the message the stream leaves.
async function validateAisdk(bytes, { continues, v5 = true } = {}) {
  const frames = parseFramesStrict(bytes);
  const doneAt = frames.findIndex((f) => f.data === "[DONE]");
  if (doneAt === -1) fail("[framing] missing the final `data: [DONE]` frame");
  if (doneAt !== frames.length - 1) fail(`[framing] frame after \`data: [DONE]\` (chunk[${doneAt}] is [DONE], ${frames.length - 1 - doneAt} more follow)`);
  const raw = frames.slice(0, -1).map((f, i) => parseJsonObject(f.data, `chunk[${i}]`));
  if (raw.length === 0) fail("[framing] no chunks before [DONE]");

  // Chunk schema through the SDK's own SSE+JSON parser (what DefaultChatTransport does:
  // parseJsonEventStream({ schema: uiMessageChunkSchema }) and throw on the first failure).
  const chunks = [];
  let i = 0;
  for await (const r of parseJsonEventStream({ stream: streamOf([bytes]), schema: uiMessageChunkSchema })) {
    if (!r.success) {
      const t = raw[i]?.type;
      const issues = r.error?.cause?.issues;
      if (issues?.[0]?.code === "invalid_union") {
        // pick the union member for this `type` (the one with no complaint about `type`)
        const member = issues[0].errors.find((errs) => !errs.some((x) => x.path.length === 1 && x.path[0] === "type"));
        if (!member) fail(`chunk[${i}] (${t}): [uiMessageChunkSchema] unknown chunk type`);
        fail(`chunk[${i}] (${t}): [uiMessageChunkSchema] ${fmtIssues(member)}`);
      }
      fail(`chunk[${i}] (${t}): [uiMessageChunkSchema] ${issues ? fmtIssues(issues) : r.error?.message}`);
    }
    chunks.push(r.value);
    i++;
  }
  if (chunks.length !== raw.length || chunks.some((c, k) => c.type !== raw[k].type)) {
    fail(`[ai parseJsonEventStream] SDK decoded ${chunks.length} chunks, strict framing found ${raw.length}`);
  }

  // The same bytes through ai@5.0.0's chat transport (what its useChat reads a response with).
  const v5Reader = new DefaultChatTransportV5().processResponseStream(streamOf([bytes])).getReader();
  for (let k = 0; v5; k++) {
    let next;
    try {
      next = await v5Reader.read();
    } catch (e) {
      // ai@5.0.0 validates with zod 4's standard schema: the cause is the list of issues.
      const issues = Array.isArray(e?.cause) ? e.cause : e?.cause?.issues;
      let detail = issues ? fmtIssues(issues) : e?.message;
      if (issues?.[0]?.code === "invalid_union") {
        const member = issues[0].errors.find((errs) => !errs.some((x) => x.path.length === 1 && x.path[0] === "type"));
        detail = member ? fmtIssues(member) : "unknown chunk type";
      }
      fail(`chunk[${k}] (${raw[k]?.type}): [ai@5.0.0 DefaultChatTransport] ${detail}`);
    }
    if (next.done) {
      if (k !== raw.length) fail(`[ai@5.0.0 DefaultChatTransport] decoded ${k} chunks, strict framing found ${raw.length}`);
      break;
    }
  }

  // Order: the SDK's client state machine. On failure, find the first failing chunk by
  // re-running on prefixes (errors are sticky, so failure is monotonic in the prefix length).
  const full = await runUiStateMachine(chunks, continues && structuredClone(continues));
  if (full.streamError) {
    let lo = 1;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((await runUiStateMachine(chunks.slice(0, mid), continues && structuredClone(continues))).streamError) hi = mid;
      else lo = mid + 1;
    }
    fail(`chunk[${lo - 1}] (${chunks[lo - 1].type}): [readUIMessageStream] ${full.streamError.message}`);
  }

  // cogni contract (see README): start first; steps bracketed and not nested; content only
  // inside a step; text/reasoning parts closed before finish-step; tool output only after
  // tool-input-available; one output per call id; last chunk is finish, error or abort; nothing
  // after finish. A resumed stream answers calls its message shows already, before its first
  // step (as ai 6's own streamText does), and names no new message.
  const openText = new Set();
  // Calls whose output (`tool-output-available`, `-error` or `-denied`) came, in this stream or
  // in the message it continues: the client takes a second one without a word, replacing the
  // first in the call's part.
  const settledStates = ["output-available", "output-error", "output-denied"];
  const earlierOutputs = new Set((continues?.parts ?? []).filter((p) => p.toolCallId && settledStates.includes(p.state)).map((p) => p.toolCallId));
  const outputs = new Set(earlierOutputs);
  const inputAvailable = new Set((continues?.parts ?? []).filter((p) => p.toolCallId).map((p) => p.toolCallId));
  let inStep = false;
  let errorInStep = false;
  chunks.forEach((c, k) => {
    const where = `chunk[${k}] (${c.type}): [cogni]`;
    if (k === 0 && c.type !== "start") fail(`${where} first chunk must be \`start\``);
    if (k > 0 && c.type === "start") fail(`${where} \`start\` only as the first chunk`);
    if (continues && c.type === "start" && c.messageId !== undefined && c.messageId !== continues.id) {
      fail(`${where} a resumed stream continues message ${continues.id}; \`start\` names ${c.messageId}`);
    }
    const answers = continues && (c.type === "tool-output-available" || c.type === "tool-output-error" || c.type === "tool-output-denied");
    if (k > 0 && chunks[k - 1].type === "finish") fail(`${where} nothing may follow \`finish\``);
    switch (c.type) {
      case "start-step":
        if (inStep) fail(`${where} start-step while a step is open`);
        inStep = true;
        errorInStep = false;
        break;
      case "finish-step":
        if (!inStep) fail(`${where} finish-step without start-step`);
        if (openText.size) fail(`${where} finish-step while text/reasoning part(s) ${[...openText].join(", ")} are open`);
        inStep = false;
        break;
      case "finish":
        if (inStep && !errorInStep) fail(`${where} finish while a step is open (send finish-step first)`);
        break;
      case "error":
        if (inStep) errorInStep = true;
        break;
      case "start":
      case "abort":
      case "message-metadata":
        break;
      default:
        if (!inStep && !(answers && inputAvailable.has(c.toolCallId))) fail(`${where} content chunk outside start-step … finish-step`);
        if (c.type === "text-start" || c.type === "reasoning-start") openText.add(c.id);
        if (c.type === "text-end" || c.type === "reasoning-end") openText.delete(c.id);
        if (c.type === "tool-input-available" && !("input" in raw[k])) fail(`${where} \`input\` missing (the schema lets it be undefined; always send it)`);
        if (c.type === "tool-output-available" && !("output" in raw[k])) fail(`${where} \`output\` missing (the schema lets it be undefined; always send it)`);
        if (c.type === "tool-input-available") inputAvailable.add(c.toolCallId);
        if (c.type === "tool-output-available" || c.type === "tool-output-error" || c.type === "tool-output-denied") {
          const held = earlierOutputs.has(c.toolCallId) ? " (the message this stream continues holds its output)" : "";
          if (outputs.has(c.toolCallId)) fail(`${where} a second output for toolCallId '${c.toolCallId}'${held}`);
          outputs.add(c.toolCallId);
        }
        if ((c.type === "tool-output-available" || c.type === "tool-output-error") && !inputAvailable.has(c.toolCallId)) {
          fail(`${where} toolCallId '${c.toolCallId}' has no earlier tool-input-available`);
        }
    }
  });
  const last = chunks[chunks.length - 1];
  // `abort` ends a cancelled run (the client went away or stopped it).
  if (last.type !== "finish" && last.type !== "error" && last.type !== "abort") {
    fail(`chunk[${chunks.length - 1}] (${last.type}): [cogni] stream must end with \`finish\`, \`error\` or \`abort\` before [DONE]`);
  }
  // Nothing follows the last chunk: a call left `input-streaming` stays so in the client for good
  // (and ai 5's convertToModelMessages refuses the message).
  const streaming = (full.lastMessage?.parts ?? []).filter((p) => p.toolCallId && p.state === "input-streaming");
  if (streaming.length) fail(`[cogni] call(s) ${streaming.map((p) => p.toolCallId).join(", ")} left input-streaming at the end of the stream`);
  // A call left waiting for the user, `input-available` (one an ai 5 client takes for its own to
  // answer) or `approval-requested`, is one only a paused run (which ends with `finish`) leaves
  // so; after `error` or `abort` it is answered.
  if (last.type !== "finish") {
    for (const state of ["input-available", "approval-requested"]) {
      const waiting = (full.lastMessage?.parts ?? []).filter((p) => p.toolCallId && p.state === state);
      if (waiting.length) fail(`[cogni] call(s) ${waiting.map((p) => p.toolCallId).join(", ")} left ${state} at the end of a failed or cancelled stream`);
    }
  }
  if (continues) {
    if (full.lastMessage?.id !== continues.id) fail(`[cogni] the resumed stream left message ${continues.id} for ${full.lastMessage?.id}`);
    // Every call the user answered ends settled. A resumed run may pause again, for a call it
    // asked about itself (`approval-requested`: `answered` turned every earlier request into
    // `approval-responded`), which waits for the user's next answer.
    const open = full.lastMessage.parts.filter(
      (p) => p.toolCallId && !settledStates.includes(p.state) && !(p.state === "approval-requested" && last.type === "finish"),
    );
    if (open.length) fail(`[cogni] call(s) ${open.map((p) => `${p.toolCallId} (${p.state})`).join(", ")} not settled by the resumed stream`);
  }
  return full.lastMessage;
}

// The message a paused stream left, with its approval requests answered as the resumed stream
// shows them: denied where it sends `tool-output-denied`, approved otherwise.
function answered(message, resumedBytes) {
  const denied = new Set(
    parseFramesStrict(resumedBytes)
      .filter((f) => f.data !== "[DONE]")
      .map((f) => JSON.parse(f.data))
      .filter((c) => c.type === "tool-output-denied")
      .map((c) => c.toolCallId),
  );
  const parts = message.parts.map((p) =>
    p.state === "approval-requested"
      ? { ...p, state: "approval-responded", approval: { ...p.approval, approved: !denied.has(p.toolCallId) } }
      : p,
  );
  return { ...message, parts };
}

// ---------------------------------------------------------------------------------------
async function main() {
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: node validate.mjs <dir>");
    process.exit(2);
  }
  let names;
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith(".agui.sse") || n.endsWith(".aisdk.sse")).sort();
  } catch (e) {
    console.error(`cannot read ${dir}: ${e.message}`);
    console.log("0 passed, 0 failed");
    process.exit(2);
  }
  let passed = 0;
  let failed = 0;
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      const bytes = new Uint8Array(await readFile(file));
      const v5 = !name.includes(".v6.");
      const base = /^(.+?)-resumed(?:-[^.]+)?(\..+)$/.exec(name);
      if (name.endsWith(".agui.sse")) await validateAgui(bytes);
      else if (base) {
        // Beside it, or in `bases/` beside it (where the self-test keeps the bases of its broken
        // samples, so that they are not counted themselves).
        const paused = [dir, path.join(dir, "bases")].map((d) => path.join(d, base[1] + base[2]));
        const before = await readFile(paused[0]).catch(() => readFile(paused[1])).catch(() => fail(`[cogni] ${base[1] + base[2]}, the stream this one resumes, is missing`));
        const message = await validateAisdk(new Uint8Array(before), { v5 }).catch((e) => fail(`[cogni] ${base[1] + base[2]}, the stream this one resumes, fails: ${e.message}`));
        await validateAisdk(bytes, { continues: answered(message, bytes), v5 });
      } else await validateAisdk(bytes, { v5 });
      console.log(`ok ${file}`);
      passed++;
    } catch (e) {
      const reason = e instanceof Failure ? e.message : `internal error: ${e?.stack ?? e}`;
      console.log(`FAIL ${file}: ${reason}`);
      failed++;
    }
  }
  if (names.length === 0) console.error(`no *.agui.sse or *.aisdk.sse files in ${dir}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed > 0 || names.length === 0 ? 1 : 0);
}

await main();
